"""MyImageFolder(fast_transforms=...): torchvision's transforms run natively.

The reference is always torchvision itself: ImageFolder on the tree the pack
was built from, with the same transform and the same seed.  "exact" must give
the very same tensors (torch.equal); True may differ only where DCT scaling
was used, and then by little (PSNR)."""

import math
import os
import pickle

import pytest

torch = pytest.importorskip("torch")
T = pytest.importorskip("torchvision.transforms")
datasets = pytest.importorskip("torchvision.datasets")

import ufspack  # noqa: E402
from conftest import EXACT_RESIZE_GAP, encode, noise_image, write  # noqa: E402
from test_dataloader import Batched  # noqa: E402  (python.md's recipe for torch < 2.0)

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


def train_tf(size=24):
    return T.Compose([T.RandomResizedCrop(size), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)])


def val_tf(resize=28, crop=24):
    return T.Compose([T.Resize(resize), T.CenterCrop(crop), T.ToTensor(), T.Normalize(MEAN, STD)])


# Transforms whose whole run is native, and what each exercises.
NATIVE = {
    "train": train_tf(),
    "val": val_tf(),
    "resize_nearest_then_train_bicubic": T.Compose(
        [T.Resize(30, T.InterpolationMode.NEAREST), T.RandomResizedCrop(19, interpolation=T.InterpolationMode.BICUBIC)]
    ),
    "pil_to_tensor": T.Compose([T.CenterCrop(16), T.PILToTensor()]),
    "convert_float": T.Compose(
        [T.RandomCrop(12), T.PILToTensor(), T.ConvertImageDtype(torch.float32), T.Normalize(0.5, 0.25)]
    ),
    "convert_float64": T.Compose([T.Resize((10, 14)), T.ToTensor(), T.ConvertImageDtype(torch.float64)]),
    "padded_random_crop": T.Compose([T.RandomCrop(30, padding=3, pad_if_needed=True, fill=(9, 200, 31)), T.ToTensor()]),
    "center_crop_larger": T.Compose([T.CenterCrop(50), T.RandomHorizontalFlip(1.0), T.ToTensor()]),
    "resize_crop_resize": T.Compose([T.Resize(40), T.CenterCrop(30), T.Resize(17), T.ToTensor()]),
    "pil_output": T.Compose([T.RandomResizedCrop(20), T.RandomHorizontalFlip()]),
    "to_tensor_only": T.ToTensor(),
}


def same(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    return a.mode == b.mode and a.size == b.size and a.tobytes() == b.tobytes()  # PIL images


def pairs(tree, pack, tf, fast, indices, seed0=0):
    ref = datasets.ImageFolder(tree, transform=tf)
    ds = ufspack.MyImageFolder(pack, transform=tf, fast_transforms=fast)
    assert len(ds) == len(ref)
    for i in indices:
        torch.manual_seed(seed0 + i)
        a, ta = ref[i]
        ra = torch.get_rng_state()
        torch.manual_seed(seed0 + i)
        b, tb = ds[i]
        assert ta == tb
        # The same RNG calls: the generator ends in the same state.
        assert torch.equal(ra, torch.get_rng_state()), i
        yield i, a, b


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=EXACT_RESIZE_GAP)
    if n in ("pil_output", "resize_nearest_then_train_bicubic", "train") else n
    for n in sorted(NATIVE)])
def test_exact_mode_equals_torchvision_on_every_format(edge_tree, edge_pack, name):
    tf = NATIVE[name]
    ds = ufspack.MyImageFolder(edge_pack, transform=tf, fast_transforms="exact")
    plan = ds.fast_plan
    assert plan and plan.python is None, plan  # all of it runs natively
    n = len(ds)
    for i, a, b in pairs(edge_tree, edge_pack, tf, "exact", range(n)):
        assert same(a, b), (name, i, ds.samples[i][0])


@EXACT_RESIZE_GAP
def test_exact_mode_equals_torchvision_on_photos(photos_dir, tmp_path):
    tree = os.path.join(photos_dir, "validation")
    pack = str(tmp_path / "pack")
    ufspack.build(tree, pack, progress=False)
    for tf in (train_tf(224), val_tf(256, 224)):
        for i, a, b in pairs(tree, pack, tf, "exact", range(0, 1000, 37)):
            assert same(a, b), i


