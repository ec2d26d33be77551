#!/usr/bin/python3
"""Writes a small, deterministic ImageFolder tree of real image files.

    python3 scripts/make_sample_tree.py <dir> [--per-class N]

Three classes with JPEG, PNG (RGB, RGBA, grayscale, palette), BMP and PPM
files of a few sizes, plus a nested directory and a non-image file that an
ImageFolder (and `ufspack build`) skips.  Needs Pillow.
"""
import argparse
import os
import random

from PIL import Image


def gradient(w, h, seed):
    rnd = random.Random(seed)
    a, b, c = (rnd.randrange(256) for _ in range(3))
    img = Image.new("RGB", (w, h))
    img.putdata([((x * 255 // max(w - 1, 1) + a) % 256,
                  (y * 255 // max(h - 1, 1) + b) % 256,
                  ((x + y) * 7 + c + rnd.randrange(32)) % 256)
                 for y in range(h) for x in range(w)])
    return img


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--per-class", type=int, default=12)
    args = ap.parse_args()
    classes = ["cat", "dog", "fish"]
    n = 0
    for ci, cls in enumerate(classes):
        d = os.path.join(args.dir, cls)
        os.makedirs(os.path.join(d, "more"), exist_ok=True)
        for i in range(args.per_class):
            seed = ci * 1000 + i
            w, h = 64 + 16 * (i % 5), 48 + 16 * (i % 4)
            img = gradient(w, h, seed)
            kind = i % 6
            if kind == 0:
                img.save(os.path.join(d, f"{cls}.{i}.png"))
            elif kind == 1:
                img.convert("L").save(os.path.join(d, f"{cls}.{i}.png"))
            elif kind == 2:
                img.convert("RGBA").save(os.path.join(d, "more", f"{cls}.{i}.png"))
            elif kind == 3:
                img.convert("P").save(os.path.join(d, f"{cls}.{i}.bmp"))
            elif kind == 4:
                img.save(os.path.join(d, f"{cls}.{i}.ppm"))
            else:
                img.save(os.path.join(d, f"{cls}.{i}.JPG"), quality=90)
            n += 1
        for i in range(args.per_class):
            gradient(96, 80, ci * 1000 + 500 + i).save(
                os.path.join(d, f"{cls}.photo{i}.jpg"), quality=85)
            n += 1
        with open(os.path.join(d, "README.txt"), "w") as f:
            f.write("not an image: ImageFolder skips this file\n")
    print(f"wrote {n} images in {len(classes)} classes under {args.dir}")


if __name__ == "__main__":
    main()
