"""MyImageFolder under torch.utils.data.DataLoader: workers, fork and spawn,
DistributedSampler, persistent workers."""

import hashlib

import pytest

import ufspack

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402
from torch.utils.data.distributed import DistributedSampler  # noqa: E402
from torchvision import transforms  # noqa: E402

TRANSFORM = transforms.Compose([transforms.Resize((16, 16)), transforms.PILToTensor()])


def key(x, y):
    return (int(y), hashlib.sha1(x.numpy().tobytes()).hexdigest())


def expected(ds):
    return [key(*ds[i]) for i in range(len(ds))]


def run(loader):
    out = []
    for xs, ys in loader:
        out.extend(key(x, y) for x, y in zip(xs, ys))
    return out


@pytest.mark.parametrize("ctx", ["fork", "spawn"])
@pytest.mark.parametrize("workers", [0, 2, 4])
def test_every_sample_once_in_order(small_pack, ctx, workers):
    ds = ufspack.MyImageFolder(small_pack, transform=TRANSFORM)
    want = expected(ds)
    if workers == 0 and ctx == "spawn":
        pytest.skip("no worker processes to start")
    loader = DataLoader(
        ds, batch_size=5, shuffle=False, num_workers=workers,
        multiprocessing_context=ctx if workers else None,
    )
    assert run(loader) == want


@pytest.mark.parametrize("ctx", ["fork", "spawn"])
def test_shuffled_epoch_is_a_permutation(small_pack, ctx):
    ds = ufspack.MyImageFolder(small_pack, transform=TRANSFORM)
    loader = DataLoader(ds, batch_size=4, shuffle=True, num_workers=2,
                        multiprocessing_context=ctx, generator=torch.Generator().manual_seed(1))
    got = run(loader)
    assert sorted(got) == sorted(expected(ds))
    assert len(set(got)) == len(got)


class Batched(torch.utils.data.Dataset):
    """docs/python.md's recipe for torch < 2.0: dataset[list] -> __getitems__."""

    def __init__(self, ds):
        self.ds = ds

    def __len__(self):
        return len(self.ds)

    def __getitem__(self, idx):
        return self.ds.__getitems__(idx)


@pytest.mark.parametrize("workers", [0, 2])
def test_batched_recipe_gives_the_same_batches(small_pack, workers):
    ds = ufspack.MyImageFolder(small_pack, transform=TRANSFORM, decode_threads=3)
    order = torch.randperm(len(ds), generator=torch.Generator().manual_seed(3)).tolist()
    plain = DataLoader(ds, batch_size=5, sampler=order, num_workers=workers)
    batched = DataLoader(Batched(ds), sampler=torch.utils.data.BatchSampler(order, 5, False),
                         batch_size=None, num_workers=workers,
                         collate_fn=torch.utils.data.default_collate)
    pairs = list(zip(plain, batched))
    assert len(pairs) == 5
    for (x1, y1), (x2, y2) in pairs:
        assert torch.equal(x1, x2) and torch.equal(y1, y2)


def test_distributed_sampler_covers_every_sample_once(small_pack):
    ds = ufspack.MyImageFolder(small_pack, transform=TRANSFORM)
    assert len(ds) % 2 == 0  # no padding duplicates
    seen = []
    for rank in range(2):
        sampler = DistributedSampler(ds, num_replicas=2, rank=rank, shuffle=True, seed=3)
        sampler.set_epoch(1)
        seen += run(DataLoader(ds, batch_size=3, sampler=sampler, num_workers=2))
    assert sorted(seen) == sorted(expected(ds))


def test_persistent_workers_two_epochs(small_pack):
    ds = ufspack.MyImageFolder(small_pack, transform=TRANSFORM)
    want = sorted(expected(ds))
    loader = DataLoader(ds, batch_size=6, shuffle=True, num_workers=2, persistent_workers=True)
    for _ in range(2):
        assert sorted(run(loader)) == want


def test_worker_error_names_the_record(small_pack, tmp_path):
    import shutil

    bad = str(tmp_path / "bad")
    shutil.copytree(small_pack, bad)
    pack = ufspack.Pack(bad)
    rec = pack.record(5)
    with open(f"{bad}/data.ufs", "r+b") as f:
        f.seek(rec["offset"] + rec["size"] // 2)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0xFF]))
    ds = ufspack.MyImageFolder(bad, transform=TRANSFORM)
    loader = DataLoader(ds, batch_size=4, num_workers=2)
    with pytest.raises(ufspack.CorruptPackError, match=rf"record 5 '{rec['name']}' at offset {rec['offset']}"):
        run(loader)
