// Copyright 2026 The ufspack Authors.
//
// Micro benchmarks of the reader, on synthetic packs written to
// $UFSPACK_BENCH_DIR (default: a fresh directory under /tmp, removed at
// exit).  Writing the packs leaves them in the page cache, so reads measure
// the page-cache case.
//
//   BM_Open/<records>          Reader::Open + destroy; must stay flat.
//                              10,000,000 records only with
//                              UFSPACK_BENCH_10M=1 (writes a ~1 GB index).
//   BM_Read/<bytes>            Reader::Read of random records (checksummed)
//   BM_ReadZstd/<bytes>        ... of zstd-compressed records of the same
//                              original size (compressible text); bytes/s
//                              counts original bytes.
//   BM_ReadNoVerify/<bytes>    ... without the checksum
//   BM_RawPread/<bytes>        pread(2) of the same offsets of the same file:
//                              the physical limit for BM_Read.
//   BM_Checksum/<bytes>        Checksum64 (XXH3-64) of one buffer: the
//                              per-record cost BM_Read pays over
//                              BM_ReadNoVerify.
//   BM_Find                    Reader::Find on a 1M-record pack.
//
//   build/bench/reader_bench --benchmark_filter=Open
//   UFSPACK_BENCH_10M=1 build/bench/reader_bench --benchmark_filter=Open
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "ufspack/builder.h"
#include "ufspack/cache.h"
#include "ufspack/format.h"
#include "ufspack/reader.h"

namespace ufspack {
namespace {

std::string BenchDir() {
  static std::string dir = [] {
    const char* env = std::getenv("UFSPACK_BENCH_DIR");
    if (env && *env) return std::string(env);
    char tmpl[] = "/tmp/ufspack-bench-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) std::abort();
    // Copied to static storage: the atexit handler runs after this
    // function's static string is destroyed.
    static char cleanup[sizeof(tmpl) + 16];
    std::snprintf(cleanup, sizeof(cleanup), "rm -rf %s", tmpl);
    std::atexit([] {
      if (std::system(cleanup) != 0) std::fprintf(stderr, "cleanup failed\n");
    });
    return std::string(tmpl);
  }();
  return dir;
}

std::string RecordName(uint64_t i) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "class%03llu/img_%08llu.jpg",
                static_cast<unsigned long long>(i % 100),
                static_cast<unsigned long long>(i));
  return buf;
}

// Writes (once per process) a pack of `count` records of `size` bytes each,
// in 100 classes, and returns its directory.
std::string SyntheticPack(uint64_t count, size_t size) {
  static std::mutex mu;
  static std::map<std::pair<uint64_t, size_t>, std::string> made;
  std::lock_guard<std::mutex> lock(mu);
  auto key = std::make_pair(count, size);
  auto it = made.find(key);
  if (it != made.end()) return it->second;
  const std::string dir = BenchDir() + "/pack-" + std::to_string(count) + "x" +
                          std::to_string(size);
  std::unique_ptr<PackWriter> w;
  Status s = PackWriter::Create(dir, {}, &w);
  std::string payload(size, '\0');
  std::mt19937_64 rng(count * 31 + size);
  for (char& c : payload) c = static_cast<char>(rng());
  // Records sorted by class, as ImageFolder orders them.
  for (uint32_t c = 0; s.ok() && c < 100; ++c)
    s = w->AddClass("class" + std::to_string(c));
  for (uint32_t c = 0; s.ok() && c < 100; ++c) {
    for (uint64_t i = c; s.ok() && i < count; i += 100) {
      payload[0] = static_cast<char>(i);
      s = w->Add(RecordName(i), c, payload);
    }
  }
  if (s.ok()) s = w->Finish();
  if (!s.ok()) {
    std::fprintf(stderr, "synthetic pack: %s\n", s.ToString().c_str());
    std::abort();
  }
  made[key] = dir;
  return dir;
}

std::vector<uint64_t> RandomOrder(uint64_t n, uint64_t seed) {
  std::vector<uint64_t> order(n);
  for (uint64_t i = 0; i < n; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937_64(seed));
  return order;
}

