"""Fixtures for the Python tests: real image files of every pixel format,
ImageFolder trees full of naming edge cases, and packs built from them."""

import io
import os
import tarfile

import numpy as np
import pytest
from PIL import Image

import ufspack

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.dirname(os.path.dirname(HERE))
SHARED_TAR = os.environ.get(
    "UFSPACK_SHARED_TAR",
    os.path.join(SOURCE_DIR, "..", "shared", "data", "cats_and_dogs_filtered.tar"),
)

# True in scripts/sanitize.sh's Python-on-ASan pass, which preloads libasan
# into the uninstrumented python3: tests of no ufspack native code skip there.
UNDER_ASAN = "libasan" in os.environ.get("LD_PRELOAD", "")

# Known gaps on today's Pillow (issue 42), as strict expected failures: each
# turns into a failure the day it is fixed, so the marker cannot outlive it.
PILLOW = tuple(int(p) for p in Image.__version__.split(".")[:2])
# The in-place decode into PIL images reads Pillow 9-10's private struct
# ImagingMemoryInstance behind the capsule "PIL Imaging": Pillow 11 renamed
# the capsule, 12 changed the struct, so every image goes through
# Image.fromarray there (same pixels, slower).
IN_PLACE_PIL_GAP = pytest.mark.xfail(
    PILLOW >= (11, 0), strict=True,
    reason="issue 42: the in-place PIL decode knows Pillow 9-10's private image struct only")
# fast_transforms="exact" reproduces Pillow 9.4's resize, horizontal pass
# first; Pillow 13 sometimes resizes vertically first (python-pillow/Pillow
# #9549), which rounds differently: up to 1 step (bilinear), 4 (bicubic).
EXACT_RESIZE_GAP = pytest.mark.xfail(
    PILLOW >= (13, 0), strict=True,
    reason="issue 42: 'exact' resizes as Pillow 9.4, horizontally first; Pillow 13 may go vertically first")


