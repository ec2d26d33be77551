"""Plans for running torchvision's standard transforms natively (issue 13).

:func:`plan_transform` splits a ``transform`` (a ``transforms.Compose`` or a
single transform) into the longest leading run that the native pipeline can
execute exactly, a :class:`FastPlan`, and the remaining Python transforms::

    plan, rest = plan_transform(Compose([RandomResizedCrop(224), RandomHorizontalFlip(),
                                         ToTensor(), Normalize(mean, std), ColorJitter(0.4)]))
    repr(plan)  # FastPlan(native: RandomResizedCrop(224, bilinear) -> RandomHorizontalFlip(0.5)
                #          -> ToTensor -> Normalize; python: ColorJitter(...))
    ops = plan.sample(w, h)        # draws from torch's global RNG exactly as torchvision
    x = plan.apply_pil(img, ops)   # reference executor: the bytes torchvision produces
    x = rest(x) if rest is not None else x

The native pipeline has a fixed shape, executed in this order::

    resize_before -> pad -> crop -> resize_after -> flip -> to-tensor -> convert dtype -> normalize

each stage optional.  A transform whose stage does not come strictly after the
stages already used (a second resize after a crop, a crop after a flip,
ToTensor twice, Normalize before ToTensor), an unknown transform (including
any subclass, or an instance with a patched ``forward`` or module hooks), or an
argument value the pipeline cannot express ends the native run: that
transform and everything after it stay in Python.  Nothing is approximated.

Random parameters: :meth:`FastPlan.sample` makes the very same calls on
torch's global RNG, in the same order, as the forward methods of
torchvision 0.14 (``RandomResizedCrop.get_params``, ``RandomCrop.get_params``,
``RandomHorizontalFlip.forward``), so a seed (``torch.manual_seed``, a
DataLoader worker's seed) gives the same crops and flips and leaves the RNG in
the same state.  It raises the exceptions torchvision raises for the same
input (a RandomCrop larger than the image without ``pad_if_needed``) and
emits torchvision's warning for ``antialias=False`` on PIL images.

The executor contract (for a native implementation) is :class:`SampleOps`:
plain integers, strings and tuples.  This module is the plan only; the
executors live beside it: :mod:`ufspack.transform_oracle` (the reference:
PIL and torch calls identical to torchvision's, for any PIL mode; what
:meth:`FastPlan.apply_pil` runs) and :mod:`ufspack.transform_native` (the
``_core`` pipeline).  Their public names (``NativeSpec``, ``native_spec``,
``run_tail``, ``resolve_fill``) are still importable from here.

Importable without torch or torchvision: then nothing is recognised and every
plan is empty.  Thread safety: a plan is immutable; ``sample`` uses torch's
global RNG like torchvision does.
"""

from __future__ import annotations

import importlib
import math
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Sequence, Tuple, Union, cast

if TYPE_CHECKING:
    from PIL import Image

__all__ = [
    "CropOp",
    "FastPlan",
    "NormalizeOp",
    "ResizeOp",
    "SampleOps",
    "plan_transform",
]

# PIL resampling filters, as torchvision.transforms.functional.pil_modes_mapping
# maps InterpolationMode to them.  Only these three are supported natively.
PIL_FILTERS = {"nearest": 0, "bilinear": 2, "bicubic": 3}

# torchvision's message, emitted by F.resize on every PIL resize with antialias=False.
_ANTIALIAS_WARNING = "Anti-alias option is always applied for PIL Image input. Argument antialias is ignored."

# Dtypes the pipeline converts between (ConvertImageDtype), by torch name.
_FLOAT_DTYPES = ("float32", "float64")

Fill = Union[int, float, Tuple[Union[int, float], ...]]


# --- per-sample operations: the executor's contract ------------------------------


