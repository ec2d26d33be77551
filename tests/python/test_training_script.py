"""examples/train_classifier.py gives the same losses from a directory with
torchvision's ImageFolder and from its pack with ufspack.MyImageFolder, also
with --fast-transforms exact; --fast-transforms on runs (DCT scaling)."""

import math
import os
import subprocess
import sys

import pytest

import ufspack
from conftest import encode, noise_image, write

pytest.importorskip("torchvision")
SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "train_classifier.py")


def run(*args):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, env=env, check=True)
    return out.stdout.splitlines()


@pytest.mark.parametrize("workers", ["0", "2"])
def test_same_losses(small_tree, small_pack, workers):
    theirs = run(small_tree, "--epochs", "2", "--workers", workers)
    ours = run(small_pack, "--ufspack", "--epochs", "2", "--workers", workers)
    assert len(theirs) == 1 + 2 * 3  # header + 2 epochs x 3 batches of 8
    assert ours == theirs


def test_script_differs_in_three_lines():
    with open(SCRIPT) as f:
        marked = [line for line in f if "# (1)" in line or "# (2)" in line or "# (3)" in line]
    assert len(marked) == 3


def test_fast_transforms_exact_same_losses(small_tree, small_pack):
    theirs = run(small_tree, "--epochs", "2", "--val", small_tree)
    ours = run(small_pack, "--ufspack", "--fast-transforms", "exact", "--epochs", "2", "--val", small_pack)
    assert len(theirs) == 1 + 2 * (3 + 1)  # header + 2 epochs x (3 batches + the validation line)
    assert ours == theirs


@pytest.fixture(scope="module")
def large_jpegs(tmp_path_factory):
    """16 JPEGs of 160x120 in 2 classes: a 32-pixel crop of them is
    downscaled by at least 2, so fast_transforms=True decodes them at 1/2."""
    root = str(tmp_path_factory.mktemp("large") / "tree")
    for c in range(2):
        for i in range(8):
            write(os.path.join(root, f"class{c}", f"img{i}.jpg"),
                  encode(noise_image(160, 120, 500 + 10 * c + i), "JPEG", quality=90))
    pack = root + ".ufspack"
    ufspack.build(root, pack, progress=False)
    return root, pack


def losses(lines):
    return [float(line.split()[-1]) for line in lines if " step " in line]


def test_fast_transforms_on_runs(large_jpegs):
    root, pack = large_jpegs
    theirs = run(root, "--epochs", "1", "--val", root)
    on = run(pack, "--ufspack", "--fast-transforms", "on", "--epochs", "1", "--val", pack)
    assert len(on) == len(theirs) == 1 + 2 + 1
    assert on[0] == theirs[0]
    assert all(math.isfinite(x) for x in losses(on))
    assert on[-1].startswith("epoch 0 train_loss ") and " val_acc " in on[-1]
    # Same model, same draws, pixels close to torchvision's: the first loss too.
    assert losses(on)[0] == pytest.approx(losses(theirs)[0], rel=0.05)


def test_fast_transforms_needs_ufspack(small_tree):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, SCRIPT, small_tree, "--fast-transforms", "on"],
                         capture_output=True, text=True, env=env)
    assert out.returncode == 2 and "--fast-transforms needs --ufspack" in out.stderr
