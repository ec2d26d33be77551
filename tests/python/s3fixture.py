"""pytest fixtures: real S3 servers on loopback (SeaweedFS, moto) behind the
fault-injecting proxy of tests/remote/s3server.py.

    pytest_plugins = ["s3fixture"]  # in the test module, which need not import it

    def test_ranged_read(s3_server):
        s3_server.put("p/data.ufs", b"0123456789")
        r = s3_server.get("p/data.ufs", range="bytes=2-4", via_proxy=True)
        assert (r.status, r.body) == (206, b"234")

``s3_server`` is SeaweedFS (it checks signatures), ``moto_server`` is moto
(it checks none); both have the proxy.  The servers live for the whole pytest
session; each test that asks for a fixture gets the proxy's fault rules and
request log reset first.  Test keys should carry a prefix of their own (the
bucket is shared).

The venv the servers run from comes from scripts/s3-test-env.sh, run once per
session: at $UFSPACK_S3_VENV if set, else ${BUILD_DIR:-build}/s3-venv in the
source tree.  Tests are skipped only when that script cannot install the
packages (its exit status 77: PyPI unreachable); any other failure is an error.

Requests are made here with http.client and a small SigV4 signer (this
process has no boto3); ``S3Server.boto3(code)`` runs code with the venv's
boto3, for checks against the real SDK.
"""

from __future__ import annotations

import atexit
import datetime
import hashlib
import hmac
import http.client
import json
import os
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Mapping, Optional, Tuple
from urllib.parse import quote, urlsplit

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.dirname(os.path.dirname(HERE))
ENV_SCRIPT = os.path.join(SOURCE_DIR, "scripts", "s3-test-env.sh")
LAUNCHER = os.path.join(SOURCE_DIR, "tests", "remote", "s3server.py")
SKIP_STATUS = 77


# --- SigV4 --------------------------------------------------------------------

UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"