@dataclass(frozen=True)
class ResizeOp:
    """``PIL.Image.resize((width, height), pil_filter)``.  torchvision calls PIL
    even when the size is unchanged (PIL then returns a copy)."""

    width: int
    height: int
    interpolation: str  # "nearest" | "bilinear" | "bicubic"
    pil_filter: int  # 0 | 2 | 3 (PIL.Image.Resampling)


@dataclass(frozen=True)
class CropOp:
    """Constant padding, then a crop box inside the padded image.

    ``pad`` is (left, top, right, bottom), all >= 0, applied with
    ``ImageOps.expand`` and ``fill`` as torchvision's ``_parse_fill`` resolves
    it for the image (a number is repeated over the bands, integers are
    truncated with ``int()`` unless the mode is "F"; see :func:`resolve_fill`).
    ``box`` is (left, top, width, height) in padded coordinates, always
    inside the padded image."""

    pad: Tuple[int, int, int, int]
    fill: Fill
    box: Tuple[int, int, int, int]


@dataclass(frozen=True)
class NormalizeOp:
    """``(x - mean) / std`` per channel, as ``F_t.normalize``: mean and std are
    converted to the tensor's dtype first (a std that becomes 0 is an error);
    a length-1 sequence or a number broadcasts."""

    mean: Tuple[Union[int, float], ...]
    std: Tuple[Union[int, float], ...]
    inplace: bool


@dataclass(frozen=True)
class SampleOps:
    """The concrete operations for one image, in execution order.

    Sizes are (width, height).  ``tensor`` is None (the output is a PIL image),
    "to_tensor" (float of ``dtype``, divided by 255 for 8-bit modes, CHW) or
    "pil_to_tensor" (the mode's own dtype, CHW, a permuted non-contiguous view
    in torchvision).  ``convert`` is ConvertImageDtype's target, ``dtype`` the
    final dtype; both are torch names ("uint8", "float32", "float64")."""

    in_size: Tuple[int, int]
    resize_before: Optional[ResizeOp]
    crop: Optional[CropOp]
    resize_after: Optional[ResizeOp]
    flip: bool
    out_size: Tuple[int, int]
    tensor: Optional[str]
    convert: Optional[str]
    normalize: Optional[NormalizeOp]
    dtype: Optional[str]


# --- plan steps -----------------------------------------------------------------

# Pipeline stages, in execution order.  A transform's stages must all come
# strictly after the last stage used; only the flip stage may repeat.
_RESIZE_BEFORE, _CROP, _RESIZE_AFTER, _FLIP, _TENSOR, _CONVERT, _NORMALIZE = range(7)


class _State:
    """Mutable geometry and fields while one sample is drawn."""

    def __init__(self, w: int, h: int) -> None:
        self.in_size = (w, h)
        self.w = w
        self.h = h
        self.resize_before: Optional[ResizeOp] = None
        self.crop: Optional[CropOp] = None
        self.resize_after: Optional[ResizeOp] = None
        self.flip = False
        self.tensor: Optional[str] = None
        self.convert: Optional[str] = None
        self.normalize: Optional[NormalizeOp] = None
        self.dtype: Optional[str] = None

    def resize(self, stage: int, width: int, height: int, interpolation: str, antialias: Optional[bool]) -> None:
        if antialias is not None and not antialias:
            warnings.warn(_ANTIALIAS_WARNING, stacklevel=4)
        op = ResizeOp(width, height, interpolation, PIL_FILTERS[interpolation])
        if stage == _RESIZE_BEFORE:
            self.resize_before = op
        else:
            self.resize_after = op
        self.w, self.h = width, height

    def ops(self) -> SampleOps:
        return SampleOps(
            self.in_size,
            self.resize_before,
            self.crop,
            self.resize_after,
            self.flip,
            (self.w, self.h),
            self.tensor,
            self.convert,
            self.normalize,
            self.dtype,
        )


class _Step:
    """One recognised torchvision transform."""

    stages: Tuple[int, ...] = ()

    def sample(self, s: _State) -> None:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError


