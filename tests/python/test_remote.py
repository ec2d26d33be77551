"""Packs read over HTTP from a real static web server on loopback
(tests/remote/static_server.py): MyImageFolder and Pack behave exactly as on
a local pack, batches are one concurrent fetch, the node-local cache serves
epoch 2 without a request, errors name the URL."""

import concurrent.futures
import glob
import json
import os
import shutil
import subprocess
import sys
import threading

import pytest
import torch
import torchvision
from torchvision import transforms

import fusecheck
import httpserve
import ufspack
from ufspack import _core

# The fixture s3_server (SeaweedFS behind the logging proxy).
pytest_plugins = ["s3fixture"]

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def web(small_pack, small_tree, tmp_path_factory):
    """small_pack served at <url>/small.ufspack, and the same tree built in
    3 parts and merged at <url>/merged (parts under <url>/parts)."""
    root = str(tmp_path_factory.mktemp("www"))
    shutil.copytree(small_pack, os.path.join(root, "small.ufspack"))
    parts = [os.path.join(root, "parts", f"p{i}") for i in range(3)]
    for i, p in enumerate(parts):
        ufspack.build(small_tree, p, parts=3, part=i, progress=False)
    ufspack.merge(parts, os.path.join(root, "merged"))
    with httpserve.serve(root) as url:
        yield url


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


def test_merged_pack_over_http(web, small_tree):
    """A merged pack on a web server: parts found by relative URL, by its
    prefix (no index.ufs there: the manifest is tried) or by the manifest."""
    ref = torchvision.datasets.ImageFolder(small_tree)
    for url in (web + "/merged", web + "/merged/manifest.ufs"):
        pack = ufspack.Pack(url)
        assert pack.info["parts"] == 3 and len(pack) == len(ref)
        ds = ufspack.MyImageFolder(url)
        assert ds.classes == ref.classes and ds.targets == ref.targets
        batch = ds.__getitems__(list(range(len(ref))))
        for i, (img, y) in enumerate(batch):
            assert y == ref.targets[i]
            assert img.tobytes() == ref[i][0].tobytes(), i
        with open(ref.samples[7][0], "rb") as f:
            assert pack.read(7) == f.read()


def test_merged_pack_prefix_with_a_cache(web, small_tree, tmp_path):
    """The prefix of a merged pack opens through its manifest with a cache
    too, and epoch 2 comes from the cache."""
    ref = torchvision.datasets.ImageFolder(small_tree)
    cache = ufspack.Cache(str(tmp_path / "cache"))
    ds = ufspack.MyImageFolder(web + "/merged", cache=cache)
    assert ds.targets == ref.targets
    for epoch in range(2):
        before = _core.remote_stats()
        batch = ds.__getitems__(list(range(len(ref))))
        for i, (img, y) in enumerate(batch):
            assert y == ref.targets[i] and img.tobytes() == ref[i][0].tobytes(), i
        if epoch == 1:
            assert delta(before)["requests"] == 0


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


def test_many_threads_keep_their_connections(small_pack, tmp_path):
    """24 threads read at once, 5 times over, from a server 60 ms away:
    each thread's requests go out on kept connections, so the server sees
    about 24 connections, not new ones each round (a pool that kept only
    16 idle sessions closed the others' connections after every round: 58
    connections)."""
    shutil.copytree(small_pack, tmp_path / "small.ufspack")
    with httpserve.serve(str(tmp_path), "--delay-ms", "60") as url:
        p = ufspack.Pack(url + "/small.ufspack")
        want = [p.read(i) for i in range(len(p))]

        before = httpserve.stats(url)["connections"]
        threads = len(p)  # 24, a record each
        for _ in range(5):
            start = threading.Barrier(threads)

            def read(k, start=start):
                start.wait(timeout=20)
                return p.read(k) == want[k]

            with concurrent.futures.ThreadPoolExecutor(threads) as ex:
                assert all(ex.map(read, range(threads)))
        s = httpserve.stats(url)
        assert s["peak_in_flight"] > 16, s  # more at once than the old pool kept
        assert s["connections"] - before <= threads + 4, s


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


# --- S3 (SeaweedFS) ------------------------------------------------------------


@pytest.fixture
def s3_pack(s3_server, small_pack, monkeypatch):
    """small_pack uploaded (data first) to the SeaweedFS bucket; the AWS
    settings of this process pointed at the server."""
    prefix = "py/small.ufspack"
    for name in ("data.ufs", "index.ufs"):
        with open(os.path.join(small_pack, name), "rb") as f:
            s3_server.put(f"{prefix}/{name}", f.read())
    for k in list(os.environ):
        if k.startswith("AWS_"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.secret_key)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.endpoint)
    return f"s3://{s3_server.bucket}/{prefix}"


