"""How ``MyImageFolder`` makes a sample: one pipeline class per mode.

The dataset picks its pipeline with :func:`select` when it is constructed
and again whenever an attribute the choice depends on (``transform``,
``fast_transforms``, ``output``, ``cache_decoded``) is assigned; nothing is
decided again per sample.  The modes:

  RawPipeline          ``output="bytes"`` or a ``bytes_loader``: the record's bytes
  PilPipeline          the default: decoded in C++ into a PIL image
  ArrayPipeline        ``output="numpy"`` / ``"tensor"``: decoded in C++ into an array
  FusedPipeline        ``fast_transforms``: decode and leading transforms fused natively
  CachedPipeline       ``cache_decoded``: the pixels after the cached transforms,
                       from the decoded cache (or on a miss from Pil/ArrayPipeline)
  CachedFusedPipeline  ``cache_decoded`` with ``fast_transforms``

Contract, shared by all (:class:`Pipeline`): ``load_one(reader, rec)``
returns record ``rec``'s sample with the dataset's whole ``transform``
applied (the target is the dataset's business), or :class:`Failed` for a
failure that ``on_error`` covers (a damaged record, bytes no decoder or
``bytes_loader`` takes); anything else raises.  ``load_many`` does the same
for a batch, reading it with ``threads`` threads up front and yielding the
samples in order, each transformed only when it is reached (so that the
transforms, and the substitutes ``on_error`` loads between them, draw from
torch's RNG in sample order).  Each sample costs one native record lookup.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, Iterator, List, Optional, Sequence

import numpy as np

from ufspack import _core
from ufspack import cache as _cache
from ufspack import decoded as _decoded
from ufspack.fast_transforms import FastPlan
from ufspack.transform_native import native_output, native_spec, native_value

if TYPE_CHECKING:
    from ufspack.dataset import ImageFolder

Transform = Optional[Callable[[Any], Any]]


class Failed:
    """A sample that failed in a way ``on_error`` covers (``error``)."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


def pil_loader_from_bytes(data: bytes) -> Any:
    """The default PIL path: exactly torchvision's pil_loader, on bytes.

    ``Image.open(f).convert("RGB")`` where ``f`` holds the file's bytes.
    """
    import io

    from PIL import Image

    with Image.open(io.BytesIO(data)) as img:
        return img.convert("RGB")


def pil_named(ds: ImageFolder, raw: bytes, reader: _core.Reader, rec: int) -> Any:
    """PIL's RGB image of ``raw``; a failure keeps its type and names the sample."""
    try:
        return pil_loader_from_bytes(raw)
    except Exception as e:  # name the sample, keep the type
        path = ds._path_of_name(reader.name(rec))
        try:
            err = type(e)(f"{path}: {e}")
        except Exception:
            err = OSError(f"{path}: {e}")
        raise err from e


class Pipeline:
    """Record index -> transformed sample; see the module's docstring."""

    def __init__(self, ds: ImageFolder, transform: Transform) -> None:
        self.ds = ds
        self.transform = transform  # what runs in Python after the pipeline's own work

    def load_one(self, reader: _core.Reader, rec: int) -> Any:
        """Record ``rec``'s transformed sample, or Failed."""
        raise NotImplementedError

    def load_many(self, reader: _core.Reader, recs: List[int], threads: int, isolate: bool) -> Iterator[Any]:
        """``load_one`` of each record, in order, read up front.  A damaged
        record in a batch read raises unless ``isolate``: then the batch is
        redone record by record, the damaged one a Failed."""
        return (self.load_one(reader, rec) for rec in recs)


