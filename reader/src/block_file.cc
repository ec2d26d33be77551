// Copyright 2026 The ufspack Authors.

#include "block_file.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <list>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>

namespace ufspack {
namespace internal {

namespace {

// A block's bytes in memory of their own (mmap), so that a dropped block
// goes back to the system at once: blocks of 8 MiB through malloc are
// taken from its arenas once it has freed a few (glibc raises its mmap
// threshold to the largest chunk freed), and the process's resident set
// then grows past the cache's bound.
class Buffer {
 public:
  explicit Buffer(size_t size) : size_(size) {
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      data_ = p == MAP_FAILED ? nullptr : static_cast<char*>(p);
    }
  }
  ~Buffer() {
    if (data_ != nullptr) ::munmap(data_, size_);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  // False when the mapping failed (out of memory).
  bool ok() const { return size_ == 0 || data_ != nullptr; }
  char* data() { return data_; }
  const char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  char* data_ = nullptr;
  size_t size_;
};
using Bytes = std::shared_ptr<const Buffer>;

// One block's fetch, shared by the thread doing it and those waiting.
struct Fetch {
  bool done = false;
  Status status;
  Bytes bytes;
};

// A block on its way to a read: kept already, or being fetched.
struct Want {
  uint64_t block = 0;
  Bytes bytes;                   // kept
  std::shared_ptr<Fetch> fetch;  // in flight
  bool mine = false;             // this caller fetches it
};

constexpr size_t kMaxQueued = 4096;

}  // namespace

class BlockFile::State {
 public:
  State(const RandomAccessFile* inner, uint64_t data_size,
        const Options& options, ExtentsFn extents)
      : inner_(inner),
        data_size_(data_size),
        options_(options),
        extents_fn_(std::move(extents)),
        owner_(::getpid()) {}

  ~State() {
    // A child of fork() has none of the parent's threads, and one of them
    // may have held mu_ at the fork: the child touches neither (their
    // handles are leaked; a join would wait for a thread that is not there).
    if (ForkedAway()) return;  // not reached: ~BlockFile leaks it
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (threads_ != nullptr) {
      for (std::thread& t : *threads_) t.join();
      delete threads_;
    }
  }

  // In a child of fork(): this object's threads and lock state are the
  // parent's, and destroying it (joining, locking, destroying a condition
  // variable threads were waiting on) could hang.
  bool ForkedAway() const { return ::getpid() != owner_; }

  // The block holding [offset, offset + n), or false: the read bypasses
  // the blocks.
  bool Locate(uint64_t offset, size_t n, uint64_t* block) {
    if (n == 0 || n >= options_.block_bytes || !Extents().ok()) return false;
    const uint64_t k = offset / options_.block_bytes;
    if (k >= extents_.size()) return false;
    const Extent& e = extents_[k];
    if (offset < e.begin || offset + n > e.end) return false;
    *block = k;
    return true;
  }

  const Extent& extent(uint64_t k) const { return extents_[k]; }

  // Looks up block k, keeping it recent: kept, in flight, or (mine) a new
  // fetch this caller must do and Finish().
  Want Get(uint64_t k) {
    std::lock_guard<std::mutex> l(mu_);
    return GetLocked(k);
  }

  // Ends this caller's fetch of `want`'s block with `status` and `bytes`.
  void Finish(const Want& want, Status status, std::unique_ptr<Buffer> bytes) {
    {
      std::lock_guard<std::mutex> l(mu_);
      in_flight_.erase(want.block);
      want.fetch->status = std::move(status);
      if (want.fetch->status.ok()) {
        fetched_bytes_ += bytes->size();
        Bytes kept(std::move(bytes));
        want.fetch->bytes = kept;
        Keep(want.block, std::move(kept));
      }
      want.fetch->done = true;
    }
    cv_.notify_all();
  }

  // The bytes of a wanted block, waiting for its fetch.
  Status Wait(const Want& want, Bytes* bytes) {
    if (want.bytes) {
      *bytes = want.bytes;
      return Status::OK();
    }
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return want.fetch->done; });
    if (!want.fetch->status.ok()) return want.fetch->status;
    *bytes = want.fetch->bytes;
    return Status::OK();
  }

