// Copyright 2026 The ufspack Authors.
//
// The mount's read-ahead of a pack on a file system
// (mount/src/page_cache_read_ahead.h): what it asks of the data file
// (Reader::WillNeed, recorded by a data file standing in for the real
// one) for runs of consecutive records, interleaved runs, other orders,
// and when it is off.  Reader::WillNeed itself: tests/reader/will_need_test.cc.
#include "page_cache_read_ahead.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hinted_file.h"
#include "testutil.h"
#include "ufspack/builder.h"
#include "ufspack/file.h"
#include "ufspack/open_reader.h"
#include "ufspack/reader.h"

namespace ufspack {
namespace mount {
namespace {

constexpr int kRecords = 240;
constexpr uint64_t kDistance = uint64_t{1} << 20;

using test::HintedFile;

class PageCacheReadAheadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::unique_ptr<PackWriter> w;
    ASSERT_TRUE(PackWriter::Create(dir_.path() + "/p", {}, &w).ok());
    ASSERT_TRUE(w->AddClass("a").ok());
    for (int i = 0; i < kRecords; ++i) {
      char name[32];
      std::snprintf(name, sizeof(name), "a/%04d.bin", i);
      ASSERT_TRUE(
          w->Add(name, 0, test::RandomBytes(20000 + (i * 7919) % 60000, i))
              .ok());
    }
    ASSERT_TRUE(w->Finish(nullptr).ok());
    auto file = std::make_unique<HintedFile>(
        test::ReadFile(dir_.path() + "/p/data.ufs"));
    file_ = file.get();
    Status s = internal::OpenReader(
        NewMemoryRegion("mem/index.ufs",
                        test::ReadFile(dir_.path() + "/p/index.ufs")),
        std::move(file), ReaderOptions(), &reader_);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  Record Get(uint64_t i) {
    Record r;
    EXPECT_TRUE(reader_->GetRecord(i, &r).ok());
    return r;
  }
  uint64_t End(uint64_t i) {
    Record r = Get(i);
    return r.offset + r.stored_length;
  }

  test::TempDir dir_;
  std::unique_ptr<Reader> reader_;
  HintedFile* file_ = nullptr;
};

TEST_F(PageCacheReadAheadTest, ARunKeepsTheBytesAheadOfItAskedFor) {
  PageCacheReadAhead ra(reader_.get(), kDistance);
  ra.Read(Get(0));
  EXPECT_TRUE(file_->Take().empty());  // one read is no run yet
  ra.Read(Get(1));
  auto hints = file_->Take();
  ASSERT_EQ(hints.size(), 1u);
  EXPECT_EQ(hints[0], std::make_pair(End(1), kDistance));
  // Every record after that: the hints continue where the last ended, in
  // steps of at least 128 KiB, each reaching `distance` past the record
  // that asked (cut at the end of the data file).
  uint64_t hinted_to = End(1) + kDistance;
  for (uint64_t i = 2; i < kRecords; ++i) {
    ra.Read(Get(i));
    for (const auto& [offset, n] : file_->Take()) {
      EXPECT_EQ(offset, hinted_to) << i;
      EXPECT_EQ(offset + n, std::min(End(i) + kDistance, file_->size())) << i;
      EXPECT_TRUE(n >= PageCacheReadAhead::kStepBytes ||
                  offset + n == file_->size())
          << i;
      hinted_to = End(i) + kDistance;
    }
    EXPECT_LE(hinted_to, End(i) + kDistance) << i;
    if (hinted_to < file_->size()) {  // past the end nothing is asked
      EXPECT_GT(hinted_to + PageCacheReadAhead::kStepBytes, End(i) + kDistance)
          << i;
    }
  }
  EXPECT_GE(hinted_to, file_->size());
  // ~12 MiB in steps of 128 KiB or more: about 90 hints, not 239.
  EXPECT_GE(ra.stats().hints.load(), 50u);
  EXPECT_LE(ra.stats().hints.load(), 100u);
}

TEST_F(PageCacheReadAheadTest, OtherOrdersAskForNothing) {
  // A stride of 7 (coprime with 240): a record's successor is read 103
  // reads after it, long after its run was forgotten.
  PageCacheReadAhead ra(reader_.get(), kDistance);
  for (uint64_t k = 0; k < kRecords; ++k) ra.Read(Get((k * 7) % kRecords));
  PageCacheReadAhead backwards(reader_.get(), kDistance);
  for (uint64_t k = kRecords; k-- > 0;) backwards.Read(Get(k));
  EXPECT_TRUE(file_->Take().empty());
  EXPECT_EQ(ra.stats().hints.load() + backwards.stats().hints.load(), 0u);
}

TEST_F(PageCacheReadAheadTest, InterleavedRunsAreEachFollowed) {
  // Four runs read in turn, as four DataLoader workers read their batches.
  PageCacheReadAhead ra(reader_.get(), kDistance);
  for (uint64_t step = 0; step < 2; ++step) {
    for (uint64_t run = 0; run < 4; ++run) ra.Read(Get(run * 60 + step));
  }
  auto hints = file_->Take();
  ASSERT_EQ(hints.size(), 4u);
  for (uint64_t run = 0; run < 4; ++run) {
    EXPECT_EQ(hints[run], std::make_pair(End(run * 60 + 1), kDistance)) << run;
  }
  // More runs than it follows: the least recently used is forgotten, so
  // its next read starts a run again (no hint), while the others go on.
  const uint64_t runs = PageCacheReadAhead::kStreams + 1;
  PageCacheReadAhead many(reader_.get(), kDistance);
  for (uint64_t run = 0; run < runs; ++run) many.Read(Get(run * 12));
  EXPECT_TRUE(file_->Take().empty());
  many.Read(Get(0 * 12 + 1));  // run 0 was forgotten for run 16
  EXPECT_TRUE(file_->Take().empty());
  many.Read(Get(16 * 12 + 1));
  EXPECT_EQ(file_->Take().size(), 1u);
}

TEST_F(PageCacheReadAheadTest, OffAsksForNothing) {
  PageCacheReadAhead ra(reader_.get(), 0);
  for (uint64_t i = 0; i < kRecords; ++i) ra.Read(Get(i));
  EXPECT_TRUE(file_->Take().empty());
}

}  // namespace
}  // namespace mount
}  // namespace ufspack
