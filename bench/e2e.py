#!/usr/bin/python3
"""End-to-end comparison of ufspack with the loaders people use today.

    bench/e2e.py prepare <imagefolder-dir> <workdir> [--loaders ...] [--no-peers | --only-peers]
    bench/e2e.py run <workdir> [--loaders ...] [--modes raw,decode] [--workers 0,2,4] ...
    bench/e2e.py builds <imagefolder-dir> <outdir> [--repeat N] [--before-each CMD]
    bench/e2e.py list [--group own|peer] [--available] [--names]

`prepare` copies one ImageFolder tree to <workdir>/tree and packs it into
the container of every loader measured (pack/, lmdb/, shards/, data.h5 and
one directory per peer: see bench/e2e_own.py and bench/e2e_peers.py),
timing the builds.

`run` reads the same samples through each loader, each measurement in a fresh
subprocess, in a fixed shuffled order (--seed), and reports samples/s for raw
bytes and for read+decode+ToTensor (steady state, from the first batch on:
whole-epoch time including worker start-up or JIT compilation is in epoch_s),
single process and DataLoader workers,
dataset start-up time, peak RSS and per-worker unique memory, and (with
--strace) system calls per sample by type.  The storage case is whatever
<workdir> is on: local disk (--drop-caches for cold runs), or a slow network
file system mounted over it (see bench/run_e2e.sh).  Prints a table; writes
CSV and JSON with --out.

Loaders (bench/loaders.py is the one registry; `bench/e2e.py list` prints
each with its group and, where it cannot run here, why):
  imagefolder, imagefolder_cv2, imagefolder_imdecode, ufspack, ufspack_numpy,
  ufspack_batch, lmdb, tar, hdf5   this project's and Debian's (bench/e2e_own.py)
  webdataset, litdata, streaming, ffcv, dali, mxnet_recordio, tfrecord
                                   the peers (bench/e2e_peers.py), where
                                   bench/install-peers.sh installed them
ufspack_batch reads through MyImageFolder.__getitems__: torch >= 2.0's
DataLoader calls it itself, for torch 1.13 the harness passes index batches
as the sampler (batch_size=None).  A loader whose package is not installed is
reported as skipped ("skipped: lmdb not installed").

With --repeat N every measurement runs N times (each in a fresh process, with
the storage case's preparation before each) and the median samples/s is
reported, with the min and max beside it.
"""

import argparse
import atexit
import csv
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib
import loaders  # noqa: E402

# --- preparation -------------------------------------------------------------------

def list_imagefolder(root):
    from torchvision.datasets import ImageFolder

    ds = ImageFolder(root, loader=lambda p: None)
    return [(os.path.relpath(p, root), y) for p, y in ds.samples], ds.classes


