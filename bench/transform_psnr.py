#!/usr/bin/python3
"""How close MyImageFolder(fast_transforms=True) is to torchvision (issue 13).

    PYTHONPATH=build/python /usr/bin/python3 bench/transform_psnr.py [options]
    PYTHONPATH=build/python /usr/bin/python3 bench/transform_psnr.py --smoke

For each dataset and transform, every sample i is fetched three times with
torch.manual_seed(seed + i) first:

    torchvision.datasets.ImageFolder(root, T)[i]                 the reference
    ufspack.MyImageFolder(pack, T, fast_transforms=True)[i]      DCT scaling allowed
    ufspack.MyImageFolder(pack, T, fast_transforms="exact")[i]   must be bit-identical

and the two ufspack tensors are compared with the reference.  PSNR is taken
on the un-normalised image: both tensors are mapped back with x * std + mean
(float64) to the 0..1 range ToTensor gives, peak 1.0, the mean squared error
over all 3 x H x W values.  A bit-identical sample has PSNR inf; statistics
"over all" cap it at 99 dB.  A sample is counted as DCT-scaled when its drawn
geometry makes libjpeg's scaled IDCT apply (the rule of ChooseDenom in
decode/src/transform.cc, recomputed from the same parameters, for JPEGs the
native decoder takes): a fast sample that differs from torchvision without
being DCT-scaled is reported as "unexplained" (it should never happen).

Transforms (torchvision's ImageNet recipe):
    train: RandomResizedCrop(224), RandomHorizontalFlip(), ToTensor(), Normalize(ImageNet)
    val:   Resize(256), CenterCrop(224), ToTensor(), Normalize(ImageNet)

Datasets (from ../shared/data/cats_and_dogs_filtered.tar, 3,000 photos of
at most 500 px; the generated ones are quality-90 JPEGs re-encoded with PIL):
    photos      the 3,000 photos as they are
    gen500      photos resized (Lanczos) and centre-cropped to cover 500x375
    gen1000     2x2 mosaics of four such 500x375 photos: 1000x750 with the
                detail density of real photos
    gen1000up   photos upscaled (bicubic) to 1000x750: smoother than a
                real 1000x750 photo, so the kindest case for DCT scaling
--smoke runs on a tiny generated tree (smooth random content, 500x375 and
1000x750) without ../shared, in seconds.

--size N measures the same recipe at crop size N (val: Resize(N * 256 // 224),
CenterCrop(N)), e.g. the 96-pixel crops of the training-parity run.

Prints a Markdown table and writes <out>/summary.json (summary-<N>.json for
--size N, smoke.json for --smoke): per dataset and transform the counts, the
statistics, and every non-identical sample.
"""

import json
import math
import os
import shutil
import sys
import tarfile
import tempfile
import time

import numpy as np

import benchlib

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.dirname(HERE)
DEFAULT_TAR = os.path.join(SOURCE_DIR, "..", "shared", "data", "cats_and_dogs_filtered.tar")
DEFAULT_OUT = os.path.join(HERE, "results", "transforms-psnr")
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
CAP_DB = 99.0
DATASETS = ("photos", "gen500", "gen1000", "gen1000up")


def transforms_under_test(size=224, resize=256):
    from torchvision import transforms as T

    norm = T.Normalize(mean=MEAN, std=STD)
    return {
        "train": T.Compose([T.RandomResizedCrop(size), T.RandomHorizontalFlip(), T.ToTensor(), norm]),
        "val": T.Compose([T.Resize(resize), T.CenterCrop(size), T.ToTensor(), norm]),
    }


# --- datasets -----------------------------------------------------------------


def list_images(root):
    """(path, class) of every .jpg under root/<class>/..., sorted."""
    out = []
    for dirpath, _, files in sorted(os.walk(root)):
        for f in sorted(files):
            if f.lower().endswith((".jpg", ".jpeg")):
                rel = os.path.relpath(os.path.join(dirpath, f), root)
                out.append((os.path.join(dirpath, f), rel.split(os.sep)[0]))
    return out


def cover(img, w, h):
    """img resized (Lanczos) to cover w x h, centre-cropped to it."""
    from PIL import Image

    s = max(w / img.width, h / img.height)
    rw, rh = max(w, round(img.width * s)), max(h, round(img.height * s))
    img = img.resize((rw, rh), Image.Resampling.LANCZOS)
    x, y = (rw - w) // 2, (rh - h) // 2
    return img.crop((x, y, x + w, y + h))


