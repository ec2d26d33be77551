#!/usr/bin/python3
"""How many Python calls one ``MyImageFolder.__getitem__`` makes (issue 28).

Builds a small pack (8 generated 64x48 JPEGs in two classes), warms each
dataset up (first-use plans and handles), then counts, with
``sys.setprofile``, the Python-frame calls ("call") and the C-function calls
("c_call") made from entering ``__getitem__`` until it returns, the
``__getitem__`` frame itself included.  Two datasets:

  default  MyImageFolder(pack): the default loader, no transform
  fused    MyImageFolder(pack, Compose([Resize(40), CenterCrop(32),
           ToTensor(), Normalize(...)]), fast_transforms=True)

    PYTHONPATH=build/python python3 bench/getitem_hops.py [--work DIR] [--show]

Each line also names the `_core` functions called (each Reader method among
them decodes the record's entry once: read_* and label are one native record
lookup each).  ``--show``
also lists the calls of the default case (qualified names), to
see where the hops go.  Prints one line per dataset: "<name>: N calls,
M c_calls".  The counts do not depend on timing: the same code gives the
same numbers.
"""

from __future__ import annotations

import io
import os
import sys
import tempfile
from typing import Any, Callable, List, Tuple

import numpy as np
from PIL import Image

import benchlib
import ufspack


def make_pack(work: str) -> str:
    """A pack of 8 small JPEGs in classes a and b under ``work``."""
    tree = os.path.join(work, "tree")
    rng = np.random.default_rng(0)
    for i in range(8):
        d = os.path.join(tree, "ab"[i % 2])
        os.makedirs(d, exist_ok=True)
        arr = rng.integers(0, 255, size=(48, 64, 3), dtype=np.uint8)
        buf = io.BytesIO()
        Image.fromarray(arr, "RGB").save(buf, "JPEG", quality=90)
        with open(os.path.join(d, f"{i}.jpg"), "wb") as f:
            f.write(buf.getvalue())
    pack = os.path.join(work, "pack")
    ufspack.build(tree, pack, progress=False)
    return pack


def count(fn: Callable[[], Any]) -> Tuple[int, int, List[str]]:
    """(Python calls, C calls, the names of the Python calls) made by ``fn()``,
    not counting ``fn`` itself (it only calls ``__getitem__``)."""
    calls: List[str] = []
    c_calls = [0]
    reader_calls: List[str] = []
    depth = [0]

    def prof(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            depth[0] += 1
            if depth[0] > 1:  # not fn's own frame
                code = frame.f_code
                calls.append(f"{getattr(code, 'co_qualname', code.co_name)} ({os.path.basename(code.co_filename)})")
        elif event == "return":
            depth[0] -= 1
        elif event == "c_call" and depth[0] > 1:
            c_calls[0] += 1
            if type(getattr(arg, "__self__", None)).__name__ == "PyCapsule":  # a pybind11 function: _core's
                reader_calls.append(arg.__name__)

    sys.setprofile(prof)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return len(calls), c_calls[0], calls, reader_calls


def main() -> None:
    ap = benchlib.parser(__doc__)
    ap.add_argument("--work", help="directory for the tree and pack (default: a temporary one)")
    ap.add_argument("--show", action="store_true", help="list the Python calls of each case")
    args = ap.parse_args()
    from torchvision import transforms as T

    with tempfile.TemporaryDirectory() as tmp:
        pack = make_pack(args.work or tmp)
        fused = T.Compose(
            [T.Resize(40), T.CenterCrop(32), T.ToTensor(), T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])]
        )
        cases = {
            "default": ufspack.MyImageFolder(pack),
            "fused": ufspack.MyImageFolder(pack, fused, fast_transforms=True),
        }
        for name, ds in cases.items():
            for i in range(len(ds)):  # warm up: plans, handles, imports
                ds[i]
            n, c, names, native = count(lambda ds=ds: ds[3])
            print(f"{name}: {n} calls, {c} c_calls; _core calls: {', '.join(native)}")
            if args.show:
                for line in names:
                    print(f"    {line}")


if __name__ == "__main__":
    main()
