"""The dataset's side of block reads: fetching the blocks of the samples a
process will be asked for next (see :mod:`ufspack.block_schedule`).

A :class:`ufspack.BlockSampler` attaches one :class:`BlockReads` to its
dataset.  It travels with the dataset to DataLoader workers (fork or
spawn).  In each process the pack is then opened with block reads
(``_core.Reader(block_bytes=...)``), and before a sample is read its
process computes, once per epoch, the order the sampler yields (the same
pure function, from the epoch the sampler published in shared memory) and
asks the reader to fetch, in the background, the blocks of its next
samples: those of the current window and ``prefetch`` blocks beyond.  A
worker reads only its own lane of the order, so no block is fetched by two
workers (docs/remote.md, "Block reads").
"""

from __future__ import annotations

import multiprocessing
import warnings
from typing import Any, List, Optional, Sequence

import numpy as np

from . import block_schedule as _schedule

# Shared words: [generation, epoch, stages, then per stage: epoch,
# replicas, yielded, lanes, batch_size].  generation 0: no epoch yet.
_MAX_STAGES = 8
_WORDS = 3 + 5 * _MAX_STAGES


class Plan:
    """The blocks of a dataset's samples: ``first``/``members`` (block b's
    samples are ``members[first[b]:first[b + 1]]``) and each sample's block.
    Computed from the index once per process (one pass, O(records))."""

    def __init__(self, reader: Any, block_bytes: int, sample_records: Optional[np.ndarray]) -> None:
        first, members = reader.block_members(block_bytes)
        if sample_records is None:
            self.first, self.members = first, members
            self.block_of = np.empty(len(members), dtype=np.int64)
            self.block_of[members] = np.repeat(np.arange(len(first) - 1), np.diff(first))
        else:
            # Samples are a selection of the records: group them by their
            # record's block.
            block_of_record = np.empty(len(members), dtype=np.int64)
            block_of_record[members] = np.repeat(np.arange(len(first) - 1), np.diff(first))
            self.block_of = block_of_record[sample_records]
            self.members = np.argsort(self.block_of, kind="stable")
            counts = np.bincount(self.block_of, minlength=len(first) - 1)
            self.first = np.concatenate(([0], np.cumsum(counts)))
        blocks = int(np.count_nonzero(np.diff(self.first)))
        self.samples_per_block = len(self.members) / max(1, blocks)


class Shared:
    """The epoch and resume point the sampler publishes to the workers."""

    def __init__(self) -> None:
        self.words = multiprocessing.RawArray("q", _WORDS)

    def publish(self, epoch: int, resume: Optional[_schedule.Resume]) -> None:
        stages = stage_list(resume)
        w = self.words
        w[1] = epoch
        if len(stages) > _MAX_STAGES:
            w[2] = -1  # the workers fetch on demand only
        else:
            w[2] = len(stages)
            for k, s in enumerate(stages):
                w[3 + 5 * k : 8 + 5 * k] = [s.epoch, s.replicas, s.yielded, s.lanes, s.batch_size]
        w[0] += 1  # last: a reader that sees it sees the rest

    def read(self) -> tuple:
        w = self.words
        gen = w[0]
        epoch, n = w[1], w[2]
        if n < 0:
            return gen, epoch, None, False
        resume = None
        for k in reversed(range(n)):
            e, rep, y, lanes, bs = w[3 + 5 * k : 8 + 5 * k]
            resume = _schedule.Resume(e, rep, y, lanes, bs, resume)
        return gen, epoch, resume, True

    def __getstate__(self) -> dict:
        # As the dataset's counters: only a process being spawned (a
        # DataLoader worker) shares it; a plain pickle gets its own.
        if multiprocessing.context.get_spawning_popen() is None:
            return {"words": None}
        return {"words": self.words}

    def __setstate__(self, state: dict) -> None:
        self.words = state["words"] if state["words"] is not None else multiprocessing.RawArray("q", _WORDS)