def _hmac(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def sigv4_headers(
    method: str,
    host: str,
    path: str,
    query: Mapping[str, str],
    headers: Mapping[str, str],
    payload_hash: str,
    access_key: str,
    secret_key: str,
    region: str,
    now: Optional[datetime.datetime] = None,
) -> Dict[str, str]:
    """The headers that sign a request with AWS Signature Version 4 (service
    s3): host, x-amz-date, x-amz-content-sha256 and Authorization, covering
    those and every x-amz-* / range header given.  path is the request path
    exactly as sent (already percent-encoded)."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    amz_date = now.strftime("%Y%m%dT%H%M%SZ")
    day = amz_date[:8]
    signed = {k.lower(): " ".join(str(v).split()) for k, v in headers.items()}
    signed = {k: v for k, v in signed.items() if k.startswith("x-amz-") or k in ("range", "content-md5")}
    signed.update({"host": host, "x-amz-date": amz_date, "x-amz-content-sha256": payload_hash})
    names = sorted(signed)
    canonical_query = "&".join(
        f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in sorted(query.items())
    )
    canonical = "\n".join(
        [method, path, canonical_query, "".join(f"{n}:{signed[n]}\n" for n in names), ";".join(names), payload_hash]
    )
    scope = f"{day}/{region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = _hmac(_hmac(_hmac(_hmac(("AWS4" + secret_key).encode(), day), region), "s3"), "aws4_request")
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    return {
        "Host": host,
        "x-amz-date": amz_date,
        "x-amz-content-sha256": payload_hash,
        "Authorization": (
            f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, SignedHeaders={';'.join(names)}, Signature={signature}"
        ),
    }


class Response:
    """status, headers (case-insensitive lookup via .header()), body."""

    def __init__(self, status: int, headers: List[Tuple[str, str]], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def header(self, name: str) -> Optional[str]:
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return None

    def __repr__(self) -> str:
        return f"Response({self.status}, {self.headers!r}, {self.body[:200]!r})"


# --- servers ------------------------------------------------------------------


class S3Server:
    """A server started by s3server.py: its JSON line's fields as attributes
    (endpoint, access_key, secret_key, region, kind, proxy, proxy_control,
    buckets, dir, ...) plus bucket (the first), venv_python, and helpers."""

    def __init__(self, info: Dict[str, Any], venv_python: str) -> None:
        self.info = info
        self.venv_python = venv_python
        self.endpoint: str = info["endpoint"]
        self.access_key: str = info["access_key"]
        self.secret_key: str = info["secret_key"]
        self.region: str = info["region"]
        self.kind: str = info["kind"]
        self.buckets: List[str] = info["buckets"]
        self.bucket: str = self.buckets[0]
        self.proxy: Optional[str] = info["proxy"]
        self.proxy_control: Optional[str] = info["proxy_control"]
        self.dir: str = info["dir"]
        self.pid: int = info["pid"]
        self.launcher = LAUNCHER
        self._stopped = False

    # --- raw requests

    def connection(self, *, via_proxy: bool = False, timeout: float = 30.0) -> http.client.HTTPConnection:
        """A new (unconnected) HTTP/1.1 connection to the server or its proxy."""
        u = urlsplit(self._base(via_proxy))
        return http.client.HTTPConnection(u.hostname or "127.0.0.1", u.port or 80, timeout=timeout)

    def signed_headers(
        self,
        method: str,
        path: str,
        *,
        headers: Optional[Mapping[str, str]] = None,
        via_proxy: bool = False,
        payload_hash: str = UNSIGNED_PAYLOAD,
    ) -> Dict[str, str]:
        """headers plus the SigV4 ones for a request to path (as sent, no
        query) on the server or its proxy."""
        host = urlsplit(self._base(via_proxy)).netloc
        hdrs = dict(headers or {})
        hdrs.update(
            sigv4_headers(
                method, host, path, {}, hdrs, payload_hash, self.access_key, self.secret_key, self.region
            )
        )
        return hdrs

    def _base(self, via_proxy: bool) -> str:
        if not via_proxy:
            return self.endpoint
        if self.proxy is None:
            raise RuntimeError("this server has no proxy")
        return self.proxy

    def request(
        self,
        method: str,
        key: str = "",
        *,
        bucket: Optional[str] = None,
        body: bytes = b"",
        headers: Optional[Mapping[str, str]] = None,
        query: Optional[Mapping[str, str]] = None,
        via_proxy: bool = False,
        sign: bool = True,
        secret_key: Optional[str] = None,
        unsigned_payload: bool = False,
        host: Optional[str] = None,
        timeout: float = 30.0,
    ) -> Response:
        """One path-style request, SigV4-signed unless sign=False; host
        overrides the Host header (and what is signed), e.g. for virtual-hosted
        addressing pass bucket="" and host="b.localhost:PORT"."""
        u = urlsplit(self._base(via_proxy))
        bucket = self.bucket if bucket is None else bucket
        path = "/" + quote(bucket, safe="") if bucket else ""
        path += "/" + quote(key, safe="/~") if key or not bucket else ""
        query = dict(query or {})
        target = path
        if query:
            target += "?" + "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in query.items())
        hdrs = dict(headers or {})
        host = host or u.netloc
        if sign:
            payload = UNSIGNED_PAYLOAD if unsigned_payload else hashlib.sha256(body).hexdigest()
            secret = secret_key or self.secret_key
            hdrs.update(sigv4_headers(method, host, path, query, hdrs, payload, self.access_key, secret, self.region))
        else:
            hdrs["Host"] = host
        conn = http.client.HTTPConnection(u.hostname or "127.0.0.1", u.port or 80, timeout=timeout)
        try:
            conn.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
            for k, v in hdrs.items():
                conn.putheader(k, v)
            if body or method in ("PUT", "POST"):
                conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body or None)
            resp = conn.getresponse()
            data = resp.read()
            return Response(resp.status, resp.getheaders(), data)
        finally:
            conn.close()

    def put(self, key: str, data: bytes, *, bucket: Optional[str] = None, via_proxy: bool = False) -> str:
        """PUT an object; returns its ETag (quotes included)."""
        r = self.request("PUT", key, bucket=bucket, body=data, via_proxy=via_proxy)
        if r.status != 200:
            raise AssertionError(f"PUT {key}: {r}")
        return r.header("ETag") or ""

    def get(
        self, key: str, *, range: Optional[str] = None, bucket: Optional[str] = None, via_proxy: bool = False
    ) -> Response:  # noqa: A002 (range: the header's name)
        return self.request("GET", key, bucket=bucket, headers={"Range": range} if range else None, via_proxy=via_proxy)

    # --- the proxy's control API

    def _control(self, method: str, what: str, payload: Any = None) -> Any:
        if self.proxy_control is None:
            raise RuntimeError("this server has no proxy")
        u = urlsplit(self.proxy_control)
        conn = http.client.HTTPConnection(u.hostname or "127.0.0.1", u.port or 80, timeout=10)
        try:
            body = json.dumps(payload).encode() if payload is not None else b""
            conn.request(method, u.path + what, body=body, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            data = json.loads(resp.read() or b"null")
            if resp.status != 200:
                raise AssertionError(f"proxy {method} {what}: {resp.status} {data}")
            return data
        finally:
            conn.close()

    def faults(self, rules: Any) -> List[Dict[str, Any]]:
        """Adds fault rules (one or a list; format in s3server.py's docstring);
        returns the pending rules."""
        return list(self._control("POST", "/faults", rules)["pending"])

    def log(self, since: int = 0) -> List[Dict[str, Any]]:
        """The proxy's request log since the last reset (entries with seq > since)."""
        return list(self._control("GET", f"/log?since={since}"))

    def reset(self) -> None:
        """Drops the proxy's fault rules and its in-memory request log."""
        self._control("POST", "/reset")

    # --- the real SDK

    def boto3(self, code: str, *, via_proxy: bool = False, timeout: float = 60.0) -> str:
        """Runs code under the venv's python with `s3` a boto3 client for this
        server or its proxy (path-style, no retries) and `bucket` the bucket;
        returns its stdout, raises with its stderr when it fails."""
        prelude = (
            "import os, boto3\n"
            "from botocore.config import Config\n"
            "s3 = boto3.client('s3', endpoint_url=os.environ['S3_ENDPOINT'], region_name=os.environ['S3_REGION'],"
            " aws_access_key_id=os.environ['S3_KEY'], aws_secret_access_key=os.environ['S3_SECRET'],"
            " config=Config(s3={'addressing_style': 'path'}, retries={'total_max_attempts': 1}))\n"
            "bucket = os.environ['S3_BUCKET']\n"
        )
        env = dict(
            os.environ,
            S3_ENDPOINT=(self.proxy or "") if via_proxy else self.endpoint,
            S3_REGION=self.region,
            S3_KEY=self.access_key,
            S3_SECRET=self.secret_key,
            S3_BUCKET=self.bucket,
        )
        p = subprocess.run(
            [self.venv_python, "-c", prelude + code],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if p.returncode != 0:
            raise AssertionError(f"boto3 script failed ({p.returncode}):\n{p.stderr}")
        return p.stdout

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        p = subprocess.run(
            [self.venv_python, LAUNCHER, "stop", "--dir", self.dir], capture_output=True, text=True, timeout=60
        )
        if p.returncode != 0:
            raise RuntimeError(f"s3server.py stop --dir {self.dir} failed: {p.stderr}")


_venv_result: Optional[Tuple[Optional[str], str]] = None


def s3_venv() -> str:
    """The venv's path, built at most once per process; skips the calling
    test when the packages cannot be installed."""
    global _venv_result
    if _venv_result is None:
        venv = os.environ.get("UFSPACK_S3_VENV")
        argv = ["bash", ENV_SCRIPT] + ([venv] if venv else [])
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=900)
        except subprocess.TimeoutExpired:
            _venv_result = (None, "error: scripts/s3-test-env.sh ran over 900 s")
        else:
            lines = p.stdout.strip().splitlines()
            if p.returncode == 0 and lines:
                _venv_result = (lines[-1], "")
            elif p.returncode == SKIP_STATUS:
                _venv_result = (None, "skip: " + p.stderr.strip().splitlines()[-1])
            else:
                _venv_result = (None, f"error: scripts/s3-test-env.sh exited {p.returncode}:\n{p.stderr[-3000:]}")
    path, why = _venv_result
    if path is None:
        if why.startswith("skip: "):
            pytest.skip(f"S3 test venv unavailable: {why[6:]}")
        raise RuntimeError(why)
    return path


def start_server(
    kind: str,
    buckets: Optional[List[str]] = None,
    proxy: bool = True,
    state_dir: Optional[str] = None,
    extra: Optional[List[str]] = None,
) -> S3Server:
    """Starts a server with its state (logs, data) in state_dir, by default a
    fresh temporary directory; stopped at exit if the caller does not stop it
    first.  extra: more arguments for s3server.py start (e.g. --chunk-mb 1)."""
    venv = s3_venv()
    python = os.path.join(venv, "bin", "python")
    state_dir = state_dir or tempfile.mkdtemp(prefix=f"ufspack-{kind}-")
    argv = [python, LAUNCHER, "start", "--kind", kind, "--dir", state_dir]
    for b in buckets or []:
        argv += ["--bucket", b]
    if proxy:
        argv.append("--proxy")
    argv += extra or []
    # The launcher bounds its own waits (60 s per phase); this is a backstop.
    p = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise RuntimeError(f"s3server.py start --kind {kind} failed ({p.returncode}):\n{p.stderr}")
    server = S3Server(json.loads(p.stdout.strip().splitlines()[-1]), python)
    atexit.register(server.stop)
    return server


_shared: Dict[str, Any] = {}


def shared_server(kind: str, request: pytest.FixtureRequest) -> S3Server:
    """The session's one server of this kind, started on first use with its
    logs in pytest's temporary directory (kept for the last few runs), and
    stopped when pytest finishes (config cleanup; atexit as a backstop).  A
    failed start is remembered, not retried by every test."""
    if kind not in _shared:
        try:
            state_dir = request.getfixturevalue("tmp_path_factory").mktemp(kind)
            server = start_server(kind, state_dir=str(state_dir))
        except BaseException as e:
            _shared[kind] = e
            raise
        _shared[kind] = server
        request.config.add_cleanup(server.stop)
    got = _shared[kind]
    if isinstance(got, BaseException):
        raise got
    return got


@pytest.fixture
def s3_server(request: pytest.FixtureRequest) -> S3Server:
    """SeaweedFS (signatures checked) behind the proxy; its fault rules and
    request log reset for this test."""
    server = shared_server("seaweedfs", request)
    server.reset()
    return server


@pytest.fixture
def moto_server(request: pytest.FixtureRequest) -> S3Server:
    """moto (no authentication) behind the proxy; its fault rules and request
    log reset for this test."""
    server = shared_server("moto", request)
    server.reset()
    return server


if __name__ == "__main__":  # manual use: print a server's JSON until Enter
    s = start_server(sys.argv[1] if len(sys.argv) > 1 else "seaweedfs")
    print(json.dumps(s.info))
    input()
