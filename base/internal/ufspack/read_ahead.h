// Copyright 2026 The ufspack Authors.
//
// An ordered read-ahead pipeline: items 0..count-1 are produced by a pool
// of threads, many at once and finishing in any order, and handed to one
// consumer strictly in order.  The Builder reads source files with it while
// the pack is written in the scan's order (so the output is deterministic);
// `verify -j` and `extract -j` read records with it while everything the
// user sees comes from the consumer, record by record, as with -j1.
// Internal to ufspack's targets (not installed).
//
//   std::vector<Item> slots(window);  // the caller's storage
//   ReadAhead ra(options, [&](size_t k, const ReadAhead::Reserve& reserve) {
//     reserve(bytes);                        // optional, before allocating
//     return Make(k, &slots[k % ra.window()]);  // window() <= slots.size()
//   });
//   size_t k; Status item;
//   while (ra.Next(&k, &item)) { Use(slots[k % ra.window()]); ra.Done(); }
//
// Storage: items live in the caller's ring of window() slots; item k goes
// to slot k % window().  The pipeline guarantees exclusive access: produce
// writes slot k % window() only after the consumer released item
// k - window() (Done), and Next() returns k only after its produce returned,
// with the mutex ordering the two.
//
// Bounded memory: at most window() items are produced or waiting; produce
// may also reserve bytes, and waits while more than `budget` bytes are
// reserved by items not yet released -- unless its item is the next the
// consumer takes, which always proceeds (no deadlock on an item larger
// than the budget).
//
// Errors: produce's Status travels with its item and Next() returns it in
// order, so the error reported is the first in the consumer's order, not
// in time.  With stop_on_error, no item after a failed one is started, and
// Next() returns false after handing out the failed item.
//
// Cancellation: Stop(), or `cancel` becoming true while Next() waits
// (polled every 100 ms): no new item is started, producers waiting for the
// window or the budget return, Next() returns false.  An item being
// produced runs to its end; Stop() and the destructor join the threads.
//
// Thread safety: one consumer thread calls Next/Done/Stop; produce runs on
// the pool's threads, concurrently with itself.
#ifndef UFSPACK_BASE_READ_AHEAD_H_
#define UFSPACK_BASE_READ_AHEAD_H_

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "ufspack/export.h"
#include "ufspack/status.h"

namespace ufspack {
namespace internal {

class UFSPACK_EXPORT ReadAhead {
 public:
  struct Options {
    size_t count = 0;    // items 0..count-1
    int threads = 1;     // producer threads (at most count are started)
    size_t window = 64;  // items in flight (at most count are used)
    uint64_t budget = UINT64_MAX;  // bytes reserved by items in flight
    bool stop_on_error = false;
    const std::atomic<bool>* cancel = nullptr;  // polled by Next()
  };
  // Blocks until `bytes` fit in the budget (or this item is the next to be
  // consumed, or the pipeline stops), then reserves them until Done().
  using Reserve = std::function<void(uint64_t bytes)>;
  using Produce = std::function<Status(size_t k, const Reserve& reserve)>;

  // Starts the threads.  REQUIRES: options.threads >= 1, window >= 1.
  ReadAhead(const Options& options, Produce produce);
  // Stop().
  ~ReadAhead();
  ReadAhead(const ReadAhead&) = delete;
  ReadAhead& operator=(const ReadAhead&) = delete;

  // The slots the caller's ring needs: min(window, max(count, 1)).
  static size_t SlotsFor(const Options& options);
  size_t window() const { return ring_; }

  // Waits for the next item in order and sets *k to its index and *status
  // to what its produce returned.  False, with neither set, once every
  // item was taken, after Stop(), on cancellation, or after a failed item
  // with stop_on_error.  REQUIRES: the previous item was released (Done).
  bool Next(size_t* k, Status* status);

  // Releases the item Next() returned: its slot may be reused and the
  // bytes it reserved are freed.
  void Done();

  // Stops the pipeline and joins the threads (see the file comment).
  // Idempotent.
  void Stop();

 private:
  void Work();
  bool Cancelled() const;

  const Options options_;
  const Produce produce_;
  const size_t ring_;
  std::mutex mu_;
  // One condition variable per kind of waiter, so that an item released
  // wakes one producer, not all of them.
  std::condition_variable work_cv_;    // producers wait for a free slot
  std::condition_variable budget_cv_;  // producers wait for budget
  std::condition_variable ready_cv_;   // the consumer waits for its item
  int budget_waiters_ = 0;
  size_t next_claim_ = 0;     // next item a producer starts
  size_t consumed_ = 0;       // items released by the consumer
  size_t failed_ = SIZE_MAX;  // first failed item (stop_on_error)
  uint64_t in_flight_ = 0;    // bytes reserved
  bool stop_ = false;
  // Per slot: produced, its Status and its reserved bytes.
  std::vector<char> ready_;
  std::vector<Status> status_;
  std::vector<uint64_t> reserved_;
  std::vector<std::thread> threads_;
};

}  // namespace internal
}  // namespace ufspack

#endif  // UFSPACK_BASE_READ_AHEAD_H_
