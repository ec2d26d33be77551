#!/usr/bin/env python3
"""A loopback emulator of AWS's credential endpoints, for credentials_test.

One HTTP/1.1 server (standard library only) that plays three parts:

  IMDSv2      PUT /latest/api/token (needs X-aws-ec2-metadata-token-ttl-seconds)
              GET /latest/meta-data/iam/security-credentials/      -> role name
              GET /latest/meta-data/iam/security-credentials/ROLE  -> JSON
              (both GETs need the X-aws-ec2-metadata-token it issued;
              without one: 401, as IMDS with IMDSv1 disabled; in mode
              "v1-only" the PUT answers 403 and the GETs need no token)
  container   GET /container/creds (needs "Authorization: <--auth-token>"
              when one is given)
  STS         POST / Action=AssumeRoleWithWebIdentity (needs
              WebIdentityToken=<--web-token>, RoleArn, RoleSessionName);
              Action=AssumeRole, SigV4-signed (service sts) with the
              --source-key ID:SECRET or with credentials this server issued
              (chained roles)
  S3          GET/HEAD /BUCKET/KEY (or /KEY with "Host: BUCKET.<anything>",
              virtual-hosted) of one object (--object), and of
              /BUCKET/pack/<file> for each file of --pack DIR, byte ranges,
              answering only requests SigV4-signed with credentials this
              server issued and that have not expired, or with the
              --source-key (403 otherwise)

Every credentials document holds fresh keys that expire --lifetime seconds
after they are issued.  Control:
  GET  /control/log     a JSON object: counters per endpoint and failures
  POST /control/mode    body: "ok" | "no-role" (IMDS role list 404) |
                        "hang" (credential endpoints never answer) |
                        "error" (credential endpoints answer 500) |
                        "v1-only" (IMDS refuses the IMDSv2 token PUT) |
                        "inject-token" (the IMDSv2 token ends in
                        CR LF "X-Injected: yes"; the part before it is valid) |
                        "inject-credentials" (the session token of IMDS,
                        container and STS answers ends so)
Any request that arrives with an X-Injected header (a header line smuggled
in a value) is counted as "injected".

    credserver.py --object FILE --port-file FILE [--pack DIR] [--lifetime S] [--auth-token T]
                  [--web-token T] [--source-key ID:SECRET]

Prints one line of JSON, {"url": "http://127.0.0.1:PORT", "pid": PID}, once
it listens (to stdout and --port-file), then serves until killed.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import hmac
import http.server
import json
import os
import re
import secrets
import sys
import threading
import time
import urllib.parse

ROLE = "ufspack-test-role"
BUCKET = "ufspack-test"
KEY = "object.bin"
_RANGE = re.compile(r"^bytes=(\d+)-(\d+)$")
INJECTION = "\r\nX-Injected: yes"


class State:
    def __init__(self, lifetime: float, auth_token: str, data: bytes) -> None:
        self.lock = threading.Lock()
        self.lifetime = lifetime
        self.auth_token = auth_token
        self.web_token = ""
        self.source_key = ""
        self.source_secret = ""
        self.data = data
        self.pack: dict[str, bytes] = {}  # --pack: file name -> bytes
        self.mode = "ok"
        self.imds_tokens: set[str] = set()
        self.keys: dict[str, tuple[str, str, float]] = {}  # id -> secret, token, expiry
        self.counts: dict[str, int] = {}
        self.failures: list[str] = []

    def count(self, what: str) -> None:
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + 1

    def fail(self, why: str) -> None:
        with self.lock:
            self.failures.append(why)

    def issue(self) -> dict:
        key_id = "ASIA" + secrets.token_hex(8).upper()
        secret = secrets.token_urlsafe(30)
        token = "TOKEN" + secrets.token_urlsafe(40)
        expiry = time.time() + self.lifetime
        with self.lock:
            self.keys[key_id] = (secret, token, expiry)
        when = datetime.datetime.fromtimestamp(expiry, datetime.timezone.utc)
        return {
            "AccessKeyId": key_id,
            "SecretAccessKey": secret,
            "Token": token,
            "Expiration": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }


STATE: State


def _hmac(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass

    def parse_request(self) -> bool:
        ok = super().parse_request()
        if ok and "X-Injected" in self.headers:
            STATE.count("injected")
        return ok

    def _document(self) -> dict:
        doc = STATE.issue()
        if STATE.mode == "inject-credentials":
            doc["Token"] += INJECTION
        return doc

    def _send(self, code: int, body: bytes, headers: dict | None = None) -> None:
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _credential_mode(self) -> bool:
        """Applies hang/error modes; True when the request was answered."""
        mode = STATE.mode
        if mode == "hang":
            time.sleep(30)
            return True
        if mode == "error":
            self._send(500, b"internal error")
            return True
        return False

    def do_PUT(self) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(n)
        if self.path == "/latest/api/token":
            STATE.count("imds_token")
            if self._credential_mode():
                return
            if STATE.mode == "v1-only":
                self._send(403, b"")
                return
            if not self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
                self._send(400, b"missing ttl")
                return
            token = secrets.token_hex(16)
            with STATE.lock:
                STATE.imds_tokens.add(token)
            if STATE.mode == "inject-token":
                token += INJECTION
            self._send(200, token.encode())
            return
        self._send(404, b"")

    def do_POST(self) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n)
        self._body_hash = hashlib.sha256(raw).hexdigest()
        body = raw.decode()
        if self.path == "/control/mode":
            STATE.mode = body.strip()
            self._send(200, b"ok")
            return
        if self.path == "/":
            self._sts(dict(urllib.parse.parse_qsl(body, keep_blank_values=True)))
            return
        self._send(404, b"")

    def _sts(self, form: dict) -> None:
        STATE.count("sts")
        if self._credential_mode():
            return
        if form.get("Action") == "AssumeRole":
            self._assume_role(form)
            return
        if form.get("Action") != "AssumeRoleWithWebIdentity" or not form.get("RoleArn") \
                or not form.get("RoleSessionName"):
            self._send(400, b"<ErrorResponse><Error><Code>InvalidParameter</Code>"
                            b"<Message>bad request</Message></Error></ErrorResponse>")
            return
        if form.get("WebIdentityToken") != STATE.web_token:
            self._send(400, b"<ErrorResponse><Error><Code>InvalidIdentityToken</Code>"
                            b"<Message>the token is not valid</Message></Error></ErrorResponse>")
            return
        c = self._document()
        xml = ("<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult>"
               f"<Credentials><AccessKeyId>{c['AccessKeyId']}</AccessKeyId>"
               f"<SecretAccessKey>{c['SecretAccessKey']}</SecretAccessKey>"
               f"<SessionToken>{c['Token']}</SessionToken>"
               f"<Expiration>{c['Expiration']}</Expiration></Credentials>"
               f"<AssumedRoleUser><Arn>{form['RoleArn']}/{form['RoleSessionName']}</Arn>"
               "</AssumedRoleUser></AssumeRoleWithWebIdentityResult>"
               "</AssumeRoleWithWebIdentityResponse>")
        self._send(200, xml.encode())

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/control/log":
            with STATE.lock:
                doc = {"counts": STATE.counts, "failures": STATE.failures}
            self._send(200, json.dumps(doc).encode())
            return
        base = "/latest/meta-data/iam/security-credentials/"
        if path.startswith(base):
            STATE.count("imds_role" if path == base else "imds_credentials")
            if self._credential_mode():
                return
            token = self.headers.get("X-aws-ec2-metadata-token")
            with STATE.lock:
                ok = token in STATE.imds_tokens or (STATE.mode == "v1-only" and token is None)
            if not ok:
                self._send(401, b"")
                return
            if STATE.mode == "no-role":
                self._send(404, b"")
                return
            if path == base:
                self._send(200, ROLE.encode())
            elif path == base + ROLE:
                doc = dict(self._document(), Code="Success", Type="AWS-HMAC")
                self._send(200, json.dumps(doc).encode())
            else:
                self._send(404, b"")
            return
        if path == "/container/creds":
            STATE.count("container")
            if self._credential_mode():
                return
            if STATE.auth_token and self.headers.get("Authorization") != STATE.auth_token:
                self._send(401, b"")
                return
            self._send(200, json.dumps(self._document()).encode())
            return
        host = self.headers.get("Host", "")
        if path == f"/{BUCKET}/{KEY}" or (path == f"/{KEY}" and host.startswith(BUCKET + ".")):
            self._s3_get(STATE.data)
            return
        prefix = f"/{BUCKET}/pack/"
        if path.startswith(prefix) and path[len(prefix):] in STATE.pack:
            self._s3_get(STATE.pack[path[len(prefix):]])
            return
        self._send(404, b"")

    def _assume_role(self, form: dict) -> None:
        why = self._check_sigv4("sts", self._body_hash)
        if why:
            STATE.fail(why)
            self._send(403, f"<ErrorResponse><Error><Code>SignatureDoesNotMatch</Code>"
                            f"<Message>{why}</Message></Error></ErrorResponse>".encode())
            return
        if not form.get("RoleArn") or not form.get("RoleSessionName"):
            self._send(400, b"<ErrorResponse><Error><Code>InvalidParameter</Code>"
                            b"<Message>bad request</Message></Error></ErrorResponse>")
            return
        STATE.count("assume_role_ok")
        c = self._document()
        xml = ("<AssumeRoleResponse><AssumeRoleResult>"
               f"<Credentials><AccessKeyId>{c['AccessKeyId']}</AccessKeyId>"
               f"<SecretAccessKey>{c['SecretAccessKey']}</SecretAccessKey>"
               f"<SessionToken>{c['Token']}</SessionToken>"
               f"<Expiration>{c['Expiration']}</Expiration></Credentials>"
               "</AssumeRoleResult></AssumeRoleResponse>")
        self._send(200, xml.encode())

    def _check_sigv4(self, service: str, payload_hash: str) -> str:
        """Checks the request's SigV4 signature; returns why not, or ""."""
        auth = self.headers.get("Authorization", "")
        m = re.match(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/" + service +
                     r"/aws4_request, SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$", auth)
        if not m:
            return "no SigV4 Authorization header for " + service
        key_id, day, region, signed_names, signature = m.groups()
        if STATE.source_key and key_id == STATE.source_key:
            secret, token = STATE.source_secret, None
        else:
            with STATE.lock:
                entry = STATE.keys.get(key_id)
            if entry is None:
                return f"unknown access key {key_id}"
            secret, token, expiry = entry
            if time.time() >= expiry:
                return f"expired access key {key_id}"
            if self.headers.get("x-amz-security-token") != token:
                return "x-amz-security-token does not match the access key"
        names = signed_names.split(";")
        if token is not None and "x-amz-security-token" not in names:
            return "x-amz-security-token is not signed"
        raw_path, _, raw_query = self.path.partition("?")
        query = sorted(urllib.parse.parse_qsl(raw_query, keep_blank_values=True))
        canonical_query = "&".join(
            f"{urllib.parse.quote(k, safe='-_.~')}={urllib.parse.quote(v, safe='-_.~')}"
            for k, v in query)
        canonical_headers = "".join(
            f"{n}:{' '.join((self.headers.get(n) or '').split())}\n" for n in names)
        canonical = "\n".join([self.command, raw_path, canonical_query,
                               canonical_headers, signed_names, payload_hash])
        amz_date = self.headers.get("x-amz-date", "")
        scope = f"{day}/{region}/{service}/aws4_request"
        to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                             hashlib.sha256(canonical.encode()).hexdigest()])
        k = _hmac(("AWS4" + secret).encode(), day)
        k = _hmac(k, region)
        k = _hmac(k, service)
        k = _hmac(k, "aws4_request")
        expected = hmac.new(k, to_sign.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, signature):
            return "SignatureDoesNotMatch"
        return ""

    # --- S3 with SigV4 checked against issued keys

    def _deny(self, why: str) -> None:
        STATE.count("s3_denied")
        STATE.fail(why)
        self._send(403, f"<Error><Code>AccessDenied</Code><Message>{why}</Message></Error>".encode())

    def _s3_get(self, data: bytes) -> None:
        STATE.count("s3_requests")
        why = self._check_sigv4("s3", self.headers.get("x-amz-content-sha256", ""))
        if why:
            self._deny(why)
            return
        STATE.count("s3_ok")
        etag = '"' + hashlib.md5(data).hexdigest() + '"'
        rng = _RANGE.match(self.headers.get("Range", ""))
        if rng:
            first, last = int(rng.group(1)), int(rng.group(2))
            if first >= len(data):
                self._send(416, b"", {"Content-Range": f"bytes */{len(data)}"})
                return
            last = min(last, len(data) - 1)
            self._send(206, data[first:last + 1],
                       {"Content-Range": f"bytes {first}-{last}/{len(data)}", "ETag": etag})
            return
        self._send(200, data, {"ETag": etag})


def main() -> int:
    global STATE
    ap = argparse.ArgumentParser()
    ap.add_argument("--object", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--lifetime", type=float, default=4.0)
    ap.add_argument("--auth-token", default="")
    ap.add_argument("--web-token", default="")
    ap.add_argument("--source-key", default="", help="ID:SECRET that may call AssumeRole")
    ap.add_argument("--pack", default="", help="a pack directory served under /BUCKET/pack/")
    args = ap.parse_args()
    with open(args.object, "rb") as f:
        STATE = State(args.lifetime, args.auth_token, f.read())
    STATE.web_token = args.web_token
    if args.pack:
        for name in os.listdir(args.pack):
            with open(os.path.join(args.pack, name), "rb") as f:
                STATE.pack[name] = f.read()
    if args.source_key:
        STATE.source_key, STATE.source_secret = args.source_key.split(":", 1)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    line = json.dumps({"url": f"http://127.0.0.1:{server.server_address[1]}",
                       "pid": os.getpid()})
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(line + "\n")
    os.replace(tmp, args.port_file)
    print(line, flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
