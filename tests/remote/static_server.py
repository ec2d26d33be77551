#!/usr/bin/env python3
"""A static web server for the remote tests: a directory over HTTP or HTTPS.

Serves GET and HEAD with single byte ranges (206 with Content-Range, 416 past
the end), a strong ETag of each file's size and mtime, and HTTP/1.1
keep-alive -- what any static web server (nginx, Apache, S3's website
endpoint) gives a ufspack pack served over https://.

    static_server.py DIR [--tls CERT KEY] [--port-file FILE] [--delay-ms MS]

--delay-ms: every GET waits MS milliseconds before it is answered (a
server far away).  GET /__stats__ answers {"peak_in_flight": N,
"connections": M}: the most GETs of files in flight at once since the last
such request, and the connections accepted since the server started (for
tests of how many requests a client keeps in flight, and whether it
reuses its connections).

Prints one line of JSON, {"url": "http://127.0.0.1:PORT", "pid": PID}, once
it listens (to stdout, and to --port-file if given), then serves until
killed.  Standard library only.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import re
import ssl
import sys
import threading
import time
from typing import Optional, Tuple

_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


class InFlight:
    """GETs being answered now, the most at once since the last peak(), and
    the connections accepted."""

    def __init__(self) -> None:
        self._mu = threading.Lock()
        self._now = 0
        self._peak = 0
        self.connections = 0

    def connected(self) -> None:
        with self._mu:
            self.connections += 1

    def __enter__(self) -> None:
        with self._mu:
            self._now += 1
            self._peak = max(self._peak, self._now)

    def __exit__(self, *exc: object) -> None:
        with self._mu:
            self._now -= 1

    def peak(self) -> int:
        with self._mu:
            p, self._peak = self._peak, self._now
            return p


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    root = "."
    delay_s = 0.0
    in_flight = InFlight()

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass

    def setup(self) -> None:  # once per connection (keep-alive serves many requests)
        super().setup()
        self.in_flight.connected()

    def _file(self) -> Optional[Tuple[str, os.stat_result]]:
        rel = self.path.split("?", 1)[0].lstrip("/")
        path = os.path.realpath(os.path.join(self.root, rel))
        if not path.startswith(os.path.realpath(self.root) + os.sep):
            return None
        try:
            st = os.stat(path)
        except OSError:
            return None
        if not os.path.isfile(path):
            return None
        return path, st

    def _error(self, code: int) -> None:
        body = f"{code}\n".encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _serve(self) -> None:
        found = self._file()
        if found is None:
            self._error(404)
            return
        path, st = found
        size = st.st_size
        etag = f'"{size:x}-{st.st_mtime_ns:x}"'
        start, end = 0, size - 1
        status = 200
        header = self.headers.get("Range")
        if header:
            m = _RANGE.match(header.strip())
            if not m or (not m.group(1) and not m.group(2)):
                self._error(400)
                return
            if m.group(1):
                start = int(m.group(1))
                end = int(m.group(2)) if m.group(2) else size - 1
            else:
                start = max(0, size - int(m.group(2)))
            if start >= size:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            end = min(end, size - 1)
            status = 206
        length = max(0, end - start + 1)
        self.send_response(status)
        self.send_header("ETag", etag)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(length))
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.end_headers()
        if self.command == "HEAD" or length == 0:
            return
        with open(path, "rb") as f:
            f.seek(start)
            left = length
            while left > 0:
                chunk = f.read(min(left, 1 << 20))
                if not chunk:
                    break
                self.wfile.write(chunk)
                left -= len(chunk)

    def do_GET(self) -> None:  # noqa: N802
        if self.path == "/__stats__":
            stats = {"peak_in_flight": self.in_flight.peak(), "connections": self.in_flight.connections}
            body = json.dumps(stats).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        with self.in_flight:
            if self.delay_s > 0:
                time.sleep(self.delay_s)
            self._serve()

    def do_HEAD(self) -> None:  # noqa: N802
        self._serve()


class Server(http.server.ThreadingHTTPServer):
    # A listen backlog for many clients connecting at once (the default, 5,
    # drops their SYNs, and each retries a second later).
    request_queue_size = 128


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    ap.add_argument("--port-file")
    ap.add_argument("--delay-ms", type=float, default=0.0)
    args = ap.parse_args()
    Handler.root = os.path.abspath(args.dir)
    Handler.delay_s = args.delay_ms / 1000
    server = Server(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    scheme = "http"
    if args.tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.tls[0], args.tls[1])
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
        scheme = "https"
    port = server.server_address[1]
    line = json.dumps({"url": f"{scheme}://127.0.0.1:{port}", "pid": os.getpid()})
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(line + "\n")
        os.replace(tmp, args.port_file)
    print(line, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
