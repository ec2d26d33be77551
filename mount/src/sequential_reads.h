// Copyright 2026 The ufspack Authors.
//
// SequentialReads: the mount's record reads, with runs of consecutive
// records read ahead.  A program that reads a directory's files in order (a
// DataLoader without shuffling, cp -r, tar, rsync, md5sum *) reads records
// i, i + 1, i + 2, ... (a pack stores them in name order), each file a
// request of its own without read-ahead.  Here each run of consecutive
// reads is a *stream*: from its second read on, a stream reads a *window*
// of the records that follow with one Reader::ReadRange (one pread, one
// ranged GET for records back to back in a data file) and serves the run's
// next reads from it, while the window after it is fetched in the
// background (so the storage is busy while the program reads).  A stream's
// windows start at kFirstWindowBytes and double, up to max_bytes.  A read
// that continues no stream (a shuffled order) is read alone, as without
// read-ahead: it costs a look at the streams and nothing more.  Checksums,
// zstd and the cache are as for Reader::Read (ReadRange checks each
// record); a window that fails is dropped and its records are read alone,
// so an error names its record.
//
// Thread safety: Read() may be called concurrently (libfuse's workers); a
// window is fetched once, and readers of its records wait for it.
// Memory: at most three windows per stream (the one before the one being
// read, that one, the one after), kStreams streams (96 MiB at the default
// 4 MiB, reached only with 8 runs read at once).  Meant for remote
// packs: a data file on a file system is read ahead through the page
// cache instead (PageCacheReadAhead), where windows read here only added
// copies and waits (measured in docs/benchmarks.md, "The mount").
// Lifetime: the
// Reader outlives this; the destructor waits for the fetches under way.
#ifndef UFSPACK_MOUNT_SEQUENTIAL_READS_H_
#define UFSPACK_MOUNT_SEQUENTIAL_READS_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ufspack/reader.h"
#include "ufspack/status.h"

namespace ufspack {
namespace mount {

struct SequentialReadStats {
  std::atomic<uint64_t> windows{0};             // ReadRange calls
  std::atomic<uint64_t> window_records{0};      // records they read
  std::atomic<uint64_t> reads_from_windows{0};  // reads served from one
  std::atomic<uint64_t> failed_windows{0};      // dropped: read alone
};

class SequentialReads {
 public:
  static constexpr int kStreams = 8;
  static constexpr uint64_t kFirstWindowBytes = uint64_t{256} << 10;

  // max_bytes: the largest window; below kFirstWindowBytes (0 included):
  // no read-ahead, every read one Reader::Read.
  SequentialReads(const Reader* reader, uint64_t max_bytes);
  ~SequentialReads();
  SequentialReads(const SequentialReads&) = delete;
  SequentialReads& operator=(const SequentialReads&) = delete;

  // Reads record `record` (its entry, from Reader::GetRecord) into *out,
  // from a window when one holds it.  The status is the record's own, as
  // Reader::Read gives it.
  Status Read(const Record& record, std::string* out);

  const SequentialReadStats& stats() const { return stats_; }

 private:
  // Records [first, first + count), fetched once.
  struct Window {
    uint64_t first = 0;
    uint64_t count = 0;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;  // guarded by mu; status and batch immutable once set
    Status status;
    Batch batch;

    bool Holds(uint64_t i) const { return i >= first && i - first < count; }
  };
  struct Stream {
    bool used = false;
    uint64_t next = 0;          // the record that continues the run
    uint64_t window_bytes = 0;  // its next window's size
    uint64_t last_use = 0;
    std::shared_ptr<Window> behind;  // the one before `window`: other
                                     // readers of the run may be there still
    std::shared_ptr<Window> window;  // being read, null before the first
    std::shared_ptr<Window> ahead;   // the one after it, fetched meanwhile
  };
  // What Find() decided for a read.
  struct Plan {
    std::shared_ptr<Window> window;  // holds the record; null: read alone
    bool fetch = false;              // this read fetches `window`
    std::shared_ptr<Window> ahead;   // to fetch in the background
  };

  // Under mu_.
  Plan Find(const Record& record);
  std::shared_ptr<Window> NewWindow(Stream* s, const Record& first);
  std::shared_ptr<Window> NewWindowAfter(Stream* s, const Window& w);
  uint64_t WindowCount(const Record& first, uint64_t bytes) const;

  void Fetch(Window* w);
  void Prefetch(std::shared_ptr<Window> w);  // to the fetcher thread
  void FetcherLoop();

  const Reader* reader_;
  const uint64_t max_bytes_;
  std::mutex mu_;
  uint64_t tick_ = 0;         // guarded by mu_
  Stream streams_[kStreams];  // guarded by mu_

  // The background fetches, in the order asked for.
  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<std::shared_ptr<Window>> queue_;  // guarded by queue_mu_
  bool stop_ = false;                          // guarded by queue_mu_
  std::vector<std::thread> fetchers_;          // started at the first

  SequentialReadStats stats_;
};

}  // namespace mount
}  // namespace ufspack

#endif  // UFSPACK_MOUNT_SEQUENTIAL_READS_H_
