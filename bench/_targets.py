"""The project's bench targets, judged by bench/_report.py: one table (TARGETS) of target name, the
mechanisms (rows) it applies to, the rule that judges it, and its limit.

A rule returns the lines it judged: (result, text) with result PASS, MISS or NA (nothing measured:
the run fails, as a MISS does). There is no "informational" result: a target the kernel under test
cannot meet (e.g. no optimized nop5 uprobes before 6.18) is a MISS whose text says why, so no row
hides a miss. A rule returns no
line when its rows are absent from this run (e.g. the module's rows without bench/kmodule.sh). Ratio
targets are met only when the median and the worst run (or round) both meet them, and a row with a
failed run or round fails its target unless the row says why the round does not count.
"""
import re
import statistics

PASS, MISS, NA = "PASS", "MISS", "NA"


class Rows:
    """The report's rows, with the lookups the rules share."""

    def __init__(self, rows, reference):
        self.rows, self.reference = rows, reference

    def column(self, mech, column, script=None):
        for r in self.rows:
            if r["mechanism"] == mech and r.get("column") == column and (script is None or r["script"] == script):
                return r
        return None

    def has(self, mech, columns):
        """Whether MECH has a row for any of COLUMNS."""
        return any(r["mechanism"] == mech and r.get("column") in columns for r in self.rows)

    def frame_counts(self, m):
        """(torn, drops) over every thread row of M."""
        torn = sum(int(r.get("torn") or 0) for r in self.rows if r["mechanism"] == m and "torn" in r)
        drops = sum(int(r.get("drops") or 0) for r in self.rows if r["mechanism"] == m and "threads" in r)
        return torn, drops


def fmt(v, digits=0):
    return "NA" if v is None else f"{v:,.{digits}f}"


def per_round(row, key):
    """ROW's per-round list KEY (bench/_threads.py: one entry per round, NA for a failed one) as
    floats, None where the round failed; index = round id."""
    return [None if x == "NA" else float(x) for x in str((row or {}).get(key) or "").split(",") if x]


def failed_rounds(*rows):
    """Failed rounds or runs of ROWS that count against a target (a row may say why they do not:
    failed_rounds_why=)."""
    return sum(int(r.get("failed_rounds") or r.get("failed_runs") or 0) for r in rows
               if r and not r.get("failed_rounds_why"))


def median_and_worst(values, limit, at_least):
    """(met, median, worst) of VALUES against LIMIT: both the median and the worst must meet it."""
    med = statistics.median(values)
    worst = min(values) if at_least else max(values)
    ok = (med >= limit and worst >= limit) if at_least else (med <= limit and worst <= limit)
    return ok, med, worst


# --- rules ---------------------------------------------------------------------------------------

def floor_ratio(column):
    """M's COLUMN <= LIMIT x the raw uprobe floor on the same instruction."""
    def rule(t, m, limit):
        r = t.column(m, column)
        if not r and not t.has(m, set(EBPF_FLOOR) | set(MODULE_FLOOR)):
            return []  # none of M's per-hit columns in this run (--only without their script)
        if not r or r["ns_per_hit"] is None or "x_uprobe_floor" not in r:
            return [(NA, f"{m} {column} <= {limit}x uprobe floor: no measurement "
                         f"({(r or {}).get('reason', 'no row')})")]
        failed = failed_rounds(r)
        if r.get("ratio_median") is not None:
            # Interleaved runs (bench/_workloads.py): each run's own ratio to the floor in its process.
            med, lo, hi = (float(r[k]) for k in ("ratio_median", "ratio_min", "ratio_max"))
            return [(PASS if med <= limit and hi <= limit and not failed else MISS,
                     f"{m} {r['workload']} <= {limit}x uprobe floor (median and worst run): median "
                     f"{med:.2f}x, runs {lo:.2f}-{hi:.2f}x over {r.get('ratio_runs')} interleaved runs, "
                     f"{failed} failed ({fmt(r['ns_per_hit'])} ns/hit)")]
        return [(PASS if r["x_uprobe_floor"] <= limit and not failed else MISS,
                 f"{m} {r['workload']} <= {limit}x uprobe floor: {fmt(r['ns_per_hit'])} ns = "
                 f"{r['x_uprobe_floor']}x")]
    return rule


def kernel_at_least(release, major, minor):
    m = re.match(r"(\d+)\.(\d+)", release or "")
    return bool(m) and (int(m.group(1)), int(m.group(2))) >= (major, minor)


