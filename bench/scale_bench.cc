// Copyright 2026 The ufspack Authors.
//
// scale_bench: packs of generated records at any size, for docs/scale.md.
//
//   scale_bench build <out> --records N [--classes C] [--payload B]
//       PackWriter over N generated records (names cNNNNN/rNNNNNNNNNN.jpg in
//       C contiguous classes, B-byte payloads): build time, peak RSS, index
//       bytes per record.
//   scale_bench read <pack> [--ops M] [--threads T] [--batch B]
//       Open time (median of 101 opens), then M random GetRecord, Find and
//       Read calls on T threads, each timed after an untimed pass of the
//       same calls (page cache and mappings warm: "from page cache"), and
//       the process's anonymous memory after open and after the calls.
//       The batched GetRecords and FindMany take --batch B records per call
//       (default 256, a DataLoader batch), over the same indices.
//   scale_bench merge <dir> --parts P [--records R]
//       P separately built packs of R records each (flat), merged: the
//       merge's time (median of 3) and the merged pack's open time.
//
// Each prints one JSON object on stdout.  Exit status 0, 1 on an error
// (printed on stderr), 2 on a usage error.
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ufspack/builder.h"
#include "ufspack/merge.h"
#include "ufspack/reader.h"

namespace {

using Clock = std::chrono::steady_clock;
using ufspack::Status;

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

uint64_t PeakRssBytes() {
  struct rusage ru;
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<uint64_t>(ru.ru_maxrss) * 1024;
}

// Rss and anonymous memory (heap, stacks: what is this process's own, as
// opposed to the index pages it maps from the page cache), in bytes.
void Memory(uint64_t* rss, uint64_t* anon) {
  *rss = *anon = 0;
  std::ifstream in("/proc/self/smaps_rollup");
  std::string line;
  while (std::getline(in, line)) {
    unsigned long long kb = 0;
    if (std::sscanf(line.c_str(), "Rss: %llu kB", &kb) == 1) *rss = kb * 1024;
    if (std::sscanf(line.c_str(), "Anonymous: %llu kB", &kb) == 1) {
      *anon = kb * 1024;
    }
  }
}

std::string Name(uint64_t i, uint64_t n, uint64_t classes) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "c%05llu/r%010llu.jpg",
                static_cast<unsigned long long>(classes ? i * classes / n : 0),
                static_cast<unsigned long long>(i));
  return buf;
}

int Fail(const Status& s) {
  std::fprintf(stderr, "scale_bench: %s\n", s.ToString().c_str());
  return 1;
}

uint64_t Flag(int argc, char** argv, const char* name, uint64_t def) {
  for (int k = 0; k + 1 < argc; ++k) {
    if (std::strcmp(argv[k], name) == 0)
      return std::strtoull(argv[k + 1], nullptr, 10);
  }
  return def;
}

Status WritePack(const std::string& out, uint64_t n, uint64_t classes,
                 uint64_t payload, bool flat, uint64_t base) {
  std::unique_ptr<ufspack::PackWriter> w;
  ufspack::PackWriterOptions o;
  o.flat = flat;
  UFSPACK_RETURN_IF_ERROR(ufspack::PackWriter::Create(out, o, &w));
  if (!flat) {
    for (uint64_t c = 0; c < classes; ++c) {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "c%05llu",
                    static_cast<unsigned long long>(c));
      UFSPACK_RETURN_IF_ERROR(w->AddClass(buf));
    }
  }
  std::string bytes(payload, '\0');
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t g = base + i;
    for (size_t k = 0; k < bytes.size(); ++k) {
      bytes[k] = static_cast<char>((g >> (8 * (k % 8))) + k);
    }
    const uint32_t label =
        flat ? ufspack::kNoLabel : static_cast<uint32_t>(i * classes / n);
    UFSPACK_RETURN_IF_ERROR(
        w->Add(flat ? Name(g, 1, 0) : Name(i, n, classes), label, bytes));
  }
  return w->Finish();
}

