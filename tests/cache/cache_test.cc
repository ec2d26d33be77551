// Copyright 2026 The ufspack Authors.
//
// Tests for the node-local cache (ufspack/cache.h) and the Reader's use of
// it: exact bytes through the cache, many processes on one directory, the
// limit under concurrent writers, damaged and torn entries, kill -9 at
// random points, a pack rebuilt under the same path, an unreachable source,
// ENOSPC and EIO on the cache disk, a Docker-sized tmpfs RAM tier, warm-up
// and eviction of packs nobody uses.
#include "ufspack/cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fault_injection.h"
#include "testutil.h"
#include "ufspack/builder.h"
#include "ufspack/reader.h"

namespace ufspack {
namespace {

#if defined(__SANITIZE_THREAD__)
constexpr bool kThreadSanitizer = true;
#else
constexpr bool kThreadSanitizer = false;
#endif

struct Item {
  std::string name;
  std::string bytes;
};

// `n` records of up to `max_size` bytes, every third compressible (stored
// as zstd), in two classes.
std::vector<Item> MakeItems(int n, size_t max_size, uint64_t seed) {
  std::vector<Item> items;
  for (int i = 0; i < n; ++i) {
    const size_t size = static_cast<size_t>((i * 7919 + seed) % max_size);
    std::string bytes = (i % 3 == 0) ? test::CompressibleBytes(size, i + seed)
                                     : test::RandomBytes(size, i + seed);
    items.push_back({(i < n / 2 ? "a/" : "b/") + std::to_string(i) + ".bin",
                     std::move(bytes)});
  }
  return items;
}

void WritePack(const std::string& dir, const std::vector<Item>& items) {
  std::unique_ptr<PackWriter> w;
  PackWriterOptions o;
  o.compress = true;
  ASSERT_TRUE(PackWriter::Create(dir, o, &w).ok());
  ASSERT_TRUE(w->AddClass("a").ok());
  ASSERT_TRUE(w->AddClass("b").ok());
  for (const Item& it : items) {
    ASSERT_TRUE(w->Add(it.name, it.name[0] == 'a' ? 0 : 1, it.bytes).ok());
  }
  ASSERT_TRUE(w->Finish(nullptr).ok());
}

struct Warnings {
  std::shared_ptr<std::vector<std::string>> lines =
      std::make_shared<std::vector<std::string>>();
  std::shared_ptr<std::mutex> mu = std::make_shared<std::mutex>();
  std::function<void(const std::string&)> fn() {
    auto l = lines;
    auto m = mu;
    return [l, m](const std::string& s) {
      std::lock_guard<std::mutex> lock(*m);
      l->push_back(s);
    };
  }
  std::string all() {
    std::lock_guard<std::mutex> lock(*mu);
    std::string out;
    for (auto& s : *lines) out += s + "\n";
    return out;
  }
  size_t count() {
    std::lock_guard<std::mutex> lock(*mu);
    return lines->size();
  }
};

std::shared_ptr<Cache> OpenCache(
    const std::string& dir, uint64_t limit = 0,
    std::function<void(const std::string&)> warn = nullptr) {
  CacheOptions o;
  o.dir = dir;
  o.limit = limit;
  o.warn = warn ? warn : [](const std::string&) {};
  std::shared_ptr<Cache> c;
  Status s = Cache::Open(o, &c);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return c;
}

std::unique_ptr<Reader> OpenCached(const std::string& pack,
                                   const std::shared_ptr<Cache>& cache) {
  ReaderOptions ro;
  ro.cache = cache;
  std::unique_ptr<Reader> r;
  Status s = Reader::Open(pack, ro, &r);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return r;
}

// Reads every record (in a shuffled order) and compares with `items`;
// returns the number of mismatches or errors.
int ReadAllAndCompare(Reader* r, const std::vector<Item>& items,
                      uint64_t seed) {
  std::vector<uint64_t> order(items.size());
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  int bad = 0;
  std::string out;
  for (uint64_t i : order) {
    Status s = r->Read(i, &out);
    if (!s.ok() || out != items[i].bytes) ++bad;
  }
  return bad;
}

CacheTierStats Disk(const std::shared_ptr<Cache>& c) {
  return c->Stats().back();
}

uint64_t TotalStored(const std::string& pack) {
  std::unique_ptr<Reader> r;
  EXPECT_TRUE(Reader::Open(pack, {}, &r).ok());
  uint64_t total = 0;
  for (uint64_t i = 0; i < r->size(); ++i) {
    Record rec;
    EXPECT_TRUE(r->GetRecord(i, &rec).ok());
    total += rec.stored_length;
  }
  return total;
}

// The single table directory of the cache (ns/<hex>), for tests that
// damage entries.
std::vector<std::string> Tables(const std::string& cache_dir) {
  std::vector<std::string> out;
  DIR* d = opendir((cache_dir + "/ns").c_str());
  if (d == nullptr) return out;
  while (struct dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(cache_dir + "/ns/" + n);
  }
  closedir(d);
  return out;
}

TEST(CacheTest, FirstReadFillsSecondHitsExactBytes) {
  test::TempDir tmp;
  auto items = MakeItems(200, 20000, 1);
  WritePack(tmp / "pack", items);
  auto cache = OpenCache(tmp / "cache");
  {
    auto r = OpenCached(tmp / "pack", cache);
    EXPECT_EQ(ReadAllAndCompare(r.get(), items, 1), 0);
  }
  CacheTierStats st = Disk(cache);
  EXPECT_EQ(st.inserts, 200u);
  EXPECT_EQ(st.entries, 200u);
  EXPECT_EQ(st.hits, 0u);
  EXPECT_LE(st.disk_bytes, st.charged_bytes);
  // A second reader (and a second Cache object, as another process would
  // have) is served from the cache: the source could not even be read.
  auto cache2 = OpenCache(tmp / "cache");
  auto r2 = OpenCached(tmp / "pack", cache2);
  {
    fault::ScopedFaults faults;
    fault::Inject(fault::Fail(fault::Call::kPread, "pack/data.ufs", EIO));
    EXPECT_EQ(ReadAllAndCompare(r2.get(), items, 2), 0);
  }
  st = Disk(cache2);
  EXPECT_EQ(st.hits, 200u);
  EXPECT_EQ(st.inserts, 200u);
  // The batch path goes through the cache as well.
  std::vector<uint64_t> idx = {5, 0, 199, 5};
  Batch b;
  ASSERT_TRUE(r2->ReadBatch(idx.data(), idx.size(), &b, 2).ok());
  for (size_t k = 0; k < idx.size(); ++k) {
    EXPECT_EQ(b.get(k), items[idx[k]].bytes);
  }
}

TEST(CacheTest, IndexCopyIsTheSourceIndex) {
  test::TempDir tmp;
  auto items = MakeItems(50, 5000, 2);
  WritePack(tmp / "pack", items);
  auto cache = OpenCache(tmp / "cache");
  auto r = OpenCached(tmp / "pack", cache);
  auto tables = Tables(tmp / "cache");
  ASSERT_EQ(tables.size(), 1u);
  EXPECT_EQ(test::ReadFile(tables[0] + "/index.ufs"),
            test::ReadFile(tmp / "pack/index.ufs"));
  // info() names the source, not the copy.
  EXPECT_EQ(r->info().index_path, tmp / "pack/index.ufs");
}

TEST(CacheTest, RebuiltPackUnderSamePathNeverServesOldBytes) {
  test::TempDir tmp;
  auto old_items = MakeItems(60, 5000, 3);
  WritePack(tmp / "pack", old_items);
  auto cache = OpenCache(tmp / "cache");
  {
    auto r = OpenCached(tmp / "pack", cache);
    EXPECT_EQ(ReadAllAndCompare(r.get(), old_items, 3), 0);
  }
  test::RemoveAll(tmp / "pack");
  auto new_items = MakeItems(60, 5000, 4);  // same names, other bytes
  WritePack(tmp / "pack", new_items);
  auto r = OpenCached(tmp / "pack", cache);
  EXPECT_EQ(ReadAllAndCompare(r.get(), new_items, 5), 0);
  EXPECT_EQ(Tables(tmp / "cache").size(), 2u);
}

TEST(CacheTest, DamagedEntriesAreDroppedAndReadFromTheSource) {
  test::TempDir tmp;
  auto items = MakeItems(40, 8000, 5);
  WritePack(tmp / "pack", items);
  auto cache = OpenCache(tmp / "cache");
  {
    auto r = OpenCached(tmp / "pack", cache);
    EXPECT_EQ(ReadAllAndCompare(r.get(), items, 6), 0);
  }
  auto tables = Tables(tmp / "cache");
  ASSERT_EQ(tables.size(), 1u);
  const std::string log = tables[0] + "/log";
  const uint64_t size = test::FileSize(log);
  // Flip a byte every 997 bytes: payloads and entry headers alike.
  int flipped = 0;
  for (uint64_t off = 3; off < size; off += 997, ++flipped) {
    test::FlipByte(log, off, 0x10);
  }
  auto r = OpenCached(tmp / "pack", cache);
  EXPECT_EQ(ReadAllAndCompare(r.get(), items, 7), 0);
  CacheTierStats st = Disk(cache);
  EXPECT_GT(st.dropped, 0u);
  // Damaged entries were dropped and filled again from the source.
  auto r2 = OpenCached(tmp / "pack", cache);
  EXPECT_EQ(ReadAllAndCompare(r2.get(), items, 8), 0);
  EXPECT_EQ(Disk(cache).dropped, st.dropped);
}

TEST(CacheTest, DamagedTablesAndIndexCopiesAreNeverTrusted) {
  test::TempDir tmp;
  auto items = MakeItems(30, 8000, 20);
  WritePack(tmp / "pack", items);
  Warnings warnings;
  auto cache = OpenCache(tmp / "cache", 0, warnings.fn());
  {
    auto r = OpenCached(tmp / "pack", cache);
    EXPECT_EQ(ReadAllAndCompare(r.get(), items, 30), 0);
  }
  auto tables = Tables(tmp / "cache");
  ASSERT_EQ(tables.size(), 1u);
  // A flipped byte in a record entry of the index copy: the copy is not
  // used (its body no longer hashes to the pack id), the source's is.
  test::FlipByte(tables[0] + "/index.ufs", 200);
  {
    auto r = OpenCached(tmp / "pack", cache);
    EXPECT_EQ(r->info().index_path, tmp / "pack/index.ufs");
    EXPECT_EQ(ReadAllAndCompare(r.get(), items, 31), 0);
  }
  EXPECT_TRUE(test::Contains(warnings.all(), "does not match pack id"))
      << warnings.all();
  // Offline, a bad copy is no copy: the source's error.
  ASSERT_EQ(rename((tmp / "pack").c_str(), (tmp / "gone").c_str()), 0);
  {
    ReaderOptions ro;
    ro.cache = cache;
    std::unique_ptr<Reader> r;
    EXPECT_TRUE(Reader::Open(tmp / "pack", ro, &r).IsNotFound());
  }
  ASSERT_EQ(rename((tmp / "gone").c_str(), (tmp / "pack").c_str()), 0);
  // A damaged slots header: the table is discarded and made anew.
  test::FlipByte(tables[0] + "/slots", 2);
  {
    auto r = OpenCached(tmp / "pack", cache);
    EXPECT_EQ(ReadAllAndCompare(r.get(), items, 32), 0);
  }
  EXPECT_TRUE(test::Contains(warnings.all(), "discarded a damaged table"))
      << warnings.all();
  auto r = OpenCached(tmp / "pack", cache);
  const uint64_t hits = Disk(cache).hits;
  EXPECT_EQ(ReadAllAndCompare(r.get(), items, 33), 0);
  EXPECT_EQ(Disk(cache).hits - hits, 30u);
}

TEST(CacheTest, TruncatedLogIsDetected) {
  test::TempDir tmp;
  auto items = MakeItems(30, 8000, 6);
  WritePack(tmp / "pack", items);
  auto cache = OpenCache(tmp / "cache");
  {
    auto r = OpenCached(tmp / "pack", cache);
    EXPECT_EQ(ReadAllAndCompare(r.get(), items, 9), 0);
  }
  auto tables = Tables(tmp / "cache");
  ASSERT_EQ(tables.size(), 1u);
  test::Truncate(tables[0] + "/log", test::FileSize(tables[0] + "/log") / 2);
  auto r = OpenCached(tmp / "pack", cache);
  EXPECT_EQ(ReadAllAndCompare(r.get(), items, 10), 0);
  EXPECT_GT(Disk(cache).dropped, 0u);
}

// Runs `fn` in `n` forked children; returns how many exited non-zero.
int InChildren(int n, const std::function<int(int)>& fn) {
  std::vector<pid_t> pids;
  for (int k = 0; k < n; ++k) {
    pid_t pid = fork();
    if (pid == 0) _exit(fn(k));
    pids.push_back(pid);
  }
  int failed = 0;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  return failed;
}

TEST(CacheTest, ManyProcessesFillOneDirectoryExactBytes) {
  test::TempDir tmp;
  auto items = MakeItems(300, 20000, 7);
  WritePack(tmp / "pack", items);
  const std::string dir = tmp / "cache";
  OpenCache(dir);  // created once; the children attach
  EXPECT_EQ(InChildren(4,
                       [&](int k) {
                         auto cache = OpenCache(dir);
                         auto r = OpenCached(tmp / "pack", cache);
                         // Two threads per process on the same records
                         // (one under TSan, which cannot start threads
                         // after forking a process that has some: the
                         // thread pool of an earlier test).
                         std::atomic<int> bad{0};
                         if (!kThreadSanitizer) {
                           std::thread t([&] {
                             bad += ReadAllAndCompare(r.get(), items, 100 + k);
                           });
                           bad += ReadAllAndCompare(r.get(), items, 200 + k);
                           t.join();
                         } else {
                           bad += ReadAllAndCompare(r.get(), items, 200 + k);
                         }
                         return bad.load() == 0 ? 0 : 1;
                       }),
            0);
  auto cache = OpenCache(dir);
  CacheTierStats st = Disk(cache);
  EXPECT_EQ(st.entries, 300u);  // each record published once
  EXPECT_EQ(st.dropped, 0u);
  EXPECT_LE(st.charged_bytes, st.limit);
  EXPECT_LE(test::DiskUsage(dir), st.charged_bytes);
  auto r = OpenCached(tmp / "pack", cache);
  const uint64_t hits = st.hits;
  EXPECT_EQ(ReadAllAndCompare(r.get(), items, 11), 0);
  EXPECT_EQ(Disk(cache).hits - hits, 300u);
}

TEST(CacheTest, LimitHoldsUnderConcurrentWriters) {
  test::TempDir tmp;
  auto items = MakeItems(400, 30000, 8);
  WritePack(tmp / "pack", items);
  const uint64_t stored = TotalStored(tmp / "pack");
  const uint64_t limit = stored / 3;
  const std::string dir = tmp / "cache";
  OpenCache(dir, limit);
  EXPECT_EQ(InChildren(4,
                       [&](int k) {
                         auto cache = OpenCache(dir);  // keeps the limit
                         auto r = OpenCached(tmp / "pack", cache);
                         int bad = ReadAllAndCompare(r.get(), items, 300 + k);
                         if (test::DiskUsage(dir) > limit) ++bad;
                         return bad == 0 ? 0 : 1;
                       }),
            0);
  auto cache = OpenCache(dir);
  CacheTierStats st = Disk(cache);
  EXPECT_EQ(st.limit, limit);
  EXPECT_LE(st.charged_bytes, limit);
  EXPECT_LE(test::DiskUsage(dir), limit);
  EXPECT_GT(st.refused, 0u);
  EXPECT_GT(st.entries, 0u);
  // Admission is "keep what is in": a second shuffled epoch hits about
  // cache size / data size of its reads, not a thrashed fraction of it.
  const uint64_t hits = st.hits;
  auto r = OpenCached(tmp / "pack", cache);
  EXPECT_EQ(ReadAllAndCompare(r.get(), items, 12), 0);
  const double hit_rate = static_cast<double>(Disk(cache).hits - hits) / 400;
  const double cached_fraction = static_cast<double>(st.entries) / 400;
  EXPECT_GE(hit_rate, 0.99 * cached_fraction);
}

// `rounds` times: a child runs `child` (which never returns) and is killed
// with SIGKILL after a random 0-40 ms; then `check(round)` runs here.
void KillAtRandomPoints(int rounds, uint64_t seed,
                        const std::function<void()>& child,
                        const std::function<void(int)>& check) {
  std::mt19937_64 rng(seed);
  for (int round = 0; round < rounds; ++round) {
    pid_t pid = fork();
    if (pid == 0) {
      child();
      _exit(1);  // not reached: child() loops until killed
    }
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 40000));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status));
    check(round);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(CacheTest, KillNineAtRandomPointsNeverServesWrongBytes) {
  test::TempDir tmp;
  auto items = MakeItems(300, 40000, 9);
  WritePack(tmp / "pack", items);
  const std::string dir = tmp / "cache";
  // Early rounds die while creating the table (the index copy), later
  // ones in the middle of writing entries.
  KillAtRandomPoints(
      12, 42,
      [&] {
        auto cache = OpenCache(dir);
        auto r = OpenCached(tmp / "pack", cache);
        for (uint64_t seed = 0;; ++seed) {
          ReadAllAndCompare(r.get(), items, seed);
        }
      },
      [&](int round) {
        auto cache = OpenCache(dir);
        auto r = OpenCached(tmp / "pack", cache);
        ASSERT_EQ(ReadAllAndCompare(r.get(), items, 1000 + round), 0)
            << "round " << round;
        CacheTierStats st = Disk(cache);
        EXPECT_LE(st.charged_bytes, st.limit);
      });
  // Alone now: whatever the killed processes left in tmp/ is gone.
  auto cache = OpenCache(dir);
  EXPECT_EQ(test::ReadTree(dir + "/tmp").size(), 0u);
}

