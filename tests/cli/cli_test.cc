// Copyright 2026 The ufspack Authors.
//
// End-to-end tests of the `ufspack` command line tool: every subcommand run
// as a process, checking exit codes, output and the files it leaves.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "testutil.h"
#include "ufspack/builder.h"
#include "ufspack/coding.h"
#include "ufspack/format.h"
#include "ufspack/reader.h"

namespace ufspack {
namespace {

using test::CommandResult;
using test::RunCli;
using test::TempDir;

using test::Contains;

// A small ImageFolder tree with the awkward cases: nested and symlinked
// directories, a zero-byte file, a non-UTF-8 name, compressible and
// incompressible files, and files ImageFolder skips.
void MakeTree(const std::string& root) {
  test::WriteFile(root + "/cats/c1.jpg", test::RandomBytes(5000, 1));
  test::WriteFile(root + "/cats/c2.JPG", test::RandomBytes(7000, 2));
  test::WriteFile(root + "/cats/empty.png", "");
  test::WriteFile(root + "/cats/sub/deeper/c3.png",
                  test::CompressibleBytes(20000, 3));
  test::WriteFile(root + "/cats/sub-x/c4.bmp",
                  test::CompressibleBytes(9000, 4));
  test::WriteFile(root + "/cats/notes.txt", "skipped by ImageFolder");
  test::WriteFile(root + "/dogs/d\xff.jpg", test::RandomBytes(3000, 5));
  test::WriteFile(root + "/dogs/d2.webp", test::RandomBytes(100, 6));
  test::WriteFile(root + "/elsewhere/e1.ppm", test::RandomBytes(4000, 7));
  test::Symlink("../elsewhere", root + "/dogs/linked");
}

const std::vector<std::string> kTreeNames = {"cats/c1.jpg",
                                             "cats/c2.JPG",
                                             "cats/empty.png",
                                             "cats/sub-x/c4.bmp",
                                             "cats/sub/deeper/c3.png",
                                             "dogs/d2.webp",
                                             "dogs/d\xff.jpg",
                                             "dogs/linked/e1.ppm",
                                             "elsewhere/e1.ppm"};

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    src_ = tmp_ / "src";
    pack_ = tmp_ / "pack";
    MakeTree(src_);
  }
  CommandResult Build(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"build", src_, "-o", pack_};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunCli(args);
  }
  TempDir tmp_;
  std::string src_, pack_;
};

