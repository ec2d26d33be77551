#!/usr/bin/python3
"""ufspack on object storage against the loaders people read S3 with (docs/benchmarks.md).

    VENV=$(bash scripts/s3-test-env.sh)            # SeaweedFS + boto3, the server's side
    sudo PYTHONPATH=build/python build/peers-venv/bin/python bench/remote_bench.py \\
        --dataset photos --delay-ms 0 --repeat 3 --out bench/results/remote-photos-0

One run starts one SeaweedFS S3 server (tests/remote/s3server.py, from the
venv of scripts/s3-test-env.sh), uploads the same records in every loader's
own layout, and measures each loader in a fresh subprocess, reading the
whole dataset twice (epoch 1, epoch 2), the median of --repeat runs:

  ufspack         Pack("s3://B/pack").read_many over shuffled batches of 256
                  indices, raw bytes, one process, no cache
  ufspack_cache   the same with ufspack.Cache(empty dir): epoch 1 fills it,
                  epoch 2 is served from it
  ufspack_block   Pack("s3://B/pack-shuffled") (built --layout shuffled) read
                  sample by sample (pack[i], as torch 1.13's DataLoader does)
                  in BlockSampler order (8 MiB blocks, window 16): one ranged
                  GET per block, fetched ahead in the background
  ufspack_block_dl2  the same through a DataLoader with 2 workers, batch 256,
                  BlockSampler(batch_size=256, num_workers=2): each worker
                  fetches only its own blocks
  ufspack_local   the same pack on local disk, page cache warm (the reference
                  for "epoch 2 with the cache")
  s3torch         s3torchconnector S3MapDataset.from_prefix over the loose
                  objects (the ImageFolder of S3), ds[i] in the same shuffled
                  order, one process
  s3torch_dl2     the same through a DataLoader with 2 workers, batch 256
  litdata         litdata.StreamingDataset("s3://B/litdata", shuffle=True),
                  chunks from optimize(chunk_bytes="64MB")
  streaming       streaming.StreamingDataset(remote="s3://B/mds", local=tmp,
                  shuffle=True), MDSWriter shards (64 MB, its default)
  webdataset      WebDataset(8 tar shards as presigned http:// URLs of the same
                  server, shardshuffle).shuffle(1000): curl streams each shard

Reported per loader: ttfb_s (constructing the dataset to holding the first
256 samples), epoch 1 and epoch 2 samples/s (each epoch's samples over its
whole time, start-up included for epoch 1), peak local disk (du of the
loader's cache/local directory, sampled every 0.2 s), and, from a separate
counting pass through the logging proxy of s3server.py (which adds ~2 ms per
request, so it is never timed), requests and response bytes per sample of
epoch 1 (listing and index requests included).  ufspack's own counters
(_core.remote_stats()) are reported beside them.

--delay-ms 0.5: the server runs in the network namespace of
../shared/bench/slowfs.sh (`link 0.5`), reached at 10.201.0.2 through socat
(s3server.py binds 127.0.0.1; socat in the namespace forwards); `slowfs.sh
down` at the end.  Counting needs the proxy, so --delay-ms > 0 skips the
counting pass (the counts do not depend on the delay).

--dataset photos: the 3,000 photos of ../shared/data; gen100k: 100,000
generated 256x256 JPEGs (bench/make_dataset.py, cached in --work); ufspack
reads all of them, the peers the first --peer-records of them (0: all).
--smoke (tests/python/test_bench_remote.py): a tiny generated tree, one run
through the proxy (timed and counted at once), in well under a minute.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SHARED = os.path.join(ROOT, "..", "shared")
SLOWFS = os.environ.get("SLOWFS", os.path.join(SHARED, "bench", "slowfs.sh"))
S3SERVER = os.path.join(ROOT, "tests", "remote", "s3server.py")
PY = sys.executable
BUCKET = "ufspack-bench"
BATCH = 256
UPLOAD_PART_MB = 64  # multipart part size of every upload, and the server's chunk size (Server)
SEED = 0
NS_ADDR = "10.201.0.2"
LOADERS = ["ufspack", "ufspack_block", "ufspack_block_dl2", "ufspack_cache", "ufspack_local", "s3torch",
           "s3torch_dl2", "litdata", "streaming", "webdataset"]
BLOCK_BYTES = 8 << 20  # BlockSampler's defaults
BLOCK_WINDOW = 16
PEER_MODULES = {"s3torch": "s3torchconnector", "s3torch_dl2": "s3torchconnector", "litdata": "litdata",
                "streaming": "streaming", "webdataset": "webdataset"}
IMG_EXTS = (".jpg", ".jpeg", ".png")

sys.path.insert(0, HERE)


def log(msg: str) -> None:
    print(f"[remote_bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def du(path: str) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for n in files:
            try:
                total += os.lstat(os.path.join(dirpath, n)).st_blocks * 512
            except OSError:
                pass
    return total


class DiskPeak:
    """Samples du(dirs) every 0.2 s in a thread; .peak is the largest seen."""

    def __init__(self, dirs: List[str]) -> None:
        self.dirs, self.peak, self._stop = dirs, 0, threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _sample(self) -> None:
        self.peak = max(self.peak, sum(du(d) for d in self.dirs if os.path.isdir(d)))

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self._sample()

    def stop(self) -> int:
        self._stop.set()
        self._t.join()
        self._sample()
        return self.peak


# --- the dataset and its containers ---------------------------------------------------

def tree_samples(tree: str) -> List[Tuple[str, int]]:
    """(relative path, label) in ImageFolder order."""
    classes = sorted(d for d in os.listdir(tree) if os.path.isdir(os.path.join(tree, d)))
    out = []
    for y, c in enumerate(classes):
        for n in sorted(os.listdir(os.path.join(tree, c))):
            if n.lower().endswith(IMG_EXTS):
                out.append((f"{c}/{n}", y))
    return out


def make_tree(args: argparse.Namespace, work: str) -> str:
    if args.smoke:
        tree = os.path.join(work, "tiny")
        subprocess.run([PY, os.path.join(HERE, "make_dataset.py"), tree, "--images", "96", "--classes", "3",
                        "--size", "64"], check=True, stdout=subprocess.DEVNULL)
        return tree
    if args.dataset == "photos":
        tree = os.path.join(work, "cats_and_dogs_filtered", "train")
        if not os.path.isdir(tree):
            with tarfile.open(os.path.join(SHARED, "data", "cats_and_dogs_filtered.tar")) as t:
                t.extractall(work)
            # one tree of 3,000: validation's images moved beside train's, names kept unique
            val = os.path.join(work, "cats_and_dogs_filtered", "validation")
            for c in os.listdir(val):
                for n in os.listdir(os.path.join(val, c)):
                    os.rename(os.path.join(val, c, n), os.path.join(tree, c, "val_" + n))
        return tree
    tree = args.gen_tree or os.path.join(work, "gen100k-tree")
    if len(tree_samples(tree) if os.path.isdir(tree) else []) < 100000:
        subprocess.run([PY, os.path.join(HERE, "make_dataset.py"), tree, "--images", "100000"], check=True)
    return tree


def prepare(tree: str, samples: List[Tuple[str, int]], peer_samples: List[Tuple[str, int]], out: str,
            loaders: List[str]) -> Dict[str, Any]:
    """Builds each container once into `out` (kept across runs: prepared.json)."""
    import e2e_peers  # the same writers as the end-to-end harness
    import ufspack

    stamp = os.path.join(out, "prepared.json")
    prepared: Dict[str, Any] = json.load(open(stamp)) if os.path.exists(stamp) else {}
    want = {"records": len(samples), "peer_records": len(peer_samples)}
    if {k: prepared.get(k) for k in want} != want:
        shutil.rmtree(out, ignore_errors=True)
        prepared = dict(want)
    os.makedirs(out, exist_ok=True)
    if "pack" not in prepared:
        t0 = time.perf_counter()
        ufspack.build(tree, os.path.join(out, "pack"), progress=False)
        prepared["pack"] = time.perf_counter() - t0
    if "pack_shuffled" not in prepared and any(n.startswith("ufspack_block") for n in loaders):
        t0 = time.perf_counter()
        ufspack.build(tree, os.path.join(out, "pack-shuffled"), layout="shuffled", progress=False)
        prepared["pack_shuffled"] = time.perf_counter() - t0
    peers = {PEER_MODULES[n] for n in loaders if n in PEER_MODULES}
    builders: Dict[str, Callable[[], None]] = {
        "litdata": lambda: e2e_peers._build_litdata(tree, os.path.join(out, "litdata"), peer_samples, out),
        "streaming": lambda: e2e_peers._build_streaming(tree, os.path.join(out, "mds"), peer_samples, out),
        "webdataset": lambda: e2e_peers._build_webdataset(tree, os.path.join(out, "wds"), peer_samples, out),
    }
    for name, build in builders.items():
        if name in peers and name not in prepared:
            log(f"prepare {name} ({len(peer_samples)} records)")
            t0 = time.perf_counter()
            build()
            prepared[name] = time.perf_counter() - t0
    json.dump(prepared, open(stamp, "w"))
    return prepared


# --- the server -------------------------------------------------------------------------

class Server:
    def __init__(self, args: argparse.Namespace, work: str) -> None:
        self.delay = args.delay_ms
        self.dir = os.path.join(work, "server")
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.venv = os.environ.get("UFSPACK_S3_VENV") or subprocess.run(
            ["bash", os.path.join(ROOT, "scripts", "s3-test-env.sh")], check=True, capture_output=True,
            text=True).stdout.strip().splitlines()[-1]
        cmd = [os.path.join(self.venv, "bin", "python"), S3SERVER, "start", "--kind", "seaweedfs",
               "--dir", self.dir, "--bucket", BUCKET]
        # Objects in chunks of up to 64 MB (weed's default is 4): SeaweedFS reads an object's whole
        # chunk list on every GET, which on gen100k's 2.4 GB pack in 4 MB chunks cost 2.4 ms of server
        # CPU per ranged GET (0.9 ms with 64 MB chunks; AWS S3 has no such cost).  Uploads use parts
        # of 64 MB to match (upload()).  Every loader reads from the same server.
        cmd += ["--chunk-mb", str(UPLOAD_PART_MB)]
        if args.dataset == "gen100k" and not args.smoke:
            # The default 32 volumes of 64 MB (2 GB) cannot hold gen100k's 2.4 GB pack and its peers.
            cmd += ["--volume-mb", "256", "--volumes", "64"]
        self.socat: Optional[subprocess.Popen] = None
        if self.delay > 0:
            if shutil.which("socat") is None:  # its failure in the namespace would only show as refusals
                raise RuntimeError("socat not found (apt-get install -y socat): it forwards the delayed "
                                   "link to the S3 server for --delay-ms > 0")
            subprocess.run(["bash", SLOWFS, "link", str(self.delay)], check=True, stdout=subprocess.DEVNULL)
            subprocess.run(["ip", "netns", "exec", "slowfs", "ip", "link", "set", "lo", "up"], check=True)
            info = json.loads(subprocess.run(["ip", "netns", "exec", "slowfs"] + cmd, check=True,
                                             capture_output=True, text=True).stdout)
            port = int(info["endpoint"].rsplit(":", 1)[1])
            self.socat = subprocess.Popen(
                ["ip", "netns", "exec", "slowfs", "socat",
                 f"TCP-LISTEN:{port},bind={NS_ADDR},fork,reuseaddr,nodelay,backlog=256",
                 f"TCP:127.0.0.1:{port},nodelay"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            info["endpoint"] = f"http://{NS_ADDR}:{port}"
            time.sleep(0.5)
        else:
            info = json.loads(subprocess.run(cmd + ["--proxy"], check=True, capture_output=True,
                                             text=True).stdout)
        self.info = info
        self.endpoint: str = info["endpoint"]
        self.proxy: Optional[str] = info.get("proxy")
        self.proxy_log: Optional[str] = info.get("proxy_log")

    def env(self, endpoint: str) -> Dict[str, str]:
        env = dict(os.environ)
        env.update(AWS_ACCESS_KEY_ID=self.info["access_key"], AWS_SECRET_ACCESS_KEY=self.info["secret_key"],
                   AWS_REGION=self.info["region"], AWS_DEFAULT_REGION=self.info["region"],
                   AWS_ENDPOINT_URL=endpoint, S3_ENDPOINT_URL=endpoint)
        env.pop("AWS_PROFILE", None)
        return env

    def client(self, endpoint: Optional[str] = None) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client("s3", endpoint_url=endpoint or self.endpoint, region_name=self.info["region"],
                            aws_access_key_id=self.info["access_key"],
                            aws_secret_access_key=self.info["secret_key"],
                            config=Config(s3={"addressing_style": "path"}, max_pool_connections=16))

    def stop(self) -> None:
        cmd = [os.path.join(self.venv, "bin", "python"), S3SERVER, "stop", "--dir", self.dir]
        if self.delay > 0:
            if self.socat is not None:
                self.socat.terminate()
                self.socat.wait(10)
            subprocess.run(["ip", "netns", "exec", "slowfs"] + cmd, timeout=60)
            subprocess.run(["timeout", "60", "bash", SLOWFS, "down"], stdout=subprocess.DEVNULL)
        else:
            subprocess.run(cmd, timeout=60)


def upload(server: Server, tree: str, peer_samples: List[Tuple[str, int]], out: str,
           loaders: List[str]) -> float:
    from concurrent.futures import ThreadPoolExecutor

    s3 = server.client()
    jobs = [(os.path.join(out, "pack", "data.ufs"), "pack/data.ufs"),
            (os.path.join(out, "pack", "index.ufs"), "pack/index.ufs")]  # data first, then its index
    if any(n.startswith("ufspack_block") for n in loaders):
        jobs[2:2] = [(os.path.join(out, "pack-shuffled", "data.ufs"), "pack-shuffled/data.ufs"),
                     (os.path.join(out, "pack-shuffled", "index.ufs"), "pack-shuffled/index.ufs")]
    if any(n.startswith("s3torch") for n in loaders):
        jobs += [(os.path.join(tree, n), f"loose/{n}") for n, _ in peer_samples]
    for loader, sub in (("litdata", "litdata"), ("streaming", "mds"), ("webdataset", "wds")):
        d = os.path.join(out, sub)
        if loader in loaders:
            jobs += [(os.path.join(d, f), f"{sub}/{f}") for f in sorted(os.listdir(d))
                     if os.path.isfile(os.path.join(d, f))]
    from boto3.s3.transfer import TransferConfig

    part = UPLOAD_PART_MB << 20
    cfg = TransferConfig(multipart_threshold=part, multipart_chunksize=part)

    def put(job: Tuple[str, str]) -> None:
        path, key = job
        if os.path.getsize(path) < part:  # one PUT: upload_file's transfer manager costs ~5 ms a file
            with open(path, "rb") as f:
                s3.put_object(Bucket=BUCKET, Key=key, Body=f.read())
        else:
            s3.upload_file(path, BUCKET, key, Config=cfg)

    t0 = time.perf_counter()
    for job in jobs:  # each pack's data.ufs before its index.ufs
        if job[1].endswith(".ufs"):
            put(job)
    jobs = [j for j in jobs if not j[1].endswith(".ufs")]
    with ThreadPoolExecutor(16) as ex:
        list(ex.map(put, jobs))
    return time.perf_counter() - t0


# --- one measurement, in a child process ------------------------------------------------

def _batches(order: List[int]) -> Iterator[List[int]]:
    for i in range(0, len(order), BATCH):
        yield order[i:i + BATCH]


def _order(n: int, epoch: int) -> List[int]:
    order = list(range(n))
    random.Random(SEED * 1000 + epoch).shuffle(order)
    return order


def _epochs(cfg: Dict[str, Any]) -> Tuple[int, ...]:
    return (1,) if cfg.get("one_epoch") or cfg.get("ttfb_only") else (1, 2)


def _mark_log(cfg: Dict[str, Any], res: Dict[str, Any], epoch: int) -> None:
    """Through the proxy: the log's length when epoch 1 ended, so that counts are of epoch 1."""
    if epoch == 1 and cfg.get("proxy_log"):
        time.sleep(0.3)  # the proxy logs a request after its response
        res["epoch1_log_lines"] = count_log(cfg["proxy_log"])


