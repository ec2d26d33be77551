// Copyright 2026 The ufspack Authors.
//
// Tests for PackWriter and BuildPack: deterministic output, compression,
// atomic publishing, unreadable sources, and byte-exact round trips
// through the Reader.
#include "ufspack/builder.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "pack_writer_impl.h"
#include "scan_order.h"
#include "testutil.h"
#include "ufspack/format.h"
#include "ufspack/reader.h"
#include "ufspack/scan.h"

namespace ufspack {
namespace {

using test::MakeFifo;
using test::ReadFile;
using test::TempDir;
using test::WriteFile;

std::string Show(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

// The marked bytes of MakeSparseFile(path, size): (offset, bytes).
std::vector<std::pair<uint64_t, std::string>> SparseMarks(uint64_t size) {
  const std::vector<std::pair<uint64_t, std::string>> marks = {
      {0, "head"},
      {(4u << 20) - 2, "chunk-boundary"},
      {(64u << 20) - 1, "threshold"},
      {(4ull << 30) - 5, "across-4GiB"},
      {size - 4, "tail"}};
  std::vector<std::pair<uint64_t, std::string>> out;
  for (const auto& m : marks) {
    if (m.first + m.second.size() > size - 4 && m.second != "tail") continue;
    out.push_back(m);
  }
  return out;
}

// A sparse file of `size` bytes with a few marked bytes.
void MakeSparseFile(const std::string& path, uint64_t size) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(ftruncate(fd, static_cast<off_t>(size)), 0);
  for (const auto& m : SparseMarks(size)) {
    ASSERT_EQ(pwrite(fd, m.second.data(), m.second.size(),
                     static_cast<off_t>(m.first)),
              static_cast<ssize_t>(m.second.size()));
  }
  close(fd);
}

struct PackRecord {
  std::string name;
  uint32_t label = 0;
  Codec codec = Codec::kRaw;
  std::string bytes;
};

// Every record of the pack at `dir`, read through the Reader, checking the
// lookup table as it goes.
::testing::AssertionResult ReadPack(const std::string& dir,
                                    std::vector<PackRecord>* out,
                                    std::unique_ptr<Reader>* keep = nullptr) {
  std::unique_ptr<Reader> reader;
  Status s = Reader::Open(dir, ReaderOptions(), &reader);
  if (!s.ok()) return ::testing::AssertionFailure() << s.ToString();
  s = reader->CheckIndex();
  if (!s.ok()) return ::testing::AssertionFailure() << s.ToString();
  out->clear();
  for (uint64_t i = 0; i < reader->size(); ++i) {
    Record r;
    s = reader->GetRecord(i, &r);
    if (!s.ok()) return ::testing::AssertionFailure() << s.ToString();
    PackRecord p;
    p.name = std::string(r.name);
    p.label = r.label;
    p.codec = r.codec;
    s = reader->Read(i, &p.bytes);
    if (!s.ok()) return ::testing::AssertionFailure() << s.ToString();
    uint64_t found = 0;
    s = reader->Find(p.name, &found);
    if (!s.ok() || found != i) {
      return ::testing::AssertionFailure()
             << "Find('" << Show(p.name) << "') = " << found << " "
             << s.ToString() << ", expected " << i;
    }
    out->push_back(std::move(p));
  }
  if (keep != nullptr) *keep = std::move(reader);
  return ::testing::AssertionSuccess();
}

// Builds src into out and checks the pack against the files on disk: the
// records are ScanTree's entries in order, with their labels, and each
// record's bytes equal its source file.  Returns the summary.
void BuildAndVerify(const std::string& src, const std::string& out,
                    const BuildOptions& options, BuildSummary* summary) {
  Status s = BuildPack(src, out, options, summary);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ScanResult scan;
  ScanOptions so = options.scan;
  s = ScanTree(src, so, &scan);
  ASSERT_TRUE(s.ok()) << s.ToString();

  std::vector<PackRecord> recs;
  std::unique_ptr<Reader> reader;
  ASSERT_TRUE(ReadPack(out, &recs, &reader));
  ASSERT_EQ(recs.size(), scan.entries.size());
  EXPECT_EQ(summary->files, scan.entries.size());
  EXPECT_EQ(reader->info().flat, options.scan.flat);
  uint64_t bytes_in = 0;
  for (size_t k = 0; k < recs.size(); ++k) {
    ASSERT_EQ(recs[k].name, scan.entries[k].name) << k;
    EXPECT_EQ(recs[k].label, scan.entries[k].label) << Show(recs[k].name);
    const std::string want = ReadFile(scan.PathOf(k));
    EXPECT_TRUE(recs[k].bytes == want)
        << Show(recs[k].name) << ": " << recs[k].bytes.size() << " bytes read, "
        << want.size() << " on disk";
    bytes_in += want.size();
  }
  EXPECT_EQ(summary->bytes_in, bytes_in);
  // Classes: names in order, contiguous record ranges.
  ASSERT_EQ(reader->class_count(), scan.classes.size());
  EXPECT_EQ(summary->classes, scan.classes.size());
  uint64_t first = 0;
  for (uint64_t c = 0; c < reader->class_count(); ++c) {
    ClassInfo ci;
    ASSERT_TRUE(reader->GetClass(c, &ci).ok());
    EXPECT_EQ(std::string(ci.name), scan.classes[c]);
    EXPECT_EQ(ci.first_record, first) << "class " << c;
    for (uint64_t k = ci.first_record;
         k < ci.first_record + ci.record_count && k < recs.size(); ++k) {
      EXPECT_EQ(recs[k].label, c);
    }
    first += ci.record_count;
  }
  if (!options.scan.flat) {
    EXPECT_EQ(first, recs.size());
  }
  EXPECT_EQ(summary->data_path, out + "/data.ufs");
  EXPECT_EQ(summary->index_path, out + "/index.ufs");
  EXPECT_EQ(summary->bytes_out, test::FileSize(out + "/data.ufs"));
  EXPECT_EQ(summary->index_bytes, test::FileSize(out + "/index.ufs"));
  EXPECT_EQ(summary->pack_id, reader->info().pack_id);
  EXPECT_TRUE(test::PackTempFiles(out).empty());
}

BuildOptions Options(int threads = 8) {
  BuildOptions o;
  o.threads = threads;
  return o;
}

// A varied tree: classes, nesting, empty files, sizes from 0 to 1 MiB,
// compressible and not.
void MakeVariedTree(const std::string& root) {
  for (int c = 0; c < 5; ++c) {
    const std::string cls = root + "/class" + std::to_string(c);
    for (int i = 0; i < 40; ++i) {
      const std::string name =
          cls + (i % 3 == 0 ? "/sub/" : "/") + "f" + std::to_string(i) + ".jpg";
      const size_t size = (i * 7919u + c * 104729u) % 20000;
      WriteFile(name, i % 2 == 0 ? test::CompressibleBytes(size, i + c)
                                 : test::RandomBytes(size, i * 31 + c));
    }
    WriteFile(cls + "/empty.png", "");
  }
  WriteFile(root + "/class0/big.jpg", test::RandomBytes(1 << 20, 99));
  WriteFile(root + "/class1/bigtext.jpg", test::CompressibleBytes(1 << 20, 7));
}

// Runs BuildPack on a thread.  If it has not returned after a generous
// delay (a FIFO open or read blocking), unblocks it by opening the FIFOs
// for writing, and reports it.
Status BuildWithFifoGuard(const std::string& src, const std::string& out,
                          const BuildOptions& options, BuildSummary* summary,
                          const std::vector<std::string>& fifos) {
  auto done = std::async(std::launch::async,
                         [&] { return BuildPack(src, out, options, summary); });
  while (done.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
    ADD_FAILURE() << "BuildPack blocked on a FIFO";
    for (const auto& f : fifos) {
      int fd = open(f.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd >= 0) close(fd);
    }
  }
  return done.get();
}

// --- PrepareRecord ----------------------------------------------------------

TEST(PrepareRecordTest, CompressesOnlyWhenSmaller) {
  PackWriterOptions o;
  o.compress = true;
  internal::PreparedRecord r;
  const std::string text = test::CompressibleBytes(50000, 1);
  ASSERT_TRUE(internal::PrepareRecord(text, o, &r).ok());
  EXPECT_EQ(r.codec, Codec::kZstd);
  EXPECT_LT(r.stored.size(), text.size());
  EXPECT_EQ(r.original_length, text.size());
  EXPECT_EQ(r.checksum, Checksum64(r.stored.data(), r.stored.size()));

  const std::string noise = test::RandomBytes(50000, 2);
  ASSERT_TRUE(internal::PrepareRecord(noise, o, &r).ok());
  EXPECT_EQ(r.codec, Codec::kRaw);
  EXPECT_EQ(r.stored, noise);
  EXPECT_EQ(r.checksum, Checksum64(noise.data(), noise.size()));

  ASSERT_TRUE(
      internal::PrepareRecord("ab", o, &r).ok());  // frame overhead > 2 bytes
  EXPECT_EQ(r.codec, Codec::kRaw);
  EXPECT_EQ(r.stored, "ab");

  ASSERT_TRUE(internal::PrepareRecord("", o, &r).ok());
  EXPECT_EQ(r.codec, Codec::kRaw);
  EXPECT_EQ(r.original_length, 0u);
}

TEST(PrepareRecordTest, NoCompressionByDefault) {
  internal::PreparedRecord r;
  const std::string text = test::CompressibleBytes(50000, 1);
  ASSERT_TRUE(internal::PrepareRecord(text, PackWriterOptions(), &r).ok());
  EXPECT_EQ(r.codec, Codec::kRaw);
  EXPECT_EQ(r.stored, text);
}

// --- PackWriter -------------------------------------------------------------

TEST(PackWriterTest, WritesClassesAndRecords) {
  TempDir t;
  std::unique_ptr<PackWriter> w;
  ASSERT_TRUE(PackWriter::Create(t / "out", PackWriterOptions(), &w).ok());
  ASSERT_TRUE(w->AddClass("cat").ok());
  ASSERT_TRUE(w->AddClass("dog").ok());
  ASSERT_TRUE(w->AddClass("eel").ok());
  ASSERT_TRUE(w->Add("cat/1", 0, "one").ok());
  ASSERT_TRUE(w->Add("cat/2", 0, "").ok());
  ASSERT_TRUE(w->Add("eel/3", 2, "three").ok());
  EXPECT_EQ(w->record_count(), 3u);
  PackId id;
  ASSERT_TRUE(w->Finish(&id).ok());
  EXPECT_TRUE(test::PackTempFiles(t / "out").empty());

  std::vector<PackRecord> recs;
  std::unique_ptr<Reader> reader;
  ASSERT_TRUE(ReadPack(t / "out", &recs, &reader));
  EXPECT_EQ(reader->info().pack_id, id);
  ASSERT_EQ(recs.size(), 3u);
  EXPECT_EQ(recs[0].name, "cat/1");
  EXPECT_EQ(recs[0].bytes, "one");
  EXPECT_EQ(recs[1].bytes, "");
  EXPECT_EQ(recs[2].label, 2u);
  EXPECT_EQ(recs[2].bytes, "three");
  ASSERT_EQ(reader->class_count(), 3u);
  const std::vector<std::pair<uint64_t, uint64_t>> ranges = {
      {0, 2}, {2, 0}, {2, 1}};
  for (uint64_t c = 0; c < 3; ++c) {
    ClassInfo ci;
    ASSERT_TRUE(reader->GetClass(c, &ci).ok());
    EXPECT_EQ(ci.first_record, ranges[c].first) << c;
    EXPECT_EQ(ci.record_count, ranges[c].second) << c;
  }
}

TEST(PackWriterTest, EmptyPackIsValid) {
  TempDir t;
  std::unique_ptr<PackWriter> w;
  PackWriterOptions o;
  o.flat = true;
  ASSERT_TRUE(PackWriter::Create(t / "out", o, &w).ok());
  ASSERT_TRUE(w->Finish().ok());
  std::vector<PackRecord> recs;
  ASSERT_TRUE(ReadPack(t / "out", &recs));
  EXPECT_TRUE(recs.empty());
}

TEST(PackWriterTest, LabelsMustNotDecreaseAndErrorIsSticky) {
  TempDir t;
  std::unique_ptr<PackWriter> w;
  ASSERT_TRUE(PackWriter::Create(t / "out", PackWriterOptions(), &w).ok());
  ASSERT_TRUE(w->AddClass("a").ok());
  ASSERT_TRUE(w->AddClass("b").ok());
  ASSERT_TRUE(w->Add("b/1", 1, "x").ok());
  Status s = w->Add("a/1", 0, "y");
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_TRUE(w->status().IsInvalidArgument());
  EXPECT_TRUE(w->Add("b/2", 1, "z").IsInvalidArgument());  // sticky
  EXPECT_TRUE(w->Finish().IsInvalidArgument());
  w.reset();
  EXPECT_FALSE(test::Exists(t / "out/index.ufs"));
  EXPECT_FALSE(test::Exists(t / "out/data.ufs"));
  EXPECT_TRUE(test::PackTempFiles(t / "out").empty());
}

TEST(PackWriterTest, LabelMustBeADeclaredClass) {
  TempDir t;
  std::unique_ptr<PackWriter> w;
  ASSERT_TRUE(PackWriter::Create(t / "out", PackWriterOptions(), &w).ok());
  ASSERT_TRUE(w->AddClass("a").ok());
  EXPECT_TRUE(w->Add("x", 1, "x").IsInvalidArgument());
  ASSERT_TRUE(PackWriter::Create(t / "out2", PackWriterOptions(), &w).ok());
  EXPECT_TRUE(w->Add("x", kNoLabel, "x").IsInvalidArgument());
}

TEST(PackWriterTest, FlatPackTakesNoLabelsOrClasses) {
  TempDir t;
  PackWriterOptions o;
  o.flat = true;
  std::unique_ptr<PackWriter> w;
  ASSERT_TRUE(PackWriter::Create(t / "out", o, &w).ok());
  EXPECT_TRUE(w->Add("x", 0, "x").IsInvalidArgument());
  ASSERT_TRUE(PackWriter::Create(t / "out2", o, &w).ok());
  EXPECT_TRUE(w->AddClass("c").IsInvalidArgument());
  ASSERT_TRUE(PackWriter::Create(t / "out3", o, &w).ok());
  ASSERT_TRUE(w->Add("x", kNoLabel, "x").ok());
  ASSERT_TRUE(w->Finish().ok());
  std::vector<PackRecord> recs;
  std::unique_ptr<Reader> reader;
  ASSERT_TRUE(ReadPack(t / "out3", &recs, &reader));
  EXPECT_TRUE(reader->info().flat);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].label, kNoLabel);
}

