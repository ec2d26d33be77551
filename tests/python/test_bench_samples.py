"""Smoke test of the multi-file samples benchmark (bench/samples_bench.py
--smoke): 200 samples in 2 WebDataset shards packed and read at random
through SampleDataset (wids too where it is installed), so the harness
cannot rot.  No timing is asserted beyond being positive; where strace is
installed, the pread64 count per sample is (1.00, as test_samples
asserts for its own packs)."""

import shutil

import benchsmoke


def test_samples_bench_smoke(tmp_path):
    r, out = benchsmoke.run("samples_bench.py", tmp_path, "--smoke")
    assert r["samples"] == 200 and r["reads"] == 200
    assert {"ufspack/raw/warm", "ufspack/decoded/warm"} <= set(r["results"])
    for key, v in r["results"].items():
        assert v["samples_s"] > 0, key
    if shutil.which("strace"):
        assert r["preads_per_sample"] == 1.0
    assert "| warm | raw |" in (out / "table.md").read_text()
