#!/usr/bin/python3
"""Multi-file samples read at random: ufspack.SampleDataset against
WebDataset's wids.ShardListDataset on the same shards (docs/benchmarks.md,
"Multi-file samples at random").

    PYTHONPATH=build/python VENV/bin/python bench/samples_bench.py \\
        [--samples 20000] [--shards 10] [--reads 5000] [--repeats 3] \\
        [--work /tmp/samples-bench] [--out DIR] [--smoke]

VENV is bench/install-peers.sh's (PEERS=wids puts webdataset 0.2.100's
``wids`` beside webdataset 1.0.2, which no longer ships it).  Writes
--shards WebDataset tar shards holding --samples samples, each a JPEG
(``.jpg``: the photos of ../shared/data, round-robin) and its class
(``.cls``), and packs them with ``ufspack build 'shard-{000000..}.tar' --flat --all-files`` (``cls``
stays a field, as WebDataset keeps it).
Both libraries then read the same --reads samples, in one shuffled order,
in one process:

  raw      both fields as bytes
  decoded  jpg as an RGB PIL image (pixels decoded), cls as int; each
           library's own decoding (wids: its "PIL" transformation, then
           convert("RGB") as ImageFolder's loader does)

with the page cache warm (every file read just before) and, as root, cold
(dropped before each run).  wids reads the shards where they are
(``localname`` = identity, its best case: by default it first copies each
shard into /tmp/_wids_cache).  Reported: samples/s (medians of
--repeats), ufspack / wids, and ufspack's pread64 calls per sample
(strace -f -c over a child reading 2,000 samples, minus one reading none),
when strace is installed.  --smoke: 200 samples, one repeat, ufspack only
when wids is missing.
"""

from __future__ import annotations

import io
import os
import random
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from typing import Any, Callable, Dict, List, Optional

import benchlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def write_shards(work: str, samples: int, shards: int) -> List[Dict[str, Any]]:
    """WebDataset shards (key.jpg + key.cls per sample), as TarWriter
    writes them; returns wids' shard list."""
    pics = benchlib.photos_or_generated(samples, generated=32, size=(320, 240))
    per = -(-samples // shards)
    out = []
    for s in range(shards):
        path = os.path.join(work, f"shard-{s:06d}.tar")
        lo, hi = s * per, min(samples, (s + 1) * per)
        with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as t:
            for i in range(lo, hi):
                for ext, data in (("jpg", pics[i % len(pics)]), ("cls", str(i % 1000).encode())):
                    info = tarfile.TarInfo(f"{i:08d}.{ext}")
                    info.size, info.mtime, info.mode = len(data), 1700000000, 0o644
                    t.addfile(info, io.BytesIO(data))
        out.append({"url": path, "nsamples": hi - lo, "filesize": os.path.getsize(path)})
    return out


def have_wids() -> bool:
    try:
        import wids  # noqa: F401
    except ImportError:
        return False
    return True


def _bytes(v: Any) -> bytes:
    return v.getvalue() if hasattr(v, "getvalue") else bytes(v)


def make_reader(lib: str, mode: str, pack: str, shardlist: List[Dict[str, Any]]) -> Callable[[int], Any]:
    """A function reading sample i as `mode` asks, through `lib`."""
    if lib == "ufspack":
        import ufspack

        ds = ufspack.SampleDataset(pack, fields=("jpg", "cls"), decode=(mode == "decoded"))
        return ds.__getitem__
    import wids

    with open(os.devnull, "w") as quiet:  # wids prints its shard list to stderr
        err, sys.stderr = sys.stderr, quiet
        try:
            wds = wids.ShardListDataset(shardlist, localname=lambda url: url,
                                        transformations="PIL" if mode == "decoded" else [])
        finally:
            sys.stderr = err
    if mode == "decoded":
        def get(i: int) -> Any:
            s = wds[i]
            return s[".jpg"].convert("RGB"), s[".cls"]
        return get

    def get_raw(i: int) -> Any:
        s = wds[i]
        return _bytes(s[".jpg"]), _bytes(s[".cls"])
    return get_raw


def warm(paths: List[str]) -> None:
    """Reads every file under `paths` once (the pack is a directory)."""
    for top in paths:
        walk = os.walk(top) if os.path.isdir(top) else [(os.path.dirname(top), [], [os.path.basename(top)])]
        for root, _, names in walk:
            for name in names:
                with open(os.path.join(root, name), "rb") as fh:
                    while fh.read(1 << 20):
                        pass


def run_once(lib: str, mode: str, cache: str, pack: str, shardlist: List[Dict[str, Any]],
             order: List[int], files: List[str]) -> float:
    """Samples/s of one pass over `order`; opening (and wids' shard
    indexing) is inside the timed span, as a first epoch would pay it."""
    if cache == "cold":
        benchlib.drop_caches()
    else:
        warm(files)
    t0 = time.perf_counter()
    get = make_reader(lib, mode, pack, shardlist)
    for i in order:
        get(i)
    return len(order) / (time.perf_counter() - t0)


def preads_per_sample(pack: str, n: int) -> Optional[float]:
    """ufspack's pread64 calls per sample, by strace: a child reading n
    samples minus one reading none."""
    if shutil.which("strace") is None:
        return None
    counts = []
    for k in (0, n):
        log = os.path.join(os.path.dirname(pack), f"strace-{k}.txt")
        code = ("import sys, ufspack; ds = ufspack.SampleDataset(sys.argv[1], fields=('jpg', 'cls'), decode=False)\n"
                f"for i in range({k}): ds[(i * 7919) % len(ds)]\n")
        subprocess.run(["strace", "-f", "-c", "-e", "trace=pread64", "-o", log, sys.executable, "-c", code, pack],
                       check=True, env=dict(os.environ))
        # "% time  seconds  usecs/call  calls  [errors]  syscall"
        rows = [line.split() for line in open(log) if line.split()[-1:] == ["pread64"]]
        counts.append(int(rows[0][3]) if rows else 0)
    return (counts[1] - counts[0]) / n


def main() -> int:
    p = benchlib.parser(__doc__, work="/tmp/samples-bench")
    p.add_argument("--samples", type=int, default=20000, help="samples in the shards (default 20000)")
    p.add_argument("--shards", type=int, default=10, help="tar shards (default 10)")
    p.add_argument("--reads", type=int, default=5000, help="random samples read per run (default 5000)")
    p.add_argument("--repeats", type=int, default=3, help="runs per setting; the median is reported (default 3)")
    p.add_argument("--smoke", action="store_true", help="200 samples, 2 shards, one repeat")
    args = p.parse_args()
    if args.smoke:
        args.samples, args.shards, args.reads, args.repeats = 200, 2, 200, 1
    ufspack_cli = benchlib.ufspack_cli()

    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    shardlist = write_shards(args.work, args.samples, args.shards)
    pack = os.path.join(args.work, "samples.ufspack")
    pattern = os.path.join(args.work, f"shard-{{000000..{args.shards - 1:06d}}}.tar")
    subprocess.run([ufspack_cli, "build", pattern, "--flat", "--all-files", "-o", pack, "-q"], check=True)
    files = [s["url"] for s in shardlist] + [pack]
    order = random.Random(1).sample(range(args.samples), min(args.reads, args.samples))
    libs = ["ufspack"] + (["wids"] if have_wids() else [])
    import ufspack  # noqa: F401  (imports are not timed)

    if "wids" in libs:
        import wids  # noqa: F401

    caches = ["warm"] + (["cold"] if os.geteuid() == 0 and not args.smoke else [])

    results: Dict[str, Any] = {}
    for cache in caches:
        for mode in ("raw", "decoded"):
            for lib in libs:
                runs = [run_once(lib, mode, cache, pack, shardlist, order, files) for _ in range(args.repeats)]
                results[f"{lib}/{mode}/{cache}"] = {"samples_s": statistics.median(runs), "runs": runs}
                print(f"{lib:8} {mode:8} {cache:5} {statistics.median(runs):10,.0f} samples/s", flush=True)
    preads = preads_per_sample(pack, min(2000, args.samples))

    size = sum(s["filesize"] for s in shardlist)
    lines = [f"{args.samples:,} samples (jpg + cls) in {args.shards} shards ({size / 1e6:,.0f} MB), "
             f"{len(order):,} random reads per run, medians of {args.repeats}", "",
             "| page cache | fields | ufspack.SampleDataset | wids.ShardListDataset | ufspack / wids |",
             "|---|---|---|---|---|"]
    for cache in caches:
        for mode in ("raw", "decoded"):
            u = results[f"ufspack/{mode}/{cache}"]["samples_s"]
            w = results.get(f"wids/{mode}/{cache}", {}).get("samples_s")
            lines.append(f"| {cache} | {mode} | {u:,.0f}/s | " + (f"{w:,.0f}/s | {u / w:.2f}x |" if w else "- | - |"))
    if preads is not None:
        lines += ["", f"ufspack pread64 per sample (strace): {preads:.2f}"]
    table = "\n".join(lines)
    print(table)
    benchlib.write_results_dir(args.out, {"samples": args.samples, "shards": args.shards, "reads": len(order),
                                          "repeats": args.repeats, "preads_per_sample": preads,
                                          "results": results}, table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
