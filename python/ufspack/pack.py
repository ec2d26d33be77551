"""Pack: the plain record reader (bytes in, bytes out)."""

from __future__ import annotations

import operator
import os
from collections.abc import Sequence
from typing import Any, Dict, Iterator, List, Optional, TypedDict, Union, overload

from ufspack import _core
from ufspack.cache import Cache, CacheArg, resolve_cache

PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]


class RecordInfo(TypedDict):
    """``Pack.record(i)``: one record's index entry."""

    index: int
    name: str
    label: int  # -1 in a flat pack
    size: int  # original length in bytes
    stored_size: int  # bytes in data.ufs (smaller when zstd)
    offset: int  # of the stored bytes in data.ufs
    codec: str  # "raw" or "zstd"
    checksum: int  # XXH3-64 of the stored bytes


class PackInfo(TypedDict):
    """``Pack.info``: header facts."""

    index_path: str
    data_path: str
    version: int
    pack_id: str
    records: int
    classes: int
    data_size: int
    index_size: int
    flat: bool
    parts: int  # of a merged pack (``ufspack merge``); 0 for a single pack
    source_root: Optional[str]


def _fsencode(path: PathLike) -> bytes:
    return os.fsencode(os.fspath(path))


class _Handle:
    """A lazily opened _core.Reader that is reopened in every process.

    No open handle crosses a fork() or a pickle: the reader is opened on
    first use, and again when the process id changes (a DataLoader worker
    started with fork) or after unpickling (spawn).  So is the native
    cache it reads through (``cache`` holds only its parameters).
    """

    __slots__ = ("path", "verify", "cache", "closed", "blocks", "_reader", "_pid")

    def __init__(self, path: bytes, verify: bool, cache: Optional[Cache] = None) -> None:
        self.path = path
        self.verify = verify
        self.cache = cache
        self.closed = False
        # Block reads (a BlockSampler's BlockReads), or None.
        self.blocks: Optional[Any] = None
        self._reader: Optional[_core.Reader] = None
        self._pid = -1

    def use_blocks(self, blocks: Any) -> None:
        """Reads block by block from now on (``blocks``: a
        :class:`ufspack.block_reads.BlockReads`): the reader is reopened."""
        self.blocks = blocks
        self._reader = None

    def get(self) -> _core.Reader:
        if self.closed:
            raise ValueError(f"I/O operation on a closed pack ({os.fsdecode(self.path)})")
        pid = os.getpid()
        if self._reader is None or self._pid != pid:
            native = None if self.cache is None else self.cache._native_or_none()
            b = self.blocks
            self._reader = _core.Reader(self.path, self.verify, native,
                                        block_bytes=0 if b is None else b.cfg.block_bytes,
                                        block_cache_bytes=0 if b is None else b.cache_bytes)
            self._pid = pid
        return self._reader

    def close(self) -> None:
        """Drops this process's reader (unmapping the index and closing the
        data file once nothing else holds them); later use raises."""
        self._reader = None
        self.closed = True

    def __getstate__(self) -> dict:
        return {"path": self.path, "verify": self.verify, "cache": self.cache, "closed": self.closed,
                "blocks": self.blocks}

    def __setstate__(self, state: dict) -> None:
        self.path = state["path"]
        self.verify = state["verify"]
        self.cache = state.get("cache")
        self.closed = state.get("closed", False)
        self.blocks = state.get("blocks")
        self._reader = None
        self._pid = -1


class _Names(Sequence):
    """Record names as str (os.fsdecode of the stored bytes), computed on
    access from the mapped index: no Python list of a million strings."""

    def __init__(self, handle: _Handle, n: int) -> None:
        self._handle = handle
        self._n = n

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(self._n))]
        return os.fsdecode(self._handle.get().name(_check_index(i, self._n)))

    def __iter__(self) -> Iterator[str]:
        reader = self._handle.get()
        for k in range(self._n):
            yield os.fsdecode(reader.name(k))

    def __repr__(self) -> str:
        return f"<{self._n} record names>"


def _check_index(i: Any, n: int) -> int:
    try:
        k = operator.index(i)  # ints, numpy integers, integer torch scalars
    except TypeError:
        raise TypeError(f"record indices must be integers, not {type(i).__name__}") from None
    if k < 0:
        k += n
    if not 0 <= k < n:
        raise IndexError(f"record index {i} out of range (pack has {n} records)")
    return k


