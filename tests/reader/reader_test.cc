// Copyright 2026 The ufspack Authors.
//
// Tests for ufspack::Reader: packs are written with PackWriter into a
// scratch directory, then opened, read, damaged and reopened.  One test per
// validation rule; damage is done by patching single fields of the files.
#include "ufspack/reader.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "testutil.h"
#include "ufspack/builder.h"
#include "ufspack/coding.h"
#include "ufspack/file.h"
#include "ufspack/format.h"
#include "ufspack/open_reader.h"

namespace ufspack {
namespace {

using test::TempDir;

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

::testing::AssertionResult Contains(std::string_view haystack,
                                    std::string_view needle) {
  if (haystack.find(needle) != std::string_view::npos) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "\"" << haystack << "\" does not contain \"" << needle << "\"";
}

struct Item {
  std::string name;
  uint32_t label;
  std::string bytes;
};

// Writes a pack of `items` (labels index `classes`) into `dir`.
Status WritePack(const std::string& dir,
                 const std::vector<std::string>& classes,
                 const std::vector<Item>& items,
                 const PackWriterOptions& options = {},
                 PackId* pack_id = nullptr) {
  std::unique_ptr<PackWriter> w;
  UFSPACK_RETURN_IF_ERROR(PackWriter::Create(dir, options, &w));
  for (const std::string& c : classes) UFSPACK_RETURN_IF_ERROR(w->AddClass(c));
  for (const Item& it : items) {
    UFSPACK_RETURN_IF_ERROR(
        w->Add(it.name, options.flat ? kNoLabel : it.label, it.bytes));
  }
  return w->Finish(pack_id);
}

const std::vector<std::string>& StandardClasses() {
  static const std::vector<std::string> kClasses = {"cat", "dog"};
  return kClasses;
}

// Five records in two classes: random bytes, an empty record, a
// compressible text, and records of 3000 and 1 bytes.
std::vector<Item> StandardItems() {
  return {
      {"cat/a.jpg", 0, test::RandomBytes(1000, 1)},
      {"cat/b.jpg", 0, ""},
      {"cat/c.txt", 0, test::CompressibleBytes(5000, 2)},
      {"dog/x.jpg", 1, test::RandomBytes(3000, 3)},
      {"dog/y.jpg", 1, test::RandomBytes(1, 4)},
  };
}

// Many records of varied sizes and kinds, for the concurrency tests.
std::vector<Item> ManyItems(int n) {
  std::vector<Item> items;
  for (int i = 0; i < n; ++i) {
    const size_t size = static_cast<size_t>((i * 7919) % 20000);
    std::string bytes = (i % 3 == 0) ? test::CompressibleBytes(size, i)
                                     : test::RandomBytes(size, i);
    items.push_back({"f/" + std::to_string(i) + ".bin",
                     static_cast<uint32_t>(i < n / 2 ? 0 : 1),
                     std::move(bytes)});
  }
  return items;
}

Status OpenPack(const std::string& path, std::unique_ptr<Reader>* reader,
                const ReaderOptions& options = {}) {
  return Reader::Open(path, options, reader);
}

IndexHeader ReadIndexHeader(const std::string& index_path) {
  const std::string bytes = test::ReadFile(index_path);
  std::string_view in(bytes);
  IndexHeader h;
  Status s = h.DecodeFrom(&in);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return h;
}

void Patch32(const std::string& path, uint64_t offset, uint32_t v) {
  std::string b = test::ReadFile(path);
  ASSERT_LE(offset + 4, b.size());
  EncodeFixed32(&b[offset], v);
  test::WriteFile(path, b);
}

void Patch64(const std::string& path, uint64_t offset, uint64_t v) {
  std::string b = test::ReadFile(path);
  ASSERT_LE(offset + 8, b.size());
  EncodeFixed64(&b[offset], v);
  test::WriteFile(path, b);
}

void PatchByte(const std::string& path, uint64_t offset, uint8_t v) {
  std::string b = test::ReadFile(path);
  ASSERT_LT(offset, b.size());
  b[offset] = static_cast<char>(v);
  test::WriteFile(path, b);
}

// Byte offsets of fields of the index header (docs/format.md).
constexpr uint64_t kNamesSizeField = 136;
constexpr uint64_t kMetaOffsetField = 144;
constexpr uint64_t kMetaSizeField = 152;
// The body checksum is the field just before the header checksum.
constexpr uint64_t kBodyChecksumField = IndexHeader::kBodyChecksumOffset;

// Recomputes the body checksum and the header checksum of an index, so a
// patched field is seen by the rule under test rather than by a checksum.
void ResealIndex(const std::string& index_path) {
  std::string b = test::ReadFile(index_path);
  ASSERT_GE(b.size(), IndexHeader::kEncodedLength);
  EncodeFixed64(&b[kBodyChecksumField],
                Checksum64(b.data() + IndexHeader::kEncodedLength,
                           b.size() - IndexHeader::kEncodedLength));
  EncodeFixed64(&b[IndexHeader::kHeaderChecksumOffset],
                Checksum64(b.data(), IndexHeader::kHeaderChecksumOffset));
  test::WriteFile(index_path, b);
}

// Byte offsets of the fields of a record entry (docs/format.md).
constexpr uint64_t kOffsetField = 0;
constexpr uint64_t kStoredLengthField = 8;
constexpr uint64_t kOriginalLengthField = 16;
constexpr uint64_t kChecksumField = 24;
constexpr uint64_t kNameOffsetField = 32;
constexpr uint64_t kNameLengthField = 40;
constexpr uint64_t kLabelField = 44;
constexpr uint64_t kCodecField = 52;

uint64_t RecordFieldAt(const IndexHeader& h, uint64_t record, uint64_t field) {
  return h.records.offset + record * RecordEntry::kEncodedLength + field;
}

// A pack of StandardItems() in <tmp>/pack, for tests that damage it.
class ReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    items_ = StandardItems();
    PackWriterOptions options;
    options.compress = true;
    Status s = WritePack(dir(), StandardClasses(), items_, options, &pack_id_);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  std::string dir() const { return tmp_ / "pack"; }
  std::string index_path() const { return dir() + "/index.ufs"; }
  std::string data_path() const { return dir() + "/data.ufs"; }

  std::unique_ptr<Reader> MustOpen(const ReaderOptions& options = {}) {
    std::unique_ptr<Reader> r;
    Status s = OpenPack(dir(), &r, options);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return r;
  }

  Status OpenStatus(const ReaderOptions& options = {}) {
    std::unique_ptr<Reader> r;
    Status s = OpenPack(dir(), &r, options);
    EXPECT_EQ(s.ok(), r != nullptr);
    return s;
  }