def timed_cmd(argv):
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def builds(args):
    """Times building each container from a tree (e.g. on a slow network
    file system) into a local output directory, --before-each in between."""
    out = os.path.abspath(args.outdir)
    os.makedirs(out, exist_ok=True)
    cli = args.ufspack_cli or shutil.which("ufspack")
    if not cli:
        sys.exit("builds needs the ufspack CLI (--ufspack-cli or on PATH)")
    tree = os.path.abspath(args.tree)
    parent, base = os.path.split(tree)

    def ufspack_build():
        loaders.get("ufspack").build(loaders.BuildContext(tree, out, None, cli))

    def tar_cf():
        subprocess.run(["tar", "-cf", os.path.join(out, "tree.tar"), "-C", parent, base], check=True)

    def lmdb_build():
        # Listing the tree is part of building the LMDB (ImageFolder order).
        samples, _ = list_imagefolder(tree)
        loaders.get("lmdb").build(loaders.BuildContext(tree, out, samples, cli))

    tools = {"ufspack build": ufspack_build, "tar -cf": tar_cf, "lmdb": lmdb_build}
    results = []
    for name, fn in tools.items():
        times = []
        for _ in range(max(1, args.repeat)):
            if args.before_each:
                subprocess.run(args.before_each, shell=True, check=True)
            t0 = time.perf_counter()
            fn()
            subprocess.run(["sync"], check=True)
            times.append(time.perf_counter() - t0)
        times.sort()
        rec = {"storage": args.storage, "tool": name, "seconds": times[(len(times) - 1) // 2],
               "seconds_min": times[0], "seconds_max": times[-1], "repeats": len(times)}
        results.append(rec)
        print(f"{name:14s} {rec['seconds']:8.2f} s  [{times[0]:.2f}-{times[-1]:.2f}]", flush=True)
    if args.out:
        with open(args.out + ".json", "w") as f:
            json.dump(results, f, indent=2)


def build_selection(args):
    """The loaders `prepare` builds containers for."""
    sel = loaders.select(args.loaders)
    if args.only_peers:
        return [ld for ld in sel if ld.group == "peer"]
    if args.no_peers:
        return [ld for ld in sel if ld.group != "peer"]
    return sel


def prepare(args):
    work = os.path.abspath(args.workdir)
    os.makedirs(work, exist_ok=True)
    tree = os.path.join(work, "tree")
    if not os.path.exists(tree):
        shutil.copytree(args.tree, tree, symlinks=True)
    samples, classes = list_imagefolder(tree)
    selection = build_selection(args)
    builds = {}
    if args.only_peers:  # add the peers to an already prepared workdir
        with open(os.path.join(work, "prepared.json")) as f:
            builds = json.load(f)["builds"]
    else:
        # A reference for the build times: one tar of the tree.
        builds["tar_cf_s"] = timed_cmd(["tar", "-cf", os.path.join(work, "tree.tar"), "-C", work, "tree"])
        os.remove(os.path.join(work, "tree.tar"))
    ctx = loaders.BuildContext(tree, work, samples, args.ufspack_cli or shutil.which("ufspack"))
    built = set()
    for loader in selection:
        key = loader.build_key
        if key is None or key in built:  # reads the tree, or shares a container built already
            continue
        built.add(key)
        reason = loader.missing()
        if reason:
            print(f"{loader.name}: {reason}", flush=True)
            continue
        try:
            loader.preload()
            t0 = time.perf_counter()
            loader.build(ctx)
        except Exception as e:  # a peer's broken install or failing writer: report, go on
            if loader.group != "peer":
                raise
            print(f"{loader.name}: build FAILED ({type(e).__name__}: {e})", file=sys.stderr, flush=True)
            continue
        builds[key] = time.perf_counter() - t0
        print(f"{loader.name}: built in {builds[key]:.2f} s", flush=True)
    write_prepared(work, samples, classes, builds)


def write_prepared(work, samples, classes, builds):
    meta = {"samples": len(samples), "classes": classes, "builds": builds}
    with open(os.path.join(work, "prepared.json"), "w") as f:
        json.dump(meta, f, indent=2)
    print(json.dumps(meta["builds"], indent=2))


# --- measuring ----------------------------------------------------------------------

class GetItems:
    """What torch >= 2.0's fetcher does for a dataset with __getitems__:
    dataset[batch of indices] -> dataset.__getitems__(batch)."""

    def __init__(self, ds):
        self.ds = ds

    def __len__(self):
        return len(self.ds)

    def __getitem__(self, indices):
        return self.ds.__getitems__(indices)


def collate_list(batch):
    return batch


def cpu_ticks():
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    try:
        with open("/proc/stat") as f:
            vals = [int(v) for v in f.readline().split()[1:]]
    except OSError:
        return None
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)  # idle + iowait
    return sum(vals) - idle, sum(vals)