def _stats() -> Dict[str, int]:
    from ufspack import _core

    return dict(_core.remote_stats())


def _stat_delta(a: Dict[str, int], b: Dict[str, int]) -> Dict[str, int]:
    return {k: b[k] - a.get(k, 0) for k in b}


def _end_epoch(cfg: Dict[str, Any], res: Dict[str, Any], epoch: int, t0: float, got: int, nbytes: int,
               stats_since: Optional[Dict[str, int]] = None) -> None:
    """Puts epoch `epoch` into res: `got` samples of `nbytes` record bytes in all, timed from t0;
    with stats_since (_stats() when the epoch's clock started), ufspack's remote counters over
    the epoch; then _mark_log."""
    dt = time.perf_counter() - t0
    res[f"epoch{epoch}_samples_s"] = got / dt
    res[f"epoch{epoch}_s"] = dt
    res[f"epoch{epoch}_samples"] = got
    if stats_since is not None:
        res[f"epoch{epoch}_remote_stats"] = _stat_delta(stats_since, _stats())
    res["record_bytes"] = nbytes
    _mark_log(cfg, res, epoch)


def _timed_epochs(cfg: Dict[str, Any], res: Dict[str, Any], t0: float, s0: Dict[str, int],
                  batches_for: Callable[[int], Iterator[List[bytes]]],
                  after: Optional[Callable[[int], None]] = None) -> None:
    """Reads each epoch's batches (lists of sample bytes) into res: epoch 1
    timed from t0 (the dataset's construction included), epoch 2 from its
    start; the first batch's time as ttfb_s."""
    for epoch in _epochs(cfg):
        if epoch == 2:
            s0 = _stats()
            t0 = time.perf_counter()
        got = nbytes = 0
        for data in batches_for(epoch):
            got += len(data)
            nbytes += sum(len(x) for x in data)
            if epoch == 1 and "ttfb_s" not in res:
                res["ttfb_s"] = time.perf_counter() - t0
                if cfg.get("ttfb_only"):
                    break
        if cfg.get("ttfb_only"):
            break
        _end_epoch(cfg, res, epoch, t0, got, nbytes, stats_since=s0)
        if after is not None:
            after(epoch)