def psnr(a, b):
    x = a.float() * torch.tensor(STD).view(3, 1, 1) + torch.tensor(MEAN).view(3, 1, 1)
    y = b.float() * torch.tensor(STD).view(3, 1, 1) + torch.tensor(MEAN).view(3, 1, 1)
    mse = float(((x - y) ** 2).mean())
    return math.inf if mse == 0 else 10 * math.log10(1 / mse)


def test_dct_scaling_stays_close_to_torchvision(tmp_path):
    # Big images and small outputs: DCT scaling is used for most samples.
    root = str(tmp_path / "tree")
    for i in range(12):
        img = noise_image(320 + 8 * i, 240, 500 + i).resize((640 + 16 * i, 480))
        write(os.path.join(root, "c", f"{i}.jpg"), encode(img, "JPEG", quality=90))
    pack = str(tmp_path / "pack")
    ufspack.build(root, pack, progress=False)
    values = [psnr(a, b) for _, a, b in pairs(root, pack, train_tf(64), True, range(12))]
    values += [psnr(a, b) for _, a, b in pairs(root, pack, val_tf(100, 64), True, range(12))]
    finite = [v for v in values if v != math.inf]
    assert finite, "DCT scaling was never used"
    assert min(values) >= 30.0, values


def test_getitems_draws_like_a_loop_of_getitem(edge_tree, edge_pack):
    tf = train_tf()
    ds = ufspack.MyImageFolder(edge_pack, transform=tf, fast_transforms="exact", decode_threads=2)
    ref = datasets.ImageFolder(edge_tree, transform=tf)
    idx = [5, 0, 9, 9, 3, len(ds) - 1, 12]
    torch.manual_seed(7)
    expect = [ref[i] for i in idx]
    torch.manual_seed(7)
    got = ds.__getitems__(idx)
    assert len(got) == len(expect)
    for (a, ta), (b, tb) in zip(expect, got):
        assert ta == tb and same(a, b)
    # default_collate stacks them as it stacks torchvision's.
    from torch.utils.data import default_collate

    xa, ya = default_collate(expect)
    xb, yb = default_collate(got)
    assert torch.equal(xa, xb) and torch.equal(ya, yb)


@EXACT_RESIZE_GAP
def test_the_python_rest_runs_after_the_native_run(edge_tree, edge_pack):
    jitter = T.ColorJitter(0.4, 0.4, 0.4)
    tf = T.Compose([T.RandomResizedCrop(20), jitter, T.ToTensor()])
    ds = ufspack.MyImageFolder(edge_pack, transform=tf, fast_transforms=True)
    assert len(ds.fast_plan) == 1
    assert ds.fast_plan.python is not None
    assert "python: ColorJitter" in ds.fast_plan.description
    assert "Fast transforms (DCT scaling allowed): native: RandomResizedCrop" in repr(ds)
    for _, a, b in pairs(edge_tree, edge_pack, tf, "exact", range(0, len(ds), 3)):
        assert same(a, b)


def test_unsupported_arguments_stay_in_python(edge_tree, edge_pack):
    # LANCZOS is not native: RandomResizedCrop and what follows run in Python.
    tf = T.Compose([T.RandomResizedCrop(20, interpolation=T.InterpolationMode.LANCZOS), T.ToTensor()])
    ds = ufspack.MyImageFolder(edge_pack, transform=tf, fast_transforms=True)
    assert not ds.fast_plan
    assert "native: (none)" in repr(ds)
    for _, a, b in pairs(edge_tree, edge_pack, tf, True, range(0, len(ds), 4)):
        assert same(a, b)
    # padding_mode="reflect": the crop and everything after it.
    tf = T.Compose([T.Resize(30), T.RandomCrop(20, padding=2, padding_mode="reflect"), T.ToTensor()])
    ds = ufspack.MyImageFolder(edge_pack, transform=tf, fast_transforms="exact")
    assert len(ds.fast_plan) == 1
    for _, a, b in pairs(edge_tree, edge_pack, tf, "exact", range(0, len(ds), 4)):
        assert same(a, b)


