// Copyright 2026 The ufspack Authors.
//
// SampleWriter: samples added in any order give the pack a tree build of
// the same files gives (records, names, classes, labels, bytes, in
// ImageFolder order); bad names, labels and duplicates are refused with
// the writer left usable where the contract says so; nothing is published
// on error or without Finish().

#include "ufspack/sample_writer.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "testutil.h"
#include "ufspack/builder.h"
#include "ufspack/reader.h"

namespace ufspack {
namespace {

using test::TempDir;

struct Sample {
  std::string name;
  uint32_t label;
  std::string bytes;
};

// Every record of the pack at `dir`, in index order, and its class names.
std::vector<Sample> ReadPack(const std::string& dir,
                             std::vector<std::string>* classes) {
  std::unique_ptr<Reader> r;
  Status s = Reader::Open(dir, ReaderOptions(), &r);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return {};
  classes->clear();
  for (uint64_t c = 0; c < r->info().class_count; ++c) {
    ClassInfo info;
    EXPECT_TRUE(r->GetClass(c, &info).ok());
    classes->emplace_back(info.name);
  }
  std::vector<Sample> out;
  for (uint64_t i = 0; i < r->size(); ++i) {
    Record rec;
    EXPECT_TRUE(r->GetRecord(i, &rec).ok());
    std::string bytes;
    EXPECT_TRUE(r->Read(rec, &bytes).ok());
    out.push_back({std::string(rec.name), rec.label, bytes});
  }
  return out;
}

// A tree whose ImageFolder order is not the byte order of its paths:
// nested directories ("a/sub-x" before "a/sub/deeper"), upper case, UTF-8.
std::map<std::string, std::string> TreeFiles() {
  std::map<std::string, std::string> files;
  const char* names[] = {
      "cat/1.jpg",
      "cat/10.jpg",
      "cat/2.jpg",
      "cat/sub/deeper/z.jpg",
      "cat/sub-x/a.jpg",
      "cat/Sub/b.jpg",
      "dog/\xc3\xa9t\xc3\xa9.jpg",
      "dog/a.png",
      "Zebra/x.jpg",
      "zebra/y.jpg",
      "\xc3\xa9lan/e.jpg",
  };
  uint64_t seed = 1;
  for (const char* n : names)
    files[n] = test::RandomBytes(100 + seed * 37, seed), ++seed;
  return files;
}

TEST(SampleWriterTest, AnyOrderGivesTheTreeBuildsPack) {
  TempDir dir;
  const auto files = TreeFiles();
  for (const auto& [name, bytes] : files)
    test::WriteFile(dir / ("tree/" + name), bytes);
  BuildSummary summary;
  Status s = BuildPack(dir / "tree", dir / "built", BuildOptions(), &summary);
  ASSERT_TRUE(s.ok()) << s.ToString();

  std::vector<std::pair<std::string, std::string>> shuffled(files.begin(),
                                                            files.end());
  for (uint64_t seed : {1, 2, 3}) {
    std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937_64(seed));
    const std::string out = dir / ("written" + std::to_string(seed));
    std::unique_ptr<SampleWriter> w;
    ASSERT_TRUE(SampleWriter::Create(out, SampleWriterOptions(), &w).ok());
    for (const auto& [name, bytes] : shuffled) {
      ASSERT_TRUE(w->Add(name, bytes).ok()) << name;
    }
    s = w->Finish();
    ASSERT_TRUE(s.ok()) << s.ToString();
    std::vector<std::string> want_classes, got_classes;
    const auto want = ReadPack(dir / "built", &want_classes);
    const auto got = ReadPack(out, &got_classes);
    EXPECT_EQ(got_classes, want_classes);
    EXPECT_EQ(w->classes(), want_classes);
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) {
      EXPECT_EQ(got[k].name, want[k].name) << k;
      EXPECT_EQ(got[k].label, want[k].label) << k;
      EXPECT_EQ(got[k].bytes, want[k].bytes) << k;
    }
  }
}

