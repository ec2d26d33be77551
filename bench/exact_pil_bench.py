#!/usr/bin/python3
"""The default (exact, output="pil") path of MyImageFolder against
torchvision's ImageFolder, in one process, page cache warm (issue 13).

    PYTHONPATH=build/python /usr/bin/python3 bench/exact_pil_bench.py <imagefolder-dir> [--repeat 3] [--json out.json]

Loaders, on the same images:
  imagefolder  torchvision.datasets.ImageFolder on the directory;
  old          MyImageFolder as before issue 13: read_decode into an HxWx3
               array, then Image.fromarray (a subclass restores it);
  new          MyImageFolder: read_decode_pil, decoding into the PIL image.
Each with no transform and with transforms.ToTensor(), one sample at a time
(ds[i], one thread: the per-core figure) and batched (__getitems__ of 32 with
decode_threads=1).  Every configuration runs once to warm up, then the
loaders take turns for --repeat rounds; the best round counts, by the
process's CPU time ("cpu": one thread does all the work, so this is the
per-core figure, and it holds up on a machine busy with other work) and by
the clock ("wall").  torch uses one thread.  Prints img/s and ratios to
ImageFolder; --json writes them.
"""

import os
import shutil
import sys
import tempfile
import time

import benchlib


def serial(ds, n, batch):
    for i in range(n):
        ds[i]


def batched(ds, n, batch):
    if not hasattr(ds, "__getitems__"):  # ImageFolder
        serial(ds, n, batch)
        return
    for s in range(0, n, batch):
        ds.__getitems__(range(s, min(n, s + batch)))


def main():
    ap = benchlib.parser(__doc__)
    ap.add_argument("tree", help="an ImageFolder directory (e.g. cats_and_dogs_filtered/train)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--json", help="write results here")
    args = ap.parse_args()

    import numpy as np
    import torch
    from torchvision import datasets, transforms

    import ufspack

    class OldPath(ufspack.MyImageFolder):
        """MyImageFolder's PIL path before issue 13."""

        def _read(self, reader, rec):
            return reader.read_decode(rec)

        def _read_batch(self, reader, recs):
            return reader.read_decode_batch(recs, self._threads())

    torch.set_num_threads(1)
    work = tempfile.mkdtemp(prefix="ufspack-exactpil-")
    results = {"python": sys.version.split()[0], "tree": os.path.abspath(args.tree), "rounds": args.repeat}
    try:
        pack = os.path.join(work, "pack")
        ufspack.build(args.tree, pack, progress=False)
        tfs = {"none": None, "ToTensor": transforms.ToTensor()}
        for tname, tf in tfs.items():
            loaders = {
                "imagefolder": datasets.ImageFolder(args.tree, transform=tf),
                "old": OldPath(pack, transform=tf, decode_threads=1),
                "new": ufspack.MyImageFolder(pack, transform=tf, decode_threads=1),
            }
            n = len(loaders["imagefolder"])
            assert all(len(d) == n for d in loaders.values())
            # Parity spot check before timing.
            for i in range(0, n, max(1, n // 25)):
                a = loaders["imagefolder"][i][0]
                for k in ("old", "new"):
                    b = loaders[k][i][0]
                    if tf is None:
                        assert a.mode == b.mode and a.size == b.size and a.tobytes() == b.tobytes(), (k, i)
                    else:
                        assert np.array_equal(a.numpy(), b.numpy()), (k, i)

            for mode, run in (("one", serial), ("batch", batched)):
                for ds in loaders.values():  # warm-up
                    run(ds, n, args.batch)
                best = {}
                for _ in range(args.repeat):
                    for name, ds in loaders.items():
                        c0, t0 = time.process_time(), time.perf_counter()
                        run(ds, n, args.batch)
                        dc, dt = time.process_time() - c0, time.perf_counter() - t0
                        cpu, wall = best.get(name, (float("inf"), float("inf")))
                        best[name] = (min(cpu, dc), min(wall, dt))
                for clock, c in (("cpu", 0), ("wall", 1)):
                    row = {k: n / v[c] for k, v in best.items()}
                    row["new/imagefolder"] = best["imagefolder"][c] / best["new"][c]
                    row["old/imagefolder"] = best["imagefolder"][c] / best["old"][c]
                    row["new/old"] = best["old"][c] / best["new"][c]
                    results[f"{tname}/{mode}/{clock}"] = row
                    print(f"{tname:8s} {mode:5s} {clock:4s} ({n} images): ImageFolder {row['imagefolder']:6.0f} img/s, "
                          f"old {row['old']:6.0f} ({row['old/imagefolder']:.2f}x), "
                          f"new {row['new']:6.0f} ({row['new/imagefolder']:.2f}x, {row['new/old']:.2f}x old)",
                          flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    benchlib.write_json(args.json, results)


if __name__ == "__main__":
    main()
