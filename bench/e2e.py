#!/usr/bin/python3
"""End-to-end comparison of ufspack with the loaders people use today.

    bench/e2e.py prepare <imagefolder-dir> <workdir>
    bench/e2e.py run <workdir> [--loaders ...] [--modes raw,decode] [--workers 0,2,4] ...
    bench/e2e.py builds <imagefolder-dir> <outdir> [--repeat N] [--before-each CMD]

`prepare` packs one ImageFolder tree into every container measured, timing
the builds, under <workdir>:

    tree/        a copy of the ImageFolder tree (loose files)
    pack/        ufspack build
    lmdb/        LMDB, one key per image (Caffe-style: key = index, value =
                 label + encoded bytes)
    shards/      tar shards in ImageFolder order (WebDataset layout)
    data.h5      HDF5: one variable-length uint8 record per image + labels

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

Loaders:
  imagefolder        torchvision ImageFolder, default PIL loader
  imagefolder_cv2    ImageFolder with a cv2.imread loader
  imagefolder_imdecode ImageFolder with np.fromfile + cv2.imdecode
  ufspack            ufspack.MyImageFolder, PIL output (default)
  ufspack_numpy      ufspack.MyImageFolder(output="numpy")
  ufspack_batch      MyImageFolder.__getitems__ (raw: bytes, decode: numpy):
                     a batch read (and decoded) on decode_threads threads,
                     several reads in flight; torch >= 2.0's DataLoader calls
                     __getitems__ itself, for torch 1.13 the harness passes
                     index batches as the sampler (batch_size=None)
  lmdb               LMDB, one txn.get per sample
  tar                tar shards read sequentially (WebDataset-style; not
                     shuffled: shards are split across workers)
  hdf5               h5py, one variable-length record per sample
  + the peers that bench/install-peers.sh could install (bench/e2e_peers.py):
  webdataset, litdata, streaming (MosaicML), ffcv ... when importable

With --repeat N every measurement runs N times (each in a fresh process, with
the storage case's preparation before each) and the median samples/s is
reported, with the min and max beside it.
"""

import argparse
import csv
import io
import json
import os
import pickle
import random
import shutil
import struct
import subprocess
import sys
import tarfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import e2e_peers
except ImportError:  # the module is optional
    e2e_peers = None
PEER_LOADERS = list(getattr(e2e_peers, "PEER_LOADERS", []))
ALL_LOADERS = ["imagefolder", "imagefolder_cv2", "imagefolder_imdecode", "ufspack",
               "ufspack_numpy", "ufspack_batch", "lmdb", "tar", "hdf5"] + PEER_LOADERS
TAR_SHARDS = 8


# --- preparation -------------------------------------------------------------------

def list_imagefolder(root):
    from torchvision.datasets import ImageFolder

    ds = ImageFolder(root, loader=lambda p: None)
    return [(os.path.relpath(p, root), y) for p, y in ds.samples], ds.classes


def timed_cmd(argv):
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def build_lmdb(tree, samples, path):
    """Caffe-style LMDB: key = sample index, value = label + file bytes."""
    import lmdb

    shutil.rmtree(path, ignore_errors=True)
    total = sum(os.path.getsize(os.path.join(tree, n)) for n, _ in samples)
    env = lmdb.open(path, map_size=max(1 << 30, total * 2), subdir=True, lock=True)
    with env.begin(write=True) as txn:
        for i, (name, label) in enumerate(samples):
            with open(os.path.join(tree, name), "rb") as f:
                txn.put(b"%08d" % i, struct.pack("<i", label) + f.read())
    env.sync()
    env.close()


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
        shutil.rmtree(os.path.join(out, "pack"), ignore_errors=True)
        subprocess.run([cli, "build", tree, "-o", os.path.join(out, "pack"), "-q"], check=True)

    def tar_cf():
        subprocess.run(["tar", "-cf", os.path.join(out, "tree.tar"), "-C", parent, base], check=True)

    def lmdb_build():
        # Listing the tree is part of building the LMDB (ImageFolder order).
        samples, _ = list_imagefolder(tree)
        build_lmdb(tree, samples, os.path.join(out, "lmdb"))

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


