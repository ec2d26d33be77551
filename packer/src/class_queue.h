// Copyright 2026 The ufspack Authors.
//
// ClassQueue: the classes a build's scanning thread lists, handed to the
// building thread in order (docs/scale.md).  Internal to the packer.
//
// Thread safety: Push from the scanning thread; the other methods from the
// building thread.
#ifndef UFSPACK_PACKER_SRC_CLASS_QUEUE_H_
#define UFSPACK_PACKER_SRC_CLASS_QUEUE_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <utility>
#include <vector>

#include "progress_reporter.h"
#include "ufspack/builder.h"
#include "ufspack/scan.h"

namespace ufspack {
namespace internal {

// Classes handed from the scanning thread to the building thread.  Holds at
// most `capacity` samples, unless one class alone has more (a class is
// never split).
class ClassQueue {
 public:
  explicit ClassQueue(size_t capacity) : capacity_(capacity) {}

  // Scanning thread.  Blocks while the queue is full; false once the
  // building thread stopped it.
  bool Push(ScanClass* cls) {
    std::unique_lock<std::mutex> lock(mu_);
    auto fits = [&] {
      return stopped_ || buffered_ == 0 ||
             buffered_ + cls->entries.size() <= capacity_;
    };
    if (!fits()) {
      // The building thread may be waiting for more samples (WaitFor):
      // it must take what there is.
      const auto t0 = std::chrono::steady_clock::now();
      blocked_ = true;
      changed_.notify_all();
      not_full_.wait(lock, fits);
      blocked_ = false;
      blocked_seconds_ += SecondsSince(t0);
    }
    if (stopped_) return false;
    buffered_ += cls->entries.size();
    listed_ += cls->entries.size();
    if (!names_.empty()) ++classes_;
    queue_.push_back(std::move(*cls));
    changed_.notify_all();
    return true;
  }
  void SetClasses(const std::vector<std::string>& names, size_t wanted) {
    std::lock_guard<std::mutex> lock(mu_);
    names_ = names;
    wanted_ = names.empty() ? 0 : wanted;
  }
  void Finish(Status s) {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    status_ = std::move(s);
    changed_.notify_all();
  }
  void Stop() {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
    not_full_.notify_all();
  }

  // Building thread.  Waits until more than `n` samples wait, the scan is
  // over or cannot go on until some are taken; false if cancelled.  Calls
  // `idle` about every 100 ms while it waits.
  bool WaitFor(size_t n, const std::atomic<bool>* cancel,
               const std::function<void()>& idle) {
    std::unique_lock<std::mutex> lock(mu_);
    while (!done_ && !blocked_ && buffered_ <= n) {
      if (!Poll(&lock, cancel, idle)) return false;
    }
    return true;
  }
  // The next class; false when the scan is over and every class was taken,
  // at once when the scan failed, or when cancelled.
  bool Pop(ScanClass* out, const std::atomic<bool>* cancel,
           const std::function<void()>& idle) {
    std::unique_lock<std::mutex> lock(mu_);
    while (!done_ && queue_.empty()) {
      if (!Poll(&lock, cancel, idle)) return false;
    }
    if (queue_.empty() || (done_ && !status_.ok())) return false;
    *out = std::move(queue_.front());
    queue_.pop_front();
    buffered_ -= out->entries.size();
    not_full_.notify_all();
    return true;
  }
  // Progress, as of now: samples and classes listed, of how many classes.
  void Describe(BuildProgress* p) {
    std::lock_guard<std::mutex> lock(mu_);
    p->files_total = listed_;
    p->classes_scanned = classes_;
    p->classes_total = wanted_;
    p->scan_done = done_;
  }
  std::vector<std::string> names() {
    std::lock_guard<std::mutex> lock(mu_);
    return names_;
  }
  bool done() {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }
  Status status() {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }
  // Time the scanning thread spent waiting for room.
  double blocked_seconds() {
    std::lock_guard<std::mutex> lock(mu_);
    return blocked_seconds_;
  }

 private:
  bool Poll(std::unique_lock<std::mutex>* lock, const std::atomic<bool>* cancel,
            const std::function<void()>& idle) {
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) {
      return false;
    }
    changed_.wait_for(*lock, std::chrono::milliseconds(100));
    if (idle) {
      lock->unlock();
      idle();
      lock->lock();
    }
    return true;
  }

  const size_t capacity_;
  std::mutex mu_;
  std::condition_variable changed_, not_full_;
  std::deque<ScanClass> queue_;
  size_t buffered_ = 0;
  uint64_t listed_ = 0;
  uint64_t classes_ = 0;
  uint64_t wanted_ = 0;
  std::vector<std::string> names_;
  bool done_ = false;
  bool stopped_ = false;
  bool blocked_ = false;
  double blocked_seconds_ = 0;
  Status status_;
};

}  // namespace internal
}  // namespace ufspack

#endif  // UFSPACK_PACKER_SRC_CLASS_QUEUE_H_
