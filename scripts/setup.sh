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

bash scripts/install-deps.sh python
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
CACHE="$BUILD_DIR/sample/cache"
echo "== ufspack warmup $PACK --cache $CACHE (the node-local cache), then verify through it"
rm -rf "$CACHE"
"$UFSPACK" warmup "$PACK" --cache "$CACHE" --limit 1G
"$UFSPACK" verify "$PACK" --cache "$CACHE"
"$UFSPACK" cache stat "$CACHE"
echo "== reading it back through Python: ufspack.MyImageFolder vs torchvision ImageFolder"
PYTHONPATH="$BUILD_DIR/python" "$PYTHON" - "$PACK" "$SRC" "$CACHE" <<'PY'
import sys, time
import numpy as np
import ufspack
from torchvision.datasets import ImageFolder

pack, src = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
mine = ufspack.MyImageFolder(pack)
t1 = time.perf_counter()
theirs = ImageFolder(src)
assert mine.classes == theirs.classes and mine.class_to_idx == theirs.class_to_idx
assert list(mine.samples) == [tuple(s) for s in theirs.samples]
assert list(mine.targets) == theirs.targets
for i in range(len(theirs)):
    assert np.array_equal(np.asarray(mine[i][0]), np.asarray(theirs[i][0])), theirs.samples[i][0]
print(f"Python: MyImageFolder({pack!r}) opened in {(t1 - t0) * 1000:.2f} ms; "
      f"{len(mine)} samples in classes {mine.classes}: same samples, targets and pixels as ImageFolder")

# The training transforms, run natively (fast_transforms="exact"): the same
# tensors as torchvision for the same seed.
import torch
from torchvision import transforms as T
train = T.Compose([T.RandomResizedCrop(32), T.RandomHorizontalFlip(), T.ToTensor(),
                   T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
fast = ufspack.MyImageFolder(pack, train, fast_transforms="exact")
ref = ImageFolder(src, train)
for i in range(len(ref)):
    torch.manual_seed(i)
    a = ref[i][0]
    torch.manual_seed(i)
    assert torch.equal(a, fast[i][0]), ref.samples[i][0]
print(f"Python: fast_transforms: {fast.fast_plan.description}: "
      f"the same {len(ref)} tensors as torchvision")

# Through the node-local cache filled by `ufspack warmup`: every record a hit.
cached = ufspack.MyImageFolder(pack, cache=sys.argv[3])
before = cached.cache.stats()[-1]["hits"]
for i in range(len(theirs)):
    assert np.array_equal(np.asarray(cached[i][0]), np.asarray(theirs[i][0])), theirs.samples[i][0]
hits = cached.cache.stats()[-1]["hits"] - before
assert hits == len(theirs), hits
print(f"Python: MyImageFolder({pack!r}, cache={sys.argv[3]!r}): {hits} cache hits, same pixels")
PY
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
