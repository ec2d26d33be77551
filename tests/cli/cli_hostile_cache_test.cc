// Copyright 2026 The ufspack Authors.
//
// A hostile or damaged cache directory (docs/cache.md, "Trust"): links,
// FIFOs, hard links, directories and other users' files planted at every
// path of a warmed cache.  For each plant, every command that touches the
// cache (cat, verify, warmup, cache stat, cache clear) runs on a fresh copy
// under a timeout and must
//   - return (no FIFO blocks it),
//   - leave the directory outside the cache exactly as it was (nothing
//     deleted, written or created there),
//   - for cat and verify: succeed with the right bytes (a cache that cannot
//     be used is reported and the source read);
//   - for warmup, cache stat and cache clear: succeed, or fail with exit 1
//     and an error naming the cache.
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "testutil.h"

namespace ufspack {
namespace {

namespace fs = std::filesystem;
using test::CommandResult;
using test::Contains;
using test::RunCli;
using test::TempDir;

// The one entry of a directory of the cache (the table, source or lock of
// the one pack warmed into it).
std::string OnlyEntry(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) {
    names.push_back(e.path().filename());
  }
  EXPECT_EQ(names.size(), 1u) << dir;
  return names.empty() ? "" : names[0];
}

// Everything below `dir`: path -> kind and bytes (links not followed).
std::map<std::string, std::string> Snapshot(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const fs::file_status st = fs::symlink_status(e.path());
    std::string v;
    if (fs::is_symlink(st)) {
      v = "link:" + fs::read_symlink(e.path()).string();
    } else if (fs::is_directory(st)) {
      v = "dir";
    } else if (fs::is_regular_file(st)) {
      v = "file:" + test::ReadFile(e.path());
    } else {
      v = "other";
    }
    out[e.path().string()] = v;
  }
  return out;
}

void Symlink(const std::string& target, const std::string& at) {
  fs::remove_all(at);
  fs::create_symlink(target, at);
}

void Fifo(const std::string& at) {
  fs::remove_all(at);
  test::MakeFifo(at);
}

struct Plant {
  const char* name;
  // (cache dir, outside dir)
  std::function<void(const std::string&, const std::string&)> make;
  bool needs_root = false;
};

class HostileCacheTest : public ::testing::TestWithParam<Plant> {
 protected:
  void SetUp() override {
    for (int k = 0; k < 6; ++k) {
      const std::string name =
          (k % 2 ? "dogs/d" : "cats/c") + std::to_string(k) + ".jpg";
      files_[name] = test::RandomBytes(3000 + 7 * k, k);
      test::WriteFile(tmp_ / ("src/" + name), files_[name]);
    }
    pack_ = tmp_ / "p.ufspack";
    CommandResult b = RunCli({"build", tmp_ / "src", "-o", pack_, "-q"});
    ASSERT_EQ(b.exit_code, 0) << b.err;
    template_ = tmp_ / "template";
    CommandResult w = RunCli({"warmup", pack_, "--cache", template_, "-q"});
    ASSERT_EQ(w.exit_code, 0) << w.err;
    // A second, real cache outside (for "ns is a link to another cache").
    CommandResult w2 =
        RunCli({"warmup", pack_, "--cache", tmp_ / "out/other-cache", "-q"});
    ASSERT_EQ(w2.exit_code, 0) << w2.err;
    test::WriteFile(tmp_ / "out/a.txt", "hello");
    test::WriteFile(tmp_ / "out/sub/b.txt", "world");
  }

  // A fresh copy of the warmed cache with the plant made in it.
  std::string Planted(int round) {
    const std::string cache = tmp_ / ("cache" + std::to_string(round));
    fs::copy(template_, cache,
             fs::copy_options::recursive | fs::copy_options::copy_symlinks);
    GetParam().make(cache, tmp_ / "out");
    return cache;
  }

  TempDir tmp_;
  std::map<std::string, std::string> files_;
  std::string pack_, template_;
};

