"""MyImageFolder(on_error=...): bad samples raise by default (naming the
record, also from DataLoader workers, never a hang); "skip" and
"substitute" are opt-in, warn, and count across workers."""

import os
import pickle
import shutil
import warnings

import numpy as np
import pytest

import ufspack

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402


def damage(pack, tmp_path, records, name="bad"):
    """A copy of `pack` with one bit flipped in the middle of each record."""
    bad = str(tmp_path / name)
    shutil.copytree(pack, bad)
    p = ufspack.Pack(bad)
    recs = {r: p.record(r) for r in records}
    with open(os.path.join(bad, "data.ufs"), "r+b") as f:
        for rec in recs.values():
            f.seek(rec["offset"] + rec["size"] // 2)
            b = f.read(1)
            f.seek(-1, 1)
            f.write(bytes([b[0] ^ 0x10]))
    return bad, recs


def same(a, b):
    return np.array_equal(np.asarray(a[0]), np.asarray(b[0])) and a[1] == b[1]


def test_unknown_policy_is_value_error(small_pack):
    with pytest.raises(ValueError, match="on_error"):
        ufspack.MyImageFolder(small_pack, on_error="ignore")


def test_default_raises_and_counts_nothing(small_pack, tmp_path):
    bad, recs = damage(small_pack, tmp_path, [3])
    ds = ufspack.MyImageFolder(bad, output="numpy")
    with pytest.raises(ufspack.CorruptPackError, match=f"record 3 '{recs[3]['name']}'"):
        ds[3]
    assert ds.bad_samples == 0


@pytest.mark.parametrize("output", ["numpy", "bytes", "pil"])
def test_substitute_returns_the_next_good_sample(small_pack, tmp_path, output):
    bad, recs = damage(small_pack, tmp_path, [3, 4])
    good = ufspack.MyImageFolder(small_pack, output=output)
    ds = ufspack.MyImageFolder(bad, output=output, on_error="substitute")
    with pytest.warns(ufspack.BadSampleWarning) as caught:
        got = ds[3]
    assert same(got, good[5])  # 3 and 4 are bad: 5 stands in
    msgs = [str(w.message) for w in caught]
    assert any(
        "record 3, " in m and recs[3]["name"] in m and "checksum mismatch" in m and "replaced by sample 5" in m
        for m in msgs
    )
    assert any("record 4, " in m and "substitute" in m for m in msgs)
    assert ds.bad_samples == 2
    # The batched path keeps the batch size, same substitutes.
    with pytest.warns(ufspack.BadSampleWarning):
        batch = ds.__getitems__(list(range(8)))
    assert len(batch) == 8
    for i, item in enumerate(batch):
        assert same(item, good[5 if i in (3, 4) else i])
    assert ds.bad_samples == 2 + 3  # 3: 4 met, 5 used; 4: replaced by 5
    # A good sample is untouched and not counted.
    assert same(ds[0], good[0]) and ds.bad_samples == 5


def test_substitute_wraps_around(small_pack, tmp_path):
    n = len(ufspack.Pack(small_pack))
    bad, _ = damage(small_pack, tmp_path, [n - 1])
    ds = ufspack.MyImageFolder(bad, output="bytes", on_error="substitute")
    with pytest.warns(ufspack.BadSampleWarning, match="replaced by sample 0"):
        assert same(ds[n - 1], ufspack.MyImageFolder(small_pack, output="bytes")[0])


def test_substitute_with_nothing_good_left_raises(small_pack, tmp_path):
    n = len(ufspack.Pack(small_pack))
    bad, _ = damage(small_pack, tmp_path, list(range(n)))
    ds = ufspack.MyImageFolder(bad, output="bytes", on_error="substitute")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ufspack.BadSampleWarning)
        with pytest.raises(ufspack.CorruptPackError, match="record 2 "):
            ds[2]
    assert ds.bad_samples == n


@pytest.mark.parametrize("output", ["numpy", "bytes"])
def test_skip_drops_the_sample(small_pack, tmp_path, output):
    bad, recs = damage(small_pack, tmp_path, [3])
    good = ufspack.MyImageFolder(small_pack, output=output)
    ds = ufspack.MyImageFolder(bad, output=output, on_error="skip")
    with pytest.warns(ufspack.BadSampleWarning, match=rf"record 3, .*{recs[3]['name']}.*skipped"):
        assert ds[3] is None
    with pytest.warns(ufspack.BadSampleWarning):
        batch = ds.__getitems__(list(range(8)))
    assert len(batch) == 7
    for item, i in zip(batch, [0, 1, 2, 4, 5, 6, 7]):
        assert same(item, good[i])
    assert ds.bad_samples == 2