TEST_F(CliTest, HelpForEveryCommand) {
  CommandResult r = RunCli({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* cmd : {"build", "info", "ls", "cat", "extract", "verify"}) {
    EXPECT_TRUE(Contains(r.out, cmd)) << cmd;
    CommandResult h = RunCli({cmd, "--help"});
    EXPECT_EQ(h.exit_code, 0) << cmd;
    EXPECT_TRUE(Contains(h.out, std::string("Usage: ufspack ") + cmd)) << h.out;
    CommandResult h2 = RunCli({"help", cmd});
    EXPECT_EQ(h2.out, h.out);
  }
}

TEST_F(CliTest, UsageErrorsExitTwo) {
  EXPECT_EQ(RunCli({}).exit_code, 2);
  EXPECT_EQ(RunCli({"frobnicate"}).exit_code, 2);
  EXPECT_EQ(RunCli({"build"}).exit_code, 2);
  EXPECT_EQ(RunCli({"build", src_, "--bogus"}).exit_code, 2);
  EXPECT_EQ(RunCli({"build", src_, "--threads", "0"}).exit_code, 2);
  EXPECT_EQ(RunCli({"build", src_, "--compress", "gzip"}).exit_code, 2);
  EXPECT_EQ(RunCli({"build", src_, "--compress", "zstd:99"}).exit_code, 2);
  EXPECT_EQ(RunCli({"info", "a", "b"}).exit_code, 2);
  CommandResult r = RunCli({"ls", pack_, "--json", "--null"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Contains(r.err, "see 'ufspack ls --help'")) << r.err;
}

TEST_F(CliTest, BuildThenLsListsImageFolderOrder) {
  CommandResult b = Build();
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_TRUE(Contains(b.out, "packed 9 files")) << b.out;
  EXPECT_TRUE(Contains(b.out, "3 classes")) << b.out;
  CommandResult ls = RunCli({"ls", pack_, "--null"});
  ASSERT_EQ(ls.exit_code, 0);
  std::vector<std::string> names;
  size_t start = 0;
  for (size_t i = 0; i < ls.out.size(); ++i) {
    if (ls.out[i] == '\0') {
      names.push_back(ls.out.substr(start, i - start));
      start = i + 1;
    }
  }
  EXPECT_EQ(names, kTreeNames);
}

TEST_F(CliTest, LsLongAndJson) {
  ASSERT_EQ(Build().exit_code, 0);
  CommandResult l = RunCli({"ls", "--long", pack_});
  ASSERT_EQ(l.exit_code, 0);
  EXPECT_TRUE(Contains(l.out, "5000  raw   cats/c1.jpg")) << l.out;
  CommandResult j = RunCli({"ls", "--json", pack_});
  ASSERT_EQ(j.exit_code, 0);
  EXPECT_TRUE(Contains(j.out, "\"name\":\"dogs/d\\udcff.jpg\"")) << j.out;
  EXPECT_TRUE(Contains(j.out, "\"class\":\"cats\"")) << j.out;
  EXPECT_TRUE(Contains(j.out, "\"size\":20000")) << j.out;
}

TEST_F(CliTest, InfoTextAndJson) {
  ASSERT_EQ(Build({"--compress", "zstd"}).exit_code, 0);
  CommandResult i = RunCli({"info", pack_});
  ASSERT_EQ(i.exit_code, 0) << i.err;
  EXPECT_TRUE(Contains(i.out, "records:       9")) << i.out;
  EXPECT_TRUE(Contains(i.out, "cats")) << i.out;
  CommandResult j = RunCli({"info", "--json", pack_});
  ASSERT_EQ(j.exit_code, 0);
  EXPECT_TRUE(Contains(j.out, "\"records\":9")) << j.out;
  EXPECT_TRUE(Contains(j.out, "\"classes\":3")) << j.out;
  // The two compressible files are stored as zstd; random bytes stay raw.
  EXPECT_TRUE(Contains(j.out, "\"compressed_records\":2")) << j.out;
  EXPECT_TRUE(Contains(j.out, "{\"label\":0,\"name\":\"cats\",\"records\":5"))
      << j.out;
}

TEST_F(CliTest, InfoShowsSourceRoot) {
  CommandResult b = RunCli({"build", src_ + "/", "-o", pack_});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  CommandResult i = RunCli({"info", pack_});
  ASSERT_EQ(i.exit_code, 0) << i.err;
  // As given to build, without the trailing slash.
  EXPECT_TRUE(Contains(i.out, "built from:    " + src_ + "\n")) << i.out;
  CommandResult j = RunCli({"info", "--json", pack_});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  EXPECT_TRUE(Contains(j.out, "\"source_root\":\"" + src_ + "\"")) << j.out;
}

TEST_F(CliTest, InfoEscapesAnOddSourceRoot) {
  const std::string odd = tmp_ / "odd\xff \"dir\"";
  test::WriteFile(odd + "/c/a.jpg", "a");
  CommandResult b = RunCli({"build", odd, "-o", pack_});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  CommandResult i = RunCli({"info", pack_});
  ASSERT_EQ(i.exit_code, 0) << i.err;
  EXPECT_TRUE(
      Contains(i.out, "built from:    " + tmp_.path() + "/odd\\xff \"dir\"\n"))
      << i.out;
  CommandResult j = RunCli({"info", "--json", pack_});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  EXPECT_TRUE(Contains(
      j.out, "\"source_root\":\"" + tmp_.path() + "/odd\\udcff \\\"dir\\\"\""))
      << j.out;
}

TEST_F(CliTest, InfoWithoutSourceRootOmitsIt) {
  // A pack written by the library without metadata.
  std::unique_ptr<PackWriter> w;
  PackWriterOptions o;
  o.flat = true;
  ASSERT_TRUE(PackWriter::Create(pack_, o, &w).ok());
  ASSERT_TRUE(w->Add("a", kNoLabel, "a").ok());
  ASSERT_TRUE(w->Finish().ok());
  CommandResult i = RunCli({"info", pack_});
  ASSERT_EQ(i.exit_code, 0) << i.err;
  EXPECT_FALSE(Contains(i.out, "built from")) << i.out;
  CommandResult j = RunCli({"info", "--json", pack_});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  EXPECT_FALSE(Contains(j.out, "source_root")) << j.out;
}

TEST_F(CliTest, CatByNameAndIndexGivesOriginalBytes) {
  ASSERT_EQ(Build({"--compress", "zstd:5"}).exit_code, 0);
  const std::string expected = test::ReadFile(src_ + "/cats/sub/deeper/c3.png");
  CommandResult by_name = RunCli({"cat", pack_, "cats/sub/deeper/c3.png"});
  ASSERT_EQ(by_name.exit_code, 0) << by_name.err;
  EXPECT_EQ(by_name.out, expected);
  CommandResult by_index = RunCli({"cat", pack_, "#4"});
  ASSERT_EQ(by_index.exit_code, 0);
  EXPECT_EQ(by_index.out, expected);
  CommandResult by_flag = RunCli({"cat", pack_, "--index", "4"});
  EXPECT_EQ(by_flag.out, expected);
  CommandResult empty = RunCli({"cat", pack_, "cats/empty.png"});
  EXPECT_EQ(empty.exit_code, 0);
  EXPECT_EQ(empty.out, "");
}

TEST_F(CliTest, CatMissingRecordFails) {
  ASSERT_EQ(Build().exit_code, 0);
  CommandResult r = RunCli({"cat", pack_, "cats/nope.jpg"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, "no record named 'cats/nope.jpg'")) << r.err;
  CommandResult o = RunCli({"cat", pack_, "#99"});
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_TRUE(Contains(o.err, "out of range")) << o.err;
}

TEST_F(CliTest, VerifyIntactPack) {
  ASSERT_EQ(Build().exit_code, 0);
  CommandResult r = RunCli({"verify", pack_});
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(Contains(r.out, "OK: 9 records")) << r.out;
  CommandResult j = RunCli({"verify", "--json", pack_});
  EXPECT_EQ(j.exit_code, 0);
  EXPECT_TRUE(Contains(j.out, "\"ok\":true")) << j.out;
}

TEST_F(CliTest, VerifyReportsCorruptRecordPrecisely) {
  ASSERT_EQ(Build().exit_code, 0);
  std::unique_ptr<Reader> reader;
  ASSERT_TRUE(Reader::Open(pack_, {}, &reader).ok());
  Record rec;
  ASSERT_TRUE(reader->GetRecord(1, &rec).ok());  // cats/c2.JPG
  reader.reset();
  test::FlipByte(pack_ + "/data.ufs", rec.offset + 100);
  CommandResult r = RunCli({"verify", pack_});
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_TRUE(Contains(r.out, "CORRUPT: 1 problem found")) << r.out;
  EXPECT_TRUE(Contains(
      r.out, "record 1 'cats/c2.JPG' at offset " + std::to_string(rec.offset)))
      << r.out;
  EXPECT_TRUE(Contains(r.out, "checksum mismatch")) << r.out;
  CommandResult j = RunCli({"verify", "--json", pack_});
  EXPECT_EQ(j.exit_code, 3);
  EXPECT_TRUE(Contains(j.out, "\"ok\":false")) << j.out;
  EXPECT_TRUE(Contains(j.out, "\"problem_count\":1")) << j.out;
  // cat of the damaged record refuses instead of printing wrong bytes.
  CommandResult c = RunCli({"cat", pack_, "cats/c2.JPG"});
  EXPECT_EQ(c.exit_code, 3);
  EXPECT_EQ(c.out, "");
}

// A zstd record claiming original_length = 32768 x stored_length (the
// format's bound) whose frame holds far less (tests/testutil.h): verify,
// extract and cat report it as corruption (exit 3) naming the record, and
// extract leaves no file for it.  1000 content bytes: runs in every build.
TEST(CliHostileZstd, ShortFrameIsReportedByVerifyExtractAndCat) {
  for (bool forged : {true, false}) {
    SCOPED_TRACE(forged ? "forged header" : "honest header");
    TempDir tmp;
    const std::string pack = tmp / "pack";
    uint64_t claimed = 0;
    test::WriteShortZstdFramePack(pack, 1000, forged, &claimed);
    const std::string why =
        forged ? "zstd frame ends early or is damaged: expected " +
                     std::to_string(claimed)
               : "zstd frame content size: expected " +
                     std::to_string(claimed) + ", found 1000";
    CommandResult v = RunCli({"verify", pack});
    EXPECT_EQ(v.exit_code, 3) << v.out << v.err;
    EXPECT_TRUE(Contains(v.out, "CORRUPT: 1 problem found")) << v.out;
    EXPECT_TRUE(Contains(v.out, "record 0 'hostile.bin' at offset 64"))
        << v.out;
    EXPECT_TRUE(Contains(v.out, why)) << v.out;
    CommandResult x = RunCli({"extract", "-q", pack, tmp / "out"});
    EXPECT_EQ(x.exit_code, 3) << x.err;
    EXPECT_TRUE(Contains(x.err, "record 0 'hostile.bin'")) << x.err;
    EXPECT_TRUE(Contains(x.err, why)) << x.err;
    EXPECT_FALSE(test::Exists(tmp / "out/hostile.bin"));
    CommandResult c = RunCli({"cat", pack, "hostile.bin"});
    EXPECT_EQ(c.exit_code, 3) << c.err;
    EXPECT_TRUE(Contains(c.err, why)) << c.err;
    EXPECT_LE(c.out.size(), 1000u);  // at most what the frame really holds
    CommandResult ok = RunCli({"cat", pack, "ok.txt"});
    EXPECT_EQ(ok.exit_code, 0);
    EXPECT_EQ(ok.out, "ten bytes!");
  }
}

// The hostile-pack review's case: a 140 KB frame claiming 4.6 GB.  Under a
// 1 GiB address-space limit, verify, extract and cat must still report the
// record (exit 3), not die of std::bad_alloc (exit 134, seen here as -1:
// killed by SIGABRT).
TEST(CliHostileZstd, ShortFrameUnderOneGiBAddressSpace) {
  if (test::kSanitizerReservesAddressSpace) {
    GTEST_SKIP() << test::kNoAddressSpaceLimitUnderSanitizers;
  }
  for (bool forged : {true, false}) {
    SCOPED_TRACE(forged ? "forged header" : "honest header");
    TempDir tmp;
    const std::string pack = tmp / "pack";
    uint64_t claimed = 0;
    test::WriteShortZstdFramePack(pack, 140000, forged, &claimed);
    ASSERT_GT(claimed, uint64_t{4} << 30);
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"verify", pack},
          std::vector<std::string>{"extract", "-q", pack, tmp / "out"},
          std::vector<std::string>{"cat", pack, "hostile.bin"}}) {
      SCOPED_TRACE(args[0]);
      CommandResult r = test::RunCliWithAddressSpaceLimit(1u << 30, args);
      EXPECT_EQ(r.exit_code, 3) << r.err;
      EXPECT_TRUE(Contains(r.out + r.err, "record 0 'hostile.bin'"))
          << r.out << r.err;
      EXPECT_FALSE(Contains(r.err, "bad_alloc")) << r.err;
    }
    EXPECT_FALSE(test::Exists(tmp / "out/hostile.bin"));
  }
}

