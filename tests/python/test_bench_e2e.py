"""Smoke test of the end-to-end benchmark harness (bench/e2e.py,
bench/plot_e2e.py): a tiny dataset, one pass per loader, so it cannot rot.
No timings are asserted."""

import csv
import importlib.util
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("torchvision")
BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "bench")


def available_loaders():
    """Every registered loader this interpreter can run (peers: may be none)."""
    out = subprocess.run([sys.executable, f"{BENCH}/e2e.py", "list", "--available", "--names"],
                         check=True, capture_output=True, text=True).stdout
    return out.strip().split(",")


def test_harness_runs_every_loader(small_tree, tmp_path):
    # Results laid out as run_e2e.sh does: <outdir>/<dataset>-<storage>/e2e.
    work, out = str(tmp_path / "work"), str(tmp_path / "out" / "tiny-local-warm" / "e2e")
    cli = os.environ.get("UFSPACK_CLI")
    subprocess.run([sys.executable, f"{BENCH}/e2e.py", "prepare", small_tree, work]
                   + (["--ufspack-cli", cli] if cli else []), check=True, capture_output=True)
    prepared = json.load(open(os.path.join(work, "prepared.json")))
    assert prepared["samples"] == 24 and prepared["classes"] == ["class0", "class1", "class2"]
    run = subprocess.run([sys.executable, f"{BENCH}/e2e.py", "run", work, "--limit", "8",
                          "--workers", "0,2", "--storage", "local-warm", "--out", out],
                         check=True, capture_output=True, text=True)
    rows = list(csv.DictReader(open(out + ".csv")))
    loaders = {r["loader"] for r in rows}
    expected = available_loaders()
    assert {"imagefolder", "ufspack", "ufspack_numpy", "ufspack_batch", "tar"} <= set(expected)
    for loader in expected:
        assert loader in loaders, run.stdout
        for r in rows:
            if r["loader"] == loader:
                assert not r["error"], (loader, r["error"])
                assert int(r["samples"]) == 8, (loader, r)
                assert float(r["samples_per_s"]) > 0
    if importlib.util.find_spec("matplotlib"):
        plot = subprocess.run([sys.executable, f"{BENCH}/plot_e2e.py", str(tmp_path / "out"), "tiny"],
                              check=True, capture_output=True, text=True)
        pngs = [p for p in plot.stdout.split() if p.endswith(".png")]
        assert len(pngs) == 4 and all(os.path.getsize(p) > 1000 for p in pngs)
        assert all(os.path.basename(p).startswith("tiny-e2e-") for p in pngs)
        assert "### local-warm" in open(tmp_path / "out" / "tiny-tables.md").read()


def test_repeat_reports_the_median_and_spread(small_tree, tmp_path):
    work, out = str(tmp_path / "work"), str(tmp_path / "rep")
    subprocess.run([sys.executable, f"{BENCH}/e2e.py", "prepare", small_tree, work, "--no-peers"],
                   check=True, capture_output=True)
    subprocess.run([sys.executable, f"{BENCH}/e2e.py", "run", work, "--loaders", "ufspack_batch",
                    "--modes", "raw", "--workers", "0", "--repeat", "3", "--out", out],
                   check=True, capture_output=True, text=True)
    (row,) = list(csv.DictReader(open(out + ".csv")))
    assert row["repeats"] == "3" and int(row["samples"]) == 24
    lo, mid, hi = (float(row[k]) for k in ("samples_per_s_min", "samples_per_s", "samples_per_s_max"))
    assert 0 < lo <= mid <= hi


def test_memgrowth_harness(tmp_path):
    work, out = str(tmp_path / "mg"), str(tmp_path / "mgout" / "run")
    cli = os.environ.get("UFSPACK_CLI")
    subprocess.run([sys.executable, f"{BENCH}/memgrowth.py", "prepare", work, "--records", "300",
                    "--classes", "3"] + (["--ufspack-cli", cli] if cli else []),
                   check=True, capture_output=True)
    run = subprocess.run([sys.executable, f"{BENCH}/memgrowth.py", "run", work, "--workers", "2",
                          "--batch-size", "16", "--points", "3", "--out", out],
                         check=True, capture_output=True, text=True)
    results = json.load(open(out + ".json"))
    assert [r["loader"] for r in results] == ["imagefolder", "ufspack"]
    for r in results:
        assert r["records"] == 300 and r["samples"] == 300, run.stdout
        assert {p["worker"] for p in r["points"]} == {0, 1}
        assert r["points"][-1]["samples"] == 300
        assert all(p["private_dirty"] > 0 and p["rss"] >= p["uss"] for p in r["points"])
    rows = list(csv.DictReader(open(out + ".csv")))
    assert len(rows) == sum(len(r["points"]) for r in results)
    if importlib.util.find_spec("matplotlib"):
        plot = subprocess.run([sys.executable, f"{BENCH}/memgrowth.py", "plot", out],
                              check=True, capture_output=True, text=True)
        assert os.path.getsize(plot.stdout.strip()) > 1000
