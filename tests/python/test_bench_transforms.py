"""Smoke test of the fused decode + augmentation benchmark (bench/transform_bench.py
--smoke): a tiny generated tree, one repeat per row, so the harness cannot rot.
Every row runs or says why not; no timings are asserted beyond being positive."""

import csv
import inspect
import json
import os
import subprocess
import sys

import pytest

import ufspack

pytest.importorskip("torchvision")
BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "bench")
FAST = "fast_transforms" in inspect.signature(ufspack.MyImageFolder.__init__).parameters


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("transforms")
    out = str(tmp / "results" / "transforms-local-warm" / "smoke")
    run = subprocess.run([sys.executable, f"{BENCH}/transform_bench.py", "--smoke", "--work", str(tmp / "work"),
                          "--out", out], check=True, capture_output=True, text=True, timeout=120)
    return json.load(open(out + ".json")), list(csv.DictReader(open(out + ".csv"))), run.stdout, out


def test_every_row_runs_or_says_why(smoke):
    results, _, _, _ = smoke
    for r in results["rows"]:
        s = r["status"]
        assert s == "ok" or s == "n/a" or s.startswith(("skipped: ", "not available: ")), r
        if s == "ok":
            assert r["img_s"] > 0 and r["img_s_min"] <= r["img_s"] <= r["img_s_max"], r
        if s.startswith("skipped: "):
            assert s.endswith(" not installed"), r


def test_baselines_and_ufspack_rows_are_measured(smoke):
    results, _, _, _ = smoke
    got = {(r["transform"], r["mode"], r["row"]): r for r in results["rows"]}
    expected = [(t, "1 core", row) for t in ("train", "val", "totensor") for row in ("imagefolder", "exact")]
    expected += [(t, "2 workers", row) for t in ("train", "val") for row in ("imagefolder", "exact")]
    expected += [("decode", "1 core", "pil_decode"), ("decode", "1 core", "ufspack_decode")]
    for key in expected:
        assert got[key]["status"] == "ok", got[key]
        assert got[key]["ratio"] > 0, got[key]
    for key, r in got.items():
        if key[2].startswith("fast") and r["status"] != "n/a":
            assert (r["status"] == "ok") == FAST, r
            if FAST:
                assert r["note"].startswith("fast_plan: "), r
    assert set(results["meta"]["datasets"]) == {"tiny"}
    assert results["meta"]["environment"]["fast_transforms"] == FAST


def test_csv_matches_json_and_markdown_is_printed(smoke):
    results, rows, stdout, out = smoke
    assert len(rows) == len(results["rows"])
    assert list(rows[0]) == ["dataset", "transform", "mode", "row", "status", "img_s", "img_s_min", "img_s_max",
                             "ratio", "samples", "warmup", "repeats", "note"]
    for c, j in zip(rows, results["rows"]):
        assert (c["row"], c["status"]) == (j["row"], j["status"])
        if c["status"] == "ok":
            assert float(c["img_s"]) > 0
    assert "#### tiny:" in stdout
    assert "| ImageFolder (PIL) |" in stdout and "| MyImageFolder exact |" in stdout
    assert results["meta"]["complete"] is True
    table = subprocess.run([sys.executable, f"{BENCH}/transform_bench.py", "--table", out + ".json"],
                           check=True, capture_output=True, text=True).stdout
    assert table == stdout


def test_markdown_reports_batch_scaling():
    # The fast rows cannot run where MyImageFolder lacks fast_transforms: the
    # table code gets made-up results instead.
    sys.path.insert(0, BENCH)
    try:
        import transform_bench as tb
    finally:
        sys.path.remove(BENCH)
    rows = [{"dataset": "d", "transform": "train", "mode": "1 core", "row": name, "label": name, "status": "ok",
             "img_s": rate, "repeats": 3, "load1": 1.0}
            for name, rate in (("imagefolder", 100.0), ("fast_batch1", 300.0), ("fast_batch2", 540.0))]
    tb.add_ratios(rows)
    scaling = tb.batch_scaling(rows)
    assert scaling == {"d/train": pytest.approx(1.8)}
    text = tb.markdown(rows, {"d": {"images": 10, "describe": "x", "mean_kb": 1}}, scaling)
    assert "| fast_batch2 | 540 (5.40x) |" in text
    assert "fast batched, decode_threads=2 / 1: train 1.80x" in text