def prepare(args):
    import ufspack

    work = os.path.abspath(args.workdir)
    os.makedirs(work, exist_ok=True)
    tree = os.path.join(work, "tree")
    if not os.path.exists(tree):
        shutil.copytree(args.tree, tree, symlinks=True)
    samples, classes = list_imagefolder(tree)
    builds = {}
    if args.only_peers:  # add the peers to an already prepared workdir
        with open(os.path.join(work, "prepared.json")) as f:
            builds = json.load(f)["builds"]
        e2e_peers.prepare_peers(tree, work, samples, builds)
        write_prepared(work, samples, classes, builds)
        return
    cli = args.ufspack_cli or shutil.which("ufspack")
    pack = os.path.join(work, "pack")
    if cli:
        builds["ufspack_build_s"] = timed_cmd([cli, "build", tree, "-o", pack, "-q"])
    else:
        t0 = time.perf_counter()
        ufspack.build(tree, pack, progress=False)
        builds["ufspack_build_s"] = time.perf_counter() - t0
    builds["tar_cf_s"] = timed_cmd(["tar", "-cf", os.path.join(work, "tree.tar"), "-C", work, "tree"])
    os.remove(os.path.join(work, "tree.tar"))

    try:
        import lmdb
    except ImportError:
        lmdb = None
    if lmdb is not None:
        t0 = time.perf_counter()
        build_lmdb(tree, samples, os.path.join(work, "lmdb"))
        builds["lmdb_build_s"] = time.perf_counter() - t0

    shards = os.path.join(work, "shards")
    shutil.rmtree(shards, ignore_errors=True)
    os.makedirs(shards)
    t0 = time.perf_counter()
    per = (len(samples) + TAR_SHARDS - 1) // TAR_SHARDS
    for s in range(TAR_SHARDS):
        with tarfile.open(os.path.join(shards, f"shard-{s:04d}.tar"), "w") as t:
            for i in range(s * per, min(len(samples), (s + 1) * per)):
                name, label = samples[i]
                key = f"{i:08d}"
                t.add(os.path.join(tree, name), arcname=f"{key}.{name.rsplit('.', 1)[-1].lower()}")
                info = tarfile.TarInfo(f"{key}.cls")
                data = str(label).encode()
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
    builds["tar_shards_s"] = time.perf_counter() - t0

    try:
        import h5py
        import numpy as np
    except ImportError:
        h5py = None
    if h5py is not None:
        t0 = time.perf_counter()
        with h5py.File(os.path.join(work, "data.h5"), "w") as h:
            dt = h5py.vlen_dtype(np.dtype("uint8"))
            images = h.create_dataset("images", (len(samples),), dtype=dt)
            for i, (name, _) in enumerate(samples):
                with open(os.path.join(tree, name), "rb") as f:
                    images[i] = np.frombuffer(f.read(), dtype=np.uint8)
            h.create_dataset("labels", data=np.array([y for _, y in samples], dtype=np.int64))
        builds["hdf5_build_s"] = time.perf_counter() - t0

    if e2e_peers is not None and not args.no_peers:
        e2e_peers.prepare_peers(tree, work, samples, builds)

    write_prepared(work, samples, classes, builds)


def write_prepared(work, samples, classes, builds):
    meta = {"samples": len(samples), "classes": classes, "builds": builds}
    with open(os.path.join(work, "prepared.json"), "w") as f:
        json.dump(meta, f, indent=2)
    print(json.dumps(meta["builds"], indent=2))


# --- datasets ----------------------------------------------------------------------

def to_tensor_pil(data):
    from PIL import Image
    from torchvision.transforms.functional import to_tensor

    with Image.open(io.BytesIO(data)) as img:
        return to_tensor(img.convert("RGB"))


