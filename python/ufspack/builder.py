"""ufspack.build: pack a directory from Python (the C++ packer)."""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import tempfile
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, TypedDict, Union, cast

from ufspack import _core
from ufspack.pack import PathLike

ProgressFn = Callable[[int, int, int, int], None]


class BuildSummary(TypedDict):
    """What ``ufspack.build`` returns."""

    files: int
    classes: int
    skipped: int
    not_matching: int  # archive members left out by the extensions (no all_files)
    compressed: int  # records stored as zstd
    bytes_in: int
    bytes_out: int  # data.ufs
    index_bytes: int
    seconds: float
    pack_id: str
    warnings: List[str]


class MergeSummary(TypedDict):
    """What ``ufspack.merge`` returns (and ``ufspack.build`` with ``parts``)."""

    manifest: str
    pack_id: str
    parts: int
    split: bool  # the parts of one ``--part`` split
    records: int
    classes: int
    data_bytes: int
    manifest_bytes: int
    seconds: float


def _tqdm_progress() -> Optional[Callable[..., Any]]:
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm


def build(
    src: Union[PathLike, Sequence[PathLike]],
    dst: PathLike,
    *,
    threads: int = 32,
    compress: Optional[str] = None,
    layout: str = "sorted",
    extensions: Optional[Iterable[str]] = None,
    all_files: bool = False,
    flat: bool = False,
    allow_empty: bool = False,
    skip_unreadable: bool = False,
    progress: Union[bool, ProgressFn] = True,
    staging: Optional[PathLike] = None,
    parts: int = 1,
    part: Optional[int] = None,
    executor: Optional[concurrent.futures.Executor] = None,
    label_field: Optional[str] = None,
) -> BuildSummary:
    """Packs the tree at ``src`` into ``dst`` (``data.ufs`` + ``index.ufs``).

    ``src`` may be an archive file (tar, plain or .gz/.bz2/.xz/.zst, zip, ...):
    it is read once, with nothing extracted, and packed as the tree that
    extracting it gives, each top-level member archive (ImageNet's
    ``n01440764.tar``) a class named after it (docs/cli.md, "Building from an
    archive"); ``layout="shuffled"`` and ``parts`` need a tree.  A brace
    pattern (``"shards-{000000..000099}.tar"``) or a list of archive paths
    (``sorted(glob.glob("shards/*.tar"))``) names several archives
    (WebDataset shards), packed into one pack in that order (at most 1,000,000
    names).  Archives whose first member is a file at the top level are taken
    as WebDataset shards: their samples are packed with every field
    (``000123.jpg``, ``.cls``, ``.json``) and without classes;
    ``label_field="cls"`` labels each sample by the number in its ``.cls``
    file (classes ``"0"``, ``"1"``, ...), as ``--label-field``; ``extensions``
    keeps only the fields named.  An archive with no member is refused
    (``ValueError``), as an empty directory is.

    ``dst`` may be an ``s3://bucket/prefix`` URL: the pack is built in a
    fresh directory under ``staging`` (default: the system's temporary
    directory; it needs room for the whole pack), uploaded (data.ufs first,
    index.ufs last; docs/remote.md) and the local copy removed, whatever
    happens.  The summary then also has ``url`` and ``upload_log`` (lines
    about parts found already uploaded, a stale pack deleted).  With
    ``parts=N`` (and no ``part``) the N parts are built and merged there,
    then uploaded as a merged pack: each part under a key of its own, the
    manifest last (docs/remote.md, "Merged packs on S3"); with an
    ``executor``, ``staging`` must be a directory its workers see.

    The same as ``ufspack build src -o dst``: ImageFolder classes, order and
    labels; ``threads`` files read concurrently; ``compress="zstd"`` or
    ``"zstd:<level>"`` stores records compressed when that saves space;
    ``layout="shuffled"`` or ``"shuffled:<seed>"`` writes data.ufs in a
    seeded permutation (``--layout``; the samples and their order are the
    same, and every byte range then mixes classes, which ``BlockSampler``
    needs); ``extensions`` replaces the image suffixes; ``all_files``, ``flat``,
    ``allow_empty`` and ``skip_unreadable`` as the CLI options.  The pack is
    published atomically: on error or Ctrl-C ``dst`` is left as it was.

    ``progress``: True shows a tqdm bar when tqdm is installed; a callable is
    called as ``progress(files_done, files_total, bytes_in, bytes_out)``
    about four times a second; False shows nothing.  A tree of more than
    about 65,000 files is packed while it is still being listed: until the
    listing ends, ``files_total`` counts the files listed so far and grows.

    Returns a summary: files, classes, skipped, compressed, bytes_in,
    bytes_out, index_bytes, seconds, pack_id, warnings.

    Building in parts (docs/scale.md): with ``parts=N`` and ``part=I``, only
    part I of N of the tree is packed into ``dst`` (``ufspack build --part
    I/N``; the summary adds part, parts, part_first, part_samples and
    split_samples).  With ``parts=N`` and no ``part``, all N parts are built
    on ``executor`` (any ``concurrent.futures.Executor``: a
    ``ProcessPoolExecutor``, Dask's ``distributed.Client(...).get_executor()``,
    Ray's; None builds them one after another here) into a fresh
    ``dst/parts-XXXXXXXX/part-NNNNN`` each, then merged into ``dst``: the
    result opens like one pack built in one go, with the same records in
    the same order.  The workers must see ``src`` and ``dst`` at the same
    paths (a shared file system).  The previous merged pack in ``dst`` (and
    its parts directory) is replaced only once the new one is published; on
    any error the new parts are removed and ``dst`` is left as it was.
    Returns the merge's summary plus ``part_summaries`` (one per part) and
    ``seconds`` (the whole build).

    Raises FileNotFoundError (missing ``src``), ValueError (bad options, an
    empty class, another build writing ``dst``), OSError (I/O errors,
    unreadable files), KeyboardInterrupt.
    """
    if parts < 1:
        raise ValueError(f"parts must be at least 1, not {parts}")
    if isinstance(src, (list, tuple)):
        if not src:
            raise ValueError("src: an empty list of archives")
        if parts > 1:
            raise ValueError("a list of archives is built whole (no parts)")
        for one in src:
            if os.path.isdir(one):
                raise ValueError(f"{os.fsdecode(os.fspath(one))}: a directory; a list names archives "
                                 "(WebDataset shards) packed into one")
        srcs = [os.fsencode(os.fspath(one)) for one in src]
    else:
        srcs = [os.fsencode(os.fspath(src))]  # type: ignore[arg-type]
    if part is not None and not 0 <= part < parts:
        raise ValueError(f"part must be in [0, {parts}), not {part}")
    if executor is not None and (parts == 1 or part is not None):
        raise ValueError("executor needs parts > 1 and no part (it builds every part)")
    dst_text = os.fsdecode(os.fspath(dst))
    if "://" in dst_text and (part is None or parts == 1):
        return _build_remote(src, dst_text, threads=threads, compress=compress, layout=layout,
                             extensions=extensions, all_files=all_files, flat=flat,
                             allow_empty=allow_empty, skip_unreadable=skip_unreadable,
                             progress=progress, staging=staging, parts=parts, executor=executor,
                             label_field=label_field)
    if parts > 1 and part is None:
        if label_field:
            raise ValueError("label_field is for archives, which are built whole (no parts)")
        # (a list of archives was refused above)
        return _build_in_parts(cast(PathLike, src), dst, parts, executor, progress=progress, threads=threads,
                               compress=compress, layout=layout, extensions=extensions,
                               all_files=all_files, flat=flat, allow_empty=allow_empty,
                               skip_unreadable=skip_unreadable)  # type: ignore[return-value]
    mode, level = _parse_compress(compress)
    bar = None
    callback: Optional[ProgressFn] = None
    if callable(progress):
        callback = progress
    elif progress:
        tqdm = _tqdm_progress()
        if tqdm is not None:
            state = {"done": 0}

            def callback(done: int, total: int, bytes_in: int, bytes_out: int) -> None:
                nonlocal bar
                if bar is None:
                    bar = tqdm(total=total, unit="file", desc="packing")
                elif bar.total != total:  # a large tree: the total grows while listed
                    bar.total = total
                    bar.refresh()
                bar.update(done - state["done"])
                state["done"] = done

    if "://" in dst_text:
        raise ValueError(f"{dst_text.split('?')[0]}: a single part is built locally (build "
                         "with parts=N and no part to build, merge and upload every part)")
    try:
        summary = _core.build(
            srcs,
            os.fsencode(os.fspath(dst)),
            threads=threads,
            compress=mode,
            level=level,
            layout=layout,
            extensions=list(extensions) if extensions is not None else None,
            all_files=all_files,
            flat=flat,
            allow_empty=allow_empty,
            skip_unreadable=skip_unreadable,
            progress=callback,
            part=part or 0,
            parts=parts,
            label_field=label_field or "",
        )
    finally:
        if bar is not None:
            bar.close()
    summary["warnings"] = [os.fsdecode(w) for w in summary["warnings"]]
    return summary  # type: ignore[return-value]


