"""Peer data loaders for bench/e2e.py: the container formats of other libraries.

Each peer packs the same ImageFolder samples (encoded bytes + integer label)
into its own container under <work>/<name>/ and reads them back through the
library's own reader, the way its documentation recommends for PyTorch.

    webdataset      webdataset.ShardWriter -> tar shards; webdataset.WebDataset
                    (shard shuffle, split_by_worker, sample shuffle buffer)
    litdata         litdata.optimize -> chunks; litdata.StreamingDataset(shuffle=True)
    streaming       streaming.MDSWriter -> MDS shards; streaming.StreamingDataset(local=..., shuffle=True)
    ffcv            ffcv DatasetWriter (BytesField + IntField) -> .beton; ffcv.loader.Loader
                    (OrderOption.RANDOM), one Loader per DataLoader worker
    dali            NVIDIA DALI, CPU only (device_id=None): fn.readers.webdataset over the
                    webdataset peer's tar shards (+ DALI .idx files), one pipeline per worker
    mxnet_recordio  mxnet.recordio.MXIndexedRecordIO (.rec + .idx), map-style, random access
    tfrecord        tfrecord (pure Python, no TensorFlow): TFRecordWriter shards + index;
                    tfrecord_loader per shard, shards split across workers, shuffle buffer

Every peer is registered in bench/loaders.py (loaders.names(group="peer",
available=True) lists those whose package can be found here); nothing here
imports a peer's package before it is built or read.  Install them with
bench/install-peers.sh (a venv with --system-site-packages, so the Debian
torch/torchvision stay in use) and run bench/e2e.py with that venv's python.

Modes, as in bench/e2e.py: "raw" yields (bytes, label); "decode" yields
(float CHW tensor in [0,1] via PIL .convert("RGB") + to_tensor, label).  Every
peer decodes with the same PIL code, so only reading differs.

Iterable peers (all but mxnet_recordio) split their work across DataLoader
workers and stop after n samples in total (n is the limit to read, not the
dataset size).  Map-style peers take n = the dataset size and open their files
lazily in each process (fork or spawn).
"""

import functools
import json
import os
import random
import shutil
from itertools import islice

import loaders
from loaders import ext, read_file, to_tensor_pil

try:
    from torch.utils.data import IterableDataset as _IterableBase
except ImportError:  # keeps the module importable without torch
    _IterableBase = object

PEER_SHARDS = 8          # tar / tfrecord shards (like TAR_SHARDS in e2e_own.py)
SHUFFLE_BUFFER = 1000    # sample shuffle buffer of the streaming readers (webdataset, dali, tfrecord)
SEED = 0
IMG_EXTS = "jpg;jpeg;png;ppm;bmp;pgm;tif;tiff;webp"  # WebDataset / DALI alternatives for the image member


# --- helpers -------------------------------------------------------------------------

def _identity(x):
    return x


def _worker():
    import torch

    info = torch.utils.data.get_worker_info()
    return (info.id, info.num_workers) if info else (0, 1)


def _span(n, wid, nw):
    """[lo, hi) of worker wid's share of n items (shares differ by at most one)."""
    return wid * n // nw, (wid + 1) * n // nw


