"""Temporary credentials under DataLoader workers: a pack on an S3 emulator
that accepts only instance-metadata credentials expiring every 4 s, read by
8 forked DataLoader workers across two refresh periods: every read succeeds,
and each worker refreshes on its own at most once per period (no worker
reuses stale credentials, none hammers the metadata service).
tests/remote/credserver.py is the emulator (IMDSv2 + a SigV4-checking S3).
Also: a credential or token holding CR LF never smuggles a header line
onto the wire (issue 41); the emulator counts any that arrives."""

import contextlib
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


@contextlib.contextmanager
def credserver(small_pack, d, lifetime):
    """credserver.py serving small_pack from directory `d`, credentials
    valid `lifetime` seconds; yields its URL."""
    port_file = str(d / "port")
    (d / "object.bin").write_bytes(b"x")
    proc = subprocess.Popen([sys.executable, CREDSERVER, "--object", str(d / "object.bin"),
                             "--port-file", port_file, "--pack", small_pack,
                             "--lifetime", str(lifetime)],
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


@pytest.fixture
def emulator(small_pack, tmp_path):
    with credserver(small_pack, tmp_path, lifetime=4) as url:
        yield url


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


# --- header injection: a credential with CR LF must never reach the wire

INJECTION = "\r\nX-Injected: yes"
SECRET = "PLANTEDsecretKEY0123456789abcdef"
TOKEN = "PLANTEDsessionTOKEN0123456789"


@pytest.fixture(scope="module")
def injection_server(small_pack, tmp_path_factory):
    """credserver.py serving small_pack, which counts every request that
    arrives with an X-Injected header."""
    with credserver(small_pack, tmp_path_factory.mktemp("injection"), lifetime=600) as url:
        yield url


def _server(url, path, body=None):
    with urllib.request.urlopen(url + path, data=body, timeout=10) as f:
        return f.read()


def _process(tmp_path, doc):
    """A credential_process script printing `doc` as JSON; its config file."""
    script = tmp_path / "cred-proc.sh"
    script.write_text("#!/bin/sh\ncat <<'EOF'\n" + json.dumps(doc) + "\nEOF\n")
    script.chmod(0o755)
    config = tmp_path / "config"
    config.write_text(f"[profile work]\ncredential_process = {script}\n")
    return {"AWS_CONFIG_FILE": str(config), "AWS_PROFILE": "work"}


# (case, the provider and field the error must name, the environment)
CASES = [
    ("process-access-key-id", "credential_process of profile 'work'", "AccessKeyId",
     lambda url, tmp: _process(tmp, {"Version": 1, "AccessKeyId": "AKIDPROC" + INJECTION,
                                     "SecretAccessKey": SECRET})),
    ("process-session-token", "credential_process of profile 'work'", "SessionToken",
     lambda url, tmp: _process(tmp, {"Version": 1, "AccessKeyId": "AKIDPROC",
                                     "SecretAccessKey": SECRET, "SessionToken": TOKEN + INJECTION})),
    ("environment", "environment", "SessionToken",
     lambda url, tmp: {"AWS_ACCESS_KEY_ID": "AKIDENV", "AWS_SECRET_ACCESS_KEY": SECRET,
                       "AWS_SESSION_TOKEN": TOKEN + INJECTION}),
    ("container-token", "container credentials (", "AWS_CONTAINER_AUTHORIZATION_TOKEN",
     lambda url, tmp: {"AWS_CONTAINER_CREDENTIALS_FULL_URI": url + "/container/creds",
                       "AWS_CONTAINER_AUTHORIZATION_TOKEN": TOKEN + INJECTION}),
    ("imds-token", "EC2 instance metadata (IMDSv2, ", "session token (PUT /latest/api/token)",
     lambda url, tmp: {"AWS_EC2_METADATA_DISABLED": "false",
                       "AWS_EC2_METADATA_SERVICE_ENDPOINT": url}),
]


@pytest.mark.parametrize("case,provider,field,settings", CASES, ids=[c[0] for c in CASES])
def test_credential_with_crlf_is_refused_naming_the_provider(
        injection_server, tmp_path, monkeypatch, case, provider, field, settings):
    """Opening an s3:// pack whose credentials (or the token that fetches
    them) hold CR LF "X-Injected: yes" raises ValueError naming the
    provider and field, never the value, and the server never sees an
    X-Injected header (in this process: os.environ is what ufspack reads)."""
    ufspack = pytest.importorskip("ufspack")
    for k in list(os.environ):
        if k.startswith("AWS_"):
            monkeypatch.delenv(k)
    env = {
        "HOME": str(tmp_path),  # no ~/.aws
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_ENDPOINT_URL": injection_server,
        "AWS_REGION": "us-east-1",
    }
    env.update(settings(injection_server, tmp_path))
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    _server(injection_server, "/control/mode", b"inject-token" if case == "imds-token" else b"ok")
    with pytest.raises(ValueError) as e:
        ufspack.Pack("s3://ufspack-test/pack", cache=False)
    msg = str(e.value)
    assert provider in msg and field + ": expected no control characters" in msg, msg
    assert "X-Injected" not in msg and TOKEN not in msg and SECRET not in msg, msg
    assert json.loads(_server(injection_server, "/control/log"))["counts"].get("injected", 0) == 0
