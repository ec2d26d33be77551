#!/usr/bin/env bash
# Builds the reader's libFuzzer target with clang (ASan + UBSan) and fuzzes
# it for a while.  See tests/fuzz/README.md.
#
#   bash scripts/fuzz.sh [seconds]        (default 600)
#
# Environment:
#   FUZZ_BUILD_DIR   clang build directory          (default build-fuzz)
#   FUZZ_WORK_DIR    working corpus + crash dir     (default $FUZZ_BUILD_DIR/fuzz-work)
#   FUZZ_NICE        nice level of the fuzzer       (default 5)
#   FUZZ_JOBS        parallel fuzzing processes     (default 1)
#
# The seeds (tests/fuzz/corpus) are copied into $FUZZ_WORK_DIR/corpus, which
# the fuzzer grows; the committed corpus is never modified.  Crashes, timeouts
# and OOM inputs land in $FUZZ_WORK_DIR/artifacts/ (crash-*, timeout-*,
# oom-*, slow-unit-*): copy each into tests/fuzz/regressions/ once fixed.
# Exits non-zero if the fuzzer found something.
set -euo pipefail
case "${1:-}" in
  -h|--help)
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 0 ;;
  ''|*[!0-9]*)
    if [ -n "${1:-}" ]; then
      echo "fuzz.sh: seconds must be a whole number, not '$1' (see --help)" >&2
      exit 2
    fi ;;
esac
cd "$(dirname "$0")/.."
SECONDS_TO_RUN=${1:-600}
BUILD_DIR=${FUZZ_BUILD_DIR:-build-fuzz}
WORK_DIR=${FUZZ_WORK_DIR:-$BUILD_DIR/fuzz-work}
NICE=${FUZZ_NICE:-5}
JOBS=${FUZZ_JOBS:-1}

bash scripts/install-deps.sh fuzz
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$BUILD_DIR" -G Ninja \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DUFSPACK_BUILD_FUZZERS=ON -DUFSPACK_BUILD_TESTS=ON \
  -DUFSPACK_BUILD_PYTHON=OFF -DUFSPACK_BUILD_DECODE=OFF \
  -DUFSPACK_BUILD_BENCHMARKS=OFF -DUFSPACK_INSTALL=OFF "${launcher[@]}" >/dev/null
cmake --build "$BUILD_DIR" --target ufspack_pack_fuzzer -j "${BUILD_JOBS:-2}"

mkdir -p "$WORK_DIR/corpus" "$WORK_DIR/artifacts"
# The seeds and every past finding start the run.
for f in tests/fuzz/corpus/* tests/fuzz/regressions/*; do
  case "$(basename "$f")" in README*) continue ;; esac
  cp -n "$f" "$WORK_DIR/corpus/"
done
echo "== fuzzing for ${SECONDS_TO_RUN}s; corpus $WORK_DIR/corpus, findings in $WORK_DIR/artifacts/"
# -jobs makes libFuzzer fork workers that log to fuzz-<n>.log; one job runs
# in this process and logs here.
parallel=()
if [ "$JOBS" -gt 1 ]; then parallel=(-jobs="$JOBS" -workers="$JOBS"); fi
start=$(date +%s)
set +e
nice -n "$NICE" "$BUILD_DIR/tests/fuzz/ufspack_pack_fuzzer" \
  -dict=tests/fuzz/pack.dict \
  -rss_limit_mb=2048 -timeout=10 -max_total_time="$SECONDS_TO_RUN" \
  -print_final_stats=1 "${parallel[@]}" \
  -artifact_prefix="$WORK_DIR/artifacts/" \
  "$WORK_DIR/corpus" 2>&1 | tee "$WORK_DIR/fuzz.log"
rc=${PIPESTATUS[0]}
set -e
end=$(date +%s)
echo "== ran $((end - start))s, exit status $rc"
echo "== final stats:"
grep -E '^(stat::|Done |#[0-9]+ +DONE)' "$WORK_DIR/fuzz.log" | tail -20 || true
echo "== corpus: $(ls "$WORK_DIR/corpus" | wc -l) inputs"
found=$(ls "$WORK_DIR/artifacts" | wc -l)
echo "== findings: $found in $WORK_DIR/artifacts/"
ls -l "$WORK_DIR/artifacts"
[ "$rc" -eq 0 ] && [ "$found" -eq 0 ]
