"""A zstd record whose index entry (and frame header) claim the largest
expansion the format allows, 32768 x stored_length, while the frame holds far
less: every read path raises ufspack.CorruptPackError naming the record, and
none allocates the claimed size (checked under an address-space limit in a
child process)."""

import os
import struct
import subprocess
import sys
import textwrap

import pytest

import ufspack

MAX_EXPANSION = 32768


def zstd_frame(content, declared):
    """A zstd frame of raw blocks holding ``content`` whose header declares
    ``declared`` bytes of content (tests/testutil.cc ZstdFrameDeclaring)."""
    f = struct.pack("<IBB", 0xFD2FB528, 0xC0, 7 << 3) + struct.pack("<Q", declared)
    pos = 0
    while True:
        n = min(128 << 10, len(content) - pos)
        last = pos + n == len(content)
        h = (1 if last else 0) | (n << 3)
        f += struct.pack("<I", h)[:3] + content[pos : pos + n]
        pos += n
        if last:
            return f


def hostile_pack(tmp_path, content_bytes, forged_header):
    """An ImageFolder pack whose record for c/hostile.jpg is such a record;
    returns (pack, record index, claimed length).  Only the record entry is
    patched: Reader.Open does not hash the index body, and the record
    checksum (of the stored frame) stays valid."""
    content = os.urandom(content_bytes)
    stored = len(zstd_frame(content, 0))
    claimed = MAX_EXPANSION * stored
    src = tmp_path / "src" / "c"
    src.mkdir(parents=True)
    (src / "hostile.jpg").write_bytes(zstd_frame(content, claimed if forged_header else len(content)))
    (src / "ok.jpg").write_bytes(b"ten bytes!")
    pack = str(tmp_path / "pack")
    ufspack.build(str(tmp_path / "src"), pack, progress=False)
    p = ufspack.Pack(pack)
    i = p.find("c/hostile.jpg")
    del p
    with open(os.path.join(pack, "index.ufs"), "r+b") as f:
        (records_offset,) = struct.unpack("<Q", f.read(88)[80:88])
        entry = records_offset + 56 * i
        f.seek(entry + 16)
        f.write(struct.pack("<Q", claimed))
        f.seek(entry + 52)
        f.write(b"\x01")  # codec zstd
    return pack, i, claimed


READS = {
    "read": "ufspack.Pack(pack).read(i)",
    "read_many": "ufspack.Pack(pack).read_many([1 - i, i, 1 - i])",
    "read_many_serial": "ufspack.Pack(pack).read_many([i, 1 - i, i], threads=1)",
    "dataset_item": "ufspack.MyImageFolder(pack)[i]",
    "dataset_decode_item": "ufspack.MyImageFolder(pack, output='numpy')[i]",
    "dataset_items": "ufspack.MyImageFolder(pack).__getitems__([1 - i, i])",
}


@pytest.mark.parametrize("forged", [True, False], ids=["forged-header", "honest-header"])
@pytest.mark.parametrize("how", sorted(READS))
def test_short_zstd_frame_is_corrupt_pack_error(tmp_path, forged, how):
    pack, i, claimed = hostile_pack(tmp_path, 1000, forged)
    why = "zstd frame ends early or is damaged" if forged else "zstd frame content size"
    with pytest.raises(ufspack.CorruptPackError, match=why) as e:
        eval(READS[how], {"ufspack": ufspack, "pack": pack, "i": i})
    assert f"record {i} 'c/hostile.jpg'" in str(e.value)
    assert f"expected {claimed}" in str(e.value)


@pytest.mark.skipif(
    "libasan" in os.environ.get("LD_PRELOAD", "") or "libtsan" in os.environ.get("LD_PRELOAD", ""),
    reason="address-space limits (RLIMIT_AS) cannot work under ASan/TSan, whose "
    "shadow memory reserves terabytes; run this test in a plain build",
)
@pytest.mark.parametrize("forged", [True, False], ids=["forged-header", "honest-header"])
@pytest.mark.parametrize("how", sorted(READS))
def test_short_zstd_frame_under_address_space_limit(tmp_path, forged, how):
    """The hostile-pack review's case, a 140 KB frame claiming 4.6 GB, in a
    child whose address space is capped at 1 GiB above what the interpreter
    (with whatever torch and numpy map at import) already holds: the read
    must raise CorruptPackError, not MemoryError or an abort."""
    pack, i, claimed = hostile_pack(tmp_path, 140000, forged)
    assert claimed > 4 << 30
    script = textwrap.dedent(
        f"""
        import resource, sys
        import ufspack
        try:
            import torch, numpy  # map what they map before the limit
        except ImportError:
            pass
        pack, i = {pack!r}, {i}
        ufspack.MyImageFolder(pack)  # opened once before the limit, too
        with open("/proc/self/status") as f:
            vm = [int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:")][0]
        resource.setrlimit(resource.RLIMIT_AS, (vm + (1 << 30), vm + (1 << 30)))
        try:
            {READS[how]}
        except ufspack.CorruptPackError as e:
            print("CorruptPackError:", e)
            sys.exit(0)
        except MemoryError:
            print("MemoryError")
            sys.exit(1)
        print("no error")
        sys.exit(2)
        """
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr[-2000:])
    assert f"record {i} 'c/hostile.jpg'" in r.stdout
