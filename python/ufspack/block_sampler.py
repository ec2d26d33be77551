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

import reprlib
import warnings
from collections.abc import Mapping
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
#: The most ranks a sampler (or a state's stage) may have: resuming makes
#: the order of every old rank, so a state's count bounds the work.
MAX_REPLICAS = 1 << 20
#: The most DataLoader workers (``num_workers``, a stage's lanes): each is
#: a lane of the order, made when an epoch starts.
MAX_WORKERS = 4096
#: The most stages (resumes within one epoch) a loaded state may chain:
#: each costs a pass over the epoch's samples when it is resumed.
MAX_STAGES = 1024
_INT64_MAX = (1 << 63) - 1  # epochs and counts travel in int64 shared memory
_STATE_VERSION = 2  # 1: the order of ufspack before windows had their own generators
_STATE_KEYS = ("version", "pack_id", "samples", "config", "epoch", "stages")
_CONFIG_KEYS = ("block_bytes", "window", "shuffle", "seed", "drop_last")
_STAGE_FIELDS = ("epoch", "replicas", "yielded", "lanes", "batch_size")


_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 60


def _show(value: Any) -> str:
    """``value``'s type and repr, abridged (reprlib) and on one line."""
    return f"{type(value).__name__} {' '.join(_REPR.repr(value).split())}"


def _int(value: Any, name: str, lo: int, hi: int = _INT64_MAX) -> int:
    """``value`` as a Python int.  TypeError unless it is an int or a numpy
    integer (a bool is not a count), ValueError unless ``lo <= value <= hi``;
    both name ``name``.  Nothing is converted: 2.9 and "3" are refused."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {_show(value)}")
    if value < lo:
        raise ValueError(f"{name} must be at least {lo}, got {value}")
    if value > hi:
        raise ValueError(f"{name} must be at most {hi}, got {value}")
    return int(value)


def _flag(value: Any, name: str) -> bool:
    """``value`` as a bool: TypeError unless it is a bool (or numpy bool)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {_show(value)}")
    return bool(value)