def _build_remote(src: Union[PathLike, Sequence[PathLike]], url: str, *, staging: Optional[PathLike], **kw: Any) -> BuildSummary:
    """build() to an s3:// URL: built (with parts > 1: every part, merged)
    under a fresh staging directory, uploaded, the staging removed."""
    if not url.startswith("s3://"):
        raise ValueError(f"{url.split('?')[0]}: read-only: upload to s3:// only")
    parent = os.fsdecode(os.fspath(staging)) if staging is not None else None
    tmp = tempfile.mkdtemp(prefix="ufspack-build-", dir=parent)
    log: List[str] = []
    try:
        local = os.path.join(tmp, "pack")
        summary = build(src, local, **kw)
        _core.upload_pack(os.fsencode(local), url, log=log.append)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    summary["url"] = url  # type: ignore[typeddict-unknown-key]
    summary["upload_log"] = log  # type: ignore[typeddict-unknown-key]
    return summary


def merge(parts: Sequence[PathLike], dst: PathLike) -> MergeSummary:
    """Publishes one pack over ``parts`` in ``dst`` (``ufspack merge``).

    No record is copied: ``dst/manifest.ufs`` names each part by its path
    relative to ``dst`` and its pack id (docs/format.md, "Merged packs").
    The parts are either all the parts of one ``--part`` split (any order)
    or separately built packs (joined in the order given) sharing one class
    table.  Raises ValueError for parts that do not fit together (naming
    the part), FileNotFoundError for a missing one.
    """
    summary = _core.merge([_fsencode(p) for p in parts], _fsencode(dst))
    summary["manifest"] = os.fsdecode(summary["manifest"])
    return summary  # type: ignore[return-value]


