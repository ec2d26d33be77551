"""ufspack.Writer and ufspack.write: packs of samples a program makes.

``Writer`` is the C++ SampleWriter (packer/include/ufspack/sample_writer.h):
samples added in any order become the pack a build of the same files as a
tree would give.  ``write`` runs a function over inputs on an executor,
each part of the inputs into a pack of its own (a Writer each), and joins
the parts into one merged pack in ImageFolder order (docs/python.md,
"Writing packs from Python").
"""

from __future__ import annotations

import concurrent.futures
import heapq
import operator
import os
import time
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    TypedDict,
    Union,
)

from ufspack import _core
from ufspack.builder import MergeSummary, ProgressFn, _parse_compress, _run_in_parts
from ufspack.pack import PathLike

Name = Union[str, bytes]


class WriterSummary(TypedDict):
    """What ``Writer.close`` returns (``ufspack.build``'s keys that apply)."""

    files: int  # samples written
    classes: int
    compressed: int  # records stored as zstd
    bytes_in: int  # the samples' bytes as added
    bytes_out: int  # data.ufs
    index_bytes: int
    seconds: float  # from the Writer's creation to its close
    pack_id: str


class WriteSummary(MergeSummary):
    """What ``ufspack.write`` returns: a merge's summary (``parts`` counts
    the non-empty parts, those the manifest names) and these."""

    segments: int  # runs of one part's records in the manifest
    part_summaries: List[WriterSummary]


# Labels are u32 below kNoLabel (2**32 - 1), which means none.
_NO_LABEL = 2**32 - 1


def _bytes(s: Union[str, bytes]) -> bytes:
    return s if isinstance(s, bytes) else os.fsencode(s)


