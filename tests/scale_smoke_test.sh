#!/usr/bin/env bash
# Smoke test of the scale benchmark (bench/scale_bench, docs/scale.md): a
# small run of each of its commands, checking that each prints its JSON and
# that the figures are sane.  The full runs (10M and 100M records) are the
# opt-in commands in docs/scale.md.
#
# And of the append benchmark (bench/append_bench.py), on 2,000 files, and
# of the tree build benchmark (bench/tree_build_bench.py), on 3,000 files,
# compared with itself (so both sides must list the same records).
#
#   bash tests/scale_smoke_test.sh <scale_bench binary> <ufspack CLI> \
#       <append_bench.py> <tree_build_bench.py>
set -euo pipefail
BENCH=$1
CLI=$2
APPEND_BENCH=$3
TREE_BENCH=$4
TMP=$(mktemp -d "${TMPDIR:-/tmp}/ufspack-scale-XXXXXX")
trap 'rm -rf "$TMP"' EXIT

check() {  # check <json> <python expression over j>
  python3 -c 'import json, sys; j = json.loads(sys.argv[1]); assert eval(sys.argv[2]), (sys.argv[2], j)' "$1" "$2"
}

b=$("$BENCH" build "$TMP/p" --records 300000 --classes 100)
echo "$b"
check "$b" 'j["records"] == 300000 and j["peak_rss_bytes"] < (256 << 20) and 80 < j["index_bytes_per_record"] < 100'
r=$("$BENCH" read "$TMP/p" --ops 50000 --threads 2)
echo "$r"
check "$r" 'j["records"] == 300000 and j["getrecord_per_s"] > 0 and j["find_per_s"] > 0 and j["read_per_s"] > 0 and j["getrecords_per_s"] > 0 and j["findmany_per_s"] > 0'
m=$("$BENCH" merge "$TMP/m" --parts 100 --records 5)
echo "$m"
check "$m" 'j["parts"] == 100 and j["records"] == 500 and j["manifest_bytes"] > 100 * 64'
a=$(TMPDIR=$TMP python3 "$APPEND_BENCH" --files 2000 --classes 20 --cli "$CLI")
echo "$a"
check "$a" 'j["files"] == 2000 and j["appended"] == 20 and j["same_listing"] and j["append_files_from_seconds"] > 0'
t=$(TMPDIR=$TMP python3 "$TREE_BENCH" --files 3000 --classes 30 --parts 3 --cli "$CLI" --compare-cli "$CLI")
echo "$t"
check "$t" 'j["files"] == 3000 and j["same_listing"] and all(j[s]["build_peak_rss_bytes"] > 0 and j[s]["part0_seconds"] > 0 and j[s]["part2_peak_rss_bytes"] > 0 for s in ("cli", "compare_cli"))'
echo "scale smoke test: ok"
