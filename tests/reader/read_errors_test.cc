// Copyright 2026 The ufspack Authors.
//
// A failed read of data.ufs is IOError or Corruption, whatever code the
// file underneath gave: OutOfRange (an HTTP 416), NotFound (a 404) or
// InvalidArgument from it must not reach the caller, to whom OutOfRange
// means "index past the end" (IndexError in Python, which ends a `for`
// loop without an error) and NotFound "no such record".
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "testutil.h"
#include "ufspack/builder.h"
#include "ufspack/file.h"
#include "ufspack/open_reader.h"
#include "ufspack/reader.h"

namespace ufspack {
namespace {

using test::ReadFile;
using test::TempDir;
using test::WriteFile;

// data.ufs in memory; a read touching bytes at or past `fail_at` fails
// with `failure`, as a server that starts failing mid-epoch.
class FailingFile final : public RandomAccessFile {
 public:
  FailingFile(std::string contents, uint64_t fail_at, Status failure)
      : name_("http://127.0.0.1:1/pack/data.ufs"),
        contents_(std::move(contents)),
        fail_at_(fail_at),
        failure_(std::move(failure)) {}

  Status Read(uint64_t offset, size_t n, char* scratch,
              size_t* bytes_read) const override {
    *bytes_read = 0;
    if (n > 0 && offset + n > fail_at_) return failure_;
    const uint64_t end = std::min<uint64_t>(contents_.size(), offset + n);
    const size_t got = offset < end ? static_cast<size_t>(end - offset) : 0;
    std::copy_n(contents_.data() + offset, got, scratch);
    *bytes_read = got;
    return Status::OK();
  }
  Status Size(uint64_t* size) const override {
    *size = contents_.size();
    return Status::OK();
  }
  const std::string& name() const override { return name_; }
  // As a remote object: batches go to ReadMany whole.
  bool prefers_batches() const override { return true; }

 private:
  const std::string name_;
  const std::string contents_;
  const uint64_t fail_at_;
  const Status failure_;
};

struct Fixture {
  TempDir t;
  std::string index, data;
};

// 40 records of 2,000 to 5,000 bytes in 2 classes, in index order in
// data.ufs.
void MakePack(Fixture* f) {
  for (int i = 0; i < 40; ++i) {
    WriteFile(f->t / ("src/c" + std::to_string(i % 2) + "/f" +
                      std::to_string(100 + i) + ".jpg"),
              test::RandomBytes(2000 + (i * 7919) % 3000, i));
  }
  BuildSummary s;
  ASSERT_TRUE(BuildPack(f->t / "src", f->t / "pack", BuildOptions(), &s).ok());
  f->index = ReadFile(f->t / "pack/index.ufs");
  f->data = ReadFile(f->t / "pack/data.ufs");
}

// Opens the fixture's pack over a data file failing with `failure` from
// record 20's offset on; *at is that offset.
std::unique_ptr<Reader> OpenFailing(const Fixture& f, const Status& failure,
                                    uint64_t block_bytes, uint64_t* at) {
  std::unique_ptr<Reader> plain;
  EXPECT_TRUE(internal::OpenReader(NewMemoryRegion("mem/index.ufs", f.index),
                                   NewMemoryRandomAccessFile("d", f.data), {},
                                   &plain)
                  .ok());
  Record r20;
  EXPECT_TRUE(plain->GetRecord(20, &r20).ok());
  *at = r20.offset;
  ReaderOptions o;
  o.block_bytes = block_bytes;
  std::unique_ptr<Reader> r;
  Status s = internal::OpenReader(
      NewMemoryRegion("mem/index.ufs", f.index),
      std::make_unique<FailingFile>(f.data, *at, failure), o, &r);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return r;
}

// What every read past the failure point must report: an IOError naming
// the record and keeping the file's message.
void ExpectReadError(const Status& s, const std::string& what) {
  EXPECT_TRUE(s.IsIOError()) << what << ": " << s.ToString();
  EXPECT_TRUE(test::Contains(s, "range not satisfiable (HTTP 416)") ||
              test::Contains(s, "not found (HTTP 404)") ||
              test::Contains(s, "ignored the Range header"))
      << what << ": " << s.ToString();
}

TEST(ReadErrorsTest, FileErrorsOtherThanIoOrCorruptionBecomeIoError) {
  Fixture f;
  MakePack(&f);
  const std::vector<Status> failures = {
      Status::OutOfRange("GET http://127.0.0.1:1/pack/data.ufs: range not "
                         "satisfiable (HTTP 416)"),
      Status::NotFound("GET http://127.0.0.1:1/pack/data.ufs: not found "
                       "(HTTP 404)"),
      Status::NotSupported("GET http://127.0.0.1:1/pack/data.ufs: the "
                           "server ignored the Range header")};
  for (const Status& failure : failures) {
    for (const uint64_t block_bytes : {uint64_t{0}, uint64_t{16384}}) {
      const std::string what =
          failure.ToString() + ", block_bytes " + std::to_string(block_bytes);
      uint64_t at = 0;
      std::unique_ptr<Reader> r = OpenFailing(f, failure, block_bytes, &at);
      ASSERT_NE(r, nullptr);
      // Before the failure point every record reads; block reads fetch a
      // whole block, so only the records of blocks wholly before it.
      uint64_t good = 0;
      for (uint64_t i = 0; i < r->size(); ++i) {
        std::string b;
        Status s = r->Read(i, &b);
        if (!s.ok()) {
          ExpectReadError(s, what + ", Read(" + std::to_string(i) + ")");
          EXPECT_TRUE(test::Contains(s, "record " + std::to_string(i)))
              << s.ToString();
          break;
        }
        ++good;
      }
      EXPECT_LE(good, 20u) << what;
      EXPECT_GT(good, 0u) << what;
      // A batch (one ReadMany) holding a record past it.
      std::vector<uint64_t> idx = {0, 25};
      Batch batch;
      ExpectReadError(r->ReadBatch(idx.data(), idx.size(), &batch, 2),
                      what + ", ReadBatch");
      ExpectReadError(r->ReadRange(18, 4, &batch), what + ", ReadRange");
      // An index past the end is still OutOfRange.
      std::string b;
      EXPECT_TRUE(r->Read(r->size(), &b).IsOutOfRange()) << what;
    }
  }
}

}  // namespace
}  // namespace ufspack
