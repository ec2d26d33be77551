// Copyright 2026 The ufspack Authors.
//
// The mount's read-ahead (mount/src/sequential_reads.h): runs of consecutive
// records read in windows, other orders read alone, concurrent runs, and a
// damaged record in a window failing alone.
#include "sequential_reads.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "testutil.h"
#include "ufspack/builder.h"
#include "ufspack/reader.h"

namespace ufspack {
namespace mount {
namespace {

constexpr int kRecords = 240;

class SequentialReadsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::unique_ptr<PackWriter> w;
    PackWriterOptions o;
    o.compress = true;  // every fourth record compressible: zstd
    ASSERT_TRUE(PackWriter::Create(dir_.path() + "/p", o, &w).ok());
    ASSERT_TRUE(w->AddClass("a").ok());
    for (int i = 0; i < kRecords; ++i) {
      const size_t size = 20000 + (i * 7919) % 60000;
      bytes_.push_back(i % 4 == 0 ? test::CompressibleBytes(size, i)
                                  : test::RandomBytes(size, i));
      char name[32];
      std::snprintf(name, sizeof(name), "a/%04d.bin", i);
      ASSERT_TRUE(w->Add(name, 0, bytes_.back()).ok());
    }
    ASSERT_TRUE(w->Finish(nullptr).ok());
    Open();
  }
  void Open() {
    ASSERT_TRUE(Reader::Open(dir_.path() + "/p", {}, &reader_).ok());
  }
  Status ReadOne(SequentialReads* ra, uint64_t i, std::string* out) {
    Record r;
    UFSPACK_RETURN_IF_ERROR(reader_->GetRecord(i, &r));
    return ra->Read(r, out);
  }
  void ExpectExact(SequentialReads* ra, uint64_t i) {
    std::string out;
    Status s = ReadOne(ra, i, &out);
    ASSERT_TRUE(s.ok()) << i << ": " << s.ToString();
    ASSERT_EQ(out, bytes_[i]) << i;
  }

  test::TempDir dir_;
  std::vector<std::string> bytes_;
  std::unique_ptr<Reader> reader_;
};

TEST_F(SequentialReadsTest, ARunIsReadInGrowingWindows) {
  SequentialReads ra(reader_.get(), 4 << 20);
  for (uint64_t i = 0; i < kRecords; ++i)
    ASSERT_NO_FATAL_FAILURE(ExpectExact(&ra, i));
  const SequentialReadStats& st = ra.stats();
  // The first read is read alone, every other one from a window.
  EXPECT_EQ(st.reads_from_windows.load(), kRecords - 1u);
  EXPECT_EQ(st.window_records.load(), kRecords - 1u);  // none read twice
  // ~12 MiB in windows of 256K, 512K, 1M, 2M, then 4M: 7 or 8 windows,
  // against 239 reads without read-ahead.
  EXPECT_GE(st.windows.load(), 5u);
  EXPECT_LE(st.windows.load(), 9u);
  EXPECT_EQ(st.failed_windows.load(), 0u);
}

TEST_F(SequentialReadsTest, OtherOrdersAreReadAlone) {
  // A stride of 7 over 240 records (coprime): every record once, and a
  // record's successor never within the 16 reads that follow it.
  SequentialReads ra(reader_.get(), 4 << 20);
  for (uint64_t k = 0; k < kRecords; ++k) {
    ASSERT_NO_FATAL_FAILURE(ExpectExact(&ra, (k * 7) % kRecords));
  }
  EXPECT_EQ(ra.stats().windows.load(), 0u);
  EXPECT_EQ(ra.stats().reads_from_windows.load(), 0u);
  SequentialReads backwards(reader_.get(), 4 << 20);
  for (uint64_t k = kRecords; k-- > 0;) {
    ASSERT_NO_FATAL_FAILURE(ExpectExact(&backwards, k));
  }
  EXPECT_EQ(backwards.stats().windows.load(), 0u);
}

TEST_F(SequentialReadsTest, OffReadsEveryRecordAlone) {
  SequentialReads ra(reader_.get(), 0);
  for (uint64_t i = 0; i < 50; ++i)
    ASSERT_NO_FATAL_FAILURE(ExpectExact(&ra, i));
  EXPECT_EQ(ra.stats().windows.load(), 0u);
}

// Four readers, each reading its own range in order (as DataLoader workers
// read their batches), at once: every read exact, most from windows.
TEST_F(SequentialReadsTest, ConcurrentRunsEachReadAhead) {
  SequentialReads ra(reader_.get(), 1 << 20);
  std::vector<std::thread> threads;
  std::vector<std::string> errors(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round) {
        for (uint64_t i = t * 60; i < (t + 1) * 60u; ++i) {
          std::string out;
          Status s = ReadOne(&ra, i, &out);
          if (!s.ok() || out != bytes_[i]) {
            errors[t] = std::to_string(i) + ": " + s.ToString();
            return;
          }
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& e : errors) EXPECT_EQ(e, "");
  const SequentialReadStats& st = ra.stats();
  EXPECT_GT(st.reads_from_windows.load(), 4 * 3 * 60 / 2u);
  EXPECT_LT(st.windows.load(), 4 * 3 * 60 / 4u);
}

// A record whose stored bytes are damaged fails alone, with the checksum
// error Reader::Read gives; its window's other records read exact.
TEST_F(SequentialReadsTest, ADamagedRecordInAWindowFailsAloneAndTheOthersRead) {
  Record bad;
  ASSERT_TRUE(reader_->GetRecord(50, &bad).ok());
  reader_.reset();
  test::FlipByte(dir_.path() + "/p/data.ufs", bad.offset + 10);
  ASSERT_NO_FATAL_FAILURE(Open());
  SequentialReads ra(reader_.get(), 4 << 20);
  for (uint64_t i = 40; i < 70; ++i) {
    if (i == 50) {
      std::string out;
      Status s = ReadOne(&ra, i, &out);
      EXPECT_TRUE(s.IsCorruption()) << s.ToString();
      EXPECT_TRUE(test::Contains(s, "checksum")) << s.ToString();
      continue;
    }
    ASSERT_NO_FATAL_FAILURE(ExpectExact(&ra, i));
  }
  EXPECT_GE(ra.stats().failed_windows.load(), 1u);
  EXPECT_GT(ra.stats().reads_from_windows.load(), 0u);
}

}  // namespace
}  // namespace mount
}  // namespace ufspack
