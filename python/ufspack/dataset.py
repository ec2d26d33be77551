"""MyImageFolder: a drop-in for torchvision.datasets.ImageFolder on a pack."""

from __future__ import annotations

import functools
import io
import multiprocessing
import os
import threading
import warnings
from collections.abc import Sequence
from typing import Any, Callable, Iterator, List, Literal, Optional, Tuple

import numpy as np

from ufspack import _core
from ufspack import cache as _cache
from ufspack import decoded as _decoded
from ufspack import fast_transforms as _ft
from ufspack.cache import Cache, CacheArg
from ufspack.pack import Pack, PathLike, _check_index

# torchvision.datasets.folder.IMG_EXTENSIONS
IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")

try:  # the same base class as ImageFolder, when torchvision is installed
    from torchvision.datasets.vision import VisionDataset as _Base

    _BASE_TAKES_ROOT = True
except ImportError:  # pragma: no cover - exercised only without torchvision
    try:
        from torch.utils.data import Dataset as _Base
    except ImportError:
        _Base = object
    _BASE_TAKES_ROOT = False

Output = Literal["pil", "numpy", "tensor", "bytes"]
OnError = Literal["raise", "skip", "substitute"]
OUTPUTS = ("pil", "numpy", "tensor", "bytes")
FastTransforms = Literal[False, True, "exact"]
ON_ERROR = ("raise", "skip", "substitute")
# decode_threads when not given: per process, or per DataLoader worker (the
# workers already use the cores; more threads each would oversubscribe them).
_DEFAULT_DECODE_THREADS = 4
_DEFAULT_DECODE_THREADS_IN_WORKER = 1
# bad_samples counters: slot 0 for the main process, 1 + worker id for
# DataLoader workers (each process writes only its own slot).
_COUNTER_SLOTS = 257


class BadSampleWarning(UserWarning):
    """A damaged or undecodable sample was skipped or substituted
    (``MyImageFolder(on_error="skip" | "substitute")``)."""


class _BadSample(Exception):
    """Internal: loading sample ``k`` failed in a way ``on_error`` covers."""

    def __init__(self, k: int, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.k = k
        self.cause = cause


class _Failed:
    """Internal: a sample the fast path could not load (``error``)."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


class _Prefixed:
    """Internal: a sample read from the decoded cache: the cached part of
    the transform is already applied."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class _Hit:
    """Internal: pixels found in the decoded cache, in place of a read."""

    __slots__ = ("pixels",)

    def __init__(self, pixels: np.ndarray) -> None:
        self.pixels = pixels


def _native_output(ns: _ft.NativeSpec) -> Tuple[Any, np.ndarray]:
    """(the sample's object, the buffer the native run writes) for a spec."""
    w, h = ns.spec.out_width, ns.spec.out_height
    if ns.output == "rgb":
        arr = np.empty((h, w, 3), np.uint8)
        return arr, arr
    import torch

    t = torch.empty((3, h, w), dtype=torch.uint8 if ns.output == "chw_u8" else torch.float32)
    return t, t.numpy()


def _native_value(ns: _ft.NativeSpec, value: Any) -> Any:
    if ns.output == "rgb":
        from PIL import Image

        value = Image.fromarray(value, "RGB")
    if ns.tail is not None:
        value = _ft.run_tail(value, ns.tail)
    return value


def skip_none_collate(batch):
    """``collate_fn`` for ``MyImageFolder(on_error="skip")`` with PyTorch
    versions whose DataLoader calls ``__getitem__`` per sample (< 2.0):
    drops the ``None`` a skipped sample leaves, then collates the rest with
    ``default_collate``.  A batch whose samples were all skipped becomes
    ``None``."""
    from torch.utils.data import default_collate

    kept = [b for b in batch if b is not None]
    return default_collate(kept) if kept else None


def _in_dataloader_worker() -> bool:
    try:
        from torch.utils.data import get_worker_info
    except ImportError:  # pragma: no cover - torch is optional
        return False
    return get_worker_info() is not None


def _is_default_path_loader(loader: Callable) -> bool:
    """torchvision's own default loaders, which give exactly the default
    path's pixels (PIL's RGB image) when the image backend is PIL."""
    try:
        import torchvision
        from torchvision.datasets import folder
    except ImportError:  # pragma: no cover - torchvision is optional
        return False
    if loader is folder.pil_loader:
        return True
    return loader is folder.default_loader and torchvision.get_image_backend() == "PIL"


def pil_loader_from_bytes(data: bytes):
    """The default PIL path: exactly torchvision's pil_loader, on bytes.

    ``Image.open(f).convert("RGB")`` where ``f`` holds the file's bytes.
    """
    from PIL import Image

    with Image.open(io.BytesIO(data)) as img:
        return img.convert("RGB")


class _Targets(Sequence):
    """``targets``: list-like of int backed by one numpy array, so DataLoader
    workers share it without copy-on-write (no per-item Python objects)."""

    def __init__(self, array: np.ndarray) -> None:
        self._a = array

    def __len__(self) -> int:
        return len(self._a)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [int(v) for v in self._a[i]]
        return int(self._a[i])

    def __iter__(self) -> Iterator[int]:
        return iter(self._a.tolist())

    def __array__(self, dtype=None):
        return self._a if dtype is None else self._a.astype(dtype)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Sequence, np.ndarray)):
            return len(self) == len(other) and all(int(a) == int(b) for a, b in zip(self._a, other))
        return NotImplemented

    def count(self, value: Any) -> int:
        return int(np.count_nonzero(self._a == value))

    def __repr__(self) -> str:
        return f"<{len(self._a)} targets>"


