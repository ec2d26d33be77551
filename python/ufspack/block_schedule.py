"""The order a :class:`ufspack.BlockSampler` yields, as a pure function,
computed window by window.

Both sides compute it: the sampler (to yield it) and each DataLoader worker
(to fetch the blocks of the samples it will be asked for next, before it is
asked).  Everything here is deterministic in its arguments: the same
pack, configuration, epoch and resume point give the same order in every
process.

An epoch, for rank ``r`` of ``R`` (docs/remote.md, "Block reads"):

1. the non-empty blocks, permuted (``shuffle``) with a generator seeded by
   ``(seed, epoch)``; their samples listed block after block: the epoch's
   *sequence*, whose positions :class:`Blocks` maps to samples;
2. cut into ``R`` contiguous equal slices (padded by repeating from the
   start, or the tail dropped with ``drop_last``), one per rank;
3. a rank's slice cut into ``lanes`` contiguous stretches, one per
   DataLoader worker: the DataLoader hands batch ``j`` to worker
   ``j % lanes``, so lane ``l`` holds exactly the batches ``l, l + lanes,
   ...``, and a worker reads blocks no other worker reads (except the one
   block a stretch boundary may split);
4. each lane cut into windows of consecutive blocks, and each window's
   samples permuted (``shuffle``, a generator per window): windows of
   ``window`` blocks, except that a lane's first windows grow 1, 2, 4, ...
   blocks up to it, so that its first batch waits for one block, not
   ``window`` of them;
5. the lanes' batches interleaved: batch ``j`` is lane ``j % lanes``'s next.

Nothing of size O(samples) is made: a rank's share and its lanes are a few
:class:`Seq` pieces (ranges of sequence positions), a window is made when
it is read, and where window ``w`` starts is arithmetic.  Resuming
(:class:`Resume`) makes, for each lane of each old rank, only the window
it had stopped in: what came before is consumed, what comes after is left,
as ranges.  So the first sample of an epoch or of a resumed one costs
O(blocks) (the permutation), not O(samples).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, replace
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np


@dataclass(frozen=True)
class Config:
    """What fixes the order, besides the pack and the epoch."""

    block_bytes: int
    window: int
    shuffle: bool
    seed: int
    drop_last: bool
    batch_size: int  # for the lanes; 1 when lanes == 1
    lanes: int  # DataLoader workers (1: none, or not told)


@dataclass(frozen=True)
class Resume:
    """Where an interrupted epoch stopped: every rank of ``replicas`` had
    yielded the first ``yielded`` samples of its order (synchronous
    data-parallel training consumes the same count on every rank), with
    ``lanes`` and ``batch_size`` as they were then; ``previous`` is where
    that order itself resumed from (None: the epoch's start)."""

    epoch: int
    replicas: int
    yielded: int
    lanes: int
    batch_size: int
    previous: Optional[Resume] = None


def _rng(seed: int, *words: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64([seed & (2**64 - 1), *words]))


class Blocks:
    """Step 1: the epoch's sequence.  Position ``p`` is a sample of the
    ``k``-th block of the permutation, ``cum[k] <= p < cum[k + 1]``.
    ``first``/``members``: block b's samples are
    ``members[first[b]:first[b + 1]]``."""

    def __init__(self, first: np.ndarray, members: np.ndarray, cfg: Config, epoch: int) -> None:
        counts = np.diff(first).astype(np.int64)
        order = np.flatnonzero(counts)
        if cfg.shuffle:
            order = _rng(cfg.seed, epoch, 0).permutation(order)
        self.first = first
        self.members = members
        self.order = order
        self.cum = np.concatenate(([0], np.cumsum(counts[order]))).astype(np.int64)
        self.n = int(self.cum[-1])

    def block_at(self, positions: Union[int, np.ndarray]) -> Union[int, np.ndarray]:
        """The permutation index ``k`` of the block holding each position."""
        return np.searchsorted(self.cum, positions, side="right") - 1

    def samples(self, positions: np.ndarray) -> np.ndarray:
        k = self.block_at(positions)
        return self.members[self.first[self.order[k]] + (positions - self.cum[k])].astype(np.int64)


class Seq:
    """A sequence of positions of the epoch's sequence, as pieces: a range
    ``(a, b)`` (positions a..b-1) or an array of positions (what is left of
    a window that was partly consumed: at most a window's samples).

    Its *runs* are the stretches of one block; windows are cut at runs."""

    def __init__(self, blocks: Blocks, pieces: Sequence[Union[Tuple[int, int], np.ndarray]]) -> None:
        self.blocks = blocks
        self.pieces = [p for p in pieces if _plen(p) > 0]
        lengths = [_plen(p) for p in self.pieces]
        self.starts = np.concatenate(([0], np.cumsum(lengths, dtype=np.int64))).astype(np.int64)
        self.runs: List[np.ndarray] = []  # per piece: offsets where its runs start
        for p in self.pieces:
            if isinstance(p, tuple):
                self.runs.append(None)  # type: ignore[arg-type]  # arithmetic: see run_start
            else:
                k = blocks.block_at(p)
                self.runs.append(np.concatenate(([0], np.flatnonzero(np.diff(k)) + 1)))
        counts = [self._piece_runs(i) for i in range(len(self.pieces))]
        self.run_starts = np.concatenate(([0], np.cumsum(counts, dtype=np.int64))).astype(np.int64)

    def __len__(self) -> int:
        return int(self.starts[-1])

    @property
    def total_runs(self) -> int:
        return int(self.run_starts[-1])

    def _piece_runs(self, i: int) -> int:
        p = self.pieces[i]
        if isinstance(p, tuple):
            return int(self.blocks.block_at(p[1] - 1) - self.blocks.block_at(p[0])) + 1
        return len(self.runs[i])

    def run_start(self, t: int) -> int:
        """The offset where run ``t`` starts (``len(self)`` for the end)."""
        if t >= self.total_runs:
            return len(self)
        i = int(np.searchsorted(self.run_starts, t, side="right")) - 1
        local = t - int(self.run_starts[i])
        p = self.pieces[i]
        if isinstance(p, tuple):
            k = int(self.blocks.block_at(p[0])) + local
            return int(self.starts[i]) + max(p[0], int(self.blocks.cum[k])) - p[0]
        return int(self.starts[i]) + int(self.runs[i][local])

    def run_of(self, offset: int) -> int:
        """The run holding ``offset``."""
        i = int(np.searchsorted(self.starts, offset, side="right")) - 1
        local = offset - int(self.starts[i])
        p = self.pieces[i]
        if isinstance(p, tuple):
            r = int(self.blocks.block_at(p[0] + local) - self.blocks.block_at(p[0]))
        else:
            r = int(np.searchsorted(self.runs[i], local, side="right")) - 1
        return int(self.run_starts[i]) + r

    def slice(self, lo: int, hi: int) -> Seq:
        return Seq(self.blocks, self._cut(lo, hi))

    def _cut(self, lo: int, hi: int) -> list:
        out: list = []
        if hi <= lo:
            return out
        i = max(0, int(np.searchsorted(self.starts, lo, side="right")) - 1)
        while i < len(self.pieces) and self.starts[i] < hi:
            a = max(lo, int(self.starts[i])) - int(self.starts[i])
            b = min(hi, int(self.starts[i + 1])) - int(self.starts[i])
            p = self.pieces[i]
            out.append((p[0] + a, p[0] + b) if isinstance(p, tuple) else p[a:b])
            i += 1
        return out

    def positions(self, lo: int, hi: int) -> np.ndarray:
        parts = [np.arange(p[0], p[1], dtype=np.int64) if isinstance(p, tuple) else p
                 for p in self._cut(lo, hi)]
        return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)