def test_myimagefolder_over_s3_matches_imagefolder(s3_pack, small_tree):
    t = transforms.ToTensor()
    ref = torchvision.datasets.ImageFolder(small_tree, transform=t)
    ds = ufspack.MyImageFolder(s3_pack, transform=t)
    assert ds.classes == ref.classes
    assert ds.targets == ref.targets
    batch = ds.__getitems__(list(range(len(ref))))
    for i, (x, y) in enumerate(batch):
        assert y == ref.targets[i]
        assert torch.equal(x, ref[i][0]), i
    x, y = ds[5]
    assert torch.equal(x, ref[5][0]) and y == ref.targets[5]


def test_mount_of_an_s3_pack(s3_pack, s3_server, small_tree, monkeypatch):
    """`ufspack mount` of an s3:// pack (issue 32): the tree and every
    file's bytes as the source tree's; each file one ranged GET without
    read-ahead, and files read in the pack's order a few GETs in all with
    it (the proxy's log)."""
    why = fusecheck.unavailable()
    if why:
        pytest.skip(why)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.proxy)
    monkeypatch.setenv("UFSPACK_REMOTE_COALESCE_GAP", "0")
    names = sorted(os.path.relpath(os.path.join(d, f), small_tree)
                   for d, _, fs in os.walk(small_tree) for f in fs)
    p = ufspack.Pack(s3_pack)
    assert [p.name(i) for i in range(len(p))] == names  # the pack's order
    # Records within data.ufs's first 4 KiB come with the open.
    far = sum(p.record(i)["offset"] + p.record(i)["stored_size"] > 4096 for i in range(len(p)))
    assert far >= len(p) // 2
    for read_ahead in (0, None):
        with ufspack.mounted(s3_pack, read_ahead=read_ahead) as root:
            assert sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs) == names
            s3_server.reset()
            for name in names:
                with open(os.path.join(root, name), "rb") as f, open(os.path.join(small_tree, name), "rb") as g:
                    assert f.read() == g.read(), name
            gets = [e for e in s3_server.log() if e["range"] is not None]
            if read_ahead == 0:
                assert len(gets) == far, (len(gets), far, len(names))
            else:  # windows of 256 KiB and more: the whole small pack
                assert 1 <= len(gets) <= 2, (gets, far, len(names))