def run_ufspack_block(cfg: Dict[str, Any], loader: str) -> Dict[str, Any]:
    """ufspack_block / ufspack_block_dl2: BlockSampler order, sample by sample."""
    import ufspack

    res: Dict[str, Any] = {}
    s0 = _stats()
    t0 = time.perf_counter()
    pack = ufspack.Pack(f"s3://{BUCKET}/pack-shuffled", cache=False)
    workers = 2 if loader == "ufspack_block_dl2" else 0
    sampler = ufspack.BlockSampler(pack, block_bytes=BLOCK_BYTES, window=BLOCK_WINDOW, seed=SEED,
                                   batch_size=BATCH, num_workers=workers)
    if workers:
        import torch.utils.data as tud

        loader_ = tud.DataLoader(pack, batch_size=BATCH, sampler=sampler, num_workers=workers,
                                 collate_fn=_list_collate, persistent_workers=True)
    def batches_for(epoch: int) -> Iterator[List[bytes]]:
        sampler.set_epoch(epoch)
        return iter(loader_) if workers else _batches_of(pack, sampler)

    def after(epoch: int) -> None:
        if not workers:
            res[f"epoch{epoch}_block_stats"] = pack._handle.get().block_stats()

    _timed_epochs(cfg, res, t0, s0, batches_for, after)
    res["disk_peak_bytes"] = 0
    res["peak_rss_bytes"] = _peak_rss()
    return res