class Pack(Sequence):
    """A pack opened for reading: ``pack[i]`` is record *i*'s original bytes.

    Args:
        path: the pack directory (holding ``index.ufs`` and ``data.ufs``) or
            its ``index.ufs`` file.
        verify: check each record's XXH3-64 checksum on read (default); a
            mismatch raises :class:`ufspack.CorruptPackError`.
        cache: read through the node-local cache (:class:`ufspack.Cache`):
            a Cache, a cache directory, None (default: the directory in the
            ``UFSPACK_CACHE`` environment variable, if set) or False (no
            cache even if ``UFSPACK_CACHE`` is set).  Records come from the
            cache when it holds them and are added to it when read from the
            pack.  If the pack is unreachable but was opened through the
            cache before, it opens anyway (``offline``): cached records
            read, the others raise OSError naming the pack.

    Raises:
        FileNotFoundError: the pack does not exist.
        ufspack.CorruptPackError: the pack is damaged or the two files do
            not belong together.
        ValueError: the pack was written by a newer ufspack.

    A Pack can be shared with DataLoader workers (fork or spawn): it pickles
    to its path and reopens lazily in each process.  ``close()`` (or a
    ``with`` block) releases it; using a closed Pack raises ValueError, as
    a closed file does.

    What is safe to do to an open pack: see ``docs/python.md``.
    """

    def __init__(self, path: PathLike, verify: bool = True, cache: CacheArg = None) -> None:
        self.path = os.fsdecode(os.fspath(path))
        #: The :class:`ufspack.Cache` records are read through, or None.
        self.cache = resolve_cache(cache)
        self._handle = _Handle(_fsencode(path), verify, self.cache)
        self._len = len(self._handle.get())
        self._samples: Any = None  # SampleIndex, made on first use

    # --- lifetime -----------------------------------------------------------

    def close(self) -> None:
        """Releases the pack's reader in this process.  Idempotent."""
        self._handle.close()

    @property
    def closed(self) -> bool:
        return self._handle.closed

    @property
    def offline(self) -> bool:
        """True when the pack's files were unreachable at open and it is
        served from ``cache`` alone: records the cache does not hold raise
        OSError naming the pack."""
        return self._handle.get().offline

    def __enter__(self) -> Pack:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- records ------------------------------------------------------------

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, i: int) -> bytes: ...
    @overload
    def __getitem__(self, i: slice) -> list: ...
    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self.read(k) for k in range(*i.indices(self._len))]
        return self.read(i)

    def __iter__(self) -> Iterator[bytes]:
        reader = self._handle.get()
        for k in range(self._len):
            yield reader.read(k)

    def read(self, key: Union[int, str, bytes]) -> bytes:
        """Original bytes of a record, by index or by name (one pread)."""
        i = self.index_of(key)
        reader = self._handle.get()
        if self._handle.blocks is not None:
            self._handle.blocks.before((i,), reader, None)
        return reader.read(i)

    # --- block reads (BlockSampler) -------------------------------------------

    def _attach_block_reads(self, blocks: Any) -> tuple:
        """Makes every read go block by block (ufspack.BlockSampler);
        returns (pack id, layout)."""
        self._handle.use_blocks(blocks)
        v = self._handle.get().metadata(b"layout")
        return self.info["pack_id"], "" if v is None else os.fsdecode(v)

    def _block_plan_inputs(self) -> tuple:
        return self._handle.get(), None

    # --- multi-file samples (ufspack.samples) --------------------------------

    def _sample_index(self) -> Any:
        """The pack's SampleIndex, made on first use (one pass over the
        names) and kept."""
        if self._samples is None:
            from ufspack.samples import SampleIndex

            self._samples = SampleIndex(self._handle.get())
        return self._samples

    @property
    def num_samples(self) -> int:
        """How many multi-file samples the pack holds: records grouped by
        key, as WebDataset groups a shard's files (``ufspack.samples``)."""
        return len(self._sample_index())

    def sample(self, key: Union[int, str, bytes]) -> Dict[str, bytes]:
        """The fields of a multi-file sample, ``{field: bytes}``, by sample
        index or by key (``"train/000123"`` for ``train/000123.jpg``,
        ``train/000123.cls``, ...), read with one request (one pread) when
        its files lie back to back, as the packer writes them.  IndexError
        or KeyError when there is no such sample."""
        from ufspack.samples import read_sample

        index = self._sample_index()
        reader = self._handle.get()
        s = index.find(reader, key) if isinstance(key, (str, bytes)) else operator.index(key)
        return read_sample(reader, index, s)[1]

    def read_many(self, keys: Sequence, threads: int = 4) -> List[bytes]:
        """Original bytes of several records (indices or names), read on up
        to ``threads`` threads with the GIL released: several reads in flight,
        which hides the round trip of a network file system.  The first
        damaged record raises, as ``read`` would."""
        return self._handle.get().read_batch([self.index_of(k) for k in keys], threads)

    def read_into(self, key: Union[int, str, bytes], buffer: Any) -> int:
        """Reads a record into a writable contiguous buffer (bytearray,
        numpy uint8 array, memoryview) without an intermediate copy; returns
        the number of bytes written.  The buffer must be large enough
        (``record(i)["size"]``)."""
        return self._handle.get().read_into(self.index_of(key), buffer)

    def index_of(self, key: Union[int, str, bytes]) -> int:
        if isinstance(key, (str, bytes)):
            return self.find(key)
        return _check_index(key, self._len)

    def find(self, name: Union[str, bytes]) -> int:
        """Index of the record named ``name`` (its path relative to the
        packed directory, e.g. ``"cats/cat.1.jpg"``).  FileNotFoundError if
        there is none."""
        return self._handle.get().find(os.fsencode(name))

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, (str, bytes)):
            return False
        try:
            self.find(name)
            return True
        except FileNotFoundError:
            return False

    def record(self, i: int) -> RecordInfo:
        """Index entry of record ``i``: index, name (str), label, size,
        stored_size, offset, codec, checksum."""
        d = self._handle.get().record(_check_index(i, self._len))
        d["name"] = os.fsdecode(d["name"])
        return d  # type: ignore[return-value]

    def name(self, i: int) -> str:
        return os.fsdecode(self._handle.get().name(_check_index(i, self._len)))

    def label(self, i: int) -> int:
        """Class index of record ``i`` (-1 in a flat pack)."""
        return self._handle.get().label(_check_index(i, self._len))

    # --- pack-level ---------------------------------------------------------

    @property
    def names(self) -> Sequence:
        """All record names (str), list-like, computed on access."""
        return _Names(self._handle, self._len)

    @property
    def labels(self):
        """All labels as a numpy int64 array (-1 in a flat pack)."""
        return self._handle.get().labels()

    @property
    def classes(self) -> list:
        """Class names in label order (empty for a flat pack)."""
        return [os.fsdecode(c) for c in self._handle.get().class_names()]

    @property
    def source_root(self) -> Optional[str]:
        """The directory the pack was built from, as given to build."""
        v = self._handle.get().metadata(b"source_root")
        return None if v is None else os.fsdecode(v)

    @property
    def selection(self) -> Optional[str]:
        """Which files the build selected: ``"*"`` (all files) or the
        comma-separated extensions, e.g. ``".jpg,.jpeg,.png,..."``."""
        v = self._handle.get().metadata(b"extensions")
        return None if v is None else os.fsdecode(v)

    @property
    def layout(self) -> Optional[str]:
        """The order of the records in data.ufs: ``"sorted"`` (the index's),
        ``"shuffled:SEED"``, or ``"source"`` (the order an archive or a
        writer gave them); None when the pack does not say."""
        v = self._handle.get().metadata(b"layout")
        return None if v is None else os.fsdecode(v)

    @property
    def info(self) -> PackInfo:
        """Header facts: version, pack_id, records, classes, sizes, paths."""
        d = self._handle.get().info()
        d["index_path"] = os.fsdecode(d["index_path"])
        d["data_path"] = os.fsdecode(d["data_path"])
        d["source_root"] = self.source_root
        return d  # type: ignore[return-value]

    def check(self) -> None:
        """Full structural check of the index (what ``ufspack verify`` does
        before reading the records).  Raises CorruptPackError."""
        self._handle.get().check_index()

    def __repr__(self) -> str:
        state = f", cache={self.cache.dir!r}" if self.cache is not None else ""
        state += ", closed" if self.closed else ""
        return f"ufspack.Pack({self.path!r}, records={self._len}{state})"
