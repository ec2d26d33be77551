"""MyImageFolder: a drop-in for torchvision.datasets.ImageFolder on a pack.

Each sample goes through one pipeline (:mod:`ufspack.pipeline`) wrapped in
one ``on_error`` policy (:mod:`ufspack.on_error`), both chosen when the
dataset is made and again when ``transform`` (or another attribute the
choice depends on) is assigned.  Targets come from the labels array read
once (``_core.Reader.labels``): a sample costs one native record lookup.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Sequence
from typing import Any, Callable, Iterator, List, Literal, Optional, Tuple

import numpy as np

from ufspack import decoded as _decoded
from ufspack import on_error as _on_error
from ufspack import pipeline as _pipeline
from ufspack.cache import Cache, CacheArg
from ufspack.fast_transforms import FastPlan
from ufspack.on_error import BadSampleWarning
from ufspack.pack import Pack, PathLike, _check_index
from ufspack.pipeline import pil_loader_from_bytes

__all__ = [
    "IMG_EXTENSIONS",
    "BadSampleWarning",
    "ImageFolder",
    "MyImageFolder",
    "pil_loader_from_bytes",
    "skip_none_collate",
]

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

    def __init__(self, ds: ImageFolder) -> None:
        self._ds = ds

    def __len__(self) -> int:
        return len(self._ds)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        k = _check_index(i, len(self))
        rec = self._ds._record_of(k)
        reader = self._ds._pack._handle.get()
        return self._ds._path_of_name(reader.name(rec)), int(self._ds._target_array()[k])

    def __iter__(self) -> Iterator[Tuple[str, int]]:
        for k in range(len(self)):
            yield self[k]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return len(self) == len(other) and all(tuple(a) == tuple(b) for a, b in zip(self, other))
        return NotImplemented

    def __repr__(self) -> str:
        return f"<{len(self)} samples>"


class _Reselects:
    """A ``MyImageFolder`` attribute whose assignment chooses the pipeline
    again (``transform``, ``fast_transforms``, ``output``, ``cache_decoded``,
    ``on_error``); stored in the instance's ``__dict__`` as ``_<name>``."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name
        self.key = "_" + name

    def __get__(self, obj: Any, owner: Optional[type] = None) -> Any:
        if obj is None:
            return self
        try:
            return obj.__dict__[self.key]
        except KeyError:
            raise AttributeError(self.name) from None

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__[self.key] = value
        if "_policy" in obj.__dict__:  # constructed: else __init__ chooses at its end
            obj._reselect()