TEST(SampleWriterTest, FlatPackInTreeOrder) {
  TempDir dir;
  const auto files = TreeFiles();
  for (const auto& [name, bytes] : files)
    test::WriteFile(dir / ("tree/" + name), bytes);
  BuildOptions o;
  o.scan.flat = true;
  o.writer.flat = true;
  BuildSummary summary;
  ASSERT_TRUE(BuildPack(dir / "tree", dir / "built", o, &summary).ok());
  SampleWriterOptions wo;
  wo.writer.flat = true;
  std::unique_ptr<SampleWriter> w;
  ASSERT_TRUE(SampleWriter::Create(dir / "written", wo, &w).ok());
  for (auto it = files.rbegin(); it != files.rend(); ++it) {
    ASSERT_TRUE(w->Add(it->first, it->second).ok());
  }
  EXPECT_TRUE(w->Add("x.jpg", "x", 0).IsInvalidArgument());  // no labels
  ASSERT_TRUE(w->Finish().ok());
  std::vector<std::string> c1, c2;
  const auto want = ReadPack(dir / "built", &c1);
  const auto got = ReadPack(dir / "written", &c2);
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    EXPECT_EQ(got[k].name, want[k].name);
    EXPECT_EQ(got[k].bytes, want[k].bytes);
    EXPECT_EQ(got[k].label, kNoLabel);
  }
}

TEST(SampleWriterTest, BadNamesAreRefusedAndTheWriterGoesOn) {
  TempDir dir;
  std::unique_ptr<SampleWriter> w;
  ASSERT_TRUE(
      SampleWriter::Create(dir / "out", SampleWriterOptions(), &w).ok());
  for (const char* bad : {"", "/abs/x.jpg", "a//b.jpg", "a/../b.jpg",
                          "./a/b.jpg", "a/b/", "noclass.jpg"}) {
    Status s = w->Add(bad, "bytes");
    EXPECT_TRUE(s.IsInvalidArgument()) << "'" << bad << "': " << s.ToString();
  }
  EXPECT_TRUE(w->Add(std::string("a/b\0c", 5), "x").IsInvalidArgument());
  ASSERT_TRUE(w->Add("a/ok.jpg", "fine").ok());
  ASSERT_TRUE(w->Finish().ok());
  std::vector<std::string> classes;
  const auto got = ReadPack(dir / "out", &classes);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].name, "a/ok.jpg");
  EXPECT_TRUE(w->Add("a/late.jpg", "x").IsInvalidArgument());  // closed
}

TEST(SampleWriterTest, DuplicateNamePublishesNothing) {
  TempDir dir;
  std::unique_ptr<SampleWriter> w;
  ASSERT_TRUE(
      SampleWriter::Create(dir / "out", SampleWriterOptions(), &w).ok());
  ASSERT_TRUE(w->Add("a/1.jpg", "one").ok());
  ASSERT_TRUE(w->Add("b/2.jpg", "two").ok());
  ASSERT_TRUE(w->Add("a/1.jpg", "again").ok());
  Status s = w->Finish();
  ASSERT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.ToString().find("'a/1.jpg' added twice"), std::string::npos)
      << s.ToString();
  EXPECT_FALSE(test::Exists(dir / "out/index.ufs"));
  EXPECT_FALSE(test::Exists(dir / "out/data.ufs"));
  EXPECT_TRUE(test::PackTempFiles(dir / "out").empty());
}

TEST(SampleWriterTest, LabelsMustAgreeWithTheSortedClasses) {
  TempDir dir;
  {
    std::unique_ptr<SampleWriter> w;
    ASSERT_TRUE(
        SampleWriter::Create(dir / "ok", SampleWriterOptions(), &w).ok());
    ASSERT_TRUE(w->Add("b/x.jpg", "x", 1).ok());
    ASSERT_TRUE(w->Add("a/y.jpg", "y", 0).ok());
    ASSERT_TRUE(w->Finish().ok());
  }
  std::unique_ptr<SampleWriter> w;
  ASSERT_TRUE(
      SampleWriter::Create(dir / "bad", SampleWriterOptions(), &w).ok());
  ASSERT_TRUE(w->Add("b/x.jpg", "x", 0).ok());  // b sorts second: label 1
  ASSERT_TRUE(w->Add("a/y.jpg", "y").ok());
  Status s = w->Finish();
  ASSERT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(
      s.ToString().find("b/x.jpg: label 0 given, but its class 'b' is label 1"),
      std::string::npos)
      << s.ToString();
  EXPECT_FALSE(test::Exists(dir / "bad/index.ufs"));
}