TEST(PackWriterTest, DuplicateNameFailsFinish) {
  TempDir t;
  PackWriterOptions o;
  o.flat = true;
  std::unique_ptr<PackWriter> w;
  ASSERT_TRUE(PackWriter::Create(t / "out", o, &w).ok());
  ASSERT_TRUE(w->Add("same", kNoLabel, "1").ok());
  ASSERT_TRUE(w->Add("other", kNoLabel, "2").ok());
  ASSERT_TRUE(w->Add("same", kNoLabel, "3").ok());
  Status s = w->Finish();
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.ToString().find("same"), std::string::npos) << s.ToString();
  w.reset();
  EXPECT_FALSE(test::Exists(t / "out/index.ufs"));
  EXPECT_TRUE(test::PackTempFiles(t / "out").empty());
}

TEST(PackWriterTest, FinishTwiceFails) {
  TempDir t;
  PackWriterOptions o;
  o.flat = true;
  std::unique_ptr<PackWriter> w;
  ASSERT_TRUE(PackWriter::Create(t / "out", o, &w).ok());
  ASSERT_TRUE(w->Finish().ok());
  EXPECT_FALSE(w->Finish().ok());
}

TEST(PackWriterTest, SetMetadataReplacesAndStoresInKeyOrder) {
  TempDir t;
  PackWriterOptions o;
  o.flat = true;
  std::unique_ptr<PackWriter> w;
  ASSERT_TRUE(PackWriter::Create(t / "out", o, &w).ok());
  ASSERT_TRUE(w->SetMetadata("zz", "last").ok());
  ASSERT_TRUE(w->SetMetadata(kMetaSourceRoot, "first value").ok());
  ASSERT_TRUE(w->Add("r", kNoLabel, "bytes").ok());
  ASSERT_TRUE(w->SetMetadata(kMetaSourceRoot, "/replaced").ok());
  ASSERT_TRUE(w->SetMetadata("aa", "").ok());
  ASSERT_TRUE(w->Finish().ok());

  std::vector<PackRecord> recs;
  std::unique_ptr<Reader> reader;
  ASSERT_TRUE(ReadPack(t / "out", &recs, &reader));  // CheckIndex passes
  std::vector<std::pair<std::string_view, std::string_view>> meta;
  ASSERT_TRUE(reader->ListMetadata(&meta).ok());
  ASSERT_EQ(meta.size(), 3u);
  EXPECT_EQ(meta[0].first, "aa");
  EXPECT_EQ(meta[0].second, "");
  EXPECT_EQ(meta[1].first, kMetaSourceRoot);
  EXPECT_EQ(meta[1].second, "/replaced");
  EXPECT_EQ(meta[2].first, "zz");
  EXPECT_EQ(meta[2].second, "last");
}

TEST(PackWriterTest, NoMetadataWritesAnEmptySection) {
  TempDir t;
  PackWriterOptions o;
  o.flat = true;
  std::unique_ptr<PackWriter> w;
  ASSERT_TRUE(PackWriter::Create(t / "out", o, &w).ok());
  ASSERT_TRUE(w->Add("r", kNoLabel, "bytes").ok());
  ASSERT_TRUE(w->Finish().ok());
  const std::string index = ReadFile(t / "out/index.ufs");
  std::string_view in(index);
  IndexHeader h;
  ASSERT_TRUE(h.DecodeFrom(&in).ok());
  EXPECT_EQ(h.meta.size, 0u);
  EXPECT_EQ(h.meta.offset, h.index_size);  // after the name pool, at the end
  std::unique_ptr<Reader> reader;
  ASSERT_TRUE(Reader::Open(t / "out", ReaderOptions(), &reader).ok());
  std::string_view root;
  EXPECT_TRUE(reader->GetMetadata(kMetaSourceRoot, &root).IsNotFound());
}

TEST(PackWriterTest, ZstdLevelIsChecked) {
  TempDir t;
  std::unique_ptr<PackWriter> w;
  PackWriterOptions o;
  o.zstd_level = 0;
  EXPECT_TRUE(PackWriter::Create(t / "out", o, &w).IsInvalidArgument());
  o.zstd_level = 100;
  EXPECT_TRUE(PackWriter::Create(t / "out", o, &w).IsInvalidArgument());
  o.zstd_level = 19;
  EXPECT_TRUE(PackWriter::Create(t / "out", o, &w).ok());
}

TEST(PackWriterTest, CreatesMissingParentsButNotOverAFile) {
  TempDir t;
  std::unique_ptr<PackWriter> w;
  ASSERT_TRUE(PackWriter::Create(t / "a/b/c/", PackWriterOptions(), &w).ok());
  EXPECT_EQ(w->out_dir(), t / "a/b/c");
  w.reset();
  WriteFile(t / "file", "x");
  EXPECT_TRUE(PackWriter::Create(t / "file", PackWriterOptions(), &w)
                  .IsInvalidArgument());
}