class ImageFolder(_Base):
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
        self._plan: Optional[FastPlan] = None  # set with the pipeline
        self._pack = Pack(root, verify=verify, cache=cache)
        info = self._pack.info
        self.cache_decoded = bool(cache_decoded)
        if self.cache_decoded and (self._pack.cache is None or bytes_loader is not None or output == "bytes"):
            raise ValueError(
                "cache_decoded caches decoded pixels in the node-local cache: it needs a cache "
                "(cache= or UFSPACK_CACHE) and the default decoder (no bytes_loader, output not 'bytes')"
            )
        self._pack_id: str = info["pack_id"]
        self._dplan: Optional[_decoded.DecodedPlan] = None  # set with the pipeline
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
        self._n = len(self._pack)  # len(self)
        self._sample_targets: Optional[np.ndarray] = None  # relabelled samples
        self._labels: Optional[np.ndarray] = None  # every record's label, read once per process
        self._tarr: Optional[np.ndarray] = None  # every sample's target (from the two above)
        self._targets_assigned: Any = None  # what `ds.targets = x` set
        if is_valid_file is not None:
            self._select(is_valid_file)
        elif self._pack.selection != ",".join(IMG_EXTENSIONS):
            # The pack holds files ImageFolder would not pick (built with
            # --all-files or other --extensions): filter as it does.
            self._select(lambda p: p.lower().endswith(IMG_EXTENSIONS))
        self._reselect()

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
        indices = np.asarray(recs, dtype=np.int64)
        new_targets = np.asarray(targets, dtype=np.int64)
        labels = self._labels_array()[indices]
        self._set_indices(indices, None if np.array_equal(new_targets, labels) else new_targets)

    # ImageFolder's imgs is the samples list under another name.
    imgs = samples

    @property
    def targets(self) -> Any:
        """The target of every sample, list-like (or what was assigned)."""
        if self._targets_assigned is not None:
            return self._targets_assigned
        return _Targets(self._target_array())

    @targets.setter
    def targets(self, value: Any) -> None:
        # As on ImageFolder: a plain attribute; __getitem__ keeps taking
        # targets from samples.
        self._targets_assigned = value

    def __len__(self) -> int:
        return self._n

    def _labels_array(self) -> np.ndarray:
        """Every record's label (``_core.Reader.labels``), read once per process."""
        if self._labels is None:
            self._labels = self._pack.labels
        return self._labels

    def _target_array(self) -> np.ndarray:
        """Every sample's target, as ``__getitem__`` returns them: the
        relabelled ``samples``' targets, else the labels of the samples'
        records.  Computed once per process and selection."""
        if self._tarr is None:
            if self._sample_targets is not None:
                self._tarr = self._sample_targets
            else:
                labels = self._labels_array()
                self._tarr = labels if self._indices is None else labels[self._indices]
        return self._tarr

    def _set_indices(self, indices: np.ndarray, sample_targets: Optional[np.ndarray]) -> None:
        """Makes the samples the records ``indices``, with ``sample_targets``
        (None: their labels)."""
        self._indices = indices
        self._n = len(indices)
        self._sample_targets = sample_targets
        self._tarr = None

    @property
    def bad_samples(self) -> int:
        """How many bad samples ``on_error="skip"`` / ``"substitute"`` has
        met so far, in this process and its DataLoader workers (0 with
        ``"raise"``)."""
        if self._bad_counts is None:
            return 0
        return int(sum(self._bad_counts))

    # --- samples: one policy around one pipeline, chosen by _reselect ----------

    transform = _Reselects()
    fast_transforms = _Reselects()
    output = _Reselects()
    cache_decoded = _Reselects()
    on_error = _Reselects()

    def _reselect(self) -> None:
        """Chooses the pipeline (:func:`ufspack.pipeline.select`) and the
        ``on_error`` policy around it for the current settings; runs when
        the dataset is made and when one of the attributes they depend on
        is assigned, never per sample."""
        if self.on_error != "raise" and self._bad_counts is None:
            self._bad_counts = multiprocessing.RawArray("q", _COUNTER_SLOTS)
        self._policy = _on_error.select(self, _pipeline.select(self))

    def __getitem__(self, index: int) -> Optional[Tuple[Any, Any]]:
        index = _check_index(index, self._n)
        blocks = self._pack._handle.blocks
        if blocks is not None:
            blocks.before((index,), self._pack._handle.get(), self._indices)
        return self._policy.item(index)

    def __iter__(self) -> Iterator[Optional[Tuple[Any, Any]]]:
        """``ds[0]``, ``ds[1]``, ... ``ds[len(ds) - 1]``.  Defined so that an
        exception from a sample, of any type, propagates: without it Python
        iterates by calling ``__getitem__`` until IndexError, and takes any
        IndexError (one a transform raised, say) for the end of the
        dataset."""
        for k in range(self._n):
            yield self[k]

    def __getitems__(self, indices: Sequence) -> List[Tuple[Any, Any]]:
        """Fetches a batch: reads and decodes all records on
        ``decode_threads`` threads with one GIL release, then applies the
        transforms.  Used by DataLoader versions that support it."""
        n = self._n
        checked = [_check_index(i, n) for i in indices]
        blocks = self._pack._handle.blocks
        if blocks is not None:
            blocks.before(checked, self._pack._handle.get(), self._indices)
        return self._policy.items(checked)

    # --- block reads (BlockSampler) -------------------------------------------

    def _attach_block_reads(self, blocks: Any) -> tuple:
        """Makes every read go block by block (ufspack.BlockSampler);
        returns (pack id, layout)."""
        self._pack._handle.use_blocks(blocks)
        v = self._pack._handle.get().metadata(b"layout")
        return self._pack_id, "" if v is None else os.fsdecode(v)

    def _block_plan_inputs(self) -> tuple:
        return self._pack._handle.get(), self._indices

    def _count_one_bad(self) -> None:
        """Counts a bad sample in this process's slot of ``bad_samples``."""
        slot = 0
        if _in_dataloader_worker():
            from torch.utils.data import get_worker_info

            slot = 1 + get_worker_info().id % (_COUNTER_SLOTS - 1)
        assert self._bad_counts is not None  # on_error != "raise"
        with self._count_lock:
            self._bad_counts[slot] += 1

    @property
    def fast_plan(self) -> Optional[FastPlan]:
        """What ``fast_transforms`` runs natively: the plan for the current
        ``transform`` (recomputed when ``transform`` is reassigned; its
        ``description`` reads "native: ...; python: ..."), or None when
        ``fast_transforms`` is off."""
        return self._plan if self.fast_transforms else None

    @property
    def cached_transforms(self) -> Optional[str]:
        """What ``cache_decoded`` caches for the current ``transform``:
        "decode -> Resize(...) -> CenterCrop(...)" (the rest of
        ``transform`` runs on the cached pixels), or why nothing is
        ("not cached: ..."); None when ``cache_decoded`` is off."""
        d = self._dplan
        if d is None:
            return None
        return d.description if d.name is not None else d.reason

    # --- internals -----------------------------------------------------------
    def _record_of(self, k: int) -> int:
        return k if self._indices is None else int(self._indices[k])

    def _path_of_name(self, name: bytes) -> str:
        return os.path.join(self._source_root, os.fsdecode(name))

    def _select(self, is_valid_file: Callable[[str], bool]) -> None:
        """Keeps the records whose path passes ``is_valid_file`` (O(records)
        calls, as ImageFolder makes them while scanning)."""
        reader = self._pack._handle.get()
        keep = [i for i in range(len(self._pack)) if is_valid_file(self._path_of_name(reader.name(i)))]
        self._set_indices(np.asarray(keep, dtype=np.int64), None)
        labels = self._target_array()
        present = set(np.unique(labels).tolist())
        empty = [c for c, i in self.class_to_idx.items() if i not in present]
        if empty:
            msg = f"Found no valid file for the classes {', '.join(sorted(empty))}. "
            if is_valid_file is None:
                msg += f"Supported extensions are: {', '.join(IMG_EXTENSIONS)}"
            raise FileNotFoundError(msg)

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
        import PIL.Image as Image  # no from-import: that costs a Python call per sample

        try:
            buffer = np.empty((height, width * 4), np.uint8)
            core = Image.core.map_buffer(buffer, (width, height), "raw", 0, ("RGB", width * 4, 1))
        except Exception:
            return Image.new("RGB", (width, height), None)
        return Image.Image()._new(core)

    def _threads(self) -> int:
        if self.decode_threads is not None:
            return self.decode_threads
        return _DEFAULT_DECODE_THREADS_IN_WORKER if _in_dataloader_worker() else _DEFAULT_DECODE_THREADS

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
        state["_labels"] = None  # read again in each process
        state["_tarr"] = None
        del state["_policy"]  # and the plans: chosen again on unpickling
        state["_plan"] = None
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
        self._reselect()


# The name the README's three-line change uses; the same class.
MyImageFolder = ImageFolder