int Build(const std::string& out, int argc, char** argv) {
  const uint64_t n = Flag(argc, argv, "--records", 1000000);
  const uint64_t classes = Flag(argc, argv, "--classes", 1000);
  const uint64_t payload = Flag(argc, argv, "--payload", 16);
  const auto t0 = Clock::now();
  Status s = WritePack(out, n, classes, payload, false, 0);
  if (!s.ok()) return Fail(s);
  const double seconds = Since(t0);
  std::unique_ptr<ufspack::Reader> r;
  s = ufspack::Reader::Open(out, {}, &r);
  if (!s.ok()) return Fail(s);
  std::printf(
      "{\"records\":%llu,\"classes\":%llu,\"payload\":%llu,\"seconds\":%.3f,"
      "\"records_per_s\":%.0f,\"peak_rss_bytes\":%llu,\"data_bytes\":%llu,"
      "\"index_bytes\":%llu,\"index_bytes_per_record\":%.2f}\n",
      static_cast<unsigned long long>(n),
      static_cast<unsigned long long>(classes),
      static_cast<unsigned long long>(payload), seconds, n / seconds,
      static_cast<unsigned long long>(PeakRssBytes()),
      static_cast<unsigned long long>(r->info().data_size),
      static_cast<unsigned long long>(r->info().index_size),
      static_cast<double>(r->info().index_size) / std::max<uint64_t>(1, n));
  return 0;
}

// Runs body(k) for k in [0, ops) on `threads` threads; returns ops/s.
template <typename F>
double Rate(uint64_t ops, int threads, const F& body) {
  std::atomic<bool> failed{false};
  const auto t0 = Clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (uint64_t k = t; k < ops; k += threads) {
        if (!body(k)) failed = true;
      }
    });
  }
  for (auto& th : pool) th.join();
  if (failed) return -1;
  return ops / Since(t0);
}

int Read(const std::string& pack, int argc, char** argv) {
  const uint64_t ops = Flag(argc, argv, "--ops", 1000000);
  const int threads = static_cast<int>(Flag(argc, argv, "--threads", 1));
  std::vector<double> opens;
  std::unique_ptr<ufspack::Reader> r;
  for (int k = 0; k < 101; ++k) {
    const auto t0 = Clock::now();
    Status s = ufspack::Reader::Open(pack, {}, &r);
    opens.push_back(Since(t0));
    if (!s.ok()) return Fail(s);
  }
  std::sort(opens.begin(), opens.end());
  uint64_t rss0, priv0;
  Memory(&rss0, &priv0);
  const uint64_t n = r->size();
  std::mt19937_64 rng(1);
  std::vector<uint64_t> idx(ops);
  for (auto& i : idx) i = rng() % n;
  std::vector<std::string> names(ops);
  for (uint64_t k = 0; k < ops; ++k) {
    ufspack::Record rec;
    if (!r->GetRecord(idx[k], &rec).ok())
      return Fail(Status::Corruption("record"));
    names[k] = std::string(rec.name);  // also the warm-up pass
  }
  auto get = [&](uint64_t k) {
    ufspack::Record rec;
    return r->GetRecord(idx[k], &rec).ok();
  };
  auto find = [&](uint64_t k) {
    uint64_t at;
    return r->Find(names[k], &at).ok() && at == idx[k];
  };
  // The batched calls, `batch` records per call (k is the batch number).
  const uint64_t batch =
      std::max<uint64_t>(1, Flag(argc, argv, "--batch", 256));
  const uint64_t batches = ops / batch;
  std::vector<std::string_view> name_views(names.begin(), names.end());
  auto get_many = [&](uint64_t k) {
    thread_local std::vector<ufspack::Record> recs;
    recs.resize(batch);
    return r->GetRecords(&idx[k * batch], batch, recs.data()).ok();
  };
  auto find_many = [&](uint64_t k) {
    thread_local std::vector<uint64_t> at;
    at.resize(batch);
    if (!r->FindMany(&name_views[k * batch], batch, at.data()).ok())
      return false;
    return std::equal(at.begin(), at.end(), idx.begin() + k * batch);
  };
  auto read = [&](uint64_t k) {
    thread_local std::string bytes;
    return r->Read(idx[k], &bytes).ok();
  };
  // Each kind of call once to warm up (it maps the pages it needs: record
  // entries, names, lookup slots, data), then timed.
  Rate(ops, threads, get);
  const double get_rate = Rate(ops, threads, get);
  Rate(ops, threads, find);
  const double find_rate = Rate(ops, threads, find);
  Rate(batches, threads, get_many);
  const double get_many_rate = Rate(batches, threads, get_many) * batch;
  Rate(batches, threads, find_many);
  const double find_many_rate = Rate(batches, threads, find_many) * batch;
  Rate(ops, threads, read);
  const double read_rate = Rate(ops, threads, read);
  uint64_t rss1, priv1;
  Memory(&rss1, &priv1);
  std::printf(
      "{\"records\":%llu,\"open_us_median\":%.1f,\"open_us_max\":%.1f,"
      "\"threads\":%d,\"ops\":%llu,\"getrecord_per_s\":%.0f,"
      "\"find_per_s\":%.0f,\"batch\":%llu,\"getrecords_per_s\":%.0f,"
      "\"findmany_per_s\":%.0f,\"read_per_s\":%.0f,\"anon_bytes_after_open\":"
      "%llu,\"anon_bytes_after_ops\":%llu,\"rss_after_ops\":%llu,"
      "\"index_bytes\":%llu}\n",
      static_cast<unsigned long long>(n), opens[opens.size() / 2] * 1e6,
      opens.back() * 1e6, threads, static_cast<unsigned long long>(ops),
      get_rate, find_rate, static_cast<unsigned long long>(batch),
      get_many_rate, find_many_rate, read_rate,
      static_cast<unsigned long long>(priv0),
      static_cast<unsigned long long>(priv1),
      static_cast<unsigned long long>(rss1),
      static_cast<unsigned long long>(r->info().index_size));
  return get_rate < 0 || find_rate < 0 || get_many_rate < 0 ||
                 find_many_rate < 0 || read_rate < 0
             ? 1
             : 0;
}

