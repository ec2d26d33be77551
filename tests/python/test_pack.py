"""ufspack.Pack: the plain reader."""

import os
import pickle

import numpy as np
import pytest

import ufspack


def test_records_round_trip(small_tree, small_pack):
    pack = ufspack.Pack(small_pack)
    assert len(pack) == 24
    assert pack.classes == ["class0", "class1", "class2"]
    assert pack.source_root == small_tree
    for i, name in enumerate(pack.names):
        with open(os.path.join(small_tree, name), "rb") as f:
            data = f.read()
        assert pack[i] == data
        assert pack.read(name) == data
        assert pack.find(name) == i
        assert name in pack
        assert pack.label(i) == int(name[5])
    assert list(pack.labels) == [i // 8 for i in range(24)]
    assert "class0/missing.jpg" not in pack
    with pytest.raises(FileNotFoundError, match="missing.jpg"):
        pack.read("class0/missing.jpg")


def test_record_and_info(small_pack):
    pack = ufspack.Pack(small_pack)
    r = pack.record(0)
    assert r["name"] == "class0/img0.png" and r["label"] == 0 and r["codec"] == "raw"
    info = pack.info
    assert info["records"] == 24 and info["classes"] == 3 and info["version"] == 1
    assert len(info["pack_id"]) == 32 and info["flat"] is False
    pack.check()


def test_read_into_buffer_without_copy(small_pack):
    pack = ufspack.Pack(small_pack)
    size = pack.record(4)["size"]
    buf = np.zeros(size + 10, dtype=np.uint8)
    assert pack.read_into(4, buf) == size
    assert buf[:size].tobytes() == pack.read(4)
    with pytest.raises(ValueError, match="needs"):
        pack.read_into(4, bytearray(size - 1))


@pytest.mark.parametrize("threads", [1, 4, 64])
def test_read_many_matches_read(small_pack, threads):
    pack = ufspack.Pack(small_pack)
    keys = [5, 0, 23, 5, -1, pack.name(7)]
    assert pack.read_many(keys, threads=threads) == [pack.read(k) for k in keys]
    assert pack.read_many([], threads=threads) == []
    with pytest.raises(IndexError):
        pack.read_many([0, 24], threads=threads)
    with pytest.raises(FileNotFoundError, match="nope.jpg"):
        pack.read_many(["class0/nope.jpg"], threads=threads)


def test_non_utf8_names_round_trip(edge_pack):
    pack = ufspack.Pack(edge_pack)
    name = os.fsdecode(b"z/b\xff.jpg")
    i = pack.find(name)
    assert pack.name(i) == name
    assert pack.find(b"z/b\xff.jpg") == i


def test_compressed_pack_reads_original_bytes(tmp_path):
    src = tmp_path / "src" / "text"
    src.mkdir(parents=True)
    for i in range(5):
        (src / f"{i}.txt").write_text("hello world\n" * (100 + i))
    summary = ufspack.build(str(tmp_path / "src"), str(tmp_path / "pack"), all_files=True,
                            compress="zstd:9", progress=False)
    assert summary["compressed"] == 5 and summary["bytes_out"] < summary["bytes_in"]
    pack = ufspack.Pack(str(tmp_path / "pack"))
    for i in range(5):
        assert pack.read(f"text/{i}.txt") == ("hello world\n" * (100 + i)).encode()


def test_pack_pickles_to_its_path(small_pack):
    pack = ufspack.Pack(small_pack)
    other = pickle.loads(pickle.dumps(pack))
    assert [other[i] for i in range(3)] == [pack[i] for i in range(3)]


def test_arrays_made_natively_hold_their_own_elements(small_pack):
    # pybind11 < 2.12 under numpy 2 made new arrays with stride 0 (every
    # element the first): labels, sample starts and block members were
    # silently wrong there. Each checked against per-element answers.
    pack = ufspack.Pack(small_pack)
    labels = pack.labels
    assert labels.dtype == np.int64 and labels.strides == (8,)
    assert labels.tolist() == [pack.label(i) for i in range(len(pack))]
    assert len(set(labels.tolist())) == len(pack.classes) > 1
    reader = ufspack._core.Reader(os.fsencode(small_pack))
    starts, _, _ = reader.sample_starts()
    assert starts.strides == (8,) and starts[0] == 0 and starts[-1] == len(pack)
    assert all(a < b for a, b in zip(starts.tolist(), starts.tolist()[1:]))
    first, members = reader.block_members(4096)
    assert members.strides == (8,) and sorted(members.tolist()) == list(range(len(pack)))
    assert first.strides == (8,) and first[0] == 0 and first[-1] == len(pack)
