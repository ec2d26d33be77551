"""Every error MyImageFolder and Pack promise, with its type and message."""

import os
import shutil
import subprocess
import sys

import pytest

import ufspack


def test_missing_pack_is_file_not_found(tmp_path):
    missing = str(tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match=missing):
        ufspack.Pack(missing)
    with pytest.raises(FileNotFoundError, match=missing):
        ufspack.MyImageFolder(missing)


def test_not_a_pack(tmp_path):
    (tmp_path / "index.ufs").write_bytes(b"\xff\xd8\xff\xe0 a jpeg, not an index")
    (tmp_path / "data.ufs").write_bytes(b"")
    with pytest.raises(ufspack.CorruptPackError, match="not a ufspack index"):
        ufspack.Pack(str(tmp_path))


def corrupt_copy(pack, tmp_path, record):
    bad = str(tmp_path / "bad")
    shutil.copytree(pack, bad)
    rec = ufspack.Pack(bad).record(record)
    with open(os.path.join(bad, "data.ufs"), "r+b") as f:
        f.seek(rec["offset"])
        b = f.read(1)
        f.seek(rec["offset"])
        f.write(bytes([b[0] ^ 1]))
    return bad, rec


def test_corrupt_record_names_record_name_and_offset(small_pack, tmp_path):
    bad, rec = corrupt_copy(small_pack, tmp_path, 3)
    ds = ufspack.MyImageFolder(bad)
    with pytest.raises(ufspack.CorruptPackError) as e:
        ds[3]
    msg = str(e.value)
    assert f"record 3 '{rec['name']}' at offset {rec['offset']}" in msg
    assert "checksum mismatch" in msg
    assert isinstance(e.value, OSError)
    ds[2]  # the others still read
    with pytest.raises(ufspack.CorruptPackError):
        ufspack.Pack(bad).read(3)
    assert ufspack.Pack(bad, verify=False).read(3) != ufspack.Pack(small_pack).read(3)


@pytest.mark.parametrize("output", ["bytes", "numpy"])
def test_corrupt_record_in_a_batch_raises_naming_it(small_pack, tmp_path, output):
    bad, rec = corrupt_copy(small_pack, tmp_path, 3)
    ds = ufspack.MyImageFolder(bad, output=output)
    with pytest.raises(ufspack.CorruptPackError, match=f"record 3 '{rec['name']}'"):
        ds.__getitems__([0, 1, 2, 3, 4, 5, 6, 7])
    with pytest.raises(ufspack.CorruptPackError, match="record 3 "):
        ufspack.Pack(bad).read_many(range(8), threads=8)
    assert len(ds.__getitems__([0, 1, 2, 4])) == 4


def test_undecodable_image_names_the_path(tmp_path):
    tv = pytest.importorskip("torchvision.datasets")
    root = tmp_path / "tree"
    (root / "c").mkdir(parents=True)
    (root / "c" / "broken.jpg").write_bytes(b"definitely not a jpeg")
    ufspack.build(str(root), str(tmp_path / "pack"), progress=False)
    ds = ufspack.MyImageFolder(str(tmp_path / "pack"))
    with pytest.raises(Exception) as theirs:
        tv.ImageFolder(str(root))[0]
    with pytest.raises(type(theirs.value)) as ours:
        ds[0]
    assert str(root / "c" / "broken.jpg") in str(ours.value)


def test_out_of_range_is_index_error(small_pack):
    ds = ufspack.MyImageFolder(small_pack)
    with pytest.raises(IndexError):
        ds[len(ds)]
    with pytest.raises(IndexError):
        ds[-len(ds) - 1]
    with pytest.raises(IndexError):
        ufspack.Pack(small_pack).read(10**9)
    with pytest.raises(TypeError):
        ds["0"]


def test_flat_pack_is_not_an_image_folder(small_tree, tmp_path):
    ufspack.build(small_tree, str(tmp_path / "flat"), flat=True, progress=False)
    with pytest.raises(ValueError, match="--flat"):
        ufspack.MyImageFolder(str(tmp_path / "flat"))
    assert len(ufspack.Pack(str(tmp_path / "flat"))) == 24


def test_unknown_output_is_value_error(small_pack):
    with pytest.raises(ValueError, match="output"):
        ufspack.MyImageFolder(small_pack, output="jpeg")


@pytest.mark.parametrize("planted", ["index.ufs", "data.ufs"])
def test_fifo_in_place_of_a_pack_file_is_refused_without_blocking(small_pack, tmp_path, planted):
    # A FIFO with no writer blocks open(2) forever: Pack must refuse it by
    # type instead.  Run in a child so that a regression fails, not hangs.
    bad = str(tmp_path / "bad")
    shutil.copytree(small_pack, bad)
    fifo = os.path.join(bad, planted)
    os.unlink(fifo)
    os.mkfifo(fifo)
    code = (
        "import sys, ufspack\n"
        "try:\n"
        "    ufspack.Pack(sys.argv[1])\n"
        "except ValueError as e:\n"
        "    print(type(e).__name__, e)\n"
    )
    try:
        r = subprocess.run([sys.executable, "-c", code, bad], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail(f"ufspack.Pack blocked on a FIFO as {planted}")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"ValueError {fifo}: not a regular file (FIFO)"