int Merge(const std::string& dir, int argc, char** argv) {
  const uint64_t parts = Flag(argc, argv, "--parts", 1000);
  const uint64_t per = Flag(argc, argv, "--records", 10);
  std::vector<std::string> paths;
  const auto b0 = Clock::now();
  for (uint64_t p = 0; p < parts; ++p) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "/parts/p%06llu",
                  static_cast<unsigned long long>(p));
    paths.push_back(dir + buf);
    Status s = WritePack(paths.back(), per, 0, 16, true, p * per);
    if (!s.ok()) return Fail(s);
  }
  const double build_seconds = Since(b0);
  std::vector<double> merges;
  ufspack::MergeSummary summary;
  for (int k = 0; k < 3; ++k) {
    const auto t0 = Clock::now();
    Status s = ufspack::MergePacks(paths, dir + "/merged", &summary);
    merges.push_back(Since(t0));
    if (!s.ok()) return Fail(s);
  }
  std::sort(merges.begin(), merges.end());
  std::unique_ptr<ufspack::Reader> r;
  std::vector<double> opens;
  for (int k = 0; k < 11; ++k) {
    const auto t0 = Clock::now();
    Status s = ufspack::Reader::Open(dir + "/merged", {}, &r);
    opens.push_back(Since(t0));
    if (!s.ok()) return Fail(s);
  }
  std::sort(opens.begin(), opens.end());
  std::printf(
      "{\"parts\":%llu,\"records\":%llu,\"parts_build_seconds\":%.3f,"
      "\"merge_seconds_median\":%.4f,\"manifest_bytes\":%llu,"
      "\"open_merged_ms_median\":%.3f}\n",
      static_cast<unsigned long long>(parts),
      static_cast<unsigned long long>(summary.records), build_seconds,
      merges[1], static_cast<unsigned long long>(summary.manifest_bytes),
      opens[opens.size() / 2] * 1e3);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(
        stderr,
        "usage: scale_bench build <out> --records N [--classes C] "
        "[--payload B]\n"
        "       scale_bench read <pack> [--ops M] [--threads T] [--batch B]\n"
        "       scale_bench merge <dir> --parts P [--records R]\n");
    return 2;
  }
  const std::string cmd = argv[1], path = argv[2];
  if (cmd == "build") return Build(path, argc, argv);
  if (cmd == "read") return Read(path, argc, argv);
  if (cmd == "merge") return Merge(path, argc, argv);
  std::fprintf(stderr, "scale_bench: unknown command '%s'\n", cmd.c_str());
  return 2;
}
