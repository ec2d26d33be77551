"""The native executor of a fast-transforms plan.

:func:`native_spec` turns one sample's :class:`~ufspack.fast_transforms.SampleOps`
into a ``_core.TransformSpec`` (geometry, flip, output layout) for
``_core.transform_batch``; :func:`native_output` makes the buffer it writes
and :func:`native_value` the sample from it (what is left for torch, the
``tail``, runs there through the reference executor).  The results equal
:func:`ufspack.transform_oracle.execute`'s (with DCT scaling: close to them).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Optional, Tuple, Union

import numpy as np

from ufspack import _core
from ufspack.fast_transforms import SampleOps
from ufspack.transform_oracle import execute, normalize

__all__ = ["NativeSpec", "native_output", "native_spec", "native_value", "run_tail"]


@dataclass(frozen=True)
class NativeSpec:
    """How one sample's :class:`SampleOps` run natively.

    ``spec`` is the ``_core.TransformSpec`` (geometry, flip and the output
    layout); ``output`` the layout it writes: "rgb" (HxWx3 bytes, made a PIL
    image), "chw_u8" (a uint8 tensor) or "chw_f32" (a float32 tensor, divided
    by 255 and normalised).  ``tail`` is what is left for torch afterwards
    (SampleOps with no geometry: a tensor conversion the native output does
    not cover, such as float64, or a Normalize it cannot express), None when
    nothing is."""

    spec: Any
    output: str
    tail: Optional[SampleOps]


@functools.lru_cache(maxsize=64)
def _float32(values: Tuple[Union[int, float], ...]) -> Optional[Tuple[float, float, float]]:
    """mean/std as torch converts them for a 3-channel float32 tensor, or
    None when torch would broadcast differently or raise."""
    if len(values) not in (1, 3):
        return None
    v = [float(np.float32(x)) for x in values]
    if len(v) == 1:
        v = v * 3
    return v[0], v[1], v[2]


def native_spec(ops: SampleOps, dct_scaling: bool) -> Optional[NativeSpec]:
    """The native form of ``ops`` for an RGB image, or None when even its
    geometry cannot run natively (a padding fill torchvision would reject or
    clip): then the caller runs :meth:`FastPlan.apply_pil` on PIL's image."""
    s = _core.TransformSpec()
    s.in_width, s.in_height = ops.in_size
    if ops.resize_before is not None:
        r = ops.resize_before
        s.set_resize_before(r.width, r.height, r.pil_filter)
    if ops.crop is not None:
        c = ops.crop
        fill: Any = c.fill
        if isinstance(fill, (int, float)):
            fill = (fill,) * 3
        if len(fill) != 3:
            return None  # torchvision raises: let it
        fill = tuple(map(int, fill))  # no generator: this runs for every sample
        if min(fill) < 0 or max(fill) > 255:
            return None
        s.set_crop(c.pad, fill, c.box)
    if ops.resize_after is not None:
        r = ops.resize_after
        s.set_resize_after(r.width, r.height, r.pil_filter)
    s.hflip = ops.flip
    s.dct_scaling = dct_scaling
    if ops.tensor is None:
        s.set_output("rgb")
        return NativeSpec(s, "rgb", None)
    import torch

    # The float the tensor is in before Normalize, if float32.
    if ops.tensor == "to_tensor":
        floating = torch.get_default_dtype() == torch.float32 and ops.convert in (None, "float32")
        as_u8 = False
    else:  # pil_to_tensor
        floating = ops.convert == "float32"
        as_u8 = ops.convert in (None, "uint8")
    if as_u8:
        s.set_output("chw_u8")
        return NativeSpec(s, "chw_u8", None)
    if not floating:
        s.set_output("rgb")
        geometry_done = SampleOps(
            ops.out_size, None, None, None, False, ops.out_size, ops.tensor, ops.convert, ops.normalize, ops.dtype
        )
        return NativeSpec(s, "rgb", geometry_done)
    if ops.normalize is None:
        s.set_output("chw_f32")
        return NativeSpec(s, "chw_f32", None)
    mean, std = _float32(ops.normalize.mean), _float32(ops.normalize.std)
    if mean is None or std is None or 0.0 in std:
        s.set_output("chw_f32")  # torch normalises (or raises) in Python
        tail = SampleOps(ops.out_size, None, None, None, False, ops.out_size, None, None, ops.normalize, ops.dtype)
        return NativeSpec(s, "chw_f32", tail)
    s.set_output("chw_f32", mean, std)
    return NativeSpec(s, "chw_f32", None)


def run_tail(x: Any, tail: SampleOps) -> Any:
    """The part of ``ops`` left to torch after the native output ``x`` (a PIL
    image when ``tail.tensor`` is set, else a float tensor to normalise)."""
    if tail.tensor is not None:
        return execute(x, tail)
    assert tail.normalize is not None
    return normalize(x, tail.normalize)


def native_output(ns: NativeSpec) -> Tuple[Any, np.ndarray]:
    """(the sample's object, the buffer the native run writes into) for
    ``ns``: an HxWx3 uint8 array for "rgb", else a 3xHxW torch tensor (uint8
    or float32) and its numpy view."""
    w, h = ns.spec.out_width, ns.spec.out_height
    if ns.output == "rgb":
        arr = np.empty((h, w, 3), np.uint8)
        return arr, arr
    import torch

    t = torch.empty((3, h, w), dtype=torch.uint8 if ns.output == "chw_u8" else torch.float32)
    return t, t.numpy()


def native_value(ns: NativeSpec, value: Any) -> Any:
    """The sample from ``value`` (native_output's object, written): a PIL
    image for "rgb", then ``ns.tail`` run on it where there is one."""
    if ns.output == "rgb":
        from PIL import Image

        value = Image.fromarray(value, "RGB")
    if ns.tail is not None:
        value = run_tail(value, ns.tail)
    return value