class _ReadThenConvert(Pipeline):
    """A native read (``read`` / ``read_many``: a damaged record raises
    CorruptPackError), then ``convert`` in Python (any exception there is a
    Failed), then the transform."""

    def read(self, reader: _core.Reader, rec: int) -> Any:
        raise NotImplementedError

    def read_many(self, reader: _core.Reader, recs: List[int], threads: int) -> Sequence[Any]:
        raise NotImplementedError

    def convert(self, raw: Any, reader: _core.Reader, rec: int) -> Any:
        return raw

    def finish(self, raw: Any, reader: _core.Reader, rec: int) -> Any:
        """``convert`` then the transform; a conversion failure is a Failed."""
        try:
            x = self.convert(raw, reader, rec)
        except Exception as e:
            return Failed(e)
        t = self.transform
        return x if t is None else t(x)

    def load_one(self, reader: _core.Reader, rec: int) -> Any:
        try:
            raw = self.read(reader, rec)
        except _core.CorruptPackError as e:
            return Failed(e)
        return self.finish(raw, reader, rec)

    def load_many(self, reader: _core.Reader, recs: List[int], threads: int, isolate: bool) -> Iterator[Any]:
        try:
            raws = self.read_many(reader, recs, threads)
        except _core.CorruptPackError:
            if not isolate:
                raise
            return (self.load_one(reader, rec) for rec in recs)
        return (self.finish(raw, reader, rec) for raw, rec in zip(raws, recs))


class RawPipeline(_ReadThenConvert):
    """``output="bytes"`` (``loader`` None: the file's bytes) or a
    ``bytes_loader`` (``loader``), called on the file's bytes."""

    def __init__(self, ds: ImageFolder, transform: Transform, loader: Optional[Callable[[bytes], Any]]) -> None:
        super().__init__(ds, transform)
        self.loader = loader

    def read(self, reader: _core.Reader, rec: int) -> Any:
        return reader.read(rec)

    def read_many(self, reader: _core.Reader, recs: List[int], threads: int) -> Sequence[Any]:
        return reader.read_batch(recs, threads)

    def convert(self, raw: Any, reader: _core.Reader, rec: int) -> Any:
        return raw if self.loader is None else self.loader(raw)


class _Decoded(_ReadThenConvert):
    """The default decoder (C++, PIL for what it does not take): a read
    gives (pixels or None, the bytes PIL must decode when None)."""

    output = "numpy"

    def convert(self, raw: Any, reader: _core.Reader, rec: int) -> Any:
        return self.to_output(raw[0], raw[1], reader, rec)

    def load_one(self, reader: _core.Reader, rec: int) -> Any:
        # _ReadThenConvert.load_one with finish and convert folded in: the
        # per-sample path of every decoding mode.
        try:
            x, raw = self.read(reader, rec)
        except _core.CorruptPackError as e:
            return Failed(e)
        try:
            x = self.to_output(x, raw, reader, rec)
        except Exception as e:
            return Failed(e)
        t = self.transform
        return x if t is None else t(x)

    def to_output(self, arr: Any, raw: Optional[bytes], reader: _core.Reader, rec: int) -> Any:
        """The sample in the dataset's ``output`` from ``arr``: an HxWx3
        array, a PIL image (``output="pil"``: the image read_decode_pil
        decoded into), or None with ``raw`` the bytes PIL must decode."""
        if arr is not None and not isinstance(arr, np.ndarray):
            return arr  # a PIL image (output="pil" only)
        if arr is None:
            assert raw is not None  # read_decode gives the bytes it could not decode
            img = pil_named(self.ds, raw, reader, rec)
            if self.output == "pil":
                return img
            arr = np.array(img)  # a writable copy (torch.from_numpy needs one)
        if self.output == "pil":
            from PIL import Image

            return Image.fromarray(arr, "RGB")
        if self.output == "numpy":
            return arr
        import torch

        t = torch.from_numpy(np.ascontiguousarray(arr)).permute(2, 0, 1).contiguous()
        return _as_tv_image(t)


class PilPipeline(_Decoded):
    """The default: ``read_decode_pil`` decodes into a new PIL image
    (``MyImageFolder._new_rgb_image``, looked up per sample)."""

    output = "pil"

    def read(self, reader: _core.Reader, rec: int) -> Any:
        return reader.read_decode_pil(rec, self.ds._new_rgb_image)

    def read_many(self, reader: _core.Reader, recs: List[int], threads: int) -> Sequence[Any]:
        return reader.read_decode_pil_batch(recs, self.ds._new_rgb_image, threads)


