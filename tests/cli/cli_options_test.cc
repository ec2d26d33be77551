// Copyright 2026 The ufspack Authors.
//
// The `ufspack` command line as users type it (CLI11 parsing: bundled
// flags, attached values, options after arguments, "--"), --version, and
// build --json / -v.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "testutil.h"
#include "ufspack/format.h"

namespace ufspack {
namespace {

using test::CommandResult;
using test::RunCli;
using test::TempDir;

using test::Contains;

class CliOptionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    src_ = tmp_ / "src";
    test::WriteFile(src_ + "/cats/c1.jpg", test::RandomBytes(5000, 1));
    test::WriteFile(src_ + "/cats/c2.png", test::CompressibleBytes(9000, 2));
    test::WriteFile(src_ + "/dogs/d1.jpg", test::RandomBytes(3000, 3));
  }
  TempDir tmp_;
  std::string src_;
};

// Every spelling of the same build gives the same, byte-identical pack.
TEST_F(CliOptionsTest, EveryUsualSpellingOfOptionsWorks) {
  const std::vector<std::vector<std::string>> spellings = {
      {"build", src_, "-o", tmp_ / "p1", "-j", "8", "-q"},  // -o OUT
      {"build", src_, "-o" + (tmp_ / "p2"), "-j8", "-q"},   // -oOUT -j8
      {"build", "--threads=8", "--output", tmp_ / "p3", "-q", src_},  // --x=v
      {"build", "-q", "--output=" + (tmp_ / "p4"), "--", src_},       // --
      {"build", src_, "-q", "--threads", "8", "--output", tmp_ / "p5"},
  };
  for (size_t k = 0; k < spellings.size(); ++k) {
    CommandResult r = RunCli(spellings[k]);
    EXPECT_EQ(r.exit_code, 0) << k << ": " << r.err;
    EXPECT_EQ(r.out, "") << k << " (-q prints nothing)";
  }
  const std::string data = test::ReadFile(tmp_ / "p1/data.ufs");
  const std::string index = test::ReadFile(tmp_ / "p1/index.ufs");
  for (const char* p : {"p2", "p3", "p4", "p5"}) {
    EXPECT_EQ(test::ReadFile(tmp_ / p + "/data.ufs"), data) << p;
    EXPECT_EQ(test::ReadFile(tmp_ / p + "/index.ufs"), index) << p;
  }
  // Bundled short flags: -qf (quiet + force) over an existing tree.
  const std::string out = tmp_ / "out";
  ASSERT_EQ(RunCli({"extract", tmp_ / "p1", out, "-q"}).exit_code, 0);
  CommandResult again = RunCli({"extract", tmp_ / "p1", out});
  EXPECT_EQ(again.exit_code, 1) << "no --force: existing files refused";
  CommandResult forced = RunCli({"extract", "-qf", tmp_ / "p1", out, "-j2"});
  EXPECT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_EQ(forced.out, "");
  // ls -l0: bundled flag and a digit flag.
  CommandResult ls = RunCli({"ls", tmp_ / "p1", "-l0"});
  EXPECT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_TRUE(Contains(ls.out, std::string("cats/c1.jpg") + '\0')) << ls.out;
  // An option after "--" is an argument: a record named "--json".
  CommandResult cat = RunCli({"cat", tmp_ / "p1", "--", "--json"});
  EXPECT_EQ(cat.exit_code, 1);
  EXPECT_TRUE(Contains(cat.err, "no record named '--json'")) << cat.err;
}