  TempDir tmp_;
  std::vector<Item> items_;
  PackId pack_id_;
};

// ---------------------------------------------------------------------------
// Round trips
// ---------------------------------------------------------------------------

TEST(ReaderRoundTripTest, RawRecordsReadBack) {
  TempDir tmp;
  const std::vector<Item> items = StandardItems();
  ASSERT_TRUE(WritePack(tmp / "p", StandardClasses(), items).ok());
  std::unique_ptr<Reader> r;
  ASSERT_TRUE(OpenPack(tmp / "p", &r).ok());
  ASSERT_EQ(r->size(), items.size());
  for (uint64_t i = 0; i < items.size(); ++i) {
    SCOPED_TRACE(items[i].name);
    Record rec;
    ASSERT_TRUE(r->GetRecord(i, &rec).ok());
    EXPECT_EQ(rec.codec, Codec::kRaw);
    std::string out;
    ASSERT_TRUE(r->Read(i, &out).ok());
    EXPECT_EQ(out, items[i].bytes);
  }
}

TEST(ReaderRoundTripTest, CompressedRecordsReadBack) {
  TempDir tmp;
  const std::vector<Item> items = StandardItems();
  PackWriterOptions options;
  options.compress = true;
  ASSERT_TRUE(WritePack(tmp / "p", StandardClasses(), items, options).ok());
  std::unique_ptr<Reader> r;
  ASSERT_TRUE(OpenPack(tmp / "p", &r).ok());
  Record text;
  ASSERT_TRUE(r->GetRecord(2, &text).ok());
  EXPECT_EQ(text.name, "cat/c.txt");
  EXPECT_EQ(text.codec, Codec::kZstd);
  EXPECT_LT(text.stored_length, text.original_length);
  EXPECT_EQ(text.original_length, 5000u);
  for (uint64_t i = 0; i < items.size(); ++i) {
    std::string out;
    ASSERT_TRUE(r->Read(i, &out).ok()) << i;
    EXPECT_EQ(out, items[i].bytes) << i;
  }
}

TEST(ReaderRoundTripTest, IncompressibleDataStaysRaw) {
  TempDir tmp;
  PackWriterOptions options;
  options.compress = true;
  options.flat = true;
  const std::string bytes = test::RandomBytes(64 * 1024, 9);
  ASSERT_TRUE(
      WritePack(tmp / "p", {}, {{"noise.bin", 0, bytes}}, options).ok());
  std::unique_ptr<Reader> r;
  ASSERT_TRUE(OpenPack(tmp / "p", &r).ok());
  Record rec;
  ASSERT_TRUE(r->GetRecord(0, &rec).ok());
  EXPECT_EQ(rec.codec, Codec::kRaw);
  EXPECT_EQ(rec.stored_length, bytes.size());
  EXPECT_EQ(rec.original_length, bytes.size());
  std::string out;
  ASSERT_TRUE(r->Read(0, &out).ok());
  EXPECT_EQ(out, bytes);
}

TEST(ReaderRoundTripTest, ZeroLengthRecords) {
  for (bool compress : {false, true}) {
    SCOPED_TRACE(compress);
    TempDir tmp;
    PackWriterOptions options;
    options.compress = compress;
    options.flat = true;
    ASSERT_TRUE(
        WritePack(tmp / "p", {},
                  {{"empty1", 0, ""}, {"one", 0, "x"}, {"empty2", 0, ""}},
                  options)
            .ok());
    std::unique_ptr<Reader> r;
    ASSERT_TRUE(OpenPack(tmp / "p", &r).ok());
    for (uint64_t i : {0, 2}) {
      Record rec;
      ASSERT_TRUE(r->GetRecord(i, &rec).ok());
      EXPECT_EQ(rec.codec, Codec::kRaw);
      EXPECT_EQ(rec.stored_length, 0u);
      EXPECT_EQ(rec.original_length, 0u);
      EXPECT_EQ(rec.checksum, Checksum64("", 0));
      std::string out = "stale";
      ASSERT_TRUE(r->Read(i, &out).ok());
      EXPECT_TRUE(out.empty());
      size_t length = 99;
      ASSERT_TRUE(r->Read(i, nullptr, 0, &length).ok());
      EXPECT_EQ(length, 0u);
    }
    std::string out;
    ASSERT_TRUE(r->Read(1, &out).ok());
    EXPECT_EQ(out, "x");
  }
}

TEST(ReaderRoundTripTest, EmptyPackOpensAndHasNothing) {
  TempDir tmp;
  PackWriterOptions options;
  options.flat = true;
  ASSERT_TRUE(WritePack(tmp / "p", {}, {}, options).ok());
  std::unique_ptr<Reader> r;
  Status s = OpenPack(tmp / "p", &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(r->size(), 0u);
  EXPECT_EQ(r->info().data_size, DataHeader::kEncodedLength);
  uint64_t index = 0;
  EXPECT_TRUE(r->Find("anything", &index).IsNotFound());
  Record rec;
  EXPECT_TRUE(r->GetRecord(0, &rec).IsOutOfRange());
  Batch batch;
  EXPECT_TRUE(r->ReadBatch(nullptr, 0, &batch).ok());
  EXPECT_EQ(batch.size(), 0u);
  EXPECT_TRUE(r->CheckIndex().ok());
}

TEST_F(ReaderTest, GetRecordFields) {
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  const std::string data = test::ReadFile(data_path());
  uint64_t expected_offset = DataHeader::kEncodedLength;
  for (uint64_t i = 0; i < items_.size(); ++i) {
    SCOPED_TRACE(i);
    Record rec;
    ASSERT_TRUE(r->GetRecord(i, &rec).ok());
    EXPECT_EQ(rec.index, i);
    EXPECT_EQ(rec.name, items_[i].name);
    EXPECT_EQ(rec.label, items_[i].label);
    EXPECT_EQ(rec.original_length, items_[i].bytes.size());
    // Records lie back to back after the 64-byte data header.
    EXPECT_EQ(rec.offset, expected_offset);
    expected_offset += rec.stored_length;
    const std::string stored = data.substr(rec.offset, rec.stored_length);
    EXPECT_EQ(rec.checksum, Checksum64(stored.data(), stored.size()));
    if (rec.codec == Codec::kRaw) {
      EXPECT_EQ(stored, items_[i].bytes);
    }
  }
  EXPECT_EQ(expected_offset, data.size());
}

TEST_F(ReaderTest, PackInfoDescribesThePack) {
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  const PackInfo& info = r->info();
  EXPECT_EQ(info.index_path, index_path());
  EXPECT_EQ(info.data_path, data_path());
  EXPECT_EQ(info.version, kFormatVersion);
  EXPECT_EQ(info.pack_id, pack_id_);
  EXPECT_EQ(info.record_count, 5u);
  EXPECT_EQ(info.class_count, 2u);
  EXPECT_EQ(r->class_count(), 2u);
  EXPECT_EQ(info.data_size, test::FileSize(data_path()));
  EXPECT_EQ(info.index_size, test::FileSize(index_path()));
  EXPECT_FALSE(info.flat);
  EXPECT_EQ(info.checksum_type, ChecksumType::kXXH3_64);
  EXPECT_TRUE(r->options().verify_checksums);
  EXPECT_FALSE(r->options().verify_index_checksum);
}

TEST_F(ReaderTest, GetClassNamesAndRanges) {
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  ClassInfo c;
  ASSERT_TRUE(r->GetClass(0, &c).ok());
  EXPECT_EQ(c.name, "cat");
  EXPECT_EQ(c.first_record, 0u);
  EXPECT_EQ(c.record_count, 3u);
  ASSERT_TRUE(r->GetClass(1, &c).ok());
  EXPECT_EQ(c.name, "dog");
  EXPECT_EQ(c.first_record, 3u);
  EXPECT_EQ(c.record_count, 2u);
}

TEST_F(ReaderTest, GetClassPastEndIsOutOfRange) {
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  ClassInfo c;
  Status s = r->GetClass(2, &c);
  EXPECT_TRUE(s.IsOutOfRange()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "class 2 out of range"));
}

TEST(ReaderFlatTest, FlatPackHasNoClassesAndNoLabels) {
  TempDir tmp;
  PackWriterOptions options;
  options.flat = true;
  ASSERT_TRUE(WritePack(tmp / "p", {}, StandardItems(), options).ok());
  std::unique_ptr<Reader> r;
  ASSERT_TRUE(OpenPack(tmp / "p", &r).ok());
  EXPECT_TRUE(r->info().flat);
  EXPECT_EQ(r->class_count(), 0u);
  Record rec;
  ASSERT_TRUE(r->GetRecord(3, &rec).ok());
  EXPECT_EQ(rec.label, kNoLabel);
  ClassInfo c;
  EXPECT_TRUE(r->GetClass(0, &c).IsOutOfRange());
  EXPECT_TRUE(r->CheckIndex().ok());
}

// ---------------------------------------------------------------------------
// Find
// ---------------------------------------------------------------------------

TEST_F(ReaderTest, FindReturnsEachRecordsIndex) {
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  for (uint64_t i = 0; i < items_.size(); ++i) {
    uint64_t found = 12345;
    Status s = r->Find(items_[i].name, &found);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(found, i);
  }
}

TEST_F(ReaderTest, FindMissIsNotFoundNamingTheName) {
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  uint64_t found = 77;
  for (const char* name : {"cat/z.jpg", "cat/a.jp", "cat/a.jpg/", "", "cat"}) {
    SCOPED_TRACE(name);
    Status s = r->Find(name, &found);
    EXPECT_TRUE(s.IsNotFound()) << s.ToString();
    EXPECT_TRUE(Contains(s.message(), std::string("'") + name + "'"));
    EXPECT_EQ(found, 77u);  // untouched
  }
}

TEST(ReaderFindTest, NamesWithOddBytes) {
  TempDir tmp;
  PackWriterOptions options;
  options.flat = true;
  const std::vector<Item> items = {
      {"with space/and 'quote'.jpg", 0, "a"},
      {"\xc3\xa9t\xc3\xa9/\xe7\x8c\xab.png", 0, "b"},  // UTF-8
      {std::string("nul\0inside", 10), 0, "c"},
      {"\x01\x7f\xff\\back", 0, "d"},
      {"nul", 0, "e"},  // a prefix of the NUL name
  };
  ASSERT_TRUE(WritePack(tmp / "p", {}, items, options).ok());
  std::unique_ptr<Reader> r;
  ASSERT_TRUE(OpenPack(tmp / "p", &r).ok());
  for (uint64_t i = 0; i < items.size(); ++i) {
    uint64_t found = 0;
    Status s = r->Find(items[i].name, &found);
    ASSERT_TRUE(s.ok()) << i << ": " << s.ToString();
    EXPECT_EQ(found, i);
    Record rec;
    ASSERT_TRUE(r->GetRecord(i, &rec).ok());
    EXPECT_EQ(rec.name, items[i].name);
  }
  uint64_t found = 0;
  Status s = r->Find(std::string("nul\0insidE", 10), &found);
  EXPECT_TRUE(s.IsNotFound());
  // Messages stay one printable line: control bytes are escaped.
  s = r->Find("bad\nname\x01", &found);
  EXPECT_TRUE(s.IsNotFound());
  EXPECT_TRUE(Contains(s.message(), "bad\\x0aname\\x01"));
  EXPECT_EQ(s.message().find('\n'), std::string_view::npos);
}

TEST(ReaderFindTest, FindsEveryNameInALargerPack) {
  TempDir tmp;
  const std::vector<Item> items = ManyItems(300);
  ASSERT_TRUE(WritePack(tmp / "p", StandardClasses(), items).ok());
  std::unique_ptr<Reader> r;
  ASSERT_TRUE(OpenPack(tmp / "p", &r).ok());
  for (uint64_t i = 0; i < items.size(); ++i) {
    uint64_t found = 0;
    ASSERT_TRUE(r->Find(items[i].name, &found).ok()) << items[i].name;
    EXPECT_EQ(found, i);
  }
  uint64_t found = 0;
  EXPECT_TRUE(r->Find("f/300.bin", &found).IsNotFound());
}

// FindMany and GetRecords give the answers of Find and GetRecord, whatever
// the batch length (groups of 16 inside: full, partial, several), with
// absent names in between.
TEST(ReaderFindTest, FindManyAndGetRecordsMatchTheSingleCalls) {
  TempDir tmp;
  const std::vector<Item> items = ManyItems(300);
  ASSERT_TRUE(WritePack(tmp / "p", StandardClasses(), items).ok());
  std::unique_ptr<Reader> r;
  ASSERT_TRUE(OpenPack(tmp / "p", &r).ok());
  std::vector<std::string> names;
  std::vector<uint64_t> expect;
  for (uint64_t i = 0; i < items.size(); ++i) {
    const uint64_t at = (i * 37) % items.size();  // out of index order
    names.push_back(items[at].name);
    expect.push_back(at);
    if (i % 7 == 0) {
      names.push_back(items[at].name + "x");
      expect.push_back(Reader::kNoRecord);
    }
  }
  names.push_back("");
  expect.push_back(Reader::kNoRecord);
  const std::vector<std::string_view> views(names.begin(), names.end());
  for (size_t count : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{17},
                       size_t{33}, views.size()}) {
    SCOPED_TRACE(count);
    std::vector<uint64_t> got(count + 1, 99);
    ASSERT_TRUE(r->FindMany(views.data(), count, got.data()).ok());
    for (size_t k = 0; k < count; ++k) EXPECT_EQ(got[k], expect[k]) << k;
    EXPECT_EQ(got[count], 99u);  // nothing past count written
  }
  std::vector<uint64_t> indices;
  for (uint64_t i = 0; i < items.size(); ++i)
    indices.push_back((i * 101) % items.size());
  std::vector<Record> recs(indices.size());
  ASSERT_TRUE(r->GetRecords(indices.data(), indices.size(), recs.data()).ok());
  for (size_t k = 0; k < indices.size(); ++k) {
    Record one;
    ASSERT_TRUE(r->GetRecord(indices[k], &one).ok());
    EXPECT_EQ(recs[k].index, indices[k]);
    EXPECT_EQ(recs[k].name, one.name);
    EXPECT_EQ(recs[k].offset, one.offset);
    EXPECT_EQ(recs[k].checksum, one.checksum);
    EXPECT_EQ(recs[k].label, one.label);
  }
  // The first error is GetRecord's: an index past the end.
  indices[20] = items.size();
  Status s = r->GetRecords(indices.data(), indices.size(), recs.data());
  EXPECT_TRUE(s.IsOutOfRange()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "record 300 out of range"));
}

// ---------------------------------------------------------------------------
// Read
// ---------------------------------------------------------------------------

TEST_F(ReaderTest, ReadIntoCallerBuffer) {
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  for (uint64_t i = 0; i < items_.size(); ++i) {
    SCOPED_TRACE(i);
    const std::string& want = items_[i].bytes;
    // Exactly the record's size, and a larger buffer.
    for (size_t extra : {size_t{0}, size_t{17}}) {
      std::vector<char> buf(want.size() + extra, '#');
      size_t length = 0;
      ASSERT_TRUE(r->Read(i, buf.data(), buf.size(), &length).ok());
      EXPECT_EQ(length, want.size());
      EXPECT_EQ(std::string(buf.data(), length), want);
      // Bytes past the record are left alone.
      EXPECT_EQ(std::count(buf.begin() + length, buf.end(), '#'),
                static_cast<long>(extra));
    }
  }
}

TEST_F(ReaderTest, ReadBufferTooSmallIsInvalidArgument) {
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  for (uint64_t i : {0, 2}) {  // a raw and a zstd record
    SCOPED_TRACE(i);
    const size_t need = items_[i].bytes.size();
    std::vector<char> buf(need - 1);
    size_t length = 12345;
    Status s = r->Read(i, buf.data(), buf.size(), &length);
    EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
    EXPECT_TRUE(Contains(s.message(), "record " + std::to_string(i)));
    EXPECT_TRUE(Contains(s.message(), items_[i].name));
    EXPECT_TRUE(Contains(s.message(), "needs " + std::to_string(need)));
    EXPECT_TRUE(Contains(s.message(), "holds " + std::to_string(need - 1)));
    EXPECT_EQ(length, 12345u);
  }
}

TEST_F(ReaderTest, ReadStringReplacesContents) {
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  std::string out(100000, 'z');
  ASSERT_TRUE(r->Read(4, &out).ok());
  EXPECT_EQ(out, items_[4].bytes);
  ASSERT_TRUE(r->Read(2, &out).ok());
  EXPECT_EQ(out, items_[2].bytes);
}

TEST_F(ReaderTest, ReadDecodedRecord) {
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  for (uint64_t i = 0; i < items_.size(); ++i) {
    Record rec;
    ASSERT_TRUE(r->GetRecord(i, &rec).ok());
    std::string buf(rec.original_length, '\0');
    ASSERT_TRUE(r->Read(rec, buf.data(), buf.size()).ok()) << i;
    EXPECT_EQ(buf, items_[i].bytes) << i;
  }
}

TEST_F(ReaderTest, IndexPastEndIsOutOfRange) {
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  Record rec;
  Status s = r->GetRecord(5, &rec);
  EXPECT_TRUE(s.IsOutOfRange()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "record 5 out of range"));
  EXPECT_TRUE(Contains(s.message(), "5 records"));
  std::string out;
  EXPECT_TRUE(r->Read(5, &out).IsOutOfRange());
  EXPECT_TRUE(r->Read(UINT64_MAX, &out).IsOutOfRange());
  char buf[8];
  size_t length = 0;
  EXPECT_TRUE(r->Read(UINT64_MAX, buf, sizeof(buf), &length).IsOutOfRange());
}

TEST_F(ReaderTest, ReadBatchSerialMatchesSingleReads) {
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  const std::vector<uint64_t> indices = {4, 0, 2, 2, 1, 3, 0};
  Batch batch;
  ASSERT_TRUE(r->ReadBatch(indices.data(), indices.size(), &batch).ok());
  ASSERT_EQ(batch.size(), indices.size());
  for (size_t k = 0; k < indices.size(); ++k) {
    std::string single;
    ASSERT_TRUE(r->Read(indices[k], &single).ok());
    EXPECT_EQ(batch.get(k), single) << k;
    EXPECT_EQ(batch.get(k), items_[indices[k]].bytes) << k;
  }
  EXPECT_EQ(batch.offsets.front(), 0u);
  EXPECT_EQ(batch.offsets.back(), batch.data.size());
}

TEST(ReaderBatchTest, ReadBatchWithFourThreadsMatchesSingleReads) {
  TempDir tmp;
  PackWriterOptions options;
  options.compress = true;
  const std::vector<Item> items = ManyItems(120);
  ASSERT_TRUE(WritePack(tmp / "p", StandardClasses(), items, options).ok());
  std::unique_ptr<Reader> r;
  ASSERT_TRUE(OpenPack(tmp / "p", &r).ok());
  std::vector<uint64_t> indices(items.size());
  std::iota(indices.begin(), indices.end(), 0);
  std::mt19937 rng(42);
  std::shuffle(indices.begin(), indices.end(), rng);
  indices.push_back(indices[0]);  // a repeat
  Batch serial, parallel;
  ASSERT_TRUE(r->ReadBatch(indices.data(), indices.size(), &serial, 1).ok());
  ASSERT_TRUE(r->ReadBatch(indices.data(), indices.size(), &parallel, 4).ok());
  EXPECT_EQ(parallel.offsets, serial.offsets);
  EXPECT_EQ(parallel.data, serial.data);
  for (size_t k = 0; k < indices.size(); ++k) {
    std::string single;
    ASSERT_TRUE(r->Read(indices[k], &single).ok());
    ASSERT_EQ(parallel.get(k), single) << k;
    ASSERT_EQ(single, items[indices[k]].bytes) << k;
  }
}

TEST_F(ReaderTest, ReadBatchOutOfRangeIsOutOfRange) {
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  const uint64_t indices[] = {0, 1, 9};
  for (int threads : {1, 4}) {
    Batch batch;
    ASSERT_TRUE(r->ReadBatch(indices, 2, &batch, threads).ok());  // reused
    Status s = r->ReadBatch(indices, 3, &batch, threads);
    EXPECT_TRUE(s.IsOutOfRange()) << s.ToString();
    EXPECT_TRUE(Contains(s.message(), "record 9"));
    EXPECT_EQ(batch.size(), 0u);  // no partial batch
  }
}

