#!/usr/bin/env bash
# Smoke test of the peer loaders of the end-to-end benchmark
# (bench/e2e_peers.py), so they cannot rot: installs the peers from PyPI with
# bench/install-peers.sh into a venv, prepares a tiny JPEG dataset and reads
# it through every peer, raw and decode, single process and 2 workers
# (batch size 2: MosaicML Streaming hands whole batches to workers, so with
# a batch larger than the dataset one worker would get nothing).
#   bench_peers_test.sh <source-dir> <build-dir>
# PEERS picks the peers (default: all but dali, whose wheel is 404 MB; set
# PEERS to include it).  The venv ($UFSPACK_PEERS_VENV, default
# <build-dir>/peers-venv) is kept: a second run reinstalls nothing.
# Exits 77 (skipped) when PyPI cannot be reached.
set -euo pipefail
SRC=$(cd "$1" && pwd); BUILD=$(cd "$2" && pwd)
VENV=${UFSPACK_PEERS_VENV:-$BUILD/peers-venv}
export PEERS=${PEERS:-webdataset litdata streaming ffcv mxnet_recordio tfrecord}
if ! out=$(bash "$SRC/bench/install-peers.sh" "$VENV" 2>&1); then
  echo "$out" | tail -25
  if echo "$out" | grep -qiE "could not find a version|connection|network is unreachable|resolve|timed out|no matching distribution"; then
    echo "PyPI cannot be reached; skipping"; exit 77
  fi
  exit 1
fi
PY=$VENV/bin/python
TMP=$(mktemp -d "${TMPDIR:-/tmp}/ufspack-peers-XXXXXX")
trap 'rm -rf "$TMP"' EXIT
"$PY" - "$TMP/tree" <<'PY'
import os, sys
import numpy as np
from PIL import Image
root = sys.argv[1]
rng = np.random.default_rng(0)
for c in ("cats", "dogs"):
    os.makedirs(os.path.join(root, c))
    for i in range(12):
        arr = rng.integers(0, 255, (20 + i, 30, 3), dtype=np.uint8)
        Image.fromarray(arr).save(os.path.join(root, c, f"{i}.jpg"), quality=90)
PY
export PYTHONPATH=$BUILD/python${PYTHONPATH:+:$PYTHONPATH}
loaders=$("$PY" "$SRC/bench/e2e.py" list --group peer --available --names)
for p in $PEERS; do
  case ",$loaders," in *",$p,"*) ;; *) echo "peer $p installed but not usable by bench/e2e.py (found: $loaders)"; exit 1 ;; esac
done
"$PY" "$SRC/bench/e2e.py" prepare "$TMP/tree" "$TMP/work" --ufspack-cli "$BUILD/ufspack" >"$TMP/prepare.log" 2>&1 \
  || { cat "$TMP/prepare.log"; exit 1; }
"$PY" "$SRC/bench/e2e.py" run "$TMP/work" --loaders "$loaders" --limit 8 --workers 0,2 \
  --batch-size 2 --out "$TMP/out" \
  >"$TMP/run.log" 2>&1 || { cat "$TMP/run.log"; exit 1; }
"$PY" - "$TMP/out.csv" "$loaders" "$TMP/work/prepared.json" <<'PY'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
loaders = sys.argv[2].split(",")
builds = json.load(open(sys.argv[3]))["builds"]
bad = []
for loader in loaders:
    mine = [r for r in rows if r["loader"] == loader]
    if len(mine) != 4:  # raw/decode x workers 0/2
        bad.append(f"{loader}: {len(mine)} measurements, expected 4")
    for r in mine:
        if r["error"] or int(r["samples"]) != 8 or float(r["samples_per_s"]) <= 0:
            bad.append(f"{loader} {r['mode']} w={r['workers']}: {r['error'] or r['samples'] + ' samples'}")
    if f"{loader}_build_s" not in builds:
        bad.append(f"{loader}: no build time recorded")
if bad:
    sys.exit("\n".join(bad))
print(f"peers smoke test: OK ({', '.join(loaders)})")
PY
