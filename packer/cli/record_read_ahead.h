// Copyright 2026 The ufspack Authors.
//
// RecordReadAhead: reads a pack's records on several threads, ahead of a
// consumer that takes them strictly in record order.  `verify -j` and
// `extract -j` use it so that many preads are in flight on network storage,
// while everything the user sees (messages, files written, the order of
// both) comes from the consumer, record by record, exactly as with -j1.
// An adapter over the one ordered pipeline, internal::ReadAhead.
//
// Thread safety: Take() is called from one thread (the consumer); `fetch`
// runs on the pipeline's threads, concurrently for different records.
#ifndef UFSPACK_CLI_RECORD_READ_AHEAD_H_
#define UFSPACK_CLI_RECORD_READ_AHEAD_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ufspack/read_ahead.h"
#include "ufspack/status.h"

namespace ufspack {
namespace cli {

// `-j` of verify and extract: their work is I/O-bound on network storage,
// where each read is a round trip, so several are kept in flight by default.
struct ReadThreads {
  static constexpr int kDefault = 8;
  // For a remote pack (s3://, https://), where each read is a round trip.
  static constexpr int kDefaultRemote = 32;
  static constexpr int kMax = 256;
};
// Records fetched ahead of the consumer: enough to keep every thread busy.
inline size_t PrefetchWindow(int threads) {
  return static_cast<size_t>(threads) * 4;
}

// What a worker made of one record.
struct Prefetched {
  Status status;          // of reading the record
  std::string bytes;      // its bytes, when the caller's fetch keeps them
  bool deferred = false;  // not read (too large to hold): read it yourself
};

class RecordReadAhead {
 public:
  using Fetch = std::function<void(uint64_t i, Prefetched* out)>;
  // Fetches records [0, n) with `threads` threads, at most `window` records
  // ahead of the consumer.  threads <= 1 starts none: Take() then fetches
  // the record itself, on the calling thread.
  RecordReadAhead(uint64_t n, int threads, size_t window, Fetch fetch)
      : fetch_(std::move(fetch)) {
    if (threads <= 1 || n <= 1) return;
    internal::ReadAhead::Options o;
    o.count = n;
    o.threads = threads;
    o.window = window < 1 ? 1 : window;
    slots_.resize(internal::ReadAhead::SlotsFor(o));
    ahead_ = std::make_unique<internal::ReadAhead>(
        o, [this](size_t i, const internal::ReadAhead::Reserve&) {
          fetch_(i, &slots_[i % slots_.size()]);
          return Status::OK();
        });
  }

  // Blocks until record i is fetched and hands it over.
  // REQUIRES: i is 0, then one more than the previous call's.
  Prefetched Take(uint64_t i) {
    Prefetched item;
    if (!ahead_) {
      fetch_(i, &item);
      return item;
    }
    size_t k;
    Status s;
    if (!ahead_->Next(&k, &s)) {
      item.status = Status::Aborted("read-ahead stopped");
      return item;
    }
    item = std::move(slots_[k % slots_.size()]);
    slots_[k % slots_.size()] = Prefetched();
    ahead_->Done();
    return item;
  }

 private:
  const Fetch fetch_;
  std::vector<Prefetched> slots_;               // the pipeline's ring
  std::unique_ptr<internal::ReadAhead> ahead_;  // last: stopped first
};

}  // namespace cli
}  // namespace ufspack

#endif  // UFSPACK_CLI_RECORD_READ_AHEAD_H_
