#!/usr/bin/env bash
# The README's second command: installs the dependencies, builds everything
# with the tests, and runs the whole test suite: the plain build's suite, then
# the sanitizer suites (scripts/sanitize.sh: ASan+UBSan and TSan builds of the
# C++ suite, the Python suite against the ASan build of the extension).
#
#   bash scripts/test.sh
#   UFSPACK_SKIP_SANITIZERS=1 bash scripts/test.sh    # plain suite only
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
export BUILD_DIR

bash scripts/install-deps.sh test
bash scripts/build.sh -DUFSPACK_BUILD_TESTS=ON -DUFSPACK_BUILD_BENCHMARKS=ON
echo "== C++ tests (ctest)"
rc=0
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)" || rc=$?
if [ "$rc" -ne 0 ]; then
  # shellcheck source-path=SCRIPTDIR source=lib/ctest-failures.sh
  . scripts/lib/ctest-failures.sh
  echo "== what the failing tests said (their whole output is above)"
  ctest_failures "$BUILD_DIR"
  exit "$rc"
fi

if [ "${UFSPACK_SKIP_SANITIZERS:-0}" != 1 ]; then
  echo "== sanitizer suites (scripts/sanitize.sh; UFSPACK_SKIP_SANITIZERS=1 skips them)"
  bash scripts/sanitize.sh all
fi
