#!/usr/bin/python3
"""How well each sampler shuffles one epoch of a pack (docs/benchmarks.md).

    PYTHONPATH=build/python build/peers-venv/bin/python bench/shuffle_quality.py \\
        PACK [PACK ...] [--batch 256] [--epochs 3] [--out DIR]

For each pack (give a sorted and a --layout shuffled build of the same tree)
and each order below, one epoch's label sequence (the pack's labels, in the
order the sampler yields the samples) is scored:

  classes/batch   distinct classes per batch of --batch, mean over batches
                  (RandomSampler's is the reference: 1.00x)
  same-next       how often a sample's successor has the same label, over
                  what a random order gives (1.00 = random; the higher, the
                  more the order clusters by class)
  lag-1 r         Pearson autocorrelation of the label sequence at lag 1

Orders, each with the memory it holds to shuffle (its buffer):

  random          torch.utils.data.RandomSampler (a full permutation; RAM:
                  the index only, one request per sample)
  block B/W       ufspack.BlockSampler(block_bytes=B, window=W): W blocks
                  of B bytes in memory
  streaming       MosaicML Streaming's default shuffle, py1e over MDSWriter's
                  64 MB shards in ImageFolder order, num_canonical_nodes=1,
                  its default shuffle_block_size (4,000,000 samples: every
                  shard of these packs, so the whole dataset on local disk),
                  computed with its own streaming.base.shuffle.get_shuffle
  streaming@RAM   the same with shuffle_block_size set to the samples that
                  fit in BlockSampler's default buffer (16 x 8 MiB)
  litdata         LitData 0.2.47's FullShuffle on one process: the 64 MB
                  chunks (optimize(chunk_bytes="64MB"), ImageFolder order)
                  permuted with RandomState([seed, epoch]), each chunk's
                  items with RandomState([seed, num_chunks, epoch, chunk])
                  (litdata/streaming/shuffle.py, the two lines, reproduced
                  here); one 64 MB chunk read at a time

Mean over --epochs epochs.  Peers are skipped when their package is missing
(streaming); litdata's order is reproduced without importing it.
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Callable, Dict, List, Tuple

import numpy as np

import benchlib

CHUNK_BYTES = 64 << 20  # MDSWriter's default size_limit; the harness's litdata chunk_bytes


def chunks_by_bytes(sizes: np.ndarray, limit: int) -> List[int]:
    """Sample counts of consecutive chunks of at most `limit` bytes (one
    sample at least), in record order, as MDSWriter and optimize() cut."""
    counts, n, total = [], 0, 0
    for s in sizes.tolist():
        if n and total + s > limit:
            counts.append(n)
            n, total = 0, 0
        n += 1
        total += s
    if n:
        counts.append(n)
    return counts


def score(labels: np.ndarray, batch: int) -> Dict[str, float]:
    seq = labels.astype(np.int64)
    batches = [seq[i:i + batch] for i in range(0, len(seq) - batch + 1, batch)]
    distinct = float(np.mean([len(np.unique(b)) for b in batches])) if batches else float("nan")
    counts = np.bincount(seq)
    p_same = float(np.sum((counts / len(seq)) ** 2))
    same_next = float(np.mean(seq[1:] == seq[:-1])) / p_same
    x = seq - seq.mean()
    lag1 = float(np.dot(x[1:], x[:-1]) / np.dot(x, x)) if np.dot(x, x) > 0 else 0.0
    return {"classes_per_batch": distinct, "same_next": same_next, "lag1_r": lag1}


def orders(pack_path: str, mean_size: float) -> List[Tuple[str, str, Callable[[int], np.ndarray]]]:
    import torch

    import ufspack

    pack = ufspack.Pack(pack_path)
    n = len(pack)
    sizes = np.array([pack.record(i)["size"] for i in range(n)], dtype=np.int64)
    out: List[Tuple[str, str, Callable[[int], np.ndarray]]] = []

    def random_order(epoch: int) -> np.ndarray:
        g = torch.Generator()
        g.manual_seed(epoch)
        return np.array(list(torch.utils.data.RandomSampler(range(n), generator=g)))

    out.append(("random", "index", random_order))
    for bb, w in ((1 << 20, 16), (4 << 20, 16), (8 << 20, 16), (8 << 20, 4), (32 << 20, 16)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the sorted pack's warning
            s = ufspack.BlockSampler(pack, block_bytes=bb, window=w, seed=0)

        def block_order(epoch: int, s=s) -> np.ndarray:
            s.set_epoch(epoch)
            return np.array(list(s))

        out.append((f"block {bb >> 20} MiB / {w}", f"{(bb * w) >> 20} MiB", block_order))
    shard_sizes = np.array(chunks_by_bytes(sizes, CHUNK_BYTES), dtype=np.int64)
    try:
        from streaming.base.shuffle import get_shuffle

        matched = max(1, int((16 * (8 << 20)) / mean_size))
        for name, block in (("streaming (py1e, default)", 4_000_000), ("streaming@RAM (py1e)", matched)):
            def streaming_order(epoch: int, block=block) -> np.ndarray:
                return get_shuffle("py1e", shard_sizes, 1, 0, epoch, block)

            mib = (block * mean_size) / (1 << 20)
            ram = "whole dataset (disk)" if block >= n else f"{block} samples ({mib:.0f} MiB)"
            out.append((name, ram, streaming_order))
    except ImportError:
        print("shuffle_quality: mosaicml-streaming not installed: skipped", file=sys.stderr)

    starts = np.concatenate(([0], np.cumsum(shard_sizes)))

    def litdata_order(epoch: int) -> np.ndarray:
        seed, num_chunks = 0, len(shard_sizes)
        chunks = np.random.RandomState([seed, epoch]).permutation(num_chunks)
        parts = [np.random.RandomState([seed, num_chunks, epoch, int(c)]).permutation(
            np.arange(starts[c], starts[c + 1])) for c in chunks]
        return np.concatenate(parts)

    out.append(("litdata (FullShuffle)", "64 MiB chunk", litdata_order))
    return out


def main() -> int:
    p = benchlib.parser(__doc__)
    p.add_argument("packs", nargs="+", help="packs of one tree: a sorted and a --layout shuffled build")
    p.add_argument("--batch", type=int, default=256, help="batch size for classes/batch (default 256)")
    p.add_argument("--epochs", type=int, default=3, help="epochs to average over (default 3)")
    p.add_argument("--out", help="directory for results.json and table.md")
    args = p.parse_args()
    import ufspack

    results = []
    lines = []
    for path in args.packs:
        pack = ufspack.Pack(path)
        labels = np.asarray(pack.labels)
        layout = pack._handle.get().metadata(b"layout")
        layout_s = "sorted" if layout is None else os.fsdecode(layout)
        mean_size = float(np.mean([pack.record(i)["size"] for i in range(len(pack))]))
        head = (f"\n### {os.path.basename(os.path.normpath(path))}: {len(pack):,} samples, "
                f"{len(pack.classes)} classes, mean {mean_size / 1024:.1f} KB, layout {layout_s}\n")
        lines += [head, "| order | buffer | classes/batch | ÷ random | same-next | lag-1 r |",
                  "|---|---|---|---|---|---|"]
        ref = None
        for name, ram, order_of in orders(path, mean_size):
            s = [score(labels[order_of(e + 1)], args.batch) for e in range(args.epochs)]
            m = {k: float(np.mean([x[k] for x in s])) for k in s[0]}
            ref = ref or m["classes_per_batch"]
            results.append({"pack": path, "layout": layout_s, "order": name, "buffer": ram, **m})
            lines.append(f"| {name} | {ram} | {m['classes_per_batch']:.1f} | "
                         f"{m['classes_per_batch'] / ref:.2f}x | {m['same_next']:.2f} | {m['lag1_r']:.3f} |")
    return benchlib.report(args.out, results, "\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
