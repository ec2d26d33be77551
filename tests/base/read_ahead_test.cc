// Copyright 2026 The ufspack Authors.
//
// The ordered read-ahead pipeline (packer/src/read_ahead.h): items reach
// the consumer strictly in order whatever order they finish in; the window
// and the byte budget bound what is in flight; the first error in order is
// the one reported and, with stop_on_error, stops the pipeline; Stop() and
// cancellation return promptly; no thread count deadlocks.
#include "ufspack/read_ahead.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace ufspack {
namespace internal {
namespace {

using Clock = std::chrono::steady_clock;

void SleepMicros(int us) {
  std::this_thread::sleep_for(std::chrono::microseconds(us));
}

// A delay in [0, max_us) that depends on k only (deterministic per item).
int DelayFor(size_t k, int max_us) {
  if (max_us <= 0) return 0;
  std::mt19937 rng(static_cast<unsigned>(k) * 2654435761u);
  return static_cast<int>(rng() % static_cast<unsigned>(max_us));
}

ReadAhead::Options Opts(size_t count, int threads, size_t window) {
  ReadAhead::Options o;
  o.count = count;
  o.threads = threads;
  o.window = window;
  return o;
}

// Consumes everything; returns the indices in the order received, and
// checks each slot holds its item.
std::vector<size_t> Drain(const ReadAhead::Options& o, int max_delay_us) {
  std::vector<size_t> slots(ReadAhead::SlotsFor(o));
  ReadAhead ra(o, [&](size_t k, const ReadAhead::Reserve&) {
    SleepMicros(DelayFor(k, max_delay_us));
    slots[k % slots.size()] = k;
    return Status::OK();
  });
  EXPECT_EQ(ra.window(), slots.size());
  std::vector<size_t> got;
  size_t k;
  Status item;
  while (ra.Next(&k, &item)) {
    EXPECT_TRUE(item.ok());
    EXPECT_EQ(slots[k % slots.size()], k);
    got.push_back(k);
    ra.Done();
  }
  return got;
}

std::vector<size_t> Iota(size_t n) {
  std::vector<size_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

TEST(ReadAheadTest, OrderIsPreservedWithRandomDelays) {
  EXPECT_EQ(Drain(Opts(500, 8, 16), 2000), Iota(500));
  EXPECT_EQ(Drain(Opts(300, 32, 128), 1000), Iota(300));
}

TEST(ReadAheadTest, NoDeadlockWithOneThreadOrMoreThreadsThanItems) {
  EXPECT_EQ(Drain(Opts(50, 1, 64), 100), Iota(50));
  EXPECT_EQ(Drain(Opts(3, 16, 64), 100), Iota(3));
  EXPECT_EQ(Drain(Opts(20, 4, 1), 100), Iota(20));  // a window of one
  EXPECT_EQ(Drain(Opts(1, 1, 1), 0), Iota(1));
  EXPECT_EQ(Drain(Opts(0, 8, 64), 0), Iota(0));  // nothing to do
}

// Producer k never starts before item k - window was released.
TEST(ReadAheadTest, InFlightItemsAreBoundedByTheWindow) {
  const size_t kWindow = 6;
  ReadAhead::Options o = Opts(200, 16, kWindow);
  std::atomic<size_t> released{0};
  std::atomic<int> running{0};
  std::atomic<int> max_running{0};
  std::atomic<bool> violated{false};
  ReadAhead ra(o, [&](size_t k, const ReadAhead::Reserve&) {
    if (k >= released.load() + kWindow) violated = true;
    int now = ++running;
    int m = max_running.load();
    while (now > m && !max_running.compare_exchange_weak(m, now)) {
    }
    SleepMicros(DelayFor(k, 500));
    --running;
    return Status::OK();
  });
  size_t k;
  Status item;
  while (ra.Next(&k, &item)) {
    SleepMicros(200);  // a slow consumer: producers fill the window
    ++released;        // before Done(), so it never lags the pipeline
    ra.Done();
  }
  EXPECT_EQ(released.load(), 200u);
  EXPECT_FALSE(violated.load());
  EXPECT_LE(max_running.load(), static_cast<int>(kWindow));
}

// Reserved bytes stay within the budget, except that the item the
// consumer takes next always proceeds: at most budget + one item, and an
// item bigger than the whole budget does not deadlock.
uint64_t MaxReserved(const std::vector<uint64_t>& sizes, uint64_t budget) {
  ReadAhead::Options o = Opts(sizes.size(), 8, 64);
  o.budget = budget;
  std::atomic<uint64_t> reserved{0};
  std::atomic<uint64_t> max_reserved{0};
  ReadAhead ra(o, [&](size_t k, const ReadAhead::Reserve& reserve) {
    reserve(sizes[k]);
    uint64_t now = reserved += sizes[k];
    uint64_t m = max_reserved.load();
    while (now > m && !max_reserved.compare_exchange_weak(m, now)) {
    }
    SleepMicros(DelayFor(k, 300));
    return Status::OK();
  });
  size_t k;
  Status item;
  size_t n = 0;
  while (ra.Next(&k, &item)) {
    reserved -= sizes[k];  // before Done(): never less than the pipeline's
    ra.Done();
    ++n;
  }
  EXPECT_EQ(n, sizes.size());
  return max_reserved.load();
}

TEST(ReadAheadTest, ReservedBytesAreBoundedByTheBudget) {
  EXPECT_LE(MaxReserved(std::vector<uint64_t>(200, 40), 100), 100u + 40u);
  std::vector<uint64_t> sizes(100, 40);
  sizes[10] = 250;  // larger than the whole budget
  EXPECT_LE(MaxReserved(sizes, 100), 100u + 250u);
}

// The error reported is the first in order, not the first in time; without
// stop_on_error the consumer may skip it and go on.
TEST(ReadAheadTest, ErrorsArriveInOrderWithTheirItems) {
  ReadAhead::Options o = Opts(60, 8, 64);
  ReadAhead ra(o, [&](size_t k, const ReadAhead::Reserve&) {
    if (k == 10) {
      SleepMicros(50000);  // fails last
      return Status::IOError("item 10");
    }
    if (k == 40) return Status::IOError("item 40");  // fails first
    return Status::OK();
  });
  std::vector<std::string> errors;
  size_t k;
  Status item;
  size_t n = 0;
  while (ra.Next(&k, &item)) {
    EXPECT_EQ(k, n++);
    if (!item.ok()) errors.push_back(std::string(item.message()));
    ra.Done();
  }
  EXPECT_EQ(n, 60u);
  EXPECT_EQ(errors, (std::vector<std::string>{"item 10", "item 40"}));
}

// With stop_on_error the first failed item ends the pipeline: it is handed
// out with its error, then Next() says no more, and no item after it is
// started once the failure is known.
TEST(ReadAheadTest, FirstErrorStopsThePipelineAndIsReported) {
  const size_t kWindow = 8;
  ReadAhead::Options o = Opts(10000, 4, kWindow);
  o.stop_on_error = true;
  std::atomic<size_t> produced{0};
  std::atomic<bool> started_after_failure{false};
  std::atomic<bool> failed{false};
  ReadAhead ra(o, [&](size_t k, const ReadAhead::Reserve&) {
    if (failed.load() && k > 30 + kWindow) started_after_failure = true;
    ++produced;
    if (k == 30) {
      failed = true;
      return Status::IOError("item 30");
    }
    SleepMicros(100);
    return Status::OK();
  });
  size_t k;
  Status item;
  size_t ok = 0;
  Status first;
  while (ra.Next(&k, &item)) {
    if (!item.ok()) {
      first = item;
      EXPECT_EQ(k, 30u);
      ra.Done();
      continue;
    }
    ++ok;
    ra.Done();
  }
  EXPECT_EQ(ok, 30u);
  EXPECT_EQ(first.message(), "item 30");
  ra.Stop();
  EXPECT_LE(produced.load(), 30 + kWindow + 1);
  EXPECT_FALSE(started_after_failure.load());
}

// Cancellation while the consumer waits: Next() returns false within about
// one 100 ms poll, and the destructor joins without producing the rest.
TEST(ReadAheadTest, CancelStopsPromptly) {
  std::atomic<bool> cancel{false};
  ReadAhead::Options o = Opts(100000, 4, 16);
  o.cancel = &cancel;
  std::atomic<size_t> produced{0};
  Clock::time_point cancelled_at;
  Clock::duration stopped_after{};
  {
    ReadAhead ra(o, [&](size_t k, const ReadAhead::Reserve&) {
      ++produced;
      SleepMicros(k >= 5 ? 20000 : 0);
      return Status::OK();
    });
    std::thread canceller([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      cancelled_at = Clock::now();
      cancel = true;
    });
    size_t k;
    Status item;
    size_t n = 0;
    while (ra.Next(&k, &item)) {
      ++n;
      ra.Done();
      if (n > 1000) break;
    }
    canceller.join();
    EXPECT_LT(n, 1000u);
  }
  stopped_after = Clock::now() - cancelled_at;
  EXPECT_LT(stopped_after, std::chrono::seconds(1));
  EXPECT_LT(produced.load(), 200u);
}

// Stop() with producers blocked on the window and on the budget, and the
// consumer never taking anything: returns promptly.
TEST(ReadAheadTest, StopReleasesBlockedProducers) {
  ReadAhead::Options o = Opts(1000, 8, 4);
  o.budget = 10;
  std::atomic<size_t> produced{0};
  const auto t0 = Clock::now();
  {
    ReadAhead ra(o, [&](size_t k, const ReadAhead::Reserve& reserve) {
      reserve(k == 0 ? 5 : 100);  // all but item 0 wait for the budget
      ++produced;
      return Status::OK();
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ra.Stop();
    size_t k;
    Status item;
    EXPECT_FALSE(ra.Next(&k, &item));
  }
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(2));
  EXPECT_LE(produced.load(), 4u);  // only what the window let start
}

}  // namespace
}  // namespace internal
}  // namespace ufspack
