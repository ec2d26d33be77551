"""The benchmark's loader registry (bench/loaders.py): every loader that the
scripts and docs name is registered, unknown names are refused with the list
of registered ones, and listing the loaders imports none of their packages."""

import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("torchvision")
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
BENCH = os.path.join(SOURCE, "bench")


@pytest.fixture(scope="module")
def loaders():
    sys.path.insert(0, BENCH)
    try:
        import loaders
    finally:
        sys.path.pop(0)
    return loaders


def read(relpath):
    with open(os.path.join(SOURCE, relpath)) as f:
        return f.read()


def named_in_commands(text):
    """Loader names in `--loaders a,b`, `LOADERS=a,b` and `PEERS:-a b`."""
    found = set()
    for m in re.finditer(r"(?:--loaders[ =]|LOADERS=)\"?([\w,]+)", text):
        found.update(n for n in m.group(1).split(",") if n and n != "all")
    for m in re.finditer(r"PEERS:-([\w ]+)\}", text):
        found.update(m.group(1).split())
    return found


def named_in_tables(text):
    """First cells of the markdown tables whose first column is 'loader'."""
    found, in_table = set(), False
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.strip().startswith("|") else None
        if cells is None:
            in_table = False
        elif cells[0] == "loader":
            in_table = True
        elif in_table and not set(cells[0]) <= set("-: "):
            found.add(cells[0].strip("`* "))
    return found


def test_every_loader_the_scripts_and_docs_name_is_registered(loaders):
    named = {}
    for path in ["bench/run_e2e.sh", "tests/bench_peers_test.sh", "docs/benchmarks.md", "README.md"]:
        text = read(path)
        for name in named_in_commands(text) | named_in_tables(text):
            named.setdefault(name, path)
    # The parsing found what the docs show (else this test proves nothing).
    assert {"imagefolder", "ufspack_batch", "lmdb", "webdataset", "mxnet_recordio"} <= set(named)
    registered = set(loaders.names())
    missing = {n: path for n, path in named.items() if n not in registered}
    assert not missing, f"named but not registered in bench/loaders.py: {missing}"


def test_every_loader_has_the_adapter_interface(loaders):
    names = loaders.names()
    assert len(names) == len(set(names))
    assert set(loaders.names(group="own")) | set(loaders.names(group="peer")) == set(names)
    for name in names:
        adapter = loaders.get(name)
        assert adapter.name == name and adapter.group in ("own", "peer")
        reason = adapter.missing()
        assert reason is None or re.fullmatch(r"skipped: \S+ not installed", reason), reason
        assert isinstance(adapter.iterable, bool) and isinstance(adapter.batched, bool)
        assert adapter.build_key is None or adapter.build_key.endswith("_s")
        for method in ("build", "dataset", "preload"):
            assert callable(getattr(adapter, method))
    for peer in loaders.names(group="peer"):
        assert loaders.get(peer).build_key == f"{peer}_build_s"


def test_unknown_loader_lists_the_registered_ones(loaders, tmp_path):
    expected = r"unknown loader 'nope'; registered: imagefolder, .*webdataset"
    with pytest.raises(loaders.UnknownLoaderError, match=expected):
        loaders.select("ufspack,nope")
    run = subprocess.run([sys.executable, f"{BENCH}/e2e.py", "run", str(tmp_path), "--loaders", "ufspack,nope"],
                         capture_output=True, text=True)
    assert run.returncode == 2
    assert "unknown loader 'nope'; registered: imagefolder," in run.stderr


def test_listing_the_loaders_imports_none_of_their_packages():
    code = f"""
import sys
sys.path.insert(0, {BENCH!r})
import loaders
optional = set()
for name in loaders.names():
    optional.update(loaders.get(name).requires)
optional -= {{"torchvision", "ufspack"}}  # needed by the harness itself
assert "lmdb" in optional and "webdataset" in optional, optional
loaded = sorted(m for m in optional if m in sys.modules)
assert not loaded, loaded
"""
    subprocess.run([sys.executable, "-c", code], check=True)
