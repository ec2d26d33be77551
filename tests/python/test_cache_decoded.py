"""MyImageFolder(cache=..., cache_decoded=True): the deterministic leading
part of the transform is cached as pixels, and the samples are the very same
as without the cache (torch.equal, and the same torch RNG state after them)
in every fast_transforms mode, on the first epoch (filling) and the second
(served from the cache)."""

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
T = pytest.importorskip("torchvision.transforms")

import ufspack  # noqa: E402
from conftest import encode, noise_image, write  # noqa: E402
from test_fast_dataset import MEAN, NATIVE, STD, same  # noqa: E402


def train_tf():
    return T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)])


def val_tf(resize=256):
    return T.Compose([T.Resize(resize), T.CenterCrop(224), T.ToTensor(), T.Normalize(MEAN, STD)])


@pytest.fixture(scope="module")
def photo_pack(tmp_path_factory):
    """Images large enough for DCT scaling under Resize(256), in the formats
    the paths differ on (JPEG, progressive, gray, CMYK for PIL, PNG)."""
    base = tmp_path_factory.mktemp("photos")
    root = str(base / "tree")
    images = {
        "a/big.jpg": encode(noise_image(1100, 800, 1), "JPEG", quality=90),
        "a/wide.jpg": encode(noise_image(640, 520, 2), "JPEG", quality=90),
        "a/tall.jpg": encode(noise_image(530, 700, 3), "JPEG", quality=85, subsampling=0),
        "a/small.jpg": encode(noise_image(120, 90, 4), "JPEG", quality=90),
        "b/progressive.jpg": encode(noise_image(720, 560, 5), "JPEG", quality=80, progressive=True),
        "b/gray.jpg": encode(noise_image(600, 530, 6, "L"), "JPEG", quality=90),
        "b/cmyk.jpg": encode(noise_image(560, 520, 7, "CMYK"), "JPEG", quality=90),
        "b/photo.png": encode(noise_image(300, 200, 8), "PNG"),
    }
    for name, data in images.items():
        write(os.path.join(root, name), data)
    pack = str(base / "pack")
    ufspack.build(root, pack, progress=False)
    return pack


def epoch_items(ds, seed):
    """Sample by sample (__getitem__), from one seed; and the RNG state after."""
    torch.manual_seed(seed)
    out = [ds[i] for i in range(len(ds))]
    return out, torch.get_rng_state()


def epoch_batches(ds, seed, batch=3):
    """In batches (__getitems__), from one seed; and the RNG state after."""
    torch.manual_seed(seed)
    out = []
    for start in range(0, len(ds), batch):
        out.extend(ds.__getitems__(list(range(start, min(start + batch, len(ds))))))
    return out, torch.get_rng_state()


def assert_same_epochs(got, want):
    (xs, rng_x), (ys, rng_y) = got, want
    assert len(xs) == len(ys)
    for k, ((a, ta), (b, tb)) in enumerate(zip(xs, ys)):
        assert ta == tb and same(a, b), k
    assert torch.equal(rng_x, rng_y)


def decoded_stats(cache):
    (t,) = cache.stats()
    return t


def check_identical(pack, tf, fast, cache, expect_cached=True, **kw):
    plain = ufspack.MyImageFolder(pack, tf, fast_transforms=fast, cache=False, **kw)
    ds = ufspack.MyImageFolder(pack, tf, fast_transforms=fast, cache=cache, cache_decoded=True, **kw)
    assert ds.cached_transforms.startswith("decode") == expect_cached, ds.cached_transforms
    # Epoch 1 fills the cache (one sample at a time), epoch 2 reads it (in
    # batches), epoch 3 reads it one at a time: always what the plain
    # dataset gives for the same seed.
    assert_same_epochs(epoch_items(ds, 1), epoch_items(plain, 1))
    before = decoded_stats(cache)
    assert_same_epochs(epoch_batches(ds, 2), epoch_batches(plain, 2))
    assert_same_epochs(epoch_items(ds, 3), epoch_items(plain, 3))
    after = decoded_stats(cache)
    if expect_cached:  # served from the decoded entries alone: no record read
        assert after["hits"] - before["hits"] == 2 * len(ds)
        assert after["misses"] == before["misses"]
    return ds


