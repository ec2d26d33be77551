"""ufspack.Writer and ufspack.write: samples added in any order give the
pack a tree build of the same files gives; nothing is published on error,
an exception in the ``with`` block or Ctrl-C; write() on executors equals
one Writer of the same samples."""

import concurrent.futures
import gc
import os
import random
import signal
import subprocess
import sys

import numpy as np
import pytest
import torchvision

import ufspack
from conftest import SOURCE_DIR


def records(path):
    """Every record of a pack: (name, label, bytes)."""
    p = ufspack.Pack(path)
    return [(p.name(i), p.label(i), p.read(i)) for i in range(len(p))]


def tree_samples(tree, pack):
    """(name, bytes) of each file the tree build `pack` of `tree` packed,
    read from the tree, shuffled."""
    names = list(ufspack.Pack(pack).names)
    out = []
    for n in names:
        with open(os.path.join(os.fsencode(tree), os.fsencode(n)), "rb") as f:
            out.append((n, f.read()))
    random.Random(7).shuffle(out)
    return out


def dir_files(path):
    return sorted(os.listdir(path)) if os.path.isdir(path) else []


def verify(path):
    tool = os.environ.get("UFSPACK_CLI") or os.path.join(SOURCE_DIR, "build", "ufspack")
    tool = tool if os.access(tool, os.X_OK) else "ufspack"
    r = subprocess.run([tool, "verify", path], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


# --- Writer ---------------------------------------------------------------


@pytest.mark.parametrize("tree", ["small", "edge"])
def test_shuffled_samples_equal_tree_build(tree, small_tree, small_pack, edge_tree, edge_pack, tmp_path):
    src, built = (small_tree, small_pack) if tree == "small" else (edge_tree, edge_pack)
    out = str(tmp_path / "w")
    samples = tree_samples(src, built)
    with ufspack.Writer(out) as w:
        for k, (name, data) in enumerate(samples):
            # str and bytes names; bytes, bytearray, memoryview and numpy data.
            key = os.fsencode(name) if k % 2 else name
            buf = [bytes, bytearray, memoryview, lambda d: np.frombuffer(d, np.uint8)][k % 4](data)
            w.add(key, buf)
    s = w.summary
    assert s is not None and s["files"] == len(samples) and s["bytes_in"] == sum(len(d) for _, d in samples)
    assert records(out) == records(built)
    assert ufspack.Pack(out).classes == ufspack.Pack(built).classes
    assert ufspack.Pack(out).layout == "source"
    verify(out)
    if tree == "small":
        ref = torchvision.datasets.ImageFolder(src)
        ds = ufspack.MyImageFolder(out)
        assert ds.classes == ref.classes and ds.targets == ref.targets


def test_labels_given_agree(small_tree, small_pack, tmp_path):
    p = ufspack.Pack(small_pack)
    with ufspack.Writer(tmp_path / "w") as w:
        for i in reversed(range(len(p))):
            w.add(p.name(i), p.read(i), label=p.label(i))
    assert records(tmp_path / "w") == records(small_pack)


def test_flat(small_tree, tmp_path):
    built = str(tmp_path / "built")
    ufspack.build(small_tree, built, flat=True, progress=False)
    with ufspack.Writer(tmp_path / "w", flat=True) as w:
        for name, data in tree_samples(small_tree, built):
            w.add(name, data)
        w.add("top.bin", b"a file at the root")
        with pytest.raises(ValueError, match="takes no label"):
            w.add("x/y.bin", b"", label=0)
    got = records(tmp_path / "w")
    assert [r for r in got if r[0] != "top.bin"] == records(built)
    assert ufspack.Pack(tmp_path / "w").classes == [] and {r[1] for r in got} == {-1}


def test_classes_fix_names_and_order(tmp_path):
    out = str(tmp_path / "w")
    with ufspack.Writer(out, classes=["zebra", "ant", "empty"], allow_empty=True) as w:
        w.add("ant/1", b"a1", label=1)
        w.add("zebra/1", b"z1")
        w.add("ant/0", b"a0")
        with pytest.raises(ValueError, match="'bee' is not one of the 3 classes"):
            w.add("bee/1", b"")
        with pytest.raises(ValueError, match="label 0 given, but class 'ant' is label 1"):
            w.add("ant/2", b"", label=0)
    p = ufspack.Pack(out)
    assert p.classes == ["zebra", "ant", "empty"]
    assert records(out) == [("zebra/1", 0, b"z1"), ("ant/0", 1, b"a0"), ("ant/1", 1, b"a1")]
    with pytest.raises(ValueError, match="class.*with no sample: 'empty'"):
        with ufspack.Writer(tmp_path / "x", classes=["a", "empty"]) as w:
            w.add("a/1", b"")
    assert dir_files(tmp_path / "x") == []


def test_label_disagreeing_names_the_sample(tmp_path):
    out = str(tmp_path / "w")
    with ufspack.Writer(out) as w:
        w.add("a/keep", b"previous")
    with pytest.raises(ValueError, match=r"b/2: label 0 given, but its class 'b' is label 1"):
        with ufspack.Writer(out) as w:
            w.add("a/1", b"x", label=0)
            w.add("b/2", b"y", label=0)
    assert records(out) == [("a/keep", 0, b"previous")]


def test_duplicate_name_fails_at_close(tmp_path):
    out = str(tmp_path / "w")
    w = ufspack.Writer(out)
    w.add("a/1", b"x")
    w.add("a/1", b"y")
    with pytest.raises(ValueError, match="'a/1' added twice"):
        w.close()
    assert dir_files(out) == []
    with pytest.raises(ValueError, match="is aborted"):
        w.add("a/2", b"")


@pytest.mark.parametrize("bad", ["", "/abs/x", "a/../b", "a//b", "a/", "noclass", "a/./b", "a/b\0c"])
def test_bad_names_refused_writer_stays_usable(bad, tmp_path):
    with ufspack.Writer(tmp_path / "w") as w:
        with pytest.raises(ValueError, match="sample name"):
            w.add(bad, b"")
        w.add("a/ok", b"ok")
    assert records(tmp_path / "w") == [("a/ok", 0, b"ok")]


def test_labels_out_of_range(tmp_path):
    with ufspack.Writer(tmp_path / "w") as w:
        with pytest.raises(ValueError, match="label -2 is out of range"):
            w.add("a/1", b"", label=-2)
        with pytest.raises(TypeError):
            w.add("a/1", b"", label=1.5)
        w.add("a/1", b"", label=0)
    with pytest.raises(ValueError, match="a/2: label 7 given, but its class 'a' is label 0"):
        with ufspack.Writer(tmp_path / "x") as w:
            w.add("a/2", b"", label=7)
    with ufspack.Writer(tmp_path / "y", classes=["a"]) as w:
        with pytest.raises(ValueError, match="label 1 given, but class 'a' is label 0"):
            w.add("a/1", b"", label=1)
        w.add("a/2", b"", label=0)
    with pytest.raises(TypeError):
        ufspack.Writer(tmp_path / "z").add("a/1", "text is not bytes")


def test_label_out_of_range_names_the_sample(tmp_path):
    with ufspack.Writer(tmp_path / "w", classes=["a", "b"]) as w:
        for label in (2, 2**32 - 1, 2**32, 2**64):
            with pytest.raises(ValueError, match=f"^a/1: label {label} "):
                w.add("a/1", b"", label=label)
        with pytest.raises(ValueError, match="^a/1: label 4294967296 is out of range"):
            w._w.add(b"a/1", b"", 2**32)  # the native check names it too
        w.add("a/1", b"x", label=0)
        w.add("b/1", b"y", label=1)
    assert records(tmp_path / "w") == [("a/1", 0, b"x"), ("b/1", 1, b"y")]


def test_exception_inside_with_keeps_previous_pack(tmp_path):
    out = str(tmp_path / "w")
    with ufspack.Writer(out) as w:
        w.add("a/1", b"old")
    before = (records(out), dir_files(out))
    with pytest.raises(RuntimeError, match="boom"):
        with ufspack.Writer(out) as w:
            w.add("a/1", b"new")
            w.add("b/1", b"new")
            raise RuntimeError("boom")
    assert (records(out), dir_files(out)) == before
    assert w.closed
    w.abort()  # nothing to do


def test_ctrl_c_inside_with_publishes_nothing(tmp_path):
    out = str(tmp_path / "w")
    with pytest.raises(KeyboardInterrupt):
        with ufspack.Writer(out) as w:
            w.add("a/1", b"x")
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):  # the handler runs between bytecodes
                w.add("a/2", b"y")
    assert dir_files(out) == []


