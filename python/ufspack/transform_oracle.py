"""The reference executor of a fast-transforms plan: PIL and torch calls
identical to torchvision's, for any PIL mode.

:func:`execute` runs one sample's :class:`~ufspack.fast_transforms.SampleOps`
on a PIL image and returns what torchvision's transforms return (a PIL image,
or a tensor once converted).  It is the oracle the native executor
(:mod:`ufspack.transform_native`) is tested against, and what runs when the
native pipeline cannot (a mode it does not take, a padding fill it cannot
express).  Needs Pillow; torch only once a tensor is made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Tuple

if TYPE_CHECKING:
    import torch
    from PIL import Image

    from ufspack.fast_transforms import Fill, NormalizeOp, SampleOps

__all__ = ["execute", "normalize", "resolve_fill"]


def resolve_fill(fill: Fill, img: Image.Image) -> Fill:
    """torchvision.transforms.functional_pil._parse_fill for ``img``."""
    num_channels = len(img.getbands())
    if isinstance(fill, (int, float)) and num_channels > 1:
        fill = tuple([fill] * num_channels)
    if isinstance(fill, (list, tuple)):
        if len(fill) != num_channels:
            msg = "The number of elements in 'fill' does not match the number of channels of the image ({} != {})"
            raise ValueError(msg.format(len(fill), num_channels))
        fill = tuple(fill)
    if img.mode != "F":
        if isinstance(fill, (list, tuple)):
            fill = tuple(int(x) for x in fill)
        else:
            fill = int(fill)
    return fill


def _pad(img: Image.Image, pad: Tuple[int, int, int, int], fill: Fill) -> Image.Image:
    """functional_pil.pad, constant mode."""
    from PIL import ImageOps

    opts = resolve_fill(fill, img)
    if img.mode == "P":
        palette = img.getpalette()
        image = ImageOps.expand(img, border=pad, fill=opts)
        image.putpalette(palette)
        return image
    return ImageOps.expand(img, border=pad, fill=opts)


def _to_tensor(pic: Image.Image) -> torch.Tensor:
    """functional.to_tensor, PIL branch."""
    import numpy as np
    import torch

    default_float_dtype = torch.get_default_dtype()
    mode_to_nptype = {"I": np.int32, "I;16": np.int16, "F": np.float32}
    img = torch.from_numpy(np.array(pic, mode_to_nptype.get(pic.mode, np.uint8), copy=True))
    if pic.mode == "1":
        img = 255 * img
    img = img.view(pic.size[1], pic.size[0], len(pic.getbands()))
    img = img.permute((2, 0, 1)).contiguous()
    if isinstance(img, torch.ByteTensor):
        return img.to(dtype=default_float_dtype).div(255)
    return img


def _pil_to_tensor(pic: Image.Image) -> torch.Tensor:
    """functional.pil_to_tensor: a permuted (non-contiguous) view, like torchvision's."""
    import numpy as np
    import torch

    img = torch.as_tensor(np.array(pic, copy=True))
    img = img.view(pic.size[1], pic.size[0], len(pic.getbands()))
    return img.permute((2, 0, 1))


def _max_value(dtype: torch.dtype) -> int:
    import torch

    return {torch.uint8: 255, torch.int8: 127, torch.int16: 32767, torch.int32: 2**31 - 1}.get(dtype, 2**63 - 1)


def _convert_image_dtype(image: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """functional_tensor.convert_image_dtype for the conversions the plan admits
    (uint8 -> uint8/float, float -> float)."""
    if image.dtype == dtype:
        return image
    if image.is_floating_point():
        if dtype.is_floating_point:
            return image.to(dtype)
        raise AssertionError(f"float -> {dtype} is never planned")
    input_max = float(_max_value(image.dtype))
    if dtype.is_floating_point:
        image = image.to(dtype)
        return image / input_max
    raise AssertionError(f"{image.dtype} -> {dtype} is never planned")


def normalize(tensor: torch.Tensor, op: NormalizeOp) -> torch.Tensor:
    """functional_tensor.normalize."""
    import torch

    if not tensor.is_floating_point():
        raise TypeError(f"Input tensor should be a float tensor. Got {tensor.dtype}.")
    if not op.inplace:
        tensor = tensor.clone()
    dtype = tensor.dtype
    mean = torch.as_tensor(op.mean, dtype=dtype, device=tensor.device)
    std = torch.as_tensor(op.std, dtype=dtype, device=tensor.device)
    if (std == 0).any():
        raise ValueError(f"std evaluated to zero after conversion to {dtype}, leading to division by zero.")
    if mean.ndim == 1:
        mean = mean.view(-1, 1, 1)
    if std.ndim == 1:
        std = std.view(-1, 1, 1)
    return tensor.sub_(mean).div_(std)


def execute(img: Image.Image, ops: SampleOps) -> Any:
    """``ops`` on ``img`` with torchvision's own PIL and torch calls; raises
    ValueError when ``ops`` were sampled for another image size."""
    from PIL import Image as PILImage

    if img.size != ops.in_size:
        raise ValueError(f"ops were sampled for an image of {ops.in_size}, got {img.size}")
    if ops.resize_before is not None:
        r = ops.resize_before
        img = img.resize((r.width, r.height), r.pil_filter)
    if ops.crop is not None:
        c = ops.crop
        if c.pad != (0, 0, 0, 0):
            img = _pad(img, c.pad, c.fill)
        left, top, width, height = c.box
        img = img.crop((left, top, left + width, top + height))
    if ops.resize_after is not None:
        r = ops.resize_after
        img = img.resize((r.width, r.height), r.pil_filter)
    if ops.flip:
        img = img.transpose(PILImage.Transpose.FLIP_LEFT_RIGHT)
    if ops.tensor is None:
        return img
    x = _to_tensor(img) if ops.tensor == "to_tensor" else _pil_to_tensor(img)
    if ops.convert is not None:
        import torch

        x = _convert_image_dtype(x, getattr(torch, ops.convert))
    if ops.normalize is not None:
        x = normalize(x, ops.normalize)
    return x
