"""The S3 test servers and their proxy (s3fixture.py, tests/remote/s3server.py):
what the remote-pack tests rely on, checked against the real servers."""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import subprocess
import tempfile
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import pytest

from conftest import UNDER_ASAN

if TYPE_CHECKING:
    from s3fixture import S3Server

# The fixtures s3_server and moto_server (not imported here: pytest loads the
# module as a plugin, and an earlier import would stop it rewriting asserts).
pytest_plugins = ["s3fixture"]

# These test the fixture (the proxy, the servers' start and stop), not
# ufspack's native code: the plain suite runs them, the ASan pass
# (scripts/sanitize.sh pyasan, libasan preloaded) leaves them out.
pytestmark = pytest.mark.skipif(
    UNDER_ASAN,
    reason="tests the S3 fixture, no ufspack native code: plain suite only",
)

DATA = bytes(range(256)) * 40  # 10240 bytes, every offset distinguishable


@pytest.fixture(params=["seaweedfs", "moto"])
def server(request: pytest.FixtureRequest) -> S3Server:
    return request.getfixturevalue("s3_server" if request.param == "seaweedfs" else "moto_server")


def _raw_get(server: S3Server, key: str) -> http.client.HTTPResponse:
    """A signed GET through the proxy whose response the caller reads."""
    path = f"/{server.bucket}/{key}"
    conn = server.connection(via_proxy=True, timeout=10)
    conn.request("GET", path, headers=server.signed_headers("GET", path, via_proxy=True))
    return conn.getresponse()


def test_boto3_reads_what_the_signer_wrote_and_back(s3_server: S3Server) -> None:
    etag = s3_server.put("fixture/roundtrip/a.bin", DATA)
    out = s3_server.boto3(
        "import hashlib\n"
        "o = s3.get_object(Bucket=bucket, Key='fixture/roundtrip/a.bin')\n"
        "print(o['ETag'], hashlib.sha256(o['Body'].read()).hexdigest())\n"
        "s3.put_object(Bucket=bucket, Key='fixture/roundtrip/b.bin', Body=b'from boto3')\n"
    )
    assert out.split() == [etag, hashlib.sha256(DATA).hexdigest()]
    r = s3_server.get("fixture/roundtrip/b.bin", via_proxy=True)
    assert (r.status, r.body) == (200, b"from boto3")


def test_boto3_through_the_proxy(server: S3Server) -> None:
    # SigV4 covers Host: boto3 signs for the proxy's host:port, the proxy
    # forwards Host unchanged, and the server accepts it.
    server.put("fixture/sdk/c.bin", DATA)
    out = server.boto3(
        "r = s3.get_object(Bucket=bucket, Key='fixture/sdk/c.bin', Range='bytes=100-199')\n"
        "print(r['ResponseMetadata']['HTTPStatusCode'], r['ContentRange'],"
        " r['Body'].read() == bytes(range(100, 200)))\n",
        via_proxy=True,
    )
    assert out.split() == ["206", "bytes", "100-199/10240", "True"]
    assert [(e["method"], e["range"], e["status"]) for e in server.log()][-1] == ("GET", "bytes=100-199", 206)


def test_ranged_get_is_206_with_exact_bytes(server: S3Server) -> None:
    server.put("fixture/range/d.bin", DATA)
    for via_proxy in (False, True):
        r = server.get("fixture/range/d.bin", range="bytes=1000-1999", via_proxy=via_proxy)
        assert r.status == 206
        assert r.header("Content-Range") == "bytes 1000-1999/10240"
        assert r.body == DATA[1000:2000]
        assert r.header("ETag") == server.request("HEAD", "fixture/range/d.bin").header("ETag")


