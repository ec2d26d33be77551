#!/usr/bin/env bash
# `pip install .` into a fresh virtual environment that sees Debian's torch,
# then `import ufspack` from outside the source tree and read a pack with it.
#   pip_install_test.sh <source-dir> <python>
# Exits 77 (skipped) when PyPI cannot be reached for the build requirements.
set -euo pipefail
SRC=$1; PY=${2:-/usr/bin/python3}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/ufspack-pip-XXXXXX")
trap 'rm -rf "$TMP"' EXIT
"$PY" -m venv --system-site-packages "$TMP/venv"
# Build type None (no optimisation flags; pyproject.toml's Release otherwise):
# the packaging is under test, not the optimised code, and -O3 more than
# doubles the compile time of the wheel.
if ! "$TMP/venv/bin/pip" install -q --config-settings=cmake.build-type=None "$SRC" >"$TMP/pip.log" 2>&1; then
  if grep -qiE "could not find a version|connection|network|resolve|timed out" "$TMP/pip.log"; then
    echo "pip cannot reach PyPI for the build requirements; skipping"; tail -3 "$TMP/pip.log"; exit 77
  fi
  cat "$TMP/pip.log"; exit 1
fi
cd "$TMP"
mkdir -p tree/cats tree/dogs
"$TMP/venv/bin/python" - <<'PY'
import io, os
from PIL import Image
for c, color in (("cats", (200, 10, 10)), ("dogs", (10, 200, 10))):
    for i in range(3):
        Image.new("RGB", (8 + i, 6), color).save(f"tree/{c}/{i}.png")
PY
"$TMP/venv/bin/ufspack" build tree -o pack -q
# One version everywhere: CMakeLists.txt's project() is the source.
VERSION=$(sed -n 's/^project(ufspack VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")
UFSPACK_EXPECTED_VERSION=$VERSION "$TMP/venv/bin/python" - <<'PY'
import importlib.metadata, os
import numpy as np, ufspack
want = os.environ["UFSPACK_EXPECTED_VERSION"]
assert ufspack.__version__ == importlib.metadata.version("ufspack") == want, (
    ufspack.__version__, importlib.metadata.version("ufspack"), want)
ds = ufspack.MyImageFolder("pack")
assert ds.classes == ["cats", "dogs"] and len(ds) == 6, (ds.classes, len(ds))
img, label = ds[4]
assert label == 1 and img.size == (9, 6) and np.asarray(img)[0, 0].tolist() == [10, 200, 10]
print("pip install test: OK,", ufspack.__file__)
PY
