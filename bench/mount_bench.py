#!/usr/bin/python3
"""`ufspack mount` side by side (docs/benchmarks.md, "The mount"):

    sudo PYTHONPATH=build/python build/peers-venv/bin/python bench/mount_bench.py \\
        [--repeat 3] [--threads 8] [--workers 4] [--delay-ms 0.5] [--million] \\
        [--work /tmp/mount-bench] [--out DIR] [--smoke]

The tree is the photos of ../shared/data (3,000 JPEGs, extracted), packed
with ``ufspack build`` and archived with ``tar -cf`` for ratarmount
(``PEERS=ratarmount bench/install-peers.sh``; skipped and said so when it
is not installed).  Six measurements:

  reads    random whole-file reads of every file, in one shuffled order, on
           --threads threads, warm (every file read once just before), five
           ways: on Python threads as Python reads a file (open(p,
           "rb").read(): isatty, fstat, lseek, read), the same unbuffered
           (no isatty) and as C programs do (os.open, os.read, os.close),
           and the first and last sequences of calls
           on threads of a compiled program (bench/file_reads.cc, built
           with -DUFSPACK_BUILD_BENCHMARKS=ON; left out without it), where
           no interpreter lock caps the rate: the loose files on local
           disk, the same files through ``ufspack mount`` of the local
           pack, and through ratarmount of the tar
  first    the same random reads (every file once, shuffled, --threads
           threads) through a fresh mount of the pack and of the tar whose
           file is in the page cache: what each mount does per file
  slowfs   (as root) torchvision ImageFolder, raw bytes (the loader reads
           the file), DataLoader with --workers workers, one epoch in the
           dataset's order (the mount reading ahead, and with --read-ahead
           0) and one shuffled, on the slow network file system of
           ../shared/bench/slowfs.sh (--delay-ms one way), cold (a fresh
           SSHFS mount and mount of the pack, page cache dropped): the loose
           files against the mount of the pack that sits on the same slow FS,
           the runs interleaved, and `cat data.ufs` (the link's rate)
  s3       (as root) the pack on SeaweedFS behind the same --delay-ms
           (bench/remote_bench.py's server), mounted as s3://: every file
           read in order by one thread and by ImageFolder, with read-ahead
           and with --read-ahead 0, ImageFolder shuffled, and every file
           once, shuffled, by 32 threads with --threads 64 (the default)
           and 10 (libfuse's own cap)
  far      the pack on tests/remote/static_server.py answering each GET
           after 20 ms, mounted as http://: 1,024 files, shuffled, read by
           32 threads with --threads 64 (the default) and 10
  find     (--million) ``find MOUNTPOINT | wc -l`` over a pack of 1,000,000
           records (1,000 directories; written with ufspack.Writer)

Reported: files/s (medians of --repeat) and the ratios the issue names.
--smoke: 60 generated files, one repeat, the reads on loose files and the
mount only (for the test suite).
"""

from __future__ import annotations

import concurrent.futures
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
from typing import Any, Callable, Dict, List

import benchlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SLOWFS = os.environ.get("SLOWFS", os.path.join(ROOT, "..", "shared", "bench", "slowfs.sh"))


def ufspack_cli() -> str:
    return benchlib.ufspack_cli()


def make_tree(tree: str, smoke: bool) -> None:
    """The photos of ../shared extracted into `tree` (two classes, train and
    validation, as the tar holds them); 60 generated JPEGs for --smoke or
    without ../shared."""
    if not smoke and os.path.exists(benchlib.PHOTOS):
        os.makedirs(tree)
        subprocess.run(["tar", "-xf", benchlib.PHOTOS, "-C", tree], check=True)
        inner = os.path.join(tree, "cats_and_dogs_filtered")
        for name in os.listdir(inner):
            os.rename(os.path.join(inner, name), os.path.join(tree, name))
        os.rmdir(inner)
        return
    for i, data in enumerate(benchlib.photos_or_generated(60, generated=60, size=(96, 64))):
        path = os.path.join(tree, f"class{i % 3}", f"{i:04d}.jpg")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)


