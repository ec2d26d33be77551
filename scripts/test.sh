#!/usr/bin/env bash
# The README's second command: installs the dependencies, builds everything
# with the tests, and runs the whole test suite.
#
#   bash scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
export BUILD_DIR

bash scripts/install-deps.sh
bash scripts/build.sh -DUFSPACK_BUILD_TESTS=ON -DUFSPACK_BUILD_BENCHMARKS=ON
echo "== C++ tests (ctest)"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)"
