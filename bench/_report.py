"""bench/run.sh's report: reads the collected rows (rows.txt: "<script>\t<ROW line or JSON>"), adds
ratios, writes results.json and results.md (matrix per workload, target PASS/MISS lines, every row).

Usage: python3 _report.py ROWS_TXT OUT_DIR SMOKE(0|1) [HEADER_TEXT]
"""
import json
import shlex
import statistics
import sys

raw, out, smoke = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
header_text = sys.argv[4] if len(sys.argv) > 4 else ""

rows = []
for line in open(raw):
    script, _, text = line.rstrip("\n").partition("\t")
    if text.startswith("{"):
        row = json.loads(text)
    else:
        parts = shlex.split(text[4:]) if '"' in text else text[4:].split()
        row = {"mechanism": parts[0], "workload": parts[1], "ns_per_hit": parts[2]}
        for kv in parts[3:]:
            key, _, value = kv.partition("=")
            row[key] = value
    try:
        row["ns_per_hit"] = float(row.get("ns_per_hit"))
    except (TypeError, ValueError):
        row["ns_per_hit"] = None
    row["script"] = script
    rows.append(row)
# Row scripts that judge their own targets (bench/_tracepoints.py) print each as a row with
# judged=PASS|MISS and its text; they go to the targets list, not the tables.
judged_rows = [r for r in rows if "judged" in r]
rows = [r for r in rows if "judged" not in r]


def per_hit(row):
    return row["ns_per_hit"] is not None and row.get("unit", "ns_per_hit") == "ns_per_hit"


def function(row):
    return row["workload"].split(":")[0]


def find(mech, pred):
    for r in rows:
        if r["mechanism"] == mech and per_hit(r) and pred(r):
            return r
    return None


def reference(mech, r):
    """The `mech` row to compare r with: same script and column, else same workload, else same
    function, else probe_me."""
    for pred in (lambda x: x["script"] == r["script"] and "column" in r and x.get("column") == r["column"],
                 lambda x: x["workload"] == r["workload"],
                 lambda x: function(x) == function(r),
                 lambda x: function(x) == "probe_me" and mech != "gdbserver-trace",
                 lambda x: x["workload"] == "probe_me:$regs"):
        hit = find(mech, pred)
        if hit:
            return hit
    return None


for r in rows:
    if not per_hit(r):
        continue
    guest = r.get("where") == "qemu-tcg-guest"  # compared only with the same guest's rows
    slow = None if guest else reference("gdbserver-trace", r)
    floor = {"ns_per_hit": float(r["floor_ns"])} if r.get("floor_ns") else \
        (None if guest else reference("uprobe-tracefs", r))
    if slow and r["ns_per_hit"] > 0:
        r["speedup_vs_gdbserver_trace"] = round(slow["ns_per_hit"] / r["ns_per_hit"], 1)
    if r.get("ratio_median") is not None:
        # Interleaved runs (_workloads.py): the median of each run's ratio to the floor measured in
        # the same process; the floor row's median comes from other processes, up to 30 % off.
        r["x_uprobe_floor"] = float(r["ratio_median"])
    elif floor and floor["ns_per_hit"] > 0:
        r["x_uprobe_floor"] = round(r["ns_per_hit"] / floor["ns_per_hit"], 2)


def fmt(v, digits=0):
    return "NA" if v is None else f"{v:,.{digits}f}"


# --- matrix: mechanism x workload column (rows that carry column=) -------------------------------
COLUMNS = [("regs", "collect $regs"), ("args", "2 args"), ("struct64", "64 B via ptr"),
           ("cond1pct", "cond 1% true"), ("tsv", "TSV only"), ("stepsite", "single-step site $regs"),
           ("shlib", "shared lib $regs"), ("threads1", "1 thr"), ("threads2", "2 thr"), ("threads4", "4 thr")]
mechs = []
for r in rows:
    if "column" in r and r["mechanism"] not in mechs and r.get("unit", "ns_per_hit") == "ns_per_hit":
        mechs.append(r["mechanism"])


