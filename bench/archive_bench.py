#!/usr/bin/python3
"""Packing ImageNet's nested train tar as downloaded, on a slow network file
system: one pass over the archive against the usual double extraction
(docs/benchmarks.md, "Packs from archives").

    sudo PYTHONPATH=build/python python3 bench/archive_bench.py \\
        [--classes 1000] [--per-class 100] [--delay-ms 0.5] \\
        [--work /tmp/archive-bench] [--out DIR] [--local] [--reuse] [--outer-only]

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

Reported: seconds of each step (the outer tar -x also on its own), and
the ratios (extract + tree) / archive (target >= 2), the outer tar -x /
archive (target >= 1.2) and all of the extraction / archive; the two
packs are checked to hold the same records (names, labels, bytes).
--reuse keeps the generated tar of an earlier run with the same sizes;
--outer-only stops the extraction after the outer tar (no class tars,
no tree build).
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


def make_train_tar(path: str, classes: int, per_class: int) -> Dict[str, int]:
    """The nested tar; returns its file and byte counts."""
    jpegs = benchlib.photos_or_generated(min(3000, classes * per_class))
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
    """The page cache dropped before a step (the smoke run on local disk only syncs)."""
    if local:
        subprocess.run(["sync"], check=True)
    else:
        benchlib.drop_caches()


def timed(cmd: List[str] | str, **kw) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, **kw)
    return time.perf_counter() - t0


def double_extract(archive: str, dest: str, outer_only: bool) -> float:
    """Extracts the outer tar, then (unless outer_only) each class tar into
    its directory; returns the seconds of the outer tar -x alone."""
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(dest)
    outer = timed(["tar", "-xf", archive, "-C", dest])
    for name in sorted(os.listdir(dest)) if not outer_only else []:
        if name.endswith(".tar"):
            cls = os.path.join(dest, name[:-4])
            os.mkdir(cls)
            subprocess.run(["tar", "-xf", os.path.join(dest, name), "-C", cls], check=True)
            os.unlink(os.path.join(dest, name))
    return outer


def same_records(a: str, b: str) -> bool:
    import ufspack

    pa, pb = ufspack.Pack(a), ufspack.Pack(b)
    if len(pa) != len(pb) or pa.classes != pb.classes:
        return False
    return all(pa.name(i) == pb.name(i) and pa.label(i) == pb.label(i) and pa.read(i) == pb.read(i)
               for i in range(len(pa)))


def main() -> int:
    p = benchlib.parser(__doc__, work="/tmp/archive-bench")
    p.add_argument("--classes", type=int, default=1000, help="class tars in the outer tar (default 1000)")
    p.add_argument("--per-class", type=int, default=100, help="JPEGs per class (default 100)")
    p.add_argument("--delay-ms", type=float, default=0.5, help="slowfs one-way delay (default 0.5)")
    p.add_argument("--local", action="store_true", help="no slowfs: a smoke run on local disk")
    p.add_argument("--reuse", action="store_true",
                   help="keep --work/src/train.tar from an earlier run with the same --classes/--per-class")
    p.add_argument("--outer-only", action="store_true",
                   help="only the archive build and tar -x of the outer tar (no class tars, no tree build)")
    args = p.parse_args()
    ufspack_cli = benchlib.ufspack_cli()

    src, local = os.path.join(args.work, "src"), os.path.join(args.work, "local")
    made_json = os.path.join(args.work, "made.json")
    wanted = {"classes": args.classes, "per_class": args.per_class}
    made = None
    if args.reuse and os.path.exists(made_json):
        made = json.load(open(made_json))
        if {k: made.get(k) for k in wanted} != wanted:
            made = None
    if made is None:
        shutil.rmtree(args.work, ignore_errors=True)
        os.makedirs(src)
        made = {**make_train_tar(os.path.join(src, "train.tar"), args.classes, args.per_class), **wanted}
        json.dump(made, open(made_json, "w"))
    shutil.rmtree(local, ignore_errors=True)
    shutil.rmtree(os.path.join(src, "x"), ignore_errors=True)
    os.makedirs(local)
    mnt = src
    if not args.local:
        mnt = os.path.join(args.work, "mnt")
        os.makedirs(mnt, exist_ok=True)
        subprocess.run([SLOWFS, "up", src, mnt, str(args.delay_ms)], check=True)
    try:
        res: Dict[str, float] = {}
        drop_caches(args.local)
        res["archive_s"] = timed([ufspack_cli, "build", os.path.join(mnt, "train.tar"),
                                  "-o", os.path.join(local, "a.ufspack"), "-q"])
        drop_caches(args.local)
        t0 = time.perf_counter()
        res["outer_s"] = double_extract(os.path.join(mnt, "train.tar"), os.path.join(mnt, "x"), args.outer_only)
        res["extract_s"] = time.perf_counter() - t0
        same = None
        if not args.outer_only:
            drop_caches(args.local)
            res["tree_s"] = timed([ufspack_cli, "build", os.path.join(mnt, "x"),
                                   "-o", os.path.join(local, "b.ufspack"), "-q"])
            same = same_records(os.path.join(local, "a.ufspack"), os.path.join(local, "b.ufspack"))
    finally:
        if not args.local:
            subprocess.run([SLOWFS, "down"], check=False)
    if "tree_s" in res:
        res["extract_plus_tree_over_archive"] = (res["extract_s"] + res["tree_s"]) / res["archive_s"]
    if not args.outer_only:
        res["extract_over_archive"] = res["extract_s"] / res["archive_s"]
    else:
        del res["extract_s"]
    res["outer_over_archive"] = res["outer_s"] / res["archive_s"]
    results = {"files": made["files"], "bytes": made["bytes"], "classes": args.classes,
               "delay_ms": None if args.local else args.delay_ms, "same_records": same, **res}
    rows = [f"| ufspack build train.tar | {res['archive_s']:.1f} |",
            f"| tar -x of train.tar (the outer tar alone) | {res['outer_s']:.1f} |"]
    if "extract_s" in res:
        rows.append(f"| tar -x, then each class tar (all of the extraction) | {res['extract_s']:.1f} |")
    if "tree_s" in res:
        rows.append(f"| ufspack build of the extracted tree | {res['tree_s']:.1f} |")
    ratios = f"tar -x of the outer tar / archive build: {res['outer_over_archive']:.2f}x"
    if "extract_s" in res:
        ratios += f"; all of the extraction / archive build: {res['extract_over_archive']:.2f}x"
    if "tree_s" in res:
        ratios = (f"(extraction + tree build) / archive build: {res['extract_plus_tree_over_archive']:.2f}x; "
                  + ratios + f"; same records: {same}")
    table = "\n".join([
        f"{made['files']:,} JPEGs ({made['bytes'] / 1e6:,.0f} MB) in {args.classes} class tars, "
        + ("local disk (smoke)" if args.local else f"slow FS at {args.delay_ms} ms one way"),
        "", "| step | seconds |", "|---|---|", *rows, "", ratios])
    print(table)
    benchlib.write_results_dir(args.out, results, table)
    print(json.dumps(results))
    return 0 if same in (None, True) else 1


if __name__ == "__main__":
    sys.exit(main())
