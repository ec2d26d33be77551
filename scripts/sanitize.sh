#!/usr/bin/env bash
# Sanitizer builds and runs of the test suites (part of scripts/test.sh).
#
#   bash scripts/sanitize.sh [asan|tsan|pyasan|all]...     (default: all)
#
#   asan    ASan+UBSan build of everything (-DUFSPACK_SANITIZE=address,undefined)
#           into ${ASAN_BUILD_DIR:-${BUILD_DIR:-build}-asan}; runs the C++ suite
#   tsan    TSan build (-DUFSPACK_SANITIZE=thread, no Python module) into
#           ${TSAN_BUILD_DIR:-${BUILD_DIR:-build}-tsan}; runs the C++ suite
#   pyasan  the Python suite (tests/python) against the ASan build's _core
#           module and CLI (builds the ASan tree first if needed)
#   all     asan, pyasan, tsan
#
# CTEST_ARGS adds arguments to the ctest runs (e.g. CTEST_ARGS="-R Reader");
# PYTEST_ARGS replaces the pytest arguments (default: tests/python).
#
# Any sanitizer report fails the run, even one from a child process whose exit
# status a test does not look at (the CLI run by cli_test, DataLoader workers,
# forked readers): ASan/LSan/TSan reports go to files under
# <build>/sanitizer-logs and the script fails when any is there, printing
# them; UBSan (whose gcc runtime ignores log_path) is caught by its exit status
# and by searching the tests' full output for "runtime error:".
#
# Tests left out of the sanitizer runs (they still run in the plain build):
#   pip_install           builds a wheel with pip in a fresh venv: tests packaging,
#                         and pip's build ignores UFSPACK_SANITIZE
#   bench_peers           installs third-party loaders from PyPI and runs them: no
#                         ufspack C++ code worth checking that pytest doesn't cover
#   install_find_package  cmake --install + find_package from a plain consumer,
#                         which would have to link the sanitizer runtimes too:
#                         tests the CMake package, not the code
#   reader_only_build     configures and builds separate plain trees (an
#                         add_subdirectory consumer, -DUFSPACK_BUILD_DECODE=OFF):
#                         tests the CMake structure, not the code
#   python_lint           ruff and mypy over the Python sources: no native code
#   pytest.<file>         (asan tree) run by `pyasan` instead, which can preload
#                         the ASan runtime into the uninstrumented python3
#   pypi.<file>           the Python suite on the PyPI stack: the same code as
#                         pytest.<file>, under another torch/Pillow/numpy
#
# The suites were validated with the Debian package versions listed in
# tests/sanitizers/validated-versions.txt; any that differ are printed first.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source-path=SCRIPTDIR source=lib/ctest-failures.sh
. scripts/lib/ctest-failures.sh

