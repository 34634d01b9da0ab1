"""Rows and judged targets of `bench/kmodule.sh many` (issue 30, the module half): 1, 1 000 and
10 000 tracepoints on gdbtrace.ko in a QEMU (TCG) guest, from tests/qemu/gdb_many_bench.sh's
MANYROW lines (one per gdb session; the log holds one `=== kernel SERIES ===` block per guest).

Per hit = traced - untraced ns per call at the same span (every call of a traced session is one hit
on a `nop`-first function of tests/programs/many_functions.py). Targets per kernel, on the median and
the worst round (ratios taken within each round): T tracepoints <= 1.1x one tracepoint's per hit;
every tracepoint on the module (no fallback); tstart <= 10 s (gdb's whole tstart, worst round, the
guest's user-mode network carrying gdb's 10 000 definitions included; the stub's QTStart alone is a
note); the stub's peak RSS beyond the trace buffer <= 64 MB (VmHWM from /proc/self/status read
through the stub, minus the buffer's size, as bench/_tracepoints.py takes it on the host). With the
guest's MANYFLOOR lines (tests/qemu/guest/gt_many_floor.sh: tracefs uprobes on the same functions),
rows `guest<kernel>-uprobe-tracefs` and, as bench/_tracepoints.py does on the host, the ratio
judged again with the kernel floor's own growth taken out.
  python3 _kmodule_many.py < kmodule-many.log
"""
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _bench as B  # noqa: E402

BUFFER = 128_000_000  # gdb_many_bench.sh's set trace-buffer-size


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def parse(lines):
    """{kernel: [session dict]} from the log's MANYROW lines."""
    by_kernel, kernel = {}, None
    for line in lines:
        m = re.match(r"^=== kernel (\S+) ===", line)
        if m:
            kernel = m.group(1)
        m = re.match(r"^kernel (\S+)$", line.strip())
        if m and kernel:
            by_kernel.setdefault(kernel, {})["release"] = m.group(1)
        for prefix, key in (("MANYROW", "sessions"), ("MANYFLOOR", "floor")):
            if line.startswith(prefix + " ") and kernel:
                s = dict(kv.split("=", 1) for kv in line.split()[1:])
                by_kernel.setdefault(kernel, {}).setdefault(key, []).append(s)
    return by_kernel


def per_hit(sessions):
    """{tps: {round: ns per hit}} and {tps: [traced sessions]}."""
    base, hits, traced = {}, {}, {}
    for s in sessions:
        if s["tps"] == "0" and num(s["ns_per_call"]) is not None:
            base[(s["round"], s["span"])] = num(s["ns_per_call"])
    for s in sessions:
        if s["tps"] == "0":
            continue
        t = int(s["tps"])
        traced.setdefault(t, []).append(s)
        b, x = base.get((s["round"], s["span"])), num(s["ns_per_call"])
        if b is not None and x is not None:
            hits.setdefault(t, {})[s["round"]] = x - b
    return hits, traced


def floor_rows(kernel, release, floor):
    """The guest's tracefs uprobe rows (gt_many_floor.sh): {tps: {round: ns per hit}}."""
    hits, _ = per_hit(floor)
    for t in sorted(hits):
        runs = [hits[t][r] for r in sorted(hits[t])]
        B.row(f"guest{kernel}-uprobe-tracefs", f"many_functions:{t}tp", statistics.median(runs),
              kernel=release, where="qemu-tcg-guest", runs_ns=",".join("%.0f" % r for r in runs))
    return hits


def beyond_floor(kernel, t, hits, one, floor):
    """(ours / floor) at T sites vs at one, per round (bench/README.md: the kernel's own growth
    with the number of uprobes taken out). The floor ran after the gdb sessions, in the same boot:
    round R of each is paired, or the floor's median where it has no round R (by default it has
    one round: gt_many_floor.sh says why)."""
    def fl(n, r):
        got = floor.get(n, {})
        return got.get(r, statistics.median(got.values()) if got else None)
    ratios = []
    for r in sorted(hits.get(t, {})):
        f_t, f_1 = fl(t, r), fl(1, r)
        if one.get(r) and f_t and f_1:
            ratios.append((hits[t][r] / f_t) / (one[r] / f_1))
    growth = [floor[t][r] / floor[1][r] for r in sorted(floor.get(t, {})) if floor.get(1, {}).get(r)]
    B.judge(bool(ratios) and statistics.median(ratios) <= 1.1 and max(ratios) <= 1.1,
            f"guest{kernel} gdbtrace-kmod {t} tracepoints, the kernel floor's growth taken out: "
            f"(ours/floor at {t}) / (ours/floor at 1) <= 1.1 (median and worst round): " +
            (", ".join("%.2f" % r for r in ratios) or "not measured") +
            "; the floor itself, %d sites vs 1: %s" % (t, ", ".join("%.2f" % g for g in growth) or "-"))