TEST(PackWriterTest, SecondWriterOnSameDirectoryFails) {
  TempDir t;
  std::unique_ptr<PackWriter> w1, w2;
  ASSERT_TRUE(PackWriter::Create(t / "out", PackWriterOptions(), &w1).ok());
  Status s = PackWriter::Create(t / "out", PackWriterOptions(), &w2);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_TRUE(w2 == nullptr);
  // Also through a different spelling of the path, and through BuildPack.
  s = PackWriter::Create(t / "out/", PackWriterOptions(), &w2);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  WriteFile(t / "src/c/a.jpg", "a");
  BuildSummary summary;
  s = BuildPack(t / "src", t / "out", Options(), &summary);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  // The first writer's temp files survive the failed attempts...
  // data, index, and the scratch records, names and hashes.
  EXPECT_EQ(test::PackTempFiles(t / "out").size(), 5u);
  // ...and once it is gone the directory is free again.
  w1.reset();
  EXPECT_TRUE(test::PackTempFiles(t / "out").empty());
  ASSERT_TRUE(PackWriter::Create(t / "out", PackWriterOptions(), &w2).ok());
}

TEST(PackWriterTest, StaleTempFilesAreRemoved) {
  TempDir t;
  WriteFile(t / "out/.data.ufs.tmp-abc", "stale data");
  WriteFile(t / "out/.index.ufs.tmp-xyz", "stale index");
  WriteFile(t / "out/keep.txt", "mine");
  WriteFile(t / "src/c/a.jpg", "a");
  BuildSummary summary;
  Status s = BuildPack(t / "src", t / "out", Options(), &summary);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_FALSE(test::Exists(t / "out/.data.ufs.tmp-abc"));
  EXPECT_FALSE(test::Exists(t / "out/.index.ufs.tmp-xyz"));
  EXPECT_TRUE(test::PackTempFiles(t / "out").empty());
  EXPECT_EQ(ReadFile(t / "out/keep.txt"), "mine");
}

TEST(PackWriterTest, AbandonKeepsThePreviousPack) {
  TempDir t;
  PackWriterOptions o;
  o.flat = true;
  std::unique_ptr<PackWriter> w;
  ASSERT_TRUE(PackWriter::Create(t / "out", o, &w).ok());
  ASSERT_TRUE(w->Add("old", kNoLabel, "old bytes").ok());
  ASSERT_TRUE(w->Finish().ok());
  const std::string data = ReadFile(t / "out/data.ufs");
  const std::string index = ReadFile(t / "out/index.ufs");

  w.reset();  // a finished writer keeps the directory locked until destroyed
  ASSERT_TRUE(PackWriter::Create(t / "out", o, &w).ok());
  ASSERT_TRUE(w->Add("new", kNoLabel, "new bytes").ok());
  // data, index, and the scratch records, names and hashes.
  EXPECT_EQ(test::PackTempFiles(t / "out").size(), 5u);
  w->Abandon();
  EXPECT_TRUE(test::PackTempFiles(t / "out").empty());
  EXPECT_FALSE(w->Finish().ok());
  w.reset();
  EXPECT_EQ(ReadFile(t / "out/data.ufs"), data);
  EXPECT_EQ(ReadFile(t / "out/index.ufs"), index);
  std::vector<PackRecord> recs;
  ASSERT_TRUE(ReadPack(t / "out", &recs));
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].bytes, "old bytes");
}

TEST(PackWriterTest, AddFromFdStreamsAndRewindsOnSizeMismatch) {
  TempDir t;
  const std::string content = test::RandomBytes(10000, 5);
  WriteFile(t / "src", content);
  PackWriterOptions o;
  o.flat = true;
  std::unique_ptr<PackWriter> w;
  ASSERT_TRUE(PackWriter::Create(t / "out", o, &w).ok());
  ASSERT_TRUE(w->Add("before", kNoLabel, "before").ok());
  for (uint64_t wrong : {uint64_t{20000}, uint64_t{5000}}) {
    int fd = open((t / "src").c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    Status s = w->AddFromFd("bad", kNoLabel, fd, wrong, t / "src");
    close(fd);
    EXPECT_TRUE(s.IsIOError()) << s.ToString();
    EXPECT_NE(s.ToString().find(t / "src"), std::string::npos) << s.ToString();
    // A source error is not the writer's: it carries on.
    EXPECT_TRUE(w->status().ok()) << w->status().ToString();
  }
  int fd = open((t / "src").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(
      w->AddFromFd("good", kNoLabel, fd, content.size(), t / "src").ok());
  close(fd);
  ASSERT_TRUE(w->Add("after", kNoLabel, "after").ok());
  ASSERT_TRUE(w->Finish().ok());
  std::vector<PackRecord> recs;
  ASSERT_TRUE(ReadPack(t / "out", &recs));
  ASSERT_EQ(recs.size(), 3u);
  EXPECT_EQ(recs[0].bytes, "before");
  EXPECT_EQ(recs[1].name, "good");
  EXPECT_TRUE(recs[1].bytes == content);
  EXPECT_EQ(recs[2].bytes, "after");
}

// --- BuildPack: arguments ---------------------------------------------------

TEST(BuildPackTest, BadArguments) {
  TempDir t;
  WriteFile(t / "src/c/a.jpg", "a");
  BuildSummary summary;
  Status s = BuildPack(t / "nope", t / "out", Options(), &summary);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  s = BuildPack(t / "src/c/a.jpg", t / "out", Options(), &summary);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  s = BuildPack(t / "src", t / "out", Options(0), &summary);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  test::MakeDirs(t / "src/empty");
  s = BuildPack(t / "src", t / "out", Options(), &summary);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.ToString().find("empty"), std::string::npos) << s.ToString();
  EXPECT_FALSE(test::Exists(t / "out/index.ufs"));
  EXPECT_TRUE(test::PackTempFiles(t / "out").empty());
}

TEST(BuildPackTest, AllowEmptyClass) {
  TempDir t;
  WriteFile(t / "src/b/a.jpg", "a");
  test::MakeDirs(t / "src/a");
  BuildOptions o = Options();
  o.scan.allow_empty = true;
  BuildSummary summary;
  BuildAndVerify(t / "src", t / "out", o, &summary);
  EXPECT_EQ(summary.classes, 2u);
}

// --- BuildPack: determinism and compression ---------------------------------

TEST(BuildPackTest, SameInputGivesByteIdenticalPack) {
  TempDir t;
  MakeVariedTree(t / "src");
  for (bool compress : {false, true}) {
    SCOPED_TRACE(compress ? "compressed" : "raw");
    std::string data, index;
    for (int threads : {32, 32, 1, 3}) {
      BuildOptions o = Options(threads);
      o.writer.compress = compress;
      const std::string out = t / ("out" + std::to_string(compress) + "-" +
                                   std::to_string(threads));
      BuildSummary summary;
      Status s = BuildPack(t / "src", out, o, &summary);
      ASSERT_TRUE(s.ok()) << s.ToString();
      if (data.empty()) {
        data = ReadFile(out + "/data.ufs");
        index = ReadFile(out + "/index.ufs");
        continue;
      }
      EXPECT_TRUE(ReadFile(out + "/data.ufs") == data) << "threads " << threads;
      EXPECT_TRUE(ReadFile(out + "/index.ufs") == index)
          << "threads " << threads;
    }
  }
}

TEST(BuildPackTest, RebuildIntoSameDirectoryIsIdentical) {
  TempDir t;
  MakeVariedTree(t / "src");
  BuildSummary s1, s2;
  ASSERT_TRUE(BuildPack(t / "src", t / "out", Options(), &s1).ok());
  const std::string data = ReadFile(t / "out/data.ufs");
  const std::string index = ReadFile(t / "out/index.ufs");
  ASSERT_TRUE(BuildPack(t / "src", t / "out", Options(), &s2).ok());
  EXPECT_EQ(s1.pack_id, s2.pack_id);
  EXPECT_TRUE(ReadFile(t / "out/data.ufs") == data);
  EXPECT_TRUE(ReadFile(t / "out/index.ufs") == index);
  // A change to one byte of one file changes the pack id.
  test::FlipByte(t / "src/class2/f1.jpg", 3);
  ASSERT_TRUE(BuildPack(t / "src", t / "out", Options(), &s2).ok());
  EXPECT_NE(s1.pack_id, s2.pack_id);
}

TEST(BuildPackTest, CompressionStoresZstdOnlyWhenSmaller) {
  TempDir t;
  const std::string text = test::CompressibleBytes(200000, 3);
  const std::string noise = test::RandomBytes(200000, 4);
  WriteFile(t / "src/c/text.jpg", text);
  WriteFile(t / "src/c/noise.jpg", noise);
  WriteFile(t / "src/c/tiny.jpg", "ab");
  WriteFile(t / "src/c/zero.jpg", "");
  BuildOptions o = Options();
  o.writer.compress = true;
  BuildSummary summary;
  BuildAndVerify(t / "src", t / "out", o, &summary);
  EXPECT_EQ(summary.compressed, 1u);
  std::vector<PackRecord> recs;
  std::unique_ptr<Reader> reader;
  ASSERT_TRUE(ReadPack(t / "out", &recs, &reader));
  std::map<std::string, Codec> codec;
  for (const auto& r : recs) codec[r.name] = r.codec;
  EXPECT_EQ(codec["c/text.jpg"], Codec::kZstd);
  EXPECT_EQ(codec["c/noise.jpg"], Codec::kRaw);
  EXPECT_EQ(codec["c/tiny.jpg"], Codec::kRaw);
  EXPECT_EQ(codec["c/zero.jpg"], Codec::kRaw);
  uint64_t idx = 0;
  ASSERT_TRUE(reader->Find("c/text.jpg", &idx).ok());
  Record r;
  ASSERT_TRUE(reader->GetRecord(idx, &r).ok());
  EXPECT_LT(r.stored_length, text.size() / 4);
  EXPECT_EQ(r.original_length, text.size());
  EXPECT_LT(summary.bytes_out, text.size() + noise.size());

  // Without compression everything is raw.
  o.writer.compress = false;
  BuildAndVerify(t / "src", t / "out-raw", o, &summary);
  EXPECT_EQ(summary.compressed, 0u);
  ASSERT_TRUE(ReadPack(t / "out-raw", &recs));
  for (const auto& rec : recs) EXPECT_EQ(rec.codec, Codec::kRaw) << rec.name;
}

TEST(BuildPackTest, ProgressEndsWithEveryFile) {
  TempDir t;
  MakeVariedTree(t / "src");
  BuildOptions o = Options();
  std::vector<BuildProgress> calls;
  o.progress = [&](const BuildProgress& p) { calls.push_back(p); };
  BuildSummary summary;
  ASSERT_TRUE(BuildPack(t / "src", t / "out", o, &summary).ok());
  ASSERT_FALSE(calls.empty());
  EXPECT_EQ(calls.back().files_done, summary.files);
  EXPECT_EQ(calls.back().files_total, summary.files);
  EXPECT_EQ(calls.back().bytes_in, summary.bytes_in);
  EXPECT_EQ(calls.back().bytes_out, summary.bytes_out);
}

// A tree larger than BuildOptions::scan_ahead is packed while it is listed,
// a class at a time: the pack is the one a whole-tree build gives, a class
// larger than the window included, and progress says the total still
// grows until the scan is done.
TEST(BuildPackTest, PacksWhileListingInBoundedMemory) {
  TempDir t;
  std::mt19937_64 rng(11);
  for (int c = 0; c < 30; ++c) {
    const int files = c == 7 ? 150 : static_cast<int>(rng() % 12);
    for (int k = 0; k < files; ++k) {
      WriteFile(t / ("src/c" + std::to_string(c) + (k % 4 ? "" : "/d") + "/f" +
                     std::to_string(k) + ".jpg"),
                test::RandomBytes(rng() % 3000, rng()));
    }
    test::MakeDirs(t / ("src/c" + std::to_string(c)));
  }
  BuildOptions whole = Options();
  whole.scan.allow_empty = true;
  BuildSummary expect;
  BuildAndVerify(t / "src", t / "whole", whole, &expect);
  std::vector<PackRecord> want, got;
  ASSERT_TRUE(ReadPack(t / "whole", &want));

  for (int threads : {1, 4}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    BuildOptions o = whole;
    o.threads = threads;
    o.scan_ahead = 16;  // packs 4 files at a time; class c7 alone is 150
    std::vector<BuildProgress> calls;
    o.progress = [&](const BuildProgress& p) { calls.push_back(p); };
    const std::string out = t / ("stream" + std::to_string(threads));
    BuildSummary summary;
    BuildAndVerify(t / "src", out, o, &summary);
    ASSERT_TRUE(ReadPack(out, &got));
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].name, want[i].name);
      EXPECT_EQ(got[i].label, want[i].label);
      EXPECT_EQ(got[i].bytes, want[i].bytes);
    }
    EXPECT_EQ(summary.files, expect.files);
    EXPECT_EQ(summary.classes, 30u);
    // The scan cannot run more than 16 files (or one class) ahead, so the
    // first report comes before it is done.
    ASSERT_GE(calls.size(), 2u);
    EXPECT_FALSE(calls.front().scan_done);
    EXPECT_LT(calls.front().files_total, summary.files);
    for (size_t k = 0; k < calls.size(); ++k) {
      // Listed and not yet packed: at most the queue (16), the run being
      // packed (4) and one class larger than the queue (c7: 150).
      EXPECT_LE(calls[k].files_total - calls[k].files_done, 16u + 4u + 150u)
          << "report " << k;
      if (k == 0) continue;
      EXPECT_GE(calls[k].files_total, calls[k - 1].files_total);
      EXPECT_GE(calls[k].files_done, calls[k - 1].files_done);
      EXPECT_LE(calls[k].files_done, calls[k].files_total);
    }
    EXPECT_TRUE(calls.back().scan_done);
    EXPECT_EQ(calls.back().files_total, summary.files);
    EXPECT_EQ(calls.back().classes_scanned, 30u);
    EXPECT_EQ(calls.back().classes_total, 30u);
  }

  // Flat: one class, listed whole whatever the window.
  BuildOptions flat = Options();
  flat.scan.flat = true;
  flat.scan_ahead = 16;
  BuildSummary fs;
  BuildAndVerify(t / "src", t / "flat", flat, &fs);
  EXPECT_EQ(fs.files, expect.files);
  flat.scan_ahead = BuildOptions().scan_ahead;
  BuildAndVerify(t / "src", t / "flat-whole", flat, &fs);
  std::vector<PackRecord> flat_want;
  ASSERT_TRUE(ReadPack(t / "flat-whole", &flat_want));
  ASSERT_TRUE(ReadPack(t / "flat", &got));
  ASSERT_EQ(got.size(), flat_want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].name, flat_want[i].name);
    EXPECT_EQ(got[i].bytes, flat_want[i].bytes);
  }
}

