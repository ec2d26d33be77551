"""Packs built from archives (tar, tar.gz, zip, ImageNet's nested tar): the
same records, names, classes, labels and bytes as a build of the extracted
tree; hostile members refused or skipped with a reason, nothing published
on error (docs/cli.md, "Building from an archive")."""

import io
import os
import subprocess
import tarfile
import zipfile

import pytest

import ufspack


def records(pack):
    """(classes, [(name, label, bytes)]) of a pack, in index order."""
    p = ufspack.Pack(pack)
    return p.classes, [(p.name(i), p.label(i), p.read(i)) for i in range(len(p))]


def tar_tree(root, out, mode="w", prefix="."):
    """A tar of the tree `root` as `tar -h -C root .` makes it: links followed."""
    with tarfile.open(out, mode, dereference=True) as t:
        t.add(root, arcname=prefix)
    return out


def add_bytes(t, name, data, **kw):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    for k, v in kw.items():
        setattr(info, k, v)
    t.addfile(info, io.BytesIO(data))


def test_tar_gz_of_edge_tree_is_the_tree_build(edge_tree, edge_pack, tmp_path):
    archive = tar_tree(edge_tree, str(tmp_path / "edge.tar.gz"), "w:gz")
    out = str(tmp_path / "p")
    s = ufspack.build(archive, out, progress=False)
    assert records(out) == records(edge_pack)
    ref = ufspack.Pack(edge_pack)
    assert s["files"] == len(ref) and s["classes"] == len(ref.classes)
    assert ufspack.Pack(out).layout == "source"


def test_nested_class_archives_like_imagenet(small_tree, small_pack, tmp_path):
    # One archive per class, as ImageNet's train tar holds n01440764.tar...:
    # a tar with "./" names, a tar.gz with bare names, a zip.
    classes = sorted(os.listdir(small_tree))
    inner = []
    for k, c in enumerate(classes):
        d = os.path.join(small_tree, c)
        path = str(tmp_path / (c + (".tar", ".tar.gz", ".zip")[k % 3]))
        if path.endswith(".zip"):
            with zipfile.ZipFile(path, "w") as z:
                for f in sorted(os.listdir(d)):
                    z.write(os.path.join(d, f), f)
        else:
            with tarfile.open(path, "w:gz" if path.endswith(".gz") else "w") as t:
                for f in sorted(os.listdir(d), reverse=True):  # not in order
                    t.add(os.path.join(d, f), ("./" if k == 0 else "") + f)
        inner.append(path)
    outer = str(tmp_path / "train.tar")
    with tarfile.open(outer, "w") as t:
        for path in reversed(inner):
            t.add(path, os.path.basename(path))
    out = str(tmp_path / "p")
    s = ufspack.build(outer, out, progress=False)
    assert records(out) == records(small_pack)
    assert s["classes"] == 3 and s["skipped"] == 0
    ds = ufspack.MyImageFolder(out)
    assert ds.classes == classes and len(ds) == 24


