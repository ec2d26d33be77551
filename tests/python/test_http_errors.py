"""An HTTP error never ends an epoch silently (issue 41): a pack served over
HTTP by a server that starts failing mid-epoch (tests/python/flaky_server.py:
from a byte offset on, ranged GETs of data.ufs get 416, 404, 500 or a short
body) makes iteration raise OSError or CorruptPackError naming the URL,
after exactly the samples before that offset: `for x in ds`, list(ds),
DataLoader batches (``__getitems__``), SampleDataset,
Pack.read_many, and block reads driven by a BlockSampler.  IndexError is
left for an index out of range: Python's iteration protocol takes it for
the end of the sequence."""

import json
import os
import urllib.request
import warnings

import pytest

import httpserve
import ufspack
from conftest import encode, noise_image, write

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402

SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "flaky_server.py")
GOOD = 20  # samples before the failure point (a multiple of BATCH)
BATCH = 4
BLOCK = 64 << 10

# What each failure must raise: a 416 on a range inside the size the object
# had when opened says it is now shorter than the pack says (damaged);
# the others are I/O errors.  Exact types: FileNotFoundError for the 404
# would say "no such pack or record".
EXPECTED = {"416": ufspack.CorruptPackError, "404": OSError, "500": OSError, "short": OSError}
MODES = sorted(EXPECTED)


def serve(root):
    """flaky_server.py serving `root` while the block runs; yields its URL."""
    return httpserve.serve(root, server=SERVER)


def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.load(r)


class Site:
    """The served pack: its URL, the local copy, and the server's switch."""

    def __init__(self, base, local):
        self.base = base
        self.url = base + "/pack"
        self.data_url = self.url + "/data.ufs"
        self.local = ufspack.Pack(local, cache=False)
        offsets = [self.local.record(i)["offset"] for i in range(len(self.local))]
        assert offsets == sorted(offsets)  # sorted layout: sample k is record k, in file order
        self.offsets = offsets

    def fail(self, mode, at):
        """Ranged GETs of data.ufs touching bytes >= `at` get `mode`."""
        get(f"{self.base}/__fail__?mode={mode}&at={at}")

    def heal(self):
        get(f"{self.base}/__fail__")

    def failed(self):
        return get(f"{self.base}/__stats__")["failed"]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """60 JPEGs of 3 classes (about 5 blocks of 64 KiB), sorted layout,
    served at <url>/pack."""
    root = tmp_path_factory.mktemp("flaky")
    for i in range(60):
        write(str(root / "tree" / f"class{i % 3}" / f"img{i:03d}.jpg"),
              encode(noise_image(64, 48, i), "JPEG", quality=95))
    local = str(root / "www" / "pack")
    ufspack.build(str(root / "tree"), local, progress=False)
    with serve(str(root / "www")) as base:
        yield Site(base, local)


@pytest.fixture
def flaky(site, monkeypatch):
    """`site`, one attempt per request (500 and short bodies are retried
    otherwise, with backoff), no node-local cache; healed afterwards."""
    monkeypatch.setenv("UFSPACK_REMOTE_MAX_ATTEMPTS", "1")
    monkeypatch.delenv("UFSPACK_CACHE", raising=False)
    site.heal()
    yield site
    site.heal()


def check(err, mode, site):
    """`err` is what `mode` must raise, and names the data file's URL."""
    assert type(err) is EXPECTED[mode], repr(err)
    assert site.data_url in str(err), str(err)


@pytest.mark.parametrize("mode", MODES)
def test_image_folder_iteration_raises_after_the_good_samples(flaky, mode):
    ds = ufspack.MyImageFolder(flaky.url, cache=False)
    flaky.fail(mode, flaky.offsets[GOOD])
    got = []
    with pytest.raises(OSError) as e:
        for x in ds:
            got.append(x)
    check(e.value, mode, flaky)
    assert len(got) == GOOD
    with pytest.raises(OSError) as e:
        list(ds)
    check(e.value, mode, flaky)
    with pytest.raises(OSError) as e:
        ds[GOOD]
    check(e.value, mode, flaky)
    with pytest.raises(IndexError, match="out of range"):
        ds[len(ds)]  # an index out of range is still IndexError
    assert flaky.failed() > 0