def test_reassigned_transform_is_replanned(edge_pack):
    ds = ufspack.MyImageFolder(edge_pack, transform=train_tf(), fast_transforms=True)
    assert "RandomResizedCrop" in ds.fast_plan.description
    ds.transform = val_tf()
    assert "CenterCrop" in ds.fast_plan.description
    x, _ = ds[0]
    assert x.shape == (3, 24, 24)
    ds.transform = None
    assert not ds.fast_plan
    assert ds[0][0].mode == "RGB"
    assert ufspack.MyImageFolder(edge_pack, transform=train_tf()).fast_plan is None


def test_bad_arguments(edge_pack):
    with pytest.raises(ValueError, match="fast_transforms must be"):
        ufspack.MyImageFolder(edge_pack, fast_transforms="yes")
    with pytest.raises(ValueError, match="default decoder"):
        ufspack.MyImageFolder(edge_pack, fast_transforms=True, bytes_loader=lambda b: b)
    with pytest.raises(ValueError, match="output='pil'"):
        ufspack.MyImageFolder(edge_pack, fast_transforms=True, output="numpy")


def test_torchvision_errors_are_raised_as_torchvision_raises_them(edge_tree, edge_pack):
    # RandomCrop larger than the image without padding: ValueError from
    # get_params, for both.
    tf = T.Compose([T.RandomCrop(500), T.ToTensor()])
    ref = datasets.ImageFolder(edge_tree, transform=tf)
    ds = ufspack.MyImageFolder(edge_pack, transform=tf, fast_transforms=True)
    with pytest.raises(ValueError) as e_ref:
        ref[0]
    with pytest.raises(ValueError) as e_ds:
        ds[0]
    assert str(e_ref.value) == str(e_ds.value)
    # A std that is zero in float32.
    tf = T.Compose([T.ToTensor(), T.Normalize(MEAN, [1e-50, 1, 1])])
    ds = ufspack.MyImageFolder(edge_pack, transform=tf, fast_transforms=True)
    with pytest.raises(ValueError, match="std evaluated to zero"):
        ds[0]