def _peak_rss() -> int:
    """This process's peak resident set (VmHWM: ru_maxrss would carry the
    harness's own peak over the exec)."""
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def _batches_of(pack: Any, sampler: Any) -> Iterator[List[bytes]]:
    """Batches of BATCH samples read one by one with pack[i] (torch 1.13's way)."""
    batch: List[bytes] = []
    for i in sampler:
        batch.append(pack[i])
        if len(batch) == BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def run_ufspack(cfg: Dict[str, Any], loader: str, tmp: str) -> Dict[str, Any]:
    import ufspack

    if loader.startswith("ufspack_block"):
        return run_ufspack_block(cfg, loader)
    res: Dict[str, Any] = {}
    if loader == "ufspack_local":
        url = cfg["local_pack"]
        with open(os.path.join(url, "data.ufs"), "rb") as f:  # page cache warm
            while f.read(1 << 22):
                pass
    else:
        url = f"s3://{BUCKET}/pack"
    cache_dir = os.path.join(tmp, "cache")
    watch = DiskPeak([cache_dir])
    s0 = _stats()
    t0 = time.perf_counter()
    pack = ufspack.Pack(url, cache=ufspack.Cache(cache_dir) if loader == "ufspack_cache" else False)
    n = len(pack)
    _timed_epochs(cfg, res, t0, s0, lambda epoch: (pack.read_many(b) for b in _batches(_order(n, epoch))))
    res["disk_peak_bytes"] = watch.stop()
    return res


