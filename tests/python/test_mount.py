"""`ufspack mount` and ufspack.mounted: real FUSE mounts of real packs.

Skipped (with the reason) where FUSE is unavailable: no /dev/fuse, no
fusermount3, or a CLI built without mount.  Every wait is bounded.
"""

import concurrent.futures
import errno
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time

import pytest

import fusecheck
import httpserve
import ufspack

CLI = fusecheck.CLI


_REASON = fusecheck.unavailable()
pytestmark = pytest.mark.skipif(_REASON is not None, reason=str(_REASON))


def cli(*args, timeout=60):
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout)


def wait_until(pred, timeout=20.0, what="condition"):
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


class Foreground:
    """`ufspack mount --foreground` as a child process, its stderr in a file."""

    def __init__(self, pack, root, *extra):
        self.root = str(root)
        os.makedirs(self.root, exist_ok=True)
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [CLI, "mount", str(pack), self.root, "--foreground", *map(str, extra)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self.log,
        )
        wait_until(lambda: os.path.ismount(self.root) or self.proc.poll() is not None, what="the mount")
        assert os.path.ismount(self.root), self.stderr()

    def stderr(self):
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")

    def stop(self):
        """SIGINT (a clean unmount), bounded; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(20)
        if os.path.ismount(self.root):
            cli("umount", self.root)
        return self.proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        rc = self.stop()
        log = self.output = self.stderr()  # all of it, the last line included
        self.log.close()
        # Served and unmounted cleanly (no crash at exit).
        assert exc_type is not None or rc == 0, f"exit status {rc}: {log}"


def tree_files(root):
    """{relative path (bytes): absolute path} of the files under root."""
    root_b = os.fsencode(root)
    out = {}
    for d, _, files in os.walk(root_b, followlinks=True):
        for f in files:
            full = os.path.join(d, f)
            out[os.path.relpath(full, root_b)] = full
    return out


def read(path):
    with open(path, "rb") as f:
        return f.read()


def damage(pack, name):
    """Flips a byte in the middle of record `name`; returns (index, record)."""
    p = ufspack.Pack(str(pack))
    i = p.find(name)
    rec = p.record(i)
    with open(pack / "data.ufs", "r+b") as f:
        f.seek(rec["offset"] + rec["stored_size"] // 2)
        b = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([b[0] ^ 0x40]))
    return i, rec


SUMMARY = re.compile(
    r"unmounted \S+: (\d+) record reads(?: \([^)]*read[- ]ahead[^)]*\))?, (\d+) failed"
    r"(?: \((\d+) repeated failures not logged\))?$",
    re.MULTILINE,
)


def summary(log):
    """(reads, failed, repeats not logged) from the mount's last line."""
    m = SUMMARY.search(log)
    assert m, log
    return int(m[1]), int(m[2]), int(m[3] or 0)


def test_tree_bytes_stat_and_imagefolder(edge_tree, edge_pack):
    torchvision = pytest.importorskip("torchvision")
    ref = torchvision.datasets.ImageFolder(edge_tree)
    src = {os.fsencode(os.path.relpath(p, edge_tree)): p for p, _ in ref.samples}
    index_mtime = int(os.stat(os.path.join(edge_pack, "index.ufs")).st_mtime)
    with ufspack.mounted(edge_pack) as root:
        files = tree_files(root)
        assert sorted(files) == sorted(src)
        for rel, path in files.items():
            st = os.stat(path)
            data = read(path)
            assert data == read(src[rel]), rel
            assert st.st_size == len(data) and stat.S_IMODE(st.st_mode) == 0o444
            assert int(st.st_mtime) == index_mtime
        for d, _, _ in os.walk(root):
            assert stat.S_IMODE(os.stat(d).st_mode) == 0o555
        ds = torchvision.datasets.ImageFolder(root)
        assert ds.classes == ref.classes and ds.class_to_idx == ref.class_to_idx
        rel_samples = [(os.path.relpath(p, root), t) for p, t in ds.samples]
        assert rel_samples == [(os.path.relpath(p, edge_tree), t) for p, t in ref.samples]
        for i in range(len(ds)):
            assert ds[i][0].tobytes() == ref[i][0].tobytes() and ds[i][1] == ref[i][1]


