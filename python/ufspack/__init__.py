"""ufspack: small-file packs with one-pread random access, for PyTorch.

Build a pack once::

    ufspack.build("/nas/imagenet/train", "/nas/imagenet/train.ufspack")
    # or: ufspack build /nas/imagenet/train -o /nas/imagenet/train.ufspack

then read it with the same classes, labels, order and pixels as
``torchvision.datasets.ImageFolder`` on the original directory::

    dataset = ufspack.MyImageFolder("/nas/imagenet/train.ufspack", transform)

See docs/python.md.
"""

from ufspack._core import CorruptPackError, __version__
from ufspack.block_sampler import BlockSampler
from ufspack.builder import AppendSummary, BuildSummary, MergeSummary, append, build, merge
from ufspack.cache import Cache, CacheTierStats
from ufspack.dataset import IMG_EXTENSIONS, BadSampleWarning, ImageFolder, MyImageFolder, skip_none_collate
from ufspack.mount import MountError, mounted
from ufspack.pack import Pack, PackInfo, RecordInfo
from ufspack.samples import SampleDataset
from ufspack.writer import Writer, WriterSummary, WriteSummary, write

__all__ = [
    "BadSampleWarning",
    "BlockSampler",
    "AppendSummary",
    "BuildSummary",
    "MergeSummary",
    "Cache",
    "CacheTierStats",
    "CorruptPackError",
    "IMG_EXTENSIONS",
    "ImageFolder",
    "MountError",
    "MyImageFolder",
    "Pack",
    "PackInfo",
    "RecordInfo",
    "SampleDataset",
    "Writer",
    "WriterSummary",
    "WriteSummary",
    "__version__",
    "append",
    "build",
    "merge",
    "mounted",
    "skip_none_collate",
    "write",
]
