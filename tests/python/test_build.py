"""ufspack.build from Python: the C++ packer with progress and errors."""

import os
import subprocess

import pytest

import ufspack


def test_summary_and_progress(small_tree, tmp_path):
    calls = []
    s = ufspack.build(small_tree, str(tmp_path / "p"), progress=lambda *a: calls.append(a))
    assert s["files"] == 24 and s["classes"] == 3 and s["skipped"] == 0
    assert s["bytes_in"] > 0 and len(s["pack_id"]) == 32
    assert calls and calls[-1][0] == calls[-1][1] == 24


def test_same_as_cli(small_tree, tmp_path):
    cli = os.environ.get("UFSPACK_CLI")
    if not cli:
        pytest.skip("UFSPACK_CLI not set")
    ufspack.build(small_tree, str(tmp_path / "py"), progress=False)
    subprocess.run([cli, "build", small_tree, "-o", str(tmp_path / "cli"), "-q"], check=True)
    for f in ("data.ufs", "index.ufs"):
        assert (tmp_path / "py" / f).read_bytes() == (tmp_path / "cli" / f).read_bytes()


def test_errors(small_tree, tmp_path):
    with pytest.raises(FileNotFoundError):
        ufspack.build(str(tmp_path / "missing"), str(tmp_path / "p"), progress=False)
    empty = tmp_path / "tree"
    (empty / "nothing").mkdir(parents=True)
    with pytest.raises(ValueError, match="'nothing'"):
        ufspack.build(str(empty), str(tmp_path / "p"), progress=False)
    with pytest.raises(ValueError, match="compress"):
        ufspack.build(small_tree, str(tmp_path / "p"), compress="gzip", progress=False)
    assert not (tmp_path / "p" / "index.ufs").exists()


def test_progress_exception_cancels_and_keeps_previous_pack(small_tree, tmp_path):
    out = str(tmp_path / "p")
    ufspack.build(small_tree, out, progress=False)
    before = open(os.path.join(out, "index.ufs"), "rb").read()

    def boom(*a):
        raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        ufspack.build(small_tree, out, progress=boom, compress="zstd")
    assert open(os.path.join(out, "index.ufs"), "rb").read() == before
    assert sorted(os.listdir(out)) == ["data.ufs", "index.ufs"]


def test_shuffled_layout_is_the_same_dataset(small_tree, tmp_path):
    torchvision = pytest.importorskip("torchvision")
    out = str(tmp_path / "shuffled")
    ufspack.build(small_tree, out, layout="shuffled:5", progress=False)
    ref = torchvision.datasets.ImageFolder(small_tree)
    ds = ufspack.MyImageFolder(out)
    assert ds.classes == ref.classes and ds.targets == ref.targets
    assert [os.path.relpath(p, small_tree) for p, _ in ds.samples] == \
        [os.path.relpath(p, small_tree) for p, _ in ref.samples]
    for i in range(len(ref)):
        assert ds[i][0].tobytes() == ref[i][0].tobytes()
    r = ufspack._core.Reader(os.fsencode(out))
    offsets = [r.record(i)["offset"] for i in range(len(r))]
    assert offsets != sorted(offsets)
    assert r.metadata(b"layout") == b"shuffled:5"
    with pytest.raises(ValueError, match="layout 'random'"):
        ufspack.build(small_tree, str(tmp_path / "bad"), layout="random", progress=False)
    # Parts carry it to the merged pack.
    merged = ufspack.build(small_tree, str(tmp_path / "parts"), parts=2, layout="shuffled:5",
                           progress=False)
    assert merged["records"] == 24
    assert ufspack._core.Reader(os.fsencode(str(tmp_path / "parts"))).metadata(b"layout") == \
        b"shuffled:5"
