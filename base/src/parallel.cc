// Copyright 2026 The ufspack Authors.
#include "ufspack/parallel.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

namespace ufspack {
namespace {

// One ParallelFor call.  Lives on the caller's stack; the caller unlinks it
// from the queue and waits until no pool thread runs it before returning.
struct Job {
  const std::function<void(size_t)>* body = nullptr;
  size_t n = 0;
  std::atomic<size_t> next{0};
  int helpers_wanted = 0;  // pool threads that may join (guarded by mu)
  int helpers_joined = 0;  // guarded by mu
  int active = 0;          // pool threads inside RunItems (guarded by mu)
  std::condition_variable idle;

  void RunItems() {
    for (size_t k; (k = next.fetch_add(1, std::memory_order_relaxed)) < n;) {
      (*body)(k);
    }
  }
};

class Pool {
 public:
  void Run(size_t n, int threads, const std::function<void(size_t)>& body) {
    Job job;
    job.body = &body;
    job.n = n;
    job.helpers_wanted = static_cast<int>(
        std::min<size_t>(std::min(threads, kMaxPoolThreads) - 1, n - 1));
    {
      std::lock_guard<std::mutex> lock(mu_);
      Grow(job.helpers_wanted);
      queue_.push_back(&job);
    }
    work_.notify_all();
    job.RunItems();
    std::unique_lock<std::mutex> lock(mu_);
    Unlink(&job);
    job.idle.wait(lock, [&] { return job.active == 0; });
  }

 private:
  // Starts threads until there are `wanted`.  REQUIRES: mu_ held.
  void Grow(int wanted) {
    while (threads_ < wanted) {
      try {
        std::thread([this] { Loop(); }).detach();
      } catch (const std::system_error&) {
        return;  // no more threads: the callers do the work themselves
      }
      ++threads_;
    }
  }

  void Unlink(Job* job) {
    auto it = std::find(queue_.begin(), queue_.end(), job);
    if (it != queue_.end()) queue_.erase(it);
  }

  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      work_.wait(lock, [&] { return !queue_.empty(); });
      Job* job = queue_.front();
      if (++job->helpers_joined >= job->helpers_wanted ||
          job->next.load(std::memory_order_relaxed) >= job->n) {
        queue_.pop_front();  // enough helpers, or nothing left to hand out
      }
      ++job->active;
      lock.unlock();
      job->RunItems();
      lock.lock();
      if (--job->active == 0) job->idle.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable work_;
  std::deque<Job*> queue_;  // jobs still accepting helpers
  int threads_ = 0;
};

// The process's pool.  Never deleted: its threads block on it until exit.
std::atomic<Pool*> g_pool{nullptr};

void ForgetPoolInChild() {
  // The parent's threads do not exist here; its pool (whose mutex another
  // parent thread may have held at fork) is abandoned, not used.
  g_pool.store(nullptr);
}

Pool* GetPool() {
  static const bool registered = [] {
    pthread_atfork(nullptr, nullptr, &ForgetPoolInChild);
    return true;
  }();
  (void)registered;
  Pool* p = g_pool.load();
  if (p != nullptr) return p;
  Pool* fresh = new Pool;
  if (g_pool.compare_exchange_strong(p, fresh)) return fresh;
  delete fresh;  // another thread won; p now holds its pool
  return p;
}

}  // namespace

void ParallelFor(size_t n, int threads,
                 const std::function<void(size_t)>& body) {
  if (n == 0) return;
  if (threads <= 1 || n == 1) {
    for (size_t k = 0; k < n; ++k) body(k);
    return;
  }
  GetPool()->Run(n, threads, body);
}

Status ParallelForStatus(size_t n, int threads,
                         const std::function<Status(size_t)>& body) {
  if (threads <= 1 || n <= 1) {
    for (size_t k = 0; k < n; ++k) UFSPACK_RETURN_IF_ERROR(body(k));
    return Status::OK();
  }
  std::atomic<bool> failed{false};
  std::mutex mu;
  Status first_error;
  ParallelFor(n, threads, [&](size_t k) {
    if (failed.load(std::memory_order_relaxed)) return;
    Status s = body(k);
    if (!s.ok()) {
      std::lock_guard<std::mutex> lock(mu);
      if (first_error.ok()) first_error = std::move(s);
      failed.store(true);
    }
  });
  return first_error;
}

}  // namespace ufspack