def nop5_optimized(t, m, limit):
    """Linux 6.18+ turns a uprobe on a 5-byte nop into a call to a uprobe trampoline: the raw floor
    there must cost < LIMIT x the trapping 1-byte nop's. Before 6.18 there is no such optimization:
    a MISS that says so (the target is the users', whatever kernel they run)."""
    f1, f5 = t.column("uprobe-tracefs", "regs", "workloads"), t.column("uprobe-tracefs", "nop5")
    if not (f1 and f5 and f1["ns_per_hit"] and f5["ns_per_hit"] is not None):
        return []
    optimized = f5["ns_per_hit"] < limit * f1["ns_per_hit"]
    expected = kernel_at_least(f5.get("kernel"), 6, 18)
    kernel = f5.get("kernel", "not recorded")
    why = "" if optimized else ("; Linux 6.18+ optimizes it" if expected else "; Linux < 6.18 has no nop5 optimization")
    text = (f"nop5 site: raw floor {fmt(f5['ns_per_hit'])} ns vs {fmt(f1['ns_per_hit'])} ns on the 1-byte nop "
            f"({'optimized: no trap' if optimized else 'not optimized'}; kernel {kernel}{why})")
    return [(PASS if optimized else MISS, text)]


def cheaper_than_trap(t, m, limit):
    """M >= LIMIT x cheaper than a trap tracepoint: stock gdbserver's on the host; in a guest
    (no gdbserver there) the ptrace collector's, gdb-driven, in the same guest."""
    r = t.column(m, "regs")
    if not r:
        return []  # no regs row of M in this run: the floor target on regs reports that
    if r.get("where") == "qemu-tcg-guest":
        via_gdb = t.column(m + "-gdb", "stepsite")
        ptrace = t.column(m.replace("gdbtrace-kmod", "gdbtrace-ptrace-gdb"), "stepsite")
        if not (via_gdb and via_gdb.get("speedup_vs_guest_ptrace")):
            return [(NA, f"{m} >= {limit}x cheaper than a trap tracepoint: no gdb-driven guest rows")]
        return [(PASS if via_gdb["speedup_vs_guest_ptrace"] >= limit else MISS,
                 f"{m} >= {limit}x cheaper than a trap tracepoint (stock gdbserver is not in the guest; "
                 f"the ptrace collector, a trap like gdbserver's, in the same guest, gdb-driven, collect "
                 f"$regs): {fmt(via_gdb['ns_per_hit'])} vs {fmt(ptrace['ns_per_hit']) if ptrace else 'NA'} "
                 f"ns = {via_gdb['speedup_vs_guest_ptrace']}x")]
    if not any(x["mechanism"] == "gdbserver-trace" for x in t.rows):
        return []  # stock gdbserver was not run (--only, BENCH_QUICK); an NA row of it is an NA here
    if not r.get("speedup_vs_gdbserver_trace"):
        return [(NA, f"{m} >= {limit}x cheaper than gdbserver trap tracepoint: no measurement")]
    slow = t.reference("gdbserver-trace", r)
    return [(PASS if r["speedup_vs_gdbserver_trace"] >= limit else MISS,
             f"{m} >= {limit}x cheaper than stock gdbserver trap tracepoint on the emulated site: "
             f"{fmt(r['ns_per_hit'])} vs {fmt(slow['ns_per_hit'])} ns = {r['speedup_vs_gdbserver_trace']}x")]


def step_vs_emulated(t, m, limit):
    """The single-step site <= LIMIT x the emulated site. Where the eBPF program cannot write
    pt_regs (kernel < 6.19) the kernel single-steps the instruction: a MISS that says so."""
    emu, step = t.column(m, "regs"), t.column(m + "-emulating", "stepsite") or t.column(m, "stepsite")
    if not (emu and step and emu["ns_per_hit"] and step["ns_per_hit"] is not None):
        return []
    ratio = step["ns_per_hit"] / emu["ns_per_hit"]
    single_stepped = "ebpf" in m and not step["mechanism"].endswith("-emulating")
    return [(PASS if ratio <= limit else MISS,
             f"{step['mechanism']} single-step site <= {limit:g}x emulated site: {fmt(step['ns_per_hit'])} vs "
             f"{fmt(emu['ns_per_hit'])} ns = {ratio:.2f}x"
             + (" (eBPF cannot write pt_regs on this kernel: the kernel single-steps)"
                if single_stepped else ""))]


