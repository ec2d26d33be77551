#!/usr/bin/env bash
# The isolated venv that runs the Python suite on today's PyPI stack (issue
# 42): torch, torchvision, Pillow and numpy as a user gets them from PyPI,
# plus pytest, at pinned versions.  Unlike the Dask venv it is made WITHOUT
# --system-site-packages, so that nothing of Debian's python3-torch 1.13 /
# torchvision 0.14 / Pillow 9.4 / numpy 1.24 leaks in.  The ufspack extension
# built for /usr/bin/python3 (build/python) runs under it unchanged: same
# interpreter, same ABI.
#
#   bash scripts/pypi-stack-env.sh [VENV]   (default ${BUILD_DIR:-build}/pypi-stack-venv,
#                                            relative to the source tree)
#
# Prints the venv's absolute path on its last line.  Built, reused and
# locked as scripts/lib/pinned-venv.sh says.  The smoke check prints the
# versions it imported on stderr.
#
# Exit status: 0 ready; 77 pip could not install a package (no network, no
# wheel for this platform) or the stack does not import: callers skip their
# tests; anything else is a bug or a broken interpreter.
set -euo pipefail

# Versions verified together on Debian 12 (Python 3.11, x86_64): the newest
# on PyPI when written.  torch's Linux wheel from PyPI is the CUDA build and
# pulls in the nvidia-* and triton wheels: the venv is ~5.5 GB.
# Installed in this order, one pip call each (so that a failure names the
# package): numpy and Pillow first, so that torch's and torchvision's loose
# requirements on them are met by the pins before them; torchvision pins
# torch to its own release.
#   Optional, not installed: tqdm (ufspack.build's progress bar, absent ->
#   no bar); dask/distributed (tests skip; scripts/dask-test-env.sh);
#   boto3/moto/weed (the S3 tests run their servers from
#   scripts/s3-test-env.sh's venv).
REQUIREMENTS=(
  "numpy==2.4.6"
  "pillow==13.0.0"
  "torch==2.15.0"
  "torchvision==0.29.2"
  "pytest==9.2.0"
  "pytest-xdist==3.8.0"
)

# The suite needs the four to import together (torchvision's C ops load
# against torch's libraries).
# shellcheck disable=SC2317  # called by pinned_venv, through --smoke
smoke() {
  local out
  if ! out=$("$1/bin/python" -c '
import numpy, PIL, torch, torchvision
print("torch", torch.__version__, "torchvision", torchvision.__version__,
      "Pillow", PIL.__version__, "numpy", numpy.__version__)' 2>&1); then
    echo "$out" >&2
    echo "pypi-stack-test-env: 'import numpy, PIL, torch, torchvision' fails in $1" >&2
    return 1
  fi
  echo "pypi-stack-test-env: $out" >&2
}

# shellcheck source-path=SCRIPTDIR source=lib/pinned-venv.sh
. "$(dirname "$0")/lib/pinned-venv.sh"
pinned_venv pypi-stack --python "${UFSPACK_PYPI_STACK_PYTHON:-/usr/bin/python3}" \
  --smoke smoke --venv "${1:-}" -- "${REQUIREMENTS[@]}"