def uss_kib(pid):
    """Unique set size: memory private to the process."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            kib = 0
            for line in f:
                if line.startswith(("Private_Clean:", "Private_Dirty:")):
                    kib += int(line.split()[1])
            return kib
    except OSError:
        return None


def run_one(args):
    """One measurement in this (fresh) process; prints one JSON line."""
    import resource

    import torch

    torch.set_num_threads(1)
    # Import what every loader needs before timing start-up, so start-up
    # measures opening the dataset, not importing libraries.
    import numpy  # noqa: F401
    import PIL.Image  # noqa: F401
    import torchvision.datasets  # noqa: F401
    import torchvision.transforms  # noqa: F401
    for mod in ("ufspack", "lmdb", "h5py", "cv2"):
        try:
            __import__(mod)
        except ImportError:
            pass
    adapter = loaders.get(args.loader)
    adapter.preload()
    work = args.workdir
    with open(os.path.join(work, "prepared.json")) as f:
        total = json.load(f)["samples"]
    n = min(args.limit, total) if args.limit else total
    t0 = time.perf_counter()
    # Streaming loaders take the number of samples to yield; map-style ones
    # the dataset size (the harness picks the indices).
    iterable = adapter.iterable
    ds = adapter.dataset(work, args.mode, n if iterable else total, args.batch_size)
    startup = time.perf_counter() - t0
    order = list(range(total))
    random.Random(args.seed).shuffle(order)
    order = order[:n]
    workers = args.num_workers
    t0 = time.perf_counter()
    seen = 0
    worker_uss = []
    batched = adapter.batched
    t_first, first, cpu_first = t0, 0, cpu_ticks()
    if workers == 0:
        # As with workers, the rate is the steady state after the first
        # batch_size samples (what a JIT-compiled loader such as FFCV's, or
        # one that starts threads, spends once is in epoch_s).
        if iterable:
            for _ in ds:
                seen += 1
                if seen == args.batch_size:
                    t_first, first, cpu_first = time.perf_counter(), seen, cpu_ticks()
        elif batched:
            for k in range(0, len(order), args.batch_size):
                seen += len(ds.__getitems__(order[k:k + args.batch_size]))
                if k == 0:
                    t_first, first, cpu_first = time.perf_counter(), seen, cpu_ticks()
        else:
            for i in order:
                ds[i]
                seen += 1
                if seen == args.batch_size:
                    t_first, first, cpu_first = time.perf_counter(), seen, cpu_ticks()
    else:
        kw = dict(batch_size=args.batch_size, num_workers=workers, collate_fn=collate_list,
                  persistent_workers=True)
        if batched:
            kw["batch_size"] = None
            kw["sampler"] = [order[k:k + args.batch_size] for k in range(0, len(order), args.batch_size)]
            ds = GetItems(ds)
        elif not iterable:
            kw["sampler"] = order
        loader = torch.utils.data.DataLoader(ds, **kw)
        it = iter(loader)
        for batch in it:
            if seen == 0:
                # Steady state starts once the first batch is out: worker
                # start-up (fork/spawn of a process holding torch) is
                # reported in epoch_s, not in samples_per_s.
                t_first, first, cpu_first = time.perf_counter(), len(batch), cpu_ticks()
            seen += len(batch)
        worker_uss = [uss_kib(w.pid) for w in getattr(it, "_workers", [])]
        del it, loader
    t_end = time.perf_counter()
    cpu_end = cpu_ticks()
    elapsed = t_end - t0
    if seen > first:
        rate = (seen - first) / (t_end - t_first)
    else:
        rate = seen / elapsed if elapsed else 0.0
    rec = {
        "loader": args.loader, "mode": args.mode, "workers": workers, "samples": seen,
        "seconds": elapsed, "epoch_s": elapsed, "samples_per_s": rate,
        "startup_s": startup,
        # Share of the machine's CPU time busy (all processes: loader, workers,
        # and on the slow FS its server) over the measured interval.
        "cpu_busy": ((cpu_end[0] - cpu_first[0]) / (cpu_end[1] - cpu_first[1])
                     if cpu_end and cpu_first and cpu_end[1] > cpu_first[1] else None),
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "worker_uss_mib": (sum(worker_uss) / len(worker_uss) / 1024) if worker_uss and None not in worker_uss else None,
    }
    print("RESULT " + json.dumps(rec), flush=True)


SYSCALLS = ["openat", "newfstatat", "statx", "fstat", "lseek", "read", "pread64", "close", "mmap", "getdents64"]


def strace_counts(cmd, out):
    subprocess.run(["strace", "-f", "-c", "-o", out] + cmd, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    counts = {}
    with open(out) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 5 and parts[-1] in SYSCALLS and parts[3].isdigit():
                counts[parts[-1]] = int(parts[3])
    return counts


def child_cmd(args, loader, mode, workers, limit):
    return [sys.executable, os.path.abspath(__file__), "_one", args.workdir, "--loader", loader,
            "--mode", mode, "--num-workers", str(workers), "--limit", str(limit),
            "--seed", str(args.seed), "--batch-size", str(args.batch_size)]


def drop_caches():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def warm(work):
    for dirpath, _, files in os.walk(work, followlinks=True):
        for fn in files:
            with open(os.path.join(dirpath, fn), "rb") as f:
                while f.read(1 << 20):
                    pass


def run(args):
    modes = args.modes.split(",")
    workers_list = [int(w) for w in args.workers.split(",")]
    results = []
    names = []
    for adapter in loaders.select(args.loaders):
        reason = adapter.missing()
        if reason is None:
            names.append(adapter.name)
            continue
        print(f"{adapter.name:22s} {reason}", file=sys.stderr, flush=True)
        if args.loaders != "all":  # asked for by name: the results say why it is absent
            results += [{"loader": adapter.name, "mode": mode, "workers": workers, "error": reason,
                         "storage": args.storage} for mode in modes for workers in workers_list]
    # The children's TMPDIR, removed at exit: MosaicML Streaming leaves two lock files in
    # gettempdir() per dataset.
    scratch = tempfile.mkdtemp(prefix="ufspack-e2e-tmp-")
    atexit.register(shutil.rmtree, scratch, True)
    env = dict(os.environ, TMPDIR=scratch)
    for loader in names:
        for mode in modes:
            for workers in workers_list:
                runs, err = [], None
                for _ in range(max(1, args.repeat)):
                    if args.before_each:
                        subprocess.run(args.before_each, shell=True, check=True)
                    if args.drop_caches:
                        drop_caches()
                    elif args.warm:
                        warm(args.workdir)
                    proc = subprocess.run(child_cmd(args, loader, mode, workers, args.limit),
                                          capture_output=True, text=True, env=env)
                    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
                    if proc.returncode != 0 or line is None:
                        err = (proc.stderr.strip().splitlines() or ["?"])[-1]
                        break
                    runs.append(json.loads(line[len("RESULT "):]))
                if err is not None:
                    print(f"{loader:22s} {mode:6s} w={workers}  FAILED: {err}", file=sys.stderr)
                    rec = {"loader": loader, "mode": mode, "workers": workers, "error": err,
                           "storage": args.storage}
                else:
                    rates = sorted(r["samples_per_s"] for r in runs)
                    # The median run (the lower middle one for an even count).
                    rec = dict(sorted(runs, key=lambda r: r["samples_per_s"])[(len(runs) - 1) // 2])
                    rec.update(storage=args.storage, repeats=len(runs),
                               samples_per_s_min=rates[0], samples_per_s_max=rates[-1])
                    spread = f" [{rates[0]:.0f}-{rates[-1]:.0f}]" if len(runs) > 1 else ""
                    print(f"{loader:22s} {mode:6s} w={workers}  {rec['samples_per_s']:9.1f} samples/s{spread}  "
                          f"start {rec['startup_s'] * 1000:8.1f} ms  "
                          + (f"cpu {rec['cpu_busy'] * 100:3.0f}%  " if rec.get("cpu_busy") is not None else "")
                          + f"rss {rec['peak_rss_mib']:6.1f} MiB"
                          + (f"  worker uss {rec['worker_uss_mib']:6.1f} MiB" if rec.get("worker_uss_mib") else ""),
                          flush=True)
                results.append(rec)
    if args.strace:
        # Per-sample system calls: the difference between a long and a short
        # single-process raw run, divided by the extra samples.
        small, big = 10, max(args.strace_samples, 20)
        for loader in names:
            if args.before_each:
                subprocess.run(args.before_each, shell=True, check=True)
            a = strace_counts(child_cmd(args, loader, "raw", 0, small), "/tmp/ufspack-e2e-strace-a.txt")
            b = strace_counts(child_cmd(args, loader, "raw", 0, big), "/tmp/ufspack-e2e-strace-b.txt")
            per = {k: round((b.get(k, 0) - a.get(k, 0)) / (big - small), 2) for k in SYSCALLS}
            per = {k: v for k, v in per.items() if v}
            print(f"{loader:22s} syscalls/sample: " + ", ".join(f"{k} {v}" for k, v in per.items()))
            results.append({"loader": loader, "storage": args.storage, "syscalls_per_sample": per})
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)) or ".", exist_ok=True)
        with open(args.out + ".json", "w") as f:
            json.dump(results, f, indent=2)
        fields = ["storage", "loader", "mode", "workers", "samples", "epoch_s", "samples_per_s",
                  "samples_per_s_min", "samples_per_s_max", "repeats",
                  "startup_s", "cpu_busy", "peak_rss_mib", "worker_uss_mib", "error"]
        with open(args.out + ".csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
            w.writeheader()
            for r in results:
                if "syscalls_per_sample" not in r:
                    w.writerow(r)


def list_loaders(args):
    names = loaders.names(group=args.group, available=args.available)
    if args.names:
        print(",".join(names))
        return
    for name in names:
        adapter = loaders.get(name)
        print(f"{name:22s} {adapter.group:5s} {adapter.missing() or 'ok'}")


def main():
    ap = benchlib.parser(__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare", help="build every container from an ImageFolder tree")
    p.add_argument("tree")
    p.add_argument("workdir")
    p.add_argument("--ufspack-cli", help="path of the ufspack binary (default: on PATH, else ufspack.build)")
    p.add_argument("--loaders", default="all", help="comma-separated, or 'all': whose containers to build")
    p.add_argument("--no-peers", action="store_true", help="skip the peers of bench/e2e_peers.py")
    p.add_argument("--only-peers", action="store_true",
                   help="only add the peers' containers to a prepared workdir")
    r = sub.add_parser("run", help="measure the loaders on a prepared workdir")
    r.add_argument("workdir")
    r.add_argument("--loaders", default="all", help=f"comma-separated, or 'all': {','.join(loaders.names())}")
    r.add_argument("--modes", default="raw,decode", help="raw (bytes only) and/or decode (+ToTensor)")
    r.add_argument("--workers", default="0,2,4", help="DataLoader num_workers values (0: single process)")
    r.add_argument("--limit", type=int, default=0, help="samples per measurement (0: all)")
    r.add_argument("--batch-size", type=int, default=32)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--repeat", type=int, default=1, help="runs per measurement; the median is reported")
    r.add_argument("--storage", default="local", help="label for the storage case, stored in the results")
    r.add_argument("--warm", action="store_true", help="read everything before each measurement")
    r.add_argument("--drop-caches", action="store_true", help="drop the page cache before each measurement (root)")
    r.add_argument("--before-each", help="shell command run before each measurement (e.g. remount)")
    r.add_argument("--strace", action="store_true", help="also count system calls per sample (needs strace)")
    r.add_argument("--strace-samples", type=int, default=200)
    r.add_argument("--out", help="write <out>.csv and <out>.json")
    b = sub.add_parser("builds", help="time ufspack build, tar -cf and an LMDB build from a tree")
    b.add_argument("tree")
    b.add_argument("outdir", help="where the outputs go (local disk)")
    b.add_argument("--ufspack-cli")
    b.add_argument("--repeat", type=int, default=1, help="builds per tool; the median is reported")
    b.add_argument("--before-each", help="shell command run before each build (e.g. remount)")
    b.add_argument("--storage", default="local")
    b.add_argument("--out", help="write <out>.json")
    ls = sub.add_parser("list", help="the registered loaders, and why any cannot run here")
    ls.add_argument("--group", choices=["own", "peer"])
    ls.add_argument("--available", action="store_true", help="only those whose packages are installed")
    ls.add_argument("--names", action="store_true", help="one comma-separated line of names")
    o = sub.add_parser("_one", help=argparse.SUPPRESS)
    o.add_argument("workdir")
    o.add_argument("--loader", required=True)
    o.add_argument("--mode", required=True)
    o.add_argument("--num-workers", type=int, default=0)
    o.add_argument("--limit", type=int, default=0)
    o.add_argument("--seed", type=int, default=0)
    o.add_argument("--batch-size", type=int, default=32)
    args = ap.parse_args()
    commands = {"prepare": prepare, "builds": builds, "run": run, "list": list_loaders, "_one": run_one}
    try:
        commands[args.cmd](args)
    except loaders.UnknownLoaderError as e:
        ap.error(str(e))


if __name__ == "__main__":
    main()