def test_empty_classes_are_empty_directories(tmp_path):
    """A pack built with allow_empty keeps its empty classes; the mount
    shows them as the source tree had them, so ImageFolder there refuses
    them as it refuses the source tree, and the directories are the
    classes of MyImageFolder over the pack."""
    torchvision = pytest.importorskip("torchvision")
    src = tmp_path / "src"
    for cls in ("a", "b", "c", "d"):
        (src / cls).mkdir(parents=True)
    for cls in ("a", "c"):
        (src / cls / "x.jpg").write_bytes(cls.encode() * 10)
    pack = tmp_path / "pack"
    ufspack.build(str(src), str(pack), allow_empty=True, progress=False)
    with ufspack.mounted(pack) as root:
        assert sorted(os.listdir(root)) == ["a", "b", "c", "d"]
        assert os.listdir(os.path.join(root, "b")) == [] and os.listdir(os.path.join(root, "d")) == []
        assert os.stat(root).st_nlink == 2 + 4
        with pytest.raises(FileNotFoundError, match="Found no valid file for the classes b, d"):
            torchvision.datasets.ImageFolder(str(src))
        with pytest.raises(FileNotFoundError, match="Found no valid file for the classes b, d"):
            torchvision.datasets.ImageFolder(root)
        ds = ufspack.MyImageFolder(str(pack))
        assert ds.classes == sorted(os.listdir(root))
        assert ds.targets == [0, 2]


def test_zstd_merged_pack(small_tree, tmp_path):
    out = tmp_path / "merged"
    ufspack.build(small_tree, str(out), compress="zstd", parts=2, progress=False)
    assert (out / "manifest.ufs").exists()
    with ufspack.mounted(out) as root:
        files = tree_files(root)
        want = tree_files(small_tree)
        assert sorted(files) == sorted(want)
        for rel, path in files.items():
            assert read(path) == read(want[rel])
            assert os.stat(path).st_size == os.stat(want[rel]).st_size


@pytest.mark.parametrize("open_buffers", ["", "1"], ids=["zero_message_opens", "open_buffers"])
def test_chunked_reads_and_seeks(tmp_path, monkeypatch, open_buffers):
    # A record larger than the kernel's 128 KiB reads, read in pieces: kept
    # in the mount's shared slots (the kernel opening files without asking)
    # or with each open file (UFSPACK_MOUNT_OPEN_BUFFERS=1).
    monkeypatch.setenv("UFSPACK_MOUNT_OPEN_BUFFERS", open_buffers)
    payload = os.urandom(700_000)
    (tmp_path / "src" / "c").mkdir(parents=True)
    (tmp_path / "src" / "c" / "big.png").write_bytes(payload)
    ufspack.build(str(tmp_path / "src"), str(tmp_path / "pack"), compress="zstd", progress=False)
    with ufspack.mounted(tmp_path / "pack") as root:
        path = os.path.join(root, "c", "big.png")
        with open(path, "rb") as f:
            f.seek(500_001)
            assert f.read(1000) == payload[500_001:501_001]
            f.seek(0)
            assert f.read() == payload
        with open(path, "rb", buffering=0) as f:
            pieces = []
            while chunk := f.read(65_536):
                pieces.append(chunk)
        assert b"".join(pieces) == payload