@pytest.mark.parametrize(
    "name, fast",
    [("train", False), ("train", "exact"), ("val", False), ("val", "exact"), ("val", True)],
)
def test_same_samples_with_and_without_the_decoded_cache(photo_pack, tmp_path, name, fast):
    tf = train_tf() if name == "train" else val_tf()
    cache = ufspack.Cache(tmp_path / "c")
    ds = check_identical(photo_pack, tf, fast, cache)
    if name == "train":
        assert ds.cached_transforms == "decode"
    else:
        assert ds.cached_transforms.startswith("decode -> Resize(size=256") and "CenterCrop" in ds.cached_transforms
    assert f"Decoded cache: {ds.cached_transforms}" in repr(ds)
    t = decoded_stats(cache)
    assert t["tables"] == 2  # the raw records and the decoded samples
    assert t["dropped"] == 0 and t["errors"] == 0


def test_dct_scaling_really_happens_in_the_val_case(photo_pack):
    """The fast_transforms=True case above is not vacuous: DCT scaling
    changes some of these samples (so the cached pixels had to be the
    DCT-scaled ones)."""
    tf = val_tf()
    dct = ufspack.MyImageFolder(photo_pack, tf, fast_transforms=True, cache=False)
    exact = ufspack.MyImageFolder(photo_pack, tf, fast_transforms="exact", cache=False)
    assert any(not torch.equal(dct[i][0], exact[i][0]) for i in range(len(dct)))


def test_train_with_dct_scaling_is_not_cached(photo_pack, tmp_path):
    """With fast_transforms=True a random resize after the cached part picks
    the DCT scale per sample: nothing is cached, and nothing changes."""
    cache = ufspack.Cache(tmp_path / "c")
    ds = check_identical(photo_pack, train_tf(), True, cache, expect_cached=False)
    assert ds.cached_transforms.startswith("not cached") and "RandomResizedCrop" in ds.cached_transforms
    assert decoded_stats(cache)["tables"] == 1  # the raw records only


@pytest.mark.parametrize("fast", [False, "exact", True])
@pytest.mark.parametrize("name", sorted(NATIVE))
def test_same_samples_for_every_native_transform(edge_pack, tmp_path, name, fast):
    """Every pixel format of the edge tree, every transform shape the fused
    path knows (padding, crops larger than the image, resize after crop,
    float64 tails, PIL output), in every mode."""
    tf = NATIVE[name]
    plain = ufspack.MyImageFolder(edge_pack, tf, fast_transforms=fast, cache=False)
    cached = fast is not True or "not cached" not in (
        ufspack.MyImageFolder(edge_pack, tf, fast_transforms=fast, cache=tmp_path / "probe", cache_decoded=True)
        .cached_transforms
    )
    ds = check_identical(edge_pack, tf, fast, ufspack.Cache(tmp_path / "c"), expect_cached=cached)
    assert len(ds) == len(plain)


def test_changing_the_transform_never_returns_old_pixels(photo_pack, tmp_path):
    cache = ufspack.Cache(tmp_path / "c")
    ds = ufspack.MyImageFolder(photo_pack, val_tf(256), cache=cache, cache_decoded=True)
    first = [ds[i][0] for i in range(len(ds))]
    second = [ds[i][0] for i in range(len(ds))]
    assert all(torch.equal(a, b) for a, b in zip(first, second))
    assert decoded_stats(cache)["tables"] == 2
    # Another Resize: same output size, other pixels, another table.
    ds.transform = val_tf(240)
    plain = ufspack.MyImageFolder(photo_pack, val_tf(240), cache=False)
    got = [ds[i][0] for i in range(len(ds))]
    assert all(torch.equal(a, plain[i][0]) for i, a in enumerate(got))
    assert all(not torch.equal(a, b) for a, b in zip(got, first))
    assert decoded_stats(cache)["tables"] == 3
    # The same transform under another fast_transforms mode: another table too.
    exact = ufspack.MyImageFolder(photo_pack, val_tf(240), fast_transforms="exact", cache=cache, cache_decoded=True)
    assert all(torch.equal(exact[i][0], plain[i][0]) for i in range(len(ds)))
    assert decoded_stats(cache)["tables"] == 4
    # And a new dataset with the first transform finds its pixels again.
    before = decoded_stats(cache)
    again = ufspack.MyImageFolder(photo_pack, val_tf(256), cache=cache, cache_decoded=True)
    assert all(torch.equal(again[i][0], first[i]) for i in range(len(ds)))
    assert decoded_stats(cache)["hits"] - before["hits"] == len(ds)