def _alloc(n, caps):
    """Splits n samples over workers with capacities caps, as evenly as they allow."""
    n = min(n, sum(caps))
    quotas = [0] * len(caps)
    for j, i in enumerate(sorted(range(len(caps)), key=lambda i: (caps[i], i))):
        left = len(caps) - j
        quotas[i] = min(caps[i], -(-n // left))
        n -= quotas[i]
    return quotas


def _stride_caps(sizes, nw):
    """Samples per worker when shards are dealt out as shards[wid::nw]."""
    return [sum(sizes[w::nw]) for w in range(nw)]


def _even_caps(total, nw):
    """Samples per worker when the reader splits the samples evenly (DALI shards)."""
    return [hi - lo for lo, hi in (_span(total, w, nw) for w in range(nw))]


class PeerIterable(_IterableBase):
    """Runs make_iter(wid, nw) in each DataLoader worker (or in-process) and
    stops after that worker's quota, so that the workers yield n samples in all.

    caps(nw): samples each worker can yield (its shards), where known; else
    the quota is an even split of n, or no limit when n >= total."""

    def __init__(self, make_iter, n, caps=None, total=None):
        self.make_iter, self.n, self.caps, self.total = make_iter, n, caps, total

    def __iter__(self):
        wid, nw = _worker()
        if self.caps is not None:
            quota = _alloc(self.n, self.caps(nw))[wid]
        elif self.total is not None and self.n >= self.total:
            quota = None
        else:
            lo, hi = _span(self.n, wid, nw)
            quota = hi - lo
        if quota != 0:
            yield from islice(self.make_iter(wid, nw), quota)


def _import_mxnet():
    # mxnet 1.9.1 (the last release) still uses np.bool, removed in numpy 1.24.
    import warnings

    import numpy as np

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if not hasattr(np, "bool"):
            np.bool = bool
        import mxnet  # noqa: F401
        from mxnet import recordio
    return recordio


def _no_litdata_version_check():
    # litdata asks pypi.org for a newer version (HTTP, 30 s timeout) in every
    # StreamingDataset() and optimize(): not part of reading, and offline it stalls.
    import litdata.processing.functions as lf
    import litdata.streaming.dataset as ld

    for m in (ld, lf):
        if hasattr(m, "_check_version_and_prompt_upgrade"):
            m._check_version_and_prompt_upgrade = lambda *a, **k: None


# --- writers -------------------------------------------------------------------------

def _shard_spans(total):
    k = max(1, min(PEER_SHARDS, total))
    return [_span(total, s, k) for s in range(k)]  # sizes differ by at most one


def _write_meta(out, total, sizes=None):
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump({"samples": total, "shard_sizes": sizes}, f)


def _read_meta(out):
    with open(os.path.join(out, "meta.json")) as f:
        return json.load(f)


def _build_webdataset(tree, out, samples, work):
    import webdataset as wds

    os.makedirs(out, exist_ok=True)
    spans = _shard_spans(len(samples))
    for s, (lo, hi) in enumerate(spans):
        with wds.TarWriter(os.path.join(out, f"shard-{s:06d}.tar")) as sink:
            for i in range(lo, hi):
                name, label = samples[i]
                sink.write({"__key__": f"{i:08d}", ext(name): read_file(os.path.join(tree, name)), "cls": label})
    _write_meta(out, len(samples), [hi - lo for lo, hi in spans])


def _litdata_item(item):
    path, label = item
    return {"image": read_file(path), "label": label}


def _build_litdata(tree, out, samples, work):
    import inspect

    import litdata

    _no_litdata_version_check()
    cache = os.path.join(os.path.dirname(out), ".litdata-cache")
    saved = {k: os.environ.get(k) for k in ("DATA_OPTIMIZER_CACHE_FOLDER", "DATA_OPTIMIZER_DATA_CACHE_FOLDER")}
    # optimize() stages chunks in $TMPDIR/chunks and $TMPDIR/data unless told otherwise
    os.environ["DATA_OPTIMIZER_CACHE_FOLDER"] = os.path.join(cache, "chunks")
    os.environ["DATA_OPTIMIZER_DATA_CACHE_FOLDER"] = os.path.join(cache, "data")
    kw = {}
    if "start_method" in inspect.signature(litdata.optimize).parameters:
        # the default, spawn, is set process-wide (multiprocessing.set_start_method(force=True))
        kw["start_method"] = "fork"
    try:
        litdata.optimize(fn=_litdata_item, inputs=[(os.path.join(tree, n), y) for n, y in samples],
                         output_dir=out, chunk_bytes="64MB", num_workers=os.cpu_count() or 1, **kw)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(cache, ignore_errors=True)


def _build_streaming(tree, out, samples, work):
    from streaming import MDSWriter

    with MDSWriter(out=out, columns={"image": "bytes", "label": "int"}) as w:
        for name, label in samples:
            w.write({"image": read_file(os.path.join(tree, name)), "label": label})


class _FfcvSource:
    def __init__(self, tree, samples):
        self.tree, self.samples = tree, samples

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        import numpy as np

        name, label = self.samples[i]
        data = read_file(os.path.join(self.tree, name))
        return np.frombuffer(data, dtype=np.uint8), label, len(data)


def _build_ffcv(tree, out, samples, work):
    from ffcv.fields import BytesField, IntField
    from ffcv.writer import DatasetWriter

    os.makedirs(out, exist_ok=True)
    # BytesField decodes to a zero-padded row: the size field gives the length back.
    writer = DatasetWriter(os.path.join(out, "data.beton"),
                           {"image": BytesField(), "label": IntField(), "size": IntField()},
                           num_workers=os.cpu_count() or 1)
    writer.from_indexed_dataset(_FfcvSource(tree, samples))


def _build_dali(tree, out, samples, work):
    from wds2idx import IndexCreator  # ships with nvidia-dali

    shards = os.path.join(work, "webdataset")
    if not os.path.exists(os.path.join(shards, "meta.json")):
        # webdataset peer not built: write the same shards with tarfile
        os.makedirs(shards, exist_ok=True)
        spans = _shard_spans(len(samples))
        for s, (lo, hi) in enumerate(spans):
            loaders.write_tar_shard(os.path.join(shards, f"shard-{s:06d}.tar"), tree, samples, range(lo, hi))
        _write_meta(shards, len(samples), [hi - lo for lo, hi in spans])
    os.makedirs(out, exist_ok=True)
    for s in _shards(shards, ".tar"):
        ic = IndexCreator(s, os.path.join(out, os.path.basename(s)[:-4] + ".idx"), verbose=False)
        ic.create_index()
        ic.close()
    _write_meta(out, len(samples))


def _build_mxnet_recordio(tree, out, samples, work):
    recordio = _import_mxnet()
    os.makedirs(out, exist_ok=True)
    w = recordio.MXIndexedRecordIO(os.path.join(out, "data.idx"), os.path.join(out, "data.rec"), "w")
    for i, (name, label) in enumerate(samples):
        w.write_idx(i, recordio.pack(recordio.IRHeader(0, float(label), i, 0), read_file(os.path.join(tree, name))))
    w.close()


def _build_tfrecord(tree, out, samples, work):
    from tfrecord.tools.tfrecord2idx import create_index
    from tfrecord.writer import TFRecordWriter

    os.makedirs(out, exist_ok=True)
    spans = _shard_spans(len(samples))
    for s, (lo, hi) in enumerate(spans):
        base = os.path.join(out, f"shard-{s:06d}")
        w = TFRecordWriter(base + ".tfrecord")
        for name, label in samples[lo:hi]:
            w.write({"image": (read_file(os.path.join(tree, name)), "byte"), "label": (label, "int")})
        w.close()
        create_index(base + ".tfrecord", base + ".index")
    _write_meta(out, len(samples), [hi - lo for lo, hi in spans])


# --- readers -------------------------------------------------------------------------

def _shards(d, suffix):
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(suffix))


def _wds_iter(pipeline, wid, nw):
    return iter(pipeline)  # WebDataset splits shards by worker itself


def _litdata_iter(ds, decode, wid, nw):
    for s in ds:  # StreamingDataset splits chunks/intervals across workers itself
        yield (to_tensor_pil(s["image"]) if decode else s["image"]), int(s["label"])


def _streaming_iter(ds, decode, wid, nw):
    for s in ds:  # StreamingDataset partitions samples across workers itself
        yield (to_tensor_pil(s["image"]) if decode else s["image"]), int(s["label"])


def _ffcv_iter(path, decode, n, batch_size, wid, nw):
    import numpy as np
    from ffcv.fields.bytes import BytesDecoder
    from ffcv.fields.decoders import IntDecoder
    from ffcv.loader import Loader, OrderOption
    from ffcv.reader import Reader

    total = int(Reader(path).num_samples)  # numpy.uint64: permutation() of it gives floats
    order = np.random.default_rng(SEED).permutation(total)[:n]
    lo, hi = _span(len(order), wid, nw)
    loader = Loader(path, batch_size=batch_size, num_workers=1, order=OrderOption.RANDOM, seed=SEED + wid,
                    indices=order[lo:hi].tolist(), drop_last=False,
                    pipelines={"image": [BytesDecoder()], "label": [IntDecoder()], "size": [IntDecoder()]})
    for images, labels, sizes in loader:
        for img, y, size in zip(images, labels, sizes):
            data = img[:int(size[0])].tobytes()
            yield (to_tensor_pil(data) if decode else data), int(y[0])


def _dali_iter(shards, idx_dir, decode, batch_size, wid, nw):
    import numpy as np
    from nvidia.dali import Pipeline, fn

    idx = [os.path.join(idx_dir, os.path.basename(s)[:-4] + ".idx") for s in shards]
    pipe = Pipeline(batch_size=batch_size, num_threads=1, device_id=None, seed=SEED + wid, prefetch_queue_depth=2)
    with pipe:
        img, cls = fn.readers.webdataset(paths=shards, index_paths=idx, ext=[IMG_EXTS, "cls"],
                                         missing_component_behavior="error", random_shuffle=True,
                                         initial_fill=SHUFFLE_BUFFER, shard_id=wid, num_shards=nw, name="r")
        pipe.set_outputs(img, cls)
    pipe.build()
    while True:
        images, labels = pipe.run()
        for j in range(len(images)):
            data = np.asarray(images[j]).tobytes()
            yield (to_tensor_pil(data) if decode else data), int(np.asarray(labels[j]).tobytes())


def _tfrecord_iter(shards, decode, wid, nw):
    from tfrecord.iterator_utils import shuffle_iterator
    from tfrecord.reader import tfrecord_loader

    rng = random.Random(SEED + wid)
    mine = shards[wid::nw]
    rng.shuffle(mine)

    def records():
        for s in mine:
            # No index: read each shard from its start (with an index and no
            # shard argument tfrecord starts at a random record, and it cannot
            # load the index of a one-record shard).
            yield from tfrecord_loader(s, None, {"image": "byte", "label": "int"})

    for r in shuffle_iterator(records(), SHUFFLE_BUFFER):
        data = bytes(r["image"])
        yield (to_tensor_pil(data) if decode else data), int(r["label"][0])


class MxRecordDataset(loaders.LazyMapDataset):
    """MXIndexedRecordIO, random access by index."""

    def open(self):
        recordio = _import_mxnet()
        return recordio, recordio.MXIndexedRecordIO(os.path.join(self.path, "data.idx"),
                                                     os.path.join(self.path, "data.rec"), "r")

    def read(self, handle, i):
        recordio, rec = handle
        header, data = recordio.unpack(rec.read_idx(i))
        return data, int(header.label)


# --- openers: (dir, decode, n, batch_size, work) -> dataset ------------------------------

def _open_webdataset(d, decode, n, batch_size, work):
    import webdataset as wds

    shards = _shards(d, ".tar")
    pipeline = wds.WebDataset(shards, shardshuffle=len(shards), seed=SEED, nodesplitter=None,
                              workersplitter=wds.split_by_worker, empty_check=False)
    pipeline = pipeline.shuffle(SHUFFLE_BUFFER).to_tuple(IMG_EXTS, "cls")
    pipeline = pipeline.map_tuple(to_tensor_pil if decode else _identity, int)
    sizes = _read_meta(d)["shard_sizes"]
    return PeerIterable(functools.partial(_wds_iter, pipeline), n, functools.partial(_stride_caps, sizes))


def _open_litdata(d, decode, n, batch_size, work):
    import litdata

    _no_litdata_version_check()
    ds = litdata.StreamingDataset(d, shuffle=True, seed=SEED)
    return PeerIterable(functools.partial(_litdata_iter, ds, decode), n, total=len(ds))


def _open_streaming(d, decode, n, batch_size, work):
    from streaming import StreamingDataset
    from streaming.base.util import clean_stale_shared_memory

    clean_stale_shared_memory()  # left over by a killed run, it makes the next one fail
    ds = StreamingDataset(local=d, remote=None, shuffle=True, shuffle_seed=SEED, batch_size=batch_size)
    return PeerIterable(functools.partial(_streaming_iter, ds, decode), n, total=len(ds))


def _open_ffcv(d, decode, n, batch_size, work):
    import ffcv.reader

    path = os.path.join(d, "data.beton")
    total = int(ffcv.reader.Reader(path).num_samples)
    return PeerIterable(functools.partial(_ffcv_iter, path, decode, n, batch_size), n, total=total)


def _open_dali(d, decode, n, batch_size, work):
    shards = _shards(os.path.join(work, "webdataset"), ".tar")
    total = _read_meta(d)["samples"]
    return PeerIterable(functools.partial(_dali_iter, shards, d, decode, batch_size), n,
                        functools.partial(_even_caps, total))


def _open_mxnet_recordio(d, decode, n, batch_size, work):
    return MxRecordDataset(d, n, decode)


def _open_tfrecord(d, decode, n, batch_size, work):
    sizes = _read_meta(d)["shard_sizes"]
    return PeerIterable(functools.partial(_tfrecord_iter, _shards(d, ".tfrecord"), decode), n,
                        functools.partial(_stride_caps, sizes))


# --- registration --------------------------------------------------------------------

class PeerLoader(loaders.Loader):
    """A peer's container under <work>/<name>/, written by write(tree, out,
    samples, work) and read back by open(out, decode, n, batch_size, work)."""

    group = "peer"

    def __init__(self, name, module, write, open, preload=(), iterable=True):
        super().__init__(name)
        self.requires = (module,)
        self.preload_modules = (module,) + tuple(preload)
        self.build_key = f"{name}_build_s"
        self.write, self.open, self.iterable = write, open, iterable

    def build(self, ctx):
        out = os.path.join(ctx.work, self.name)
        shutil.rmtree(out, ignore_errors=True)
        self.write(ctx.tree, out, ctx.samples, ctx.work)

    def dataset(self, work, mode, n, batch_size):
        return self.open(os.path.join(work, self.name), mode == "decode", n, batch_size, work)


class MxnetLoader(PeerLoader):
    def preload(self):
        _import_mxnet()  # not a plain import: see there


for _peer in [
    PeerLoader("webdataset", "webdataset", _build_webdataset, _open_webdataset),
    PeerLoader("litdata", "litdata", _build_litdata, _open_litdata),
    PeerLoader("streaming", "streaming", _build_streaming, _open_streaming, ["streaming.base.util"]),
    PeerLoader("ffcv", "ffcv", _build_ffcv, _open_ffcv,
               ["ffcv.loader", "ffcv.reader", "ffcv.fields.bytes", "ffcv.fields.decoders"]),
    PeerLoader("dali", "nvidia.dali", _build_dali, _open_dali, ["nvidia.dali.fn"]),
    MxnetLoader("mxnet_recordio", "mxnet", _build_mxnet_recordio, _open_mxnet_recordio, iterable=False),
    PeerLoader("tfrecord", "tfrecord", _build_tfrecord, _open_tfrecord, ["tfrecord.reader", "tfrecord.iterator_utils"]),
]:
    loaders.register(_peer)