def noise_image(w, h, seed, mode="RGB"):
    """A deterministic image with gradients and noise (JPEG-realistic)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([(x * 255 // max(w - 1, 1)), (y * 255 // max(h - 1, 1)), ((x + y) * 3) % 256], -1)
    arr = np.clip(base + rng.integers(-40, 40, size=(h, w, 3)), 0, 255).astype(np.uint8)
    img = Image.fromarray(arr, "RGB")
    return img if mode == "RGB" else img.convert(mode)


def encode(img, fmt, **kw):
    buf = io.BytesIO()
    img.save(buf, fmt, **kw)
    return buf.getvalue()


def exif_rotated_jpeg(seed):
    img = noise_image(40, 24, seed)
    exif = Image.Exif()
    exif[0x0112] = 6  # orientation: rotate 90 CW on display
    return encode(img, "JPEG", quality=90, exif=exif.tobytes())


def png16(seed, mode):
    rng = np.random.default_rng(seed)
    if mode == "I;16":
        arr = rng.integers(0, 65535, size=(19, 23), dtype=np.uint16)
        # The mode follows from the dtype: Pillow 13 refuses one given for
        # uint16 ("Invalid mode for data type"); 9.4 and 13 both make I;16.
        img = Image.fromarray(arr)
        assert img.mode == "I;16", img.mode
        return encode(img, "PNG")
    raise ValueError(mode)


# name -> bytes, covering every pixel format the decoders must get right.
def image_variants():
    v = {}
    v["rgb.jpg"] = encode(noise_image(37, 23, 1), "JPEG", quality=92)
    v["progressive.jpg"] = encode(noise_image(64, 48, 2), "JPEG", quality=80, progressive=True)
    v["sub420.jpg"] = encode(noise_image(33, 17, 3), "JPEG", quality=75, subsampling=2)
    v["sub444.jpg"] = encode(noise_image(33, 17, 4), "JPEG", quality=75, subsampling=0)
    v["gray.jpg"] = encode(noise_image(31, 29, 5, "L"), "JPEG", quality=85)
    v["cmyk.jpg"] = encode(noise_image(30, 20, 6, "CMYK"), "JPEG", quality=90)
    v["exif.jpg"] = exif_rotated_jpeg(7)
    v["rgb.png"] = encode(noise_image(37, 23, 8), "PNG")
    v["rgba.png"] = encode(noise_image(21, 13, 9, "RGBA"), "PNG")
    v["l.png"] = encode(noise_image(21, 13, 10, "L"), "PNG")
    v["la.png"] = encode(noise_image(21, 13, 11, "LA"), "PNG")
    v["p.png"] = encode(noise_image(21, 13, 12, "P"), "PNG")
    ptrns = noise_image(21, 13, 13, "P")
    v["p_trns.png"] = encode(ptrns, "PNG", transparency=0)
    v["one_bit.png"] = encode(noise_image(21, 13, 14, "1"), "PNG")
    v["i16.png"] = png16(15, "I;16")
    v["optimized.png"] = encode(noise_image(30, 30, 16), "PNG", optimize=True)
    v["rgb.bmp"] = encode(noise_image(37, 23, 17), "BMP")
    v["p.bmp"] = encode(noise_image(37, 23, 18, "P"), "BMP")
    v["l.bmp"] = encode(noise_image(37, 23, 19, "L"), "BMP")
    v["rgb.ppm"] = encode(noise_image(37, 23, 20), "PPM")
    v["l.pgm"] = encode(noise_image(37, 23, 21, "L"), "PPM")
    v["rgb.tif"] = encode(noise_image(25, 15, 22), "TIFF")
    v["rgb.webp"] = encode(noise_image(25, 15, 23), "WEBP", quality=80)
    v["rgba.webp"] = encode(noise_image(25, 15, 24, "RGBA"), "WEBP", lossless=True)
    return v


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def make_edge_tree(base):
    """An ImageFolder tree with names and layouts that trip naive ports.

    Returns the root path (str).  `base/outside` holds a directory that a
    class links to.
    """
    root = os.path.join(base, "tree")
    variants = image_variants()
    # Class "a": every pixel format.
    for name, data in variants.items():
        write(os.path.join(root, "a", name), data)
    jpg = variants["rgb.jpg"]
    png = variants["rgb.png"]
    # Class "B" sorts before "a"; upper-case and unknown extensions; hidden
    # files; sub-x before sub/deeper.
    write(os.path.join(root, "B", "x.JPG"), jpg)
    write(os.path.join(root, "B", "y.JPEG"), variants["gray.jpg"])
    write(os.path.join(root, "B", "notes.txt"), b"not an image")
    write(os.path.join(root, "B", "noext"), png)
    write(os.path.join(root, "B", ".hidden.png"), png)
    write(os.path.join(root, "B", "sub-x", "a.png"), variants["p.png"])
    write(os.path.join(root, "B", "sub", "deeper", "b.png"), variants["rgba.png"])
    write(os.path.join(root, "B", "sub", "c.bmp"), variants["rgb.bmp"])
    # A hidden class, a non-ASCII class, a non-UTF-8 file name.
    write(os.path.join(root, ".hidden_class", "h.jpg"), jpg)
    write(os.path.join(root, "é", "e.png"), png)
    write(os.fsencode(os.path.join(root, "z")) + b"/b\xff.jpg", jpg)
    write(os.path.join(root, "z", "b\U0001F600.jpg"), variants["sub420.jpg"])
    write(os.path.join(root, "z", "nested", "dir", "n.png"), variants["l.png"])
    os.symlink("nested", os.path.join(root, "z", "link_to_nested"))
    # A class that is a symlink to a directory outside the root.
    write(os.path.join(base, "outside", "o.jpg"), variants["progressive.jpg"])
    write(os.path.join(base, "outside", "deep", "p.png"), variants["la.png"])
    os.symlink(os.path.join(base, "outside"), os.path.join(root, "linked"))
    # A plain file at the root: not a class, not a sample.
    write(os.path.join(root, "stray.jpg"), jpg)
    return root


@pytest.fixture(scope="session")
def edge_tree(tmp_path_factory):
    return make_edge_tree(str(tmp_path_factory.mktemp("edge")))


@pytest.fixture(scope="session")
def edge_pack(edge_tree, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("edgepack") / "pack")
    ufspack.build(edge_tree, out, progress=False)
    return out


@pytest.fixture(scope="session")
def small_tree(tmp_path_factory):
    """24 JPEG/PNG images in 3 classes (8 each): for DataLoader tests."""
    root = str(tmp_path_factory.mktemp("small") / "tree")
    for c in range(3):
        for i in range(8):
            img = noise_image(24 + i, 16 + c, 100 * c + i)
            ext, fmt = ("jpg", "JPEG") if i % 2 else ("png", "PNG")
            write(os.path.join(root, f"class{c}", f"img{i}.{ext}"), encode(img, fmt))
    return root


@pytest.fixture(scope="session")
def small_pack(small_tree, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("smallpack") / "pack")
    ufspack.build(small_tree, out, progress=False)
    return out


@pytest.fixture(scope="session")
def photos_dir(tmp_path_factory):
    """../shared's 3,000 real photos, unpacked; skipped when absent."""
    if not os.path.exists(SHARED_TAR):
        pytest.skip("../shared/data/cats_and_dogs_filtered.tar absent")
    d = str(tmp_path_factory.mktemp("photos"))
    with tarfile.open(SHARED_TAR) as t:
        t.extractall(d)
    return os.path.join(d, "cats_and_dogs_filtered")
