// Copyright 2026 The ufspack Authors.
#include "prefetch.h"

#include <utility>

namespace ufspack {
namespace cli {

Prefetcher::Prefetcher(uint64_t n, int threads, size_t window, Fetch fetch)
    : n_(n), window_(window < 1 ? 1 : window), fetch_(std::move(fetch)) {
  if (threads <= 1 || n <= 1) return;
  slots_.resize(window_);
  ready_.assign(window_, false);
  workers_.reserve(static_cast<size_t>(threads));
  for (int t = 0; t < threads; ++t) workers_.emplace_back([this] { Work(); });
}

Prefetcher::~Prefetcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void Prefetcher::Work() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [this] {
      return stop_ || next_claim_ >= n_ || next_claim_ < taken_ + window_;
    });
    if (stop_ || next_claim_ >= n_) return;
    const uint64_t i = next_claim_++;
    lock.unlock();
    Prefetched item;
    fetch_(i, &item);
    lock.lock();
    slots_[i % window_] = std::move(item);
    ready_[i % window_] = true;
    ready_cv_.notify_all();
  }
}

Prefetched Prefetcher::Take(uint64_t i) {
  Prefetched item;
  if (workers_.empty()) {
    fetch_(i, &item);
    return item;
  }
  {
    std::unique_lock<std::mutex> lock(mu_);
    ready_cv_.wait(lock, [&] { return ready_[i % window_]; });
    item = std::move(slots_[i % window_]);
    slots_[i % window_] = Prefetched();
    ready_[i % window_] = false;
    taken_ = i + 1;
  }
  work_cv_.notify_all();
  return item;
}

}  // namespace cli
}  // namespace ufspack
