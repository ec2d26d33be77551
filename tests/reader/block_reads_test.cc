// Copyright 2026 The ufspack Authors.
//
// Block reads (ReaderOptions::block_bytes): the same bytes as record reads,
// one request per block however many records and threads read it, failed
// fetches never kept, blocks grouped as documented.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "testutil.h"
#include "ufspack/builder.h"
#include "ufspack/coding.h"
#include "ufspack/file.h"
#include "ufspack/format.h"
#include "ufspack/merge.h"
#include "ufspack/open_reader.h"
#include "ufspack/reader.h"

namespace ufspack {
namespace {

using test::ReadFile;
using test::TempDir;
using test::WriteFile;

// A data file that counts its requests and can be made to fail or to
// return short reads.
class CountingFile : public RandomAccessFile {
 public:
  explicit CountingFile(std::string contents)
      : name_("mem/data.ufs"), contents_(std::move(contents)) {}

  Status Read(uint64_t offset, size_t n, char* scratch,
              size_t* bytes_read) const override {
    reads_++;
    bytes_ += n;
    if (fail_) return Status::IOError(name_ + ": injected failure");
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us_));
    size_t end = std::min<uint64_t>(contents_.size() - short_by_, offset + n);
    size_t got = offset < end ? end - offset : 0;
    std::copy_n(contents_.data() + offset, got, scratch);
    *bytes_read = got;
    return Status::OK();
  }
  Status Size(uint64_t* size) const override {
    *size = contents_.size();
    return Status::OK();
  }
  const std::string& name() const override { return name_; }

  mutable std::atomic<uint64_t> reads_{0}, bytes_{0};
  std::atomic<bool> fail_{false};
  std::atomic<uint64_t> short_by_{0};
  int delay_us_ = 0;

 private:
  std::string name_;
  std::string contents_;
};

struct Fixture {
  TempDir t;
  std::vector<std::string> expected;  // record bytes, in record order
  std::string index, data;
};

// 300 records of 1 to 3,000 bytes in 3 classes, shuffled layout.
void MakePack(Fixture* f, bool big_record = false) {
  for (int i = 0; i < 300; ++i) {
    const size_t size = big_record && i == 150 ? 200000 : 1 + (i * 7919) % 3000;
    WriteFile(f->t / ("src/c" + std::to_string(i % 3) + "/f" +
                      std::to_string(1000 + i) + ".jpg"),
              test::RandomBytes(size, i));
  }
  BuildOptions o;
  o.threads = 4;
  o.layout.shuffled = true;
  BuildSummary s;
  ASSERT_TRUE(BuildPack(f->t / "src", f->t / "pack", o, &s).ok());
  f->index = ReadFile(f->t / "pack/index.ufs");
  f->data = ReadFile(f->t / "pack/data.ufs");
  std::unique_ptr<Reader> r;
  ASSERT_TRUE(Reader::Open(f->t / "pack", ReaderOptions(), &r).ok());
  for (uint64_t i = 0; i < r->size(); ++i) {
    std::string b;
    ASSERT_TRUE(r->Read(i, &b).ok());
    f->expected.push_back(b);
  }
}

std::unique_ptr<Reader> OpenCounting(const Fixture& f, uint64_t block_bytes,
                                     CountingFile** file,
                                     uint64_t cache_bytes = 64 << 20) {
  auto data = std::make_unique<CountingFile>(f.data);
  *file = data.get();
  ReaderOptions o;
  o.block_bytes = block_bytes;
  o.block_cache_bytes = cache_bytes;
  std::unique_ptr<Reader> r;
  Status s = internal::OpenReader(NewMemoryRegion("mem/index.ufs", f.index),
                                  std::move(data), o, &r);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return r;
}

// Reader::BlockMembers, and how many blocks are not empty.
struct Blocks {
  std::vector<uint64_t> first, members;
  size_t nonempty = 0;
};
Blocks GetBlocks(const Reader& r, uint64_t block_bytes) {
  Blocks b;
  Status s = r.BlockMembers(block_bytes, &b.first, &b.members);
  EXPECT_TRUE(s.ok()) << s.ToString();
  for (size_t k = 0; k + 1 < b.first.size(); ++k) {
    b.nonempty += b.first[k + 1] > b.first[k];
  }
  return b;
}