def test_files_read_in_the_packs_order_are_read_ahead(small_pack, tmp_path):
    # A pack on a file system: the data ahead of a run of files read in the
    # pack's order is asked of the kernel (the last line counts it); not for
    # another order, with --read-ahead 0, or through a cache.
    p = ufspack.Pack(str(small_pack))
    names = [p.name(j) for j in range(len(p))]
    cases = [((), names, True), ((), names[::-1], False), (("--read-ahead", "0"), names, False),
             (("--cache", tmp_path / "cache"), names, False)]
    for k, (extra, order, read_ahead) in enumerate(cases):
        with Foreground(small_pack, tmp_path / f"mnt{k}", *extra) as m:
            for name in order:
                assert read(os.path.join(m.root, name)) == p.read(p.find(name)), name
        assert summary(m.output)[:2] == (len(p), 0), m.output
        assert ("bytes read ahead" in m.output) == read_ahead, (extra, m.output)


def test_writes_fail_with_erofs(small_pack):
    with ufspack.mounted(small_pack) as root:
        f = os.path.join(root, "class0", "img0.png")
        attempts = [
            lambda: open(f, "r+b"),
            lambda: open(os.path.join(root, "class0", "new.png"), "wb"),
            lambda: os.chmod(f, 0o644),
            lambda: os.rename(f, os.path.join(root, "class0", "moved.png")),
            lambda: os.mkdir(os.path.join(root, "newdir")),
            lambda: os.unlink(f),
            lambda: os.utime(f, (0, 0)),
        ]
        for attempt in attempts:
            with pytest.raises(OSError) as e:
                attempt()
            assert e.value.errno == errno.EROFS
        assert len(read(f)) > 0


def test_listing_and_stat_read_nothing_from_data(small_pack, small_tree, tmp_path):
    pack = tmp_path / "pack"
    shutil.copytree(small_pack, pack)
    want = tree_files(small_tree)
    with Foreground(pack, tmp_path / "mnt") as m:
        # The mount's data.ufs emptied in place (the Reader's open file):
        # any read of it now fails, so what still works reads nothing.
        os.truncate(pack / "data.ufs", 0)
        files = tree_files(m.root)
        assert sorted(files) == sorted(want)
        for rel, path in files.items():
            assert os.stat(path).st_size == os.stat(want[rel]).st_size
        with pytest.raises(OSError) as e:
            read(files[b"class1/img2.png"])
        assert e.value.errno == errno.EIO


@pytest.mark.parametrize("open_buffers", ["", "1"], ids=["zero_message_opens", "open_buffers"])
def test_corrupt_record_gives_eio_and_a_log_line(small_pack, tmp_path, monkeypatch, open_buffers):
    monkeypatch.setenv("UFSPACK_MOUNT_OPEN_BUFFERS", open_buffers)
    pack = tmp_path / "pack"
    shutil.copytree(small_pack, pack)
    i, rec = damage(pack, "class2/img5.jpg")
    p = ufspack.Pack(str(pack))
    with Foreground(pack, tmp_path / "mnt") as m:
        with pytest.raises(OSError) as e:
            read(os.path.join(m.root, "class2", "img5.jpg"))
        assert e.value.errno == errno.EIO
        assert len(read(os.path.join(m.root, "class2", "img4.png"))) > 0
        # Every file in the pack's order: the damaged record alone fails.
        for j in range(len(p)):
            path = os.path.join(m.root, p.name(j))
            if j == i:
                with pytest.raises(OSError) as e:
                    read(path)
                assert e.value.errno == errno.EIO
            else:
                assert read(path) == p.read(j), p.name(j)
    log = m.output
    assert f"record {i} 'class2/img5.jpg'" in log and f"offset {rec['offset']}" in log, log
    assert "checksum" in log, log
    # Read twice (and each read asked for more than once): logged once.
    assert log.count(f"record {i} 'class2/img5.jpg'") == 1, log
    reads, failed, repeats = summary(log)
    assert reads >= len(p) - 1 and failed >= 2 and repeats >= 1, log


