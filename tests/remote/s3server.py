#!/usr/bin/env python3
"""Real S3 servers on loopback for the remote-pack tests, and a fault-injecting proxy.

Runs under the venv of scripts/s3-test-env.sh (stdlib + boto3; moto and the
``weed`` binary come from that venv):

    VENV=$(bash scripts/s3-test-env.sh)
    $VENV/bin/python tests/remote/s3server.py start --kind seaweedfs --dir D [--bucket B ...] [--proxy]
        [--volume-mb N] [--volumes N] [--chunk-mb N]
    $VENV/bin/python tests/remote/s3server.py start --kind moto --dir D --proxy
    $VENV/bin/python tests/remote/s3server.py stop --dir D

``start`` picks free ports on 127.0.0.1, starts the server (and the proxy) each
in its own session and process group, waits until the server answers, creates
the buckets (default ``ufspack-test``) and does a put/get/delete of a probe
object, then prints one line of JSON and exits, leaving them running:

    {"endpoint": "http://127.0.0.1:PORT", "access_key": "...", "secret_key": "...",
     "region": "us-east-1", "pid": N, "kind": "seaweedfs", "buckets": ["ufspack-test"],
     "proxy": "http://127.0.0.1:PORT2" | null, "proxy_control": "http://127.0.0.1:PORT2/__proxy__" | null,
     "proxy_pid": N | null, "dir": "D", "server_log": "D/seaweedfs.log", "proxy_log": "D/proxy-requests.jsonl" | null,
     "virtual_host": "localhost", "start_seconds": 3.9}

``virtual_host``: the domain for virtual-hosted addressing (``BUCKET.localhost:PORT``).

State lives in D: ``s3server-state.json`` (process groups with their leaders'
start times, ports, the weed command line), the servers' logs, SeaweedFS's config and data.  ``stop``
sends SIGTERM to each process group and SIGKILL when it outlives its grace
(weed 0.5 s: it does not exit on SIGTERM within 10 s; python 3 s), waits
(bounded) until no live member is left, and removes the state file and the
unix sockets weed leaves in /tmp (named after its gRPC ports); logs and data
stay.  A failed ``start`` stops whatever it started, prints why with the
server log's tail, and exits 1.

Servers
-------
seaweedfs: ``weed server -s3`` (master + volume + filer + S3 gateway in one
process; ~4 s to ready, ~110 MB RSS idle, ~300 MB after 64 MB of writes),
with ``-s3.config`` an identity file giving the fixed key pair every action;
anonymous requests are denied.  Volumes are 64 MB, at most 32, grown one at a
time (master.toml in D, weed's working directory; HOME=D too, so no
~/.seaweedfs config leaks in); each bucket is a SeaweedFS collection with its
own volumes.  A port taken between choosing and binding makes weed exit
("address already in use"): start retries with new ports, three times.

    weed server -dir=D/data -ip=127.0.0.1 -ip.bind=127.0.0.1 -filer -s3
      -s3.config=D/s3-identities.json -s3.domainName=localhost -s3.iam=false
      -s3.port.iceberg=0 -s3.port.lance=0 -s3.localSocket=D/s3.sock -filer.localSocket=D/filer.sock
      -master.volumeSizeLimitMB=64 -master.telemetry=false -volume.max=32 -volume.preStopSeconds=0
      -master.port=P -master.port.grpc=P -volume.port=P -volume.port.grpc=P
      -filer.port=P -filer.port.grpc=P -s3.port=P -s3.port.grpc=P        (8 free ports)

moto: moto's werkzeug app (what ``moto_server`` runs), threaded, bound to
port 0 by a child of this script (``_moto``); ~1.5 s to ready, ~80 MB RSS.
Moto authenticates nothing: any key and any signature pass (anonymous
requests get 403 from the object ACL).  Werkzeug closes the connection after
every response (``Connection: close``): no keep-alive, except through the
proxy.

Observed behaviour (weed 4.48, moto 5.2.5; 1024-byte object; raw SigV4
requests, boto3 and curl 7.88 --aws-sigv4; identical through the proxy)
------------------------------------------------------------------------
request                        seaweedfs                                moto
Range bytes=5-14               206, Content-Range bytes 5-14/1024,      same
                               Content-Length 10, ETag
bytes=1000-2000 (end past EOF) 206 bytes 1000-1023/1024                 same
bytes=-10, bytes=1020-         206 last 10 / 206 1020-1023              same
bytes=1024-2000 (start >= EOF) 416 InvalidRange, Content-Range          416 InvalidRange, no Content-Range
                               bytes */1024                             (ActualObjectSize in the XML)
bytes=0-0 of a 0-byte object   416 (bytes */0)                          416
bytes=10-5                     416                                      200, whole object
bytes=0-1,5-6 / bytes=abc      200, whole object                        200, whole object
ETag                           "md5" on PUT, GET, HEAD and ranged GET,  same
                               all equal; multipart "md5(md5s)-N"
If-Match: wrong etag           412 PreconditionFailed (GET, ranged      412 (HEAD too)
                               GET; HEAD 412 without body)
If-Match: right etag + Range   206                                      206
If-None-Match: the etag        304                                      304
HEAD missing key               404, no body                             404, Content-Length 0
GET missing key / bucket       404 NoSuchKey / NoSuchBucket XML         same
anonymous (no Authorization)   403 AccessDenied XML                     403, empty body
wrong secret key               403 SignatureDoesNotMatch XML            200 (not checked)
x-amz-date 30 min old          403 RequestTimeTooSkewed                 200
x-amz-content-sha256:          accepted on GET and PUT                  accepted
  UNSIGNED-PAYLOAD
PUT whose x-amz-content-sha256 200: the payload hash is NOT verified    200
  does not match the body
no x-amz-content-sha256 at all accepted (curl 7.88 --aws-sigv4 sends    accepted
                               none)
'/' unencoded in the query,    403 SignatureDoesNotMatch (curl's        200
  signed by curl 7.88          canonical query is wrong; send %2F)
path-style /bucket/key         yes                                      yes
Host: bucket.localhost:PORT    yes (-s3.domainName=localhost)           yes (any dotted non-IP host)
Host: bucket.127.0.0.1:PORT    no: read as path-style, 404 NoSuchBucket yes
multipart create/upload/       works; GET ?partNumber=2: 206 with the   works; partNumber ignored:
  complete/abort               part's Content-Range, PartsCount 3       200 whole object
Transfer-Encoding: chunked PUT accepted                                 accepted
Expect: 100-continue           100, then 200                            two 100s, then 200
keep-alive                     yes                                      no (Connection: close)
signed for the proxy's Host    accepted                                 accepted
This machine's resolver (glibc, no nss-myhostname) does not resolve
``*.localhost``; libcurl 7.88 resolves it to loopback by itself (else use
CURLOPT_CONNECT_TO / CURLOPT_RESOLVE, or set the Host header).

Proxy (``--proxy``)
-------------------
A pure-Python HTTP/1.1 proxy (ThreadingHTTPServer, keep-alive, one upstream
connection per client connection) in front of the server.  It forwards each
request byte-exact: method, path and query as sent, every header in order and
case including Host and Authorization (SigV4 signs Host, so clients sign for
the proxy's host:port and both servers accept it), the body (chunked bodies
forwarded with their framing; the proxy answers ``Expect: 100-continue``
itself); responses are streamed back with their status line and headers
unchanged except the hop-by-hop Connection and Keep-Alive: the proxy keeps
its client connection alive (HTTP/1.1) even when the server closes its own
(moto), and reconnects upstream as needed.  A chunked upstream body is
re-chunked.  TCP_NODELAY both ways: ~2 ms added per small request.  An
unreachable server gives 502 ProxyUpstreamError.

Each proxied request is logged, in memory (``GET /__proxy__/log``) and as JSON
lines in D/proxy-requests.jsonl:

    {"seq": 1, "time": 1795424021.5, "conn": 3, "method": "GET", "path": "/b/p/data.ufs",
     "query": "", "range": "bytes=0-99" | null, "status": 206 | null, "bytes": 100,
     "content_length": 100 | null, "request_bytes": 0, "fault": null | "status" | "drop" | "truncate"
     | "delay", "ms": 2.1, "error": null | "..."}

``conn`` numbers client connections (count them to see keep-alive reuse),
``bytes`` is the response body bytes actually written to the client.

Control API (same port, never forwarded, never logged):

    POST /__proxy__/faults   body: a rule, a list of rules, or {"rules": [...]};
                             appends them; answers {"pending": [...]}
    GET  /__proxy__/faults   the rules with matches left
    GET  /__proxy__/log      JSON array of log entries since the last reset
                             (?since=SEQ: only entries with seq > SEQ)
    POST /__proxy__/reset    drops every rule and the in-memory log (once the requests
                             being handled are logged, as /log waits for them)
    GET  /__proxy__/health   {"ok": true, "upstream": "http://127.0.0.1:PORT"}

A rule (unknown keys are refused with 400):

    {"method": "GET",            optional; any method when absent
     "path": "data.ufs",         optional; substring of the path (without the query)
     "count": 1,                 how many matching requests it applies to (default 1; -1: forever)
     "action": "status",         "status" | "drop" | "truncate" | "delay"; when absent,
                                   "status" if status is given, else "delay" if delay_ms is
     "status": 503,              action status: the HTTP status to answer, without
     "code": "SlowDown",           forwarding; code/message default from the status
     "message": "...",             (500 InternalError, 503 SlowDown, 403 AccessDenied,
     "headers": {"Retry-After": "1"},  404 NoSuchKey, 400 BadRequest, 412
                                       PreconditionFailed, 416 InvalidRange, 429 SlowDown)
     "rst": false,               action drop: close without any response; rst: true
                                   sends a TCP reset instead of a FIN (also for truncate,
                                   where the reset may overtake the bytes sent)
     "after_bytes": 100,         action truncate: forward, send the real status and
                                   headers (full Content-Length), then only the first
                                   after_bytes body bytes, then close
     "delay_ms": 250}            any action: sleep this long first (action delay:
                                   then forward normally)

The request body is read (and the proxy's 100 Continue sent) before any rule
acts.  Rules are tried in the order they were added; the first matching rule with
matches left is used and its count decremented; at most one rule per request.
An answered status fault carries an S3 XML error body:
``<Error><Code>SlowDown</Code><Message>...</Message><Resource>/b/k</Resource>
<RequestId>ufsproxy-N</RequestId></Error>`` (no body on HEAD).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Tuple
from urllib.parse import parse_qs, urlsplit

ACCESS_KEY = "UFSPACKTESTACCESSKEY"
SECRET_KEY = "ufspack/test/Secret+Key/0123456789abcdefgh"
REGION = "us-east-1"
DEFAULT_BUCKET = "ufspack-test"
VIRTUAL_HOST_DOMAIN = "localhost"
STATE_FILE = "s3server-state.json"
START_TIMEOUT_S = 60.0
# SIGTERM to SIGKILL: weed 4.48 does not exit on SIGTERM within 10 s (its
# graceful stop waits on its own gRPC peers), and its state is disposable.
GRACE_S = {"seaweedfs": 0.5, "moto": 3.0, "proxy": 3.0}
STOP_TIMEOUT_S = 10.0
CONTROL_PREFIX = "/__proxy__"
SEAWEEDFS_PORTS = (
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "s3.port",
    "s3.port.grpc",
)
MASTER_TOML = """\
# Written by tests/remote/s3server.py: grow volumes one at a time (the default
# grows 7 per collection, and every bucket is a collection).
[master.volume_growth]
copy_1 = 1
copy_2 = 1
copy_3 = 1
copy_other = 1
threshold = 0.9
"""


class StartError(Exception):
    """start failed; the message says why (and carries the log's tail)."""


# --- processes ----------------------------------------------------------------


def _proc_stat(pid: int) -> Optional[Tuple[str, int, int]]:
    """(state, process group, start time in clock ticks) of a pid, from /proc;
    None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = data[data.rfind(")") + 2 :].split()
    return fields[0], int(fields[2]), int(fields[19])


def _group_members(pgid: int) -> List[int]:
    """Pids of the non-zombie processes in process group pgid."""
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _proc_stat(int(entry))
            if st is not None and st[1] == pgid and st[0] not in ("Z", "X"):
                members.append(int(entry))
    return members


def _group(proc: subprocess.Popen, kind: str) -> List[Any]:
    """A state file entry for the group proc leads: [pgid, grace s, start time]."""
    st = _proc_stat(proc.pid)
    return [proc.pid, GRACE_S[kind], st[2] if st else None]


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop_groups(entries: List[List[Any]]) -> List[int]:
    """SIGTERM each group of the state file's [pgid, grace s, start time]
    entries, SIGKILL a group still alive after its grace; returns the groups
    with live members left after a further STOP_TIMEOUT_S (normally none).  A
    group whose leader pid now belongs to a process started at another time is
    not ours any more (pid reuse) and is left alone."""
    groups: List[Tuple[int, float]] = []
    for pgid, grace, started in entries:
        st = _proc_stat(int(pgid))
        if int(pgid) <= 1 or int(pgid) == os.getpgrp():
            continue
        if st is not None and started is not None and st[2] != started:
            print(f"s3server: pid {pgid} is another process now; not signalling its group", file=sys.stderr)
            continue
        groups.append((int(pgid), float(grace)))
    for g, _ in groups:
        _kill_group(g, signal.SIGTERM)
    t0 = time.monotonic()
    waiting = list(groups)
    while waiting:
        waiting = [(g, grace) for g, grace in waiting if _group_members(g)]
        for g, grace in [w for w in waiting if time.monotonic() - t0 >= w[1]]:
            _kill_group(g, signal.SIGKILL)
            waiting.remove((g, grace))
        time.sleep(0.02)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline and any(_group_members(g) for g, _ in groups):
        time.sleep(0.02)
    return [g for g, _ in groups if _group_members(g)]


def _spawn(argv: List[str], log: Path, cwd: Path, env: Optional[Dict[str, str]] = None) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=str(cwd),
            env=env,
            start_new_session=True,  # own session and process group: stop kills the group
            close_fds=True,
        )


def _tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text.splitlines()[-lines:])


def _free_ports(n: int) -> List[int]:
    """n distinct ports that were free a moment ago (another process may take
    one before the server binds it: start retries on a bind failure)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _wait_port_file(path: Path, proc: subprocess.Popen, log: Path, what: str, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise StartError(f"{what} exited with status {proc.returncode} before listening; {log}:\n{_tail(log)}")
        try:
            return int(path.read_text())
        except (OSError, ValueError):
            time.sleep(0.05)
    raise StartError(f"{what} did not listen within {timeout:.0f} s; {log}:\n{_tail(log)}")


# --- S3 readiness -------------------------------------------------------------


def _s3_client(endpoint: str) -> Any:
    import boto3  # the venv's; imported here so that `stop` and `_proxy` need no boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        region_name=REGION,
        config=Config(
            s3={"addressing_style": "path"},
            retries={"total_max_attempts": 1},
            connect_timeout=2,
            read_timeout=5,  # bounds each readiness probe: a port taken by a mute listener
        ),
    )


def _wait_s3_ready(
    endpoint: str, buckets: List[str], proc: subprocess.Popen, log: Path, timeout: float, bind_failed: Any
) -> None:
    """Poll until every bucket exists (created here) and a probe object can be
    written, read back and deleted; bounded by timeout."""
    client = _s3_client(endpoint)
    deadline = time.monotonic() + timeout
    last = "no answer yet"
    pending = list(buckets)
    probe_done = False
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            if bind_failed(log):
                raise PortConflict(_tail(log))
            raise StartError(f"server exited with status {proc.returncode}; {log}:\n{_tail(log)}")
        if bind_failed(log):
            raise PortConflict(_tail(log))
        try:
            while pending:
                try:
                    client.create_bucket(Bucket=pending[0])
                except (client.exceptions.BucketAlreadyOwnedByYou, client.exceptions.BucketAlreadyExists):
                    pass
                pending.pop(0)
            if not probe_done:
                key = "__s3server_probe__"
                client.put_object(Bucket=buckets[0], Key=key, Body=b"probe")
                body = client.get_object(Bucket=buckets[0], Key=key)["Body"].read()
                if body != b"probe":
                    raise StartError(f"probe object read back as {body!r}")
                client.delete_object(Bucket=buckets[0], Key=key)
                probe_done = True
            return
        except StartError:
            raise
        except Exception as e:  # not up yet: connection refused, 503, no volumes yet, ...
            last = f"{type(e).__name__}: {e}"
            time.sleep(0.1)
    raise StartError(f"server not ready within {timeout:.0f} s (last error: {last}); {log}:\n{_tail(log)}")


class PortConflict(Exception):
    pass


def _bind_failed_after(offset: int) -> Any:
    """A check: does the log, past offset (this attempt's part), say a port was taken?"""

    def check(log: Path) -> bool:
        try:
            with open(log, "rb") as f:
                f.seek(offset)
                return b"address already in use" in f.read()
        except OSError:
            return False

    return check


def _never(log: Path) -> bool:
    return False


# --- start / stop -------------------------------------------------------------


def _seaweedfs_argv(weed: str, d: Path, ports: Dict[str, int], sizing: Sizing) -> List[str]:
    argv = [
        weed,
        "server",
        f"-dir={d / 'data'}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        "-filer",
        "-s3",
        f"-s3.config={d / 's3-identities.json'}",
        f"-s3.domainName={VIRTUAL_HOST_DOMAIN}",
        "-s3.iam=false",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        f"-s3.localSocket={d / 's3.sock'}",
        f"-filer.localSocket={d / 'filer.sock'}",
        f"-master.volumeSizeLimitMB={sizing.volume_mb}",
        "-master.telemetry=false",
        f"-volume.max={sizing.volumes}",
        "-volume.preStopSeconds=0",
    ]
    if sizing.chunk_mb:
        argv.append(f"-filer.maxMB={sizing.chunk_mb}")
    argv += [f"-{name}={port}" for name, port in ports.items()]
    return argv


class Sizing(NamedTuple):
    """SeaweedFS's storage sizing (start's --volume-mb, --volumes, --chunk-mb):
    ``volumes`` volumes of ``volume_mb`` MB (the most it can hold), objects
    stored in chunks of at most ``chunk_mb`` MB (``-filer.maxMB``; 0: weed's
    default, 4)."""

    volume_mb: int
    volumes: int
    chunk_mb: int


def _start_seaweedfs(d: Path, buckets: List[str], state: Dict[str, Any], sizing: Sizing) -> str:
    weed = os.environ.get("UFSPACK_WEED") or str(Path(sys.executable).parent / "weed")
    if not os.access(weed, os.X_OK):
        raise StartError(f"no weed at {weed} (run scripts/s3-test-env.sh and use its python, or set UFSPACK_WEED)")
    (d / "data").mkdir(exist_ok=True)
    (d / "master.toml").write_text(MASTER_TOML)
    identities = {
        "identities": [
            {
                "name": "ufspack-test",
                "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                "actions": ["Admin", "Read", "List", "Tagging", "Write"],
            }
        ]
    }
    (d / "s3-identities.json").write_text(json.dumps(identities, indent=1) + "\n")
    env = dict(os.environ, HOME=str(d))
    log = d / "seaweedfs.log"
    for attempt in range(3):
        ports = dict(zip(SEAWEEDFS_PORTS, _free_ports(len(SEAWEEDFS_PORTS))))
        argv = _seaweedfs_argv(weed, d, ports, sizing)
        state["seaweedfs_ports"] = ports
        state["seaweedfs_argv"] = argv
        with open(log, "ab") as f:
            f.write(f"=== s3server.py attempt {attempt + 1}: {' '.join(argv)}\n".encode())
            offset = f.tell()
        proc = _spawn(argv, log, d, env)
        state["groups"].append(_group(proc, "seaweedfs"))
        state["pid"] = proc.pid
        _save_state(d, state)
        endpoint = f"http://127.0.0.1:{ports['s3.port']}"
        try:
            _wait_s3_ready(endpoint, buckets, proc, log, START_TIMEOUT_S, _bind_failed_after(offset))
            return endpoint
        except PortConflict:
            stop_groups([state["groups"][-1]])
            _remove_weed_sockets(ports)
            state["groups"].pop()
            _save_state(d, state)
            with open(log, "ab") as f:
                f.write(b"=== s3server.py: a port was taken, retrying with other ports\n")
    raise StartError(f"seaweedfs: ports taken three times in a row; {log}:\n{_tail(log)}")


def _start_moto(d: Path, buckets: List[str], state: Dict[str, Any]) -> str:
    log = d / "moto.log"
    port_file = d / "moto.port"
    port_file.unlink(missing_ok=True)
    proc = _spawn([sys.executable, os.path.abspath(__file__), "_moto", "--port-file", str(port_file)], log, d)
    state["groups"].append(_group(proc, "moto"))
    state["pid"] = proc.pid
    _save_state(d, state)
    port = _wait_port_file(port_file, proc, log, "moto", START_TIMEOUT_S)
    endpoint = f"http://127.0.0.1:{port}"
    _wait_s3_ready(endpoint, buckets, proc, log, START_TIMEOUT_S, _never)
    return endpoint


def _start_proxy(d: Path, upstream: str, state: Dict[str, Any]) -> str:
    log = d / "proxy.log"
    port_file = d / "proxy.port"
    port_file.unlink(missing_ok=True)
    argv = [
        sys.executable,
        os.path.abspath(__file__),
        "_proxy",
        "--upstream",
        upstream,
        "--port-file",
        str(port_file),
        "--request-log",
        str(d / "proxy-requests.jsonl"),
    ]
    proc = _spawn(argv, log, d)
    state["groups"].append(_group(proc, "proxy"))
    state["proxy_pid"] = proc.pid
    _save_state(d, state)
    port = _wait_port_file(port_file, proc, log, "proxy", 20.0)
    url = f"http://127.0.0.1:{port}"
    # Bounded check that it answers its control API.
    deadline = time.monotonic() + 10
    while True:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", CONTROL_PREFIX + "/health")
            if conn.getresponse().status == 200:
                return url
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise StartError(f"proxy on {url} does not answer {CONTROL_PREFIX}/health; {log}:\n{_tail(log)}")
        time.sleep(0.05)


def _save_state(d: Path, state: Dict[str, Any]) -> None:
    tmp = d / (STATE_FILE + ".tmp")
    tmp.write_text(json.dumps(state, indent=1) + "\n")
    tmp.replace(d / STATE_FILE)


def _remove_weed_sockets(ports: Dict[str, int]) -> None:
    # weed 4.48 puts its gRPC unix sockets in /tmp whatever -dir says, and a
    # killed weed leaves them behind.
    for name, port in ports.items():
        if name.endswith(".grpc"):
            role = name.split(".")[0]
            try:
                os.unlink(f"/tmp/seaweedfs-{role}-grpc-{port}.sock")
            except OSError:
                pass


def cmd_start(args: argparse.Namespace) -> int:
    d = Path(args.dir).resolve()
    d.mkdir(parents=True, exist_ok=True)
    if (d / STATE_FILE).exists():
        print(f"s3server: {d / STATE_FILE} exists: a server may run there (stop --dir {d} first)", file=sys.stderr)
        return 2
    buckets = args.bucket or [DEFAULT_BUCKET]
    for b in buckets:  # S3's rule; SeaweedFS refuses others only after start's 60 s of retries
        if not re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", b):
            print(f"s3server: bucket name {b!r}: expected 3-63 characters of a-z, 0-9, '.' and '-', "
                  "starting and ending with a letter or digit", file=sys.stderr)
            return 2
    state: Dict[str, Any] = {"kind": args.kind, "groups": [], "pid": None, "proxy_pid": None}
    t0 = time.monotonic()
    try:
        if args.kind == "seaweedfs":
            sizing = Sizing(args.volume_mb, args.volumes, args.chunk_mb)
            endpoint = _start_seaweedfs(d, buckets, state, sizing)
            server_log = d / "seaweedfs.log"
        else:
            endpoint = _start_moto(d, buckets, state)
            server_log = d / "moto.log"
        proxy = _start_proxy(d, endpoint, state) if args.proxy else None
    except BaseException as e:  # also KeyboardInterrupt: never leave orphans
        stop_groups(state["groups"])
        _remove_weed_sockets(state.get("seaweedfs_ports", {}))
        (d / STATE_FILE).unlink(missing_ok=True)
        if isinstance(e, StartError):
            print(f"s3server: start --kind {args.kind} failed: {e}", file=sys.stderr)
            return 1
        raise
    info = {
        "endpoint": endpoint,
        "access_key": ACCESS_KEY,
        "secret_key": SECRET_KEY,
        "region": REGION,
        "pid": state["pid"],
        "kind": args.kind,
        "buckets": buckets,
        "proxy": proxy,
        "proxy_control": proxy + CONTROL_PREFIX if proxy else None,
        "proxy_pid": state["proxy_pid"],
        "dir": str(d),
        "server_log": str(server_log),
        "proxy_log": str(d / "proxy-requests.jsonl") if proxy else None,
        "virtual_host": VIRTUAL_HOST_DOMAIN if args.kind == "seaweedfs" else "localhost",
        "start_seconds": round(time.monotonic() - t0, 3),
    }
    state["info"] = info
    _save_state(d, state)
    print(json.dumps(info), flush=True)
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    d = Path(args.dir).resolve()
    path = d / STATE_FILE
    try:
        state = json.loads(path.read_text())
    except FileNotFoundError:
        print(f"s3server: nothing to stop in {d} (no {STATE_FILE})", file=sys.stderr)
        return 0
    left = stop_groups(state.get("groups", []))
    _remove_weed_sockets(state.get("seaweedfs_ports", {}))
    if left:
        print(f"s3server: process groups {left} still alive after {STOP_TIMEOUT_S:.0f} s", file=sys.stderr)
        return 1
    path.unlink(missing_ok=True)
    for name in ("moto.port", "proxy.port"):
        (d / name).unlink(missing_ok=True)
    return 0


# --- moto ---------------------------------------------------------------------


def cmd_moto(args: argparse.Namespace) -> int:
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    app = DomainDispatcherApplication(create_backend_app)
    server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=MotoRequestHandler)
    _write_port_file(Path(args.port_file), server.server_address[1])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server.serve_forever()
    return 0