// A first class smaller than a run, then one larger than the whole window:
// the scan cannot push it until the packing takes the first, and the
// packing must not wait for a full run (it would wait forever).
TEST(BuildPackTest, AClassLargerThanTheWindowAfterASmallOneDoesNotHang) {
  TempDir t;
  WriteFile(t / "src/a/one.jpg", "1");
  for (int k = 0; k < 20; ++k) {
    WriteFile(t / ("src/b/f" + std::to_string(k) + ".jpg"),
              std::string(k, 'b'));
  }
  WriteFile(t / "src/c/last.jpg", "3");
  BuildOptions o = Options();
  o.scan_ahead = 16;
  BuildSummary summary;
  BuildAndVerify(t / "src", t / "out", o, &summary);
  EXPECT_EQ(summary.files, 22u);
}

// An empty class found after packing started still fails the build, with
// every empty class named, and the previous pack stays.
TEST(BuildPackTest, LateEmptyClassFailsAndKeepsThePreviousPack) {
  TempDir t;
  for (int c = 0; c < 10; ++c) {
    for (int k = 0; k < 5; ++k) {
      WriteFile(
          t / ("src/c" + std::to_string(c) + "/f" + std::to_string(k) + ".jpg"),
          "x" + std::to_string(c * 10 + k));
    }
  }
  BuildOptions o = Options();
  BuildSummary summary;
  BuildAndVerify(t / "src", t / "out", o, &summary);
  const std::string index = test::ReadFile(t / "out/index.ufs");
  test::MakeDirs(t / "src/c8x");
  WriteFile(t / "src/c9/notes.txt", "not an image");
  test::MakeDirs(t / "src/d");
  o.scan_ahead = 8;
  std::vector<BuildProgress> calls;
  o.progress = [&](const BuildProgress& p) { calls.push_back(p); };
  Status s = BuildPack(t / "src", t / "out", o, &summary);
  ASSERT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.ToString().find("classes 'c8x', 'd'"), std::string::npos)
      << s.ToString();
  EXPECT_FALSE(calls.empty());  // packing had started
  EXPECT_EQ(test::ReadFile(t / "out/index.ufs"), index);
  EXPECT_TRUE(test::PackTempFiles(t / "out").empty());
}

// Ctrl-C while the scan is ahead of the packing: Aborted, the scanning
// thread stopped, nothing published.
TEST(BuildPackTest, CancelWhileListing) {
  TempDir t;
  for (int c = 0; c < 40; ++c) {
    for (int k = 0; k < 3; ++k) {
      WriteFile(
          t / ("src/c" + std::to_string(c) + "/f" + std::to_string(k) + ".jpg"),
          "y");
    }
  }
  std::atomic<bool> cancel{false};
  BuildOptions o = Options();
  o.scan_ahead = 8;
  o.cancel = &cancel;
  bool listing = false;
  o.progress = [&](const BuildProgress& p) {
    listing = !p.scan_done;
    cancel = true;
  };
  BuildSummary summary;
  Status s = BuildPack(t / "src", t / "out", o, &summary);
  EXPECT_TRUE(s.IsAborted()) << s.ToString();
  EXPECT_TRUE(listing);
  EXPECT_FALSE(test::Exists(t / "out/index.ufs"));
  EXPECT_TRUE(test::PackTempFiles(t / "out").empty());
}

// --- BuildPack: failures and atomic publishing ------------------------------

// Builds a first pack into t/out and returns its bytes.
void BuildFirstPack(const TempDir& t, std::string* data, std::string* index) {
  WriteFile(t / "src/a/1.jpg", "first");
  WriteFile(t / "src/b/2.jpg", test::RandomBytes(5000, 1));
  BuildSummary summary;
  Status s = BuildPack(t / "src", t / "out", Options(), &summary);
  ASSERT_TRUE(s.ok()) << s.ToString();
  *data = ReadFile(t / "out/data.ufs");
  *index = ReadFile(t / "out/index.ufs");
}

void ExpectFirstPackIntact(const TempDir& t, const std::string& data,
                           const std::string& index) {
  EXPECT_TRUE(ReadFile(t / "out/data.ufs") == data);
  EXPECT_TRUE(ReadFile(t / "out/index.ufs") == index);
  std::vector<PackRecord> recs;
  ASSERT_TRUE(ReadPack(t / "out", &recs));
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].bytes, "first");
  EXPECT_TRUE(test::PackTempFiles(t / "out").empty());
}

TEST(BuildPackTest, FifoFailsTheBuildAndKeepsThePreviousPack) {
  TempDir t;
  std::string data, index;
  ASSERT_NO_FATAL_FAILURE(BuildFirstPack(t, &data, &index));
  WriteFile(t / "src/a/3.jpg", "more");
  MakeFifo(t / "src/b/pipe.jpg");
  BuildSummary summary;
  Status s = BuildWithFifoGuard(t / "src", t / "out", Options(), &summary,
                                {t / "src/b/pipe.jpg"});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("pipe.jpg"), std::string::npos) << s.ToString();
  ExpectFirstPackIntact(t, data, index);
}

