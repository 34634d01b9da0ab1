"""bench/_report.py and bench/_targets.py judged on made-up rows (no gdb, no stub): a missed limit in
the worst run, a failed round, a target nothing measured and a judged row each fail the report with
the exit status bench/run.sh acts on (3 MISS, 4 NA); rounds pair by round id; the nop5 line can miss."""

import json
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from gdbtest import REPO, GdbTestCase

REPORT = REPO / "bench" / "_report.py"
EBPF_COLUMNS = ("regs", "args", "struct64", "cond1pct", "tsv", "stepsite", "shlib", "nop5")


def ebpf_rows(**changes):
    """Rows in which every eBPF target passes; CHANGES: {column: {key: value}} for its eBPF row."""
    rows = [("workloads", {"mechanism": "gdbserver-trace", "workload": "w_regs:$regs", "ns_per_hit": 100000,
                           "column": "regs"})]
    for c in EBPF_COLUMNS:
        floor_ns = 50 if c == "nop5" else 90  # nop5: optimized (a call, not a trap)
        rows.append(("workloads", {"mechanism": "uprobe-tracefs", "workload": f"w_{c}", "ns_per_hit": floor_ns,
                                   "column": c, "kernel": "6.18.1" if c == "nop5" else None}))
        ebpf = {"mechanism": "gdbtrace-ebpf", "workload": f"w_{c}:$regs", "ns_per_hit": 100, "column": c,
                "ratio_min": 1.0, "ratio_median": 1.05, "ratio_max": 1.08, "ratio_runs": 3, "failed_runs": 0}
        ebpf.update(changes.get(c, {}))
        rows.append(("workloads", ebpf))
    return rows


def thread_rows(mech_scaling, floor_scaling, failed=0):
    """1- and 2-thread rows of gdbtrace-ebpf and the floor with per-round 2-thread scaling lists."""
    rows = []
    for mech, scaling in (("gdbtrace-ebpf", mech_scaling), ("uprobe-tracefs", floor_scaling)):
        rows.append(("threads", {"mechanism": mech, "workload": "t_site:1thr", "ns_per_hit": 1, "column": "threads1",
                                 "hits_per_s": 100000, "failed_rounds": 0}))
        rows.append(("threads", {"mechanism": mech, "workload": "t_site:2thr", "ns_per_hit": 1, "column": "threads2",
                                 "hits_per_s": 190000, "runs_scaling": scaling, "torn": 0,
                                 "failed_rounds": failed if mech == "gdbtrace-ebpf" else 0}))
    return rows


class BenchReport(GdbTestCase):
    def report(self, rows):
        """(exit status, {result: [target texts]}) of _report.py on ROWS [(script, row)]."""
        with tempfile.TemporaryDirectory() as d:
            raw = Path(d) / "rows.txt"
            raw.write_text("".join(f"{script}\t{json.dumps({k: v for k, v in row.items() if v is not None})}\n"
                                   for script, row in rows))
            p = subprocess.run([sys.executable, str(REPORT), str(raw), d, "0"], capture_output=True, text=True,
                               timeout=60)
            targets = json.loads((Path(d) / "results.json").read_text())["targets"]
        by_result = {}
        for t in targets:
            by_result.setdefault(t["result"], []).append(t["text"])
        return p.returncode, by_result

    def test_all_met(self):
        rc, got = self.report(ebpf_rows())
        self.assertEqual(rc, 0, got)
        self.assertNotIn("MISS", got)
        self.assertNotIn("NA", got)

    def test_worst_run_over_the_limit_is_a_miss(self):
        rc, got = self.report(ebpf_rows(regs={"ratio_max": 1.6}))
        self.assertEqual(rc, 3, got)
        self.assertEqual(len(got["MISS"]), 1, got)
        self.assertIn("w_regs:$regs <= 1.5x", got["MISS"][0])

    def test_failed_run_is_a_miss(self):
        rc, got = self.report(ebpf_rows(args={"failed_runs": 1}))
        self.assertEqual(rc, 3, got)
        self.assertIn("1 failed", got["MISS"][0])

    def test_unmeasured_target_is_na_and_fails(self):
        rows = [r for r in ebpf_rows() if not (r[1]["mechanism"] == "gdbtrace-ebpf" and r[1]["column"] == "tsv")]
        rc, got = self.report(rows)
        self.assertEqual(rc, 4, got)
        self.assertIn("gdbtrace-ebpf tsv <= 1.2x uprobe floor: no measurement", got["NA"][0])

    def test_judged_row_miss(self):
        rc, got = self.report(ebpf_rows() + [("buffer", {"mechanism": "target", "workload": "buffer",
                                                         "ns_per_hit": None, "judged": "MISS", "text": "held 2x"})])
        self.assertEqual(rc, 3, got)
        self.assertEqual(got["MISS"], ["held 2x"])

    def test_nop5_not_optimized_on_6_18_is_a_miss(self):
        rows = ebpf_rows()
        for _, r in rows:
            if r["mechanism"] == "uprobe-tracefs" and r["column"] == "nop5":
                r["ns_per_hit"] = 90
        rc, got = self.report(rows)
        self.assertEqual(rc, 3, got)
        self.assertTrue(any(t.startswith("nop5 site") and "not optimized" in t for t in got["MISS"]), got)
        for _, r in rows:
            if r.get("kernel"):
                r["kernel"] = "6.12.5"
        rc, got = self.report(rows)
        self.assertEqual(rc, 0, got)
        self.assertTrue(any(t.startswith("nop5 site") for t in got["INFO"]), got)

    def test_thread_rounds_pair_by_round_and_the_worst_counts(self):
        # Round 1 failed for eBPF, round 2 for the floor: only round 0 pairs. Pairing by position
        # among the rounds that worked would divide 1.90 by 1.00.
        rc, got = self.report(ebpf_rows() + thread_rows("1.90,NA,1.90", "1.90,1.90,NA,1.00"))
        self.assertEqual(rc, 0, got)
        self.assertTrue(any("over 1 paired rounds" in t for t in got["PASS"]), got)
        # Median round fine, worst round 0.79x the floor's: a miss.
        rc, got = self.report(ebpf_rows() + thread_rows("1.90,1.50,1.90", "1.90,1.90,1.90"))
        self.assertEqual(rc, 3, got)
        self.assertIn("worst 0.79", got["MISS"][0])
        # A failed round fails the target.
        rc, got = self.report(ebpf_rows() + thread_rows("1.90,NA,1.90", "1.90,1.90,1.90", failed=1))
        self.assertEqual(rc, 3, got)


if __name__ == "__main__":
    unittest.main()