class ArrayPipeline(_Decoded):
    """``output="numpy"`` or ``"tensor"``: ``read_decode``'s pixels."""

    def __init__(self, ds: ImageFolder, transform: Transform, output: str) -> None:
        super().__init__(ds, transform)
        self.output = output

    def read(self, reader: _core.Reader, rec: int) -> Any:
        return reader.read_decode(rec)

    def read_many(self, reader: _core.Reader, recs: List[int], threads: int) -> Sequence[Any]:
        return reader.read_decode_batch(recs, threads)


def _tv_image_class() -> Any:
    """torchvision's ``tv_tensors.Image`` (>= 0.16), or None.  Looked up
    once: a failed import is not cached by Python and would be retried,
    searching sys.path, for every sample."""
    global _TV_IMAGE
    if _TV_IMAGE is _UNSET:
        try:
            from torchvision import tv_tensors

            _TV_IMAGE = tv_tensors.Image
        except ImportError:
            _TV_IMAGE = None
    return _TV_IMAGE


_UNSET: Any = object()
_TV_IMAGE: Any = _UNSET


def _as_tv_image(t: Any) -> Any:
    """``tv_tensors.Image`` around a CHW uint8 tensor where torchvision has
    it, so transforms v2 treat it as an image; the plain tensor elsewhere."""
    image = _tv_image_class()
    return t if image is None else image(t)


# --- the decoded cache -------------------------------------------------------------


class _Table:
    """This process's handle on a decoded-cache sample table (opened on
    first use in each process, kept in ``ds._dtables`` by name); None when
    the cache cannot be used (reported once: samples are then decoded
    every time)."""

    def __init__(self, ds: ImageFolder, name: bytes) -> None:
        self.ds = ds
        self.name = name

    def get_table(self) -> Optional[_core.SampleTable]:
        ds = self.ds
        pid = os.getpid()
        got = ds._dtables.get(self.name)
        if got is None or got[0] != pid:
            table = None
            assert ds.cache is not None
            native = ds.cache._native_or_none()
            if native is not None:
                try:
                    table = native.open_sample_table(self.name, len(ds._pack))
                except (OSError, ValueError) as e:
                    _cache.warn_once(
                        f"{ds.cache.dir}:{self.name!r}", f"cache {ds.cache.dir}: decoded samples not cached ({e})"
                    )
            got = (pid, table)
            ds._dtables[self.name] = got
        return got[1]

    def get(self, rec: int) -> Optional[np.ndarray]:
        """The cached pixels of record ``rec`` (read-only), or None."""
        table = self.get_table()
        data = None if table is None else table.get(rec)
        return None if data is None else _decoded.decode_pixels(data)

    def put(self, rec: int, sample: Any) -> None:
        """Caches the pixels of ``sample`` (a PIL image, an HxWx3 array or a
        3xHxW uint8 tensor) for record ``rec``; a full cache refuses them."""
        if isinstance(sample, np.ndarray):
            arr = sample
        elif hasattr(sample, "permute"):  # a torch tensor
            arr = sample.permute(1, 2, 0).numpy()
        elif getattr(sample, "mode", None) == "RGB":
            arr = np.asarray(sample)
        else:
            return
        table = self.get_table()
        if table is None:
            return
        data = _decoded.encode_pixels(arr)
        if data is not None:
            table.put(rec, data)