class _Samples(Sequence):
    """``samples`` / ``imgs``: list-like of ``(path, target)`` where path is
    the original file path (source root joined with the record name),
    computed on access from the mapped index."""

    def __init__(self, ds: MyImageFolder) -> None:
        self._ds = ds

    def __len__(self) -> int:
        return len(self._ds)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        k = _check_index(i, len(self))
        rec = self._ds._record_of(k)
        reader = self._ds._pack._handle.get()
        return self._ds._path_of_name(reader.name(rec)), self._ds._target_of(k, reader, rec)

    def __iter__(self) -> Iterator[Tuple[str, int]]:
        for k in range(len(self)):
            yield self[k]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return len(self) == len(other) and all(tuple(a) == tuple(b) for a, b in zip(self, other))
        return NotImplemented

    def __repr__(self) -> str:
        return f"<{len(self)} samples>"


@functools.lru_cache(maxsize=None)
def _tv_image_class() -> Any:
    """torchvision's ``tv_tensors.Image`` (>= 0.16), or None.  Looked up
    once: a failed import is not cached by Python and would be retried,
    searching sys.path, for every sample."""
    try:
        from torchvision import tv_tensors
    except ImportError:
        return None
    return tv_tensors.Image


def _as_tv_image(t: Any) -> Any:
    """``tv_tensors.Image`` around a CHW uint8 tensor where torchvision has
    it, so transforms v2 treat it as an image; the plain tensor elsewhere."""
    image = _tv_image_class()
    return t if image is None else image(t)


