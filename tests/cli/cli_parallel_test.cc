// Copyright 2026 The ufspack Authors.
//
// verify -j and extract -j: records are read on several threads, and what
// the user sees (problems and their order, the files written, exit codes)
// is exactly what -j1 gives; Ctrl-C still leaves no partial file.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "testutil.h"
#include "ufspack/reader.h"

namespace ufspack {
namespace {

using test::CommandResult;
using test::RunCli;
using test::TempDir;

using test::Contains;

// `count` files in a few classes and nested directories: random (raw
// records) and compressible (zstd records), one of 1 MiB (larger than what
// extract -j64 holds in memory per record).
void MakeTree(const std::string& root, int count, size_t size) {
  for (int k = 0; k < count; ++k) {
    const std::string dir = root + "/class" + std::to_string(k % 4) + "/sub" +
                            std::to_string(k % 3) + "/";
    const std::string name = dir + "f" + std::to_string(k) + ".png";
    test::WriteFile(name, k % 2 ? test::RandomBytes(size + k, k)
                                : test::CompressibleBytes(size + k, k));
  }
  test::WriteFile(root + "/class0/big.png",
                  test::CompressibleBytes(1 << 20, 7));
  test::WriteFile(root + "/class1/big.png", test::RandomBytes(1 << 20, 8));
}

// The "seconds" field of verify --json, which differs from run to run.
std::string WithoutSeconds(const std::string& json) {
  return std::regex_replace(json, std::regex(R"("seconds":[0-9.]+)"),
                            "\"seconds\":_");
}

TEST(CliParallel, VerifyReportsTheSameProblemsInTheSameOrder) {
  TempDir tmp;
  MakeTree(tmp / "src", 200, 3000);
  const std::string pack = tmp / "pack";
  ASSERT_EQ(
      RunCli({"build", tmp / "src", "-o", pack, "-q", "--compress", "zstd"})
          .exit_code,
      0);
  // Damage several records, raw and zstd, spread over the pack.
  std::unique_ptr<Reader> reader;
  ASSERT_TRUE(Reader::Open(pack, {}, &reader).ok());
  int damaged = 0;
  for (uint64_t i = 3; i < reader->size(); i += 17) {
    Record r;
    ASSERT_TRUE(reader->GetRecord(i, &r).ok());
    if (r.stored_length == 0) continue;
    test::FlipByte(pack + "/data.ufs", r.offset + r.stored_length / 2);
    ++damaged;
  }
  reader.reset();
  ASSERT_GT(damaged, 5);
  CommandResult one = RunCli({"verify", pack, "-j1"});
  EXPECT_EQ(one.exit_code, 3) << one.err;
  EXPECT_TRUE(Contains(
      one.out, "CORRUPT: " + std::to_string(damaged) + " problems found"))
      << one.out;
  CommandResult one_json = RunCli({"verify", pack, "--json", "-j", "1"});
  for (const char* j : {"-j2", "-j4", "-j16", "-j64"}) {
    CommandResult many = RunCli({"verify", pack, j});
    EXPECT_EQ(many.exit_code, one.exit_code) << j;
    EXPECT_EQ(many.out, one.out) << j;
    EXPECT_EQ(many.err, one.err) << j;
    CommandResult many_json = RunCli({"verify", pack, "--json", j});
    EXPECT_EQ(many_json.exit_code, 3) << j;
    EXPECT_EQ(WithoutSeconds(many_json.out), WithoutSeconds(one_json.out)) << j;
  }
  // The default (-j8) too.
  EXPECT_EQ(RunCli({"verify", pack}).out, one.out);
}

TEST(CliParallel, ExtractGivesAByteIdenticalTree) {
  TempDir tmp;
  MakeTree(tmp / "src", 300, 2000);
  const std::string pack = tmp / "pack";
  ASSERT_EQ(
      RunCli({"build", tmp / "src", "-o", pack, "-q", "--compress", "zstd"})
          .exit_code,
      0);
  const auto source = test::ReadTree(tmp / "src");
  CommandResult one = RunCli({"extract", pack, tmp / "j1", "-j1"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const auto tree = test::ReadTree(tmp / "j1");
  EXPECT_EQ(tree, source);
  const std::string summary = one.out.substr(0, one.out.find(" into "));
  for (const char* j : {"-j4", "-j64"}) {
    const std::string out = tmp / (std::string("out") + j);
    CommandResult many = RunCli({"extract", pack, out, j});
    ASSERT_EQ(many.exit_code, 0) << j << ": " << many.err;
    EXPECT_EQ(many.out.substr(0, many.out.find(" into ")), summary) << j;
    EXPECT_EQ(test::ReadTree(out), tree) << j;
    // Same refusal as -j1 when run again without --force.
    CommandResult again = RunCli({"extract", pack, out, j});
    CommandResult again1 = RunCli({"extract", pack, out, "-j1"});
    EXPECT_EQ(again.exit_code, 1);
    EXPECT_EQ(again.err, again1.err);
    // With --force every file is rewritten, identically.
    CommandResult forced = RunCli({"extract", pack, out, j, "--force"});
    EXPECT_EQ(forced.exit_code, 0) << forced.err;
    EXPECT_EQ(test::ReadTree(out), tree) << j;
  }
}

// A damaged record stops -j4 where it stops -j1: the same message, the same
// count of files written before it, the same files on disk.
TEST(CliParallel, ExtractStopsAtTheSameRecordAsOneThread) {
  TempDir tmp;
  MakeTree(tmp / "src", 120, 2000);
  const std::string pack = tmp / "pack";
  ASSERT_EQ(RunCli({"build", tmp / "src", "-o", pack, "-q"}).exit_code, 0);
  std::unique_ptr<Reader> reader;
  ASSERT_TRUE(Reader::Open(pack, {}, &reader).ok());
  Record r;
  ASSERT_TRUE(reader->GetRecord(60, &r).ok());
  test::FlipByte(pack + "/data.ufs", r.offset + 10);
  reader.reset();
  CommandResult one = RunCli({"extract", pack, tmp / "j1", "-j1"});
  CommandResult four = RunCli({"extract", pack, tmp / "j4", "-j4"});
  EXPECT_EQ(one.exit_code, 3) << one.err;
  EXPECT_EQ(four.exit_code, one.exit_code);
  EXPECT_TRUE(Contains(one.err, "extracted 60 of 122 files")) << one.err;
  EXPECT_EQ(four.err, one.err);
  EXPECT_EQ(test::ReadTree(tmp / "j4"), test::ReadTree(tmp / "j1"));
}

using test::SpawnCli;

TEST(CliParallel, InterruptedExtractExits130LeavingNoPartialFile) {
  TempDir tmp;
  // Many files, some large enough to be mid-write when the signal lands.
  const std::string src = tmp / "src";
  for (int k = 0; k < 3000; ++k) {
    test::WriteFile(
        src + "/c" + std::to_string(k % 8) + "/f" + std::to_string(k) + ".png",
        k % 10 == 0 ? test::RandomBytes(200000 + k, k)
                    : test::CompressibleBytes(8000 + k, k));
  }
  const std::string pack = tmp / "pack";
  ASSERT_EQ(
      RunCli({"build", src, "-o", pack, "-q", "--compress", "zstd"}).exit_code,
      0);
  const auto source = test::ReadTree(src);
  const std::string dest = tmp / "dest";
  pid_t pid =
      SpawnCli({"extract", pack, dest, "-j4"}, tmp / "stdout", tmp / "stderr");
  ASSERT_GT(pid, 0);
  // Signal once extraction has started writing files.
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!test::Exists(dest + "/c0/f0.png") &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  ::kill(pid, SIGINT);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  const std::string err = test::ReadFile(tmp / "stderr");
  if (WEXITSTATUS(status) == 0) {
    GTEST_SKIP() << "extraction finished before the signal arrived";
  }
  EXPECT_EQ(WEXITSTATUS(status), 130) << err;
  EXPECT_TRUE(Contains(err, "ufspack: error: interrupted")) << err;
  EXPECT_TRUE(Contains(err, "files before stopping")) << err;
  // Every file there is complete: the same bytes as its source.
  const auto extracted = test::ReadTree(dest);
  EXPECT_LT(extracted.size(), source.size());
  for (const auto& [name, bytes] : extracted) {
    auto it = source.find(name);
    ASSERT_NE(it, source.end()) << name;
    EXPECT_TRUE(bytes == it->second) << name << " is partial";
  }
  // And the count it reports is what is there ("1,234" past a thousand).
  std::string count = std::to_string(extracted.size());
  if (count.size() > 3) count.insert(count.size() - 3, ",");
  EXPECT_TRUE(Contains(err, "extracted " + count + " of")) << err;
}

}  // namespace
}  // namespace ufspack