class CachedPipeline(Pipeline):
    """``cache_decoded`` without fast transforms: the sample after the
    cached transforms (``d.prefix``) comes from the cache, or on a miss from
    ``inner`` (a Pil/ArrayPipeline without transform), is run through them
    and cached; then ``d.rest`` runs."""

    def __init__(self, ds: ImageFolder, d: _decoded.DecodedPlan, inner: _Decoded) -> None:
        super().__init__(ds, d.rest)
        assert d.name is not None and not d.fast
        self.d = d
        self.inner = inner
        self.table = _Table(ds, d.name)

    def _hit(self, arr: np.ndarray, reader: _core.Reader, rec: int) -> Any:
        # numpy and torch get a writable copy
        x = self.inner.to_output(arr if self.inner.output == "pil" else arr.copy(), None, reader, rec)
        t = self.transform
        return x if t is None else t(x)

    def _miss(self, x: Any, rec: int) -> Any:
        """``x``: the inner pipeline's sample (or Failed)."""
        if isinstance(x, Failed):
            return x
        x = self.d.apply_prefix(x)
        self.table.put(rec, x)
        t = self.transform
        return x if t is None else t(x)

    def load_one(self, reader: _core.Reader, rec: int) -> Any:
        arr = self.table.get(rec)
        if arr is not None:
            return self._hit(arr, reader, rec)
        return self._miss(self.inner.load_one(reader, rec), rec)

    def load_many(self, reader: _core.Reader, recs: List[int], threads: int, isolate: bool) -> Iterator[Any]:
        hits = [self.table.get(rec) for rec in recs]
        miss = [rec for rec, arr in zip(recs, hits) if arr is None]
        try:
            raws = iter(self.inner.read_many(reader, miss, threads) if miss else ())
        except _core.CorruptPackError:
            if not isolate:
                raise
            return (self.load_one(reader, rec) for rec in recs)
        return self._batch(reader, recs, hits, raws)

    def _batch(self, reader: _core.Reader, recs: List[int], hits: List[Any], raws: Iterator[Any]) -> Iterator[Any]:
        for rec, arr in zip(recs, hits):
            if arr is not None:
                yield self._hit(arr, reader, rec)
                continue
            raw = next(raws)
            try:
                x = self.inner.convert(raw, reader, rec)
            except Exception as e:
                x = Failed(e)
            yield self._miss(x, rec)


# --- fast transforms -----------------------------------------------------------------


def _prepare(reader: _core.Reader, recs: List[int], threads: int) -> List[Any]:
    """read_prepare(_batch) of ``recs``: per record its Prepared, or
    Failed for a damaged record."""
    try:
        if len(recs) == 1:
            return [reader.read_prepare(recs[0])]
        return list(reader.read_prepare_batch(recs, threads))
    except _core.CorruptPackError as e:
        if len(recs) == 1:
            return [Failed(e)]
    prepared: List[Any] = []  # find which: record by record
    for r in recs:
        try:
            prepared.append(reader.read_prepare(r))
        except _core.CorruptPackError as e2:
            prepared.append(Failed(e2))
    return prepared


class _Native(Pipeline):
    """Shared by the fused pipelines: PIL's decode where only PIL decodes."""

    def pil_pixels(self, p: Any, reader: _core.Reader, rec: int) -> Any:
        """PIL's image of the prepared sample ``p`` (for what only PIL
        decodes), its pixels handed to ``p``; or Failed."""
        try:
            img = pil_named(self.ds, p.data, reader, rec)
        except Exception as e:
            return Failed(e)
        p.set_pixels(np.asarray(img))
        return img

    def _rest(self, results: List[Any]) -> Iterator[Any]:
        """The Python transform on each native result, lazily, in order."""
        t = self.transform
        for x in results:
            yield x if t is None or isinstance(x, Failed) else t(x)


