"""Smoke test of the archive benchmark (bench/archive_bench.py --local): a
nested tar of a few class tars on local disk in place of the slow FS, one
run of each step, so the harness cannot rot.  No timing is asserted beyond
being positive; what is asserted is that both packs hold the same records."""

import benchsmoke


def test_archive_bench_smoke(tmp_path):
    r, _ = benchsmoke.run("archive_bench.py", tmp_path, "--local", "--classes", "3", "--per-class", "4")
    assert r["files"] == 12 and r["classes"] == 3 and r["same_records"] is True
    for key in ("archive_s", "extract_s", "tree_s"):
        assert r[key] > 0, key
