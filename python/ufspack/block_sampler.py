"""``ufspack.BlockSampler``: a sampler that reads a pack block by block.

The index knows every record's offset, so the size of a read can be chosen
at read time: contiguous byte ranges of ``data.ufs`` (blocks) are permuted
each epoch, ``window`` blocks at a time have their samples yielded in
random order, and the dataset fetches each block with one request (one
large ``pread``, one ranged GET) and serves its samples from memory.  On a
pack built with ``--layout shuffled`` every block mixes classes, so the
batches are nearly as varied as with ``RandomSampler``
(docs/remote.md, "Block reads"; the order: :mod:`ufspack.block_schedule`).
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Dict, Iterator, Optional

import numpy as np

from . import block_reads as _block_reads
from . import block_schedule as _schedule

try:  # a torch Sampler when torch is there; the sampler works without it
    from torch.utils.data import Sampler as _Base
except ImportError:  # pragma: no cover
    _Base = object  # type: ignore[misc,assignment]

MIN_BLOCK_BYTES = 64 << 10
MAX_BLOCK_BYTES = 1 << 30
_STATE_VERSION = 2  # 1: the order of ufspack before windows had their own generators


def _dist_default(num_replicas: Optional[int], rank: Optional[int]):
    if num_replicas is None or rank is None:
        try:
            import torch.distributed as dist

            ready = dist.is_available() and dist.is_initialized()
        except ImportError:  # pragma: no cover
            ready = False
        if num_replicas is None:
            num_replicas = dist.get_world_size() if ready else 1
        if rank is None:
            rank = dist.get_rank() if ready else 0
    return int(num_replicas), int(rank)


class BlockSampler(_Base):
    """Yields ``dataset``'s indices block by block (see the module docstring).

    ``DataLoader(ds, batch_size=B, sampler=BlockSampler(ds, batch_size=B,
    num_workers=W), num_workers=W)``: ``ds`` a :class:`ufspack.MyImageFolder`
    (any output) or :class:`ufspack.Pack`.  The sampler attaches itself to
    ``ds``, whose reads then go block by block, in the main process and in
    every worker.

    ``block_bytes``: the size of a block (64 KiB to 1 GiB; a record larger
    than a block is a block of its own).  ``window``: blocks whose samples
    are mixed together.  ``shuffle``/``seed``: the epoch's permutation of
    blocks and of each window's samples (``set_epoch`` changes it).
    ``num_replicas``/``rank``: from ``torch.distributed`` when it is
    initialized, as DistributedSampler; each rank gets a contiguous share of
    the blocks and the same number of samples (padded by repeating samples,
    or the tail dropped with ``drop_last``).  ``batch_size`` and
    ``num_workers``: the DataLoader's, so that each worker's batches come
    from blocks only it reads (without them, every worker fetches every
    block, and a worker says so once).  ``prefetch``: windows fetched ahead
    of the one being read.  A lane's first windows grow 1, 2, 4, ... blocks
    up to ``window``, so that the first batch waits for one block.

    Memory per process: ``((1 + prefetch) * window + 2) * block_bytes`` of
    blocks (the window being read and the next, fetched meanwhile: 272 MiB
    at the defaults) and up to 4 more in flight; plus the table of blocks'
    samples (``Reader.block_members``: 8 bytes per sample and 8 per block,
    made when the sampler is, and shared by DataLoader workers forked after
    that; a spawned worker makes its own) and the window being made.  The epoch's order
    is made window by window as it is read, never whole, so starting an
    epoch or resuming one costs O(blocks), not O(samples).

    Resuming: ``state_dict(consumed=n)`` records the epoch and that this
    rank's first ``n`` samples are consumed (a DataLoader runs ahead of the
    training loop, so pass what the loop consumed; without ``consumed``, the
    count yielded so far).  ``load_state_dict`` makes the next iteration
    yield exactly the samples of that epoch no rank had consumed, each once
    (padding aside), shared out among this sampler's ranks, also when
    ``num_replicas``, ``batch_size`` or ``num_workers`` changed.  It assumes
    every rank had consumed the same count (as synchronous data-parallel
    training does).
    """

    def __init__(self, dataset: Any, block_bytes: int = 8 << 20, window: int = 16,
                 shuffle: bool = True, seed: int = 0, num_replicas: Optional[int] = None,
                 rank: Optional[int] = None, drop_last: bool = False, *,
                 batch_size: Optional[int] = None, num_workers: Optional[int] = None,
                 prefetch: int = 1) -> None:
        if not isinstance(block_bytes, (int, np.integer)) or not (
                MIN_BLOCK_BYTES <= block_bytes <= MAX_BLOCK_BYTES):
            raise ValueError(f"block_bytes must be an integer from {MIN_BLOCK_BYTES} (64 KiB) to "
                             f"{MAX_BLOCK_BYTES} (1 GiB), not {block_bytes!r}")
        if not isinstance(window, (int, np.integer)) or window < 1:
            raise ValueError(f"window must be an integer of at least 1, not {window!r}")
        if not isinstance(prefetch, (int, np.integer)) or prefetch < 0:
            raise ValueError(f"prefetch must be an integer of at least 0, not {prefetch!r}")
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {batch_size!r}")
        if num_workers is not None and num_workers < 0:
            raise ValueError(f"num_workers must be at least 0, not {num_workers!r}")
        num_replicas, rank = _dist_default(num_replicas, rank)
        if num_replicas < 1 or not 0 <= rank < num_replicas:
            raise ValueError(f"rank must be in [0, {num_replicas}) and num_replicas at least 1, not "
                             f"rank={rank}, num_replicas={num_replicas}")
        lanes = int(num_workers) if num_workers is not None and num_workers > 1 and batch_size else 1
        self.dataset = dataset
        self.cfg = _schedule.Config(
            block_bytes=int(block_bytes), window=int(window), shuffle=bool(shuffle),
            seed=int(seed), drop_last=bool(drop_last),
            batch_size=int(batch_size) if batch_size is not None and lanes > 1 else 1, lanes=lanes)
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self._resume: Optional[_schedule.Resume] = None
        self._yielded = 0
        self._stage: Optional[_schedule.Resume] = None  # what this epoch resumed from
        self._stage_len = 0
        self._resume_len: Optional[int] = None  # len() of the pending resume
        self._reads = _block_reads.BlockReads(self.cfg, num_replicas, rank, int(prefetch),
                                              _block_reads.Shared())
        self._n = len(dataset)
        attach = getattr(dataset, "_attach_block_reads", None)
        if attach is None:
            raise TypeError(f"BlockSampler reads a ufspack.MyImageFolder or ufspack.Pack, not "
                            f"{type(dataset).__name__}")
        self._pack_id, layout = attach(self._reads)
        # The block table now, in this process: DataLoader workers forked
        # from it later share it instead of each making its own (O(records):
        # 12 ms at 1.28M, about 1 s at 100M on 2 cores).
        self._reads.plan(*dataset._block_plan_inputs())
        if not layout.startswith("shuffled"):
            warnings.warn(
                f"{dataset!r:.200}: the pack's data is in ImageFolder order (layout "
                f"{layout or 'not recorded'}), so each block holds one or two classes and batches "
                "cluster by class; rebuild it with `ufspack build --layout shuffled` (or "
                "ufspack.build(..., layout='shuffled')) for batches as varied as RandomSampler's",
                UserWarning,
                stacklevel=2,
            )

    # --- torch Sampler --------------------------------------------------------

    def set_epoch(self, epoch: int) -> None:
        """As DistributedSampler.set_epoch: the next iteration's epoch."""
        self.epoch = int(epoch)

    def __len__(self) -> int:
        if self._resume is not None and self._resume.epoch == self.epoch:
            if self._resume_len is None:  # once per loaded state
                self._resume_len = len(self._order(self._resume))
            return self._resume_len
        if self._stage is not None and self._stage.epoch == self.epoch:
            return self._stage_len  # the resumed epoch being iterated
        if self.cfg.drop_last:
            return self._n // self.num_replicas
        return -(-self._n // self.num_replicas)

    def _order(self, resume: Optional[_schedule.Resume]) -> _schedule.Order:
        plan = self._reads.plan(*self.dataset._block_plan_inputs())
        return _schedule.epoch_order(plan.first, plan.members, self.cfg, self.epoch,
                                     self.num_replicas, self.rank, resume)

    def __iter__(self) -> Iterator[int]:
        resume = self._resume if self._resume is not None and self._resume.epoch == self.epoch \
            else None
        self._resume = None
        order = self._order(resume)
        self._stage = resume
        self._stage_len = len(order)
        self._yielded = 0
        self._reads.shared.publish(self.epoch, resume)
        return self._yield(order)

    def _yield(self, order: _schedule.Order) -> Iterator[int]:
        # A window (or batch) at a time: the order is made as it is yielded.
        for chunk in order.samples():
            for i in chunk.tolist():
                self._yielded += 1
                yield i

    # --- resuming -------------------------------------------------------------

    def state_dict(self, consumed: Optional[int] = None) -> Dict[str, Any]:
        """Where this rank is in the current epoch (see the class docstring)."""
        yielded = self._yielded if consumed is None else int(consumed)
        if not 0 <= yielded <= max(self._yielded, len(self)):
            raise ValueError(f"consumed must be in [0, {len(self)}], not {consumed!r}")
        stage = _schedule.Resume(self.epoch, self.num_replicas, yielded, self.cfg.lanes,
                                 self.cfg.batch_size, self._stage)
        return {
            "version": _STATE_VERSION,
            "pack_id": self._pack_id,
            "samples": self._n,
            "config": {k: v for k, v in dataclasses.asdict(self.cfg).items()
                       if k not in ("lanes", "batch_size")},
            "epoch": self.epoch,
            "stages": [[s.epoch, s.replicas, s.yielded, s.lanes, s.batch_size]
                       for s in _block_reads.stage_list(stage)],
        }

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Resumes the epoch ``state`` was taken in (see the class docstring).
        ValueError naming what differs for a state of another pack, dataset
        or configuration."""
        if not isinstance(state, dict) or state.get("version") != _STATE_VERSION:
            raise ValueError(f"not a BlockSampler state_dict of version {_STATE_VERSION}: "
                             f"{str(state)[:200]}")
        if state["pack_id"] != self._pack_id:
            raise ValueError(f"the state is of pack {state['pack_id']}, this sampler reads pack "
                             f"{self._pack_id}")
        if state["samples"] != self._n:
            raise ValueError(f"the state is of a dataset of {state['samples']} samples, this one "
                             f"has {self._n}")
        mine = {k: v for k, v in dataclasses.asdict(self.cfg).items()
                if k not in ("lanes", "batch_size")}
        for key, value in state["config"].items():
            if mine.get(key) != value:
                raise ValueError(f"the state was taken with {key}={value!r}, this sampler has "
                                 f"{key}={mine.get(key)!r}")
        resume = None
        for e, rep, y, lanes, bs in reversed(state["stages"]):
            resume = _schedule.Resume(int(e), int(rep), int(y), int(lanes), int(bs), resume)
        self.epoch = int(state["epoch"])
        self._resume = resume
        self._resume_len = None
