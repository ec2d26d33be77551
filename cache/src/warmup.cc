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

}  // namespace

Status Warmup(const std::string& pack_path, const std::shared_ptr<Cache>& cache,
              const WarmupOptions& options, WarmupResult* result) {
  const auto t0 = std::chrono::steady_clock::now();
  *result = WarmupResult();
  ReaderOptions ro;
  ro.cache = cache;
  std::unique_ptr<Reader> reader;
  UFSPACK_RETURN_IF_ERROR(Reader::Open(pack_path, ro, &reader));
  if (reader->info().part_count > 0) {
    return Status::NotSupported(
        pack_path + ": a merged pack (" +
        std::to_string(reader->info().part_count) +
        " parts): warm up each part instead (reading the merged pack "
        "through the cache fills it part by part)");
  }
  if (reader->offline()) {
    return Status::IOError(reader->info().data_path +
                           ": source unreachable; nothing to warm up from");
  }
  std::unique_ptr<PackCache> attached;
  UFSPACK_RETURN_IF_ERROR(cache->AttachPack(
      reader->info().index_path, reader->info().data_path, &attached));
  auto* pack = static_cast<cache_internal::PackCacheImpl*>(attached.get());
  if (pack->empty()) {
    return Status::IOError("cache " + cache->options().dir +
                           " has no room for pack " + pack_path +
                           " (its index copy and slot array); raise the limit");
  }
  std::unique_ptr<RandomAccessFile> data;
  UFSPACK_RETURN_IF_ERROR(
      OpenRandomAccessFile(reader->info().data_path, &data));

  // Plan the runs of records still missing, in data file order (a pack
  // stores records in index order).
  const uint64_t block = std::max<uint64_t>(options.block_bytes, 1 << 16);
  std::vector<Run> runs;
  result->records = reader->size();
  for (uint64_t i = 0; i < reader->size(); ++i) {
    Record r;
    UFSPACK_RETURN_IF_ERROR(reader->GetRecord(i, &r));
    if (pack->Contains(i)) {
      ++result->already_cached;
      continue;
    }
    if (r.stored_length > kMaxCacheEntryBytes) {
      ++result->too_large;
      continue;
    }
    result->bytes_total += r.stored_length;
    const uint64_t end = r.offset + r.stored_length;
    if (runs.empty() || r.offset < runs.back().end ||
        r.offset - runs.back().end > kMaxGap ||
        end - runs.back().begin > block) {
      runs.push_back(Run{r.offset, end, {}});
    }
    runs.back().end = end;
    runs.back().records.push_back(i);
  }

  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  std::atomic<bool> full{false};
  std::atomic<bool> failed{false};
  std::atomic<uint64_t> bytes_done{0}, added{0}, refused{0};
  std::mutex mu;
  Status first_error;
  std::atomic<int> finished{0};
  auto worker = [&]() {
    std::string buf;
    for (;;) {
      const size_t k = next.fetch_add(1);
      if (k >= runs.size() || stop.load()) break;
      const Run& run = runs[k];
      buf.resize(static_cast<size_t>(run.end - run.begin));
      size_t got = 0;
      Status s = data->Read(run.begin, buf.size(), buf.data(), &got);
      if (s.ok() && got != buf.size()) {
        s = Status::Corruption(data->name() + ": short read at offset " +
                               std::to_string(run.begin) + ": expected " +
                               std::to_string(buf.size()) + " bytes, found " +
                               std::to_string(got));
      }
      std::vector<cache_internal::Table::Item> items;
      for (uint64_t i : run.records) {
        if (!s.ok()) break;
        Record r;
        s = reader->GetRecord(i, &r);
        if (!s.ok()) break;
        const char* p = buf.data() + (r.offset - run.begin);
        const uint64_t actual =
            Checksum64(p, static_cast<size_t>(r.stored_length));
        if (actual != r.checksum) {
          s = Status::Corruption(
              data->name() + ": record " + std::to_string(i) + " '" +
              std::string(r.name) + "' at offset " + std::to_string(r.offset) +
              ": checksum mismatch: expected " + std::to_string(r.checksum) +
              ", found " + std::to_string(actual));
          break;
        }
        items.push_back({i, p, r.stored_length, r.checksum});
      }
      if (s.ok()) {
        std::vector<cache_internal::Table::PutResult> results;
        pack->PutMany(items, &results);
        for (size_t j = 0; j < items.size(); ++j) {
          if (results[j] == cache_internal::Table::PutResult::kStored) {
            added.fetch_add(1);
          } else if (results[j] == cache_internal::Table::PutResult::kRefused) {
            refused.fetch_add(1);
            full.store(true);
          } else if (results[j] == cache_internal::Table::PutResult::kFailed) {
            failed.store(true);  // the cache's disk: warned about by the tier
          }
          bytes_done.fetch_add(items[j].length);
        }
      }
      if (!s.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (first_error.ok()) first_error = s;
        stop.store(true);
        break;
      }
      // Every tier refused (the cache is full) or failed: reading on is
      // pointless.
      if (full.load() || failed.load()) {
        stop.store(true);
        break;
      }
    }
    finished.fetch_add(1);
  };
  const int threads = std::max(1, std::min(options.threads, 64));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker);
  auto last_report = std::chrono::steady_clock::now();
  bool first = true;
  while (finished.load() < threads) {
    const auto now = std::chrono::steady_clock::now();
    if (options.progress && !result->stopped &&
        (first || now - last_report >= std::chrono::milliseconds(100))) {
      first = false;
      last_report = now;
      if (!options.progress(bytes_done.load(), result->bytes_total)) {
        stop.store(true);
        result->stopped = true;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (auto& t : pool) t.join();
  if (options.progress)
    options.progress(bytes_done.load(), result->bytes_total);
  result->added = added.load();
  result->refused = refused.load();
  if (full.load() && first_error.ok()) {
    // The records never offered once the cache was full count as refused.
    result->refused = result->records - result->already_cached - result->added -
                      result->too_large;
  }
  result->bytes_read = bytes_done.load();
  result->seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  return first_error;
}

}  // namespace ufspack