TEST(BlockMembersTest, GroupsRecordsByTheBlockTheirBytesStartIn) {
  Fixture f;
  MakePack(&f);
  std::unique_ptr<Reader> r;
  ASSERT_TRUE(Reader::Open(f.t / "pack", ReaderOptions(), &r).ok());
  std::vector<uint64_t> first, members;
  ASSERT_TRUE(r->BlockMembers(16384, &first, &members).ok());
  ASSERT_EQ(first.size(), (f.data.size() - 1) / 16384 + 2);
  ASSERT_EQ(members.size(), r->size());
  std::set<uint64_t> seen;
  for (size_t b = 0; b + 1 < first.size(); ++b) {
    for (uint64_t k = first[b]; k < first[b + 1]; ++k) {
      Record rec;
      ASSERT_TRUE(r->GetRecord(members[k], &rec).ok());
      EXPECT_EQ(rec.offset / 16384, b);
      if (k > first[b]) {
        EXPECT_LT(members[k - 1], members[k]);
      }
      seen.insert(members[k]);
    }
  }
  EXPECT_EQ(seen.size(), r->size());
  EXPECT_TRUE(r->BlockMembers(0, &first, &members).IsInvalidArgument());
}

// Enough records for several threads (BlockMembers splits 64Ki and more),
// and a damaged offset in the last thread's share.
TEST(BlockMembersTest, ManyRecordsOnSeveralThreadsAndADamagedOffset) {
  TempDir t;
  const uint64_t n = 200000;
  {
    std::unique_ptr<PackWriter> w;
    PackWriterOptions o;
    o.flat = true;
    ASSERT_TRUE(PackWriter::Create(t / "pack", o, &w).ok());
    for (uint64_t i = 0; i < n; ++i) {
      ASSERT_TRUE(
          w->Add("r" + std::to_string(i), kNoLabel, std::string(1 + i % 5, 'x'))
              .ok());
    }
    ASSERT_TRUE(w->Finish().ok());
  }
  std::string index = ReadFile(t / "pack/index.ufs");
  std::unique_ptr<Reader> r;
  ASSERT_TRUE(Reader::Open(t / "pack", ReaderOptions(), &r).ok());
  std::vector<uint64_t> first, members;
  ASSERT_TRUE(r->BlockMembers(4096, &first, &members).ok());
  ASSERT_EQ(members.size(), n);
  for (size_t b = 0; b + 1 < first.size(); ++b) {
    for (uint64_t k = first[b]; k < first[b + 1]; ++k) {
      Record rec;
      ASSERT_TRUE(r->GetRecord(members[k], &rec).ok());
      ASSERT_EQ(rec.offset / 4096, b) << members[k];
    }
  }
  IndexHeader h;
  std::string_view in = index;
  ASSERT_TRUE(h.DecodeFrom(&in).ok());
  const uint64_t bad = n - 7;
  EncodeFixed64(&index[h.records.offset + bad * RecordEntry::kEncodedLength +
                       RecordEntry::kOffsetAt],
                h.data_size + 1);
  std::unique_ptr<RandomAccessFile> data;
  ASSERT_TRUE(NewPosixRandomAccessFile(t / "pack/data.ufs", &data).ok());
  std::unique_ptr<Reader> damaged;
  ASSERT_TRUE(internal::OpenReader(NewMemoryRegion("mem/index.ufs", index),
                                   std::move(data), {}, &damaged)
                  .ok());
  Status s = damaged->BlockMembers(4096, &first, &members);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.ToString().find("record " + std::to_string(bad)),
            std::string::npos)
      << s.ToString();
}

TEST(BlockReadsTest, OneRequestPerBlockSameBytes) {
  Fixture f;
  MakePack(&f);
  CountingFile* file;
  std::unique_ptr<Reader> r = OpenCounting(f, 16384, &file);
  const uint64_t opened = file->reads_;  // the data header at open
  const Blocks bl = GetBlocks(*r, 16384);
  const size_t blocks = bl.nonempty;
  for (uint64_t i : bl.members) {
    std::string got;
    ASSERT_TRUE(r->Read(i, &got).ok());
    ASSERT_TRUE(got == f.expected[i]) << i;
  }
  EXPECT_EQ(file->reads_ - opened, blocks);
  const BlockReadStats st = r->block_stats();
  EXPECT_EQ(st.block_fetches, blocks);
  EXPECT_EQ(st.bytes_fetched, f.data.size() - 64);  // every byte once
  EXPECT_EQ(st.reads_from_blocks, r->size());
  // Kept: a second pass costs nothing.
  for (uint64_t i = 0; i < r->size(); ++i) {
    std::string got;
    ASSERT_TRUE(r->Read(i, &got).ok());
  }
  EXPECT_EQ(file->reads_ - opened, blocks);
}

