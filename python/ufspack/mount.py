"""A pack as a read-only directory tree, for scripts and tests::

    with ufspack.mounted("/nfs/train.ufspack", cache="/local/ufspack") as root:
        dataset = torchvision.datasets.ImageFolder(root)

``mounted`` runs ``ufspack mount --foreground`` (FUSE; see docs/mount.md)
on a fresh temporary directory, waits (bounded) until the file system is
up, yields its path, and on leaving the block, even by an exception,
unmounts it (SIGINT: the command unmounts cleanly) and removes the
directory.  The command line tool is found as ``$UFSPACK_CLI``, else
``ufspack`` on ``PATH`` or beside the Python interpreter.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import IO, Iterator, Sequence

__all__ = ["MountError", "mounted"]


class MountError(OSError):
    """``ufspack mount`` failed; the message is the command's error."""


def _find_cli() -> str:
    cli = os.environ.get("UFSPACK_CLI")
    if cli:
        return cli
    found = shutil.which("ufspack")
    if found:
        return found
    beside = os.path.join(os.path.dirname(sys.executable), "ufspack")
    if os.access(beside, os.X_OK):
        return beside
    raise FileNotFoundError("the ufspack command line tool was not found: set UFSPACK_CLI or put ufspack on PATH")


def _output(log: IO[bytes]) -> str:
    log.seek(0)
    return log.read().decode("utf-8", "replace").strip()


def _wait_until_mounted(proc: subprocess.Popen[bytes], root: str, log: IO[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.ismount(root):
        if proc.poll() is not None:
            raise MountError(f"ufspack mount exited with status {proc.returncode}: {_output(log)}")
        if time.monotonic() > deadline:
            raise MountError(f"ufspack mount: {root} not mounted after {timeout:.0f} s: {_output(log)}")
        time.sleep(0.02)


def _stop(proc: subprocess.Popen[bytes], cli: str, root: str, timeout: float) -> None:
    """SIGINT (a clean unmount), then, if the process lingers, SIGKILL and
    an unmount of what it left."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout)
            return
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)
    subprocess.run([cli, "umount", root], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


@contextlib.contextmanager
def mounted(
    pack: str | os.PathLike[str],
    cache: str | os.PathLike[str] | None = None,
    *,
    options: Sequence[str] = (),
    read_ahead: int | str | None = None,
    threads: int | None = None,
    log: str | os.PathLike[str] | None = None,
    timeout: float = 60.0,
) -> Iterator[str]:
    """Mounts ``pack`` (a directory, index.ufs, merged pack, ``s3://`` or
    ``https://`` URL) read-only on a fresh temporary directory and yields
    its path; ``cache`` is a node-local cache directory (``--cache``),
    ``options`` FUSE mount options (``-o``, e.g. ``"allow_other"``),
    ``read_ahead`` how far files read in the pack's order are read ahead
    (``--read-ahead``: bytes or a size such as ``"16M"``;
    0 turns it off; default 4 MiB), ``threads`` the most requests served
    at once (``--threads``, default 64), ``log`` a file the mount appends
    its log lines to (``--log-file``: records that failed to read, and on
    unmount the reads served); without it they are discarded.

    Raises MountError with the command's message when the mount fails or
    is not up within ``timeout`` seconds (the tree of a pack of millions of
    records takes a few seconds to build).
    """
    cli = _find_cli()
    root = tempfile.mkdtemp(prefix="ufspack-mount-")
    cmd = [cli, "mount", os.fspath(pack), root, "--foreground"]
    if cache is not None:
        cmd += ["--cache", os.fspath(cache)]
    if read_ahead is not None:
        cmd += ["--read-ahead", str(read_ahead)]
    if threads is not None:
        cmd += ["--threads", str(threads)]
    if log is not None:
        cmd += ["--log-file", os.fspath(log)]
    for option in options:
        cmd += ["-o", option]
    # A file, not a pipe, for stderr: a full pipe would block the mount.
    with tempfile.TemporaryFile() as output:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=output)
        try:
            _wait_until_mounted(proc, root, output, timeout)
            yield root
        finally:
            _stop(proc, cli, root, timeout)
            with contextlib.suppress(OSError):
                os.rmdir(root)