class FusedPipeline(_Native):
    """``fast_transforms``: the plan's native run fused with the decode,
    then ``plan.python`` (the rest of ``transform``).  The random
    parameters are drawn sample by sample, in order, after the sample's
    image size is known and before the next sample's: the order
    torchvision draws them in."""

    def __init__(self, ds: ImageFolder, plan: FastPlan, dct: bool) -> None:
        super().__init__(ds, plan.python)
        self.plan = plan
        self.dct = dct

    def load_one(self, reader: _core.Reader, rec: int) -> Any:
        # native_batch for one record, without its lists.
        try:
            p = reader.read_prepare(rec)
        except _core.CorruptPackError as e:
            return Failed(e)
        img = None
        if p.kind == "pil":
            img = self.pil_pixels(p, reader, rec)
            if isinstance(img, Failed):
                return img
        ops = self.plan.sample(p.width, p.height)
        ns = native_spec(ops, self.dct)
        if ns is None:  # not expressible natively: torchvision's own calls
            if img is None:
                img = self.pil_pixels(p, reader, rec)
                if isinstance(img, Failed):
                    return img
            x = self.plan.apply_pil(img, ops)
        else:
            value, buf = native_output(ns)
            (status,) = _core.transform_batch([p], [ns.spec], [buf], 1)
            if status is not None:  # libjpeg warned: PIL decodes, as the exact path does
                img = self.pil_pixels(p, reader, rec)
                if isinstance(img, Failed):
                    return img
                _core.transform_batch([p], [ns.spec], [buf], 1)
            x = native_value(ns, value)
        t = self.transform
        return x if t is None else t(x)

    def load_many(self, reader: _core.Reader, recs: List[int], threads: int, isolate: bool) -> Iterator[Any]:
        return self._rest(self.native_batch(reader, recs, threads))

    def native_batch(self, reader: _core.Reader, recs: List[int], threads: int) -> List[Any]:
        """The native run of the plan for a batch, in order: per sample its
        output (before ``plan.python``), or Failed."""
        plan = self.plan
        prepared = _prepare(reader, recs, threads)
        results: List[Any] = [None] * len(recs)
        todo = []  # (i, prepared, NativeSpec, value, buffer)
        for i, p in enumerate(prepared):
            if isinstance(p, Failed):
                results[i] = p
                continue
            img = None
            if p.kind == "pil":
                img = self.pil_pixels(p, reader, recs[i])
                if isinstance(img, Failed):
                    results[i] = img
                    continue
            ops = plan.sample(p.width, p.height)
            ns = native_spec(ops, self.dct)
            if ns is None:  # not expressible natively: torchvision's own calls
                if img is None:
                    img = self.pil_pixels(p, reader, recs[i])
                    if isinstance(img, Failed):
                        results[i] = img
                        continue
                results[i] = plan.apply_pil(img, ops)
                continue
            value, buf = native_output(ns)
            todo.append((i, p, ns, value, buf))
        if todo:
            specs = [t[2].spec for t in todo]
            status = _core.transform_batch([t[1] for t in todo], specs, [t[4] for t in todo], threads)
            for (i, p, ns, value, buf), st in zip(todo, status):
                if st is not None:  # libjpeg warned: PIL decodes, as the exact path does
                    img = self.pil_pixels(p, reader, recs[i])
                    if isinstance(img, Failed):
                        results[i] = img
                        continue
                    _core.transform_batch([p], [ns.spec], [buf], 1)
                results[i] = native_value(ns, value)
        return results