  // Reads block `want.block`'s extent from the file underneath.
  Status FetchInto(uint64_t k, std::unique_ptr<Buffer>* bytes) {
    UFSPACK_RETURN_IF_ERROR(Allocate(k, bytes));
    size_t got = 0;
    fetches_++;
    Status s = inner_->Read(extents_[k].begin, (*bytes)->size(),
                            (*bytes)->data(), &got);
    if (s.ok() && got != (*bytes)->size()) s = ShortRead(k, got);
    return s;
  }

  // Room for block k's extent.
  Status Allocate(uint64_t k, std::unique_ptr<Buffer>* bytes) const {
    const Extent& e = extents_[k];
    *bytes = std::make_unique<Buffer>(e.end - e.begin);
    if (!(*bytes)->ok()) {
      return Status::IOError(inner_->name() + ": block " + std::to_string(k) +
                             ": out of memory for " +
                             std::to_string(e.end - e.begin) + " bytes");
    }
    return Status::OK();
  }

  Status ShortRead(uint64_t k, size_t got) const {
    const Extent& e = extents_[k];
    return Status::Corruption(
        inner_->name() + ": block " + std::to_string(k) + " at offset " +
        std::to_string(e.begin) + ": short read: expected " +
        std::to_string(e.end - e.begin) + " bytes, found " +
        std::to_string(got) + " (data file truncated?)");
  }

  void Prefetch(const uint64_t* offsets, size_t count) {
    if (!Extents().ok()) return;
    bool queued = false;
    {
      std::lock_guard<std::mutex> l(mu_);
      for (size_t i = 0; i < count; ++i) {
        uint64_t k = offsets[i] / options_.block_bytes;
        if (k >= extents_.size() || extents_[k].begin == UINT64_MAX) continue;
        if (kept_.count(k) || in_flight_.count(k)) continue;
        if (queue_.size() >= kMaxQueued) break;
        queue_.push_back({k, ReadsOf(k)});
        queued = true;
      }
      if (queued && threads_ == nullptr) StartThreads();
    }
    if (queued) cv_.notify_all();
  }

  // Counts a read served from kept block k; once each of its records has
  // been read, the block is the first to be dropped.
  void Served(uint64_t k) {
    served_++;
    std::lock_guard<std::mutex> l(mu_);
    if (reads_.empty()) reads_.assign(extents_.size(), 0);
    reads_[k]++;
    auto kept = kept_.find(k);
    if (kept == kept_.end()) return;
    if (++kept->second.served >= extents_[k].records) {
      lru_.splice(lru_.end(), lru_, kept->second.lru);
    }
  }

  BlockReadStats stats() const {
    BlockReadStats s;
    s.block_fetches = fetches_;
    s.bytes_fetched = fetched_bytes_;
    s.reads_from_blocks = served_;
    s.reads_bypassed = bypassed_;
    return s;
  }

  void CountFetches(size_t n) { fetches_ += n; }
  std::atomic<uint64_t> served_{0}, bypassed_{0};

 private:
  // Computed by the first read (one pass over the index); every read
  // asks, so after the first it costs one std::call_once check, no lock.
  const Status& Extents() {
    std::call_once(extents_once_, [this] {
      extents_.assign(
          (data_size_ + options_.block_bytes - 1) / options_.block_bytes,
          Extent());
      extents_status_ = extents_fn_(options_.block_bytes, &extents_);
      if (!extents_status_.ok()) extents_.clear();
    });
    return extents_status_;
  }

  // REQUIRES: mu_ held.
  uint32_t ReadsOf(uint64_t k) const {
    return k < reads_.size() ? reads_[k] : 0;
  }

  Want GetLocked(uint64_t k) {
    Want w;
    w.block = k;
    auto kept = kept_.find(k);
    if (kept != kept_.end()) {
      if (kept->second.served < extents_[k].records) {
        lru_.splice(lru_.begin(), lru_, kept->second.lru);
      }
      w.bytes = kept->second.bytes;
      return w;
    }
    auto flying = in_flight_.find(k);
    if (flying != in_flight_.end()) {
      w.fetch = flying->second;
      return w;
    }
    w.fetch = std::make_shared<Fetch>();
    w.mine = true;
    in_flight_[k] = w.fetch;
    return w;
  }

