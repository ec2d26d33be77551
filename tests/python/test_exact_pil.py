"""The default output="pil" path decodes straight into new PIL images
(read_decode_pil / read_decode_pil_batch, issue 13): same pixels, mode and
size as ImageFolder, per sample and batched, with the array path
(Image.fromarray) only where an image's memory is not laid out as
expected, and PIL itself where the fast decoders leave an input to it."""

import ctypes
import os

import numpy as np
import pytest
from PIL import Image
from torchvision import transforms
from torchvision.datasets import ImageFolder

import ufspack
from conftest import IN_PLACE_PIL_GAP, encode, noise_image, write
from ufspack import _core


def same_image(want, got, what=""):
    assert got.mode == want.mode == "RGB", what
    assert got.size == want.size, what
    assert got.tobytes() == want.tobytes(), what
    # PIL's internal 4th byte too (255 in every RGB image PIL makes).
    assert got.tobytes("raw", "RGBX") == want.tobytes("raw", "RGBX"), what


class Factory:
    """new_image for read_decode_pil that records the images it made."""

    def __init__(self, make=None):
        self.made = []
        self.make = make or (lambda w, h: Image.new("RGB", (w, h), None))

    def __call__(self, w, h):
        img = self.make(w, h)
        self.made.append(img)
        return img

    def made_it(self, img):
        return any(img is m for m in self.made)


@pytest.fixture
def recording(monkeypatch):
    """Records the images MyImageFolder's default path creates."""
    f = Factory(ufspack.MyImageFolder._new_rgb_image)
    monkeypatch.setattr(ufspack.MyImageFolder, "_new_rgb_image", staticmethod(f))
    return f


def test_default_images_are_plain_rgb_images():
    img = ufspack.MyImageFolder._new_rgb_image(5, 3)
    assert isinstance(img, Image.Image) and type(img) is Image.Image
    assert img.mode == "RGB" and img.size == (5, 3) and not img.readonly
    img.putpixel((4, 2), (1, 2, 3))
    assert img.getpixel((4, 2)) == (1, 2, 3)
    assert img.copy().tobytes() == img.tobytes()


@IN_PLACE_PIL_GAP
def test_default_images_without_map_buffer(small_tree, small_pack, monkeypatch, recording):
    monkeypatch.delattr(Image.core, "map_buffer")
    tv = ImageFolder(small_tree)
    my = ufspack.MyImageFolder(small_pack)
    for i in range(len(tv)):
        got = my[i][0]
        assert recording.made_it(got)
        same_image(tv[i][0], got)


@pytest.mark.parametrize("threads", [1, 4])
def test_edge_tree_matches_imagefolder_one_by_one_and_batched(edge_tree, edge_pack, threads):
    tv = ImageFolder(edge_tree)
    my = ufspack.MyImageFolder(edge_pack, decode_threads=threads)
    assert len(my) == len(tv)
    batch = my.__getitems__(list(range(len(my))))
    for i in range(len(tv)):
        want, target = tv[i]
        got, t1 = my[i]
        assert t1 == target and batch[i][1] == target
        same_image(want, got, tv.samples[i][0])
        same_image(want, batch[i][0], tv.samples[i][0])


@IN_PLACE_PIL_GAP
def test_the_new_path_is_taken(edge_tree, edge_pack, recording, monkeypatch):
    tv = ImageFolder(edge_tree)
    my = ufspack.MyImageFolder(edge_pack)
    names = [os.path.basename(p) for p, _ in tv.samples]
    fast = [i for i, n in enumerate(names) if n.lower().endswith((".jpg", ".jpeg", ".bmp", ".ppm", ".pgm"))
            and n != "cmyk.jpg"]
    fast += [i for i, n in enumerate(names) if n.endswith(".png") and n != "i16.png"]
    assert len(fast) > 20

    def no_fromarray(*a, **k):
        raise AssertionError("Image.fromarray called: the array path was taken")

    monkeypatch.setattr(Image, "fromarray", no_fromarray)
    for i in fast:
        got, _ = my[i]
        assert recording.made_it(got), names[i]
        same_image(tv[i][0], got, names[i])
    recording.made.clear()
    batch = my.__getitems__(fast)
    for (got, _), i in zip(batch, fast):
        assert recording.made_it(got), names[i]
    # What the fast decoders leave to PIL never gets an image made for it.
    for n in ("cmyk.jpg", "i16.png", "rgb.tif", "rgb.webp"):
        recording.made.clear()
        got, _ = my[names.index(n)]
        assert not recording.made_it(got) and recording.made == [], n
        same_image(tv[names.index(n)][0], got, n)


@IN_PLACE_PIL_GAP
def test_core_results(small_pack):
    reader = _core.Reader(os.fsencode(os.path.join(small_pack, "index.ufs")))
    f = Factory()
    img, raw = reader.read_decode_pil(1, f)
    assert raw is None and f.made_it(img) and len(f.made) == 1
    arr, _ = reader.read_decode(1)
    assert np.array_equal(np.asarray(img), arr)
    out = reader.read_decode_pil_batch([0, 1, 2, 1], f, 3)
    assert all(raw is None and f.made_it(img) for img, raw in out)
    assert out[1][0] is not out[3][0]
    for (img, _), i in zip(out, [0, 1, 2, 1]):
        assert np.array_equal(np.asarray(img), reader.read_decode(i)[0])
    assert reader.read_decode_pil_batch([], f) == []
    with pytest.raises(IndexError):
        reader.read_decode_pil_batch([0, 10**6], f)


