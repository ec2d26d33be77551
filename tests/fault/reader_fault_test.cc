// Copyright 2026 The ufspack Authors.
//
// The reader under storage faults, injected into its real pread(2) path
// (tests/fault/fault_injection.h): EINTR and short reads are retried and
// give exact bytes; EIO is an IOError naming the data file, the record and
// the offset; a data file truncated after Open() is an error, and the
// caller's string or batch is left empty, never half filled.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fault_injection.h"
#include "testutil.h"
#include "ufspack/builder.h"
#include "ufspack/format.h"
#include "ufspack/reader.h"

namespace ufspack {
namespace {

using fault::Call;
using test::TempDir;

constexpr int kRecords = 12;

std::string Payload(int i) {
  return test::RandomBytes(10000 + 1000 * static_cast<size_t>(i),
                           static_cast<uint64_t>(i) + 1);
}

std::string Name(int i) { return "r" + std::to_string(i) + ".bin"; }

// A flat pack of kRecords raw records (Payload(i)), plus one compressible
// record stored as zstd when `compress`.
void WritePack(const std::string& dir, bool compress = false) {
  PackWriterOptions o;
  o.flat = true;
  o.compress = compress;
  std::unique_ptr<PackWriter> w;
  Status s = PackWriter::Create(dir, o, &w);
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (int i = 0; i < kRecords; ++i) {
    s = w->Add(Name(i), kNoLabel, Payload(i));
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  s = w->Add("text.txt", kNoLabel, test::CompressibleBytes(200000, 3));
  ASSERT_TRUE(s.ok()) << s.ToString();
  s = w->Finish();
  ASSERT_TRUE(s.ok()) << s.ToString();
}

std::unique_ptr<Reader> OpenPack(const std::string& dir) {
  std::unique_ptr<Reader> r;
  Status s = Reader::Open(dir, ReaderOptions(), &r);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return r;
}

using test::Contains;

// --- EINTR and short reads ---------------------------------------------------

TEST(ReaderFaultTest, PreadEintrIsRetriedUntilItSucceeds) {
  TempDir t;
  ASSERT_NO_FATAL_FAILURE(WritePack(t / "p"));
  auto reader = OpenPack(t / "p");
  ASSERT_TRUE(reader);
  fault::ScopedFaults faults;
  const int id =
      fault::Inject(fault::Fail(Call::kPread, "/p/data.ufs", EINTR).Times(3));
  std::string out;
  Status s = reader->Read(5, &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(out == Payload(5));
  // Three interrupted calls, then the one that read the record.
  EXPECT_EQ(fault::Fired(id), 3);
  EXPECT_EQ(fault::Matched(id), 4);
}

TEST(ReaderFaultTest, PreadEintrOnEveryRecordOfABatch) {
  TempDir t;
  ASSERT_NO_FATAL_FAILURE(WritePack(t / "p", /*compress=*/true));
  auto reader = OpenPack(t / "p");
  ASSERT_TRUE(reader);
  std::vector<uint64_t> all;
  for (uint64_t i = 0; i < reader->size(); ++i) all.push_back(i);
  for (int threads : {1, 4}) {
    fault::ScopedFaults faults;
    const int id = fault::Inject(
        fault::Fail(Call::kPread, "/p/data.ufs", EINTR).Times(40));
    Batch batch;
    Status s = reader->ReadBatch(all.data(), all.size(), &batch, threads);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(batch.size(), all.size());
    for (int i = 0; i < kRecords; ++i) {
      EXPECT_TRUE(batch.get(static_cast<size_t>(i)) == Payload(i)) << i;
    }
    EXPECT_TRUE(batch.get(kRecords) == test::CompressibleBytes(200000, 3));
    EXPECT_EQ(fault::Fired(id), 40);
    EXPECT_EQ(fault::Matched(id), 40 + static_cast<int>(all.size()));
  }
}

TEST(ReaderFaultTest, OneByteReadsGiveExactBytes) {
  TempDir t;
  ASSERT_NO_FATAL_FAILURE(WritePack(t / "p"));
  auto reader = OpenPack(t / "p");
  ASSERT_TRUE(reader);
  fault::ScopedFaults faults;
  const int id = fault::Inject(fault::Short(Call::kPread, "/p/data.ufs", 1));
  std::string out;
  Status s = reader->Read(2, &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(out == Payload(2));
  // One pread per byte: every short read was continued where it stopped.
  EXPECT_EQ(fault::Matched(id), static_cast<int>(Payload(2).size()));

  // The caller's-buffer form, with spare capacity that must stay untouched.
  std::string buf(20000, '#');
  size_t length = 0;
  s = reader->Read(1, buf.data(), buf.size(), &length);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(length, Payload(1).size());
  EXPECT_TRUE(buf.compare(0, length, Payload(1)) == 0);
  EXPECT_EQ(buf.find_first_not_of('#', length), std::string::npos);
}

TEST(ReaderFaultTest, RandomShortReadsGiveExactBytes) {
  TempDir t;
  ASSERT_NO_FATAL_FAILURE(WritePack(t / "p", /*compress=*/true));
  auto reader = OpenPack(t / "p");
  ASSERT_TRUE(reader);
  Record text;
  ASSERT_TRUE(reader->GetRecord(kRecords, &text).ok());
  ASSERT_EQ(text.codec, Codec::kZstd);
  for (uint64_t seed : {1u, 2u, 3u}) {
    fault::ScopedFaults faults;
    const int id =
        fault::Inject(fault::ShortRandom(Call::kPread, "/p/data.ufs", seed));
    for (int i = 0; i < kRecords; ++i) {
      std::string out;
      Status s = reader->Read(static_cast<uint64_t>(i), &out);
      ASSERT_TRUE(s.ok()) << s.ToString();
      EXPECT_TRUE(out == Payload(i)) << i;
    }
    std::string out;
    Status s = reader->Read(kRecords, &out);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(out == test::CompressibleBytes(200000, 3));
    std::vector<uint64_t> all;
    for (uint64_t i = 0; i < reader->size(); ++i) all.push_back(i);
    Batch batch;
    s = reader->ReadBatch(all.data(), all.size(), &batch, 4);
    ASSERT_TRUE(s.ok()) << s.ToString();
    for (int i = 0; i < kRecords; ++i) {
      EXPECT_TRUE(batch.get(static_cast<size_t>(i)) == Payload(i)) << i;
    }
    // Far more calls than records: the reads really were split.
    EXPECT_GT(fault::Matched(id), 4 * (kRecords + 1));
  }
}

TEST(ReaderFaultTest, OpenRetriesEintrOnBothFiles) {
  TempDir t;
  ASSERT_NO_FATAL_FAILURE(WritePack(t / "p"));
  fault::ScopedFaults faults;
  const int index_id =
      fault::Inject(fault::Fail(Call::kOpen, "/p/index.ufs", EINTR).Times(2));
  const int data_id =
      fault::Inject(fault::Fail(Call::kOpen, "/p/data.ufs", EINTR).Times(2));
  const int header_id =
      fault::Inject(fault::Fail(Call::kPread, "/p/data.ufs", EINTR).Times(2));
  auto reader = OpenPack(t / "p");
  ASSERT_TRUE(reader);
  EXPECT_EQ(fault::Fired(index_id), 2);
  EXPECT_EQ(fault::Fired(data_id), 2);
  EXPECT_EQ(fault::Fired(header_id), 2);
  std::string out;
  ASSERT_TRUE(reader->Read(0, &out).ok());
  EXPECT_TRUE(out == Payload(0));
}

// --- EIO
// -----------------------------------------------------------------------

TEST(ReaderFaultTest, EioIsAnIOErrorNamingDataFileRecordAndOffset) {
  TempDir t;
  ASSERT_NO_FATAL_FAILURE(WritePack(t / "p"));
  auto reader = OpenPack(t / "p");
  ASSERT_TRUE(reader);
  Record r;
  ASSERT_TRUE(reader->GetRecord(4, &r).ok());
  const std::string data_path = reader->info().data_path;
  {
    fault::ScopedFaults faults;
    const int id =
        fault::Inject(fault::Fail(Call::kPread, "/p/data.ufs", EIO).Times(1));
    std::string out = "caller's bytes";
    Status s = reader->Read(4, &out);
    EXPECT_TRUE(s.IsIOError()) << s.ToString();
    EXPECT_EQ(s.errno_value(), EIO);
    EXPECT_TRUE(Contains(s, data_path)) << s.ToString();
    EXPECT_TRUE(Contains(s, "record 4 'r4.bin'")) << s.ToString();
    EXPECT_TRUE(Contains(s, "offset " + std::to_string(r.offset)))
        << s.ToString();
    EXPECT_TRUE(Contains(s, std::strerror(EIO))) << s.ToString();
    EXPECT_TRUE(out.empty());
    EXPECT_EQ(fault::Fired(id), 1);  // no retry of a hard error
    // The error was transient: the next read succeeds.
    s = reader->Read(4, &out);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(out == Payload(4));
  }
  {
    // EIO after part of the record arrived: the offset is where it failed.
    fault::ScopedFaults faults;
    fault::Inject(fault::Short(Call::kPread, "/p/data.ufs", 100).Times(1));
    fault::Inject(
        fault::Fail(Call::kPread, "/p/data.ufs", EIO).After(1).Times(1));
    std::string out = "caller's bytes";
    Status s = reader->Read(4, &out);
    EXPECT_TRUE(s.IsIOError()) << s.ToString();
    EXPECT_TRUE(Contains(
        s, data_path + ": read at offset " + std::to_string(r.offset + 100)))
        << s.ToString();
    EXPECT_TRUE(out.empty());
  }
  {
    // Batches: the error surfaces and the batch is left empty.
    fault::ScopedFaults faults;
    fault::Inject(fault::Fail(Call::kPread, "/p/data.ufs", EIO).Times(1));
    std::vector<uint64_t> all;
    for (uint64_t i = 0; i < reader->size(); ++i) all.push_back(i);
    for (int threads : {1, 4}) {
      Batch batch;
      batch.data = "stale";
      batch.offsets = {0, 5};
      Status s = reader->ReadBatch(all.data(), all.size(), &batch, threads);
      if (threads == 1) {
        EXPECT_TRUE(s.IsIOError()) << s.ToString();
        EXPECT_TRUE(Contains(s, data_path)) << s.ToString();
        EXPECT_TRUE(batch.data.empty());
        EXPECT_TRUE(batch.offsets.empty());
        EXPECT_EQ(batch.size(), 0u);
      } else {
        // The rule fired once, in the first batch: this one succeeds.
        ASSERT_TRUE(s.ok()) << s.ToString();
        EXPECT_TRUE(batch.get(3) == Payload(3));
      }
    }
  }
}

TEST(ReaderFaultTest, EioInAParallelBatchLeavesItEmpty) {
  TempDir t;
  ASSERT_NO_FATAL_FAILURE(WritePack(t / "p", /*compress=*/true));
  auto reader = OpenPack(t / "p");
  ASSERT_TRUE(reader);
  std::vector<uint64_t> all;
  for (uint64_t i = 0; i < reader->size(); ++i) all.push_back(i);
  for (int after = 0; after < static_cast<int>(all.size()); after += 3) {
    fault::ScopedFaults faults;
    fault::Inject(
        fault::Fail(Call::kPread, "/p/data.ufs", EIO).After(after).Times(1));
    Batch batch;
    Status s = reader->ReadBatch(all.data(), all.size(), &batch, 4);
    EXPECT_TRUE(s.IsIOError()) << after << ": " << s.ToString();
    EXPECT_TRUE(Contains(s, reader->info().data_path)) << s.ToString();
    EXPECT_TRUE(batch.data.empty()) << after;
    EXPECT_TRUE(batch.offsets.empty()) << after;
  }
}

TEST(ReaderFaultTest, EioReadingTheDataHeaderFailsOpen) {
  TempDir t;
  ASSERT_NO_FATAL_FAILURE(WritePack(t / "p"));
  fault::ScopedFaults faults;
  fault::Inject(fault::Fail(Call::kPread, "/p/data.ufs", EIO).Times(1));
  std::unique_ptr<Reader> reader;
  Status s = Reader::Open(t / "p", ReaderOptions(), &reader);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_TRUE(Contains(s, t / "p/data.ufs: read at offset 0")) << s.ToString();
  EXPECT_FALSE(reader);
}

TEST(ReaderFaultTest, OpenFailingWithEaccesNamesTheFile) {
  TempDir t;
  ASSERT_NO_FATAL_FAILURE(WritePack(t / "p"));
  for (const char* file : {"/p/index.ufs", "/p/data.ufs"}) {
    fault::ScopedFaults faults;
    fault::Inject(fault::Fail(Call::kOpen, file, EACCES));
    std::unique_ptr<Reader> reader;
    Status s = Reader::Open(t / "p", ReaderOptions(), &reader);
    EXPECT_TRUE(s.IsIOError()) << s.ToString();
    EXPECT_EQ(s.errno_value(), EACCES);
    EXPECT_TRUE(Contains(s, t.path() + file)) << s.ToString();
    EXPECT_FALSE(reader);
  }
}

// --- The data file truncated under an open reader ----------------------------

// Truncates the data file the reader holds (the same inode, through a new
// descriptor) to `size` bytes.
void TruncateInPlace(const std::string& path, uint64_t size) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(ftruncate(fd, static_cast<off_t>(size)), 0) << path;
  close(fd);
}

TEST(ReaderFaultTest, DataTruncatedAfterOpenIsCorruptionNeverHalfFilled) {
  TempDir t;
  ASSERT_NO_FATAL_FAILURE(WritePack(t / "p"));
  auto reader = OpenPack(t / "p");
  ASSERT_TRUE(reader);
  const std::string data_path = reader->info().data_path;
  Record cut;
  ASSERT_TRUE(reader->GetRecord(6, &cut).ok());
  // Cut record 6 in the middle; 7.. lie wholly beyond the new end.
  ASSERT_NO_FATAL_FAILURE(
      TruncateInPlace(data_path, cut.offset + cut.stored_length / 2));

  // Records before the cut still read exactly.
  for (int i = 0; i < 6; ++i) {
    std::string out;
    Status s = reader->Read(static_cast<uint64_t>(i), &out);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(out == Payload(i));
  }
  // The cut record and those past the end: Corruption naming the data file,
  // the record and its offset, and what arrived; the string is left empty.
  for (int i = 6; i < kRecords; ++i) {
    Record r;
    ASSERT_TRUE(reader->GetRecord(static_cast<uint64_t>(i), &r).ok());
    const uint64_t got = i == 6 ? cut.stored_length / 2 : 0;
    std::string out = "caller's bytes";
    Status s = reader->Read(static_cast<uint64_t>(i), &out);
    EXPECT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_TRUE(Contains(s, data_path + ": record " + std::to_string(i) + " '" +
                                Name(i) + "' at offset " +
                                std::to_string(r.offset)))
        << s.ToString();
    EXPECT_TRUE(Contains(s, "expected " + std::to_string(r.stored_length) +
                                " bytes, found " + std::to_string(got)))
        << s.ToString();
    EXPECT_TRUE(Contains(s, "truncated")) << s.ToString();
    EXPECT_TRUE(out.empty()) << i;
  }
  // The caller's-buffer form reports the same error and leaves *length as
  // it was.  The pread goes straight into the buffer (the zero-copy
  // contract), so the part still on disk landed there: the reader zeroes
  // the record's span on error, and leaves the rest of the buffer alone.
  {
    std::string buf(cut.original_length + 16, '#');
    size_t length = 12345;
    Status s = reader->Read(6, buf.data(), buf.size(), &length);
    EXPECT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_EQ(length, 12345u);
    EXPECT_EQ(buf.substr(0, cut.original_length),
              std::string(cut.original_length, '\0'));
    EXPECT_EQ(buf.substr(cut.original_length), std::string(16, '#'));
  }
  // Batches touching the cut fail as a whole and are left empty.
  const std::vector<uint64_t> indices = {0, 1, 6, 2};
  for (int threads : {1, 4}) {
    Batch batch;
    batch.data = "stale";
    batch.offsets = {0, 5};
    Status s =
        reader->ReadBatch(indices.data(), indices.size(), &batch, threads);
    EXPECT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_TRUE(Contains(s, "record 6 'r6.bin'")) << s.ToString();
    EXPECT_TRUE(batch.data.empty());
    EXPECT_TRUE(batch.offsets.empty());
  }
  // The index is unaffected: the entries still decode.
  EXPECT_TRUE(reader->CheckIndex().ok());
}

TEST(ReaderFaultTest, CompressedRecordTruncatedAfterOpenIsCorruption) {
  TempDir t;
  ASSERT_NO_FATAL_FAILURE(WritePack(t / "p", /*compress=*/true));
  auto reader = OpenPack(t / "p");
  ASSERT_TRUE(reader);
  Record text;
  ASSERT_TRUE(reader->GetRecord(kRecords, &text).ok());
  ASSERT_EQ(text.codec, Codec::kZstd);
  ASSERT_NO_FATAL_FAILURE(TruncateInPlace(
      reader->info().data_path, text.offset + text.stored_length - 1));
  std::string out = "caller's bytes";
  Status s = reader->Read(kRecords, &out);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s, "record " + std::to_string(kRecords) + " 'text.txt'"))
      << s.ToString();
  EXPECT_TRUE(out.empty());
  std::string buf(text.original_length, '#');
  size_t length = 7;
  s = reader->Read(kRecords, buf.data(), buf.size(), &length);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_EQ(length, 7u);
  // A compressed record is read into scratch space; the record's span of
  // the caller's buffer is zeroed on error all the same.
  EXPECT_EQ(buf, std::string(text.original_length, '\0'));
}

TEST(ReaderFaultTest, TruncatedThenRegrownWithZerosIsAChecksumError) {
  TempDir t;
  ASSERT_NO_FATAL_FAILURE(WritePack(t / "p"));
  auto reader = OpenPack(t / "p");
  ASSERT_TRUE(reader);
  const std::string data_path = reader->info().data_path;
  const uint64_t size = test::FileSize(data_path);
  Record r;
  ASSERT_TRUE(reader->GetRecord(3, &r).ok());
  // Cut inside record 3, then extend back to the old size: the tail is now
  // a hole of zeros, of the right length.
  ASSERT_NO_FATAL_FAILURE(TruncateInPlace(data_path, r.offset + 10));
  ASSERT_NO_FATAL_FAILURE(TruncateInPlace(data_path, size));
  for (int i = 3; i < kRecords; ++i) {
    std::string out = "caller's bytes";
    Status s = reader->Read(static_cast<uint64_t>(i), &out);
    EXPECT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_TRUE(Contains(s, "checksum mismatch")) << s.ToString();
    EXPECT_TRUE(out.empty());
  }
  std::string out;
  ASSERT_TRUE(reader->Read(2, &out).ok());
  EXPECT_TRUE(out == Payload(2));
}

TEST(ReaderFaultTest, DataTruncatedToZeroAfterOpen) {
  TempDir t;
  ASSERT_NO_FATAL_FAILURE(WritePack(t / "p"));
  auto reader = OpenPack(t / "p");
  ASSERT_TRUE(reader);
  ASSERT_NO_FATAL_FAILURE(TruncateInPlace(reader->info().data_path, 0));
  for (int i = 0; i < kRecords; ++i) {
    std::string out = "x";
    Status s = reader->Read(static_cast<uint64_t>(i), &out);
    EXPECT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_TRUE(out.empty());
  }
  // A new Open() sees the mismatch at once.
  std::unique_ptr<Reader> again;
  Status s = Reader::Open(t / "p", ReaderOptions(), &again);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
}

// --- Transparency
// ---------------------------------------------------------------

TEST(ReaderFaultTest, RulesForOtherFilesDoNotTouchTheReader) {
  TempDir t;
  ASSERT_NO_FATAL_FAILURE(WritePack(t / "p"));
  fault::ScopedFaults faults;
  const int other =
      fault::Inject(fault::Fail(Call::kPread, "/elsewhere/data.ufs", EIO));
  const int seen = fault::Inject(fault::Observe(Call::kPread, "/p/data.ufs"));
  auto reader = OpenPack(t / "p");
  ASSERT_TRUE(reader);
  for (int i = 0; i < kRecords; ++i) {
    std::string out;
    ASSERT_TRUE(reader->Read(static_cast<uint64_t>(i), &out).ok());
    EXPECT_TRUE(out == Payload(i));
  }
  EXPECT_EQ(fault::Matched(other), 0);
  // One pread for the data header at Open(), then exactly one per record.
  EXPECT_EQ(fault::Matched(seen), 1 + kRecords);
}

}  // namespace
}  // namespace ufspack
