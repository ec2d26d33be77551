#!/usr/bin/env python3
"""tests/remote/static_server.py that can be told to start failing: the
ranged GETs of one file that touch its bytes from a given offset on get an
error, as a server (or the object behind it) that fails mid-epoch.

    flaky_server.py DIR --port-file FILE

GET /__fail__?mode=MODE&at=OFFSET&suffix=SUFFIX arms it: from then on a
GET whose path ends in SUFFIX (default /data.ufs) and whose byte range
ends at or past OFFSET gets, by MODE:

    416    416 Range Not Satisfiable, Content-Range "bytes */OFFSET" (the
           object now ends at OFFSET)
    416full  416 with the file's real size in Content-Range (a server at
           odds with itself)
    500    500 Internal Server Error
    404    404 Not Found
    short  206 with the range's headers but half its bytes (a short body)

GET /__fail__ (no mode) disarms it.  GET /__stats__ answers {"failed": N}:
the GETs failed since the server started.  Loopback only; every
connection times out after 10 s of silence.  Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "remote"))

import static_server  # noqa: E402


class FlakyHandler(static_server.Handler):
    timeout = 10  # seconds a connection may stay silent
    # Headers and body go out as two writes: without TCP_NODELAY the body
    # waits for the client's delayed ACK (40 ms a request on Linux).
    disable_nagle_algorithm = True
    lock = threading.Lock()
    fault: dict = {"mode": None, "at": 0, "suffix": "/data.ufs"}
    failed = 0

    def _reply(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _control(self) -> bool:
        """Answers /__fail__ and /__stats__; False for any other path."""
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/__fail__":
            q = dict(urllib.parse.parse_qsl(url.query))
            with FlakyHandler.lock:
                FlakyHandler.fault = {"mode": q.get("mode"), "at": int(q.get("at", "0")),
                                      "suffix": q.get("suffix", "/data.ufs")}
            self._reply(200, b"{}")
            return True
        if url.path == "/__stats__":
            with FlakyHandler.lock:
                body = json.dumps({"failed": FlakyHandler.failed}).encode()
            self._reply(200, body)
            return True
        return False

    def _range_to_fail(self) -> tuple:
        """(fault, first, last, stat) when this GET is to fail, else None."""
        with FlakyHandler.lock:
            fault = dict(FlakyHandler.fault)
        path = urllib.parse.urlsplit(self.path).path
        if not fault["mode"] or not path.endswith(fault["suffix"]):
            return None
        found = self._file()
        m = static_server._RANGE.match(self.headers.get("Range", "").strip())
        if found is None or m is None or not m.group(1):
            return None
        size = found[1].st_size
        first = int(m.group(1))
        last = min(int(m.group(2)) if m.group(2) else size - 1, size - 1)
        if last < fault["at"]:
            return None
        return fault, first, last, found[1]

    def do_GET(self) -> None:  # noqa: N802
        if self._control():
            return
        fail = self._range_to_fail()
        if fail is None:
            super().do_GET()
            return
        with FlakyHandler.lock:
            FlakyHandler.failed += 1
        fault, first, last, st = fail
        mode = fault["mode"]
        if mode in ("416", "416full"):
            self.send_response(416)
            self.send_header("Content-Range", f"bytes */{fault['at'] if mode == '416' else st.st_size}")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif mode == "short":
            n = last - first + 1
            body = b"\0" * (n // 2)
            self.send_response(206)
            self.send_header("ETag", f'"{st.st_size:x}-{st.st_mtime_ns:x}"')  # static_server's
            self.send_header("Content-Range", f"bytes {first}-{last}/{st.st_size}")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self._error(int(mode))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--port-file", required=True)
    args = ap.parse_args()
    FlakyHandler.root = os.path.abspath(args.dir)
    server = static_server.Server(("127.0.0.1", 0), FlakyHandler)
    server.daemon_threads = True
    line = json.dumps({"url": f"http://127.0.0.1:{server.server_address[1]}", "pid": os.getpid()})
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(line + "\n")
    os.replace(tmp, args.port_file)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