void BM_Open(benchmark::State& state) {
  const std::string dir =
      SyntheticPack(static_cast<uint64_t>(state.range(0)), 16);
  for (auto _ : state) {
    std::unique_ptr<Reader> r;
    Status s = Reader::Open(dir, {}, &r);
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    benchmark::DoNotOptimize(r.get());
  }
  state.counters["records"] = static_cast<double>(state.range(0));
}
BENCHMARK(BM_Open)->Arg(1000)->Arg(100000)->Arg(1000000)->Unit(
    benchmark::kMicrosecond);
// BM_Open/10000000 is registered by main() when UFSPACK_BENCH_10M=1.

// ~160-220 MiB per pack so the working set is well beyond CPU caches.
uint64_t CountFor(size_t size) { return (200ull << 20) / size; }

// The timed loop of the Read benchmarks: Reader::Read of `n` records of
// `size` bytes in a random order (per thread), into one reused buffer.
void TimeRandomReads(benchmark::State& state, const Reader& reader, uint64_t n,
                     size_t size) {
  const std::vector<uint64_t> order = RandomOrder(n, 7 + state.thread_index());
  std::string buf(size, '\0');
  size_t k = 0;
  for (auto _ : state) {
    size_t len;
    Status s = reader.Read(order[k], buf.data(), buf.size(), &len);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
    if (++k == order.size()) k = 0;
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(size));
}

// The reader named `key`, shared by a benchmark's threads and runs: made
// by `open` the first time any thread asks for it.  Null, with the
// benchmark skipped with the error, when `open` fails (asked again next
// time).
std::shared_ptr<Reader> SharedReader(
    benchmark::State& state, const std::string& key,
    const std::function<Status(std::unique_ptr<Reader>*)>& open) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<Reader>> readers;
  std::lock_guard<std::mutex> lock(mu);
  std::shared_ptr<Reader>& slot = readers[key];
  if (!slot) {
    std::unique_ptr<Reader> r;
    Status s = open(&r);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return nullptr;
    }
    slot = std::move(r);
  }
  return slot;
}

void ReadBench(benchmark::State& state, bool verify) {
  const size_t size = static_cast<size_t>(state.range(0));
  const uint64_t n = CountFor(size);
  const std::string key =
      "read-" + std::to_string(size) + (verify ? "-verify" : "-noverify");
  std::shared_ptr<Reader> reader =
      SharedReader(state, key, [&](std::unique_ptr<Reader>* r) {
        ReaderOptions o;
        o.verify_checksums = verify;
        return Reader::Open(SyntheticPack(n, size), o, r);
      });
  if (reader) TimeRandomReads(state, *reader, n, size);
}

void BM_Read(benchmark::State& state) { ReadBench(state, true); }

// Reader::Read served by the node-local cache (ufspack/cache.h): every
// record is in the cache before timing, so each read is a hit: one
// slot-word load, one preadv of the entry (header + bytes) from the
// cache's log and the checksum.  Compare with BM_Read (one pread of
// data.ufs and the checksum), both from the page cache.
//   BM_ReadCached            filled by `ufspack warmup` (Warmup(): runs of
//                            entries written with one pwritev each)
//   BM_ReadCachedByReads     filled by reading every record once (one
//                            pwritev per entry, as misses fill it); the
//                            page cache then holds the log in 4 KiB pages
//                            rather than large folios, and hits cost more
void ReadCachedBench(benchmark::State& state, bool warmup) {
  const size_t size = static_cast<size_t>(state.range(0));
  const uint64_t n = CountFor(size);
  const std::string dir = BenchDir() + "/cache-" + std::to_string(size) +
                          (warmup ? "-warmup" : "-reads");
  std::shared_ptr<Reader> reader =
      SharedReader(state, dir, [&](std::unique_ptr<Reader>* r) {
        CacheOptions co;
        co.dir = dir;
        co.limit = 4ull << 30;
        std::shared_ptr<Cache> cache;
        Status s = Cache::Open(co, &cache);
        ReaderOptions o;
        o.cache = cache;
        if (s.ok()) s = Reader::Open(SyntheticPack(n, size), o, r);
        std::string buf;
        if (warmup) {
          WarmupResult wr;
          if (s.ok()) s = Warmup(SyntheticPack(n, size), cache, {}, &wr);
        } else {
          for (uint64_t i = 0; s.ok() && i < n; ++i) s = (*r)->Read(i, &buf);
        }
        if (s.ok() && cache->Stats().back().entries != n) {
          s = Status::Aborted("cache not filled: " + dir);
        }
        return s;
      });
  if (reader) TimeRandomReads(state, *reader, n, size);
}
void BM_ReadNoVerify(benchmark::State& state) { ReadBench(state, false); }

