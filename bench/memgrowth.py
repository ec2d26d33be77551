#!/usr/bin/python3
"""Per-worker memory growth over one epoch: ImageFolder vs ufspack.MyImageFolder.

    bench/memgrowth.py prepare <workdir> [--records 1000000] [--classes 1000]
    bench/memgrowth.py run <workdir> [--loaders imagefolder,ufspack] [--workers 2]
                                     [--limit 0] [--points 40] [--out <prefix>]
    bench/memgrowth.py plot <prefix> [<png>]

`prepare` writes a synthetic ImageFolder tree of --records tiny files
(<workdir>/tree/cNNNN/NNNNNNNN.jpg, 16-80 bytes each: the records' size does
not matter here, their count does) and packs it with `ufspack build` (or
ufspack.build) into <workdir>/pack.

`run` iterates one shuffled epoch through torch.utils.data.DataLoader with
--workers forked workers, reading raw bytes (no decode), and samples every
worker's memory --points times along the epoch from /proc/<pid>/smaps_rollup:

  private_dirty   anonymous memory written by the worker only: what
                  copy-on-write costs (ImageFolder's `samples` list of Python
                  objects is copied page by page as reference counts change)
  uss             private_dirty + private_clean (clean page-cache pages only
                  this worker maps, e.g. the part of the index it touched:
                  reclaimable, shared with any other process that maps them)
  rss             everything mapped, shared included

Each loader runs in a fresh subprocess.  Prints a table (growth from the first
to the last sample point), writes <prefix>.csv (every point) and <prefix>.json
with --out; `plot` draws growth against samples read.
"""

import argparse
import csv
import json
import os
import random
import shutil
import subprocess
import sys
import time

import benchlib


def prepare(args):
    work = os.path.abspath(args.workdir)
    tree = os.path.join(work, "tree")
    done = os.path.join(tree, ".complete")
    if not os.path.exists(done):
        t0 = time.perf_counter()
        per = (args.records + args.classes - 1) // args.classes
        k = 0
        for c in range(args.classes):
            d = os.path.join(tree, f"c{c:04d}")
            os.makedirs(d, exist_ok=True)
            for _ in range(min(per, args.records - k)):
                with open(os.path.join(d, f"{k:08d}.jpg"), "wb") as f:
                    f.write(b"%08d" % k * (2 + k % 9))
                k += 1
            if (c + 1) % max(1, args.classes // 10) == 0:
                print(f"  {k:,} files", flush=True)
        open(done, "w").close()
        print(f"wrote {k:,} files in {args.classes} classes in {time.perf_counter() - t0:.1f} s")
    pack = os.path.join(work, "pack")
    if not os.path.exists(os.path.join(pack, "index.ufs")):
        t0 = time.perf_counter()
        cli = args.ufspack_cli or shutil.which("ufspack")
        if cli:
            subprocess.run([cli, "build", tree, "-o", pack, "-q"], check=True)
        else:
            import ufspack

            ufspack.build(tree, pack, progress=False)
        print(f"packed in {time.perf_counter() - t0:.1f} s")


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def collate_lengths(batch):
    # Only sizes travel back: the measurement is the workers' memory, not IPC.
    return sum(len(x) for x, _ in batch)


def mem_kib(pid):
    vals = {"rss": 0, "private_dirty": 0, "private_clean": 0, "anonymous": 0}
    keys = {"Rss:": "rss", "Private_Dirty:": "private_dirty", "Private_Clean:": "private_clean",
            "Anonymous:": "anonymous"}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if parts and parts[0] in keys:
                vals[keys[parts[0]]] = int(parts[1])
    vals["uss"] = vals["private_dirty"] + vals["private_clean"]
    return vals


def run_one(args):
    import torch

    torch.set_num_threads(1)
    work = args.workdir
    t0 = time.perf_counter()
    if args.loader == "imagefolder":
        from torchvision.datasets import ImageFolder

        ds = ImageFolder(os.path.join(work, "tree"), loader=read_bytes)
    else:
        import ufspack

        ds = ufspack.MyImageFolder(os.path.join(work, "pack"), output="bytes")
    startup = time.perf_counter() - t0
    n = len(ds)
    order = list(range(n))
    random.Random(args.seed).shuffle(order)
    if args.limit:
        order = order[:args.limit]
    loader = torch.utils.data.DataLoader(ds, batch_size=args.batch_size, sampler=order,
                                         num_workers=args.num_workers, collate_fn=collate_lengths,
                                         persistent_workers=True, prefetch_factor=2)
    it = iter(loader)
    pids = [w.pid for w in it._workers]
    batches = (len(order) + args.batch_size - 1) // args.batch_size
    marks = {max(1, round(batches * p / args.points)) for p in range(1, args.points + 1)}
    points = []
    seen = 0
    t0 = time.perf_counter()
    for b, _nbytes in enumerate(it, 1):
        seen += min(args.batch_size, len(order) - (b - 1) * args.batch_size)
        if b == 1 or b in marks:
            for w, pid in enumerate(pids):
                points.append({"loader": args.loader, "samples": seen, "worker": w, **mem_kib(pid)})
    elapsed = time.perf_counter() - t0
    print("RESULT " + json.dumps({"loader": args.loader, "records": n, "samples": seen,
                                  "workers": args.num_workers, "startup_s": startup,
                                  "epoch_s": elapsed, "points": points}), flush=True)


def run(args):
    results = []
    for loader in args.loaders.split(","):
        cmd = [sys.executable, os.path.abspath(__file__), "_one", args.workdir, "--loader", loader,
               "--num-workers", str(args.workers), "--limit", str(args.limit), "--seed", str(args.seed),
               "--batch-size", str(args.batch_size), "--points", str(args.points)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if proc.returncode or line is None:
            sys.exit(f"{loader}: failed:\n{proc.stderr[-3000:]}")
        rec = json.loads(line[len("RESULT "):])
        results.append(rec)
        first = {p["worker"]: p for p in rec["points"] if p["samples"] == rec["points"][0]["samples"]}
        last_n = rec["points"][-1]["samples"]
        last = {p["worker"]: p for p in rec["points"] if p["samples"] == last_n}
        for w in sorted(last):
            print(f"{loader:12s} worker {w}: {rec['samples']:,} of {rec['records']:,} records in "
                  f"{rec['epoch_s']:.1f} s (start-up {rec['startup_s']:.2f} s); "
                  f"private_dirty {first[w]['private_dirty'] / 1024:7.1f} -> "
                  f"{last[w]['private_dirty'] / 1024:7.1f} MiB, "
                  f"uss {first[w]['uss'] / 1024:7.1f} -> {last[w]['uss'] / 1024:7.1f} MiB, "
                  f"rss {first[w]['rss'] / 1024:7.1f} -> {last[w]['rss'] / 1024:7.1f} MiB", flush=True)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)) or ".", exist_ok=True)
        with open(args.out + ".json", "w") as f:
            json.dump(results, f, indent=1)
        with open(args.out + ".csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["loader", "samples", "worker", "private_dirty", "private_clean",
                                              "uss", "anonymous", "rss"])
            w.writeheader()
            for rec in results:
                w.writerows(rec["points"])