def test_cached_records_read_while_the_source_is_gone(small_pack, tmp_path):
    pack = tmp_path / "pack"
    shutil.copytree(small_pack, pack)
    cache = tmp_path / "cache"
    a = os.path.join("class0", "img1.jpg")
    with ufspack.mounted(pack, cache=cache) as root:
        expected = read(os.path.join(root, a))
    shutil.rmtree(pack)  # the source unreachable: the pack served from the cache
    with Foreground(pack, tmp_path / "mnt", "--cache", cache) as m:
        assert read(os.path.join(m.root, a)) == expected
        with pytest.raises(OSError) as e:
            read(os.path.join(m.root, "class0", "img2.png"))
        assert e.value.errno == errno.EIO


def test_warmed_up_cache_serves_every_file_with_the_pack_gone(small_pack, small_tree, tmp_path):
    pack = tmp_path / "pack"
    shutil.copytree(small_pack, pack)
    r = cli("warmup", pack, "--cache", tmp_path / "cache", "-q")
    assert r.returncode == 0, r.stderr
    shutil.rmtree(pack)
    with ufspack.mounted(pack, cache=tmp_path / "cache", options=("allow_other",)) as root:
        with open("/proc/self/mountinfo") as f:
            line = next(x for x in f if f" {root} " in x)
        assert "fuse.ufspack" in line and "allow_other" in line, line
        want = tree_files(small_tree)
        files = tree_files(root)
        assert sorted(files) == sorted(want)
        for rel, path in files.items():
            assert read(path) == read(want[rel])


def test_bad_mountpoints_and_packs(small_pack, tmp_path):
    full = tmp_path / "full"
    full.mkdir()
    (full / "x").write_bytes(b"")
    r = cli("mount", small_pack, full)
    assert r.returncode == 1 and "not empty" in r.stderr, r.stderr
    r = cli("mount", small_pack, tmp_path / "missing")
    assert r.returncode == 1 and "no such directory" in r.stderr, r.stderr
    r = cli("mount", small_pack, full / "x")
    assert r.returncode == 1 and "not a directory" in r.stderr, r.stderr
    (tmp_path / "mnt").mkdir()
    r = cli("mount", tmp_path / "nopack", tmp_path / "mnt")
    assert r.returncode == 1 and "nopack" in r.stderr, r.stderr
    assert not os.path.ismount(tmp_path / "mnt")
    r = cli("umount", tmp_path / "mnt")
    assert r.returncode == 1 and "not a mount point" in r.stderr, r.stderr
    for bad in ("100K", "1G", "lots"):
        r = cli("mount", small_pack, tmp_path / "mnt", "--read-ahead", bad)
        assert r.returncode == 2 and "--read-ahead takes" in r.stderr and bad in r.stderr, r.stderr
    for bad in ("0", "1025", "-3", "many"):
        r = cli("mount", small_pack, tmp_path / "mnt", "--threads", bad)
        assert r.returncode == 2 and "--threads takes" in r.stderr and bad in r.stderr, r.stderr


@pytest.mark.parametrize(
    "names, why",
    [
        (["a", "a/b"], "is also the file of record 0"),
        (["d/" + "n" * 256, "d/ok"], "component of 256 bytes"),
    ],
)
def test_names_that_cannot_be_paths_are_refused(tmp_path, names, why):
    # Names a Writer takes but no directory tree can hold.
    with ufspack.Writer(tmp_path / "pack", flat=True) as w:
        for name in names:
            w.add(name, b"x")
    (tmp_path / "mnt").mkdir()
    r = cli("mount", tmp_path / "pack", tmp_path / "mnt", "--foreground", timeout=30)
    assert r.returncode == 1, r.stderr
    assert why in r.stderr and "cannot be mounted" in r.stderr and "record " in r.stderr, r.stderr
    assert not os.path.ismount(tmp_path / "mnt")


