// Copyright 2026 The ufspack Authors.
//
// `ufspack mount` and `ufspack umount`: a pack as a read-only directory
// tree through FUSE (ufspack/mount.h).  Built only with UFSPACK_BUILD_MOUNT
// (libfuse3); without it both commands say so.
#include <fcntl.h>
#include <sys/wait.h>
#include <syslog.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "ufspack/posix_io.h"
#include "util.h"
#ifdef UFSPACK_HAVE_MOUNT
#include "ufspack/mount.h"
#endif

namespace ufspack {
namespace cli {

const char kMountHelp[] =
    R"(Usage: ufspack mount <pack> <mountpoint> [--cache <dir>] [--foreground]
                     [--log-file <file>] [--read-ahead <size>] [--threads <n>]
                     [-o <option>[,<option>...]]

<pack> is a pack directory, its index.ufs, a merged pack, or a pack URL:
s3://bucket/prefix (AWS settings from the environment and ~/.aws) or
https://host/path (docs/remote.md).  <mountpoint> is an empty directory.

Mounts the pack read-only at <mountpoint> (FUSE): each record is a file at
its name ("cats/cat.1.jpg"), with its original size and the index file's
modification time.  Listing and stat are answered from the index (nothing
is read from data.ufs); reading a file reads its record with one request
(checksummed, decompressed); files read one after the other in the pack's
order (a directory's files in name order) are read ahead (--read-ahead).
A damaged or unreachable record gives EIO and a log line naming it (once
per 10 s for a record that keeps failing, with the count of repeats); on
unmount a last line counts the reads served and failed.  Writes fail with
EROFS.  Names that cannot be paths (empty components, '.', '..', a NUL
byte) are refused at mount.

Without --foreground the command returns once the file system is mounted
(errors are reported first) and a background process serves it, logging
to syslog (or --log-file; where there is no syslog, as in most
containers, it says so and the lines are lost); unmount with 'ufspack
umount <mountpoint>' or 'fusermount3 -u <mountpoint>'.  With
--foreground it serves until unmounted or interrupted: Ctrl-C (SIGINT,
SIGTERM, SIGHUP) unmounts and exits 0 (with files of the mount still
open, they are read to the end first; a second Ctrl-C exits at once).

Options:
      --cache <dir>     read through the node-local cache <dir> (see
                        'ufspack warmup'): cached records cost no request,
                        others are read and cached; cached records keep
                        reading while the pack's storage is unreachable
  -f, --foreground      stay attached; log lines on stderr
      --log-file <file> append the log lines to <file> (created if need
                        be), each with its time (UTC) and the process id,
                        instead of stderr (--foreground) or syslog
      --read-ahead <size>
                        files read one after the other in the pack's order
                        are read ahead (default 4M, at most 256M; 0 turns
                        it off): of an s3:// or https:// pack, many with
                        one ranged GET, in windows from 256K doubling up to
                        <size> (memory: up to 24 times <size>); of a pack
                        on a file system (NFS), <size> past the last file
                        is asked of the kernel, to arrive while the files
                        before it are read (not with --cache).  Files read
                        in another order (shuffled) are read alone
      --threads <n>     the most requests served at once (default 64, 1 to
                        1024): reads of many processes wait in parallel for
                        their GETs (or NFS preads); each busy one holds a
                        request buffer of about 1 MiB
  -o <options>          FUSE mount options, comma-separated, e.g.
                        allow_other (other users may read the mount; needs
                        user_allow_other in /etc/fuse.conf unless root)

Exit status: 0 mounted (--foreground: unmounted cleanly), 1 the mount
failed (mountpoint not an empty directory, a stale mount there, the pack
cannot be read, a name cannot be a path, FUSE refused), 2 usage error,
3 the pack is damaged.

Examples:
  ufspack mount /nfs/imagenet/train.ufspack /mnt/train --cache /local/ufspack
  ufspack mount s3://bucket/train.ufspack /mnt/train -o allow_other
  ufspack umount /mnt/train
)";

const char kUmountHelp[] = R"(Usage: ufspack umount <mountpoint>

Unmounts the ufspack mount at <mountpoint> (as 'fusermount3 -u'), also a
stale one whose server was killed.  Refuses a directory that is not a
ufspack mount.

Exit status: 0 unmounted, 1 not a ufspack mount, or busy (a process has a
file or its working directory there), 2 usage error.

Examples:
  ufspack umount /mnt/train
)";

#ifndef UFSPACK_HAVE_MOUNT

int CmdMount(const Argv&) {
  PrintError(Status::NotSupported(
      "this ufspack was built without mount (UFSPACK_BUILD_MOUNT, libfuse3)"));
  return kExitFailure;
}
int CmdUmount(const Argv& argv) { return CmdMount(argv); }

#else

namespace {

struct MountArgs {
  std::string pack, mountpoint, cache_dir, log_file;
  bool foreground = false;
  int log_fd = -1;  // --log-file, opened before the fork
  // The library's defaults, changed by --read-ahead and --threads.
  uint64_t read_ahead_bytes = MountOptions{}.read_ahead_bytes;
  int max_threads = MountOptions{}.max_threads;
  std::vector<std::string> fuse_options;
};

// The pack as the mount table shows it: a URL without its query string.
std::string FsName(const std::string& pack) {
  return pack.substr(0, pack.find('?'));
}

// Appends "2026-11-28T01:02:03Z ufspack mount[PID]: <line>" to `fd` (an
// O_APPEND file) with one write, so lines of several mounts sharing a
// file on a local file system do not interleave.  A short write (a full
// disk) is finished, so the next line starts on a line of its own; a
// failed one is dropped (nowhere to say so: the log is what failed).
void LogTo(int fd, const std::string& line) {
  char stamp[32];
  const time_t now = time(nullptr);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &tm);
  const std::string out = std::string(stamp) + " ufspack mount[" +
                          std::to_string(getpid()) + "]: " + line + "\n";
  (void)internal::WriteAll(fd, out.data(), out.size(), "");
}

// Opens --log-file (appending; created 0644) on a descriptor above 2, which
// the background server's redirection of stdio leaves alone; prints the
// error.
int OpenLogFile(MountArgs* a) {
  if (a->log_file.empty()) return kExitOk;
  const int fd = open(a->log_file.c_str(),
                      O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    PrintError(Status::FromErrno(
        "opening the log file " + Printable(a->log_file), errno));
    return kExitFailure;
  }
  a->log_fd = fd > 2 ? fd : fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (fd <= 2) close(fd);
  if (a->log_fd < 0) {
    PrintError(Status::FromErrno("fcntl", errno));
    return kExitFailure;
  }
  return kExitOk;
}

// Opens the pack and mounts it; prints errors.  Returns the exit status
// (kExitOk with *mount set).
int MountPack(const MountArgs& a, bool foreground,
              std::unique_ptr<PackMount>* mount) {
  if (Status s = CheckMountpoint(a.mountpoint); !s.ok()) {
    PrintError(s);
    return kExitFailure;
  }
  ReaderOptions ro;
  if (!a.cache_dir.empty()) OpenCache(a.cache_dir, &ro);
  std::unique_ptr<Reader> reader;
  if (int rc = OpenPack(a.pack, ro, &reader); rc != kExitOk) return rc;
  MountOptions mo;
  mo.fuse_options = a.fuse_options;
  mo.fsname = FsName(a.pack);
  mo.read_ahead_bytes = a.read_ahead_bytes;
  mo.max_threads = a.max_threads;
  // A knob for tests and old kernels: an open file per open (docs/mount.md).
  const char* buffers = getenv("UFSPACK_MOUNT_OPEN_BUFFERS");
  mo.zero_message_opens = buffers == nullptr || *buffers == '\0';
  if (a.log_fd >= 0) {
    mo.log = [fd = a.log_fd](const std::string& line) { LogTo(fd, line); };
  } else if (!foreground) {
    mo.log = [](const std::string& line) {
      syslog(LOG_ERR, "%s", line.c_str());
    };
  }
  Status s = PackMount::Mount(std::move(reader), a.mountpoint, mo, mount);
  if (!s.ok()) {
    PrintError(s);
    return s.IsCorruption() ? kExitCorrupt : kExitFailure;
  }
  std::printf("mounted %s at %s: %s files in %s directories%s\n",
              Printable(a.pack).c_str(), Printable(a.mountpoint).c_str(),
              FormatCount((*mount)->file_count()).c_str(),
              FormatCount((*mount)->dir_count() - 1).c_str(),
              foreground ? "; Ctrl-C unmounts" : "");
  std::fflush(stdout);
  return kExitOk;
}

int Serve(PackMount* mount) {
  Status s = mount->Run();
  if (!s.ok()) {
    PrintError(s);
    return kExitFailure;
  }
  return kExitOk;
}

// The background mount: the child mounts (errors still on this terminal)
// and reports its exit status through a pipe; the parent returns it.  The
// child then leaves the terminal (stdio to /dev/null, log to syslog) and
// serves.  Forking before anything is opened keeps the Reader's threads
// (remote storage, the cache) in the process that uses them.
int MountInBackground(const MountArgs& a) {
  int fds[2];
  if (pipe(fds) != 0) {
    PrintError(Status::FromErrno("pipe", errno));
    return kExitFailure;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) {
    PrintError(Status::FromErrno("fork", errno));
    return kExitFailure;
  }
  if (pid == 0) {
    close(fds[0]);
    setsid();
    openlog("ufspack-mount", LOG_PID, LOG_USER);
    std::unique_ptr<PackMount> mount;
    const unsigned char rc =
        static_cast<unsigned char>(MountPack(a, false, &mount));
    (void)!write(fds[1], &rc, 1);
    close(fds[1]);
    if (rc != kExitOk) _exit(rc);
    const int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
      dup2(null, 0);
      dup2(null, 1);
      dup2(null, 2);
      if (null > 2) close(null);
    }
    if (chdir("/") != 0) {
    }
    _exit(Serve(mount.get()));
  }
  close(fds[1]);
  unsigned char rc = 0;
  ssize_t n;
  while ((n = read(fds[0], &rc, 1)) < 0 && errno == EINTR) {
  }
  close(fds[0]);
  if (n == 1) {
    if (rc != kExitOk) {
      waitpid(pid, nullptr, 0);
    } else if (a.log_fd < 0 && access("/dev/log", W_OK) != 0) {
      std::fprintf(stderr,
                   "ufspack mount: note: no syslog here (/dev/log): the "
                   "mount's log lines (records that fail to read) are "
                   "lost; --log-file <file> keeps them\n");
    }
    return rc;
  }
  int status = 0;
  waitpid(pid, &status, 0);
  PrintError(Status::IOError(
      "the mount process died before mounting" +
      (WIFSIGNALED(status)
           ? " (signal " + std::to_string(WTERMSIG(status)) + ")"
           : std::string())));
  return kExitFailure;
}

}  // namespace