def plot(args):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(args.prefix + ".json") as f:
        results = json.load(f)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, key, title in ((axes[0], "private_dirty", "private dirty (copy-on-write)"),
                           (axes[1], "uss", "unique set size (USS)")):
        for rec, color in zip(results, ("tab:red", "tab:blue", "tab:green", "tab:orange")):
            for w in sorted({p["worker"] for p in rec["points"]}):
                pts = [p for p in rec["points"] if p["worker"] == w]
                base = pts[0][key]
                ax.plot([p["samples"] / 1e3 for p in pts], [(p[key] - base) / 1024 for p in pts],
                        color=color, alpha=1.0 if w == 0 else 0.5,
                        label=f"{rec['loader']} worker {w}")
        ax.set_xlabel("samples read (thousands)")
        ax.set_ylabel("growth since first batch (MiB)")
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    n = results[0]["records"]
    fig.suptitle(f"Per-worker memory over one shuffled epoch of {n:,} records "
                 f"({results[0]['workers']} DataLoader workers)")
    fig.tight_layout()
    png = args.png or args.prefix + ".png"
    fig.savefig(png, dpi=100)
    print(png)


def main():
    ap = benchlib.parser(__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare", help="write the synthetic tree and pack it")
    p.add_argument("workdir")
    p.add_argument("--records", type=int, default=1_000_000)
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--ufspack-cli", help="path of the ufspack binary (default: on PATH, else ufspack.build)")
    r = sub.add_parser("run", help="one epoch per loader, sampling worker memory")
    r.add_argument("workdir")
    r.add_argument("--loaders", default="imagefolder,ufspack")
    r.add_argument("--workers", type=int, default=2)
    r.add_argument("--limit", type=int, default=0, help="samples in the epoch (0: all records)")
    r.add_argument("--batch-size", type=int, default=256)
    r.add_argument("--points", type=int, default=40, help="memory samples along the epoch")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--out", help="write <out>.csv and <out>.json")
    g = sub.add_parser("plot", help="chart a run's <prefix>.json")
    g.add_argument("prefix")
    g.add_argument("png", nargs="?")
    o = sub.add_parser("_one", help=argparse.SUPPRESS)
    o.add_argument("workdir")
    o.add_argument("--loader", required=True, choices=["imagefolder", "ufspack"])
    o.add_argument("--num-workers", type=int, default=2)
    o.add_argument("--limit", type=int, default=0)
    o.add_argument("--seed", type=int, default=0)
    o.add_argument("--batch-size", type=int, default=256)
    o.add_argument("--points", type=int, default=40)
    args = ap.parse_args()
    {"prepare": prepare, "run": run, "plot": plot, "_one": run_one}[args.cmd](args)


if __name__ == "__main__":
    main()
