"""ufspack.BlockSampler and block reads: every sample once per epoch, equal
disjoint rank shares, one fetch per block (also with DataLoader workers),
exact resume (also onto another number of ranks), clear errors."""

import copy
import os
import re
import warnings

import numpy as np
import pytest

import ufspack
from conftest import encode, noise_image, write

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402

BLOCK = 64 << 10


@pytest.fixture(scope="module")
def raw_tree(tmp_path_factory):
    """500 files of 1-5 KB in 5 classes (about 30 blocks of 64 KiB)."""
    root = str(tmp_path_factory.mktemp("blocks") / "tree")
    rng = np.random.default_rng(3)
    for i in range(500):
        write(os.path.join(root, f"c{i % 5}", f"f{i:04d}.jpg"),
              rng.integers(0, 256, 1000 + (i * 7919) % 4000, dtype=np.uint8).tobytes())
    return root


@pytest.fixture(scope="module")
def raw_pack(raw_tree, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("blockpack") / "pack")
    ufspack.build(raw_tree, out, layout="shuffled:1", progress=False, all_files=True)
    return out


@pytest.fixture(scope="module")
def image_pack(tmp_path_factory):
    """240 small JPEGs in 4 classes, shuffled layout (about 12 blocks)."""
    root = str(tmp_path_factory.mktemp("imgs") / "tree")
    for i in range(240):
        write(os.path.join(root, f"class{i % 4}", f"img{i:03d}.jpg"),
              encode(noise_image(48, 40, i), "JPEG", quality=95))
    out = str(tmp_path_factory.mktemp("imgpack") / "pack")
    ufspack.build(root, out, layout="shuffled", progress=False)
    return out


def blocks_of(pack):
    first, _ = pack._handle.get().block_members(BLOCK)
    return int(np.count_nonzero(np.diff(first)))


def data_bytes(path):
    return os.path.getsize(os.path.join(path, "data.ufs")) - 64