TEST_F(CliTest, VerifyTruncatedIndexIsCorrupt) {
  ASSERT_EQ(Build().exit_code, 0);
  test::Truncate(pack_ + "/index.ufs",
                 test::FileSize(pack_ + "/index.ufs") - 5);
  CommandResult r = RunCli({"verify", pack_});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_TRUE(Contains(r.out, "truncated")) << r.out;
}

TEST_F(CliTest, VerifyMissingPackFails) {
  CommandResult r = RunCli({"verify", tmp_ / "nothing-here"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.out, "nothing-here")) << r.out;
}

TEST_F(CliTest, BuildIsDeterministic) {
  ASSERT_EQ(Build({"--compress", "zstd"}).exit_code, 0);
  const std::string other = tmp_ / "pack2";
  ASSERT_EQ(
      RunCli({"build", src_, "-o", other, "--compress", "zstd", "-j", "1"})
          .exit_code,
      0);
  EXPECT_EQ(test::ReadFile(pack_ + "/data.ufs"),
            test::ReadFile(other + "/data.ufs"));
  EXPECT_EQ(test::ReadFile(pack_ + "/index.ufs"),
            test::ReadFile(other + "/index.ufs"));
}

TEST_F(CliTest, BuildMissingSourceNamesIt) {
  CommandResult r = RunCli({"build", tmp_ / "missing", "-o", pack_});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, tmp_ / "missing")) << r.err;
}