@pytest.mark.parametrize("output", ["numpy", "tensor", "pil"])
def test_decode_only_for_other_outputs(small_pack, tmp_path, output):
    cache = ufspack.Cache(tmp_path / "c")
    plain = ufspack.MyImageFolder(small_pack, output=output, cache=False)
    ds = ufspack.MyImageFolder(small_pack, output=output, cache=cache, cache_decoded=True)
    assert ds.cached_transforms == "decode"
    for _ in range(2):
        for i in range(len(ds)):
            a, b = ds[i][0], plain[i][0]
            if output == "pil":
                assert a.mode == b.mode and a.tobytes() == b.tobytes()
            else:
                assert np.array_equal(np.asarray(a), np.asarray(b)) and type(a) is type(b)
                if output == "numpy":
                    assert a.flags.writeable
    assert decoded_stats(cache)["hits"] == len(ds)


def test_dataloader_workers(photo_pack, tmp_path):
    from torch.utils.data import DataLoader

    def run(ds):
        torch.manual_seed(0)
        loader = DataLoader(ds, batch_size=3, num_workers=2, multiprocessing_context="fork")
        return [(x, y) for xs, ys in loader for x, y in zip(xs, ys)]

    plain = run(ufspack.MyImageFolder(photo_pack, val_tf(), fast_transforms="exact", cache=False))
    cache = ufspack.Cache(tmp_path / "c")
    ds = ufspack.MyImageFolder(photo_pack, val_tf(), fast_transforms="exact", cache=cache, cache_decoded=True)
    for _ in range(2):  # the workers fill, then read
        got = run(ds)
        assert all(torch.equal(a, b) and int(ta) == int(tb) for (a, ta), (b, tb) in zip(got, plain))
    assert decoded_stats(cache)["hits"] >= len(ds)


def test_needs_a_cache_and_the_default_decoder(small_pack, tmp_path, monkeypatch):
    monkeypatch.delenv("UFSPACK_CACHE", raising=False)
    with pytest.raises(ValueError, match="needs a cache"):
        ufspack.MyImageFolder(small_pack, cache_decoded=True)
    c = ufspack.Cache(tmp_path / "c")
    with pytest.raises(ValueError):
        ufspack.MyImageFolder(small_pack, cache=c, cache_decoded=True, output="bytes")
    with pytest.raises(ValueError):
        ufspack.MyImageFolder(small_pack, cache=c, cache_decoded=True, bytes_loader=bytes)
    assert ufspack.MyImageFolder(small_pack, cache=c).cached_transforms is None


@pytest.mark.parametrize("fast", [False, "exact"])
@pytest.mark.parametrize("on_error", ["skip", "substitute"])
def test_bad_samples_behave_as_without_the_cache(small_pack, tmp_path, fast, on_error):
    from test_bad_samples import damage

    bad, _ = damage(small_pack, tmp_path, [3, 10])
    tf = T.Compose([T.Resize(20), T.RandomCrop(16), T.ToTensor()])
    plain = ufspack.MyImageFolder(bad, tf, fast_transforms=fast, on_error=on_error, cache=False)
    ds = ufspack.MyImageFolder(
        bad, tf, fast_transforms=fast, on_error=on_error, cache=tmp_path / "c", cache_decoded=True
    )
    with pytest.warns(ufspack.BadSampleWarning):
        for epoch in range(2):
            assert_same_epochs(epoch_batches(ds, epoch, batch=5), epoch_batches(plain, epoch, batch=5))
    assert ds.bad_samples == plain.bad_samples > 0


@pytest.mark.parametrize("fast", [False, "exact"])
def test_a_jpeg_damaged_past_its_header_draws_as_without_the_cache(tmp_path, fast):
    """Its damage is found while decoding: without the cache its parameters
    were drawn by then, and with the cache too, so the samples after it are
    still the same."""
    root = str(tmp_path / "tree")
    good = encode(noise_image(64, 48, 1), "JPEG", quality=90)
    write(os.path.join(root, "a", "0.jpg"), good)
    write(os.path.join(root, "a", "1.jpg"), good[: len(good) // 2])
    write(os.path.join(root, "a", "2.jpg"), encode(noise_image(60, 50, 2), "JPEG", quality=90))
    pack = str(tmp_path / "pack")
    ufspack.build(root, pack, progress=False)
    tf = T.Compose([T.RandomResizedCrop(16), T.ToTensor()])
    plain = ufspack.MyImageFolder(pack, tf, fast_transforms=fast, on_error="skip", cache=False)
    ds = ufspack.MyImageFolder(
        pack, tf, fast_transforms=fast, on_error="skip", cache=tmp_path / "c", cache_decoded=True
    )
    with pytest.warns(ufspack.BadSampleWarning):
        for epoch in range(2):
            got, want = epoch_batches(ds, epoch), epoch_batches(plain, epoch)
            assert len(got[0]) == 2
            assert_same_epochs(got, want)
