"""Circular trace buffer for 10 minutes (bench/circular.sh; issue 29's flight-recorder target).

`set circular-trace-buffer on`, gdb's default trace buffer (5 MB), eBPF collector, `collect $rdi,
$rsi` on tests/programs/bench_timed_counter.c's c_site(tid, i), which THREADS threads (default 1)
call as fast as they can for SECONDS (600; smoke 4), then the program stops at c_done. The stub's
VmRSS is sampled every few seconds (/proc/PID/status) the whole time; at the end `tsave -r` is read
back with the plugin's reader.

Judged (exit 3 on a MISS):
- RSS flat: every sample after the warm-up (the first tenth of the run) within +-5 % of the first
  sample after it (at least 2 s);
- `tsave` exact: every frame readable, of tracepoint 1, and for every thread its frames' i values
  consecutive (no hole, no duplicate) and ending at its last call (calls - 1, printed by the
  tracee): the file holds the newest frames, and the frame count is what tstatus says the buffer
  holds.
"""
import os
import re
import sys
import threading
import time

import _bench as B


def script(prog, port, tfile):
    return "\n".join([
        f"file {prog}", f"target extended-remote :{port}", "break c_done",
        "monitor gdbtrace backend ebpf", "set circular-trace-buffer on",
        "trace *c_site", "actions", "collect $rdi, $rsi", "end", "tstart",
        "continue", "tstatus", "monitor gdbtrace status", f"tsave -r {tfile}", "kill"]) + "\n"


class RssSampler(threading.Thread):
    """VmRSS (kB) of PID every PERIOD seconds until stop(): [(seconds since start, kB)]."""

    def __init__(self, pid, period):
        super().__init__(daemon=True)
        self.pid, self.period, self.samples, self.halt = pid, period, [], threading.Event()
        self.t0 = time.monotonic()

    def run(self):
        while not self.halt.wait(self.period):
            try:
                kb = next(int(line.split()[1]) for line in open(f"/proc/{self.pid}/status")
                          if line.startswith("VmRSS:"))
            except (OSError, StopIteration):
                return
            self.samples.append((round(time.monotonic() - self.t0, 1), kb))

    def stop(self):
        self.halt.set()
        self.join()


def check_frames(frames, calls, number):
    """(ok, text): every frame readable and of tracepoint NUMBER; per thread consecutive i ending at
    calls - 1."""
    bad = sum(1 for f in frames if f is None or f.tp != number or f.regs is None)
    if bad:
        return False, f"{bad} frames unreadable or not of tracepoint {number}"
    by_thread = {}
    for f in frames:
        by_thread.setdefault(B.reg(f.regs, 5), []).append(B.reg(f.regs, 4))
    problems, summary = [], []
    for tid, n in calls.items():
        seq = by_thread.pop(tid, [])
        if not seq:
            problems.append(f"thread {tid}: no frame")
            continue
        holes = sum(1 for a, b in zip(seq, seq[1:]) if b != a + 1)
        summary.append(f"thread {tid}: i {seq[0]}..{seq[-1]} of {n} calls")
        if holes or seq[-1] != n - 1:
            problems.append(f"thread {tid}: {holes} breaks in {len(seq)} frames, last i {seq[-1]} of {n} calls")
    if by_thread:
        problems.append(f"frames of unknown threads {sorted(by_thread)}")
    if problems:
        return False, "; ".join(problems)
    return True, ", ".join(summary)


def main():
    prog = B.program("bench_timed_counter")
    threads = int(os.environ.get("CIRCULAR_THREADS", "1"))
    seconds = B.n(600, 4)
    period = B.n(5.0, 0.5)
    warmup = max(seconds / 10, 2.0)  # from the stub's start: gdb connects and tstarts in the first second
    tfile = os.path.join(B.WORK, "circular.tf")
    server = B.Server("gdbtrace", [prog, str(threads), str(seconds)])
    sampler = RssSampler(server.proc.pid, period)
    sampler.start()
    try:
        text = B.gdb(script(prog, server.port, tfile), timeout=seconds + 600)
    finally:
        sampler.stop()
        server.stop()
    text += "\n" + server.output()
    B.log(text[-3000:])
    calls = {int(t): int(n) for t, n in re.findall(r"^thread=(\d+) calls=(\d+)$", text, re.M)}
    held = re.search(r"Buffer contains (\d+) trace frames \(of (\d+) created", text) or \
        re.search(r"Collected (\d+) trace frames", text)
    number, status = next(iter(B.stub_status(text).items()), (None, {}))
    circular = "Trace buffer is circular" in text
    try:
        frames = B.tfile_frames(tfile) if os.path.exists(tfile) else []
    except ValueError as e:
        B.log(f"tsave file unreadable: {e}")
        frames = []
    after = [kb for t, kb in sampler.samples if t >= warmup]
    ref = after[0] if after else None
    spread = [round(100.0 * (kb - ref) / ref, 2) for kb in after] if ref else []
    rss_ok = bool(spread) and all(abs(s) <= 5.0 for s in spread)
    exact, why = check_frames(frames, calls, number) if calls and frames else (False, "no frames or no calls")
    held_n = int(held.group(1)) if held else None
    exact = exact and held_n == len(frames) and circular
    hits = sum(calls.values())
    B.row("gdbtrace-ebpf", f"circular:{seconds}s:collect_$rdi_$rsi", None if ref is None else ref,
          unit="kB_rss", column="circular", threads=threads, seconds=seconds, hits=hits,
          stub_hits=status.get("hits"), drops=status.get("drops"), frames_held=held_n,
          tsave_frames=len(frames), circular=circular, rss_ref_kb=ref,
          rss_min_kb=min(after) if after else None, rss_max_kb=max(after) if after else None,
          rss_max_dev_pct=max((abs(s) for s in spread), default=None), rss_samples=len(sampler.samples),
          rss_first_kb=sampler.samples[0][1] if sampler.samples else None,
          rss_series_kb=",".join(str(kb) for _t, kb in sampler.samples[::max(1, len(sampler.samples) // 40)]),
          load=open("/proc/loadavg").read().split()[0])
    B.judge(rss_ok, f"gdbtrace-ebpf circular buffer for {seconds} s ({hits:,} hits): stub VmRSS within +-5 % after "
                    f"the warm-up ({warmup:g} s): reference {ref} kB, {len(after)} samples, largest deviation "
                    f"{max((abs(s) for s in spread), default=None)} %")
    B.judge(exact, f"gdbtrace-ebpf circular buffer for {seconds} s: tsave exact (the newest frames, per thread "
                   f"consecutive to the last call, as many as the buffer held): {len(frames)} frames saved, "
                   f"{held_n} held, circular {circular}, drops {status.get('drops')}; {why}")
    return B.exit_code()


if __name__ == "__main__":
    sys.exit(main())
