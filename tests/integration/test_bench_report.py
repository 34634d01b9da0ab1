"""bench/_report.py and bench/_targets.py judged on made-up rows (no gdb, no stub): a missed limit in
the worst run, a failed round, a target nothing measured and a judged row each fail the report with
the exit status bench/run.sh acts on (3 MISS, 4 NA); rounds pair by round id; the nop5 line can miss;
the draining thread rows and the streamed rows (issue 29) are judged, drops in any round a miss."""

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


def stream_rows(changes=None):
    """bench/_stream.py's rows for 1, 2 and 4 threads over 3 rounds, every stream target met;
    CHANGES: {threads: {key: value}} for that thread count's row."""
    rows = []
    for t in (1, 2, 4):
        rows.append(("stream", {"mechanism": "uprobe-tracefs", "workload": f"t_site:{t}thr", "ns_per_hit": 1,
                                "column": f"stream{t}", "hits_per_s": 300000, "failed_rounds": 0}))
        row = {"mechanism": "gdbtrace-ebpf-stream", "workload": f"t_site:{t}thr:$regs:stream", "ns_per_hit": 1,
               "column": f"stream{t}", "threads": t, "hits": 18000000, "frames_in_file": 18000000,
               "hits_per_s": 290000, "failed_rounds": 0, "runs_floor_ratio": "0.97,0.95,0.99",
               "runs_lost": "0,0,0", "runs_drops": "0,0,0", "runs_cpu_us_per_frame": "0.21,0.22,0.24",
               "runs_peak_rss_mb": "150,151,155"}
        row.update((changes or {}).get(t, {}))
        rows.append(("stream", row))
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
        # An older kernel has no nop5 optimization: still a MISS (no informational rows), saying why.
        rc, got = self.report(rows)
        self.assertEqual(rc, 3, got)
        self.assertTrue(any(t.startswith("nop5 site") and "Linux < 6.18" in t for t in got["MISS"]), got)

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

    def test_thread_rows_with_the_floor_in_their_runs_are_judged_on_it(self):
        # Across rounds the floor's own runs scaled 1.90 and 1.50 against the collector's 1.50 and
        # 1.90 (a 0.79 round); in the collector's runs, t_ref's floor scaled alike: judged on those.
        rows = thread_rows("1.90,1.50,1.90", "1.50,1.90,1.90")
        rows[1][1].update(runs_vs_ref="0.99,1.01,0.98", ref_scaling=1.92, paired_scaling=1.90)
        rc, got = self.report(ebpf_rows() + rows)
        self.assertEqual(rc, 0, got)
        self.assertTrue(any("worst 0.98 over 3 rounds, the floor in the same runs" in t for t in got["PASS"]), got)
        rows[1][1]["runs_vs_ref"] = "0.99,0.85,0.98"  # one round 0.85x its own floor
        rc, got = self.report(ebpf_rows() + rows)
        self.assertEqual(rc, 3, got)
        self.assertIn("worst 0.85", got["MISS"][0])

    def test_draining_thread_rows_are_judged_and_drops_miss(self):
        rows = thread_rows("1.90,1.90,1.90", "1.90,1.90,1.90")
        for _, r in rows:
            if r["mechanism"] == "gdbtrace-ebpf":
                r.update(mechanism="gdbtrace-ebpf-sustained", frames=1000, threads=int(r["column"][-1]),
                         drops=0, runs_drops="0,0,0")
        rc, got = self.report(ebpf_rows() + rows)
        self.assertEqual(rc, 0, got)
        self.assertTrue(any(t.startswith("gdbtrace-ebpf-sustained 2-thread scaling") for t in got["PASS"]), got)
        rows[1][1]["runs_drops"] = "0,12,0"  # the median round dropped nothing; another did
        rc, got = self.report(ebpf_rows() + rows)
        self.assertEqual(rc, 3, got)
        self.assertIn("2 thr 0,12,0", got["MISS"][0])
        self.assertNotIn("INFO", got)  # no target is informational

    def test_stream_rows_met(self):
        rc, got = self.report(stream_rows())
        self.assertEqual(rc, 0, got)
        # lost + drops for 1, 2, 4 threads, CPU and RSS for each, the hit rate for 4 threads.
        self.assertEqual(len(got["PASS"]), 10, got)

    def test_stream_rows_judged_on_every_round(self):
        for changes, missed in (({4: {"runs_lost": "0,3,0"}}, "4 threads streaming: 0 frames lost"),
                                ({2: {"runs_drops": "0,0,7"}}, "2 threads streaming: 0 frames lost"),
                                ({4: {"runs_floor_ratio": "0.97,0.85,0.99"}}, "worst 0.85"),
                                ({1: {"runs_cpu_us_per_frame": "0.2,0.2,0.31"}}, "worst 0.31"),
                                ({2: {"runs_peak_rss_mb": "150,300,150"}}, "worst 300"),
                                ({1: {"runs_lost": "0,NA,0", "failed_rounds": 1}}, "1 failed")):
            rc, got = self.report(stream_rows(changes))
            self.assertEqual(rc, 3, (changes, got))
            self.assertTrue(any(missed in t for t in got["MISS"]), (changes, got))

    def test_stream_row_without_a_file_count_is_na(self):
        rows = [r for r in stream_rows() if not r[1].get("threads") == 4]
        rows.append(("stream", {"mechanism": "gdbtrace-ebpf-stream", "workload": "t_site:4thr:$regs:stream",
                                "ns_per_hit": None, "column": "stream4", "threads": 4, "reason": "backend_ptrace"}))
        rc, got = self.report(rows)
        self.assertEqual(rc, 4, got)
        self.assertTrue(any("backend_ptrace" in t for t in got["NA"]), got)


if __name__ == "__main__":
    unittest.main()
