"""This project's loaders and the Debian-packaged baselines of bench/e2e.py,
registered in bench/loaders.py.  Containers under the work directory:

    tree/        the ImageFolder tree (loose files; copied by `prepare`)
    pack/        ufspack build
    lmdb/        LMDB, one key per image (Caffe-style: key = index, value =
                 label + encoded bytes)
    shards/      tar shards in ImageFolder order (WebDataset layout)
    data.h5      HDF5: one variable-length uint8 record per image + labels

    imagefolder          torchvision ImageFolder, default PIL loader
    imagefolder_cv2      ImageFolder with a cv2.imread loader
    imagefolder_imdecode ImageFolder with np.fromfile + cv2.imdecode
    ufspack              ufspack.MyImageFolder, PIL output (default)
    ufspack_numpy        ufspack.MyImageFolder(output="numpy")
    ufspack_batch        MyImageFolder.__getitems__ (raw: bytes, decode: numpy):
                         a batch read (and decoded) on decode_threads threads,
                         several reads in flight
    lmdb                 LMDB, one txn.get per sample
    tar                  tar shards read sequentially (WebDataset-style; not
                         shuffled: shards are split across workers)
    hdf5                 h5py, one variable-length record per sample
"""

import os
import shutil
import struct
import subprocess
import tarfile

import loaders
from loaders import read_file, to_tensor_pil

TAR_SHARDS = 8


def cv2_rgb_tensor(arr):
    import cv2
    import torch

    rgb = cv2.cvtColor(arr, cv2.COLOR_BGR2RGB)
    return torch.from_numpy(rgb).permute(2, 0, 1).float().div(255)


def cv2_imread(path):
    import cv2

    return cv2_rgb_tensor(cv2.imread(path, cv2.IMREAD_COLOR))


def cv2_imdecode(path):
    import cv2
    import numpy as np

    return cv2_rgb_tensor(cv2.imdecode(np.fromfile(path, dtype=np.uint8), cv2.IMREAD_COLOR))


def numpy_to_tensor(arr):
    import torch

    return torch.from_numpy(arr).permute(2, 0, 1).float().div(255)


# --- ImageFolder ---------------------------------------------------------------------

class ImageFolderLoader(loaders.Loader):
    """Loose files; decode_with: None (PIL + ToTensor) or a path -> tensor loader."""

    def __init__(self, name, decode_with=None):
        super().__init__(name)
        self.decode_with = decode_with
        self.requires = ("torchvision",) + (("cv2",) if decode_with else ())

    def dataset(self, work, mode, n, batch_size):
        from torchvision.datasets import ImageFolder

        tree = os.path.join(work, "tree")
        if mode != "decode":
            return ImageFolder(tree, loader=read_file)
        if self.decode_with is None:
            from torchvision import transforms

            return ImageFolder(tree, transform=transforms.ToTensor())
        return ImageFolder(tree, loader=self.decode_with)


# --- ufspack -------------------------------------------------------------------------

class UfspackLoader(loaders.Loader):
    """MyImageFolder over pack/; decode_output: "pil" (+ToTensor) or "numpy"."""

    requires = ("ufspack",)
    build_key = "ufspack_build_s"

    def __init__(self, name, decode_output, batched=False):
        super().__init__(name)
        self.decode_output, self.batched = decode_output, batched

    def build(self, ctx):
        pack = os.path.join(ctx.work, "pack")
        shutil.rmtree(pack, ignore_errors=True)
        if ctx.ufspack_cli:
            subprocess.run([ctx.ufspack_cli, "build", ctx.tree, "-o", pack, "-q"], check=True,
                           stdout=subprocess.DEVNULL)
        else:
            import ufspack

            ufspack.build(ctx.tree, pack, progress=False)

    def dataset(self, work, mode, n, batch_size):
        import ufspack

        pack = os.path.join(work, "pack")
        if mode != "decode":
            return ufspack.MyImageFolder(pack, output="bytes")
        if self.decode_output == "numpy":
            return ufspack.MyImageFolder(pack, output="numpy", transform=numpy_to_tensor)
        from torchvision import transforms

        return ufspack.MyImageFolder(pack, transform=transforms.ToTensor())


# --- LMDB ----------------------------------------------------------------------------

def build_lmdb(tree, samples, path):
    """Caffe-style LMDB: key = sample index, value = label + file bytes."""
    import lmdb

    shutil.rmtree(path, ignore_errors=True)
    total = sum(os.path.getsize(os.path.join(tree, n)) for n, _ in samples)
    env = lmdb.open(path, map_size=max(1 << 30, total * 2), subdir=True, lock=True)
    with env.begin(write=True) as txn:
        for i, (name, label) in enumerate(samples):
            txn.put(b"%08d" % i, struct.pack("<i", label) + read_file(os.path.join(tree, name)))
    env.sync()
    env.close()