ASAN_BUILD_DIR=${ASAN_BUILD_DIR:-${BUILD_DIR:-build}-asan}
TSAN_BUILD_DIR=${TSAN_BUILD_DIR:-${BUILD_DIR:-build}-tsan}
PYTHON=${PYTHON:-/usr/bin/python3}
JOBS=${JOBS:-$(nproc)}
SUPP_DIR=$PWD/tests/sanitizers
EXCLUDE='^(pip_install|bench_peers|install_find_package|reader_only_build|python_lint|pytest\..*|pypi\..*)$'
# Under TSan only (the ASan run keeps them):
#   ReaderTest.RecordLargerThan4GiBReadsBackExactly and
#   RoundTripTest.SparseSourceLargerThan4GiBRoundTrips  read a 4 GiB record
#     into one buffer, and TSan's shadow for it (4 bytes per byte touched) is
#     more than a 24 GiB machine has: the OOM killer ends them.  The threaded
#     paths they pass through are covered by the other reader and builder
#     tests (e.g. RoundTripTest.FileLargerThan64MiBIsStreamed)
#   ParallelForTest.WorksInAForkedChildWhileTheParentIsBusy  starts threads in
#     a child forked from a multi-threaded parent (ParallelFor's documented
#     fork contract), which TSan does not support: it kills such a child
#     ("starting new threads after multi-threaded fork is not supported";
#     with die_after_fork=0 its thread registry still holds the parent's
#     threads and it dies on "dup thread with used id").  Runs under ASan.
#   ResizeParityTest.*  byte parity of the resize kernels (decode/src/resize.cc,
#     which starts no thread and shares no state) with Pillow and torchvision:
#     nothing for TSan to see, and 198 test-seconds under it (3-4x the plain
#     run).  The plain and ASan runs keep them.
#   TransformTest's four single-threaded parity cases (RegionDecode...,
#     CropResizeFlip..., ResizeThenCrop..., PaddingAndBoxes...): 156
#     test-seconds under TSan, one thread.  TSan keeps
#     TransformTest.ConcurrentTransformsGiveTheSerialResults, which runs the
#     same transforms from several threads at once.
TSAN_EXCLUDE='^(pip_install|bench_peers|install_find_package|reader_only_build|python_lint|pytest\..*|pypi\..*|ReaderTest\.RecordLargerThan4GiBReadsBackExactly|RoundTripTest\.SparseSourceLargerThan4GiBRoundTrips|ParallelForTest\.WorksInAForkedChildWhileTheParentIsBusy|ResizeParityTest\..*|TransformTest\.(RegionDecodeEqualsFullDecodeForEveryCrop|CropResizeFlipMatchesThePlainWay|ResizeThenCropComputesTheWindowExactly|PaddingAndBoxesPastTheEdgeAreMaterialised))$'

# The third-party versions the suites were validated with
# (tests/sanitizers/validated-versions.txt): prints every installed version
# that differs, so a report is read against what was validated.  A
# difference is not a failure by itself: a Debian point release may bring
# one, and the suites then say whether it matters.
VERSION_NOTE=""
check_versions() {
  local pkg want have diffs=""
  while read -r pkg want; do
    case $pkg in ''|'#'*) continue ;; esac
    have=$(dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null || true)
    [ "$have" = "$want" ] || diffs+="  $pkg: validated with $want, installed: ${have:-none}"$'\n'
  done < "$SUPP_DIR/validated-versions.txt"
  if [ -n "$diffs" ]; then
    VERSION_NOTE="sanitize: third-party versions differ from tests/sanitizers/validated-versions.txt:"$'\n'"$diffs"
    printf '%s' "$VERSION_NOTE"
  else
    echo "sanitize: third-party versions as validated (tests/sanitizers/validated-versions.txt)"
  fi
}
command -v dpkg-query >/dev/null 2>&1 && check_versions

configure_build() {  # <dir> <sanitizers> <cmake args>...
  local dir=$1 san=$2; shift 2
  local launcher=()
  if command -v ccache >/dev/null 2>&1; then
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  fi
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} \
    -DUFSPACK_SANITIZE="$san" -DUFSPACK_BUILD_TESTS=ON -DUFSPACK_BUILD_BENCHMARKS=OFF \
    -DUFSPACK_BUILD_FUZZERS=OFF -DPython_EXECUTABLE="$PYTHON" "${launcher[@]}" "$@" >/dev/null \
    || return
  cmake --build "$dir" -j "$JOBS"
}

# Fresh, absolute log directory: every sanitizer report lands there.
new_logs() {  # <build-dir> <name>
  local d
  d=$(cd "$1" && pwd)/sanitizer-logs/$2
  rm -rf "$d" && mkdir -p "$d"
  echo "$d"
}

