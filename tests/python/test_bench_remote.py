"""Smoke test of the object-storage benchmark (bench/remote_bench.py --smoke):
a tiny generated tree on a real SeaweedFS server, every loader the peers venv
can run, one pass through the logging proxy, so the harness cannot rot.  No
timing is asserted; what is asserted is what the harness reports about
requests and bytes.

Needs the venv of scripts/s3-test-env.sh (SeaweedFS; skipped when pip cannot
install it) and the peers venv of bench/install-peers.sh (boto3 and the
peers; $UFSPACK_PEERS_VENV, default <source>/build/peers-venv; skipped when
absent), run with this build's ufspack module on PYTHONPATH."""

import json
import os
import subprocess

import pytest

import ufspack
from conftest import UNDER_ASAN
from s3fixture import s3_venv

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.dirname(os.path.dirname(HERE))
BENCH = os.path.join(SOURCE_DIR, "bench", "remote_bench.py")


def peers_python():
    venv = os.environ.get("UFSPACK_PEERS_VENV", os.path.join(SOURCE_DIR, "build", "peers-venv"))
    py = os.path.join(venv, "bin", "python")
    if not os.access(py, os.X_OK):
        pytest.skip(f"no peers venv at {venv} (bash bench/install-peers.sh {venv})")
    if subprocess.run([py, "-c", "import boto3"], capture_output=True).returncode != 0:
        pytest.skip(f"{venv} has no boto3 (bash bench/install-peers.sh {venv})")
    return py


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    if UNDER_ASAN:
        # scripts/sanitize.sh's Python-on-ASan run: the harness (seven
        # loaders, a server, a proxy) runs past any sane timeout there, and
        # the plain suite runs it; the remote code under ASan is covered by
        # s3_test, remote_test and test_remote.py.
        pytest.skip("bench smoke test: plain suite only (too slow under ASan)")
    py = peers_python()
    venv = s3_venv()
    tmp = tmp_path_factory.mktemp("remote_bench")
    env = dict(os.environ, UFSPACK_S3_VENV=venv,
               PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(ufspack.__file__))))
    p = subprocess.run([py, BENCH, "--smoke", "--work", str(tmp / "work"), "--out", str(tmp / "out")],
                       env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.load(open(tmp / "out" / "results.json"))
    res["table"] = open(tmp / "out" / "table.md").read()
    return res


def test_every_available_loader_ran(results):
    assert results["records"] == 96
    for name, r in results["summary"].items():
        assert not r["error"], (name, r["error"])
        assert r["samples"] == 96, name
        for k in ("ttfb_s", "epoch1_samples_s", "epoch2_samples_s"):
            assert r[k] > 0, (name, k)
        assert f"| {name} |" in results["table"]
    assert {"ufspack", "ufspack_cache", "ufspack_local"} <= set(results["summary"])


def test_ufspack_requests_and_bytes(results):
    s = results["summary"]
    # One ranged GET per record or fewer (neighbours coalesced), plus the two opening probes,
    # counted by the proxy and by ufspack itself.
    for name in ("ufspack", "ufspack_cache"):
        assert 0 < s[name]["requests_per_sample"] <= 1.0 + 3 / 96, (name, s[name])
        assert s[name]["bytes_over_record"] < 1.5, (name, s[name])
    assert s["ufspack"]["ufspack_requests_per_sample_e1"] <= 1.0
    # Epoch 2 of the cached run never reaches the server for records.
    assert s["ufspack_cache"]["ufspack_requests_e2"] <= 2
    assert s["ufspack_cache"]["disk_peak_bytes"] > 0
    assert s["ufspack"]["disk_peak_bytes"] == 0


def test_peers_are_counted(results):
    for name, r in results["summary"].items():
        if name.startswith("ufspack"):
            continue
        assert r["requests_per_sample"] > 0, name
        assert r["bytes_over_record"] >= 0.9, (name, r)