def files_under(root: str) -> List[str]:
    out = []
    for d, _, names in os.walk(root):
        out += [os.path.join(d, n) for n in names]
    return sorted(out)


def read_python(path: str) -> int:
    """As Python programs read a file (PIL, torchvision's loader): open()
    asks isatty() (an ioctl), then fstat, lseek, read."""
    with open(path, "rb") as f:
        return len(f.read())


def read_python_unbuffered(path: str) -> int:
    """The same with buffering=0: open() then asks no isatty() (CPython
    calls it only to choose a buffer), so a FUSE file costs no round trip."""
    with open(path, "rb", buffering=0) as f:
        return len(f.read())


def read_posix(path: str) -> int:
    """As C programs read a file (cat, OpenCV's imread): open, read to the
    end, close."""
    fd = os.open(path, os.O_RDONLY)
    try:
        n = 0
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                return n
            n += len(b)
    finally:
        os.close(fd)


def file_reads_exe() -> str:
    """bench/file_reads.cc, built with -DUFSPACK_BUILD_BENCHMARKS=ON."""
    return os.environ.get("UFSPACK_FILE_READS") or os.path.join(ROOT, "build", "bench", "file_reads")


def python_threads(read: Callable[[str], int]) -> Callable[[List[str], int, bool], float]:
    """A way of reading: `read` on each of `paths` on `threads` Python
    threads, one untimed pass first when `warm`; files/s of the timed one."""

    def run(paths: List[str], threads: int, warm: bool) -> float:
        with concurrent.futures.ThreadPoolExecutor(threads) as ex:
            if warm:
                sum(ex.map(read, paths))
            t0 = time.perf_counter()
            sum(ex.map(read, paths))
            return len(paths) / (time.perf_counter() - t0)

    return run


def compiled(calls: str) -> Callable[[List[str], int, bool], float]:
    """A way of reading: bench/file_reads (a compiled program, no
    interpreter lock) with --calls `calls`; warm: one untimed pass, then 5
    timed ones (a pass over cached files takes milliseconds)."""

    def run(paths: List[str], threads: int, warm: bool) -> float:
        with tempfile.NamedTemporaryFile("w", suffix=".list") as f:
            f.write("".join(p + "\n" for p in paths))
            f.flush()
            passes = ["--warm", "1", "--timed", "5"] if warm else ["--warm", "0", "--timed", "1"]
            out = subprocess.run([file_reads_exe(), f.name, "--threads", str(threads), "--calls", calls, *passes],
                                 check=True, capture_output=True, text=True)
        return float(json.loads(out.stdout)["files_s"])

    return run


# The ways of reading, by the name the results use: Python threads as
# Python programs read (PIL, torchvision's loader) and as a C-style loop in
# Python, then a compiled program making the same two sequences of calls.
READERS = {
    "python": python_threads(read_python),
    "python_unbuffered": python_threads(read_python_unbuffered),
    "posix": python_threads(read_posix),
    "c": compiled("c"),
    "c_python_calls": compiled("python"),
}
READER_LABELS = {
    "python": "Python threads, open(p, 'rb').read()",
    "python_unbuffered": "Python threads, open(p, 'rb', buffering=0).read()",
    "posix": "Python threads, os.open/os.read/os.close",
    "c": "C++ threads, open/read/close",
    "c_python_calls": "C++ threads, Python's calls (open, isatty, fstat, lseek, read, close)",
}


def readers() -> List[str]:
    """The ways of reading this machine has (the compiled ones need
    build/bench/file_reads)."""
    return [how for how in READERS if not how.startswith("c") or os.access(file_reads_exe(), os.X_OK)]


def random_reads(root: str, threads: int, how: str, seed: int = 1) -> float:
    """Files/s of reading every file under `root`, shuffled, on `threads`
    threads with READERS[how], warm (after one untimed pass)."""
    paths = files_under(root)
    random.Random(seed).shuffle(paths)
    return READERS[how](paths, threads, True)


def reads_of(root: str, threads: int, repeat: int) -> Dict[str, Any]:
    """random_reads of `root`, medians of `repeat`, each way of reading."""
    return {how: median_of(repeat, lambda how=how: random_reads(root, threads, how)) for how in readers()}


