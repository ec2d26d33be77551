"""Temporary credentials under DataLoader workers: a pack on an S3 emulator
that accepts only instance-metadata credentials expiring every 4 s, read by
8 forked DataLoader workers across two refresh periods: every read succeeds,
and each worker refreshes on its own at most once per period (no worker
reuses stale credentials, none hammers the metadata service).
tests/remote/credserver.py is the emulator (IMDSv2 + a SigV4-checking S3)."""

import json
import os
import subprocess
import sys
import time
import urllib.request

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
CREDSERVER = os.path.join(HERE, "..", "remote", "credserver.py")
WORKERS = 8

READER = r"""
import sys, time
import torch
import ufspack
pack = ufspack.Pack("s3://ufspack-test/pack")
n = len(pack)
sampler = torch.utils.data.RandomSampler(range(n), replacement=True, num_samples=64)
loader = torch.utils.data.DataLoader(pack, batch_size=None, sampler=sampler,
                                     num_workers=int(sys.argv[1]), persistent_workers=True)
start, reads = time.monotonic(), 0
while time.monotonic() - start < 5.0:
    for data in loader:
        assert isinstance(data, bytes) and data
        reads += 1
print(reads)
"""


@pytest.fixture
def emulator(small_pack, tmp_path):
    port_file = str(tmp_path / "port")
    obj = tmp_path / "object.bin"
    obj.write_bytes(b"x")
    proc = subprocess.Popen([sys.executable, CREDSERVER, "--object", str(obj), "--port-file", port_file,
                             "--pack", small_pack, "--lifetime", "4"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for _ in range(200):  # bounded: 10 s
            if os.path.exists(port_file):
                break
            time.sleep(0.05)
        else:
            pytest.fail("credserver.py did not start: " + proc.stderr.read().decode())
        with open(port_file) as f:
            yield json.loads(f.read())["url"]
    finally:
        proc.kill()
        proc.wait()


def test_forked_dataloader_workers_refresh_once_per_period(emulator, tmp_path):
    pytest.importorskip("torch")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({
        "HOME": str(tmp_path),  # no ~/.aws
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        "AWS_EC2_METADATA_SERVICE_ENDPOINT": emulator,
        "AWS_ENDPOINT_URL": emulator,
        "AWS_REGION": "us-east-1",
    })
    r = subprocess.run([sys.executable, "-c", READER, str(WORKERS)], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert int(r.stdout.strip()) > 0
    with urllib.request.urlopen(emulator + "/control/log", timeout=10) as f:
        log = json.loads(f.read())
    counts = log["counts"]
    assert counts.get("s3_denied", 0) == 0 and not log["failures"], log
    fetched = counts.get("imds_credentials", 0)
    print(f"reads {r.stdout.strip()}, IMDS credential fetches {fetched}, counts {counts}")
    # The parent's fetch, then each worker's own refreshes: 5 s of 4-second
    # credentials refreshed at half-life is 1 to 3 per worker.
    assert 1 + WORKERS <= fetched <= 1 + 3 * WORKERS, counts
    # No secret in anything the reader printed.
    assert "TOKEN" not in r.stdout + r.stderr and "ASIA" not in r.stdout + r.stderr