def cell(mech, column):
    for r in rows:
        if r["mechanism"] == mech and r.get("column") == column and r.get("unit", "ns_per_hit") == "ns_per_hit":
            if r["ns_per_hit"] is None:
                return "NA"
            text = fmt(r["ns_per_hit"])
            if column.startswith("threads") and r.get("hits_per_s"):
                text = f"{fmt(float(r['hits_per_s']) / 1e3)} k/s"
                if r.get("torn") not in (None, 0, "0"):
                    text += f" torn={r['torn']}"
                return text
            if "x_uprobe_floor" in r:
                text += f" ({r['x_uprobe_floor']}x)"
            if r.get("complete") == "no":
                text += " inc."
            return text
    return ""


lines = []
if mechs:
    lines += ["### ns per hit (x raw uprobe floor on the same instruction); threads: throughput hits/s",
              "", "| mechanism | " + " | ".join(c[1] for c in COLUMNS) + " |",
              "|---|" + "---:|" * len(COLUMNS)]
    for m in mechs:
        lines.append(f"| {m} | " + " | ".join(cell(m, c[0]) for c in COLUMNS) + " |")
        prog_ns = {r.get("column"): r["bpf_prog_ns"] for r in rows
                   if r["mechanism"] == m and r.get("bpf_prog_ns") is not None}
        if prog_ns:
            lines.append(f"| ↳ {m}: BPF program alone (kernel bpf_stats) | " +
                         " | ".join(str(prog_ns.get(c[0], "")) for c in COLUMNS) + " |")
    lines.append("")

# --- data path out -------------------------------------------------------------------------------
out_rows = [r for r in rows if r.get("column") in ("fill", "memory", "walk", "tsave")
            or r["mechanism"].startswith("plugin-export")]
if out_rows:
    lines += ["### buffer and data path out", "", "| mechanism | what | value | notes |", "|---|---|---:|---|"]
    for r in out_rows:
        unit = r.get("unit", "")
        value = "NA" if r["ns_per_hit"] is None else f"{fmt(r['ns_per_hit'], 1)} {unit.replace('_', ' ')}"
        keys = ("frames_per_s", "frames", "seconds", "vmhwm_kb", "vmhwm_growth_kb", "rss_bytes_per_frame",
                "gdb_cpu_seconds", "cpu_seconds", "file_bytes", "backend", "stopped_full", "reason")
        notes = " ".join(f"{k}={r[k]}" for k in keys if k in r)
        lines.append(f"| {r['mechanism']} | {r['workload']} | {value} | {notes} |")
    lines.append("")


# --- targets -------------------------------------------------------------------------------------
targets = []


def target(ok, text):
    targets.append({"result": "NA" if ok is None else ("PASS" if ok else "MISS"), "text": text})


def column_row(mech, column, script=None):
    for r in rows:
        if r["mechanism"] == mech and r.get("column") == column and (script is None or r["script"] == script):
            return r
    return None


def scaling_rounds(row):
    """Each interleaved round's own 2-thread scaling of ROW (bench/_threads.py runs_scaling)."""
    return [float(x) for x in str(row.get("runs_scaling") or "").split(",") if x]


def rounds_text(per):
    """(median, text) of per-round figures PER."""
    med = statistics.median(per)
    return med, f"; per round {min(per):.2f}-{max(per):.2f} (median {med:.2f}) over {len(per)} interleaved rounds"


def four_threads(t4, t1):
    return (f", 4 threads {float(t4['hits_per_s']) / float(t1['hits_per_s']):.2f}x"
            if t4 and t4.get("hits_per_s") else "")