TEST_F(ReaderTest, ReadBatchStopsAtDamagedRecord) {
  {
    std::unique_ptr<Reader> r = MustOpen();
    ASSERT_NE(r, nullptr);
    Record rec;
    ASSERT_TRUE(r->GetRecord(3, &rec).ok());
    test::FlipByte(data_path(), rec.offset + 10);
  }
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  const uint64_t indices[] = {0, 3, 4, 2};
  for (int threads : {1, 4}) {
    SCOPED_TRACE(threads);
    Batch batch;
    Status s = r->ReadBatch(indices, 4, &batch, threads);
    EXPECT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_TRUE(Contains(s.message(), "dog/x.jpg"));
    EXPECT_EQ(batch.size(), 0u);  // no partial batch
  }
}

// ---------------------------------------------------------------------------
// Opening: paths
// ---------------------------------------------------------------------------

TEST_F(ReaderTest, OpenByDirectory) {
  std::unique_ptr<Reader> r;
  Status s = OpenPack(dir(), &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(r->info().index_path, index_path());
  std::string out;
  ASSERT_TRUE(r->Read(0, &out).ok());
  EXPECT_EQ(out, items_[0].bytes);
}

TEST_F(ReaderTest, OpenByDirectoryWithTrailingSlash) {
  std::unique_ptr<Reader> r;
  Status s = OpenPack(dir() + "//", &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(r->info().index_path, index_path());
  EXPECT_EQ(r->info().data_path, data_path());
}

TEST_F(ReaderTest, OpenByIndexPath) {
  std::unique_ptr<Reader> r;
  Status s = OpenPack(index_path(), &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(r->info().index_path, index_path());
  EXPECT_EQ(r->info().data_path, data_path());
  std::string out;
  ASSERT_TRUE(r->Read(3, &out).ok());
  EXPECT_EQ(out, items_[3].bytes);
}

TEST_F(ReaderTest, OpenByRenamedIndexPathUsesDataBesideIt) {
  ASSERT_EQ(std::rename(index_path().c_str(), (dir() + "/train.idx").c_str()),
            0);
  std::unique_ptr<Reader> r;
  Status s = OpenPack(dir() + "/train.idx", &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(r->info().data_path, data_path());
}

TEST(ReaderOpenTest, MissingPackIsNotFound) {
  TempDir tmp;
  std::unique_ptr<Reader> r;
  Status s = OpenPack(tmp / "nope", &r);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), tmp / "nope"));
  EXPECT_EQ(r, nullptr);
}

TEST(ReaderOpenTest, DirectoryWithoutIndexIsNotFound) {
  TempDir tmp;
  test::MakeDirs(tmp / "empty");
  std::unique_ptr<Reader> r;
  Status s = OpenPack(tmp / "empty", &r);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "index.ufs"));
}

TEST_F(ReaderTest, MissingDataFileIsNotFound) {
  ASSERT_EQ(::unlink(data_path().c_str()), 0);
  Status s = OpenStatus();
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), data_path()));
}

// A FIFO in place of either pack file (or of the .data.ufs.prev the reader
// falls back to) is refused by type, naming it, and never blocks the open:
// a FIFO with no writer would block open(2) forever.
class ReaderFifoTest : public ReaderTest {
 protected:
  // Replaces `path` with a FIFO and opens the pack; fails the test if the
  // open blocked.
  Status OpenWithFifoAt(const std::string& path) {
    EXPECT_EQ(::unlink(path.c_str()), 0) << path;
    test::MakeFifo(path);
    Status s;
    EXPECT_TRUE(test::ReturnsWithin(10, [&] { s = OpenStatus(); }, {path}))
        << "Reader::Open blocked on the FIFO " << path;
    return s;
  }
};

TEST_F(ReaderFifoTest, IndexFifoIsRefusedWithoutBlocking) {
  Status s = OpenWithFifoAt(index_path());
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_EQ(s.message(), index_path() + ": not a regular file (FIFO)");
}

TEST_F(ReaderFifoTest, IndexFifoGivenByPathIsRefusedWithoutBlocking) {
  ASSERT_EQ(::unlink(index_path().c_str()), 0);
  test::MakeFifo(index_path());
  Status s;
  std::unique_ptr<Reader> r;
  EXPECT_TRUE(test::ReturnsWithin(10, [&] { s = OpenPack(index_path(), &r); },
                                  {index_path()}));
  EXPECT_EQ(s.message(), index_path() + ": not a regular file (FIFO)");
}

TEST_F(ReaderFifoTest, DataFifoIsRefusedWithoutBlocking) {
  Status s = OpenWithFifoAt(data_path());
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_EQ(s.message(), data_path() + ": not a regular file (FIFO)");
}

// The fallback is tried when data.ufs belongs to another pack (a build
// killed between its two renames): a FIFO there must not block it either,
// and the error is the one about data.ufs.
TEST_F(ReaderFifoTest, PrevDataFifoIsIgnoredWithoutBlocking) {
  TempDir other;
  std::vector<Item> items = StandardItems();
  items[0].bytes = test::RandomBytes(1000, 100);  // a different pack
  ASSERT_TRUE(WritePack(other / "p", StandardClasses(), items).ok());
  ASSERT_EQ(std::rename((other / "p/data.ufs").c_str(), data_path().c_str()),
            0);
  const std::string prev = dir() + "/" + kPrevDataFileName;
  test::WriteFile(prev, "");
  Status s = OpenWithFifoAt(prev);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "not one pack"));
}

// ---------------------------------------------------------------------------
// Opening: one test per validation rule
// ---------------------------------------------------------------------------

TEST_F(ReaderTest, JpegAsIndexIsBadMagic) {
  std::string jpeg("\xFF\xD8\xFF\xE0\x00\x10JFIF\x00\x01\x01", 13);
  jpeg += test::RandomBytes(500, 5);
  test::WriteFile(index_path(), jpeg);
  Status s = OpenStatus();
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "not a ufspack index"));
  EXPECT_TRUE(Contains(s.message(), index_path()));
}

TEST_F(ReaderTest, DataFileGivenAsIndexIsBadMagic) {
  std::unique_ptr<Reader> r;
  Status s = OpenPack(data_path(), &r);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "not a ufspack index"));
  EXPECT_TRUE(Contains(s.message(), data_path()));
}

TEST_F(ReaderTest, IndexGivenAsDataIsBadMagic) {
  ASSERT_EQ(std::rename(index_path().c_str(), data_path().c_str()), 0);
  test::WriteFile(index_path(), test::ReadFile(data_path()));
  // Now both files hold the index; the data file has the wrong magic.
  Status s = OpenStatus();
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "not a ufspack data file"));
  EXPECT_TRUE(Contains(s.message(), data_path()));
}

TEST_F(ReaderTest, EmptyIndexFileIsCorruption) {
  test::Truncate(index_path(), 0);
  Status s = OpenStatus();
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "empty"));
  EXPECT_TRUE(Contains(s.message(), index_path()));
}

TEST_F(ReaderTest, EmptyDataFileIsCorruption) {
  test::Truncate(data_path(), 0);
  Status s = OpenStatus();
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), data_path()));
}

TEST_F(ReaderTest, UnsupportedIndexVersionIsNotSupported) {
  // The version is checked before the header checksum, so patching the
  // version alone (leaving the checksum stale) reports the version.
  Patch32(index_path(), 8, 2);
  Status s = OpenStatus();
  EXPECT_TRUE(s.IsNotSupported()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "version 2"));
  EXPECT_TRUE(Contains(s.message(), index_path()));
}

TEST_F(ReaderTest, UnsupportedIndexVersionWithValidChecksumIsNotSupported) {
  // As a newer writer would produce it: header checksum recomputed.
  Patch32(index_path(), 8, 3);
  ResealIndex(index_path());
  Status s = OpenStatus();
  EXPECT_TRUE(s.IsNotSupported()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "version 3"));
  EXPECT_TRUE(Contains(s.message(), "this build reads 1..1"));
}

TEST_F(ReaderTest, UnsupportedDataVersionIsNotSupported) {
  Patch32(data_path(), 8, 2);
  Status s = OpenStatus();
  EXPECT_TRUE(s.IsNotSupported()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "version 2"));
  EXPECT_TRUE(Contains(s.message(), data_path()));
}

TEST_F(ReaderTest, IndexHeaderChecksumMismatchIsCorruption) {
  test::FlipByte(index_path(), 64);  // data size field
  Status s = OpenStatus();
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "header checksum mismatch"));
}

TEST_F(ReaderTest, UnknownRequiredFlagIsNotSupported) {
  Patch32(index_path(), 16, 1u << 4);
  ResealIndex(index_path());
  Status s = OpenStatus();
  EXPECT_TRUE(s.IsNotSupported()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "required flags"));
}

TEST_F(ReaderTest, UnknownOptionalFlagIsIgnored) {
  Patch32(index_path(), 20, 1u << 20);
  ResealIndex(index_path());
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->info().optional_flags, 1u << 20);
  std::string out;
  ASSERT_TRUE(r->Read(0, &out).ok());
  EXPECT_EQ(out, items_[0].bytes);
}

TEST_F(ReaderTest, TruncatedIndexHeaderIsCorruption) {
  test::Truncate(index_path(), 100);
  Status s = OpenStatus();
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "truncated"));
  EXPECT_TRUE(Contains(s.message(), index_path()));
}

TEST_F(ReaderTest, TruncatedIndexBodyIsCorruption) {
  const uint64_t size = test::FileSize(index_path());
  test::Truncate(index_path(), size - 1);
  Status s = OpenStatus();
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "truncated"));
  EXPECT_TRUE(Contains(s.message(), "expected " + std::to_string(size)));
  EXPECT_TRUE(Contains(s.message(), "found " + std::to_string(size - 1)));
}

TEST_F(ReaderTest, IndexWithTrailingBytesIsCorruption) {
  const uint64_t size = test::FileSize(index_path());
  test::WriteFile(index_path(), test::ReadFile(index_path()) + "x");
  Status s = OpenStatus();
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "expected " + std::to_string(size)));
  EXPECT_TRUE(Contains(s.message(), "found " + std::to_string(size + 1)));
}

TEST_F(ReaderTest, SectionPastEndOfIndexIsCorruption) {
  const IndexHeader h = ReadIndexHeader(index_path());
  Patch64(index_path(), kNamesSizeField, h.names.size + 1);
  ResealIndex(index_path());
  Status s = OpenStatus();
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "name pool"));
  EXPECT_TRUE(Contains(s.message(), index_path()));
}

TEST_F(ReaderTest, SwappedDataFilesAreCorruptionNamingBothPackIds) {
  TempDir other;
  PackId other_id;
  std::vector<Item> items = StandardItems();
  items[0].bytes = test::RandomBytes(1000, 100);  // a different pack
  ASSERT_TRUE(
      WritePack(other / "p", StandardClasses(), items, {}, &other_id).ok());
  ASSERT_NE(other_id, pack_id_);
  ASSERT_EQ(std::rename((other / "p/data.ufs").c_str(), data_path().c_str()),
            0);
  Status s = OpenStatus();
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "not one pack"));
  EXPECT_TRUE(Contains(s.message(), pack_id_.ToHex()));
  EXPECT_TRUE(Contains(s.message(), other_id.ToHex()));
  EXPECT_TRUE(Contains(s.message(), index_path()));
  EXPECT_TRUE(Contains(s.message(), data_path()));
}

TEST_F(ReaderTest, DataLargerThanRecordedIsCorruption) {
  const uint64_t size = test::FileSize(data_path());
  test::WriteFile(data_path(), test::ReadFile(data_path()) + "!");
  Status s = OpenStatus();
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), data_path()));
  EXPECT_TRUE(Contains(s.message(), "expected " + std::to_string(size)));
  EXPECT_TRUE(Contains(s.message(), "found " + std::to_string(size + 1)));
}

TEST_F(ReaderTest, TruncatedDataIsCorruption) {
  const uint64_t size = test::FileSize(data_path());
  test::Truncate(data_path(), size - 1);
  Status s = OpenStatus();
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "found " + std::to_string(size - 1)));
}

// --- Bad-input catalogue: the index header ---------------------------------

TEST_F(ReaderTest, IndexTruncatedAtEveryLengthIsCorruption) {
  // Every prefix of a good index, from empty to one byte short: Corruption
  // naming the index file, never a crash or an out-of-bounds read.
  const std::string index = test::ReadFile(index_path());
  for (size_t n = 0; n < index.size(); ++n) {
    SCOPED_TRACE("length " + std::to_string(n));
    test::WriteFile(index_path(), index.substr(0, n));
    Status s = OpenStatus();
    EXPECT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_TRUE(Contains(s.message(), index_path()));
    if (n >= 8 && n < IndexHeader::kEncodedLength) {
      EXPECT_TRUE(Contains(s.message(), "truncated"));
    } else if (n >= IndexHeader::kEncodedLength) {
      EXPECT_TRUE(Contains(
          s.message(), "expected " + std::to_string(index.size()) + " bytes"));
    }
  }
}

