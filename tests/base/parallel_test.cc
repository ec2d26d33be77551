// Copyright 2026 The ufspack Authors.
//
// Tests for ufspack::ParallelFor: every index exactly once, concurrent and
// nested callers, more threads than items, and a pool that survives fork().
#include "ufspack/parallel.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace ufspack {
namespace {

// Runs ParallelFor and returns how often each index was visited.
std::vector<int> Visits(size_t n, int threads) {
  std::vector<std::atomic<int>> hits(n);
  ParallelFor(n, threads, [&](size_t k) { hits[k].fetch_add(1); });
  std::vector<int> out;
  for (auto& h : hits) out.push_back(h.load());
  return out;
}

TEST(ParallelForTest, VisitsEveryIndexExactlyOnce) {
  for (size_t n : {0, 1, 2, 7, 32, 1000}) {
    for (int threads : {-1, 0, 1, 2, 4, 16, 1000}) {
      EXPECT_EQ(Visits(n, threads), std::vector<int>(n, 1))
          << "n=" << n << " threads=" << threads;
    }
  }
}

TEST(ParallelForTest, UsesSeveralThreads) {
  // Each item waits until 4 items run at once (or a deadline), so the test
  // fails if the items ran one after another on the caller alone.
  std::atomic<int> running{0}, peak{0};
  ParallelFor(4, 4, [&](size_t) {
    int now = running.fetch_add(1) + 1;
    for (int p = peak.load(); now > p && !peak.compare_exchange_weak(p, now);) {
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (peak.load() < 4 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    running.fetch_sub(1);
  });
  EXPECT_EQ(peak.load(), 4);
}

TEST(ParallelForTest, ConcurrentCallersEachGetTheirOwnItems) {
  constexpr int kCallers = 8;
  std::vector<std::vector<int>> results(kCallers);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int round = 0; round < 50; ++round) {
        results[c] = Visits(100 + c, 4);
        if (results[c] != std::vector<int>(100 + c, 1)) return;
      }
    });
  }
  for (auto& t : callers) t.join();
  for (int c = 0; c < kCallers; ++c) {
    EXPECT_EQ(results[c], std::vector<int>(100 + c, 1)) << "caller " << c;
  }
}

TEST(ParallelForTest, NestedCallsComplete) {
  std::atomic<int> total{0};
  ParallelFor(8, 4, [&](size_t) {
    ParallelFor(10, 4, [&](size_t) { total.fetch_add(1); });
  });
  EXPECT_EQ(total.load(), 80);
}

TEST(ParallelForTest, WorksInAForkedChildWhileTheParentIsBusy) {
  Visits(64, 8);  // the parent's pool exists
  std::atomic<bool> stop{false};
  std::thread busy([&] {  // and is in use while we fork
    while (!stop) Visits(256, 8);
  });
  std::vector<pid_t> children;
  for (int i = 0; i < 4; ++i) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      bool ok = true;
      for (int round = 0; round < 20 && ok; ++round) {
        std::vector<std::atomic<int>> hits(500);
        ParallelFor(500, 8, [&](size_t k) { hits[k].fetch_add(1); });
        for (auto& h : hits) ok = ok && h.load() == 1;
      }
      _exit(ok ? 0 : 1);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  stop = true;
  busy.join();
}

}  // namespace
}  // namespace ufspack
