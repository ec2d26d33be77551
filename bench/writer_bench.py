#!/usr/bin/python3
"""Writing generated samples into a dataset, side by side: ufspack.Writer /
ufspack.write against litdata.optimize, MosaicML Streaming's MDSWriter and
WebDataset's TarWriter (docs/benchmarks.md, "Writing packs from Python").

    PYTHONPATH=build/python build/peers-venv/bin/python bench/writer_bench.py \\
        [--samples 100000] [--workers 2] [--repeat 3] [--work /tmp/writer-bench] [--out DIR]

The samples are the same for every writer: sample i is
("class{i % 100:03d}/{i:06d}.jpg", a real photo of ../shared/data (reused
round-robin; generated JPEGs without it), label i % 100).  Each writer runs
in a fresh process, writing to local disk, with one process and with
--workers worker processes:

  ufspack     ufspack.Writer (1), ufspack.write on a ProcessPoolExecutor (N)
  litdata     litdata.optimize(fn, inputs, chunk_bytes="64MB", num_workers=0 or N)
  mds         streaming.MDSWriter (1); N processes writing halves (N)
  webdataset  webdataset.TarWriter (1); N processes writing shards (N)

Reported: samples/s (median of --repeat) and each peer's time over
ufspack's (the target: ufspack >= 1.5x the fastest peer).  A peer whose
package is missing is skipped and said so.  --smoke: 300 samples, one
repeat, ufspack only (for the test suite).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from typing import Dict, List, Optional

import benchlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PHOTOS = os.path.join(ROOT, "..", "shared", "data", "cats_and_dogs_filtered.tar")
WRITERS = ("ufspack", "litdata", "mds", "webdataset")


def photos(limit: int) -> List[bytes]:
    out: List[bytes] = []
    if os.path.exists(PHOTOS):
        with tarfile.open(PHOTOS) as t:
            for m in t:
                if m.isfile() and m.name.lower().endswith(".jpg"):
                    f = t.extractfile(m)
                    assert f is not None
                    out.append(f.read())
                    if len(out) >= limit:
                        break
    if not out:
        out = [bytes([i % 251]) * (20000 + i) for i in range(64)]
    return out


_PHOTOS: List[bytes] = []
_LIMIT = 3000  # photos loaded: at most one per sample


def sample(i: int):
    """Sample i: (name, bytes, label), the same for every writer."""
    global _PHOTOS
    if not _PHOTOS:
        _PHOTOS = photos(_LIMIT)
    return f"class{i % 100:03d}/{i:06d}.jpg", _PHOTOS[i % len(_PHOTOS)], i % 100


def ufspack_fn(i: int):
    return sample(i)


def litdata_fn(i: int):
    _, data, label = sample(i)
    return {"image": data, "label": label}


def write_range(kind: str, out: str, lo: int, hi: int) -> None:
    """One process's share for mds and webdataset with N workers."""
    if kind == "mds":
        from streaming import MDSWriter

        with MDSWriter(out=out, columns={"image": "bytes", "label": "int"}, size_limit="64mb") as w:
            for i in range(lo, hi):
                _, data, label = sample(i)
                w.write({"image": data, "label": label})
    else:
        import webdataset as wds

        with wds.ShardWriter(os.path.join(out, "shard-%06d.tar"), maxsize=64 << 20, verbose=0) as w:
            for i in range(lo, hi):
                name, data, label = sample(i)
                w.write({"__key__": name[:-4], "jpg": data, "cls": str(label)})


