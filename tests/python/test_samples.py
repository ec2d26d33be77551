"""Multi-file samples (WebDataset's key.field files): Pack.sample and
SampleDataset read a sample's files with one pread, in any layout give
the files' bytes, and decode fields as WebDataset's default decoders."""

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile

import numpy as np
import pytest
from PIL import Image

import ufspack


def jpeg(seed):
    arr = np.random.default_rng(seed).integers(0, 255, (24, 32, 3)).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, "JPEG", quality=90)
    return buf.getvalue()


def shard_files(n=30):
    """{name: bytes} of n samples as a WebDataset shard holds them (one
    sample, 000007, lacks its json; one field has two dots)."""
    files = {}
    for i in range(n):
        k = f"train/{i:06d}"
        files[k + ".jpg"] = jpeg(i)
        files[k + ".cls"] = str(i % 4).encode()
        if i != 7:
            files[k + ".json"] = json.dumps({"i": i}).encode()
        if i % 10 == 0:
            files[k + ".seg.png"] = b"not really a png %d" % i
    return files


@pytest.fixture(scope="module")
def shard(tmp_path_factory):
    base = tmp_path_factory.mktemp("shard")
    files = shard_files()
    for name, data in files.items():
        path = base / "tree" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    tar = str(base / "shard-000000.tar")
    with tarfile.open(tar, "w") as t:
        for name in sorted(files):  # as WebDataset's TarWriter: key by key
            info = tarfile.TarInfo(name)
            info.size = len(files[name])
            t.addfile(info, io.BytesIO(files[name]))
    return base, files, tar


def build(src, out, **kw):
    ufspack.build(src, out, flat=True, all_files=True, progress=False, **kw)
    return out


def test_pack_sample_by_key_and_index(shard, tmp_path):
    base, files, _ = shard
    pack = ufspack.Pack(build(str(base / "tree"), str(tmp_path / "p")))
    assert len(pack) == len(files) and pack.num_samples == 30
    s = pack.sample("train/000010")
    assert s == {f: files["train/000010." + f] for f in ("cls", "jpg", "json", "seg.png")}
    assert pack.sample(7) == {"cls": files["train/000007.cls"], "jpg": files["train/000007.jpg"]}
    assert pack.sample(-1) == pack.sample("train/000029")
    with pytest.raises(KeyError, match="train/000099"):
        pack.sample("train/000099")
    with pytest.raises(IndexError):
        pack.sample(30)


@pytest.mark.parametrize("layout", ["sorted", "shuffled:3", "shuffled-samples:3", "archive"])
def test_sample_dataset_in_every_layout(shard, tmp_path, layout):
    base, files, tar = shard
    out = str(tmp_path / "p")
    if layout == "archive":
        build(tar, out)
    else:
        build(str(base / "tree"), out, layout=layout)
    ds = ufspack.SampleDataset(out, fields=("jpg", "cls", "json"), missing="none")
    assert len(ds) == 30
    for i in (0, 7, 13, 29):
        img, cls, meta = ds[i]
        k = f"train/{i:06d}"
        assert ds.keys[i] == k
        assert cls == i % 4 and meta == (None if i == 7 else {"i": i})
        ref = Image.open(io.BytesIO(files[k + ".jpg"])).convert("RGB")
        assert np.array_equal(np.asarray(img), np.asarray(ref))
    raw = ufspack.SampleDataset(out, decode=False)[10]
    assert raw["__key__"] == "train/000010" and raw["seg.png"] == files["train/000010.seg.png"]


def test_missing_fields_and_transforms(shard, tmp_path):
    base, _, _ = shard
    out = build(str(base / "tree"), str(tmp_path / "p"))
    with pytest.raises(KeyError, match="'train/000007'.*no field 'json'"):
        ufspack.SampleDataset(out, fields=("jpg", "json"))[7]
    ds = ufspack.SampleDataset(out, fields=("jpg", "cls"), transform=lambda im: im.size)
    assert ds[3] == ((32, 24), 3)
    ds = ufspack.SampleDataset(out, fields=("cls", "json"), transform={"json": lambda d: d["i"] * 10})
    assert ds[5] == (1, 50)
    with pytest.raises(ValueError, match="missing"):
        ufspack.SampleDataset(out, missing="skip")


def test_dataloader_workers_sample_by_sample(shard, tmp_path):
    torch = pytest.importorskip("torch")
    base, _, _ = shard
    out = build(str(base / "tree"), str(tmp_path / "p"))
    ds = ufspack.SampleDataset(out, fields=("cls", "json"), missing="none")
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)
    got = [(int(c), m) for c, m in loader]
    assert got == [ds[i] for i in range(len(ds))]