def _size_text(size: Sequence[int]) -> str:
    return str(size[0]) if len(size) == 2 and size[0] == size[1] else f"({size[0]}, {size[1]})"


def _compute_resized_output_size(h: int, w: int, size: List[int], max_size: Optional[int]) -> Tuple[int, int]:
    """torchvision.transforms.functional._compute_resized_output_size, returning (h, w)."""
    if len(size) == 1:
        short, long = (w, h) if w <= h else (h, w)
        requested_new_short = size[0]
        new_short, new_long = requested_new_short, int(requested_new_short * long / short)
        if max_size is not None:
            # max_size <= requested_new_short raises in torchvision: rejected at recognition.
            if new_long > max_size:
                new_short, new_long = int(max_size * new_short / new_long), max_size
        new_w, new_h = (new_short, new_long) if w <= h else (new_long, new_short)
    else:
        new_w, new_h = size[1], size[0]
    return new_h, new_w


class _ResizeStep(_Step):
    def __init__(self, stage: int, size: List[int], interpolation: str, max_size: Optional[int], antialias: Any):
        self.stages = (stage,)
        self.size = size
        self.interpolation = interpolation
        self.max_size = max_size
        self.antialias = antialias

    def sample(self, s: _State) -> None:
        h, w = _compute_resized_output_size(s.h, s.w, self.size, self.max_size)
        s.resize(self.stages[0], w, h, self.interpolation, self.antialias)

    def describe(self) -> str:
        size = str(self.size[0]) if len(self.size) == 1 else f"({self.size[0]}, {self.size[1]})"
        extra = f", max_size={self.max_size}" if self.max_size is not None else ""
        return f"Resize({size}, {self.interpolation}{extra})"


class _CenterCropStep(_Step):
    stages = (_CROP,)

    def __init__(self, th: int, tw: int) -> None:
        self.th, self.tw = th, tw

    def sample(self, s: _State) -> None:
        # torchvision.transforms.functional.center_crop
        th, tw, h, w = self.th, self.tw, s.h, s.w
        pad = (0, 0, 0, 0)
        if tw > w or th > h:
            pad = (
                (tw - w) // 2 if tw > w else 0,
                (th - h) // 2 if th > h else 0,
                (tw - w + 1) // 2 if tw > w else 0,
                (th - h + 1) // 2 if th > h else 0,
            )
            w += pad[0] + pad[2]
            h += pad[1] + pad[3]
        # When the padded image has the crop's size torchvision returns it
        # uncropped; the formula below then gives the same (whole-image) box.
        top = int(round((h - th) / 2.0))
        left = int(round((w - tw) / 2.0))
        s.crop = CropOp(pad, 0, (left, top, tw, th))
        s.w, s.h = tw, th

    def describe(self) -> str:
        return f"CenterCrop({_size_text((self.th, self.tw))})"


class _RandomCropStep(_Step):
    stages = (_CROP,)

    def __init__(
        self, th: int, tw: int, padding: Optional[Tuple[int, int, int, int]], pad_if_needed: bool, fill: Fill
    ) -> None:
        self.th, self.tw = th, tw
        self.padding = padding
        self.pad_if_needed = pad_if_needed
        self.fill = fill

    def sample(self, s: _State) -> None:
        import torch

        # RandomCrop.forward: padding, then pad_if_needed on each side by the
        # shortfall (both sides!), then get_params.  Constant pads compose.
        left, top, right, bottom = self.padding if self.padding is not None else (0, 0, 0, 0)
        w, h = s.w + left + right, s.h + top + bottom
        th, tw = self.th, self.tw
        if self.pad_if_needed and w < tw:
            extra = tw - w
            left, right, w = left + extra, right + extra, w + 2 * extra
        if self.pad_if_needed and h < th:
            extra = th - h
            top, bottom, h = top + extra, bottom + extra, h + 2 * extra
        # RandomCrop.get_params
        if h < th or w < tw:
            raise ValueError(f"Required crop size {(th, tw)} is larger than input image size {(h, w)}")
        if w == tw and h == th:
            i, j = 0, 0
        else:
            i = int(torch.randint(0, h - th + 1, size=(1,)).item())
            j = int(torch.randint(0, w - tw + 1, size=(1,)).item())
        s.crop = CropOp((left, top, right, bottom), self.fill, (j, i, tw, th))
        s.w, s.h = tw, th

    def describe(self) -> str:
        extra = ""
        if self.padding is not None:
            extra += f", padding={self.padding}"
        if self.pad_if_needed:
            extra += ", pad_if_needed=True"
        if self.fill not in (0, None):
            extra += f", fill={self.fill}"
        return f"RandomCrop({_size_text((self.th, self.tw))}{extra})"