class MyImageFolder(_Base):
    """``torchvision.datasets.ImageFolder`` over a pack built by ``ufspack build``.

    Same classes, class_to_idx, samples, targets, imgs, len, order, transforms
    and pixels as ``ImageFolder`` on the directory the pack was built from;
    each sample costs one ``pread`` and an in-memory decode with the GIL
    released.

    Args:
        root: the pack directory or its ``index.ufs``.
        transform: applied to the sample (a ``PIL.Image`` in RGB mode by
            default), as in ImageFolder.
        target_transform: applied to the target (class index).
        loader: as in ImageFolder, a callable that receives a file *path*.
            A pack has no files to open, so only torchvision's own
            ``default_loader`` (with the PIL backend) and ``pil_loader`` are
            accepted, meaning the default; any other raises TypeError
            pointing to ``bytes_loader``.  It is never handed bytes.
        is_valid_file: optional callable receiving each sample's path (as in
            ``samples``) and returning whether to keep it, as in ImageFolder.
        bytes_loader: optional callable receiving the record's original file
            bytes (``bytes``, exactly the file's contents) and returning the
            sample, e.g. ``lambda b: Image.open(io.BytesIO(b)).convert("L")``.
            By default images are decoded in C++ (TurboJPEG for JPEG, OpenCV
            for PNG/BMP/PPM/PGM) with the same pixels as PIL, falling back to
            PIL itself for everything else.
        output: ``"pil"`` (default: ``PIL.Image`` RGB, what ImageFolder
            gives), ``"numpy"`` (HxWx3 uint8 RGB), ``"tensor"`` (3xHxW
            ``torch.uint8``, like ``transforms.PILToTensor``; a
            ``tv_tensors.Image`` where torchvision >= 0.16 has them) or
            ``"bytes"`` (the encoded file).  Ignored when ``bytes_loader``
            is given.
        verify: check each record's checksum (default True).
        source_root: directory to use for ``samples`` paths instead of the
            one recorded at build time (e.g. when the pack was built on
            another machine).
        decode_threads: threads used by ``__getitems__`` to read (and
            decode) a batch: several reads in flight per process, which is
            what hides a network file system's round trips.  Default: 4 in
            the main process, 1 in each DataLoader worker (the workers
            already use the cores).
        on_error: what a bad sample does: a record that fails its checksum
            or is otherwise damaged (``CorruptPackError``), or bytes the
            decoder (or ``loader``) cannot turn into a sample.
            ``"raise"`` (default, as ImageFolder): the exception propagates,
            naming the record.  ``"skip"``: ``__getitems__`` leaves the
            sample out of the batch and ``__getitem__`` returns ``None``
            (pair it with ``collate_fn=ufspack.skip_none_collate`` when the
            DataLoader fetches one sample at a time).  ``"substitute"``: the
            next good sample (``i+1``, ``i+2``, ... wrapping around) is
            returned in its place, so batches keep their size.  Each bad
            sample met issues a ``BadSampleWarning`` naming it, and
            ``bad_samples`` counts them across DataLoader workers.  I/O
            errors (``OSError`` other than ``CorruptPackError``) and
            exceptions from the transforms always propagate.

        fast_transforms: run the leading standard torchvision transforms of
            ``transform`` natively, fused with the decode (see
            ``docs/transforms.md``).  ``False`` (default): ``transform`` runs
            in Python on PIL's image.  ``True``: the longest leading run of
            RandomResizedCrop, Resize, CenterCrop, RandomCrop,
            RandomHorizontalFlip, ToTensor, PILToTensor, ConvertImageDtype
            and Normalize that the native pipeline can express runs in C++
            (random parameters drawn from torch's RNG exactly as torchvision
            draws them); the rest of ``transform`` runs in Python on the
            result.  JPEGs are decoded only where the crop needs them and,
            when the crop is at least twice the output, at 1/2, 1/4 or 1/8
            scale in the DCT (close to torchvision's pixels, not equal).
            ``"exact"``: the same without DCT scaling: the output equals
            torchvision's bit for bit.  ``fast_plan`` shows the split.
            Needs the default decoder and ``output="pil"``.
        cache: read the pack through the node-local cache
            (:class:`ufspack.Cache`; see ``docs/python.md``): a Cache, a
            cache directory, None (default: the directory in the
            ``UFSPACK_CACHE`` environment variable, if set) or False (no
            cache even if ``UFSPACK_CACHE`` is set).  Samples and targets
            are the same with or without it.
        cache_decoded: also cache, in ``cache``, each sample after the
            deterministic leading part of ``transform``: the decode and the
            leading ``Resize`` / ``CenterCrop`` transforms, as uint8 pixels.
            The rest of ``transform`` (the random transforms, ToTensor,
            Normalize...) runs on the cached pixels on every fetch, drawing
            from torch's RNG as without the cache: the samples are the same
            (``torch.equal``) with and without it.  A changed transform uses
            other entries.  ``cached_transforms`` shows what is cached.
            Needs a cache and the default decoder (no ``bytes_loader``, no
            ``output="bytes"``); with another ``output`` than ``"pil"`` only
            the decode is cached.

    Subsetting and relabelling work as on ImageFolder: assigning
    ``samples`` (or ``imgs``) a list of ``(path, target)`` pairs taken from
    it (``ds.samples = ds.samples[:1000]``, or with new targets) changes
    ``len``, the order and the targets ``__getitem__`` returns; assigning
    ``targets`` only replaces that attribute, as on ImageFolder (whose
    ``__getitem__`` takes targets from ``samples``).  ``targets`` follows
    ``samples`` until it is assigned.

    Raises:
        FileNotFoundError: the pack does not exist, or (as ImageFolder)
            ``is_valid_file`` leaves a class without samples.
        TypeError: ``loader`` is a path loader other than torchvision's
            default (use ``bytes_loader``).
        ValueError: the pack was built with ``--flat`` (it has no classes),
            ``output`` is unknown, or ``fast_transforms`` is set with
            ``bytes_loader`` or another ``output``.
        ufspack.CorruptPackError: the pack is damaged (also raised by
            ``__getitem__`` for a damaged record, naming it, unless
            ``on_error`` says otherwise).
    """

    def __init__(
        self,
        root: PathLike,
        transform: Optional[Callable] = None,
        target_transform: Optional[Callable] = None,
        loader: Optional[Callable[[str], Any]] = None,
        is_valid_file: Optional[Callable[[str], bool]] = None,
        *,
        bytes_loader: Optional[Callable[[bytes], Any]] = None,
        output: Output = "pil",
        verify: bool = True,
        source_root: Optional[PathLike] = None,
        decode_threads: Optional[int] = None,
        on_error: OnError = "raise",
        fast_transforms: FastTransforms = False,
        cache: CacheArg = None,
        cache_decoded: bool = False,
    ) -> None:
        if _BASE_TAKES_ROOT:
            super().__init__(root, transform=transform, target_transform=target_transform)
        else:
            self.root = os.path.expanduser(root) if isinstance(root, str) else root
            self.transform = transform
            self.target_transform = target_transform
        if output not in OUTPUTS:
            raise ValueError(f"output must be one of {OUTPUTS}, not {output!r}")
        if on_error not in ON_ERROR:
            raise ValueError(f"on_error must be one of {ON_ERROR}, not {on_error!r}")
        if loader is not None and not _is_default_path_loader(loader):
            raise TypeError(
                f"MyImageFolder: loader={getattr(loader, '__name__', loader)!r} would be called "
                "with a file path, as ImageFolder calls it, but a pack has no files to open; "
                "pass a callable that takes the file's bytes as bytes_loader= instead "
                "(e.g. bytes_loader=lambda b: PIL.Image.open(io.BytesIO(b)).convert('RGB'))"
            )
        if decode_threads is not None and int(decode_threads) < 1:
            raise ValueError(f"decode_threads must be at least 1, not {decode_threads!r}")
        if fast_transforms not in (False, True, "exact"):
            raise ValueError(f"fast_transforms must be False, True or 'exact', not {fast_transforms!r}")
        if fast_transforms and (bytes_loader is not None or output != "pil"):
            raise ValueError(
                "fast_transforms runs torchvision's transforms on the decoded image: "
                "it needs the default decoder (no bytes_loader) and output='pil'"
            )
        self.fast_transforms = fast_transforms
        self._plan: Optional[Tuple[Any, _ft.FastPlan]] = None  # (transform, its plan)
        self._pack = Pack(root, verify=verify, cache=cache)
        info = self._pack.info
        self.cache_decoded = bool(cache_decoded)
        if self.cache_decoded and (self._pack.cache is None or bytes_loader is not None or output == "bytes"):
            raise ValueError(
                "cache_decoded caches decoded pixels in the node-local cache: it needs a cache "
                "(cache= or UFSPACK_CACHE) and the default decoder (no bytes_loader, output not 'bytes')"
            )
        self._pack_id: str = info["pack_id"]
        self._dplan: Optional[_decoded.DecodedPlan] = None  # for the current transform
        self._dtables: dict = {}  # table name -> (pid, _core.SampleTable)
        if info["flat"]:
            raise ValueError(
                f"{self._pack.path}: built with --flat, it has no classes; use ufspack.Pack"
            )
        self.output = output
        self.decode_threads: Optional[int] = None if decode_threads is None else int(decode_threads)
        self.on_error = on_error
        # Shared memory, so DataLoader workers (fork or spawn) add to the
        # count the main process reads.  No multiprocessing lock: one made
        # for fork crashes a spawned worker; each process has its own slot.
        self._bad_counts = multiprocessing.RawArray("q", _COUNTER_SLOTS) if on_error != "raise" else None
        self._count_lock = threading.Lock()
        self._custom_loader = bytes_loader
        self.bytes_loader = bytes_loader if bytes_loader is not None else pil_loader_from_bytes
        # ImageFolder's attribute: the path loader, here always the default.
        self.loader = loader
        self.extensions = IMG_EXTENSIONS if is_valid_file is None else None
        self.classes: List[str] = self._pack.classes
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
        root_for_paths = source_root if source_root is not None else info["source_root"]
        self._source_root = os.fsdecode(os.fspath(root_for_paths)) if root_for_paths else ""
        self._indices: Optional[np.ndarray] = None  # record index per sample
        self._sample_targets: Optional[np.ndarray] = None  # relabelled samples
        self._targets_array: Optional[np.ndarray] = None
        self._targets_assigned: Any = None  # what `ds.targets = x` set
        if is_valid_file is not None:
            self._select(is_valid_file)
        elif self._pack.selection != ",".join(IMG_EXTENSIONS):
            # The pack holds files ImageFolder would not pick (built with
            # --all-files or other --extensions): filter as it does.
            self._select(lambda p: p.lower().endswith(IMG_EXTENSIONS))

    @property
    def cache(self) -> Optional[Cache]:
        """The :class:`ufspack.Cache` the pack is read through, or None."""
        return self._pack.cache

    # --- ImageFolder attributes ----------------------------------------------

    @property
    def samples(self) -> Sequence:
        """``(path, target)`` of every sample, list-like, computed on access."""
        return _Samples(self)

    @samples.setter
    def samples(self, value: Sequence) -> None:
        """Subsets, reorders or relabels, as assigning ImageFolder's list
        does: each path must be one of this pack's samples' paths."""
        reader = self._pack._handle.get()
        prefix = os.path.join(self._source_root, "") if self._source_root else ""
        recs: List[int] = []
        targets: List[int] = []
        for item in value:
            try:
                path, target = item
            except (TypeError, ValueError):
                raise TypeError(f"samples must hold (path, target) pairs, not {item!r}") from None
            path = os.fsdecode(os.fspath(path))
            name = path[len(prefix) :] if path.startswith(prefix) else None
            try:
                if name is None:
                    raise FileNotFoundError(path)
                rec = reader.find(os.fsencode(name))
            except FileNotFoundError:
                raise ValueError(
                    f"samples: {path!r} is not the path of a sample of the pack "
                    f"{self._pack.path} (its sample paths are {prefix}<record name>)"
                ) from None
            recs.append(rec)
            targets.append(int(target))
        self._indices = np.asarray(recs, dtype=np.int64)
        new_targets = np.asarray(targets, dtype=np.int64)
        labels = self._pack.labels[self._indices]
        self._sample_targets = None if np.array_equal(new_targets, labels) else new_targets
        self._targets_array = None

    # ImageFolder's imgs is the samples list under another name.
    imgs = samples

    @property
    def targets(self) -> Any:
        """The target of every sample, list-like (or what was assigned)."""
        if self._targets_assigned is not None:
            return self._targets_assigned
        if self._targets_array is None:
            if self._sample_targets is not None:
                self._targets_array = self._sample_targets
            else:
                labels = self._pack.labels
                self._targets_array = labels if self._indices is None else labels[self._indices]
        return _Targets(self._targets_array)

    @targets.setter
    def targets(self, value: Any) -> None:
        # As on ImageFolder: a plain attribute; __getitem__ keeps taking
        # targets from samples.
        self._targets_assigned = value

    def __len__(self) -> int:
        return len(self._pack) if self._indices is None else len(self._indices)

    @property
    def bad_samples(self) -> int:
        """How many bad samples ``on_error="skip"`` / ``"substitute"`` has
        met so far, in this process and its DataLoader workers (0 with
        ``"raise"``)."""
        if self._bad_counts is None:
            return 0
        return int(sum(self._bad_counts))

    def __getitem__(self, index: int) -> Optional[Tuple[Any, Any]]:
        k = _check_index(index, len(self))
        rec = self._record_of(k)
        reader = self._pack._handle.get()
        if self.on_error == "raise":
            if self._fast_active():
                return self._transformed(self._fast_one(reader, k), k, reader, rec)
            return self._transformed(self._load(reader, rec), k, reader, rec)
        try:
            sample = self._load_guarded(reader, k)
        except _BadSample as bad:
            return self._on_bad(reader, bad)
        return self._transformed(sample, k, reader, rec)

    def _target_of(self, k: int, reader: _core.Reader, rec: int) -> int:
        if self._sample_targets is not None:
            return int(self._sample_targets[k])
        return reader.label(rec)

    def _transformed(self, sample: Any, k: int, reader: _core.Reader, rec: int) -> Tuple[Any, Any]:
        target = self._target_of(k, reader, rec)
        transform = self.transform
        d = self._decoded_active()
        if d is not None and d.fast:
            assert d.rest_plan is not None
            transform = d.rest_plan.python  # the rest, after the native run on the cached pixels
        elif d is not None:
            if isinstance(sample, _Prefixed):
                sample = sample.value
            else:  # read and decoded: apply the cached part, and cache it
                sample = d.apply_prefix(sample)
                self._decoded_put(d, rec, sample)
            transform = d.rest
        elif self._fast_active():
            transform = self._plan[1].python  # type: ignore[index]  # the rest, after the native run
        if transform is not None:
            sample = transform(sample)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return sample, target

    def __getitems__(self, indices: Sequence) -> List[Tuple[Any, Any]]:
        """Fetches a batch: reads and decodes all records on
        ``decode_threads`` threads with one GIL release, then applies the
        transforms.  Used by DataLoader versions that support it."""
        n = len(self)
        ks = [_check_index(i, n) for i in indices]
        recs = [self._record_of(k) for k in ks]
        reader = self._pack._handle.get()
        if self.on_error != "raise":
            return self._getitems_guarded(reader, ks, recs)
        if self._fast_active():
            out = []
            for k, r, x in zip(ks, recs, self._fast_samples(reader, ks, recs, self._threads())):
                if isinstance(x, _Failed):
                    raise x.error
                out.append(self._transformed(x, k, reader, r))
            return out
        loaded = self._read_batch(reader, recs)
        return [self._transformed(self._convert(x, reader, r), k, reader, r) for x, k, r in zip(loaded, ks, recs)]

    # --- bad samples (on_error="skip" / "substitute") ------------------------

    def _getitems_guarded(self, reader: _core.Reader, ks: List[int], recs: List[int]) -> list:
        """``__getitems__`` under a skip/substitute policy: the batched read
        stops at the first damaged record, so a batch holding one is redone
        sample by sample."""
        if self._fast_active():
            out = []
            for k, rec, x in zip(ks, recs, self._fast_samples(reader, ks, recs, self._threads())):
                if isinstance(x, _Failed):
                    got = self._on_bad(reader, _BadSample(k, x.error))
                    if got is not None:
                        out.append(got)
                else:
                    out.append(self._transformed(x, k, reader, rec))
            return out
        try:
            loaded = self._read_batch(reader, recs)
        except _core.CorruptPackError:
            loaded = None
        out = []
        for i, (k, rec) in enumerate(zip(ks, recs)):
            try:
                if loaded is None:
                    sample = self._load_guarded(reader, k)
                else:
                    sample = self._convert_guarded(k, loaded[i], reader, rec)
                out.append(self._transformed(sample, k, reader, rec))
            except _BadSample as bad:
                got = self._on_bad(reader, bad)
                if got is not None:
                    out.append(got)
        return out

    def _load_guarded(self, reader: _core.Reader, k: int) -> Any:
        """Loads sample ``k``, turning the failures ``on_error`` covers into
        ``_BadSample``; everything else propagates."""
        rec = self._record_of(k)
        if self._fast_active():
            (x,) = self._fast_samples(reader, [k], [rec], 1)
            if isinstance(x, _Failed):
                raise _BadSample(k, x.error) from x.error
            return x
        try:
            loaded = self._read(reader, rec)
        except _core.CorruptPackError as e:
            raise _BadSample(k, e) from e
        return self._convert_guarded(k, loaded, reader, rec)

    def _convert_guarded(self, k: int, loaded: Any, reader: _core.Reader, rec: int) -> Any:
        """Bytes (or a ``read_decode`` result) to the sample; a decoder or
        ``loader`` failure becomes ``_BadSample``."""
        try:
            return self._convert(loaded, reader, rec)
        except Exception as e:
            raise _BadSample(k, e) from e

    def _count_bad(self, reader: _core.Reader, bad: _BadSample, what: str) -> None:
        slot = 0
        if _in_dataloader_worker():
            from torch.utils.data import get_worker_info

            slot = 1 + get_worker_info().id % (_COUNTER_SLOTS - 1)
        assert self._bad_counts is not None  # on_error != "raise"
        with self._count_lock:
            self._bad_counts[slot] += 1
        rec = self._record_of(bad.k)
        path = self._path_of_name(reader.name(rec))
        warnings.warn(
            f"ufspack: bad sample {bad.k} (record {rec}, {path}): "
            f"{type(bad.cause).__name__}: {bad.cause}; {what}",
            BadSampleWarning,
            stacklevel=4,
        )

    def _on_bad(self, reader: _core.Reader, bad: _BadSample) -> Optional[Tuple[Any, Any]]:
        """Skips (returns None) or substitutes the next good sample."""
        if self.on_error == "skip":
            self._count_bad(reader, bad, "skipped")
            return None
        n = len(self)
        first = bad
        for step in range(1, n):
            j = (first.k + step) % n
            try:
                sample = self._load_guarded(reader, j)
            except _BadSample as again:
                self._count_bad(reader, again, "met while looking for a substitute")
                continue
            self._count_bad(reader, first, f"replaced by sample {j}")
            return self._transformed(sample, j, reader, self._record_of(j))
        self._count_bad(reader, first, "no good sample left to substitute")
        raise first.cause

    # --- internals -----------------------------------------------------------

    # --- fast_transforms -------------------------------------------------------

    @property
    def fast_plan(self) -> Optional[_ft.FastPlan]:
        """What ``fast_transforms`` runs natively: the plan for the current
        ``transform`` (recomputed when ``transform`` is reassigned; its
        ``description`` reads "native: ...; python: ..."), or None when
        ``fast_transforms`` is off."""
        if not self.fast_transforms:
            return None
        if self._plan is None or self._plan[0] is not self.transform:
            plan, _ = _ft.plan_transform(self.transform)
            self._plan = (self.transform, plan)
        return self._plan[1]

    def _fast_active(self) -> bool:
        plan = self.fast_plan
        return plan is not None and bool(plan)

    def _fast_one(self, reader: _core.Reader, k: int) -> Any:
        (x,) = self._fast_samples(reader, [k], [self._record_of(k)], 1)
        if isinstance(x, _Failed):
            raise x.error
        return x

    def _fast_samples(self, reader: _core.Reader, ks: List[int], recs: List[int], threads: int) -> list:
        """The native run of the plan for a batch, in order: per sample its
        output, or ``_Failed`` for what ``on_error`` covers (a damaged record,
        bytes no decoder takes).  The random parameters are drawn sample by
        sample, in order, after the sample's image size is known and before
        the next sample's: the order torchvision draws them in."""
        d = self._decoded_active()
        if d is not None and d.fast:
            return self._fast_samples_cached(d, reader, recs, threads)
        plan = self._plan[1]  # type: ignore[index]  # _fast_active() set it
        dct = self.fast_transforms is True
        prepared = self._prepare(reader, recs, threads)
        results: List[Any] = [None] * len(recs)

        def pil_pixels(i: int, p: Any) -> Any:
            return self._pil_pixels(reader, recs, results, i, p)

        todo = []  # (i, prepared, NativeSpec, value, buffer)
        for i, p in enumerate(prepared):
            if isinstance(p, _Failed):
                results[i] = p
                continue
            img = None
            if p.kind == "pil" and (img := pil_pixels(i, p)) is None:
                continue
            ops = plan.sample(p.width, p.height)
            ns = _ft.native_spec(ops, dct)
            if ns is None:  # not expressible natively: torchvision's own calls
                if img is None and (img := pil_pixels(i, p)) is None:
                    continue
                results[i] = plan.apply_pil(img, ops)
                continue
            value, buf = _native_output(ns)
            todo.append((i, p, ns, value, buf))
        if todo:
            status = _core.transform_batch(
                [t[1] for t in todo], [t[2].spec for t in todo], [t[4] for t in todo], threads
            )
            for (i, p, ns, value, buf), st in zip(todo, status):
                if st is not None:  # libjpeg warned: PIL decodes, as the exact path does
                    if pil_pixels(i, p) is None:
                        continue
                    _core.transform_batch([p], [ns.spec], [buf], 1)
                results[i] = _native_value(ns, value)
        return results

    @staticmethod
    def _prepare(reader: _core.Reader, recs: List[int], threads: int) -> List[Any]:
        """read_prepare(_batch) of ``recs``: per record its Prepared, or
        ``_Failed`` for a damaged record."""
        try:
            if len(recs) == 1:
                return [reader.read_prepare(recs[0])]
            return list(reader.read_prepare_batch(recs, threads))
        except _core.CorruptPackError as e:
            if len(recs) == 1:
                return [_Failed(e)]
        prepared: List[Any] = []  # find which: record by record
        for r in recs:
            try:
                prepared.append(reader.read_prepare(r))
            except _core.CorruptPackError as e2:
                prepared.append(_Failed(e2))
        return prepared

    # --- cache_decoded ----------------------------------------------------------

    @property
    def cached_transforms(self) -> Optional[str]:
        """What ``cache_decoded`` caches for the current ``transform``:
        "decode -> Resize(...) -> CenterCrop(...)" (the rest of
        ``transform`` runs on the cached pixels), or why nothing is
        ("not cached: ..."); None when ``cache_decoded`` is off."""
        d = self._decoded_plan()
        if d is None:
            return None
        return d.description if d.name is not None else d.reason

    def _decoded_plan(self) -> Optional[_decoded.DecodedPlan]:
        if not self.cache_decoded:
            return None
        plan = self.fast_plan if self._fast_active() else None
        d = self._dplan
        if d is None or d.transform is not self.transform or d.fast != bool(plan):
            d = _decoded.make_plan(self.transform, self.output, self.fast_transforms, plan, self._pack_id)
            self._dplan = d
        return d

    def _decoded_active(self) -> Optional[_decoded.DecodedPlan]:
        d = self._decoded_plan()
        return d if d is not None and d.name is not None else None

    def _decoded_table(self, d: _decoded.DecodedPlan) -> Optional[_core.SampleTable]:
        """This process's handle on the sample table of ``d`` (opened on
        first use in each process); None when the cache cannot be used (it
        was reported once: samples are then decoded every time)."""
        assert d.name is not None and self.cache is not None
        pid = os.getpid()
        got = self._dtables.get(d.name)
        if got is None or got[0] != pid:
            table = None
            native = self.cache._native_or_none()
            if native is not None:
                try:
                    table = native.open_sample_table(d.name, len(self._pack))
                except (OSError, ValueError) as e:
                    _cache.warn_once(
                        f"{self.cache.dir}:{d.name!r}",
                        f"cache {self.cache.dir}: decoded samples not cached ({e})",
                    )
            got = (pid, table)
            self._dtables[d.name] = got
        return got[1]

    def _decoded_get(self, d: _decoded.DecodedPlan, rec: int) -> Optional[np.ndarray]:
        table = self._decoded_table(d)
        data = None if table is None else table.get(rec)
        return None if data is None else _decoded.decode_pixels(data)

    def _decoded_put(self, d: _decoded.DecodedPlan, rec: int, sample: Any) -> None:
        """Caches the pixels of ``sample`` (a PIL image, an HxWx3 array or a
        3xHxW uint8 tensor) for record ``rec``; a full cache refuses them."""
        if isinstance(sample, np.ndarray):
            arr = sample
        elif hasattr(sample, "permute"):  # a torch tensor
            arr = sample.permute(1, 2, 0).numpy()
        elif getattr(sample, "mode", None) == "RGB":
            arr = np.asarray(sample)
        else:
            return
        table = self._decoded_table(d)
        if table is None:
            return
        data = _decoded.encode_pixels(arr)
        if data is not None:
            table.put(rec, data)

    def _fast_samples_cached(
        self, d: _decoded.DecodedPlan, reader: _core.Reader, recs: List[int], threads: int
    ) -> list:
        """``_fast_samples`` through the decoded cache: each sample's pixels
        after the cached transforms come from the cache, or on a miss from
        their native run (then cached); the rest of the plan runs natively on
        the pixels.  The random parameters are drawn sample by sample, in
        order, for the size of the cached part's output, before that part
        runs on a miss: the same draws, for the same samples (a JPEG found
        damaged while decoding has had its draws, as without the cache)."""
        assert d.prefix_plan is not None and d.rest_plan is not None
        dct = self.fast_transforms is True
        n = len(recs)
        results: List[Any] = [None] * n
        pixels: List[Optional[np.ndarray]] = [self._decoded_get(d, rec) for rec in recs]
        miss = [i for i in range(n) if pixels[i] is None]

        def pil_pixels(i: int, p: Any) -> bool:
            return self._pil_pixels(reader, recs, results, i, p) is not None

        # The misses, read and probed (PIL decodes what only PIL can).
        prepared = {}
        for i, p in zip(miss, self._prepare(reader, [recs[i] for i in miss], threads) if miss else []):
            if isinstance(p, _Failed):
                results[i] = p
            elif p.kind != "pil" or pil_pixels(i, p):
                prepared[i] = p
        # The draws, in order.
        prefix_ops = {}
        rest_ops = {}
        for i in range(n):
            arr = pixels[i]
            if arr is not None:
                w, h = arr.shape[1], arr.shape[0]
            elif i in prepared:
                p = prepared[i]
                prefix_ops[i] = d.prefix_plan.sample(p.width, p.height)  # draws nothing
                w, h = prefix_ops[i].out_size
            else:
                continue
            rest_ops[i] = d.rest_plan.sample(w, h)
        # The cached part of the misses, natively, cached.
        todo = []  # (i, prepared, NativeSpec, buffer)
        for i, p in prepared.items():
            ns = _ft.native_spec(prefix_ops[i], dct)
            assert ns is not None and ns.output == "rgb"
            todo.append((i, p, ns, np.empty((ns.spec.out_height, ns.spec.out_width, 3), np.uint8)))
        if todo:
            status = _core.transform_batch(
                [t[1] for t in todo], [t[2].spec for t in todo], [t[3] for t in todo], threads
            )
            for (i, p, ns, buf), st in zip(todo, status):
                if st is not None:  # libjpeg warned: PIL decodes, as the uncached path does
                    if not pil_pixels(i, p):
                        continue
                    _core.transform_batch([p], [ns.spec], [buf], 1)
                pixels[i] = buf
                self._decoded_put(d, recs[i], buf)
        # The rest of the plan, on the pixels.
        from PIL import Image

        rest = []  # (i, prepared, NativeSpec, value, buffer)
        for i, ops in rest_ops.items():
            arr = pixels[i]
            if results[i] is not None or arr is None:
                continue
            if not d.rest_plan:  # nothing native left: the Python rest gets PIL's image
                results[i] = Image.fromarray(arr, "RGB")
                continue
            ns = _ft.native_spec(ops, dct)
            if ns is None:  # not expressible natively: torchvision's own calls
                results[i] = d.rest_plan.apply_pil(Image.fromarray(arr, "RGB"), ops)
                continue
            p = _core.Prepared()
            p.set_pixels(arr)
            value, buf = _native_output(ns)
            rest.append((i, p, ns, value, buf))
        if rest:
            _core.transform_batch([t[1] for t in rest], [t[2].spec for t in rest], [t[4] for t in rest], threads)
            for i, _, ns, value, _ in rest:
                results[i] = _native_value(ns, value)
        return results

    def _pil_pixels(self, reader: _core.Reader, recs: List[int], results: List[Any], i: int, p: Any) -> Any:
        """PIL's image of sample ``i`` of a batch (for what only PIL decodes),
        its pixels handed to the prepared sample ``p``; or None after
        recording the failure in ``results[i]``."""
        try:
            img = self._pil_named(p.data, reader, recs[i])
        except Exception as e:
            results[i] = _Failed(e)
            return None
        p.set_pixels(np.asarray(img))
        return img

    def _pil_named(self, raw: bytes, reader: _core.Reader, rec: int) -> Any:
        """PIL's RGB image of ``raw``; a failure keeps its type and names the sample."""
        try:
            return pil_loader_from_bytes(raw)
        except Exception as e:  # name the sample, keep the type
            path = self._path_of_name(reader.name(rec))
            try:
                err = type(e)(f"{path}: {e}")
            except Exception:
                err = OSError(f"{path}: {e}")
            raise err from e

    def _record_of(self, k: int) -> int:
        return k if self._indices is None else int(self._indices[k])

    def _path_of_name(self, name: bytes) -> str:
        return os.path.join(self._source_root, os.fsdecode(name))

    def _select(self, is_valid_file: Callable[[str], bool]) -> None:
        """Keeps the records whose path passes ``is_valid_file`` (O(records)
        calls, as ImageFolder makes them while scanning)."""
        reader = self._pack._handle.get()
        keep = [i for i in range(len(self._pack)) if is_valid_file(self._path_of_name(reader.name(i)))]
        self._indices = np.asarray(keep, dtype=np.int64)
        labels = self._pack.labels[self._indices]
        present = set(np.unique(labels).tolist())
        empty = [c for c, i in self.class_to_idx.items() if i not in present]
        if empty:
            msg = f"Found no valid file for the classes {', '.join(sorted(empty))}. "
            if is_valid_file is None:
                msg += f"Supported extensions are: {', '.join(IMG_EXTENSIONS)}"
            raise FileNotFoundError(msg)

    # Loading a sample is a read (the file's bytes, or, when the sample is
    # decoded here, read_decode's (pixels or None, bytes)) then _convert.

    def _decodes(self) -> bool:
        return self._custom_loader is None and self.output != "bytes"

    @staticmethod
    def _new_rgb_image(width: int, height: int) -> Any:
        """A new PIL image of mode RGB for read_decode_pil(_batch) to decode
        into.  Its pixels live in an uninitialised numpy buffer that only
        the image references (Pillow's map_buffer, what Image.frombuffer
        uses, with PIL's own RGB layout: 4 bytes a pixel), since
        Image.new zero-fills its memory: 5-10% of a sample's time.
        Image.new where map_buffer is missing or refuses.  The C++ side
        checks the image's memory layout before writing, and returns an
        array instead where it is not the expected one (``_finish`` then
        makes the image from the array)."""
        from PIL import Image

        try:
            buffer = np.empty((height, width * 4), np.uint8)
            core = Image.core.map_buffer(buffer, (width, height), "raw", 0, ("RGB", width * 4, 1))
        except Exception:
            return Image.new("RGB", (width, height), None)
        return Image.Image()._new(core)

    def _read(self, reader: _core.Reader, rec: int) -> Any:
        d = self._decoded_active()
        if d is not None and not d.fast:
            arr = self._decoded_get(d, rec)
            if arr is not None:
                return _Hit(arr)
        if not self._decodes():
            return reader.read(rec)
        if self.output == "pil":
            return reader.read_decode_pil(rec, self._new_rgb_image)
        return reader.read_decode(rec)

    def _threads(self) -> int:
        if self.decode_threads is not None:
            return self.decode_threads
        return _DEFAULT_DECODE_THREADS_IN_WORKER if _in_dataloader_worker() else _DEFAULT_DECODE_THREADS

    def _read_batch(self, reader: _core.Reader, recs: List[int]) -> list:
        d = self._decoded_active()
        if d is not None and not d.fast:
            out: List[Any] = []
            for rec in recs:
                arr = self._decoded_get(d, rec)
                out.append(None if arr is None else _Hit(arr))
            miss = [i for i, x in enumerate(out) if x is None]
            if miss:
                for i, x in zip(miss, self._read_batch_uncached(reader, [recs[i] for i in miss])):
                    out[i] = x
            return out
        return self._read_batch_uncached(reader, recs)

    def _read_batch_uncached(self, reader: _core.Reader, recs: List[int]) -> list:
        if not self._decodes():
            return reader.read_batch(recs, self._threads())
        if self.output == "pil":
            return reader.read_decode_pil_batch(recs, self._new_rgb_image, self._threads())
        return reader.read_decode_batch(recs, self._threads())

    def _convert(self, loaded: Any, reader: _core.Reader, rec: int) -> Any:
        if isinstance(loaded, _Hit):  # from the decoded cache: numpy and torch get a writable copy
            arr = loaded.pixels if self.output == "pil" else loaded.pixels.copy()
            return _Prefixed(self._finish(arr, None, reader, rec))
        if self._custom_loader is not None:
            return self._custom_loader(loaded)
        if self.output == "bytes":
            return loaded
        return self._finish(loaded[0], loaded[1], reader, rec)

    def _load(self, reader: _core.Reader, rec: int) -> Any:
        return self._convert(self._read(reader, rec), reader, rec)

    def _finish(self, arr: Any, raw: Optional[bytes], reader: _core.Reader, rec: int) -> Any:
        """``arr``: the pixels (an HxWx3 array, or with ``output="pil"``
        usually the PIL image read_decode_pil decoded into), or None with
        ``raw`` the bytes PIL must decode."""
        if arr is not None and not isinstance(arr, np.ndarray):
            return arr  # a PIL image (output="pil" only)
        if arr is None:
            assert raw is not None  # read_decode gives the bytes it could not decode
            img = self._pil_named(raw, reader, rec)
            if self.output == "pil":
                return img
            arr = np.array(img)  # a writable copy (torch.from_numpy needs one)
        if self.output == "pil":
            from PIL import Image

            return Image.fromarray(arr, "RGB")
        if self.output == "numpy":
            return arr
        import torch

        t = torch.from_numpy(np.ascontiguousarray(arr)).permute(2, 0, 1).contiguous()
        return _as_tv_image(t)

    def extra_repr(self) -> str:
        text = f"Pack: {self._pack.path}\nOutput: {self.output}"
        if self.cache is not None:
            text += f"\nCache: {self.cache.dir}"
        cached = self.cached_transforms
        if cached is not None:
            text += f"\nDecoded cache: {cached}"
        plan = self.fast_plan
        if plan is not None:
            mode = "exact" if self.fast_transforms == "exact" else "DCT scaling allowed"
            text += f"\nFast transforms ({mode}): {plan.description}"
        return text

    def __getstate__(self) -> dict:
        # Pickles to its path: the Pack's handle drops its open reader.
        state = self.__dict__.copy()
        state["_targets_array"] = None
        state["_plan"] = None  # recomputed on first use
        state["_dplan"] = None
        state["_dtables"] = {}  # native handles: reopened in each process
        del state["_count_lock"]
        if self._bad_counts is not None and multiprocessing.context.get_spawning_popen() is None:
            # The shared counters only travel to a process being spawned (a
            # DataLoader worker); a plain pickle starts its own count.
            # multiprocessing has no public way to tell the two pickles
            # apart: get_spawning_popen() is what its own shared objects
            # consult (context.assert_spawning), and a plain pickle of the
            # array fails with PicklingError, not a catchable refusal.
            state["_bad_counts"] = "new"
        return state

    def __setstate__(self, state: dict) -> None:
        if isinstance(state.get("_bad_counts"), str):
            state["_bad_counts"] = multiprocessing.RawArray("q", _COUNTER_SLOTS)
        self.__dict__.update(state)
        self._count_lock = threading.Lock()