class Writer:
    """Writes one pack from samples added in any order.

    ::

        with ufspack.Writer("out.ufspack") as w:
            for name, data in samples:       # "class/file", bytes
                w.add(name, data)

    A name is a path as a file of a tree would have (``"cat/0001.jpg"``;
    ``str``, encoded with ``os.fsencode``, or ``bytes``): no empty, ``.``
    or ``..`` component, no leading ``/``.  Its first component is its
    class: the classes are the sorted first components, labelled 0, 1, ...
    in Python's ``str`` order, as ImageFolder labels its directories.  A
    ``label`` given to ``add`` must agree with that (checked at ``close``,
    or at ``add`` when ``classes`` fixes the classes up front: their names
    in label order, every sample's first component one of them).  With
    ``flat=True`` the pack has no classes (names need not have a ``/``; no
    ``label``).  ``compress``: None, ``"zstd"`` or ``"zstd:<level>"`` as
    ``ufspack.build``.  ``allow_empty``: a class of ``classes`` that gets
    no sample is kept, empty (else ``close`` raises ValueError).
    ``metadata``: entries for the pack's metadata (``layout`` is
    ``"source"``: data.ufs holds the records in the order added).

    ``data`` is any bytes-like object (bytes, bytearray, memoryview, a numpy
    array): its bytes are read in place, without a copy, unless it is not
    C-contiguous.

    The result is the pack ``ufspack.build`` of the same files as a tree
    gives: the same records, names, classes, labels, order and bytes
    (``Pack``, ``MyImageFolder`` and ``ImageFolder`` agree); the metadata
    differs.  It is published atomically by ``close()`` (the end of a
    ``with`` block): until then, and on any error, ``abort()``, an
    exception leaving the ``with`` block or Ctrl-C, the directory keeps
    what it had.  Errors: a bad name or a label that disagrees with fixed
    classes raise ValueError from ``add`` (the writer stays usable); a name
    added twice, a label that disagrees with the sorted classes, or an
    empty class raise ValueError from ``close``, naming the sample, and
    nothing is published.  After ``close()`` or ``abort()``, ``add``,
    ``set_metadata`` and ``close`` raise ValueError (``abort()`` does
    nothing).

    Memory: about 100 bytes plus the name per sample until ``close``; the
    data goes to disk as it is added.  Calls from several threads are safe
    (they take turns).  The output directory is locked while the Writer is
    open, as by a build; a directory holding a merged pack is refused.

    A Writer belongs to the process that opened it.  In a ``fork()`` child
    (``os.fork``, a ``multiprocessing`` fork worker) ``add``,
    ``set_metadata`` and ``close`` raise ValueError before anything is
    written; ``abort()``, leaving a ``with`` block and the Writer's end
    (garbage collection, exit) there leave the parent's files alone, and
    the parent goes on and publishes as if there were no child.  Open a
    Writer per process, each on its own directory (``ufspack.write`` does).
    """

    def __init__(
        self,
        path: PathLike,
        *,
        classes: Optional[Sequence[Name]] = None,
        flat: bool = False,
        compress: Optional[str] = None,
        allow_empty: bool = False,
        metadata: Optional[Mapping[Name, Name]] = None,
    ) -> None:
        mode, level = _parse_compress(compress)
        self.path = os.fsdecode(os.fspath(path))
        if "://" in self.path:
            raise ValueError(f"{self.path.split('?')[0]}: a Writer writes a local directory")
        self._started = time.monotonic()
        self._pid = os.getpid()
        self.summary: Optional[WriterSummary] = None
        self._w: Optional[_core.SampleWriter] = _core.SampleWriter(
            os.fsencode(self.path), compress=mode == "zstd", level=level, flat=flat,
            classes=None if classes is None else [_bytes(c) for c in classes],
            allow_empty=allow_empty)
        try:
            self._w.set_metadata(b"layout", b"source")
            for k, v in (metadata or {}).items():
                self._w.set_metadata(_bytes(k), _bytes(v))
        except BaseException:
            self.abort()
            raise

    def _live(self, what: str) -> _core.SampleWriter:
        if self._pid != os.getpid():
            # Checked here too, before the native writer's lock (which a
            # thread of the parent may have held at the fork) is taken.
            raise ValueError(
                f"{what}: the ufspack.Writer of {self.path} was opened by process {self._pid}; "
                f"this is process {os.getpid()}: a Writer cannot be used across fork() (its "
                "files are the other process's); open one per process")
        if self._w is None:
            state = "closed" if self.summary is not None else "aborted"
            raise ValueError(f"{what}: the Writer of {self.path} is {state}")
        return self._w

    @property
    def closed(self) -> bool:
        """True after ``close()`` or ``abort()``."""
        return self._w is None

    def __len__(self) -> int:
        """Samples added so far (0 once closed)."""
        return 0 if self._w is None else self._w.sample_count

    def add(self, name: Name, data: Any, label: Optional[int] = None) -> None:
        """Adds sample ``name`` (``"class/file"``) with the bytes of ``data``;
        ``label``, when given, must be its class's."""
        w = self._live("add")
        if label is None:
            code = -1
        else:
            code = operator.index(label)
            if code < 0 or code >= _NO_LABEL:
                raise ValueError(f"{os.fsdecode(name)}: label {code} is out of range "
                                 "(a class index, or None for the class's)")
        w.add(_bytes(name), data, code)

    def set_metadata(self, key: Name, value: Name) -> None:
        """Sets a metadata entry of the pack (``Pack`` reads them back)."""
        self._live("set_metadata").set_metadata(_bytes(key), _bytes(value))

    def close(self) -> WriterSummary:
        """Publishes the pack and returns its summary (also kept as
        ``self.summary``).  On error nothing is published."""
        w = self._live("close")
        self._w = None
        pack_id = w.finish()  # abandons the pack itself on error
        classes = len(w.classes)
        self.summary = WriterSummary(
            files=w.sample_count, classes=classes, compressed=w.compressed_count,
            bytes_in=w.bytes_in, bytes_out=w.data_bytes,
            index_bytes=os.stat(os.path.join(self.path, "index.ufs")).st_size,
            seconds=time.monotonic() - self._started, pack_id=pack_id)
        return self.summary

    def abort(self) -> None:
        """Drops everything added: the directory keeps what it had.  Does
        nothing once closed or aborted."""
        w, self._w = self._w, None
        if w is not None and self._pid == os.getpid():
            w.abandon()
        # In a fork() child, dropping the copy is all: the files are the
        # parent's (the native writer never removes them from a child).

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, exc_type: Optional[type], *exc: object) -> None:
        if exc_type is not None:
            self.abort()
        elif self._w is not None:
            self.close()

    def __repr__(self) -> str:
        state = "closed" if self._w is None else f"{len(self)} samples"
        return f"ufspack.Writer({self.path!r}, {state})"


def _samples(result: Any) -> Iterator[Tuple[Name, Any, Optional[int]]]:
    """fn's result as (name, data, label) triples: one sample tuple, or an
    iterable of them."""
    if isinstance(result, tuple) and result and isinstance(result[0], (str, bytes)):
        result = (result,)
    if result is None or isinstance(result, (str, bytes)):
        raise TypeError(f"fn returned {type(result).__name__}: it must return a sample "
                        "(name, data[, label]) or an iterable of them")
    for s in result:
        if not isinstance(s, tuple) or len(s) not in (2, 3) or not isinstance(s[0], (str, bytes)):
            raise TypeError(f"fn gave {s!r:.80}: a sample is a tuple (name, data) or "
                            "(name, data, label), name a str or bytes")
        yield s[0], s[1], s[2] if len(s) == 3 else None