def test_shuffled_samples_layout_moves_samples_not_files(shard, tmp_path):
    base, _, _ = shard
    out = build(str(base / "tree"), str(tmp_path / "p"), layout="shuffled-samples:7")
    pack = ufspack.Pack(out)
    assert pack.layout == "shuffled-samples:7"
    index = pack._sample_index()
    firsts = []
    for s in range(pack.num_samples):
        first, count = index.span(s)
        recs = [pack.record(first + k) for k in range(count)]
        for a, b in zip(recs, recs[1:]):  # back to back, in name order
            assert a["offset"] + a["stored_size"] == b["offset"]
        firsts.append(recs[0]["offset"])
    assert firsts != sorted(firsts)  # the samples themselves are shuffled


def preads_per_sample(pack, tmp_path):
    """pread64 calls while SampleDataset reads every sample of `pack`
    once, per sample (strace)."""
    script = (
        "import os, ufspack\n"
        f"ds = ufspack.SampleDataset({pack!r}, fields=('jpg', 'cls'), decode=False)\n"
        "len(ds); os.write(2, b'START\\n')\n"
        "for i in range(len(ds)): ds[i]\n"
        "os.write(2, b'SAMPLES %d\\n' % len(ds))\n"
    )
    log = str(tmp_path / "strace.txt")
    subprocess.run(["strace", "-f", "-e", "trace=pread64,write", "-o", log, sys.executable, "-c", script],
                   check=True, env=dict(os.environ))
    lines = open(log).read().split("START", 1)[1].splitlines()
    samples = int(next(line for line in lines if "SAMPLES" in line).split("SAMPLES ")[1].split("\\")[0])
    return sum("pread64(" in line for line in lines) / samples


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed")
@pytest.mark.parametrize("layout", ["sorted", "shuffled-samples:5"])
def test_one_pread_per_sample(shard, tmp_path, layout):
    base, _, _ = shard
    out = build(str(base / "tree"), str(tmp_path / "p"), layout=layout)
    assert preads_per_sample(out, tmp_path) == 1.0


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed")
def test_one_pread_per_sample_stored_in_archive_order(tmp_path):
    # TarWriter's order (000001.jpg, .txt, .cls) is not the index's (.cls,
    # .jpg, .txt): the sample is still one request, its fields exact.
    write_shards(tmp_path, 2, 6)
    out = str(tmp_path / "p")
    ufspack.build(str(tmp_path / "shards-{000000..000001}.tar"), out, flat=True, all_files=True,
                  progress=False)
    pack = ufspack.Pack(out)
    first = [pack.record(i) for i in range(3)]
    assert [r["name"] for r in first] == ["000000.cls", "000000.jpg", "000000.txt"]
    assert first[0]["offset"] > first[1]["offset"]
    assert preads_per_sample(out, tmp_path) == 1.0
    ds = ufspack.SampleDataset(out, fields=("jpg", "cls", "txt"), decode=False)
    assert [ds[i] for i in range(len(ds))] == [(jpeg(i), str(i % 3).encode(), b"caption %d" % i)
                                               for i in range(12)]


def write_shards(base, n_shards, per_shard, label=lambda i: str(i % 3).encode()):
    """WebDataset shards as its TarWriter writes them: key by key."""
    for s in range(n_shards):
        with tarfile.open(str(base / f"shards-{s:06d}.tar"), "w") as t:
            for i in range(s * per_shard, (s + 1) * per_shard):
                fields = {"jpg": jpeg(i), "txt": b"caption %d" % i}
                if label(i) is not None:
                    fields["cls"] = label(i)
                for f, data in fields.items():
                    info = tarfile.TarInfo(f"{i:06d}.{f}")
                    info.size = len(data)
                    t.addfile(info, io.BytesIO(data))


