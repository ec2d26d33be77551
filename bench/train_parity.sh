#!/bin/bash
# Training parity (issue 13, point 5): examples/train_classifier.py on the
# real photos (cats vs dogs), trained on the train split and evaluated on the
# validation split each epoch, once with fast_transforms="exact" (the same
# tensors as torchvision, so the same run as the default path) and once with
# fast_transforms=True (DCT scaling allowed), same seed.  Not timed.
#
#   bash bench/train_parity.sh [workdir] [extra train_classifier.py args]
#
# Env: TAR (default ../shared/data/cats_and_dogs_filtered.tar), EPOCHS (8),
# SIZE (96), SEED (0), MODES ("exact on"; add "torchvision" to also run
# ImageFolder on the directory; "random" and "block" run the default path
# with RandomSampler or ufspack.BlockSampler, on a --layout shuffled build of
# the train split: BLOCK_BYTES (1 MiB, so that 46 MB make ~45 blocks) and
# WINDOW (4)).  SEEDS ("0 1 2") repeats every mode per seed.  Writes
# <workdir>/<mode>-<seed>.log and prints the last epoch line of each.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-/tmp/train_parity}
shift || true
tar=${TAR:-$here/../shared/data/cats_and_dogs_filtered.tar}
epochs=${EPOCHS:-8}
size=${SIZE:-96}
seeds=${SEEDS:-${SEED:-0}}
modes=${MODES:-exact on}
block_bytes=${BLOCK_BYTES:-1048576}
window=${WINDOW:-4}
py=/usr/bin/python3
export PYTHONPATH=$here/build/python OMP_NUM_THREADS=1
mkdir -p "$work"
d=$work/cats_and_dogs_filtered
(
  flock 9  # runs sharing a workdir prepare it once
  if [ ! -e "$work/validation.ufspack" ]; then
    rm -rf "$d" "$work/train.ufspack"
    tar -xf "$tar" -C "$work"
    for split in train validation; do
      "$here/build/ufspack" build "$d/$split" -o "$work/$split.ufspack" >/dev/null
    done
  fi
  if [ ! -e "$work/train-shuffled.ufspack" ]; then
    "$here/build/ufspack" build "$d/train" -o "$work/train-shuffled.ufspack" --layout shuffled >/dev/null
  fi
) 9>"$work/.prepare.lock"
for seed in $seeds; do
  common=(--epochs "$epochs" --size "$size" --seed "$seed" --arch cnn --batch-size 64 --lr 0.01 --momentum 0.9 "$@")
  for mode in $modes; do
    case $mode in
      torchvision) args=("$d/train" --val "$d/validation") ;;
      random) args=("$work/train-shuffled.ufspack" --ufspack --val "$work/validation.ufspack") ;;
      block) args=("$work/train-shuffled.ufspack" --ufspack --val "$work/validation.ufspack"
                   --sampler block --block-bytes "$block_bytes" --window "$window") ;;
      *) args=("$work/train.ufspack" --ufspack --fast-transforms "$mode" --val "$work/validation.ufspack") ;;
    esac
    start=$(date +%s)
    nice $py "$here/examples/train_classifier.py" "${args[@]}" "${common[@]}" >"$work/$mode-$seed.log"
    echo "$mode seed $seed ($(( $(date +%s) - start )) s): $(grep train_loss "$work/$mode-$seed.log" | tail -1)"
  done
done