def first_reads(mount: Callable[[], Any], source: str, threads: int, repeat: int) -> Dict[str, Any]:
    """Files/s of reading every file once, shuffled, on `threads` threads,
    through a fresh mount (`mount()`: a context manager yielding its root)
    whose source file `source` is in the page cache: what the mount itself
    does per file, no page of the mount's kept by the kernel yet.  Medians
    of `repeat`, each way of reading."""

    def run(how: str) -> float:
        with open(source, "rb") as f:  # the source warm
            while f.read(1 << 24):
                pass
        with mount() as root:
            paths = files_under(root)
            random.Random(2).shuffle(paths)
            return READERS[how](paths, threads, False)

    return {how: median_of(repeat, lambda how=how: run(how)) for how in readers()}


class Ratarmount:
    """ratarmount of `tar` at `mnt` (foreground process; unmounted on exit)."""

    def __init__(self, tar: str, mnt: str) -> None:
        exe = shutil.which("ratarmount") or os.path.join(os.path.dirname(sys.executable), "ratarmount")
        os.makedirs(mnt, exist_ok=True)
        self.mnt = mnt
        self.proc = subprocess.Popen([exe, "-f", tar, mnt], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 300  # indexing the tar happens first
        while not os.path.ismount(mnt):
            if self.proc.poll() is not None:
                raise RuntimeError(f"ratarmount exited: {self.proc.stderr.read().decode()[-2000:]}")  # type: ignore[union-attr]
            if time.monotonic() > deadline:
                raise RuntimeError("ratarmount did not mount within 300 s")
            time.sleep(0.05)

    def __enter__(self) -> str:
        return self.mnt

    def __exit__(self, *exc: Any) -> None:
        subprocess.run(["fusermount3", "-u", self.mnt], check=False, stderr=subprocess.DEVNULL)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def have_ratarmount() -> bool:
    return bool(shutil.which("ratarmount")
                or os.path.exists(os.path.join(os.path.dirname(sys.executable), "ratarmount")))


def median_of(repeat: int, fn: Callable[[], float]) -> Dict[str, Any]:
    runs = [fn() for _ in range(repeat)]
    return {"files_s": statistics.median(runs), "runs": runs}


def medians_of(repeat: int, fn: Callable[[], Dict[str, float]]) -> Dict[str, Any]:
    """median_of for a function returning several rates by name."""
    runs = [fn() for _ in range(repeat)]
    return {k: {"files_s": statistics.median(r[k] for r in runs), "runs": [r[k] for r in runs]} for k in runs[0]}


def imagefolder_epoch(root: str, workers: int, shuffle: bool) -> Dict[str, float]:
    """One epoch of ImageFolder(root) with a raw-bytes loader, in the
    dataset's order or shuffled (seeded): samples/s of the whole epoch (the
    workers' start included) and after its first batch (the steady rate)."""
    import torch
    import torchvision

    ds = torchvision.datasets.ImageFolder(root, loader=_raw)
    gen = torch.Generator().manual_seed(0) if shuffle else None
    loader = torch.utils.data.DataLoader(ds, batch_size=32, num_workers=workers, collate_fn=_keep,
                                         shuffle=shuffle, generator=gen)
    t0 = time.perf_counter()
    first, n, t1 = 0, 0, t0
    for b in loader:
        if n == 0:
            first, t1 = len(b), time.perf_counter()
        n += len(b)
    t2 = time.perf_counter()
    return {"epoch": n / (t2 - t0), "after_first_batch": (n - first) / (t2 - t1)}


def _raw(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _keep(batch: List[Any]) -> List[Any]:
    return batch


def slowfs_runs(src: str, work: str, args: Any) -> Dict[str, Any]:
    import ufspack

    smnt = os.path.join(work, "slow")
    os.makedirs(smnt, exist_ok=True)

    files = len(files_under(os.path.join(src, "tree")))

    def up() -> None:
        subprocess.run([SLOWFS, "up", src, smnt, str(args.delay_ms)], check=True, stdout=subprocess.DEVNULL)
        benchlib.drop_caches()

    def loose(shuffle: bool) -> Dict[str, float]:
        up()
        return imagefolder_epoch(os.path.join(smnt, "tree"), args.workers, shuffle)

    def mounted(shuffle: bool, read_ahead: Any = None) -> Dict[str, float]:
        up()
        with ufspack.mounted(os.path.join(smnt, "photos.ufspack"), read_ahead=read_ahead) as root:
            return imagefolder_epoch(root, args.workers, shuffle)

    def cat() -> float:  # the link's sequential rate, in files of the pack per second
        up()
        t0 = time.perf_counter()
        subprocess.run(["cat", os.path.join(smnt, "photos.ufspack", "data.ufs")], check=True,
                       stdout=subprocess.DEVNULL)
        return files / (time.perf_counter() - t0)

    # Interleaved (loose, mount, loose, mount, ..., cat), so that a drift of
    # the machine over the runs touches both sides; the ratio reported is
    # the median of each pair's.
    runs: Dict[str, List[Any]] = {k: [] for k in ("in_order_loose", "in_order_mount", "in_order_mount_ra0",
                                                  "shuffled_loose", "shuffled_mount", "cat_data")}
    try:
        for k in range(args.repeat):
            runs["in_order_loose"].append(loose(False))
            # The mount reading ahead (Reader::WillNeed) and not (the
            # kernel's read-ahead alone), one after the other, which first
            # alternating (a run right after the loose files' was seen slower).
            for ra in ((None, 0) if k % 2 == 0 else (0, None)):
                runs["in_order_mount" if ra is None else "in_order_mount_ra0"].append(mounted(False, ra))
            runs["shuffled_loose"].append(loose(True))
            runs["shuffled_mount"].append(mounted(True))
            runs["cat_data"].append(cat())
    finally:
        subprocess.run([SLOWFS, "down"], check=False, stdout=subprocess.DEVNULL)

    def med(rs: List[Dict[str, float]]) -> Dict[str, Any]:
        return {k: {"files_s": statistics.median(r[k] for r in rs), "runs": [r[k] for r in rs]} for k in rs[0]}

    res: Dict[str, Any] = {"cat_data": {"files_s": statistics.median(runs["cat_data"]), "runs": runs["cat_data"]}}
    def ratio(a: List[Dict[str, float]], b: List[Dict[str, float]]) -> Dict[str, float]:
        return {k: statistics.median(x[k] / y[k] for x, y in zip(a, b)) for k in a[0]}

    for order in ("in_order", "shuffled"):
        lo, mo = runs[f"{order}_loose"], runs[f"{order}_mount"]
        res[order] = {"loose": med(lo), "mount": med(mo), "ratio": ratio(mo, lo)}
    ra0 = runs["in_order_mount_ra0"]
    res["in_order"].update({"mount_ra0": med(ra0), "ratio_ra0": ratio(ra0, runs["in_order_loose"]),
                            "read_ahead_gain": ratio(runs["in_order_mount"], ra0)})
    return res


def sequential_reads(root: str) -> float:
    """Files/s of one thread reading every file in the tree's order (as
    cp -r, tar or md5sum do)."""
    paths = files_under(root)
    t0 = time.perf_counter()
    for p in paths:
        read_posix(p)
    return len(paths) / (time.perf_counter() - t0)


def threads_compared(url: str, files: int, repeat: int) -> Dict[str, Any]:
    """Files/s of `files` files of the pack at `url`, shuffled, each read
    once by 32 threads through a fresh mount, with --threads 64 (the
    default) and 10 (libfuse's own cap); medians of `repeat`."""
    import ufspack

    how = "c" if "c" in readers() else "posix"

    def run(threads: Any) -> float:
        with ufspack.mounted(url, threads=threads) as root:
            paths = files_under(root)
            random.Random(3).shuffle(paths)
            return READERS[how](paths[:files], 32, False)

    return {"reader": how, **{label: median_of(repeat, lambda t=t: run(t))
                              for label, t in (("threads_64", None), ("threads_10", 10))}}


def s3_runs(src: str, work: str, args: Any) -> Dict[str, Any]:
    """The pack on SeaweedFS (bench/remote_bench.py's server, --delay-ms one
    way away in slowfs.sh's network namespace), mounted as s3://: read in
    order with read-ahead (the default) and without (--read-ahead 0), one
    thread and ImageFolder with --workers workers, and ImageFolder
    shuffled; a fresh mount each run (nothing cached)."""
    import types

    import remote_bench
    import ufspack

    server = remote_bench.Server(types.SimpleNamespace(delay_ms=args.delay_ms, dataset="photos", smoke=False),
                                 work)
    saved = dict(os.environ)
    try:
        s3 = server.client()
        for name in ("data.ufs", "index.ufs"):  # data first, then its index
            s3.upload_file(os.path.join(src, "photos.ufspack", name), remote_bench.BUCKET, f"photos/{name}")
        os.environ.update(server.env(server.endpoint))
        url = f"s3://{remote_bench.BUCKET}/photos"

        def run(fn: Callable[[str], Any], read_ahead: Any) -> Any:
            with ufspack.mounted(url, read_ahead=read_ahead) as root:
                return fn(root)

        res: Dict[str, Any] = {}
        for label, ra in (("read_ahead", None), ("no_read_ahead", 0)):
            res[label] = {
                "one_thread": median_of(args.repeat, lambda ra=ra: run(sequential_reads, ra)),
                "imagefolder": medians_of(args.repeat, lambda ra=ra: run(
                    lambda root: imagefolder_epoch(root, args.workers, False), ra)),
            }
        res["shuffled"] = medians_of(args.repeat, lambda: run(
            lambda root: imagefolder_epoch(root, args.workers, True), None))
        # The mount's --threads (default 64) against libfuse's own cap of 10.
        res["many_readers"] = threads_compared(url, len(files_under(os.path.join(src, "tree"))), args.repeat)
        return res
    finally:
        os.environ.clear()
        os.environ.update(saved)
        server.stop()


def far_server_runs(src: str, args: Any) -> Dict[str, Any]:
    """The pack on tests/remote/static_server.py answering every GET after
    20 ms (a server far away that is never the bottleneck, unlike
    SeaweedFS on this machine's own cores), mounted as http://:
    threads_compared over 1,024 files."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
    import httpserve

    with httpserve.serve(src, "--delay-ms", "20") as url:
        return threads_compared(url + "/photos.ufspack", 1024, args.repeat)


def million_find(work: str, repeat: int) -> Dict[str, Any]:
    import ufspack

    pack = os.path.join(work, "million.ufspack")
    with ufspack.Writer(pack) as w:
        for i in range(1_000_000):
            w.add(f"d{i % 1000:04d}/{i:07d}.jpg", b"x" * 16)

    def run() -> float:
        with ufspack.mounted(pack) as root:
            t0 = time.perf_counter()
            out = subprocess.run(f"find '{root}' | wc -l", shell=True, check=True, capture_output=True, text=True)
            seconds = time.perf_counter() - t0
            assert int(out.stdout) == 1_000_000 + 1000 + 1, out.stdout
            return seconds

    runs = [run() for _ in range(repeat)]
    return {"seconds": statistics.median(runs), "runs": runs}


def main() -> int:
    p = benchlib.parser(__doc__, work="/tmp/mount-bench")
    p.add_argument("--repeat", type=int, default=3, help="runs of each, the median reported (default 3)")
    p.add_argument("--threads", type=int, default=8, help="reader threads of the random reads (default 8)")
    p.add_argument("--workers", type=int, default=4, help="DataLoader workers on the slow FS (default 4)")
    p.add_argument("--delay-ms", type=float, default=0.5, help="slowfs one-way delay (default 0.5)")
    p.add_argument("--million", action="store_true", help="also find over a 1,000,000-record pack")
    p.add_argument("--smoke", action="store_true", help="60 files, one repeat, loose and mount reads only")
    args = p.parse_args()
    if args.smoke:
        args.repeat = 1
    import ufspack

    shutil.rmtree(args.work, ignore_errors=True)
    src = os.path.join(args.work, "src")
    tree, pack, tar = (os.path.join(src, n) for n in ("tree", "photos.ufspack", "photos.tar"))
    make_tree(tree, args.smoke)
    subprocess.run([ufspack_cli(), "build", tree, "-o", pack, "-q"], check=True)
    files = len(files_under(tree))

    results: Dict[str, Any] = {"files": files, "threads": args.threads, "repeat": args.repeat}
    reads: Dict[str, Any] = {"loose": reads_of(tree, args.threads, args.repeat)}
    with ufspack.mounted(pack) as root:
        assert len(files_under(root)) == files
        reads["mount"] = reads_of(root, args.threads, args.repeat)
    skipped: Dict[str, str] = {}
    if args.smoke:
        pass
    elif have_ratarmount():
        with tarfile.open(tar, "w") as t:
            t.add(tree, arcname="tree")
        with Ratarmount(tar, os.path.join(args.work, "rmnt")) as rmnt:
            reads["ratarmount"] = reads_of(rmnt, args.threads, args.repeat)
        results["first_reads"] = {
            "mount": first_reads(lambda: ufspack.mounted(pack), os.path.join(pack, "data.ufs"),
                                 args.threads, args.repeat),
            "ratarmount": first_reads(lambda: Ratarmount(tar, os.path.join(args.work, "rmnt")), tar,
                                      args.threads, args.repeat),
        }
    else:
        skipped["ratarmount"] = "not installed (PEERS=ratarmount bench/install-peers.sh VENV)"
    results["reads"] = reads

    def attempt(name: str, run: Callable[[], Any]) -> None:
        """A part that fails is reported (in "skipped", with its error)
        rather than losing the parts measured before it."""
        try:
            results[name] = run()
        except Exception as e:  # noqa: BLE001 (any failure of a part)
            skipped[name] = f"failed: {type(e).__name__}: {e}"
            print(f"mount_bench: {name}: {skipped[name]}", file=sys.stderr)

    if not args.smoke and os.geteuid() == 0:
        attempt("slowfs", lambda: slowfs_runs(src, args.work, args))
        attempt("s3", lambda: s3_runs(src, args.work, args))
    elif not args.smoke:
        skipped["slowfs"] = skipped["s3"] = "needs root"
    if not args.smoke:
        attempt("far_server", lambda: far_server_runs(src, args))
    if args.million:
        attempt("find_1m", lambda: million_find(args.work, args.repeat))
    results["skipped"] = skipped

    lines = [f"{files:,} files, random whole-file reads on {args.threads} threads, warm, "
             f"medians of {args.repeat}; readers: "
             + "; ".join(f"{how}: {READER_LABELS[how]}" for how in reads["loose"]), "",
             "| files read from | reader | files/s | / loose files on local disk | mount / it |",
             "|---|---|---|---|---|"]
    for name, r in reads.items():
        for how, m in r.items():
            lines.append(f"| {name} | {how} | {m['files_s']:,.0f} | "
                         f"{m['files_s'] / reads['loose'][how]['files_s']:.2f}x | "
                         f"{reads['mount'][how]['files_s'] / m['files_s']:.2f}x |")
    if "first_reads" in results:
        fr = results["first_reads"]
        lines += ["", f"First reads through a fresh mount (the pack's / the tar's file in the page cache), "
                  f"every file once, shuffled, {args.threads} threads, medians of {args.repeat}:", "",
                  "| reader | mount files/s | ratarmount files/s | mount / ratarmount "
                  "| mount / loose files on local disk (warm) |", "|---|---|---|---|---|"]
        for how in fr["mount"]:
            mo, ra = fr["mount"][how]["files_s"], fr["ratarmount"][how]["files_s"]
            lines.append(f"| {how} | {mo:,.0f} | {ra:,.0f} | {mo / ra:.2f}x | "
                         f"{mo / reads['loose'][how]['files_s']:.2f}x |")
    if "slowfs" in results:
        s = results["slowfs"]
        lines += ["", f"ImageFolder, raw bytes, {args.workers} DataLoader workers, one cold epoch, slow FS at "
                  f"{args.delay_ms} ms one way, samples/s (epoch / after the first batch):", "",
                  "| order | loose files | the mount of the pack | mount / loose (median of the runs' ratios) |",
                  "|---|---|---|---|"]
        rows = [("in order (shuffle=False)", "in_order", "mount", "ratio"),
                ("in order, the mount with --read-ahead 0", "in_order", "mount_ra0", "ratio_ra0"),
                ("shuffled", "shuffled", "mount", "ratio")]
        for label, order, which, ratio_key in rows:
            lo, mo = s[order]["loose"], s[order][which]
            ratio = s[order][ratio_key]
            lines.append(f"| {label} | {lo['epoch']['files_s']:,.0f} / {lo['after_first_batch']['files_s']:,.0f} | "
                         f"{mo['epoch']['files_s']:,.0f} / {mo['after_first_batch']['files_s']:,.0f} | "
                         f"{ratio['epoch']:.2f}x / {ratio['after_first_batch']:.2f}x |")
        gain = s["in_order"]["read_ahead_gain"]
        lines += ["", f"The mount's read-ahead in order, on / off (median of the runs' ratios): "
                  f"{gain['epoch']:.2f}x / {gain['after_first_batch']:.2f}x",
                  "", f"cat data.ufs over the same link: {s['cat_data']['files_s']:,.0f} files' worth per second"]
    if "s3" in results:
        s = results["s3"]
        ra, no = s["read_ahead"], s["no_read_ahead"]
        lines += ["", f"The pack on SeaweedFS {args.delay_ms} ms one way away, mounted as s3://, a fresh mount "
                  f"each run, files/s (ImageFolder: epoch / after the first batch, {args.workers} workers):", "",
                  "| reads | read-ahead (default) | --read-ahead 0 | ratio |", "|---|---|---|---|",
                  f"| one thread, in order | {ra['one_thread']['files_s']:,.0f} | {no['one_thread']['files_s']:,.0f} | "
                  f"{ra['one_thread']['files_s'] / no['one_thread']['files_s']:.2f}x |"]
        a, b = ra["imagefolder"], no["imagefolder"]
        lines.append(f"| ImageFolder, in order | {a['epoch']['files_s']:,.0f} / "
                     f"{a['after_first_batch']['files_s']:,.0f} | "
                     f"{b['epoch']['files_s']:,.0f} / {b['after_first_batch']['files_s']:,.0f} | "
                     f"{a['epoch']['files_s'] / b['epoch']['files_s']:.2f}x |")
        sh = s["shuffled"]
        lines.append(f"| ImageFolder, shuffled | {sh['epoch']['files_s']:,.0f} / "
                     f"{sh['after_first_batch']['files_s']:,.0f} | | |")
        mr = s["many_readers"]
        a64, a10 = mr["threads_64"]["files_s"], mr["threads_10"]["files_s"]
        lines += ["", f"Every file once, shuffled, 32 reader threads ({READER_LABELS[mr['reader']]}), a fresh "
                  f"mount each run: --threads 64 (the default) {a64:,.0f} files/s, --threads 10 (libfuse's "
                  f"own cap) {a10:,.0f} files/s: {a64 / a10:.2f}x"]
    if "far_server" in results:
        fs = results["far_server"]
        a64, a10 = fs["threads_64"]["files_s"], fs["threads_10"]["files_s"]
        lines += ["", f"The pack on a web server answering after 20 ms (tests/remote/static_server.py), mounted "
                  f"as http://, 1,024 files, shuffled, 32 reader threads ({READER_LABELS[fs['reader']]}), a fresh "
                  f"mount each run: --threads 64 (the default) {a64:,.0f} files/s, --threads 10 {a10:,.0f} "
                  f"files/s: {a64 / a10:.2f}x"]
    if "find_1m" in results:
        lines += ["", f"find | wc -l over 1,000,000 records: {results['find_1m']['seconds']:.2f} s "
                  f"(runs {', '.join(f'{x:.2f}' for x in results['find_1m']['runs'])})"]
    for name, why in skipped.items():
        lines.append(f"skipped {name}: {why}")
    return benchlib.report(args.out, results, "\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