def test_zip_and_cli(small_tree, small_pack, tmp_path):
    archive = str(tmp_path / "t.zip")
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        for dirpath, _, files in os.walk(small_tree):
            for f in files:
                full = os.path.join(dirpath, f)
                z.write(full, os.path.relpath(full, small_tree))
    cli = os.environ.get("UFSPACK_CLI", "ufspack")
    r = subprocess.run([cli, "build", archive, "-o", str(tmp_path / "p"), "--json"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert '"ok":true' in r.stdout and '"files":24' in r.stdout
    assert records(str(tmp_path / "p")) == records(small_pack)


def hostile(tmp_path, build):
    path = str(tmp_path / "h.tar")
    with tarfile.open(path, "w") as t:
        add_bytes(t, "a/ok.jpg", b"fine")
        build(t)
    return path


@pytest.mark.parametrize("name,why", [
    ("../evil.jpg", "'..' component"),
    ("a/../../evil.jpg", "'..' component"),
    ("/etc/evil.jpg", "absolute name"),
])
def test_names_outside_the_tree_are_refused(tmp_path, name, why):
    archive = hostile(tmp_path, lambda t: add_bytes(t, name, b"x"))
    out = tmp_path / "p"
    with pytest.raises(ufspack.CorruptPackError, match=why):
        ufspack.build(archive, str(out), progress=False)
    assert not (out / "index.ufs").exists() and not (out / "data.ufs").exists()


def test_links_and_devices_are_skipped_with_a_reason(tmp_path):
    def build(t):
        add_bytes(t, "a/sym.jpg", b"", type=tarfile.SYMTYPE, linkname="ok.jpg")
        add_bytes(t, "a/hard.jpg", b"", type=tarfile.LNKTYPE, linkname="a/ok.jpg")
        add_bytes(t, "a/dev.jpg", b"", type=tarfile.CHRTYPE, devmajor=1, devminor=3)
        add_bytes(t, "b.jpg", b"", type=tarfile.SYMTYPE, linkname="/etc")  # a class link
    s = ufspack.build(hostile(tmp_path, build), str(tmp_path / "p"), progress=False)
    assert s["files"] == 1 and s["skipped"] == 4
    text = "\n".join(s["warnings"])
    for member, why in [("a/sym.jpg", "symbolic link"), ("a/hard.jpg", "hard link"),
                        ("a/dev.jpg", "not a regular file"), ("b.jpg", "symbolic link")]:
        assert f"h.tar/{member}: a {why}" in text or f"h.tar/{member}: {why}" in text, text
    assert records(str(tmp_path / "p"))[1] == [("a/ok.jpg", 0, b"fine")]


def test_duplicate_member_is_refused(tmp_path):
    archive = hostile(tmp_path, lambda t: add_bytes(t, "a/ok.jpg", b"again"))
    with pytest.raises(ValueError, match="'a/ok.jpg' added twice"):
        ufspack.build(archive, str(tmp_path / "p"), progress=False)
    assert not (tmp_path / "p" / "index.ufs").exists()


def test_truncated_and_non_archives_fail_and_keep_the_previous_pack(small_tree, tmp_path):
    archive = tar_tree(small_tree, str(tmp_path / "t.tar"))
    out = str(tmp_path / "p")
    ufspack.build(small_tree, out, progress=False)
    before = open(os.path.join(out, "index.ufs"), "rb").read()
    cut = str(tmp_path / "cut.tar")
    with open(archive, "rb") as f, open(cut, "wb") as g:
        g.write(f.read()[: os.path.getsize(archive) // 2 + 100])
    with pytest.raises(ufspack.CorruptPackError, match="cut.tar"):
        ufspack.build(cut, out, progress=False)
    junk = tmp_path / "junk.bin"
    junk.write_bytes(os.urandom(5000))
    with pytest.raises(ValueError, match="not a directory, nor an archive"):
        ufspack.build(str(junk), out, progress=False)
    assert open(os.path.join(out, "index.ufs"), "rb").read() == before
    assert sorted(os.listdir(out)) == ["data.ufs", "index.ufs"]


def test_declared_size_far_beyond_the_archive_is_refused(tmp_path):
    # A header that declares 10 GB in front of a few bytes: a bomb's shape.
    info = tarfile.TarInfo("a/bomb.jpg")
    info.size = 10 ** 10
    archive = tmp_path / "bomb.tar"
    archive.write_bytes(info.tobuf() + b"\0" * 4096)
    with pytest.raises(ufspack.CorruptPackError, match="declares 10000000000 bytes"):
        ufspack.build(str(archive), str(tmp_path / "p"), progress=False)


def test_encrypted_zip_member(tmp_path):
    archive = str(tmp_path / "e.zip")
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("a/ok.jpg", b"fine")
        z.writestr("a/secret.jpg", b"hidden")
    # Set the "encrypted" flag of a/secret.jpg in its local and central headers.
    data = bytearray(open(archive, "rb").read())
    for sig, flag_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = data.find(sig + b"", 0)
        while at >= 0:
            name_at = at + (30 if sig == b"PK\x03\x04" else 46)
            if data[name_at:name_at + 12] == b"a/secret.jpg":
                data[at + flag_at] |= 1
            at = data.find(sig, at + 4)
    open(archive, "wb").write(bytes(data))
    with pytest.raises(ValueError, match="encrypted"):
        ufspack.build(archive, str(tmp_path / "p"), progress=False)
    s = ufspack.build(archive, str(tmp_path / "p"), progress=False, skip_unreadable=True)
    assert s["files"] == 1 and "encrypted; skipped" in "\n".join(s["warnings"])


def test_nested_deeper_than_one_level_and_large_members(tmp_path):
    deep = io.BytesIO()
    with tarfile.open(fileobj=deep, mode="w") as t:
        add_bytes(t, "x.jpg", b"deep")
    cls = io.BytesIO()
    with tarfile.open(fileobj=cls, mode="w") as t:
        add_bytes(t, "c.jpg", b"in the class archive")
        add_bytes(t, "deeper.tar", deep.getvalue())
    big = os.urandom(1 << 20) * 65  # over the 64 MiB read whole: streamed
    archive = str(tmp_path / "n.tar")
    with tarfile.open(archive, "w") as t:
        add_bytes(t, "a/inner.tar", deep.getvalue())
        add_bytes(t, "a/big.jpg", big)
        add_bytes(t, "b.tar", cls.getvalue())
    s = ufspack.build(archive, str(tmp_path / "p"), progress=False)
    text = "\n".join(s["warnings"])
    assert "n.tar/a/inner.tar: an archive below the top level" in text, text
    assert "n.tar/b/deeper.tar: an archive nested more than one level deep; skipped" in text, text
    assert records(str(tmp_path / "p"))[1] == [("a/big.jpg", 0, big), ("b/c.jpg", 1, b"in the class archive")]


def test_options_an_archive_cannot_take(small_tree, tmp_path):
    archive = tar_tree(small_tree, str(tmp_path / "t.tar"))
    with pytest.raises(ValueError, match="layout shuffled"):
        ufspack.build(archive, str(tmp_path / "p"), layout="shuffled", progress=False)
    with pytest.raises(ValueError, match="one pass"):
        ufspack.build(archive, str(tmp_path / "p"), parts=2, part=0, progress=False)


def empty_zip():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w"):
        pass
    return buf.getvalue()  # its end record alone: 22 bytes


@pytest.mark.parametrize("name,data", [
    ("zero.tar", b""),
    ("zeros.tar", b"\0" * 10240),
    ("end-only.zip", empty_zip()),
])
def test_an_empty_archive_is_refused_as_an_empty_tree_is(tmp_path, name, data):
    archive = tmp_path / name
    archive.write_bytes(data)
    out = tmp_path / "p"
    with pytest.raises(ValueError, match=f"{name}: the archive holds no member: nothing to pack"):
        ufspack.build(str(archive), str(out), progress=False)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no class directories"):
        ufspack.build(str(tmp_path / "empty"), str(out), progress=False)
    cli = os.environ.get("UFSPACK_CLI", "ufspack")
    r = subprocess.run([cli, "build", str(archive), "-o", str(out)], capture_output=True, text=True)
    assert r.returncode == 1 and "nothing to pack" in r.stderr, r
    assert not out.exists() or os.listdir(out) == []


def test_refused_archive_builds_exit_1_not_the_damaged_pack_status(small_tree, tmp_path):
    # docs/cli.md: 3 says a pack is damaged; a damaged source is a failure.
    cut = tmp_path / "cut.tar"
    cut.write_bytes(open(tar_tree(small_tree, str(tmp_path / "t.tar")), "rb").read()[:30000])
    bomb = tarfile.TarInfo("a/bomb.jpg")
    bomb.size = 10 ** 10
    (tmp_path / "bomb.tar").write_bytes(bomb.tobuf() + b"\0" * 4096)
    evil = hostile(tmp_path, lambda t: add_bytes(t, "../evil.jpg", b"x"))
    cli = os.environ.get("UFSPACK_CLI", "ufspack")
    for archive, why in [(str(cut), "cut.tar"), (str(tmp_path / "bomb.tar"), "declares"),
                         (evil, "'..' component")]:
        r = subprocess.run([cli, "build", archive, "-o", str(tmp_path / "p"), "--json"],
                           capture_output=True, text=True)
        assert r.returncode == 1 and why in r.stderr, (archive, r)
        assert '"exit_code":1' in r.stdout
