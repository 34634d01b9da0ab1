"""Buffer and data path out (bench/dataout.sh), gdbtrace-server beside stock gdbserver:

  fill:$regs        frames per second sustained until a 64 MB (traps: 2 MB) buffer fills: frames
                    collected / (tstatus stop time - start time), with `collect $regs` on w_regs
  memory:$regs      the stub's peak RSS (VmHWM) after that fill, its growth over the run, and bytes
                    of trace buffer per frame (tstatus used bytes / frames)
  tfind-tdump       gdb walks every frame of a ~3000-frame buffer (`tfind N` + `tdump`), timed in gdb
  tsave-1M          `tsave` of a buffer holding 1 M frames (`collect sink`), timed in gdb
Rows carry unit= (ns_per_frame, bytes_per_frame) so bench/run.sh keeps them out of the per-hit ratios.
"""
import os
import re

import _bench as B

WALK_PY = """python
import gdb, time
t0 = time.monotonic(); c0 = time.process_time()
count = errors = 0
for i in range({frames}):
    try:
        gdb.execute("tfind %d" % i, to_string=True)
        gdb.execute("tdump", to_string=True)
        count += 1
    except gdb.error:
        errors += 1
print("WALK frames=%d seconds=%.3f cpu=%.3f errors=%d" % (count, time.monotonic() - t0,
                                                       time.process_time() - c0, errors))
end"""

# First and last frame's $trace_timestamp (microseconds, gdbserver's builtin TSV): the collection rate
# itself, free of the latency with which the stub notices the full buffer.
STAMPS_PY = """python
import gdb, re
m = re.search(r"Collected (\\d+) trace frames", gdb.execute("tstatus", to_string=True))
if m and int(m.group(1)) > 1:
    last = int(m.group(1)) - 1
    gdb.execute("tfind 0", to_string=True)
    t0 = int(gdb.parse_and_eval("$trace_timestamp"))
    gdb.execute("tfind %d" % last, to_string=True)
    t1 = int(gdb.parse_and_eval("$trace_timestamp"))
    gdb.execute("tfind none", to_string=True)
    print("STAMPS first=%d last=%d frames=%d" % (t0, t1, last + 1))
end"""

TSAVE_PY = """python
import gdb, os, time
t0 = time.monotonic(); c0 = time.process_time()
gdb.execute("tsave {path}", to_string=True)
print("TSAVE seconds=%.3f cpu=%.3f bytes=%d" % (time.monotonic() - t0, time.process_time() - c0,
                                                os.path.getsize("{path}")))
end"""


def script(prog, port, site, collect, buffer_size, backend, trace_cmd, pid, after):
    lines = [f"set trace-buffer-size {buffer_size}", f"file {prog}", f"target extended-remote :{port}",
             "break bench_ready", "continue", "break exit",
             f"shell grep -E 'VmHWM' /proc/{pid}/status | sed 's/^/START /'",
             # The stub's own CPU (utime + stime, clock ticks) around the run.
             f"shell awk '{{print \"STARTCPU\", $14 + $15}}' /proc/{pid}/stat"]
    if backend:
        lines.append(f"monitor gdbtrace backend {backend}")
    lines += [f"{trace_cmd} {site}", "actions", f"collect {collect}", "end", "tstart", "continue",
              "tstop", "tstatus"]
    if backend:
        lines.append("monitor gdbtrace status")
    lines += [f"shell grep -E 'VmHWM' /proc/{pid}/status | sed 's/^/END /'",
              f"shell awk '{{print \"ENDCPU\", $14 + $15}}' /proc/{pid}/stat",
              # Where the stub's resident memory is (anonymous heap vs the mmap'ed BPF ring, ...).
              "shell awk '/^[0-9a-f]+-/ { name = ($6 == \"\") ? \"anon\" : $6 } /^Rss:/ { rss[name] += $2 } "
              f"END {{ for (n in rss) if (rss[n] > 1024) print \"SMAPS\", rss[n], n }}' /proc/{pid}/smaps",
              *after, "kill"]
    return "\n".join(lines) + "\n"