def test_background_mount_and_umount(small_pack, small_tree, tmp_path):
    pack = tmp_path / "pack"
    shutil.copytree(small_pack, pack)
    i, rec = damage(pack, "class2/img5.jpg")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    log = tmp_path / "logs" / "mount.log"
    # A log file that cannot be opened: refused before anything is mounted.
    r = cli("mount", pack, mnt, "--log-file", log, timeout=30)
    assert r.returncode == 1 and str(log) in r.stderr and "No such file" in r.stderr, r.stderr
    assert not os.path.ismount(mnt)
    log.parent.mkdir()
    # Returns once mounted, holding none of our pipes (or this would hang).
    r = cli("mount", pack, mnt, "--log-file", log, timeout=30)
    try:
        assert r.returncode == 0, r.stderr
        assert "mounted" in r.stdout and "24 files" in r.stdout, r.stdout
        assert "syslog" not in r.stderr, r.stderr
        assert os.path.ismount(mnt)
        assert read(mnt / "class1" / "img0.png") == read(os.path.join(small_tree, "class1", "img0.png"))
        for _ in range(3):  # a program retrying: one line, the repeats counted
            with pytest.raises(OSError) as e:
                read(mnt / "class2" / "img5.jpg")
            assert e.value.errno == errno.EIO
        r2 = cli("mount", pack, mnt)
        assert r2.returncode == 1 and "already" in r2.stderr, r2.stderr
    finally:
        u = cli("umount", mnt)
    assert u.returncode == 0, u.stderr
    assert not os.path.ismount(mnt)
    # The background process writes its last line once unmounted.
    wait_until(lambda: "unmounted" in log.read_text(), what="the mount's last log line")
    lines = log.read_text().splitlines()
    damaged = [line for line in lines if f"record {i} 'class2/img5.jpg'" in line]
    assert len(damaged) == 1, lines
    assert f"offset {rec['offset']}" in damaged[0] and "checksum" in damaged[0], lines
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ ufspack mount\[\d+\]: EIO: .*", damaged[0]), damaged[0]
    assert "unmounted" in lines[-1], lines
    reads, failed, repeats = summary(lines[-1])
    assert reads >= 4 and failed >= 3 and repeats >= 2, lines
    # Without --log-file where there is no syslog: said, once mounted.
    if not os.path.exists("/dev/log"):
        r = cli("mount", pack, mnt, timeout=30)
        try:
            assert r.returncode == 0, r.stderr
            assert "no syslog here" in r.stderr and "--log-file" in r.stderr, r.stderr
        finally:
            assert cli("umount", mnt).returncode == 0


def test_sigint_unmounts_cleanly(small_pack, tmp_path):
    m = Foreground(small_pack, tmp_path / "mnt")
    try:
        m.proc.send_signal(signal.SIGINT)
        assert m.proc.wait(20) == 0, m.stderr()
        assert not os.path.ismount(m.root)
    finally:
        m.stop()


def test_kill9_leaves_a_stale_mount_that_umount_clears(small_pack, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    m = Foreground(small_pack, mnt)
    try:
        m.proc.kill()
        m.proc.wait(20)
        with pytest.raises(OSError) as e:
            os.statvfs(mnt)
        assert e.value.errno == errno.ENOTCONN
        r = cli("mount", small_pack, mnt, "--foreground", timeout=30)
        assert r.returncode == 1, r.stderr
        assert "stale mount" in r.stderr and f"fusermount3 -u {mnt}" in r.stderr, r.stderr
        assert f"ufspack umount {mnt}" in r.stderr, r.stderr
        u = cli("umount", mnt)
        assert u.returncode == 0, u.stderr
        assert os.listdir(mnt) == []
    finally:
        m.stop()


def test_mounted_cleans_up_on_exceptions(small_pack, tmp_path):
    log = tmp_path / "mount.log"
    with pytest.raises(KeyError):
        with ufspack.mounted(small_pack, log=log) as root:
            assert os.path.ismount(root)
            read(os.path.join(root, "class0", "img1.jpg"))
            raise KeyError("boom")
    assert not os.path.exists(root)
    reads, failed, _ = summary(log.read_text())
    assert reads >= 1 and failed == 0
    with pytest.raises(ufspack.MountError, match="nopack"):
        with ufspack.mounted(os.path.join(small_pack, "nopack")):
            pass


SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "remote", "static_server.py")


