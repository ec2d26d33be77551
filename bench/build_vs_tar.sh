#!/usr/bin/env bash
# Times `ufspack build` against `tar -cf` on the same tree, in one run,
# alternating the two, and prints files/s for each (median of N runs).
#
#   bash bench/build_vs_tar.sh <dir> [runs=5] [ufspack binary=build/ufspack]
#
# The tree is read once first so both see a warm page cache; outputs go to a
# temporary directory on the same file system as $TMPDIR.
set -euo pipefail
if [ $# -lt 1 ] || [ "$1" = "--help" ]; then
  sed -n '2,8p' "$0"; exit 2
fi
SRC=$1; RUNS=${2:-5}; UFSPACK=${3:-build/ufspack}
OUT=$(mktemp -d "${TMPDIR:-/tmp}/ufspack-bvt-XXXXXX")
trap 'rm -rf "$OUT"' EXIT
FILES=$(find -L "$SRC" -type f | wc -l)
tar -cf /dev/null "$SRC"   # warm the page cache (GNU tar skips reading for /dev/null)
cat $(find -L "$SRC" -type f) > /dev/null
now() { date +%s.%N; }
ub=(); tb=()
for i in $(seq "$RUNS"); do
  t0=$(now); "$UFSPACK" build "$SRC" -o "$OUT/pack" --flat --all-files -q; t1=$(now)
  ub+=("$(awk "BEGIN{print $t1 - $t0}")")
  t0=$(now); tar -cf "$OUT/tree.tar" -C "$(dirname "$SRC")" "$(basename "$SRC")"; sync -f "$OUT/tree.tar"; t1=$(now)
  tb+=("$(awk "BEGIN{print $t1 - $t0}")")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
mu=$(median "${ub[@]}"); mt=$(median "${tb[@]}")
printf 'files: %d, runs: %d (median)\n' "$FILES" "$RUNS"
awk -v f="$FILES" -v mu="$mu" -v mt="$mt" 'BEGIN {
  printf "%-28s %8.3f s  %10.0f files/s\n", "ufspack build (fsync\047d)", mu, f / mu
  printf "%-28s %8.3f s  %10.0f files/s\n", "tar -cf (+ sync of the tar)", mt, f / mt
  printf "ratio ufspack/tar files/s: %.2f\n", mt / mu }'