def _s3torch_dataset(cfg: Dict[str, Any]) -> Any:
    from s3torchconnector import S3ClientConfig, S3MapDataset

    return S3MapDataset.from_prefix(f"s3://{BUCKET}/loose/", region=cfg["region"], endpoint=cfg["endpoint"],
                                    transform=_read_all, s3client_config=S3ClientConfig(force_path_style=True))


def _read_all(reader: Any) -> bytes:
    return reader.read()


def _list_collate(batch: List[bytes]) -> List[bytes]:
    return batch


def _iter_loader(loader: str, cfg: Dict[str, Any], tmp: str) -> Tuple[Callable[[int], Iterator[bytes]], List[str]]:
    """(epoch -> iterator of raw sample bytes, directories whose du is the local disk used)."""
    if loader == "s3torch":
        ds = _s3torch_dataset(cfg)
        return (lambda epoch: (ds[i] for i in _order(len(ds), epoch))), []
    if loader == "s3torch_dl2":
        import torch.utils.data as tud

        ds = _s3torch_dataset(cfg)

        def dl_epoch(epoch: int) -> Iterator[bytes]:
            dl = tud.DataLoader(ds, batch_size=BATCH, sampler=_order(len(ds), epoch), num_workers=2,
                                collate_fn=_list_collate)
            for b in dl:
                yield from b
        return dl_epoch, []
    if loader == "litdata":
        import litdata

        import e2e_peers

        e2e_peers._no_litdata_version_check()
        cache = os.path.join(tmp, "litdata-cache")
        ds = litdata.StreamingDataset(f"s3://{BUCKET}/litdata", cache_dir=cache, shuffle=True, seed=SEED)

        def lit_epoch(epoch: int) -> Iterator[bytes]:
            ds.set_epoch(epoch)
            return (s["image"] for s in ds)
        return lit_epoch, [cache]
    if loader == "streaming":
        from streaming import StreamingDataset
        from streaming.base.util import clean_stale_shared_memory

        clean_stale_shared_memory()
        local = os.path.join(tmp, "mds-local")
        # batch_size: 0.13 refuses to run without it ("Please pass `batch_size`")
        sds = StreamingDataset(remote=f"s3://{BUCKET}/mds", local=local, shuffle=True, shuffle_seed=SEED,
                               batch_size=BATCH)
        return (lambda epoch: (s["image"] for s in sds)), [local]
    if loader == "webdataset":
        import webdataset as wds

        urls = cfg["wds_urls"]

        def wds_epoch(epoch: int) -> Iterator[bytes]:
            pipe = wds.WebDataset(urls, shardshuffle=len(urls), seed=SEED + epoch, nodesplitter=None,
                                  empty_check=False).shuffle(1000)
            for s in pipe:
                yield next(v for k, v in s.items() if k.lower().endswith(("jpg", "jpeg", "png")))
        return wds_epoch, []
    raise ValueError(f"unknown loader {loader}")


