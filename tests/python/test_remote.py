"""Packs read over HTTP from a real static web server on loopback
(tests/remote/static_server.py): MyImageFolder and Pack behave exactly as on
a local pack, batches are one concurrent fetch, the node-local cache serves
epoch 2 without a request, errors name the URL."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch
import torchvision
from torchvision import transforms

import ufspack
from ufspack import _core

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(HERE, "..", "remote", "static_server.py")


@pytest.fixture(scope="module")
def web(small_pack, tmp_path_factory):
    """small_pack served at <url>/small.ufspack."""
    root = str(tmp_path_factory.mktemp("www"))
    shutil.copytree(small_pack, os.path.join(root, "small.ufspack"))
    ready = os.path.join(root, ".ready")
    proc = subprocess.Popen(
        [sys.executable, SERVER, root, "--port-file", ready],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not os.path.exists(ready):
            assert proc.poll() is None, "static_server.py exited"
            assert time.monotonic() < deadline, "static_server.py not ready after 30 s"
            time.sleep(0.02)
        with open(ready) as f:
            url = json.load(f)["url"]
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def delta(before):
    after = _core.remote_stats()
    return {k: after[k] - before[k] for k in after}


def test_myimagefolder_over_http_matches_imagefolder(web, small_tree):
    t = transforms.ToTensor()
    ref = torchvision.datasets.ImageFolder(small_tree, transform=t)
    ds = ufspack.MyImageFolder(web + "/small.ufspack", transform=t)
    assert ds.classes == ref.classes
    assert ds.class_to_idx == ref.class_to_idx
    assert ds.targets == ref.targets
    assert [os.path.relpath(p, small_tree) for p, _ in ds.samples] == [
        os.path.relpath(p, small_tree) for p, _ in ref.samples
    ]
    for i in range(len(ref)):
        x, y = ds[i]
        rx, ry = ref[i]
        assert y == ry
        assert torch.equal(x, rx), i
    # torch >= 2.0's DataLoader calls __getitems__: one batched fetch.
    before = _core.remote_stats()
    batch = ds.__getitems__(list(range(len(ref))))
    d = delta(before)
    assert d["requests"] <= len(ref)
    for i, (x, y) in enumerate(batch):
        assert y == ref.targets[i]
        assert torch.equal(x, ref[i][0])


def test_dataloader_workers_over_http(web, small_tree):
    t = transforms.ToTensor()
    ds = ufspack.MyImageFolder(web + "/small.ufspack", transform=t)
    ref = torchvision.datasets.ImageFolder(small_tree, transform=t)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)
    got = {i: (x, y) for i, (x, y) in zip(range(len(ds)), loader)}
    for i, (x, y) in got.items():
        assert y == ref.targets[i]
        assert torch.equal(x, ref[i][0])


def test_pack_read_many_is_exact_and_batched(web, small_tree):
    p = ufspack.Pack(web + "/small.ufspack")
    names = [p.name(i) for i in range(len(p))]
    before = _core.remote_stats()
    got = p.read_many(list(range(len(p))))
    d = delta(before)
    for name, data in zip(names, got):
        with open(os.path.join(small_tree, name), "rb") as f:
            assert data == f.read()
    # Neighbouring records of a small pack come in one merged request
    # (those within data.ufs's first 4 KiB came with its open).
    assert d["requests"] == 1
    assert 2 <= d["coalesced"] <= len(p)


def test_missing_pack_names_the_url(web):
    with pytest.raises(FileNotFoundError) as e:
        ufspack.Pack(web + "/nothing.ufspack")
    assert web + "/nothing.ufspack/index.ufs" in str(e.value)
    assert "404" in str(e.value)


def test_cache_serves_epoch_two_without_requests(web, tmp_path):
    cache = ufspack.Cache(str(tmp_path / "cache"))
    p = ufspack.Pack(web + "/small.ufspack", cache=cache)
    first = p.read_many(list(range(len(p))))
    p.close()
    p2 = ufspack.Pack(web + "/small.ufspack", cache=cache)
    before = _core.remote_stats()
    again = p2.read_many(list(range(len(p2))))
    assert delta(before)["requests"] == 0
    assert again == first