def test_use_after_close(tmp_path):
    w = ufspack.Writer(tmp_path / "w", compress="zstd:5")
    w.add("a/1", b"z" * 1000)
    s = w.close()
    assert s["files"] == 1 and s["compressed"] == 1 and s["classes"] == 1 and len(s["pack_id"]) == 32
    for call in (lambda: w.add("a/2", b""), w.close, lambda: w.set_metadata("k", "v")):
        with pytest.raises(ValueError, match="is closed"):
            call()
    w.abort()  # nothing to do: the pack stays
    assert records(tmp_path / "w") == [("a/1", 0, b"z" * 1000)]


# --- A Writer across fork() -------------------------------------------------

# A child that ends its interpreter with sys.exit: SystemExit leaves the
# ``with`` block (abort) and finalization collects the other Writer.  The
# parent then adds more to both and closes them.
FORK_EXIT_SCRIPT = """
import os, sys, ufspack
out = sys.argv[1]
kept = ufspack.Writer(out + "/kept")
kept.add("a/1", b"kept one")
with ufspack.Writer(out + "/with") as w:
    w.add("a/1", b"with one")
    pid = os.fork()
    if pid == 0:
        sys.exit(0)
    assert os.waitpid(pid, 0)[1] == 0
    w.add("b/2", b"with two")
kept.add("b/2", b"kept two")
kept.close()
"""