TEST_F(ReaderTest, RecordAndClassCountsThatWouldOverflowAreCorruption) {
  // Counts whose table size (count * entry size) wraps around to the real
  // table size, and counts at the format limit that the file cannot hold.
  const IndexHeader h = ReadIndexHeader(index_path());
  ASSERT_EQ(h.records.size, 5u * RecordEntry::kEncodedLength);
  ASSERT_EQ(h.classes.size, 2u * ClassEntry::kEncodedLength);
  const std::string good = test::ReadFile(index_path());
  struct Case {
    uint64_t field;
    uint64_t value;
    std::string expect;
  };
  const std::vector<Case> cases = {
      // (5 + 2^61) * 56 == 280 (mod 2^64).
      {48, 5 + (1ull << 61), "record count 2305843009213693957 exceeds"},
      {48, UINT64_MAX, "record count 18446744073709551615 exceeds"},
      {48, kMaxRecords, "record table size: expected"},
      {48, 6, "record table size: expected 336, found 280"},
      // (2 + 2^59) * 32 == 64 (mod 2^64).
      {56, 2 + (1ull << 59), "class count 576460752303423490 exceeds"},
      {56, kNoLabel, "class count 4294967295 exceeds"},
      {56, 3, "class table size: expected 96, found 64"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.expect);
    test::WriteFile(index_path(), good);
    Patch64(index_path(), c.field, c.value);
    ResealIndex(index_path());
    Status s = OpenStatus();
    EXPECT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_TRUE(Contains(s.message(), index_path()));
    EXPECT_TRUE(Contains(s.message(), c.expect));
  }
}

TEST_F(ReaderTest, SectionOffsetsThatWrapOrExceedTheIndexAreCorruption) {
  const IndexHeader h = ReadIndexHeader(index_path());
  const std::string good = test::ReadFile(index_path());
  const char* names[5] = {"record table", "class table", "lookup table",
                          "name pool", "metadata"};
  for (int k = 0; k < 5; ++k) {
    const uint64_t offset_field = 80 + 16 * k;
    const uint64_t size_field = offset_field + 8;
    const uint64_t size = DecodeFixed64(good.data() + size_field);
    // Offset near 2^64: offset + size wraps to a small number.
    for (uint64_t offset : {UINT64_MAX, UINT64_MAX - size + 1, h.index_size + 1,
                            uint64_t{0}, uint64_t{175}}) {
      SCOPED_TRACE(std::string(names[k]) + " at " + std::to_string(offset));
      test::WriteFile(index_path(), good);
      Patch64(index_path(), offset_field, offset);
      ResealIndex(index_path());
      Status s = OpenStatus();
      EXPECT_TRUE(s.IsCorruption()) << s.ToString();
      EXPECT_TRUE(Contains(s.message(), index_path()));
      EXPECT_TRUE(Contains(s.message(), names[k]));
    }
  }
  // The two sections of any size: a size that wraps offset + size around.
  for (uint64_t size_field : {kNamesSizeField, kMetaSizeField}) {
    const uint64_t offset = DecodeFixed64(good.data() + size_field - 8);
    for (uint64_t size :
         {UINT64_MAX, UINT64_MAX - offset + 1, h.index_size - offset + 1}) {
      SCOPED_TRACE("size field " + std::to_string(size_field) + " = " +
                   std::to_string(size));
      test::WriteFile(index_path(), good);
      Patch64(index_path(), size_field, size);
      ResealIndex(index_path());
      Status s = OpenStatus();
      EXPECT_TRUE(s.IsCorruption()) << s.ToString();
      EXPECT_TRUE(Contains(s.message(), "lies outside the index"));
    }
  }
}

TEST_F(ReaderTest, RecordedFileSizesThatAreImpossibleAreCorruption) {
  const std::string good = test::ReadFile(index_path());
  const uint64_t index_size = good.size();
  const uint64_t data_size = test::FileSize(data_path());
  struct Case {
    uint64_t field;
    uint64_t value;
    std::string expect;  // names the file whose size is wrong
  };
  const std::vector<Case> cases = {
      {72, UINT64_MAX, index_path() + ": size: expected 18446744073709551615"},
      {72, index_size + 1, "found " + std::to_string(index_size)},
      {72, 100, "index size 100 is smaller than the index header"},
      {64, UINT64_MAX, data_path() + ": size: expected 18446744073709551615"},
      {64, data_size - 1, "found " + std::to_string(data_size)},
      {64, 63, "data size 63 is smaller than the data header"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.expect);
    test::WriteFile(index_path(), good);
    Patch64(index_path(), c.field, c.value);
    ResealIndex(index_path());
    Status s = OpenStatus();
    EXPECT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_TRUE(Contains(s.message(), c.expect));
  }
}

TEST_F(ReaderTest, OtherPacksDataOfExactlyTheSameSizeIsCorruption) {
  // Same names, same sizes, same options: only the bytes of one record
  // differ, so the data files have exactly the same size.  Only the pack
  // id tells them apart.
  TempDir other;
  PackId other_id;
  std::vector<Item> items = StandardItems();
  items[3].bytes = test::RandomBytes(items[3].bytes.size(), 1234);
  PackWriterOptions options;
  options.compress = true;
  ASSERT_TRUE(
      WritePack(other / "p", StandardClasses(), items, options, &other_id)
          .ok());
  ASSERT_EQ(test::FileSize(other / "p/data.ufs"), test::FileSize(data_path()));
  ASSERT_NE(other_id, pack_id_);
  ASSERT_EQ(std::rename((other / "p/data.ufs").c_str(), data_path().c_str()),
            0);
  Status s = OpenStatus();
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "not one pack"));
  EXPECT_TRUE(Contains(s.message(), index_path()));
  EXPECT_TRUE(Contains(s.message(), data_path()));
  EXPECT_TRUE(Contains(s.message(), pack_id_.ToHex()));
  EXPECT_TRUE(Contains(s.message(), other_id.ToHex()));
}

TEST_F(ReaderTest, ForeignDataWithForgedPackIdNeverYieldsWrongBytes) {
  // Worst case of a mismatched pair: the other data file has the same size
  // and someone copied our pack id into its header.  Open cannot tell, but
  // every record whose bytes differ fails its checksum; the others are
  // (byte for byte) the right ones.
  TempDir other;
  std::vector<Item> items = StandardItems();
  items[3].bytes = test::RandomBytes(items[3].bytes.size(), 1234);
  items[0].bytes = test::RandomBytes(items[0].bytes.size(), 4321);
  PackWriterOptions options;
  options.compress = true;
  ASSERT_TRUE(WritePack(other / "p", StandardClasses(), items, options).ok());
  std::string data = test::ReadFile(other / "p/data.ufs");
  ASSERT_EQ(data.size(), test::FileSize(data_path()));
  std::memcpy(&data[16], pack_id_.bytes.data(), 16);
  test::WriteFile(data_path(), data);
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  for (uint64_t i = 0; i < items_.size(); ++i) {
    SCOPED_TRACE(i);
    std::string out;
    Status s = r->Read(i, &out);
    if (i == 0 || i == 3) {
      EXPECT_TRUE(s.IsCorruption()) << s.ToString();
      EXPECT_TRUE(Contains(s.message(), "checksum mismatch"));
      EXPECT_TRUE(Contains(s.message(), data_path()));
      EXPECT_TRUE(Contains(s.message(), "record " + std::to_string(i) + " '" +
                                            items_[i].name + "' at offset"));
      EXPECT_TRUE(out.empty());
    } else {
      ASSERT_TRUE(s.ok()) << s.ToString();
      EXPECT_EQ(out, items_[i].bytes);
    }
  }
}

TEST_F(ReaderTest, VerifyIndexChecksumCatchesNamePoolFlipAtOpen) {
  const IndexHeader h = ReadIndexHeader(index_path());
  const std::string bytes = test::ReadFile(index_path());
  const uint64_t name_offset =
      DecodeFixed64(bytes.data() + RecordFieldAt(h, 0, kNameOffsetField));
  test::FlipByte(index_path(),
                 h.names.offset + name_offset + 1);  // "cat/a.jpg"
  ReaderOptions verify;
  verify.verify_index_checksum = true;
  Status s = OpenStatus(verify);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "body checksum mismatch"));
  EXPECT_TRUE(Contains(s.message(), index_path()));
  // Without the option Open stays O(1) and succeeds; the damaged name is
  // caught when its record is used.
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  Record rec;
  s = r->GetRecord(0, &rec);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "record 0"));
  EXPECT_TRUE(Contains(s.message(), "name hash mismatch"));
  EXPECT_TRUE(r->GetRecord(1, &rec).ok());
}

TEST_F(ReaderTest, VerifyIndexChecksumAcceptsGoodPack) {
  ReaderOptions verify;
  verify.verify_index_checksum = true;
  std::unique_ptr<Reader> r = MustOpen(verify);
  EXPECT_NE(r, nullptr);
}

// --- Damaged record entries: caught when the record is used ---------------

TEST_F(ReaderTest, RecordPastEndOfDataIsCorruption) {
  const IndexHeader h = ReadIndexHeader(index_path());
  Patch64(index_path(), RecordFieldAt(h, 3, kOffsetField), h.data_size - 1);
  std::unique_ptr<Reader> r = MustOpen();  // Open does not parse records
  ASSERT_NE(r, nullptr);
  Record rec;
  Status s = r->GetRecord(3, &rec);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), index_path()));
  EXPECT_TRUE(Contains(s.message(), "record 3 'dog/x.jpg'"));
  EXPECT_TRUE(
      Contains(s.message(),
               "offset " + std::to_string(h.data_size - 1) + " + length 3000"));
  EXPECT_TRUE(Contains(s.message(), std::to_string(h.data_size)));
  std::string out;
  EXPECT_TRUE(r->Read(3, &out).IsCorruption());
  EXPECT_TRUE(out.empty());
  // Other records are unaffected.
  ASSERT_TRUE(r->Read(4, &out).ok());
  EXPECT_EQ(out, items_[4].bytes);
}

TEST_F(ReaderTest, RecordOffsetNearMaxDoesNotWrap) {
  const IndexHeader h = ReadIndexHeader(index_path());
  Patch64(index_path(), RecordFieldAt(h, 0, kOffsetField),
          UINT64_MAX - 500);  // + 1000 wraps around
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  std::string out;
  Status s = r->Read(0, &out);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "outside the data area"));
}

TEST_F(ReaderTest, RecordInsideDataHeaderIsCorruption) {
  const IndexHeader h = ReadIndexHeader(index_path());
  Patch64(index_path(), RecordFieldAt(h, 4, kOffsetField), 0);
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  Record rec;
  Status s = r->GetRecord(4, &rec);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "outside the data area [64, "));
}

TEST_F(ReaderTest, LabelAtClassCountIsCorruption) {
  const IndexHeader h = ReadIndexHeader(index_path());
  Patch32(index_path(), RecordFieldAt(h, 1, kLabelField), 2);
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  Record rec;
  Status s = r->GetRecord(1, &rec);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "record 1 'cat/b.jpg'"));
  EXPECT_TRUE(Contains(s.message(), "label 2 >= class count 2"));
}

TEST(ReaderFlatTest, LabelInFlatPackIsCorruption) {
  TempDir tmp;
  PackWriterOptions options;
  options.flat = true;
  ASSERT_TRUE(WritePack(tmp / "p", {}, StandardItems(), options).ok());
  const std::string index = tmp / "p/index.ufs";
  const IndexHeader h = ReadIndexHeader(index);
  Patch32(index, RecordFieldAt(h, 0, kLabelField), 0);
  std::unique_ptr<Reader> r;
  ASSERT_TRUE(OpenPack(tmp / "p", &r).ok());
  Record rec;
  Status s = r->GetRecord(0, &rec);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "no classes"));
}

TEST_F(ReaderTest, NameReferenceOutOfRangeIsCorruption) {
  const IndexHeader h = ReadIndexHeader(index_path());
  // Starts inside the pool, runs one byte past its end.
  Patch64(index_path(), RecordFieldAt(h, 2, kNameOffsetField),
          h.names.size - 5);
  Patch32(index_path(), RecordFieldAt(h, 2, kNameLengthField), 6);
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  Record rec;
  Status s = r->GetRecord(2, &rec);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "record 2"));
  EXPECT_TRUE(Contains(
      s.message(),
      "exceeds the name pool (" + std::to_string(h.names.size) + " bytes)"));
}

TEST_F(ReaderTest, HugeNameReferenceDoesNotWrap) {
  const IndexHeader h = ReadIndexHeader(index_path());
  Patch64(index_path(), RecordFieldAt(h, 2, kNameOffsetField), UINT64_MAX);
  Patch32(index_path(), RecordFieldAt(h, 3, kNameLengthField), UINT32_MAX);
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  Record rec;
  EXPECT_TRUE(r->GetRecord(2, &rec).IsCorruption());
  EXPECT_TRUE(r->GetRecord(3, &rec).IsCorruption());
  EXPECT_TRUE(r->GetRecord(4, &rec).ok());
}

TEST_F(ReaderTest, UnknownCodecIsCorruption) {
  const IndexHeader h = ReadIndexHeader(index_path());
  PatchByte(index_path(), RecordFieldAt(h, 0, kCodecField), 5);
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  std::string out;
  Status s = r->Read(0, &out);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "record 0"));
  EXPECT_TRUE(Contains(s.message(), "unknown codec 5"));
}

TEST_F(ReaderTest, ZstdRecordClaimingHugeLengthIsCorruption) {
  const IndexHeader h = ReadIndexHeader(index_path());
  Patch64(index_path(), RecordFieldAt(h, 2, kOriginalLengthField), UINT64_MAX);
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  std::string out;
  Status s = r->Read(2, &out);  // must not try to allocate 2^64 bytes
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "cannot expand"));
}

TEST_F(ReaderTest, ZstdLengthDisagreeingWithFrameIsCorruption) {
  const IndexHeader h = ReadIndexHeader(index_path());
  Patch64(index_path(), RecordFieldAt(h, 2, kOriginalLengthField), 5001);
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  std::string out;
  Status s = r->Read(2, &out);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), data_path()));
  EXPECT_TRUE(Contains(s.message(), "record 2 'cat/c.txt'"));
  EXPECT_TRUE(Contains(s.message(), "expected 5001, found 5000"));
  EXPECT_TRUE(out.empty());
}

