"""The order a :class:`ufspack.BlockSampler` yields, as a pure function.

Both sides compute it: the sampler (to yield it) and each DataLoader worker
(to fetch the blocks of the samples it will be asked for next, before it is
asked).  Everything here is deterministic in its arguments: the same
pack, configuration, epoch and resume point give the same order in every
process.

An epoch, for rank ``r`` of ``R`` (docs/remote.md, "Block reads"):

1. the non-empty blocks, permuted (``shuffle``) with a generator seeded by
   ``(seed, epoch)``; their samples listed block after block;
2. cut into ``R`` contiguous equal slices (padded by repeating from the
   start, or the tail dropped with ``drop_last``), one per rank;
3. a rank's slice cut into ``lanes`` contiguous stretches, one per
   DataLoader worker: the DataLoader hands batch ``j`` to worker
   ``j % lanes``, so lane ``l`` holds exactly the batches ``l, l + lanes,
   ...``, and a worker reads blocks no other worker reads (except the one
   block a stretch boundary may split);
4. each lane's samples cut into windows of consecutive blocks, and each
   window's samples permuted (``shuffle``): windows of ``window`` blocks,
   except that a lane's first windows grow 1, 2, 4, ... blocks up to it, so
   that its first batch waits for one block, not ``window`` of them;
5. the lanes' batches interleaved: batch ``j`` is lane ``j % lanes``'s next.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import List, Optional, Tuple

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


def block_sequence(first: np.ndarray, members: np.ndarray, cfg: Config, epoch: int) -> np.ndarray:
    """Step 1: every sample, block after block, in this epoch's block order."""
    counts = np.diff(first)
    blocks = np.flatnonzero(counts)
    if cfg.shuffle:
        blocks = _rng(cfg.seed, epoch, 0).permutation(blocks)
    starts = first[blocks]
    lengths = counts[blocks]
    # members[starts[k] : starts[k] + lengths[k]] for every k, concatenated.
    offsets = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    return members[np.arange(len(offsets)) + offsets]


def rank_slice(seq: np.ndarray, replicas: int, rank: int, drop_last: bool) -> np.ndarray:
    """Step 2: rank ``rank``'s contiguous share, all shares equal."""
    n = len(seq)
    if drop_last:
        per = n // replicas
    else:
        per = -(-n // replicas)
        if per * replicas > n and n > 0:
            seq = np.resize(seq, per * replicas)  # repeats from the start
    return seq[rank * per : (rank + 1) * per]


def lane_sizes(n: int, batch_size: int, lanes: int) -> List[int]:
    """Step 3: how many of a rank's ``n`` samples each lane holds."""
    batches = -(-n // batch_size)
    sizes = [0] * lanes
    for j in range(batches):
        sizes[j % lanes] += min(batch_size, n - j * batch_size)
    return sizes


def window_starts(blocks: int, window: int) -> np.ndarray:
    """Step 4's windows over a lane's ``blocks`` runs of blocks: the index of
    each window's first block (sizes 1, 2, 4, ... then ``window``)."""
    starts, at, size = [], 0, 1
    while at < blocks and size < window:
        starts.append(at)
        at += size
        size *= 2
    return np.concatenate((np.array(starts, dtype=np.int64),
                           np.arange(at, blocks, window, dtype=np.int64)))


def shuffle_windows(part: np.ndarray, block_of: np.ndarray, cfg: Config, epoch: int,
                    rank: int, lane: int) -> Tuple[np.ndarray, np.ndarray]:
    """Step 4 on one lane's samples ``part`` (``block_of``: their blocks):
    (the samples, window by window; where each window starts, and the end)."""
    if len(part) == 0:
        return part, np.zeros(1, dtype=np.int64)
    change = np.flatnonzero(np.diff(block_of)) + 1
    run_starts = np.concatenate(([0], change))
    bounds = np.concatenate((run_starts[window_starts(len(run_starts), cfg.window)], [len(part)]))
    if not cfg.shuffle:
        return part, bounds
    rng = _rng(cfg.seed, epoch, 1 + rank, lane)
    out = part.copy()
    for a, b in zip(bounds[:-1], bounds[1:]):
        out[a:b] = rng.permutation(part[a:b])
    return out, bounds


def interleave(lanes: List[np.ndarray], batch_size: int) -> np.ndarray:
    """Step 5."""
    if len(lanes) == 1:
        return lanes[0]
    out = []
    at = [0] * len(lanes)
    j = 0
    total = sum(len(x) for x in lanes)
    done = 0
    while done < total:
        k = j % len(lanes)
        chunk = lanes[k][at[k] : at[k] + batch_size]
        at[k] += len(chunk)
        done += len(chunk)
        out.append(chunk)
        j += 1
    return np.concatenate(out) if out else np.empty(0, dtype=np.int64)


def arrange(slice_: np.ndarray, block_of_sample: np.ndarray, cfg: Config, epoch: int,
            rank: int) -> Tuple[np.ndarray, List[np.ndarray], List[np.ndarray]]:
    """Steps 3 to 5 on a rank's samples: (the order, each lane's part of
    it, each part's window bounds)."""
    sizes = lane_sizes(len(slice_), cfg.batch_size, cfg.lanes)
    parts, bounds = [], []
    at = 0
    for lane, size in enumerate(sizes):
        part = slice_[at : at + size]
        shuffled, b = shuffle_windows(part, block_of_sample[part], cfg, epoch, rank, lane)
        parts.append(shuffled)
        bounds.append(b)
        at += size
    return interleave(parts, cfg.batch_size), parts, bounds


def epoch_order(first: np.ndarray, members: np.ndarray, block_of_sample: np.ndarray, cfg: Config,
                epoch: int, replicas: int, rank: int,
                resume: Optional[Resume] = None
                ) -> Tuple[np.ndarray, List[np.ndarray], List[np.ndarray]]:
    """Rank ``rank``'s order for ``epoch`` (and, as :func:`arrange`, each
    lane's part of it and its windows).

    With ``resume`` (this epoch, interrupted): only the samples no rank had
    yielded, each once, shared out again among ``replicas`` ranks, which may
    differ from ``resume.replicas``.  Padding (not ``drop_last``) repeats
    samples to equalize the ranks, as DistributedSampler does.
    """
    if resume is None:
        seq = block_sequence(first, members, cfg, epoch)
        return arrange(rank_slice(seq, replicas, rank, cfg.drop_last), block_of_sample, cfg, epoch,
                       rank)
    # The old ranks' orders (as they were made), and what they had yielded.
    old_cfg = replace(cfg, lanes=resume.lanes, batch_size=resume.batch_size)
    seen = np.zeros(len(block_of_sample), dtype=bool)
    rest = []
    for r in range(resume.replicas):
        old, _, _ = epoch_order(first, members, block_of_sample, old_cfg, epoch, resume.replicas, r,
                             resume.previous)
        seen[old[: resume.yielded]] = True
        rest.append(old[resume.yielded :])
    left = np.concatenate(rest) if rest else np.empty(0, dtype=np.int64)
    # Each remaining sample once (padding repeated some), in the old ranks'
    # order, so that a new rank's share stays in few blocks.
    left = left[~seen[left]]
    _, first_at = np.unique(left, return_index=True)
    left = left[np.sort(first_at)]
    # Never drop on resume: a dropped sample would be lost to this epoch.
    return arrange(rank_slice(left, replicas, rank, False), block_of_sample, cfg, epoch, rank)