def floor_scaling_target(m, ratio, t1, torn=0, drops=None, why_not_judged=None):
    """M's 2-thread scaling RATIO against the raw uprobe floor's own in the same run (issue 14's
    thread target; an absolute 2-thread/1-thread bound would judge the machine: the floor itself
    scaled 1.54-1.99x between rounds of one run). With interleaved rounds (bench/_threads.py), each
    round's own relative scaling is listed too and the target is judged on their median, with zero
    torn frames; WHY_NOT_JUDGED: printed as NA with that reason."""
    f1t, f2t = column_row("uprobe-tracefs", "threads1"), column_row("uprobe-tracefs", "threads2")
    t2, t4 = column_row(m, "threads2"), column_row(m, "threads4")
    if f1t and f2t and f1t.get("hits_per_s") and f2t.get("hits_per_s"):
        floor_scaling = float(f2t["hits_per_s"]) / float(f1t["hits_per_s"])
        four = four_threads(t4, t1)
        rel, rounds = ratio / floor_scaling, ""
        per = [a / b for a, b in zip(scaling_rounds(t2 or {}), scaling_rounds(f2t))]
        if per:
            rel, rounds = rounds_text(per)
        frames = f"; torn {torn}" + (f", drops {drops}" if drops is not None else "")
        target(None if why_not_judged else rel >= 0.9 and torn == 0,
               f"{m} 2-thread scaling >= 0.9x the raw floor's own 2-thread scaling (same run)"
               f"{' (' + why_not_judged + ')' if why_not_judged else ''}: "
               f"{ratio:.2f}x vs floor {floor_scaling:.2f}x = {ratio / floor_scaling:.2f}{rounds}{four}"
               f"{frames}")


def frame_counts(m):
    """(torn, drops) over every thread row of M."""
    torn = sum(int(r.get("torn") or 0) for r in rows if r["mechanism"] == m and "torn" in r)
    drops = sum(int(r.get("drops") or 0) for r in rows if r["mechanism"] == m and "threads" in r)
    return torn, drops