TEST_F(ReaderTest, DamagedZstdLengthIsCaughtBeforeAllocating) {
  // A length within the zstd expansion bound passes GetRecord; the frame's
  // declared size must be checked before the output is sized from it.
  Record rec;
  {
    std::unique_ptr<Reader> r = MustOpen();
    ASSERT_NE(r, nullptr);
    ASSERT_TRUE(r->GetRecord(2, &rec).ok());
    ASSERT_EQ(rec.codec, Codec::kZstd);
  }
  const uint64_t claimed = rec.stored_length * 30000;
  ASSERT_GT(claimed, 4u << 20);
  const IndexHeader h = ReadIndexHeader(index_path());
  Patch64(index_path(), RecordFieldAt(h, 2, kOriginalLengthField), claimed);
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  ASSERT_TRUE(r->GetRecord(2, &rec).ok());
  EXPECT_EQ(rec.original_length, claimed);
  std::string out;
  Status s = r->Read(2, &out);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "frame content size"));
  EXPECT_TRUE(out.empty());
  EXPECT_LT(out.capacity(), size_t{1} << 20);  // nothing sized to `claimed`
}

// The same through ReadBatch, which sizes one buffer for the whole batch:
// each zstd frame's declared size is checked before that buffer is sized
// (the fuzzer's regression input oom-readbatch-zstd-original-length: 40
// such records claiming 5 GB in all).
TEST_F(ReaderTest, ReadBatchChecksZstdLengthsBeforeAllocating) {
  Record rec;
  {
    std::unique_ptr<Reader> r = MustOpen();
    ASSERT_NE(r, nullptr);
    ASSERT_TRUE(r->GetRecord(2, &rec).ok());
    ASSERT_EQ(rec.codec, Codec::kZstd);
  }
  const uint64_t claimed = rec.stored_length * 30000;
  const IndexHeader h = ReadIndexHeader(index_path());
  Patch64(index_path(), RecordFieldAt(h, 2, kOriginalLengthField), claimed);
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  std::vector<uint64_t> indices(40, 2);
  indices[0] = 0;
  for (int threads : {1, 4}) {
    SCOPED_TRACE(threads);
    Batch batch;
    Status s = r->ReadBatch(indices.data(), indices.size(), &batch, threads);
    EXPECT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_TRUE(Contains(s.message(), "record 2 'cat/c.txt'"));
    EXPECT_TRUE(Contains(s.message(), "frame content size"));
    EXPECT_EQ(batch.size(), 0u);
    EXPECT_LT(batch.data.capacity(), size_t{1} << 20);
  }
}

// A zstd record whose entry claims the largest expansion the format allows
// (original_length = 32768 x stored_length) and whose frame header declares
// the same, while the frame really holds 1000 bytes: the header check
// passes, so only decoding can tell.  Read must report the early end, and
// must not have sized anything from the claimed 33 MB.
TEST(ReaderHostileZstdTest, ShortFrameWithForgedHeaderIsCorruption) {
  TempDir tmp;
  uint64_t claimed = 0;
  test::WriteShortZstdFramePack(tmp / "pack", 1000, /*forged_header=*/true,
                                &claimed);
  std::unique_ptr<Reader> r;
  ASSERT_TRUE(OpenPack(tmp / "pack", &r).ok());
  Record rec;
  ASSERT_TRUE(r->GetRecord(0, &rec).ok());
  ASSERT_EQ(rec.codec, Codec::kZstd);
  ASSERT_EQ(rec.original_length, claimed);
  std::string out;
  Status s = r->Read(0, &out);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), tmp / "pack/data.ufs"));
  EXPECT_TRUE(Contains(s.message(), "record 0 'hostile.bin'"));
  EXPECT_TRUE(Contains(s.message(), "at offset " + std::to_string(rec.offset)));
  EXPECT_TRUE(
      Contains(s.message(), "zstd frame ends early or is damaged: expected " +
                                std::to_string(claimed) + " bytes, found "));
  EXPECT_TRUE(out.empty());
  EXPECT_LT(out.capacity(), size_t{4} << 20);  // nothing sized to `claimed`
  // The other record still reads.
  EXPECT_TRUE(r->Read(1, &out).ok());
  EXPECT_EQ(out, "ten bytes!");
}

TEST(ReaderHostileZstdTest, ReadBatchOfShortFrameIsCorruption) {
  TempDir tmp;
  test::WriteShortZstdFramePack(tmp / "pack", 1000, /*forged_header=*/true);
  std::unique_ptr<Reader> r;
  ASSERT_TRUE(OpenPack(tmp / "pack", &r).ok());
  std::vector<uint64_t> indices = {1, 0, 1, 0};
  for (int threads : {1, 4}) {
    SCOPED_TRACE(threads);
    Batch batch;
    Status s = r->ReadBatch(indices.data(), indices.size(), &batch, threads);
    EXPECT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_TRUE(Contains(s.message(), "record 0 'hostile.bin'"));
    EXPECT_TRUE(Contains(s.message(), "zstd frame ends early or is damaged"));
    EXPECT_EQ(batch.size(), 0u);
    EXPECT_LT(batch.data.capacity(), size_t{4} << 20);
  }
}

// The same record at the size of the hostile-pack review (a 140 KB frame
// claiming 4.6 GB), read under a 1 GiB address-space limit in a child
// process: every whole-record path must give Corruption, not abort on
// std::bad_alloc.  Both the forged and the honest frame header.
TEST(ReaderHostileZstdTest, ShortFrameUnderOneGiBAddressSpace) {
  if (test::kSanitizerReservesAddressSpace) {
    GTEST_SKIP() << test::kNoAddressSpaceLimitUnderSanitizers;
  }
  for (bool forged : {true, false}) {
    SCOPED_TRACE(forged ? "forged header" : "honest header");
    TempDir tmp;
    uint64_t claimed = 0;
    test::WriteShortZstdFramePack(tmp / "pack", 140000, forged, &claimed);
    ASSERT_GT(claimed, uint64_t{4} << 30);
    std::unique_ptr<Reader> r;
    ASSERT_TRUE(OpenPack(tmp / "pack", &r).ok());
    // Exit codes: 0 Corruption as expected, 1 OK (wrong), 2 another error.
    auto code = [](const Status& s) {
      return s.IsCorruption() ? 0 : s.ok() ? 1 : 2;
    };
    EXPECT_EQ(test::RunWithAddressSpaceLimit(1u << 30,
                                             [&] {
                                               std::string out;
                                               return code(r->Read(0, &out));
                                             }),
              0)
        << "Read(i, &string)";
    for (int threads : {1, 4}) {
      EXPECT_EQ(test::RunWithAddressSpaceLimit(
                    1u << 30,
                    [&] {
                      const uint64_t indices[] = {1, 0, 1};
                      Batch batch;
                      return code(r->ReadBatch(indices, 3, &batch, threads));
                    }),
                0)
          << "ReadBatch, threads " << threads;
    }
    EXPECT_EQ(test::RunWithAddressSpaceLimit(
                  1u << 30,
                  [&] {
                    Record rec;
                    if (!r->GetRecord(0, &rec).ok()) return 3;
                    uint64_t bytes = 0;
                    Status s = r->Stream(rec, [&](std::string_view piece) {
                      bytes += piece.size();
                      return Status::OK();
                    });
                    return bytes <= 140000 ? code(s) : 4;
                  }),
              0)
        << "Stream";
  }
}

TEST_F(ReaderTest, ZstdRecordOfZeroStoredBytesSaysWhy) {
  const IndexHeader h = ReadIndexHeader(index_path());
  Patch64(index_path(), RecordFieldAt(h, 2, kStoredLengthField), 0);
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  Record rec;
  Status s = r->GetRecord(2, &rec);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(),
                       "record 2 'cat/c.txt': codec zstd with stored_length 0: "
                       "a zstd frame needs at least 9 bytes"));
}

TEST_F(ReaderTest, DamagedClassRangeIsCorruption) {
  const IndexHeader h = ReadIndexHeader(index_path());
  Patch64(index_path(), h.classes.offset + 32 + 24, UINT64_MAX);  // class 1
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  ClassInfo c;
  Status s = r->GetClass(1, &c);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "class 1"));
  EXPECT_TRUE(Contains(s.message(), "exceed the record count 5"));
  EXPECT_TRUE(r->GetClass(0, &c).ok());
}

TEST_F(ReaderTest, LookupSlotReferringPastRecordsIsCorruption) {
  const IndexHeader h = ReadIndexHeader(index_path());
  for (uint64_t k = 0; k < h.lookup_slots(); ++k) {
    Patch32(index_path(), h.lookup.offset + 4 * k, 6);  // record 5 of 5
  }
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  uint64_t found = 0;
  Status s = r->Find("cat/a.jpg", &found);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "refers to record 5 of 5"));
  const std::string_view names[] = {"cat/a.jpg", "dog/y.jpg"};
  uint64_t many[2];
  s = r->FindMany(names, 2, many);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "refers to record 5 of 5"));
}

TEST_F(ReaderTest, FindManyAndGetRecordsReportADamagedNameRange) {
  // Record 1's name lies past the pool: the prefetch skips it, the check
  // reports it, as GetRecord and Find do.
  const IndexHeader h = ReadIndexHeader(index_path());
  Patch64(index_path(),
          h.records.offset + RecordEntry::kEncodedLength +
              RecordEntry::kNameOffsetAt,
          UINT64_MAX - 2);
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  const uint64_t indices[] = {0, 1, 2};
  Record recs[3];
  Status s = r->GetRecords(indices, 3, recs);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "record 1: name at pool offset"));
  std::vector<std::string_view> names;
  for (const Item& item : items_) names.push_back(item.name);
  std::vector<uint64_t> found(names.size());
  Status fs = r->FindMany(names.data(), names.size(), found.data());
  uint64_t one;
  Status single = r->Find(items_[1].name, &one);
  EXPECT_TRUE(single.IsCorruption()) << single.ToString();
  EXPECT_EQ(fs.ToString(), single.ToString());
}

TEST_F(ReaderTest, FindTerminatesOnFullLookupTable) {
  // Every slot taken (no empty slot ends the probe): a miss must still end.
  const IndexHeader h = ReadIndexHeader(index_path());
  for (uint64_t k = 0; k < h.lookup_slots(); ++k) {
    Patch32(index_path(), h.lookup.offset + 4 * k, 1 + k % 5);
  }
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  uint64_t found = 0;
  EXPECT_TRUE(r->Find("not/there", &found).IsNotFound());
  ASSERT_TRUE(r->Find("dog/y.jpg", &found).ok());
  EXPECT_EQ(found, 4u);
  const std::string_view names[] = {"not/there", "dog/y.jpg", "cat/a.jpg"};
  uint64_t many[3];
  ASSERT_TRUE(r->FindMany(names, 3, many).ok());
  EXPECT_EQ(many[0], Reader::kNoRecord);
  EXPECT_EQ(many[1], 4u);
  EXPECT_EQ(many[2], 0u);
}

// --- Damaged record bytes in data.ufs --------------------------------------

TEST_F(ReaderTest, ChecksumMismatchNamesRecordAndOffset) {
  Record rec;
  {
    std::unique_ptr<Reader> r = MustOpen();
    ASSERT_NE(r, nullptr);
    ASSERT_TRUE(r->GetRecord(3, &rec).ok());
  }
  test::FlipByte(data_path(), rec.offset + 1234, 0x20);
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  std::string out;
  Status s = r->Read(3, &out);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), data_path()));
  EXPECT_TRUE(Contains(s.message(), "record 3 'dog/x.jpg'"));
  EXPECT_TRUE(Contains(s.message(), "at offset " + std::to_string(rec.offset)));
  EXPECT_TRUE(Contains(s.message(), "checksum mismatch"));
  EXPECT_TRUE(out.empty());  // wrong bytes are never returned
  std::vector<char> buf(3000);
  size_t length = 0;
  EXPECT_TRUE(r->Read(3, buf.data(), buf.size(), &length).IsCorruption());
  // The neighbours are intact.
  ASSERT_TRUE(r->Read(2, &out).ok());
  EXPECT_EQ(out, items_[2].bytes);
  ASSERT_TRUE(r->Read(4, &out).ok());
  EXPECT_EQ(out, items_[4].bytes);
}

TEST_F(ReaderTest, ChecksumVerificationCanBeTurnedOff) {
  Record rec;
  {
    std::unique_ptr<Reader> r = MustOpen();
    ASSERT_NE(r, nullptr);
    ASSERT_TRUE(r->GetRecord(0, &rec).ok());
  }
  test::FlipByte(data_path(), rec.offset + 7, 0x01);
  ReaderOptions no_verify;
  no_verify.verify_checksums = false;
  std::unique_ptr<Reader> r = MustOpen(no_verify);
  ASSERT_NE(r, nullptr);
  std::string out;
  Status s = r->Read(0, &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::string expected = items_[0].bytes;
  expected[7] ^= 0x01;
  EXPECT_EQ(out, expected);  // the damaged bytes, as asked
}

TEST_F(ReaderTest, DamagedZstdRecordIsCorruption) {
  Record rec;
  {
    std::unique_ptr<Reader> r = MustOpen();
    ASSERT_NE(r, nullptr);
    ASSERT_TRUE(r->GetRecord(2, &rec).ok());
    ASSERT_EQ(rec.codec, Codec::kZstd);
  }
  test::FlipByte(data_path(), rec.offset + rec.stored_length / 2, 0xFF);
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  std::string out;
  Status s = r->Read(2, &out);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "checksum mismatch"));
}

