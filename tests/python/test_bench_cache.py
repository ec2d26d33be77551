"""Smoke test of the node-local cache benchmark (bench/cache_bench.py --smoke):
a small generated tree, the local directory in place of the slow FS, one run
of each measurement, so the harness cannot rot.  No timing is asserted beyond
being positive; what is asserted is what the harness reports about bytes."""

import json
import os
import subprocess
import sys

import pytest

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "bench")


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    pytest.importorskip("torchvision")
    tmp = tmp_path_factory.mktemp("cache_bench")
    out = tmp / "out"
    subprocess.run([sys.executable, f"{BENCH}/cache_bench.py", "--smoke", "--work", str(tmp / "work"),
                    "--out", str(out)], check=True, capture_output=True, text=True, timeout=300)
    return json.load(open(out / "results.json"))


def test_every_measurement_ran(results):
    for key in ("link_seq", "warmup", "cached_batched", "local_batched", "imagefolder",
                "cold_nocache", "cold_cache"):
        assert results[key]["median"] > 0, key
    assert results["warmup"]["cli"]["records"] == results["records"]
    assert results["warmup"]["cli"]["added"] == results["records"]
    for key, value in results["ratios"].items():
        assert value > 0, key


def test_two_jobs_share_one_copy_and_see_the_same_bytes(results):
    two = results["two_jobs"]
    assert two["same_bytes_as_without_cache"] is True
    # One copy of the data (plus the index copy and table overhead), never two.
    assert 1.0 <= two["copies"] < 1.9, two
    assert all(p > 0 for p in two["pss_kib"])


def test_decoded_tier_is_measured(results):
    d = results["decoded"]
    assert "skipped" not in d, d
    assert d["epoch1_samples_s"] > 0 and d["epoch2_samples_s"] > 0
