"""Runs a benchmark script of bench/ in its smoke mode, for the test_bench_*
smoke tests: the script in a fresh process (this interpreter), its scratch
under tmp_path/work and its results in tmp_path/out."""

import json
import os
import subprocess
import sys
from typing import Any, Dict, Tuple

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench")


def run(script: str, tmp_path: Any, *args: str, timeout: int = 300) -> Tuple[Dict[str, Any], Any]:
    """(results.json as a dict, the --out directory) of bench/`script`
    run with `args` plus --work and --out; fails the test with the
    script's output when it exits non-zero."""
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, os.path.join(BENCH, script), *args, "--work", str(tmp_path / "work"),
                        "--out", str(out)], capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{script} exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    with open(out / "results.json") as f:
        return json.load(f), out