class AppendSummary(TypedDict):
    """What ``ufspack.append`` returns."""

    manifest: str
    part: str  # the new part's directory; "" when nothing was appended
    pack_id: str
    appended: int
    records: int
    new_classes: int
    relabeled_classes: int
    kept: int  # records whose files are gone from the tree, kept (0 with files=)
    already_packed: int  # files of the tree (or of files=) the pack already held
    parts: int
    segments: int
    seconds: float
    warnings: List[str]


def append(pack: PathLike, src: PathLike, *, relabel: bool = False, threads: int = 32,
           skip_unreadable: bool = False,
           files: Optional[Iterable[PathLike]] = None,
           layout: Optional[str] = None) -> AppendSummary:
    """Adds the files of the ImageFolder tree ``src`` that ``pack`` lacks
    (``ufspack append``; docs/scale.md).

    Nothing the pack holds is rewritten: the new files become a new part,
    ``pack/append-XXXXXX``, and ``pack/manifest.ufs`` lists the records in
    ImageFolder's order of ``src``, so ``MyImageFolder(pack)`` then equals
    ``ImageFolder(src)`` (records whose files are gone stay in place).  A
    new class sorting before an existing one changes existing labels: that
    raises ValueError naming the classes unless ``relabel=True``.  Crash-safe:
    the manifest is replaced last, by rename.  Returns ``appended`` (0 when
    every file was already packed), ``records``, ``new_classes``,
    ``relabeled_classes``, ``kept``, ``already_packed``, ``parts``,
    ``segments``, ``seconds``.

    ``files`` (``ufspack append --files-from``): append exactly these files,
    paths relative to ``src`` (``"class/x.jpg"``; a leading ``src/`` is
    dropped), without scanning ``src``, so the cost is the listed files',
    whatever the tree's size.  Names the pack holds are skipped, names outside
    its selection skipped with a warning, a name with ``..`` or empty parts
    raises ValueError; the pack's records must be in ImageFolder's order
    (checked for each class that gets a file).

    ``layout``: the new part's data order (``"sorted"``, ``"shuffled[:seed]"``);
    None keeps the pack's own.
    """
    listed = None if files is None else [_fsencode(f) for f in files]
    summary = _core.append(_fsencode(pack), _fsencode(src), relabel=relabel, threads=threads,
                           skip_unreadable=skip_unreadable, files=listed, layout=layout)
    summary["manifest"] = os.fsdecode(summary["manifest"])
    summary["part"] = os.fsdecode(summary["part"])
    summary["warnings"] = [os.fsdecode(w) for w in summary["warnings"]]
    return summary  # type: ignore[return-value]