def run(mech, kind, prog, args, site, collect, buffer_size, backend=None, trace_cmd="trace", wrapper=(),
        after=()):
    return B.gdb_session(kind, [prog, *args], lambda server: script(
        prog, server.port, site, collect, buffer_size, backend, trace_cmd, server.proc.pid, after),
        f"{mech}-{site}-{len(after)}.log", wrapper)


def tstatus_times(text):
    """(start, stop) seconds from gdb's tstatus, or None."""
    m = re.search(r"Trace started at ([0-9.]+) secs, stopped ([0-9.]+) secs later", text)
    return (float(m.group(1)), float(m.group(2))) if m else None


def buffer_used(text):
    m = re.search(r"Trace buffer has (\d+) bytes of (\d+) bytes free", text)
    return int(m.group(2)) - int(m.group(1)) if m else None


def fill(mech, kind, prog, n, buffer_size, **kw):
    text = run(mech, kind, prog, [str(n), "w_regs"], kw.pop("site", "*w_regs"), "$regs, $trace_timestamp",
               buffer_size, after=[STAMPS_PY], **kw)
    frames = B.frames_collected(text)
    times = tstatus_times(text)
    full = "buffer was full" in text or "Trace stopped because the buffer was full" in text
    start = re.search(r"START VmHWM:\s+(\d+)", text)
    end = re.search(r"END VmHWM:\s+(\d+)", text)
    used = buffer_used(text)
    if not frames or not times or times[1] <= 0:
        B.row(mech, "fill:$regs", None, unit="ns_per_frame", column="fill",
              reason=B.first_error(text) or ("no_frames" if not frames else "no_tstatus_times"))
    else:
        stamps = re.search(r"STAMPS first=(\d+) last=(\d+) frames=(\d+)", text)
        span_us = int(stamps.group(2)) - int(stamps.group(1)) if stamps else 0
        # ns/frame from the frames' own timestamps when they span time, else from tstatus.
        ns = span_us * 1e3 / (frames - 1) if span_us > 0 else times[1] * 1e9 / frames
        B.row(mech, "fill:$regs", ns, unit="ns_per_frame", column="fill",
              frames_per_s=round(1e9 / ns), frames=frames, stamp_span_s=span_us / 1e6 if stamps else None,
              tstatus_seconds=times[1], tstatus_frames_per_s=round(frames / times[1]),
              buffer_bytes=buffer_size, stopped_full="yes" if full else "no")
    smaps = sorted(((int(kb), name) for kb, name in re.findall(r"^SMAPS (\d+) (\S+)", text, re.M)),
                   reverse=True)
    if end:
        B.row(mech, "memory:$regs", used / frames if used and frames else None, unit="bytes_per_frame",
              column="memory", vmhwm_kb=int(end.group(1)),
              vmhwm_growth_kb=int(end.group(1)) - int(start.group(1)) if start else None,
              frames=frames, buffer_used=used,
              rss_bytes_per_frame=round((int(end.group(1)) - int(start.group(1))) * 1024 / frames)
              if start and frames else None,
              rss_kb_by_mapping=",".join(f"{os.path.basename(name)}:{kb}" for kb, name in smaps[:3]) or None)


def drain(mech, kind, prog, n, buffer_size, **kw):
    """`collect $regs` on N hits into a buffer with room for all: frames lost on the way (the kernel
    rings' drops) and the stub's own CPU per frame (draining, merging, appending)."""
    text = run(mech, kind, prog, [str(n), "w_regs"], "*w_regs", "$regs", buffer_size, **kw)
    frames = B.frames_collected(text)
    st = next(iter(B.stub_status(text).values()), {})
    cpu0, cpu1 = (re.search(rf"^{k}CPU (\d+)", text, re.M) for k in ("START", "END"))
    if not frames or not cpu0 or not cpu1:
        return B.row(mech, f"drain:$regs:{n}hits", None, unit="ns_per_frame", column="drain",
                     reason=B.first_error(text) or "no_frames")
    ticks = int(cpu1.group(1)) - int(cpu0.group(1))
    B.row(mech, f"drain:$regs:{n}hits", ticks * 1e9 / os.sysconf("SC_CLK_TCK") / frames,
          unit="ns_per_frame", column="drain", what="stub_cpu_per_frame", frames=frames,
          hits=st.get("hits"), drops=st.get("drops"), stub_cpu_s=ticks / os.sysconf("SC_CLK_TCK"),
          complete="yes" if frames == n else "no", buffer_bytes=buffer_size)