def save_q90(img, root, cls, i):
    os.makedirs(os.path.join(root, cls), exist_ok=True)
    img.save(os.path.join(root, cls, f"g{i:05d}.jpg"), "JPEG", quality=90)


def make_generated(kind, photos, root, n):
    """n quality-90 JPEGs of kind gen500 / gen1000 / gen1000up from the photos."""
    from PIL import Image

    def load(k):
        path, cls = photos[k % len(photos)]
        with Image.open(path) as im:
            return im.convert("RGB"), cls

    for i in range(n):
        if kind == "gen500":
            img, cls = load(i)
            img = cover(img, 500, 375)
        elif kind == "gen1000up":
            img, cls = load(i)
            img = cover(img, 500, 375).resize((1000, 750), Image.Resampling.BICUBIC)
        elif kind == "gen1000":
            tiles = [load(4 * i + t) for t in range(4)]
            cls = tiles[0][1]
            img = Image.new("RGB", (1000, 750))
            for t, (tile, _) in enumerate(tiles):
                img.paste(cover(tile, 500, 375), ((t % 2) * 500, (t // 2) * 375))
        else:
            raise ValueError(kind)
        save_q90(img, root, cls, i)


def smooth_image(w, h, seed):
    """Natural-looking synthetic content: low-frequency colour fields at a
    few scales (bicubic upsampling of small random arrays) plus mild noise."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    acc = np.zeros((h, w, 3), np.float64)
    for cells, amp in ((3, 90.0), (12, 40.0), (48, 16.0)):
        small = rng.normal(0, 1, (cells, max(2, cells * w // h), 3))
        small = ((small - small.min()) / (np.ptp(small) + 1e-9) * 255).astype(np.uint8)
        up = Image.fromarray(small, "RGB").resize((w, h), Image.Resampling.BICUBIC)
        acc += (np.asarray(up, np.float64) - 128) * amp / 128
    acc += 128 + rng.normal(0, 3, (h, w, 3))
    return Image.fromarray(np.clip(acc, 0, 255).astype(np.uint8), "RGB")


def make_smoke(root, n_per_size=4):
    for k in range(n_per_size):
        for j, (w, h) in enumerate(((500, 375), (1000, 750))):
            i = 2 * k + j
            save_q90(smooth_image(w, h, i), root, f"c{i % 2}", i)


def build_pack(root, pack):
    import ufspack

    cli = benchlib.ufspack_cli()
    if os.access(cli, os.X_OK):  # the CLI, as a user would
        import subprocess

        subprocess.run([cli, "build", root, "-o", pack], check=True, stdout=subprocess.DEVNULL)
    else:
        ufspack.build(root, pack, progress=False)


# --- measurement --------------------------------------------------------------


def dct_denom(ops, is_jpeg):
    """The scaled-IDCT denominator the native JPEG path picks for ``ops``
    with dct_scaling (ChooseDenom in decode/src/transform.cc): 1 when the
    geometry is not direct, the first stage is nearest or no resize."""
    if not is_jpeg:
        return 1
    w, h = ops.in_size
    rb, c, ra = ops.resize_before, ops.crop, ops.resize_after
    if rb is not None:
        w, h = rb.width, rb.height
    if c is not None and (any(c.pad) or c.box[0] + c.box[2] > w or c.box[1] + c.box[3] > h):
        return 1  # padded or outside: decoded whole, step by step
    if rb is not None:
        (bw, bh), (ow, oh), filt = ops.in_size, (rb.width, rb.height), rb.pil_filter
    elif ra is not None:
        bw, bh = (c.box[2], c.box[3]) if c is not None else ops.in_size
        (ow, oh), filt = (ra.width, ra.height), ra.pil_filter
    else:
        return 1
    if filt == 0:
        return 1
    d = 1
    while d < 8 and bw / (2 * d) >= ow and bh / (2 * d) >= oh:
        d *= 2
    return d


def psnr(a, b):
    """(PSNR in dB, max |difference| in 1/255 levels) on the un-normalised image."""
    import torch

    mean = torch.tensor(MEAN, dtype=torch.float64).view(3, 1, 1)
    std = torch.tensor(STD, dtype=torch.float64).view(3, 1, 1)
    x = a.double() * std + mean
    y = b.double() * std + mean
    mse = float(((x - y) ** 2).mean())
    maxdiff = float((x - y).abs().max()) * 255
    return (math.inf if mse == 0 else 10 * math.log10(1.0 / mse)), maxdiff


def measure(root, pack, name, transform, seed, limit=None, log=print):
    import torch
    from PIL import Image
    from torchvision.datasets import ImageFolder

    import ufspack

    tv = ImageFolder(root, transform)
    fast = ufspack.MyImageFolder(pack, transform, fast_transforms=True)
    exact = ufspack.MyImageFolder(pack, transform, fast_transforms="exact")
    if [tuple(s) for s in tv.samples] != [tuple(s) for s in fast.samples]:
        raise SystemExit(f"{name}: ImageFolder and MyImageFolder disagree on the samples")
    plan = fast.fast_plan
    n = len(tv) if limit is None else min(limit, len(tv))
    rows = []
    exact_mismatch = []
    rng_drift = 0
    t0 = time.perf_counter()
    for i in range(n):
        path = tv.samples[i][0]
        with Image.open(path) as im:
            size, is_jpeg = im.size, im.format == "JPEG" and im.mode in ("RGB", "L")
        got = {}
        after = {}
        for key, ds in (("tv", tv), ("fast", fast), ("exact", exact)):
            torch.manual_seed(seed + i)
            got[key] = ds[i][0]
            after[key] = torch.randint(1 << 30, (1,)).item()  # the RNG moved on by as much
        torch.manual_seed(seed + i)
        denom = dct_denom(plan.sample(*size), is_jpeg)
        if len(set(after.values())) != 1:
            rng_drift += 1
        if not torch.equal(got["exact"], got["tv"]):
            exact_mismatch.append(i)
        identical = torch.equal(got["fast"], got["tv"])
        db, maxdiff = (math.inf, 0.0) if identical else psnr(got["fast"], got["tv"])
        rows.append({"i": i, "name": os.path.relpath(path, root), "size": list(size), "denom": denom,
                     "identical": identical, "psnr": db, "maxdiff": maxdiff})
    secs = time.perf_counter() - t0
    log(f"  {name}: {n} samples in {secs:.1f} s")
    return summarise(rows, exact_mismatch, rng_drift, secs)


def _stats(values):
    if not values:
        return None
    v = np.asarray(values, np.float64)
    return {"median": float(np.median(v)), "min": float(v.min()), "mean": float(v.mean())}


def summarise(rows, exact_mismatch, rng_drift, secs):
    diff = [r for r in rows if not r["identical"]]
    denoms = {str(d): sum(1 for r in rows if r["denom"] == d) for d in (2, 4, 8)}
    return {
        "samples": len(rows),
        "identical": len(rows) - len(diff),
        "dct_scaled": sum(1 for r in rows if r["denom"] > 1),
        "dct_denoms": denoms,
        "dct_scaled_but_identical": sum(1 for r in rows if r["denom"] > 1 and r["identical"]),
        "unexplained": sum(1 for r in diff if r["denom"] == 1),
        "psnr_non_identical": _stats([r["psnr"] for r in diff]),
        "psnr_all_capped": _stats([min(r["psnr"], CAP_DB) for r in rows]),
        "maxdiff_levels": max((r["maxdiff"] for r in rows), default=0.0),
        "exact_mismatches": len(exact_mismatch),
        "exact_mismatch_indices": exact_mismatch[:50],
        "rng_drift": rng_drift,
        "seconds": secs,
        # [index, name, [width, height], DCT denominator, PSNR dB, max |diff| in levels]
        "non_identical": [[r["i"], r["name"], r["size"], r["denom"], round(r["psnr"], 3), round(r["maxdiff"], 2)]
                          for r in diff],
    }


def fmt_db(s, key):
    if s is None:
        return "-"
    return f"{s[key]:.2f}"


def table(results, size):
    lines = [
        "| dataset | transform | size | samples | bit-identical | DCT-scaled (1/2, 1/4, 1/8) "
        "| median / min PSNR, non-identical (dB) | median / min PSNR, all (dB, identical = 99) "
        "| max abs diff (levels of 255) | exact: mismatches |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for (ds, tr), r in results.items():
        d = r["dct_denoms"]
        lines.append(
            f"| {ds} | {tr} | {size} | {r['samples']} | {r['identical']} "
            f"| {r['dct_scaled']} ({d['2']}, {d['4']}, {d['8']}) "
            f"| {fmt_db(r['psnr_non_identical'], 'median')} / {fmt_db(r['psnr_non_identical'], 'min')} "
            f"| {fmt_db(r['psnr_all_capped'], 'median')} / {fmt_db(r['psnr_all_capped'], 'min')} "
            f"| {r['maxdiff_levels']:.1f} | {r['exact_mismatches']} |"
        )
    return "\n".join(lines)


def prepare(args, work, log):
    """[(dataset name, tree root, pack)]."""
    out = []
    if args.smoke:
        root = os.path.join(work, "smoke")
        make_smoke(root)
        build_pack(root, root + ".ufspack")
        return [("smoke", root, root + ".ufspack")]
    if not os.path.exists(args.tar):
        raise SystemExit(f"{args.tar}: not found (use --tar, or --smoke)")
    with tarfile.open(args.tar) as t:
        t.extractall(work)
    photos_root = os.path.join(work, "cats_and_dogs_filtered")
    photos = list_images(photos_root)
    for ds in args.datasets:
        t0 = time.perf_counter()
        if ds == "photos":
            root = photos_root
        else:
            root = os.path.join(work, ds)
            make_generated(ds, photos, root, args.n_gen)
        build_pack(root, root + ".ufspack")
        log(f"prepared {ds} in {time.perf_counter() - t0:.1f} s")
        out.append((ds, root, root + ".ufspack"))
    return out


def main(argv=None):
    ap = benchlib.parser(__doc__)
    ap.add_argument("--tar", default=DEFAULT_TAR, help="cats_and_dogs_filtered.tar")
    ap.add_argument("--datasets", default=",".join(DATASETS), help=f"comma-separated, of {','.join(DATASETS)}")
    ap.add_argument("--n-gen", type=int, default=500, help="images per generated dataset (default 500)")
    ap.add_argument("--limit", type=int, default=None, help="at most this many samples per dataset")
    ap.add_argument("--transforms", default="train,val")
    ap.add_argument("--size", type=int, default=224,
                    help="crop size (default 224); val resizes to size * 256 // 224 first")
    ap.add_argument("--seed", type=int, default=0, help="sample i is drawn after torch.manual_seed(seed + i)")
    ap.add_argument("--out", default=DEFAULT_OUT, help="directory for summary.json ('' for none)")
    ap.add_argument("--workdir", default=None, help="where to extract and generate (default: a temp dir, removed)")
    ap.add_argument("--smoke", action="store_true", help="a tiny generated tree, no ../shared, seconds")
    args = ap.parse_args(argv)
    args.datasets = [d for d in args.datasets.split(",") if d]
    for d in args.datasets:
        if d not in DATASETS:
            ap.error(f"unknown dataset {d!r}")
    import torch

    torch.set_num_threads(1)

    def log(*a):
        print(*a, file=sys.stderr, flush=True)

    work = args.workdir or tempfile.mkdtemp(prefix="transform_psnr.")
    os.makedirs(work, exist_ok=True)
    results = {}
    try:
        tfs = transforms_under_test(args.size, args.size * 256 // 224)
        for ds, root, pack in prepare(args, work, log):
            for tr in args.transforms.split(","):
                results[(ds, tr)] = measure(root, pack, f"{ds}/{tr}", tfs[tr], args.seed, args.limit, log)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    print(table(results, args.size))
    summary = {
        "what": "MyImageFolder(fast_transforms=True / 'exact') vs torchvision ImageFolder, same seed per sample; "
                "PSNR on the un-normalised 0..1 image (x * std + mean), peak 1",
        "seed": args.seed,
        "smoke": args.smoke,
        "size": args.size,
        "transforms": {k: repr(v) for k, v in transforms_under_test(args.size, args.size * 256 // 224).items()},
        "versions": versions(),
        "results": [{"dataset": ds, "transform": tr, **r} for (ds, tr), r in results.items()],
    }
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        name = "smoke.json" if args.smoke else "summary.json" if args.size == 224 else f"summary-{args.size}.json"
        with open(os.path.join(args.out, name), "w") as f:
            json.dump(summary, f, separators=(",", ":"))
    return summary


def versions():
    import PIL
    import torch
    import torchvision

    import ufspack

    return {"torch": torch.__version__, "torchvision": torchvision.__version__, "pillow": PIL.__version__,
            "ufspack": getattr(ufspack, "__version__", "?")}


if __name__ == "__main__":
    main()