int CmdMount(const Argv& argv) {
  CommandLine cl("mount");
  MountArgs a;
  cl.app().add_option("pack", a.pack)->required();
  cl.app().add_option("mountpoint", a.mountpoint)->required();
  cl.app().add_option("--cache", a.cache_dir);
  cl.app().add_flag("-f,--foreground", a.foreground);
  cl.app().add_option("--log-file", a.log_file);
  std::string read_ahead;
  cl.app().add_option("--read-ahead", read_ahead);
  std::string threads;
  cl.app().add_option("--threads", threads);
  cl.app()
      .add_option("-o", a.fuse_options)
      ->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  if (int rc = cl.Parse(argv); rc >= 0) return rc;
  if (!read_ahead.empty()) {
    if (!ParseSize(read_ahead, &a.read_ahead_bytes)) {
      return Usage("mount",
                   "--read-ahead takes a size such as 4M, 512K or "
                   "0, not '" +
                       Printable(read_ahead) + "'");
    }
    // Up to 8 runs read ahead at once, with up to 3 windows this large each.
    if (a.read_ahead_bytes != 0 && (a.read_ahead_bytes < (256 << 10) ||
                                    a.read_ahead_bytes > (256 << 20))) {
      return Usage("mount",
                   "--read-ahead takes 0 (off) or a size from 256K "
                   "to 256M, not '" +
                       Printable(read_ahead) + "'");
    }
  }
  if (!threads.empty()) {
    uint64_t n = 0;
    if (!ParseUint(threads, &n) || n < 1 || n > 1024) {
      return Usage("mount",
                   "--threads takes a whole number from 1 to 1024, not '" +
                       Printable(threads) + "'");
    }
    a.max_threads = static_cast<int>(n);
  }
  if (int rc = OpenLogFile(&a); rc != kExitOk) return rc;
  if (!a.foreground) return MountInBackground(a);
  std::unique_ptr<PackMount> mount;
  if (int rc = MountPack(a, true, &mount); rc != kExitOk) return rc;
  return Serve(mount.get());
}

int CmdUmount(const Argv& argv) {
  CommandLine cl("umount");
  std::string mountpoint;
  cl.app().add_option("mountpoint", mountpoint)->required();
  if (int rc = cl.Parse(argv); rc >= 0) return rc;
  if (Status s = Unmount(mountpoint); !s.ok()) {
    PrintError(s);
    return kExitFailure;
  }
  return kExitOk;
}

#endif  // UFSPACK_HAVE_MOUNT

}  // namespace cli
}  // namespace ufspack
