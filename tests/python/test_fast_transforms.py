"""ufspack.fast_transforms: recognition of the native prefix of a transform,
RNG-exact sampling and the PIL reference executor, checked bit for bit against
torchvision itself (same output and same torch RNG state afterwards)."""

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
from PIL import Image

torch = pytest.importorskip("torch")
T = pytest.importorskip("torchvision.transforms")

from ufspack.fast_transforms import FastPlan, SampleOps, plan_transform  # noqa: E402

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
IM = T.InterpolationMode
SEEDS = range(25)


def image(w, h, mode="RGB", seed=0):
    rng = np.random.default_rng(seed + 7 * w + 13 * h)
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([x * 255 // max(w - 1, 1), y * 255 // max(h - 1, 1), (x + y) * 3 % 256], -1)
    arr = np.clip(base + rng.integers(-40, 40, size=(h, w, 3)), 0, 255).astype(np.uint8)
    img = Image.fromarray(arr, "RGB")
    return img if mode == "RGB" else img.convert(mode)


def train(size=224, **kw):
    return T.Compose([T.RandomResizedCrop(size, **kw), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)])


def val(resize=256, crop=224, **kw):
    return T.Compose([T.Resize(resize, **kw), T.CenterCrop(crop), T.ToTensor(), T.Normalize(MEAN, STD)])


def same(a, b):
    if isinstance(a, torch.Tensor):
        # Strides too: PILToTensor's output is a permuted, non-contiguous view.
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.stride() == b.stride() and torch.equal(a, b)
    return (a.mode, a.size, a.tobytes()) == (b.mode, b.size, b.tobytes())


def run_native(plan, rest, img):
    ops = plan.sample(*img.size)
    out = plan.apply_pil(img, ops)
    return (rest(out) if rest is not None else out), ops


def assert_matches_torchvision(transform, img, seeds=SEEDS, prefix_draws=0, full=True):
    """For each seed: torchvision's output and RNG state after it equal the
    plan's.  ``prefix_draws`` random numbers are drawn first, so the RNG is
    not in a freshly seeded state.  Returns the sampled ops."""
    plan, rest = plan_transform(transform)
    if full:
        assert rest is None, plan
    all_ops = []
    for s in seeds:
        torch.manual_seed(s)
        torch.rand(prefix_draws)
        want = transform(img)
        want_state = torch.get_rng_state()
        torch.manual_seed(s)
        torch.rand(prefix_draws)
        got, ops = run_native(plan, rest, img)
        assert torch.equal(torch.get_rng_state(), want_state), (s, ops)
        assert same(want, got), (s, ops)
        all_ops.append(ops)
    return all_ops


# --- bit-exact against torchvision ------------------------------------------------------

SIZES = [(500, 375), (375, 500), (224, 224), (100, 80), (1, 300), (300, 1), (3000, 2), (2, 3000)]


@pytest.mark.parametrize("w,h", SIZES)
def test_imagenet_train_matches_torchvision(w, h):
    ops = assert_matches_torchvision(train(), image(w, h))
    for o in ops:
        left, top, cw, ch = o.crop.box
        assert 0 <= left and left + cw <= w and 0 <= top and top + ch <= h
        assert (o.resize_after.width, o.resize_after.height) == (224, 224) == o.out_size


def test_train_draws_vary_and_flip_both_ways():
    ops = assert_matches_torchvision(train(), image(500, 375), seeds=range(40))
    assert len({o.crop.box for o in ops}) > 30
    assert {o.flip for o in ops} == {False, True}


def test_train_from_an_arbitrary_rng_state():
    assert_matches_torchvision(train(), image(500, 375), prefix_draws=3)
    assert_matches_torchvision(train(), image(500, 375), prefix_draws=1001)


def test_train_fallback_crop_when_ten_attempts_fail():
    # scale > 1 makes every attempt too large: torchvision's central fallback.
    ops = assert_matches_torchvision(train(scale=(1.5, 2.0)), image(500, 375))
    assert ops[0].crop.box == (0, 0, 500, 375)
    ops = assert_matches_torchvision(train(scale=(1.5, 2.0), ratio=(1.0, 1.0)), image(500, 375))
    assert ops[0].crop.box == (62, 0, 375, 375)


@pytest.mark.parametrize(
    "kw",
    [
        {"interpolation": IM.BICUBIC},
        {"interpolation": IM.NEAREST},
        {"scale": (0.35, 1.0)},
        {"scale": (1, 1)},
        {"ratio": (1, 1)},
        {"ratio": (0.5, 2.0), "scale": (0.01, 0.5)},
        {"antialias": True},
    ],
)
def test_train_variants_match_torchvision(kw):
    assert_matches_torchvision(train(**kw), image(500, 375))
    assert_matches_torchvision(train(**kw), image(1, 300), seeds=range(5))


@pytest.mark.parametrize("size", [160, (160,), (128, 192), [192, 128]])
def test_train_int_and_sequence_sizes(size):
    assert_matches_torchvision(train(size), image(375, 500))


def test_legacy_int_interpolation_is_recognised():
    # torchvision 0.14 warns that an int is deprecated; 0.29 converts it
    # silently. Either way it is bicubic, natively too.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        t = train(interpolation=3)
    assert "RandomResizedCrop(224, bicubic)" in repr(plan_transform(t)[0])
    assert_matches_torchvision(t, image(500, 375), seeds=range(5))


def test_antialias_false_matches_pixels_and_warning():
    # On PIL images 0.14 ignores antialias (always on); False only warns, on every resize.
    t = T.Compose([T.RandomResizedCrop(64, antialias=False), T.ToTensor()])
    img = image(200, 150)
    with warnings.catch_warnings(record=True) as want:
        warnings.simplefilter("always")
        assert_matches_torchvision(t, img, seeds=range(3))
    messages = {str(w.message) for w in want}
    assert len(want) == 6 and len(messages) == 1 and "antialias" in messages.pop()


@pytest.mark.parametrize("w,h", [(500, 375), (375, 500), (256, 256), (100, 80), (1, 300), (300, 1), (31, 17)])
def test_imagenet_val_matches_torchvision(w, h):
    t = val() if min(w, h) > 1 else val(resize=8)  # Resize(256) of a 1-pixel edge is 76800 long
    ops = assert_matches_torchvision(t, image(w, h), seeds=range(2))
    assert ops[0].out_size == (224, 224)


def test_val_does_not_touch_the_rng():
    plan, _ = plan_transform(val())
    torch.manual_seed(3)
    state = torch.get_rng_state()
    plan.sample(500, 375)
    assert torch.equal(torch.get_rng_state(), state)


@pytest.mark.parametrize(
    "t",
    [
        val(interpolation=IM.BICUBIC),
        val(interpolation=IM.NEAREST),
        val(resize=(256,)),
        val(resize=(240, 320), crop=(200, 300)),
        val(resize=256, max_size=300),
        val(resize=256, crop=(224, 100)),
        val(resize=100, crop=224),  # the crop is larger than the image: padded with 0
        val(resize=99, crop=(224, 96)),  # odd padding, banker's rounding of the offset
        T.Compose([T.Resize(256), T.CenterCrop(224), T.Resize(112), T.ToTensor()]),
        T.Compose([T.Resize(300), T.Resize((128, 96)), T.ToTensor()]),
        T.Compose([T.CenterCrop(300), T.Resize(50, interpolation=IM.BICUBIC), T.ToTensor()]),
        T.Compose([T.Resize(50), T.RandomResizedCrop(32), T.RandomHorizontalFlip(), T.ToTensor()]),
    ],
    ids=repr,
)
def test_val_variants_match_torchvision(t):
    assert_matches_torchvision(t, image(500, 375), seeds=range(3))
    assert_matches_torchvision(t, image(375, 500), seeds=range(3))
    assert_matches_torchvision(t, image(41, 37), seeds=range(3))


def test_resize_max_size_caps_the_long_edge():
    t = T.Compose([T.Resize(256, max_size=300), T.ToTensor()])
    ops = assert_matches_torchvision(t, image(1000, 100), seeds=[0])
    assert (ops[0].resize_before.width, ops[0].resize_before.height) == (300, 30)
    # Both edges are truncated with int(), not rounded: 256 * 302 / 200 = 386.56, 300 * 256 / 386 = 198.96.
    ops = assert_matches_torchvision(t, image(302, 200), seeds=[0])
    assert (ops[0].resize_before.width, ops[0].resize_before.height) == (300, 198)
    ops = assert_matches_torchvision(T.Compose([T.Resize(256), T.ToTensor()]), image(200, 302), seeds=[0])
    assert (ops[0].resize_before.width, ops[0].resize_before.height) == (256, 386)


def test_resize_to_a_zero_edge_raises_like_torchvision():
    t = T.Compose([T.Resize(256, max_size=300), T.ToTensor()])
    plan, rest = plan_transform(t)
    img = image(3000, 2)
    with pytest.raises(ValueError) as want:
        t(img)
    with pytest.raises(ValueError) as got:
        run_native(plan, rest, img)
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("p", [0, 1, 0.0, 1.0, 0.3])
def test_flip_probability_matches_torchvision(p):
    t = T.Compose([T.RandomResizedCrop(96), T.RandomHorizontalFlip(p), T.ToTensor()])
    ops = assert_matches_torchvision(t, image(200, 150))
    if p in (0, 1):
        assert {o.flip for o in ops} == {bool(p)}


def test_two_flips_compose_and_draw_twice():
    t = T.Compose([T.RandomHorizontalFlip(), T.RandomHorizontalFlip(0.7), T.PILToTensor()])
    ops = assert_matches_torchvision(t, image(64, 48), seeds=range(30))
    assert {o.flip for o in ops} == {False, True}


@pytest.mark.parametrize(
    "t",
    [
        T.RandomCrop(32, padding=4),
        T.RandomCrop(32, padding=(1, 2)),
        T.RandomCrop((30, 34), padding=[1, 2, 3, 4], fill=(10, 20, 30)),
        T.RandomCrop(48, pad_if_needed=True, fill=7),
        T.RandomCrop(48, padding=3, pad_if_needed=True),
        T.RandomCrop((20, 80), pad_if_needed=True),
        T.RandomCrop(32),  # same size as the image: no RNG draw
        T.RandomCrop(16, padding_mode="reflect"),  # padding mode unused without padding
    ],
    ids=repr,
)
def test_random_crop_matches_torchvision(t):
    full = T.Compose([t, T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize((0.5,), (0.25,))])
    assert_matches_torchvision(full, image(32, 32))
    assert_matches_torchvision(full, image(40, 36), seeds=range(10))


def test_random_crop_same_size_draws_nothing():
    plan, _ = plan_transform(T.RandomCrop(32))
    torch.manual_seed(0)
    state = torch.get_rng_state()
    assert plan.sample(32, 32).crop.box == (0, 0, 32, 32)
    assert torch.equal(torch.get_rng_state(), state)


def test_random_crop_too_large_raises_like_torchvision():
    t = T.RandomCrop(64)
    plan, _ = plan_transform(t)
    with pytest.raises(ValueError) as want:
        t(image(40, 30))
    with pytest.raises(ValueError) as got:
        plan.sample(40, 30)
    assert str(got.value) == str(want.value)


def test_pil_to_tensor_and_convert_image_dtype():
    t = T.Compose([T.RandomResizedCrop(64), T.RandomHorizontalFlip(), T.PILToTensor()])
    ops = assert_matches_torchvision(t, image(200, 150))
    assert (ops[0].tensor, ops[0].dtype) == ("pil_to_tensor", "uint8")
    for dtype in (torch.float32, torch.float64, torch.uint8):
        t = T.Compose([T.RandomResizedCrop(64), T.PILToTensor(), T.ConvertImageDtype(dtype), T.Normalize(MEAN, STD)])
        if dtype == torch.uint8:
            t = T.Compose(t.transforms[:3])
        ops = assert_matches_torchvision(t, image(200, 150), seeds=range(5))
        assert ops[0].dtype == str(dtype)[len("torch.") :]


def test_to_tensor_then_float64():
    t = T.Compose([T.CenterCrop(50), T.ToTensor(), T.ConvertImageDtype(torch.float64), T.Normalize(MEAN, STD, True)])
    assert_matches_torchvision(t, image(64, 64), seeds=[0])


def test_to_tensor_follows_the_default_dtype_at_call_time():
    t = T.Compose([T.CenterCrop(50), T.ToTensor(), T.Normalize(MEAN, STD)])
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        ops = assert_matches_torchvision(t, image(64, 64), seeds=[0])
    finally:
        torch.set_default_dtype(old)
    assert ops[0].dtype == "float64"


@pytest.mark.parametrize("mode", ["L", "RGBA", "P", "I", "F", "1"])
def test_other_pil_modes_match_in_the_reference_executor(mode):
    # The dataset hands RGB images; the oracle still follows torchvision for any mode.
    img = image(60, 45, mode)
    assert_matches_torchvision(T.Compose([T.RandomResizedCrop(24), T.RandomHorizontalFlip()]), img, seeds=range(5))
    assert_matches_torchvision(T.Compose([T.RandomCrop(50, pad_if_needed=True), T.ToTensor()]), img, seeds=range(3))


def test_plan_without_tensor_stage_returns_pil():
    t = T.Compose([T.Resize(64), T.CenterCrop(64)])
    plan, rest = plan_transform(t)
    out = plan(image(100, 80))
    assert isinstance(out, Image.Image) and out.size == (64, 64) and rest is None
    assert_matches_torchvision(t, image(100, 80), seeds=[0])


def test_apply_pil_refuses_ops_for_another_size():
    plan, _ = plan_transform(train())
    with pytest.raises(ValueError, match="sampled for an image of"):
        plan.apply_pil(image(100, 80), plan.sample(80, 100))


# --- recognition: where the native run stops -------------------------------------------


def names(transform):
    return None if transform is None else [type(t).__name__ for t in transform.transforms]


def test_train_repr_and_full_plan():
    plan, rest = plan_transform(train())
    assert rest is None and plan.python is None and len(plan) == 4
    assert repr(plan) == (
        "FastPlan(native: RandomResizedCrop(224, bilinear) -> RandomHorizontalFlip(0.5) -> ToTensor -> Normalize;"
        " python: (none))"
    )


def test_val_repr():
    plan, rest = plan_transform(val(max_size=300, interpolation=IM.BICUBIC))
    assert plan.description == (
        "native: Resize(256, bicubic, max_size=300) -> CenterCrop(224) -> ToTensor -> Normalize; python: (none)"
    )


def test_python_rest_keeps_the_same_objects_and_repr():
    jitter = T.ColorJitter(0.4, 0.4, 0.4)
    erase = T.RandomErasing()
    t = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), jitter, T.ToTensor(), erase])
    plan, rest = plan_transform(t)
    assert isinstance(rest, T.Compose) and rest.transforms[0] is jitter and rest.transforms[2] is erase
    assert plan.python is rest
    assert plan.description == (
        "native: RandomResizedCrop(224, bilinear) -> RandomHorizontalFlip(0.5); "
        f"python: {jitter!r} -> ToTensor() -> {erase!r}"
    )
    assert_matches_torchvision(t, image(300, 200), seeds=range(10), full=False)


