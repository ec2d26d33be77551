#!/usr/bin/env bash
# Installs the Debian 12 / Ubuntu 22.04+ packages that ufspack needs, by tier:
#
#   bash scripts/install-deps.sh [tier...]        (default: all)
#
#   build   compile the libraries, the CLI (with `ufspack mount`: libfuse3)
#           and the C++ example
#   python  build + the Python module and what MyImageFolder is compared
#           with (numpy, Pillow, torch, torchvision)
#   test    python + the test suite: GoogleTest, Google Benchmark (the
#           suite builds the benchmarks), pytest, and what the benchmark
#           smoke tests run (LMDB, h5py, OpenCV's Python module, matplotlib,
#           strace)
#   bench   python + the benchmark harness (bench/): the same extras as test
#   fuzz    build + clang and its libFuzzer/sanitizer runtimes, GoogleTest
#           (scripts/fuzz.sh builds the target and its regression replay)
#   all     every tier
#
# Each script asks for what it uses: setup.sh for python, test.sh for test,
# fuzz.sh for fuzz, bench/run_e2e.sh for bench.  Skips apt entirely when
# every package of the requested tiers is already installed.
set -euo pipefail

BUILD=(build-essential cmake ninja-build pkg-config git tar
       libzstd-dev libxxhash-dev zlib1g-dev libopencv-dev libturbojpeg0-dev
       libjpeg-dev
       libcli11-dev libarchive-dev
       libssl-dev libcurl4-openssl-dev
       libfuse3-dev fuse3)
PYTHON=(python3 python3-dev pybind11-dev python3-venv python3-pip
        python3-numpy python3-pil python3-torch python3-torchvision)
BENCH=(libbenchmark-dev python3-opencv python3-lmdb python3-h5py
       python3-matplotlib strace)
TEST=(libgtest-dev libgmock-dev python3-pytest python3-pytest-xdist openssl)
FUZZ=(clang libclang-rt-dev)

usage() {
  sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'
}

tiers=("$@")
[ ${#tiers[@]} -eq 0 ] && tiers=(all)
PACKAGES=()
for t in "${tiers[@]}"; do
  case $t in
    build)  PACKAGES+=("${BUILD[@]}") ;;
    python) PACKAGES+=("${BUILD[@]}" "${PYTHON[@]}") ;;
    test)   PACKAGES+=("${BUILD[@]}" "${PYTHON[@]}" "${TEST[@]}" "${BENCH[@]}") ;;
    bench)  PACKAGES+=("${BUILD[@]}" "${PYTHON[@]}" "${BENCH[@]}") ;;
    fuzz)   PACKAGES+=("${BUILD[@]}" libgtest-dev libgmock-dev "${FUZZ[@]}") ;;
    all)    PACKAGES+=("${BUILD[@]}" "${PYTHON[@]}" "${TEST[@]}" "${BENCH[@]}" "${FUZZ[@]}") ;;
    -h|--help) usage; exit 0 ;;
    *) echo "install-deps: unknown tier '$t' (build, python, test, bench, fuzz, all)" >&2
       exit 2 ;;
  esac
done
# One of each, in order.
mapfile -t PACKAGES < <(printf '%s\n' "${PACKAGES[@]}" | awk '!seen[$0]++')

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: ${tiers[*]}: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
fi
echo "install-deps: ${tiers[*]}: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
