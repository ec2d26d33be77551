#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, then configures, builds and
# runs tests/install_consumer against it with find_package(ufspack).
#   install_test.sh <build-dir> <source-dir>
set -euo pipefail
BUILD=$1; SRC=$2
TMP=$(mktemp -d "${TMPDIR:-/tmp}/ufspack-install-XXXXXX")
trap 'rm -rf "$TMP"' EXIT
cmake --install "$BUILD" --prefix "$TMP/prefix" >/dev/null

# Only the public API is installed: exactly these headers, none of the
# internal ones (format.h, coding.h, file.h, text.h, parallel.h).
expected="builder.h cache.h decode.h export.h layout.h merge.h reader.h record_cache.h remote.h sample_writer.h scan.h status.h transform.h types.h version.h"
if ! grep -q "UFSPACK_BUILD_DECODE:BOOL=ON" "$BUILD/CMakeCache.txt"; then
  expected=${expected/decode.h /}
  expected=${expected/transform.h /}
fi
if ! grep -q "UFSPACK_BUILD_REMOTE:BOOL=ON" "$BUILD/CMakeCache.txt"; then
  expected=${expected/remote.h /}
fi
installed=$(cd "$TMP/prefix/include/ufspack" && ls | sort | tr '\n' ' ' | sed 's/ $//')
if [ "$installed" != "$expected" ]; then
  echo "install test: installed headers: $installed" >&2
  echo "install test: expected:          $expected" >&2
  exit 1
fi
# Every installed header compiles on its own against the installed tree
# (no internal header is needed, or reachable).
for h in $expected; do
  [ "$h" = decode.h ] && continue
  printf '#include "ufspack/%s"\nint main() { return 0; }\n' "$h" > "$TMP/h.cc"
  c++ -std=c++17 -fsyntax-only -I"$TMP/prefix/include" "$TMP/h.cc" ||
    { echo "install test: ufspack/$h does not compile alone" >&2; exit 1; }
done
cmake -S "$SRC/tests/install_consumer" -B "$TMP/build" -G Ninja \
  -DCMAKE_PREFIX_PATH="$TMP/prefix" >/dev/null
cmake --build "$TMP/build" >/dev/null
out=$("$TMP/build/consumer" "$TMP/pack")
test "$out" = "hello from an installed ufspack"
if [ -x "$TMP/build/remote_consumer" ]; then
  test "$("$TMP/build/remote_consumer")" = "remote from an installed ufspack"
fi
# The README's C++ example, built against the installed tree only.
"$TMP/build/read_pack" "$TMP/pack" | grep -q "1 records"
if [ -x "$TMP/build/decode_consumer" ]; then
  test "$("$TMP/build/decode_consumer")" = "decode from an installed ufspack"
elif grep -q "UFSPACK_BUILD_DECODE:BOOL=ON" "$BUILD/CMakeCache.txt"; then
  echo "install test: decode_consumer was not built" >&2; exit 1
fi
test -x "$TMP/prefix/bin/ufspack"
"$TMP/prefix/bin/ufspack" verify "$TMP/pack"
echo "install test: OK"
