"""Long streamed traces (bench/stream.sh, issue 29): 1, 2 and 4 threads of tests/programs/bench_threads
hitting one tracepoint (`collect $regs`, eBPF collector, gdb's default trace-buffer-size) for >= 60 s
per round, streamed to a file (`monitor gdbtrace stream FILE` before `tstart`).

Per round and thread count, interleaved with the raw uprobe floor on the same site and thread count
(as bench/_threads.py interleaves its rows): hits/s and its ratio to the same round's floor, frames
in the file (counted by the plugin's tfile reader, gdb-plugin/gdbtrace_plugin: TfileSource and
FrameCounter, loss markers taken off), frames lost (hits - frames in the file), drops (the stub's
`monitor gdbtrace status`), the stub's CPU per frame (utime+stime of /proc/<stub>/stat from just
after `tstart` to just after `tstop`, over the frames) and its peak RSS (VmHWM). bench/_targets.py
judges them (stream-* targets) on the median and the worst round.

Every run (floor and streamed) lasts BENCH_STREAM_SECONDS (default 60; smoke 0.2): the tracee's
threads stop calling after that long (bench_threads' third argument), so a round is a minute whatever
the machine's speed that minute (a hit count calibrated at the start made 24 s rounds once the
machine's other load ended). BENCH_STREAM_ROUNDS (default 3) sets the rounds; the stream files go to
BENCH_TMP (default /var/tmp: a 4-thread minute is some 3-5 GB) and are removed once counted.
"""
import os
import re
import tempfile

import _bench as B
import _threads

THREADS = tuple(int(x) for x in os.environ.get("BENCH_STREAM_THREADS", "1,2,4").split(","))
SECONDS = float(os.environ.get("BENCH_STREAM_SECONDS", "0.2" if B.SMOKE else "60"))
CAP = 10**12  # calls per thread: the run ends at SECONDS
ROUNDS = 1 if B.SMOKE else int(os.environ.get("BENCH_STREAM_ROUNDS", "3"))
TICKS = os.sysconf("SC_CLK_TCK")
MECH = "gdbtrace-ebpf-stream"


def stub_cpu_s(path):
    """utime + stime (s) of a saved /proc/PID/stat (fields 14 and 15; comm may hold spaces)."""
    fields = open(path).read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def stub_wait_s(path):
    """Seconds the stub's threads waited on a run queue, summed from a saved list of
    /proc/PID/task/*/schedstat lines (run ns, wait ns, slices)."""
    return sum(int(line.split()[1]) for line in open(path) if line.strip()) / 1e9


def script(prog, server, tfile, stat0, stat1):
    pid = server.proc.pid
    sched = f"cat /proc/{pid}/task/*/schedstat"
    return "\n".join([
        f"file {prog}", f"target extended-remote :{server.port}", "break main", "continue", "break exit",
        "monitor gdbtrace backend ebpf", "trace *t_site", "actions", "collect $regs", "end",
        f"monitor gdbtrace stream {tfile}",
        "tstart", f"shell cat /proc/{pid}/stat > {stat0}; {sched} > {stat0}.sched", "continue", "tstop",
        f"shell cat /proc/{pid}/stat > {stat1}; grep VmHWM /proc/{pid}/status >> {stat1}; "
        f"{sched} > {stat1}.sched",
        "tstatus", "monitor gdbtrace status", "kill"]) + "\n"


def count_file(path):
    """(frames, loss markers) of a streamed tfile, read by the plugin's reader: every frame header
    walked (FrameCounter), the markers the stub wrote (status field gdbtrace_drop_markers) taken off."""
    src = B.TfileSource(path)
    try:
        counter = B.tframes.FrameCounter()
        for _off, chunk in src.iter_stream(0):
            counter.feed(chunk)
        m = re.search(r"gdbtrace_drop_markers:([0-9a-f]+)", src.status_body)
        markers = int(m.group(1), 16) if m else 0
        return counter.frames - markers, markers
    finally:
        src.close()


def argv(prog, t):
    return [prog, str(t), str(CAP), str(SECONDS)]