TEST_F(CliTest, BuildEmptyClassIsAnErrorUnlessAllowed) {
  test::MakeDirs(src_ + "/zebras");
  test::WriteFile(src_ + "/zebras/readme.txt", "no images");
  CommandResult r = Build();
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, "'zebras'")) << r.err;
  EXPECT_FALSE(test::Exists(pack_ + "/index.ufs"));
  CommandResult ok = Build({"--allow-empty"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_TRUE(Contains(ok.out, "in 4 classes")) << ok.out;
}

TEST_F(CliTest, FailedBuildLeavesPreviousPackUsable) {
  ASSERT_EQ(Build().exit_code, 0);
  const std::string before = test::ReadFile(pack_ + "/index.ufs");
  test::Symlink("does-not-exist", src_ + "/cats/dangling.jpg");
  CommandResult r = Build();
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, "cats/dangling.jpg")) << r.err;
  EXPECT_TRUE(Contains(r.err, "left as it was")) << r.err;
  EXPECT_EQ(test::ReadFile(pack_ + "/index.ufs"), before);
  EXPECT_EQ(RunCli({"verify", pack_}).exit_code, 0);
  // No temporary files remain.
  for (const auto& [name, bytes] : test::ReadTree(pack_)) {
    EXPECT_TRUE(name == "data.ufs" || name == "index.ufs") << name;
  }
  // --skip-unreadable packs the rest and reports the skip.
  CommandResult s = Build({"--skip-unreadable"});
  EXPECT_EQ(s.exit_code, 0) << s.err;
  EXPECT_TRUE(Contains(s.out, "1 skipped")) << s.out;
  EXPECT_TRUE(Contains(s.err, "dangling.jpg")) << s.err;
}

TEST_F(CliTest, FlatAllFilesAndExtensions) {
  CommandResult r = Build({"--flat", "--all-files"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  CommandResult ls = RunCli({"ls", pack_});
  EXPECT_TRUE(Contains(ls.out, "cats/notes.txt\n")) << ls.out;
  EXPECT_TRUE(Contains(ls.out, "elsewhere/e1.ppm\n")) << ls.out;
  CommandResult info = RunCli({"info", "--json", pack_});
  EXPECT_TRUE(Contains(info.out, "\"flat\":true")) << info.out;
  EXPECT_TRUE(Contains(info.out, "\"records\":10")) << info.out;

  ASSERT_EQ(Build({"--extensions", "TXT,.webp", "--allow-empty"}).exit_code, 0);
  CommandResult ls2 = RunCli({"ls", pack_});
  EXPECT_EQ(ls2.out, "cats/notes.txt\ndogs/d2.webp\n");
}

TEST_F(CliTest, ExtractRoundTripsEveryFile) {
  ASSERT_EQ(Build({"--compress", "zstd"}).exit_code, 0);
  const std::string out = tmp_ / "out";
  CommandResult r = RunCli({"extract", pack_, out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "extracted 9 files")) << r.out;
  auto extracted = test::ReadTree(out);
  ASSERT_EQ(extracted.size(), kTreeNames.size());
  for (const std::string& name : kTreeNames) {
    ASSERT_TRUE(extracted.count(name)) << name;
    EXPECT_EQ(extracted[name], test::ReadFile(src_ + "/" + name)) << name;
  }
}

TEST_F(CliTest, ExtractNeverOverwritesSilently) {
  ASSERT_EQ(Build().exit_code, 0);
  const std::string out = tmp_ / "out";
  test::WriteFile(out + "/cats/c1.jpg", "precious");
  CommandResult r = RunCli({"extract", pack_, out});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, "cats/c1.jpg: exists")) << r.err;
  EXPECT_TRUE(Contains(r.err, "nothing extracted")) << r.err;
  EXPECT_EQ(test::ReadFile(out + "/cats/c1.jpg"), "precious");
  EXPECT_FALSE(test::Exists(out + "/dogs"));
  CommandResult f = RunCli({"extract", "--force", pack_, out});
  EXPECT_EQ(f.exit_code, 0) << f.err;
  EXPECT_EQ(test::ReadFile(out + "/cats/c1.jpg"),
            test::ReadFile(src_ + "/cats/c1.jpg"));
}