// Block reads (ReaderOptions::block_bytes) through the cache: processes
// killed while fetching and serving blocks leave nothing partial behind.
// Blocks live in a process's memory only; the cache receives whole,
// checksummed records.
TEST(CacheTest, KillNineDuringBlockReadsNeverServesWrongBytes) {
  test::TempDir tmp;
  auto items = MakeItems(300, 40000, 19);
  WritePack(tmp / "pack", items);
  const std::string dir = tmp / "cache";
  auto open_blocks = [&](const std::shared_ptr<Cache>& cache) {
    ReaderOptions ro;
    ro.cache = cache;
    ro.block_bytes = 256 << 10;
    std::unique_ptr<Reader> r;
    Status s = Reader::Open(tmp / "pack", ro, &r);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return r;
  };
  KillAtRandomPoints(
      6, 43,
      [&] {
        auto cache = OpenCache(dir);
        auto r = open_blocks(cache);
        std::vector<uint64_t> all(items.size());
        std::iota(all.begin(), all.end(), 0);
        for (uint64_t seed = 0;; ++seed) {
          (void)r->PrefetchBlocks(all.data(), all.size());  // a hint
          ReadAllAndCompare(r.get(), items, seed);
        }
      },
      [&](int round) {
        auto cache = OpenCache(dir);
        auto r = open_blocks(cache);
        ASSERT_EQ(ReadAllAndCompare(r.get(), items, 2000 + round), 0)
            << "round " << round;
      });
}