def run_one(kind: str, out: str, n: int, workers: int) -> float:
    """Writes the n samples with `kind` into `out` (in a fresh process);
    returns the seconds of the writing alone (imports and loading the
    photos happen before the clock starts, for every writer alike)."""
    import concurrent.futures

    global _LIMIT
    _LIMIT = min(_LIMIT, n)
    sample(0)  # workers forked later inherit the photos
    if kind == "ufspack":
        import ufspack
    elif kind == "litdata":
        from litdata import optimize
    elif kind == "mds":
        import streaming  # noqa: F401
    else:
        import webdataset  # noqa: F401
    t0 = time.perf_counter()
    if kind == "ufspack":
        if workers <= 1:
            with ufspack.Writer(out) as w:
                for i in range(n):
                    w.add(*sample(i)[:2])
        else:
            with concurrent.futures.ProcessPoolExecutor(workers) as ex:
                ufspack.write(ufspack_fn, range(n), out, executor=ex, parts=workers)
    elif kind == "litdata":
        optimize(fn=litdata_fn, inputs=list(range(n)), output_dir=out, chunk_bytes="64MB",
                 num_workers=workers if workers > 1 else 0)
    elif workers <= 1:
        os.makedirs(out, exist_ok=True)
        write_range(kind, out, 0, n)
    else:
        os.makedirs(out, exist_ok=True)
        cuts = [n * k // workers for k in range(workers + 1)]
        with concurrent.futures.ProcessPoolExecutor(workers) as ex:
            jobs = [ex.submit(write_range, kind, os.path.join(out, f"w{k}"), cuts[k], cuts[k + 1])
                    for k in range(workers)]
            for j in jobs:
                j.result()
    return time.perf_counter() - t0


def available(kind: str) -> Optional[str]:
    mod = {"ufspack": "ufspack", "litdata": "litdata", "mds": "streaming", "webdataset": "webdataset"}[kind]
    r = subprocess.run([sys.executable, "-c", f"import {mod}"], capture_output=True, text=True)
    return None if r.returncode == 0 else r.stderr.strip().splitlines()[-1]


def measure(kind: str, work: str, n: int, workers: int) -> float:
    out = os.path.join(work, f"{kind}-{workers}")
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run(["sync"], check=True)
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "_one", kind, out, str(n),
                        str(workers)], check=True, stdout=subprocess.PIPE, text=True)
    shutil.rmtree(out, ignore_errors=True)
    return float(r.stdout.strip().splitlines()[-1])


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "_one":
        print(run_one(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])))
        return 0
    p = benchlib.parser(__doc__)
    p.add_argument("--samples", type=int, default=100000, help="samples written (default 100000)")
    p.add_argument("--workers", type=int, default=2, help="worker processes of the parallel runs (default 2)")
    p.add_argument("--repeat", type=int, default=3, help="runs of each, the median reported (default 3)")
    p.add_argument("--work", default="/tmp/writer-bench", help="scratch directory (default /tmp/writer-bench)")
    p.add_argument("--smoke", action="store_true", help="300 samples, one run, ufspack only")
    p.add_argument("--out", help="directory for results.json and table.md")
    args = p.parse_args()
    if args.smoke:
        args.samples, args.repeat = 300, 1
    os.makedirs(args.work, exist_ok=True)
    kinds = ("ufspack",) if args.smoke else WRITERS
    results: Dict[str, Dict[str, float]] = {}
    skipped: Dict[str, str] = {}
    for kind in kinds:
        why = None if kind == "ufspack" else available(kind)  # ufspack: this harness's own
        if why:
            skipped[kind] = why
            continue
        for workers in (1, args.workers):
            times = [measure(kind, args.work, args.samples, workers) for _ in range(args.repeat)]
            results[f"{kind}/{workers}"] = {"seconds": statistics.median(times),
                                           "samples_s": args.samples / statistics.median(times)}
    lines = [f"{args.samples:,} samples (real photos, ~{len(sample(0)[1]) // 1000} KB each), "
             f"median of {args.repeat}", "",
             "| writer | processes | samples/s | its time / ufspack's |", "|---|---|---|---|"]
    for key, r in results.items():
        kind, workers = key.split("/")
        base = results.get(f"ufspack/{workers}")
        ratio = f"{r['seconds'] / base['seconds']:.2f}x" if base else "-"
        lines.append(f"| {kind} | {workers} | {r['samples_s']:,.0f} | {ratio} |")
    for kind, why in skipped.items():
        lines.append(f"| {kind} | - | skipped: {why} | |")
    table = "\n".join(lines)
    print(table)
    benchlib.write_results_dir(args.out, {"samples": args.samples, "results": results,
                                          "skipped": skipped}, table)
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
