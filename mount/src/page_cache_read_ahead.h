// Copyright 2026 The ufspack Authors.
//
// PageCacheReadAhead: the mount's read-ahead of a pack on a file system
// (NFS, SSHFS, local disk) for files read in the pack's order (a
// DataLoader without shuffling, cp -r, tar).  The kernel reads data.ufs
// ahead by itself, but it sees the mount's preads for all the programs
// (or DataLoader workers) interleaved on one open file and keeps at most
// its window (read_ahead_kb, 128 KiB by default) in flight per run: on a
// link with a millisecond of latency each run then waits every few files.
// Here each run of consecutive records (a *stream*, detected as in
// SequentialReads) keeps `distance` bytes past its last record asked for
// with Reader::WillNeed (posix_fadvise WILLNEED: the reads start, the call
// returns), so several windows are in flight per run; the records are
// still read with their own preads, now from the page cache, and nothing
// is copied or held here.  The first read of a run asks for nothing (a
// shuffled order costs a look at the streams and no I/O), the second asks
// for `distance` bytes, and later ones top it up in steps of at least
// kStepBytes.  Measured in docs/benchmarks.md, "The mount".
//
// Thread safety: Read() may be called concurrently (libfuse's workers).
// Lifetime: the Reader outlives this.
#ifndef UFSPACK_MOUNT_PAGE_CACHE_READ_AHEAD_H_
#define UFSPACK_MOUNT_PAGE_CACHE_READ_AHEAD_H_

#include <atomic>
#include <cstdint>
#include <mutex>

#include "ufspack/reader.h"

namespace ufspack {
namespace mount {

struct PageCacheReadAheadStats {
  std::atomic<uint64_t> hints{0};         // Reader::WillNeed calls that asked
  std::atomic<uint64_t> hinted_bytes{0};  // the bytes they asked for
};

class PageCacheReadAhead {
 public:
  static constexpr int kStreams = 16;
  static constexpr uint64_t kStepBytes = uint64_t{128} << 10;

  // distance: the bytes kept asked for past a run's last record; 0: none
  // (FileSystem gives 0 where Reader::WillNeed would do nothing: a remote
  // pack, a Reader with a cache).
  PageCacheReadAhead(const Reader* reader, uint64_t distance);
  PageCacheReadAhead(const PageCacheReadAhead&) = delete;
  PageCacheReadAhead& operator=(const PageCacheReadAhead&) = delete;

  // Record `r` (from Reader::GetRecord) is about to be read: when it
  // continues a run, the bytes up to `distance` past it not asked for yet
  // are asked for.
  void Read(const Record& r);

  const PageCacheReadAheadStats& stats() const { return stats_; }

 private:
  struct Stream {
    bool used = false;
    uint32_t part = 0;
    uint64_t next = 0;       // the record that continues the run
    uint64_t hinted_to = 0;  // bytes asked for up to here (in its part)
    uint64_t last_use = 0;
  };

  const Reader* reader_;
  const uint64_t distance_;
  std::mutex mu_;
  uint64_t tick_ = 0;         // guarded by mu_
  Stream streams_[kStreams];  // guarded by mu_
  PageCacheReadAheadStats stats_;
};

}  // namespace mount
}  // namespace ufspack

#endif  // UFSPACK_MOUNT_PAGE_CACHE_READ_AHEAD_H_