// ---------------------------------------------------------------------------
// CheckIndex
// ---------------------------------------------------------------------------

TEST_F(ReaderTest, CheckIndexAcceptsGoodPack) {
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  Status s = r->CheckIndex();
  EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST(ReaderCheckIndexTest, CheckIndexAcceptsLargerPack) {
  TempDir tmp;
  PackWriterOptions options;
  options.compress = true;
  ASSERT_TRUE(
      WritePack(tmp / "p", StandardClasses(), ManyItems(200), options).ok());
  std::unique_ptr<Reader> r;
  ASSERT_TRUE(OpenPack(tmp / "p", &r).ok());
  Status s = r->CheckIndex();
  EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST_F(ReaderTest, CheckIndexCatchesFlippedRecordTableByte) {
  const IndexHeader h = ReadIndexHeader(index_path());
  // The checksum field of record 4: nothing but the body checksum covers it
  // until the record is read.
  test::FlipByte(index_path(), RecordFieldAt(h, 4, kChecksumField) + 3);
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  Status s = r->CheckIndex();
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "body checksum mismatch"));
  EXPECT_TRUE(Contains(s.message(), index_path()));
}

TEST_F(ReaderTest, CheckIndexCatchesLabelOutsideItsClass) {
  const IndexHeader h = ReadIndexHeader(index_path());
  Patch32(index_path(), RecordFieldAt(h, 2, kLabelField), 1);  // cat -> dog
  ResealIndex(index_path());
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  Status s = r->CheckIndex();
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "record 2 'cat/c.txt'"));
  EXPECT_TRUE(Contains(s.message(), "class 0"));
}

TEST_F(ReaderTest, CheckIndexCatchesMissingLookupEntry) {
  const IndexHeader h = ReadIndexHeader(index_path());
  const std::string bytes = test::ReadFile(index_path());
  uint64_t slot = h.lookup_slots();
  for (uint64_t k = 0; k < h.lookup_slots(); ++k) {
    if (DecodeFixed32(bytes.data() + h.lookup.offset + 4 * k) != 0) {
      slot = k;
      break;
    }
  }
  ASSERT_LT(slot, h.lookup_slots());
  Patch32(index_path(), h.lookup.offset + 4 * slot, 0);
  ResealIndex(index_path());
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  Status s = r->CheckIndex();
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "lookup table holds 4 entries for 5"));
}

TEST_F(ReaderTest, CheckIndexCatchesBadRecordEntry) {
  const IndexHeader h = ReadIndexHeader(index_path());
  Patch64(index_path(), RecordFieldAt(h, 4, kOffsetField), h.data_size);
  ResealIndex(index_path());
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  Status s = r->CheckIndex();
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "record 4 'dog/y.jpg'"));
}

// ---------------------------------------------------------------------------
// In-memory storage
// ---------------------------------------------------------------------------

Status OpenInMemory(const std::string& index, const std::string& data,
                    std::unique_ptr<Reader>* r, const ReaderOptions& o = {}) {
  return internal::OpenReader(NewMemoryRegion("mem/index.ufs", index),
                              NewMemoryRandomAccessFile("mem/data.ufs", data),
                              o, r);
}

TEST_F(ReaderTest, OpenFromMemoryStorage) {
  std::unique_ptr<Reader> r;
  Status s = OpenInMemory(test::ReadFile(index_path()),
                          test::ReadFile(data_path()), &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(r->info().index_path, "mem/index.ufs");
  EXPECT_EQ(r->info().data_path, "mem/data.ufs");
  EXPECT_EQ(r->info().pack_id, pack_id_);
  for (uint64_t i = 0; i < items_.size(); ++i) {
    std::string out;
    ASSERT_TRUE(r->Read(i, &out).ok()) << i;
    EXPECT_EQ(out, items_[i].bytes) << i;
  }
  EXPECT_TRUE(r->CheckIndex().ok());
}

TEST_F(ReaderTest, MemoryDataDamageNamesTheStorage) {
  std::string data = test::ReadFile(data_path());
  data[DataHeader::kEncodedLength + 3] ^= 0x10;  // inside record 0
  std::unique_ptr<Reader> r;
  ASSERT_TRUE(OpenInMemory(test::ReadFile(index_path()), data, &r).ok());
  std::string out;
  Status s = r->Read(0, &out);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "mem/data.ufs: record 0 'cat/a.jpg'"));
}

TEST(ReaderMemoryTest, EmptyRegionIsCorruption) {
  std::unique_ptr<Reader> r;
  Status s = OpenInMemory("", "", &r);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "mem/index.ufs: empty file"));
  EXPECT_EQ(r, nullptr);
}

// ---------------------------------------------------------------------------
// Metadata
// ---------------------------------------------------------------------------

using MetaEntries = std::vector<std::pair<std::string_view, std::string_view>>;

const std::map<std::string, std::string>& StandardMetadata() {
  static const std::map<std::string, std::string> kMeta = {
      {kMetaSourceRoot, "/data/pets"},
      {"binary", std::string("\0\xff\n\x01", 4)},
      {"empty", ""},
  };
  return kMeta;
}

// WritePack, with metadata entries set (in reverse key order, to show the
// writer sorts them).
Status WritePackWithMetadata(const std::string& dir,
                             const std::vector<std::string>& classes,
                             const std::vector<Item>& items,
                             const std::map<std::string, std::string>& meta,
                             const PackWriterOptions& options = {}) {
  std::unique_ptr<PackWriter> w;
  UFSPACK_RETURN_IF_ERROR(PackWriter::Create(dir, options, &w));
  for (auto it = meta.rbegin(); it != meta.rend(); ++it) {
    UFSPACK_RETURN_IF_ERROR(w->SetMetadata(it->first, it->second));
  }
  for (const std::string& c : classes) UFSPACK_RETURN_IF_ERROR(w->AddClass(c));
  for (const Item& it : items) {
    UFSPACK_RETURN_IF_ERROR(
        w->Add(it.name, options.flat ? kNoLabel : it.label, it.bytes));
  }
  return w->Finish();
}

TEST_F(ReaderTest, PackWithoutMetadataHasNone) {
  const IndexHeader h = ReadIndexHeader(index_path());
  EXPECT_EQ(h.meta.size, 0u);
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  MetaEntries entries = {{"stale", "entry"}};
  Status s = r->ListMetadata(&entries);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(entries.empty());
  std::string_view value = "untouched";
  s = r->GetMetadata(kMetaSourceRoot, &value);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "no metadata 'source_root'"));
  EXPECT_TRUE(Contains(s.message(), index_path()));
  EXPECT_EQ(value, "untouched");
}

// The ReaderTest pack with StandardMetadata().
class ReaderMetadataTest : public ReaderTest {
 protected:
  void SetUp() override {
    items_ = StandardItems();
    PackWriterOptions options;
    options.compress = true;
    Status s = WritePackWithMetadata(dir(), StandardClasses(), items_,
                                     StandardMetadata(), options);
    ASSERT_TRUE(s.ok()) << s.ToString();
    header_ = ReadIndexHeader(index_path());
  }
  IndexHeader header_;
};

TEST_F(ReaderMetadataTest, WriterPutsMetadataAfterTheNamePool) {
  EXPECT_EQ(header_.meta.offset, header_.names.offset + header_.names.size);
  EXPECT_EQ(header_.meta.offset + header_.meta.size, header_.index_size);
  std::string expected;
  EncodeMetadata(StandardMetadata(), &expected);
  EXPECT_EQ(header_.meta.size, expected.size());
  EXPECT_TRUE(test::ReadFile(index_path()).substr(header_.meta.offset) ==
              expected);
}

TEST_F(ReaderMetadataTest, GetMetadataFindsEveryKey) {
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  for (const auto& [key, want] : StandardMetadata()) {
    SCOPED_TRACE(key);
    std::string_view value;
    Status s = r->GetMetadata(key, &value);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(value == want);
  }
  std::string_view root;
  ASSERT_TRUE(r->GetMetadata(kMetaSourceRoot, &root).ok());
  EXPECT_EQ(root, "/data/pets");
  std::string_view empty = "not yet";
  ASSERT_TRUE(r->GetMetadata("empty", &empty).ok());  // found, and empty
  EXPECT_EQ(empty, "");
}

TEST_F(ReaderMetadataTest, GetMetadataMissIsNotFound) {
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  // Prefixes, extensions and case variants of real keys are other keys.
  for (std::string_view key :
       {"nope", "source", "source_root/", "Source_Root", "", "bin"}) {
    SCOPED_TRACE(key);
    std::string_view value = "untouched";
    Status s = r->GetMetadata(key, &value);
    EXPECT_TRUE(s.IsNotFound()) << s.ToString();
    EXPECT_TRUE(Contains(s.message(), "no metadata '" + std::string(key)));
    EXPECT_EQ(value, "untouched");
  }
}

TEST_F(ReaderMetadataTest, ListMetadataIsInKeyOrder) {
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  MetaEntries entries;
  Status s = r->ListMetadata(&entries);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].first, "binary");
  EXPECT_EQ(entries[0].second, std::string_view("\0\xff\n\x01", 4));
  EXPECT_EQ(entries[1].first, "empty");
  EXPECT_EQ(entries[1].second, "");
  EXPECT_EQ(entries[2].first, kMetaSourceRoot);
  EXPECT_EQ(entries[2].second, "/data/pets");
}

TEST_F(ReaderMetadataTest, MetadataDoesNotDisturbRecords) {
  ReaderOptions verify;
  verify.verify_index_checksum = true;
  std::unique_ptr<Reader> r = MustOpen(verify);
  ASSERT_NE(r, nullptr);
  Status s = r->CheckIndex();
  EXPECT_TRUE(s.ok()) << s.ToString();
  for (uint64_t i = 0; i < items_.size(); ++i) {
    std::string out;
    ASSERT_TRUE(r->Read(i, &out).ok()) << i;
    EXPECT_EQ(out, items_[i].bytes) << i;
    uint64_t found = 0;
    ASSERT_TRUE(r->Find(items_[i].name, &found).ok()) << i;
    EXPECT_EQ(found, i);
  }
}

TEST(ReaderMetadataEmptyPackTest, EmptyFlatPackWithMetadata) {
  TempDir tmp;
  PackWriterOptions options;
  options.flat = true;
  ASSERT_TRUE(WritePackWithMetadata(tmp / "p", {}, {}, {{kMetaSourceRoot, "."}},
                                    options)
                  .ok());
  std::unique_ptr<Reader> r;
  Status s = OpenPack(tmp / "p", &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(r->size(), 0u);
  std::string_view root;
  ASSERT_TRUE(r->GetMetadata(kMetaSourceRoot, &root).ok());
  EXPECT_EQ(root, ".");
  EXPECT_TRUE(r->CheckIndex().ok());
}

TEST_F(ReaderMetadataTest, DamagedMetadataIsCaughtWhenUsedNotAtOpen) {
  // The entry count says 4 entries; the section holds 3.  Open does not
  // parse the metadata (it stays O(1)), so it succeeds and records read;
  // the damage shows when the metadata is used, and in CheckIndex.
  Patch32(index_path(), header_.meta.offset, 4);
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  std::string out;
  ASSERT_TRUE(r->Read(0, &out).ok());
  EXPECT_EQ(out, items_[0].bytes);
  std::string_view value;
  Status s = r->GetMetadata(kMetaSourceRoot, &value);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "metadata: entry 3"));
  EXPECT_TRUE(Contains(s.message(), index_path()));
  MetaEntries entries;
  s = r->ListMetadata(&entries);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  s = r->CheckIndex();
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "body checksum mismatch"));
  // Verifying the index checksum at Open catches it there.
  ReaderOptions verify;
  verify.verify_index_checksum = true;
  s = OpenStatus(verify);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "body checksum mismatch"));
}

TEST_F(ReaderMetadataTest, CheckIndexParsesMetadata) {
  // A key length running past the section, with every checksum recomputed:
  // only parsing the metadata finds it.
  Patch32(index_path(), header_.meta.offset + 4, 0xFFFFFFF0u);
  ResealIndex(index_path());
  ReaderOptions verify;
  verify.verify_index_checksum = true;
  std::unique_ptr<Reader> r = MustOpen(verify);
  ASSERT_NE(r, nullptr);
  std::string_view value;
  Status s = r->GetMetadata(kMetaSourceRoot, &value);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "runs past the section"));
  s = r->CheckIndex();
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "metadata"));
  EXPECT_TRUE(Contains(s.message(), index_path()));
  // Records are unaffected.
  for (uint64_t i = 0; i < items_.size(); ++i) {
    std::string out;
    ASSERT_TRUE(r->Read(i, &out).ok()) << i;
  }
}

TEST_F(ReaderMetadataTest, ShrunkMetadataSectionIsCaughtWhenUsed) {
  Patch64(index_path(), kMetaSizeField, header_.meta.size - 1);
  ResealIndex(index_path());
  std::unique_ptr<Reader> r = MustOpen();  // still a valid layout
  ASSERT_NE(r, nullptr);
  std::string_view value;
  Status s = r->GetMetadata(kMetaSourceRoot, &value);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  s = r->CheckIndex();
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "metadata"));
}

TEST_F(ReaderMetadataTest, MetadataPastEndOfIndexIsCorruption) {
  Patch64(index_path(), kMetaSizeField, header_.meta.size + 1);
  ResealIndex(index_path());
  Status s = OpenStatus();
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "metadata"));
  EXPECT_TRUE(Contains(s.message(), "outside the index"));
  EXPECT_TRUE(Contains(s.message(), index_path()));
}

