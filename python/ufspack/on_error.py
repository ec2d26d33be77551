"""``MyImageFolder(on_error=...)``: what a bad sample does, chosen once.

One policy object wraps the dataset's pipeline (:mod:`ufspack.pipeline`)
and turns sample indices into ``(sample, target)`` pairs: ``item(k)`` for
``__getitem__``, ``items(ks)`` for ``__getitems__``.  A pipeline reports a
failure ``on_error`` covers as a :class:`~ufspack.pipeline.Failed`; the
policy raises its error (:class:`Raise`), leaves the sample out
(:class:`Skip`: ``item`` returns None) or loads the next good sample in its
place (:class:`Substitute`).  Skip and Substitute warn
(``BadSampleWarning``) and count each bad sample met.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, List, Optional, Tuple

from ufspack import _core
from ufspack.pipeline import Failed, Pipeline

if TYPE_CHECKING:
    from ufspack.dataset import ImageFolder

Item = Tuple[Any, Any]


class BadSampleWarning(UserWarning):
    """A damaged or undecodable sample was skipped or substituted
    (``MyImageFolder(on_error="skip" | "substitute")``)."""


def _target(ds: ImageFolder, k: int) -> Any:
    """Sample ``k``'s target (from the per-sample targets array: no native
    lookup), through ``target_transform``."""
    targets = ds._tarr
    if targets is None:
        targets = ds._target_array()
    target = int(targets[k])
    tt = ds.target_transform
    return target if tt is None else tt(target)


class Raise:
    """``on_error="raise"``: a bad sample's error propagates."""

    def __init__(self, ds: ImageFolder, pipeline: Pipeline) -> None:
        self.ds = ds
        self.pipeline = pipeline

    def item(self, k: int) -> Optional[Item]:
        """``ds[k]`` for an index already checked."""
        ds = self.ds
        rec = k if ds._indices is None else int(ds._indices[k])
        x = self.pipeline.load_one(ds._pack._handle.get(), rec)
        if isinstance(x, Failed):
            raise x.error
        return x, _target(ds, k)

    def items(self, ks: List[int]) -> List[Item]:
        """``ds.__getitems__`` for indices already checked."""
        ds = self.ds
        recs = [ds._record_of(k) for k in ks]
        out: List[Item] = []
        for k, x in zip(ks, self.pipeline.load_many(ds._pack._handle.get(), recs, ds._threads(), False)):
            if isinstance(x, Failed):
                raise x.error
            out.append((x, _target(ds, k)))
        return out


class Skip(Raise):
    """``on_error="skip"``: a bad sample is left out (``item``: None)."""

    def item(self, k: int) -> Optional[Item]:
        ds = self.ds
        reader = ds._pack._handle.get()
        x = self.pipeline.load_one(reader, ds._record_of(k))
        if isinstance(x, Failed):
            return self.on_bad(reader, k, x.error)
        return x, _target(ds, k)

    def items(self, ks: List[int]) -> List[Item]:
        ds = self.ds
        reader = ds._pack._handle.get()
        recs = [ds._record_of(k) for k in ks]
        out: List[Item] = []
        for k, x in zip(ks, self.pipeline.load_many(reader, recs, ds._threads(), True)):
            got = self.on_bad(reader, k, x.error) if isinstance(x, Failed) else (x, _target(ds, k))
            if got is not None:
                out.append(got)
        return out

    def on_bad(self, reader: _core.Reader, k: int, error: BaseException) -> Optional[Item]:
        """What sample ``k``, which failed with ``error``, becomes."""
        self.count_bad(reader, k, error, "skipped")
        return None

    def count_bad(self, reader: _core.Reader, k: int, error: BaseException, what: str) -> None:
        """Counts a bad sample (this process's slot) and warns, naming it."""
        ds = self.ds
        ds._count_one_bad()
        rec = ds._record_of(k)
        path = ds._path_of_name(reader.name(rec))
        warnings.warn(
            f"ufspack: bad sample {k} (record {rec}, {path}): {type(error).__name__}: {error}; {what}",
            BadSampleWarning,
            stacklevel=5,  # the caller of __getitem__ / __getitems__
        )


class Substitute(Skip):
    """``on_error="substitute"``: the next good sample (``k+1``, ``k+2``,
    ... wrapping around) takes a bad sample's place."""

    def on_bad(self, reader: _core.Reader, k: int, error: BaseException) -> Optional[Item]:
        ds = self.ds
        n = len(ds)
        for step in range(1, n):
            j = (k + step) % n
            x = self.pipeline.load_one(reader, ds._record_of(j))
            if isinstance(x, Failed):
                self.count_bad(reader, j, x.error, "met while looking for a substitute")
                continue
            self.count_bad(reader, k, error, f"replaced by sample {j}")
            return x, _target(ds, j)
        self.count_bad(reader, k, error, "no good sample left to substitute")
        raise error


POLICIES = {"raise": Raise, "skip": Skip, "substitute": Substitute}


def select(ds: ImageFolder, pipeline: Pipeline) -> Raise:
    """The policy of ``ds.on_error`` around ``pipeline``."""
    return POLICIES[ds.on_error](ds, pipeline)


__all__ = ["BadSampleWarning", "Raise", "Skip", "Substitute", "select"]
