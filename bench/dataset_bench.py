#!/usr/bin/python3
"""Side-by-side Python benchmarks of ufspack against torchvision ImageFolder.

    PYTHONPATH=build/python /usr/bin/python3 bench/dataset_bench.py <imagefolder-dir> [options]

Runs, in one process, on the same images:
  * decode: images/s of ufspack's in-memory decoder (TurboJPEG for JPEG) vs
    PIL's Image.open(...).convert("RGB"), single thread, bytes in memory;
  * dataset: images/s of MyImageFolder vs ImageFolder reading every sample
    through the same transform, single process and DataLoader(num_workers=N);
  * startup: construction time and RSS growth of MyImageFolder on a pack of
    --synthetic records vs ImageFolder on a tree of --tree-files files.
Prints a table and writes JSON (--json).
"""

import gc
import os
import shutil
import sys
import tempfile
import time

import benchlib


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def timed(fn, repeat=3):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def bench_decode(files, repeat):
    import io

    import numpy as np
    from PIL import Image

    from ufspack import _core

    blobs = [open(f, "rb").read() for f in files]

    def pil():
        for b in blobs:
            Image.open(io.BytesIO(b)).convert("RGB")

    def ours():
        for b in blobs:
            _core.decode_rgb(b)

    # Parity spot check before timing.
    for b in blobs[:20]:
        a = _core.decode_rgb(b)
        assert a is not None and np.array_equal(a, np.asarray(Image.open(io.BytesIO(b)).convert("RGB")))
    t_pil, t_ours = timed(pil, repeat), timed(ours, repeat)
    n = len(blobs)
    return {"images": n, "pil_img_s": n / t_pil, "ufspack_img_s": n / t_ours, "ratio": t_pil / t_ours}


def bench_dataset(tree, pack, workers, repeat):
    import torch
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms

    import ufspack

    t = transforms.Compose([transforms.Resize(128), transforms.CenterCrop(112), transforms.ToTensor()])
    tv = datasets.ImageFolder(tree, transform=t)
    my = ufspack.MyImageFolder(pack, transform=t)
    assert len(tv) == len(my)
    n = len(tv)

    def serial(ds):
        def run():
            for i in range(n):
                ds[i]
        return run

    def loader(ds):
        def run():
            for _ in DataLoader(ds, batch_size=32, num_workers=workers, shuffle=False):
                pass
        return run

    torch.set_num_threads(1)
    out = {"images": n}
    for label, mk in (("single", serial), (f"workers{workers}", loader)):
        t_tv = timed(mk(tv), repeat)
        t_my = timed(mk(my), repeat)
        out[label] = {"imagefolder_img_s": n / t_tv, "ufspack_img_s": n / t_my, "ratio": t_tv / t_my}
    return out


def bench_startup(synthetic, tree_files, workdir):
    from torchvision import datasets

    import ufspack

    # A pack of `synthetic` tiny records in 1000 classes, written with the C++ packer
    # from a generated flat list is too slow through the file system; build a real
    # tree only for ImageFolder and a pack via ufspack.build of a tree of the same shape.
    def make_tree(root, n):
        per = max(1, n // 100)
        for c in range(100):
            d = os.path.join(root, f"c{c:03d}")
            os.makedirs(d, exist_ok=True)
            for i in range(per):
                with open(os.path.join(d, f"{i:07d}.jpg"), "wb") as f:
                    f.write(b"x")

    tree = os.path.join(workdir, "tree")
    make_tree(tree, tree_files)
    big_tree = os.path.join(workdir, "bigtree")
    make_tree(big_tree, synthetic)
    pack = os.path.join(workdir, "big.ufspack")
    ufspack.build(big_tree, pack, progress=False)
    shutil.rmtree(big_tree)

    gc.collect()
    r0 = rss_kib()
    t0 = time.perf_counter()
    ds = ufspack.MyImageFolder(pack)
    t_my = time.perf_counter() - t0
    r1 = rss_kib()
    assert len(ds) == synthetic // 100 * 100
    t0 = time.perf_counter()
    tv = datasets.ImageFolder(tree, loader=lambda p: p)
    t_tv = time.perf_counter() - t0
    r2 = rss_kib()
    return {
        "ufspack_records": len(ds), "ufspack_construct_s": t_my, "ufspack_rss_kib": r1 - r0,
        "imagefolder_files": len(tv), "imagefolder_construct_s": t_tv, "imagefolder_rss_kib": r2 - r1,
    }


def main():
    ap = benchlib.parser(__doc__)
    ap.add_argument("tree", help="an ImageFolder directory of real images (e.g. cats_and_dogs_filtered/train)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--synthetic", type=int, default=1_000_000, help="records in the start-up pack")
    ap.add_argument("--tree-files", type=int, default=100_000, help="files in the ImageFolder start-up tree")
    ap.add_argument("--skip", default="", help="comma-separated: decode,dataset,startup")
    ap.add_argument("--json", help="write results here")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))

    import ufspack

    results = {"python": sys.version.split()[0]}
    work = tempfile.mkdtemp(prefix="ufspack-dsbench-")
    try:
        pack = os.path.join(work, "pack")
        ufspack.build(args.tree, pack, progress=False)
        files = [os.path.join(args.tree, n) for n in ufspack.Pack(pack).names]
        if "decode" not in skip:
            jpegs = [f for f in files if f.lower().endswith((".jpg", ".jpeg"))]
            results["decode"] = d = bench_decode(jpegs, args.repeat)
            print(f"decode (1 thread, {d['images']} JPEGs): PIL {d['pil_img_s']:.0f} img/s, "
                  f"ufspack {d['ufspack_img_s']:.0f} img/s, ratio {d['ratio']:.2f}")
        if "dataset" not in skip:
            results["dataset"] = d = bench_dataset(args.tree, pack, args.workers, args.repeat)
            for k, v in d.items():
                if isinstance(v, dict):
                    print(f"dataset {k} ({d['images']} images, Resize+CenterCrop+ToTensor): "
                          f"ImageFolder {v['imagefolder_img_s']:.0f} img/s, MyImageFolder "
                          f"{v['ufspack_img_s']:.0f} img/s, ratio {v['ratio']:.2f}")
        if "startup" not in skip:
            results["startup"] = s = bench_startup(args.synthetic, args.tree_files, work)
            print(f"startup: MyImageFolder on {s['ufspack_records']:,} records {s['ufspack_construct_s']*1000:.1f} ms, "
                  f"+{s['ufspack_rss_kib']/1024:.1f} MiB RSS; ImageFolder on {s['imagefolder_files']:,} files "
                  f"{s['imagefolder_construct_s']*1000:.0f} ms, +{s['imagefolder_rss_kib']/1024:.1f} MiB RSS")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    benchlib.write_json(args.json, results)


if __name__ == "__main__":
    main()
