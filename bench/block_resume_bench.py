#!/usr/bin/python3
"""What BlockSampler costs at scale: making the epoch's order, and resuming
mid-epoch (docs/benchmarks.md).

    build/scale_bench build /tmp/p100m --records 100000000 --payload 16
    PYTHONPATH=build/python python3 bench/block_resume_bench.py /tmp/p100m [--block-bytes 65536]

Times, in one process, on a pack of generated records (scale_bench):

  plan       Reader.block_members: each record's offset, grouped by
             block (C++, a parallel counting sort), once per process
  order, resume, resume 3->2, resume 8x8->6x8
             the schedule alone, given the plan: the epoch's order up to
             its first window, and after 1/3 of the epoch was consumed by
             1 rank, by 3 ranks resumed on 2, and by 8 ranks of 8
             DataLoader workers (batches of 256) resumed on 6
  first      the first epoch's order, from a constructed sampler to its
             first sample (plan included, as a fresh process pays it)
  state      state_dict() after 1/3 of the epoch was consumed
  resume     a new sampler in a new process's shoes: load_state_dict and
             the first sample of the rest (plan included)
  resume 3->2  the same with the state of 3 ranks resumed on 2

and the process's peak RSS (VmHWM).
"""

from __future__ import annotations

import json
import sys
import time

import benchlib


def peak_rss_mb() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> int:
    p = benchlib.parser(__doc__)
    p.add_argument("pack")
    p.add_argument("--block-bytes", type=int, default=64 << 10)
    args = p.parse_args()
    import warnings

    import ufspack

    warnings.simplefilter("ignore")  # a sorted pack: the layout warning
    out = {}
    pack = ufspack.Pack(args.pack)
    n = len(pack)
    out["records"] = n
    t0 = time.perf_counter()
    first, members = pack._handle.get().block_members(args.block_bytes)
    out["block_members_s"] = time.perf_counter() - t0
    out["blocks"] = int((first[1:] > first[:-1]).sum())
    from ufspack import block_schedule as sch

    def order_s(cfg, replicas, resume, first=first, members=members):
        t0 = time.perf_counter()
        next(sch.epoch_order(first, members, cfg, 0, replicas, 0, resume).samples())
        return time.perf_counter() - t0

    one = sch.Config(args.block_bytes, 16, True, 0, False, 1, 1)
    out["order_s"] = order_s(one, 1, None)
    out["resume_order_s"] = order_s(one, 1, sch.Resume(0, 1, n // 3, 1, 1))
    out["resume_3_to_2_order_s"] = order_s(one, 2, sch.Resume(0, 3, n // 9, 1, 1))
    lanes = sch.Config(args.block_bytes, 16, True, 0, False, 256, 8)
    out["resume_8x8_to_6x8_order_s"] = order_s(lanes, 6, sch.Resume(0, 8, n // 24, 8, 256))
    del first, members, order_s

    def fresh(**kw):
        return ufspack.BlockSampler(ufspack.Pack(args.pack), block_bytes=args.block_bytes, **kw)

    t0 = time.perf_counter()
    s = fresh()
    it = iter(s)
    next(it)
    out["first_sample_s"] = time.perf_counter() - t0
    k = n // 3
    t0 = time.perf_counter()
    state = s.state_dict(consumed=k)
    out["state_dict_s"] = time.perf_counter() - t0
    del it, s
    t0 = time.perf_counter()
    r = fresh()
    r.load_state_dict(state)
    it = iter(r)
    next(it)
    out["resume_s"] = time.perf_counter() - t0
    del it, r
    state3 = fresh(num_replicas=3, rank=0).state_dict(consumed=k // 3)
    t0 = time.perf_counter()
    r = fresh(num_replicas=2, rank=0)
    r.load_state_dict(state3)
    it = iter(r)
    next(it)
    out["resume_3_to_2_s"] = time.perf_counter() - t0
    out["peak_rss_mb"] = peak_rss_mb()
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