def _plen(p: Union[Tuple[int, int], np.ndarray]) -> int:
    return p[1] - p[0] if isinstance(p, tuple) else len(p)


class Lane:
    """Step 4 on one lane: its windows, each made (and permuted) when
    asked for.  ``key``: what seeds its windows' generators."""

    def __init__(self, seq: Seq, cfg: Config, epoch: int, key: Tuple[int, ...]) -> None:
        self.seq = seq
        self.cfg = cfg
        self.epoch = epoch
        self.key = key
        # Runs where the growing windows (1, 2, 4, ... < window) start, and
        # the run where full windows start.
        self._grow: List[int] = []
        at, size = 0, 1
        while size < cfg.window:
            self._grow.append(at)
            at += size
            size *= 2
        self._full_at = at
        total = seq.total_runs
        self.windows = 0 if total == 0 else self._window_of_run(total - 1) + 1
        self._made: Dict[int, np.ndarray] = {}

    def __len__(self) -> int:
        return len(self.seq)

    def _window_of_run(self, t: int) -> int:
        if t < self._full_at:
            return bisect.bisect_right(self._grow, t) - 1
        return len(self._grow) + (t - self._full_at) // self.cfg.window

    def _run_of_window(self, w: int) -> int:
        if w < len(self._grow):
            return self._grow[w]
        return self._full_at + (w - len(self._grow)) * self.cfg.window

    def bounds(self, w: int) -> Tuple[int, int]:
        """Window ``w``'s offsets in the lane."""
        return (self.seq.run_start(self._run_of_window(w)),
                self.seq.run_start(self._run_of_window(w + 1)) if w + 1 < self.windows else len(self.seq))

    def window_of(self, offset: int) -> int:
        return self._window_of_run(self.seq.run_of(offset))

    def window(self, w: int) -> np.ndarray:
        """Window ``w``'s positions, in the order they are yielded.  The last
        two made are kept (a batch may straddle two windows)."""
        got = self._made.get(w)
        if got is not None:
            return got
        lo, hi = self.bounds(w)
        pos = self.seq.positions(lo, hi)
        if self.cfg.shuffle:
            pos = _rng(self.cfg.seed, self.epoch, *self.key, w).permutation(pos)
        if len(self._made) >= 2:
            self._made.pop(min(self._made))
        self._made[w] = pos
        return pos

    def take(self, lo: int, hi: int) -> np.ndarray:
        """Positions at offsets ``[lo, hi)`` of the lane's order."""
        out = []
        while lo < hi:
            w = self.window_of(lo)
            a, b = self.bounds(w)
            out.append(self.window(w)[lo - a : min(hi, b) - a])
            lo = min(hi, b)
        return np.concatenate(out) if out else np.empty(0, dtype=np.int64)