// The output directory is untrusted too: a FIFO planted as the previous
// pack's files, or as the .data.ufs.prev a killed build leaves, must not
// block the checks a build makes there before writing (it reads their pack
// ids); the build replaces them and publishes.
TEST(BuildPackTest, FifoInTheOutputDirectoryNeverBlocks) {
  for (const std::string planted :
       {".data.ufs.prev", "index.ufs", "data.ufs"}) {
    SCOPED_TRACE(planted);
    TempDir t;
    std::string data, index;
    ASSERT_NO_FATAL_FAILURE(BuildFirstPack(t, &data, &index));
    // A valid .data.ufs.prev makes the build read index.ufs and data.ufs.
    ASSERT_EQ(
        link((t / "out/data.ufs").c_str(), (t / "out/.data.ufs.prev").c_str()),
        0);
    const std::string fifo = t / ("out/" + planted);
    ASSERT_EQ(unlink(fifo.c_str()), 0);
    ASSERT_NO_FATAL_FAILURE(MakeFifo(fifo));
    WriteFile(t / "src/a/3.jpg", "more");
    BuildSummary summary;
    Status s =
        BuildWithFifoGuard(t / "src", t / "out", Options(), &summary, {fifo});
    ASSERT_TRUE(s.ok()) << s.ToString();
    std::vector<PackRecord> recs;
    ASSERT_TRUE(ReadPack(t / "out", &recs));
    EXPECT_EQ(recs.size(), 3u);
    EXPECT_TRUE(test::PackTempFiles(t / "out").empty());
  }
}

TEST(BuildPackTest, FifoIsSkippedWithSkipUnreadable) {
  TempDir t;
  WriteFile(t / "src/a/1.jpg", "one");
  MakeFifo(t / "src/a/2.jpg");
  WriteFile(t / "src/a/3.jpg", "three");
  BuildOptions o = Options();
  o.skip_unreadable = true;
  BuildSummary summary;
  Status s = BuildWithFifoGuard(t / "src", t / "out", o, &summary,
                                {t / "src/a/2.jpg"});
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(summary.skipped, 1u);
  EXPECT_EQ(summary.files, 2u);
  bool named = false;
  for (const auto& w : summary.warnings) {
    named = named || w.find("2.jpg") != std::string::npos;
  }
  EXPECT_TRUE(named);
  std::vector<PackRecord> recs;
  ASSERT_TRUE(ReadPack(t / "out", &recs));
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].name, "a/1.jpg");
  EXPECT_EQ(recs[0].bytes, "one");
  EXPECT_EQ(recs[1].name, "a/3.jpg");
  EXPECT_EQ(recs[1].bytes, "three");
}

TEST(BuildPackTest, DanglingSymlinkIsAnErrorNamingIt) {
  TempDir t;
  std::string data, index;
  ASSERT_NO_FATAL_FAILURE(BuildFirstPack(t, &data, &index));
  test::Symlink(t / "gone.jpg", t / "src/a/x.jpg");
  BuildSummary summary;
  Status s = BuildPack(t / "src", t / "out", Options(), &summary);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("a/x.jpg"), std::string::npos) << s.ToString();
  ExpectFirstPackIntact(t, data, index);

  BuildOptions o = Options();
  o.skip_unreadable = true;
  s = BuildPack(t / "src", t / "out", o, &summary);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(summary.skipped, 1u);
  EXPECT_EQ(summary.files, 2u);
  ASSERT_FALSE(summary.warnings.empty());
  EXPECT_NE(summary.warnings[0].find("a/x.jpg"), std::string::npos)
      << summary.warnings[0];
}

TEST(BuildPackTest, SymlinkToAFifoFails) {
  TempDir t;
  WriteFile(t / "src/a/1.jpg", "one");
  MakeFifo(t / "fifo");
  test::Symlink(t / "fifo", t / "src/a/2.jpg");
  BuildSummary summary;
  Status s = BuildWithFifoGuard(t / "src", t / "out", Options(), &summary,
                                {t / "fifo"});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("a/2.jpg"), std::string::npos) << s.ToString();
  EXPECT_FALSE(test::Exists(t / "out/index.ufs"));
  EXPECT_TRUE(test::PackTempFiles(t / "out").empty());
}

TEST(BuildPackTest, CancelLeavesThePreviousPack) {
  TempDir t;
  std::string data, index;
  ASSERT_NO_FATAL_FAILURE(BuildFirstPack(t, &data, &index));
  WriteFile(t / "src/a/3.jpg", "more");
  std::atomic<bool> cancel{true};
  BuildOptions o = Options();
  o.cancel = &cancel;
  BuildSummary summary;
  Status s = BuildPack(t / "src", t / "out", o, &summary);
  EXPECT_TRUE(s.IsAborted()) << s.ToString();
  ExpectFirstPackIntact(t, data, index);
}

TEST(BuildPackTest, SymlinkLoopDoesNotHang) {
  TempDir t;
  WriteFile(t / "src/a/sub/1.jpg", "one");
  test::Symlink("../..", t / "src/a/sub/loop");  // -> src/a
  test::Symlink(t / "src", t / "src/a/root");    // -> src (holds a)
  BuildSummary summary;
  BuildOptions o = Options();
  Status s = BuildPack(t / "src", t / "out", o, &summary);
  ASSERT_TRUE(s.ok()) << s.ToString();
  bool warned = false;
  for (const auto& w : summary.warnings) {
    warned = warned || w.find("symlink loop") != std::string::npos;
  }
  EXPECT_TRUE(warned);
  EXPECT_GE(summary.skipped, 1u);
  std::vector<PackRecord> recs;
  ASSERT_TRUE(ReadPack(t / "out", &recs));
  ASSERT_FALSE(recs.empty());
  EXPECT_EQ(recs[0].name, "a/sub/1.jpg");
  for (const auto& r : recs) EXPECT_EQ(r.bytes, "one") << r.name;
  EXPECT_LE(recs.size(), 2u);
}

// --- BuildPack: the output directory inside the source ----------------------

TEST(BuildPackTest, OutputInsideAClassIsNotPacked) {
  TempDir t;
  WriteFile(t / "src/c/a.jpg", "a");
  BuildOptions o = Options();
  o.scan.all_files = true;  // the pack's own files would match
  for (int round = 0; round < 2; ++round) {
    BuildSummary summary;
    Status s = BuildPack(t / "src", t / "src/c/pack", o, &summary);
    ASSERT_TRUE(s.ok()) << s.ToString();
    std::vector<PackRecord> recs;
    ASSERT_TRUE(ReadPack(t / "src/c/pack", &recs));
    ASSERT_EQ(recs.size(), 1u) << "round " << round;
    EXPECT_EQ(recs[0].name, "c/a.jpg");
  }
}

TEST(BuildPackTest, OutputDirectoryAsAClassIsNotPacked) {
  TempDir t;
  WriteFile(t / "src/c/a.jpg", "a");
  BuildOptions o = Options();
  o.scan.all_files = true;
  for (int round = 0; round < 2; ++round) {
    BuildSummary summary;
    Status s = BuildPack(t / "src", t / "src/pack", o, &summary);
    ASSERT_TRUE(s.ok()) << s.ToString();
    std::vector<PackRecord> recs;
    std::unique_ptr<Reader> reader;
    ASSERT_TRUE(ReadPack(t / "src/pack", &recs, &reader));
    EXPECT_EQ(reader->class_count(), 1u) << "round " << round;
    ASSERT_EQ(recs.size(), 1u) << "round " << round;
  }
}

TEST(BuildPackTest, FlatOutputInsideTheTreeIsNotPacked) {
  TempDir t;
  WriteFile(t / "src/a.jpg", "a");
  WriteFile(t / "src/d/b.jpg", "b");
  BuildOptions o = Options();
  o.scan.flat = true;
  o.scan.all_files = true;
  for (int round = 0; round < 2; ++round) {
    BuildSummary summary;
    Status s = BuildPack(t / "src", t / "src/d/pack", o, &summary);
    ASSERT_TRUE(s.ok()) << s.ToString();
    std::vector<PackRecord> recs;
    ASSERT_TRUE(ReadPack(t / "src/d/pack", &recs));
    ASSERT_EQ(recs.size(), 2u) << "round " << round;
    EXPECT_EQ(recs[0].name, "a.jpg");
    EXPECT_EQ(recs[1].name, "d/b.jpg");
  }
}

TEST(BuildPackTest, FlatOutputIsTheSourceRoot) {
  TempDir t;
  WriteFile(t / "src/a.jpg", "a");
  WriteFile(t / "src/d/b.txt", "b");
  BuildOptions o = Options();
  o.scan.flat = true;
  o.scan.all_files = true;  // data.ufs, index.ufs and the temp files match
  for (int round = 0; round < 2; ++round) {
    BuildSummary summary;
    Status s = BuildPack(t / "src", t / "src", o, &summary);
    ASSERT_TRUE(s.ok()) << "round " << round << ": " << s.ToString();
    std::vector<PackRecord> recs;
    ASSERT_TRUE(ReadPack(t / "src", &recs));
    ASSERT_EQ(recs.size(), 2u) << "round " << round;
    EXPECT_EQ(recs[0].name, "a.jpg");
    EXPECT_EQ(recs[1].name, "d/b.txt");
    EXPECT_EQ(summary.skipped, 0u);
    EXPECT_TRUE(test::PackTempFiles(t / "src").empty());
  }
}

// --- BuildPack: metadata ----------------------------------------------------

// The source_root metadata of the pack at `dir`, or the error.
std::string SourceRootOf(const std::string& dir) {
  std::unique_ptr<Reader> reader;
  Status s = Reader::Open(dir, ReaderOptions(), &reader);
  if (!s.ok()) return "open: " + s.ToString();
  std::string_view root;
  s = reader->GetMetadata(kMetaSourceRoot, &root);
  if (!s.ok()) return "get: " + s.ToString();
  return std::string(root);
}

