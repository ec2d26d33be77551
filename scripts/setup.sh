#!/usr/bin/env bash
# The README's first command: installs the dependencies, builds ufspack,
# generates a small sample ImageFolder tree, packs it, and reads it back.
#
#   bash scripts/setup.sh [<image-folder-dir>]
#
# With an argument, packs that directory instead of the generated sample.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
export BUILD_DIR

# Debian's interpreter, which sees the apt-installed Python packages (the
# first python3 on PATH may be another one).
PYTHON=${PYTHON:-/usr/bin/python3}

bash scripts/install-deps.sh
echo "== building (${BUILD_DIR}/)"
bash scripts/build.sh -DUFSPACK_BUILD_TESTS=OFF -DUFSPACK_BUILD_BENCHMARKS=OFF
UFSPACK="$BUILD_DIR/ufspack"

if [ $# -ge 1 ]; then
  SRC=$1
else
  SRC="$BUILD_DIR/sample/images"
  echo "== generating a sample ImageFolder tree in $SRC"
  rm -rf "$SRC"
  "$PYTHON" scripts/make_sample_tree.py "$SRC"
fi
PACK="$BUILD_DIR/sample/images.ufspack"

echo "== ufspack build $SRC -o $PACK"
"$UFSPACK" build "$SRC" -o "$PACK"
echo "== ufspack info $PACK"
"$UFSPACK" info "$PACK"
echo "== ufspack verify $PACK"
"$UFSPACK" verify "$PACK"
echo "== reading every record through the C++ API (examples/read_pack.cc)"
"$BUILD_DIR/ufspack_read_example" "$PACK"
echo "== ufspack extract, then compare with the source tree"
OUT="$BUILD_DIR/sample/extracted"
rm -rf "$OUT"
"$UFSPACK" extract "$PACK" "$OUT"
# Compare the packed files (the pack holds only image files, in class dirs).
"$UFSPACK" ls --null "$PACK" | while IFS= read -r -d '' name; do
  cmp -s "$SRC/$name" "$OUT/$name" || { echo "MISMATCH: $name" >&2; exit 1; }
done
echo "== all $("$UFSPACK" ls "$PACK" | wc -l) records round-tripped byte for byte"
echo
echo "Done.  Try: $UFSPACK --help"
