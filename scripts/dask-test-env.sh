#!/usr/bin/env bash
# The isolated venv that the Dask tests run under: dask and distributed
# (Dask's distributed scheduler: LocalCluster, Client, worker processes), at
# pinned versions.  The venv is made with --system-site-packages, so that
# Debian's python3-torch and python3-numpy (and the other python3-* packages)
# stay importable in it; pip installs only what they do not already provide.
#
#   bash scripts/dask-test-env.sh [VENV]    (default ${BUILD_DIR:-build}/dask-venv,
#                                            relative to the source tree)
#
# Prints the venv's absolute path on its last line.  Built, reused and
# locked as scripts/lib/pinned-venv.sh says.
#
# Exit status: 0 ready; 77 pip could not install a package (no network, no
# wheel for this platform) or distributed does not import: callers skip
# their tests; anything else is a bug or a broken interpreter.
set -euo pipefail

# Versions verified together on Debian 12 (Python 3.11, x86_64, system
# numpy 1.24.2 and torch 1.13): a LocalCluster with two worker processes
# starts, runs tasks through client.get_executor() and shuts down.  dask and
# distributed are released together and distributed pins dask to its own
# version, so both are pinned to the same release.  Installed in this order,
# one pip call each (so that a failure names the package).
REQUIREMENTS=(
  "dask==2025.12.0"
  "distributed==2025.12.0"
)

# The cluster's worker processes need distributed to import.
# shellcheck disable=SC2317  # called by pinned_venv, through --smoke
smoke() {
  local err
  if ! err=$("$1/bin/python" -c "import distributed" 2>&1); then
    echo "$err" >&2
    echo "dask-test-env: 'import distributed' fails in $1" >&2
    return 1
  fi
}

# shellcheck source-path=SCRIPTDIR source=lib/pinned-venv.sh
. "$(dirname "$0")/lib/pinned-venv.sh"
pinned_venv dask --python "${UFSPACK_DASK_PYTHON:-/usr/bin/python3}" \
  --venv-flag --system-site-packages --smoke smoke --venv "${1:-}" -- "${REQUIREMENTS[@]}"
