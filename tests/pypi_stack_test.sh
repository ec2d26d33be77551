#!/usr/bin/env bash
# Runs pytest on today's PyPI stack (issue 42): the venv of
# scripts/pypi-stack-env.sh (torch, torchvision, Pillow, numpy as PyPI
# serves them, pinned), made once per machine in a cache directory shared
# by every checkout and reused (UFSPACK_PYPI_STACK_VENV names another), then
# `python -m pytest -q -p no:cacheprovider ARGS...` from it.  PYTHONPATH and
# UFSPACK_CLI come from the caller (ctest sets them to this build's).
#
#   bash tests/pypi_stack_test.sh tests/python/test_pack.py [-k ...]
#
# Exit status: pytest's; 77 (skipped) when the venv cannot be made here (no
# PyPI, no wheel for this platform).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/ufspack
venv=${UFSPACK_PYPI_STACK_VENV:-$cache/pypi-stack-venv}
mkdir -p "$(dirname "$venv")"
rc=0
out=$(bash "$here/../scripts/pypi-stack-env.sh" "$venv") || rc=$?
if [ "$rc" -ne 0 ]; then
  echo "$out"
  [ "$rc" -eq 77 ] && echo "pypi_stack_test: skipped: the PyPI stack's venv cannot be made here"
  exit "$rc"
fi
venv=$(printf '%s\n' "$out" | tail -n 1)
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider "$@"
