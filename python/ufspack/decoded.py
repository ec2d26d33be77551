"""The decoded tier of the node-local cache: ``MyImageFolder(cache_decoded=True)``.

What is cached is the output of the deterministic leading part of the
dataset's transform, as uint8 RGB pixels: the decode itself, then the
leading ``Resize`` and ``CenterCrop`` transforms (exactly those classes, no
subclasses, patched ``forward`` or hooks).  The first transform that is
anything else (a random one such as ``RandomResizedCrop``, or ``ToTensor``)
and everything after it run on every fetch, on the cached pixels, drawing
from torch's RNG exactly as without the cache.

Entries live in a sample table of the cache (``Cache.OpenSampleTable``)
whose name holds the pack id, the mode that produced the pixels and a
canonical description of the cached transforms, so a changed transform or
a rebuilt pack never meets old pixels.  Slot = record index.  An entry is a
16-byte header (``UFD1``, height, width, channels as little-endian u32)
then the HxWx3 pixels.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Callable, List, Optional

import numpy as np

from ufspack import fast_transforms as _ft

FORMAT_VERSION = 1
_HEADER = struct.Struct("<4sIII")
_MAGIC = b"UFD1"


def encode_pixels(arr: np.ndarray) -> Optional[bytes]:
    """An entry for HxWx3 uint8 pixels, or None for anything else."""
    if not isinstance(arr, np.ndarray) or arr.dtype != np.uint8 or arr.ndim != 3 or arr.shape[2] != 3:
        return None
    h, w, c = arr.shape
    return _HEADER.pack(_MAGIC, h, w, c) + np.ascontiguousarray(arr).tobytes()


def decode_pixels(data: bytes) -> Optional[np.ndarray]:
    """The pixels of an entry (a read-only view of ``data``), or None when
    the entry is not one this version wrote."""
    if len(data) < _HEADER.size:
        return None
    magic, h, w, c = _HEADER.unpack_from(data)
    if magic != _MAGIC or c != 3 or h < 1 or w < 1 or len(data) != _HEADER.size + h * w * c:
        return None
    return np.frombuffer(data, np.uint8, offset=_HEADER.size).reshape(h, w, c)


def _canonical(t: Any) -> str:
    """The parameters that decide a cached transform's pixels."""
    interpolation = getattr(getattr(t, "interpolation", None), "value", getattr(t, "interpolation", None))
    if type(t).__name__ == "Resize":
        size = [t.size] if isinstance(t.size, int) else list(t.size)
        return f"Resize(size={size}, interpolation={interpolation}, max_size={t.max_size}, antialias={t.antialias})"
    size = [t.size] if isinstance(t.size, int) else list(t.size)
    return f"CenterCrop(size={size})"


def _fill_is_native(fill: Any) -> bool:
    """native_spec's rule for a crop's fill."""
    if isinstance(fill, (int, float)):
        fill = (fill,) * 3
    return len(fill) == 3 and all(0 <= int(x) <= 255 for x in fill)


def _dct_free(step: Any) -> Optional[str]:
    """None when ``step``, after the cached part, cannot make the fused
    decode choose another DCT scale or decode path than the cached part
    did; else why it can."""
    if isinstance(step, (_ft._FlipStep, _ft._TensorStep, _ft._ConvertStep, _ft._NormalizeStep)):
        return None
    if isinstance(step, _ft._RandomCropStep):
        if step.padding is None and not step.pad_if_needed and _fill_is_native(step.fill):
            return None
        return f"{step.describe()} pads"
    return f"{step.describe()} resizes"


@dataclass
class DecodedPlan:
    """How samples go through the decoded tier for one transform.

    ``prefix`` are the cached transforms; ``rest`` what runs on the cached
    pixels: a Python callable (``fast`` False) or, with fast_transforms, a
    FastPlan whose ``python`` is the Python rest after its native run.
    ``prefix_plan`` is the prefix's FastPlan (fast only: it computes the
    pixels natively on a miss).  ``name`` is the sample table's name, None
    when the transform is not cached (``reason`` says why)."""

    transform: Any
    fast: bool
    prefix: List[Any]
    rest: Optional[Callable[[Any], Any]]
    prefix_plan: Optional[_ft.FastPlan]
    rest_plan: Optional[_ft.FastPlan]
    name: Optional[bytes]
    description: str
    reason: str = ""

    def apply_prefix(self, img: Any) -> Any:
        for t in self.prefix:
            img = t(img)
        return img


def make_plan(
    transform: Any, output: str, fast_transforms: Any, fast_plan: Optional[_ft.FastPlan], pack_id: str
) -> DecodedPlan:
    """The DecodedPlan of ``transform`` for a dataset with this ``output``,
    ``fast_transforms`` setting and current fast plan (None or empty: the
    default path runs)."""
    T = _ft._torchvision_transforms()
    if transform is None:
        items: List[Any] = []
    elif T is not None and type(transform) is T.Compose:
        items = list(transform.transforms)
    else:
        items = [transform]
    prefix: List[Any] = []
    if output == "pil" and T is not None:  # the transforms see PIL images
        for t in items:
            if not (_ft._is_plain(T, t, T.Resize) or _ft._is_plain(T, t, T.CenterCrop)):
                break
            prefix.append(t)
    fast = bool(fast_plan)
    if fast:
        assert fast_plan is not None
        # Only what the fused path runs natively is cached natively.
        prefix = prefix[: len(fast_plan.steps)]
    rest_items = items[len(prefix) :]
    if not rest_items:
        rest: Optional[Callable[[Any], Any]] = None
    elif len(rest_items) == 1 and not (T is not None and type(transform) is T.Compose):
        rest = rest_items[0]
    else:
        rest = T.Compose(rest_items)
    mode = "pil" if not fast else ("exact" if fast_transforms == "exact" else "dct")
    cached = " -> ".join(["decode"] + [_canonical(t) for t in prefix])
    description = " -> ".join(["decode"] + [repr(t) for t in prefix])
    prefix_plan = rest_plan = None
    reason = ""
    if fast:
        assert fast_plan is not None and T is not None
        prefix_plan = _ft.plan_transform(T.Compose(prefix))[0] if prefix else _ft.plan_transform(None)[0]
        rest_plan = _ft.plan_transform(rest)[0]
        if mode == "dct":
            # With DCT scaling the fused decode's scale and path depend on
            # the whole native run: cached pixels reproduce it only if the
            # part after them neither resizes nor pads.
            for step in fast_plan.steps[len(prefix) :]:
                why = _dct_free(step)
                if why is not None:
                    reason = (
                        f"not cached: with fast_transforms=True the fused decode's DCT scale depends on "
                        f"what follows the cached part, and {why}; fast_transforms='exact' caches it"
                    )
                    break
    name = f"decoded/v{FORMAT_VERSION}/{pack_id}/{mode}/{cached}".encode()
    return DecodedPlan(
        transform=transform,
        fast=fast,
        prefix=prefix,
        rest=rest,
        prefix_plan=prefix_plan,
        rest_plan=rest_plan,
        name=None if reason else name,
        description=description,
        reason=reason,
    )