  void Keep(uint64_t k, Bytes bytes) {
    kept_bytes_ += bytes->size();
    lru_.push_front(k);
    kept_[k] = Kept{std::move(bytes), lru_.begin(), 0};
    while (kept_bytes_ > options_.cache_bytes && lru_.size() > 1) {
      auto last = kept_.find(lru_.back());
      kept_bytes_ -= last->second.bytes->size();
      kept_.erase(last);
      lru_.pop_back();
    }
  }

  void StartThreads() {
    threads_ = new std::vector<std::thread>();
    for (int i = 0; i < std::max(1, options_.prefetch_threads); ++i) {
      threads_->emplace_back([this] { PrefetchLoop(); });
    }
  }

  void PrefetchLoop() {
    for (;;) {
      Want w;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
        if (stop_) return;
        const auto [k, reads] = queue_.front();
        queue_.pop_front();
        // Read since it was asked for: fetched on demand meanwhile (and
        // maybe read through and dropped already): not again.
        if (ReadsOf(k) != reads) continue;
        w = GetLocked(k);
        if (!w.mine) continue;
      }
      std::unique_ptr<Buffer> bytes;
      Status s = FetchInto(w.block, &bytes);
      Finish(w, std::move(s), std::move(bytes));
    }
  }

  struct Kept {
    Bytes bytes;
    std::list<uint64_t>::iterator lru;
    uint64_t served;  // reads served from it
  };

  const RandomAccessFile* const inner_;
  const uint64_t data_size_;
  const Options options_;
  const ExtentsFn extents_fn_;
  const pid_t owner_;

  std::once_flag extents_once_;
  Status extents_status_;
  std::vector<Extent> extents_;  // immutable once extents_once_ has run

  std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<uint64_t, Kept> kept_;
  // Kept blocks, most recent first; those read through at the back.
  std::list<uint64_t> lru_;
  uint64_t kept_bytes_ = 0;
  std::unordered_map<uint64_t, std::shared_ptr<Fetch>> in_flight_;
  // Blocks to prefetch, each with ReadsOf() when it was asked for.
  std::deque<std::pair<uint64_t, uint32_t>> queue_;
  // Reads served from each block so far (the blocks read since a prefetch
  // was asked for are not fetched for it).
  // Sized to the blocks on first use (4 bytes a block).
  std::vector<uint32_t> reads_;
  std::vector<std::thread>* threads_ = nullptr;
  bool stop_ = false;
  std::atomic<uint64_t> fetches_{0}, fetched_bytes_{0};
};

BlockFile::BlockFile(std::unique_ptr<RandomAccessFile> inner,
                     uint64_t data_size, const Options& options,
                     ExtentsFn extents)
    : inner_(std::move(inner)),
      state_(std::make_unique<State>(inner_.get(), data_size, options,
                                     std::move(extents))) {}

BlockFile::~BlockFile() {
  // A child of fork() leaks the parent's state (see ForkedAway): a few
  // kept blocks, once per process that drops an inherited reader.
  if (state_->ForkedAway()) static_cast<void>(state_.release());
}

Status BlockFile::Read(uint64_t offset, size_t n, char* scratch,
                       size_t* bytes_read) const {
  uint64_t k;
  if (!state_->Locate(offset, n, &k)) {
    state_->bypassed_++;
    return inner_->Read(offset, n, scratch, bytes_read);
  }
  Want w = state_->Get(k);
  if (w.mine) {
    std::unique_ptr<Buffer> bytes;
    Status s = state_->FetchInto(k, &bytes);
    state_->Finish(w, std::move(s), std::move(bytes));
  }
  Bytes bytes;
  UFSPACK_RETURN_IF_ERROR(state_->Wait(w, &bytes));
  std::memcpy(scratch, bytes->data() + (offset - state_->extent(k).begin), n);
  *bytes_read = n;
  state_->Served(k);
  return Status::OK();
}

