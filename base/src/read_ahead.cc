// Copyright 2026 The ufspack Authors.
#include "ufspack/read_ahead.h"

#include <algorithm>
#include <chrono>
#include <utility>

namespace ufspack {
namespace internal {

ReadAhead::ReadAhead(const Options& options, Produce produce)
    : options_(options),
      produce_(std::move(produce)),
      ring_(SlotsFor(options)),
      ready_(ring_, 0),
      status_(ring_),
      reserved_(ring_, 0) {
  const size_t n = std::min(static_cast<size_t>(options.threads),
                            std::max<size_t>(options.count, 1));
  threads_.reserve(n);
  for (size_t t = 0; t < n; ++t) threads_.emplace_back([this] { Work(); });
}

ReadAhead::~ReadAhead() { Stop(); }

size_t ReadAhead::SlotsFor(const Options& options) {
  return std::min(options.window, std::max<size_t>(options.count, 1));
}

bool ReadAhead::Cancelled() const {
  return options_.cancel != nullptr &&
         options_.cancel->load(std::memory_order_relaxed);
}

void ReadAhead::Work() {
  for (;;) {
    size_t k;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] {
        return stop_ || next_claim_ >= options_.count ||
               next_claim_ > failed_ || next_claim_ < consumed_ + ring_;
      });
      if (stop_ || next_claim_ >= options_.count || next_claim_ > failed_) {
        return;
      }
      k = next_claim_++;
    }
    const size_t slot = k % ring_;
    const Reserve reserve = [&](uint64_t bytes) {
      std::unique_lock<std::mutex> lock(mu_);
      ++budget_waiters_;
      budget_cv_.wait(lock, [&] {
        return stop_ || k == consumed_ || in_flight_ + bytes <= options_.budget;
      });
      --budget_waiters_;
      in_flight_ += bytes;
      reserved_[slot] += bytes;
    };
    Status s = produce_(k, reserve);
    std::lock_guard<std::mutex> lock(mu_);
    if (!s.ok() && options_.stop_on_error && k < failed_) {
      failed_ = k;
      work_cv_.notify_all();
    }
    status_[slot] = std::move(s);
    ready_[slot] = 1;
    ready_cv_.notify_one();
  }
}

bool ReadAhead::Next(size_t* k, Status* status) {
  std::unique_lock<std::mutex> lock(mu_);
  if (stop_ || consumed_ >= options_.count || consumed_ > failed_) {
    return false;
  }
  const size_t slot = consumed_ % ring_;
  while (!ready_[slot]) {
    if (stop_ || Cancelled()) return false;
    ready_cv_.wait_for(lock, std::chrono::milliseconds(100));
  }
  *k = consumed_;
  *status = status_[slot];
  return true;
}

void ReadAhead::Done() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    const size_t slot = consumed_ % ring_;
    ready_[slot] = 0;
    status_[slot] = Status::OK();
    in_flight_ -= reserved_[slot];
    reserved_[slot] = 0;
    ++consumed_;
    if (budget_waiters_ > 0) budget_cv_.notify_all();
  }
  work_cv_.notify_one();
}

void ReadAhead::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  budget_cv_.notify_all();
  ready_cv_.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

}  // namespace internal
}  // namespace ufspack