class CachedFusedPipeline(_Native):
    """``cache_decoded`` with ``fast_transforms``: each sample's pixels
    after the cached transforms come from the cache, or on a miss from
    their native run (then cached); the rest of the plan runs natively on
    the pixels, then its Python rest.  The random parameters are drawn
    sample by sample, in order, for the size of the cached part's output,
    before that part runs on a miss: the same draws, for the same samples
    (a JPEG found damaged while decoding has had its draws, as without the
    cache)."""

    def __init__(self, ds: ImageFolder, d: _decoded.DecodedPlan, dct: bool) -> None:
        assert d.name is not None and d.fast and d.prefix_plan is not None and d.rest_plan is not None
        super().__init__(ds, d.rest_plan.python)
        self.d = d
        self.prefix_plan: FastPlan = d.prefix_plan
        self.rest_plan: FastPlan = d.rest_plan
        self.dct = dct
        self.table = _Table(ds, d.name)

    def load_one(self, reader: _core.Reader, rec: int) -> Any:
        (x,) = self.load_many(reader, [rec], 1, True)
        return x

    def load_many(self, reader: _core.Reader, recs: List[int], threads: int, isolate: bool) -> Iterator[Any]:
        return self._rest(self.native_batch(reader, recs, threads))

    def native_batch(self, reader: _core.Reader, recs: List[int], threads: int) -> List[Any]:
        """Per sample its output before the Python rest, or Failed, in order."""
        from PIL import Image

        n = len(recs)
        results: List[Any] = [None] * n
        pixels: List[Optional[np.ndarray]] = [self.table.get(rec) for rec in recs]
        miss = [i for i in range(n) if pixels[i] is None]

        def pil_pixels(i: int, p: Any) -> bool:
            img = self.pil_pixels(p, reader, recs[i])
            if isinstance(img, Failed):
                results[i] = img
                return False
            return True

        # The misses, read and probed (PIL decodes what only PIL can).
        prepared = {}
        for i, p in zip(miss, _prepare(reader, [recs[i] for i in miss], threads) if miss else []):
            if isinstance(p, Failed):
                results[i] = p
            elif p.kind != "pil" or pil_pixels(i, p):
                prepared[i] = p
        # The draws, in order.
        prefix_ops = {}
        rest_ops = {}
        for i in range(n):
            arr = pixels[i]
            if arr is not None:
                w, h = arr.shape[1], arr.shape[0]
            elif i in prepared:
                p = prepared[i]
                prefix_ops[i] = self.prefix_plan.sample(p.width, p.height)  # draws nothing
                w, h = prefix_ops[i].out_size
            else:
                continue
            rest_ops[i] = self.rest_plan.sample(w, h)
        # The cached part of the misses, natively, cached.
        todo = []  # (i, prepared, NativeSpec, buffer)
        for i, p in prepared.items():
            ns = native_spec(prefix_ops[i], self.dct)
            assert ns is not None and ns.output == "rgb"
            todo.append((i, p, ns, np.empty((ns.spec.out_height, ns.spec.out_width, 3), np.uint8)))
        if todo:
            specs = [t[2].spec for t in todo]
            status = _core.transform_batch([t[1] for t in todo], specs, [t[3] for t in todo], threads)
            for (i, p, ns, buf), st in zip(todo, status):
                if st is not None:  # libjpeg warned: PIL decodes, as the uncached path does
                    if not pil_pixels(i, p):
                        continue
                    _core.transform_batch([p], [ns.spec], [buf], 1)
                pixels[i] = buf
                self.table.put(recs[i], buf)
        # The rest of the plan, on the pixels.
        rest = []  # (i, prepared, NativeSpec, value, buffer)
        for i, ops in rest_ops.items():
            arr = pixels[i]
            if results[i] is not None or arr is None:
                continue
            if not self.rest_plan:  # nothing native left: the Python rest gets PIL's image
                results[i] = Image.fromarray(arr, "RGB")
                continue
            ns = native_spec(ops, self.dct)
            if ns is None:  # not expressible natively: torchvision's own calls
                results[i] = self.rest_plan.apply_pil(Image.fromarray(arr, "RGB"), ops)
                continue
            p = _core.Prepared()
            p.set_pixels(arr)
            value, buf = native_output(ns)
            rest.append((i, p, ns, value, buf))
        if rest:
            _core.transform_batch([t[1] for t in rest], [t[2].spec for t in rest], [t[4] for t in rest], threads)
            for i, _, ns, value, _ in rest:
                results[i] = native_value(ns, value)
        return results


# --- the choice ----------------------------------------------------------------------


def select(ds: ImageFolder) -> Pipeline:
    """The pipeline for ``ds``'s current settings; also sets ``ds._plan``
    (the fast plan, None when fast_transforms is off) and ``ds._dplan``
    (the decoded-cache plan, None when cache_decoded is off)."""
    from ufspack import fast_transforms as _ft

    transform = ds.transform
    plan = _ft.plan_transform(transform)[0] if ds.fast_transforms else None
    ds._plan = plan
    fast = plan is not None and bool(plan)
    dct = ds.fast_transforms is True
    d = None
    if ds.cache_decoded:
        d = _decoded.make_plan(transform, ds.output, ds.fast_transforms, plan if fast else None, ds._pack_id)
    ds._dplan = d
    if d is not None and d.name is not None:
        if d.fast:
            return CachedFusedPipeline(ds, d, dct)
        inner: _Decoded = PilPipeline(ds, None) if ds.output == "pil" else ArrayPipeline(ds, None, ds.output)
        return CachedPipeline(ds, d, inner)
    if fast:
        assert plan is not None
        return FusedPipeline(ds, plan, dct)
    if ds._custom_loader is not None:
        return RawPipeline(ds, transform, ds._custom_loader)
    if ds.output == "bytes":
        return RawPipeline(ds, transform, None)
    if ds.output == "pil":
        return PilPipeline(ds, transform)
    return ArrayPipeline(ds, transform, ds.output)