def cv2_rgb_tensor(arr):
    import cv2
    import torch

    rgb = cv2.cvtColor(arr, cv2.COLOR_BGR2RGB)
    return torch.from_numpy(rgb).permute(2, 0, 1).float().div(255)


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


def cv2_imread(path):
    import cv2

    return cv2_rgb_tensor(cv2.imread(path, cv2.IMREAD_COLOR))


def cv2_imdecode(path):
    import cv2
    import numpy as np

    return cv2_rgb_tensor(cv2.imdecode(np.fromfile(path, dtype=np.uint8), cv2.IMREAD_COLOR))


def numpy_to_tensor(arr):
    import torch

    return torch.from_numpy(arr).permute(2, 0, 1).float().div(255)


class LmdbDataset:
    """One key per image; the environment is opened lazily in each process."""

    def __init__(self, path, n, decode):
        self.path, self.n, self.decode = path, n, decode
        self.env = None

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.env is None:
            import lmdb

            self.env = lmdb.open(self.path, readonly=True, lock=False, readahead=False, meminit=False)
        with self.env.begin(buffers=False) as txn:
            v = txn.get(b"%08d" % i)
        label = struct.unpack_from("<i", v)[0]
        data = v[4:]
        return (to_tensor_pil(data) if self.decode else data), label

    def __getstate__(self):
        return {"path": self.path, "n": self.n, "decode": self.decode, "env": None}


class GetItems:
    """What torch >= 2.0's fetcher does for a dataset with __getitems__:
    dataset[batch of indices] -> dataset.__getitems__(batch)."""

    def __init__(self, ds):
        self.ds = ds

    def __len__(self):
        return len(self.ds)

    def __getitem__(self, indices):
        return self.ds.__getitems__(indices)


class Hdf5Dataset:
    def __init__(self, path, n, decode):
        self.path, self.n, self.decode = path, n, decode
        self.h = None

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.h is None:
            import h5py

            self.h = h5py.File(self.path, "r")
        data = self.h["images"][i].tobytes()
        label = int(self.h["labels"][i])
        return (to_tensor_pil(data) if self.decode else data), label

    def __getstate__(self):
        return {"path": self.path, "n": self.n, "decode": self.decode, "h": None}


def make_tar_dataset(shards, decode, limit):
    import torch

    class TarShards(torch.utils.data.IterableDataset):
        """WebDataset-style: shards split across workers, each read sequentially."""

        def __iter__(self):
            info = torch.utils.data.get_worker_info()
            wid, nw = (info.id, info.num_workers) if info else (0, 1)
            count = 0
            quota = limit // nw + (1 if wid < limit % nw else 0)
            for s in shards[wid::nw]:
                pending = {}
                with tarfile.open(s, "r|") as t:  # streaming: sequential reads
                    for m in t:
                        key, ext = m.name.rsplit(".", 1)
                        data = t.extractfile(m).read()
                        pending.setdefault(key, {})[ext] = data
                        if len(pending[key]) == 2:
                            d = pending.pop(key)
                            label = int(d.pop("cls"))
                            img = next(iter(d.values()))
                            yield (to_tensor_pil(img) if decode else img), label
                            count += 1
                            if count >= quota:
                                return

    return TarShards()


