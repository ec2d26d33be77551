#!/usr/bin/env bash
# A reader-only consumer must not need the image-decoding dependencies:
#  1. a project that add_subdirectory()s ufspack and links ufspack::reader,
#     (nor libcurl and OpenSSL: remote is off in a subproject),
#  2. a top-level build with -DUFSPACK_BUILD_DECODE=OFF,
# each configured with OpenCV, TurboJPEG and libjpeg-turbo made unfindable
# (CMAKE_DISABLE_FIND_PACKAGE_*: a find_package of them fails the
# configure), then built, and the reader example run on a pack.
#   subdir_test.sh <source-dir> <ufspack-cli>
set -euo pipefail
SRC=$1; CLI=$2
TMP=$(mktemp -d "${TMPDIR:-/tmp}/ufspack-subdir-XXXXXX")
trap 'rm -rf "$TMP"' EXIT
# zlib is not among them: the packer decompresses gzip archives with it (as
# it reads archives with libarchive, which needs zlib itself).
NO_DECODE_DEPS=(-DCMAKE_DISABLE_FIND_PACKAGE_OpenCV=ON
                -DCMAKE_DISABLE_FIND_PACKAGE_TurboJPEG=ON
                -DCMAKE_DISABLE_FIND_PACKAGE_libjpeg-turbo=ON)
mkdir -p "$TMP/tree/a"
printf 'record bytes' > "$TMP/tree/a/x.jpg"
"$CLI" build "$TMP/tree" -o "$TMP/pack" -q

# ... nor libcurl and OpenSSL (ufspack::remote is off in a subproject).
cmake -S "$SRC/tests/subdir_consumer" -B "$TMP/sub" -G Ninja \
  -DUFSPACK_SOURCE_DIR="$SRC" --no-warn-unused-cli "${NO_DECODE_DEPS[@]}" \
  -DCMAKE_DISABLE_FIND_PACKAGE_CURL=ON -DCMAKE_DISABLE_FIND_PACKAGE_OpenSSL=ON >/dev/null
cmake --build "$TMP/sub" --target read_pack >/dev/null
"$TMP/sub/read_pack" "$TMP/pack" | grep -q "1 records" || {
  echo "subdir consumer: unexpected output:"; "$TMP/sub/read_pack" "$TMP/pack"; exit 1; }
if grep -qiE "opencv|turbojpeg" "$TMP/sub/build.ninja"; then
  echo "subdir consumer: the reader-only build mentions OpenCV/TurboJPEG" >&2
  exit 1
fi
# ufspack as a subproject leaves the consumer's build type alone (none here).
if ! grep -q '^CMAKE_BUILD_TYPE:STRING=$' "$TMP/sub/CMakeCache.txt"; then
  echo "subdir consumer: ufspack set the consumer's build type:" >&2
  grep '^CMAKE_BUILD_TYPE' "$TMP/sub/CMakeCache.txt" >&2
  exit 1
fi

# Build type None (no optimisation flags): what is tested is which
# dependencies the build needs, and -O2 -g would double the compile time.
cmake -S "$SRC" -B "$TMP/top" -G Ninja -DUFSPACK_BUILD_DECODE=OFF -DCMAKE_BUILD_TYPE=None \
  -DUFSPACK_BUILD_TESTS=OFF -DUFSPACK_BUILD_BENCHMARKS=OFF \
  --no-warn-unused-cli "${NO_DECODE_DEPS[@]}" >/dev/null
cmake --build "$TMP/top" --target ufspack ufspack_read_example >/dev/null
"$TMP/top/ufspack_read_example" "$TMP/pack" | grep -q "1 records"
"$TMP/top/ufspack" verify -q "$TMP/pack"
echo "reader-only builds: OK"