def session(prog, t, base, floor_rows, emit=True):
    """One streamed run; FLOOR_ROWS[-1] is the same round's floor row (run just before)."""
    workload = f"t_site:{t}thr:$regs:stream"
    tmp = tempfile.mkdtemp(prefix="gdbtrace-bench-stream.", dir=os.environ.get("BENCH_TMP", "/var/tmp"))
    tfile, stat0, stat1 = (os.path.join(tmp, x) for x in ("run.tf", "stat0", "stat1"))
    scheds = (stat0 + ".sched", stat1 + ".sched")
    try:
        text = B.gdb_session("gdbtrace", argv(prog, t),
                             lambda server: script(prog, server, tfile, stat0, stat1), f"stream-{t}.log")
        traced = _threads.parse(text)
        st = next(iter(B.stub_status(text).values()), {})
        if not traced or st.get("backend") != "ebpf" or not os.path.exists(stat1):
            return B.row(MECH, workload, None, emit=emit, column=f"stream{t}", threads=t,
                         reason=B.first_error(text) or f"backend_{st.get('backend')}")
        try:
            in_file, markers = count_file(tfile)
            size = os.path.getsize(tfile)
        except (OSError, ValueError, B.StubError) as e:
            return B.row(MECH, workload, None, emit=emit, column=f"stream{t}", threads=t,
                         reason=f"stream_unreadable:{e}".replace(" ", "_")[:100])
        cpu = stub_cpu_s(stat1) - stub_cpu_s(stat0)
        wait = stub_wait_s(scheds[1]) - stub_wait_s(scheds[0])
        hwm = int(re.search(r"VmHWM:\s+(\d+)", open(stat1).read()).group(1))
    finally:
        for f in (tfile, stat0, stat1) + scheds:
            if os.path.exists(f):
                os.unlink(f)
        os.rmdir(tmp)
    hits = traced["hits"]
    floor = floor_rows[-1] if floor_rows else {}
    ratio = traced["hits_per_s"] / floor["hits_per_s"] if floor.get("hits_per_s") else None
    return B.row(MECH, workload, per_hit(traced, t, base), emit=emit, column=f"stream{t}",
                 threads=t, hits=hits, seconds=round(traced["wall_ns"] / 1e9, 1),
                 hits_per_s=round(traced["hits_per_s"]), floor_ratio=None if ratio is None else round(ratio, 3),
                 frames_in_file=in_file, markers=markers, lost=hits - in_file, drops=st.get("drops"),
                 stub_frames=st.get("frames"), after_stop=st.get("after_stop"), file_mb=round(size / 1e6),
                 cpu_us_per_frame=round(cpu * 1e6 / in_file, 3) if in_file else None,
                 stub_cpu_s=round(cpu, 2), stub_wait_s=round(wait, 2), peak_rss_mb=round(hwm / 1024, 1),
                 direct="written directly (O_DIRECT)" in text,
                 disk_wait_ms=int(w.group(1)) if (w := re.search(r"waited up to (\d+) ms for the disk", text)) else 0,
                 write_ms=int(w.group(1)) if (w := re.search(r"a write took up to (\d+) ms", text)) else 0,
                 drain_rt="at real-time priority" in text)


def per_hit(run, t, base):
    """ns a hit adds to the latency one thread sees: run's ns per call - untraced ns per call."""
    return run["wall_ns"] / (run["hits"] / t) - base[t]


def floor(prog, t, base, floor_rows, emit=True):
    """The raw floor (a tracefs uprobe, no fetch args, no reader) on the same site for SECONDS."""
    out, hits = B.with_uprobes([(prog, "t_site")], argv(prog, t))
    run = _threads.parse(out or "")
    if not run:
        r = B.row("uprobe-tracefs", f"t_site:{t}thr", None, emit=emit, column=f"stream{t}", reason=hits)
    else:
        r = B.row("uprobe-tracefs", f"t_site:{t}thr", per_hit(run, t, base), emit=emit, column=f"stream{t}",
                  threads=t, hits=run["hits"], probe_hits=hits.get("t_site"),
                  seconds=round(run["wall_ns"] / 1e9, 1), hits_per_s=round(run["hits_per_s"]))
    floor_rows.append(r)
    return r


def main():
    prog = B.program("bench_threads")
    n_base = B.n(200000, 300)  # the untraced ns per call, subtracted for ns_per_hit
    base = {t: B.untraced([prog, str(t), str(n_base)], parse=_threads.parse)["wall_ns"] / n_base
            for t in THREADS}
    runs, floors = {}, {t: [] for t in THREADS}
    for t in THREADS:  # per round: the floor, then the streamed run, for each thread count
        runs[("uprobe-tracefs", t)] = lambda emit, walk, t=t: floor(prog, t, base, floors[t], emit)
        runs[(MECH, t)] = lambda emit, walk, t=t: session(prog, t, base, floors[t], emit)
    _threads.interleaved(runs, ROUNDS, listed=("floor_ratio", "lost", "drops", "cpu_us_per_frame",
                                               "peak_rss_mb", "seconds", "disk_wait_ms",
                                               "write_ms"))


if __name__ == "__main__":
    main()
