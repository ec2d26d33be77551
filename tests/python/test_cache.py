"""The node-local cache from Python (ufspack.Cache, Pack(cache=...),
MyImageFolder(cache=...)): byte-exact round trips, many processes sharing
one directory, the limit under concurrent writers, rebuilt packs, an
unreachable source, the UFSPACK_CACHE variable, DataLoader workers, a RAM
tier, damaged entries and kill -9 while filling."""

import hashlib
import multiprocessing
import os
import pickle
import random
import signal
import subprocess
import sys

import numpy as np
import pytest

import ufspack
from conftest import write
from ufspack import cache as cache_module

FORK = multiprocessing.get_context("fork")


def tree_bytes(root):
    """{record name: file bytes} of an ImageFolder tree."""
    out = {}
    for c in sorted(os.listdir(root)):
        for dirpath, _, files in os.walk(os.path.join(root, c)):
            for f in files:
                path = os.path.join(dirpath, f)
                with open(path, "rb") as fh:
                    out[os.path.relpath(path, root)] = fh.read()
    return out


def expected_list(pack_path, files):
    """The bytes of every record of the pack, in record order, from the files."""
    with ufspack.Pack(pack_path, cache=False) as p:
        return [files[p.name(i)] for i in range(len(p))]


def make_blob_tree(root, classes=3, per_class=60, size=16384, seed=0):
    """Records of `size` bytes: 4 KiB of random bytes repeated (zstd
    compresses them), different for every record and seed."""
    rng = np.random.default_rng(seed)
    for c in range(classes):
        for i in range(per_class):
            block = rng.integers(0, 256, size=4096, dtype=np.uint8).tobytes()
            write(os.path.join(root, f"c{c}", f"r{i:03d}.bin"), (block * (size // 4096 + 1))[:size])
    return root


@pytest.fixture(scope="module")
def blobs(tmp_path_factory):
    """(pack path, [bytes per record]): 180 records of 16 KiB, about 2.9 MB."""
    base = tmp_path_factory.mktemp("blobs")
    root = make_blob_tree(str(base / "tree"))
    pack = str(base / "pack")
    ufspack.build(root, pack, all_files=True, progress=False)
    return pack, expected_list(pack, tree_bytes(root))


def tier(cache):
    (t,) = cache.stats()
    return t


def disk_usage(path):
    """Bytes allocated under `path`, itself included: sum of st_blocks * 512."""
    total = os.lstat(path).st_blocks * 512
    for dirpath, dirs, files in os.walk(path):
        for n in dirs + files:
            total += os.lstat(os.path.join(dirpath, n)).st_blocks * 512
    return total


def read_all_exact(pack_path, cache, want, seed):
    """Child process body: reads every record through `cache` in a shuffled
    order; exits 1 on a wrong byte."""
    p = ufspack.Pack(pack_path, cache=cache)
    order = list(range(len(p)))
    random.Random(seed).shuffle(order)
    bad = [i for i in order if p[i] != want[i]]
    os._exit(1 if bad else 0)


def run_children(target, args_list):
    procs = [FORK.Process(target=target, args=args) for args in args_list]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    return [p.exitcode for p in procs]


# --- round trip -------------------------------------------------------------------


@pytest.mark.parametrize("compress", [None, "zstd"])
def test_round_trip_first_read_fills_second_hits(tmp_path, compress):
    root = make_blob_tree(str(tmp_path / "tree"), classes=2, per_class=10, seed=1)
    pack = str(tmp_path / "pack")
    ufspack.build(root, pack, all_files=True, compress=compress, progress=False)
    want = expected_list(pack, tree_bytes(root))
    if compress:
        assert ufspack.Pack(pack).record(0)["stored_size"] < ufspack.Pack(pack).record(0)["size"]
    cache = ufspack.Cache(tmp_path / "cache")
    p = ufspack.Pack(pack, cache=cache)
    assert p.cache is cache and not p.offline
    assert [p[i] for i in range(len(p))] == want
    t = tier(cache)
    assert t["dir"] == str(tmp_path / "cache")
    assert (t["inserts"], t["entries"], t["hits"], t["misses"], t["tables"]) == (20, 20, 0, 20, 1)
    # A new reader (another Pack) hits for every record; every byte exact,
    # through each read method.
    q = ufspack.Pack(pack, cache=str(tmp_path / "cache"))
    assert [q[i] for i in range(len(q))] == want
    assert q.read_many(range(len(q)), threads=3) == want
    buf = bytearray(len(want[5]))
    assert q.read_into(5, buf) == len(want[5]) and bytes(buf) == want[5]
    t = tier(cache)
    assert (t["inserts"], t["entries"], t["hits"], t["misses"]) == (20, 20, 41, 20)
    assert ufspack.Cache.stat(tmp_path / "cache")["hits"] == 41
    assert t["charged_bytes"] <= t["limit"] and t["disk_bytes"] <= t["charged_bytes"]
    assert f"cache={str(tmp_path / 'cache')!r}" in repr(q)


def test_cache_object_parameters_pickle_and_repr(tmp_path, small_pack):
    c = ufspack.Cache(str(tmp_path / "c"), limit=10 << 20)
    assert repr(c) == f"ufspack.Cache({str(tmp_path / 'c')!r}, limit={10 << 20})"
    assert tier(c)["limit"] == 10 << 20
    c2 = pickle.loads(pickle.dumps(c))
    assert c2 == c and c2.dir == c.dir and c2.limit == c.limit
    # A pickled Pack keeps its cache; the copy reads through it.
    p = pickle.loads(pickle.dumps(ufspack.Pack(small_pack, cache=c)))
    assert p.cache == c
    before = tier(c)["misses"]
    p[0]
    assert tier(c)["misses"] == before + 1
    with pytest.raises(TypeError):
        ufspack.Pack(small_pack, cache=True)
    with pytest.raises(ValueError):
        ufspack.Cache(tmp_path / "c", limit=-1)
    not_a_cache = tmp_path / "full"
    write(str(not_a_cache / "file.txt"), b"mine")
    with pytest.raises(OSError, match="not a ufspack cache"):
        ufspack.Cache(not_a_cache)
    with pytest.raises(FileNotFoundError):
        ufspack.Cache.stat(tmp_path / "nothing")


def test_clear_removes_unused_tables(tmp_path, small_pack):
    c = ufspack.Cache(tmp_path / "c")
    p = ufspack.Pack(small_pack, cache=c)
    p[0]
    assert ufspack.Cache.clear(c.dir) == 1  # in use: kept
    p.close()
    del p
    assert ufspack.Cache.clear(c.dir) == 0
    assert tier(c)["tables"] == 0


# --- many processes -------------------------------------------------------------------


def test_many_processes_fill_and_read_one_directory(tmp_path, blobs):
    pack, want = blobs
    cache = ufspack.Cache(tmp_path / "c")
    codes = run_children(read_all_exact, [(pack, cache, want, seed) for seed in range(4)])
    assert codes == [0, 0, 0, 0]
    t = ufspack.Cache.stat(cache.dir)
    assert t["entries"] == len(want) and t["tables"] == 1
    assert t["dropped"] == 0 and t["errors"] == 0
    # Everything is now served from the cache, byte for byte.
    before = tier(cache)["hits"]
    p = ufspack.Pack(pack, cache=cache)
    assert [p[i] for i in range(len(p))] == want
    assert tier(cache)["hits"] == before + len(want)


def test_limit_holds_under_concurrent_writers(tmp_path, blobs):
    pack, want = blobs
    limit = sum(len(b) for b in want) // 3
    cache = ufspack.Cache(tmp_path / "c", limit=limit)
    codes = run_children(read_all_exact, [(pack, cache, want, seed) for seed in range(4)])
    assert codes == [0, 0, 0, 0]  # reads that did not fit came from the pack
    t = ufspack.Cache.stat(cache.dir)
    assert t["limit"] == limit
    assert t["refused"] > 0
    assert 0 < t["entries"] < len(want)
    assert t["charged_bytes"] <= limit
    assert disk_usage(cache.dir) <= limit


# --- pack identity and an unreachable source ------------------------------------------


def test_rebuilt_pack_never_returns_old_bytes(tmp_path):
    old_root = make_blob_tree(str(tmp_path / "old"), classes=2, per_class=5, seed=10)
    new_root = make_blob_tree(str(tmp_path / "new"), classes=2, per_class=5, seed=11)
    pack = str(tmp_path / "pack")
    cache = ufspack.Cache(tmp_path / "c")
    ufspack.build(old_root, pack, all_files=True, progress=False)
    old = ufspack.Pack(pack, cache=cache)
    old_want = expected_list(pack, tree_bytes(old_root))
    assert [old[i] for i in range(len(old))] == old_want
    ufspack.build(new_root, pack, all_files=True, progress=False)  # same path, same names
    new_want = expected_list(pack, tree_bytes(new_root))
    assert all(a != b for a, b in zip(old_want, new_want))
    new = ufspack.Pack(pack, cache=cache)
    assert [new[i] for i in range(len(new))] == new_want
    assert [new[i] for i in range(len(new))] == new_want  # hits now
    assert tier(cache)["tables"] == 2
    assert [old[i] for i in range(len(old))] == old_want  # the open reader keeps its pair


def test_unreachable_source_serves_cached_records(tmp_path, small_tree, capfd):
    base = tmp_path / "nfs"
    pack = str(base / "pack")
    ufspack.build(small_tree, pack, progress=False)
    want = expected_list(pack, tree_bytes(small_tree))
    cache = ufspack.Cache(tmp_path / "c")
    with ufspack.Pack(pack, cache=cache) as p:
        for i in range(12):  # warm up half
            assert p[i] == want[i]
    os.rename(base, tmp_path / "moved")  # the file server went away
    capfd.readouterr()
    with pytest.raises(FileNotFoundError):
        ufspack.Pack(pack, cache=False)
    p = ufspack.Pack(pack, cache=cache)
    assert p.offline and len(p) == len(want)
    err = capfd.readouterr().err
    assert "unreachable" in err and os.path.join(pack, "index.ufs") in err
    assert [p[i] for i in range(12)] == want[:12]
    assert p.name(20) == ufspack.Pack(str(tmp_path / "moved" / "pack")).name(20)  # the index copy
    with pytest.raises(OSError, match=str(base)) as e:
        p[20]
    assert not isinstance(e.value, ufspack.CorruptPackError)
    with pytest.raises(OSError, match=str(base)):
        p.read_many([0, 20])
    # The dataset opens too and gives the cached samples.
    ds = ufspack.MyImageFolder(pack, output="bytes", cache=cache)
    assert ds[3][0] == want[3] and ds.classes == ["class0", "class1", "class2"]


# --- turning it on ----------------------------------------------------------------------


def test_env_var_turns_the_cache_on(tmp_path, small_pack, monkeypatch):
    d = str(tmp_path / "env")
    env = dict(os.environ, UFSPACK_CACHE=d)
    code = (
        "import sys, ufspack\n"
        "p = ufspack.Pack(sys.argv[1])\n"
        "data = [p[i] for i in range(len(p))]\n"
        "print(repr(p))\n"
        "print(repr(ufspack.MyImageFolder(sys.argv[1])))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, small_pack], env=env, capture_output=True, text=True,
                         check=True).stdout
    assert f"cache={d!r}" in out and f"Cache: {d}" in out
    t = ufspack.Cache.stat(d)
    assert t["entries"] == t["inserts"] == len(ufspack.Pack(small_pack, cache=False))
    monkeypatch.setenv("UFSPACK_CACHE", d)
    assert ufspack.Pack(small_pack).cache == ufspack.Cache(d)
    assert ufspack.Pack(small_pack, cache=False).cache is None
    assert ufspack.MyImageFolder(small_pack, cache=False).cache is None
    assert ufspack.MyImageFolder(small_pack).cache.dir == d
    other = ufspack.Cache(tmp_path / "other")
    assert ufspack.Pack(small_pack, cache=other).cache is other  # an explicit cache wins
    monkeypatch.setenv("UFSPACK_CACHE", "")
    assert ufspack.Pack(small_pack).cache is None


def test_dataloader_workers_give_the_same_samples(tmp_path, small_pack):
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader
    from torchvision import transforms

    tf = transforms.Compose([transforms.Resize((16, 16)), transforms.PILToTensor()])

    def epoch(ds):
        out = []
        for xs, ys in DataLoader(ds, batch_size=5, num_workers=2, multiprocessing_context="fork"):
            out.extend((int(y), hashlib.sha1(x.numpy().tobytes()).hexdigest()) for x, y in zip(xs, ys))
        return out

    want = epoch(ufspack.MyImageFolder(small_pack, tf, cache=False))
    cache = ufspack.Cache(tmp_path / "c")
    ds = ufspack.MyImageFolder(small_pack, tf, cache=cache)
    assert f"Cache: {cache.dir}" in repr(ds)
    assert epoch(ds) == want  # the workers fill the cache
    assert epoch(ds) == want  # and read from it
    t = tier(cache)
    assert t["entries"] == len(ds) and t["hits"] >= len(ds)
    # Spawned workers get the dataset by pickle: the cache travels as parameters.
    copy = pickle.loads(pickle.dumps(ds))
    assert copy.cache == cache
    assert torch.equal(copy[7][0], ds[7][0])


# --- RAM tier -------------------------------------------------------------------------------


def mount_tmpfs(path, size):
    os.makedirs(path, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", path], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip() or r.returncode}")


def umount(path):
    # This process's native caches keep files of the tier open.
    cache_module._natives.clear()
    import gc

    gc.collect()
    if subprocess.run(["umount", path]).returncode != 0:
        subprocess.run(["umount", "-l", path], check=True)


def test_small_ram_tier_is_reported_once_and_skipped(tmp_path, small_pack, capfd):
    ram = str(tmp_path / "shm")
    mount_tmpfs(ram, "64m")
    try:
        capfd.readouterr()
        cache = ufspack.Cache(tmp_path / "disk", ram_dir=ram)
        want = [ufspack.Pack(small_pack, cache=False)[i] for i in range(24)]
        for _ in range(2):
            p = ufspack.Pack(small_pack, cache=cache)
            assert [p[i] for i in range(len(p))] == want
            del p
        err = capfd.readouterr().err
        assert err.count(f"RAM tier {ram} not used") == 1, err
        (t,) = cache.stats()  # the disk tier only, doing the work
        assert t["dir"] == str(tmp_path / "disk")
        assert t["entries"] == 24 and t["hits"] == 24
    finally:
        del cache
        umount(ram)


def test_ram_tier_takes_entries_first(tmp_path, small_pack):
    ram = str(tmp_path / "shm")
    mount_tmpfs(ram, "256m")
    try:
        cache = ufspack.Cache(tmp_path / "disk", ram_dir=ram)
        want = [ufspack.Pack(small_pack, cache=False)[i] for i in range(24)]
        p = ufspack.Pack(small_pack, cache=cache)
        assert [p[i] for i in range(24)] == want
        assert [p[i] for i in range(24)] == want
        ram_tier, disk_tier = cache.stats()
        assert ram_tier["dir"] == ram and disk_tier["dir"] == str(tmp_path / "disk")
        assert ram_tier["entries"] == 24 and ram_tier["hits"] == 24
        assert disk_tier["entries"] == 0  # the disk tier holds the index copy only
        del p
    finally:
        del cache
        umount(ram)


# --- damage and crashes -------------------------------------------------------------------


def test_damaged_entries_are_dropped_never_served(tmp_path, blobs):
    pack, want = blobs
    cache = ufspack.Cache(tmp_path / "c")
    p = ufspack.Pack(pack, cache=cache)
    assert [p[i] for i in range(len(p))] == want
    del p
    # Flip one byte in the middle of every 10th entry of the log.
    (table,) = os.listdir(tmp_path / "c" / "ns")
    log = tmp_path / "c" / "ns" / table / "log"
    data = bytearray(log.read_bytes())
    step = len(data) // len(want)
    for k in range(0, len(want), 10):
        data[k * step + step // 2] ^= 0xFF
    log.write_bytes(bytes(data))
    p = ufspack.Pack(pack, cache=cache)
    assert [p[i] for i in range(len(p))] == want
    t = tier(cache)
    assert t["dropped"] == len(range(0, len(want), 10))
    assert t["entries"] == len(want)  # read again from the pack and re-cached


def fill_forever(pack_path, cache, seed, ready, progress):
    p = ufspack.Pack(pack_path, cache=cache)
    order = list(range(len(p)))
    random.Random(seed).shuffle(order)
    ready.set()
    while True:
        for i in order:
            p[i]
            progress.value += 1


@pytest.fixture(scope="module")
def big_records(tmp_path_factory):
    """(pack path, [bytes per record]): 64 records of 256 KiB, so that a
    kill often lands inside the write of an entry."""
    base = tmp_path_factory.mktemp("big")
    root = make_blob_tree(str(base / "tree"), classes=2, per_class=32, size=256 << 10, seed=5)
    pack = str(base / "pack")
    ufspack.build(root, pack, all_files=True, progress=False)
    return pack, expected_list(pack, tree_bytes(root))


def test_kill_9_while_filling_leaves_no_wrong_bytes(tmp_path, big_records):
    pack, want = big_records
    cache = ufspack.Cache(tmp_path / "c")
    rng = random.Random(1234)
    progress = FORK.Value("q", 0, lock=False)
    for seed in range(5):
        ready = FORK.Event()
        progress.value = 0
        child = FORK.Process(target=fill_forever, args=(pack, cache, seed, ready, progress))
        child.start()
        assert ready.wait(30)
        # A random moment of the fill: after a random number of records,
        # then a random fraction of a record's time.
        target = rng.randrange(0, len(want) // 3)
        while progress.value < target and child.is_alive():
            pass
        for _ in range(rng.randrange(0, 20000)):
            pass
        os.kill(child.pid, signal.SIGKILL)
        child.join()
        assert child.exitcode == -signal.SIGKILL
    # A new process reads everything, byte for byte (filling what is missing).
    assert run_children(read_all_exact, [(pack, cache, want, 99)]) == [0]
    t = ufspack.Cache.stat(cache.dir)
    assert t["entries"] == len(want) and t["errors"] == 0
    # Every entry is now served from the cache, checksummed, and right.
    before = tier(cache)
    p = ufspack.Pack(pack, cache=cache)
    assert [p[i] for i in range(len(p))] == want
    after = tier(cache)
    assert after["hits"] - before["hits"] == len(want)
    assert after["misses"] == before["misses"] and after["dropped"] == before["dropped"]


# --- A hostile or damaged cache directory (docs/cache.md, "Trust") ----------


def snapshot(root):
    """{path: kind and bytes} of everything below root, links not followed."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(dirpath, n)
            if os.path.islink(p):
                out[p] = "link:" + os.readlink(p)
            elif os.path.isdir(p):
                out[p] = "dir"
            else:
                with open(p, "rb") as f:
                    out[p] = f.read()
    return out


def warmed_cache(tmp_path, pack):
    d = str(tmp_path / "cache")
    with ufspack.Pack(pack, cache=d) as p:
        for i in range(len(p)):
            p.read(i)
    # This process holds the directory open (through descriptors, which a
    # plant made afterwards cannot redirect): open it anew, as a new job does.
    cache_module._natives.clear()
    return d


def outside(tmp_path):
    out = tmp_path / "out"
    write(str(out / "a.txt"), b"hello")
    write(str(out / "sub" / "b.txt"), b"world")
    return str(out)


def table_of(cache_dir):
    (name,) = os.listdir(os.path.join(cache_dir, "ns"))
    return os.path.join(cache_dir, "ns", name)


def replace_with_link(path, target):
    if os.path.isdir(path) and not os.path.islink(path):
        import shutil

        shutil.rmtree(path)
    else:
        os.unlink(path)
    os.symlink(target, path)


@pytest.mark.parametrize(
    "plant",
    ["tmp", "ns", "sources", "locks", "ufspack-cache", "log", "table"],
)
def test_planted_links_never_reach_outside(tmp_path, small_pack, small_tree, capfd, plant):
    """A link planted in a cache directory is never followed: Pack and
    MyImageFolder read the right bytes (from the source when the cache cannot
    be used, with one warning), clear deletes nothing outside, and the
    outside directory is unchanged."""
    d = warmed_cache(tmp_path, small_pack)
    out = outside(tmp_path)
    path = {"log": os.path.join(table_of(d), "log"), "table": table_of(d)}.get(plant, os.path.join(d, plant))
    replace_with_link(path, os.path.join(out, "a.txt") if plant in ("ufspack-cache", "log") else out)
    before = snapshot(out)
    want = expected_list(small_pack, tree_bytes(small_tree))
    with ufspack.Pack(small_pack, cache=d) as p:
        assert [p.read(i) for i in range(len(p))] == want
    ds = ufspack.MyImageFolder(small_pack, cache=d, output="bytes")
    assert [ds[i][0] for i in range(len(ds))] == want
    assert ufspack.Pack(small_pack, cache=d).read(0) == want[0]
    try:
        ufspack.Cache.clear(d)
    except OSError as e:
        assert d in str(e)
    assert snapshot(out) == before
    err = capfd.readouterr().err
    if plant in ("tmp", "ns", "sources", "locks", "ufspack-cache"):
        # The cache could not be opened: said once, naming the path.
        assert err.count(f"ufspack: warning: cache {d} not used") == 1, err
        assert os.path.join(d, plant) in err


FIFO_CHILD = """
import sys, ufspack
pack, cache = sys.argv[1], sys.argv[2]
p = ufspack.Pack(pack, cache=cache)
print(sum(len(p.read(i)) for i in range(len(p))))
try:
    ufspack.Cache.stat(cache)
    ufspack.Cache.clear(cache)
except OSError as e:
    print("error:", e)
"""


@pytest.mark.parametrize("where", ["ufspack-cache", "slots", "log", "index.ufs", "source"])
def test_fifos_in_the_cache_never_block(tmp_path, small_pack, where):
    """A FIFO where the cache expects a file is refused without blocking
    (opened O_NONBLOCK, checked with fstat): reads, stat and clear return."""
    d = warmed_cache(tmp_path, small_pack)
    if where == "ufspack-cache":
        path = os.path.join(d, where)
    elif where == "source":
        (name,) = os.listdir(os.path.join(d, "sources"))
        path = os.path.join(d, "sources", name)
    else:
        path = os.path.join(table_of(d), where)
    os.unlink(path)
    os.mkfifo(path)
    total = sum(len(b) for b in expected_list(small_pack, {n: b for n, b in _names_bytes(small_pack)}))
    r = subprocess.run([sys.executable, "-c", FIFO_CHILD, small_pack, d], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == str(total)
    if where == "ufspack-cache":
        assert f"{d}/ufspack-cache: a FIFO, expected a regular file" in r.stdout


def _names_bytes(pack):
    with ufspack.Pack(pack, cache=False) as p:
        return [(p.name(i), p.read(i)) for i in range(len(p))]


def test_an_unusable_cache_header_falls_back_and_stat_raises_oserror(tmp_path, small_pack, capfd):
    """ufspack-cache a directory: Pack(cache=) reads from the source with one
    warning; Cache.stat raises an OSError naming the file (never the
    RuntimeError pybind11 makes of a mismatched exception type)."""
    d = tmp_path / "cache"
    os.makedirs(d / "ufspack-cache")
    want = [b for _, b in _names_bytes(small_pack)]
    with ufspack.Pack(small_pack, cache=str(d)) as p:
        assert [p.read(i) for i in range(len(p))] == want
    assert "ufspack: warning: cache" in capfd.readouterr().err
    with pytest.raises(OSError) as e:
        ufspack.Cache.stat(d)
    assert f"{d}/ufspack-cache: a directory, expected a regular file" in str(e.value)
    with pytest.raises(OSError) as e:
        ufspack.Cache(d)
    assert f"{d}/ufspack-cache" in str(e.value)


def test_errno_errors_raise_their_oserror_subclass(tmp_path, small_tree):
    """An IOError carrying an errno is raised as OSError(errno, msg)'s own
    subclass: here EISDIR publishing over a directory is IsADirectoryError."""
    out = tmp_path / "out"
    os.makedirs(out / "index.ufs" / "x")
    with pytest.raises(IsADirectoryError) as e:
        ufspack.build(small_tree, str(out), progress=False)
    assert e.value.errno == 21 and f"{out}/index.ufs" in str(e.value)
