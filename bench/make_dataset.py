#!/usr/bin/python3
"""Generates a synthetic ImageFolder tree of JPEGs for benchmarks.

    bench/make_dataset.py <dir> [--images 100000] [--classes 100] [--size 256] [--quality 85]

Each image is a smooth random gradient with noise, encoded as baseline JPEG
(default 256x256 at quality 85: about 20 KB, the "small file" case), in
<dir>/class000/ ... <dir>/class099/.  Deterministic for given arguments.
Uses all cores (multiprocessing) and skips files that already exist, so an
interrupted run can be resumed.
"""

import io
import os
from multiprocessing import Pool

import numpy as np
from PIL import Image

import benchlib

ARGS = None


def make(i):
    c = i % ARGS.classes
    path = os.path.join(ARGS.dir, f"class{c:03d}", f"img{i:07d}.jpg")
    if os.path.exists(path):
        return 0
    rng = np.random.default_rng(i)
    s = ARGS.size
    y, x = np.mgrid[0:s, 0:s].astype(np.float32) / s
    base = np.stack([np.sin(6.3 * (x * rng.random() + y * rng.random()) + rng.random() * 6) for _ in range(3)], -1)
    arr = (127.5 + 100 * base + rng.normal(0, 18, (s, s, 3))).clip(0, 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr, "RGB").save(buf, "JPEG", quality=ARGS.quality)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(buf.getvalue())
    os.rename(tmp, path)
    return len(buf.getvalue())


def init(args):
    global ARGS
    ARGS = args


def main():
    ap = benchlib.parser(__doc__)
    ap.add_argument("dir")
    ap.add_argument("--images", type=int, default=100_000)
    ap.add_argument("--classes", type=int, default=100)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--quality", type=int, default=85)
    args = ap.parse_args()
    for c in range(args.classes):
        os.makedirs(os.path.join(args.dir, f"class{c:03d}"), exist_ok=True)
    total = 0
    with Pool(initializer=init, initargs=(args,)) as pool:
        for k, n in enumerate(pool.imap_unordered(make, range(args.images), chunksize=256)):
            total += n
            if (k + 1) % 10000 == 0:
                print(f"{k + 1:,} images", flush=True)
    print(f"wrote {args.images:,} images ({total / 1e6:.1f} MB new) in {args.classes} classes under {args.dir}")


if __name__ == "__main__":
    main()