Status BlockFile::ReadMany(ReadOp* ops, size_t count, size_t* failed) const {
  // Which block each op reads from (or SIZE_MAX: straight from the file).
  std::vector<size_t> want_of(count, SIZE_MAX);
  std::vector<Want> wants;
  std::unordered_map<uint64_t, size_t> want_index;
  std::vector<ReadOp> direct;
  std::vector<size_t> direct_of;
  for (size_t i = 0; i < count; ++i) {
    uint64_t k;
    if (!state_->Locate(ops[i].offset, ops[i].n, &k)) {
      direct.push_back(ops[i]);
      direct_of.push_back(i);
      continue;
    }
    auto [it, added] = want_index.emplace(k, wants.size());
    if (added) wants.push_back(state_->Get(k));
    want_of[i] = it->second;
  }
  // This caller's fetches, all at once.
  std::vector<ReadOp> fetch_ops;
  std::vector<size_t> fetch_of;
  std::vector<std::unique_ptr<Buffer>> fetched;
  for (size_t w = 0; w < wants.size(); ++w) {
    if (wants[w].mine) fetch_of.push_back(w);
  }
  fetched.resize(fetch_of.size());
  Status fetch_status;
  for (size_t f = 0; f < fetch_of.size() && fetch_status.ok(); ++f) {
    const uint64_t k = wants[fetch_of[f]].block;
    fetch_status = state_->Allocate(k, &fetched[f]);
    if (!fetch_status.ok()) break;
    ReadOp op;
    op.offset = state_->extent(k).begin;
    op.n = fetched[f]->size();
    op.dst = fetched[f]->data();
    fetch_ops.push_back(op);
  }
  size_t fetch_failed = fetch_ops.size();
  if (fetch_status.ok() && !fetch_ops.empty()) {
    state_->CountFetches(fetch_ops.size());
    fetch_status =
        inner_->ReadMany(fetch_ops.data(), fetch_ops.size(), &fetch_failed);
  }
  for (size_t f = 0; f < fetch_of.size(); ++f) {
    const Want& w = wants[fetch_of[f]];
    Status s = fetch_status;
    if (s.ok() && fetch_ops[f].got != fetch_ops[f].n) {
      s = state_->ShortRead(w.block, fetch_ops[f].got);
    }
    if (fetched[f] == nullptr) fetched[f] = std::make_unique<Buffer>(0);
    state_->Finish(w, std::move(s), std::move(fetched[f]));
  }
  // Reads outside the blocks.
  Status status;
  *failed = count;
  if (!direct.empty()) {
    size_t direct_failed = direct.size();
    status = inner_->ReadMany(direct.data(), direct.size(), &direct_failed);
    state_->bypassed_ += direct.size();
    for (size_t d = 0; d < direct.size(); ++d) {
      ops[direct_of[d]].got = direct[d].got;
    }
    if (!status.ok()) {
      *failed =
          direct_failed < direct.size() ? direct_of[direct_failed] : count;
      return status;
    }
  }
  // Every op from its block.
  std::vector<Bytes> bytes(wants.size());
  for (size_t w = 0; w < wants.size(); ++w) {
    Status s = state_->Wait(wants[w], &bytes[w]);
    if (!s.ok()) {
      for (size_t i = 0; i < count; ++i) {
        if (want_of[i] == w) {
          *failed = i;
          break;
        }
      }
      return s;
    }
  }
  for (size_t i = 0; i < count; ++i) {
    if (want_of[i] == SIZE_MAX) continue;
    const Want& w = wants[want_of[i]];
    std::memcpy(ops[i].dst,
                bytes[want_of[i]]->data() +
                    (ops[i].offset - state_->extent(w.block).begin),
                ops[i].n);
    ops[i].got = ops[i].n;
    state_->Served(w.block);
  }
  return Status::OK();
}

void BlockFile::Prefetch(const uint64_t* offsets, size_t count) const {
  state_->Prefetch(offsets, count);
}

BlockReadStats BlockFile::stats() const { return state_->stats(); }

}  // namespace internal
}  // namespace ufspack
