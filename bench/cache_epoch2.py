#!/usr/bin/env python3
"""Epoch 2 through the node-local cache against the same pack on local disk,
in alternating rounds in one process (docs/benchmarks.md, "Object storage").

    PYTHONPATH=build/python python3 bench/cache_epoch2.py s3://B/pack LOCAL_PACK CACHE_DIR [--rounds 7]

Fills an empty cache with one epoch of the remote pack (any URL
ufspack.Pack opens, AWS settings from the environment), reads the local pack
once (page cache warm), then per round one shuffled epoch of each in batches
of 256 through Pack.read_many (raw bytes). Prints each round and the medians.
remote_bench.py measures each loader once per fresh process; on epochs of
under a second its single runs spread by +-15%, which this settles.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import ufspack


def epoch(pack: ufspack.Pack, n: int, seed: int) -> float:
    order = list(range(n))
    random.Random(seed).shuffle(order)
    t0 = time.perf_counter()
    for i in range(0, n, 256):
        pack.read_many(order[i : i + 256])
    return n / (time.perf_counter() - t0)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("url", help="the remote pack (s3://, https://, http://)")
    p.add_argument("local", help="the same pack on local disk")
    p.add_argument("cache", help="an empty cache directory")
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args()
    remote = ufspack.Pack(args.url, cache=ufspack.Cache(args.cache))
    local = ufspack.Pack(args.local, cache=False)
    n = len(remote)
    if len(local) != n:
        raise SystemExit(f"{args.url} has {n} records, {args.local} has {len(local)} records: not the same pack")
    t0 = time.perf_counter()
    epoch(remote, n, 1)
    print(f"cache filled in {time.perf_counter() - t0:.1f} s", flush=True)
    epoch(local, n, 1)
    cached, plain = [], []
    for r in range(args.rounds):
        cached.append(epoch(remote, n, 2 + r))
        plain.append(epoch(local, n, 2 + r))
        print(f"round {r}: cache {cached[-1]:,.0f}/s, local {plain[-1]:,.0f}/s, {cached[-1] / plain[-1]:.2f}x",
              flush=True)
    mc, ml = statistics.median(cached), statistics.median(plain)
    print(f"median: cache {mc:,.0f}/s, local {ml:,.0f}/s, {mc / ml:.2f}x")


if __name__ == "__main__":
    main()