def rank_slice(seq: Seq, replicas: int, rank: int, drop_last: bool) -> Seq:
    """Step 2: rank ``rank``'s contiguous share, all shares equal; offsets
    past the end wrap around to the start (padding)."""
    n = len(seq)
    per = n // replicas if drop_last else -(-n // replicas)
    lo, hi = rank * per, (rank + 1) * per
    pieces: list = []
    while lo < hi and n > 0:
        a = lo % n
        b = min(n, a + (hi - lo))
        pieces += seq._cut(a, b)
        lo += b - a
    return Seq(seq.blocks, pieces)


def lane_sizes(n: int, batch_size: int, lanes: int) -> List[int]:
    """Step 3: how many of a rank's ``n`` samples each lane holds."""
    batches = -(-n // batch_size)
    sizes = []
    for lane in range(lanes):
        size = (batches // lanes + (1 if lane < batches % lanes else 0)) * batch_size
        if batches and (batches - 1) % lanes == lane:
            size -= batches * batch_size - n  # the last batch is short
        sizes.append(size)
    return sizes


def lane_consumed(yielded: int, batch_size: int, lanes: int) -> List[int]:
    """How many samples of each lane the first ``yielded`` of the
    interleaved order hold."""
    full, rest = divmod(yielded, batch_size)
    return [(full // lanes + (1 if lane < full % lanes else 0)) * batch_size
            + (rest if full % lanes == lane else 0) for lane in range(lanes)]


class Order:
    """Steps 2 to 5 for one rank: its lanes and their interleaving."""

    def __init__(self, blocks: Blocks, base: Seq, cfg: Config, epoch: int, depth: int,
                 replicas: int, rank: int, drop_last: bool) -> None:
        self.blocks = blocks
        self.cfg = cfg
        share = rank_slice(base, replicas, rank, drop_last)
        self.lanes: List[Lane] = []
        at = 0
        for lane, size in enumerate(lane_sizes(len(share), cfg.batch_size, cfg.lanes)):
            self.lanes.append(Lane(share.slice(at, at + size), cfg, epoch, (depth, 1 + rank, lane)))
            at += size
        self.n = len(share)

    def __len__(self) -> int:
        return self.n

    def positions(self) -> Iterator[np.ndarray]:
        """Step 5: the rank's order, a window (one lane) or a batch (several)
        at a time, as sequence positions."""
        if len(self.lanes) == 1:
            lane = self.lanes[0]
            for w in range(lane.windows):
                yield lane.window(w)
            return
        bs, at = self.cfg.batch_size, [0] * len(self.lanes)
        for j in range(-(-self.n // bs)):
            k = j % len(self.lanes)
            lane = self.lanes[k]
            end = min(len(lane), at[k] + bs)
            yield lane.take(at[k], end)
            at[k] = end

    def samples(self) -> Iterator[np.ndarray]:
        for pos in self.positions():
            yield self.blocks.samples(pos)


class _Covered:
    """A set of sequence positions: disjoint sorted intervals."""

    def __init__(self) -> None:
        self.lo = np.empty(0, dtype=np.int64)
        self.hi = np.empty(0, dtype=np.int64)

    def add(self, lo: np.ndarray, hi: np.ndarray) -> None:
        lo = np.concatenate((self.lo, lo))
        hi = np.concatenate((self.hi, hi))
        keep = hi > lo
        lo, hi = lo[keep], hi[keep]
        order = np.argsort(lo, kind="stable")
        lo, hi = lo[order], hi[order]
        if len(lo) == 0:
            self.lo, self.hi = lo, hi
            return
        reach = np.maximum.accumulate(hi)
        new = np.concatenate(([True], lo[1:] > reach[:-1]))
        starts = np.flatnonzero(new)
        self.lo = lo[starts]
        self.hi = np.maximum.reduceat(reach, starts)

    def add_range(self, a: int, b: int) -> None:
        self.add(np.array([a], dtype=np.int64), np.array([b], dtype=np.int64))

    def contains(self, positions: np.ndarray) -> np.ndarray:
        i = np.searchsorted(self.lo, positions, side="right") - 1
        ok = i >= 0
        out = np.zeros(len(positions), dtype=bool)
        out[ok] = positions[ok] < self.hi[i[ok]]
        return out

    def outside(self, a: int, b: int) -> List[Tuple[int, int]]:
        """The parts of range [a, b) not covered."""
        i = max(0, int(np.searchsorted(self.hi, a, side="right")))
        out, at = [], a
        while i < len(self.lo) and self.lo[i] < b:
            if self.lo[i] > at:
                out.append((at, int(self.lo[i])))
            at = max(at, int(self.hi[i]))
            i += 1
        if at < b:
            out.append((at, b))
        return out


def _left(blocks: Blocks, base: Seq, cfg: Config, epoch: int, depth: int, drop_last: bool,
          stage: Resume) -> Seq:
    """What no rank of ``stage`` had yielded, each once: for each old rank,
    lane after lane, the rest of the window it stopped in, then its
    following windows (ranges); padding's repeats removed (the first
    occurrence is kept)."""
    old_cfg = replace(cfg, lanes=stage.lanes, batch_size=stage.batch_size)
    consumed = _Covered()  # whole windows consumed: ranges
    # Positions consumed in a partly consumed window, then the explicit
    # positions kept: one byte per position of the sequence, its pages
    # zeroed by the kernel only where one is marked.
    gone = np.zeros(blocks.n, dtype=bool)
    lo: List[int] = []
    hi: List[int] = []
    rest: list = []
    for r in range(stage.replicas):
        order = Order(blocks, base, old_cfg, epoch, depth, stage.replicas, r, drop_last)
        for lane, c in zip(order.lanes, lane_consumed(min(stage.yielded, len(order)),
                                                       stage.batch_size, stage.lanes)):
            if c == 0:
                rest += lane.seq.pieces
                continue
            w = lane.window_of(c) if c < len(lane) else lane.windows
            a, b = lane.bounds(w) if c < len(lane) else (len(lane), len(lane))
            for p in lane.seq._cut(0, a):
                if isinstance(p, tuple):
                    lo.append(p[0])
                    hi.append(p[1])
                else:
                    gone[p] = True
            if c < len(lane):
                got = lane.window(w)
                gone[got[: c - a]] = True
                rest += [got[c - a :]] + lane.seq._cut(b, len(lane))
    consumed.add(np.array(lo, dtype=np.int64), np.array(hi, dtype=np.int64))
    kept = _Covered()  # the ranges kept
    pieces: list = []
    for p in rest:
        if isinstance(p, tuple):
            # Not consumed, not kept already (a range or a position).
            for x, y in consumed.outside(*p):
                for u, v in kept.outside(x, y):
                    cuts = (u + np.flatnonzero(gone[u:v])).tolist()
                    for q in zip([u] + [c + 1 for c in cuts], cuts + [v]):
                        if q[1] > q[0]:
                            pieces.append((int(q[0]), int(q[1])))
                            kept.add_range(*pieces[-1])
        else:
            p = p[~gone[p] & ~consumed.contains(p) & ~kept.contains(p)]
            gone[p] = True
            pieces.append(p)
    return Seq(blocks, pieces)


def epoch_order(first: np.ndarray, members: np.ndarray, cfg: Config, epoch: int, replicas: int,
                rank: int, resume: Optional[Resume] = None) -> Order:
    """Rank ``rank``'s order for ``epoch``.

    With ``resume`` (this epoch, interrupted): only the samples no rank had
    yielded, each once, shared out again among ``replicas`` ranks, which may
    differ from ``resume.replicas``.  Padding (not ``drop_last``) repeats
    samples to equalize the ranks, as DistributedSampler does; a resumed
    order never drops (a dropped sample would be lost to the epoch).
    """
    blocks = Blocks(first, members, cfg, epoch)
    stages = []
    while resume is not None:
        stages.append(resume)
        resume = resume.previous
    base, drop = Seq(blocks, [(0, blocks.n)]), cfg.drop_last
    for depth, stage in enumerate(reversed(stages)):
        base = _left(blocks, base, cfg, epoch, depth, drop, stage)
        drop = False
    return Order(blocks, base, cfg, epoch, len(stages), replicas, rank, drop)
