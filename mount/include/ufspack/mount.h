// Copyright 2026 The ufspack Authors.
//
// A pack as a read-only directory tree, through FUSE (libfuse 3), for every
// program that wants files.  See docs/mount.md.
//
//   std::unique_ptr<ufspack::Reader> reader;   // local, s3://, https://,
//   UFSPACK_RETURN_IF_ERROR(                    // merged, with a cache...
//       ufspack::Reader::Open(pack, options, &reader));
//   std::unique_ptr<ufspack::PackMount> m;
//   UFSPACK_RETURN_IF_ERROR(
//       ufspack::PackMount::Mount(std::move(reader), "/mnt/train", {}, &m));
//   return m->Run();                            // until unmounted or SIGINT
//
// Records are files at their names ("cats/cat.1.jpg"), the directories of
// those names are directories.  The tree is built once, at Mount(), from
// the names in the mapped index: listings and stat never read data.ufs.
// A read() reads the whole record with one Reader::Read (one pread, one
// ranged GET, or none when the cache holds it; checksummed, zstd
// decompressed), and files read in the pack's order are
// read ahead (MountOptions::read_ahead_bytes); a file read in the kernel's 128
// KiB pieces keeps it (with its open file, or in a few shared slots when the
// kernel opens files without asking: MountOptions::zero_message_opens) for the
// next pieces, so each file costs one request.  The kernel keeps the pages (the
// pack is immutable), so a file read again costs none.  A record that fails
// (checksum mismatch, unreachable storage) gives EIO to the program and a log
// line naming the record, its offset and the error (MountOptions::log);
// wrong bytes are never returned.  Writes of any kind fail with EROFS.
//
// Thread safety: Mount() and Run() are called from one thread; Run() serves
// requests on libfuse's worker threads, which share the Reader (whose const
// methods are thread-safe).  Lifetime: the PackMount owns the Reader; its
// destructor unmounts if Run() did not.
#ifndef UFSPACK_MOUNT_H_
#define UFSPACK_MOUNT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ufspack/export.h"
#include "ufspack/reader.h"
#include "ufspack/status.h"

namespace ufspack {

struct MountOptions {
  // Mount options for FUSE as -o takes them ("allow_other",
  // "allow_root"); "ro", "default_permissions", "subtype=ufspack" and
  // "fsname=<pack>" are always given.
  std::vector<std::string> fuse_options;
  // The file system's name in the mount table (mount(8), df): the pack,
  // usually; "ufspack" when empty.
  std::string fsname;
  // Where the log lines go (one line each, no newline): a record that
  // could not be read (once per 10 s for a record that keeps failing, with
  // the count of repeats), and when Run() ends, the reads served and
  // failed.  Called from libfuse's workers, one line at a time.  Default:
  // standard error.
  std::function<void(const std::string&)> log;
  // The modification time of every file and directory, seconds since the
  // epoch; < 0: the index file's (the manifest's for a merged pack), or 0
  // where it has none (a remote pack).
  int64_t mtime = -1;
  // Let the kernel open files without asking us, where it can (Linux
  // 4.19+): warm reads then cost no request to the mount at all, and a
  // file read in pieces is kept in a few shared slots instead of with its
  // open file.  false: every open gets its own buffer (a request each).
  bool zero_message_opens = true;
  // Read-ahead for files read in the pack's order (a directory read file
  // after file, DataLoader workers reading their batches): from the second
  // of consecutive records on, a remote pack's (s3://, https://) records
  // that follow are read with one ranged GET, in windows growing from 256
  // KiB to this many bytes, the next window fetched while the program
  // reads the last; a pack on a file system (NFS, local disk) has this
  // many bytes past the last record asked of the kernel
  // (Reader::WillNeed), so that several of its read-ahead windows are in
  // flight per run (none through a cache: ReaderOptions::cache).  Files
  // read in any other order are read alone, as without it.  Below 256 KiB
  // (0 included): none.
  uint64_t read_ahead_bytes = uint64_t{4} << 20;
  // The most requests served at once: libfuse's worker threads, started
  // as requests wait (each blocks for its request's read: a ranged GET of
  // a remote pack, a pread of NFS), with up to max_idle_threads kept when
  // idle.  libfuse's own default is 10, which caps a remote pack at 10
  // GETs in flight however many processes read.  Each busy thread holds a
  // request buffer (about 1 MiB).  libfuse 3.12 and later; older ones have
  // no cap.
  int max_threads = 64;
  int max_idle_threads = 16;
};

class UFSPACK_EXPORT PackMount {
 public:
  // Builds the tree of `reader`'s record names and mounts it at
  // `mountpoint`.  InvalidArgument when the mountpoint is not an empty
  // directory (CheckMountpoint) or a record's name cannot be a path (it
  // names the record and why); IOError when FUSE refuses the mount.
  static Status Mount(std::unique_ptr<Reader> reader,
                      const std::string& mountpoint,
                      const MountOptions& options,
                      std::unique_ptr<PackMount>* mount);

  // Serves requests until the file system is unmounted (`ufspack umount`,
  // `fusermount3 -u`) or SIGINT, SIGTERM or SIGHUP arrives (handlers are
  // installed for the duration), then unmounts.  Call once.
  Status Run();

  ~PackMount();
  PackMount(const PackMount&) = delete;
  PackMount& operator=(const PackMount&) = delete;

  const std::string& mountpoint() const;
  uint64_t file_count() const;
  uint64_t dir_count() const;  // the root included

 private:
  class Impl;
  explicit PackMount(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// OK if `path` can take a mount: an existing, empty directory.
// InvalidArgument otherwise, saying which; for a stale FUSE mount (its
// server died: stat gives ENOTCONN) the message says how to clear it:
// "run 'fusermount3 -u PATH' (or 'ufspack umount PATH')".
UFSPACK_EXPORT Status CheckMountpoint(const std::string& path);

// Unmounts the ufspack mount at `path` (a live or stale one).
// InvalidArgument when `path` is not a mount point or is another file
// system's; IOError when the kernel refuses (busy: a process has a file
// or its working directory there).
UFSPACK_EXPORT Status Unmount(const std::string& path);

}  // namespace ufspack

#endif  // UFSPACK_MOUNT_H_
