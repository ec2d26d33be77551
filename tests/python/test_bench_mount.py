"""Smoke test of the mount benchmark (bench/mount_bench.py --smoke): 60
files read at random through the loose tree and through `ufspack mount`,
so the harness cannot rot (ratarmount, the slow FS and the 1M-record find
run in the full, opt-in benchmark).  No timing is asserted beyond being
positive.  Skipped, as test_mount.py, where FUSE is unavailable."""

import os
import shutil
import subprocess

import pytest

import benchsmoke


def _fuse_unavailable():
    if not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None:
        return "no /dev/fuse or no fusermount3 (Debian: fuse3)"
    cli = os.environ.get("UFSPACK_CLI") or shutil.which("ufspack") or "ufspack"
    try:
        if subprocess.run([cli, "mount", "--help"], capture_output=True, timeout=30).returncode != 0:
            return "ufspack built without mount"
    except OSError as e:
        return f"no ufspack CLI ({e})"
    return None


_REASON = _fuse_unavailable()


@pytest.mark.skipif(_REASON is not None, reason=str(_REASON))
def test_mount_bench_smoke(tmp_path):
    r, out = benchsmoke.run("mount_bench.py", tmp_path, "--smoke")
    assert r["files"] == 60
    assert set(r["reads"]) == {"loose", "mount"}
    for name, v in r["reads"].items():
        assert v["python"]["files_s"] > 0 and v["posix"]["files_s"] > 0, name
    assert "| mount |" in (out / "table.md").read_text()
