"""MyImageFolder against the real torchvision.datasets.ImageFolder."""

import os
import pickle

import numpy as np
import pytest

import ufspack

torchvision = pytest.importorskip("torchvision")
torch = pytest.importorskip("torch")
from torchvision import transforms  # noqa: E402
from torchvision.datasets import ImageFolder  # noqa: E402


def assert_same_pixels(path, expected, actual):
    a = np.asarray(expected)
    b = np.asarray(actual)
    assert a.shape == b.shape, path
    if a.dtype == b.dtype and np.array_equal(a, b):
        return
    diff = np.abs(a.astype(np.int32) - b.astype(np.int32)).max()
    # A difference of at most 1 is tolerated only for CMYK JPEGs.
    assert "cmyk" in path and diff <= 1, f"{path}: max pixel difference {diff}"


def test_metadata_matches_imagefolder(edge_tree, edge_pack):
    tv = ImageFolder(edge_tree)
    my = ufspack.MyImageFolder(edge_pack)
    assert my.classes == tv.classes
    assert my.class_to_idx == tv.class_to_idx
    assert len(my) == len(tv)
    assert list(my.samples) == [tuple(s) for s in tv.samples]
    assert list(my.imgs) == [tuple(s) for s in tv.imgs]
    assert list(my.targets) == tv.targets
    assert my.targets == tv.targets
    assert my.extensions == tv.extensions
    assert my.root == edge_pack
    # Spot checks of the edge cases the tree was made for.
    paths = [os.path.relpath(p, edge_tree) for p, _ in tv.samples]
    assert paths.index("B/sub-x/a.png") < paths.index("B/sub/deeper/b.png")
    assert "B/.hidden.png" in paths and "B/notes.txt" not in paths
    assert os.fsdecode(b"z/b\xff.jpg") in paths
    assert my.classes[0] == ".hidden_class"


def test_pixels_match_imagefolder(edge_tree, edge_pack):
    tv = ImageFolder(edge_tree)
    my = ufspack.MyImageFolder(edge_pack)
    for i in range(len(tv)):
        (a, ta), (b, tb) = tv[i], my[i]
        assert ta == tb
        assert b.mode == "RGB"
        assert_same_pixels(tv.samples[i][0], a, b)


def test_exif_orientation_is_not_applied(edge_pack):
    my = ufspack.MyImageFolder(edge_pack)
    i = [os.path.basename(p) for p, _ in my.samples].index("exif.jpg")
    assert my[i][0].size == (40, 24)  # stored size, not rotated


@pytest.mark.parametrize("output", ["numpy", "tensor", "bytes"])
def test_other_outputs(edge_tree, edge_pack, output):
    tv = ImageFolder(edge_tree)
    my = ufspack.MyImageFolder(edge_pack, output=output)
    for i in range(len(tv)):
        sample, target = my[i]
        assert target == tv.targets[i]
        path = tv.samples[i][0]
        if output == "bytes":
            with open(path, "rb") as f:
                assert sample == f.read()
            continue
        expected = np.asarray(tv[i][0])
        if output == "numpy":
            assert sample.dtype == np.uint8 and sample.shape == expected.shape
            assert_same_pixels(path, expected, sample)
        else:
            assert sample.dtype == torch.uint8 and sample.is_contiguous()
            pil_tensor = transforms.PILToTensor()(tv[i][0])
            assert tuple(sample.shape) == tuple(pil_tensor.shape)
            assert_same_pixels(path, pil_tensor.numpy(), sample.numpy())


def test_same_transforms_give_same_tensors(edge_tree, edge_pack):
    t = transforms.Compose(
        [transforms.Resize(20), transforms.CenterCrop(16), transforms.ToTensor(),
         transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])]
    )
    tv = ImageFolder(edge_tree, transform=t, target_transform=lambda y: y * 10)
    my = ufspack.MyImageFolder(edge_pack, transform=t, target_transform=lambda y: y * 10)
    for i in range(len(tv)):
        (a, ta), (b, tb) = tv[i], my[i]
        assert ta == tb
        if "cmyk" in tv.samples[i][0]:
            assert torch.allclose(a, b, atol=0.05)
        else:
            assert torch.equal(a, b), tv.samples[i][0]


