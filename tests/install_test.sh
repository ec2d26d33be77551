#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, then configures, builds and
# runs tests/install_consumer against it with find_package(ufspack).
#   install_test.sh <build-dir> <source-dir>
set -euo pipefail
BUILD=$1; SRC=$2
TMP=$(mktemp -d "${TMPDIR:-/tmp}/ufspack-install-XXXXXX")
trap 'rm -rf "$TMP"' EXIT
cmake --install "$BUILD" --prefix "$TMP/prefix" >/dev/null
cmake -S "$SRC/tests/install_consumer" -B "$TMP/build" -G Ninja \
  -DCMAKE_PREFIX_PATH="$TMP/prefix" >/dev/null
cmake --build "$TMP/build" >/dev/null
out=$("$TMP/build/consumer" "$TMP/pack")
test "$out" = "hello from an installed ufspack"
test -x "$TMP/prefix/bin/ufspack"
"$TMP/prefix/bin/ufspack" verify "$TMP/pack"
echo "install test: OK"
