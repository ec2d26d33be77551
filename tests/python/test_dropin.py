"""Drop-in hazards: ImageFolder habits that must work as they do there or
fail clearly, never be silently ignored (issue 12)."""

import pickle
import warnings

import numpy as np
import pytest
import torch
from torchvision import datasets
from torchvision.datasets import folder

import ufspack


def test_image_folder_alias():
    assert ufspack.ImageFolder is ufspack.MyImageFolder


def test_path_loader_is_refused_not_handed_bytes(small_pack):
    seen = []

    def path_loader(path):  # an ImageFolder-style loader
        seen.append(path)
        return open(path, "rb").read()

    with pytest.raises(TypeError, match=r"loader='path_loader'.*file path.*bytes_loader="):
        ufspack.MyImageFolder(small_pack, loader=path_loader)
    assert seen == []


def test_torchvision_default_loaders_mean_the_default(small_tree, small_pack):
    tv = datasets.ImageFolder(small_tree)
    for loader in (folder.default_loader, folder.pil_loader):
        my = ufspack.MyImageFolder(small_pack, loader=loader)
        for i in (0, 5, 23):
            assert np.array_equal(np.asarray(my[i][0]), np.asarray(tv[i][0]))
            assert my[i][1] == tv[i][1]


def test_subsetting_samples_works_as_on_imagefolder(small_tree, small_pack):
    tv = datasets.ImageFolder(small_tree)
    my = ufspack.MyImageFolder(small_pack)
    tv.samples = tv.samples[3:20:2]
    my.samples = my.samples[3:20:2]
    assert len(my) == len(tv) == 9
    assert list(my.samples) == tv.samples
    assert list(my.imgs) == tv.samples
    for i in range(len(tv)):
        assert np.array_equal(np.asarray(my[i][0]), np.asarray(tv[i][0]))
        assert my[i][1] == tv[i][1]
    # targets follows the new samples (ImageFolder's list would be stale).
    assert list(my.targets) == [t for _, t in tv.samples]
    batch = my.__getitems__([0, 8, 4])
    assert [y for _, y in batch] == [tv[0][1], tv[8][1], tv[4][1]]


def test_relabelling_and_reordering_through_samples(small_tree, small_pack):
    tv = datasets.ImageFolder(small_tree)
    my = ufspack.MyImageFolder(small_pack)
    new = [(p, 2 - t) for p, t in reversed(tv.samples)]
    tv.samples = list(new)
    my.samples = list(new)
    assert len(my) == len(tv)
    for i in (0, 7, 23):
        assert my[i][1] == tv[i][1] == new[i][1]
        assert np.array_equal(np.asarray(my[i][0]), np.asarray(tv[i][0]))
    assert [y for _, y in my.__getitems__([0, 7, 23])] == [new[0][1], new[7][1], new[23][1]]
    assert list(my.targets) == [t for _, t in new]
    # A relabelled, subset dataset survives pickling (DataLoader spawn).
    back = pickle.loads(pickle.dumps(my))
    assert back[7][1] == new[7][1] and len(back) == len(new)


def test_assigning_imgs_is_assigning_samples(small_pack):
    my = ufspack.MyImageFolder(small_pack)
    my.imgs = my.imgs[:4]
    assert len(my) == 4 and list(my.samples) == list(my.imgs)


def test_unknown_sample_path_is_a_clear_error(small_pack):
    my = ufspack.MyImageFolder(small_pack)
    with pytest.raises(ValueError, match="is not the path of a sample of the pack"):
        my.samples = [("/elsewhere/x.jpg", 0)]
    with pytest.raises(TypeError, match=r"\(path, target\) pairs"):
        my.samples = ["just-a-path.jpg"]
    assert len(my) == 24  # unchanged


def test_assigning_targets_is_an_attribute_as_on_imagefolder(small_tree, small_pack):
    tv = datasets.ImageFolder(small_tree)
    my = ufspack.MyImageFolder(small_pack)
    relabel = [0] * len(tv)
    tv.targets = relabel
    my.targets = relabel
    assert my.targets == tv.targets == relabel
    # ImageFolder's __getitem__ takes targets from samples: so does ours.
    assert my[23][1] == tv[23][1] == 2


class ThreadsProbe(torch.utils.data.Dataset):
    """Reports, from wherever it runs, how many threads the dataset would
    read a batch with (module level: spawn workers unpickle it)."""

    def __init__(self, ds):
        self.ds = ds

    def __len__(self):
        return 2

    def __getitem__(self, i):
        return self.ds._threads()


def test_decode_threads_default_is_one_per_dataloader_worker(small_pack):
    my = ufspack.MyImageFolder(small_pack)
    assert my.decode_threads is None and my._threads() == 4

    # spawn, not fork: a process forked while another thread holds
    # ASan's allocator lock deadlocks in the ASan Python suite (gcc 12's
    # libasan takes no lock around fork); the timeout turns any hang into
    # a failure.
    loader = torch.utils.data.DataLoader(
        ThreadsProbe(my), num_workers=2, batch_size=None, multiprocessing_context="spawn", timeout=120
    )
    assert sorted(loader) == [1, 1]
    explicit = ufspack.MyImageFolder(small_pack, decode_threads=3)
    assert explicit._threads() == 3  # given: the same in every process
    with pytest.raises(ValueError, match="decode_threads must be at least 1"):
        ufspack.MyImageFolder(small_pack, decode_threads=0)


def test_pack_close_and_context_manager(small_pack):
    with ufspack.Pack(small_pack) as p:
        first = p[0]
        assert not p.closed
    assert p.closed
    with pytest.raises(ValueError, match="closed pack"):
        p.read(0)
    p.close()  # idempotent
    assert "closed" in repr(p)
    again = ufspack.Pack(small_pack)
    assert again[0] == first


def test_typed_results(small_pack, small_tree, tmp_path):
    p = ufspack.Pack(small_pack)
    rec = p.record(0)
    assert set(rec) == set(ufspack.RecordInfo.__annotations__)
    assert set(p.info) == set(ufspack.PackInfo.__annotations__)
    summary = ufspack.build(small_tree, str(tmp_path / "p"), progress=False)
    assert set(summary) == set(ufspack.BuildSummary.__annotations__)


def test_tensor_output_is_a_plain_tensor_with_torchvision_014(small_pack):
    my = ufspack.MyImageFolder(small_pack, output="tensor")
    x, _ = my[0]
    try:
        from torchvision import tv_tensors
    except ImportError:
        assert type(x) is torch.Tensor
    else:  # torchvision >= 0.16
        assert isinstance(x, tv_tensors.Image)
    assert x.dtype == torch.uint8 and x.shape[0] == 3


def test_no_deprecation_warnings_on_the_hot_path(small_pack):
    my = ufspack.MyImageFolder(small_pack)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        my[0]
        my.__getitems__([1, 2])