class LmdbDataset(loaders.LazyMapDataset):
    """One key per image, one txn.get per sample."""

    def open(self):
        import lmdb

        return lmdb.open(self.path, readonly=True, lock=False, readahead=False, meminit=False)

    def read(self, env, i):
        with env.begin(buffers=False) as txn:
            v = txn.get(b"%08d" % i)
        return v[4:], struct.unpack_from("<i", v)[0]


class LmdbLoader(loaders.Loader):
    requires = ("lmdb",)
    build_key = "lmdb_build_s"

    def build(self, ctx):
        build_lmdb(ctx.tree, ctx.samples, os.path.join(ctx.work, "lmdb"))

    def dataset(self, work, mode, n, batch_size):
        return LmdbDataset(os.path.join(work, "lmdb"), n, mode == "decode")


# --- tar shards ----------------------------------------------------------------------

def make_tar_dataset(shards, decode, limit):
    import torch

    class TarShards(torch.utils.data.IterableDataset):
        """WebDataset-style: shards split across workers, each read sequentially."""

        def __iter__(self):
            info = torch.utils.data.get_worker_info()
            wid, nw = (info.id, info.num_workers) if info else (0, 1)
            count = 0
            quota = limit // nw + (1 if wid < limit % nw else 0)
            for s in shards[wid::nw]:
                pending = {}
                with tarfile.open(s, "r|") as t:  # streaming: sequential reads
                    for m in t:
                        key, ext = m.name.rsplit(".", 1)
                        data = t.extractfile(m).read()
                        pending.setdefault(key, {})[ext] = data
                        if len(pending[key]) == 2:
                            d = pending.pop(key)
                            label = int(d.pop("cls"))
                            img = next(iter(d.values()))
                            yield (to_tensor_pil(img) if decode else img), label
                            count += 1
                            if count >= quota:
                                return

    return TarShards()


class TarLoader(loaders.Loader):
    build_key = "tar_shards_s"
    iterable = True

    def build(self, ctx):
        shards = os.path.join(ctx.work, "shards")
        shutil.rmtree(shards, ignore_errors=True)
        os.makedirs(shards)
        total = len(ctx.samples)
        per = (total + TAR_SHARDS - 1) // TAR_SHARDS
        for s in range(TAR_SHARDS):
            loaders.write_tar_shard(os.path.join(shards, f"shard-{s:04d}.tar"), ctx.tree, ctx.samples,
                                    range(s * per, min(total, (s + 1) * per)))

    def dataset(self, work, mode, n, batch_size):
        d = os.path.join(work, "shards")
        return make_tar_dataset(sorted(os.path.join(d, f) for f in os.listdir(d)), mode == "decode", n)


# --- HDF5 ----------------------------------------------------------------------------

class Hdf5Dataset(loaders.LazyMapDataset):
    def open(self):
        import h5py

        return h5py.File(self.path, "r")

    def read(self, h, i):
        return h["images"][i].tobytes(), int(h["labels"][i])


class Hdf5Loader(loaders.Loader):
    requires = ("h5py",)
    build_key = "hdf5_build_s"

    def build(self, ctx):
        import h5py
        import numpy as np

        with h5py.File(os.path.join(ctx.work, "data.h5"), "w") as h:
            dt = h5py.vlen_dtype(np.dtype("uint8"))
            images = h.create_dataset("images", (len(ctx.samples),), dtype=dt)
            for i, (name, _) in enumerate(ctx.samples):
                images[i] = np.frombuffer(read_file(os.path.join(ctx.tree, name)), dtype=np.uint8)
            h.create_dataset("labels", data=np.array([y for _, y in ctx.samples], dtype=np.int64))

    def dataset(self, work, mode, n, batch_size):
        return Hdf5Dataset(os.path.join(work, "data.h5"), n, mode == "decode")


for _loader in [
    ImageFolderLoader("imagefolder"),
    ImageFolderLoader("imagefolder_cv2", cv2_imread),
    ImageFolderLoader("imagefolder_imdecode", cv2_imdecode),
    UfspackLoader("ufspack", "pil"),
    UfspackLoader("ufspack_numpy", "numpy"),
    UfspackLoader("ufspack_batch", "numpy", batched=True),
    LmdbLoader("lmdb"),
    TarLoader("tar"),
    Hdf5Loader("hdf5"),
]:
    loaders.register(_loader)
