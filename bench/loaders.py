"""The one registry of the end-to-end benchmark's loaders (bench/e2e.py).

Every loader, this project's and the peers', is an adapter with the same
interface, registered by name.  The adapters live in their providers:

    bench/e2e_own.py     ImageFolder variants, ufspack, LMDB, tar, HDF5
    bench/e2e_peers.py   WebDataset, LitData, MosaicML Streaming, FFCV, DALI,
                         MXNet RecordIO, TFRecord

The providers are imported on the first lookup, not with this module, and
none of them imports an optional package (a peer's library, lmdb, h5py, cv2)
before a loader is built or opened: listing the loaders needs none of them.

    get(name) -> Loader                 UnknownLoaderError lists the registered names
    names(group=None, available=False)  registration order; group "own" or "peer"
    select(spec) -> [Loader]            "all" or comma-separated names

A Loader:
    name, group         registry key; "own" or "peer"
    requires            import names of the optional packages it needs
    missing()           None, or why it cannot run ("skipped: lmdb not installed")
    build_key           its build time's key in prepared.json ("lmdb_build_s");
                        None: it reads the tree itself, nothing to build.  Loaders
                        sharing a container share the key and are built once.
    build(ctx)          writes its container under ctx.work from ctx.tree
    iterable            True: a streaming dataset yielding n samples over all
                        DataLoader workers; False: map-style, the harness picks indices
    batched             read through __getitems__(batch of indices)
    preload()           imports what dataset() needs, so that timing start-up
                        measures opening the dataset, not importing a library
    dataset(work, mode, n, batch_size)
                        mode "raw" yields (bytes, label), "decode" (float CHW
                        tensor in [0,1], label); n: samples to yield (iterable)
                        or the dataset size (map-style)
"""

import collections
import importlib
import importlib.util
import io
import os
import sys
import tarfile

PROVIDERS = ("e2e_own", "e2e_peers")

# What a build step gets: the ImageFolder tree, the work directory the
# containers go under, the samples as (path relative to tree, label) in
# ImageFolder order, and the ufspack CLI (None: ufspack.build).
BuildContext = collections.namedtuple("BuildContext", "tree work samples ufspack_cli")


class UnknownLoaderError(LookupError):
    pass


def have(module):
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


class Loader:
    """Base adapter; see the module docstring for the interface."""

    group = "own"
    requires = ()
    build_key = None
    iterable = False
    batched = False
    preload_modules = None  # default: requires

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"<loader {self.name}>"

    def missing(self):
        for mod in self.requires:
            if not have(mod):
                return f"skipped: {mod} not installed"
        return None

    def preload(self):
        for mod in self.requires if self.preload_modules is None else self.preload_modules:
            importlib.import_module(mod)

    def build(self, ctx):
        pass

    def dataset(self, work, mode, n, batch_size):
        raise NotImplementedError


_registry = {}
_providers_loaded = False


def register(loader):
    if loader.name in _registry:
        raise ValueError(f"loader {loader.name!r} registered twice")
    _registry[loader.name] = loader
    return loader


def _load_providers():
    global _providers_loaded
    if not _providers_loaded:
        _providers_loaded = True
        # The providers sit beside this file; DataLoader workers started by
        # spawn import their datasets by module name, so the directory stays.
        here = os.path.dirname(os.path.abspath(__file__))
        if here not in sys.path:
            sys.path.append(here)
        for mod in PROVIDERS:
            importlib.import_module(mod)


def get(name):
    _load_providers()
    try:
        return _registry[name]
    except KeyError:
        raise UnknownLoaderError(f"unknown loader {name!r}; registered: {', '.join(_registry)}") from None


def names(group=None, available=False):
    _load_providers()
    return [n for n, ld in _registry.items()
            if (group is None or ld.group == group) and not (available and ld.missing())]


def select(spec):
    """'all' (every registered loader) or comma-separated names."""
    if spec == "all":
        return [get(n) for n in names()]
    return [get(n) for n in spec.split(",") if n]


# --- helpers shared by the adapters ---------------------------------------------------

def to_tensor_pil(data):
    """What every loader's decode mode does with encoded bytes (as ImageFolder)."""
    from PIL import Image
    from torchvision.transforms.functional import to_tensor

    with Image.open(io.BytesIO(data)) as img:
        return to_tensor(img.convert("RGB"))


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


def ext(name):
    return name.rsplit(".", 1)[-1].lower()


class LazyMapDataset:
    """A map-style dataset of length n over a container at path that each
    process opens on first use (fork or spawn: pickling drops the handle).
    Subclasses define open() -> handle and read(handle, i) -> (bytes, label)."""

    def __init__(self, path, n, decode):
        self.path, self.n, self.decode = path, n, decode
        self.handle = None

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.handle is None:
            self.handle = self.open()
        data, label = self.read(self.handle, i)
        return (to_tensor_pil(data) if self.decode else data), label

    def __getstate__(self):
        return dict(self.__dict__, handle=None)


def write_tar_shard(path, tree, samples, indices):
    """A WebDataset-layout tar: <key>.<image ext> + <key>.cls per sample, key = index."""
    with tarfile.open(path, "w") as t:
        for i in indices:
            name, label = samples[i]
            t.add(os.path.join(tree, name), arcname=f"{i:08d}.{ext(name)}")
            info = tarfile.TarInfo(f"{i:08d}.cls")
            data = str(label).encode()
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
