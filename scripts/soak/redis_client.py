"""Loopback load for scripts/soak.sh: THREADS connections each send SET k v / GET k pairs to a
redis-server on 127.0.0.1:PORT for SECONDS (paced to RATE commands/s in total, 0 = as fast as it goes)
and check every answer. Prints one JSON line: commands sent, wrong answers, commands/s.
Bounded in time and count; talks to 127.0.0.1 only."""

import json
import socket
import sys
import threading
import time


def resp(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


class Conn:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""

    def line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("redis closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def bulk(self):
        head = self.line()
        if not head.startswith(b"$"):
            return head
        n = int(head[1:])
        while len(self.buf) < n + 2:
            self.buf += self.sock.recv(65536)
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data


def worker(port, tid, deadline, per_thread_rate, counts):
    conn = Conn(port)
    sent = wrong = 0
    start = time.monotonic()
    i = 0
    while time.monotonic() < deadline:
        key, value = f"soak:{tid}:{i % 1000}", f"v{tid}-{i}"
        conn.sock.sendall(resp("SET", key, value) + resp("GET", key))
        if conn.line() != b"+OK":
            wrong += 1
        if conn.bulk() != value.encode():
            wrong += 1
        sent += 2
        i += 1
        if per_thread_rate:
            ahead = sent / per_thread_rate - (time.monotonic() - start)
            if ahead > 0:
                time.sleep(ahead)
    counts[tid] = (sent, wrong)


def main():
    port, seconds, threads, rate = (int(a) for a in sys.argv[1:5])
    counts = {}
    deadline = time.monotonic() + seconds
    start = time.monotonic()
    pool = [threading.Thread(target=worker, args=(port, t, deadline, rate / threads if rate else 0, counts))
            for t in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    elapsed = time.monotonic() - start
    sent = sum(c[0] for c in counts.values())
    wrong = sum(c[1] for c in counts.values())
    print(json.dumps({"commands": sent, "wrong": wrong, "seconds": round(elapsed, 1),
                      "commands_per_s": round(sent / elapsed, 1), "threads_finished": len(counts)}))


if __name__ == "__main__":
    main()