# Fails (after printing them) when any sanitizer report was written.  gcc's
# UBSan runtime ignores log_path and reports on stderr, so the full output is
# searched for UBSan's "runtime error:" too: ctest's Testing/Temporary/
# LastTest.log (every test's output, passing tests included), pytest's output.
check_logs() {  # <log-dir> <what> [<output file>]
  local logs rc=0
  logs=$(find "$1" -type f 2>/dev/null | sort)
  if [ -n "$logs" ]; then
    echo "sanitize: $2: sanitizer reports (in $1):" >&2
    for f in $logs; do echo "---- $f" >&2; cat "$f" >&2; done
    rc=1
  fi
  local last=${3:-}
  if [ -n "$last" ] && grep -q "runtime error:" "$last" 2>/dev/null; then
    echo "sanitize: $2: UBSan reports in $last:" >&2
    grep -n "runtime error:" "$last" >&2
    rc=1
  fi
  return $rc
}

# ASan: halts on the first error by default; UBSan: -fno-sanitize-recover
# aborts too, halt_on_error=1 for checks that still recover.  detect_leaks
# stays on for the C++ suite.
asan_env() {  # <log-dir> <detect_leaks: 0|1>
  export ASAN_OPTIONS="halt_on_error=1:abort_on_error=0:exitcode=86:detect_leaks=$2:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1:log_path=$1/asan"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=86:log_path=$1/ubsan"
  export LSAN_OPTIONS="suppressions=$SUPP_DIR/lsan.supp:print_suppressions=0"
}

run_asan() {
  echo "== ASan+UBSan build ($ASAN_BUILD_DIR)"
  configure_build "$ASAN_BUILD_DIR" address,undefined -DUFSPACK_BUILD_PYTHON=ON || return
  local logs; logs=$(new_logs "$ASAN_BUILD_DIR" ctest)
  echo "== C++ tests under ASan+UBSan (ctest)"
  local rc=0
  ( asan_env "$logs" 1
    ctest --test-dir "$ASAN_BUILD_DIR" --output-on-failure -j "$JOBS" -E "$EXCLUDE" \
      ${CTEST_ARGS:-} ) || rc=$?
  check_logs "$logs" "ASan+UBSan C++ suite" \
    "$ASAN_BUILD_DIR/Testing/Temporary/LastTest.log" || rc=1
  return $rc
}

run_pyasan() {
  if [ ! -e "$ASAN_BUILD_DIR/CMakeCache.txt" ]; then
    configure_build "$ASAN_BUILD_DIR" address,undefined -DUFSPACK_BUILD_PYTHON=ON || return
  else
    cmake --build "$ASAN_BUILD_DIR" -j "$JOBS" || return
  fi
  local dir logs
  dir=$(cd "$ASAN_BUILD_DIR" && pwd)
  logs=$(new_logs "$ASAN_BUILD_DIR" pytest)
  echo "== Python tests under ASan+UBSan (pytest, _core from $ASAN_BUILD_DIR)"
  local rc=0
  # python3 is not instrumented: the ASan runtime must be the first library
  # loaded, hence LD_PRELOAD (libstdc++ too, so that ASan's __cxa_throw
  # interceptor finds the real one when _core throws).  Leak checking is off:
  # CPython, numpy and torch keep allocations alive until exit by design.
  # --capture=sys: pytest captures Python-level output only, so a sanitizer
  # report written to fd 2 just before the process aborts is not lost in
  # pytest's capture file; the output is kept for the UBSan check.
  ( asan_env "$logs" 0
    export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libstdc++.so)"
    export PYTHONPATH="$dir/python" UFSPACK_CLI="$dir/ufspack" PYTHONDONTWRITEBYTECODE=1
    cd "$dir"  # pytest's rootdir stays the source tree; cwd only for stray files
    # A bound, so that a hang (e.g. a DataLoader worker forked while another
    # thread held ASan's allocator lock) fails the suite with a message
    # instead of using up CI's time.
    # pytest-xdist (python3-pytest-xdist) runs the suite on $JOBS workers:
    # pytest alone keeps one core busy (713 s serially in CI; 311 s on 2 here).
    local xdist=()
    if [ "$JOBS" -gt 1 ] && "$PYTHON" -c "import xdist" 2>/dev/null; then
      xdist=(-n "$JOBS")
    fi
    timeout --signal=TERM --kill-after=30 "${PYASAN_TIMEOUT:-1800}" \
      "$PYTHON" -m pytest -q -p no:cacheprovider --capture=sys "${xdist[@]}" \
      ${PYTEST_ARGS:-"$OLDPWD/tests/python"} 2>&1 | tee "$logs.out" || status=${PIPESTATUS[0]}
    status=${status:-0}
    if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
      echo "sanitize: pyasan: pytest still running after ${PYASAN_TIMEOUT:-1800} s: stopped (a hang)" >&2
    fi
    exit "$status" ) || rc=$?
  check_logs "$logs" "ASan+UBSan Python suite" "$logs.out" || rc=1
  return $rc
}

