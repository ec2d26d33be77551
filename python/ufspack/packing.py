"""ufspack.build: pack a directory from Python (the C++ packer)."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, Callable, Iterable, List, Optional, TypedDict, Union

from ufspack import _core
from ufspack.pack import PathLike

ProgressFn = Callable[[int, int, int, int], None]


class BuildSummary(TypedDict):
    """What ``ufspack.build`` returns."""

    files: int
    classes: int
    skipped: int
    compressed: int  # records stored as zstd
    bytes_in: int
    bytes_out: int  # data.ufs
    index_bytes: int
    seconds: float
    pack_id: str
    warnings: List[str]


def _tqdm_progress() -> Optional[Callable[..., Any]]:
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm


def build(
    src: PathLike,
    dst: PathLike,
    *,
    threads: int = 32,
    compress: Optional[str] = None,
    extensions: Optional[Iterable[str]] = None,
    all_files: bool = False,
    flat: bool = False,
    allow_empty: bool = False,
    skip_unreadable: bool = False,
    progress: Union[bool, ProgressFn] = True,
    staging: Optional[PathLike] = None,
) -> BuildSummary:
    """Packs the tree at ``src`` into ``dst`` (``data.ufs`` + ``index.ufs``).

    ``dst`` may be an ``s3://bucket/prefix`` URL: the pack is built in a
    fresh directory under ``staging`` (default: the system's temporary
    directory; it needs room for the whole pack), uploaded (data.ufs first,
    index.ufs last; docs/remote.md) and the local copy removed, whatever
    happens.  The summary then also has ``url``.

    The same as ``ufspack build src -o dst``: ImageFolder classes, order and
    labels; ``threads`` files read concurrently; ``compress="zstd"`` or
    ``"zstd:<level>"`` stores records compressed when that saves space;
    ``extensions`` replaces the image suffixes; ``all_files``, ``flat``,
    ``allow_empty`` and ``skip_unreadable`` as the CLI options.  The pack is
    published atomically: on error or Ctrl-C ``dst`` is left as it was.

    ``progress``: True shows a tqdm bar when tqdm is installed; a callable is
    called as ``progress(files_done, files_total, bytes_in, bytes_out)``
    about four times a second; False shows nothing.

    Returns a summary: files, classes, skipped, compressed, bytes_in,
    bytes_out, index_bytes, seconds, pack_id, warnings.

    Raises FileNotFoundError (missing ``src``), ValueError (bad options, an
    empty class, another build writing ``dst``), OSError (I/O errors,
    unreadable files), KeyboardInterrupt.
    """
    mode, level = "none", 3
    if compress:
        name, _, lvl = compress.partition(":")
        if name != "zstd":
            raise ValueError(f"compress must be 'zstd' or 'zstd:<level>', not {compress!r}")
        mode = "zstd"
        if lvl:
            level = int(lvl)
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
                bar.update(done - state["done"])
                state["done"] = done

    dst_text = os.fsdecode(os.fspath(dst))
    if "://" in dst_text:
        return _build_remote(src, dst_text, threads=threads, compress=compress, extensions=extensions,
                             all_files=all_files, flat=flat, allow_empty=allow_empty,
                             skip_unreadable=skip_unreadable, progress=progress, staging=staging)
    try:
        summary = _core.build(
            os.fsencode(os.fspath(src)),
            os.fsencode(os.fspath(dst)),
            threads=threads,
            compress=mode,
            level=level,
            extensions=list(extensions) if extensions is not None else None,
            all_files=all_files,
            flat=flat,
            allow_empty=allow_empty,
            skip_unreadable=skip_unreadable,
            progress=callback,
        )
    finally:
        if bar is not None:
            bar.close()
    summary["warnings"] = [os.fsdecode(w) for w in summary["warnings"]]
    return summary  # type: ignore[return-value]


def _build_remote(src: PathLike, url: str, *, staging: Optional[PathLike], **kw: Any) -> BuildSummary:
    if not url.startswith("s3://"):
        raise ValueError(f"{url.split('?')[0]}: read-only: upload to s3:// only")
    parent = os.fsdecode(os.fspath(staging)) if staging is not None else None
    tmp = tempfile.mkdtemp(prefix="ufspack-build-", dir=parent)
    try:
        local = os.path.join(tmp, "pack")
        summary = build(src, local, **kw)
        _core.upload_pack(os.fsencode(local), url)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    summary["url"] = url  # type: ignore[typeddict-unknown-key]
    return summary