def guest_ebpf_step(t, m, limit):
    """In a guest beside the module: the eBPF collector's rip-load site <= LIMIT x the nop site the
    kernel emulates itself. From Linux 6.19 (the newest Debian kernel) the program emulates the
    load; before, the kernel single-steps it: a MISS that says so."""
    r = t.column(m, "regs")
    if not (r and r.get("where") == "qemu-tcg-guest"):
        return []
    g = m.replace("gdbtrace-kmod", "gdbtrace-ebpf-gdb")
    nop, load = t.column(g, "regs"), t.column(g, "stepsite")
    if not (nop and load and nop["ns_per_hit"] and load["ns_per_hit"] is not None):
        return []
    ratio = load["ns_per_hit"] / nop["ns_per_hit"]
    writes = nop.get("kernel") == "newest"
    how = ("(BPF writes registers: the program emulates)" if writes
           else "(kernel < 6.19: BPF cannot write registers, the kernel single-steps)")
    return [(PASS if ratio <= limit else MISS,
             f"{g} single-step site <= {limit}x the kernel-emulated site {how}: "
             f"{fmt(load['ns_per_hit'])} vs {fmt(nop['ns_per_hit'])} ns = {ratio:.2f}x")]


def hits_per_s(row):
    return float(row["hits_per_s"]) if row and row.get("hits_per_s") else None


def scaling(row, one):
    """ROW's scaling over one thread: its paired scaling (bench_threads' PAIRED: each thread alone
    and all together in the same run), else its throughput over ONE's."""
    if row and row.get("paired_scaling"):
        return float(row["paired_scaling"])
    return hits_per_s(row) / hits_per_s(one) if hits_per_s(row) and hits_per_s(one) else None


def four_threads(t4, t1):
    s = scaling(t4, t1)
    return f", 4 threads {s:.2f}x" if s else ""


def floor_thread_scaling(t, m, limit):
    """M's 2-thread scaling >= LIMIT x the raw uprobe floor's own in the same run (an absolute
    2-thread/1-thread bound would judge the machine: the floor itself scaled 1.54-1.99x between
    rounds of one run). With interleaved rounds each round's scaling is divided by the floor's in the
    same round (paired by round id) and both the median and the worst round must meet it, with zero
    torn frames and zero drops in every round of every thread count (a drop is a frame lost). The
    -sustained variant, which drains during the run, is judged alike (issue 29: it was informational,
    so the rows that drain were the ones never judged)."""
    t1, t2, t4 = t.column(m, "threads1"), t.column(m, "threads2"), t.column(m, "threads4")
    f1, f2 = t.column("uprobe-tracefs", "threads1"), t.column("uprobe-tracefs", "threads2")
    if not (hits_per_s(t1) and hits_per_s(t2)):
        if t1 or t2:
            return [(NA, f"{m} 2-thread scaling >= {limit}x the raw floor's: no measurement "
                         f"({(t2 or t1).get('reason', 'no throughput')})")]
        return []
    if not (hits_per_s(f1) and hits_per_s(f2)):
        return [(NA, f"{m} 2-thread scaling >= {limit}x the raw floor's: no floor measurement")]
    ratio, floor = scaling(t2, t1), scaling(f2, f1)
    # Rows that carry the floor in their own runs (bench_threads' REF: t_ref's scaling in the same
    # cycles) are judged on that; otherwise each round's scaling over the floor row's in that round.
    per = [x for x in per_round(t2, "runs_vs_ref") if x] or [
        a / b for a, b in zip(per_round(t2, "runs_scaling"), per_round(f2, "runs_scaling")) if a and b]
    how = "paired rounds"
    if t2.get("ref_scaling"):
        floor, how = float(t2["ref_scaling"]), "rounds, the floor in the same runs"
    ok, med, worst = median_and_worst(per or [ratio / floor], limit, at_least=True)
    torn, _ = t.frame_counts(m)
    drops = round_drops(t1, t2, t4)
    failed = failed_rounds(t1, t2, f1, f2)
    text = (f"{m} 2-thread scaling >= {limit}x the raw floor's own 2-thread scaling (same run; median and "
            f"worst round), 0 torn, 0 drops in every round: "
            f"{ratio:.2f}x vs floor {floor:.2f}x = {ratio / floor:.2f}; per round median {med:.2f}, worst "
            f"{worst:.2f} over {len(per)} {how}, {failed} failed{four_threads(t4, t1)}; torn {torn}"
            + ("" if drops is None else ", drops per round " + "; ".join(
                f"{n} thr {','.join(fmt(v) for v in counts)}" for n, counts in drops.items())))
    dropped = drops is not None and any(v for counts in drops.values() for v in counts if v)
    return [(PASS if ok and torn == 0 and not dropped and not failed else MISS, text)]