def run_peer(cfg: Dict[str, Any], loader: str, tmp: str) -> Dict[str, Any]:
    res: Dict[str, Any] = {}
    t0 = time.perf_counter()
    epoch_iter, dirs = _iter_loader(loader, cfg, tmp)
    watch = DiskPeak(dirs)
    for epoch in _epochs(cfg):
        if epoch == 2:
            t0 = time.perf_counter()
        got = nbytes = 0
        for x in epoch_iter(epoch):
            got += 1
            nbytes += len(x)
            if epoch == 1 and got == BATCH:
                res["ttfb_s"] = time.perf_counter() - t0
                if cfg.get("ttfb_only"):
                    break
        if cfg.get("ttfb_only"):
            break
        _end_epoch(cfg, res, epoch, t0, got, nbytes)
    if "ttfb_s" not in res and "epoch1_s" in res:  # fewer samples than one batch
        res["ttfb_s"] = res["epoch1_s"]
    res["disk_peak_bytes"] = watch.stop()
    return res


def child(loader: str, cfg_path: str) -> int:
    cfg = json.load(open(cfg_path))
    tmp = cfg["tmp"]
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    # The loader's temporary files go to tmp too, removed below: MosaicML Streaming leaves two
    # lock files in gettempdir() per dataset.  (TMPDIR for its subprocesses; tempdir=None makes
    # this process's gettempdir() read it again.)
    os.environ["TMPDIR"] = tmp
    tempfile.tempdir = None
    try:
        res = run_ufspack(cfg, loader, tmp) if loader.startswith("ufspack") else run_peer(cfg, loader, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("RESULT " + json.dumps(res), flush=True)
    os._exit(0)  # a peer's download threads abandoned mid-epoch (--ttfb-only) must not hold the exit


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (the S3 server), 0 if it is gone."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(loader: str, cfg: Dict[str, Any], env: Dict[str, str], work: str, timeout: float,
            server_pid: int = 0) -> Dict[str, Any]:
    cfg = dict(cfg, tmp=os.path.join(work, f"tmp-{loader}"))
    path = os.path.join(work, f"cfg-{loader}.json")
    json.dump(cfg, open(path, "w"))
    env = dict(env, MALLOC_MMAP_THRESHOLD_="268435456", MALLOC_TRIM_THRESHOLD_="1073741824")
    ru0, srv0 = resource.getrusage(resource.RUSAGE_CHILDREN), cpu_seconds(server_pid)
    try:
        p = subprocess.run([PY, os.path.abspath(__file__), "_child", loader, path], env=env, capture_output=True,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    ru1, srv1 = resource.getrusage(resource.RUSAGE_CHILDREN), cpu_seconds(server_pid)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            # CPU seconds of the whole measurement (both epochs, start-up included): the
            # loader's process and its children, and the S3 server's
            return dict(json.loads(line[7:]), client_cpu_s=ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime,
                        server_cpu_s=srv1 - srv0)
    return {"error": (p.stderr.strip().splitlines() or ["no output"])[-1][:300], "stderr": p.stderr[-3000:]}


def count_log(path: str) -> int:
    with open(path) as f:
        return sum(1 for _ in f)


def read_log(path: str, skip: int) -> List[Dict[str, Any]]:
    with open(path) as f:
        return [json.loads(x) for i, x in enumerate(f) if i >= skip]


# --- the report -------------------------------------------------------------------------

def median_of(runs: List[Dict[str, Any]], key: str) -> Optional[float]:
    vals = [r[key] for r in runs if key in r]
    return statistics.median(vals) if vals else None


def summarize(results: Dict[str, Any]) -> Dict[str, Any]:
    rows = {}
    for name, r in results["loaders"].items():
        runs = [x for x in r["runs"] if "error" not in x]
        row: Dict[str, Any] = {"loader": name, "repeats": len(runs),
                               "error": next((x["error"] for x in r["runs"] if "error" in x), "")}
        for k in ("ttfb_s", "epoch1_samples_s", "epoch2_samples_s", "disk_peak_bytes", "client_cpu_s",
                  "server_cpu_s"):
            row[k] = median_of(runs, k)
            vals = [x[k] for x in runs if k in x]
            if vals:
                row[k + "_min"], row[k + "_max"] = min(vals), max(vals)
        row["samples"] = runs[0].get("epoch1_samples") if runs else None
        row["record_bytes"] = runs[0].get("record_bytes") if runs else None
        if runs and "epoch2_remote_stats" in runs[0]:
            s1, s2 = runs[0]["epoch1_remote_stats"], runs[0]["epoch2_remote_stats"]
            row["ufspack_requests_per_sample_e1"] = s1["requests"] / runs[0]["epoch1_samples"]
            row["ufspack_bytes_per_sample_e1"] = s1["bytes"] / runs[0]["epoch1_samples"]
            row["ufspack_requests_e2"] = s2["requests"]
        c = r.get("count")
        if c and "error" not in c:
            row["requests_per_sample"] = c["requests"] / c["samples"]
            row["bytes_per_sample"] = c["bytes"] / c["samples"]
            row["bytes_over_record"] = c["bytes"] / c["record_bytes"]
        rows[name] = row
    return rows


def ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return a / b if a and b else None


def fmt(x: Optional[float], spec: str = ",.0f") -> str:
    return "—" if x is None else format(x, spec)


def write_report(results: Dict[str, Any], out: str) -> None:
    rows = summarize(results)
    results["summary"] = rows
    u = rows.get("ufspack", {})
    ratios = {}
    for peer in ("s3torch", "s3torch_dl2", "litdata", "streaming", "webdataset"):
        if peer in rows:
            ratios[f"ufspack_e1_over_{peer}"] = ratio(u.get("epoch1_samples_s"), rows[peer].get("epoch1_samples_s"))
    if "ufspack_cache" in rows and "ufspack_local" in rows:
        ratios["cache_e2_over_local"] = ratio(rows["ufspack_cache"].get("epoch2_samples_s"),
                                              rows["ufspack_local"].get("epoch2_samples_s"))
    results["ratios"] = ratios
    os.makedirs(out, exist_ok=True)
    json.dump(results, open(os.path.join(out, "results.json"), "w"), indent=1)
    keys = sorted({k for r in rows.values() for k in r}, key=lambda k: (k != "loader", k))
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, keys)
        w.writeheader()
        w.writerows(rows.values())
    ue1 = u.get("epoch1_samples_s")
    lines = [f"{results['dataset']}: {results['records']:,} records to ufspack, {results['peer_records']:,} "
             f"to the peers; delay {results['delay_ms']} ms one way; medians of {results['repeat']}",
             "",
             "| reader | first batch (s) | epoch 1 samples/s | ufspack e1 / this | epoch 2 samples/s "
             "| requests/sample | bytes/sample / record | peak local disk (MB) |",
             "|---|---|---|---|---|---|---|---|"]
    for name, r in rows.items():
        if r.get("error") and not r.get("repeats"):
            lines.append(f"| {name} | error: {r['error'][:80]} | | | | | | |")
            continue
        lines.append("| {} | {} | {} | {} | {} | {} | {} | {} |".format(
            name, fmt(r.get("ttfb_s"), ".3f"), fmt(r.get("epoch1_samples_s")),
            fmt(ratio(ue1, r.get("epoch1_samples_s")), ".2f") + "x", fmt(r.get("epoch2_samples_s")),
            fmt(r.get("requests_per_sample"), ".3f"), fmt(r.get("bytes_over_record"), ".3f"),
            fmt((r.get("disk_peak_bytes") or 0) / 1e6, ",.1f")))
    lines += ["", "ratios: " + ", ".join(f"{k} {fmt(v, '.2f')}" for k, v in ratios.items())]
    open(os.path.join(out, "table.md"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


# --- main -------------------------------------------------------------------------------

def available(loaders: List[str]) -> Tuple[List[str], Dict[str, str]]:
    import importlib.util

    ok, missing = [], {}
    for n in loaders:
        mod = PEER_MODULES.get(n)
        if mod and importlib.util.find_spec(mod) is None:
            missing[n] = f"{mod} is not installed in {sys.prefix}"
        else:
            ok.append(n)
    return ok, missing


def main(argv: Optional[List[str]] = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["_child"]:
        return child(argv[1], argv[2])
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--dataset", choices=("photos", "gen100k"), default="photos")
    p.add_argument("--gen-tree", help="where the gen100k tree is (default WORK/gen100k-tree; generated if absent)")
    p.add_argument("--peer-records", type=int, default=0,
                   help="the peers read only the first N records of the shuffled dataset (0: all)")
    p.add_argument("--delay-ms", type=float, default=0.0, help="one-way delay of the slowfs link (0: loopback)")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--only", help="comma-separated loaders (default: all available): " + ",".join(LOADERS))
    p.add_argument("--no-count", action="store_true", help="skip the counting pass through the proxy")
    p.add_argument("--count", help="comma-separated loaders for the counting pass (default: every remote one)")
    p.add_argument("--ttfb-only", action="store_true",
                   help="measure only the time to the first batch (no epochs, no counting pass)")
    p.add_argument("--work", default="/tmp/ufspack-remote-bench")
    p.add_argument("--out", help="directory for results.json, results.csv, table.md")
    p.add_argument("--timeout", type=float, default=1200, help="seconds per measurement")
    p.add_argument("--smoke", action="store_true", help="tiny tree, one pass through the proxy (the test)")
    args = p.parse_args(argv)
    if args.smoke:
        args.delay_ms, args.repeat = 0.0, 1
    # --smoke leaves out the DataLoader variant (worker start-up) to stay under a minute
    want = args.only.split(",") if args.only else [n for n in LOADERS if not (args.smoke and n == "s3torch_dl2")]
    unknown = set(want) - set(LOADERS)
    if unknown:
        p.error(f"unknown loaders {sorted(unknown)}; known: {LOADERS}")
    loaders, missing = available(want)
    for n, why in missing.items():
        log(f"skip {n}: {why}")
    name = "smoke" if args.smoke else args.dataset
    work = os.path.join(args.work, name)
    if args.gen_tree and os.path.abspath(args.gen_tree) == os.path.abspath(work):
        p.error(f"--gen-tree {args.gen_tree} is the benchmark's own directory for {name}: move the tree")
    os.makedirs(work, exist_ok=True)
    tree = make_tree(args, args.work if not args.smoke else work)
    samples = tree_samples(tree)
    peer_samples = list(samples)
    if args.peer_records and args.peer_records < len(samples):
        pick = sorted(random.Random(SEED).sample(range(len(samples)), args.peer_records))
        peer_samples = [samples[i] for i in pick]
    log(f"{len(samples)} records ({len(peer_samples)} for the peers) in {tree}")
    prepared = prepare(tree, samples, peer_samples, os.path.join(work, "containers"), loaders)
    server = Server(args, work)
    results: Dict[str, Any] = {"dataset": name, "records": len(samples), "peer_records": len(peer_samples),
                               "delay_ms": args.delay_ms, "repeat": args.repeat, "batch": BATCH,
                               "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "prepare_s": prepared,
                               "skipped": missing, "loaders": {n: {"runs": []} for n in loaders}}
    try:
        log(f"server {server.endpoint}; uploading")
        results["upload_s"] = upload(server, tree, peer_samples, os.path.join(work, "containers"), loaders)
        log(f"uploaded in {results['upload_s']:.1f} s")

        def cfg_for(endpoint: str) -> Dict[str, Any]:
            s3 = server.client(endpoint)
            wds_urls = [s3.generate_presigned_url("get_object", Params={"Bucket": BUCKET, "Key": k["Key"]},
                                                  ExpiresIn=86400)
                        for k in s3.list_objects_v2(Bucket=BUCKET, Prefix="wds/").get("Contents", [])
                        if k["Key"].endswith(".tar")]
            return {"endpoint": endpoint, "region": server.info["region"], "wds_urls": wds_urls,
                    "local_pack": os.path.join(work, "containers", "pack")}

        timed_endpoint = server.proxy if args.smoke and server.proxy else server.endpoint
        cfg = dict(cfg_for(timed_endpoint), ttfb_only=args.ttfb_only)
        if args.smoke:
            cfg["proxy_log"] = server.proxy_log
        env = server.env(timed_endpoint)
        for rep in range(args.repeat):
            for n in loaders:
                log(f"run {rep + 1}/{args.repeat} {n}")
                before = count_log(server.proxy_log) if args.smoke and server.proxy_log else 0
                r = measure(n, cfg, env, work, args.timeout, server.info["pid"])
                if args.smoke and server.proxy_log and "error" not in r and n != "ufspack_local":
                    results["loaders"][n]["count"] = counted(server.proxy_log, before, r)
                results["loaders"][n]["runs"].append(r)
                log(f"  {n}: " + (r["error"] if "error" in r else
                                  f"ttfb {r['ttfb_s']:.3f} s, e1 {r.get('epoch1_samples_s', 0):,.0f}/s, "
                                  f"e2 {r.get('epoch2_samples_s', 0):,.0f}/s"))
        if not (args.smoke or args.no_count or args.ttfb_only) and server.proxy and server.proxy_log:
            pcfg, penv = cfg_for(server.proxy), server.env(server.proxy)
            for n in (args.count.split(",") if args.count else loaders):
                if n == "ufspack_local" or n not in loaders:
                    continue
                log(f"count {n} (through the proxy)")
                before = count_log(server.proxy_log)
                r = measure(n, dict(pcfg, one_epoch=True, proxy_log=server.proxy_log), penv, work, args.timeout)
                results["loaders"][n]["count"] = r if "error" in r else counted(server.proxy_log, before, r)
    finally:
        server.stop()
    results["finished"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    if args.out:
        write_report(results, args.out)
    else:
        write_report(results, os.path.join(work, "out"))
    return 0


def counted(proxy_log: str, before: int, r: Dict[str, Any]) -> Dict[str, Any]:
    """Requests and bytes of epoch 1 from the proxy log (entries after `before`)."""
    time.sleep(0.3)  # the proxy writes its entry after the response
    entries = read_log(proxy_log, before)[:r["epoch1_log_lines"] - before]
    return {"requests": len(entries), "bytes": sum(e.get("bytes") or 0 for e in entries),
            "samples": r["epoch1_samples"], "record_bytes": r["record_bytes"],
            "methods": sorted({e["method"] for e in entries})}


if __name__ == "__main__":
    sys.exit(main())