# In-process: torch 1.13 takes 10 s to shut down workers after one raised.
def test_dataloader_batches_raise_after_the_good_batches(flaky):
    ds = ufspack.MyImageFolder(flaky.url, cache=False, output="numpy")
    flaky.fail("416", flaky.offsets[GOOD])
    loader = DataLoader(ds, batch_size=BATCH)
    got = 0
    with pytest.raises(OSError) as e:
        for x, _ in loader:
            got += len(x)
    check(e.value, "416", flaky)
    assert got == GOOD
    with pytest.raises(OSError) as e:
        ds.__getitems__(list(range(GOOD - 2, GOOD + 2)))
    check(e.value, "416", flaky)
    assert "expected an object of" in str(e.value)


@pytest.mark.parametrize("mode", MODES)
def test_sample_dataset_and_pack_reads_raise(flaky, mode):
    pack = ufspack.Pack(flaky.url, cache=False)
    samples = ufspack.SampleDataset(pack, fields=("jpg",), decode=False)
    assert len(samples) == len(pack)  # one file per sample
    flaky.fail(mode, flaky.offsets[GOOD])
    got = []
    with pytest.raises(OSError) as e:
        for s in samples:
            got.append(s)
    check(e.value, mode, flaky)
    assert len(got) == GOOD
    got = []
    with pytest.raises(OSError) as e:
        for b in pack:
            got.append(b)
    check(e.value, mode, flaky)
    assert got == [flaky.local[i] for i in range(GOOD)]
    for read in (lambda: pack.read_many(range(len(pack))), lambda: pack.read(GOOD),
                 lambda: pack.sample(GOOD), lambda: pack.read_into(GOOD, bytearray(1 << 20))):
        with pytest.raises(OSError) as e:
            read()
        check(e.value, mode, flaky)
    with pytest.raises(IndexError, match="out of range"):
        pack.read_many([0, len(pack)])


@pytest.mark.parametrize("mode", ["416", "500"])
def test_block_reads_raise_after_the_good_blocks(flaky, mode):
    ds = ufspack.MyImageFolder(flaky.url, cache=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the sorted layout: not what block reads are for
        sampler = ufspack.BlockSampler(ds, block_bytes=BLOCK, shuffle=False)
    # Blocks 0 and 1 are read; block 2 (from its first record on) fails.
    good = sum(1 for o in flaky.offsets if o // BLOCK < 2)
    assert 0 < good < len(ds)
    flaky.fail(mode, min(o for o in flaky.offsets if o // BLOCK == 2))
    got = []
    with pytest.raises(OSError) as e:
        for x in DataLoader(ds, batch_size=None, sampler=sampler):
            got.append(x)
    check(e.value, mode, flaky)
    assert len(got) == good
    assert ds._pack._handle.get().block_stats()["block_fetches"] >= 2


def test_a_416_for_bytes_the_server_says_it_has_is_an_os_error(flaky):
    """A 416 whose Content-Range gives the object's full size (for a read,
    or for the open's first bytes) is the server's fault, not a short
    object: OSError, never IndexError."""
    ds = ufspack.MyImageFolder(flaky.url, cache=False)
    flaky.fail("416full", flaky.offsets[GOOD])
    with pytest.raises(OSError, match="refused a range inside the object") as e:
        ds[GOOD]
    assert type(e.value) is OSError and flaky.data_url in str(e.value)
    flaky.fail("416full", 0)
    with pytest.raises(OSError, match="expected the object's first bytes") as e:
        ufspack.Pack(flaky.url, cache=False)
    assert type(e.value) is OSError and flaky.data_url in str(e.value)


def test_an_index_error_from_a_transform_is_not_the_end(site):
    """Iteration goes by len(): an IndexError a transform raises propagates
    (Python's fallback, calling __getitem__ until IndexError, would take it
    for the end of the dataset)."""

    def transform(x):
        transform.calls += 1
        if transform.calls > 3:
            raise IndexError("list index out of range (in the transform)")
        return x

    transform.calls = 0
    ds = ufspack.MyImageFolder(site.local.path, transform=transform, cache=False)
    with pytest.raises(IndexError, match="in the transform"):
        list(ds)
    transform.calls = 0
    samples = ufspack.SampleDataset(site.local, fields=("jpg",), decode=False, transform=transform)
    with pytest.raises(IndexError, match="in the transform"):
        list(samples)