TEST(SampleWriterTest, FixedClassesSetTheLabelsAndEmptyOnesNeedAllowEmpty) {
  TempDir dir;
  SampleWriterOptions o;
  o.classes = {"zeta", "alpha", "mid"};  // label order as given, not sorted
  std::unique_ptr<SampleWriter> w;
  ASSERT_TRUE(SampleWriter::Create(dir / "out", o, &w).ok());
  EXPECT_TRUE(w->Add("other/x.jpg", "x").IsInvalidArgument());
  EXPECT_TRUE(w->Add("alpha/x.jpg", "x", 0).IsInvalidArgument());
  ASSERT_TRUE(w->Add("alpha/x.jpg", "x", 1).ok());
  ASSERT_TRUE(w->Add("zeta/y.jpg", "y").ok());
  Status s = w->Finish();  // "mid" has no sample
  ASSERT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.ToString().find("'mid'"), std::string::npos) << s.ToString();

  o.allow_empty = true;
  ASSERT_TRUE(SampleWriter::Create(dir / "out2", o, &w).ok());
  ASSERT_TRUE(w->Add("alpha/x.jpg", "x").ok());
  ASSERT_TRUE(w->Add("zeta/y.jpg", "y").ok());
  ASSERT_TRUE(w->Finish().ok());
  std::vector<std::string> classes;
  const auto got = ReadPack(dir / "out2", &classes);
  EXPECT_EQ(classes, o.classes);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].name, "zeta/y.jpg");
  EXPECT_EQ(got[0].label, 0u);
  EXPECT_EQ(got[1].name, "alpha/x.jpg");
  EXPECT_EQ(got[1].label, 1u);

  o.classes = {"a", "a"};
  EXPECT_TRUE(SampleWriter::Create(dir / "out3", o, &w).IsInvalidArgument());
  o.classes = {"a/b"};
  EXPECT_TRUE(SampleWriter::Create(dir / "out3", o, &w).IsInvalidArgument());
}

TEST(SampleWriterTest, AbandonedOrDestroyedWriterLeavesThePreviousPack) {
  TempDir dir;
  {
    std::unique_ptr<SampleWriter> w;
    ASSERT_TRUE(
        SampleWriter::Create(dir / "out", SampleWriterOptions(), &w).ok());
    ASSERT_TRUE(w->Add("a/old.jpg", "old").ok());
    ASSERT_TRUE(w->Finish().ok());
  }
  {
    std::unique_ptr<SampleWriter> w;
    ASSERT_TRUE(
        SampleWriter::Create(dir / "out", SampleWriterOptions(), &w).ok());
    ASSERT_TRUE(w->Add("a/new.jpg", "new").ok());
  }  // destroyed without Finish()
  std::vector<std::string> classes;
  auto got = ReadPack(dir / "out", &classes);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].name, "a/old.jpg");
  EXPECT_TRUE(test::PackTempFiles(dir / "out").empty());
}

TEST(SampleWriterTest, StreamedSampleThatFallsShortIsLeftOut) {
  TempDir dir;
  std::unique_ptr<SampleWriter> w;
  ASSERT_TRUE(
      SampleWriter::Create(dir / "out", SampleWriterOptions(), &w).ok());
  const std::string big = test::RandomBytes(3 << 20, 7);
  auto streamer = [](const std::string& src, size_t* at) {
    return [&src, at](char* buf, size_t cap, size_t* got) {
      *got = std::min(cap, src.size() - *at);
      std::copy_n(src.data() + *at, *got, buf);
      *at += *got;
      return Status::OK();
    };
  };
  auto whole = [](uint64_t want) {
    return [want](uint64_t done) {
      return done == want ? Status::OK()
                          : Status::IOError("short: " + std::to_string(done));
    };
  };
  size_t at = 0;
  ASSERT_TRUE(w->AddStreamed("a/big.bin", big.size(), streamer(big, &at),
                             whole(big.size()))
                  .ok());
  const std::string cut = big.substr(0, 1 << 20);
  at = 0;
  Status s = w->AddStreamed("a/cut.bin", big.size(), streamer(cut, &at),
                            whole(big.size()));
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  ASSERT_TRUE(w->Add("a/small.bin", "small").ok());
  ASSERT_TRUE(w->Finish().ok());
  std::vector<std::string> classes;
  const auto got = ReadPack(dir / "out", &classes);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].name, "a/big.bin");
  EXPECT_EQ(got[0].bytes, big);
  EXPECT_EQ(got[1].name, "a/small.bin");
  EXPECT_EQ(got[1].bytes, "small");
}

// Runs `body` in a fork() child, which ends with _exit(body()) (no
// destructor of the parent's objects runs there, as after os._exit);
// returns its exit status, or -1 if it did not exit.
int InChild(const std::function<int()>& body) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
    return -1;
  }
  return WEXITSTATUS(status);
}

// 0 if `s` is the error of a writer used across fork(), else `bit`.
int ForkRefusal(const Status& s, int bit) {
  if (s.IsInvalidArgument() &&
      s.message().find("cannot be used across fork()") != std::string::npos &&
      s.message().find("opened by process " + std::to_string(::getppid())) !=
          std::string::npos) {
    return 0;
  }
  std::fprintf(stderr, "child: %s\n", s.ToString().c_str());
  return bit;
}