class _RandomResizedCropStep(_Step):
    stages = (_CROP, _RESIZE_AFTER)

    def __init__(
        self, th: int, tw: int, scale: Sequence[Any], ratio: Sequence[Any], interpolation: str, antialias: Any
    ) -> None:
        self.th, self.tw = th, tw
        self.scale = scale
        self.ratio = ratio
        self.interpolation = interpolation
        self.antialias = antialias
        self._log_ratio: Optional[Tuple[Any, Any, Any]] = None

    def get_params(self, height: int, width: int) -> Tuple[int, int, int, int]:
        """RandomResizedCrop.get_params, call for call (same torch calls on the
        same default-dtype tensors, same float rounding, Python's round())."""
        import torch

        scale, ratio = self.scale, self.ratio
        area = height * width

        # torch.log(torch.tensor(ratio)) draws nothing: computed once per
        # default dtype, as 0-d tensors (torchvision passes log_ratio[0] and
        # log_ratio[1] to uniform_ so).
        dtype = torch.get_default_dtype()
        cached = self._log_ratio
        if cached is None or cached[0] != dtype:
            log_ratio = torch.log(torch.tensor(ratio))
            cached = self._log_ratio = (dtype, log_ratio[0], log_ratio[1])
        lr0, lr1 = cached[1], cached[2]
        for _ in range(10):
            target_area = area * torch.empty(1).uniform_(scale[0], scale[1]).item()
            aspect_ratio = torch.exp(torch.empty(1).uniform_(lr0, lr1)).item()  # type: ignore[arg-type]

            w = int(round(math.sqrt(target_area * aspect_ratio)))
            h = int(round(math.sqrt(target_area / aspect_ratio)))

            if 0 < w <= width and 0 < h <= height:
                i = int(torch.randint(0, height - h + 1, size=(1,)).item())
                j = int(torch.randint(0, width - w + 1, size=(1,)).item())
                return i, j, h, w

        # Fallback to central crop
        in_ratio = float(width) / float(height)
        if in_ratio < min(ratio):
            w = width
            h = int(round(w / min(ratio)))
        elif in_ratio > max(ratio):
            h = height
            w = int(round(h * max(ratio)))
        else:  # whole image
            w = width
            h = height
        i = (height - h) // 2
        j = (width - w) // 2
        return i, j, h, w

    def sample(self, s: _State) -> None:
        i, j, h, w = self.get_params(s.h, s.w)
        s.crop = CropOp((0, 0, 0, 0), 0, (j, i, w, h))
        s.w, s.h = w, h
        s.resize(_RESIZE_AFTER, self.tw, self.th, self.interpolation, self.antialias)

    def describe(self) -> str:
        extra = ""
        if tuple(self.scale) != (0.08, 1.0):
            extra += f", scale={tuple(self.scale)}"
        if tuple(self.ratio) != (3.0 / 4.0, 4.0 / 3.0):
            extra += f", ratio={tuple(self.ratio)}"
        return f"RandomResizedCrop({_size_text((self.th, self.tw))}, {self.interpolation}{extra})"