def test_webdataset_shards_with_a_label_field(tmp_path):
    write_shards(tmp_path, 3, 8)
    out = str(tmp_path / "p")
    s = ufspack.build(str(tmp_path / "shards-{000000..000002}.tar"), out, all_files=True,
                      label_field="cls", progress=False)
    assert s["files"] == 72 and s["classes"] == 3
    pack = ufspack.Pack(out)
    assert pack.classes == ["0", "1", "2"] and pack.layout == "source"
    ds = ufspack.SampleDataset(out, fields=("cls", "txt"))
    got = sorted((ds.keys[k], ds[k]) for k in range(len(ds)))
    assert got == [(f"{i:06d}", (i % 3, f"caption {i}")) for i in range(24)]
    # Each sample's files carry its label; the index is by label, then name.
    assert [pack.label(i) for i in range(len(pack))] == sorted(pack.label(i) for i in range(len(pack)))
    images = ufspack.MyImageFolder(out)
    assert len(images) == 24 and sorted(images.targets) == sorted(i % 3 for i in range(24))
    # A {a,b} list names the same shards, and so do a list of paths and
    # the CLI given each shard.
    out2 = str(tmp_path / "p2")
    ufspack.build(str(tmp_path / "shards-{000000,000001,000002}.tar"), out2, all_files=True,
                  label_field="cls", progress=False)
    assert records_of(out2) == records_of(out)
    shards = [str(tmp_path / f"shards-{k:06d}.tar") for k in range(3)]
    out3 = str(tmp_path / "p3")
    ufspack.build(shards, out3, all_files=True, label_field="cls", progress=False)
    assert records_of(out3) == records_of(out)
    cli = os.environ.get("UFSPACK_CLI", "ufspack")
    out4 = str(tmp_path / "p4")
    subprocess.run([cli, "build", *shards, "-o", out4, "--all-files", "--label-field", "cls", "-q"],
                   check=True)
    assert records_of(out4) == records_of(out)
    assert ufspack.Pack(out4).info["source_root"] == f"{shards[0]} and 2 more"
    r = subprocess.run([cli, "build", *shards, "--all-files"], capture_output=True, text=True)
    assert r.returncode == 2 and "name the pack with -o when packing several archives" in r.stderr
    r = subprocess.run([cli, "build", shards[0], str(tmp_path), "-o", out4], capture_output=True, text=True)
    assert r.returncode == 2 and f"'{tmp_path}' is a directory" in r.stderr
    with pytest.raises(ValueError, match="a directory; a list names archives"):
        ufspack.build([shards[0], str(tmp_path)], out4, progress=False)
    with pytest.raises(FileNotFoundError, match="shards-000009.tar"):
        ufspack.build(shards + [str(tmp_path / "shards-000009.tar")], out4, progress=False)
    assert records_of(out4) == records_of(out)  # left as it was


def test_one_ranged_get_per_sample_over_http(tmp_path):
    # Shards in TarWriter's order, the pack served by a web server: each
    # sample past data.ufs's first 4 KiB (fetched with the open) is one GET.
    import httpserve
    from ufspack import _core

    write_shards(tmp_path, 2, 6)
    root = tmp_path / "www"
    ufspack.build(str(tmp_path / "shards-{000000..000001}.tar"), str(root / "p"), flat=True,
                  all_files=True, progress=False)
    local = ufspack.Pack(str(root / "p"))
    with httpserve.serve(str(root)) as url:
        pack = ufspack.Pack(url + "/p")
        index = pack._sample_index()
        checked = 0
        for s in range(pack.num_samples):
            first, count = index.span(s)
            before = _core.remote_stats()
            got = pack.sample(s)
            requests = _core.remote_stats()["requests"] - before["requests"]
            assert got == local.sample(s) and set(got) == {"cls", "jpg", "txt"}
            if local.record(first)["offset"] >= 4096:
                assert requests == 1, (s, requests)
                checked += 1
        assert checked >= 8
        ds = ufspack.SampleDataset(pack, fields=("jpg", "cls"))
        assert [ds[i][1] for i in range(len(ds))] == [i % 3 for i in range(12)]


def records_of(pack):
    p = ufspack.Pack(pack)
    return [(p.name(i), p.label(i), p.read(i)) for i in range(len(p))]


