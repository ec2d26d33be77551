"""Multi-file samples: the files that share a key, read as one sample.

WebDataset's convention: a record's *key* is its name up to the first ``.``
of its last component and its *field* the rest, so ``train/000123.jpg``,
``train/000123.cls`` and ``train/000123.seg.png`` are the fields ``jpg``,
``cls`` and ``seg.png`` of sample ``train/000123``.  The records of a key
are consecutive in every pack's index, and the packer writes them back to
back in ``data.ufs``, so a whole sample is read with one request (one
``pread``, one ranged GET; ``Reader::ReadRange``).
"""

from __future__ import annotations

import bisect
import io
import json
import os
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from ufspack import _core

# Fields decoded as images (to an RGB PIL image, as ImageFolder's loader
# gives): the extensions torchvision's ImageFolder accepts.
IMAGE_FIELDS = frozenset(("jpg", "jpeg", "png", "ppm", "bmp", "pgm", "tif", "tiff", "webp"))


def decode_field(field: str, data: bytes) -> Any:
    """A field's value as WebDataset's default decoders give it: images
    (by the field's last extension, case-insensitive) as RGB PIL images
    (decoded by ufspack's decoder where it can, else by PIL); ``cls``,
    ``cls2``, ``index`` as int; ``txt``, ``text`` as str; ``json`` parsed;
    anything else as bytes."""
    ext = field.rsplit(".", 1)[-1].lower()
    if ext in IMAGE_FIELDS:
        from PIL import Image

        pixels = _core.decode_rgb(data)
        if pixels is not None:
            return Image.fromarray(pixels, "RGB")
        with Image.open(io.BytesIO(data)) as img:
            return img.convert("RGB")
    if ext in ("cls", "cls2", "index"):
        return int(data.decode("ascii").strip())
    if ext in ("txt", "text"):
        return data.decode("utf-8")
    if ext == "json":
        return json.loads(data)
    return data


class SampleIndex:
    """Where each sample of a pack starts, and how to find one by key.

    Built on first use (one pass over the index's names, in C++) and kept;
    ``starts[s]`` is the first record of sample ``s``, ``starts[-1]`` the
    record count.
    """

    def __init__(self, reader: Any) -> None:
        starts, fields, complete = reader.sample_starts()
        self.starts = starts
        self.fields = [os.fsdecode(f) for f in fields]
        self._fields_complete = complete

    def __len__(self) -> int:
        return len(self.starts) - 1

    def span(self, s: int) -> Tuple[int, int]:
        """(first record, record count) of sample ``s``."""
        n = len(self)
        if s < 0:
            s += n
        if not 0 <= s < n:
            raise IndexError(f"sample {s} out of range (pack has {n} samples)")
        return int(self.starts[s]), int(self.starts[s + 1] - self.starts[s])

    def sample_of_record(self, i: int) -> int:
        return bisect.bisect_right(self.starts, i) - 1

    def find(self, reader: Any, key: Union[str, bytes]) -> int:
        """The sample whose key is ``key``; KeyError if none."""
        k = os.fsencode(key)
        for f in self.fields:
            try:
                i = reader.find(k + b"." + os.fsencode(f) if f else k)
            except FileNotFoundError:
                continue
            return self.sample_of_record(i)
        if not self._fields_complete:  # too many distinct fields to try
            for s in range(len(self)):
                first, _ = self.span(s)
                if os.fsencode(_key_of(reader.name(first))) == k:
                    return s
        raise KeyError(f"no sample with key {os.fsdecode(k)!r}")


def _split(name: Union[str, bytes]) -> Tuple[str, str]:
    """(key, field) of a record name, as Reader::SplitSampleName splits it."""
    n = os.fsdecode(name)
    dot = n.find(".", n.rfind("/") + 1)
    return (n, "") if dot < 0 else (n[:dot], n[dot + 1 :])


def _key_of(name: Union[str, bytes]) -> str:
    return _split(name)[0]


