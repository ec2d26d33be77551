"""Smoke test of the mount benchmark (bench/mount_bench.py --smoke): 60
files read at random through the loose tree and through `ufspack mount`,
so the harness cannot rot (ratarmount, the slow FS and the 1M-record find
run in the full, opt-in benchmark).  No timing is asserted beyond being
positive.  Skipped, as test_mount.py, where FUSE is unavailable."""

import pytest

import benchsmoke
import fusecheck

_REASON = fusecheck.unavailable()


@pytest.mark.skipif(_REASON is not None, reason=str(_REASON))
def test_mount_bench_smoke(tmp_path):
    r, out = benchsmoke.run("mount_bench.py", tmp_path, "--smoke")
    assert r["files"] == 60
    assert set(r["reads"]) == {"loose", "mount"}
    for name, v in r["reads"].items():
        assert v["python"]["files_s"] > 0 and v["posix"]["files_s"] > 0, name
    assert "| mount |" in (out / "table.md").read_text()
