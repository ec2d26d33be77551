#!/usr/bin/python3
"""Block reads on a slow network file system, against the link's own
sequential bandwidth and today's best random path (docs/benchmarks.md).

    sudo PYTHONPATH=build/python python3 bench/slowfs_block_bench.py TREE \\
        [--delay-ms 0.5] [--repeat 3] [--work /tmp/slowfs-block] [--out DIR]

Builds TREE into a --layout shuffled pack under --work, serves --work over
SSHFS through ../shared/bench/slowfs.sh (one-way delay --delay-ms), and in
one run, alternating, with the page cache dropped before each measurement
(echo 3 > /proc/sys/vm/drop_caches: every byte comes over the link):

  cat             cat data.ufs > /dev/null over the mount: the link's
                  sequential bandwidth
  random_batched  MyImageFolder(output="bytes").__getitems__ of batches of
                  256 RandomSampler indices (several preads in flight):
                  today's best random path
  block           the same dataset read sample by sample (ds[i], as torch
                  1.13's DataLoader does) in ufspack.BlockSampler order
                  (8 MiB blocks, window 16): one large pread per block,
                  fetched ahead in the background

Reported: MB/s of record bytes (cat: of the file), samples/s, and the
ratios block / cat and block / random_batched; medians of --repeat.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Dict, List

import benchlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SLOWFS = os.environ.get("SLOWFS", os.path.join(ROOT, "..", "shared", "bench", "slowfs.sh"))


def drop_caches() -> None:
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def run_cat(pack: str) -> Dict[str, float]:
    path = os.path.join(pack, "data.ufs")
    t0 = time.perf_counter()
    subprocess.run(f"cat '{path}' > /dev/null", shell=True, check=True)
    dt = time.perf_counter() - t0
    return {"seconds": dt, "mb_s": os.path.getsize(path) / dt / 1e6}


def run_random(pack: str) -> Dict[str, float]:
    import torch

    import ufspack

    ds = ufspack.MyImageFolder(pack, output="bytes")
    order = list(torch.utils.data.RandomSampler(range(len(ds)), generator=torch.Generator().manual_seed(0)))
    t0 = time.perf_counter()
    nbytes = 0
    for k in range(0, len(order), 256):
        for data, _ in ds.__getitems__(order[k:k + 256]):
            nbytes += len(data)
    dt = time.perf_counter() - t0
    return {"seconds": dt, "mb_s": nbytes / dt / 1e6, "samples_s": len(order) / dt}


def run_block(pack: str) -> Dict[str, float]:
    import ufspack

    ds = ufspack.MyImageFolder(pack, output="bytes")
    t0 = time.perf_counter()
    sampler = ufspack.BlockSampler(ds)
    nbytes = n = 0
    for i in sampler:
        data, _ = ds[i]
        nbytes += len(data)
        n += 1
    dt = time.perf_counter() - t0
    st = ds._pack._handle.get().block_stats()
    return {"seconds": dt, "mb_s": nbytes / dt / 1e6, "samples_s": n / dt,
            "block_fetches": st["block_fetches"], "bytes_fetched": st["bytes_fetched"],
            "record_bytes": nbytes}


def child(kind: str, pack: str) -> int:
    res = {"cat": run_cat, "random_batched": run_random, "block": run_block}[kind](pack)
    print("RESULT " + json.dumps(res), flush=True)
    return 0


def main() -> int:
    p = benchlib.parser(__doc__)
    p.add_argument("tree", nargs="?")
    p.add_argument("--delay-ms", type=float, default=0.5)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--work", default="/tmp/slowfs-block")
    p.add_argument("--out")
    p.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return child(*args.child)
    import ufspack

    src = os.path.join(args.work, "src")
    mnt = os.path.join(args.work, "mnt")
    os.makedirs(src, exist_ok=True)
    os.makedirs(mnt, exist_ok=True)
    pack_src = os.path.join(src, "pack")
    if not os.path.exists(os.path.join(pack_src, "index.ufs")):
        ufspack.build(args.tree, pack_src, layout="shuffled", progress=False)
    subprocess.run(["bash", SLOWFS, "up", src, mnt, str(args.delay_ms)], check=True, stdout=subprocess.DEVNULL)
    pack = os.path.join(mnt, "pack")
    runs: Dict[str, List[Dict[str, float]]] = {"cat": [], "random_batched": [], "block": []}
    try:
        for rep in range(args.repeat):
            for kind in runs:
                drop_caches()
                out = subprocess.run([sys.executable, __file__, "--child", kind, pack], check=True,
                                     capture_output=True, text=True, env=dict(os.environ)).stdout
                r = json.loads([ln for ln in out.splitlines() if ln.startswith("RESULT ")][-1][7:])
                runs[kind].append(r)
                print(f"[{rep + 1}/{args.repeat}] {kind}: {r['mb_s']:.1f} MB/s"
                      + (f", {r['samples_s']:,.0f} samples/s" if "samples_s" in r else ""), flush=True)
    finally:
        subprocess.run(["bash", SLOWFS, "down"], check=False, stdout=subprocess.DEVNULL)
    med = {k: {m: statistics.median(r[m] for r in v) for m in v[0]} for k, v in runs.items()}
    lines = [f"slow FS, {args.delay_ms} ms one way, medians of {args.repeat}, page cache dropped each time",
             "", "| reader | MB/s | samples/s | block ÷ this |", "|---|---|---|---|"]
    for k, m in med.items():
        lines.append(f"| {k} | {m['mb_s']:.1f} | {m.get('samples_s', 0):,.0f} | "
                     f"{med['block']['mb_s'] / m['mb_s']:.2f}x |")
    b = med["block"]
    lines.append(f"\nblock: {b['block_fetches']:.0f} block fetches, bytes fetched "
                 f"{b['bytes_fetched'] / b['record_bytes']:.3f}x the record bytes")
    text = "\n".join(lines)
    print(text)
    benchlib.write_results_dir(args.out, {"runs": runs, "medians": med, "delay_ms": args.delay_ms}, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
