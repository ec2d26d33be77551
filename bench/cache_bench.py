#!/usr/bin/python3
"""The node-local cache, measured side by side in one run (docs/benchmarks.md).

    sudo PYTHONPATH=build/python bench/cache_bench.py [--tree DIR] [--work DIR]
        [--delay 0.5] [--repeat 3] [--out bench/results/cache-slowfs-0.5]

The pack (and the loose tree, for ImageFolder) lives on the slow network file
system of ../shared/bench/slowfs.sh (SSHFS behind a delayed link; remounted
before every cold measurement so nothing is served from its caches); the
cache directory is on local disk.  Measured, each in a fresh subprocess, the
median of --repeat runs:

  link_seq        sequential read of data.ufs over the slow FS (MB/s): the
                  link's bandwidth, the warm-up target's reference
  warmup          `ufspack warmup` of the pack into an empty cache (MB/s)
  cached_batched  raw bytes, shuffled batches of 64 through Pack.read_many
                  (4 threads), pack on the slow FS, every record cached
  local_batched   the same on a local copy of the pack, page cache warm
  imagefolder     raw bytes of the loose files on the slow FS (open + read),
                  one process, shuffled, the first --if-limit files
  cold_nocache    first epoch, pack on the slow FS, no cache
  cold_cache      first epoch, pack on the slow FS, an empty cache filling
  two_jobs        two processes reading every record through one cache at
                  once: bytes of the cache directory vs data.ufs, each
                  process's PSS, and whether both saw the bytes a cacheless
                  read gives (XXH3 of every record)
  decoded         MyImageFolder(train transform, cache_decoded=True), epoch 1
                  then epoch 2 in one process; the PIL path (decoded_exact:
                  fast_transforms="exact", the rest of the transform native
                  on the cached pixels)

Needs root (slowfs.sh makes a network namespace).  --tree defaults to the
3,000 photos of ../shared/data (unpacked into --work).  --smoke (what the
test suite runs: tests/python/test_bench_cache.py) uses a small generated
tree, the local directory in place of the slow FS and one run each.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SHARED = os.path.join(ROOT, "..", "shared")
SLOWFS = os.environ.get("SLOWFS", os.path.join(SHARED, "bench", "slowfs.sh"))
CLI = os.environ.get("UFSPACK_CLI", os.path.join(ROOT, "build", "ufspack"))
PY = sys.executable


def sh(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), check=True, text=True, **kw)


NO_SLOWFS = False


def remount(src: str, mnt: str, delay: float) -> None:
    if NO_SLOWFS:  # --smoke: the "slow FS" is the local directory itself
        if not os.path.islink(mnt):
            os.symlink(src, mnt)
        return
    sh("bash", SLOWFS, "up", src, mnt, str(delay), stdout=subprocess.DEVNULL)


def du(path: str) -> int:
    total = 0
    for dirpath, dirnames, filenames in os.walk(path):
        for n in dirnames + filenames:
            try:
                total += os.lstat(os.path.join(dirpath, n)).st_blocks * 512
            except FileNotFoundError:
                pass
    return total


# --- measurements, each run in a fresh interpreter ------------------------------

def m_seq(path: str) -> dict:
    t0 = time.perf_counter()
    n = 0
    with open(path, "rb", buffering=0) as f:
        while True:
            b = f.read(8 << 20)
            if not b:
                break
            n += len(b)
    s = time.perf_counter() - t0
    return {"bytes": n, "seconds": s, "mb_s": n / s / 1e6}


def batches(n: int, seed: int, size: int = 64) -> list:
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return [order[i:i + size] for i in range(0, n, size)]


def m_pack(path: str, cache: str, seed: int, limit: int) -> dict:
    import ufspack

    t_open = time.perf_counter()
    pack = ufspack.Pack(path, cache=cache) if cache else ufspack.Pack(path, cache=False)
    n = min(len(pack), limit) if limit else len(pack)
    open_s = time.perf_counter() - t_open
    total = 0
    t0 = time.perf_counter()
    for b in batches(len(pack), seed):
        b = [i for i in b if i < n]
        if b:
            total += sum(len(x) for x in pack.read_many(b, threads=4))
    s = time.perf_counter() - t0
    return {"records": n, "bytes": total, "seconds": s, "samples_s": n / s,
            "open_s": open_s}


def m_imagefolder(tree: str, seed: int, limit: int) -> dict:
    files = []
    for dirpath, _, filenames in os.walk(tree):
        files += [os.path.join(dirpath, f) for f in filenames]
    files.sort()
    random.Random(seed).shuffle(files)
    files = files[:limit]
    t0 = time.perf_counter()
    total = 0
    for f in files:
        with open(f, "rb") as fh:
            total += len(fh.read())
    s = time.perf_counter() - t0
    return {"records": len(files), "bytes": total, "seconds": s,
            "samples_s": len(files) / s}


def pss_kib() -> int:
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    return -1


def m_digest(path: str, cache: str, seed: int) -> dict:
    import ufspack

    pack = ufspack.Pack(path, cache=cache) if cache else ufspack.Pack(path, cache=False)
    digests = [b""] * len(pack)
    for b in batches(len(pack), seed):
        for i, x in zip(b, pack.read_many(b, threads=2)):
            digests[i] = hashlib.sha256(x).digest()
    h = hashlib.sha256(b"".join(digests))
    return {"sha256": h.hexdigest(), "pss_kib": pss_kib(), "records": len(pack)}


def m_decoded(path: str, cache: str, seed: int, mode: str = "false") -> dict:
    import torch
    from torchvision import transforms as T

    import ufspack

    tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    try:
        fast = {"false": False, "exact": "exact"}[mode]
        ds = ufspack.MyImageFolder(path, tf, cache=cache, cache_decoded=True,
                                   fast_transforms=fast)
    except TypeError as e:
        return {"skipped": f"no cache_decoded in this build: {e}"}
    torch.manual_seed(seed)
    out = {}
    for epoch in (1, 2):
        order = list(range(len(ds)))
        random.Random(seed + epoch).shuffle(order)
        t0 = time.perf_counter()
        for i in order:
            ds[i]
        s = time.perf_counter() - t0
        out[f"epoch{epoch}_samples_s"] = len(order) / s
    out["ratio"] = out["epoch2_samples_s"] / out["epoch1_samples_s"]
    return out


MEASURES = {"seq": m_seq, "pack": m_pack, "imagefolder": m_imagefolder,
            "digest": m_digest, "decoded": m_decoded}


def run_child(name: str, *args) -> dict:
    r = subprocess.run([PY, os.path.abspath(__file__), "--child", name, json.dumps(args)],
                       check=True, capture_output=True, text=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


# --- the run ---------------------------------------------------------------------------

def prepare(args) -> tuple:
    src = os.path.join(args.work, "src")
    tree = os.path.join(src, "tree")
    pack = os.path.join(src, "pack")
    local = os.path.join(args.work, "local", "pack")
    if not os.path.isdir(tree):
        os.makedirs(src, exist_ok=True)
        if args.smoke:
            sh(PY, os.path.join(ROOT, "scripts", "make_sample_tree.py"), tree,
               "--per-class", "12")
        elif args.tree:
            shutil.copytree(args.tree, tree)
        else:
            tar = os.path.join(SHARED, "data", "cats_and_dogs_filtered.tar")
            with tarfile.open(tar) as t:
                t.extractall(os.path.join(args.work, "unpacked"))
            shutil.copytree(os.path.join(args.work, "unpacked", "cats_and_dogs_filtered"), tree)
    if not os.path.exists(os.path.join(pack, "index.ufs")):
        sh(CLI, "build", tree, "-o", pack, "-q")
    if not os.path.exists(os.path.join(local, "index.ufs")):
        os.makedirs(os.path.dirname(local), exist_ok=True)
        shutil.copytree(pack, local)
    return src, tree, pack, local


def median_of(fn, repeat: int, key: str) -> dict:
    runs = [fn(k) for k in range(repeat)]
    vals = [r[key] for r in runs]
    med = statistics.median(vals)
    best = min(runs, key=lambda r: abs(r[key] - med))
    return dict(best, median=med, min=min(vals), max=max(vals), runs=len(runs))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", help="ImageFolder tree (default: the photos of ../shared/data)")
    ap.add_argument("--work", default="/tmp/ufspack-cache-bench")
    ap.add_argument("--delay", type=float, default=0.5, help="one-way delay in ms")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--if-limit", type=int, default=400,
                    help="loose files read for ImageFolder on the slow FS")
    ap.add_argument("--out", help="directory for results.json")
    ap.add_argument("--only", help="comma-separated subset: link, warmup, cached, "
                    "imagefolder, cold, two_jobs, decoded (default: all)")
    ap.add_argument("--smoke", action="store_true",
                    help="a small generated tree, no slow FS, one run each")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("child_args", nargs="?", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(MEASURES[args.child](*json.loads(args.child_args))))
        return 0

    global NO_SLOWFS
    if args.smoke:
        NO_SLOWFS = True
        args.repeat = 1
    src, tree, pack, local = prepare(args)
    mnt = os.path.join(args.work, "mnt")
    rpack = os.path.join(mnt, "pack")
    rtree = os.path.join(mnt, "tree")
    caches = os.path.join(args.work, "caches")
    shutil.rmtree(caches, ignore_errors=True)
    os.makedirs(caches)
    data_bytes = os.path.getsize(os.path.join(pack, "data.ufs"))
    res: dict = {"delay_ms": args.delay, "data_bytes": data_bytes,
                 "records": run_child("digest", local, "", 0)["records"]}

    def fresh_cache() -> str:
        return tempfile.mkdtemp(prefix="c-", dir=caches)

    def want(name: str) -> bool:
        return not args.only or name in args.only.split(",")

    def seq(k):
        remount(src, mnt, args.delay)
        return run_child("seq", os.path.join(rpack, "data.ufs"))

    if want("link") or want("warmup"):
        res["link_seq"] = median_of(seq, args.repeat, "mb_s")

    warm_dir = {}

    def warm(k):
        remount(src, mnt, args.delay)
        d = fresh_cache()
        t0 = time.perf_counter()
        r = sh(CLI, "warmup", rpack, "--cache", d, "-j", "4", "--json",
               capture_output=True)
        s = time.perf_counter() - t0
        info = json.loads(r.stdout)
        warm_dir["dir"] = d
        return {"seconds": s, "mb_s": data_bytes / s / 1e6, "cli": info}

    if want("warmup") or want("cached"):
        res["warmup"] = median_of(warm, args.repeat, "mb_s")
        if "link_seq" in res:
            res["warmup"]["of_link"] = res["warmup"]["median"] / res["link_seq"]["median"]

    if want("cached"):
        cache = warm_dir["dir"]
        remount(src, mnt, args.delay)
        run_child("pack", rpack, cache, 0, 0)  # the cache's files into the page cache
        run_child("pack", local, "", 0, 0)
        res["cached_batched"] = median_of(
            lambda k: run_child("pack", rpack, cache, 10 + k, 0), args.repeat, "samples_s")
        res["local_batched"] = median_of(
            lambda k: run_child("pack", local, "", 10 + k, 0), args.repeat, "samples_s")

    def imagefolder(k):
        remount(src, mnt, args.delay)
        return run_child("imagefolder", rtree, 20 + k, args.if_limit)

    if want("imagefolder") or want("cached"):
        res["imagefolder"] = median_of(imagefolder, args.repeat, "samples_s")

    if want("cold"):
        # Interleaved (without, with, without, ...) so drift hits both alike.
        runs: dict = {False: [], True: []}

        def cold(k):
            with_cache = k % 2 == 1
            remount(src, mnt, args.delay)
            r = run_child("pack", rpack, fresh_cache() if with_cache else "", 30 + k // 2, 0)
            runs[with_cache].append(r)
            return r

        for k in range(2 * args.repeat):
            cold(k)
        for key, with_cache in (("cold_nocache", False), ("cold_cache", True)):
            rs = runs[with_cache]
            vals = [x["samples_s"] for x in rs]
            med = statistics.median(vals)
            res[key] = dict(rs[0], median=med, min=min(vals), max=max(vals), runs=len(rs),
                            all=vals)

    if want("two_jobs"):
        remount(src, mnt, args.delay)
        shared = fresh_cache()
        alone = run_child("digest", local, "", 1)
        expected = alone["sha256"]
        procs = [subprocess.Popen([PY, os.path.abspath(__file__), "--child", "digest",
                                   json.dumps([rpack, shared, 40 + j])],
                                  stdout=subprocess.PIPE, text=True) for j in range(2)]
        outs = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
        res["two_jobs"] = {
            "cache_dir_bytes": du(shared), "data_bytes": data_bytes,
            "copies": du(shared) / data_bytes,
            "pss_kib": [o["pss_kib"] for o in outs],
            "pss_kib_without_cache": alone["pss_kib"],
            "same_bytes_as_without_cache": all(o["sha256"] == expected for o in outs),
        }
    if want("decoded"):
        # Each run a fresh cache; epoch 1 writes ~1.7 GB of pixels, so its
        # speed depends on the page cache's writeback: median of --repeat.
        for key, mode in (("decoded", "false"), ("decoded_exact", "exact")):
            first = run_child("decoded", local, fresh_cache(), 0, mode)
            if "skipped" in first:
                res[key] = first
                continue
            rest = [run_child("decoded", local, fresh_cache(), k, mode)
                    for k in range(1, args.repeat)]
            runs = [first] + rest
            vals = [x["ratio"] for x in runs]
            med = statistics.median(vals)
            best = min(runs, key=lambda x: abs(x["ratio"] - med))
            res[key] = dict(best, ratio=med, min=min(vals), max=max(vals), runs=len(runs),
                            all=runs)
    if not NO_SLOWFS:
        sh("bash", SLOWFS, "down", stdout=subprocess.DEVNULL)

    r = res
    ratios = {}
    if "of_link" in r.get("warmup", {}):
        ratios["warmup_of_link"] = r["warmup"]["of_link"]
    if "cached_batched" in r:
        ratios["cached_vs_local"] = r["cached_batched"]["median"] / r["local_batched"]["median"]
        ratios["cached_vs_imagefolder_slowfs"] = (r["cached_batched"]["median"]
                                                  / r["imagefolder"]["median"])
    if "cold_cache" in r:
        ratios["cold_epoch_cache_cost"] = r["cold_nocache"]["median"] / r["cold_cache"]["median"]
    if "ratio" in r.get("decoded", {}):
        ratios["decoded_epoch2_vs_epoch1"] = r["decoded"]["ratio"]
        ratios["decoded_exact_epoch2_vs_epoch1"] = r["decoded_exact"]["ratio"]
    res["ratios"] = ratios
    print(json.dumps(ratios, indent=2))
    for key in ("link_seq", "warmup", "cached_batched", "local_batched", "imagefolder",
                "cold_nocache", "cold_cache"):
        if key in r:
            print(f"{key}: median {r[key]['median']:.1f} (min {r[key]['min']:.1f}, "
                  f"max {r[key]['max']:.1f}, {r[key]['runs']} runs)")
    for key in ("decoded", "decoded_exact"):
        if "ratio" in r.get(key, {}):
            d = r[key]
            print(f"{key}: epoch 2 / epoch 1 median {d['ratio']:.2f}x (min {d['min']:.2f}, "
                  f"max {d['max']:.2f}); the median run: {d['epoch1_samples_s']:.0f} -> "
                  f"{d['epoch2_samples_s']:.0f} img/s")
    if "two_jobs" in r:
        t = r["two_jobs"]
        print(f"two jobs: {t['copies']:.2f} copies, PSS {t['pss_kib']} KiB (one job without a "
              f"cache: {t['pss_kib_without_cache']} KiB), same bytes: "
              f"{t['same_bytes_as_without_cache']}")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "results.json"), "w") as f:
            json.dump(res, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