TEST(SampleWriterForkTest, ChildThatDropsTheWriterLeavesTheParentsFiles) {
  TempDir dir;
  std::unique_ptr<SampleWriter> w;
  ASSERT_TRUE(
      SampleWriter::Create(dir / "out", SampleWriterOptions(), &w).ok());
  const std::string one = test::RandomBytes(5000, 1);
  const std::string two = test::RandomBytes(7000, 2);
  ASSERT_TRUE(w->Add("a/1", one).ok());
  const auto temps = test::PackTempFiles(dir / "out");
  ASSERT_FALSE(temps.empty());
  // The child destroys its copy (a garbage-collected Writer), then exits.
  EXPECT_EQ(InChild([&] {
              w.reset();
              return 0;
            }),
            0);
  EXPECT_EQ(test::PackTempFiles(dir / "out"), temps);
  ASSERT_TRUE(w->Add("b/2", two).ok());
  Status s = w->Finish();
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::vector<std::string> classes;
  const auto got = ReadPack(dir / "out", &classes);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].name, "a/1");
  EXPECT_EQ(got[0].bytes, one);
  EXPECT_EQ(got[1].name, "b/2");
  EXPECT_EQ(got[1].bytes, two);
}

TEST(SampleWriterForkTest, ChildCannotUseTheWriterAndPublishesNothing) {
  TempDir dir;
  std::unique_ptr<SampleWriter> w;
  ASSERT_TRUE(
      SampleWriter::Create(dir / "out", SampleWriterOptions(), &w).ok());
  std::unique_ptr<PackWriter> pw;
  PackWriterOptions flat_options;
  flat_options.flat = true;
  ASSERT_TRUE(PackWriter::Create(dir / "flat", flat_options, &pw).ok());
  ASSERT_TRUE(w->Add("a/1", "parent").ok());
  const int bad = InChild([&] {
    auto no_bytes = [](char*, size_t, size_t* got) {
      *got = 0;
      return Status::OK();
    };
    auto whole = [](uint64_t) { return Status::OK(); };
    int r = ForkRefusal(w->Add("a/child", "child"), 1);
    r |= ForkRefusal(w->AddStreamed("a/streamed", 0, no_bytes, whole), 2);
    r |= ForkRefusal(w->AddClass("c"), 4);
    r |= ForkRefusal(w->SetMetadata("k", "v"), 8);
    r |= ForkRefusal(w->Finish(), 16);
    r |= ForkRefusal(pw->Add("x", kNoLabel, "child"), 32);
    r |= ForkRefusal(pw->Finish(), 64);
    w->Abandon();
    pw->Abandon();
    return r;
  });
  EXPECT_EQ(bad, 0);
  EXPECT_FALSE(test::Exists(dir / "out/index.ufs"));
  EXPECT_FALSE(test::Exists(dir / "out/data.ufs"));
  EXPECT_FALSE(test::Exists(dir / "flat/index.ufs"));
  ASSERT_TRUE(w->Add("a/2", "parent again").ok());
  Status s = w->Finish();
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(pw->Add("x", kNoLabel, "flat").ok());
  s = pw->Finish();
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::vector<std::string> classes;
  const auto got = ReadPack(dir / "out", &classes);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].bytes, "parent");
  EXPECT_EQ(got[1].bytes, "parent again");
  const auto flat = ReadPack(dir / "flat", &classes);
  ASSERT_EQ(flat.size(), 1u);
  EXPECT_EQ(flat[0].bytes, "flat");
}

// The build lock is an flock(2) of the open directory, shared with a child
// that inherits its descriptor: a child still running must not keep the
// directory locked once the parent's writer is gone.
TEST(SampleWriterForkTest, LiveChildDoesNotHoldTheDirectoryLock) {
  TempDir dir;
  std::unique_ptr<SampleWriter> w;
  ASSERT_TRUE(
      SampleWriter::Create(dir / "out", SampleWriterOptions(), &w).ok());
  ASSERT_TRUE(w->Add("a/1", "one").ok());
  int hold[2];
  ASSERT_EQ(::pipe(hold), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(hold[1]);
    char c;
    while (::read(hold[0], &c, 1) < 0 && errno == EINTR) {
    }
    ::_exit(0);
  }
  ::close(hold[0]);
  Status s = w->Finish();
  w.reset();
  std::unique_ptr<SampleWriter> next;
  const Status again = SampleWriter::Create(dir / "out", {}, &next);
  ::close(hold[1]);  // the child exits
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(again.ok()) << again.ToString();
  ASSERT_TRUE(next->Add("b/2", "two").ok());
  ASSERT_TRUE(next->Finish().ok());
}

}  // namespace
}  // namespace ufspack