TEST_P(HostileCacheTest, NothingOutsideIsTouchedAndNothingHangs) {
  if (GetParam().needs_root && ::geteuid() != 0) {
    GTEST_SKIP() << "needs root (chown)";
  }
  const auto before = Snapshot(tmp_ / "out");
  const std::string first = files_.begin()->first;  // cats/c0.jpg: record 0
  struct Command {
    std::vector<std::string> args;  // {cache} is replaced
    bool reads;                     // must succeed with the right bytes
  };
  const std::vector<Command> commands = {
      {{"cat", pack_, "#0", "--cache", "{cache}"}, true},
      {{"verify", pack_, "--cache", "{cache}"}, true},
      {{"warmup", pack_, "--cache", "{cache}", "-q"}, false},
      {{"cache", "stat", "{cache}"}, false},
      {{"cache", "clear", "{cache}"}, false},
  };
  int round = 0;
  for (const Command& c : commands) {
    const std::string cache = Planted(round++);
    std::vector<std::string> argv = {UFSPACK_CLI_PATH};
    for (const std::string& a : c.args)
      argv.push_back(a == "{cache}" ? cache : a);
    const std::string what = std::string(GetParam().name) + ": " + c.args[0] +
                             (c.args[0] == "cache" ? " " + c.args[1] : "");
    CommandResult r = test::RunWithTimeout(argv, 30);
    ASSERT_NE(r.exit_code, -1) << what << ": hung (killed after 30 s)";
    if (c.reads) {
      EXPECT_EQ(r.exit_code, 0) << what << ": " << r.err;
      if (c.args[0] == "cat") {
        EXPECT_TRUE(r.out == files_[first]) << what;
      }
    } else {
      EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1)
          << what << ": exit " << r.exit_code << ": " << r.err;
      if (r.exit_code == 1) {
        EXPECT_TRUE(Contains(r.err, "ufspack: error: ")) << what << r.err;
        EXPECT_TRUE(Contains(r.err, cache)) << what << ": " << r.err;
      }
    }
    EXPECT_TRUE(Snapshot(tmp_ / "out") == before)
        << what << ": the directory outside the cache changed";
    // The plant itself is never followed: the cache still reads after it.
    CommandResult again = test::RunWithTimeout(
        {UFSPACK_CLI_PATH, "cat", pack_, "#0", "--cache", cache}, 30);
    EXPECT_EQ(again.exit_code, 0) << what << ": " << again.err;
    EXPECT_TRUE(again.out == files_[first]) << what;
    EXPECT_TRUE(Snapshot(tmp_ / "out") == before) << what;
  }
}

// A directory of the cache owner's, moved into ns/ or tmp/ under a name the
// cache makes (by a co-tenant who can write there): recount, clear and
// eviction remove only the files a table holds, so its other contents stay.
TEST(MovedInDirectoryTest, IsNeverEmptied) {
  TempDir tmp;
  test::WriteFile(tmp / "src/a/x.jpg", test::RandomBytes(5000, 1));
  const std::string pack = tmp / "p.ufspack";
  ASSERT_EQ(RunCli({"build", tmp / "src", "-o", pack, "-q"}).exit_code, 0);
  const std::string cache = tmp / "cache";
  ASSERT_EQ(RunCli({"warmup", pack, "--cache", cache, "-q"}).exit_code, 0);
  const std::vector<std::string> planted = {
      cache + "/ns/0123456789abcdef0123456789abcdef",
      cache + "/tmp/new-1-2-3",
      cache + "/tmp/evict-1-2-3",
  };
  for (const std::string& d : planted) {
    test::WriteFile(d + "/notes.txt", "precious");
    test::WriteFile(d + "/sub/b.txt", "precious too");
    test::WriteFile(d + "/log", "a log");
  }
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{
           {"cache", "clear", cache},
           {"cat", pack, "#0", "--cache", cache},
           {"warmup", pack, "--cache", cache, "-q"}}) {
    CommandResult r = RunCli(args);
    EXPECT_EQ(r.exit_code, 0) << args[0] << ": " << r.err;
    for (const std::string& d : planted) {
      EXPECT_EQ(test::ReadFile(d + "/notes.txt"), "precious") << args[0];
      EXPECT_EQ(test::ReadFile(d + "/sub/b.txt"), "precious too") << args[0];
    }
  }
}

// docs/cache.md: a cache never fails a read.  A read-only cache disk and a
// full one are reported once, and the records come from the source.
TEST(CacheDiskTest, ReadOnlyAndFullCacheDisksFallBackToTheSource) {
  TempDir tmp;
  const std::string bytes = test::RandomBytes(200000, 3);
  test::WriteFile(tmp / "src/a/x.jpg", bytes);
  const std::string pack = tmp / "p.ufspack";
  ASSERT_EQ(RunCli({"build", tmp / "src", "-o", pack, "-q"}).exit_code, 0);
  const std::string disk = tmp / "disk";
  std::string result = test::WithTmpfs(disk, "1m", [&]() -> std::string {
    // Read-only: a warmed cache on a file system remounted read-only.
    CommandResult w = RunCli({"warmup", pack, "--cache", disk + "/c", "-q"});
    if (w.exit_code != 0) return "warmup: " + w.err;
    if (::mount(nullptr, disk.c_str(), nullptr, MS_REMOUNT | MS_RDONLY,
                nullptr) != 0) {
      return std::string("SKIP: remount ro: ") + strerror(errno);
    }
    CommandResult r = RunCli({"cat", pack, "#0", "--cache", disk + "/c"});
    if (r.exit_code != 0 || r.out != bytes) return "read-only cat: " + r.err;
    if (!Contains(r.err, "ufspack: warning: cache " + disk + "/c not used")) {
      return "read-only: no warning: " + r.err;
    }
    // Full: a new cache on a file system with no room left.
    if (::mount(nullptr, disk.c_str(), nullptr, MS_REMOUNT, nullptr) != 0) {
      return std::string("remount rw: ") + strerror(errno);
    }
    const int f = ::open((disk + "/fill").c_str(), O_WRONLY | O_CREAT, 0644);
    const std::string block(4096, 'x');
    while (::write(f, block.data(), block.size()) > 0) {
    }
    ::close(f);
    r = RunCli({"cat", pack, "#0", "--cache", disk + "/new"});
    if (r.exit_code != 0 || r.out != bytes) return "full cat: " + r.err;
    if (!Contains(r.err, "ufspack: warning:")) return "full: no warning";
    // And the warmed cache, full: what is cached is served, the rest read.
    r = RunCli({"cat", pack, "#0", "--cache", disk + "/c"});
    if (r.exit_code != 0 || r.out != bytes) return "full cat 2: " + r.err;
    return "OK";
  });
  if (result.rfind("SKIP", 0) == 0) GTEST_SKIP() << result;
  EXPECT_EQ(result, "OK");
}