def test_every_sample_once_and_ranks_disjoint_and_equal(raw_pack):
    pack = ufspack.Pack(raw_pack)
    n = len(pack)
    s = ufspack.BlockSampler(pack, block_bytes=BLOCK, window=4, seed=5)
    first = list(s)
    assert sorted(first) == list(range(n)) and len(s) == n
    assert list(s) == first  # same epoch, same order
    s.set_epoch(1)
    assert sorted(list(s)) == list(range(n)) and list(s) != first
    for drop_last in (False, True):
        shares = [list(ufspack.BlockSampler(pack, block_bytes=BLOCK, num_replicas=3, rank=r,
                                            drop_last=drop_last)) for r in range(3)]
        assert len({len(x) for x in shares}) == 1
        flat = [i for x in shares for i in x]
        if drop_last:
            assert len(flat) == n // 3 * 3 and len(set(flat)) == len(flat)
        else:
            assert set(flat) == set(range(n)) and len(flat) == -(-n // 3) * 3


def test_unshuffled_reads_the_file_in_order(raw_pack):
    pack = ufspack.Pack(raw_pack)
    order = list(ufspack.BlockSampler(pack, block_bytes=BLOCK, shuffle=False))
    offsets = [pack.record(i)["offset"] // BLOCK for i in order]
    assert offsets == sorted(offsets)


def test_one_fetch_per_block_in_one_process(raw_pack):
    pack = ufspack.Pack(raw_pack)
    ref = ufspack.Pack(raw_pack)
    s = ufspack.BlockSampler(pack, block_bytes=BLOCK, window=3)
    for i in s:
        assert pack[i] == ref[i]
    st = pack._handle.get().block_stats()
    assert st["block_fetches"] == blocks_of(pack)
    assert st["bytes_fetched"] == data_bytes(raw_pack)
    assert st["reads_from_blocks"] == len(pack)


class Probe(ufspack.MyImageFolder):
    """Returns (target, pid, bytes this process fetched so far)."""

    def __getitem__(self, i):
        _, target = super().__getitem__(i)
        return target, os.getpid(), self._pack._handle.get().block_stats()["bytes_fetched"], i

    def __getitems__(self, indices):
        out = super().__getitems__(indices)
        got = self._pack._handle.get().block_stats()["bytes_fetched"]
        return [(t, os.getpid(), got, i) for (_, t), i in zip(out, indices)]


@pytest.mark.parametrize("workers", [0, 2])
def test_dataloader_fetches_each_block_once(image_pack, workers):
    ds = Probe(image_pack)
    ref = ufspack.MyImageFolder(image_pack)
    s = ufspack.BlockSampler(ds, block_bytes=BLOCK, window=2, batch_size=8, num_workers=workers)
    seen, fetched = [], {}
    for targets, pids, got, idx in DataLoader(ds, batch_size=8, sampler=s, num_workers=workers):
        seen += idx.tolist()
        assert targets.tolist() == [ref.targets[i] for i in idx.tolist()]
        for p, b in zip(pids.tolist(), got.tolist()):
            fetched[p] = max(fetched.get(p, 0), b)
    assert sorted(seen) == list(range(len(ds)))
    total = sum(fetched.values())
    assert total >= data_bytes(image_pack)
    # No block twice (a lane boundary may split one block between workers).
    assert total <= 1.1 * data_bytes(image_pack) + (workers > 1) * 2 * BLOCK, fetched


def test_without_num_workers_each_worker_says_it_fetches_every_block(image_pack):
    ds = Probe(image_pack)
    s = ufspack.BlockSampler(ds, block_bytes=BLOCK, window=2)
    with warnings.catch_warnings(record=True):
        seen = [i for *_, idx in DataLoader(ds, batch_size=8, sampler=s, num_workers=2)
                for i in idx.tolist()]
    assert sorted(seen) == list(range(len(ds)))


def consume(sampler, k):
    it = iter(sampler)
    return [next(it) for _ in range(k)]


@pytest.mark.parametrize("old,new", [(1, 1), (3, 3), (3, 2), (2, 5)])
def test_resume_yields_exactly_the_rest(raw_pack, old, new):
    pack = ufspack.Pack(raw_pack)
    n = len(pack)
    kw = dict(block_bytes=BLOCK, window=3, seed=11)
    done, states = [], []
    for r in range(old):
        s = ufspack.BlockSampler(pack, num_replicas=old, rank=r, **kw)
        s.set_epoch(4)
        done += consume(s, 37)
        states.append(s.state_dict())
    rest = []
    for r in range(new):
        s = ufspack.BlockSampler(pack, num_replicas=new, rank=r, **kw)
        s.load_state_dict(states[0])
        assert s.epoch == 4
        part = list(s)
        assert len(part) == len(s)
        rest.append(part)
    assert len({len(x) for x in rest}) == 1
    flat = [i for x in rest for i in x]
    padding = len(flat) - (n - len(set(done)))
    assert 0 <= padding < new
    assert set(done) | set(flat) == set(range(n))
    assert not set(done) & set(flat[: len(flat) - padding])
    # After the resumed epoch, the next is whole again.
    s.set_epoch(5)
    assert len(list(s)) == -(-n // new)


def test_resume_twice_and_with_consumed(raw_pack):
    pack = ufspack.Pack(raw_pack)
    n = len(pack)
    s = ufspack.BlockSampler(pack, block_bytes=BLOCK)
    it = iter(s)
    first = [next(it) for _ in range(50)]  # yielded 50, consumed 20
    state = s.state_dict(consumed=20)
    s2 = ufspack.BlockSampler(pack, block_bytes=BLOCK)
    s2.load_state_dict(state)
    it2 = iter(s2)
    second = [next(it2) for _ in range(100)]
    s3 = ufspack.BlockSampler(pack, block_bytes=BLOCK)
    s3.load_state_dict(s2.state_dict())
    third = list(s3)
    all_ = first[:20] + second + third
    assert sorted(all_) == list(range(n))
    with pytest.raises(ValueError, match="consumed"):
        s.state_dict(consumed=-1)


def test_bad_arguments_and_foreign_states(raw_pack, image_pack, small_pack):
    pack = ufspack.Pack(raw_pack)
    with pytest.raises(ValueError, match="block_bytes"):
        ufspack.BlockSampler(pack, block_bytes=4096)
    with pytest.raises(ValueError, match="window"):
        ufspack.BlockSampler(pack, window=0)
    with pytest.raises(ValueError, match="rank"):
        ufspack.BlockSampler(pack, num_replicas=2, rank=2)
    with pytest.raises(TypeError, match="list"):
        ufspack.BlockSampler([1, 2, 3])
    state = ufspack.BlockSampler(pack, block_bytes=BLOCK).state_dict()
    with pytest.raises(ValueError, match="block_bytes=65536, this sampler has block_bytes=131072"):
        ufspack.BlockSampler(pack, block_bytes=2 * BLOCK).load_state_dict(state)
    with pytest.raises(ValueError, match="seed"):
        ufspack.BlockSampler(pack, block_bytes=BLOCK, seed=1).load_state_dict(state)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        other = ufspack.BlockSampler(ufspack.Pack(small_pack), block_bytes=BLOCK)
    with pytest.raises(ValueError, match="pack"):
        other.load_state_dict(state)
    with pytest.raises(ValueError, match="version"):
        other.load_state_dict({"nope": 1})


def test_sorted_layout_warns_once(small_pack, image_pack):
    with pytest.warns(UserWarning, match="--layout shuffled"):
        ufspack.BlockSampler(ufspack.MyImageFolder(small_pack))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ufspack.BlockSampler(ufspack.MyImageFolder(image_pack))


def test_selection_and_outputs(image_pack):
    """A dataset whose samples are a selection of the records, and the
    other outputs: the same samples as without block reads."""
    ds = ufspack.MyImageFolder(image_pack, is_valid_file=lambda p: not p.endswith("7.jpg"),
                               output="numpy")
    ref = ufspack.MyImageFolder(image_pack, is_valid_file=lambda p: not p.endswith("7.jpg"),
                                output="numpy")
    s = ufspack.BlockSampler(ds, block_bytes=BLOCK)
    order = list(s)
    assert sorted(order) == list(range(len(ds)))
    for i in order[:40]:
        a, b = ds[i], ref[i]
        assert a[1] == b[1] and np.array_equal(a[0], b[0])
    batch = ds.__getitems__(order[40:60])
    assert [t for _, t in batch] == [ref[i][1] for i in order[40:60]]


def _order(first, members, cfg, epoch, replicas, rank, resume=None):
    from ufspack import block_schedule as sch
    o = sch.epoch_order(first, members, cfg, epoch, replicas, rank, resume)
    out = np.concatenate(list(o.samples()) or [np.empty(0, dtype=np.int64)])
    assert len(out) == len(o)
    return out, o


@pytest.mark.parametrize("seed", range(12))
def test_schedule_resume_chains_are_exact(seed):
    """The pure schedule on random block structures: every rank's share
    equal, lanes batch by batch, and chains of resumes onto other replica,
    lane and batch counts yielding exactly what no rank had consumed."""
    from ufspack import block_schedule as sch
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    blocks = int(rng.integers(1, 40))
    block_of = np.sort(rng.integers(0, blocks, n))
    perm = rng.permutation(n)  # a shuffled layout: block b holds arbitrary samples
    members = perm[np.argsort(block_of, kind="stable")]
    first = np.concatenate(([0], np.cumsum(np.bincount(block_of, minlength=blocks))))
    which = np.empty(n, dtype=np.int64)
    which[members] = np.repeat(np.arange(blocks), np.diff(first))
    seen = np.zeros(n, dtype=np.int64)
    resume = None
    drop = bool(rng.integers(0, 2))
    window = int(rng.integers(1, 6))  # as drop_last and seed: the same on resume
    for _stage in range(int(rng.integers(1, 4))):
        replicas, lanes = int(rng.integers(1, 5)), int(rng.integers(1, 4))
        bs = int(rng.integers(1, 9)) if lanes > 1 else 1
        cfg = sch.Config(block_bytes=1 << 16, window=window, shuffle=True, seed=seed,
                         drop_last=drop, batch_size=bs, lanes=lanes)
        orders = [_order(first, members, cfg, 3, replicas, r, resume) for r in range(replicas)]
        assert len({len(x) for x, _ in orders}) == 1
        per = len(orders[0][0])
        for x, o in orders:  # batch j of the order is lane j % lanes's next
            at = [0] * lanes
            for j in range(-(-per // bs)):
                lane = o.lanes[j % lanes]
                got = x[j * bs:(j + 1) * bs]
                want = o.blocks.samples(lane.take(at[j % lanes], at[j % lanes] + len(got)))
                assert np.array_equal(got, want)
                at[j % lanes] += len(got)
            for lane in o.lanes:  # a window's samples come from at most `window` blocks
                for w in range(lane.windows):
                    assert len(np.unique(which[o.blocks.samples(lane.window(w))])) <= cfg.window
        left = n - int((seen > 0).sum())
        everything = np.concatenate([x for x, _ in orders])
        if resume is None and drop:
            assert len(everything) == n // replicas * replicas
            assert len(set(everything.tolist())) == len(everything)
            seen[:] = 0
            seen[np.setdiff1d(np.arange(n), everything)] = 1  # dropped: as if consumed
            left = len(everything)
        else:
            assert set(everything.tolist()) | set(np.flatnonzero(seen).tolist()) == set(range(n))
            assert not (seen[everything] > 0).any() or len(everything) - left < replicas
            assert 0 <= len(everything) - left < replicas
        y = int(rng.integers(0, per + 1))
        for x, _ in orders:
            seen[x[:y]] += 1
        resume = sch.Resume(3, replicas, y, lanes, bs, resume)


class PlanProbe(ufspack.Pack):
    """Returns how many block tables this process made itself."""

    def __getitem__(self, i):
        from ufspack import block_reads
        super().__getitem__(i)
        return block_reads._plan_pids.count(os.getpid())


def test_forked_workers_share_the_block_table(raw_pack, monkeypatch):
    """The sampler makes the block table before the DataLoader forks its
    workers, which then use it instead of making their own."""
    from ufspack import block_reads
    made = block_reads.Plan.__init__

    def counting(self, *a, **kw):
        block_reads._plan_pids.append(os.getpid())
        made(self, *a, **kw)

    monkeypatch.setattr(block_reads.Plan, "__init__", counting)
    monkeypatch.setattr(block_reads, "_plan_pids", [], raising=False)
    ds = PlanProbe(raw_pack)
    s = ufspack.BlockSampler(ds, block_bytes=BLOCK, batch_size=10, num_workers=2)
    import multiprocessing
    made_by_workers = set()
    for batch in DataLoader(ds, batch_size=10, sampler=s, num_workers=2,
                            multiprocessing_context=multiprocessing.get_context("fork")):
        made_by_workers |= set(batch.tolist())
    assert made_by_workers == {0}
    assert block_reads._plan_pids == [os.getpid()]  # once, here


# --- checked arguments and states (issue 41, point 7) ---------------------

from ufspack.block_sampler import MAX_REPLICAS, MAX_STAGES, MAX_WORKERS  # noqa: E402


def raises_naming(exc, field):
    """pytest.raises(exc) whose message starts with BlockSampler and names
    ``field`` literally."""
    return pytest.raises(exc, match=r"^BlockSampler[^\n]*" + re.escape(field))


ARGUMENT_CASES = [
    (dict(seed="abc"), TypeError, "seed"),
    (dict(seed=1.5), TypeError, "seed"),
    (dict(seed=True), TypeError, "seed"),
    (dict(seed=1 << 64), ValueError, "seed"),
    (dict(block_bytes=float(BLOCK)), TypeError, "block_bytes"),
    (dict(window=2.0), TypeError, "window"),
    (dict(window=True), TypeError, "window"),
    (dict(prefetch="1"), TypeError, "prefetch"),
    (dict(window=1 << 40, prefetch=1 << 20), ValueError, "window=1099511627776 and prefetch"),
    (dict(shuffle="no"), TypeError, "shuffle"),
    (dict(shuffle=1), TypeError, "shuffle"),
    (dict(drop_last=None), TypeError, "drop_last"),
    (dict(batch_size="8", num_workers=2), TypeError, "batch_size"),
    (dict(batch_size=8.0, num_workers=2), TypeError, "batch_size"),
    (dict(batch_size=8, num_workers=2.5), TypeError, "num_workers"),
    (dict(batch_size=8, num_workers=MAX_WORKERS + 1), ValueError, "num_workers"),
    (dict(num_replicas=2.0, rank=0), TypeError, "num_replicas"),
    (dict(num_replicas=2, rank="1"), TypeError, "rank"),
    (dict(num_replicas=2, rank=True), TypeError, "rank"),
    (dict(num_replicas=MAX_REPLICAS + 1, rank=0), ValueError, "num_replicas"),
]


@pytest.mark.parametrize("kwargs,exc,field", ARGUMENT_CASES, ids=[
    ",".join(f"{k}={v!r}" for k, v in c[0].items()) for c in ARGUMENT_CASES])
def test_constructor_arguments_are_checked_not_converted(raw_pack, kwargs, exc, field):
    with raises_naming(exc, field):
        ufspack.BlockSampler(ufspack.Pack(raw_pack), **kwargs)


def test_numpy_integers_are_counts(raw_pack):
    pack = ufspack.Pack(raw_pack)
    a = ufspack.BlockSampler(pack, block_bytes=np.int64(BLOCK), window=np.int32(3),
                             seed=np.uint64(7), num_replicas=np.int64(2), rank=np.int64(1))
    b = ufspack.BlockSampler(pack, block_bytes=BLOCK, window=3, seed=7, num_replicas=2, rank=1)
    a.set_epoch(np.int64(2))
    b.set_epoch(2)
    assert list(a) == list(b)
    assert a.state_dict(consumed=np.int64(5)) == b.state_dict(consumed=5)
    assert type(a.state_dict()["config"]["seed"]) is int  # plain ints: the state is JSON


def test_set_epoch_and_consumed_are_checked(raw_pack):
    s = ufspack.BlockSampler(ufspack.Pack(raw_pack), block_bytes=BLOCK)
    consume(s, 10)
    for bad in (2.9, "3", True):
        with raises_naming(TypeError, "consumed"):
            s.state_dict(consumed=bad)
    with raises_naming(ValueError, "consumed"):
        s.state_dict(consumed=len(s) + 1)
    for bad, exc in (("3", TypeError), (2.5, TypeError), (-1, ValueError), (1 << 63, ValueError)):
        with raises_naming(exc, "epoch"):
            s.set_epoch(bad)
    assert s.epoch == 0


def genuine_state(pack):
    """A state of epoch 4 with 37 samples consumed."""
    s = ufspack.BlockSampler(pack, block_bytes=BLOCK, window=3, seed=11)
    s.set_epoch(4)
    consume(s, 37)
    return s.state_dict()


class _Drop:
    def __repr__(self):
        return "DROP"


DROP = _Drop()  # a STATE_CASES value: delete the key
STAGE = [4, 1, 37, 1, 1]
STATE_CASES = [  # (where, value: DROP deletes it, exception, what the message names)
    (("config",), [["block_bytes", BLOCK]], TypeError, "state['config'] must be a dict"),
    (("config", "window"), DROP, ValueError, "state['config'] has no 'window'"),
    (("config", "lanes"), 2, ValueError, "state['config'] has unexpected key(s) 'lanes'"),
    (("config", "shuffle"), 1, TypeError, "state['config']['shuffle']"),
    (("config", "seed"), 11.0, TypeError, "state['config']['seed']"),
    (("epoch",), "4", TypeError, "state['epoch']"),
    (("epoch",), 4.0, TypeError, "state['epoch']"),
    (("epoch",), -1, ValueError, "state['epoch']"),
    (("epoch",), 5, ValueError, "state['stages'][0][0] (epoch)"),
    (("stages",), "4,1,37,1,1", TypeError, "state['stages']"),
    (("stages",), [], ValueError, "state['stages']"),
    (("stages",), [STAGE] * (MAX_STAGES + 1), ValueError, "state['stages']"),
    (("stages",), [4, 1, 37, 1, 1], TypeError, "state['stages'][0] must be a list"),
    (("stages",), [[4, 1, 37]], ValueError, "state['stages'][0]"),
    (("stages",), [STAGE + [0]], ValueError, "state['stages'][0]"),
    (("stages",), [STAGE, [3, 1, 10, 1, 1]], ValueError, "state['stages'][1][0] (epoch)"),
    (("stages",), [[4, 1, 2.9, 1, 1]], TypeError, "state['stages'][0][2] (yielded)"),
    (("stages",), [[4, 1, "37", 1, 1]], TypeError, "state['stages'][0][2] (yielded)"),
    (("stages",), [[4, 1, -1, 1, 1]], ValueError, "state['stages'][0][2] (yielded)"),
    (("stages",), [[4, 1, 501, 1, 1]], ValueError, "state['stages'][0][2] (yielded)"),
    (("stages",), [[4, True, 37, 1, 1]], TypeError, "state['stages'][0][1] (replicas)"),
    (("stages",), [[4, 0, 37, 1, 1]], ValueError, "state['stages'][0][1] (replicas)"),
    (("stages",), [[4, MAX_REPLICAS + 1, 37, 1, 1]], ValueError,
     "state['stages'][0][1] (replicas)"),
    (("stages",), [[4, 1, 37, 0, 1]], ValueError, "state['stages'][0][3] (lanes)"),
    (("stages",), [[4, 1, 37, MAX_WORKERS + 1, 8]], ValueError, "state['stages'][0][3] (lanes)"),
    (("stages",), [[4, 1, 37, 2, 0]], ValueError, "state['stages'][0][4] (batch_size)"),
    (("version",), 2.0, TypeError, "state['version']"),
    (("version",), "2", TypeError, "state['version']"),
    (("version",), 1, ValueError, "state['version'] is 1"),
    (("stages",), DROP, ValueError, "state has no 'stages'"),
    (("extra",), 0, ValueError, "state has unexpected key(s) 'extra'"),
    (("pack_id",), 123, TypeError, "state['pack_id']"),
    (("samples",), 500.0, TypeError, "state['samples']"),
    (("samples",), "500", TypeError, "state['samples']"),
]


@pytest.mark.parametrize("where,value,exc,field", STATE_CASES,
                         ids=[f"{'.'.join(c[0])}={c[1]!r:.20}" for c in STATE_CASES])
def test_tampered_state_fields_are_named(raw_pack, where, value, exc, field):
    pack = ufspack.Pack(raw_pack)
    state = copy.deepcopy(genuine_state(pack))
    parent = state
    for key in where[:-1]:
        parent = parent[key]
    if value is DROP:
        del parent[where[-1]]
    else:
        parent[where[-1]] = value
    s = ufspack.BlockSampler(pack, block_bytes=BLOCK, window=3, seed=11)
    with raises_naming(exc, field):
        s.load_state_dict(state)
    assert s.epoch == 0 and len(s) == len(pack)  # nothing of it was applied


def test_state_of_another_type_and_numpy_fields(raw_pack):
    pack = ufspack.Pack(raw_pack)
    s = ufspack.BlockSampler(pack, block_bytes=BLOCK, window=3, seed=11)
    state = genuine_state(pack)
    for bad in ([state], "state", None):
        with raises_naming(TypeError, "state must be a dict"):
            s.load_state_dict(bad)
    # numpy integers (a state that went through numpy) resume the same.
    np_state = dict(state, epoch=np.int64(4), stages=[[np.int64(v) for v in state["stages"][0]]])
    s.load_state_dict(np_state)
    t = ufspack.BlockSampler(pack, block_bytes=BLOCK, window=3, seed=11)
    t.load_state_dict(state)
    assert list(s) == list(t) and len(s) == len(pack) - 37


def test_state_taken_before_an_epoch_is_iterated(raw_pack):
    """After set_epoch, and after load_state_dict, nothing of the epoch is
    yielded yet: a state taken then resumes all of it (all of the rest)."""
    pack = ufspack.Pack(raw_pack)
    n = len(pack)
    s = ufspack.BlockSampler(pack, block_bytes=BLOCK)
    list(s)
    s.set_epoch(1)
    fresh = ufspack.BlockSampler(pack, block_bytes=BLOCK)
    fresh.load_state_dict(s.state_dict())
    assert fresh.epoch == 1 and sorted(fresh) == list(range(n))
    first = consume(s, 100)
    loaded = ufspack.BlockSampler(pack, block_bytes=BLOCK)
    loaded.load_state_dict(s.state_dict())
    again = ufspack.BlockSampler(pack, block_bytes=BLOCK)
    again.load_state_dict(loaded.state_dict())  # taken before `loaded` yielded anything
    rest = list(again)
    assert sorted(first + rest) == list(range(n))


def test_sorted_pack_warning_is_one_line_naming_the_pack(small_pack):
    with pytest.warns(UserWarning) as got:
        ufspack.BlockSampler(ufspack.MyImageFolder(small_pack))
    (message,) = [str(w.message) for w in got]
    assert message.startswith(f"BlockSampler: pack {small_pack!r} stores its samples in index "
                              "order (an ImageFolder tree's: class after class)")
    assert "\n" not in message and "--layout shuffled" in message