TEST(BlockReadsTest, BatchesAndManyThreadsFetchEachBlockOnce) {
  Fixture f;
  MakePack(&f);
  CountingFile* file;
  std::unique_ptr<Reader> r = OpenCounting(f, 16384, &file);
  file->delay_us_ = 2000;  // so that threads meet on blocks in flight
  const uint64_t opened = file->reads_;
  std::vector<uint64_t> all(r->size());
  for (uint64_t i = 0; i < all.size(); ++i) all[i] = i;
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      Batch batch;
      std::vector<uint64_t> mine(all);
      std::rotate(mine.begin(), mine.begin() + t * 37, mine.end());
      if (!r->ReadBatch(mine.data(), mine.size(), &batch, 4).ok()) bad++;
      for (size_t k = 0; k < mine.size(); ++k) {
        if (batch.get(k) != f.expected[mine[k]]) bad++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(file->reads_ - opened, GetBlocks(*r, 16384).nonempty);
}

TEST(BlockReadsTest, PrefetchFetchesInTheBackground) {
  Fixture f;
  MakePack(&f);
  CountingFile* file;
  std::unique_ptr<Reader> r = OpenCounting(f, 16384, &file);
  const uint64_t opened = file->reads_;
  std::vector<uint64_t> all(r->size());
  for (uint64_t i = 0; i < all.size(); ++i) all[i] = i;
  ASSERT_TRUE(r->PrefetchBlocks(all.data(), all.size()).ok());
  const size_t blocks = GetBlocks(*r, 16384).nonempty;
  for (int i = 0; i < 500 && r->block_stats().block_fetches < blocks; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(r->block_stats().block_fetches, blocks);
  for (uint64_t i = 0; i < r->size(); ++i) {
    std::string got;
    ASSERT_TRUE(r->Read(i, &got).ok());
    ASSERT_TRUE(got == f.expected[i]);
  }
  EXPECT_EQ(file->reads_ - opened, blocks);
  uint64_t bad = r->size();
  EXPECT_TRUE(r->PrefetchBlocks(&bad, 1).IsOutOfRange());
}

TEST(BlockReadsTest, FailedAndShortFetchesAreNeverKept) {
  Fixture f;
  MakePack(&f);
  CountingFile* file;
  std::unique_ptr<Reader> r = OpenCounting(f, 16384, &file);
  file->fail_ = true;
  std::string got;
  Status s = r->Read(0, &got);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  file->fail_ = false;
  ASSERT_TRUE(r->Read(0, &got).ok());  // fetched again
  EXPECT_TRUE(got == f.expected[0]);
  // A truncated data file: the block at its end comes back short.
  Record last;
  uint64_t last_i = 0;
  for (uint64_t i = 0; i < r->size(); ++i) {
    Record rec;
    ASSERT_TRUE(r->GetRecord(i, &rec).ok());
    if (rec.offset > last.offset) {
      last = rec;
      last_i = i;
    }
  }
  file->short_by_ = 5;
  s = r->Read(last_i, &got);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.ToString().find("mem/data.ufs: block"), std::string::npos);
  EXPECT_NE(s.ToString().find("short read"), std::string::npos);
  file->short_by_ = 0;
  ASSERT_TRUE(r->Read(last_i, &got).ok());
  EXPECT_TRUE(got == f.expected[last_i]);
}

TEST(BlockReadsTest, CorruptBytesInABlockFailTheChecksum) {
  Fixture f;
  MakePack(&f);
  std::unique_ptr<Reader> r;
  ASSERT_TRUE(Reader::Open(f.t / "pack", ReaderOptions(), &r).ok());
  Record rec;
  ASSERT_TRUE(r->GetRecord(7, &rec).ok());
  f.data[rec.offset + rec.stored_length / 2] ^= 1;
  CountingFile* file;
  r = OpenCounting(f, 16384, &file);
  std::string got;
  Status s = r->Read(7, &got);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.ToString().find("checksum mismatch"), std::string::npos);
  // Its neighbours in the block are fine.
  for (uint64_t i = 0; i < r->size(); ++i) {
    if (i != 7) {
      ASSERT_TRUE(r->Read(i, &got).ok()) << i;
    }
  }
}