in_kernel = [m for m in mechs if m == "gdbtrace-ebpf" or m.endswith("gdbtrace-kmod")]
for m in in_kernel + [m for m in mechs if m.startswith("gdbtrace-ebpf-")]:
    if m not in in_kernel:  # variants (e.g. a never-true condition): only the thread scaling line
        t1, t2 = column_row(m, "threads1"), column_row(m, "threads2")
        if t1 and t2 and t1.get("hits_per_s") and t2.get("hits_per_s"):
            ratio = float(t2["hits_per_s"]) / float(t1["hits_per_s"])
            # Sustained: the stub drains during the run, on the 2 vCPUs both tracee threads keep
            # busy; the floor has no reader. Reported, not judged (bench/_threads.py).
            why = ("the stub drains during the run on the CPUs the tracee threads use; informational"
                   if m.endswith("-sustained") else None)
            torn, drops = frame_counts(m)
            floor_scaling_target(m, ratio, t1, torn, drops if t2.get("frames") else None, why)
        continue
    # Issue 14's limits per column (x the raw uprobe floor on the same instruction). The single-step
    # site's 1.1x applies where BPF cannot write registers (the host); where it can, the site is
    # compared with the emulated one below.
    limits = {"regs": 1.5, "args": 1.5, "struct64": 1.5, "cond1pct": 1.5, "tsv": 1.2, "shlib": 1.5,
              "stepsite": 1.1, "nop5": 1.5} if m == "gdbtrace-ebpf" else \
        {"regs": 1.5, "struct64": 1.5, "cond1pct": 1.5}
    for column, limit in limits.items():
        r = column_row(m, column)
        if not r or r["ns_per_hit"] is None or "x_uprobe_floor" not in r:
            target(None, f"{m} {column} <= {limit}x uprobe floor: no measurement"
                   f" ({(r or {}).get('reason', 'no row')})")
            continue
        if r.get("ratio_median") is not None:
            # Interleaved runs: met only when the median and the worst run both meet it.
            med, lo, hi = (float(r[k]) for k in ("ratio_median", "ratio_min", "ratio_max"))
            target(med <= limit and hi <= limit,
                   f"{m} {r['workload']} <= {limit}x uprobe floor (median and worst run): median "
                   f"{med:.2f}x, runs {lo:.2f}-{hi:.2f}x over {r.get('ratio_runs')} interleaved runs "
                   f"({fmt(r['ns_per_hit'])} ns/hit)")
        else:
            target(r["x_uprobe_floor"] <= limit, f"{m} {r['workload']} <= {limit}x uprobe floor: "
                   f"{fmt(r['ns_per_hit'])} ns = {r['x_uprobe_floor']}x")
    f1, f5 = column_row("uprobe-tracefs", "regs", "workloads"), column_row("uprobe-tracefs", "nop5")
    if m == "gdbtrace-ebpf" and f1 and f5 and f1["ns_per_hit"] and f5["ns_per_hit"] is not None:
        lines_note = (f"nop5 site: raw floor {fmt(f5['ns_per_hit'])} ns vs {fmt(f1['ns_per_hit'])} ns on the "
                      f"1-byte nop ({'optimized: no trap' if f5['ns_per_hit'] < 0.6 * f1['ns_per_hit'] else 'not optimized'})")
        target(None if f5["ns_per_hit"] >= 0.6 * f1["ns_per_hit"] else True, lines_note)
    r = column_row(m, "regs")
    if r and r.get("where") == "qemu-tcg-guest":
        via_gdb = column_row(m + "-gdb", "stepsite")
        ptrace = column_row(m.replace("gdbtrace-kmod", "gdbtrace-ptrace-gdb"), "stepsite")
        if via_gdb and via_gdb.get("speedup_vs_guest_ptrace"):
            target(via_gdb["speedup_vs_guest_ptrace"] >= 20,
                   f"{m} >= 20x cheaper than a trap tracepoint (stock gdbserver is not in the guest; the "
                   f"ptrace collector, a trap like gdbserver's, in the same guest, gdb-driven, collect $regs): "
                   f"{fmt(via_gdb['ns_per_hit'])} vs {fmt(ptrace['ns_per_hit']) if ptrace else 'NA'} ns = "
                   f"{via_gdb['speedup_vs_guest_ptrace']}x")
        else:
            target(None, f"{m} >= 20x cheaper than a trap tracepoint: no gdb-driven guest rows")
    elif r and r.get("speedup_vs_gdbserver_trace"):
        slow = reference("gdbserver-trace", r)
        target(r["speedup_vs_gdbserver_trace"] >= 20,
               f"{m} >= 20x cheaper than stock gdbserver trap tracepoint on the emulated site: "
               f"{fmt(r['ns_per_hit'])} vs {fmt(slow['ns_per_hit'])} ns = {r['speedup_vs_gdbserver_trace']}x")
    else:
        target(None, f"{m} >= 20x cheaper than gdbserver trap tracepoint: no measurement")
    emu, step = column_row(m, "regs"), column_row(m + "-emulating", "stepsite") or column_row(m, "stepsite")
    if emu and step and emu["ns_per_hit"] and step["ns_per_hit"] is not None:
        ratio = step["ns_per_hit"] / emu["ns_per_hit"]
        # Where the eBPF program cannot write pt_regs (kernel < 6.19) the kernel single-steps the
        # instruction: issue 14 judges that site against the floor on the same instruction (<= 1.1x,
        # above), this line is informational.
        single_stepped = "ebpf" in m and not step["mechanism"].endswith("-emulating")
        target(None if single_stepped else ratio <= 2.0,
               f"{step['mechanism']} single-step site <= 2x emulated site: {fmt(step['ns_per_hit'])} vs "
               f"{fmt(emu['ns_per_hit'])} ns = {ratio:.2f}x"
               + (" (eBPF cannot write pt_regs on this kernel: the kernel single-steps; informational)"
                  if single_stepped else ""))
    if m.endswith("gdbtrace-kmod") and r and r.get("where") == "qemu-tcg-guest":
        # The eBPF collector in the same guest, gdb-driven: the rip-load site against the nop site the
        # kernel emulates itself. From Linux 6.19 (the newest Debian kernel) the program emulates the
        # load; before, the kernel single-steps it.
        g = m.replace("gdbtrace-kmod", "gdbtrace-ebpf-gdb")
        nop, load = column_row(g, "regs"), column_row(g, "stepsite")
        if nop and load and nop["ns_per_hit"] and load["ns_per_hit"] is not None:
            ratio = load["ns_per_hit"] / nop["ns_per_hit"]
            writes = nop.get("kernel") == "newest"
            target(ratio <= 1.2 if writes else None,
                   f"{g} single-step site <= 1.2x the kernel-emulated site "
                   f"{'(BPF writes registers: the program emulates)' if writes else '(kernel < 6.19: single-stepped, informational)'}: "
                   f"{fmt(load['ns_per_hit'])} vs {fmt(nop['ns_per_hit'])} ns = {ratio:.2f}x")
    t1, t2 = column_row(m, "threads1"), column_row(m, "threads2")
    if t1 and t2 and t1.get("hits_per_s") and t2.get("hits_per_s"):
        ratio = float(t2["hits_per_s"]) / float(t1["hits_per_s"])
        floor_scaling_target(m, ratio, t1, *frame_counts(m))

