"""Hostile archives as build sources (issue 41, points 3 and 5): a gzip whose
CRC-32 or length trailer is wrong, bytes after the last gzip member, a pax
'size' that is not a number, a nested class .tar.gz with a bad CRC: refused
(exit 1) naming the archive and the member, nothing published.  A
multi-member gzip builds.  Zip and pax names marked UTF-8 are their UTF-8
bytes under LC_ALL=C as under C.UTF-8, as a tree build of the extracted
files sees them (docs/reliability.md)."""

import gzip
import io
import lzma
import os
import struct
import subprocess
import sys
import tarfile
import zipfile
import zlib

import ufspack

CLI = os.environ.get("UFSPACK_CLI", "ufspack")


def tar_bytes(members, fmt=tarfile.PAX_FORMAT):
    """A tar of (name, data[, pax_headers]) members."""
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w", format=fmt) as t:
        for name, data, *pax in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            if pax:
                info.pax_headers = pax[0]
            t.addfile(info, io.BytesIO(data))
    return b.getvalue()


def classes_tar():
    return tar_bytes([("c0/a.jpg", b"A" * 3000), ("c0/b.jpg", b"B" * 100),
                      ("c1/c.jpg", os.urandom(5000))])


def cli_build(src, out, *args, env=None):
    return subprocess.run([CLI, "build", str(src), "-o", str(out), *args],
                          capture_output=True, text=True, errors="replace", env=env)


def assert_refused(r, out, *needles):
    assert r.returncode == 1, r
    for n in needles:
        assert n in r.stderr, (n, r.stderr)
    assert not (out / "index.ufs").exists()


def records(pack):
    p = ufspack.Pack(str(pack))
    return p.classes, [(os.fsencode(p.name(i)), p.label(i), p.read(i)) for i in range(len(p))]


def test_gzip_crc_mismatch_is_refused_naming_archive_and_member(tmp_path):
    gz = bytearray(gzip.compress(classes_tar(), mtime=0))
    gz[-8] ^= 0x01  # the CRC-32's low byte: gzip -t refuses it
    (tmp_path / "x.tar.gz").write_bytes(gz)
    r = cli_build(tmp_path / "x.tar.gz", tmp_path / "p")
    assert_refused(r, tmp_path / "p", "x.tar.gz, after its last member 'c1/c.jpg'",
                   "CRC-32 mismatch in gzip member 1")


def test_gzip_length_mismatch_is_refused(tmp_path):
    gz = bytearray(gzip.compress(classes_tar(), mtime=0))
    gz[-1] ^= 0x01  # ISIZE
    (tmp_path / "x.tgz").write_bytes(gz)
    r = cli_build(tmp_path / "x.tgz", tmp_path / "p")
    assert_refused(r, tmp_path / "p", "x.tgz, after its last member 'c1/c.jpg'",
                   "length mismatch in gzip member 1")


def test_damage_in_an_early_gzip_member_names_the_member_being_read(tmp_path):
    # `cat a.gz b.gz`: the first gzip member's CRC is wrong, the archive
    # goes on in the second.
    tar = tar_bytes([(f"c0/{k}.jpg", os.urandom(300000)) for k in range(6)])
    first = bytearray(gzip.compress(tar[:1000000], mtime=0))
    first[-8] ^= 0x01
    (tmp_path / "x.tar.gz").write_bytes(bytes(first) + gzip.compress(tar[1000000:], mtime=0))
    r = cli_build(tmp_path / "x.tar.gz", tmp_path / "p")
    assert_refused(r, tmp_path / "p", "x.tar.gz, member 'c0/", "CRC-32 mismatch in gzip member 1")


def test_multi_member_gzip_with_zero_padding_builds_as_the_tar(tmp_path):
    tar = classes_tar()
    (tmp_path / "x.tar").write_bytes(tar)
    (tmp_path / "x.tar.gz").write_bytes(
        gzip.compress(tar[:700], mtime=0) + gzip.compress(tar[700:5000], mtime=0)
        + gzip.compress(tar[5000:], mtime=0) + b"\0" * 4096)
    for name in ("x.tar", "x.tar.gz"):
        r = cli_build(tmp_path / name, tmp_path / ("p-" + name))
        assert r.returncode == 0, r
    assert records(tmp_path / "p-x.tar.gz") == records(tmp_path / "p-x.tar")


def test_bytes_after_the_last_gzip_member_are_refused(tmp_path):
    (tmp_path / "x.tar.gz").write_bytes(gzip.compress(classes_tar(), mtime=0) + b"junk")
    r = cli_build(tmp_path / "x.tar.gz", tmp_path / "p")
    assert_refused(r, tmp_path / "p", "x.tar.gz", "neither another gzip member nor zero padding")


def test_pax_size_that_is_not_a_number_is_refused_naming_member(tmp_path):
    # libarchive reads "12abc" as 12: the 20-byte member would be stored short.
    tar = tar_bytes([("c0/a.jpg", b"A" * 20, {"size": "12abc"}), ("c0/b.jpg", b"B" * 5)])
    (tmp_path / "x.tar").write_bytes(tar)
    r = cli_build(tmp_path / "x.tar", tmp_path / "p")
    assert_refused(r, tmp_path / "p", "x.tar, member 'c0/a.jpg'",
                   "'size' is '12abc', expected an unsigned decimal number")
    (tmp_path / "x.tar.xz").write_bytes(lzma.compress(tar))
    r = cli_build(tmp_path / "x.tar.xz", tmp_path / "p")
    assert_refused(r, tmp_path / "p", "x.tar.xz, member 'c0/a.jpg'", "'size' is '12abc'")