def round_drops(*rows):
    """{threads: [drops of each round]} of the thread rows that made frames (runs_drops, else the
    median round's drops), or None when none did (a condition never true: no frames to drop)."""
    out = {}
    for r in rows:
        if r and r.get("frames"):
            out[r.get("threads")] = per_round(r, "runs_drops") or [float(r.get("drops") or 0)]
    return out or None


def own_thread_scaling(t, m, limit):
    """The ptrace fallback: only the hitting thread pauses, so 2 threads >= LIMIT x one thread's
    throughput, in the median and the worst interleaved round."""
    t1, t2, t4 = t.column(m, "threads1"), t.column(m, "threads2"), t.column(m, "threads4")
    if not (hits_per_s(t1) and hits_per_s(t2)):
        if t1 or t2:
            return [(NA, f"{m} 2 threads >= {limit}x one thread's throughput: no measurement")]
        return []
    ratio = scaling(t2, t1)
    per = [x for x in per_round(t2, "runs_scaling") if x]
    ok, med, worst = median_and_worst(per or [ratio], limit, at_least=True)
    failed = failed_rounds(t1, t2)
    return [(PASS if ok and not failed else MISS,
             f"{m} 2 threads >= {limit}x one thread's throughput (median and worst round): "
             f"{fmt(hits_per_s(t2))} vs {fmt(hits_per_s(t1))} hits/s, scaling {ratio:.2f}x; per round median "
             f"{med:.2f}, worst {worst:.2f} over {len(per)} rounds, {failed} failed{four_threads(t4, t1)}")]


STREAM_THREADS = (1, 2, 4)


def stream_rows(t, m):
    """M's streamed rows (bench/_stream.py), one per thread count present, in thread order."""
    return [(n, r) for n in STREAM_THREADS if (r := t.column(m, f"stream{n}"))]


def stream_round_limit(key, what, unit, at_least, threads=STREAM_THREADS):
    """Each streamed row's per-round figure KEY (runs_KEY) against LIMIT, on the median and the worst
    round, for the thread counts THREADS; a failed round or a row without the figure fails it."""
    def rule(t, m, limit):
        out = []
        for n, r in stream_rows(t, m):
            if n not in threads:
                continue
            values = per_round(r, f"runs_{key}")
            failed = failed_rounds(r) + sum(v is None for v in values)
            got = [v for v in values if v is not None]
            head = f"{m} {n} thread{'s' * (n > 1)} streaming: {what} {'>=' if at_least else '<='} {limit:g}{unit}"
            if not got:
                out.append((NA, f"{head}: no measurement ({r.get('reason', 'no ' + key)})"))
                continue
            ok, med, worst = median_and_worst(got, limit, at_least)
            out.append((PASS if ok and not failed else MISS,
                        f"{head} (median and worst round): median {med:g}, worst {worst:g} over "
                        f"{len(values)} rounds, {failed} failed"))
        return out
    return rule


def stream_nothing_lost(t, m, limit):
    """Every hit of every round of a streamed row is a frame in the file (counted by reading it):
    frames lost (hits - frames in the file) and drops (the stub's count) are both LIMIT (0) in every
    round. A drop is a frame lost, never informational."""
    out = []
    for n, r in stream_rows(t, m):
        lost, drops = per_round(r, "runs_lost"), per_round(r, "runs_drops")
        failed = failed_rounds(r) + sum(v is None for v in lost)
        head = f"{m} {n} thread{'s' * (n > 1)} streaming: {limit:g} frames lost, {limit:g} drops"
        if not [v for v in lost if v is not None]:
            out.append((NA, f"{head}: no measurement ({r.get('reason', 'no file counted')})"))
            continue
        worst_lost = max(v for v in lost if v is not None)
        worst_drops = max((v for v in drops if v is not None), default=None)
        ok = worst_lost <= limit and worst_drops is not None and worst_drops <= limit and not failed
        out.append((PASS if ok else MISS,
                    f"{head} (every round): lost per round {r.get('runs_lost')}, drops per round "
                    f"{r.get('runs_drops', 'NA')} ({fmt(r.get('hits'))} hits in the median round, "
                    f"{r.get('frames_in_file', 'NA')} frames in its file, {r.get('seconds', 'NA')} s), "
                    f"{failed} failed" + ("" if ok else
                    # A loss beside a long write is the disk's stall outlasting the rings and stages
                    # (docs/streaming.md); without one, it is the drain's.
                    f"; the stream's longest write per round {r.get('runs_write_ms', 'NA')} ms, the "
                    f"drain's longest wait for it {r.get('runs_disk_wait_ms', 'NA')} ms")))
    return out