void BM_ReadCached(benchmark::State& state) { ReadCachedBench(state, true); }
void BM_ReadCachedByReads(benchmark::State& state) {
  ReadCachedBench(state, false);
}

// A compressible payload of exactly `size` bytes: log-like text lines, the
// same template on every line with a few random words and numbers.
std::string TextPayload(size_t size, std::mt19937_64& rng) {
  static const char* const kWords[] = {
      "alpha",   "bravo", "charlie", "delta",  "echo",     "foxtrot",
      "golf",    "hotel", "india",   "juliet", "kilo",     "lima",
      "mike",    "nov",   "oscar",   "papa",   "quebec",   "romeo",
      "sierra",  "tango", "uniform", "victor", "whiskey",  "xray",
      "yankee",  "zulu",  "cat",     "dog",    "training", "sample",
      "shuffle", "epoch"};
  constexpr size_t kNumWords = sizeof(kWords) / sizeof(kWords[0]);
  std::string out;
  out.reserve(size + 256);
  char line[256];
  while (out.size() < size) {
    const uint64_t r = rng();
    int n = std::snprintf(
        line, sizeof(line),
        "2026-01-01T00:00:%02u.%03uZ INFO loader worker=%u batch=%u "
        "file=/data/train/%s/%s_%05u.jpg label=%s status=ok\n",
        static_cast<unsigned>(r % 60), static_cast<unsigned>((r >> 8) % 1000),
        static_cast<unsigned>((r >> 20) % 8),
        static_cast<unsigned>((r >> 24) % 4096), kWords[(r >> 36) % kNumWords],
        kWords[(r >> 41) % kNumWords],
        static_cast<unsigned>((r >> 46) % 100000),
        kWords[(r >> 58) % kNumWords]);
    out.append(line, static_cast<size_t>(n));
  }
  out.resize(size);
  return out;
}

struct ZstdPack {
  std::shared_ptr<Reader> reader;
  double ratio = 0;  // original bytes / stored bytes
};

// Writes (once per process) a compressed pack of `count` compressible
// records of `size` original bytes each, in 100 classes, and opens it.
Status CompressedPack(uint64_t count, size_t size, ZstdPack* out) {
  static std::mutex mu;
  static std::map<std::pair<uint64_t, size_t>, ZstdPack> made;
  std::lock_guard<std::mutex> lock(mu);
  auto key = std::make_pair(count, size);
  auto it = made.find(key);
  if (it != made.end()) {
    *out = it->second;
    return Status::OK();
  }
  const std::string dir = BenchDir() + "/zstd-" + std::to_string(count) + "x" +
                          std::to_string(size);
  PackWriterOptions wo;
  wo.compress = true;
  std::unique_ptr<PackWriter> w;
  Status s = PackWriter::Create(dir, wo, &w);
  std::mt19937_64 rng(count * 37 + size);
  for (uint32_t c = 0; s.ok() && c < 100; ++c)
    s = w->AddClass("class" + std::to_string(c));
  for (uint32_t c = 0; s.ok() && c < 100; ++c) {
    for (uint64_t i = c; s.ok() && i < count; i += 100)
      s = w->Add(RecordName(i), c, TextPayload(size, rng));
  }
  if (s.ok()) s = w->Finish();
  std::unique_ptr<Reader> r;
  if (s.ok()) s = Reader::Open(dir, {}, &r);
  uint64_t stored = 0, original = 0;
  for (uint64_t i = 0; s.ok() && i < count; ++i) {
    Record rec;
    s = r->GetRecord(i, &rec);
    if (s.ok() && rec.codec != Codec::kZstd)
      s = Status::InvalidArgument("record stored raw: not compressible");
    stored += rec.stored_length;
    original += rec.original_length;
  }
  if (!s.ok()) return s;
  ZstdPack p;
  p.reader = std::move(r);
  p.ratio = static_cast<double>(original) / static_cast<double>(stored);
  made[key] = p;
  *out = p;
  return Status::OK();
}