def test_webdataset_shard_errors(tmp_path):
    write_shards(tmp_path, 2, 4, label=lambda i: None if i == 5 else b"%d" % (i % 2))
    pattern = str(tmp_path / "shards-{000000..000001}.tar")
    with pytest.raises(ufspack.CorruptPackError, match="sample '000005' has no 'cls' field"):
        ufspack.build(pattern, str(tmp_path / "p"), all_files=True, label_field="cls", progress=False)
    # Without --label-field: the samples without classes, every field.
    s = ufspack.build(pattern, str(tmp_path / "plain"), progress=False)
    assert s["files"] == 23 and s["classes"] == 0
    # A pattern is bounded before it is expanded (this one: 23 GB of names).
    with pytest.raises(ValueError, match="its 3 brace groups would make 1,000,000,000 names, "
                                         "more than the limit of 1,000,000"):
        ufspack.build(str(tmp_path / "sh-{0..999}{0..999}{0..999}.tar"), str(tmp_path / "p"),
                      progress=False)
    with pytest.raises(ValueError, match=r"'\{0..99999999\}' is a range of 100,000,000 shards"):
        ufspack.build(str(tmp_path / "sh-{0..99999999}.tar"), str(tmp_path / "p"), progress=False)
    with pytest.raises(FileNotFoundError, match="shards-000002.tar"):
        ufspack.build(str(tmp_path / "shards-{000000..000002}.tar"), str(tmp_path / "p"),
                      progress=False)
    with pytest.raises(ValueError, match="not a range of shard numbers"):
        ufspack.build(str(tmp_path / "shards-{9..1}.tar"), str(tmp_path / "p"), progress=False)
    (tmp_path / "bad").mkdir()
    write_shards(tmp_path / "bad", 1, 2, label=lambda i: b"seven")
    with pytest.raises(ufspack.CorruptPackError, match="expected a decimal label"):
        ufspack.build(str(tmp_path / "bad" / "shards-000000.tar"), str(tmp_path / "p"),
                      all_files=True, label_field="cls", progress=False)
    assert not (tmp_path / "p" / "index.ufs").exists()
    # Flat: the samples without labels.
    s = ufspack.build(pattern, str(tmp_path / "flat"), all_files=True, flat=True, progress=False)
    assert s["files"] == 23 and ufspack.Pack(str(tmp_path / "flat")).num_samples == 8
    assert s["not_matching"] == 0
    # Without all_files only the images are packed, and the rest is counted.
    s = ufspack.build(pattern, str(tmp_path / "images"), flat=True, progress=False)
    assert s["files"] == 8 and s["not_matching"] == 15
    cli = os.environ.get("UFSPACK_CLI", "ufspack")
    r = subprocess.run([cli, "build", pattern, "--flat", "-o", str(tmp_path / "images")],
                       capture_output=True, text=True, check=True)
    assert "left out 15 archive members whose names do not match the extensions" in r.stdout


def test_the_plain_command_packs_webdataset_shards_with_every_field(tmp_path):
    # No --flat, --all-files or --label-field: top-level samples are shards.
    write_shards(tmp_path, 3, 4)
    cli = os.environ.get("UFSPACK_CLI", "ufspack")
    out = str(tmp_path / "plain")
    r = subprocess.run([cli, "build", str(tmp_path / "shards-{000000..000002}.tar"), "-o", out],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    flat = str(tmp_path / "flat")
    ufspack.build(str(tmp_path / "shards-{000000..000002}.tar"), flat, flat=True, all_files=True,
                  progress=False)
    assert records_of(out) == records_of(flat)
    pack = ufspack.Pack(out)
    assert pack.classes == [] and len(pack) == 36
    ds = ufspack.SampleDataset(out, fields=("jpg", "cls", "txt"), decode=False)
    assert sorted(ds[i] for i in range(len(ds))) == sorted(
        (jpeg(i), str(i % 3).encode(), b"caption %d" % i) for i in range(12))
    # --label-field keeps every field too; --extensions still chooses.
    labelled = str(tmp_path / "labelled")
    s = ufspack.build(str(tmp_path / "shards-{000000..000002}.tar"), labelled, label_field="cls",
                      progress=False)
    assert s["files"] == 36 and s["classes"] == 3 and s["not_matching"] == 0
    assert ufspack.SampleDataset(labelled, fields=("jpg", "cls", "txt"), decode=False)[0][2]
    chosen = ufspack.build(str(tmp_path / "shards-{000000..000002}.tar"), str(tmp_path / "c"),
                           extensions=[".jpg", ".cls"], progress=False)
    assert chosen["files"] == 24 and chosen["not_matching"] == 12


def test_an_archive_that_begins_like_shards_but_holds_classes_is_a_tree(tmp_path):
    # A README at the top, then class directories: ImageFolder's tree, read
    # again from the start as one (the README in no class is left out).
    archive = str(tmp_path / "t.tar")
    tree = tmp_path / "tree"
    with tarfile.open(archive, "w") as t:
        for name, data in [("README.txt", b"read me"), ("cat/0.jpg", jpeg(0)),
                           ("dog/1.jpg", jpeg(1)), ("cat/2.jpg", jpeg(2))]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            (tree / name).write_bytes(data)
    s = ufspack.build(archive, str(tmp_path / "p"), progress=False)
    assert s["files"] == 3 and s["classes"] == 2 and s["skipped"] == 0
    ufspack.build(str(tree), str(tmp_path / "q"), progress=False)
    assert records_of(str(tmp_path / "p")) == records_of(str(tmp_path / "q"))
    assert ufspack.Pack(str(tmp_path / "p")).classes == ["cat", "dog"]