def _write_part(part_dir: str, fn: Callable[[Any], Any], items: Sequence[Any],
                options: Dict[str, Any]) -> Dict[str, Any]:
    """One part of ``write``, run on an executor's worker: ``fn`` over
    ``items`` into a Writer on ``part_dir``.  Its classes are its own
    samples' (unless fixed), so labels given are checked against the
    merged classes by the merge: the part returns, per class, the first
    label given for it and the sample it came with (``given``)."""
    fixed = options["classes"] is not None or options["flat"]
    given: Dict[bytes, Tuple[int, bytes]] = {}
    with Writer(part_dir, classes=options["classes"], flat=options["flat"],
                compress=options["compress"], allow_empty=True,
                metadata=options["metadata"]) as w:
        for item in items:
            for name, data, label in _samples(fn(item)):
                if label is not None and not fixed:
                    label = operator.index(label)
                    key = _bytes(name)
                    cls = key.split(b"/", 1)[0]
                    first = given.setdefault(cls, (label, key))
                    if first[0] != label:
                        raise ValueError(
                            f"{os.fsdecode(key)}: label {label} given, but "
                            f"{os.fsdecode(first[1])} of the same class "
                            f"'{os.fsdecode(cls)}' was given label {first[0]}")
                    label = None
                w.add(name, data, label)
    assert w.summary is not None
    return {"summary": w.summary, "given": given}


def _default_parts(executor: Optional[concurrent.futures.Executor], items: int) -> int:
    if executor is None:
        return 1
    workers = getattr(executor, "_max_workers", None) or os.cpu_count() or 1
    return max(1, min(int(workers), items))