std::string Table(const std::string& cache) {
  return cache + "/ns/" + OnlyEntry(cache + "/ns");
}
std::string Source(const std::string& cache) {
  return cache + "/sources/" + OnlyEntry(cache + "/sources");
}
std::string Lock(const std::string& cache) {
  return cache + "/locks/" + OnlyEntry(cache + "/locks");
}

const Plant kPlants[] = {
    // Links to the outside, at every path.
    {"tmp_link", [](auto c, auto o) { Symlink(o, c + "/tmp"); }},
    {"ns_link", [](auto c, auto o) { Symlink(o, c + "/ns"); }},
    {"ns_link_to_a_real_cache",
     [](auto c, auto o) { Symlink(o + "/other-cache/ns", c + "/ns"); }},
    {"sources_link", [](auto c, auto o) { Symlink(o, c + "/sources"); }},
    {"locks_link", [](auto c, auto o) { Symlink(o, c + "/locks"); }},
    {"header_link",
     [](auto c, auto o) { Symlink(o + "/a.txt", c + "/ufspack-cache"); }},
    {"header_link_to_a_real_header",
     [](auto c, auto o) {
       Symlink(o + "/other-cache/ufspack-cache", c + "/ufspack-cache");
     }},
    {"table_link", [](auto c, auto o) { Symlink(o, Table(c)); }},
    {"log_link",
     [](auto c, auto o) { Symlink(o + "/a.txt", Table(c) + "/log"); }},
    {"slots_link",
     [](auto c, auto o) { Symlink(o + "/a.txt", Table(c) + "/slots"); }},
    {"key_link",
     [](auto c, auto o) { Symlink(o + "/a.txt", Table(c) + "/key"); }},
    {"index_copy_link",
     [](auto c, auto o) {
       Symlink(o + "/other-cache/ns/" + OnlyEntry(o + "/other-cache/ns") +
                   "/index.ufs",
               Table(c) + "/index.ufs");
     }},
    {"source_link", [](auto c, auto o) { Symlink(o + "/a.txt", Source(c)); }},
    {"lock_link", [](auto c, auto o) { Symlink(o + "/a.txt", Lock(c)); }},
    {"tmp_entry_link",
     [](auto c, auto o) { Symlink(o, c + "/tmp/new-1-2-3"); }},
    {"stray_ns_link",
     [](auto c, auto o) {
       Symlink(o, c + "/ns/0123456789abcdef0123456789abcdef");
     }},
    // FIFOs, at every file the cache opens.
    {"header_fifo", [](auto c, auto) { Fifo(c + "/ufspack-cache"); }},
    {"slots_fifo", [](auto c, auto) { Fifo(Table(c) + "/slots"); }},
    {"log_fifo", [](auto c, auto) { Fifo(Table(c) + "/log"); }},
    {"key_fifo", [](auto c, auto) { Fifo(Table(c) + "/key"); }},
    {"index_copy_fifo", [](auto c, auto) { Fifo(Table(c) + "/index.ufs"); }},
    {"source_fifo", [](auto c, auto) { Fifo(Source(c)); }},
    {"lock_fifo", [](auto c, auto) { Fifo(Lock(c)); }},
    // Other things where files or directories belong.
    {"header_directory",
     [](auto c, auto) {
       fs::remove(c + "/ufspack-cache");
       fs::create_directory(c + "/ufspack-cache");
     }},
    {"tmp_file",
     [](auto c, auto) {
       fs::remove_all(c + "/tmp");
       test::WriteFile(c + "/tmp", "x");
     }},
    {"log_hard_link",
     [](auto c, auto o) {
       fs::remove(Table(c) + "/log");
       fs::create_hard_link(o + "/a.txt", Table(c) + "/log");
     }},
    {"log_of_another_user",
     [](auto c, auto) {
       ASSERT_EQ(::chown((Table(c) + "/log").c_str(), 54321, 54321), 0);
     },
     /*needs_root=*/true},
    {"table_of_another_user",
     [](auto c, auto) {
       ASSERT_EQ(::chown(Table(c).c_str(), 54321, 54321), 0);
     },
     /*needs_root=*/true},
};

INSTANTIATE_TEST_SUITE_P(Plants, HostileCacheTest, ::testing::ValuesIn(kPlants),
                         [](const ::testing::TestParamInfo<Plant>& p) {
                           return std::string(p.param.name);
                         });

}  // namespace
}  // namespace ufspack