@pytest.mark.parametrize(
    "make",
    [
        lambda w, h: Image.new("RGBA", (w, h)),
        lambda w, h: Image.new("L", (w, h)),
        lambda w, h: Image.new("RGB", (w + 1, h)),
        lambda w, h: Image.new("RGB", (w, h + 1)),
        lambda w, h: np.zeros((h, w, 3), np.uint8),
        lambda w, h: None,
    ],
    ids=["rgba", "l", "wider", "taller", "ndarray", "none"],
)
def test_unexpected_images_fall_back_to_the_array_path(small_pack, make):
    reader = _core.Reader(os.fsencode(os.path.join(small_pack, "index.ufs")))
    f = Factory(make)
    for i in (0, 1):
        got, raw = reader.read_decode_pil(i, f)
        assert raw is None and isinstance(got, np.ndarray)
        assert np.array_equal(got, reader.read_decode(i)[0])
    made = f.made[-1]
    if isinstance(made, Image.Image):  # left as it was made: nothing written
        assert made.tobytes() == Image.new(made.mode, made.size).tobytes()


def test_dataset_falls_back_when_images_are_unexpected(small_tree, small_pack, monkeypatch):
    monkeypatch.setattr(ufspack.MyImageFolder, "_new_rgb_image", staticmethod(lambda w, h: Image.new("RGBA", (w, h))))
    tv = ImageFolder(small_tree)
    my = ufspack.MyImageFolder(small_pack)
    batch = my.__getitems__(list(range(len(my))))
    for i in range(len(tv)):
        same_image(tv[i][0], my[i][0])
        same_image(tv[i][0], batch[i][0])


def test_new_image_errors_propagate(small_pack):
    reader = _core.Reader(os.fsencode(os.path.join(small_pack, "index.ufs")))

    def boom(w, h):
        raise MemoryError("no room for the image")

    with pytest.raises(MemoryError, match="no room"):
        reader.read_decode_pil(0, boom)
    with pytest.raises(MemoryError, match="no room"):
        reader.read_decode_pil_batch([0, 1], boom, 2)


def row_pointers(img):
    table = dict(img.im.unsafe_ptrs)["image"]
    return list((ctypes.c_void_p * img.height).from_address(table))


@IN_PLACE_PIL_GAP
def test_images_spread_over_several_blocks(tmp_path, monkeypatch):
    """With Pillow's smallest block size (4 KiB) an image's rows live in
    several blocks (not evenly spaced): still decoded in place, same
    pixels."""
    tree = str(tmp_path / "tree")
    for i, (w, h) in enumerate([(100, 60), (37, 200), (300, 7), (64, 64)]):
        ext, fmt = ("jpg", "JPEG") if i % 2 == 0 else ("png", "PNG")
        write(os.path.join(tree, f"c{i % 2}", f"{i}.{ext}"), encode(noise_image(w, h, 500 + i), fmt))
    pack = str(tmp_path / "pack")
    ufspack.build(tree, pack, progress=False)
    recording = Factory()  # Image.new: Pillow's own blocks
    monkeypatch.setattr(ufspack.MyImageFolder, "_new_rgb_image", staticmethod(recording))
    old = Image.core.get_block_size()
    Image.core.set_block_size(4096)
    try:
        tv = ImageFolder(tree)
        my = ufspack.MyImageFolder(pack)
        spread = 0
        batch = my.__getitems__(list(range(len(my))))
        for i in range(len(tv)):
            for got in (my[i][0], batch[i][0]):
                assert recording.made_it(got)
                same_image(tv[i][0], got, tv.samples[i][0])
                rows = row_pointers(got)
                pitch = rows[1] - rows[0]
                spread += any(rows[y] - rows[0] != y * pitch for y in range(got.height))
        assert spread >= 6  # all but the 300x7 image, one by one and batched
    finally:
        Image.core.set_block_size(old)


def test_transforms_give_imagefolder_tensors(edge_tree, edge_pack):
    t = transforms.Compose([transforms.Resize(20), transforms.CenterCrop(16), transforms.ToTensor()])
    tv = ImageFolder(edge_tree, transform=t)
    my = ufspack.MyImageFolder(edge_pack, transform=t)
    batch = my.__getitems__(list(range(len(my))))
    for i in range(len(tv)):
        assert np.array_equal(tv[i][0].numpy(), my[i][0].numpy())
        assert np.array_equal(tv[i][0].numpy(), batch[i][0].numpy())


@IN_PLACE_PIL_GAP
def test_real_photos_match_imagefolder_batched(photos_dir, tmp_path, recording):
    src = os.path.join(photos_dir, "validation")
    pack = str(tmp_path / "pack")
    ufspack.build(src, pack, progress=False)
    tv = ImageFolder(src)
    my = ufspack.MyImageFolder(pack, decode_threads=3)
    idx = list(range(0, len(my), 3))
    batch = my.__getitems__(idx)
    for (got, y), i in zip(batch, idx):
        want, target = tv[i]
        assert y == target and recording.made_it(got)
        same_image(want, got, tv.samples[i][0])
