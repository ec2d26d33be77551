"""Smoke test of the multi-file samples benchmark (bench/samples_bench.py
--smoke): 200 samples in 2 WebDataset shards packed and read at random
through SampleDataset (wids too where it is installed), so the harness
cannot rot.  No timing is asserted beyond being positive; where strace is
installed, the pread64 count per sample is (1.00, as test_samples
asserts for its own packs)."""

import json
import os
import shutil
import subprocess
import sys

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "bench")


def test_samples_bench_smoke(tmp_path):
    out = tmp_path / "out"
    subprocess.run([sys.executable, f"{BENCH}/samples_bench.py", "--smoke", "--work", str(tmp_path / "work"),
                    "--out", str(out)], check=True, capture_output=True, text=True, timeout=300)
    r = json.load(open(out / "results.json"))
    assert r["samples"] == 200 and r["reads"] == 200
    assert {"ufspack/raw/warm", "ufspack/decoded/warm"} <= set(r["results"])
    for key, v in r["results"].items():
        assert v["samples_s"] > 0, key
    if shutil.which("strace"):
        assert r["preads_per_sample"] == 1.0
    assert "| warm | raw |" in (out / "table.md").read_text()