// Random Reader::Read of zstd records (checksum of the stored bytes, then
// decompression into the caller's buffer).  Same record count and original
// size as BM_Read; bytes/s counts original bytes.
void BM_ReadZstd(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  const uint64_t n = CountFor(size);
  ZstdPack pack;
  Status s = CompressedPack(n, size, &pack);
  if (!s.ok()) {
    state.SkipWithError(s.ToString().c_str());
    return;
  }
  const std::vector<uint64_t> order = RandomOrder(n, 7 + state.thread_index());
  std::string buf(size, '\0');
  size_t k = 0;
  for (auto _ : state) {
    size_t len;
    s = pack.reader->Read(order[k], buf.data(), buf.size(), &len);
    if (!s.ok() || len != size) {
      state.SkipWithError(s.ok() ? "wrong length" : s.ToString().c_str());
      break;
    }
    if (++k == order.size()) k = 0;
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(size));
  // The same for every thread: averaged, not summed.
  state.counters["ratio"] =
      benchmark::Counter(pack.ratio, benchmark::Counter::kAvgThreads);
}

void BM_RawPread(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  const uint64_t n = CountFor(size);
  const std::string dir = SyntheticPack(n, size);
  // The same offsets Reader::Read uses, taken from the index.
  std::vector<uint64_t> offsets(n);
  {
    std::unique_ptr<Reader> r;
    Status s = Reader::Open(dir, {}, &r);
    for (uint64_t i = 0; s.ok() && i < n; ++i) {
      Record rec;
      s = r->GetRecord(i, &rec);
      offsets[i] = rec.offset;
    }
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
  }
  int fd = ::open((dir + "/data.ufs").c_str(), O_RDONLY | O_CLOEXEC);
  const std::vector<uint64_t> order = RandomOrder(n, 7 + state.thread_index());
  std::string buf(size, '\0');
  size_t k = 0;
  for (auto _ : state) {
    ssize_t got =
        ::pread(fd, buf.data(), size, static_cast<off_t>(offsets[order[k]]));
    if (got != static_cast<ssize_t>(size)) {
      state.SkipWithError("short pread");
      break;
    }
    if (++k == order.size()) k = 0;
  }
  ::close(fd);
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(size));
}

#define READ_ARGS \
  Arg(20 << 10)->Arg(110 << 10)->Threads(1)->Threads(2)->UseRealTime()
BENCHMARK(BM_RawPread)->READ_ARGS;
BENCHMARK(BM_Read)->READ_ARGS;
BENCHMARK(BM_ReadCached)->READ_ARGS;
BENCHMARK(BM_ReadCachedByReads)->READ_ARGS;
BENCHMARK(BM_ReadZstd)->READ_ARGS;
BENCHMARK(BM_ReadNoVerify)->READ_ARGS;

void BM_Find(benchmark::State& state) {
  const uint64_t n = 1000000;
  std::unique_ptr<Reader> r;
  Status s = Reader::Open(SyntheticPack(n, 16), {}, &r);
  if (!s.ok()) {
    state.SkipWithError(s.ToString().c_str());
    return;
  }
  std::vector<std::string> names;
  for (uint64_t i : RandomOrder(n, 3)) {
    names.push_back(RecordName(i));
    if (names.size() == 100000) break;
  }
  size_t k = 0;
  for (auto _ : state) {
    uint64_t idx;
    s = r->Find(names[k], &idx);
    benchmark::DoNotOptimize(idx);
    if (++k == names.size()) k = 0;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Find);

// XXH3-64 of one record-sized buffer, the check Read() does per record.
void BM_Checksum(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  std::string buf(size, '\0');
  std::mt19937_64 rng(size);
  for (char& c : buf) c = static_cast<char>(rng());
  for (auto _ : state) {
    benchmark::DoNotOptimize(buf.data());
    uint64_t h = Checksum64(buf.data(), buf.size());
    benchmark::DoNotOptimize(h);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(size));
}
BENCHMARK(BM_Checksum)->Arg(20 << 10)->Arg(110 << 10);

// Benchmarks too costly for a default run, registered on request.
void RegisterOptionalBenchmarks() {
  const char* env = std::getenv("UFSPACK_BENCH_10M");
  if (env && std::strcmp(env, "1") == 0) {
    benchmark::RegisterBenchmark("BM_Open", BM_Open)
        ->Arg(10000000)
        ->Unit(benchmark::kMicrosecond);
  }
}

}  // namespace
}  // namespace ufspack

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  ufspack::RegisterOptionalBenchmarks();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
