// Copyright 2026 The ufspack Authors.
//
// FileSystem: the FUSE low-level operations over a Tree and a Reader.
// Inodes are the Tree's (a file's inode is its record), so lookup,
// getattr and readdir(plus) answer from the tree and the mapped index;
// only read() touches data.ufs, through the Reader (and its cache).
//
// Nothing changes while mounted (the pack is immutable), so entries and
// attributes are given long timeouts, directories are cached by the
// kernel (cache_readdir) and files keep their pages (keep_cache, also with
// zero-message opens); lookup counts are not tracked (forget is a no-op:
// inodes live as long as the mount).  No readdirplus (see OpInit).
//
// Thread safety: the operations run concurrently on libfuse's workers;
// the tree is immutable, the Reader thread-safe, each open file's buffer
// guarded by its own mutex, RecentRecords by its slots' mutexes.  Lifetime: the
// Reader and the Tree outlive the session that calls the operations.
#ifndef UFSPACK_MOUNT_FILE_SYSTEM_H_
#define UFSPACK_MOUNT_FILE_SYSTEM_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "error_log.h"
#include "page_cache_read_ahead.h"
#include "recent_records.h"
#include "sequential_reads.h"
#include "tree.h"
#include "ufspack/reader.h"

struct fuse_lowlevel_ops;
struct stat;

namespace ufspack {
namespace mount {

struct FileSystemStats {
  std::atomic<uint64_t> record_reads{0};  // Reader::Read calls
  std::atomic<uint64_t> read_errors{0};   // of which failed (EIO)
  std::atomic<uint64_t> stat_errors{0};   // record entries unreadable (EIO)
};

class FileSystem {
 public:
  // read_ahead_bytes: for files read in the pack's order, a remote pack's
  // largest read-ahead window (SequentialReads), or how far ahead a pack
  // on a file system is asked of the kernel (PageCacheReadAhead); below
  // SequentialReads::kFirstWindowBytes (0 included): none.
  FileSystem(const Reader* reader, const Tree* tree, int64_t mtime,
             bool allow_zero_message_opens, uint64_t read_ahead_bytes,
             std::function<void(const std::string&)> log);

  // The operations, whose userdata must be this FileSystem.
  static const fuse_lowlevel_ops* Ops();

  // Fills *st for inode `ino`.  EIO when its record entry cannot be read,
  // ENOENT for an unknown inode; 0 when done.
  int Stat(uint64_t ino, struct stat* st) const;

  // The original length of file `ino`'s record.  EIO (logged, counted in
  // stat_errors) when its entry cannot be read; 0 when done.
  int Length(uint64_t ino, uint64_t* length) const;

  // Reads the whole record of file `ino` into *out (one Reader::Read, or
  // from a read-ahead window: SequentialReads).  EIO (and a log line naming the
  // record, its offset and the error: ErrorLog, one per failure of a record
  // within kQuietSeconds) when it fails; 0 when done.
  int ReadRecord(uint64_t ino, std::string* out) const;

  // Zero-message opens (FUSE_CAP_NO_OPEN_SUPPORT, Linux 4.19+): open()
  // answers ENOSYS once, after which the kernel opens files without asking
  // (and keeps their pages) and sends no release: a warm read of a cached
  // file costs no request to us at all.  Reads then come without an open
  // file, and a file read in pieces is kept in recent() instead.  Set by
  // init from what the kernel can do and MountOptions.
  void set_zero_message_opens(bool files, bool dirs) {
    zero_message_opens_ = files;
    zero_message_opendirs_ = dirs;
  }
  bool zero_message_opens() const { return zero_message_opens_; }
  bool zero_message_opendirs() const { return zero_message_opendirs_; }
  bool allow_zero_message_opens() const { return allow_zero_message_opens_; }
  RecentRecords& recent() { return recent_; }

  const Tree& tree() const { return *tree_; }
  const Reader& reader() const { return *reader_; }
  const FileSystemStats& stats() const { return stats_; }
  const SequentialReadStats& read_ahead_stats() const {
    return sequential_reads_.stats();
  }
  ErrorLog& log() const { return log_; }
  const PageCacheReadAheadStats& page_cache_read_ahead_stats() const {
    return page_cache_read_ahead_.stats();
  }

  // A record failing again within this many seconds of its last log line
  // is counted, not logged (ErrorLog).
  static constexpr int kQuietSeconds = 10;

 private:
  const Reader* reader_;
  const Tree* tree_;
  const int64_t mtime_;
  const uid_t uid_;
  const gid_t gid_;
  const bool allow_zero_message_opens_;
  std::atomic<bool> zero_message_opens_{false};
  std::atomic<bool> zero_message_opendirs_{false};
  mutable ErrorLog log_;  // thread-safe
  mutable FileSystemStats stats_;
  mutable SequentialReads sequential_reads_;          // thread-safe
  mutable PageCacheReadAhead page_cache_read_ahead_;  // thread-safe
  RecentRecords recent_{64};
};

}  // namespace mount
}  // namespace ufspack

#endif  // UFSPACK_MOUNT_FILE_SYSTEM_H_