def judge_kernel(kernel, release, sessions, floor_lines):
    hits, traced = per_hit(sessions)
    one = hits.get(1, {})
    floor = floor_rows(kernel, release, floor_lines)
    for t in sorted(traced):
        runs = [hits.get(t, {}).get(s["round"]) for s in traced[t]]
        good = [r for r in runs if r is not None]
        worst_tstart = max((num(s["tstart_s"]) for s in traced[t] if num(s["tstart_s"])), default=None)
        hwm = max((num(s["vmhwm_kb"]) for s in traced[t] if num(s["vmhwm_kb"])), default=None)
        qts = [s["qtstart_s"] for s in traced[t] if s["qtstart_s"] != "-"]
        B.row(f"guest{kernel}-gdbtrace-kmod", f"many_functions:{t}tp",
              statistics.median(good) if good else None,
              reason=None if good else "no_measurement", kernel=release, where="qemu-tcg-guest",
              runs_ns=",".join("%.0f" % r if r is not None else "NA" for r in runs),
              calls=traced[t][0]["calls"], tstart_s=worst_tstart, qtstart_s=",".join(qts) or None,
              tstop_s=max((num(s["tstop_s"]) for s in traced[t] if num(s["tstop_s"])), default=None),
              on_module=",".join(s["on_module"] for s in traced[t]),
              drops=",".join(s["drops"] for s in traced[t]),
              rss_beyond_buffer_mb=None if hwm is None else round((hwm * 1024 - BUFFER) / 2**20, 1),
              vmhwm_mb=None if hwm is None else round(hwm / 1024, 1))
        if t == 1:
            continue
        ratios = [hits[t][r] / one[r] for r in sorted(hits.get(t, {})) if one.get(r)]
        missing = len(traced[t]) - len(ratios)
        text = (f"guest{kernel} gdbtrace-kmod {t} tracepoints per hit <= 1.1x one tracepoint's "
                f"(median and worst round): " +
                (", ".join("%.2f" % r for r in ratios) or "not measured") +
                (f" ({missing} round(s) without a figure)" if missing else ""))
        B.judge(bool(ratios) and not missing and statistics.median(ratios) <= 1.1 and
                max(ratios) <= 1.1, text)
        beyond_floor(kernel, t, hits, one, floor)
        fallback = [s["on_module"] for s in traced[t] if s["on_module"] != str(t)]
        B.judge(not fallback, f"guest{kernel} gdbtrace-kmod {t} tracepoints all on the module: "
                f"on_module={','.join(s['on_module'] for s in traced[t])}")
    big = max(traced, default=None)
    if big is None or big == 1:
        B.judge(False, f"guest{kernel} gdbtrace-kmod many tracepoints: no traced session")
        return
    ts = [num(s["tstart_s"]) for s in traced[big]]
    B.judge(bool(ts) and None not in ts and max(ts) <= 10,
            f"guest{kernel} gdbtrace-kmod {big} tracepoints tstart <= 10 s (worst round): "
            f"{','.join(s['tstart_s'] for s in traced[big])} s (stub's QTStart alone: "
            f"{','.join(s['qtstart_s'] for s in traced[big])} s)")
    hwm = [num(s["vmhwm_kb"]) for s in traced[big]]
    mb = None if None in hwm or not hwm else round((max(hwm) * 1024 - BUFFER) / 2**20, 1)
    B.judge(mb is not None and mb <= 64,
            f"guest{kernel} gdbtrace-kmod {big} tracepoints stub memory beyond the buffer <= 64 MB: "
            f"{mb} MB (peak RSS {None if mb is None else round(max(hwm) / 1024, 1)} MB, buffer "
            f"{BUFFER // 1_000_000} MB)")


def main():
    kernels = parse(sys.stdin)
    if not kernels:
        B.judge(False, "gdbtrace-kmod many tracepoints in the QEMU guest: no MANYROW line")
    for kernel, k in kernels.items():
        judge_kernel(kernel, k.get("release"), k.get("sessions", []), k.get("floor", []))
    return B.exit_code()


if __name__ == "__main__":
    sys.exit(main())