def test_documented_edge_cases(server: S3Server) -> None:
    server.put("fixture/edge/e.bin", DATA)
    assert server.get("fixture/edge/e.bin", range="bytes=10240-20000", via_proxy=True).status == 416
    tail = server.get("fixture/edge/e.bin", range="bytes=10000-20000", via_proxy=True)
    assert (tail.status, tail.header("Content-Range"), tail.body) == (206, "bytes 10000-10239/10240", DATA[10000:])
    r = server.request("GET", "fixture/edge/e.bin", headers={"If-Match": '"0000"', "Range": "bytes=0-9"})
    assert r.status == 412 and b"<Code>PreconditionFailed</Code>" in r.body
    assert server.request("HEAD", "fixture/edge/missing").status == 404
    assert server.request("GET", "fixture/edge/e.bin", sign=False).status == 403
    bad = server.request("GET", "fixture/edge/e.bin", secret_key="not-the-secret", via_proxy=True)
    if server.kind == "seaweedfs":
        assert bad.status == 403 and b"<Code>SignatureDoesNotMatch</Code>" in bad.body
    else:  # moto checks no signature
        assert bad.status == 200
    port = urlsplit(server.endpoint).port
    vhost = server.request(
        "GET", "fixture/edge/e.bin", bucket="", host=f"{server.bucket}.localhost:{port}", headers={"Range": "bytes=0-3"}
    )
    assert (vhost.status, vhost.body) == (206, DATA[:4])
    unsigned = server.request("GET", "fixture/edge/e.bin", unsigned_payload=True, headers={"Range": "bytes=1-2"})
    assert (unsigned.status, unsigned.body) == (206, DATA[1:3])


def test_injected_503_is_seen_once_then_the_real_response(moto_server: S3Server) -> None:
    moto_server.put("fixture/fault/f.bin", DATA)
    pending = moto_server.faults({"method": "GET", "path": "fault/f.bin", "status": 503})
    assert [(r["status"], r["count"], r["action"]) for r in pending] == [(503, 1, "status")]
    first = moto_server.get("fixture/fault/f.bin", range="bytes=0-9", via_proxy=True)
    assert first.status == 503 and b"<Code>SlowDown</Code>" in first.body
    second = moto_server.get("fixture/fault/f.bin", range="bytes=0-9", via_proxy=True)
    assert (second.status, second.body) == (206, DATA[:10])
    assert [(e["status"], e["fault"]) for e in moto_server.log()][-2:] == [(503, "status"), (206, None)]


def test_rules_match_method_and_path_and_count(s3_server: S3Server) -> None:
    s3_server.put("fixture/match/g.bin", DATA)
    s3_server.faults(
        [
            {"method": "HEAD", "path": "match/g.bin", "status": 500, "count": 2},
            {"path": "no/such/path", "status": 404},
        ]
    )
    assert s3_server.get("fixture/match/g.bin", via_proxy=True).status == 200  # GET: not matched
    statuses = [s3_server.request("HEAD", "fixture/match/g.bin", via_proxy=True).status for _ in range(3)]
    assert statuses == [500, 500, 200]
    pending = s3_server.faults([])
    assert [r["path"] for r in pending] == ["no/such/path"]


def test_dropped_connection(moto_server: S3Server) -> None:
    moto_server.put("fixture/drop/h.bin", DATA)
    moto_server.faults({"method": "GET", "path": "drop/h.bin", "action": "drop"})
    with pytest.raises((http.client.RemoteDisconnected, ConnectionResetError)):
        _raw_get(moto_server, "fixture/drop/h.bin")
    assert moto_server.get("fixture/drop/h.bin", via_proxy=True).body == DATA
    entry = [e for e in moto_server.log() if e["fault"] == "drop"][0]
    assert (entry["status"], entry["bytes"]) == (None, 0)


def test_truncated_body_keeps_the_full_content_length(s3_server: S3Server) -> None:
    s3_server.put("fixture/trunc/i.bin", DATA)
    s3_server.faults({"method": "GET", "path": "trunc/i.bin", "action": "truncate", "after_bytes": 1000})
    resp = _raw_get(s3_server, "fixture/trunc/i.bin")
    assert resp.status == 200 and resp.getheader("Content-Length") == str(len(DATA))
    with pytest.raises(http.client.IncompleteRead) as e:
        resp.read()
    assert e.value.partial == DATA[:1000]
    entry = s3_server.log()[-1]
    assert (entry["fault"], entry["bytes"], entry["content_length"]) == ("truncate", 1000, len(DATA))


def test_delay(moto_server: S3Server) -> None:
    moto_server.put("fixture/delay/j.bin", b"x")
    moto_server.faults({"path": "delay/j.bin", "delay_ms": 300})
    assert moto_server.get("fixture/delay/j.bin", via_proxy=True).body == b"x"
    assert moto_server.log()[-1]["ms"] >= 300


