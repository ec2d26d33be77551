#!/usr/bin/python3
"""Fused decode + augmentation: ufspack's fast transforms against ImageFolder,
MyImageFolder's exact path, FFCV and DALI (issue 13, point 4).

    bash bench/install-peers.sh     # ffcv, DALI (+ nvimgcodec for its CPU decoder); optional
    PYTHONPATH=build/python /tmp/ufspack-peers-venv/bin/python bench/transform_bench.py \\
        [--work /tmp/transform-bench] [--out bench/results/transforms-local-warm/transforms]
    PYTHONPATH=build/python python3 bench/transform_bench.py --smoke --work DIR --out DIR/run

Datasets (prepared once under --work, reused while their parameters match):
  photos   the ~3,000 real photos of ../shared/data (train + validation, 2 classes)
  gen500   --gen500 generated 500x375 JPEGs (ImageNet's typical size), quality 90
  gen1000  --gen1000 generated 1000x750 JPEGs, quality 90
The generated images are crops and rescales of the photos with smooth noise and
film grain added, so that their entropy (file size) is a photo's, not a flat
colour's; without the photos, smooth noise plus random shapes.

Transforms: train (RandomResizedCrop(224), RandomHorizontalFlip, ToTensor,
Normalize), val (Resize(256), CenterCrop(224), ToTensor, Normalize), totensor
(ToTensor only: the exact path), decode (decoding only: PIL open+convert vs
ufspack's C++ TurboJPEG read_decode, the limit for everything above).

Rows, all in one run, in img/s and as ratios to ImageFolder (decode: to PIL):
  imagefolder     torchvision ImageFolder over the tree (PIL)
  exact           MyImageFolder(pack, transform): the default path
  fast            MyImageFolder(pack, transform, fast_transforms=True), __getitem__
  fast_batch1/2   the same through __getitems__(64 indices), decode_threads=1 / 2
  ffcv            FFCV 1.0.2 Loader, RandomResizedCrop / CenterCrop RGB image decoders
                  on a .beton written by RGBImageField(write_mode="jpg", quality 90):
                  FFCV re-encodes every image, so it decodes its own bytes
  dali            DALI CPU pipeline (device_id=None): readers.file, decoders.image_random_crop
                  / decoders.image, resize, crop_mirror_normalize
  pil_decode, ufspack_decode   decode-only rows
Modes: "1 core" (this process, torch.set_num_threads(1); FFCV num_workers=1,
DALI num_threads=1; fast_batch2 uses two decode threads) and "2 workers"
(DataLoader(num_workers=2, batch_size=64), which calls __getitems__ where the
dataset has it; FFCV num_workers=2; DALI num_threads=2).  The fast rows are
"not available" where MyImageFolder.__init__ has no fast_transforms parameter;
a row whose package is missing is skipped, saying which.

Timing: the container a row reads is read once just before the row (warm page
cache); each repeat discards --warmup samples, then times --samples samples,
with the loaders' prefetch queues still full at the end (the index list goes
on past what is timed).  Reported: the median of --repeat repeats (and min, max).
Writes <out>.csv and <out>.json and prints Markdown tables for docs/benchmarks.md.
"""

import collections
import inspect
import io
import json
import math
import os
import platform
import shutil
import statistics
import sys
import tarfile
import tempfile
import time
import traceback
from multiprocessing import Pool

import numpy as np

import benchlib

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED_TAR = os.path.join(HERE, "..", "..", "shared", "data", "cats_and_dogs_filtered.tar")
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
BATCH = 64
SEED = 0
TRANSFORMS = ("train", "val", "totensor", "decode")
MODES = ("1 core", "2 workers")
WORKERS = 2
CSV_FIELDS = ("dataset", "transform", "mode", "row", "status", "img_s", "img_s_min", "img_s_max",
              "ratio", "samples", "warmup", "repeats", "note")


# --- datasets ------------------------------------------------------------------------

