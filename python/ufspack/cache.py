"""Cache: the node-local cache (docs/python.md, "Node-local cache").

A directory on local disk (and optionally a RAM tier in front of it) that
every process and every job on the machine shares, with no daemon: records
read from slow storage are kept there, checksummed, and served from there
the next time.  The C++ side is ``ufspack/cache.h``; this module holds only
the parameters and opens the native cache lazily in each process.
"""

from __future__ import annotations

import atexit
import multiprocessing.util
import os
import sys
import threading
from typing import Any, Dict, List, Optional, Tuple, TypedDict, Union

from ufspack import _core

PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]

#: The environment variable naming the cache directory used when no
#: ``cache=`` is given (``UFSPACK_CACHE=/local/nvme/ufspack-cache``).
ENV_VAR = "UFSPACK_CACHE"


class CacheTierStats(TypedDict):
    """``Cache.stats()`` and ``Cache.stat(dir)``: one tier's figures.

    The counters live in the directory and count every process that used
    it since it was created (or last cleared while unused)."""

    dir: str
    limit: int  # bytes the tier may hold
    charged_bytes: int  # space reserved for entries (<= limit)
    disk_bytes: int  # allocated on disk (st_blocks), <= charged_bytes
    entries: int
    tables: int  # packs (and sample tables) held
    hits: int
    misses: int
    inserts: int
    refused: int  # admissions refused: the tier was full
    dropped: int  # damaged entries found and dropped
    errors: int  # failed cache reads or writes (EIO, ENOSPC)
    evicted_tables: int


def _stats(d: dict) -> CacheTierStats:
    d["dir"] = os.fsdecode(d["dir"])
    return d  # type: ignore[return-value]


# One native cache per parameters per process: (pid, _core.Cache).  A
# process that inherits the dict through fork() opens its own.
_Key = Tuple[bytes, int, bytes, int]
_natives: Dict[_Key, Tuple[int, _core.Cache]] = {}
_natives_lock = threading.Lock()


def _native_for(key: _Key) -> _core.Cache:
    pid = os.getpid()
    with _natives_lock:
        got = _natives.get(key)
        if got is not None and got[0] == pid:
            return got[1]
    native = _core.Cache(*key)  # creates the directory if needed: GIL released
    with _natives_lock:
        got = _natives.get(key)
        if got is not None and got[0] == pid:
            return got[1]  # another thread opened it meanwhile
        _natives[key] = (pid, native)
    # Hits and misses reach the directory's counters in lumps: flush at
    # exit, including a DataLoader worker's, which ends with os._exit()
    # after running multiprocessing's finalizers (not atexit's).
    atexit.register(native.flush_stats)
    multiprocessing.util.Finalize(native, native.flush_stats, exitpriority=10)
    return native


