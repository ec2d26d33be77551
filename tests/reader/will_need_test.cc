// Copyright 2026 The ufspack Authors.
//
// Reader::WillNeed: the hint reaches the data file (cut at its end) for a
// pack on a file system, and a real file's pages then arrive in the page
// cache (mincore); nothing for a remote file or a part not opened yet.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "hinted_file.h"
#include "testutil.h"
#include "ufspack/builder.h"
#include "ufspack/file.h"
#include "ufspack/merge.h"
#include "ufspack/open_reader.h"
#include "ufspack/reader.h"

namespace ufspack {
namespace {

using test::HintedFile;
using Hint = HintedFile::Hint;

void WritePack(const std::string& dir, int records, int seed) {
  std::unique_ptr<PackWriter> w;
  ASSERT_TRUE(PackWriter::Create(dir, {}, &w).ok());
  // Classes c1 and c2 in every pack (parts of a merge share one table),
  // the records in class c<seed>.
  ASSERT_TRUE(w->AddClass("c1").ok());
  ASSERT_TRUE(w->AddClass("c2").ok());
  for (int i = 0; i < records; ++i) {
    ASSERT_TRUE(w->Add("c" + std::to_string(seed) + "/" + std::to_string(i),
                       seed - 1, test::RandomBytes(30000, seed * 1000 + i))
                    .ok());
  }
  ASSERT_TRUE(w->Finish(nullptr).ok());
}

std::unique_ptr<Reader> OpenHinted(const std::string& pack, bool remote,
                                   HintedFile** file) {
  auto data =
      std::make_unique<HintedFile>(test::ReadFile(pack + "/data.ufs"), remote);
  *file = data.get();
  std::unique_ptr<Reader> r;
  Status s = internal::OpenReader(
      NewMemoryRegion("mem/index.ufs", test::ReadFile(pack + "/index.ufs")),
      std::move(data), ReaderOptions(), &r);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return r;
}

TEST(WillNeedTest, ReachesTheDataFileCutAtItsEnd) {
  test::TempDir t;
  ASSERT_NO_FATAL_FAILURE(WritePack(t / "p", 10, 1));
  const uint64_t size = test::FileSize(t / "p/data.ufs");
  HintedFile* file = nullptr;
  std::unique_ptr<Reader> r = OpenHinted(t / "p", false, &file);
  ASSERT_NE(r, nullptr);
  r->WillNeed(0, 100, 50000);
  r->WillNeed(0, size - 10, 1000);  // cut at the end
  r->WillNeed(0, size, 10);         // past it: nothing
  r->WillNeed(0, 5, 0);             // nothing
  r->WillNeed(1, 0, 10);            // a single pack has part 0 only
  EXPECT_EQ(file->Take(), (std::vector<Hint>{{100, 50000}, {size - 10, 10}}));
}

TEST(WillNeedTest, NothingForARemoteFile) {
  test::TempDir t;
  ASSERT_NO_FATAL_FAILURE(WritePack(t / "p", 10, 1));
  HintedFile* file = nullptr;
  std::unique_ptr<Reader> r = OpenHinted(t / "p", true, &file);
  ASSERT_NE(r, nullptr);
  r->WillNeed(0, 0, 50000);
  EXPECT_TRUE(file->Take().empty());
}

// The pages of `path` in the page cache, and the file's pages.
std::pair<size_t, size_t> Resident(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_GE(fd, 0) << path;
  const size_t size = test::FileSize(path);
  void* p = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  EXPECT_NE(p, MAP_FAILED);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in((size + page - 1) / page);
  EXPECT_EQ(mincore(p, size, in.data()), 0);
  munmap(p, size);
  size_t n = 0;
  for (unsigned char c : in) n += c & 1;
  return {n, in.size()};
}

// Drops the file's pages from the page cache; false where the file
// system keeps them (tmpfs), which leaves nothing to observe.
bool Evict(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  fdatasync(fd);
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  close(fd);
  return Resident(path).first * 10 < Resident(path).second;
}

bool AllResidentWithin(const std::string& path, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    const auto [n, pages] = Resident(path);
    if (n == pages) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST(WillNeedTest, AFilesPagesArriveInThePageCache) {
  test::TempDir t;
  ASSERT_NO_FATAL_FAILURE(WritePack(t / "p", 64, 1));  // ~2 MB
  std::unique_ptr<Reader> r;
  ASSERT_TRUE(Reader::Open(t / "p", ReaderOptions(), &r).ok());
  const std::string data = t / "p/data.ufs";
  if (!Evict(data)) GTEST_SKIP() << "this file system keeps its pages cached";
  r->WillNeed(0, 0, test::FileSize(data));
  EXPECT_TRUE(AllResidentWithin(data, std::chrono::seconds(20)));
}

TEST(WillNeedTest, AMergedPackHintsThePartsItHasOpened) {
  test::TempDir t;
  ASSERT_NO_FATAL_FAILURE(WritePack(t / "a", 32, 1));
  ASSERT_NO_FATAL_FAILURE(WritePack(t / "b", 32, 2));
  MergeSummary ms;
  Status merged = MergePacks({t / "a", t / "b"}, t / "m", &ms);
  ASSERT_TRUE(merged.ok()) << merged.ToString();
  std::unique_ptr<Reader> r;
  ASSERT_TRUE(Reader::Open(t / "m", ReaderOptions(), &r).ok());
  const std::string b = t / "b/data.ufs";
  if (!Evict(b)) GTEST_SKIP() << "this file system keeps its pages cached";
  // Part 1 (b) not opened yet: left alone (the hint would be done by now).
  r->WillNeed(1, 0, test::FileSize(b));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(Resident(b).first, 0u);
  std::string bytes;
  ASSERT_TRUE(r->Read(40, &bytes).ok());  // a record of part 1: opens it
  Record rec;
  ASSERT_TRUE(r->GetRecord(40, &rec).ok());
  ASSERT_EQ(rec.part, 1u);
  ASSERT_TRUE(Evict(b));
  r->WillNeed(1, 0, test::FileSize(b));
  EXPECT_TRUE(AllResidentWithin(b, std::chrono::seconds(20)));
  r->WillNeed(2, 0, 10);  // no such part: nothing, no crash
}

}  // namespace
}  // namespace ufspack