TEST_F(ReaderMetadataTest, MetadataOverlappingNamePoolIsCorruption) {
  Patch64(index_path(), kMetaOffsetField, header_.meta.offset - 1);
  ResealIndex(index_path());
  Status s = OpenStatus();
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "name pool overlaps metadata"));
}

// Any single-byte flip of the metadata section, even with the checksums
// recomputed, leaves Open working and either parses or is Corruption.
TEST_F(ReaderMetadataTest, EveryMetadataByteFlipIsCorruptionOrParses) {
  const std::string index = test::ReadFile(index_path());
  const std::string data = test::ReadFile(data_path());
  for (uint64_t off = header_.meta.offset; off < index.size(); ++off) {
    for (uint8_t mask : {uint8_t{0x01}, uint8_t{0x80}}) {
      SCOPED_TRACE("offset " + std::to_string(off) + " mask " +
                   std::to_string(mask));
      std::string damaged = index;
      damaged[off] = static_cast<char>(damaged[off] ^ mask);
      EncodeFixed64(&damaged[kBodyChecksumField],
                    Checksum64(damaged.data() + IndexHeader::kEncodedLength,
                               damaged.size() - IndexHeader::kEncodedLength));
      EncodeFixed64(
          &damaged[IndexHeader::kHeaderChecksumOffset],
          Checksum64(damaged.data(), IndexHeader::kHeaderChecksumOffset));
      std::unique_ptr<Reader> r;
      Status s = OpenInMemory(damaged, data, &r);
      ASSERT_TRUE(s.ok()) << s.ToString();
      MetaEntries entries;
      s = r->ListMetadata(&entries);
      Status check = r->CheckIndex();
      if (s.ok()) {
        EXPECT_TRUE(check.ok()) << check.ToString();
        EXPECT_EQ(entries.size(), 3u);
      } else {
        EXPECT_TRUE(s.IsCorruption()) << s.ToString();
        EXPECT_TRUE(check.IsCorruption()) << check.ToString();
      }
    }
  }
  std::cout << "[flip] metadata: " << 2 * (index.size() - header_.meta.offset)
            << " flips over " << index.size() - header_.meta.offset
            << " bytes\n";
}

// A data file that claims to be huge (2^48 bytes) without holding them:
// lets a test give records lengths no real test file could have.
class HugeDataFile final : public RandomAccessFile {
 public:
  HugeDataFile(std::string header, uint64_t size)
      : header_(std::move(header)), size_(size) {}
  Status Read(uint64_t offset, size_t n, char* scratch,
              size_t* bytes_read) const override {
    size_t done = 0;
    for (; done < n && offset + done < size_; ++done) {
      const uint64_t at = offset + done;
      scratch[done] = at < header_.size() ? header_[at] : '\0';
    }
    *bytes_read = done;
    return Status::OK();
  }
  Status Size(uint64_t* size) const override {
    *size = size_;
    return Status::OK();
  }
  const std::string& name() const override { return name_; }

 private:
  const std::string name_ = "huge/data.ufs";
  const std::string header_;
  const uint64_t size_;
};

TEST_F(ReaderTest, ReadBatchTooLargeIsRefusedBeforeAllocating) {
  constexpr uint64_t kDataSize = 1ull << 48;
  constexpr uint64_t kStored = 1ull << 47;
  constexpr uint64_t kOriginal = kStored * 32768;  // 2^62: within zstd bound
  std::string index = test::ReadFile(index_path());
  const IndexHeader h = ReadIndexHeader(index_path());
  EncodeFixed64(&index[64], kDataSize);  // header: data size
  EncodeFixed64(&index[RecordFieldAt(h, 2, kOffsetField)], 64);
  EncodeFixed64(&index[RecordFieldAt(h, 2, 8)], kStored);
  EncodeFixed64(&index[RecordFieldAt(h, 2, kOriginalLengthField)], kOriginal);
  EncodeFixed64(&index[IndexHeader::kHeaderChecksumOffset],
                Checksum64(index.data(), IndexHeader::kHeaderChecksumOffset));
  std::unique_ptr<Reader> r;
  Status s = internal::OpenReader(
      NewMemoryRegion("huge/index.ufs", index),
      std::make_unique<HugeDataFile>(
          test::ReadFile(data_path()).substr(0, DataHeader::kEncodedLength),
          kDataSize),
      {}, &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  Record rec;
  ASSERT_TRUE(r->GetRecord(2, &rec).ok());
  ASSERT_EQ(rec.original_length, kOriginal);
  // Four of them sum to 2^64, which wraps to 0 in uint64_t.
  const uint64_t indices[] = {0, 2, 2, 2, 2};
  for (int threads : {1, 4}) {
    SCOPED_TRACE(threads);
    Batch batch;
    s = r->ReadBatch(indices, 5, &batch, threads);
    EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
    EXPECT_TRUE(Contains(s.message(), "record 2 'cat/c.txt'"));
    EXPECT_EQ(batch.size(), 0u);
    EXPECT_LT(batch.data.capacity(), size_t{1} << 20);
  }
}

// Every single-byte flip of the index is caught by Open or CheckIndex, and
// never yields wrong bytes from Read or a wrong answer from Find.
TEST_F(ReaderTest, EveryIndexByteFlipIsCaught) {
  const std::string index = test::ReadFile(index_path());
  const std::string data = test::ReadFile(data_path());
  for (size_t off = 0; off < index.size(); ++off) {
    for (uint8_t mask : {uint8_t{0x01}, uint8_t{0x80}}) {
      SCOPED_TRACE("offset " + std::to_string(off) + " mask " +
                   std::to_string(mask));
      std::string damaged = index;
      damaged[off] = static_cast<char>(damaged[off] ^ mask);
      std::unique_ptr<Reader> r;
      Status s = OpenInMemory(damaged, data, &r);
      if (!s.ok()) {
        EXPECT_FALSE(s.IsOutOfRange() || s.IsInvalidArgument()) << s.ToString();
        continue;
      }
      EXPECT_FALSE(r->CheckIndex().ok());
      for (uint64_t i = 0; i < r->size(); ++i) {
        std::string out;
        Status rs = r->Read(i, &out);
        if (rs.ok()) {
          EXPECT_EQ(out, items_[i].bytes) << i;
        } else {
          EXPECT_TRUE(rs.IsCorruption()) << rs.ToString();
        }
        uint64_t found = 0;
        Status fs = r->Find(items_[i].name, &found);
        if (fs.ok()) {
          Record rec;
          ASSERT_TRUE(r->GetRecord(found, &rec).ok());
          EXPECT_EQ(rec.name, items_[i].name);
        } else {
          EXPECT_TRUE(fs.IsCorruption() || fs.IsNotFound()) << fs.ToString();
        }
      }
    }
  }
  std::cout << "[flip] index: " << 2 * index.size() << " flips over "
            << index.size() << " bytes, " << items_.size() << " records\n";
}

// Every single-byte flip of the data file fails Open (header) or fails the
// read of the one record holding the byte; other records read correctly.
TEST_F(ReaderTest, EveryDataByteFlipIsCaught) {
  const std::string index = test::ReadFile(index_path());
  const std::string data = test::ReadFile(data_path());
  for (size_t off = 0; off < data.size(); ++off) {
    SCOPED_TRACE("offset " + std::to_string(off));
    std::string damaged = data;
    damaged[off] = static_cast<char>(damaged[off] ^ 0x04);
    std::unique_ptr<Reader> r;
    Status s = OpenInMemory(index, damaged, &r);
    if (off < DataHeader::kEncodedLength) {
      EXPECT_FALSE(s.ok());
      continue;
    }
    ASSERT_TRUE(s.ok()) << s.ToString();
    int failures = 0;
    for (uint64_t i = 0; i < r->size(); ++i) {
      Record rec;
      ASSERT_TRUE(r->GetRecord(i, &rec).ok());
      const bool holds =
          off >= rec.offset && off < rec.offset + rec.stored_length;
      std::string out;
      Status rs = r->Read(i, &out);
      if (holds) {
        EXPECT_TRUE(rs.IsCorruption()) << i << ": " << rs.ToString();
        ++failures;
      } else {
        ASSERT_TRUE(rs.ok()) << i << ": " << rs.ToString();
        EXPECT_EQ(out, items_[i].bytes) << i;
      }
    }
    EXPECT_EQ(failures, 1);
  }
  std::cout << "[flip] data: " << data.size() << " flips over " << data.size()
            << " bytes, " << items_.size() << " records\n";
}

// ---------------------------------------------------------------------------
// Concurrency, fork and replacement
// ---------------------------------------------------------------------------

TEST_F(ReaderTest, ForkedChildReadsThroughReaderOpenedBeforeFork) {
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  std::string warm;
  ASSERT_TRUE(r->Read(2, &warm).ok());  // zstd state created in the parent

  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Child: no gtest assertions here.  Remove the files first, so the
    // reads can only go through the descriptor and mapping inherited
    // from the parent.
    ::unlink(data_path().c_str());
    ::unlink(index_path().c_str());
    int bad = 0;
    for (uint64_t i = 0; i < items_.size(); ++i) {
      std::string out;
      if (!r->Read(i, &out).ok() || out != items_[i].bytes) bad |= 1;
      uint64_t found = 0;
      if (!r->Find(items_[i].name, &found).ok() || found != i) bad |= 2;
    }
    const uint64_t all[] = {4, 3, 2, 1, 0};
    Batch batch;
    if (!r->ReadBatch(all, 5, &batch, 2).ok() ||
        batch.get(2) != items_[2].bytes) {
      bad |= 4;
    }
    ::_exit(bad);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "child killed by a signal";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "bit 1: reads, 2: find, 4: batch";
  // The parent's reader still works after the child removed the files.
  std::string out;
  ASSERT_TRUE(r->Read(3, &out).ok());
  EXPECT_EQ(out, items_[3].bytes);
}

TEST_F(ReaderTest, RebuiltPackDoesNotAffectOpenReader) {
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  // A new pack renamed into place over both files, as `ufspack build` does.
  std::vector<Item> replacement = {
      {"new/one", 0, test::RandomBytes(4000, 77)},
      {"new/two", 0, test::RandomBytes(10, 78)},
  };
  PackWriterOptions flat;
  flat.flat = true;
  PackId new_id;
  ASSERT_TRUE(WritePack(dir(), {}, replacement, flat, &new_id).ok());
  ASSERT_NE(new_id, pack_id_);

  EXPECT_EQ(r->info().pack_id, pack_id_);
  EXPECT_EQ(r->size(), items_.size());
  for (uint64_t i = 0; i < items_.size(); ++i) {
    std::string out;
    Status s = r->Read(i, &out);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(out, items_[i].bytes) << i;
    Record rec;
    ASSERT_TRUE(r->GetRecord(i, &rec).ok());
    EXPECT_EQ(rec.name, items_[i].name);
  }
  // A reader opened now sees the new pack.
  std::unique_ptr<Reader> fresh = MustOpen();
  ASSERT_NE(fresh, nullptr);
  EXPECT_EQ(fresh->info().pack_id, new_id);
  std::string out;
  ASSERT_TRUE(fresh->Read(0, &out).ok());
  EXPECT_EQ(out, replacement[0].bytes);
}

TEST_F(ReaderTest, DataReplacedByRenameKeepsServingOldBytes) {
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  // Only data.ufs is replaced (a crash between the two renames of a
  // rebuild): the open reader keeps the old file, a new Open refuses the
  // mismatched pair.
  TempDir other;
  std::vector<Item> items = StandardItems();
  items[3].bytes = test::RandomBytes(3000, 999);
  ASSERT_TRUE(WritePack(other / "p", StandardClasses(), items).ok());
  ASSERT_EQ(std::rename((other / "p/data.ufs").c_str(), data_path().c_str()),
            0);
  for (uint64_t i = 0; i < items_.size(); ++i) {
    std::string out;
    Status s = r->Read(i, &out);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(out, items_[i].bytes) << i;
  }
  Status s = OpenStatus();
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "not one pack"));
}

// A permutation of [0, n): ascending, descending or shuffled by `seed`.
std::vector<uint64_t> ReadOrder(uint64_t n, unsigned seed) {
  std::vector<uint64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  if (seed % 3 == 1) std::reverse(order.begin(), order.end());
  if (seed % 3 == 2) {
    std::mt19937 rng(seed);
    std::shuffle(order.begin(), order.end(), rng);
  }
  return order;
}

