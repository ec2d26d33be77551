"""The dataset's side of block reads: fetching the blocks of the samples a
process will be asked for next (see :mod:`ufspack.block_schedule`).

A :class:`ufspack.BlockSampler` attaches one :class:`BlockReads` to its
dataset.  It travels with the dataset to DataLoader workers (fork or
spawn).  In each process the pack is then opened with block reads
(``_core.Reader(block_bytes=...)``), and before a sample is read its
process makes, window by window, the part of the order the sampler yields
that it reads (the same pure function, from the epoch the sampler
published in shared memory) and asks the reader to fetch, in the
background, the blocks of its next samples: those of the current window
and of ``prefetch`` windows beyond.  A worker reads only its own lane of
the order, so no block is fetched by two workers (docs/remote.md, "Block
reads").
"""

from __future__ import annotations

import multiprocessing
import warnings
from typing import Any, Dict, Iterator, List, Optional, Sequence

import numpy as np

from . import block_schedule as _schedule

# Shared words: [generation, epoch, stages, then per stage: epoch,
# replicas, yielded, lanes, batch_size].  generation 0: no epoch yet.
_MAX_STAGES = 8
_WORDS = 3 + 5 * _MAX_STAGES


class Plan:
    """The blocks of a dataset's samples: block b's samples are
    ``members[first[b]:first[b + 1]]``.  Computed from the index once per
    process (one pass, O(records), in C++: Reader.block_members)."""

    def __init__(self, reader: Any, block_bytes: int, sample_records: Optional[np.ndarray]) -> None:
        first, members = reader.block_members(block_bytes)
        if sample_records is None:
            self.first, self.members = first, members
        else:
            # Samples are a selection of the records: group them by their
            # record's block.
            block_of_record = np.empty(len(members), dtype=np.int64)
            block_of_record[members] = np.repeat(np.arange(len(first) - 1), np.diff(first))
            block_of = block_of_record[sample_records]
            self.members = np.argsort(block_of, kind="stable")
            counts = np.bincount(block_of, minlength=len(first) - 1)
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
        self._cursor: Optional[_Cursor] = None  # this process's part of the order
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
        assert self._cursor is not None
        want = self._cursor.before(samples)
        if want is None:
            return
        if sample_records is not None:
            want = sample_records[want]
        reader.prefetch_blocks(np.ascontiguousarray(want, dtype=np.int64))

    def _load(self, reader: Any, sample_records: Optional[np.ndarray], epoch: int,
              resume: Optional[_schedule.Resume]) -> None:
        plan = self.plan(reader, sample_records)
        order = _schedule.epoch_order(plan.first, plan.members, self.cfg, epoch, self.replicas,
                                      self.rank, resume)
        info = _worker_info()
        workers = info.num_workers if info is not None else 1
        windows: Optional[Iterator[np.ndarray]] = None
        if self.cfg.lanes == workers:  # this process reads one lane
            lane = order.lanes[info.id if info is not None else 0]
            windows = (lane.window(w) for w in range(lane.windows))
        else:
            if workers > 1 and not self._warned:
                self._warned = True
                warnings.warn(
                    f"BlockSampler was made with num_workers={self.cfg.lanes if self.cfg.lanes > 1 else None} "
                    f"but this DataLoader has {workers} workers: each worker fetches the "
                    "blocks of every batch (bytes fetched x workers); pass BlockSampler(..., "
                    f"batch_size=<the DataLoader's>, num_workers={workers})",
                    UserWarning,
                    stacklevel=3,
                )
            windows = _chunks(order.positions(), int(self.cfg.window * plan.samples_per_block) + 1)
        self._cursor = _Cursor(windows, order.blocks, self.prefetch)

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_plan"] = None  # computed again in each process
        state["_cursor"] = None
        state["_gen"] = 0
        return state


def _chunks(batches: Iterator[np.ndarray], size: int) -> Iterator[np.ndarray]:
    """The interleaved order (batch by batch) in chunks of about ``size``."""
    got: List[np.ndarray] = []
    n = 0
    for b in batches:
        got.append(b)
        n += len(b)
        if n >= size:
            yield np.concatenate(got)
            got, n = [], 0
    if got:
        yield np.concatenate(got)


class _Cursor:
    """This process's part of the order, made window by window as it is
    read: which window each sample of the windows made so far is in, and
    which windows' blocks were asked for.  Holds at most the window being
    read, the one before and ``prefetch + 2`` ahead."""

    def __init__(self, windows: Iterator[np.ndarray], blocks: _schedule.Blocks, prefetch: int) -> None:
        self._windows = windows
        self._blocks = blocks
        self._prefetch = prefetch
        self._made: Dict[int, np.ndarray] = {}  # window -> its samples
        self._where: Dict[int, int] = {}  # sample -> window
        self._next = 0  # windows made: 0.._next-1
        self._current = -1  # the window last read from
        self._asked = -1  # windows 0.._asked fetched already

    def _make(self) -> bool:
        pos = next(self._windows, None)
        if pos is None:
            return False
        samples = self._blocks.samples(pos)
        self._made[self._next] = samples
        self._where.update(dict.fromkeys(samples.tolist(), self._next))
        self._next += 1
        return True

    def before(self, samples: Sequence[int]) -> Optional[np.ndarray]:
        """The samples whose blocks to fetch now (None: nothing new)."""
        w = max((self._where.get(int(s), -1) for s in samples), default=-1)
        # A sample not made yet: the next windows (a lane is read in order),
        # but never more than prefetch + 2 past the one being read.
        while w < 0 and self._next <= self._current + self._prefetch + 2 and self._make():
            w = max((self._where.get(int(s), -1) for s in samples), default=-1)
        if w < 0:
            return None  # not in this process's order: read on demand
        if w > self._current:
            for old in [k for k in self._made if k < w - 1]:
                for s in self._made.pop(old).tolist():
                    if self._where.get(s) == old:
                        del self._where[s]
            self._current = w
        last = w + self._prefetch
        while self._next <= last and self._make():
            pass
        last = min(last, self._next - 1)
        if last <= self._asked:
            return None
        want = np.concatenate([self._made[k] for k in range(self._asked + 1, last + 1) if k in self._made])
        self._asked = last
        return want


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