def test_log_records_range_status_bytes_and_connection_reuse(moto_server: S3Server) -> None:
    moto_server.put("fixture/log/k.bin", DATA)
    conn = moto_server.connection(via_proxy=True, timeout=10)
    path = f"/{moto_server.bucket}/fixture/log/k.bin"
    for rng, expected in (("bytes=0-99", DATA[:100]), ("bytes=5000-5999", DATA[5000:6000])):
        headers = moto_server.signed_headers("GET", path, headers={"Range": rng}, via_proxy=True)
        conn.request("GET", path, headers=headers)
        assert conn.getresponse().read() == expected
    conn.close()
    log = moto_server.log()
    gets = [e for e in log if e["method"] == "GET"]
    assert [(e["path"], e["range"], e["status"], e["bytes"]) for e in gets] == [
        (path, "bytes=0-99", 206, 100),
        (path, "bytes=5000-5999", 206, 1000),
    ]
    # moto closes every connection; the proxy keeps the client's open.
    assert gets[0]["conn"] == gets[1]["conn"]
    with open(os.path.join(moto_server.dir, "proxy-requests.jsonl")) as f:
        on_disk = [json.loads(line) for line in f]
    assert on_disk[-1]["seq"] == log[-1]["seq"] and on_disk[-1]["range"] == "bytes=5000-5999"


def test_bad_rule_is_refused(moto_server: S3Server) -> None:
    with pytest.raises(AssertionError, match="unknown rule keys"):
        moto_server.faults({"status": 503, "cuont": 2})


def test_failed_start_leaves_no_process_and_no_state(moto_server: S3Server) -> None:
    python, launcher = moto_server.venv_python, moto_server.launcher
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, UFSPACK_WEED="/bin/false")
        p = subprocess.run(
            [python, launcher, "start", "--kind", "seaweedfs", "--dir", d, "--proxy"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert p.returncode == 1 and "server exited with status 1" in p.stderr
        assert p.stdout == ""
        assert not os.path.exists(os.path.join(d, "s3server-state.json"))


def test_stop_ends_the_process_groups(moto_server: S3Server) -> None:
    python, launcher = moto_server.venv_python, moto_server.launcher
    with tempfile.TemporaryDirectory() as d:
        p = subprocess.run(
            [python, launcher, "start", "--kind", "moto", "--dir", d, "--proxy"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert p.returncode == 0, p.stderr
        info = json.loads(p.stdout)
        pids = [info["pid"], info["proxy_pid"]]
        assert all(os.getpgid(pid) == pid for pid in pids)  # each leads its own group
        subprocess.run([python, launcher, "stop", "--dir", d], check=True, timeout=60)
        for pid in pids:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    assert f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
            except FileNotFoundError:
                pass
        assert not os.path.exists(os.path.join(d, "s3server-state.json"))


def test_seaweedfs_sizing_options_reach_the_server() -> None:
    # --chunk-mb (weed's -filer.maxMB) decides how many chunks an object is
    # stored in, which bench/remote_bench.py sets; a ranged GET across a chunk
    # boundary still returns the exact bytes.
    from s3fixture import start_server

    server = start_server("seaweedfs", proxy=False, extra=["--chunk-mb", "1", "--volume-mb", "8", "--volumes", "4"])
    try:
        data = hashlib.sha256(b"seed").digest() * (3 << 15)  # 3 MiB
        server.put("fixture/sizing/big.bin", data)
        with open(os.path.join(server.dir, "s3server-state.json")) as f:
            state = json.load(f)
        assert "-volume.max=4" in state["seaweedfs_argv"] and "-master.volumeSizeLimitMB=8" in state["seaweedfs_argv"]
        filer = state["seaweedfs_ports"]["filer.port"]
        conn = http.client.HTTPConnection("127.0.0.1", filer, timeout=30)
        conn.request("GET", f"/buckets/{server.bucket}/fixture/sizing/big.bin?metadata=true")
        chunks = json.loads(conn.getresponse().read())["chunks"]
        assert [c["size"] for c in chunks] == [1 << 20] * 3
        mib = 1 << 20
        r = server.get("fixture/sizing/big.bin", range=f"bytes={mib - 100}-{mib + 99}")
        assert r.status == 206 and r.body == data[mib - 100 : mib + 100]
    finally:
        server.stop()


def test_bad_bucket_name_is_refused_before_starting(moto_server: S3Server) -> None:
    python, launcher = moto_server.venv_python, moto_server.launcher
    with tempfile.TemporaryDirectory() as d:
        p = subprocess.run(
            [python, launcher, "start", "--kind", "seaweedfs", "--dir", d, "--bucket", "ab"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert p.returncode == 2 and "bucket name 'ab': expected 3-63 characters" in p.stderr, p.stderr
        assert p.stdout == "" and not os.path.exists(os.path.join(d, "s3server-state.json"))
