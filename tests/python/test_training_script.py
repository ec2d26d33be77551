"""examples/train_classifier.py gives the same losses from a directory with
torchvision's ImageFolder and from its pack with ufspack.MyImageFolder."""

import os
import subprocess
import sys

import pytest

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