class BlockReads:
    """Attached to a dataset by a BlockSampler (see the module docstring)."""

    def __init__(self, cfg: _schedule.Config, replicas: int, rank: int, prefetch: int,
                 shared: Shared) -> None:
        self.cfg = cfg
        self.replicas = replicas
        self.rank = rank
        self.prefetch = prefetch
        self.shared = shared
        self._reset()

    def _reset(self) -> None:
        self._plan: Optional[Plan] = None
        self._gen = 0
        self._seq: Optional[np.ndarray] = None  # this process's samples, in order
        self._pos: Optional[np.ndarray] = None  # sample -> position in _seq (-1)
        # Where each window of _seq starts (and its end); None: _seq is not
        # in windows (the interleaved order of lanes read by one process).
        self._bounds: Optional[np.ndarray] = None
        self._asked = -1  # windows [0, _asked] asked for already
        self._next = 0  # without windows: _seq[:_next] asked for already
        self._warned = False

    @property
    def cache_bytes(self) -> int:
        """The memory bound per process: the window being read, the
        ``prefetch`` windows fetched while it is read, and two blocks of
        slack (a block's extent exceeds block_bytes by up to one record)."""
        return ((1 + self.prefetch) * self.cfg.window + 2) * self.cfg.block_bytes

    def plan(self, reader: Any, sample_records: Optional[np.ndarray]) -> Plan:
        if self._plan is None:
            self._plan = Plan(reader, self.cfg.block_bytes, sample_records)
        return self._plan

    def before(self, samples: Sequence[int], reader: Any, sample_records: Optional[np.ndarray]) -> None:
        """Called with the samples about to be read: starts the background
        fetches of the blocks this process needs next (those of the window
        being read and of the ``prefetch`` windows after it).  Never raises
        for a sample outside the order (it is read on demand)."""
        gen, epoch, resume, complete = self.shared.read()
        if gen == 0 or not complete:
            return
        if gen != self._gen:
            self._load(reader, sample_records, epoch, resume)
            self._gen = gen
        assert self._pos is not None and self._seq is not None and self._plan is not None
        p = max(int(self._pos[s]) for s in samples) if len(samples) else -1
        if p < 0:
            return
        if self._bounds is not None:
            w = int(np.searchsorted(self._bounds, p, side="right")) - 1
            last = min(w + self.prefetch, len(self._bounds) - 2)
            if last <= self._asked:
                return
            a, b = self._bounds[self._asked + 1], self._bounds[last + 1]
            self._asked = last
        else:
            a = self._next
            b = min(len(self._seq), p + int(self.cfg.window * self._plan.samples_per_block) + 1)
            if b <= a:
                return
            self._next = b
        want = self._seq[a:b]
        if sample_records is not None:
            want = sample_records[want]
        reader.prefetch_blocks(np.ascontiguousarray(want, dtype=np.int64))

    def _load(self, reader: Any, sample_records: Optional[np.ndarray], epoch: int,
              resume: Optional[_schedule.Resume]) -> None:
        plan = self.plan(reader, sample_records)
        order, lanes, bounds = _schedule.epoch_order(plan.first, plan.members, plan.block_of,
                                                     self.cfg, epoch, self.replicas, self.rank, resume)
        seq, windows = order, (bounds[0] if self.cfg.lanes == 1 else None)
        info = _worker_info()
        if info is not None and info.num_workers > 1:
            if self.cfg.lanes == info.num_workers:
                seq, windows = lanes[info.id], bounds[info.id]
            elif not self._warned:
                self._warned = True
                warnings.warn(
                    f"BlockSampler was made with num_workers={self.cfg.lanes if self.cfg.lanes > 1 else None} "
                    f"but this DataLoader has {info.num_workers} workers: each worker fetches the "
                    "blocks of every batch (bytes fetched x workers); pass BlockSampler(..., "
                    f"batch_size=<the DataLoader's>, num_workers={info.num_workers})",
                    UserWarning,
                    stacklevel=3,
                )
                windows = None
        pos = np.full(len(plan.block_of), -1, dtype=np.int64)
        pos[seq] = np.arange(len(seq))
        self._seq, self._pos, self._bounds, self._asked, self._next = seq, pos, windows, -1, 0

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        for k in ("_plan", "_seq", "_pos"):
            state[k] = None  # computed again in each process
        state["_gen"] = 0
        state["_next"] = 0
        state["_bounds"] = None
        state["_asked"] = -1
        return state


def _worker_info() -> Any:
    try:
        from torch.utils.data import get_worker_info
    except ImportError:  # pragma: no cover - torch is optional for Pack users
        return None
    return get_worker_info()


def stage_list(resume: Optional[_schedule.Resume]) -> List[_schedule.Resume]:
    out = []
    while resume is not None:
        out.append(resume)
        resume = resume.previous
    return out