@pytest.fixture(scope="module")
def bad_tree(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("fastbad") / "tree")
    good = encode(noise_image(40, 30, 1), "JPEG", quality=90)
    write(os.path.join(root, "c", "0good.jpg"), good)
    write(os.path.join(root, "c", "1truncated.jpg"), good[: len(good) // 2])
    write(os.path.join(root, "c", "2garbage.jpg"), b"\xff\xd8\xff" + b"\x00" * 50)
    write(os.path.join(root, "c", "3notanimage.png"), b"hello")
    write(os.path.join(root, "c", "4good.png"), encode(noise_image(41, 31, 2), "PNG"))
    return root


@pytest.fixture(scope="module")
def bad_pack(bad_tree, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("fastbadpack") / "pack")
    ufspack.build(bad_tree, out, progress=False)
    return out


def error_of(fn, arg):
    try:
        fn(arg)
    except Exception as e:  # noqa: BLE001
        return type(e)
    return None


def test_corrupt_images_raise_what_the_exact_path_raises(bad_tree, bad_pack):
    tf = train_tf()
    exact = ufspack.MyImageFolder(bad_pack, transform=tf)
    fast = ufspack.MyImageFolder(bad_pack, transform=tf, fast_transforms=True)
    ref = datasets.ImageFolder(bad_tree, transform=tf)
    wants = []
    for i in range(len(ref)):
        want = error_of(ref.__getitem__, i)
        assert error_of(exact.__getitem__, i) is want
        assert error_of(fast.__getitem__, i) is want, fast.samples[i]
        assert error_of(fast.__getitems__, [0, i]) is want
        wants.append(want is None)
    assert wants == [True, False, False, False, True]


def test_damage_below_the_crop_is_still_seen(tmp_path):
    # A tall JPEG cut short: the centre crop lies above the cut, yet
    # torchvision (PIL decodes the whole file) raises, so must the fast path.
    root = str(tmp_path / "tree")
    data = encode(noise_image(48, 400, 3), "JPEG", quality=90)
    write(os.path.join(root, "c", "cut.jpg"), data[: len(data) * 9 // 10])
    pack = str(tmp_path / "pack")
    ufspack.build(root, pack, progress=False)
    tf = T.Compose([T.CenterCrop(8), T.ToTensor()])
    ref = datasets.ImageFolder(root, transform=tf)
    want = error_of(ref.__getitem__, 0)
    assert want is OSError
    for fast in (True, "exact"):
        ds = ufspack.MyImageFolder(pack, transform=tf, fast_transforms=fast)
        assert error_of(ds.__getitem__, 0) is want
        assert error_of(ds.__getitems__, [0]) is want


def test_on_error_skip_and_substitute(bad_pack):
    tf = train_tf()
    with pytest.warns(ufspack.BadSampleWarning):
        ds = ufspack.MyImageFolder(bad_pack, transform=tf, fast_transforms=True, on_error="skip")
        got = ds.__getitems__(list(range(len(ds))))
        assert len(got) == 2 and ds.bad_samples == 3
        assert ds[1] is None
    with pytest.warns(ufspack.BadSampleWarning):
        ds = ufspack.MyImageFolder(bad_pack, transform=tf, fast_transforms=True, on_error="substitute")
        got = ds.__getitems__(list(range(len(ds))))
        assert len(got) == 5
        assert [t for _, t in got] == [0] * 5
        assert all(x.shape == (3, 24, 24) for x, _ in got)


def test_pickles_and_runs_in_dataloader_workers(edge_tree, edge_pack):
    tf = val_tf()
    ds = ufspack.MyImageFolder(edge_pack, transform=tf, fast_transforms="exact")
    ds[0]
    clone = pickle.loads(pickle.dumps(ds))
    assert clone.fast_plan.description == ds.fast_plan.description
    ref = datasets.ImageFolder(edge_tree, transform=tf)
    # spawn, and a timeout: a worker forked while another thread holds an
    # allocator lock can hang under ASan (scripts/sanitize.sh pyasan).
    loader = torch.utils.data.DataLoader(ds, batch_size=4, num_workers=2, multiprocessing_context="spawn", timeout=300)
    xs = torch.cat([x for x, _ in loader])
    assert torch.equal(xs, torch.stack([ref[i][0] for i in range(len(ref))]))


@EXACT_RESIZE_GAP
def test_zstd_records_and_non_jpeg_formats(edge_tree, tmp_path):
    pack = str(tmp_path / "zpack")
    ufspack.build(edge_tree, pack, compress="zstd", progress=False)
    tf = train_tf()
    for _, a, b in pairs(edge_tree, pack, tf, "exact", range(len(datasets.ImageFolder(edge_tree)))):
        assert same(a, b)


def test_uses_the_native_path(edge_pack, monkeypatch):
    # Not a silent fall back to PIL: transform_batch runs for every sample.
    from ufspack import _core

    calls = []
    real = _core.transform_batch

    def spy(*a, **kw):
        calls.append(len(a[0]))
        return real(*a, **kw)

    monkeypatch.setattr(_core, "transform_batch", spy)
    ds = ufspack.MyImageFolder(edge_pack, transform=train_tf(), fast_transforms=True)
    ds.__getitems__(list(range(8)))
    ds[3]
    assert calls == [8, 1]


def test_the_batch_recipe_for_old_torch(edge_tree, edge_pack):
    tf = val_tf()
    ds = ufspack.MyImageFolder(edge_pack, transform=tf, fast_transforms="exact", decode_threads=2)
    batches = torch.utils.data.BatchSampler(torch.utils.data.SequentialSampler(ds), 5, False)
    loader = torch.utils.data.DataLoader(
        Batched(ds), sampler=batches, batch_size=None, collate_fn=torch.utils.data.default_collate
    )
    ref = datasets.ImageFolder(edge_tree, transform=tf)
    got = [(x, y) for x, y in loader]
    assert [len(y) for _, y in got][:-1] == [5] * (len(got) - 1)
    xs = torch.cat([x for x, _ in got])
    ys = torch.cat([y for _, y in got])
    assert torch.equal(xs, torch.stack([ref[i][0] for i in range(len(ref))]))
    assert ys.tolist() == ref.targets
