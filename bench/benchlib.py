"""What the benchmark scripts share: the argument parser and the results file.

Each script runs as ``python3 bench/NAME.py``, so this folder is on sys.path.
"""

import argparse
import json
import os
import shutil
import subprocess
import tarfile
from typing import Any, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ufspack_cli() -> str:
    """The ufspack command the benchmarks run: $UFSPACK_CLI (the tests set
    it to the build under test, e.g. the ASan build's), else ``ufspack`` on
    PATH, else this tree's build/ufspack."""
    return os.environ.get("UFSPACK_CLI") or shutil.which("ufspack") or os.path.join(ROOT, "build", "ufspack")


PHOTOS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data",
                      "cats_and_dogs_filtered.tar")


def parser(doc: Optional[str], work: Optional[str] = None) -> argparse.ArgumentParser:
    """An ArgumentParser whose --help prints the script's docstring as written;
    with `work`, also --work (a scratch directory, default `work`) and --out
    (a directory for results.json and table.md, write_results_dir's)."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    if work is not None:
        p.add_argument("--work", default=work, help=f"scratch directory (default {work})")
        p.add_argument("--out", help="directory for results.json and table.md")
    return p


def write_json(path: Optional[str], results: Any) -> None:
    """Writes `results` to `path` as indented JSON; nothing when no path was given."""
    if path:
        with open(path, "w") as f:
            json.dump(results, f, indent=2)


def write_results_dir(out: Optional[str], results: Any, table: str) -> None:
    """Writes `results` to OUT/results.json and the Markdown `table` to
    OUT/table.md, making OUT; nothing when no directory was given."""
    if not out:
        return
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(table + "\n")


def drop_caches() -> bool:
    """Writes dirty pages back (sync) and, as root, drops the page cache;
    False when it could not drop it (not root)."""
    subprocess.run(["sync"], check=True)
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def report(out: Optional[str], results: Any, table: str) -> int:
    """Prints `table`, writes `results` and `table` into `out`
    (write_results_dir) and returns 0, a script's exit status."""
    print(table)
    write_results_dir(out, results, table)
    return 0


def shared_photos(limit: int) -> List[bytes]:
    """Up to `limit` real JPEGs from ../shared/data (empty when it is absent)."""
    out: List[bytes] = []
    if os.path.exists(PHOTOS):
        with tarfile.open(PHOTOS) as t:
            for m in t:
                if m.isfile() and m.name.lower().endswith(".jpg"):
                    f = t.extractfile(m)
                    assert f is not None
                    out.append(f.read())
                    if len(out) >= limit:
                        break
    return out


def photos_or_generated(limit: int, generated: int = 64, size: Tuple[int, int] = (500, 375)) -> List[bytes]:
    """Up to `limit` real JPEGs from ../shared/data, or, without it,
    min(limit, `generated`) JPEGs of seeded noise of `size` (width,
    height), quality 90."""
    out = shared_photos(limit)
    if not out:
        import io

        import numpy as np
        from PIL import Image

        for i in range(min(limit, generated)):
            arr = np.random.default_rng(i).integers(0, 255, (size[1], size[0], 3)).astype(np.uint8)
            buf = io.BytesIO()
            Image.fromarray(arr).save(buf, "JPEG", quality=90)
            out.append(buf.getvalue())
    return out
