"""python/ufspack/_core.pyi matches the compiled module: the same public
names, the same methods, and the same parameter names, order and defaults
as pybind11's signatures (from each function's docstring).  mypy.stubtest
would need mypy from PyPI; this compares what a stub can get wrong."""

import ast
import os
import re

import pytest

from ufspack import _core

STUB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "ufspack", "_core.pyi")


def stub_tree():
    with open(STUB) as f:
        return ast.parse(f.read())


def params_of_stub(fn: ast.FunctionDef):
    a = fn.args
    names = [p.arg for p in a.args]
    defaults = [None] * (len(a.args) - len(a.defaults)) + [ast.literal_eval(d) for d in a.defaults]
    return list(zip(names, defaults))


def params_of_doc(obj):
    """Parameter (name, default) pairs from pybind11's first signature line,
    e.g. 'read_batch(self: ..., indices: List[int], threads: int = 4) -> list'."""
    first = (obj.__doc__ or "").strip().splitlines()[0]
    m = re.match(r"^\w+\((.*)\) -> .*$", first)
    assert m, f"no signature in {obj.__doc__!r}"
    out = []
    depth, cur = 0, ""
    for ch in m.group(1) + ",":
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            if cur.strip():
                out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    pairs = []
    for p in out:
        name = p.split(":", 1)[0].strip()
        default = None
        if "=" in p:
            text = p.rsplit("=", 1)[1].strip()
            default = ast.literal_eval(text)
        pairs.append((name, default))
    return pairs


def test_top_level_names_match():
    tree = stub_tree()
    stub = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            stub.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            stub.add(node.target.id)
    module = {n for n in dir(_core) if not n.startswith("_")} | {"__version__"}
    assert stub == module


def test_functions_and_methods_match_signatures():
    tree = stub_tree()
    checked = 0
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            assert params_of_stub(node) == params_of_doc(getattr(_core, node.name)), node.name
            checked += 1
        elif isinstance(node, ast.ClassDef) and node.name in ("Reader", "Cache", "SampleTable"):
            cls = getattr(_core, node.name)
            stub_methods = {f.name: f for f in node.body if isinstance(f, ast.FunctionDef)}
            public = {n for n in dir(cls) if not n.startswith("_")}
            # pybind11 gives a class without a constructor an __init__ that
            # raises, documented as object's: no constructor to stub.
            own = vars(cls)
            public |= {n for n in ("__init__", "__len__") if n in own and (own[n].__doc__ or "").startswith(n + "(")}
            assert set(stub_methods) == public, node.name
            for name, fn in stub_methods.items():
                decorators = [d.id for d in fn.decorator_list if isinstance(d, ast.Name)]
                if "property" in decorators:
                    assert isinstance(getattr(cls, name), property), f"{node.name}.{name}"
                    continue
                assert params_of_stub(fn) == params_of_doc(getattr(cls, name)), f"{node.name}.{name}"
                checked += 1
    assert checked > 15


def test_exception_class_matches():
    assert issubclass(_core.CorruptPackError, OSError)
    tree = stub_tree()
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "CorruptPackError"]
    assert [b.id for b in cls.bases] == ["OSError"]


@pytest.mark.parametrize("name", ["read", "read_batch", "read_decode_batch", "find"])
def test_stub_checker_itself_fails_on_a_wrong_stub(name):
    """The comparison is not vacuous: a renamed parameter is caught."""
    fn = [f for c in stub_tree().body if isinstance(c, ast.ClassDef) and c.name == "Reader" for f in c.body
          if isinstance(f, ast.FunctionDef) and f.name == name][0]
    fn.args.args[-1].arg += "_renamed"
    assert params_of_stub(fn) != params_of_doc(getattr(_core.Reader, name))


def test_version_is_cmakes_project_version():
    """One version: CMakeLists.txt's project() feeds the module (and the
    wheel's metadata, checked by tests/pip_install_test.sh)."""
    with open(os.path.join(os.path.dirname(STUB), "..", "..", "CMakeLists.txt")) as f:
        m = re.search(r"^project\(ufspack VERSION ([0-9]+\.[0-9]+\.[0-9]+)", f.read(), re.M)
    assert m and _core.__version__ == m.group(1)
