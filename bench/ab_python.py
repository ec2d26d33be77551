#!/usr/bin/python3
"""Before/after of the Python sample path: two builds of ufspack, one run.

    python3 bench/ab_python.py --pack PACK --a OLD/build/python --b build/python \\
        [--rounds 5] [--samples 1500]

Each round runs every row once under each build (A then B, alternating which
goes first), each in a fresh interpreter with that build's PYTHONPATH, over
the same pack (build it once: `ufspack build TREE -o PACK`; the format does
not change between the builds being compared).  Rows, in samples/s:

  raw        Pack(pack)[i]: the record's bytes
  pil        ImageFolder(pack)[i]: the default path (PIL image, target)
  numpy      ImageFolder(pack, output="numpy")[i]
  fused      ImageFolder(pack, val transform, fast_transforms=True)[i]
  fused_b64  the same through __getitems__(64 indices), decode_threads=1

Reported: the median over rounds per build, and B/A.  Single core
(torch.set_num_threads(1)); the page cache is warm (the pack is read once
before the first round).
"""

import json
import os
import statistics
import subprocess
import sys

import benchlib

ROWS = ("raw", "pil", "numpy", "fused", "fused_b64")

CHILD = r"""
import json, sys, time
import torch
torch.set_num_threads(1)
import ufspack
from torchvision import transforms as T
pack, row, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
val = T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(),
                 T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])
if row == "raw":
    ds = ufspack.Pack(pack)
elif row == "pil":
    ds = ufspack.MyImageFolder(pack)
elif row == "numpy":
    ds = ufspack.MyImageFolder(pack, output="numpy")
else:
    ds = ufspack.MyImageFolder(pack, val, fast_transforms=True, decode_threads=1)
m = len(ds)
idx = [(k * 7919) % m for k in range(n)]
for k in idx[:50]:  # warm-up
    ds[k]
t0 = time.perf_counter()
if row == "fused_b64":
    for a in range(0, n, 64):
        ds.__getitems__(idx[a:a + 64])
else:
    for k in idx:
        ds[k]
print(json.dumps(n / (time.perf_counter() - t0)))
"""


def run(pythonpath, pack, row, samples):
    env = dict(os.environ, PYTHONPATH=pythonpath, PYTHONDONTWRITEBYTECODE="1")
    out = subprocess.run([sys.executable, "-c", CHILD, pack, row, str(samples)], env=env,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = benchlib.parser(__doc__)
    ap.add_argument("--pack", required=True)
    ap.add_argument("--a", required=True, help="PYTHONPATH of build A (before)")
    ap.add_argument("--b", required=True, help="PYTHONPATH of build B (after)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--samples", type=int, default=1500)
    args = ap.parse_args()
    for name in ("data.ufs", "index.ufs"):
        path = os.path.join(args.pack, name)
        if os.path.exists(path):
            with open(path, "rb") as f:
                while f.read(1 << 20):
                    pass
    got = {(w, r): [] for w in "AB" for r in ROWS}
    for rnd in range(args.rounds):
        order = "AB" if rnd % 2 == 0 else "BA"
        for row in ROWS:
            for w in order:
                got[(w, row)].append(run(args.a if w == "A" else args.b, args.pack, row, args.samples))
        print(f"round {rnd + 1}/{args.rounds} done", file=sys.stderr)
    print(f"| row | A (samples/s) | B (samples/s) | B/A |  ({args.rounds} rounds, median; {args.samples} samples)")
    print("|---|---:|---:|---:|")
    for row in ROWS:
        a = statistics.median(got[("A", row)])
        b = statistics.median(got[("B", row)])
        print(f"| {row} | {a:,.0f} | {b:,.0f} | {b / a:.3f} |")


if __name__ == "__main__":
    main()