def _seed(value: Any, name: str) -> int:
    """A seed: any int torch.Generator.manual_seed takes, [-2**63, 2**64)."""
    return _int(value, name, -(1 << 63), (1 << 64) - 1)


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
    return num_replicas, rank


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

    Arguments are checked, never converted: counts are ``int`` or numpy
    integers (not ``bool``, not ``2.9`` or ``"3"``), flags are ``bool``;
    TypeError for a wrong type, ValueError for a value out of range, each
    naming the argument.  Ranges: ``seed`` -2**63 to 2**64 - 1 (as
    ``torch.Generator.manual_seed``); ``num_replicas`` 1 to
    :data:`MAX_REPLICAS` and ``rank`` below it; ``num_workers`` 0 to
    :data:`MAX_WORKERS`; ``batch_size`` and ``window`` at least 1,
    ``prefetch`` at least 0, the memory bound below 2**63 bytes; epochs 0 to
    2**63 - 1.  ``load_state_dict`` checks every field of the state the same
    way before it changes anything.
    """

    def __init__(self, dataset: Any, block_bytes: int = 8 << 20, window: int = 16,
                 shuffle: bool = True, seed: int = 0, num_replicas: Optional[int] = None,
                 rank: Optional[int] = None, drop_last: bool = False, *,
                 batch_size: Optional[int] = None, num_workers: Optional[int] = None,
                 prefetch: int = 1) -> None:
        attach = getattr(dataset, "_attach_block_reads", None)
        if attach is None:
            raise TypeError(f"BlockSampler: dataset must be a ufspack.MyImageFolder or "
                            f"ufspack.Pack, got {_show(dataset)}")
        arg = "BlockSampler: "
        block_bytes = _int(block_bytes, arg + "block_bytes", MIN_BLOCK_BYTES, MAX_BLOCK_BYTES)
        window = _int(window, arg + "window", 1)
        prefetch = _int(prefetch, arg + "prefetch", 0)
        if ((1 + prefetch) * window + 2) * block_bytes > _INT64_MAX:
            raise ValueError(f"{arg}window={window} and prefetch={prefetch} make the memory bound "
                             f"((1 + prefetch) * window + 2) * block_bytes larger than 2**63 - 1 "
                             f"bytes")
        seed = _seed(seed, arg + "seed")
        shuffle = _flag(shuffle, arg + "shuffle")
        drop_last = _flag(drop_last, arg + "drop_last")
        if batch_size is not None:
            batch_size = _int(batch_size, arg + "batch_size", 1)
        if num_workers is not None:
            num_workers = _int(num_workers, arg + "num_workers", 0, MAX_WORKERS)
        if num_replicas is not None:
            num_replicas = _int(num_replicas, arg + "num_replicas", 1, MAX_REPLICAS)
        if rank is not None:
            rank = _int(rank, arg + "rank", 0, MAX_REPLICAS - 1)
        num_replicas, rank = _dist_default(num_replicas, rank)
        num_replicas = _int(num_replicas, arg + "num_replicas (torch.distributed's world size)",
                            1, MAX_REPLICAS)
        rank = _int(rank, arg + "rank (torch.distributed's)", 0, MAX_REPLICAS - 1)
        if rank >= num_replicas:
            raise ValueError(f"{arg}rank must be in [0, {num_replicas}) for num_replicas="
                             f"{num_replicas}, got {rank}")
        lanes = num_workers if num_workers is not None and num_workers > 1 and batch_size else 1
        self.dataset = dataset
        self.cfg = _schedule.Config(
            block_bytes=block_bytes, window=window, shuffle=shuffle, seed=seed,
            drop_last=drop_last, batch_size=batch_size if batch_size and lanes > 1 else 1,
            lanes=lanes)
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self._resume: Optional[_schedule.Resume] = None
        self._iter_epoch: Optional[int] = None  # the epoch of the last iteration
        self._yielded = 0
        self._stage: Optional[_schedule.Resume] = None  # what that iteration resumed from
        self._stage_len = 0
        self._resume_len: Optional[int] = None  # len() of the pending resume
        self._reads = _block_reads.BlockReads(self.cfg, num_replicas, rank, prefetch,
                                              _block_reads.Shared())
        self._n = len(dataset)
        self._pack_id, layout = attach(self._reads)
        # The block table now, in this process: DataLoader workers forked
        # from it later share it instead of each making its own (O(records):
        # 12 ms at 1.28M, about 1 s at 100M on 2 cores).
        self._reads.plan(*dataset._block_plan_inputs())
        if not layout.startswith("shuffled"):
            warnings.warn(_layout_warning(dataset, layout), UserWarning, stacklevel=2)

    # --- torch Sampler --------------------------------------------------------

    def set_epoch(self, epoch: int) -> None:
        """As DistributedSampler.set_epoch: the next iteration's epoch, an
        int from 0 to 2**63 - 1 (TypeError, ValueError)."""
        self.epoch = _int(epoch, "BlockSampler.set_epoch: epoch", 0)

    def _pending(self) -> Optional[_schedule.Resume]:
        """The loaded state the next iteration resumes, if any."""
        return self._resume if self._resume is not None and self._resume.epoch == self.epoch \
            else None

    def __len__(self) -> int:
        if self._pending() is not None:
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
        resume = self._pending()
        self._resume = None
        order = self._order(resume)
        self._iter_epoch = self.epoch
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
        """Where this rank is in the current epoch (see the class docstring).
        ``consumed``: an int from 0 to ``len(self)`` (TypeError, ValueError);
        without it, the count yielded in this epoch so far (0 after
        ``set_epoch`` or ``load_state_dict`` until the next iteration)."""
        pending = self._pending()
        base: Optional[_schedule.Resume]
        if pending is not None:  # loaded, not iterated yet: none of it yielded
            base, yielded = pending, 0
        elif self._iter_epoch == self.epoch:
            base, yielded = self._stage, self._yielded
        else:  # a new epoch, not iterated yet
            base, yielded = None, 0
        if consumed is not None:
            yielded = _int(consumed, "BlockSampler.state_dict: consumed", 0,
                           max(yielded, len(self)))
        stage = pending if pending is not None and yielded == 0 else _schedule.Resume(
            self.epoch, self.num_replicas, yielded, self.cfg.lanes, self.cfg.batch_size, base)
        return {
            "version": _STATE_VERSION,
            "pack_id": self._pack_id,
            "samples": self._n,
            "config": {k: getattr(self.cfg, k) for k in _CONFIG_KEYS},
            "epoch": self.epoch,
            "stages": [[s.epoch, s.replicas, s.yielded, s.lanes, s.batch_size]
                       for s in _block_reads.stage_list(stage)],
        }

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Resumes the epoch ``state`` was taken in (see the class docstring).

        Every field is checked before anything changes: TypeError for a
        field of the wrong type (a bool is not a count; numpy integers are
        ints), ValueError for a wrong value, a missing or unexpected key, or
        a state of another pack, dataset or configuration; each names the
        field (``state['stages'][0][2] (yielded)``) and what differs."""
        where = "BlockSampler.load_state_dict: state"
        if not isinstance(state, Mapping):
            raise TypeError(f"{where} must be a dict (from BlockSampler.state_dict), got "
                            f"{_show(state)}")
        if "version" not in state:
            raise ValueError(f"{where} has no 'version': not a BlockSampler state_dict (its keys: "
                             f"{_keys(state)})")
        version = _int(state["version"], f"{where}['version']", 1)
        if version != _STATE_VERSION:
            old = " (version 1: the order of ufspack before windows had their own generators)"
            raise ValueError(f"{where}['version'] is {version}{old if version == 1 else ''}; this "
                             f"build resumes version {_STATE_VERSION} only")
        _check_keys(state, _STATE_KEYS, where)
        if not isinstance(state["pack_id"], str):
            raise TypeError(f"{where}['pack_id'] must be a str, got {_show(state['pack_id'])}")
        if state["pack_id"] != self._pack_id:
            raise ValueError(f"{where}['pack_id']: the state is of pack {state['pack_id']!r}, this "
                             f"sampler reads pack {self._pack_id!r}")
        samples = _int(state["samples"], f"{where}['samples']", 0)
        if samples != self._n:
            raise ValueError(f"{where}['samples']: the state is of a dataset of {samples} samples, "
                             f"this one has {self._n}")
        self._check_config(state["config"], f"{where}['config']")
        epoch = _int(state["epoch"], f"{where}['epoch']", 0)
        resume = _parse_stages(state["stages"], f"{where}['stages']", epoch, samples)
        self.epoch = epoch
        self._resume = resume
        self._resume_len = None
        self._iter_epoch, self._stage, self._yielded = None, None, 0

    def _check_config(self, config: Any, where: str) -> None:
        if not isinstance(config, Mapping):
            raise TypeError(f"{where} must be a dict, got {_show(config)}")
        _check_keys(config, _CONFIG_KEYS, where)
        theirs = {
            "block_bytes": _int(config["block_bytes"], f"{where}['block_bytes']", MIN_BLOCK_BYTES,
                                MAX_BLOCK_BYTES),
            "window": _int(config["window"], f"{where}['window']", 1),
            "shuffle": _flag(config["shuffle"], f"{where}['shuffle']"),
            "seed": _seed(config["seed"], f"{where}['seed']"),
            "drop_last": _flag(config["drop_last"], f"{where}['drop_last']"),
        }
        for key in _CONFIG_KEYS:
            mine = getattr(self.cfg, key)
            if theirs[key] != mine:
                raise ValueError(f"{where}['{key}']: the state was taken with {key}="
                                 f"{theirs[key]!r}, this sampler has {key}={mine!r}")