class _FlipStep(_Step):
    stages = (_FLIP,)

    def __init__(self, p: Any) -> None:
        self.p = p

    def sample(self, s: _State) -> None:
        import torch

        if torch.rand(1) < self.p:  # RandomHorizontalFlip.forward
            s.flip = not s.flip

    def describe(self) -> str:
        return f"RandomHorizontalFlip({self.p})"


class _TensorStep(_Step):
    stages = (_TENSOR,)

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def sample(self, s: _State) -> None:
        import torch

        s.tensor = self.kind
        # to_tensor reads the default dtype at call time; for the RGB/L modes
        # the native pipeline serves, pil_to_tensor gives uint8.
        s.dtype = str(torch.get_default_dtype()).replace("torch.", "") if self.kind == "to_tensor" else "uint8"

    def describe(self) -> str:
        return "ToTensor" if self.kind == "to_tensor" else "PILToTensor"


class _ConvertStep(_Step):
    stages = (_CONVERT,)

    def __init__(self, dtype: str) -> None:
        self.dtype = dtype

    def sample(self, s: _State) -> None:
        s.convert = self.dtype
        s.dtype = self.dtype

    def describe(self) -> str:
        return f"ConvertImageDtype({self.dtype})"


class _NormalizeStep(_Step):
    stages = (_NORMALIZE,)

    def __init__(self, op: NormalizeOp) -> None:
        self.op = op

    def sample(self, s: _State) -> None:
        s.normalize = self.op

    def describe(self) -> str:
        return "Normalize"


# --- the plan -------------------------------------------------------------------


class FastPlan:
    """The recognised leading run of a transform, and its description.

    ``steps`` is empty when nothing was recognised (``bool(plan)`` is False);
    ``python`` is the transform left to Python (None when none is left);
    ``description`` is the human-readable split, also the ``repr``."""

    def __init__(self, steps: Sequence[_Step], python: Optional[Callable[[Any], Any]], python_text: str) -> None:
        self.steps: Tuple[_Step, ...] = tuple(steps)
        self.python = python
        native = " -> ".join(step.describe() for step in self.steps) or "(none)"
        self.description = f"native: {native}; python: {python_text or '(none)'}"

    def __bool__(self) -> bool:
        return bool(self.steps)

    def __len__(self) -> int:
        return len(self.steps)

    def __repr__(self) -> str:
        return f"FastPlan({self.description})"

    def sample(self, width: int, height: int) -> SampleOps:
        """The operations for an image of ``width`` x ``height``, drawing from
        torch's global RNG exactly as torchvision's forward methods would."""
        s = _State(width, height)
        for step in self.steps:
            step.sample(s)
        return s.ops()

    def apply_pil(self, img: Image.Image, ops: SampleOps) -> Any:
        """Execute ``ops`` on a PIL image with the PIL and torch calls
        torchvision makes; returns a PIL image, or a tensor once converted
        (:func:`ufspack.transform_oracle.execute`)."""
        from ufspack.transform_oracle import execute

        return execute(img, ops)

    def __call__(self, img: Image.Image) -> Any:
        """The recognised run on ``img`` (not the Python rest): sample, then apply_pil."""
        return self.apply_pil(img, self.sample(*img.size))


def plan_transform(transform: Optional[Callable[[Any], Any]]) -> Tuple[FastPlan, Optional[Callable[[Any], Any]]]:
    """Split ``transform`` into (plan, rest): the longest leading run of
    supported transforms and what must still run in Python afterwards.

    ``rest`` is None when everything was recognised, the original object
    untouched when nothing was, and otherwise a new ``Compose`` of the
    remaining transforms (the same objects)."""
    if transform is None:
        return FastPlan((), None, ""), None
    T = _torchvision_transforms()
    if T is not None and type(transform) is T.Compose:
        items = list(cast(Any, transform).transforms)
    else:
        items = [transform]
    steps: List[_Step] = []
    last = -1
    dtype: Optional[str] = None  # the tensor's kind so far: None (PIL), "uint8", "float"
    for t in items if T is not None else []:
        step = _recognise(T, t, last, dtype)
        if step is None:
            break
        steps.append(step)
        last = step.stages[-1]
        if isinstance(step, _TensorStep):
            dtype = "float" if step.kind == "to_tensor" else "uint8"
        elif isinstance(step, _ConvertStep):
            dtype = "uint8" if step.dtype == "uint8" else "float"
    left = items[len(steps) :]
    if not left:
        rest: Optional[Callable[[Any], Any]] = None
    elif not steps:
        rest = transform
    else:
        rest = T.Compose(left)
    return FastPlan(steps, rest, " -> ".join(repr(t) for t in left)), rest