def test_undecodable_image_is_a_bad_sample(tmp_path):
    from conftest import encode, noise_image, write

    root = tmp_path / "tree"
    write(str(root / "c" / "a.jpg"), encode(noise_image(20, 10, 1), "JPEG"))
    write(str(root / "c" / "b.jpg"), b"definitely not a jpeg")
    write(str(root / "c" / "c.png"), encode(noise_image(20, 10, 2), "PNG"))
    ufspack.build(str(root), str(tmp_path / "pack"), progress=False)
    ds = ufspack.MyImageFolder(str(tmp_path / "pack"), on_error="skip")
    with pytest.warns(ufspack.BadSampleWarning, match=r"b\.jpg.*skipped"):
        assert ds[1] is None
    assert ds[0] is not None and ds[2] is not None
    sub = ufspack.MyImageFolder(str(tmp_path / "pack"), output="numpy", on_error="substitute")
    with pytest.warns(ufspack.BadSampleWarning, match="replaced by sample 2"):
        assert same(sub[1], sub[2])
    # A custom loader's exception counts too.
    def loader(data):
        if data.startswith(b"definitely"):
            raise ValueError("my loader refuses this")
        return len(data)

    mine = ufspack.MyImageFolder(str(tmp_path / "pack"), bytes_loader=loader, on_error="skip")
    with pytest.warns(ufspack.BadSampleWarning, match="ValueError: my loader refuses this"):
        assert [x for x in mine.__getitems__([0, 1, 2])] == [mine[0], mine[2]]


def test_transform_errors_always_propagate(small_pack):
    def broken(x):
        raise RuntimeError("bug in my transform")

    ds = ufspack.MyImageFolder(small_pack, transform=broken, on_error="skip")
    with pytest.raises(RuntimeError, match="bug in my transform"):
        ds[0]
    with pytest.raises(RuntimeError, match="bug in my transform"):
        ds.__getitems__([0, 1])
    assert ds.bad_samples == 0


def test_pickle_keeps_the_policy_with_a_fresh_count(small_pack, tmp_path):
    bad, _ = damage(small_pack, tmp_path, [3])
    ds = ufspack.MyImageFolder(bad, output="bytes", on_error="skip")
    with pytest.warns(ufspack.BadSampleWarning):
        ds[3]
    copy = pickle.loads(pickle.dumps(ds))
    assert copy.on_error == "skip" and copy.bad_samples == 0 and ds.bad_samples == 1
    with pytest.warns(ufspack.BadSampleWarning):
        assert copy[3] is None
    assert copy.bad_samples == 1 and ds.bad_samples == 1


def crop(t):
    """Same-sized tensors, so default_collate can stack them."""
    return t[:, :8, :8]


def labels_of(loader):
    out = []
    for batch in loader:
        if batch is None:
            continue
        out.extend(int(y) for y in batch[1])
    return out


@pytest.mark.parametrize("ctx", ["fork", "spawn"])
def test_dataloader_workers_count_in_the_main_process(small_pack, tmp_path, ctx):
    bad, _ = damage(small_pack, tmp_path, [5, 17])
    ds = ufspack.MyImageFolder(bad, output="tensor", transform=crop, on_error="substitute")
    loader = DataLoader(ds, batch_size=4, num_workers=2, multiprocessing_context=ctx, timeout=120)
    want = list(ds.targets)
    want[5], want[17] = want[6], want[18]
    assert labels_of(loader) == want
    assert ds.bad_samples == 2
    if ctx == "fork":  # a second epoch (new workers) counts again
        assert labels_of(loader) == want
        assert ds.bad_samples == 4


def test_dataloader_skip_with_collate(small_pack, tmp_path):
    bad, _ = damage(small_pack, tmp_path, [5])
    ds = ufspack.MyImageFolder(bad, output="tensor", transform=crop, on_error="skip")
    loader = DataLoader(ds, batch_size=4, num_workers=2, collate_fn=ufspack.skip_none_collate, timeout=120)
    want = list(ds.targets)
    del want[5]
    assert labels_of(loader) == want
    assert ds.bad_samples == 1


def test_dataloader_worker_error_is_raised_not_hung(small_pack, tmp_path):
    bad, recs = damage(small_pack, tmp_path, [9])
    ds = ufspack.MyImageFolder(bad, output="tensor", transform=crop)
    for ctx in ("fork", "spawn"):
        loader = DataLoader(ds, batch_size=4, num_workers=2, multiprocessing_context=ctx, timeout=120)
        where = rf"record 9 '{recs[9]['name']}' at offset {recs[9]['offset']}"
        with pytest.raises(ufspack.CorruptPackError, match=where):
            labels_of(loader)