TEST_F(CliTest, ExtractNeverWritesThroughSymlinks) {
  ASSERT_EQ(Build().exit_code, 0);
  const std::string out = tmp_ / "out";
  const std::string victim = tmp_ / "victim";
  test::MakeDirs(victim);
  test::MakeDirs(out);
  test::Symlink(victim, out + "/cats");  // a planted directory symlink
  CommandResult r = RunCli({"extract", "--force", pack_, out});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, "refusing to write through it")) << r.err;
  EXPECT_TRUE(test::ReadTree(victim).empty());

  // A planted file symlink is replaced with --force, never followed.
  const std::string out2 = tmp_ / "out2";
  test::WriteFile(victim + "/target", "keep me");
  test::Symlink(victim + "/target", out2 + "/cats/c1.jpg");
  CommandResult r2 = RunCli({"extract", pack_, out2});
  EXPECT_EQ(r2.exit_code, 1);  // exists, no --force
  CommandResult r3 = RunCli({"extract", "--force", pack_, out2});
  EXPECT_EQ(r3.exit_code, 0) << r3.err;
  EXPECT_EQ(test::ReadFile(victim + "/target"), "keep me");
  struct stat st;
  ASSERT_EQ(lstat((out2 + "/cats/c1.jpg").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
}

// A pack whose names try to escape the destination.
TEST(CliExtract, RefusesTraversalAndAbsoluteNames) {
  for (const std::string bad :
       {"../evil.jpg", "/tmp/abs.jpg", "a/../../evil.jpg", "a/./b.jpg",
        "a//b.jpg", "", "a/"}) {
    TempDir tmp;
    const std::string pack = tmp / "pack";
    {
      std::unique_ptr<PackWriter> w;
      PackWriterOptions o;
      o.flat = true;
      ASSERT_TRUE(PackWriter::Create(pack, o, &w).ok());
      ASSERT_TRUE(w->Add("good.jpg", kNoLabel, "fine").ok());
      ASSERT_TRUE(w->Add(bad, kNoLabel, "evil").ok());
      ASSERT_TRUE(w->Finish().ok());
    }
    const std::string out = tmp / "deep/out";
    CommandResult r = RunCli({"extract", pack, out});
    EXPECT_EQ(r.exit_code, 1) << bad;
    EXPECT_TRUE(Contains(r.err, "unsafe name")) << r.err;
    EXPECT_TRUE(Contains(r.err, "nothing extracted")) << r.err;
    EXPECT_FALSE(test::Exists(out + "/good.jpg")) << bad;
    EXPECT_FALSE(test::Exists(tmp / "deep/evil.jpg"));
    EXPECT_FALSE(test::Exists(tmp / "evil.jpg"));
  }
}

// --- Bad-input catalogue (issue "Reliability") -------------------------------

TEST_F(CliTest, CatRejectsNegativeAndOutOfRangeIndices) {
  ASSERT_EQ(Build().exit_code, 0);
  // Not an index at all: usage errors (exit 2), nothing written.
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{
           {"cat", pack_, "#-1"},
           {"cat", pack_, "--index", "-1"},
           {"cat", pack_, "#1x"},
           {"cat", pack_, "#18446744073709551616"},  // 2^64
           {"cat", pack_, "--index", ""}}) {
    CommandResult r = RunCli(args);
    EXPECT_EQ(r.exit_code, 2) << args.back() << ": " << r.err;
    EXPECT_TRUE(Contains(r.err, "is not a record index")) << r.err;
    EXPECT_EQ(r.out, "");
  }
  // Indices past the end: exit 1, naming the index and the record count.
  for (const std::string index : {"9", "10", "9999999999999999999"}) {
    CommandResult r = RunCli({"cat", pack_, "#" + index});
    EXPECT_EQ(r.exit_code, 1) << index;
    EXPECT_TRUE(Contains(
        r.err, "record " + index + " out of range (pack has 9 records)"))
        << r.err;
    EXPECT_TRUE(Contains(r.err, pack_ + "/index.ufs")) << r.err;
    EXPECT_EQ(r.out, "");
  }
  // The last record is served; a bare "#" is a name, and there is none.
  CommandResult last = RunCli({"cat", pack_, "#8"});
  EXPECT_EQ(last.exit_code, 0) << last.err;
  EXPECT_EQ(last.out, test::ReadFile(src_ + "/elsewhere/e1.ppm"));
  CommandResult hash = RunCli({"cat", pack_, "#"});
  EXPECT_EQ(hash.exit_code, 1);
  EXPECT_TRUE(Contains(hash.err, "no record named '#'")) << hash.err;
}

TEST_F(CliTest, BuildRefusesDevicesAndSocketsNamingThem) {
  test::Symlink("/dev/zero", src_ + "/cats/zero.jpg");
  test::Symlink("/dev/null", src_ + "/dogs/null.jpg");
  CommandResult r = Build();
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, src_ + "/cats/zero.jpg: is a character device"))
      << r.err;
  EXPECT_FALSE(test::Exists(pack_ + "/index.ufs"));
  CommandResult s = Build({"--skip-unreadable"});
  EXPECT_EQ(s.exit_code, 0) << s.err;
  EXPECT_TRUE(Contains(s.out, "packed 9 files")) << s.out;
  EXPECT_TRUE(Contains(s.out, "2 skipped")) << s.out;
  EXPECT_TRUE(Contains(s.err, "zero.jpg")) << s.err;
  EXPECT_TRUE(Contains(s.err, "null.jpg")) << s.err;
}

// A FIFO in place of either pack file: every command that opens the pack
// fails at once naming it, instead of blocking in open(2) for a writer.
TEST_F(CliTest, FifoInPlaceOfAPackFileIsRefusedWithoutBlocking) {
  ASSERT_EQ(Build().exit_code, 0);
  for (const std::string file : {"index.ufs", "data.ufs"}) {
    const std::string path = pack_ + "/" + file;
    ASSERT_EQ(rename(path.c_str(), (path + ".saved").c_str()), 0);
    ASSERT_NO_FATAL_FAILURE(test::MakeFifo(path));
    const std::vector<std::vector<std::string>> commands = {
        {"info", pack_},
        {"info", pack_ + "/index.ufs"},
        {"verify", pack_},
        {"ls", pack_},
        {"cat", pack_, "cats/c1.jpg"},
        {"extract", pack_, tmp_ / "out"}};
    for (const auto& args : commands) {
      SCOPED_TRACE(file + ": ufspack " + args[0] + " " + args[1]);
      std::vector<std::string> argv = {UFSPACK_CLI_PATH};
      argv.insert(argv.end(), args.begin(), args.end());
      CommandResult r = test::RunWithTimeout(argv, 5);
      EXPECT_NE(r.exit_code, -1) << "blocked on the FIFO (killed after 5 s)";
      EXPECT_EQ(r.exit_code, 1) << r.err;
      // verify reports its problems on stdout, the others on stderr.
      EXPECT_TRUE(Contains(r.out + r.err, path + ": not a regular file (FIFO)"))
          << r.out << r.err;
    }
    ASSERT_EQ(unlink(path.c_str()), 0);
    ASSERT_EQ(rename((path + ".saved").c_str(), path.c_str()), 0);
  }
  EXPECT_FALSE(test::Exists(tmp_ / "out"));
}

// A FIFO planted in the destination is never opened: refused as existing,
// and with --force replaced by the regular file.
TEST_F(CliTest, ExtractNeverOpensAFifoInTheDestination) {
  ASSERT_EQ(Build().exit_code, 0);
  const std::string out = tmp_ / "out";
  test::MakeDirs(out + "/cats");
  ASSERT_NO_FATAL_FAILURE(test::MakeFifo(out + "/cats/c1.jpg"));
  CommandResult r =
      test::RunWithTimeout({UFSPACK_CLI_PATH, "extract", pack_, out}, 5);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(Contains(r.err, "cats/c1.jpg: exists")) << r.err;
  CommandResult f = test::RunWithTimeout(
      {UFSPACK_CLI_PATH, "extract", "--force", pack_, out}, 5);
  EXPECT_EQ(f.exit_code, 0) << f.err;
  EXPECT_EQ(test::ReadFile(out + "/cats/c1.jpg"),
            test::ReadFile(src_ + "/cats/c1.jpg"));
}