def _write_port_file(path: Path, port: int) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(str(port))
    tmp.replace(path)


# --- proxy --------------------------------------------------------------------

RULE_KEYS = {
    "method",
    "path",
    "count",
    "action",
    "status",
    "code",
    "message",
    "headers",
    "rst",
    "after_bytes",
    "delay_ms",
}
ACTIONS = ("status", "drop", "truncate", "delay")
ERROR_CODES = {
    400: ("BadRequest", "Bad Request"),
    403: ("AccessDenied", "Access Denied"),
    404: ("NoSuchKey", "The specified key does not exist."),
    412: ("PreconditionFailed", "At least one of the pre-conditions you specified did not hold"),
    416: ("InvalidRange", "The requested range is not satisfiable"),
    429: ("SlowDown", "Please reduce your request rate."),
    500: ("InternalError", "We encountered an internal error. Please try again."),
    503: ("SlowDown", "Please reduce your request rate."),
}
NO_BODY_STATUSES = (204, 304)
HOP_BY_HOP = ("connection", "keep-alive")


def validate_rule(rule: Any) -> Dict[str, Any]:
    """A checked copy of a fault rule; ValueError says what is wrong."""
    if not isinstance(rule, dict):
        raise ValueError(f"a rule is a JSON object, not {rule!r}")
    unknown = set(rule) - RULE_KEYS
    if unknown:
        raise ValueError(f"unknown rule keys {sorted(unknown)} (known: {sorted(RULE_KEYS)})")
    r = dict(rule)
    r.setdefault("count", 1)
    action = r.get("action")
    if action is None:
        action = "delay" if "delay_ms" in r and "status" not in r else "status" if "status" in r else None
    if action not in ACTIONS:
        raise ValueError(f"rule action must be one of {ACTIONS}, not {r.get('action')!r}")
    r["action"] = action
    if not isinstance(r["count"], int) or (r["count"] < 1 and r["count"] != -1):
        raise ValueError("count is a positive integer, or -1 for every matching request")
    if action == "status":
        status = r.get("status")
        if not isinstance(status, int) or not 100 <= status <= 599:
            raise ValueError("action status needs an integer status 100..599")
    if action == "truncate":
        after = r.get("after_bytes")
        if not isinstance(after, int) or after < 0:
            raise ValueError("action truncate needs after_bytes >= 0")
    delay = r.get("delay_ms", 0)
    if not isinstance(delay, (int, float)) or not 0 <= delay <= 600_000:
        raise ValueError("delay_ms is a number of milliseconds, 0..600000")
    if "method" in r:
        r["method"] = str(r["method"]).upper()
    if "headers" in r and not isinstance(r["headers"], dict):
        raise ValueError("headers is an object of header names to values")
    return r