def test_damaged_xz_is_refused_naming_the_compression(tmp_path):
    # Small: the damage shows in the first block read, before any member.
    xz = bytearray(lzma.compress(classes_tar(), check=lzma.CHECK_CRC64))
    xz[len(xz) // 2] ^= 0x01
    (tmp_path / "s.tar.xz").write_bytes(xz)
    r = cli_build(tmp_path / "s.tar.xz", tmp_path / "p")
    assert_refused(r, tmp_path / "p", "s.tar.xz: compressed data damaged")
    # Larger, the block's CRC-64 wrong: it shows at the member's end.
    tar = tar_bytes([("c0/a.jpg", os.urandom(327680 * 4 - 1536))], fmt=tarfile.GNU_FORMAT)
    xz = bytearray(lzma.compress(tar, check=lzma.CHECK_CRC64))
    index_size = (struct.unpack("<I", xz[-8:-4])[0] + 1) * 4  # the footer's backward size
    xz[len(xz) - 12 - index_size - 8] ^= 0x01  # the one block's check, before the index
    (tmp_path / "b.tar.xz").write_bytes(xz)
    r = cli_build(tmp_path / "b.tar.xz", tmp_path / "p")
    assert_refused(r, tmp_path / "p", "b.tar.xz, member 'c0/a.jpg': xz data damaged")


def test_nested_class_tar_gz_with_a_bad_crc_is_refused(tmp_path):
    bad = bytearray(gzip.compress(tar_bytes([("a.jpg", b"A" * 999), ("b.jpg", b"B" * 99)]),
                                  mtime=0))
    bad[-8] ^= 0x01
    good = tar_bytes([("c.jpg", b"C" * 50)])
    outer = tar_bytes([("n01.tar.gz", bytes(bad)), ("n02.tar", good)], fmt=tarfile.USTAR_FORMAT)
    (tmp_path / "train.tar").write_bytes(outer)
    r = cli_build(tmp_path / "train.tar", tmp_path / "p")
    assert_refused(r, tmp_path / "p", "train.tar/n01.tar.gz, after its last member 'b.jpg'",
                   "CRC-32 mismatch")


def zip_with_unicode_path_field(path, entries):
    """A stored zip of (name bytes, data, Info-ZIP Unicode path or None)."""
    out, central = bytearray(), bytearray()
    for name, data, unicode_path in entries:
        extra = b""
        if unicode_path is not None:
            body = b"\x01" + struct.pack("<I", zlib.crc32(name)) + unicode_path
            extra = struct.pack("<HH", 0x7075, len(body)) + body
        common = struct.pack("<HHHHHIIIHH", 20, 0, 0, 0, 0, zlib.crc32(data), len(data),
                             len(data), len(name), len(extra))
        central += (struct.pack("<IH", 0x02014B50, 20) + common
                    + struct.pack("<HHHII", 0, 0, 0, 0, len(out)) + name + extra)
        out += struct.pack("<I", 0x04034B50) + common + name + extra + data
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(entries), len(entries),
                      len(central), len(out), 0)
    path.write_bytes(bytes(out + central + end))


def pack_names(out):
    p = ufspack.Pack(str(out))
    return sorted(os.fsencode(p.name(i)) for i in range(len(p)))


def cli_names(src, out, loc):
    """Names of a flat CLI build of `src` under LC_ALL=`loc`."""
    r = cli_build(src, out, "--flat", env=dict(os.environ, LC_ALL=loc))
    assert r.returncode == 0, (loc, r.stderr)
    return pack_names(out)


def python_names(sources, outs, loc):
    """Names of flat ufspack.build()s of `sources` in one Python under
    LC_ALL=`loc` (Python sets LC_CTYPE from it; the CLI never calls
    setlocale)."""
    code = ("import sys, ufspack\n"
            "for src, out in zip(sys.argv[1::2], sys.argv[2::2]):\n"
            "    ufspack.build(src, out, progress=False, flat=True)\n")
    args = [str(x) for pair in zip(sources, outs) for x in pair]
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                       errors="replace", env=dict(os.environ, LC_ALL=loc))
    assert r.returncode == 0, (loc, r.stderr)
    return [pack_names(out) for out in outs]


def test_utf8_names_are_their_bytes_under_every_locale(tmp_path):
    names = ["cls/é.jpg", "cls/日本.jpg", "cls/naïve/ü.png"]
    with zipfile.ZipFile(tmp_path / "flag.zip", "w") as z:  # sets the UTF-8 flag
        for k, n in enumerate(names):
            z.writestr(n, b"%d" % k)
    zip_with_unicode_path_field(tmp_path / "field.zip", [
        ("cls/\x82t\x82.jpg".encode("latin-1"), b"1", "cls/été.jpg".encode()),
        (b"cls/plain.jpg", b"2", None)])
    (tmp_path / "pax.tar").write_bytes(tar_bytes([(n, b"x") for n in names]))
    # The tree the zip extracts to, built as a tree.
    zipfile.ZipFile(tmp_path / "flag.zip").extractall(tmp_path / "tree")
    want = {"flag.zip": sorted(n.encode() for n in names),
            "field.zip": [b"cls/plain.jpg", "cls/été.jpg".encode()],
            "pax.tar": sorted(n.encode() for n in names)}
    assert cli_names(tmp_path / "tree", tmp_path / "tree-pack", "C") == want["flag.zip"]
    archives = [tmp_path / a for a in want]
    for loc in ("C", "C.UTF-8"):
        for archive in archives:
            got = cli_names(archive, tmp_path / f"cli-{loc}-{archive.name}", loc)
            assert got == want[archive.name], ("cli", loc, archive.name)
        outs = [tmp_path / f"py-{loc}-{a.name}" for a in archives]
        got = python_names(archives, outs, loc)
        assert got == [want[a.name] for a in archives], ("python", loc)