def serve(root):
    """static_server.py over `root`: (process, url)."""
    ready = os.path.join(root, ".ready")
    proc = subprocess.Popen(
        [sys.executable, SERVER, root, "--port-file", ready],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    wait_until(lambda: os.path.exists(ready) or proc.poll() is not None, what="static_server.py")
    with open(ready) as f:
        return proc, json.load(f)["url"]


def cache_hits(cache):
    """The cache's hits (lookups are counted in lumps, all of them once
    the processes using it have ended)."""
    r = cli("cache", "stat", cache, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["tiers"][0]["hits"]


def test_http_pack_through_the_cache_and_the_server_gone(small_pack, small_tree, tmp_path, monkeypatch):
    monkeypatch.setenv("UFSPACK_REMOTE_MAX_ATTEMPTS", "1")  # a dead server fails fast
    www = tmp_path / "www"
    shutil.copytree(small_pack, www / "small.ufspack")
    server, url = serve(str(www))
    cached = os.path.join("class0", "img1.jpg")
    uncached = os.path.join("class2", "img6.png")
    try:
        with Foreground(url + "/small.ufspack", tmp_path / "mnt", "--cache", tmp_path / "cache") as m:
            assert sorted(tree_files(m.root)) == sorted(tree_files(small_tree))
            want = read(os.path.join(small_tree, cached))
            assert read(os.path.join(m.root, cached)) == want
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
            # The kernel's copy dropped: the read goes to the mount, which
            # serves it from the node-local cache.
            with open(os.path.join(m.root, cached), "rb") as f:
                os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
            assert read(os.path.join(m.root, cached)) == want
            with pytest.raises(OSError) as e:
                read(os.path.join(m.root, uncached))
            assert e.value.errno == errno.EIO
            assert "EIO" in m.stderr() and "img6.png" in m.stderr()
        # Counted when the mount ended: the second read was the cache's.
        assert cache_hits(tmp_path / "cache") == 1
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


@pytest.mark.parametrize("threads", [None, 4], ids=["default", "4"])
def test_reads_of_many_threads_wait_for_the_server_in_parallel(tmp_path, threads):
    """24 threads each read a file of a pack on a web server that answers
    after 50 ms: all 24 GETs are in flight at once by default (libfuse's
    own cap is 10), at most --threads of them with --threads."""
    src = tmp_path / "src"
    for i in range(24):
        (src / f"c{i % 3}").mkdir(parents=True, exist_ok=True)
        (src / f"c{i % 3}" / f"{i:02d}.jpg").write_bytes(bytes([i]) * (1000 + i))
    www = tmp_path / "www"
    ufspack.build(str(src), str(www / "p"), progress=False)
    with httpserve.serve(str(www), "--delay-ms", "50") as url:
        extra = ["--read-ahead", "0"] + (["--threads", str(threads)] if threads else [])
        with Foreground(url + "/p", tmp_path / "mnt", *extra) as m:
            paths = sorted(tree_files(m.root).items())
            assert len(paths) == 24
            httpserve.stats(url)  # the peak from now on
            start = threading.Barrier(len(paths))

            def read_one(item):
                rel, path = item
                start.wait(timeout=20)
                return read(path) == read(os.path.join(src, os.fsdecode(rel)))

            with concurrent.futures.ThreadPoolExecutor(len(paths)) as ex:
                assert all(ex.map(read_one, paths))
            peak = httpserve.stats(url)["peak_in_flight"]
            if threads is None:
                assert peak >= 16, peak
            else:
                assert peak <= threads, peak