TEST(CacheTest, ADeadProcessesLocksNeverBlockOthers) {
  test::TempDir tmp;
  auto items = MakeItems(20, 5000, 10);
  WritePack(tmp / "pack", items);
  const std::string dir = tmp / "cache";
  // A child attaches (shared lock on the header and the table) and stops;
  // another process can still attach, fill and read.
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t pid = fork();
  if (pid == 0) {
    auto cache = OpenCache(dir);
    auto r = OpenCached(tmp / "pack", cache);
    char c = 1;
    if (write(ready[1], &c, 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  auto cache = OpenCache(dir);
  {
    auto r = OpenCached(tmp / "pack", cache);
    EXPECT_EQ(ReadAllAndCompare(r.get(), items, 13), 0);
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  close(ready[0]);
  close(ready[1]);
  // Its locks died with it: the table can be cleared now.
  cache.reset();
  uint64_t kept = 99;
  ASSERT_TRUE(Cache::Clear(dir, &kept).ok());
  EXPECT_EQ(kept, 0u);
  EXPECT_EQ(Tables(dir).size(), 0u);
}

TEST(CacheTest, SourceUnreachableServesCachedRecordsOnly) {
  test::TempDir tmp;
  auto items = MakeItems(50, 5000, 11);
  WritePack(tmp / "pack", items);
  Warnings warnings;
  auto cache = OpenCache(tmp / "cache", 0, warnings.fn());
  {
    auto r = OpenCached(tmp / "pack", cache);
    std::string out;
    for (uint64_t i = 0; i < 25; ++i) ASSERT_TRUE(r->Read(i, &out).ok());
  }
  ASSERT_EQ(rename((tmp / "pack").c_str(), (tmp / "gone").c_str()), 0);
  EXPECT_EQ(warnings.count(), 0u);
  auto r = OpenCached(tmp / "pack", cache);
  ASSERT_NE(r, nullptr);
  EXPECT_TRUE(r->offline());
  EXPECT_EQ(r->size(), 50u);
  std::string out;
  for (uint64_t i = 0; i < 25; ++i) {
    ASSERT_TRUE(r->Read(i, &out).ok()) << i;
    EXPECT_EQ(out, items[i].bytes);
  }
  Status s = r->Read(30, &out);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_TRUE(test::Contains(s, tmp / "pack/data.ufs")) << s.ToString();
  EXPECT_TRUE(test::Contains(s, "not in the cache")) << s.ToString();
  // Names and lookups work from the index copy.
  uint64_t idx = 0;
  ASSERT_TRUE(r->Find(items[7].name, &idx).ok());
  EXPECT_EQ(idx, 7u);
  // One warning naming the source, however many opens.
  auto r2 = OpenCached(tmp / "pack", cache);
  EXPECT_EQ(warnings.count(), 1u);
  EXPECT_TRUE(test::Contains(warnings.all(), tmp / "pack/index.ufs"))
      << warnings.all();
  // A path never opened through the cache: the source's own error.
  ReaderOptions ro;
  ro.cache = cache;
  std::unique_ptr<Reader> none;
  s = Reader::Open(tmp / "never", ro, &none);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
}

TEST(CacheTest, EnospcAndEioOnTheCacheDiskFallBackToTheSource) {
  test::TempDir tmp;
  auto items = MakeItems(40, 8000, 12);
  WritePack(tmp / "pack", items);
  Warnings warnings;
  auto cache = OpenCache(tmp / "cache", 0, warnings.fn());
  uint64_t charged_before = 0;
  {
    fault::ScopedFaults faults;
    int id = fault::Inject(fault::Fail(fault::Call::kPwrite, "/log", ENOSPC));
    auto r = OpenCached(tmp / "pack", cache);
    charged_before = Disk(cache).charged_bytes;  // the table, no entries
    EXPECT_EQ(ReadAllAndCompare(r.get(), items, 14), 0);
    // The first failure turns caching off for this process: one attempt.
    EXPECT_EQ(fault::Fired(id), 1);
  }
  EXPECT_EQ(warnings.count(), 1u);
  EXPECT_TRUE(test::Contains(warnings.all(), "No space left"))
      << warnings.all();
  EXPECT_EQ(Disk(cache).errors, 1u);
  EXPECT_EQ(Disk(cache).entries, 0u);
  // The failed entry's charge was given back (its range deallocated).
  EXPECT_EQ(Disk(cache).charged_bytes, charged_before);

  // EIO reading entries: every read still returns the right bytes.
  auto cache2 = OpenCache(tmp / "cache2", 0, warnings.fn());
  {
    auto r = OpenCached(tmp / "pack", cache2);
    EXPECT_EQ(ReadAllAndCompare(r.get(), items, 15), 0);
  }
  {
    fault::ScopedFaults faults;
    fault::Inject(fault::Fail(fault::Call::kPread, "/log", EIO));
    auto r = OpenCached(tmp / "pack", cache2);
    EXPECT_EQ(ReadAllAndCompare(r.get(), items, 16), 0);
  }
  EXPECT_EQ(Disk(cache2).errors, 40u);
  EXPECT_TRUE(test::Contains(warnings.all(), "Input/output error"))
      << warnings.all();
  EXPECT_EQ(warnings.count(), 2u);
}

TEST(CacheTest, ConcurrentFillsOfOneEntryAreHarmless) {
  test::TempDir tmp;
  auto items = MakeItems(4, 50000, 13);
  WritePack(tmp / "pack", items);
  auto cache = OpenCache(tmp / "cache");
  auto r = OpenCached(tmp / "pack", cache);
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      std::string out;
      for (int k = 0; k < 50; ++k) {
        if (!r->Read(1, &out).ok() || out != items[1].bytes) ++bad;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(Disk(cache).entries, 1u);
}

TEST(CacheTest, FullCacheEvictsPacksNobodyUses) {
  test::TempDir tmp;
  auto a = MakeItems(100, 20000, 14);
  auto b = MakeItems(100, 20000, 15);
  WritePack(tmp / "a", a);
  WritePack(tmp / "b", b);
  const uint64_t limit = TotalStored(tmp / "a") * 6 / 5;
  auto cache = OpenCache(tmp / "cache", limit);
  {
    auto r = OpenCached(tmp / "a", cache);
    EXPECT_EQ(ReadAllAndCompare(r.get(), a, 17), 0);
  }
  // Pack a is closed: reading b evicts it (after the one-second pause
  // between eviction scans).
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  auto r = OpenCached(tmp / "b", cache);
  EXPECT_EQ(ReadAllAndCompare(r.get(), b, 18), 0);
  CacheTierStats st = Disk(cache);
  EXPECT_EQ(st.evicted_tables, 1u);
  EXPECT_LE(st.charged_bytes, limit);
  EXPECT_LE(test::DiskUsage(tmp / "cache"), limit);
  EXPECT_EQ(Tables(tmp / "cache").size(), 1u);
  // A pack in use is never evicted: with b open, a is refused instead.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  auto ra = OpenCached(tmp / "a", cache);
  EXPECT_EQ(ReadAllAndCompare(ra.get(), a, 19), 0);
  EXPECT_EQ(Disk(cache).evicted_tables, 1u);
}

TEST(CacheTest, NonEmptyDirectoryThatIsNotACacheIsRefused) {
  test::TempDir tmp;
  test::WriteFile(tmp / "home/notes.txt", "precious");
  CacheOptions o;
  o.dir = tmp / "home";
  std::shared_ptr<Cache> c;
  Status s = Cache::Open(o, &c);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_TRUE(test::Contains(s, "not a ufspack cache directory"));
  EXPECT_EQ(test::ReadFile(tmp / "home/notes.txt"), "precious");
  CacheTierStats st;
  EXPECT_TRUE(Cache::Stat(tmp / "home", &st).IsNotFound());
  uint64_t kept = 0;
  EXPECT_FALSE(Cache::Clear(tmp / "home", &kept).ok());
  EXPECT_EQ(test::ReadFile(tmp / "home/notes.txt"), "precious");
}

// docs/cli.md: the directory is created if missing, also as a relative
// path of one component (its free space is that of the working directory).
TEST(CacheTest, ARelativeNewDirectoryIsCreated) {
  test::TempDir tmp;
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof(cwd)), nullptr);
  ASSERT_EQ(::chdir(tmp.path().c_str()), 0);
  Status s;
  for (const char* dir : {"newcache", "new/nested/cache"}) {
    CacheOptions o;
    o.dir = dir;
    std::shared_ptr<Cache> c;
    s = Cache::Open(o, &c);
    if (!s.ok()) break;
  }
  ASSERT_EQ(::chdir(cwd), 0);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(test::Exists(tmp / "newcache/ufspack-cache"));
  EXPECT_TRUE(test::Exists(tmp / "new/nested/cache/ufspack-cache"));
}

// Anyone who can open a cache file can flock it.  A lock held for long
// (here: the header's, exclusively, as a stuck or hostile process would)
// makes the cache unusable for a while, never hangs the opener.
TEST(CacheTest, ALockHeldForeverDoesNotHangTheOpener) {
  test::TempDir tmp;
  CacheOptions o;
  o.dir = tmp / "cache";
  {
    std::shared_ptr<Cache> c;
    ASSERT_TRUE(Cache::Open(o, &c).ok());
  }
  const int fd = ::open((tmp / "cache/ufspack-cache").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  const auto t0 = std::chrono::steady_clock::now();
  std::shared_ptr<Cache> c;
  Status s = Cache::Open(o, &c);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  ::close(fd);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_TRUE(test::Contains(s, "ufspack-cache: locked by another process"))
      << s.ToString();
  EXPECT_LT(waited, 60.0);  // bounded (10 s), not a speed assertion
  ASSERT_TRUE(Cache::Open(o, &c).ok());
}

TEST(CacheTest, SampleTablesAreKeyedByName) {
  test::TempDir tmp;
  auto cache = OpenCache(tmp / "cache");
  std::unique_ptr<SampleTable> t1, t2, t1_again;
  ASSERT_TRUE(cache->OpenSampleTable("decoded/x/plan-1", 10, &t1).ok());
  ASSERT_TRUE(cache->OpenSampleTable("decoded/x/plan-2", 10, &t2).ok());
  EXPECT_TRUE(t1->Put(3, "pixels-1", 8));
  std::string out;
  EXPECT_FALSE(t2->Get(3, &out));
  EXPECT_FALSE(t1->Get(4, &out));
  EXPECT_FALSE(t1->Get(10, &out));  // out of range: a miss
  EXPECT_FALSE(t1->Put(10, "x", 1));
  ASSERT_TRUE(cache->OpenSampleTable("decoded/x/plan-1", 10, &t1_again).ok());
  ASSERT_TRUE(t1_again->Get(3, &out));
  EXPECT_EQ(out, "pixels-1");
  // The same name with another slot count is a damaged table, not a
  // different one.
  std::unique_ptr<SampleTable> wrong;
  EXPECT_FALSE(cache->OpenSampleTable("decoded/x/plan-1", 11, &wrong).ok());
}

TEST(CacheTest, WarmupFillsResumesAndStops) {
  test::TempDir tmp;
  auto items = MakeItems(500, 30000, 16);
  WritePack(tmp / "pack", items);
  auto cache = OpenCache(tmp / "cache");
  WarmupOptions o;
  o.threads = 2;
  o.block_bytes = 256 << 10;
  int calls = 0;
  o.progress = [&](uint64_t done, uint64_t total) {
    ++calls;
    return calls < 2 ? true : false;  // stop at the second report
  };
  WarmupResult res;
  ASSERT_TRUE(Warmup(tmp / "pack", cache, o, &res).ok());
  EXPECT_EQ(res.records, 500u);
  EXPECT_EQ(res.already_cached, 0u);
  // (It may have finished before being told to stop: a small pack.)
  const uint64_t first = res.added;
  o.progress = nullptr;
  ASSERT_TRUE(Warmup(tmp / "pack", cache, o, &res).ok());
  EXPECT_EQ(res.already_cached, first);
  EXPECT_EQ(res.added, 500 - first);
  EXPECT_FALSE(res.stopped);
  EXPECT_EQ(Disk(cache).entries, 500u);
  ASSERT_TRUE(Warmup(tmp / "pack", cache, o, &res).ok());
  EXPECT_EQ(res.already_cached, 500u);
  EXPECT_EQ(res.bytes_read, 0u);
  // Everything is served from the cache now.
  auto r = OpenCached(tmp / "pack", cache);
  fault::ScopedFaults faults;
  fault::Inject(fault::Fail(fault::Call::kPread, "pack/data.ufs", EIO));
  EXPECT_EQ(ReadAllAndCompare(r.get(), items, 20), 0);
}

TEST(CacheTest, WarmupStopsWhenTheCacheIsFull) {
  test::TempDir tmp;
  auto items = MakeItems(300, 30000, 17);
  WritePack(tmp / "pack", items);
  const uint64_t limit = TotalStored(tmp / "pack") / 2;
  auto cache = OpenCache(tmp / "cache", limit);
  WarmupOptions o;
  o.threads = 2;
  o.block_bytes = 128 << 10;
  WarmupResult res;
  ASSERT_TRUE(Warmup(tmp / "pack", cache, o, &res).ok());
  EXPECT_GT(res.added, 0u);
  EXPECT_GT(res.refused, 0u);
  EXPECT_LT(res.added, 300u);
  EXPECT_LE(test::DiskUsage(tmp / "cache"), limit);
}

TEST(CacheTest, DockerSizedRamTierIsReportedOnceAndSkipped) {
  test::TempDir tmp;
  auto items = MakeItems(50, 8000, 18);
  WritePack(tmp / "pack", items);
  std::string result =
      test::WithTmpfs(tmp / "shm", "64m", [&]() -> std::string {
        Warnings warnings;
        CacheOptions o;
        o.dir = tmp / "cache";
        o.ram_dir = tmp / "shm/ufspack";
        o.warn = warnings.fn();
        std::shared_ptr<Cache> c;
        Status s = Cache::Open(o, &c);
        if (!s.ok()) return "open: " + s.ToString();
        if (c->Stats().size() != 1) return "the RAM tier was used";
        if (test::Exists(tmp / "shm/ufspack"))
          return "files left in the RAM tier";
        if (warnings.count() != 1) return "warnings: " + warnings.all();
        if (!test::Contains(warnings.all(), "RAM tier") ||
            !test::Contains(warnings.all(), "64.0 MiB")) {
          return "unclear warning: " + warnings.all();
        }
        auto r = OpenCached(tmp / "pack", c);
        if (ReadAllAndCompare(r.get(), items, 21) != 0) return "wrong bytes";
        if (c->Stats()[0].entries != 50) return "disk tier not filled";
        return "OK";
      });
  if (result.rfind("SKIP", 0) == 0) GTEST_SKIP() << result;
  EXPECT_EQ(result, "OK");
}

TEST(CacheTest, SmallTmpfsTierFillsToItsSizeNeverSigbus) {
  test::TempDir tmp;
  auto items = MakeItems(400, 40000, 19);
  WritePack(tmp / "pack", items);
  std::string result = test::WithTmpfs(tmp / "ram", "2m", [&]() -> std::string {
    Warnings warnings;
    CacheOptions o;
    o.dir = tmp / "ram/cache";  // a tiny disk tier: the limit is clamped
    o.limit = 1ull << 30;
    o.warn = warnings.fn();
    std::shared_ptr<Cache> c;
    Status s = Cache::Open(o, &c);
    if (!s.ok()) return "open: " + s.ToString();
    if (!test::Contains(warnings.all(), "more than its file system can hold")) {
      return "no clamp warning: " + warnings.all();
    }
    auto r = OpenCached(tmp / "pack", c);
    for (int epoch = 0; epoch < 2; ++epoch) {
      if (ReadAllAndCompare(r.get(), items, 22 + epoch) != 0) {
        return "wrong bytes";
      }
    }
    CacheTierStats st = c->Stats()[0];
    if (st.refused == 0) return "nothing refused";
    if (st.entries == 0) return "nothing cached";
    if (st.charged_bytes > st.limit) return "over the limit";
    return "OK";
  });
  if (result.rfind("SKIP", 0) == 0) GTEST_SKIP() << result;
  EXPECT_EQ(result, "OK");
}

}  // namespace
}  // namespace ufspack