def _fsencode(path: PathLike) -> bytes:
    return os.fsencode(os.fspath(path))


def _parse_compress(compress: Optional[str]) -> Tuple[str, int]:
    """``compress`` as build and Writer take it (None, ``"zstd"``,
    ``"zstd:<level>"``) -> (mode, level) for _core."""
    if not compress:
        return "none", 3
    name, _, lvl = compress.partition(":")
    if name != "zstd":
        raise ValueError(f"compress must be 'zstd' or 'zstd:<level>', not {compress!r}")
    return "zstd", int(lvl) if lvl else 3


def _build_part(part_dir: str, src: str, part: int, parts: int, options: Dict[str, Any]) -> BuildSummary:
    """One part of ``build(parts=N)``, run on an executor's worker."""
    return build(src, part_dir, parts=parts, part=part, progress=False, **options)


def _build_in_parts(src: PathLike, dst: PathLike, parts: int,
                    executor: Optional[concurrent.futures.Executor],
                    progress: Union[bool, ProgressFn], **options: Any) -> Dict[str, Any]:
    src_s = os.path.abspath(os.fsdecode(os.fspath(src)))
    return _run_in_parts(dst, _build_part, [(src_s, k, parts, options) for k in range(parts)],
                         executor, progress, lambda names, dst_s, _: dict(merge(names, dst_s)),
                         "building")


def _run_in_parts(dst: PathLike, task: Callable[..., Any], args: Sequence[Tuple[Any, ...]],
                  executor: Optional[concurrent.futures.Executor],
                  progress: Union[bool, ProgressFn, None],
                  merge_parts: Callable[[List[str], str, List[Any]], Dict[str, Any]],
                  doing: str) -> Dict[str, Any]:
    """Runs ``task(part_dir, *args[k])`` for each part k, on ``executor``
    (None: here, one after another), each into a fresh
    ``dst/parts-XXXXXXXX/part-NNNNN``, then ``merge_parts(part_dirs, dst,
    results)``, which publishes ``dst`` and returns its summary.  The
    previous parts directories in ``dst`` are removed once the merge is
    published; on any error the new parts are removed and ``dst`` is left
    as it was.  ``progress``, when callable, gets (parts done, parts, 0, 0)
    as each part ends; ``doing`` words the note an error from a part gets.
    Returns merge_parts' summary plus ``part_summaries`` (the results in
    part order) and ``seconds``."""
    import time

    started = time.monotonic()
    parts = len(args)
    dst_s = os.path.abspath(os.fsdecode(os.fspath(dst)))
    os.makedirs(dst_s, exist_ok=True)
    if os.path.exists(os.path.join(dst_s, "index.ufs")):
        raise ValueError(f"{dst_s}: holds a single pack (index.ufs); build in parts into a "
                         "directory of its own")
    work = tempfile.mkdtemp(prefix="parts-", dir=dst_s)
    names = [os.path.join(work, f"part-{k:05d}") for k in range(parts)]
    report: Optional[ProgressFn] = progress if callable(progress) else None
    summaries: List[Any] = [None] * parts
    ok = False
    try:
        if executor is None:
            for k in range(parts):
                summaries[k] = task(names[k], *args[k])
                if report:
                    report(k + 1, parts, 0, 0)
        else:
            futures = {executor.submit(task, names[k], *args[k]): k for k in range(parts)}
            try:
                done = 0
                for f in concurrent.futures.as_completed(futures):
                    k = futures[f]
                    try:
                        summaries[k] = f.result()
                    except BaseException as e:
                        e.add_note(f"while {doing} part {k}/{parts} into {names[k]}")
                        raise
                    done += 1
                    if report:
                        report(done, parts, 0, 0)
            finally:
                for f in futures:
                    f.cancel()
                # Wait for what still runs, so nothing writes under `work`
                # once it is removed.
                concurrent.futures.wait(list(futures))
        summary = merge_parts(names, dst_s, summaries)
        ok = True
    finally:
        if not ok:
            shutil.rmtree(work, ignore_errors=True)
    # The new manifest is published: older parts directories are unused.
    for entry in os.listdir(dst_s):
        old = os.path.join(dst_s, entry)
        if entry.startswith("parts-") and old != work and os.path.isdir(old):
            shutil.rmtree(old, ignore_errors=True)
    summary["part_summaries"] = summaries
    summary["seconds"] = time.monotonic() - started
    return summary
