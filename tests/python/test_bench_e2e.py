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


def available(loader):
    need = {"imagefolder_cv2": "cv2", "imagefolder_imdecode": "cv2", "lmdb": "lmdb", "hdf5": "h5py"}
    mod = need.get(loader)
    return mod is None or importlib.util.find_spec(mod) is not None


def test_harness_runs_every_loader(small_tree, tmp_path):
    work, out = str(tmp_path / "work"), str(tmp_path / "out" / "local")
    cli = os.environ.get("UFSPACK_CLI")
    subprocess.run([sys.executable, f"{BENCH}/e2e.py", "prepare", small_tree, work]
                   + (["--ufspack-cli", cli] if cli else []), check=True, capture_output=True)
    prepared = json.load(open(os.path.join(work, "prepared.json")))
    assert prepared["samples"] == 24 and prepared["classes"] == ["class0", "class1", "class2"]
    run = subprocess.run([sys.executable, f"{BENCH}/e2e.py", "run", work, "--limit", "8",
                          "--workers", "0,2", "--out", out],
                         check=True, capture_output=True, text=True)
    rows = list(csv.DictReader(open(out + ".csv")))
    loaders = {r["loader"] for r in rows}
    for loader in ["imagefolder", "imagefolder_cv2", "imagefolder_imdecode", "ufspack",
                   "ufspack_numpy", "lmdb", "tar", "hdf5"]:
        if not available(loader):
            continue
        assert loader in loaders, run.stdout
        for r in rows:
            if r["loader"] == loader:
                assert not r["error"], (loader, r["error"])
                assert int(r["samples"]) == 8, (loader, r)
                assert float(r["samples_per_s"]) > 0
    if importlib.util.find_spec("matplotlib"):
        plot = subprocess.run([sys.executable, f"{BENCH}/plot_e2e.py", str(tmp_path / "out")],
                              check=True, capture_output=True, text=True)
        pngs = [p for p in plot.stdout.split() if p.endswith(".png")]
        assert len(pngs) == 4 and all(os.path.getsize(p) > 1000 for p in pngs)