TEST(BuildPackTest, RecordsSourceRootAsGiven) {
  TempDir t;
  WriteFile(t / "src/c/a.jpg", "a");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {t / "src", t / "src"},
      {t / "src/", t / "src"},               // trailing slash removed
      {t / "src///", t / "src"},             // all of them
      {t / "src/../src", t / "src/../src"},  // not made canonical
      {t / "./src", t / "./src"},
  };
  for (const auto& [given, stored] : cases) {
    SCOPED_TRACE(given);
    BuildSummary summary;
    Status s = BuildPack(given, t / "out", Options(), &summary);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(SourceRootOf(t / "out"), stored);
    std::vector<PackRecord> recs;
    ASSERT_TRUE(ReadPack(t / "out", &recs));  // CheckIndex parses it too
    ASSERT_EQ(recs.size(), 1u);
    EXPECT_EQ(recs[0].name, "c/a.jpg");
  }
}

TEST(BuildPackTest, FlatPackRecordsSourceRoot) {
  TempDir t;
  WriteFile(t / "src/a.jpg", "a");
  BuildOptions o = Options();
  o.scan.flat = true;
  BuildSummary summary;
  ASSERT_TRUE(BuildPack(t / "src/", t / "out", o, &summary).ok());
  EXPECT_EQ(SourceRootOf(t / "out"), t / "src");
}

TEST(BuildPackTest, SourceRootIsPartOfThePackId) {
  // The same files from two paths give the same records but different
  // metadata, hence different index bytes and pack ids.
  TempDir t;
  WriteFile(t / "one/c/a.jpg", "a");
  WriteFile(t / "two/c/a.jpg", "a");
  BuildSummary s1, s2;
  ASSERT_TRUE(BuildPack(t / "one", t / "out1", Options(), &s1).ok());
  ASSERT_TRUE(BuildPack(t / "two", t / "out2", Options(), &s2).ok());
  EXPECT_NE(s1.pack_id, s2.pack_id);
  EXPECT_EQ(SourceRootOf(t / "out1"), t / "one");
  EXPECT_EQ(SourceRootOf(t / "out2"), t / "two");
  // Built again from the same path: identical.
  BuildSummary s3;
  ASSERT_TRUE(BuildPack(t / "one/", t / "out3", Options(), &s3).ok());
  EXPECT_EQ(s1.pack_id, s3.pack_id);
}

// --- Round trips ------------------------------------------------------------

TEST(RoundTripTest, EdgeCaseNames) {
  TempDir t;
  const std::string src = t / "src";
  const std::string long_name = std::string(251, 'n') + ".jpg";
  const std::string long_bad =
      std::string(200, '\xff') + std::string(51, 'q') + ".png";
  ASSERT_EQ(long_name.size(), 255u);
  ASSERT_EQ(long_bad.size(), 255u);
  WriteFile(src + "/c/" + long_name, "long");
  WriteFile(src + "/c/" + long_bad, "long and not utf-8");
  WriteFile(src + "/c/\xff.jpg", "ff");
  WriteFile(src + "/c/\xf0\x9f\x98\x80.jpg", "emoji");
  WriteFile(src + "/c/\xc0\xaf.jpg", "overlong");
  WriteFile(src + "/c/zero.jpg", "");
  WriteFile(src + "/c/.hidden.jpg", "hidden");
  WriteFile(src + "/c/space name.JPG", "space");
  WriteFile(src + "/\xe9t\xe9/newline\n.jpg", "newline");
  WriteFile(src + "/\xe9t\xe9/nested/deeper/still/x.png", "deep");
  WriteFile(src + "/\xe9t\xe9/nested/zero.png", "");
  WriteFile(src + "/.hidden/h.bmp", test::RandomBytes(4096, 6));
  WriteFile(t / "elsewhere/l.jpg", "linked");
  WriteFile(t / "elsewhere/sub/m.jpg", test::CompressibleBytes(30000, 2));
  test::Symlink(t / "elsewhere", src + "/c/linkdir");
  test::Symlink(t / "elsewhere", src + "/linkclass");
  test::Symlink(src + "/c/zero.jpg", src + "/c/filelink.jpg");
  for (bool compress : {false, true}) {
    SCOPED_TRACE(compress ? "compressed" : "raw");
    BuildOptions o = Options();
    o.writer.compress = compress;
    BuildSummary summary;
    const std::string out = t / (compress ? "outz" : "out");
    ASSERT_NO_FATAL_FAILURE(BuildAndVerify(src, out, o, &summary));
    EXPECT_EQ(summary.files, 17u);
    EXPECT_EQ(summary.classes, 4u);
    std::vector<PackRecord> recs;
    ASSERT_TRUE(ReadPack(out, &recs));
    bool have_long_bad = false;
    for (const auto& r : recs) have_long_bad |= r.name == "c/" + long_bad;
    EXPECT_TRUE(have_long_bad);
  }
  // And flat.
  BuildOptions o = Options();
  o.scan.flat = true;
  BuildSummary summary;
  ASSERT_NO_FATAL_FAILURE(BuildAndVerify(src, t / "outflat", o, &summary));
  EXPECT_EQ(summary.files, 17u);
  EXPECT_EQ(summary.classes, 0u);
}

