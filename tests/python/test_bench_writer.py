"""Smoke test of the writer benchmark (bench/writer_bench.py --smoke):
300 samples through ufspack.Writer and ufspack.write, so the harness
cannot rot (the peers run in the full, opt-in benchmark).  No timing is
asserted beyond being positive."""

import benchsmoke


def test_writer_bench_smoke(tmp_path):
    r, _ = benchsmoke.run("writer_bench.py", tmp_path, "--smoke")
    assert r["samples"] == 300
    assert set(r["results"]) == {"ufspack/1", "ufspack/2"}
    for key, v in r["results"].items():
        assert v["seconds"] > 0 and v["samples_s"] > 0, key