# The ptrace fallback (issue 14): only the hitting thread pauses, so 2 threads >= 1.5x one thread.
pt1, pt2 = column_row("gdbtrace-ptrace", "threads1"), column_row("gdbtrace-ptrace", "threads2")
if pt1 and pt2 and pt1.get("hits_per_s") and pt2.get("hits_per_s"):
    ratio = float(pt2["hits_per_s"]) / float(pt1["hits_per_s"])
    pt4 = column_row("gdbtrace-ptrace", "threads4")
    four = four_threads(pt4, pt1)
    judged, rounds = ratio, ""
    if scaling_rounds(pt2):  # interleaved rounds (bench/_threads.py): judged on their median
        judged, rounds = rounds_text(scaling_rounds(pt2))
    target(judged >= 1.5, f"gdbtrace-ptrace 2 threads >= 1.5x one thread's throughput: "
           f"{fmt(float(pt2['hits_per_s']))} vs {fmt(float(pt1['hits_per_s']))} hits/s = {ratio:.2f}x"
           f"{rounds}{four}")

for r in judged_rows:
    target(r["judged"] == "PASS", r.get("text", r["workload"]))

# Compact trace-buffer storage: the default buffer holds >= 3x the `collect $rdi` frames it held when
# every frame was stored whole (bench/_buffer.py computes that figure from the same run).
buffer_row = next((r for r in rows if r.get("column") == "buffer" and r["script"] == "buffer"), None)
if buffer_row:
    if buffer_row["ns_per_hit"] is None:
        target(None, f"default buffer holds >= 3x the collect $rdi frames: no measurement "
                     f"({buffer_row.get('reason', '')})")
    else:
        ratio = float(buffer_row["ratio"])
        target(ratio >= float(buffer_row.get("target_ratio", 3)) and buffer_row.get("stop_reason") == "tfull",
               f"{buffer_row['mechanism']} default 5 MB buffer holds >= 3x the collect $rdi frames: "
               f"{int(buffer_row['ns_per_hit']):,} frames of {buffer_row['stored_frame_bytes']} stored bytes vs "
               f"{int(buffer_row['frames_before']):,} of {buffer_row['tfile_frame_bytes']} = {ratio:.2f}x")

if targets:
    lines += ["### targets", ""] + [f"- **{t['result']}** {t['text']}" for t in targets] + [""]

# --- every row -----------------------------------------------------------------------------------
lines += ["### all rows", "",
          "| script | mechanism | workload | value | vs gdbserver trap tracepoint | x uprobe floor | notes |",
          "|---|---|---|---:|---:|---:|---|"]
for r in rows:
    value = "NA" if r["ns_per_hit"] is None else f"{r['ns_per_hit']:,.1f}"
    if r.get("unit"):
        value += " " + r["unit"].replace("_", " ").replace("ns per hit", "").strip()
    notes = " ".join(f"{k}={v}" for k, v in r.items()
                     if k not in ("mechanism", "workload", "ns_per_hit", "script", "unit",
                                  "speedup_vs_gdbserver_trace", "x_uprobe_floor"))
    speed = r.get("speedup_vs_gdbserver_trace")
    lines.append(f"| {r['script']} | {r['mechanism']} | {r['workload']} | {value} | "
                 f"{'' if speed is None else f'{speed:,.1f}x faster'} | {r.get('x_uprobe_floor', '')} | {notes} |")

table = "\n".join(lines) + "\n"
if header_text:
    table = header_text + "\n\n" + table
if smoke:
    table = "(smoke run: tiny iteration counts, numbers not meaningful)\n\n" + table
json.dump({"smoke": smoke, "header": header_text, "targets": targets, "rows": rows},
          open(f"{out}/results.json", "w"), indent=1)
open(f"{out}/results.md", "w").write(table)
print(table)
print(f"results: {out}/results.json {out}/results.md")