TEST(BlockReadsTest, ARecordLargerThanABlockIsReadAlone) {
  Fixture f;
  MakePack(&f, /*big_record=*/true);
  CountingFile* file;
  std::unique_ptr<Reader> r = OpenCounting(f, 65536, &file);
  for (uint64_t i = 0; i < r->size(); ++i) {
    std::string got;
    ASSERT_TRUE(r->Read(i, &got).ok());
    ASSERT_TRUE(got == f.expected[i]);
  }
  const BlockReadStats st = r->block_stats();
  EXPECT_EQ(st.reads_bypassed, 1u);
  EXPECT_EQ(st.reads_from_blocks, r->size() - 1);
  EXPECT_EQ(st.bytes_fetched + 200000, f.data.size() - 64);
}

TEST(BlockReadsTest, MemoryStaysWithinTheCacheBound) {
  // Room for two blocks: reading block by block refetches nothing, and a
  // block read through is dropped before one still being read.
  Fixture f;
  MakePack(&f);
  CountingFile* file;
  std::unique_ptr<Reader> r = OpenCounting(f, 16384, &file, 2 * 20000);
  const uint64_t opened = file->reads_;
  const Blocks bl = GetBlocks(*r, 16384);
  const size_t blocks = bl.nonempty;
  for (int pass = 0; pass < 2; ++pass) {
    for (uint64_t i : bl.members) {
      std::string got;
      ASSERT_TRUE(r->Read(i, &got).ok());
    }
    // Block by block: nothing fetched twice.
    if (pass == 0) {
      EXPECT_EQ(file->reads_ - opened, blocks);
    }
  }
  // The second pass fetches every block again (only two are kept).
  EXPECT_GE(file->reads_ - opened, 2 * blocks - 2);
}

TEST(BlockReadsTest, AForkedChildDropsAnInheritedReaderAndReadsItsOwn) {
  // The parent's prefetch threads are running (one fetching, the others
  // waiting on the queue) when it forks; the child destroys its copy of
  // the reader, which must neither hang nor crash, then opens its own.
  Fixture f;
  MakePack(&f);
  CountingFile* file;
  std::unique_ptr<Reader> r = OpenCounting(f, 16384, &file);
  file->delay_us_ = 20000;
  std::vector<uint64_t> all(r->size());
  for (uint64_t i = 0; i < all.size(); ++i) all[i] = i;
  ASSERT_TRUE(r->PrefetchBlocks(all.data(), all.size()).ok());
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(20);  // a hang fails the test instead of blocking it
    r.reset();
    CountingFile* mine;
    std::unique_ptr<Reader> own = OpenCounting(f, 16384, &mine);
    std::string got;
    const bool ok = own->Read(5, &got).ok() && got == f.expected[5];
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  std::string got;
  ASSERT_TRUE(r->Read(5, &got).ok());
  EXPECT_TRUE(got == f.expected[5]);
}

TEST(BlockReadsTest, MergedPacksHaveBlocksPerPart) {
  Fixture f;
  MakePack(&f);
  std::vector<std::string> parts;
  for (uint32_t p = 0; p < 3; ++p) {
    BuildOptions o;
    o.threads = 4;
    o.part = p;
    o.parts = 3;
    BuildSummary s;
    parts.push_back(f.t / ("part" + std::to_string(p)));
    ASSERT_TRUE(BuildPack(f.t / "src", parts.back(), o, &s).ok());
  }
  MergeSummary ms;
  ASSERT_TRUE(MergePacks(parts, f.t / "merged", &ms).ok());
  ReaderOptions o;
  o.block_bytes = 16384;
  std::unique_ptr<Reader> r;
  ASSERT_TRUE(Reader::Open(f.t / "merged", o, &r).ok());
  std::vector<uint64_t> first, members;
  ASSERT_TRUE(r->BlockMembers(16384, &first, &members).ok());
  size_t blocks = 0;
  std::set<uint32_t> parts_of_block;
  for (size_t b = 0; b + 1 < first.size(); ++b) {
    blocks += first[b + 1] > first[b];
    std::set<uint32_t> in;
    for (uint64_t k = first[b]; k < first[b + 1]; ++k) {
      Record rec;
      ASSERT_TRUE(r->GetRecord(members[k], &rec).ok());
      in.insert(rec.part);
      std::string got;
      ASSERT_TRUE(r->Read(members[k], &got).ok());
      ASSERT_TRUE(got == f.expected[members[k]]);
    }
    EXPECT_LE(in.size(), 1u) << "block " << b << " spans parts";
    parts_of_block.insert(in.begin(), in.end());
  }
  EXPECT_EQ(parts_of_block.size(), 3u);
  EXPECT_EQ(r->block_stats().block_fetches, blocks);
}

}  // namespace
}  // namespace ufspack