# --- recognition ----------------------------------------------------------------


def _torchvision_transforms() -> Any:
    try:
        from torchvision import transforms
    except ImportError:  # also when torch is missing
        return None
    return transforms


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_real(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _is_plain(T: Any, t: Any, cls: Any) -> bool:
    """Exactly ``cls`` (no subclass), with no per-instance forward/get_params
    or nn.Module hooks that would change what it does."""
    if type(t) is not cls:
        return False
    own = vars(t)
    if any(name in own for name in ("forward", "__call__", "get_params")):
        return False
    for hooks in ("_forward_hooks", "_forward_pre_hooks"):
        if own.get(hooks):
            return False
    if "_forward_hooks" in own:  # an nn.Module: hooks registered for every module apply too
        import torch.nn.modules.module as nn_module

        if getattr(nn_module, "_global_forward_hooks", None) or getattr(nn_module, "_global_forward_pre_hooks", None):
            return False
    return True


def _interpolation(T: Any, mode: Any) -> Optional[str]:
    """The constructors turn legacy ints into InterpolationMode; only the three
    natively supported modes are accepted."""
    if isinstance(mode, T.InterpolationMode) and mode.value in PIL_FILTERS:
        return str(mode.value)
    return None


def _crop_size(size: Any) -> Optional[Tuple[int, int]]:
    """(h, w) from a _setup_size result: two positive ints."""
    if isinstance(size, (tuple, list)) and len(size) == 2 and all(_is_int(v) and v > 0 for v in size):
        return int(size[0]), int(size[1])
    return None


def _padding(padding: Any) -> Optional[Tuple[int, int, int, int]]:
    """RandomCrop padding as (left, top, right, bottom), non-negative ints only."""
    if _is_int(padding):
        values = [padding]
    elif isinstance(padding, (tuple, list)) and len(padding) in (1, 2, 4):
        values = list(padding)
    else:
        return None
    if not all(_is_int(v) and v >= 0 for v in values):
        return None
    if len(values) == 1:
        return values[0], values[0], values[0], values[0]
    if len(values) == 2:
        return values[0], values[1], values[0], values[1]
    return values[0], values[1], values[2], values[3]


def _fill(fill: Any) -> Optional[Fill]:
    if fill is None:
        return 0
    if _is_real(fill):
        return fill
    if isinstance(fill, (tuple, list)) and fill and all(_is_real(v) for v in fill):
        return tuple(fill)
    return None


def _antialias_ok(antialias: Any) -> bool:
    # On PIL images torchvision 0.14 ignores antialias (always antialiased):
    # None, True and False give the same pixels; False only adds a warning.
    return antialias is None or isinstance(antialias, bool)


def _recognise(T: Any, t: Any, last: int, dtype: Optional[str]) -> Optional[_Step]:
    """The step for ``t`` if the pipeline can run it after stage ``last`` with
    the current tensor kind ``dtype``, else None."""
    geometry_ok = dtype is None  # geometric transforms here act on PIL images only
    if _is_plain(T, t, T.Resize):
        stage = _RESIZE_BEFORE if last < _RESIZE_BEFORE else _RESIZE_AFTER
        if not geometry_ok or last >= stage:
            return None
        interpolation = _interpolation(T, t.interpolation)
        size = t.size
        if _is_int(size):
            size = [size]
        if not isinstance(size, (list, tuple)) or len(size) not in (1, 2):
            return None
        if not all(_is_int(v) and v > 0 for v in size) or interpolation is None or not _antialias_ok(t.antialias):
            return None
        max_size = t.max_size
        if max_size is not None and (len(size) != 1 or not _is_int(max_size) or max_size <= size[0]):
            return None  # torchvision raises ValueError in forward: leave it to Python
        return _ResizeStep(stage, list(size), interpolation, max_size, t.antialias)
    if _is_plain(T, t, T.CenterCrop):
        hw = _crop_size(t.size)
        if not geometry_ok or last >= _CROP or hw is None:
            return None
        return _CenterCropStep(*hw)
    if _is_plain(T, t, T.RandomCrop):
        hw = _crop_size(t.size)
        if not geometry_ok or last >= _CROP or hw is None:
            return None
        padding = None
        if t.padding is not None:
            padding = _padding(t.padding)
            if padding is None:
                return None
        pads = t.padding is not None or bool(t.pad_if_needed)
        fill = _fill(t.fill)
        if not isinstance(t.pad_if_needed, bool) or (pads and (t.padding_mode != "constant" or fill is None)):
            return None
        return _RandomCropStep(hw[0], hw[1], padding, t.pad_if_needed, fill if fill is not None else 0)
    if _is_plain(T, t, T.RandomResizedCrop):
        hw = _crop_size(t.size)
        interpolation = _interpolation(T, t.interpolation)
        if not geometry_ok or last >= _CROP or hw is None or interpolation is None:
            return None
        scale, ratio = t.scale, t.ratio
        for pair in (scale, ratio):
            if not isinstance(pair, (tuple, list)) or len(pair) != 2 or not all(_is_real(v) for v in pair):
                return None
        if not (0 <= scale[0] <= scale[1] and 0 < ratio[0] <= ratio[1]) or not _antialias_ok(t.antialias):
            return None
        return _RandomResizedCropStep(hw[0], hw[1], tuple(scale), tuple(ratio), interpolation, t.antialias)
    if _is_plain(T, t, T.RandomHorizontalFlip):
        if not geometry_ok or last > _FLIP or not _is_real(t.p):
            return None
        return _FlipStep(t.p)
    if _is_plain(T, t, T.ToTensor) or _is_plain(T, t, T.PILToTensor):
        if last >= _TENSOR or dtype is not None:
            return None
        return _TensorStep("to_tensor" if type(t) is T.ToTensor else "pil_to_tensor")
    if _is_plain(T, t, T.ConvertImageDtype):
        import torch

        name = {torch.uint8: "uint8", torch.float32: "float32", torch.float64: "float64"}.get(t.dtype)
        if last >= _CONVERT or dtype is None or name is None:
            return None
        if dtype == "float" and name == "uint8":
            return None  # float -> uint8 scaling is not implemented natively
        return _ConvertStep(name)
    if _is_plain(T, t, T.Normalize):
        if last >= _NORMALIZE or dtype != "float" or not isinstance(t.inplace, bool):
            return None
        mean, std = t.mean, t.std
        if _is_real(mean):
            mean = (mean,)
        if _is_real(std):
            std = (std,)
        for values in (mean, std):
            if not isinstance(values, (tuple, list)) or not values or not all(_is_real(v) for v in values):
                return None
        return _NormalizeStep(NormalizeOp(tuple(mean), tuple(std), t.inplace))
    return None


# --- names that moved to the executors' modules ------------------------------------

# Imported on first use, so that this module alone (the plan) needs neither
# _core nor the rest of the package.
_MOVED = {
    "NativeSpec": "ufspack.transform_native",
    "native_spec": "ufspack.transform_native",
    "run_tail": "ufspack.transform_native",
    "resolve_fill": "ufspack.transform_oracle",
}


def __getattr__(name: str) -> Any:
    """``fast_transforms.native_spec`` and the other moved names (PEP 562)."""
    module = _MOVED.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
