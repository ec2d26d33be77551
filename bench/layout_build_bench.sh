#!/usr/bin/env bash
# Does --layout shuffled slow `ufspack build` down on a slow network FS?
# (issue 29: at most 5%).  Builds TREE, served over SSHFS by
# ../shared/bench/slowfs.sh at DELAY ms one way, with --layout sorted and
# --layout shuffled, alternating, REPEAT times each, each from a fresh mount
# with the page cache dropped (every file comes over the link).  Root only.
#
#   sudo bash bench/layout_build_bench.sh TREE [DELAY_MS=0.5] [REPEAT=3] [UFSPACK=build/ufspack]
#
# Prints each run's seconds and the medians; the pack goes to local disk.
set -euo pipefail
TREE=$(cd "$1" && pwd)
DELAY=${2:-0.5}
REPEAT=${3:-3}
UFSPACK=$(realpath "${4:-build/ufspack}")
SLOWFS=${SLOWFS:-$(dirname "$0")/../../shared/bench/slowfs.sh}
WORK=$(mktemp -d /tmp/layout-build-XXXXXX)
trap 'bash "$SLOWFS" down >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
mkdir -p "$WORK/mnt"
declare -A times
for rep in $(seq "$REPEAT"); do
  for layout in sorted shuffled; do
    bash "$SLOWFS" up "$(dirname "$TREE")" "$WORK/mnt" "$DELAY" >/dev/null
    sync; echo 3 > /proc/sys/vm/drop_caches
    start=$(date +%s.%N)
    "$UFSPACK" build "$WORK/mnt/$(basename "$TREE")" -o "$WORK/pack-$layout" --layout "$layout" -q
    end=$(date +%s.%N)
    t=$(echo "$end - $start" | bc)
    times[$layout]="${times[$layout]:-} $t"
    echo "run $rep $layout: $t s"
  done
done
median() { printf '%s\n' $1 | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
s=$(median "${times[sorted]}")
h=$(median "${times[shuffled]}")
echo "median: sorted $s s, shuffled $h s, shuffled / sorted $(echo "scale=3; $h / $s" | bc)"