// A scratch directory like TempDir, but on /dev/shm unless TMPDIR says
// otherwise: a 100,000-file tree takes about a second to make there and can
// take minutes on a busy disk.
class FastTempDir {
 public:
  FastTempDir() {
    const char* env = std::getenv("TMPDIR");
    std::string base = env != nullptr && *env != 0 ? env : "/tmp";
    struct stat st;
    if ((env == nullptr || *env == 0) && stat("/dev/shm", &st) == 0 &&
        S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0) {
      base = "/dev/shm";
    }
    std::string tmpl = base + "/ufspack-test-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()) != nullptr) path_ = buf.data();
  }
  ~FastTempDir() {
    if (!path_.empty()) test::RemoveAll(path_);
  }
  FastTempDir(const FastTempDir&) = delete;
  FastTempDir& operator=(const FastTempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const {
    return path_ + "/" + rel;
  }

 private:
  std::string path_;
};

TEST(RoundTripTest, HundredThousandSmallFiles) {
  FastTempDir t;
  ASSERT_FALSE(t.path().empty()) << "mkdtemp failed";
  const std::string src = t / "src";
  constexpr int kClasses = 100;
  constexpr int kPerClass = 1000;
  std::map<std::string, std::string> want;
  uint64_t state = 1;
  for (int c = 0; c < kClasses; ++c) {
    char cls[16];
    std::snprintf(cls, sizeof(cls), "n%05d", c);
    test::MakeDirs(src + "/" + cls);
    for (int i = 0; i < kPerClass; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const size_t size = 16 + (state >> 33) % 49;
      std::string name = std::string(cls) + "/" + std::to_string(i) + ".jpg";
      std::string bytes = test::RandomBytes(size, state);
      const std::string path = src + "/" + name;
      int fd =
          open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      ASSERT_GE(fd, 0) << path;
      ASSERT_EQ(write(fd, bytes.data(), bytes.size()),
                static_cast<ssize_t>(bytes.size()));
      close(fd);
      want.emplace(std::move(name), std::move(bytes));
    }
  }
  BuildOptions o = Options(32);
  BuildSummary summary;
  Status s = BuildPack(src, t / "out", o, &summary);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(summary.files, 100000u);
  EXPECT_EQ(summary.classes, 100u);

  std::unique_ptr<Reader> reader;
  ASSERT_TRUE(Reader::Open(t / "out", ReaderOptions(), &reader).ok());
  ASSERT_EQ(reader->size(), want.size());
  ASSERT_TRUE(reader->CheckIndex().ok());
  std::string prev;
  size_t bad = 0;
  std::string bytes;
  for (uint64_t i = 0; i < reader->size(); ++i) {
    Record r;
    ASSERT_TRUE(reader->GetRecord(i, &r).ok());
    const std::string name(r.name);
    auto it = want.find(name);
    ASSERT_NE(it, want.end()) << name;
    ASSERT_TRUE(reader->Read(i, &bytes).ok());
    if (bytes != it->second && bad++ < 10) ADD_FAILURE() << name;
    EXPECT_EQ(r.label, static_cast<uint32_t>(std::stoi(name.substr(1, 5))));
    // Python order within a class: "10.jpg" < "100.jpg" < "11.jpg".
    if (i > 0 && name.substr(0, 6) == prev.substr(0, 6)) {
      EXPECT_TRUE(PyFsLess(prev, name)) << prev << " " << name;
    }
    prev = name;
  }
  EXPECT_EQ(bad, 0u);
}

TEST(RoundTripTest, FileLargerThan64MiBIsStreamed) {
  TempDir t;
  const std::string src = t / "src";
  const uint64_t size = (65ull << 20) + 3;
  test::MakeDirs(src + "/c");
  ASSERT_NO_FATAL_FAILURE(MakeSparseFile(src + "/c/big.jpg", size));
  WriteFile(src + "/c/a.jpg", test::CompressibleBytes(10000, 1));
  WriteFile(src + "/c/z.jpg", test::RandomBytes(7777, 2));
  BuildOptions o = Options();
  o.writer.compress = true;
  BuildSummary summary;
  Status s = BuildPack(src, t / "out", o, &summary);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(summary.files, 3u);
  EXPECT_EQ(summary.compressed, 1u);

  std::unique_ptr<Reader> reader;
  ASSERT_TRUE(Reader::Open(t / "out", ReaderOptions(), &reader).ok());
  ASSERT_EQ(reader->size(), 3u);
  const std::vector<std::string> names = {"c/a.jpg", "c/big.jpg", "c/z.jpg"};
  for (uint64_t i = 0; i < 3; ++i) {
    Record r;
    ASSERT_TRUE(reader->GetRecord(i, &r).ok());
    EXPECT_EQ(std::string(r.name), names[i]);
    std::string bytes;
    s = reader->Read(i, &bytes);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(bytes == ReadFile(src + "/" + names[i])) << names[i];
    if (i == 1) {
      EXPECT_EQ(r.codec, Codec::kRaw);  // streamed records are stored raw
      EXPECT_EQ(r.original_length, size);
      EXPECT_EQ(bytes.size(), size);
      EXPECT_EQ(bytes.substr(0, 4), "head");
      EXPECT_EQ(bytes.substr(size - 4), "tail");
    }
  }
  EXPECT_EQ(summary.bytes_in, size + 10000 + 7777);
}

TEST(RoundTripTest, FilesOverTheInFlightBudget) {
  // Five 60 MiB files (read whole, below the streaming threshold) exceed
  // the 256 MiB of source bytes the readers may hold: readers must wait for
  // the writer without deadlocking, and the order must hold.
  TempDir t;
  const std::string src = t / "src";
  test::MakeDirs(src + "/c");
  constexpr uint64_t kSize = 60ull << 20;
  for (int i = 0; i < 5; ++i) {
    const std::string path = src + "/c/" + std::to_string(i) + ".jpg";
    ASSERT_NO_FATAL_FAILURE(MakeSparseFile(path, kSize + i));
    WriteFile(src + "/c/" + std::to_string(i) + "s.jpg", std::to_string(i));
  }
  BuildSummary summary;
  Status s = BuildPack(src, t / "out", Options(32), &summary);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::unique_ptr<Reader> reader;
  ASSERT_TRUE(Reader::Open(t / "out", ReaderOptions(), &reader).ok());
  ASSERT_EQ(reader->size(), 10u);
  for (uint64_t i = 0; i < reader->size(); ++i) {
    Record r;
    ASSERT_TRUE(reader->GetRecord(i, &r).ok());
    const std::string name(r.name);
    const int n = static_cast<int>(i / 2);
    if (i % 2 == 0) {
      EXPECT_EQ(name, "c/" + std::to_string(n) + ".jpg");
      EXPECT_EQ(r.original_length, kSize + n);
      std::string bytes;
      ASSERT_TRUE(reader->Read(i, &bytes).ok());
      EXPECT_EQ(bytes.substr(0, 4), "head") << name;
      EXPECT_EQ(bytes.substr(bytes.size() - 4), "tail") << name;
    } else {
      EXPECT_EQ(name, "c/" + std::to_string(n) + "s.jpg");
      std::string bytes;
      ASSERT_TRUE(reader->Read(i, &bytes).ok());
      EXPECT_EQ(bytes, std::to_string(n));
    }
  }
}

TEST(RoundTripTest, RealPhotos) {
  const std::string tar = test::SharedPhotosTar();
  if (tar.empty()) GTEST_SKIP() << "cats_and_dogs_filtered.tar not found";
  TempDir t;
  test::CommandResult r =
      test::Run({"/usr/bin/tar", "-xf", tar, "-C", t.path()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string base = t / "cats_and_dogs_filtered";

  BuildSummary summary;
  ASSERT_NO_FATAL_FAILURE(
      BuildAndVerify(base + "/train", t / "train", Options(32), &summary));
  EXPECT_EQ(summary.files, 2000u);
  EXPECT_EQ(summary.classes, 2u);
  std::unique_ptr<Reader> reader;
  ASSERT_TRUE(Reader::Open(t / "train", ReaderOptions(), &reader).ok());
  ClassInfo cats, dogs;
  ASSERT_TRUE(reader->GetClass(0, &cats).ok());
  ASSERT_TRUE(reader->GetClass(1, &dogs).ok());
  EXPECT_EQ(cats.name, "cats");
  EXPECT_EQ(cats.record_count, 1000u);
  EXPECT_EQ(dogs.name, "dogs");
  EXPECT_EQ(dogs.first_record, 1000u);
  EXPECT_EQ(dogs.record_count, 1000u);

  BuildOptions flat = Options(32);
  flat.scan.flat = true;
  ASSERT_NO_FATAL_FAILURE(BuildAndVerify(base, t / "all", flat, &summary));
  EXPECT_EQ(summary.files, 3000u);
}

// --- Bad-input catalogue (issue "Reliability") -------------------------------

// Runs BuildPack, failing the test and ending the process if it has not
// returned after 60 s (it must never block on a special file, nor read one
// forever).
Status BuildWithDeadline(const std::string& src, const std::string& out,
                         const BuildOptions& options, BuildSummary* summary) {
  auto done = std::async(std::launch::async,
                         [&] { return BuildPack(src, out, options, summary); });
  if (done.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    std::fprintf(stderr, "FATAL: BuildPack(%s) blocked for 60 s\n",
                 src.c_str());
    std::_Exit(1);
  }
  return done.get();
}

// Binds a Unix domain socket at `path` (the socket file stays after the
// descriptor is closed).  False when not possible (e.g. a path too long for
// sun_path).
bool MakeSocket(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) return false;
  std::memcpy(addr.sun_path, path.data(), path.size());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool ok =
      bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

// A socket, symlinks to /dev/zero and /dev/null, and (where mknod is
// permitted) a real character device: each one alone fails the build with
// an error naming it, without blocking or reading forever, and leaves the
// previous pack as it was; with skip_unreadable all are skipped and named.
TEST(BuildPackTest, SocketsAndDevicesFailNamingTheFileAndNeverBlock) {
  TempDir t;
  std::string data, index;
  ASSERT_NO_FATAL_FAILURE(BuildFirstPack(t, &data, &index));
  struct Special {
    std::string name;  // relative to src
    std::function<bool(const std::string&)> make;
    std::string expect;
  };
  const std::vector<Special> specials = {
      {"a/sock.jpg", MakeSocket, "cannot open"},
      {"a/zero.jpg",
       [](const std::string& p) {
         return symlink("/dev/zero", p.c_str()) == 0;
       },
       "is a character device, not a regular file"},
      {"a/null.jpg",
       [](const std::string& p) {
         return symlink("/dev/null", p.c_str()) == 0;
       },
       "is a character device, not a regular file"},
      {"b/dev.jpg",
       [](const std::string& p) {
         // The /dev/zero device (1, 5) itself; needs privileges.
         return mknod(p.c_str(), S_IFCHR | 0644, makedev(1, 5)) == 0;
       },
       "is a character device, not a regular file"},
  };
  std::vector<std::string> made;
  for (const Special& sp : specials) {
    SCOPED_TRACE(sp.name);
    const std::string path = t / ("src/" + sp.name);
    if (!sp.make(path)) {
      std::printf("[ note ] %s: cannot create (%s); not tested\n",
                  sp.name.c_str(), std::strerror(errno));
      continue;
    }
    BuildSummary summary;
    Status s = BuildWithDeadline(t / "src", t / "out", Options(), &summary);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.ToString().find(path + ": " + sp.expect), std::string::npos)
        << s.ToString();
    ASSERT_NO_FATAL_FAILURE(ExpectFirstPackIntact(t, data, index));
    ASSERT_EQ(unlink(path.c_str()), 0);
    made.push_back(sp.name);
  }
  EXPECT_GE(made.size(), 3u);  // the socket and the two symlinks at least

  // All at once, skipped.
  for (const Special& sp : specials) {
    if (std::find(made.begin(), made.end(), sp.name) != made.end()) {
      ASSERT_TRUE(sp.make(t / ("src/" + sp.name))) << sp.name;
    }
  }
  BuildOptions o = Options();
  o.skip_unreadable = true;
  BuildSummary summary;
  Status s = BuildWithDeadline(t / "src", t / "out", o, &summary);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(summary.skipped, made.size());
  EXPECT_EQ(summary.files, 2u);
  for (const std::string& name : made) {
    bool named = false;
    for (const auto& w : summary.warnings) {
      named = named || w.find(t / ("src/" + name)) != std::string::npos;
    }
    EXPECT_TRUE(named) << name;
  }
  std::vector<PackRecord> recs;
  ASSERT_TRUE(ReadPack(t / "out", &recs));
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].name, "a/1.jpg");
  EXPECT_EQ(recs[1].name, "b/2.jpg");
}

// torchvision's ImageFolder follows every symlink, wherever it leads; so
// does ufspack (docs/cli.md): a class directory, a directory inside a class
// and files that point outside the source tree are packed with the bytes
// they point to, under the link's own name.
TEST(BuildPackTest, SymlinksLeavingTheTreeAreFollowedLikeImageFolder) {
  TempDir t;
  const std::string src = t / "src";
  WriteFile(src + "/c/own.jpg", "own");
  WriteFile(t / "outside/o.jpg", "outside file");
  WriteFile(t / "outside/cls/k.jpg", "outside class");
  WriteFile(t / "outside/dir/d.jpg", "outside dir");
  test::Symlink("../../outside/o.jpg", src + "/c/rel.jpg");  // climbs out
  test::Symlink(t / "outside/o.jpg", src + "/c/abs.jpg");
  test::Symlink(t / "outside/dir", src + "/c/sub");
  test::Symlink(t / "outside/cls", src + "/linked");
  BuildSummary summary;
  ASSERT_NO_FATAL_FAILURE(BuildAndVerify(src, t / "out", Options(), &summary));
  std::vector<PackRecord> recs;
  std::unique_ptr<Reader> reader;
  ASSERT_TRUE(ReadPack(t / "out", &recs, &reader));
  const std::vector<std::pair<std::string, std::string>> want = {
      {"c/abs.jpg", "outside file"},
      {"c/own.jpg", "own"},
      {"c/rel.jpg", "outside file"},
      {"c/sub/d.jpg", "outside dir"},
      {"linked/k.jpg", "outside class"}};
  ASSERT_EQ(recs.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    EXPECT_EQ(recs[k].name, want[k].first);
    EXPECT_EQ(recs[k].bytes, want[k].second) << want[k].first;
    EXPECT_EQ(recs[k].label, k < 4 ? 0u : 1u) << want[k].first;
  }
  EXPECT_EQ(summary.skipped, 0u);
}

