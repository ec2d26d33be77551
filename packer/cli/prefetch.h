// Copyright 2026 The ufspack Authors.
//
// Prefetcher: reads the records of a pack on several threads, ahead of a
// consumer that takes them strictly in record order.  `verify -j` and
// `extract -j` use it so that many preads are in flight on network storage,
// while everything the user sees (messages, files written, the order of
// both) comes from the consumer, record by record, exactly as with -j1.
#ifndef UFSPACK_CLI_PREFETCH_H_
#define UFSPACK_CLI_PREFETCH_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ufspack/status.h"

namespace ufspack {
namespace cli {

// `-j` of verify and extract: their work is I/O-bound on network storage,
// where each read is a round trip, so several are kept in flight by default.
inline constexpr int kDefaultReadThreads = 8;
// For a remote pack (s3://, https://), where each read is a round trip.
inline constexpr int kDefaultRemoteReadThreads = 32;
inline constexpr int kMaxReadThreads = 256;
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

// Thread safety: Take() is called from one thread (the consumer); `fetch`
// runs on the worker threads, concurrently for different records.
class Prefetcher {
 public:
  using Fetch = std::function<void(uint64_t i, Prefetched* out)>;
  // Fetches records [0, n) with `threads` workers, at most `window` records
  // ahead of the consumer.  threads <= 1 starts none: Take() then fetches
  // the record itself, on the calling thread, when asked for it.
  Prefetcher(uint64_t n, int threads, size_t window, Fetch fetch);
  // Stops the workers (each finishes the record it is reading) and joins
  // them.
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // Blocks until record i is fetched and hands it over.
  // REQUIRES: i is 0, then one more than the previous call's.
  Prefetched Take(uint64_t i);

 private:
  void Work();

  const uint64_t n_;
  const size_t window_;
  const Fetch fetch_;
  std::mutex mu_;
  std::condition_variable work_cv_;   // a slot freed, or stopping
  std::condition_variable ready_cv_;  // a record fetched
  std::vector<Prefetched> slots_;     // record i in slots_[i % window_]
  std::vector<bool> ready_;
  uint64_t next_claim_ = 0;  // the next record a worker takes
  uint64_t taken_ = 0;       // records handed to the consumer
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace cli
}  // namespace ufspack

#endif  // UFSPACK_CLI_PREFETCH_H_