// A flat pack written by the library with the given record names.
void WriteNamedPack(const std::string& pack,
                    const std::vector<std::string>& names) {
  std::unique_ptr<PackWriter> w;
  PackWriterOptions o;
  o.flat = true;
  ASSERT_TRUE(PackWriter::Create(pack, o, &w).ok());
  for (size_t k = 0; k < names.size(); ++k) {
    ASSERT_TRUE(
        w->Add(names[k], kNoLabel, "bytes of " + std::to_string(k)).ok());
  }
  ASSERT_TRUE(w->Finish().ok());
}

TEST(CliExtract, RefusesEveryUnsafeNameNamingTheRecord) {
  TempDir tmp;
  const std::string pack = tmp / "pack";
  const std::vector<std::string> names = {
      "good.jpg",
      ".",
      "..",
      "a/..",
      "./a.jpg",
      std::string("a\0b.jpg", 7),
      "x/" + std::string(256, 'y'),
      "/etc/passwd-ufspack-test",
  };
  ASSERT_NO_FATAL_FAILURE(WriteNamedPack(pack, names));
  const std::string out = tmp / "out";
  CommandResult r = RunCli({"extract", pack, out});
  EXPECT_EQ(r.exit_code, 1);
  const std::vector<std::string> expect = {
      "record 1 '.': unsafe name: '.' path component",
      "record 2 '..': unsafe name: '..' path component",
      "record 3 'a/..': unsafe name: '..' path component",
      "record 4 './a.jpg': unsafe name: '.' path component",
      "record 5 'a\\x00b.jpg': unsafe name: contains a NUL byte",
      "unsafe name: path component longer than 255 bytes",
      "record 7 '/etc/passwd-ufspack-test': unsafe name: absolute path",
      "nothing extracted"};
  for (const std::string& e : expect) {
    EXPECT_TRUE(Contains(r.err, e)) << e << "\n" << r.err;
  }
  EXPECT_FALSE(Contains(r.err, "good.jpg")) << r.err;
  EXPECT_FALSE(test::Exists(out + "/good.jpg"));
  EXPECT_FALSE(test::Exists("/etc/passwd-ufspack-test"));
  EXPECT_FALSE(test::Exists(tmp / "a.jpg"));
}