def _keys(mapping: Mapping) -> str:
    keys = ", ".join(sorted(repr(k) for k in mapping))
    return keys[:200] + "..." if len(keys) > 200 else keys or "none"


def _check_keys(mapping: Mapping, expected: tuple, where: str) -> None:
    """ValueError naming a key of ``expected`` that ``mapping`` lacks, or
    the keys it has besides."""
    for key in expected:
        if key not in mapping:
            raise ValueError(f"{where} has no {key!r} (a BlockSampler state_dict has "
                             f"{', '.join(map(repr, expected))})")
    extra = {k: v for k, v in mapping.items() if k not in expected}
    if extra:
        raise ValueError(f"{where} has unexpected key(s) {_keys(extra)} (a BlockSampler "
                         f"state_dict has {', '.join(map(repr, expected))})")


def _parse_stages(stages: Any, where: str, epoch: int, samples: int) -> _schedule.Resume:
    """``state['stages']``, checked, as the Resume chain it lists (the
    newest first): each ``[epoch, replicas, yielded, lanes, batch_size]``,
    of the state's epoch, ``yielded`` at most the dataset's samples."""
    if not isinstance(stages, (list, tuple)):
        raise TypeError(f"{where} must be a list, got {_show(stages)}")
    if not 1 <= len(stages) <= MAX_STAGES:
        raise ValueError(f"{where} must hold 1 to {MAX_STAGES} stages, got {len(stages)}")
    checked = []
    for k, entry in enumerate(stages):
        at = f"{where}[{k}]"
        if not isinstance(entry, (list, tuple)):
            raise TypeError(f"{at} must be a list [{', '.join(_STAGE_FIELDS)}], got {_show(entry)}")
        if len(entry) != len(_STAGE_FIELDS):
            raise ValueError(f"{at} must be [{', '.join(_STAGE_FIELDS)}], got {len(entry)} values")
        e = _int(entry[0], f"{at}[0] (epoch)", 0)
        if e != epoch:
            raise ValueError(f"{at}[0] (epoch) is {e}, not the state's epoch {epoch}")
        checked.append((e, _int(entry[1], f"{at}[1] (replicas)", 1, MAX_REPLICAS),
                        _int(entry[2], f"{at}[2] (yielded)", 0, samples),
                        _int(entry[3], f"{at}[3] (lanes)", 1, MAX_WORKERS),
                        _int(entry[4], f"{at}[4] (batch_size)", 1)))
    resume = None
    for fields in reversed(checked):
        resume = _schedule.Resume(*fields, resume)
    assert resume is not None
    return resume


def _layout_warning(dataset: Any, layout: str) -> str:
    """One line: what a pack not built with ``--layout shuffled`` means for
    the batches, naming the pack."""
    path = getattr(getattr(dataset, "_pack", dataset), "path", None)
    order = {
        "sorted": "stores its samples in index order (an ImageFolder tree's: class after class)",
        "source": "stores its samples in its source's order (an archive's members), often class "
                  "after class",
        "": "does not record its data order (an older pack, or merged parts that differ); taken "
            "as sorted (class after class)",
    }.get(layout, f"has data order {layout[:40]!r}, unknown to this build; taken as sorted "
                  f"(class after class)")
    return (f"BlockSampler: pack {path!r} {order}, so each block (a contiguous byte range of "
            f"data.ufs) holds one class or a few neighbouring ones and each batch only the few "
            f"classes of a window's blocks; build it with `ufspack build --layout shuffled` "
            f"(ufspack.build(..., layout='shuffled')) for batches as varied as RandomSampler's")
