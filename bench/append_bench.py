"""Append against rebuild (docs/scale.md): `ufspack append` of 1% new files
to a pack of N files, timed against a full `ufspack build` of the grown tree.

    python3 bench/append_bench.py [--files 1000000] [--classes 1000]
        [--size 1024] [--percent 1] [--dir DIR] [--cli build/ufspack]

Writes an ImageFolder tree of N small files (random bytes named .jpg) under
DIR (default: a fresh directory in $TMPDIR, removed afterwards), builds it,
adds N * percent / 100 new files whose names sort between the existing ones
in every class, then times `ufspack append` and a full rebuild of the grown
tree (each after one untimed warm run of the same command on a copy, so
both read a warm page cache).  Also times `ufspack append --files-from
LIST` (the new files' names given, no scan) on a copy of the first pack.
Checks that all three give the same listing.  Prints one JSON object.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


def run(cmd):
    t0 = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=1_000_000)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--percent", type=float, default=1.0)
    ap.add_argument("--dir")
    ap.add_argument("--cli", default=os.environ.get("UFSPACK_CLI", "build/ufspack"))
    args = ap.parse_args()

    base = args.dir or tempfile.mkdtemp(prefix="ufspack-append-")
    tree = os.path.join(base, "tree")
    per = args.files // args.classes
    payload = os.urandom(args.size)
    t0 = time.monotonic()
    for c in range(args.classes):
        d = os.path.join(tree, f"class{c:05d}")
        os.makedirs(d, exist_ok=True)
        for i in range(per):
            with open(os.path.join(d, f"img{i:07d}0.jpg"), "wb") as f:
                f.write(payload)
    make_seconds = time.monotonic() - t0
    files = per * args.classes
    pack = os.path.join(base, "pack")
    build_seconds = run([args.cli, "build", tree, "-o", pack, "-q"])
    listed_pack = os.path.join(base, "pack-listed")
    shutil.copytree(pack, listed_pack)

    # New files between the existing ones: img...5.jpg sorts after img...0.jpg.
    new = int(files * args.percent / 100)
    listed = []
    for k in range(new):
        c, i = k % args.classes, (k // args.classes) * max(1, per * args.classes // max(new, 1))
        listed.append(f"class{c:05d}/img{i % per:07d}5.jpg")
        with open(os.path.join(tree, listed[-1]), "wb") as f:
            f.write(payload)
    listing = os.path.join(base, "new-files.txt")
    with open(listing, "w") as f:
        f.write("".join(n + "\n" for n in listed))

    # Warm runs on copies, then the timed ones.
    warm = os.path.join(base, "warm")
    shutil.copytree(pack, warm)
    run([args.cli, "append", warm, tree, "-q"])
    shutil.rmtree(warm)
    append_seconds = run([args.cli, "append", pack, tree, "-q"])
    shutil.copytree(listed_pack, warm)
    run([args.cli, "append", warm, tree, "--files-from", listing, "-q"])
    shutil.rmtree(warm)
    listed_seconds = run([args.cli, "append", listed_pack, tree, "--files-from", listing, "-q"])
    run([args.cli, "build", tree, "-o", os.path.join(base, "rebuild-warm"), "-q"])
    rebuild_seconds = run([args.cli, "build", tree, "-o", os.path.join(base, "rebuild"), "-q"])

    ls_a = subprocess.run([args.cli, "ls", pack], check=True, capture_output=True).stdout
    ls_b = subprocess.run([args.cli, "ls", os.path.join(base, "rebuild")], check=True, capture_output=True).stdout
    ls_c = subprocess.run([args.cli, "ls", listed_pack], check=True, capture_output=True).stdout
    same = ls_a == ls_b == ls_c
    print(json.dumps({
        "files": files, "appended": new, "classes": args.classes, "size": args.size,
        "make_tree_seconds": round(make_seconds, 3), "first_build_seconds": round(build_seconds, 3),
        "append_seconds": round(append_seconds, 3), "rebuild_seconds": round(rebuild_seconds, 3),
        "append_over_rebuild": round(append_seconds / rebuild_seconds, 4),
        "append_files_from_seconds": round(listed_seconds, 3),
        "append_files_from_over_rebuild": round(listed_seconds / rebuild_seconds, 4),
        "same_listing": same,
    }))
    if not args.dir:
        shutil.rmtree(base, ignore_errors=True)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