def write(
    fn: Callable[[Any], Any],
    inputs: Iterable[Any],
    out: PathLike,
    *,
    executor: Optional[concurrent.futures.Executor] = None,
    parts: Optional[int] = None,
    classes: Optional[Sequence[Name]] = None,
    flat: bool = False,
    compress: Optional[str] = None,
    allow_empty: bool = False,
    metadata: Optional[Mapping[Name, Name]] = None,
    progress: Optional[ProgressFn] = None,
) -> WriteSummary:
    """Writes the samples ``fn`` makes from ``inputs`` into the pack ``out``,
    in parts, like ``litdata.optimize``.

    ``fn(item)`` returns one sample, a tuple ``(name, data)`` or ``(name,
    data, label)``, or an iterable of them (a list, or a generator, which
    keeps memory bounded): any number per input, named and labelled as for
    ``Writer.add``.  ``inputs`` is listed, then cut into ``parts``
    contiguous slices; each slice runs on ``executor`` (any
    ``concurrent.futures.Executor``: a ``ProcessPoolExecutor``, Dask's
    ``distributed.Client(...).get_executor()``; None runs them here, one
    after another) into a Writer of its own,
    ``out/parts-XXXXXXXX/part-NNNNN``, so ``fn`` and the items must pickle
    for a process pool and the workers must see ``out`` at the same path.
    ``parts`` defaults to 1 without an executor, else to the executor's
    worker count (``max_workers``; the CPU count when it does not say, as
    for Dask: pass ``parts``), at most one per input.

    The parts are then joined into one merged pack, ``out/manifest.ufs``
    (docs/format.md, "Merged packs"; no record is copied): the classes are
    those of every part together, sorted (or ``classes``), each part's
    labels mapped to them, and the records interleaved across the parts in
    ImageFolder order, so ``Pack(out)`` is the pack one ``Writer`` given
    every sample would write, record for record.  A name made twice, in one
    part or two, a label that disagrees with the merged classes (or with
    another label given for its class) raise ValueError naming the sample.
    The manifest lists one segment per run of consecutive records of one
    part: a few when the parts' names fall in ranges of their own (inputs
    in name order), up to one per record when ``fn`` spreads neighbouring
    names across the inputs (24 bytes each; reading is as fast either way).

    ``flat``, ``compress``, ``allow_empty``, ``metadata`` as for Writer.
    ``progress``: called as ``progress(parts_done, parts, 0, 0)``.  The
    previous merged pack in ``out`` is replaced only once the new one is
    published; on any error (``fn`` raising included, re-raised with a note
    naming the part) the new parts are removed and ``out`` is left as it
    was.  Returns the merge's summary (manifest, pack_id, parts, records,
    classes, data_bytes, manifest_bytes, segments, seconds) and
    ``part_summaries`` (each part's Writer summary).
    """
    out_text = os.fsdecode(os.fspath(out))
    if "://" in out_text:
        raise ValueError(f"{out_text.split('?')[0]}: write writes a local directory")
    if flat and classes is not None:
        raise ValueError("a pack without classes (flat=True) takes no classes")
    _parse_compress(compress)
    items = list(inputs)
    n = _default_parts(executor, len(items)) if parts is None else parts
    if n < 1:
        raise ValueError(f"parts must be at least 1, not {n}")
    fixed = None if classes is None else [_bytes(c) for c in classes]
    meta = {b"layout": b"source"}
    meta.update({_bytes(k): _bytes(v) for k, v in (metadata or {}).items()})
    options = {"classes": fixed, "flat": flat, "compress": compress, "metadata": meta}
    slices = [items[k * len(items) // n:(k + 1) * len(items) // n] for k in range(n)]

    def merge_parts(part_dirs: List[str], dst: str, results: List[Any]) -> Dict[str, Any]:
        given = [r["given"] for r in results]
        results[:] = [r["summary"] for r in results]  # the part_summaries returned
        return _merge_sorted(part_dirs, dst, given, fixed, flat, allow_empty, meta)

    summary = _run_in_parts(out, _write_part, [(fn, s, options) for s in slices], executor,
                            progress, merge_parts, "writing")
    return summary  # type: ignore[return-value]


def _merge_sorted(part_dirs: List[str], dst: str, given: List[Dict[bytes, Tuple[int, bytes]]],
                  fixed: Optional[List[bytes]], flat: bool, allow_empty: bool,
                  meta: Dict[bytes, bytes]) -> Dict[str, Any]:
    """Publishes ``dst/manifest.ufs`` over the parts ``write`` wrote: their
    records in ImageFolder order, under the classes of all of them."""
    started = time.monotonic()
    readers = [_core.Reader(os.fsencode(d)) for d in part_dirs]
    used = [k for k, r in enumerate(readers) if len(r) > 0] or [0]
    local = [readers[k].class_names() for k in used]
    if flat:
        classes: List[bytes] = []
    elif fixed is not None:
        classes = fixed
    else:
        classes = sorted({c for cs in local for c in cs}, key=os.fsdecode)
    label_of = {c: g for g, c in enumerate(classes)}
    maps: List[List[int]] = [[] if cs == classes else [label_of[c] for c in cs] for cs in local]
    for g in given:
        for cls, (label, name) in g.items():
            if label_of[cls] != label:
                raise ValueError(
                    f"{os.fsdecode(name)}: label {label} given, but its class "
                    f"'{os.fsdecode(cls)}' is label {label_of[cls]} (the classes in sorted order)")

    def keyed(j: int) -> Iterator[Tuple[int, str, str, int, int]]:
        r, m = readers[used[j]], maps[j]
        for i, label in enumerate(r.labels().tolist()):
            d, _, base = os.fsdecode(r.name(i)).rpartition("/")
            yield (m[label] if m else max(label, 0)), d, base, j, i

    segments: List[List[int]] = []
    counts = [0] * len(classes)
    prev: Optional[Tuple[int, str, str]] = None
    for label, d, base, j, i in heapq.merge(*(keyed(j) for j in range(len(used)))):
        if prev == (label, d, base):
            twice = f"{d}/{base}" if d else base
            raise ValueError(f"sample '{twice}' added twice (by two parts)")
        prev = (label, d, base)
        last = segments[-1] if segments else None
        if last is not None and last[0] == j and last[1] + last[2] == i:
            last[2] += 1
        else:
            segments.append([j, i, 1])
        if not flat:
            counts[label] += 1
    empty = [os.fsdecode(c) for c, n in zip(classes, counts) if n == 0]
    if empty and not allow_empty:
        listed = ", ".join(f"'{c}'" for c in empty[:10]) + (", ..." if len(empty) > 10 else "")
        raise ValueError(f"{len(empty)} class(es) with no sample: {listed} "
                         "(allow_empty keeps them, as ImageFolder's allow_empty)")
    table, first = [], 0
    for c, n in zip(classes, counts):
        table.append((c, first, n))
        first += n
    real_dst = os.path.realpath(dst)
    parts = [(os.fsencode(part_dirs[k]),
              os.fsencode(os.path.relpath(os.path.realpath(part_dirs[k]), real_dst)), m)
             for k, m in zip(used, maps)]
    data_bytes = sum(readers[k].info()["data_size"] for k in used)
    data, pack_id = _core.encode_manifest(parts, [(s[0], s[1], s[2]) for s in segments], table, meta, flat)
    for k in range(len(part_dirs)):
        if k not in used:  # an empty part, not in the manifest
            _remove_pack(part_dirs[k])
    _core.publish_manifest(os.fsencode(dst), data)
    path = os.path.join(dst, "manifest.ufs")
    return {"manifest": path, "pack_id": pack_id, "parts": len(used), "split": False,
            "records": sum(s[2] for s in segments), "classes": len(classes),
            "data_bytes": data_bytes, "manifest_bytes": len(data), "segments": len(segments),
            "seconds": time.monotonic() - started}


def _remove_pack(path: str) -> None:
    for name in ("index.ufs", "data.ufs"):
        try:
            os.unlink(os.path.join(path, name))
        except FileNotFoundError:
            pass
    try:
        os.rmdir(path)
    except OSError:
        pass