def test_bytes_loader_receives_file_bytes(edge_tree, edge_pack):
    seen = []

    def loader(data):
        seen.append(data)
        return len(data)

    my = ufspack.MyImageFolder(edge_pack, bytes_loader=loader)
    sample, _ = my[3]
    with open(my.samples[3][0], "rb") as f:
        assert seen[-1] == f.read()
    assert isinstance(seen[-1], bytes) and sample == len(seen[-1])
    assert my.bytes_loader is loader


@pytest.fixture(scope="module")
def all_files_pack(edge_tree, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("allfiles") / "pack")
    ufspack.build(edge_tree, out, all_files=True, progress=False)
    return out


def test_all_files_pack_filters_like_imagefolder(edge_tree, all_files_pack):
    tv = ImageFolder(edge_tree)
    my = ufspack.MyImageFolder(all_files_pack)
    assert len(ufspack.Pack(all_files_pack)) > len(tv)  # notes.txt, noext
    assert list(my.samples) == [tuple(s) for s in tv.samples]
    assert list(my.targets) == tv.targets


def test_is_valid_file_filters_like_imagefolder(edge_tree, all_files_pack):
    # is_valid_file sees every file, as in ImageFolder: exact parity needs a
    # pack built with --all-files.
    def keep(path):
        return not path.endswith((".bmp", ".JPG"))

    tv = ImageFolder(edge_tree, is_valid_file=keep)
    my = ufspack.MyImageFolder(all_files_pack, is_valid_file=keep)
    assert list(my.samples) == [tuple(s) for s in tv.samples]
    assert list(my.targets) == tv.targets
    assert my.extensions is None and tv.extensions is None
    assert np.array_equal(np.asarray(my[0][0]), np.asarray(tv[0][0]))


def test_is_valid_file_emptying_a_class_raises(edge_tree, edge_pack):
    with pytest.raises(FileNotFoundError):
        ImageFolder(edge_tree, is_valid_file=lambda p: "/a/" not in p)
    with pytest.raises(FileNotFoundError, match="Found no valid file for the classes"):
        ufspack.MyImageFolder(edge_pack, is_valid_file=lambda p: "/a/" not in p)


def test_getitems_batch(edge_tree, edge_pack):
    t = transforms.ToTensor()
    my = ufspack.MyImageFolder(edge_pack, transform=t)
    idx = list(range(len(my)))[::-1]
    batch = my.__getitems__(idx)
    assert len(batch) == len(idx)
    for (x, y), i in zip(batch, idx):
        x1, y1 = my[i]
        assert y == y1 and torch.equal(x, x1)


def test_getitems_bytes_and_custom_loader(small_pack):
    idx = [7, 3, 3, 0, 23]
    raw = ufspack.MyImageFolder(small_pack, output="bytes", decode_threads=3)
    assert raw.__getitems__(idx) == [raw[i] for i in idx]
    sized = ufspack.MyImageFolder(small_pack, bytes_loader=len, target_transform=lambda y: -y)
    assert sized.__getitems__(idx) == [sized[i] for i in idx]
    assert sized.__getitems__(idx)[0] == (len(raw[7][0]), -raw[7][1])


def test_negative_and_numpy_indices(small_pack):
    my = ufspack.MyImageFolder(small_pack, output="bytes")
    assert my[-1] == my[len(my) - 1]
    assert my[np.int64(2)] == my[2]


def test_pickle_drops_handle_and_reopens(small_pack):
    my = ufspack.MyImageFolder(small_pack, transform=transforms.PILToTensor())
    _ = my[0]
    data = pickle.dumps(my)
    assert len(data) < 4096  # the path and settings, no records, no handle
    other = pickle.loads(data)
    assert len(other) == len(my)
    for i in range(len(my)):
        assert torch.equal(other[i][0], my[i][0]) and other[i][1] == my[i][1]


def test_real_photos_match_imagefolder(photos_dir, tmp_path):
    src = os.path.join(photos_dir, "train")
    pack = str(tmp_path / "pack")
    ufspack.build(src, pack, progress=False)
    tv = ImageFolder(src)
    my = ufspack.MyImageFolder(pack)
    assert len(my) == len(tv) == 2000
    assert my.classes == tv.classes == ["cats", "dogs"]
    assert list(my.samples) == [tuple(s) for s in tv.samples]
    assert list(my.targets) == tv.targets
    for i in range(0, 2000, 7):
        assert np.array_equal(np.asarray(tv[i][0]), np.asarray(my[i][0])), tv.samples[i][0]
