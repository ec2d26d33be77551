#!/usr/bin/env bash
# Installs what ufspack needs to build, test and run its demo on Debian 12 /
# Ubuntu 22.04+.  Skips apt entirely when everything is already installed.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git tar
  libzstd-dev libxxhash-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libopencv-dev libturbojpeg0-dev
  python3 python3-dev pybind11-dev python3-venv python3-pip
  python3-numpy python3-pil python3-pytest
  python3-torch python3-torchvision
  python3-opencv python3-lmdb python3-h5py python3-matplotlib strace
  clang libclang-rt-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
