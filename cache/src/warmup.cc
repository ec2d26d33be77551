// Copyright 2026 The ufspack Authors.
//
// Warm-up: a network file system reads sequentially at tens of MB/s but
// serves only hundreds of random reads a second, so the records missing
// from the cache are read in runs of neighbours, one large pread each, and
// split into cache entries here.
#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "pack_cache.h"
#include "ufspack/cache.h"
#include "ufspack/file.h"
#include "ufspack/format.h"
#include "ufspack/reader.h"

namespace ufspack {

namespace {

// Records [first, first + count) of the pack, stored back to back (gaps of
// at most kMaxGap bytes) in [begin, end) of data.ufs.
struct Run {
  uint64_t begin = 0;
  uint64_t end = 0;
  std::vector<uint64_t> records;
};

// Reading a gap this small costs less than a second request.
constexpr uint64_t kMaxGap = 64 << 10;

// Plans the runs of records still missing from `pack`, in data file order
// (a pack stores records in index order), each at most `block` bytes;
// counts the records in *result.
Status PlanRuns(const Reader& reader, const cache_internal::PackCacheImpl& pack,
                uint64_t block, WarmupResult* result, std::vector<Run>* runs) {
  result->records = reader.size();
  for (uint64_t i = 0; i < reader.size(); ++i) {
    Record r;
    UFSPACK_RETURN_IF_ERROR(reader.GetRecord(i, &r));
    if (pack.Contains(i)) {
      ++result->already_cached;
      continue;
    }
    if (r.stored_length > kMaxCacheEntryBytes) {
      ++result->too_large;
      continue;
    }
    result->bytes_total += r.stored_length;
    const uint64_t end = r.offset + r.stored_length;
    if (runs->empty() || r.offset < runs->back().end ||
        r.offset - runs->back().end > kMaxGap ||
        end - runs->back().begin > block) {
      runs->push_back(Run{r.offset, end, {}});
    }
    runs->back().end = end;
    runs->back().records.push_back(i);
  }
  return Status::OK();
}

// The threads of one warm-up: each takes the next run, reads it with one
// pread, checks every record's checksum and offers the records to the
// cache in one PutMany.  All stop at the first error, when the cache is
// full or its disk fails, or when stopped.
class Fill {
 public:
  Fill(const Reader& reader, const RandomAccessFile& data,
       cache_internal::PackCacheImpl* pack, const std::vector<Run>& runs)
      : reader_(reader), data_(data), pack_(pack), runs_(runs) {}

  void Work() {
    std::string buf;
    for (;;) {
      const size_t k = next_.fetch_add(1);
      if (k >= runs_.size() || stop_.load()) break;
      std::vector<cache_internal::Table::Item> items;
      Status s = ReadRun(runs_[k], &buf, &items);
      if (s.ok()) Offer(items);
      if (!s.ok()) {
        std::lock_guard<std::mutex> lock(mu_);
        if (first_error_.ok()) first_error_ = s;
        stop_.store(true);
        break;
      }
      // Every tier refused (the cache is full) or failed: reading on is
      // pointless.
      if (full_.load() || failed_.load()) {
        stop_.store(true);
        break;
      }
    }
    finished_.fetch_add(1);
  }

  void Stop() { stop_.store(true); }
  int finished() const { return finished_.load(); }
  uint64_t bytes_done() const { return bytes_done_.load(); }
  uint64_t added() const { return added_.load(); }
  uint64_t refused() const { return refused_.load(); }
  bool full() const { return full_.load(); }
  Status first_error() {
    std::lock_guard<std::mutex> lock(mu_);
    return first_error_;
  }

 private:
  // Reads `run` into *buf and lists its records, each checked against its
  // checksum, in *items (pointing into *buf).
  Status ReadRun(const Run& run, std::string* buf,
                 std::vector<cache_internal::Table::Item>* items) {
    buf->resize(static_cast<size_t>(run.end - run.begin));
    size_t got = 0;
    UFSPACK_RETURN_IF_ERROR(
        data_.Read(run.begin, buf->size(), buf->data(), &got));
    if (got != buf->size()) {
      return Status::Corruption(data_.name() + ": short read at offset " +
                                std::to_string(run.begin) + ": expected " +
                                std::to_string(buf->size()) + " bytes, found " +
                                std::to_string(got));
    }
    for (uint64_t i : run.records) {
      Record r;
      UFSPACK_RETURN_IF_ERROR(reader_.GetRecord(i, &r));
      const char* p = buf->data() + (r.offset - run.begin);
      const uint64_t actual =
          Checksum64(p, static_cast<size_t>(r.stored_length));
      if (actual != r.checksum) {
        return Status::Corruption(
            data_.name() + ": record " + std::to_string(i) + " '" +
            std::string(r.name) + "' at offset " + std::to_string(r.offset) +
            ": checksum mismatch: expected " + std::to_string(r.checksum) +
            ", found " + std::to_string(actual));
      }
      items->push_back({i, p, r.stored_length, r.checksum});
    }
    return Status::OK();
  }