def buffer_capacity(t, m, limit):
    """The default buffer holds >= LIMIT x the `collect $rdi` frames it held when every frame was
    stored whole. bench/_buffer.py judges a measured run itself (a judged row); here only a run that
    measured nothing."""
    r = next((r for r in t.rows if r.get("column") == "buffer" and r["script"] == "buffer"), None)
    if r and r["ns_per_hit"] is None:
        return [(NA, f"default buffer holds >= {limit}x the collect $rdi frames: no measurement "
                     f"({r.get('reason', '')})")]
    return []


def in_kernel(m):
    return m == "gdbtrace-ebpf" or m.endswith("gdbtrace-kmod")


def module(m):
    return m.endswith("gdbtrace-kmod")


def ebpf(m):
    return m == "gdbtrace-ebpf"


def stream(m):
    return m == "gdbtrace-ebpf-stream"


# Issue 14's limits per column, x the raw uprobe floor on the same instruction. The single-step site's
# 1.1x applies where BPF cannot write registers (the host); where it can, step_vs_emulated compares it
# with the emulated site.
EBPF_FLOOR = {"regs": 1.5, "args": 1.5, "struct64": 1.5, "cond1pct": 1.5, "tsv": 1.2, "shlib": 1.5,
              "stepsite": 1.1, "nop5": 1.5}
MODULE_FLOOR = {"regs": 1.5, "struct64": 1.5, "cond1pct": 1.5}

# (name, which mechanisms' rows, rule, limit)
TARGETS = (
    [(f"floor-{c}", ebpf, floor_ratio(c), lim) for c, lim in EBPF_FLOOR.items()]
    + [(f"floor-{c}", module, floor_ratio(c), lim) for c, lim in MODULE_FLOOR.items()]
    + [("nop5-optimized", ebpf, nop5_optimized, 0.6),
       ("vs-trap", in_kernel, cheaper_than_trap, 20),
       ("step-vs-emulated", in_kernel, step_vs_emulated, 2.0),
       ("guest-ebpf-step", module, guest_ebpf_step, 1.2),
       ("thread-scaling", lambda m: in_kernel(m) or (m.startswith("gdbtrace-ebpf-") and not stream(m)),
        floor_thread_scaling, 0.9),
       ("ptrace-threads", lambda m: m == "gdbtrace-ptrace", own_thread_scaling, 1.5),
       ("buffer", ebpf, buffer_capacity, 3),
       # Issue 29: long streamed runs (bench/_stream.py), gdb's default buffer, the eBPF collector.
       ("stream-lost", stream, stream_nothing_lost, 0),
       ("stream-rate", stream, stream_round_limit("floor_ratio", "hit rate x the raw floor's (same round, "
                                                  "same threads)", "x", True, threads=(4,)), 0.9),
       ("stream-cpu", stream, stream_round_limit("cpu_us_per_frame", "stub CPU per frame", " us", False), 0.3),
       ("stream-rss", stream, stream_round_limit("peak_rss_mb", "stub peak RSS (VmHWM)", " MB", False), 256)]
)


def judge(rows, mechs, reference, judged_rows):
    """Every target line: the table's, for each of MECHS (every mechanism with rows) a target
    applies to, then the rows the row scripts judged themselves (judged=PASS|MISS)."""
    t = Rows(rows, reference)
    out = []
    for name, applies, rule, limit in TARGETS:
        for m in mechs:
            if applies(m):
                out += [{"target": name, "mechanism": m, "limit": limit, "result": res, "text": text}
                        for res, text in rule(t, m, limit)]
    for r in judged_rows:
        out.append({"target": r["script"], "result": PASS if r["judged"] == PASS else MISS,
                    "text": r.get("text", r["workload"])})
    return out