TEST_F(CliOptionsTest, UsageErrorsNameTheCommandAndExitTwo) {
  struct Case {
    std::vector<std::string> args;
    std::string command, mentions;
  };
  const std::vector<Case> cases = {
      {{"build", src_, "--bogus"}, "build", "--bogus"},
      {{"build", src_, "-o"}, "build", "--output"},
      {{"build"}, "build", "dir"},
      {{"info", "a", "b"}, "info", "b"},
      {{"verify", "p", "-j0"}, "verify", "--threads"},
      {{"extract", "p", "d", "--threads=x"}, "extract", "--threads"},
      {{"ls", "p", "-x"}, "ls", "-x"},
  };
  for (const Case& c : cases) {
    CommandResult r = RunCli(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args.back() << ": " << r.err;
    EXPECT_TRUE(Contains(r.err, "ufspack " + c.command + ": ")) << r.err;
    EXPECT_TRUE(Contains(r.err, c.mentions)) << r.err;
    EXPECT_TRUE(Contains(r.err, "(see 'ufspack " + c.command + " --help')"))
        << r.err;
    EXPECT_EQ(r.out, "");
  }
}

TEST_F(CliOptionsTest, HelpIsTheSameEverywhereAndExplainsTheCommand) {
  for (const char* cmd : {"build", "info", "ls", "cat", "extract", "verify"}) {
    CommandResult h = RunCli({cmd, "--help"});
    EXPECT_EQ(h.exit_code, 0) << cmd;
    EXPECT_EQ(RunCli({cmd, "-h"}).out, h.out) << cmd;
    EXPECT_EQ(RunCli({"help", cmd}).out, h.out) << cmd;
    // --help wins over anything else on the line, as before.
    EXPECT_EQ(RunCli({cmd, "--bogus", "--help"}).out, h.out) << cmd;
    EXPECT_TRUE(Contains(h.out, "Exit status")) << cmd;
    EXPECT_TRUE(Contains(h.out, "Example")) << cmd;
  }
  EXPECT_TRUE(Contains(RunCli({"--help"}).out, "ufspack --version"));
}

// The version is CMake's project(ufspack VERSION x.y.z), and the format
// version reader's kFormatVersion.
TEST(CliVersion, MatchesTheProjectVersion) {
  std::ifstream in(UFSPACK_SOURCE_DIR "/CMakeLists.txt");
  std::stringstream cmake;
  cmake << in.rdbuf();
  std::smatch m;
  const std::string text = cmake.str();
  ASSERT_TRUE(std::regex_search(
      text, m,
      std::regex(R"(project\(ufspack\s+VERSION\s+([0-9]+\.[0-9]+\.[0-9]+))")));
  const std::string expected = "ufspack " + m[1].str() + " (pack format " +
                               std::to_string(kFormatVersion) + ")\n";
  for (const char* flag : {"--version", "-V", "version"}) {
    CommandResult r = RunCli({flag});
    EXPECT_EQ(r.exit_code, 0) << flag;
    EXPECT_EQ(r.out, expected) << flag;
  }
}

TEST_F(CliOptionsTest, BuildJsonSaysWhatWasPackedAndWhatWasSkipped) {
  test::Symlink("nowhere", src_ + "/cats/dangling.jpg");
  const std::string pack = tmp_ / "pack";
  CommandResult r = RunCli({"build", src_, "-o", pack, "--json",
                            "--skip-unreadable", "--compress", "zstd"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // One JSON object, one line, nothing else on stdout.
  ASSERT_FALSE(r.out.empty());
  EXPECT_EQ(r.out.front(), '{');
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << r.out;
  for (const std::string& field :
       {std::string("\"ok\":true"), std::string("\"files\":3"),
        std::string("\"classes\":2"), std::string("\"compressed_records\":1"),
        std::string("\"bytes_in\":17000"), std::string("\"skipped_count\":1"),
        "\"output\":\"" + pack + "\"",
        "\"skipped\":[{\"path\":\"" + src_ +
            "/cats/dangling.jpg\",\"reason\":\"cannot open: No such file or "
            "directory\"}]",
        std::string("\"pack_id\":\""), std::string("\"index_bytes\":"),
        std::string("\"bytes_out\":"), std::string("\"seconds\":")}) {
    EXPECT_TRUE(Contains(r.out, field)) << field << " in " << r.out;
  }
  // The warning still goes to stderr, as without --json.
  EXPECT_TRUE(Contains(
      r.err, "ufspack: warning: " + src_ + "/cats/dangling.jpg: cannot open"))
      << r.err;

  // A failed build: {"ok": false, "error": ...} and the same exit status.
  CommandResult bad =
      RunCli({"build", tmp_ / "missing", "-o", tmp_ / "x", "--json"});
  CommandResult bad_text =
      RunCli({"build", tmp_ / "missing", "-o", tmp_ / "x"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(bad.exit_code, bad_text.exit_code);
  EXPECT_EQ(bad.out.rfind("{\"ok\":false,\"error\":\"" + tmp_ / "missing", 0),
            0u)
      << bad.out;
  EXPECT_TRUE(Contains(bad.out, "\"exit_code\":1")) << bad.out;
  EXPECT_EQ(bad.err, bad_text.err);
}

TEST_F(CliOptionsTest, VerboseListsEveryPackedFileOnStderr) {
  CommandResult quiet = RunCli({"build", src_, "-o", tmp_ / "p"});
  ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_FALSE(Contains(quiet.err, "packed cats/c1.jpg"));
  CommandResult v = RunCli({"build", src_, "-o", tmp_ / "p", "-v"});
  ASSERT_EQ(v.exit_code, 0) << v.err;
  EXPECT_TRUE(Contains(v.err, "ufspack: packed cats/c1.jpg (5,000 bytes)\n"))
      << v.err;
  EXPECT_TRUE(Contains(v.err, "ufspack: packed cats/c2.png")) << v.err;
  EXPECT_TRUE(Contains(v.err, "ufspack: packed dogs/d1.jpg")) << v.err;
  EXPECT_TRUE(Contains(v.out, "packed 3 files")) << v.out;
}

}  // namespace
}  // namespace ufspack