def natural_image(seed, w, h, sources):
    """A w x h RGB image with a photo's detail: a random crop of a source photo
    rescaled to w x h, plus smooth noise and grain (no sources: sinusoids and
    random ellipses and rectangles, plus grain)."""
    from PIL import Image, ImageDraw

    rng = np.random.default_rng(seed)
    if sources:
        with Image.open(sources[seed % len(sources)]) as src:
            src = src.convert("RGB")
            sw, sh = src.size
            scale = rng.uniform(0.6, 1.0)
            cw = max(8, min(sw, int(round(min(sw, sh * w / h) * scale))))
            ch = max(8, min(sh, int(round(cw * h / w))))
            x0, y0 = int(rng.integers(0, sw - cw + 1)), int(rng.integers(0, sh - ch + 1))
            img = src.crop((x0, y0, x0 + cw, y0 + ch)).resize((w, h), Image.BICUBIC)
        if rng.random() < 0.5:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
    else:
        y, x = np.mgrid[0:h, 0:w].astype(np.float32)
        base = np.stack([np.sin((x * rng.random() + y * rng.random()) * 12 / w + rng.random() * 6)
                         for _ in range(3)], -1)
        img = Image.fromarray((127.5 + 90 * base).clip(0, 255).astype(np.uint8), "RGB")
        draw = ImageDraw.Draw(img)
        for _ in range(12):
            x0, y0 = rng.integers(0, w), rng.integers(0, h)
            box = (x0, y0, x0 + rng.integers(w // 10, w // 2), y0 + rng.integers(h // 10, h // 2))
            fill = tuple(int(v) for v in rng.integers(0, 256, 3))
            (draw.ellipse if rng.random() < 0.5 else draw.rectangle)(box, fill=fill)
    arr = np.asarray(img, dtype=np.float32)
    low = rng.normal(0, 12, (max(2, h // 32), max(2, w // 32), 3)).astype(np.float32)
    smooth = np.stack([np.asarray(Image.fromarray(low[..., c]).resize((w, h), Image.BICUBIC))
                       for c in range(3)], -1)
    grain = rng.normal(0, 13, (h, w, 1)).astype(np.float32) + rng.normal(0, 5, (h, w, 3)).astype(np.float32)
    return Image.fromarray((arr + smooth + grain).clip(0, 255).astype(np.uint8), "RGB")


_SOURCES = []  # the photos generate_tree's pool workers crop from


def _set_sources(sources):
    _SOURCES[:] = sources


def _write_generated(job):
    path, seed, w, h = job
    buf = io.BytesIO()
    natural_image(seed, w, h, _SOURCES).save(buf, "JPEG", quality=90)
    with open(path + ".tmp", "wb") as f:
        f.write(buf.getvalue())
    os.rename(path + ".tmp", path)


def generate_tree(tree, count, w, h, sources, classes=10):
    jobs = []
    for i in range(count):
        path = os.path.join(tree, f"class{i % classes:02d}", f"img{i:06d}.jpg")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        jobs.append((path, SEED * 1_000_003 + i, w, h))
    with Pool(os.cpu_count() or 1, initializer=_set_sources, initargs=(sources,)) as pool:
        pool.map(_write_generated, jobs, chunksize=16)


def unpack_photos(src, dest, count):
    """The photos of src (the shared tar, or its unpacked directory) as one
    ImageFolder tree dest/{cats,dogs}: train and validation together, the
    first count files by name."""
    if os.path.isfile(src):
        unpacked = os.path.join(os.path.dirname(dest), "photos-src")
        if not os.path.isdir(unpacked):
            with tarfile.open(src) as t:
                t.extractall(unpacked + ".tmp")
            os.rename(unpacked + ".tmp", unpacked)
        src = unpacked
    files = []
    for root, _, names in os.walk(src):
        files += [os.path.join(root, n) for n in names if n.lower().endswith((".jpg", ".jpeg"))]
    files.sort(key=os.path.basename)
    for f in files[:count]:
        cls = os.path.basename(os.path.dirname(f))
        os.makedirs(os.path.join(dest, cls), exist_ok=True)
        shutil.copyfile(f, os.path.join(dest, cls, os.path.basename(f)))


def tree_files(tree):
    from torchvision.datasets import ImageFolder

    return [p for p, _ in ImageFolder(tree, loader=lambda p: p).samples]


class _FfcvImages:
    """(HxWx3 uint8 array, label) per sample, for ffcv's DatasetWriter."""

    def __init__(self, samples):
        self.samples = samples

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        from PIL import Image

        path, label = self.samples[i]
        with Image.open(path) as img:
            return np.asarray(img.convert("RGB")), label


def build_ffcv(tree, path):
    from ffcv.fields import IntField, RGBImageField
    from ffcv.writer import DatasetWriter
    from torchvision.datasets import ImageFolder

    samples = ImageFolder(tree, loader=lambda p: p).samples
    writer = DatasetWriter(path + ".tmp", {"image": RGBImageField(write_mode="jpg", jpeg_quality=90),
                                           "label": IntField()}, num_workers=os.cpu_count() or 1)
    writer.from_indexed_dataset(_FfcvImages(samples))
    os.rename(path + ".tmp", path)


class Dataset:
    """One dataset under work/<name>/: tree/ (ImageFolder), pack/ (ufspack),
    data.beton (FFCV, where ffcv is installed), prepared.json."""

    def __init__(self, work, name, params, describe):
        self.name, self.params, self.describe = name, params, describe
        self.dir = os.path.join(work, name)
        self.tree, self.pack = os.path.join(self.dir, "tree"), os.path.join(self.dir, "pack")
        self.beton = os.path.join(self.dir, "data.beton")
        self.info = {}

    def prepare(self, make_tree):
        import ufspack

        meta = os.path.join(self.dir, "prepared.json")
        if os.path.exists(meta):
            info = json.load(open(meta))
            if info.get("params") == self.params:
                self.info = info
                self._ffcv()
                return
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        t0 = time.perf_counter()
        make_tree(self.tree)
        t1 = time.perf_counter()
        ufspack.build(self.tree, self.pack, progress=False)
        files = tree_files(self.tree)
        sizes = [os.path.getsize(f) for f in files]
        dims = collections.Counter(_jpeg_size(f) for f in files[:200])
        self.info = {"params": self.params, "images": len(files), "mean_kb": sum(sizes) / len(sizes) / 1000,
                     "median_kb": statistics.median(sizes) / 1000, "common_sizes": dims.most_common(3),
                     "tree_s": round(t1 - t0, 1), "pack_s": round(time.perf_counter() - t1, 2)}
        self._ffcv()
        with open(meta, "w") as f:
            json.dump(self.info, f, indent=1)

    def _ffcv(self):
        if _have("ffcv") and not os.path.exists(self.beton):
            t0 = time.perf_counter()
            build_ffcv(self.tree, self.beton)
            self.info["ffcv_beton_s"] = round(time.perf_counter() - t0, 1)
            self.info["ffcv_beton_mb"] = round(os.path.getsize(self.beton) / 1e6, 1)

    def warm(self, what):
        """Reads the container `what` ("tree", "pack", "beton") through the page cache."""
        if what == "tree":
            for f in tree_files(self.tree):
                with open(f, "rb") as fh:
                    fh.read()
            return
        base = self.pack if what == "pack" else self.beton
        for f in ([os.path.join(base, n) for n in os.listdir(base)] if os.path.isdir(base) else [base]):
            with open(f, "rb") as fh:
                while fh.read(1 << 24):
                    pass


def _jpeg_size(path):
    from PIL import Image

    with Image.open(path) as img:
        return "{}x{}".format(*img.size)


def _have(module):
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def make_datasets(args):
    sources = []
    photos_src = args.photos if args.photos else (SHARED_TAR if os.path.exists(SHARED_TAR) else None)
    out = []
    if args.smoke:
        out.append((Dataset(args.work, "tiny", {"n": args.smoke_images, "w": 160, "h": 120},
                            "generated 160x120 JPEGs"),
                    lambda tree: generate_tree(tree, args.smoke_images, 160, 120, [], classes=2)))
        return out
    if photos_src:
        photos = Dataset(args.work, "photos", {"n": args.photos_count, "src": os.path.abspath(photos_src)},
                         "real photos (cats_and_dogs_filtered)")
        out.append((photos, lambda tree: unpack_photos(photos_src, tree, args.photos_count)))
    else:
        print("photos: skipped: ../shared/data/cats_and_dogs_filtered.tar absent (--photos)", file=sys.stderr)

    def photo_files():
        if not sources and photos_src:
            photos.prepare(out[0][1])
            sources.extend(tree_files(photos.tree))
        return sources

    for name, n, (w, h) in (("gen500", args.gen500, (500, 375)), ("gen1000", args.gen1000, (1000, 750))):
        if n > 0:
            ds = Dataset(args.work, name, {"n": n, "w": w, "h": h, "from_photos": bool(photos_src)},
                         f"generated {w}x{h} JPEGs, quality 90")
            out.append((ds, lambda tree, n=n, w=w, h=h: generate_tree(tree, n, w, h, photo_files())))
    return out


# --- transforms ----------------------------------------------------------------------

def torchvision_transform(kind):
    from torchvision import transforms as T

    norm = T.Normalize(MEAN, STD)
    if kind == "train":
        return T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(), norm])
    if kind == "val":
        return T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(), norm])
    return T.ToTensor()


def fast_available():
    import ufspack

    if "fast_transforms" in inspect.signature(ufspack.MyImageFolder.__init__).parameters:
        return None
    return f"not available: MyImageFolder has no fast_transforms (ufspack {ufspack.__version__})"


# --- rows ----------------------------------------------------------------------------

class Skip(Exception):
    """A row that cannot run here; the message says why."""


class Row:
    """One loader configuration.  setup(ds, transform) -> a measure function
    taking (indices, warmup, n) and returning the seconds n samples took.
    container: what warm() reads first; requires: modules it needs."""

    requires = ()
    container = "pack"
    transforms = ("train", "val", "totensor")

    def __init__(self, name, label, mode):
        self.name, self.label, self.mode = name, label, mode
        self.note = ""

    def missing(self, transform):
        if transform not in self.transforms:
            return "n/a"
        for mod in self.requires:
            if not _have(mod):
                return f"skipped: {mod} not installed"
        return None


def _time_loop(fn, items, warmup):
    for x in items[:warmup]:
        fn(x)
    t0 = time.perf_counter()
    for x in items[warmup:]:
        fn(x)
    return time.perf_counter() - t0


def _chunks(indices, size=BATCH):
    return [indices[i:i + size] for i in range(0, len(indices), size)]


def _time_batches(it, warmup, n, count):
    """Consumes warmup samples from the batch iterator it, then times n more."""
    seen = 0
    for b in it:
        seen += count(b)
        if seen >= warmup:
            break
    t0, seen = time.perf_counter(), 0
    for b in it:
        seen += count(b)
        if seen >= n:
            return time.perf_counter() - t0
    raise RuntimeError(f"loader ended after {seen} of {n} timed samples")


class ImageFolderRow(Row):
    container = "tree"
    requires = ("torchvision",)

    def dataset(self, ds, transform):
        from torchvision.datasets import ImageFolder

        return ImageFolder(ds.tree, transform=torchvision_transform(transform))

    def setup(self, ds, transform):
        d = self.dataset(ds, transform)
        if self.mode == "1 core":
            return lambda ix, warmup, n: _time_loop(d.__getitem__, ix[:warmup + n], warmup)
        return _dataloader_measure(d)


class UfspackRow(Row):
    """MyImageFolder; fast: fast_transforms=True; batch_threads: __getitems__
    batches of 64 on that many decode threads."""

    requires = ("ufspack", "torchvision")

    def __init__(self, name, label, mode, fast=False, batch_threads=None):
        super().__init__(name, label, mode)
        self.fast, self.batch_threads = fast, batch_threads

    def missing(self, transform):
        why = super().missing(transform)
        if why is None and self.fast:
            why = fast_available()
        return why

    def setup(self, ds, transform):
        import ufspack

        kw = {"fast_transforms": True} if self.fast else {}
        if self.batch_threads:
            kw["decode_threads"] = self.batch_threads
        d = ufspack.MyImageFolder(ds.pack, transform=torchvision_transform(transform), **kw)
        if self.fast:
            self.note = "fast_plan: " + " ".join(repr(getattr(d, "fast_plan", None)).split())
        if self.mode != "1 core":
            return _dataloader_measure(d)
        if self.batch_threads:
            return lambda ix, warmup, n: _time_loop(d.__getitems__, _chunks(ix[:warmup + n]), warmup // BATCH)
        return lambda ix, warmup, n: _time_loop(d.__getitem__, ix[:warmup + n], warmup)


def _dataloader_measure(d):
    from torch.utils.data import DataLoader

    def measure(ix, warmup, n):
        # The indices go on past the timed samples, so the prefetch queue is
        # as full at the end as at the start.
        loader = DataLoader(d, batch_size=BATCH, sampler=ix, num_workers=WORKERS, prefetch_factor=2)
        it = iter(loader)
        try:
            return _time_batches(it, warmup, n, lambda b: len(b[1]))
        finally:
            it._shutdown_workers()
    return measure


class DecodeRow(Row):
    transforms = ("decode",)

    def __init__(self, name, label, mode, pil):
        super().__init__(name, label, mode)
        self.pil = pil
        self.container = "tree" if pil else "pack"
        self.requires = ("PIL",) if pil else ("ufspack",)

    def setup(self, ds, transform):
        if self.pil:
            from PIL import Image

            files = tree_files(ds.tree)

            def decode(i):
                with open(files[i], "rb") as f:  # torchvision's pil_loader
                    return Image.open(f).convert("RGB")
            return lambda ix, warmup, n: _time_loop(decode, ix[:warmup + n], warmup)
        from ufspack import _core

        reader = _core.Reader(os.fsencode(ds.pack))

        def read_decode(i):
            arr, _ = reader.read_decode(i)
            if arr is None:
                raise RuntimeError(f"record {i}: not decoded in C++")
        return lambda ix, warmup, n: _time_loop(read_decode, ix[:warmup + n], warmup)


class FfcvRow(Row):
    """FFCV's own Loader over data.beton, one Loader per configuration (its
    numba compilation happens once, outside the timing), one epoch per repeat."""

    requires = ("ffcv",)
    container = "beton"
    transforms = ("train", "val")

    def setup(self, ds, transform):
        self.note = "FFCV re-encoded the images (RGBImageField jpg, quality 90)"
        made = {}

        def measure(ix, warmup, n):
            key = tuple(ix)
            if key not in made:
                made.clear()
                made[key] = self._make(ds, transform, list(ix))
            it = iter(made[key])
            try:
                return _time_batches(it, warmup, n, lambda b: len(b[1]))
            finally:
                it.close()
        return measure

    def _make(self, ds, transform, indices):
        from ffcv.fields.decoders import CenterCropRGBImageDecoder, IntDecoder, RandomResizedCropRGBImageDecoder
        from ffcv.loader import Loader, OrderOption
        from ffcv.transforms import NormalizeImage, RandomHorizontalFlip, ToTensor, ToTorchImage

        mean, std = np.array(MEAN) * 255, np.array(STD) * 255
        if transform == "train":
            image = [RandomResizedCropRGBImageDecoder((224, 224)), RandomHorizontalFlip()]
        else:
            image = [CenterCropRGBImageDecoder((224, 224), ratio=224 / 256)]
        # Normalize before ToTensor: the CPU order (see ../shared/bench/README.md)
        image += [NormalizeImage(mean, std, np.float32), ToTensor(), ToTorchImage()]
        workers = 1 if self.mode == "1 core" else WORKERS
        return Loader(ds.beton, batch_size=BATCH, num_workers=workers, order=OrderOption.SEQUENTIAL,
                      indices=indices, os_cache=True, drop_last=False,
                      pipelines={"image": image, "label": [IntDecoder(), ToTensor()]})


class DaliRow(Row):
    """DALI's CPU pipeline (device_id=None) reading the tree with readers.file;
    one pipeline per configuration, repeats continue it."""

    requires = ("nvidia.dali",)
    container = "tree"

    def setup(self, ds, transform):
        from nvidia.dali import fn, pipeline_def, types

        threads = 1 if self.mode == "1 core" else WORKERS
        mean, std = [m * 255 for m in MEAN], [s * 255 for s in STD]

        @pipeline_def(batch_size=BATCH, num_threads=threads, device_id=None, seed=SEED, prefetch_queue_depth=2)
        def pipe():
            jpegs, labels = fn.readers.file(file_root=ds.tree, random_shuffle=True, seed=SEED, name="r")
            if transform == "train":
                img = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB)
                img = fn.resize(img, resize_x=224, resize_y=224)
                img = fn.crop_mirror_normalize(img, dtype=types.FLOAT, output_layout="CHW", mean=mean, std=std,
                                               mirror=fn.random.coin_flip())
            elif transform == "val":
                img = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
                img = fn.resize(img, resize_shorter=256)
                img = fn.crop_mirror_normalize(img, dtype=types.FLOAT, output_layout="CHW", crop=(224, 224),
                                               mean=mean, std=std)
            else:
                img = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
                img = fn.crop_mirror_normalize(img, dtype=types.FLOAT, output_layout="CHW", mean=[0.0], std=[255.0])
            return img, labels

        p = pipe()
        p.build()
        self.note = f"nvidia-dali {_version('nvidia-dali-cuda120')}, nvimgcodec {_version('nvidia-nvimgcodec-cu12')}"
        return lambda ix, warmup, n: self._measure(p, transform, warmup, n)

    @staticmethod
    def _measure(p, transform, warmup, n):
        import torch

        def batches():
            while True:
                images, labels = p.run()
                if transform != "totensor":  # one shape: a batch tensor, as DataLoader gives
                    images = torch.from_numpy(np.asarray(images.as_tensor()))
                yield images, labels

        return _time_batches(batches(), warmup, n, lambda b: len(b[1]))


def _version(dist):
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def all_rows():
    rows = [DecodeRow("pil_decode", "decode only: PIL open+convert", "1 core", pil=True),
            DecodeRow("ufspack_decode", "decode only: ufspack C++ read_decode", "1 core", pil=False)]
    for mode in MODES:
        rows += [ImageFolderRow("imagefolder", "ImageFolder (PIL)", mode),
                 UfspackRow("exact", "MyImageFolder exact", mode),
                 UfspackRow("fast", "MyImageFolder fast", mode, fast=True)]
        if mode == "1 core":
            rows += [UfspackRow("fast_batch1", "fast, __getitems__(64), 1 thread", mode, fast=True, batch_threads=1),
                     UfspackRow("fast_batch2", "fast, __getitems__(64), 2 threads", mode, fast=True, batch_threads=2)]
        rows += [FfcvRow("ffcv", "FFCV", mode), DaliRow("dali", "DALI CPU", mode)]
    for r in rows:
        if r.mode != "1 core":  # DataLoader workers: variable-size ToTensor outputs do not collate
            r.transforms = tuple(t for t in r.transforms if t in ("train", "val"))
    return rows


# --- running -------------------------------------------------------------------------

def index_order(size, count):
    """count indices: shuffled passes over the dataset (repeating where it is small)."""
    rng = np.random.default_rng(SEED)
    passes = [rng.permutation(size) for _ in range(math.ceil(count / size))]
    return [int(i) for i in np.concatenate(passes)[:count]]


def run_row(row, ds, transform, args):
    result = {"dataset": ds.name, "transform": transform, "mode": row.mode, "row": row.name, "label": row.label,
              "samples": args.samples, "warmup": args.warmup, "repeats": args.repeat, "note": ""}
    why = row.missing(transform)
    if why:
        return dict(result, status=why)
    try:
        measure = row.setup(ds, transform)
        tail = (WORKERS * 2 + 2) * BATCH  # more than any loader prefetches
        rates = []
        for _ in range(args.repeat):
            ds.warm(row.container)
            ix = index_order(ds.info["images"], args.warmup + args.samples + tail)
            rates.append(args.samples / measure(ix, args.warmup, args.samples))
        result.update(status="ok", img_s=statistics.median(rates), img_s_min=min(rates), img_s_max=max(rates))
    except Exception as e:  # a row's failure is reported, the run goes on
        traceback.print_exc(file=sys.stderr)
        result.update(status=f"error: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300])
    result["note"] = row.note
    result["load1"] = os.getloadavg()[0]  # other work on the machine skews the rates
    return result


def add_ratios(results):
    base = {(r["dataset"], r["transform"], r["mode"]): r.get("img_s") for r in results
            if r["row"] in ("imagefolder", "pil_decode") and r["status"] == "ok"}
    for r in results:
        b = base.get((r["dataset"], r["transform"], r["mode"]))
        if r["status"] == "ok" and b:
            r["ratio"] = r["img_s"] / b


def batch_scaling(results):
    """fast_batch2 / fast_batch1 per dataset and transform."""
    by = {(r["dataset"], r["transform"], r["row"]): r.get("img_s") for r in results if r["status"] == "ok"}
    return {f"{d}/{t}": by[(d, t, "fast_batch2")] / by[(d, t, "fast_batch1")]
            for (d, t, row) in by if row == "fast_batch1" and (d, t, "fast_batch2") in by}


# --- output --------------------------------------------------------------------------

def _cell(r):
    if r is None:
        return ""
    if r["status"] != "ok":
        s = r["status"]
        return "" if s == "n/a" else ("not available" if s.startswith("not available") else
                                         "skipped" if s.startswith("skipped") else "error")
    ratio = r.get("ratio")
    return f"{r['img_s']:,.0f}" + (f" ({ratio:.2f}x)" if ratio else "")


def markdown(results, datasets, scaling):
    """datasets: name -> prepared info with "describe", as in the JSON's meta."""
    cols = [(t, "1 core") for t in TRANSFORMS] + [(t, "2 workers") for t in ("train", "val")]
    heads = {"train": "train", "val": "val", "totensor": "ToTensor", "decode": "decode only"}
    lines = []
    for name, info in datasets.items():
        rows = [r for r in results if r["dataset"] == name]
        if not rows:
            continue
        lines += [f"#### {name}: {info.get('images', '?'):,} {info['describe']}, mean {info.get('mean_kb', 0):.0f} KB",
                  "", f"img/s, median of {rows[0]['repeats']}; in brackets: ratio to ImageFolder (decode only: to PIL)",
                  "", "| row | " + " | ".join(f"{heads[t]}, {m}" for t, m in cols) + " |",
                  "|---|" + "---:|" * len(cols)]
        for row, label in dict.fromkeys((r["row"], r["label"]) for r in rows):
            cells = {(r["transform"], r["mode"]): r for r in rows if r["row"] == row}
            if all(c["status"] == "n/a" for c in cells.values()):
                continue
            lines.append(f"| {label} | " + " | ".join(_cell(cells.get(c)) for c in cols) + " |")
        sc = {k.split("/")[1]: v for k, v in scaling.items() if k.startswith(name + "/")}
        if sc:
            lines += ["", "fast batched, decode_threads=2 / 1: " +
                      ", ".join(f"{t} {v:.2f}x" for t, v in sc.items())]
        lines.append("")
    loads = [r["load1"] for r in results if r.get("load1") is not None]
    if loads:  # rates fall with other work on the machine: say how busy it was
        lines += [f"1-minute load average after each row: {min(loads):.1f} to {max(loads):.1f} "
                  f"(median {statistics.median(loads):.1f})", ""]
    statuses = sorted({(r["row"], r["status"]) for r in results if r["status"] not in ("ok", "n/a")})
    if statuses:
        lines += ["Rows not measured:", ""] + [f"* {row}: {s}" for row, s in statuses] + [""]
    return "\n".join(lines)


def environment():
    import PIL
    import torch
    import torchvision

    import ufspack

    return {"python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count(),
            "torch": torch.__version__, "torchvision": torchvision.__version__, "pillow": PIL.__version__,
            "numpy": np.__version__, "ufspack": ufspack.__version__, "fast_transforms": fast_available() is None,
            "ffcv": _version("ffcv"), "nvidia-dali-cuda120": _version("nvidia-dali-cuda120"),
            "nvidia-nvimgcodec-cu12": _version("nvidia-nvimgcodec-cu12")}


def write_results(out, results, meta):
    import csv

    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out + ".json", "w") as f:
        json.dump({"meta": meta, "rows": results}, f, indent=1)
    with open(out + ".csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS, extrasaction="ignore")
        w.writeheader()
        for r in results:
            w.writerow({k: (f"{v:.1f}" if k.startswith("img_s") and isinstance(v, float) else
                            f"{v:.3f}" if k == "ratio" and isinstance(v, float) else v)
                        for k, v in r.items()})


def parse_args(argv):
    ap = benchlib.parser(__doc__)
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "transform-bench"),
                    help="datasets and containers, kept between runs")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "transforms-local-warm", "transforms"),
                    help="writes OUT.csv and OUT.json")
    ap.add_argument("--photos", help="the photos: cats_and_dogs_filtered.tar or its unpacked directory "
                    "(default ../shared/data/cats_and_dogs_filtered.tar)")
    ap.add_argument("--photos-count", type=int, default=3000)
    ap.add_argument("--gen500", type=int, default=1000, help="generated 500x375 images (0: none)")
    ap.add_argument("--gen1000", type=int, default=600, help="generated 1000x750 images (0: none)")
    ap.add_argument("--datasets", help="comma-separated subset of photos,gen500,gen1000")
    ap.add_argument("--transforms", default=",".join(TRANSFORMS))
    ap.add_argument("--rows", help="comma-separated subset of the rows (default all)")
    ap.add_argument("--samples", type=int, default=256, help="timed samples per repeat (a multiple of 64)")
    ap.add_argument("--warmup", type=int, default=64, help="samples before timing (a multiple of 64)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--smoke", action="store_true",
                    help="a tiny generated dataset, few samples, one repeat: checks the harness runs")
    ap.add_argument("--smoke-images", type=int, default=48)
    ap.add_argument("--table", metavar="JSON", help="only print the Markdown tables of a run's JSON "
                    "(also of an interrupted one: the files are rewritten after every row)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.samples, args.warmup, args.repeat = 64, 64, 1
    if args.samples % BATCH or args.warmup % BATCH:
        ap.error(f"--samples and --warmup must be multiples of {BATCH}")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.table:
        with open(args.table) as f:
            saved = json.load(f)
        print(markdown(saved["rows"], saved["meta"]["datasets"], batch_scaling(saved["rows"])))
        return 0
    import torch

    torch.set_num_threads(1)
    os.makedirs(args.work, exist_ok=True)
    load_start = os.getloadavg()
    datasets = []
    for ds, make_tree in make_datasets(args):
        if args.datasets and ds.name not in args.datasets.split(","):
            continue
        t0 = time.perf_counter()
        ds.prepare(make_tree)
        print(f"{ds.name}: {ds.info['images']} images, mean {ds.info['mean_kb']:.0f} KB, "
              f"{ds.info['common_sizes']} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
        datasets.append(ds)
    wanted = set(args.rows.split(",")) if args.rows else None
    rows = [r for r in all_rows() if wanted is None or r.name in wanted]
    results = []
    meta = {"args": vars(args), "environment": environment(), "batch_size": BATCH, "workers": WORKERS,
            "datasets": {ds.name: dict(ds.info, describe=ds.describe) for ds in datasets},
            "loadavg_start": load_start, "complete": False}
    for ds in datasets:
        for transform in args.transforms.split(","):
            for row in rows:
                t0 = time.perf_counter()
                r = run_row(row, ds, transform, args)
                results.append(r)
                if r["status"] != "n/a":
                    rate = f"{r['img_s']:.0f} img/s" if r["status"] == "ok" else r["status"]
                    print(f"{ds.name:8} {transform:8} {row.mode:9} {row.name:14} {rate} "
                          f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
                    add_ratios(results)
                    write_results(args.out, results, meta)  # an interrupted run keeps what it measured
    add_ratios(results)
    scaling = batch_scaling(results)
    meta.update(fast_batch2_over_batch1=scaling, loadavg_end=os.getloadavg(), complete=True)
    write_results(args.out, results, meta)
    print(markdown(results, meta["datasets"], scaling))
    return 0


if __name__ == "__main__":
    sys.exit(main())