run_tsan() {
  echo "== TSan build ($TSAN_BUILD_DIR)"
  configure_build "$TSAN_BUILD_DIR" thread -DUFSPACK_BUILD_PYTHON=OFF || return
  local logs; logs=$(new_logs "$TSAN_BUILD_DIR" ctest)
  echo "== C++ tests under TSan (ctest)"
  local rc=0
  ( export TSAN_OPTIONS="halt_on_error=1:exitcode=66:second_deadlock_stack=1:history_size=4:suppressions=$SUPP_DIR/tsan.supp:log_path=$logs/tsan"
    ctest --test-dir "$TSAN_BUILD_DIR" --output-on-failure -j "$JOBS" -E "$TSAN_EXCLUDE" \
      ${CTEST_ARGS:-} ) || rc=$?
  check_logs "$logs" "TSan C++ suite" || rc=1
  return $rc
}

# What failed in suite $1, in a few lines: printed again at the very end,
# where a CI log cut to its tail still shows it.
failure_summary() {  # <asan|tsan|pyasan>
  local dir=$ASAN_BUILD_DIR logs=ctest
  [ "$1" = tsan ] && dir=$TSAN_BUILD_DIR
  [ "$1" = pyasan ] && logs=pytest
  echo "sanitize: $1 FAILED:"
  if [ "$1" = pyasan ]; then
    grep -E "^(FAILED|ERROR) |^=+ .*(passed|failed|error).* =+$|stopped \(a hang\)" \
      "$dir/sanitizer-logs/pytest.out" 2>/dev/null | tail -n 20 | sed 's/^/  /'
  else
    sed 's/^/  failed test: /' "$dir/Testing/Temporary/LastTestsFailed.log" 2>/dev/null | head -n 20
    ctest_failures "$dir" | head -n 120 | sed 's/^/  /'
  fi
  find "$dir/sanitizer-logs/$logs" -type f 2>/dev/null | head -n 10 | sed 's/^/  sanitizer report: /'
  grep -l "runtime error:" "$dir/Testing/Temporary/LastTest.log" "$dir/sanitizer-logs/pytest.out" \
    2>/dev/null | sed 's/^/  UBSan report in: /'
}

run_suite() {  # <asan|tsan|pyasan>
  local start=$SECONDS
  if ! "run_$1"; then
    status=1
    failures+=$(failure_summary "$1")$'\n'
  fi
  echo "sanitize: $1: $((SECONDS - start)) s"
}

suites=("$@")
[ ${#suites[@]} -eq 0 ] && suites=(all)
status=0
failures=""
for s in "${suites[@]}"; do
  case $s in
    all) for t in asan pyasan tsan; do run_suite "$t"; done ;;
    asan|tsan|pyasan) run_suite "$s" ;;
    *) echo "usage: $0 [asan|tsan|pyasan|all]..." >&2; exit 2 ;;
  esac
done
if [ $status -eq 0 ]; then
  echo "sanitize: all clean"
else
  [ -n "$VERSION_NOTE" ] && printf '%s' "$VERSION_NOTE" >&2
  printf '%s' "$failures" >&2
  echo "sanitize: FAILED" >&2
fi
exit $status
