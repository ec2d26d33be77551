"""Smoke test of the archive benchmark (bench/archive_bench.py --local): a
nested tar of a few class tars on local disk in place of the slow FS, one
run of each step, so the harness cannot rot.  No timing is asserted beyond
being positive; what is asserted is that both packs hold the same records."""

import json
import os
import subprocess
import sys

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "bench")


def test_archive_bench_smoke(tmp_path):
    out = tmp_path / "out"
    subprocess.run([sys.executable, f"{BENCH}/archive_bench.py", "--local", "--classes", "3",
                    "--per-class", "4", "--work", str(tmp_path / "work"), "--out", str(out)],
                   check=True, capture_output=True, text=True, timeout=300)
    r = json.load(open(out / "results.json"))
    assert r["files"] == 12 and r["classes"] == 3 and r["same_records"] is True
    for key in ("archive_s", "extract_s", "tree_s"):
        assert r[key] > 0, key
