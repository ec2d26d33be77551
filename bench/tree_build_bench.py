"""Memory of `ufspack build` on a tree of real files (docs/scale.md): peak RSS
and time of a whole build and of a `--part` build, against the file count.

    python3 bench/tree_build_bench.py [--files 1000000] [--classes 1000]
        [--size 1024] [--parts 4] [--dir DIR] [--cli build/ufspack]
        [--compare-cli OTHER_UFSPACK]

Writes an ImageFolder tree of N small files (random bytes named .jpg, as
bench/append_bench.py does) under DIR (default: a fresh directory in
$TMPDIR, removed afterwards; an existing DIR/tree made by an earlier run
with the same --files, --classes and --size is reused), then runs, each as a
child process whose peak resident set is read from wait4(2):

  * `ufspack build TREE -o PACK` (after one untimed warm run, so the tree
    is read from the page cache),
  * `ufspack build TREE -o PART --part 0/P` and `--part P-1/P`.

With --compare-cli (another ufspack binary, e.g. an older commit's), runs
the same commands with it too, side by side, and checks that both whole
packs list the same records (`ufspack ls`).  Prints one JSON object.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


def measure(cmd):
    """Runs cmd; returns (seconds, peak RSS in bytes)."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    seconds = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {p.returncode}")
    return seconds, usage.ru_maxrss * 1024


def make_tree(tree, files, classes, size):
    marker = os.path.join(tree, f".made-{files}-{classes}-{size}")
    if os.path.exists(marker):
        return 0.0
    shutil.rmtree(tree, ignore_errors=True)
    payload = os.urandom(size)
    per = files // classes
    t0 = time.monotonic()
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    for c in range(classes):
        d = os.path.join(tree, f"class{c:05d}")
        os.makedirs(d, exist_ok=True)
        for i in range(per):
            fd = os.open(os.path.join(d, f"img{i:07d}0.jpg"), flags, 0o644)
            os.write(fd, payload)
            os.close(fd)
    with open(marker, "w"):
        pass
    return time.monotonic() - t0


def run_cli(cli, tree, base, tag, parts):
    out = {}
    pack = os.path.join(base, f"pack-{tag}")
    measure([cli, "build", tree, "-o", pack, "-q"])  # warm
    shutil.rmtree(pack)
    out["build_seconds"], out["build_peak_rss_bytes"] = measure(
        [cli, "build", tree, "-o", pack, "-q"])
    for i in sorted({0, parts - 1}):
        part = os.path.join(base, f"part-{tag}-{i}")
        s, rss = measure([cli, "build", tree, "-o", part, "-q", "--part", f"{i}/{parts}"])
        out[f"part{i}_seconds"], out[f"part{i}_peak_rss_bytes"] = round(s, 3), rss
        shutil.rmtree(part)
    out["build_seconds"] = round(out["build_seconds"], 3)
    return out, pack


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=1_000_000)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--parts", type=int, default=4)
    ap.add_argument("--dir")
    ap.add_argument("--cli", default=os.environ.get("UFSPACK_CLI", "build/ufspack"))
    ap.add_argument("--compare-cli")
    args = ap.parse_args()
    if args.files < args.classes or args.parts < 2:
        ap.error("need --files >= --classes and --parts >= 2")

    base = args.dir or tempfile.mkdtemp(prefix="ufspack-treebuild-")
    os.makedirs(base, exist_ok=True)
    tree = os.path.join(base, "tree")
    make_seconds = make_tree(tree, args.files, args.classes, args.size)
    files = args.files // args.classes * args.classes
    result = {"files": files, "classes": args.classes, "size": args.size, "parts": args.parts,
              "make_tree_seconds": round(make_seconds, 3)}
    result["cli"], pack = run_cli(args.cli, tree, base, "cli", args.parts)
    same = None
    if args.compare_cli:
        result["compare_cli"], other = run_cli(args.compare_cli, tree, base, "compare", args.parts)
        ls_a = subprocess.run([args.cli, "ls", "--long", pack], check=True, capture_output=True).stdout
        ls_b = subprocess.run([args.cli, "ls", "--long", other], check=True, capture_output=True).stdout
        same = ls_a == ls_b and ls_a.count(b"\n") == files
        result["same_listing"] = same
        shutil.rmtree(other)
    else:
        listing = subprocess.run([args.cli, "ls", "--long", pack], check=True, capture_output=True).stdout
        same = listing.count(b"\n") == files
        result["listed_records"] = listing.count(b"\n")
    shutil.rmtree(pack)
    print(json.dumps(result))
    if not args.dir:
        shutil.rmtree(base, ignore_errors=True)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
