"""bench/transform_psnr.py --smoke: fast_transforms="exact" equals torchvision
bit for bit, and fast_transforms=True (DCT scaling) stays close to it."""

import importlib.util
import os
import sys

import pytest

pytest.importorskip("torchvision")
SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "transform_psnr.py")


def load_bench():
    # Run as a script, bench/ is on sys.path; loaded as a module, put it there
    # (the script imports bench/benchlib.py).
    bench = os.path.dirname(os.path.abspath(SCRIPT))
    if bench not in sys.path:
        sys.path.insert(0, bench)
    spec = importlib.util.spec_from_file_location("transform_psnr", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_smoke_exact_is_identical_and_fast_is_close(tmp_path, capsys):
    summary = load_bench().main(["--smoke", "--out", str(tmp_path), "--workdir", str(tmp_path / "work")])
    results = {r["transform"]: r for r in summary["results"]}
    assert set(results) == {"train", "val"}
    for name, r in results.items():
        assert r["samples"] == 8, name
        assert r["exact_mismatches"] == 0, name
        assert r["rng_drift"] == 0, name  # every path draws as much from torch's RNG
        assert r["unexplained"] == 0, name  # only DCT-scaled samples differ
        assert r["psnr_all_capped"]["min"] >= 30.0, (name, r["non_identical"])
    # The 1000x750 images are DCT-scaled by Resize(256) (1/2), so the fast
    # path's difference is measured, not vacuous.
    assert results["val"]["dct_scaled"] == 4
    assert results["val"]["identical"] < 8
    assert (tmp_path / "smoke.json").exists()
    assert "| smoke | val |" in capsys.readouterr().out
