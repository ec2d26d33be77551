"""Smoke test of the writer benchmark (bench/writer_bench.py --smoke):
300 samples through ufspack.Writer and ufspack.write, so the harness
cannot rot (the peers run in the full, opt-in benchmark).  No timing is
asserted beyond being positive."""

import json
import os
import subprocess
import sys

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "bench")


def test_writer_bench_smoke(tmp_path):
    out = tmp_path / "out"
    subprocess.run([sys.executable, f"{BENCH}/writer_bench.py", "--smoke", "--work", str(tmp_path / "work"),
                    "--out", str(out)], check=True, capture_output=True, text=True, timeout=300)
    r = json.load(open(out / "results.json"))
    assert r["samples"] == 300
    assert set(r["results"]) == {"ufspack/1", "ufspack/2"}
    for key, v in r["results"].items():
        assert v["seconds"] > 0 and v["samples_s"] > 0, key