def make_dataset(loader, mode, work, n, batch_size=32):
    """Returns (dataset, is_iterable)."""
    decode = mode == "decode"
    tree = os.path.join(work, "tree")
    if loader.startswith("imagefolder"):
        from torchvision.datasets import ImageFolder

        if not decode:
            return ImageFolder(tree, loader=read_file), False
        if loader == "imagefolder":
            from torchvision import transforms

            return ImageFolder(tree, transform=transforms.ToTensor()), False
        return ImageFolder(tree, loader=cv2_imread if loader == "imagefolder_cv2" else cv2_imdecode), False
    if loader.startswith("ufspack"):
        import ufspack

        pack = os.path.join(work, "pack")
        if loader == "ufspack_batch":
            if not decode:
                return ufspack.MyImageFolder(pack, output="bytes"), False
            return ufspack.MyImageFolder(pack, output="numpy", transform=numpy_to_tensor), False
        if not decode:
            return ufspack.MyImageFolder(pack, output="bytes"), False
        if loader == "ufspack_numpy":
            return ufspack.MyImageFolder(pack, output="numpy", transform=numpy_to_tensor), False
        from torchvision import transforms

        return ufspack.MyImageFolder(pack, transform=transforms.ToTensor()), False
    if loader == "lmdb":
        return LmdbDataset(os.path.join(work, "lmdb"), n, decode), False
    if loader == "hdf5":
        return Hdf5Dataset(os.path.join(work, "data.h5"), n, decode), False
    if loader == "tar":
        shards = sorted(os.path.join(work, "shards", f) for f in os.listdir(os.path.join(work, "shards")))
        return make_tar_dataset(shards, decode, n), True
    if loader in PEER_LOADERS:
        return e2e_peers.make_peer_dataset(loader, mode, work, n, batch_size=batch_size)
    raise ValueError(f"unknown loader {loader!r}")


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
    if args.loader in PEER_LOADERS:
        e2e_peers.preload_peer(args.loader)
    work = args.workdir
    with open(os.path.join(work, "prepared.json")) as f:
        total = json.load(f)["samples"]
    n = min(args.limit, total) if args.limit else total
    t0 = time.perf_counter()
    # Streaming loaders take the number of samples to yield; map-style ones
    # the dataset size (the harness picks the indices).
    streaming = args.loader == "tar" or (args.loader in PEER_LOADERS and args.loader != "mxnet_recordio")
    ds, iterable = make_dataset(args.loader, args.mode, work, n if streaming else total, args.batch_size)
    startup = time.perf_counter() - t0
    order = list(range(total))
    random.Random(args.seed).shuffle(order)
    order = order[:n]
    workers = args.num_workers
    t0 = time.perf_counter()
    seen = 0
    worker_uss = []
    batched = args.loader == "ufspack_batch"
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
    loaders = ALL_LOADERS if args.loaders == "all" else args.loaders.split(",")
    modes = args.modes.split(",")
    workers_list = [int(w) for w in args.workers.split(",")]
    results = []
    env = dict(os.environ)
    for loader in loaders:
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
                    line = next((l for l in proc.stdout.splitlines() if l.startswith("RESULT ")), None)
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
        for loader in loaders:
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare", help="build every container from an ImageFolder tree")
    p.add_argument("tree")
    p.add_argument("workdir")
    p.add_argument("--ufspack-cli", help="path of the ufspack binary (default: on PATH, else ufspack.build)")
    p.add_argument("--no-peers", action="store_true", help="skip the peers of bench/e2e_peers.py")
    p.add_argument("--only-peers", action="store_true",
                   help="only add the peers' containers to a prepared workdir")
    r = sub.add_parser("run", help="measure the loaders on a prepared workdir")
    r.add_argument("workdir")
    r.add_argument("--loaders", default="all", help=f"comma-separated, or 'all': {','.join(ALL_LOADERS)}")
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
    o = sub.add_parser("_one", help=argparse.SUPPRESS)
    o.add_argument("workdir")
    o.add_argument("--loader", required=True)
    o.add_argument("--mode", required=True)
    o.add_argument("--num-workers", type=int, default=0)
    o.add_argument("--limit", type=int, default=0)
    o.add_argument("--seed", type=int, default=0)
    o.add_argument("--batch-size", type=int, default=32)
    args = ap.parse_args()
    if args.cmd == "prepare":
        prepare(args)
    elif args.cmd == "builds":
        builds(args)
    elif args.cmd == "run":
        run(args)
    else:
        run_one(args)


if __name__ == "__main__":
    main()
