#!/usr/bin/env bash
# Runs bench/e2e.py over every storage case and draws the charts.
#
#   sudo DATASET=photos bash bench/run_e2e.sh <imagefolder-dir> <outdir> [limit=2000] [workers=0,2,4]
#
# Results go to <outdir>/<dataset>-<case>/ (e2e.csv + e2e.json, or builds.json,
# and prepared.json), charts and tables to <outdir>/<dataset>-e2e-*.png and
# <outdir>/<dataset>-tables.md; the containers to <outdir>/work/<dataset>.
# Storage cases, each a separate e2e.py run on the same prepared workdir:
#   local-warm   page cache warm (everything read before each measurement)
#   local-cold   `sync; echo 3 > /proc/sys/vm/drop_caches` before each measurement
#   slowfs-0.25  ../shared/bench/slowfs.sh, 0.25 ms one-way delay, remounted
#   slowfs-0.5   the same at 0.5 ms                       before each measurement
#   builds-local       ufspack build / tar -cf / LMDB from the local tree, cold cache
#   builds-slowfs-0.5  the same from the tree on the slow FS (remounted before each)
# Needs root (drop_caches, network namespace).  Environment: DATASET (the
# dataset's name in the results; default the tree's directory name), PYTHON
# (default /usr/bin/python3), PYTHONPATH (e.g. build/python), UFSPACK (the
# CLI), SLOWFS (default ../shared/bench/slowfs.sh), CASES (default: all six),
# REPEAT (runs per measurement, median reported; default 3), LOADERS (default
# all; `bench/e2e.py list` names them).
set -euo pipefail
if [ $# -lt 2 ] || [ "$1" = "--help" ]; then sed -n '2,21p' "$0"; exit 2; fi
SRC=$1; OUT=$(mkdir -p "$2" && cd "$2" && pwd); LIMIT=${3:-2000}; WORKERS=${4:-0,2,4}
HERE=$(cd "$(dirname "$0")" && pwd)
DATASET=${DATASET:-$(basename "$(cd "$SRC" && pwd)")}
PYTHON=${PYTHON:-/usr/bin/python3}
SLOWFS=${SLOWFS:-$HERE/../../shared/bench/slowfs.sh}
CASES=${CASES:-local-warm local-cold slowfs-0.25 slowfs-0.5 builds-local builds-slowfs-0.5}
REPEAT=${REPEAT:-3}
WORK=$OUT/work/$DATASET
MNT=$OUT/mnt

cli=()
[ -n "${UFSPACK:-}" ] && cli=(--ufspack-cli "$UFSPACK")
[ -f "$WORK/prepared.json" ] || "$PYTHON" "$HERE/e2e.py" prepare "$SRC" "$WORK" "${cli[@]}"
WORK=$(cd "$WORK" && pwd -P)  # the real path (sshfs serves it; work may be a link)

for case in $CASES; do
  echo "== $case"
  RES=$OUT/$DATASET-$case  # results of this dataset and storage case
  mkdir -p "$RES"
  cp "$WORK/prepared.json" "$RES/prepared.json"
  case $case in
    local-warm)
      "$PYTHON" "$HERE/e2e.py" run "$WORK" --limit "$LIMIT" --workers "$WORKERS" --repeat "$REPEAT" --loaders "${LOADERS:-all}" --warm \
        --strace --storage "$case" --out "$RES/e2e" ;;
    local-cold)
      "$PYTHON" "$HERE/e2e.py" run "$WORK" --limit "$LIMIT" --workers "$WORKERS" --repeat "$REPEAT" --loaders "${LOADERS:-all}" --drop-caches \
        --storage "$case" --out "$RES/e2e" ;;
    builds-local)
      [ -n "${UFSPACK:-}" ] || { echo "builds need UFSPACK=<path of the ufspack CLI>" >&2; exit 2; }
      "$PYTHON" "$HERE/e2e.py" builds "$WORK/tree" "$OUT/builds-tmp" --ufspack-cli "$UFSPACK" \
        --repeat "$REPEAT" --before-each "sync && echo 3 > /proc/sys/vm/drop_caches" \
        --storage local-cold --out "$RES/builds"
      rm -rf "$OUT/builds-tmp" ;;
    builds-slowfs-*)
      [ -n "${UFSPACK:-}" ] || { echo "builds need UFSPACK=<path of the ufspack CLI>" >&2; exit 2; }
      delay=${case#builds-slowfs-}
      mkdir -p "$MNT"
      remount="bash '$SLOWFS' up '$WORK' '$MNT' $delay >/dev/null 2>&1 && sync && echo 3 > /proc/sys/vm/drop_caches"
      bash "$SLOWFS" up "$WORK" "$MNT" "$delay"
      "$PYTHON" "$HERE/e2e.py" builds "$MNT/tree" "$OUT/builds-tmp" --ufspack-cli "$UFSPACK" \
        --repeat "$REPEAT" --before-each "$remount" --storage "slowfs-$delay" \
        --out "$RES/builds" || true
      bash "$SLOWFS" down
      rm -rf "$OUT/builds-tmp" ;;
    slowfs-*)
      delay=${case#slowfs-}
      mkdir -p "$MNT"
      remount="bash '$SLOWFS' up '$WORK' '$MNT' $delay >/dev/null 2>&1 && sync && echo 3 > /proc/sys/vm/drop_caches"
      bash "$SLOWFS" up "$WORK" "$MNT" "$delay"
      "$PYTHON" "$HERE/e2e.py" run "$MNT" --limit "$LIMIT" --workers "$WORKERS" --repeat "$REPEAT" --loaders "${LOADERS:-all}" \
        --before-each "$remount" --storage "$case" --out "$RES/e2e" || true
      bash "$SLOWFS" down ;;
    *) echo "unknown case $case" >&2; exit 2 ;;
  esac
done
"$PYTHON" "$HERE/plot_e2e.py" "$OUT" "$DATASET"