TEST(BuildPackTest, EmptyTreeIsAnErrorButAnEmptyFlatPackIsValid) {
  TempDir t;
  test::MakeDirs(t / "src");
  BuildSummary summary;
  Status s = BuildPack(t / "src", t / "out", Options(), &summary);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.ToString().find(t / "src: no class directories found"),
            std::string::npos)
      << s.ToString();
  EXPECT_FALSE(test::Exists(t / "out/index.ufs"));
  EXPECT_FALSE(test::Exists(t / "out/data.ufs"));
  EXPECT_TRUE(test::PackTempFiles(t / "out").empty());

  // Flat: no files (or none that match) is an empty pack, not an error.
  WriteFile(t / "src/readme.txt", "not an image");
  BuildOptions o = Options();
  o.scan.flat = true;
  s = BuildPack(t / "src", t / "out", o, &summary);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(summary.files, 0u);
  std::unique_ptr<Reader> reader;
  ASSERT_TRUE(Reader::Open(t / "out", ReaderOptions(), &reader).ok());
  EXPECT_EQ(reader->size(), 0u);
  EXPECT_TRUE(reader->CheckIndex().ok());
  EXPECT_EQ(test::FileSize(t / "out/data.ufs"), DataHeader::kEncodedLength);
}

// A rebuild into the directory of an open pack: the open Reader keeps
// serving the old pair (its bytes, names and pack id); a Reader opened
// afterwards gets the new one.
TEST(BuildPackTest, RebuildWhileAReaderHoldsThePack) {
  TempDir t;
  MakeVariedTree(t / "src");
  BuildSummary s1;
  ASSERT_TRUE(BuildPack(t / "src", t / "out", Options(), &s1).ok());
  std::vector<PackRecord> before;
  std::unique_ptr<Reader> old;
  ASSERT_TRUE(ReadPack(t / "out", &before, &old));

  WriteFile(t / "src/class0/f1.jpg", "changed");
  WriteFile(t / "src/class4/new.jpg", test::RandomBytes(12345, 8));
  test::RemoveAll(t / "src/class2/sub");
  BuildSummary s2;
  ASSERT_TRUE(BuildPack(t / "src", t / "out", Options(), &s2).ok());
  ASSERT_NE(s1.pack_id, s2.pack_id);

  EXPECT_EQ(old->info().pack_id, s1.pack_id);
  ASSERT_EQ(old->size(), before.size());
  for (uint64_t i = 0; i < old->size(); ++i) {
    Record r;
    ASSERT_TRUE(old->GetRecord(i, &r).ok());
    EXPECT_EQ(std::string(r.name), before[i].name);
    std::string bytes;
    Status s = old->Read(i, &bytes);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(bytes == before[i].bytes) << before[i].name;
  }
  std::vector<PackRecord> after;
  std::unique_ptr<Reader> fresh;
  ASSERT_TRUE(ReadPack(t / "out", &after, &fresh));
  EXPECT_EQ(fresh->info().pack_id, s2.pack_id);
  EXPECT_EQ(after.size(), s2.files);
  uint64_t idx = 0;
  ASSERT_TRUE(fresh->Find("class0/f1.jpg", &idx).ok());
  EXPECT_EQ(after[idx].bytes, "changed");
  EXPECT_TRUE(fresh->Find("class4/new.jpg", &idx).ok());
  EXPECT_TRUE(old->Find("class4/new.jpg", &idx).IsNotFound());
}

// Paths longer than PATH_MAX (4096 bytes) cannot be given to open(2) whole;
// the builder opens them one component at a time and packs them.  (Python's
// os.walk, hence ImageFolder, silently skips such directories: scandir
// fails with ENAMETOOLONG.  ufspack packs them rather than dropping them.)
TEST(RoundTripTest, PathsLongerThanPathMaxArePacked) {
  TempDir t;
  const std::string src = t / "src";
  std::string deep = "c";
  for (int i = 0; i < 22; ++i) {
    deep += "/" + std::string(200, static_cast<char>('a' + i));
  }
  const std::string leaf = deep + "/" + std::string(251, 'n') + ".png";
  ASSERT_GT(src.size() + 1 + leaf.size(), 4096u + 255u);
  const std::string big = test::RandomBytes(100000, 1);
  WriteFile(src + "/" + deep + "/x.jpg", big);
  WriteFile(src + "/" + leaf, "long leaf");
  WriteFile(src + "/c/a.jpg", "short");
  for (bool flat : {false, true}) {
    SCOPED_TRACE(flat ? "flat" : "classes");
    BuildOptions o = Options();
    o.scan.flat = flat;
    o.writer.compress = flat;
    BuildSummary summary;
    const std::string out = t / (flat ? "outflat" : "out");
    ASSERT_NO_FATAL_FAILURE(BuildAndVerify(src, out, o, &summary));
    EXPECT_EQ(summary.files, 3u);
    EXPECT_EQ(summary.skipped, 0u);
    std::vector<PackRecord> recs;
    ASSERT_TRUE(ReadPack(out, &recs));
    ASSERT_EQ(recs.size(), 3u);
    // Same directory: "nnn...png" sorts before "x.jpg".
    EXPECT_EQ(recs[0].name, "c/a.jpg");
    EXPECT_TRUE(recs[1].name == leaf) << recs[1].name.size();
    EXPECT_EQ(recs[1].bytes, "long leaf");
    EXPECT_TRUE(recs[2].name == deep + "/x.jpg") << recs[2].name.size();
    EXPECT_TRUE(recs[2].bytes == big);
  }
}

// SLOW: about 25 s here (most of it writing 4 GiB to data.ufs, then reading
// the 4 GiB record into memory).  A sparse source file of 4 GiB + 64 bytes
// with marks around the 4 MiB, 64 MiB and 4 GiB boundaries is streamed into
// the pack; it must read back byte for byte (checksum verified), and the
// file after it lies past 4 GiB in data.ufs.  Skipped without sparse files,
// 5 GiB of free disk or 6 GiB of available memory.
TEST(RoundTripTest, SparseSourceLargerThan4GiBRoundTrips) {
  constexpr uint64_t kSize = (4ull << 30) + 64;
  TempDir t;
  if (!test::SupportsSparseFiles(t.path())) {
    GTEST_SKIP() << t.path() << ": the file system has no sparse files";
  }
  const uint64_t disk = test::FreeDiskBytes(t.path());
  if (disk < kSize + (1ull << 30)) {
    GTEST_SKIP() << "needs 5 GiB of free disk, " << (disk >> 20) << " MiB free";
  }
  const uint64_t memory = test::AvailableMemoryBytes();
  if (memory < kSize + (2ull << 30)) {
    GTEST_SKIP() << "needs 6 GiB of memory, " << (memory >> 20)
                 << " MiB available";
  }
  const std::string src = t / "src";
  test::MakeDirs(src + "/c");
  ASSERT_NO_FATAL_FAILURE(MakeSparseFile(src + "/c/big.jpg", kSize));
  WriteFile(src + "/c/a.jpg", "first");
  const std::string after = test::RandomBytes(777, 3);
  WriteFile(src + "/c/z.jpg", after);

  const auto t0 = std::chrono::steady_clock::now();
  BuildSummary summary;
  Status s = BuildPack(src, t / "out", Options(4), &summary);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const double build_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  EXPECT_EQ(summary.files, 3u);
  EXPECT_EQ(summary.bytes_out, DataHeader::kEncodedLength + 5 + kSize + 777);
  EXPECT_EQ(summary.bytes_in, 5 + kSize + 777);

  std::unique_ptr<Reader> reader;
  ASSERT_TRUE(Reader::Open(t / "out", ReaderOptions(), &reader).ok());
  ASSERT_TRUE(reader->CheckIndex().ok());
  Record big, z;
  ASSERT_TRUE(reader->GetRecord(1, &big).ok());
  ASSERT_TRUE(reader->GetRecord(2, &z).ok());
  EXPECT_EQ(std::string(big.name), "c/big.jpg");
  EXPECT_EQ(big.codec, Codec::kRaw);
  EXPECT_EQ(big.original_length, kSize);
  EXPECT_EQ(std::string(z.name), "c/z.jpg");
  EXPECT_EQ(z.offset, DataHeader::kEncodedLength + 5 + kSize);
  EXPECT_GT(z.offset, 1ull << 32);
  std::string bytes;
  ASSERT_TRUE(reader->Read(2, &bytes).ok());
  EXPECT_TRUE(bytes == after);

  // The expected bytes, zeros and marks, in an anonymous mapping that
  // costs no memory but the marked pages.
  void* map = mmap(nullptr, kSize, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(map, MAP_FAILED);
  std::unique_ptr<void, std::function<void(void*)>> unmap(
      map, [](void* p) { munmap(p, kSize); });
  char* want = static_cast<char*>(map);
  for (const auto& [offset, mark] : SparseMarks(kSize)) {
    std::memcpy(want + offset, mark.data(), mark.size());
  }
  const auto t1 = std::chrono::steady_clock::now();
  s = reader->Read(1, &bytes);  // one record of 4 GiB, checksum verified
  ASSERT_TRUE(s.ok()) << s.ToString();
  const double read_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t1)
          .count();
  ASSERT_EQ(bytes.size(), kSize);
  EXPECT_EQ(std::memcmp(bytes.data(), want, kSize), 0);
  EXPECT_EQ(bytes.substr((4ull << 30) - 5, 11), "across-4GiB");
  EXPECT_EQ(bytes.substr(kSize - 4), "tail");
  std::printf("[ timing ] 4 GiB + 64 bytes: build %.1f s, read %.1f s\n",
              build_s, read_s);
}

}  // namespace
}  // namespace ufspack