class Cache:
    """The node-local cache directory ``dir``.

    Args:
        dir: the cache directory on local disk (NVMe, SSD), created if
            missing; it must be new, empty or a ufspack cache.  Relative
            paths are made absolute.
        limit: bytes the directory may hold.  0 (default): the limit the
            directory already has, or for a new one half of its file
            system's free space.  The limit holds with any number of
            processes filling the cache at once; a full cache refuses new
            entries (reads then go to the source) and evicts only whole
            packs that no running process uses.
        ram_dir: optional RAM tier in front of ``dir``: a tmpfs directory
            such as ``/dev/shm/ufspack``.  New entries go to the first tier
            with room.  A tmpfs that can hold less than 128 MiB (Docker's
            64 MB ``/dev/shm``) is reported once on stderr and not used.
        ram_limit: the RAM tier's limit (0: as for ``limit``).

    Give it as ``Pack(path, cache=...)`` or ``MyImageFolder(root,
    cache=...)``, or a directory path there, or set ``UFSPACK_CACHE=dir``
    in the environment.  Raises ``OSError`` when the directory cannot be
    created or is not a ufspack cache.

    A Cache pickles to its parameters (DataLoader workers, fork or spawn):
    each process opens the directory itself, on first use.  Thread-safe.
    """

    def __init__(
        self,
        dir: PathLike,
        limit: int = 0,
        ram_dir: Optional[PathLike] = None,
        ram_limit: int = 0,
        *,
        _open_now: bool = True,
    ) -> None:
        self.dir = os.path.abspath(os.fsdecode(os.fspath(dir)))
        self.ram_dir: Optional[str] = None if not ram_dir else os.path.abspath(os.fsdecode(os.fspath(ram_dir)))
        for name, value in (("limit", limit), ("ram_limit", ram_limit)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"Cache: {name} must be a byte count >= 0, not {value!r}")
        self.limit = limit
        self.ram_limit = ram_limit
        if _open_now:
            self._native()  # open now: a bad directory raises here

    def _key(self) -> _Key:
        ram = os.fsencode(self.ram_dir) if self.ram_dir else b""
        return (os.fsencode(self.dir), self.limit, ram, self.ram_limit)

    def _native(self) -> _core.Cache:
        """This process's native cache (opened on first use in each process)."""
        return _native_for(self._key())

    def _native_or_none(self) -> Optional[_core.Cache]:
        """This process's native cache for reading through, or None: a cache
        that cannot be opened (damaged or tampered with, unreadable,
        read-only, not a cache directory, on a full disk) is reported once
        per process on stderr and reads go to the source.  A cache never
        fails a read."""
        try:
            return self._native()
        except (OSError, ValueError) as e:
            warn_once(self.dir, f"cache {self.dir} not used ({e}); reading from the source")
            return None

    def stats(self) -> List[CacheTierStats]:
        """The figures of each tier in use, RAM tier first: limit, bytes,
        entries, hits, misses, inserts, refused, dropped, errors..."""
        return [_stats(d) for d in self._native().stats()]

    @staticmethod
    def stat(dir: PathLike) -> CacheTierStats:
        """The figures of the cache directory ``dir`` without attaching to
        it (what ``ufspack cache stat`` would show).  FileNotFoundError when
        it is not a cache directory."""
        return _stats(_core.Cache.stat(os.fsencode(os.fspath(dir))))

    @staticmethod
    def clear(dir: PathLike) -> int:
        """Removes every pack and sample table of ``dir`` that no running
        process uses; returns how many were in use and left in place."""
        return _core.Cache.clear(os.fsencode(os.fspath(dir)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Cache) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        args = [repr(self.dir)]
        if self.limit:
            args.append(f"limit={self.limit}")
        if self.ram_dir:
            args.append(f"ram_dir={self.ram_dir!r}")
        if self.ram_limit:
            args.append(f"ram_limit={self.ram_limit}")
        return f"ufspack.Cache({', '.join(args)})"


CacheArg = Union[None, bool, str, "os.PathLike[str]", Cache]


_warned: Dict[Tuple[int, str], bool] = {}


def warn_once(key: str, message: str) -> None:
    """Prints ``ufspack: warning: <message>`` on stderr once per process and
    key, as the C++ library warns."""
    k = (os.getpid(), key)
    with _natives_lock:
        if k in _warned:
            return
        _warned[k] = True
    print(f"ufspack: warning: {message}", file=sys.stderr, flush=True)


def resolve_cache(cache: Any) -> Optional[Cache]:
    """``cache=`` as Pack and MyImageFolder take it: a Cache, a directory,
    None (the ``UFSPACK_CACHE`` environment variable if set, else no cache)
    or False (no cache, whatever the environment says)."""
    if cache is False:
        return None
    if cache is None:
        env = os.environ.get(ENV_VAR)
        if not env:
            return None
        # Opened on first use: one that cannot be is reported, not raised.
        return Cache(env, _open_now=False)
    if isinstance(cache, Cache):
        return cache
    if isinstance(cache, (str, bytes, os.PathLike)):
        return Cache(cache, _open_now=False)
    raise TypeError(
        f"cache must be a ufspack.Cache, a directory path, None (use ${ENV_VAR}) or False, not {cache!r}"
    )
