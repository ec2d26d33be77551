"""A directory served over HTTP on loopback by tests/remote/static_server.py
(range requests, as a web server or CDN serves a pack), for the tests."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from typing import Dict, Iterator

SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "remote", "static_server.py")


@contextlib.contextmanager
def serve(root: str, *extra: str, server: str = SERVER) -> Iterator[str]:
    """Serves `root` while the block runs (static_server.py, or another
    `server` script taking its options, with `extra` options); yields its
    base URL.  The server is killed (its whole process group) on the way
    out."""
    ready = os.path.join(root, ".ready")
    if os.path.exists(ready):  # an earlier server's: its URL is stale
        os.remove(ready)
    proc = subprocess.Popen(
        [sys.executable, server, root, "--port-file", ready, *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not os.path.exists(ready):
            name = os.path.basename(server)
            assert proc.poll() is None, f"{name} exited"
            assert time.monotonic() < deadline, f"{name} not ready after 30 s"
            time.sleep(0.02)
        with open(ready) as f:
            yield json.load(f)["url"]
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def stats(url: str) -> Dict[str, int]:
    """The server's GET /__stats__: the most GETs in flight at once since
    the last call ("peak_in_flight") and the connections it has accepted."""
    with urllib.request.urlopen(url + "/__stats__", timeout=10) as r:
        return json.load(r)