def walk(mech, kind, prog, n, **kw):
    after = [WALK_PY.format(frames=n)]
    text = run(mech, kind, prog, [str(n), "w_struct"], kw.pop("site", "*w_struct"), "$regs, *p", 200000000,
               after=after, **kw)
    m = re.search(r"WALK frames=(\d+) seconds=([0-9.]+) cpu=([0-9.]+) errors=(\d+)", text)
    if not m or int(m.group(1)) == 0:
        return B.row(mech, f"tfind-tdump:{n}frames", None, unit="ns_per_frame", column="walk",
                     reason=B.first_error(text) or "walk_failed")
    frames, secs = int(m.group(1)), float(m.group(2))
    B.row(mech, f"tfind-tdump:{frames}frames", secs * 1e9 / frames, unit="ns_per_frame", column="walk",
          seconds=secs, gdb_cpu_seconds=float(m.group(3)), frames=frames, tdump_errors=int(m.group(4)),
          collected=B.frames_collected(text))


def tsave(mech, kind, prog, n, **kw):
    path = f"{B.WORK}/{mech}-1M.tf"
    text = run(mech, kind, prog, [str(n), "w_args"], kw.pop("site", "*w_args"), "sink", 200000000,
               after=[TSAVE_PY.format(path=path)], **kw)
    frames = B.frames_collected(text)
    m = re.search(r"TSAVE seconds=([0-9.]+) cpu=([0-9.]+) bytes=(\d+)", text)
    if not m or not frames:
        return B.row(mech, f"tsave:{n}frames", None, unit="ns_per_frame", column="tsave",
                     reason=B.first_error(text) or "tsave_failed")
    secs = float(m.group(1))
    B.row(mech, f"tsave:{frames}frames", secs * 1e9 / frames, unit="ns_per_frame", column="tsave",
          seconds=secs, gdb_cpu_seconds=float(m.group(2)), file_bytes=int(m.group(3)), frames=frames,
          complete="yes" if frames == n else "no")


def main():
    prog = B.program("bench_work")
    nopie = B.program("bench_work-nopie")
    ipa = {"trace_cmd": "ftrace", "wrapper": ("--wrapper", "env", f"LD_PRELOAD={B.IPA}", "--")}
    big, small = B.n(64000000, 1000000), B.n(2000000, 200000)
    # n: enough hits to fill the buffer (~830 bytes per $regs frame).
    fill("gdbtrace-ebpf", "gdbtrace", prog, B.n(120000, 2000), big, backend="ebpf")
    drain("gdbtrace-ebpf", "gdbtrace", prog, B.n(1000000, 2000), B.n(900000000, 4000000), backend="ebpf")
    if __import__("os").environ.get("BENCH_QUICK") == "1":  # the eBPF fill (and its RSS) only
        return
    fill("gdbserver-ftrace-nopie", "gdbserver", nopie, B.n(120000, 2000), big, site="*w_regs+1", **ipa)
    fill("gdbtrace-ptrace", "gdbtrace", prog, B.n(6000, 400), small, backend="ptrace")
    fill("gdbserver-trace", "gdbserver", prog, B.n(6000, 600), small)

    n_walk = B.n(3000, 100)
    walk("gdbtrace-ebpf", "gdbtrace", prog, n_walk, backend="ebpf")
    walk("gdbserver-trace", "gdbserver", prog, n_walk)

    n_save = B.n(1000000, 5000)
    tsave("gdbtrace-ebpf", "gdbtrace", prog, n_save, backend="ebpf")
    tsave("gdbserver-ftrace-nopie", "gdbserver", nopie, n_save, site="*w_args+1", **ipa)


if __name__ == "__main__":
    main()