class MyCrop(T.RandomResizedCrop):
    pass


def hooked_flip():
    flip = T.RandomHorizontalFlip()
    flip.register_forward_hook(lambda module, args, out: out)
    return flip


def reversed_scale():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Scale and ratio should be of kind (min, max)"
        return T.RandomResizedCrop(8, scale=(0.9, 0.1))


def patched_resize():
    resize = T.Resize(10)
    resize.forward = lambda img: img
    return resize


@pytest.mark.parametrize(
    "transforms,native,python",
    [
        # orders the pipeline cannot express
        ([T.RandomResizedCrop(8), T.Normalize(MEAN, STD), T.ToTensor()], 1, ["Normalize", "ToTensor"]),
        ([T.ToTensor(), T.ToTensor()], 1, ["ToTensor"]),
        ([T.ToTensor(), T.PILToTensor()], 1, ["PILToTensor"]),
        ([T.RandomResizedCrop(8), T.Resize(4), T.ToTensor()], 1, ["Resize", "ToTensor"]),
        ([T.Resize(8), T.CenterCrop(8), T.Resize(4), T.Resize(2)], 3, ["Resize"]),
        ([T.CenterCrop(8), T.RandomCrop(4)], 1, ["RandomCrop"]),
        ([T.RandomHorizontalFlip(), T.RandomResizedCrop(8)], 1, ["RandomResizedCrop"]),
        ([T.RandomHorizontalFlip(), T.Resize(8)], 1, ["Resize"]),
        ([T.ToTensor(), T.RandomHorizontalFlip()], 1, ["RandomHorizontalFlip"]),
        ([T.ToTensor(), T.CenterCrop(4)], 1, ["CenterCrop"]),
        ([T.ToTensor(), T.Normalize(MEAN, STD), T.Normalize(MEAN, STD)], 2, ["Normalize"]),
        ([T.ToTensor(), T.Normalize(MEAN, STD), T.ConvertImageDtype(torch.float64)], 2, ["ConvertImageDtype"]),
        ([T.PILToTensor(), T.Normalize(MEAN, STD)], 1, ["Normalize"]),  # uint8: torchvision raises
        ([T.ConvertImageDtype(torch.float32)], 0, ["ConvertImageDtype"]),  # on a PIL image
        # argument values the pipeline does not implement
        ([T.RandomResizedCrop(8, interpolation=IM.LANCZOS)], 0, ["RandomResizedCrop"]),
        ([T.Resize(8, interpolation=IM.BOX)], 0, ["Resize"]),
        ([T.Resize((8, 8), max_size=10)], 0, ["Resize"]),  # torchvision raises in forward
        ([T.Resize(8, max_size=8)], 0, ["Resize"]),  # torchvision raises in forward
        ([reversed_scale()], 0, ["RandomResizedCrop"]),
        ([T.RandomResizedCrop(8, ratio=(0, 1))], 0, ["RandomResizedCrop"]),
        ([T.RandomCrop(8, padding=2, padding_mode="reflect")], 0, ["RandomCrop"]),
        ([T.RandomCrop(8, pad_if_needed=True, padding_mode="edge")], 0, ["RandomCrop"]),
        ([T.RandomCrop(8, padding=-1)], 0, ["RandomCrop"]),
        ([T.ToTensor(), T.ConvertImageDtype(torch.float16)], 1, ["ConvertImageDtype"]),
        ([T.ToTensor(), T.ConvertImageDtype(torch.uint8)], 1, ["ConvertImageDtype"]),
        # unknown or altered transforms
        ([T.CenterCrop(8), T.Lambda(lambda x: x), T.ToTensor()], 1, ["Lambda", "ToTensor"]),
        ([T.CenterCrop(8), T.RandomVerticalFlip()], 1, ["RandomVerticalFlip"]),
        ([MyCrop(8), T.ToTensor()], 0, ["MyCrop", "ToTensor"]),
        ([T.CenterCrop(8), hooked_flip()], 1, ["RandomHorizontalFlip"]),
        ([patched_resize()], 0, ["Resize"]),
        ([T.Compose([T.CenterCrop(8)]), T.ToTensor()], 0, ["Compose", "ToTensor"]),
    ],
)
def test_native_run_stops_at_the_first_unsupported_transform(transforms, native, python):
    t = T.Compose(transforms)
    plan, rest = plan_transform(t)
    assert len(plan) == native
    assert names(rest) == python
    if native == 0:
        assert rest is t and not plan
    else:
        assert rest.transforms == transforms[native:]
        assert plan.description.endswith("python: " + " -> ".join(repr(x) for x in transforms[native:]))


