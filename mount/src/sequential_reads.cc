// Copyright 2026 The ufspack Authors.
#include "sequential_reads.h"

#include <algorithm>
#include <utility>

namespace ufspack {
namespace mount {
namespace {

// A window's records, at most: bounds the index entries looked at under
// the lock when a window is planned (a pack of tiny files).
constexpr uint64_t kMaxWindowRecords = 1024;

// Threads fetching windows ahead: each stream has at most one ahead, and
// two keep two runs' storage requests in flight.
constexpr int kFetchers = 2;

}  // namespace

SequentialReads::SequentialReads(const Reader* reader, uint64_t max_bytes)
    : reader_(reader), max_bytes_(max_bytes) {}

SequentialReads::~SequentialReads() {
  std::deque<std::shared_ptr<Window>> left;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    stop_ = true;
    left.swap(queue_);
  }
  queue_cv_.notify_all();
  for (std::thread& t : fetchers_) t.join();
  for (const std::shared_ptr<Window>& w : left) {
    std::lock_guard<std::mutex> lock(w->mu);
    w->status = Status::Aborted("read-ahead stopped");
    w->done = true;
    w->cv.notify_all();
  }
}

uint64_t SequentialReads::WindowCount(const Record& first,
                                      uint64_t bytes) const {
  uint64_t used = 0, count = 0;
  Record r;
  for (uint64_t i = first.index;
       i < reader_->size() && count < kMaxWindowRecords; ++i, ++count) {
    if (i == first.index) {
      r = first;
    } else if (!reader_->GetRecord(i, &r).ok() || r.part != first.part) {
      break;  // a bad entry is read alone, and reports itself there
    }
    const uint64_t size = std::max(r.stored_length, r.original_length);
    if (size > bytes - used) break;
    used += size;
  }
  return count;
}

std::shared_ptr<SequentialReads::Window> SequentialReads::NewWindow(
    Stream* s, const Record& first) {
  const uint64_t bytes = s->window_bytes;
  s->window_bytes = std::min(2 * bytes, max_bytes_);
  const uint64_t count = WindowCount(first, bytes);
  if (count < 2) return nullptr;  // a record as large as the window
  auto w = std::make_shared<Window>();
  w->first = first.index;
  w->count = count;
  return w;
}

std::shared_ptr<SequentialReads::Window> SequentialReads::NewWindowAfter(
    Stream* s, const Window& w) {
  Record first;
  if (w.first + w.count >= reader_->size() ||
      !reader_->GetRecord(w.first + w.count, &first).ok()) {
    return nullptr;
  }
  return NewWindow(s, first);
}

SequentialReads::Plan SequentialReads::Find(const Record& record) {
  const uint64_t i = record.index;
  Plan plan;
  ++tick_;
  for (Stream& s : streams_) {
    if (s.behind != nullptr && s.behind->Holds(i)) {
      s.last_use = tick_;
      plan.window = s.behind;
      return plan;
    }
    if (s.ahead != nullptr && s.ahead->Holds(i)) {
      s.behind = std::move(s.window);  // the run reached its next window
      s.window = std::move(s.ahead);
      s.ahead.reset();
    } else if (s.window == nullptr || !s.window->Holds(i)) {
      continue;
    }
    s.next = std::max(s.next, i + 1);
    s.last_use = tick_;
    plan.window = s.window;
    if (s.ahead == nullptr) {
      s.ahead = NewWindowAfter(&s, *s.window);
      plan.ahead = s.ahead;
    }
    return plan;
  }
  for (Stream& s : streams_) {
    if (!s.used || s.next != i) continue;
    // The run goes on past its windows: read the next one now, and the one
    // after it meanwhile.
    s.next = i + 1;
    s.last_use = tick_;
    s.behind = std::move(s.window);
    s.window = NewWindow(&s, record);
    s.ahead.reset();
    if (s.window == nullptr) return plan;
    plan.window = s.window;
    plan.fetch = true;
    s.ahead = NewWindowAfter(&s, *s.window);
    plan.ahead = s.ahead;
    return plan;
  }
  // A new run, maybe: in the least recently used stream.
  Stream* lru = &streams_[0];
  for (Stream& s : streams_) {
    if (s.last_use < lru->last_use) lru = &s;
  }
  *lru = Stream();
  lru->used = true;
  lru->next = i + 1;
  lru->window_bytes = kFirstWindowBytes;
  lru->last_use = tick_;
  return plan;
}

void SequentialReads::Fetch(Window* w) {
  Batch batch;
  Status s = reader_->ReadRange(w->first, w->count, &batch);
  stats_.windows.fetch_add(1, std::memory_order_relaxed);
  stats_.window_records.fetch_add(w->count, std::memory_order_relaxed);
  if (!s.ok()) stats_.failed_windows.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(w->mu);
    w->status = std::move(s);
    w->batch = std::move(batch);
    w->done = true;
  }
  w->cv.notify_all();
}

void SequentialReads::Prefetch(std::shared_ptr<Window> w) {
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    queue_.push_back(std::move(w));
    if (fetchers_.empty()) {
      for (int k = 0; k < kFetchers; ++k) {
        fetchers_.emplace_back([this] { FetcherLoop(); });
      }
    }
  }
  queue_cv_.notify_one();
}

void SequentialReads::FetcherLoop() {
  for (;;) {
    std::shared_ptr<Window> w;
    {
      std::unique_lock<std::mutex> lock(queue_mu_);
      queue_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      w = std::move(queue_.front());
      queue_.pop_front();
    }
    Fetch(w.get());
  }
}

Status SequentialReads::Read(const Record& record, std::string* out) {
  if (max_bytes_ < kFirstWindowBytes) return reader_->Read(record, out);
  Plan plan;
  {
    std::lock_guard<std::mutex> lock(mu_);
    plan = Find(record);
  }
  if (plan.ahead != nullptr) Prefetch(std::move(plan.ahead));
  Window* w = plan.window.get();
  if (w != nullptr) {
    if (plan.fetch) {
      Fetch(w);
    } else {
      std::unique_lock<std::mutex> lock(w->mu);
      w->cv.wait(lock, [&] { return w->done; });
    }
    if (w->status.ok()) {
      out->assign(w->batch.get(record.index - w->first));
      stats_.reads_from_windows.fetch_add(1, std::memory_order_relaxed);
      return Status::OK();
    }
  }
  return reader_->Read(record, out);
}

}  // namespace mount
}  // namespace ufspack