def test_s3_requests_counted_by_the_proxy(s3_pack, s3_server, small_tree, monkeypatch):
    """Through the proxy: one request per record read alone, and a batch
    of neighbours in one request; bytes on the wire = the records' bytes."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.proxy)
    monkeypatch.setenv("UFSPACK_REMOTE_COALESCE_GAP", "0")
    p = ufspack.Pack(s3_pack)
    s3_server.reset()
    sizes = [p.record(i)["size"] for i in range(len(p))]
    far = [len(p) - 1, len(p) // 2]
    got = [p.read(i) for i in far]
    log = s3_server.log()
    assert [e["range"] is not None for e in log] == [True, True]
    assert sum(e["bytes"] for e in log) == sum(sizes[i] for i in far)
    for i, data in zip(far, got):
        with open(os.path.join(small_tree, p.name(i)), "rb") as f:
            assert data == f.read()


def test_cli_on_s3(s3_pack, small_tree, tmp_path):
    cli = os.environ.get("UFSPACK_CLI", "ufspack")
    out = subprocess.run([cli, "info", s3_pack], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "records:       24" in out.stdout
    out = subprocess.run([cli, "verify", s3_pack], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    name = sorted(os.listdir(os.path.join(small_tree, "class1")))[0]
    out = subprocess.run([cli, "cat", s3_pack, f"class1/{name}"], capture_output=True)
    assert out.returncode == 0, out.stderr
    with open(os.path.join(small_tree, "class1", name), "rb") as f:
        assert out.stdout == f.read()
    out = subprocess.run([cli, "extract", s3_pack, str(tmp_path / "x")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    for c in os.listdir(small_tree):
        for n in os.listdir(os.path.join(small_tree, c)):
            with open(os.path.join(small_tree, c, n), "rb") as a, open(tmp_path / "x" / c / n, "rb") as b:
                assert a.read() == b.read()
    out = subprocess.run(
        [cli, "warmup", s3_pack, "--cache", str(tmp_path / "cache"), "--json"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["added"] == 24
    out = subprocess.run([cli, "ls", s3_pack], capture_output=True, text=True)
    assert out.returncode == 0 and len(out.stdout.splitlines()) == 24
    # Nothing secret in any output.
    secret = os.environ["AWS_SECRET_ACCESS_KEY"]
    bad = subprocess.run([cli, "info", s3_pack + "-missing"], capture_output=True, text=True)
    assert bad.returncode != 0
    assert s3_pack + "-missing/index.ufs" in bad.stderr
    assert "NoSuchKey" in bad.stderr
    assert secret not in bad.stdout + bad.stderr


def test_build_to_s3_then_read_back(s3_pack, s3_server, small_tree, tmp_path):
    url = f"s3://{s3_server.bucket}/py/built.ufspack"
    staging = tmp_path / "staging"
    staging.mkdir()
    summary = ufspack.build(small_tree, url, progress=False, staging=staging)
    assert summary["files"] == 24 and summary["url"] == url
    assert os.listdir(staging) == []  # the local copy is gone
    p = ufspack.Pack(url)
    for i in range(len(p)):
        with open(os.path.join(small_tree, p.name(i)), "rb") as f:
            assert p.read(i) == f.read()
    with pytest.raises(ValueError, match="read-only"):
        ufspack.build(small_tree, "https://example.invalid/x.ufspack", progress=False)


def test_build_in_parts_to_s3_then_read_back(s3_pack, s3_server, small_tree, tmp_path, monkeypatch):
    """build(parts=3) to s3://: a merged pack whose reads equal those of the
    same build made locally; a rebuild skips the parts already up; a reader
    of one part fetches nothing of the others (the proxy's request log)."""
    url = f"s3://{s3_server.bucket}/py/parts.ufspack"
    staging = tmp_path / "staging"
    staging.mkdir()
    summary = ufspack.build(small_tree, url, parts=3, progress=False, staging=staging)
    assert summary["url"] == url and summary["parts"] == 3
    assert summary["upload_log"] == []
    assert os.listdir(staging) == []
    local = str(tmp_path / "local")
    ufspack.build(small_tree, local, parts=3, progress=False)
    remote_pack, local_pack = ufspack.Pack(url), ufspack.Pack(local)
    assert remote_pack.info["parts"] == 3 and remote_pack.info["pack_id"] == local_pack.info["pack_id"]
    assert [remote_pack.name(i) for i in range(len(local_pack))] == [
        local_pack.name(i) for i in range(len(local_pack))]
    assert remote_pack.read_many(list(range(len(local_pack)))) == local_pack.read_many(
        list(range(len(local_pack))))
    ds, ref = ufspack.MyImageFolder(url), ufspack.MyImageFolder(local)
    assert ds.classes == ref.classes and ds.targets == ref.targets
    for i in (0, 9, len(ref) - 1):
        assert ds[i][0].tobytes() == ref[i][0].tobytes() and ds[i][1] == ref[i][1]

    again = ufspack.build(small_tree, url, parts=3, progress=False, staging=staging)
    assert sum("there already" in line for line in again["upload_log"]) == 4, again["upload_log"]

    # Through the proxy: opening the pack and reading part 0's records
    # touch the manifest and part 0 only.
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.proxy)
    s3_server.reset()
    p = ufspack.Pack(url)
    (part0,) = glob.glob(os.path.join(local, "parts-*", "part-00000"))
    parts0 = list(range(ufspack.Pack(part0).info["records"]))  # merge puts part 0 first
    assert 0 < len(parts0) < len(p)
    assert p.read_many(parts0) == local_pack.read_many(parts0)
    paths = [e["path"] for e in s3_server.log()]
    prefix = f"/{s3_server.bucket}/py/parts.ufspack/"
    keys = {path[len(prefix):].split("/")[0] for path in paths}
    others = keys - {"index.ufs", "manifest.ufs"}
    assert len(others) == 1 and others.pop().endswith("-part-00000"), paths


def test_cache_epoch2_bench_smoke(web, small_pack, small_tree, tmp_path):
    # bench/cache_epoch2.py (docs/benchmarks.md, "Object storage"): one round
    # over HTTP, and its refusal of a local pack that is not the same pack.
    script = os.path.join(HERE, "..", "..", "bench", "cache_epoch2.py")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    out = subprocess.run(
        [sys.executable, script, web + "/small.ufspack", small_pack, str(tmp_path / "c1"), "--rounds", "1"],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("cache filled in ") and lines[1].startswith("round 0: cache ")
    assert lines[-1].startswith("median: cache ") and lines[-1].endswith("x")
    tree = tmp_path / "tree" / "c"
    tree.mkdir(parents=True)
    first = next(os.path.join(d, f) for d, _, fs in sorted(os.walk(small_tree)) for f in sorted(fs))
    shutil.copy(first, tree / "one.jpg")
    ufspack.build(str(tmp_path / "tree"), str(tmp_path / "one"), progress=False)
    out = subprocess.run(
        [sys.executable, script, web + "/small.ufspack", str(tmp_path / "one"), str(tmp_path / "c2")],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert out.returncode == 1 and "has 1 records: not the same pack" in out.stderr, out.stderr