def test_global_module_hooks_stop_recognition():
    handle = torch.nn.modules.module.register_module_forward_hook(lambda module, args, out: out)
    try:
        plan, rest = plan_transform(train())
    finally:
        handle.remove()
    assert not plan and rest is not None
    assert len(plan_transform(train())[0]) == 4


def test_empty_prefix_returns_empty_plan_and_the_original_transform():
    jitter = T.ColorJitter(0.4)
    t = T.Compose([jitter, T.RandomResizedCrop(224), T.ToTensor()])
    plan, rest = plan_transform(t)
    assert rest is t and t.transforms[0] is jitter and len(t.transforms) == 3
    assert not plan and len(plan) == 0 and plan.python is t
    assert plan.description.startswith("native: (none); python: ColorJitter(")
    ops = plan.sample(10, 10)
    assert ops == SampleOps((10, 10), None, None, None, False, (10, 10), None, None, None, None)


def test_single_transforms_and_none():
    flip = T.RandomHorizontalFlip()
    plan, rest = plan_transform(flip)
    assert rest is None and repr(plan) == "FastPlan(native: RandomHorizontalFlip(0.5); python: (none))"
    jitter = T.ColorJitter(0.4)
    plan, rest = plan_transform(jitter)
    assert rest is jitter and not plan
    plan, rest = plan_transform(None)
    assert rest is None and not plan and repr(plan) == "FastPlan(native: (none); python: (none))"
    assert isinstance(plan, FastPlan)


def test_empty_compose_is_all_native():
    plan, rest = plan_transform(T.Compose([]))
    assert rest is None and not plan


def test_importable_without_torch_torchvision_or_core():
    """Loaded by path with torch and torchvision blocked (so neither ufspack's
    __init__ nor _core is imported): nothing is recognised."""
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "..", "python", "ufspack", "fast_transforms.py")
    code = f"""
import importlib.util, sys
sys.modules["torch"] = None
sys.modules["torchvision"] = None
spec = importlib.util.spec_from_file_location("fast_transforms", {path!r})
mod = sys.modules["fast_transforms"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
assert "ufspack._core" not in sys.modules
marker = object()
plan, rest = mod.plan_transform(marker)
assert rest is marker and not plan, plan
print(repr(plan))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("FastPlan(native: (none); python: <object object at")
