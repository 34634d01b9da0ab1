"""bench/run.sh's report: reads the collected rows (rows.txt: "<script>\t<ROW line or JSON>"), adds
ratios, writes results.json and results.md (matrix per workload, target PASS/MISS lines, every row).

Usage: python3 _report.py ROWS_TXT OUT_DIR SMOKE(0|1) [HEADER_TEXT]
Exit status: 0 when every target is PASS; 3 when one is MISS; 4 when one measured
nothing (NA). bench/run.sh fails the run on either; --allow-miss accepts 3, never 4.
"""
import json
import shlex
import sys

import _targets

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


fmt = _targets.fmt


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


# --- targets (bench/_targets.py: one table of target, rows, rule, limit) -------------------------
# The mechanisms with measured columns (the matrix's, the buffer's): a mechanism that only appears in
# another script's rows (e.g. a module row of bench/tracepoints.sh) has no column target to judge.
mechanisms = list(dict.fromkeys(r["mechanism"] for r in rows if "column" in r))
targets = _targets.judge(rows, mechanisms, reference, judged_rows)
counts = {k: sum(1 for t in targets if t["result"] == k) for k in (_targets.PASS, _targets.MISS, _targets.NA)}
summary = f"targets: {counts['PASS']} PASS, {counts['MISS']} MISS, {counts['NA']} NA (not measured)"
if targets:
    lines += ["### targets", "", summary, ""] + [f"- **{t['result']}** {t['text']}" for t in targets] + [""]


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
json.dump({"smoke": smoke, "header": header_text, "summary": summary, "targets": targets, "rows": rows},
          open(f"{out}/results.json", "w"), indent=1)
open(f"{out}/results.md", "w").write(table)
print(table)
print(f"results: {out}/results.json {out}/results.md")
print(summary, file=sys.stderr)
# run.sh tells the two apart: a MISS may be accepted (--allow-miss), a target nothing measured not.
sys.exit(4 if counts["NA"] else 3 if counts["MISS"] else 0)