TEST_F(CliTest, ExtractNeverFollowsDanglingOrNestedSymlinks) {
  ASSERT_EQ(Build().exit_code, 0);
  const std::string victim = tmp_ / "victim";
  test::MakeDirs(victim);

  // A dangling symlink where a file goes: O_CREAT would create its target
  // outside the destination; it is "an existing entry" instead.
  const std::string out = tmp_ / "out";
  test::Symlink(victim + "/created.jpg", out + "/cats/c1.jpg");
  CommandResult r = RunCli({"extract", pack_, out});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, out + "/cats/c1.jpg: exists")) << r.err;
  EXPECT_FALSE(test::Exists(victim + "/created.jpg"));
  CommandResult f = RunCli({"extract", "--force", pack_, out});
  EXPECT_EQ(f.exit_code, 0) << f.err;
  EXPECT_FALSE(test::Exists(victim + "/created.jpg"));
  struct stat st;
  ASSERT_EQ(lstat((out + "/cats/c1.jpg").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(test::ReadFile(out + "/cats/c1.jpg"),
            test::ReadFile(src_ + "/cats/c1.jpg"));

  // A directory symlink below the top (cats/sub -> victim): refused with
  // or without --force, nothing written into the victim.
  for (bool force : {false, true}) {
    SCOPED_TRACE(force ? "--force" : "no --force");
    const std::string out2 = tmp_ / (force ? "out3" : "out2");
    test::Symlink(victim, out2 + "/cats/sub");
    std::vector<std::string> args = {"extract", pack_, out2};
    if (force) args.push_back("--force");
    CommandResult n = RunCli(args);
    EXPECT_EQ(n.exit_code, 1);
    EXPECT_TRUE(Contains(n.err, out2 + "/cats/sub: is a symlink or not a "
                                       "directory; refusing to write through "
                                       "it"))
        << n.err;
    EXPECT_TRUE(test::ReadTree(victim).empty());
  }

  // A file where a directory goes: an error, the file left as it was.
  const std::string out4 = tmp_ / "out4";
  test::WriteFile(out4 + "/dogs", "a file, not a directory");
  CommandResult d = RunCli({"extract", "--force", pack_, out4});
  EXPECT_EQ(d.exit_code, 1);
  EXPECT_TRUE(Contains(d.err, out4 + "/dogs")) << d.err;
  EXPECT_EQ(test::ReadFile(out4 + "/dogs"), "a file, not a directory");
}

// Writes a flat pack of records "a.jpg" and "b.jpg", then renames record
// 1 to "a.jpg" in the name pool (hash tag and checksums fixed): a pack
// with a duplicate name, which PackWriter refuses to write.
void WriteDuplicateNamePack(const std::string& pack) {
  ASSERT_NO_FATAL_FAILURE(WriteNamedPack(pack, {"a.jpg", "b.jpg"}));
  const std::string path = pack + "/index.ufs";
  std::string index = test::ReadFile(path);
  std::string_view in(index);
  IndexHeader h;
  ASSERT_TRUE(h.DecodeFrom(&in).ok());
  const uint64_t entry1 = h.records.offset + RecordEntry::kEncodedLength;
  const uint64_t name_at =
      h.names.offset +
      DecodeFixed64(&index[entry1 + RecordEntry::kNameOffsetAt]);
  ASSERT_EQ(index.substr(name_at, 5), "b.jpg");
  index[name_at] = 'a';
  EncodeFixed32(&index[entry1 + RecordEntry::kNameHashAt],
                NameHashTag(NameHash("a.jpg")));
  EncodeFixed64(&index[IndexHeader::kBodyChecksumOffset],
                Checksum64(index.data() + IndexHeader::kEncodedLength,
                           index.size() - IndexHeader::kEncodedLength));
  EncodeFixed64(&index[IndexHeader::kHeaderChecksumOffset],
                Checksum64(index.data(), IndexHeader::kHeaderChecksumOffset));
  test::WriteFile(path, index);
}

TEST(CliExtract, DuplicateNamesAreRefusedBeforeWritingAnything) {
  TempDir tmp;
  const std::string pack = tmp / "pack";
  ASSERT_NO_FATAL_FAILURE(WriteDuplicateNamePack(pack));
  // The pack opens; `ls` shows the two records under one name.
  CommandResult ls = RunCli({"ls", pack});
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_EQ(ls.out, "a.jpg\na.jpg\n");
  // verify calls it damaged.
  CommandResult v = RunCli({"verify", pack});
  EXPECT_EQ(v.exit_code, 3) << v.out;
  EXPECT_TRUE(Contains(v.out, "duplicate name")) << v.out;
  // extract writes nothing, with or without --force (which would otherwise
  // replace record 0's file with record 1's).
  for (bool force : {false, true}) {
    SCOPED_TRACE(force ? "--force" : "no --force");
    const std::string out = tmp / (force ? "outf" : "out");
    std::vector<std::string> args = {"extract", pack, out};
    if (force) args.push_back("--force");
    CommandResult r = RunCli(args);
    // A damaged index: exit status 3, as verify says.
    EXPECT_EQ(r.exit_code, 3);
    EXPECT_TRUE(Contains(
        r.err, "record 1 'a.jpg': corrupt index: same name as record 0"))
        << r.err;
    EXPECT_TRUE(Contains(r.err, "nothing extracted (the index is damaged"))
        << r.err;
    EXPECT_FALSE(test::Exists(out + "/a.jpg"));
  }
}

// A lookup table emptied (checksums fixed) opens, but does not find the
// records: verify and extract both call the pack corrupt (exit status 3).
TEST(CliExtract, DamagedLookupTableIsCorruptionAsInVerify) {
  TempDir tmp;
  const std::string pack = tmp / "pack";
  ASSERT_NO_FATAL_FAILURE(WriteNamedPack(pack, {"a.jpg", "b.jpg"}));
  const std::string path = pack + "/index.ufs";
  std::string index = test::ReadFile(path);
  std::string_view in(index);
  IndexHeader h;
  ASSERT_TRUE(h.DecodeFrom(&in).ok());
  ASSERT_GT(h.lookup.size, 0u);
  std::fill(
      index.begin() + static_cast<ptrdiff_t>(h.lookup.offset),
      index.begin() + static_cast<ptrdiff_t>(h.lookup.offset + h.lookup.size),
      '\0');
  EncodeFixed64(&index[IndexHeader::kBodyChecksumOffset],
                Checksum64(index.data() + IndexHeader::kEncodedLength,
                           index.size() - IndexHeader::kEncodedLength));
  EncodeFixed64(&index[IndexHeader::kHeaderChecksumOffset],
                Checksum64(index.data(), IndexHeader::kHeaderChecksumOffset));
  test::WriteFile(path, index);

  CommandResult v = RunCli({"verify", pack});
  EXPECT_EQ(v.exit_code, 3) << v.out;
  CommandResult r = RunCli({"extract", pack, tmp / "out"});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_TRUE(Contains(r.err,
                       "record 0 'a.jpg': corrupt index: the name lookup "
                       "table does not find it"))
      << r.err;
  EXPECT_FALSE(test::Exists(tmp / "out/a.jpg"));
}

// `ls` shows one line per record whatever the name holds, escaped as tar
// escapes its listings; --null and --json keep the exact bytes.
TEST(CliLs, EscapesControlCharactersOneLinePerRecord) {
  TempDir tmp;
  const std::string pack = tmp / "pack";
  const std::vector<std::string> names = {"a\nb.jpg", "tab\t.jpg",
                                          "back\\slash.jpg", "\xff.jpg",
                                          "caf\xc3\xa9.jpg"};
  ASSERT_NO_FATAL_FAILURE(WriteNamedPack(pack, names));
  CommandResult ls = RunCli({"ls", pack});
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_EQ(ls.out,
            "a\\x0ab.jpg\ntab\\x09.jpg\nback\\\\slash.jpg\n\\xff.jpg\n"
            "caf\xc3\xa9.jpg\n");
  CommandResult lsl = RunCli({"ls", "-l", pack});
  ASSERT_EQ(lsl.exit_code, 0) << lsl.err;
  EXPECT_EQ(std::count(lsl.out.begin(), lsl.out.end(), '\n'), 5) << lsl.out;
  EXPECT_TRUE(Contains(lsl.out, "a\\x0ab.jpg\n")) << lsl.out;
  CommandResult nul = RunCli({"ls", "-0", pack});
  ASSERT_EQ(nul.exit_code, 0) << nul.err;
  std::string expect;
  for (const std::string& n : names) expect += n + '\0';
  EXPECT_EQ(nul.out, expect);
  CommandResult json = RunCli({"ls", "--json", pack});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_TRUE(Contains(json.out, "\"name\":\"a\\nb.jpg\"")) << json.out;
  EXPECT_TRUE(Contains(json.out, "\"name\":\"back\\\\slash.jpg\"")) << json.out;
}

// A record really named "#0" (or "#x"): `cat` reaches it with --name or
// "./#0"; "#0" that is both an index and another record's name is refused.
TEST(CliCat, NamesStartingWithHashAreReachable) {
  TempDir tmp;
  const std::string pack = tmp / "pack";
  // Record 0 is "first.jpg", record 1 is literally "#0", record 2 "#x".
  ASSERT_NO_FATAL_FAILURE(WriteNamedPack(pack, {"first.jpg", "#0", "#x"}));
  CommandResult amb = RunCli({"cat", pack, "#0"});
  EXPECT_EQ(amb.exit_code, 2);
  EXPECT_TRUE(Contains(amb.err,
                       "'#0' is both record 0 and the name of "
                       "record 1: say --index 0 or --name '#0'"))
      << amb.err;
  EXPECT_EQ(amb.out, "");
  CommandResult by_name = RunCli({"cat", pack, "--name", "#0"});
  EXPECT_EQ(by_name.exit_code, 0) << by_name.err;
  EXPECT_EQ(by_name.out, "bytes of 1");
  CommandResult dot = RunCli({"cat", pack, "./#0"});
  EXPECT_EQ(dot.exit_code, 0) << dot.err;
  EXPECT_EQ(dot.out, "bytes of 1");
  CommandResult idx = RunCli({"cat", pack, "--index", "0"});
  EXPECT_EQ(idx.exit_code, 0) << idx.err;
  EXPECT_EQ(idx.out, "bytes of 0");
  CommandResult hx = RunCli({"cat", pack, "#x"});
  EXPECT_EQ(hx.exit_code, 2);
  EXPECT_TRUE(Contains(hx.err,
                       "'x' is not a record index; for a record named "
                       "'#x' use --name '#x' or './#x'"))
      << hx.err;
  CommandResult dotx = RunCli({"cat", pack, "./#x"});
  EXPECT_EQ(dotx.exit_code, 0) << dotx.err;
  EXPECT_EQ(dotx.out, "bytes of 2");
  // "#2" with no record named "#2" is plainly record 2.
  CommandResult two = RunCli({"cat", pack, "#2"});
  EXPECT_EQ(two.exit_code, 0) << two.err;
  EXPECT_EQ(two.out, "bytes of 2");
}

// Names that differ only in case are different names: both are extracted
// on a case-sensitive file system.  (On a case-insensitive one the second
// open(O_CREAT | O_EXCL) fails with EEXIST: extract stops with "exists",
// and the first file is never overwritten without --force.)
TEST(CliExtract, CaseCollidingNamesBothExtract) {
  TempDir tmp;
  test::WriteFile(tmp / "probe", "");
  if (test::Exists(tmp / "PROBE")) {
    GTEST_SKIP() << tmp.path() << " is case-insensitive";
  }
  const std::string pack = tmp / "pack";
  ASSERT_NO_FATAL_FAILURE(
      WriteNamedPack(pack, {"A.jpg", "a.jpg", "d/X.jpg", "D/x.jpg"}));
  CommandResult r = RunCli({"extract", pack, tmp / "out"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto tree = test::ReadTree(tmp / "out");
  const std::map<std::string, std::string> want = {{"A.jpg", "bytes of 0"},
                                                   {"a.jpg", "bytes of 1"},
                                                   {"d/X.jpg", "bytes of 2"},
                                                   {"D/x.jpg", "bytes of 3"}};
  EXPECT_EQ(tree, want);
}

// Record names longer than PATH_MAX: built (the builder opens such paths
// one component at a time) and extracted (extract creates directories one
// component at a time with mkdirat/openat), byte for byte.
TEST_F(CliTest, BuildAndExtractPathsLongerThanPathMax) {
  std::string deep = src_ + "/cats";
  for (int i = 0; i < 22; ++i) {
    deep += "/" + std::string(200, static_cast<char>('a' + i));
  }
  ASSERT_GT(deep.size(), 4096u);
  const std::string bytes = test::RandomBytes(5000, 77);
  test::WriteFile(deep + "/deep.jpg", bytes);
  CommandResult b = Build({"--compress", "zstd"});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_TRUE(Contains(b.out, "packed 10 files")) << b.out;
  const std::string name = deep.substr(src_.size() + 1) + "/deep.jpg";
  CommandResult c = RunCli({"cat", pack_, "--name", name});
  ASSERT_EQ(c.exit_code, 0) << c.err.substr(0, 200);
  EXPECT_TRUE(c.out == bytes);
  EXPECT_EQ(RunCli({"verify", pack_}).exit_code, 0);
  const std::string out = tmp_ / "out";
  CommandResult x = RunCli({"extract", pack_, out});
  ASSERT_EQ(x.exit_code, 0) << x.err.substr(0, 300);
  std::map<std::string, std::string> want;
  for (const std::string& n : kTreeNames) {
    want[n] = test::ReadFile(src_ + "/" + n);
  }
  want[name] = bytes;
  EXPECT_TRUE(test::ReadTree(out) == want);
  EXPECT_TRUE(test::ReadFile(out + "/" + name) == bytes);
}

TEST(CliRealPhotos, BuildVerifyExtractRoundTrip) {
  const std::string tar = test::SharedPhotosTar();
  if (tar.empty())
    GTEST_SKIP() << "../shared/data/cats_and_dogs_filtered.tar absent";
  TempDir tmp;
  ASSERT_EQ(test::Run({"/bin/tar", "-xf", tar, "-C", tmp.path()}).exit_code, 0);
  const std::string src = tmp / "cats_and_dogs_filtered";
  const std::string pack = tmp / "pack";
  CommandResult b = RunCli({"build", src + "/train", "-o", pack});
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_TRUE(Contains(b.out, "packed 2,000 files")) << b.out;
  CommandResult v = RunCli({"verify", pack});
  EXPECT_EQ(v.exit_code, 0) << v.out;
  EXPECT_TRUE(Contains(v.out, "OK: 2,000 records")) << v.out;
  CommandResult x = RunCli({"extract", pack, tmp / "out"});
  ASSERT_EQ(x.exit_code, 0) << x.err;
  auto original = test::ReadTree(src + "/train");
  auto extracted = test::ReadTree(tmp / "out");
  EXPECT_EQ(original.size(), 2000u);
  EXPECT_TRUE(original == extracted);
}

}  // namespace
}  // namespace ufspack
