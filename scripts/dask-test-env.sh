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
# Prints the venv's absolute path on its last line.  Fast (bash only, no
# python started) when the venv is complete: a stamp file in the venv holds
# the interpreter and the pinned requirement list it was built with, and the
# venv is rebuilt from scratch whenever that list changes.  Concurrent runs
# on the same venv (ctest -j) wait for each other on a lock file.
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
PYTHON=${UFSPACK_DASK_PYTHON:-/usr/bin/python3}

SRC=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -ge 1 ]; then
  VENV=$1
else
  VENV=${BUILD_DIR:-build}/dask-venv
  case $VENV in /*) ;; *) VENV=$SRC/$VENV ;; esac
fi
mkdir -p "$(dirname "$VENV")"
VENV=$(cd "$(dirname "$VENV")" && pwd)/$(basename "$VENV")
STAMP=$VENV/.ufspack-dask-stamp

expected_stamp() {
  printf 'python %s\n' "$PYTHON"
  printf '%s\n' "${REQUIREMENTS[@]}"
}

complete() {
  [ -x "$VENV/bin/python" ] && [ -f "$STAMP" ] &&
    [ "$(cat "$STAMP")" = "$(expected_stamp)" ]
}

if complete; then
  echo "$VENV"
  exit 0
fi

# One builder at a time; whoever waited finds the venv complete.
exec 9>"$VENV.lock"
if ! flock -w 600 9; then
  echo "dask-test-env: timed out after 600 s waiting for $VENV.lock" >&2
  exit 1
fi
if complete; then
  echo "$VENV"
  exit 0
fi

start=$(date +%s)
echo "dask-test-env: creating $VENV (${REQUIREMENTS[*]})" >&2
rm -rf "$VENV"
if ! "$PYTHON" -m venv --system-site-packages "$VENV" >&2; then
  echo "dask-test-env: '$PYTHON -m venv --system-site-packages $VENV' failed (Debian: apt-get install python3-venv)" >&2
  rm -rf "$VENV"
  exit 1
fi
# The system site-packages are visible to `pip check`, and on Debian they
# are not consistent by pip's rules (e.g. "pygobject 3.42.2 requires pycairo,
# which is not installed"), which has nothing to do with this venv.  So the
# check below fails only on problems that were not there before the installs:
# the fresh venv's report is the baseline.
baseline=$("$VENV/bin/python" -m pip check 2>&1 | sort || true)
PIP=("$VENV/bin/python" -m pip install --disable-pip-version-check --no-input -q --retries 2 --timeout 30)
# One package per pip call, so that a failure names the package.
for req in "${REQUIREMENTS[@]}"; do
  if ! "${PIP[@]}" "$req" >&2; then
    echo "dask-test-env: pip could not install '$req' into $VENV (is PyPI reachable?)" >&2
    rm -rf "$VENV"
    exit 77
  fi
done
# The later installs must not have moved an earlier pin, nor broken (or
# shadowed with an incompatible version) a system package.
after=$("$VENV/bin/python" -m pip check 2>&1 | sort || true)
if new=$(comm -13 <(echo "$baseline") <(echo "$after") | grep -v '^No broken requirements found\.$'); then
  echo "$new" >&2
  echo "dask-test-env: inconsistent dependencies in $VENV after installing ${REQUIREMENTS[*]}" >&2
  rm -rf "$VENV"
  exit 1
fi
if ! err=$("$VENV/bin/python" -c "import distributed" 2>&1); then
  echo "$err" >&2
  echo "dask-test-env: 'import distributed' fails in $VENV" >&2
  rm -rf "$VENV"
  exit 77
fi
expected_stamp >"$STAMP"
echo "dask-test-env: ready in $(($(date +%s) - start)) s" >&2
echo "$VENV"
