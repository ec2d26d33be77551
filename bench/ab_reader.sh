#!/usr/bin/env bash
# Before/after of the reader's micro benchmarks: two builds' reader_bench,
# interleaved in one run (A, B, A, B, ...), the median of each benchmark's
# real time per build, and B/A (below 1: B is faster).
#   bash bench/ab_reader.sh OLD/build/bench/reader_bench build/bench/reader_bench \
#        [rounds=5] [filter]
set -euo pipefail
A=$1; B=$2; ROUNDS=${3:-5}
FILTER=${4:-'BM_Open/100000$|BM_Read/20480/real_time/threads:1$|BM_ReadNoVerify/20480/real_time/threads:1$|BM_ReadZstd/20480/real_time/threads:1$|BM_ReadCached/20480/real_time/threads:1$|BM_Find$'}
OUT=$(mktemp -d "${TMPDIR:-/tmp}/ab-reader-XXXXXX")
trap 'rm -rf "$OUT"' EXIT
for r in $(seq "$ROUNDS"); do
  for w in A B; do
    bin=$A; [ "$w" = B ] && bin=$B
    # JSON: the CSV reporter aborts when benchmarks have different counters.
    "$bin" --benchmark_filter="$FILTER" --benchmark_min_time=0.3 \
      --benchmark_format=json 2>/dev/null > "$OUT/$w.$r.json"
  done
  echo "round $r/$ROUNDS done" >&2
done
python3 - "$OUT" "$ROUNDS" <<'PY'
import glob, json, os, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
t = {}
for w in "AB":
    for f in glob.glob(os.path.join(out, f"{w}.*.json")):
        for b in json.load(open(f))["benchmarks"]:
            scale = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[b["time_unit"]]
            t.setdefault((w, b["name"]), []).append(b["real_time"] * scale)  # ns
names = sorted({n for (_, n) in t})
print(f"| benchmark | A (ns) | B (ns) | B/A |  ({rounds} rounds, median real time)")
print("|---|---:|---:|---:|")
for n in names:
    a, b = statistics.median(t[("A", n)]), statistics.median(t[("B", n)])
    print(f"| {n} | {a:,.0f} | {b:,.0f} | {b / a:.3f} |")
PY
