"""Smoke test of the mount benchmark (bench/mount_bench.py --smoke): 60
files read at random through the loose tree and through `ufspack mount`,
on Python threads and, where the benchmarks are built, by
bench/file_reads, so the harness cannot rot (ratarmount, the slow FS and the 1M-record find
run in the full, opt-in benchmark).  No timing is asserted beyond being
positive.  Skipped, as test_mount.py, where FUSE is unavailable."""

import os

import pytest

import benchsmoke
import fusecheck

_REASON = fusecheck.unavailable()


@pytest.mark.skipif(_REASON is not None, reason=str(_REASON))
def test_mount_bench_smoke(tmp_path):
    r, out = benchsmoke.run("mount_bench.py", tmp_path, "--smoke")
    assert r["files"] == 60
    assert set(r["reads"]) == {"loose", "mount"}
    exe = os.environ.get("UFSPACK_FILE_READS") or os.path.join(benchsmoke.BENCH, "..", "build", "bench", "file_reads")
    ways = {"python", "python_unbuffered", "posix"} | ({"c", "c_python_calls"} if os.access(exe, os.X_OK) else set())
    for name, v in r["reads"].items():
        assert set(v) == ways, name
        for how in ways:
            assert v[how]["files_s"] > 0, (name, how)
    assert "| mount |" in (out / "table.md").read_text()