class ProxyState:
    """Fault rules and the request log, shared by the proxy's threads."""

    def __init__(self, upstream: str, request_log: Optional[str]) -> None:
        u = urlsplit(upstream)
        self.upstream = upstream
        self.host = u.hostname or "127.0.0.1"
        self.port = u.port or 80
        self.lock = threading.Lock()
        # Requests being handled: a client can read its response (and ask
        # for the log) before the handler has recorded it.
        self.in_flight = 0
        self.idle = threading.Condition(self.lock)
        self.rules: List[Dict[str, Any]] = []
        self.log: List[Dict[str, Any]] = []
        self.seq = 0
        self.conns = 0
        self.errors = 0
        self.log_file = open(request_log, "a", buffering=1) if request_log else None  # noqa: SIM115

    def next_conn(self) -> int:
        with self.lock:
            self.conns += 1
            return self.conns

    def add_rules(self, rules: List[Dict[str, Any]]) -> None:
        with self.lock:
            self.rules.extend(rules)

    def pending(self) -> List[Dict[str, Any]]:
        with self.lock:
            return [dict(r) for r in self.rules]

    def reset(self) -> None:
        """Drops the rules and the log, once every request being handled is
        recorded (waiting at most 5 s): a request is logged after it is
        answered, so one its client already has must not land in the log
        after the reset, counted as the next step's."""
        with self.lock:
            self.idle.wait_for(lambda: self.in_flight == 0, timeout=5.0)
            self.rules.clear()
            self.log.clear()

    def take_rule(self, method: str, path: str) -> Optional[Dict[str, Any]]:
        with self.lock:
            for r in self.rules:
                if r.get("method", method) != method or r.get("path", "") not in path:
                    continue
                rule = dict(r)
                if r["count"] > 0:
                    r["count"] -= 1
                    if r["count"] == 0:
                        self.rules.remove(r)
                return rule
        return None

    def begin(self) -> None:
        with self.lock:
            self.in_flight += 1

    def record(self, entry: Dict[str, Any]) -> None:
        with self.lock:
            self.in_flight -= 1
            self.idle.notify_all()
            self.seq += 1
            entry["seq"] = self.seq
            self.log.append(entry)
            if self.log_file is not None:
                self.log_file.write(json.dumps(entry) + "\n")

    def entries(self, since: int) -> List[Dict[str, Any]]:
        """The log after entry `since`, once every request being handled is
        recorded (waiting at most 5 s, for a request still in progress)."""
        with self.lock:
            self.idle.wait_for(lambda: self.in_flight == 0, timeout=5.0)
            return [e for e in self.log if e["seq"] > since]


class ProxyServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, addr: Tuple[str, int], state: ProxyState) -> None:
        self.state = state
        super().__init__(addr, ProxyHandler)


class _Dropped(Exception):
    """The client connection is gone (or was dropped on purpose)."""


class ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ProxyServer
    timeout = 300  # idle client connections are closed after this

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes: without this, Nagle and
        # delayed ACKs add ~40 ms to every small response.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.conn_id = self.server.state.next_conn()
        self.upstream: Optional[http.client.HTTPConnection] = None

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self._close_upstream()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
        pass  # the request log is the JSON lines file

    # Every method goes through one handler.
    def do_GET(self) -> None:
        self._handle()

    do_HEAD = do_PUT = do_POST = do_DELETE = do_OPTIONS = do_PATCH = do_GET

    # --- request side

    def _read_body(self) -> bytes:
        """The request body as it came on the wire (chunked framing kept)."""
        te = self.headers.get("Transfer-Encoding", "")
        if "chunked" in te.lower():
            raw = bytearray()
            while True:
                line = self.rfile.readline(65537)
                if not line:
                    raise _Dropped()
                raw += line
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while True:  # trailers, up to the empty line
                        t = self.rfile.readline(65537)
                        if not t:
                            raise _Dropped()
                        raw += t
                        if t in (b"\r\n", b"\n"):
                            return bytes(raw)
                raw += self._read_exact(size + 2)
        n = int(self.headers.get("Content-Length") or 0)
        return self._read_exact(n)

    def _read_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.rfile.read(n - len(buf))
            if not chunk:
                raise _Dropped()
            buf += chunk
        return bytes(buf)

    # --- response side

    def _write(self, data: bytes) -> None:
        try:
            self.wfile.write(data)
        except OSError as e:
            raise _Dropped() from e

    def _drop(self, rst: bool) -> None:
        self.close_connection = True
        try:
            if rst:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            else:
                self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        if rst:
            self.connection.close()

    def _close_upstream(self) -> None:
        if self.upstream is not None:
            self.upstream.close()
            self.upstream = None

    def _send_error_xml(self, status: int, rule: Dict[str, Any], path: str, entry: Dict[str, Any]) -> None:
        code, message = ERROR_CODES.get(status, ("Error", "Injected error"))
        code = rule.get("code", code)
        message = rule.get("message", message)
        request_id = f"ufsproxy-{entry['conn']}-{int(time.time() * 1000) % 10**9}"
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<Error><Code>{_xml(code)}</Code><Message>{_xml(message)}</Message>"
            f"<Resource>{_xml(path)}</Resource><RequestId>{request_id}</RequestId></Error>"
        ).encode()
        self.send_response_only(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("x-amz-request-id", request_id)
        for name, value in rule.get("headers", {}).items():
            self.send_header(str(name), str(value))
        self.end_headers()
        entry["status"] = status
        entry["content_length"] = len(body)
        if self.command != "HEAD":
            self._write(body)
            entry["bytes"] = len(body)

    def _forward(self, body: bytes) -> http.client.HTTPResponse:
        """Sends the request upstream as received; retries once on a fresh
        connection when a kept-alive upstream connection turns out closed."""
        for attempt in (0, 1):
            fresh = self.upstream is None
            if self.upstream is None:
                st = self.server.state
                self.upstream = http.client.HTTPConnection(st.host, st.port, timeout=120)
                self.upstream.connect()
                assert self.upstream.sock is not None
                self.upstream.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = self.upstream
            try:
                conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                for name, value in self.headers.items():
                    conn.putheader(name, value)
                conn.endheaders(body if body else None)
                return conn.getresponse()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self._close_upstream()
                if fresh or attempt == 1:
                    raise
        raise AssertionError("unreachable")

    def _relay(self, resp: http.client.HTTPResponse, rule: Optional[Dict[str, Any]], entry: Dict[str, Any]) -> None:
        entry["status"] = resp.status
        headers = resp.getheaders()
        chunked = any(n.lower() == "transfer-encoding" and "chunked" in v.lower() for n, v in headers)
        length = resp.getheader("Content-Length")
        entry["content_length"] = int(length) if length is not None and length.isdigit() else None
        has_body = self.command != "HEAD" and resp.status not in NO_BODY_STATUSES and resp.status >= 200
        self.send_response_only(resp.status, resp.reason)
        for name, value in headers:
            # Hop-by-hop: this connection's persistence is the proxy's own
            # (moto closes after every response; the client's connection stays).
            if name.lower() not in HOP_BY_HOP:
                self.send_header(name, value)
        if has_body and not chunked and length is None:
            self.send_header("Connection", "close")  # the body ends where the connection does
        self.end_headers()
        limit = rule["after_bytes"] if rule is not None and rule["action"] == "truncate" else None
        sent = 0
        if has_body:
            while True:
                want = 65536 if limit is None else min(65536, limit - sent)
                if want <= 0:
                    break
                piece = resp.read(want)
                if not piece:
                    break
                self._write(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
                sent += len(piece)
                entry["bytes"] = sent
            if limit is None:
                if chunked:
                    self._write(b"0\r\n\r\n")
                elif length is None:
                    self.close_connection = True  # body delimited by the close
        entry["bytes"] = sent
        if limit is not None:
            self._close_upstream()  # the rest of its response is unread
            self._drop(rule is not None and bool(rule.get("rst")))
        elif resp.will_close:
            self._close_upstream()

    def _handle(self) -> None:
        split = urlsplit(self.path)
        if split.path.startswith(CONTROL_PREFIX + "/") or split.path == CONTROL_PREFIX:
            self._control(split.path[len(CONTROL_PREFIX) :], split.query)
            return
        st = self.server.state
        t0 = time.monotonic()
        st.begin()  # recorded in the finally below
        entry: Dict[str, Any] = {
            "time": round(time.time(), 6),
            "conn": self.conn_id,
            "method": self.command,
            "path": split.path,
            "query": split.query,
            "range": self.headers.get("Range"),
            "status": None,
            "bytes": 0,
            "content_length": None,
            "request_bytes": 0,
            "fault": None,
            "ms": 0.0,
            "error": None,
        }
        try:
            body = self._read_body()
            entry["request_bytes"] = len(body)
            rule = st.take_rule(self.command, split.path)
            if rule is not None:
                entry["fault"] = rule["action"]
                if rule.get("delay_ms"):
                    time.sleep(rule["delay_ms"] / 1000.0)
                if rule["action"] == "drop":
                    self._drop(bool(rule.get("rst")))
                    return
                if rule["action"] == "status":
                    self._send_error_xml(rule["status"], rule, split.path, entry)
                    return
            try:
                resp = self._forward(body)
            except OSError as e:
                entry["error"] = f"upstream: {type(e).__name__}: {e}"
                self._send_error_xml(
                    502, {"code": "ProxyUpstreamError", "message": entry["error"]}, split.path, entry
                )
                return
            self._relay(resp, rule, entry)
        except _Dropped:
            entry["error"] = entry["error"] or "client connection closed"
            self.close_connection = True
            self._close_upstream()
        except Exception as e:  # report, and keep serving other connections
            entry["error"] = f"{type(e).__name__}: {e}"
            self.close_connection = True
            self._close_upstream()
        finally:
            entry["ms"] = round((time.monotonic() - t0) * 1000, 3)
            st.record(entry)

    # --- control API

    def _reply_json(self, status: int, obj: Any) -> None:
        body = (json.dumps(obj) + "\n").encode()
        self.send_response_only(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self._write(body)

    def _control(self, what: str, query: str) -> None:
        st = self.server.state
        try:
            body = self._read_body()
            if self.command == "POST" and what == "/faults":
                data = json.loads(body or b"null")
                if isinstance(data, dict) and "rules" in data:
                    data = data["rules"]
                rules = data if isinstance(data, list) else [data]
                st.add_rules([validate_rule(r) for r in rules])
                self._reply_json(200, {"pending": st.pending()})
            elif self.command == "GET" and what == "/faults":
                self._reply_json(200, {"pending": st.pending()})
            elif self.command == "GET" and what == "/log":
                since = int(parse_qs(query).get("since", ["0"])[0])
                self._reply_json(200, st.entries(since))
            elif self.command == "POST" and what == "/reset":
                st.reset()
                self._reply_json(200, {"ok": True})
            elif self.command == "GET" and what == "/health":
                self._reply_json(200, {"ok": True, "upstream": st.upstream})
            else:
                self._reply_json(404, {"error": f"no control endpoint {self.command} {CONTROL_PREFIX}{what}"})
        except _Dropped:
            self.close_connection = True
        except ValueError as e:  # also json.JSONDecodeError
            self._reply_json(400, {"error": str(e)})


def _xml(text: Any) -> str:
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def cmd_proxy(args: argparse.Namespace) -> int:
    state = ProxyState(args.upstream, args.request_log)
    server = ProxyServer(("127.0.0.1", args.port), state)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    _write_port_file(Path(args.port_file), server.server_address[1])
    server.serve_forever()
    return 0


# --- command line -------------------------------------------------------------


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("start", help="start a server (and proxy); print its JSON line")
    s.add_argument("--kind", choices=("seaweedfs", "moto"), required=True)
    s.add_argument("--dir", required=True, help="state directory (pids, logs, config, data)")
    s.add_argument("--bucket", action="append", help=f"bucket to create (repeatable; default {DEFAULT_BUCKET})")
    s.add_argument("--proxy", action="store_true", help="also start the fault-injection proxy")
    s.add_argument("--volume-mb", type=int, default=64,
                   help="seaweedfs: size of each volume in MB (default 64)")
    s.add_argument("--volumes", type=int, default=32,
                   help="seaweedfs: most volumes (default 32: with 64 MB ones, 2 GB in all)")
    s.add_argument("--chunk-mb", type=int, default=0,
                   help="seaweedfs: store objects in chunks of at most this many MB (-filer.maxMB; "
                        "default weed's 4). Every ranged GET reads the object's whole chunk list: on a "
                        "2.4 GB object, 4 MB chunks cost 2.4 ms of server CPU per GET, 64 MB ones 0.9 ms")
    s.set_defaults(func=cmd_start)
    t = sub.add_parser("stop", help="stop what start started in DIR")
    t.add_argument("--dir", required=True)
    t.set_defaults(func=cmd_stop)
    m = sub.add_parser("_moto", help=argparse.SUPPRESS)
    m.add_argument("--port-file", required=True)
    m.set_defaults(func=cmd_moto)
    x = sub.add_parser("_proxy", help="run the proxy in the foreground")
    x.add_argument("--upstream", required=True)
    x.add_argument("--port", type=int, default=0)
    x.add_argument("--port-file", required=True)
    x.add_argument("--request-log")
    x.set_defaults(func=cmd_proxy)
    args = p.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
