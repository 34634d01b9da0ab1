"""Rows for bench/run.sh from bench/kmodule.sh's table (the kmodule helper's script prints a table,
not ROW lines): one row per `kernel site mechanism hits ns/iter ns/hit` line. Guest rows get their own
mechanism names (guest<kernel>-...) and carry the guest's own floor (floor_ns = tracefs uprobe on the
same site in the same guest run), so ratios never mix host and guest figures.
  python3 _kmodule_rows.py < kmodule.out
"""
import json
import re
import sys

NAMES = {"untraced": "untraced", "tracefs-uprobe": "uprobe-tracefs", "module": "gdbtrace-kmod",
         "module+emulation": "gdbtrace-kmod-emulating",
         "module+emulation+fpu": "gdbtrace-kmod-emulating-fpu",
         # gdb-driven sessions in the guest (gdbtrace-server, `collect $regs`, backend module / ptrace)
         "gdb-module-collect-regs": "gdbtrace-kmod-gdb", "gdb-ptrace-collect-regs": "gdbtrace-ptrace-gdb",
         "gdb-ebpf-collect-regs": "gdbtrace-ebpf-gdb"}
COLUMNS = {"nop": "regs", "load": "stepsite"}

seen, table = set(), []
for line in sys.stdin:
    m = re.match(r"^(\S+)\s+(nop|load)\s+(\S+)\s+(\d+)\s+([0-9.]+)\s+(\S+)\s*$", line)
    if not m or m.group(3) not in NAMES or m.groups() in seen:
        continue
    seen.add(m.groups())
    table.append(m.groups())
floors = {(k, s): float(ns) for k, s, mech, _, _, ns in table if mech == "tracefs-uprobe"}
ptrace = {(k, s): float(ns) for k, s, mech, _, _, ns in table if mech == "gdb-ptrace-collect-regs"}
for kernel, site, mech, hits, per_iter, per_hit in table:
    row = {"mechanism": f"guest{kernel}-{NAMES[mech]}", "workload": f"gt_bench:{site}:$regs",
           "ns_per_hit": float(per_iter) if mech == "untraced" else float(per_hit),
           "n": int(hits), "traced_ns_per_iter": float(per_iter), "kernel": kernel,
           "where": "qemu-tcg-guest"}
    if mech == "untraced":
        row["unit"] = "ns_per_iter"
    else:
        row["column"] = COLUMNS[site]
        if (kernel, site) in floors:
            row["floor_ns"] = floors[(kernel, site)]
        if mech == "gdb-module-collect-regs" and (kernel, site) in ptrace and float(per_hit) > 0:
            row["speedup_vs_guest_ptrace"] = round(ptrace[(kernel, site)] / float(per_hit), 1)
    print(json.dumps(row))