// 16 threads and 4 forked processes read the whole pack at the same time,
// each in its own order; every record's checksum must equal the serial
// read's.  The processes report their checksums through a pipe and their
// failures through the exit status.
TEST(ReaderConcurrencyTest, SixteenThreadsAndFourProcessesMatchSerialRead) {
  TempDir tmp;
  PackWriterOptions options;
  options.compress = true;
  const std::vector<Item> items = ManyItems(300);
  ASSERT_TRUE(WritePack(tmp / "p", StandardClasses(), items, options).ok());
  std::unique_ptr<Reader> r;
  ASSERT_TRUE(OpenPack(tmp / "p", &r).ok());
  const uint64_t n = r->size();
  std::vector<uint64_t> serial(n);
  for (uint64_t i = 0; i < n; ++i) {
    std::string out;
    ASSERT_TRUE(r->Read(i, &out).ok());
    ASSERT_EQ(out, items[i].bytes);
    serial[i] = Checksum64(out.data(), out.size());
  }

  // The processes first, while this process has a single thread.
  constexpr int kProcesses = 4;
  std::vector<pid_t> pids;
  std::vector<int> pipes;
  for (int p = 0; p < kProcesses; ++p) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // Child: no gtest here.  Even children read through the Reader
      // inherited from the parent, odd ones open their own.
      ::close(fds[0]);
      std::unique_ptr<Reader> own;
      const Reader* reader = r.get();
      if (p % 2 == 1) {
        if (!Reader::Open(tmp / "p", {}, &own).ok()) ::_exit(2);
        reader = own.get();
      }
      std::vector<uint64_t> sums(n, 0);
      std::string out;
      for (int pass = 0; pass < 2; ++pass) {
        for (uint64_t i : ReadOrder(n, 100 + 3 * p + pass)) {
          if (!reader->Read(i, &out).ok()) ::_exit(3);
          const uint64_t sum = Checksum64(out.data(), out.size());
          if (pass > 0 && sum != sums[i]) ::_exit(4);  // changed between passes
          sums[i] = sum;
        }
      }
      const char* p8 = reinterpret_cast<const char*>(sums.data());
      size_t left = sums.size() * sizeof(uint64_t);
      while (left > 0) {
        ssize_t w = ::write(fds[1], p8, left);
        if (w <= 0) ::_exit(5);
        p8 += w;
        left -= static_cast<size_t>(w);
      }
      ::_exit(0);
    }
    ::close(fds[1]);
    pids.push_back(pid);
    pipes.push_back(fds[0]);
  }

  constexpr int kThreads = 16;
  std::atomic<int> errors{0};
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t]() {
      std::string out;
      std::vector<char> buf;
      for (int pass = 0; pass < 2; ++pass) {
        for (uint64_t i : ReadOrder(n, static_cast<unsigned>(3 * t + pass))) {
          Status s;
          switch ((i + t) % 3) {
            case 0:
              s = r->Read(i, &out);
              break;
            case 1: {
              buf.resize(items[i].bytes.size() + 7);
              size_t length = 0;
              s = r->Read(i, buf.data(), buf.size(), &length);
              out.assign(buf.data(), s.ok() ? length : 0);
              break;
            }
            default: {
              Batch batch;
              const uint64_t one[] = {i, i};
              s = r->ReadBatch(one, 2, &batch);
              out = s.ok() && batch.get(0) == batch.get(1)
                        ? std::string(batch.get(0))
                        : std::string("batch mismatch");
              break;
            }
          }
          if (!s.ok()) {
            errors.fetch_add(1);
          } else if (Checksum64(out.data(), out.size()) != serial[i]) {
            mismatches.fetch_add(1);
          }
          uint64_t found = 0;
          if (!r->Find(items[i].name, &found).ok() || found != i) {
            mismatches.fetch_add(1);
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);

  for (int p = 0; p < kProcesses; ++p) {
    SCOPED_TRACE("process " + std::to_string(p));
    std::string got;
    char buf[4096];
    for (;;) {
      ssize_t k = ::read(pipes[p], buf, sizeof(buf));
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) break;
      got.append(buf, static_cast<size_t>(k));
    }
    ::close(pipes[p]);
    int status = 0;
    ASSERT_EQ(::waitpid(pids[p], &status, 0), pids[p]);
    ASSERT_TRUE(WIFEXITED(status)) << "killed by a signal";
    EXPECT_EQ(WEXITSTATUS(status), 0)
        << "2: open, 3: read, 4: changed between passes, 5: pipe";
    ASSERT_EQ(got.size(), n * sizeof(uint64_t));
    uint64_t bad = 0;
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t sum;
      std::memcpy(&sum, got.data() + i * sizeof(uint64_t), sizeof(sum));
      bad += sum != serial[i];
    }
    EXPECT_EQ(bad, 0u);
  }
}

// A pack replaced three times by new builds while four threads keep
// reading through a Reader opened on the first: the threads always get the
// first pack's bytes; a Reader opened after each replacement gets the new
// pack and keeps it across the next replacement.
TEST_F(ReaderTest, ReplacedWhileThreadsReadOldAndNewOpensEachSeeTheirPair) {
  std::unique_ptr<Reader> first = MustOpen();
  ASSERT_NE(first, nullptr);
  std::atomic<bool> done{false};
  std::atomic<int> bad{0};
  std::atomic<uint64_t> reads{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&]() {
      std::string out;
      while (!done.load()) {
        for (uint64_t i = 0; i < items_.size(); ++i) {
          if (!first->Read(i, &out).ok() || out != items_[i].bytes) {
            bad.fetch_add(1);
          }
          reads.fetch_add(1);
        }
      }
    });
  }
  struct Generation {
    PackId id;
    std::vector<Item> items;
    std::unique_ptr<Reader> reader;
  };
  std::vector<Generation> gens(3);
  for (int g = 0; g < 3; ++g) {
    SCOPED_TRACE("generation " + std::to_string(g));
    gens[g].items = StandardItems();
    for (Item& it : gens[g].items) {
      it.bytes = test::RandomBytes(it.bytes.size() + g + 1, 500 + g);
    }
    PackWriterOptions options;
    options.compress = g % 2 == 0;
    ASSERT_TRUE(
        WritePack(dir(), StandardClasses(), gens[g].items, options, &gens[g].id)
            .ok());
    ASSERT_NE(gens[g].id, pack_id_);
    gens[g].reader = MustOpen();
    ASSERT_NE(gens[g].reader, nullptr);
    EXPECT_EQ(gens[g].reader->info().pack_id, gens[g].id);
  }
  while (reads.load() < 100) std::this_thread::yield();
  done.store(true);
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(first->info().pack_id, pack_id_);
  for (int g = 0; g < 3; ++g) {
    SCOPED_TRACE("generation " + std::to_string(g));
    EXPECT_EQ(gens[g].reader->info().pack_id, gens[g].id);
    for (uint64_t i = 0; i < gens[g].items.size(); ++i) {
      std::string out;
      ASSERT_TRUE(gens[g].reader->Read(i, &out).ok());
      EXPECT_EQ(out, gens[g].items[i].bytes) << i;
    }
  }
  std::unique_ptr<Reader> now = MustOpen();
  ASSERT_NE(now, nullptr);
  EXPECT_EQ(now->info().pack_id, gens[2].id);
}

// ---------------------------------------------------------------------------
// Records and data files past 4 GiB (sparse data files)
// ---------------------------------------------------------------------------

// Writes a file of `size` bytes at `path` that is all holes except
// `pieces` (offset, bytes).
::testing::AssertionResult WriteSparseFile(
    const std::string& path, uint64_t size,
    const std::vector<std::pair<uint64_t, std::string>>& pieces) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ::testing::AssertionFailure() << "open " << path;
  bool ok = ::ftruncate(fd, static_cast<off_t>(size)) == 0;
  for (const auto& [offset, bytes] : pieces) {
    ok = ok &&
         ::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset)) ==
             static_cast<ssize_t>(bytes.size());
  }
  ::close(fd);
  if (!ok) return ::testing::AssertionFailure() << "writing " << path;
  return ::testing::AssertionSuccess();
}

TEST_F(ReaderTest, RecordAtOffsetPast4GiBInASparseDataFile) {
  if (!test::SupportsSparseFiles(dir())) {
    GTEST_SKIP() << dir() << ": the file system has no sparse files";
  }
  const IndexHeader h = ReadIndexHeader(index_path());
  const std::string data = test::ReadFile(data_path());
  // Record 4 ("dog/y.jpg", one byte) moves to 5 GiB + 123; the data file
  // becomes 5 GiB + 124 bytes, almost all of it a hole.
  constexpr uint64_t kFar = (5ull << 30) + 123;
  ASSERT_TRUE(WriteSparseFile(data_path(), kFar + 1,
                              {{0, data}, {kFar, items_[4].bytes}}));
  Patch64(index_path(), RecordFieldAt(h, 4, kOffsetField), kFar);
  Patch64(index_path(), 64, kFar + 1);  // header: data size
  ResealIndex(index_path());
  {
    std::unique_ptr<Reader> r = MustOpen();
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->info().data_size, kFar + 1);
    ASSERT_TRUE(r->CheckIndex().ok());
    Record rec;
    ASSERT_TRUE(r->GetRecord(4, &rec).ok());
    EXPECT_EQ(rec.offset, kFar);
    for (uint64_t i = 0; i < items_.size(); ++i) {
      std::string out;
      Status s = r->Read(i, &out);
      ASSERT_TRUE(s.ok()) << s.ToString();
      EXPECT_EQ(out, items_[i].bytes) << i;
    }
  }
  // Offsets and sizes past 2^32 are reported in full, not truncated.
  Patch64(index_path(), RecordFieldAt(h, 3, kOffsetField), kFar - 10);
  ResealIndex(index_path());
  {
    std::unique_ptr<Reader> r = MustOpen();
    ASSERT_NE(r, nullptr);
    std::string out;
    Status s = r->Read(3, &out);
    EXPECT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_TRUE(Contains(s.message(), "record 3 'dog/x.jpg': offset " +
                                          std::to_string(kFar - 10) +
                                          " + length 3000 lies outside the "
                                          "data area [64, " +
                                          std::to_string(kFar + 1) + ")"));
    EXPECT_TRUE(out.empty());
  }
  // A record inside the file past 4 GiB whose bytes are a hole: the
  // checksum fails, zeros are never returned as the record.
  Patch64(index_path(), RecordFieldAt(h, 3, kOffsetField), kFar - 3000);
  ResealIndex(index_path());
  {
    std::unique_ptr<Reader> r = MustOpen();
    ASSERT_NE(r, nullptr);
    std::string out;
    Status s = r->Read(3, &out);
    EXPECT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_TRUE(Contains(s.message(), data_path() +
                                          ": record 3 'dog/x.jpg' at offset " +
                                          std::to_string(kFar - 3000) +
                                          " + 3000: checksum mismatch"));
    EXPECT_TRUE(out.empty());
  }
}

// SLOW: about 10 s and 4 GiB of memory (the record is read into one
// buffer, twice).  The data file is sparse, so it needs no disk space.
// Skipped where memory or sparse files are lacking.
TEST_F(ReaderTest, RecordLargerThan4GiBReadsBackExactly) {
  constexpr uint64_t kLength = (4ull << 30) + 3;
  if (!test::SupportsSparseFiles(dir())) {
    GTEST_SKIP() << dir() << ": the file system has no sparse files";
  }
  const uint64_t available = test::AvailableMemoryBytes();
  if (available < kLength + (2ull << 30)) {
    GTEST_SKIP() << "needs " << ((kLength >> 30) + 2) << " GiB of memory, "
                 << (available >> 20) << " MiB available";
  }
  // The expected bytes: zeros with a mark at each end, in an anonymous
  // mapping, so that only the two marked pages take memory.
  void* map = ::mmap(nullptr, kLength, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(map, MAP_FAILED);
  std::unique_ptr<void, std::function<void(void*)>> unmap(
      map, [](void* p) { ::munmap(p, kLength); });
  char* want = static_cast<char*>(map);
  std::memcpy(want, "head", 4);
  std::memcpy(want + kLength - 4, "tail", 4);
  const uint64_t checksum = Checksum64(want, kLength);

  // Record 3 becomes the big record, right after the existing ones;
  // record 4 moves past it, beyond 4 GiB.
  const IndexHeader h = ReadIndexHeader(index_path());
  const std::string data = test::ReadFile(data_path());
  const uint64_t big_at = data.size();
  const uint64_t y_at = big_at + kLength;
  ASSERT_TRUE(WriteSparseFile(data_path(), y_at + 1,
                              {{0, data},
                               {big_at, "head"},
                               {big_at + kLength - 4, "tail"},
                               {y_at, items_[4].bytes}}));
  Patch64(index_path(), RecordFieldAt(h, 3, kOffsetField), big_at);
  Patch64(index_path(), RecordFieldAt(h, 3, 8), kLength);  // stored length
  Patch64(index_path(), RecordFieldAt(h, 3, kOriginalLengthField), kLength);
  Patch64(index_path(), RecordFieldAt(h, 3, kChecksumField), checksum);
  Patch64(index_path(), RecordFieldAt(h, 4, kOffsetField), y_at);
  Patch64(index_path(), 64, y_at + 1);  // header: data size
  ResealIndex(index_path());

  {
    std::unique_ptr<Reader> r = MustOpen();
    ASSERT_NE(r, nullptr);
    ASSERT_TRUE(r->CheckIndex().ok());
    Record rec;
    ASSERT_TRUE(r->GetRecord(3, &rec).ok());
    EXPECT_EQ(rec.original_length, kLength);
    std::string out;
    Status s = r->Read(3, &out);  // checksum verified (the default)
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(out.size(), kLength);
    EXPECT_EQ(out.substr(0, 4), "head");
    EXPECT_EQ(out.substr(kLength - 4), "tail");
    EXPECT_EQ(std::memcmp(out.data(), want, kLength), 0);
    std::string().swap(out);
    ASSERT_TRUE(r->Read(4, &out).ok());
    EXPECT_EQ(out, items_[4].bytes);
  }
  // One damaged byte at the very end of the big record: Corruption, and
  // nothing returned.
  test::FlipByte(data_path(), big_at + kLength - 1);
  std::unique_ptr<Reader> r = MustOpen();
  ASSERT_NE(r, nullptr);
  std::string out;
  Status s = r->Read(3, &out);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "record 3 'dog/x.jpg' at offset " +
                                        std::to_string(big_at) + " + " +
                                        std::to_string(kLength) +
                                        ": checksum mismatch"));
  EXPECT_TRUE(out.empty());
}

}  // namespace
}  // namespace ufspack
