#!/usr/bin/env bash
# ruff and mypy over the Python package and tests, as pyproject.toml
# configures them, with pinned versions in a venv kept in the build tree.
# Exit 77 (skipped) when PyPI cannot be reached to install them.
#   python_lint.sh <source-dir> <build-dir> <python>
set -euo pipefail
SRC=$1; BUILD=$2; PY=$3
RUFF=ruff==0.17.6
MYPY=mypy==2.4.1
VENV=$BUILD/lint-venv
if [ ! -x "$VENV/bin/mypy" ] || [ ! -x "$VENV/bin/ruff" ] ||
   ! "$VENV/bin/pip" freeze 2>/dev/null | grep -qx "$RUFF" ||
   ! "$VENV/bin/pip" freeze 2>/dev/null | grep -qx "$MYPY"; then
  rm -rf "$VENV"
  "$PY" -m venv --system-site-packages "$VENV"
  if ! "$VENV/bin/pip" install -q --disable-pip-version-check "$RUFF" "$MYPY"; then
    echo "python_lint: could not install $RUFF $MYPY from PyPI: skipped" >&2
    rm -rf "$VENV"
    exit 77
  fi
fi
cd "$SRC"
echo "== ruff check ($RUFF)"
"$VENV/bin/ruff" check --no-cache python tests/python bench
echo "== mypy ($MYPY)"
"$VENV/bin/mypy" --cache-dir "$BUILD/mypy-cache"
