#!/usr/bin/env bash
# Configures and builds ufspack into ${BUILD_DIR:-build} (CMake + Ninja).
# Extra arguments go to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
# Debian's interpreter: it has the apt-installed numpy, torch and torchvision
# (the first python3 on PATH may be another one).
PYTHON=${PYTHON:-/usr/bin/python3}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} \
  -DPython_EXECUTABLE="$PYTHON" "$@" >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)"