  void Offer(const std::vector<cache_internal::Table::Item>& items) {
    std::vector<cache_internal::Table::PutResult> results;
    pack_->PutMany(items, &results);
    for (size_t j = 0; j < items.size(); ++j) {
      if (results[j] == cache_internal::Table::PutResult::kStored) {
        added_.fetch_add(1);
      } else if (results[j] == cache_internal::Table::PutResult::kRefused) {
        refused_.fetch_add(1);
        full_.store(true);
      } else if (results[j] == cache_internal::Table::PutResult::kFailed) {
        failed_.store(true);  // the cache's disk: warned about by the tier
      }
      bytes_done_.fetch_add(items[j].length);
    }
  }

  const Reader& reader_;
  const RandomAccessFile& data_;
  cache_internal::PackCacheImpl* const pack_;
  const std::vector<Run>& runs_;
  std::atomic<size_t> next_{0};
  std::atomic<bool> stop_{false};
  std::atomic<bool> full_{false};
  std::atomic<bool> failed_{false};
  std::atomic<uint64_t> bytes_done_{0}, added_{0}, refused_{0};
  std::atomic<int> finished_{0};
  std::mutex mu_;
  Status first_error_;
};

// Opens `pack_path` through `cache` and attaches its raw table (which must
// have room), and its data file.
Status OpenForWarmup(const std::string& pack_path,
                     const std::shared_ptr<Cache>& cache,
                     std::unique_ptr<Reader>* reader,
                     std::unique_ptr<PackCache>* attached,
                     std::unique_ptr<RandomAccessFile>* data) {
  ReaderOptions ro;
  ro.cache = cache;
  UFSPACK_RETURN_IF_ERROR(Reader::Open(pack_path, ro, reader));
  const PackInfo& info = (*reader)->info();
  if (info.part_count > 0) {
    return Status::NotSupported(
        pack_path + ": a merged pack (" + std::to_string(info.part_count) +
        " parts): warm up each part instead (reading the merged pack "
        "through the cache fills it part by part)");
  }
  if ((*reader)->offline()) {
    return Status::IOError(info.data_path +
                           ": source unreachable; nothing to warm up from");
  }
  UFSPACK_RETURN_IF_ERROR(
      cache->AttachPack(info.index_path, info.data_path, attached));
  if (static_cast<cache_internal::PackCacheImpl*>(attached->get())->empty()) {
    return Status::IOError("cache " + cache->options().dir +
                           " has no room for pack " + pack_path +
                           " (its index copy and slot array); raise the limit");
  }
  return OpenRandomAccessFile(info.data_path, data);
}

}  // namespace

Status Warmup(const std::string& pack_path, const std::shared_ptr<Cache>& cache,
              const WarmupOptions& options, WarmupResult* result) {
  const auto t0 = std::chrono::steady_clock::now();
  *result = WarmupResult();
  std::unique_ptr<Reader> reader;
  std::unique_ptr<PackCache> attached;
  std::unique_ptr<RandomAccessFile> data;
  UFSPACK_RETURN_IF_ERROR(
      OpenForWarmup(pack_path, cache, &reader, &attached, &data));
  auto* pack = static_cast<cache_internal::PackCacheImpl*>(attached.get());
  std::vector<Run> runs;
  UFSPACK_RETURN_IF_ERROR(
      PlanRuns(*reader, *pack, std::max<uint64_t>(options.block_bytes, 1 << 16),
               result, &runs));

  Fill fill(*reader, *data, pack, runs);
  const int threads = std::max(1, std::min(options.threads, 64));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back([&] { fill.Work(); });
  auto last_report = std::chrono::steady_clock::now();
  bool first = true;
  while (fill.finished() < threads) {
    const auto now = std::chrono::steady_clock::now();
    if (options.progress && !result->stopped &&
        (first || now - last_report >= std::chrono::milliseconds(100))) {
      first = false;
      last_report = now;
      if (!options.progress(fill.bytes_done(), result->bytes_total)) {
        fill.Stop();
        result->stopped = true;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (auto& t : pool) t.join();
  if (options.progress)
    options.progress(fill.bytes_done(), result->bytes_total);
  const Status first_error = fill.first_error();
  result->added = fill.added();
  result->refused = fill.refused();
  if (fill.full() && first_error.ok()) {
    // The records never offered once the cache was full count as refused.
    result->refused = result->records - result->already_cached - result->added -
                      result->too_large;
  }
  result->bytes_read = fill.bytes_done();
  result->seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  return first_error;
}

}  // namespace ufspack
