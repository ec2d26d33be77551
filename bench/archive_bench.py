#!/usr/bin/python3
"""Packing ImageNet's nested train tar as downloaded, on a slow network file
system: one pass over the archive against the usual double extraction
(docs/benchmarks.md, "Packs from archives").

    sudo PYTHONPATH=build/python python3 bench/archive_bench.py \\
        [--classes 1000] [--per-class 100] [--delay-ms 0.5] \\
        [--work /tmp/archive-bench] [--out DIR] [--local]

Generates an ImageNet-structured train tar under --work/src: one outer tar
holding --classes class tars (n00000000.tar, ...), each holding --per-class
JPEGs (the photos of ../shared/data, reused round-robin, so sizes and
contents are those of real photos).  --work/src is then served over SSHFS
by ../shared/bench/slowfs.sh (one-way delay --delay-ms; --local skips it,
for a smoke run), and, with the page cache dropped before each step:

  archive   ufspack build MNT/train.tar -o LOCAL/a.ufspack
  extract   tar -xf MNT/train.tar -C MNT/x, then every class tar extracted
            into MNT/x/<class>/ and removed (what ImageNet's instructions
            and torchvision's ImageNet class do)
  tree      ufspack build MNT/x -o LOCAL/b.ufspack

Reported: seconds of each step, and the ratios (extract + tree) / archive
(target >= 2) and extract / archive (target >= 1.2); the two packs are
checked to hold the same records (names, labels, bytes).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from typing import Dict, List

import benchlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SLOWFS = os.environ.get("SLOWFS", os.path.join(ROOT, "..", "shared", "bench", "slowfs.sh"))
PHOTOS = os.path.join(ROOT, "..", "shared", "data", "cats_and_dogs_filtered.tar")


def photos(limit: int) -> List[bytes]:
    """Up to `limit` real JPEGs from ../shared (or generated ones without it)."""
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
        import numpy as np
        from PIL import Image

        for i in range(min(limit, 64)):
            arr = np.random.default_rng(i).integers(0, 255, (375, 500, 3)).astype(np.uint8)
            buf = io.BytesIO()
            Image.fromarray(arr).save(buf, "JPEG", quality=90)
            out.append(buf.getvalue())
    return out


def make_train_tar(path: str, classes: int, per_class: int) -> Dict[str, int]:
    """The nested tar; returns its file and byte counts."""
    jpegs = photos(min(3000, classes * per_class))
    files = total = 0
    with tarfile.open(path, "w") as outer:
        for c in range(classes):
            wnid = f"n{c:08d}"
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w") as inner:
                for i in range(per_class):
                    data = jpegs[(c * per_class + i) % len(jpegs)]
                    info = tarfile.TarInfo(f"{wnid}_{i}.JPEG")
                    info.size = len(data)
                    inner.addfile(info, io.BytesIO(data))
                    files += 1
                    total += len(data)
            info = tarfile.TarInfo(wnid + ".tar")
            info.size = buf.tell()
            buf.seek(0)
            outer.addfile(info, buf)
    return {"files": files, "bytes": total}


def drop_caches(local: bool) -> None:
    subprocess.run(["sync"], check=True)
    if not local:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")


def timed(cmd: List[str] | str, **kw) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, **kw)
    return time.perf_counter() - t0


def double_extract(archive: str, dest: str) -> None:
    os.makedirs(dest)
    subprocess.run(["tar", "-xf", archive, "-C", dest], check=True)
    for name in sorted(os.listdir(dest)):
        if name.endswith(".tar"):
            cls = os.path.join(dest, name[:-4])
            os.mkdir(cls)
            subprocess.run(["tar", "-xf", os.path.join(dest, name), "-C", cls], check=True)
            os.unlink(os.path.join(dest, name))


def same_records(a: str, b: str) -> bool:
    import ufspack

    pa, pb = ufspack.Pack(a), ufspack.Pack(b)
    if len(pa) != len(pb) or pa.classes != pb.classes:
        return False
    return all(pa.name(i) == pb.name(i) and pa.label(i) == pb.label(i) and pa.read(i) == pb.read(i)
               for i in range(len(pa)))


def main() -> int:
    p = benchlib.parser(__doc__)
    p.add_argument("--classes", type=int, default=1000, help="class tars in the outer tar (default 1000)")
    p.add_argument("--per-class", type=int, default=100, help="JPEGs per class (default 100)")
    p.add_argument("--delay-ms", type=float, default=0.5, help="slowfs one-way delay (default 0.5)")
    p.add_argument("--work", default="/tmp/archive-bench", help="scratch directory (default /tmp/archive-bench)")
    p.add_argument("--local", action="store_true", help="no slowfs: a smoke run on local disk")
    p.add_argument("--out", help="directory for results.json and table.md")
    args = p.parse_args()
    ufspack_cli = shutil.which("ufspack") or os.path.join(ROOT, "build", "ufspack")

    shutil.rmtree(args.work, ignore_errors=True)
    src, local = os.path.join(args.work, "src"), os.path.join(args.work, "local")
    os.makedirs(src)
    os.makedirs(local)
    made = make_train_tar(os.path.join(src, "train.tar"), args.classes, args.per_class)
    mnt = src
    if not args.local:
        mnt = os.path.join(args.work, "mnt")
        os.makedirs(mnt)
        subprocess.run([SLOWFS, "up", src, mnt, str(args.delay_ms)], check=True)
    try:
        res: Dict[str, float] = {}
        drop_caches(args.local)
        res["archive_s"] = timed([ufspack_cli, "build", os.path.join(mnt, "train.tar"),
                                  "-o", os.path.join(local, "a.ufspack"), "-q"])
        drop_caches(args.local)
        t0 = time.perf_counter()
        double_extract(os.path.join(mnt, "train.tar"), os.path.join(mnt, "x"))
        res["extract_s"] = time.perf_counter() - t0
        drop_caches(args.local)
        res["tree_s"] = timed([ufspack_cli, "build", os.path.join(mnt, "x"),
                               "-o", os.path.join(local, "b.ufspack"), "-q"])
        same = same_records(os.path.join(local, "a.ufspack"), os.path.join(local, "b.ufspack"))
    finally:
        if not args.local:
            subprocess.run([SLOWFS, "down"], check=False)
    res["extract_plus_tree_over_archive"] = (res["extract_s"] + res["tree_s"]) / res["archive_s"]
    res["extract_over_archive"] = res["extract_s"] / res["archive_s"]
    results = {"files": made["files"], "bytes": made["bytes"], "classes": args.classes,
               "delay_ms": None if args.local else args.delay_ms, "same_records": same, **res}
    table = "\n".join([
        f"{made['files']:,} JPEGs ({made['bytes'] / 1e6:,.0f} MB) in {args.classes} class tars, "
        + ("local disk (smoke)" if args.local else f"slow FS at {args.delay_ms} ms one way"),
        "",
        "| step | seconds |", "|---|---|",
        f"| ufspack build train.tar | {res['archive_s']:.1f} |",
        f"| tar -x, then each class tar | {res['extract_s']:.1f} |",
        f"| ufspack build of the extracted tree | {res['tree_s']:.1f} |",
        "",
        f"(tar -x + build) / archive build: {res['extract_plus_tree_over_archive']:.2f}x; "
        f"tar -x alone / archive build: {res['extract_over_archive']:.2f}x; same records: {same}",
    ])
    print(table)
    benchlib.write_results_dir(args.out, results, table)
    print(json.dumps(results))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