def test_forked_child_that_exits_leaves_the_parents_writer(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [
        os.path.dirname(os.path.dirname(ufspack.__file__)), os.environ.get("PYTHONPATH")])))
    r = subprocess.run([sys.executable, "-c", FORK_EXIT_SCRIPT, str(tmp_path)],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    for name in ("kept", "with"):
        out = str(tmp_path / name)
        assert records(out) == [("a/1", 0, name.encode() + b" one"), ("b/2", 1, name.encode() + b" two")]
        verify(out)


def test_forked_child_that_collects_the_writer_leaves_the_parents(tmp_path):
    out = str(tmp_path / "w")
    w = ufspack.Writer(out)
    w.add("a/1", b"one")
    gc.collect()  # the child's collection then finds only its copy of w
    pid = os.fork()
    if pid == 0:  # a fork worker that garbage-collects its copy, then ends
        code = 1
        try:
            del w
            gc.collect()
            code = 0
        finally:
            os._exit(code)
    assert os.waitpid(pid, 0)[1] == 0
    w.add("b/2", b"two")
    w.close()
    assert records(out) == [("a/1", 0, b"one"), ("b/2", 1, b"two")]


def test_forked_child_cannot_use_the_writer(tmp_path):
    out = str(tmp_path / "w")
    w = ufspack.Writer(out)
    w.add("a/1", b"parent")
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            calls = [lambda: w.add("a/child", b"child"), lambda: w.set_metadata("k", "v"), w.close,
                     # the native writer's own check, under the Python one
                     lambda: w._w.add(b"a/child", b"child", -1), w._w.finish]
            for bit, call in enumerate(calls):
                try:
                    call()
                    code |= 1 << bit
                except ValueError as e:
                    if f"opened by process {parent}" not in str(e) or "across fork()" not in str(e):
                        print(e, file=sys.stderr)
                        code |= 1 << bit
            with w:  # leaving the block (here through an exception) aborts
                raise KeyboardInterrupt
        except KeyboardInterrupt:
            pass
        except BaseException as e:
            print(repr(e), file=sys.stderr)
            code |= 64
        finally:
            os._exit(code)
    assert os.waitpid(pid, 0)[1] == 0
    assert "index.ufs" not in dir_files(out) and "data.ufs" not in dir_files(out)
    w.add("a/2", b"parent again")
    w.close()
    assert records(out) == [("a/1", 0, b"parent"), ("a/2", 0, b"parent again")]
    ufspack.Pack(out).check()
    verify(out)


def test_refuses_merged_pack_dir_and_bad_options(small_tree, tmp_path):
    merged = str(tmp_path / "m")
    ufspack.build(small_tree, merged, parts=2, progress=False)
    with pytest.raises(ValueError, match="holds a merged pack"):
        ufspack.Writer(merged)
    with pytest.raises(ValueError, match="compress"):
        ufspack.Writer(tmp_path / "x", compress="gzip")
    with pytest.raises(ValueError, match="given twice"):
        ufspack.Writer(tmp_path / "x", classes=["a", "a"])
    with pytest.raises(ValueError, match="takes no classes"):
        ufspack.Writer(tmp_path / "x", classes=["a"], flat=True)
    with ufspack.Writer(tmp_path / "held"), pytest.raises(ValueError, match="another ufspack build"):
        ufspack.Writer(tmp_path / "held")


# --- write ------------------------------------------------------------------

# Inputs whose samples interleave across any split of the inputs, in
# classes some parts lack: input k makes a sample of class k % 5, or, for
# every third k, of class c5 (k < 20) or c6 (k >= 20).
INPUTS = list(range(37))


def class_of(k):
    return k % 5 if k % 3 else 5 + k // 20


def make_sample(k):
    return (f"c{class_of(k)}/s{k:03d}.bin", bytes([k]) * (k + 1))


def make_samples(k):
    """Two samples per input, one with its label given."""
    name, data = make_sample(k)
    yield name, data
    yield f"c{class_of(k)}/t{k:03d}.bin", data[::-1], class_of(k)


def bad_fn(k):
    if k == 30:
        raise RuntimeError(f"bad input {k}")
    return [make_sample(k)]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """One Writer of every sample make_samples makes."""
    out = str(tmp_path_factory.mktemp("ref") / "pack")
    with ufspack.Writer(out) as w:
        for k in INPUTS:
            for s in make_samples(k):
                w.add(*s)
    return records(out)


@pytest.mark.parametrize("how", ["serial", "threads", "processes"])
def test_write_equals_one_writer(how, reference, tmp_path):
    out = str(tmp_path / "out")
    done = []
    if how == "serial":
        s = ufspack.write(make_samples, INPUTS, out, progress=lambda d, t, *_: done.append((d, t)))
        assert s["parts"] == 1 and done == [(1, 1)]
    elif how == "threads":
        with concurrent.futures.ThreadPoolExecutor(3) as ex:
            s = ufspack.write(make_samples, INPUTS, out, executor=ex)
        assert s["parts"] == 3
    else:
        with concurrent.futures.ProcessPoolExecutor(max_workers=2) as ex:
            s = ufspack.write(make_samples, INPUTS, out, executor=ex, parts=3)
        assert s["parts"] == 3
    assert records(out) == reference
    assert s["records"] == len(reference) and s["classes"] == 7
    n = s["parts"]  # contiguous slices of the inputs, two samples each
    assert [p["files"] for p in s["part_summaries"]] == [
        2 * ((k + 1) * len(INPUTS) // n - k * len(INPUTS) // n) for k in range(n)]
    p = ufspack.Pack(out)
    assert p.layout == "source" and p.classes == [f"c{c}" for c in range(7)]
    assert [p.find(name) for name, _, _ in reference] == list(range(len(reference)))
    verify(out)


def read_tree_file(tree_and_name):
    tree, name = tree_and_name
    with open(os.path.join(os.fsencode(tree), os.fsencode(name)), "rb") as f:
        return name, f.read()


def test_write_tree_names_equals_tree_build(edge_tree, edge_pack, tmp_path):
    """Python's name order (non-UTF-8 names, emoji, nested directories)
    where write() interleaves the parts."""
    names = [n for n, _ in tree_samples(edge_tree, edge_pack)]
    out = str(tmp_path / "out")
    s = ufspack.write(read_tree_file, [(edge_tree, n) for n in names], out, parts=3)
    assert records(out) == records(edge_pack) and s["parts"] == 3
    verify(out)


def test_write_one_sample_per_input_fixed_classes_and_rewrite(tmp_path):
    out = str(tmp_path / "out")
    classes = ["c5", "c4", "c2", "c1", "none"]
    s = ufspack.write(make_sample, [1, 2, 3, 4], out, parts=3, classes=classes, allow_empty=True,
                      compress="zstd", metadata={"origin": "test"})
    p = ufspack.Pack(out)
    assert p.classes == classes and s["classes"] == 5
    assert records(out) == [(f"c{class_of(k)}/s{k:03d}.bin", i, bytes([k]) * (k + 1))
                            for i, k in enumerate((3, 4, 2, 1))]
    verify(out)
    first = [e for e in os.listdir(out) if e.startswith("parts-")]
    # Writing again replaces the pack and its parts directory.
    ufspack.write(make_sample, INPUTS[4:6], out)
    assert [r[0] for r in records(out)] == ["c0/s005.bin", "c4/s004.bin"]
    assert ufspack.Pack(out).classes == ["c0", "c4"]
    assert not set(first) & set(os.listdir(out))


def test_write_more_parts_than_inputs_and_flat(tmp_path):
    out = str(tmp_path / "out")
    s = ufspack.write(make_sample, INPUTS[1:3], out, parts=4, flat=True)
    assert s["parts"] == 2 and [r[0] for r in records(out)] == ["c1/s001.bin", "c2/s002.bin"]
    assert ufspack.Pack(out).classes == []
    verify(out)


def test_write_errors_leave_out_unchanged(tmp_path):
    out = str(tmp_path / "out")
    ufspack.write(make_sample, INPUTS[:5], out, parts=2)
    before = (records(out), sorted(os.listdir(out)))

    with concurrent.futures.ThreadPoolExecutor(2) as ex, \
            pytest.raises(RuntimeError, match="bad input 30") as info:
        ufspack.write(bad_fn, INPUTS, out, executor=ex, parts=3)
    assert any("while writing part 2/3" in n for n in info.value.__notes__)
    assert (records(out), sorted(os.listdir(out))) == before

    # The same name from two parts.
    with pytest.raises(ValueError, match="'c5/s000.bin' added twice"):
        ufspack.write(make_sample, [0, 1, 0], out, parts=3)
    # Labels given that disagree with the merged classes, or with each other.
    with pytest.raises(ValueError, match="c1/x: label 0 given, but its class 'c1' is label 1"):
        ufspack.write(lambda k: (f"c{k}/x", b"", 0), [0, 1], out, parts=2)
    with pytest.raises(ValueError, match="c1/y: label 1 given, but c1/x of the same class"):
        ufspack.write(lambda k: [("c1/x", b"", 0), ("c1/y", b"", 1)], [0], out)
    # fn's contract.
    with pytest.raises(TypeError, match="must return a sample"):
        ufspack.write(lambda k: None, [0], out)
    with pytest.raises(TypeError, match="a sample is a tuple"):
        ufspack.write(lambda k: [[f"c/{k}", b""]], [0], out)
    with pytest.raises(ValueError, match="parts must be at least 1"):
        ufspack.write(make_sample, [0], out, parts=0)
    assert (records(out), sorted(os.listdir(out))) == before

    single = str(tmp_path / "single")
    with ufspack.Writer(single) as w:
        w.add("a/1", b"")
    with pytest.raises(ValueError, match="holds a single pack"):
        ufspack.write(make_sample, [0], single)