def read_sample(reader: Any, index: SampleIndex, s: int) -> Tuple[str, Dict[str, bytes]]:
    """(key, {field: bytes}) of sample ``s``, read with one request per
    back-to-back run of its records (one for a sample as packed)."""
    first, count = index.span(s)
    datas = reader.read_range(first, count)
    fields: Dict[str, bytes] = {}
    key = ""
    for k in range(count):
        key, field = _split(reader.name(first + k))
        fields[field] = datas[k]
    return key, fields


Transform = Union[Callable[[Any], Any], Mapping[str, Callable[[Any], Any]]]


class SampleDataset:
    """A map-style dataset of a pack's multi-file samples.

    Args:
        pack: a :class:`ufspack.Pack` or a pack path.
        fields: the fields to return, in order, e.g. ``("jpg", "cls")``:
            each sample is then a tuple of their values; None returns a
            dict of every field the sample has (plus ``"__key__"``).
        transform: a callable applied to the first field's value (as
            ImageFolder's ``transform`` to the image), or a dict
            ``{field: callable}``.
        decode: decode the values as :func:`decode_field` does (images to
            RGB PIL images, ``cls`` to int, ``txt`` to str, ``json``
            parsed); False gives bytes.
        missing: ``"raise"`` (KeyError naming sample and field) or
            ``"none"`` (None for a field a sample lacks).

    ``len(ds)`` is the number of samples; ``ds.keys[i]`` sample i's key.
    Each ``ds[i]`` reads its sample with one request (one pread).  Works
    sample by sample in any DataLoader (workers reopen the pack).
    """

    def __init__(
        self,
        pack: Any,
        fields: Optional[Sequence[str]] = None,
        transform: Optional[Transform] = None,
        decode: bool = True,
        missing: str = "raise",
    ) -> None:
        from ufspack.pack import Pack

        self.pack = pack if isinstance(pack, Pack) else Pack(pack)
        self.fields = None if fields is None else tuple(fields)
        if missing not in ("raise", "none"):
            raise ValueError(f"missing must be 'raise' or 'none', not {missing!r}")
        self.missing = missing
        self.decode = decode
        self.transform = transform
        self._index = self.pack._sample_index()

    def __len__(self) -> int:
        return len(self._index)

    @property
    def keys(self) -> Sequence[str]:
        reader = self.pack._handle.get()
        index = self._index
        return _Keys(reader, index)

    def __iter__(self) -> Iterator[Any]:
        """``ds[0]``, ``ds[1]``, ...: an exception from a sample, of any type,
        propagates (Python's fallback, calling ``__getitem__`` until
        IndexError, would take any IndexError for the end)."""
        for s in range(len(self)):
            yield self[s]

    def __getitem__(self, s: int) -> Any:
        reader = self.pack._handle.get()
        key, raw = read_sample(reader, self._index, s)
        names = self.fields if self.fields is not None else tuple(raw)
        values: List[Any] = []
        for f in names:
            if f not in raw:
                if self.missing == "none":
                    values.append(None)
                    continue
                raise KeyError(f"{self.pack.path}: sample {s} ({key!r}) has no field {f!r} "
                               f"(it has {sorted(raw)})")
            values.append(decode_field(f, raw[f]) if self.decode else raw[f])
        values = self._transformed(names, values)
        if self.fields is None:
            out = dict(zip(names, values))
            out["__key__"] = key
            return out
        return tuple(values)

    def _transformed(self, names: Sequence[str], values: List[Any]) -> List[Any]:
        t = self.transform
        if t is None or not values:
            return values
        if callable(t):
            values[0] = t(values[0])
            return values
        return [t[f](v) if f in t and v is not None else v for f, v in zip(names, values)]


class _Keys(Sequence):
    def __init__(self, reader: Any, index: SampleIndex) -> None:
        self._reader = reader
        self._index = index

    def __len__(self) -> int:
        return len(self._index)

    def __getitem__(self, s):
        if isinstance(s, slice):
            return [self[k] for k in range(*s.indices(len(self)))]
        first, _ = self._index.span(s)
        return _key_of(self._reader.name(first))
