// Copyright 2026 The ufspack Authors.
//
// BuildPack (and `ufspack build`) under faults injected into the packer's
// real system calls (tests/fault/fault_injection.h), and under a real full
// file system:
//
//   * EINTR and short transfers on every source read and pack write give a
//     byte-exact pack;
//   * a source that cannot be opened, that disappears after the scan, or
//     that grows, shrinks, is rewritten or is replaced while read fails the
//     build with an error naming it ("file changed as we read it"), or is
//     skipped with a warning under skip_unreadable; never a record with
//     zero padding or mixed bytes;
//   * EIO / ENOSPC on a write, pwrite, fsync or rename of the new pack fail
//     the build with an error naming the file, leave the previous pack
//     byte-for-byte intact, and leave no temporary files.
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fault_injection.h"
#include "testutil.h"
#include "ufspack/builder.h"
#include "ufspack/format.h"
#include "ufspack/reader.h"

namespace ufspack {
namespace {

using fault::Call;
using test::ReadFile;
using test::TempDir;
using test::WriteFile;

// Files larger than this are streamed by the writer (builder.cc's
// kStreamThreshold); the streaming reads in chunks of kChunk.
constexpr uint64_t kStreamThreshold = 64ull << 20;
constexpr uint64_t kChunk = 4ull << 20;

using test::Contains;

// Every record of the pack at `dir` by name, read through the Reader
// (checksums verified).  Empty error string on success.
std::string ReadPack(const std::string& dir,
                     std::map<std::string, std::string>* out) {
  std::unique_ptr<Reader> reader;
  Status s = Reader::Open(dir, ReaderOptions(), &reader);
  if (s.ok()) s = reader->CheckIndex();
  if (!s.ok()) return s.ToString();
  out->clear();
  for (uint64_t i = 0; i < reader->size(); ++i) {
    Record r;
    s = reader->GetRecord(i, &r);
    std::string bytes;
    if (s.ok()) s = reader->Read(i, &bytes);
    if (!s.ok()) return s.ToString();
    (*out)[std::string(r.name)] = std::move(bytes);
  }
  return "";
}

// Checks that the pack at `out` holds exactly the files of `src` (by
// relative path in a flat pack), byte for byte.
void ExpectPackEqualsTree(const std::string& out, const std::string& src) {
  fault::Clear();
  std::map<std::string, std::string> recs;
  ASSERT_EQ(ReadPack(out, &recs), "");
  const std::map<std::string, std::string> want = test::ReadTree(src);
  ASSERT_EQ(recs.size(), want.size());
  for (const auto& [name, bytes] : want) {
    auto it = recs.find(name);
    ASSERT_TRUE(it != recs.end()) << name;
    EXPECT_TRUE(it->second == bytes)
        << name << ": " << it->second.size() << " bytes packed, "
        << bytes.size() << " on disk";
  }
  EXPECT_TRUE(test::PackTempFiles(out).empty());
}

BuildOptions Flat(int threads = 4) {
  BuildOptions o;
  o.threads = threads;
  o.scan.flat = true;
  o.scan.all_files = true;
  return o;
}

// The previous pack in `out`, as built from a tiny tree.
struct PreviousPack {
  std::string data;
  std::string index;
};

void BuildPrevious(const TempDir& t, PreviousPack* prev) {
  WriteFile(t / "old/first.bin", "first");
  WriteFile(t / "old/second.bin", test::RandomBytes(5000, 1));
  BuildSummary summary;
  Status s = BuildPack(t / "old", t / "out", Flat(), &summary);
  ASSERT_TRUE(s.ok()) << s.ToString();
  prev->data = ReadFile(t / "out/data.ufs");
  prev->index = ReadFile(t / "out/index.ufs");
}

// The previous pack is still there, byte for byte, opens and reads; no
// temporary files are left.
void ExpectPreviousIntact(const TempDir& t, const PreviousPack& prev) {
  fault::Clear();
  EXPECT_TRUE(ReadFile(t / "out/data.ufs") == prev.data);
  EXPECT_TRUE(ReadFile(t / "out/index.ufs") == prev.index);
  std::map<std::string, std::string> recs;
  ASSERT_EQ(ReadPack(t / "out", &recs), "");
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs["first.bin"], "first");
  EXPECT_TRUE(test::PackTempFiles(t / "out").empty());
}

// A tree of `n` files of assorted sizes (0 .. ~300 KB) under `root`.
void MakeTree(const std::string& root, int n = 24) {
  const size_t sizes[] = {0, 1, 4095, 4096, 4097, 65536, 100000, 300001};
  for (int i = 0; i < n; ++i) {
    const size_t size = sizes[i % 8] + static_cast<size_t>(i);
    WriteFile(
        root + "/d" + std::to_string(i % 3) + "/f" + std::to_string(i) + ".bin",
        test::RandomBytes(size, static_cast<uint64_t>(i) + 100));
  }
}

// MakeTree plus six 1.5 MiB files: over 9 MiB, so the 4 MiB write buffer
// is flushed several times during the build, not only by Finish().
void MakeBigTree(const std::string& root) {
  MakeTree(root);
  for (int i = 0; i < 6; ++i) {
    WriteFile(root + "/big/b" + std::to_string(i) + ".bin",
              test::RandomBytes(3 << 19, static_cast<uint64_t>(i) + 900));
  }
}

// A sparse file of `size` bytes with marked bytes at chunk boundaries, so a
// misplaced or lost chunk changes the contents.
void MakeBigFile(const std::string& path, uint64_t size) {
  test::MakeDirs(path.substr(0, path.find_last_of('/')));
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(ftruncate(fd, static_cast<off_t>(size)), 0);
  for (uint64_t off = 0; off + 16 <= size; off += kChunk - 7) {
    const std::string mark = "mark@" + std::to_string(off);
    ASSERT_EQ(pwrite(fd, mark.data(), mark.size(), static_cast<off_t>(off)),
              static_cast<ssize_t>(mark.size()));
  }
  close(fd);
}

// Makes the next change to `path` visible in its timestamps even on file
// systems with coarse (jiffy) timestamps: its mtime goes back a day, and
// the clock moves past the ctime that sets.
void AgeFile(const std::string& path) {
  struct timespec ts[2];
  ts[0].tv_sec = ts[1].tv_sec = time(nullptr) - 86400;
  ts[0].tv_nsec = ts[1].tv_nsec = 0;
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), ts, 0), 0) << path;
  std::this_thread::sleep_for(std::chrono::milliseconds(25));
}

// --- EINTR and short transfers
// --------------------------------------------------

TEST(BuilderFaultTest, SourceReadEintrAndShortReadsGiveAnExactPack) {
  TempDir t;
  MakeTree(t / "src");
  {
    fault::ScopedFaults faults;
    const int eintr =
        fault::Inject(fault::Fail(Call::kRead, "/src/", EINTR).Times(60));
    const int bytewise =
        fault::Inject(fault::Short(Call::kRead, "/src/d1/f4.bin", 1));
    const int shorts =
        fault::Inject(fault::ShortRandom(Call::kRead, "/src/", 7));
    BuildSummary summary;
    Status s = BuildPack(t / "src", t / "out", Flat(), &summary);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(fault::Fired(eintr), 60);
    // f4.bin (4097 + 4 bytes) came one byte per read, plus the EOF read.
    EXPECT_GE(fault::Fired(bytewise), 4101);
    EXPECT_GT(fault::Fired(shorts), 24);
  }
  ExpectPackEqualsTree(t / "out", t / "src");
}

TEST(BuilderFaultTest, StreamedSourceWithEintrAndShortReadsIsExact) {
  TempDir t;
  ASSERT_NO_FATAL_FAILURE(
      MakeBigFile(t / "src/big.bin", kStreamThreshold + 12345));
  WriteFile(t / "src/small.bin", "small");
  {
    fault::ScopedFaults faults;
    const int eintr = fault::Inject(
        fault::Fail(Call::kRead, "/src/big.bin", EINTR).After(2).Times(5));
    const int shorts =
        fault::Inject(fault::ShortRandom(Call::kRead, "/src/big.bin", 3));
    BuildSummary summary;
    Status s = BuildPack(t / "src", t / "out", Flat(), &summary);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(fault::Fired(eintr), 5);
    EXPECT_GT(fault::Fired(shorts), 17);  // more calls than 4 MiB chunks
  }
  ExpectPackEqualsTree(t / "out", t / "src");
}

TEST(BuilderFaultTest, PackWriteEintrAndShortWritesGiveAnExactPack) {
  TempDir t;
  MakeBigTree(t / "src");
  {
    fault::ScopedFaults faults;
    const int eintr = fault::Inject(
        fault::Fail(Call::kWrite, "/out/.data.ufs.tmp-", EINTR).Times(3));
    const int index_eintr = fault::Inject(
        fault::Fail(Call::kWrite, "/out/.index.ufs.tmp-", EINTR).Times(2));
    const int pwrite_eintr = fault::Inject(
        fault::Fail(Call::kPwrite, "/out/.data.ufs.tmp-", EINTR).Times(1));
    fault::Inject(fault::ShortRandom(Call::kWrite, "/out/.data.ufs.tmp-", 5));
    fault::Inject(fault::Short(Call::kWrite, "/out/.index.ufs.tmp-", 7));
    fault::Inject(fault::Short(Call::kPwrite, "/out/.data.ufs.tmp-", 3));
    BuildSummary summary;
    Status s = BuildPack(t / "src", t / "out", Flat(), &summary);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(fault::Fired(eintr), 3);
    EXPECT_EQ(fault::Fired(index_eintr), 2);
    EXPECT_EQ(fault::Fired(pwrite_eintr), 1);
  }
  ExpectPackEqualsTree(t / "out", t / "src");
}

// --- Sources that cannot be opened
// ------------------------------------------------

TEST(BuilderFaultTest, SourceOpenEaccesFailsNamingItAndKeepsThePreviousPack) {
  TempDir t;
  PreviousPack prev;
  ASSERT_NO_FATAL_FAILURE(BuildPrevious(t, &prev));
  MakeTree(t / "src");
  fault::ScopedFaults faults;
  fault::Inject(fault::Fail(Call::kOpen, "/src/d2/f5.bin", EACCES));
  BuildSummary summary;
  Status s = BuildPack(t / "src", t / "out", Flat(), &summary);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_EQ(s.errno_value(), EACCES);
  EXPECT_TRUE(
      Contains(s, t / "src/d2/f5.bin: cannot open: " + std::strerror(EACCES)))
      << s.ToString();
  ExpectPreviousIntact(t, prev);
}

TEST(BuilderFaultTest, SourceOpenEaccesIsSkippedWithSkipUnreadable) {
  TempDir t;
  MakeTree(t / "src");
  {
    fault::ScopedFaults faults;
    fault::Inject(fault::Fail(Call::kOpen, "/src/d2/f5.bin", EACCES));
    BuildOptions o = Flat();
    o.skip_unreadable = true;
    BuildSummary summary;
    Status s = BuildPack(t / "src", t / "out", o, &summary);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(summary.skipped, 1u);
    EXPECT_EQ(summary.files, 23u);
    ASSERT_EQ(summary.warnings.size(), 1u);
    EXPECT_TRUE(Contains(summary.warnings[0], t / "src/d2/f5.bin"))
        << summary.warnings[0];
    EXPECT_TRUE(Contains(summary.warnings[0], std::strerror(EACCES)))
        << summary.warnings[0];
  }
  // The pack is the tree without the skipped file.
  test::RemoveAll(t / "src/d2/f5.bin");
  ExpectPackEqualsTree(t / "out", t / "src");
}

// Runs `body` in a forked child and returns what it reported: "" when all
// its checks passed, "SKIP: why" to skip, else the failures.  The child
// reports through a pipe and exits with _exit (no gtest state is shared).
std::string RunInChild(const std::function<std::string()>& body) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return "pipe failed";
  pid_t pid = fork();
  if (pid < 0) return "fork failed";
  if (pid == 0) {
    close(fds[0]);
    std::string report = body();
    size_t done = 0;
    while (done < report.size()) {
      ssize_t w = ::write(fds[1], report.data() + done, report.size() - done);
      if (w <= 0) break;
      done += static_cast<size_t>(w);
    }
    _exit(0);
  }
  close(fds[1]);
  std::string report;
  char buf[4096];
  for (;;) {
    ssize_t r = ::read(fds[0], buf, sizeof(buf));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    report.append(buf, static_cast<size_t>(r));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    report += "\nchild died (status " + std::to_string(status) + ")";
  }
  return report;
}

// Child-side checks: append a line to `report` when `cond` is false.
#define CHILD_CHECK(report, cond, what)                               \
  do {                                                                \
    if (!(cond))                                                      \
      (report) += std::string("failed: " #cond ": ") + (what) + "\n"; \
  } while (0)

void ReportChild(const std::string& report) {
  if (report.rfind("SKIP: ", 0) == 0) {
    GTEST_SKIP() << report.substr(6);
  }
  EXPECT_EQ(report, "");
}

// A real permission failure: chmod 000 only stops a process without
// CAP_DAC_OVERRIDE, so when running as root the build runs in a child that
// has dropped to nobody (uid/gid 65534).
TEST(BuilderFaultTest, RealUnreadableFileFailsOrIsSkipped) {
  TempDir t;
  MakeTree(t / "src", 6);
  ASSERT_EQ(chmod(t.path().c_str(), 0755), 0);
  ASSERT_EQ(chmod((t / "src/d1/f4.bin").c_str(), 0), 0);
  WriteFile(t / "old/first.bin", "first");
  test::MakeDirs(t / "out");
  ASSERT_EQ(chmod((t / "out").c_str(), 0777), 0);
  const std::string report = RunInChild([&]() -> std::string {
    std::string r;
    if (geteuid() == 0) {
      if (setgroups(0, nullptr) != 0 || setgid(65534) != 0 ||
          setuid(65534) != 0) {
        return std::string("SKIP: cannot drop root privileges: ") +
               std::strerror(errno);
      }
    }
    if (access((t / "src/d1/f4.bin").c_str(), R_OK) == 0) {
      return "SKIP: this process can read a mode-000 file";
    }
    // The previous pack, built by this user.
    BuildSummary summary;
    Status s = BuildPack(t / "old", t / "out", Flat(), &summary);
    if (!s.ok()) return "first build: " + s.ToString();
    const std::string data = ReadFile(t / "out/data.ufs");
    const std::string index = ReadFile(t / "out/index.ufs");

    s = BuildPack(t / "src", t / "out", Flat(), &summary);
    CHILD_CHECK(r, s.IsIOError(), s.ToString());
    CHILD_CHECK(r, s.errno_value() == EACCES, s.ToString());
    CHILD_CHECK(
        r,
        Contains(s, t / "src/d1/f4.bin: cannot open: " + std::strerror(EACCES)),
        s.ToString());
    CHILD_CHECK(r, ReadFile(t / "out/data.ufs") == data, "data.ufs changed");
    CHILD_CHECK(r, ReadFile(t / "out/index.ufs") == index, "index.ufs changed");
    CHILD_CHECK(r, test::PackTempFiles(t / "out").empty(),
                "temporary files left");

    // The CLI: exit status 1, the file and the reason on stderr.
    test::CommandResult cli = test::RunCli(
        {"build", "--flat", "--all-files", "-q", t / "src", "-o", t / "out"});
    CHILD_CHECK(r, cli.exit_code == 1, cli.err);
    CHILD_CHECK(r, Contains(cli.err, t / "src/d1/f4.bin"), cli.err);
    CHILD_CHECK(r, Contains(cli.err, std::strerror(EACCES)), cli.err);
    CHILD_CHECK(r, ReadFile(t / "out/data.ufs") == data, "data.ufs changed");
    CHILD_CHECK(r, test::PackTempFiles(t / "out").empty(),
                "temporary files left");

    BuildOptions o = Flat();
    o.skip_unreadable = true;
    s = BuildPack(t / "src", t / "out", o, &summary);
    CHILD_CHECK(r, s.ok(), s.ToString());
    CHILD_CHECK(r, summary.skipped == 1, std::to_string(summary.skipped));
    CHILD_CHECK(r, summary.files == 5, std::to_string(summary.files));
    CHILD_CHECK(r,
                summary.warnings.size() == 1 &&
                    Contains(summary.warnings[0], t / "src/d1/f4.bin"),
                summary.warnings.empty() ? "" : summary.warnings[0]);
    std::map<std::string, std::string> recs;
    CHILD_CHECK(r, ReadPack(t / "out", &recs) == "", "pack does not read");
    CHILD_CHECK(r, recs.size() == 5 && recs.count("d1/f4.bin") == 0,
                std::to_string(recs.size()) + " records");
    CHILD_CHECK(r, recs["d0/f0.bin"] == ReadFile(t / "src/d0/f0.bin"),
                "d0/f0.bin differs");

    cli = test::RunCli({"build", "--flat", "--all-files", "-q",
                        "--skip-unreadable", t / "src", "-o", t / "out"});
    CHILD_CHECK(r, cli.exit_code == 0, cli.err);
    CHILD_CHECK(
        r,
        Contains(cli.err, "warning") && Contains(cli.err, t / "src/d1/f4.bin"),
        cli.err);
    return r;
  });
  ASSERT_EQ(chmod((t / "src/d1/f4.bin").c_str(), 0644), 0);
  ReportChild(report);
}

// --- Sources that disappear or change
// ---------------------------------------------

TEST(BuilderFaultTest, FileDeletedAfterListingFailsNamingIt) {
  TempDir t;
  PreviousPack prev;
  ASSERT_NO_FATAL_FAILURE(BuildPrevious(t, &prev));
  MakeTree(t / "src");
  const std::string victim = t / "src/d0/f3.bin";
  fault::ScopedFaults faults;
  // The scan listed it; it goes just before the builder opens it.
  const int id = fault::Inject(fault::Do(Call::kOpen, "/src/d0/f3.bin", [&] {
                                 ASSERT_EQ(unlink(victim.c_str()), 0);
                               }).Times(1));
  BuildSummary summary;
  Status s = BuildPack(t / "src", t / "out", Flat(), &summary);
  EXPECT_EQ(fault::Fired(id), 1);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_TRUE(Contains(s, victim + ": cannot open: " + std::strerror(ENOENT)))
      << s.ToString();
  ExpectPreviousIntact(t, prev);
}

TEST(BuilderFaultTest, FileDeletedAfterListingIsSkippedWithSkipUnreadable) {
  TempDir t;
  MakeTree(t / "src");
  const std::string victim = t / "src/d0/f3.bin";
  {
    fault::ScopedFaults faults;
    fault::Inject(fault::Do(Call::kOpen, "/src/d0/f3.bin", [&] {
                    ASSERT_EQ(unlink(victim.c_str()), 0);
                  }).Times(1));
    BuildOptions o = Flat();
    o.skip_unreadable = true;
    BuildSummary summary;
    Status s = BuildPack(t / "src", t / "out", o, &summary);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(summary.skipped, 1u);
    ASSERT_EQ(summary.warnings.size(), 1u);
    EXPECT_TRUE(Contains(summary.warnings[0], victim)) << summary.warnings[0];
  }
  ExpectPackEqualsTree(t / "out", t / "src");  // the tree without it
}

// A change made to a source file while the builder reads it.
struct Mutation {
  const char* name;
  std::function<void(const std::string& path, uint64_t size)> apply;
};

std::vector<Mutation> Mutations() {
  return {
      {"grows",
       [](const std::string& p, uint64_t) {
         int fd = open(p.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
         ASSERT_GE(fd, 0);
         ASSERT_EQ(write(fd, "more", 4), 4);
         close(fd);
       }},
      {"shrinks",
       [](const std::string& p, uint64_t size) {
         ASSERT_EQ(truncate(p.c_str(), static_cast<off_t>(size / 2)), 0);
       }},
      {"is rewritten in place",
       [](const std::string& p, uint64_t size) {
         // Same size, other bytes (everything but the length changes).
         int fd = open(p.c_str(), O_WRONLY | O_CLOEXEC);
         ASSERT_GE(fd, 0);
         const std::string junk = test::RandomBytes(4096, 777);
         for (uint64_t off = 0; off < size; off += junk.size()) {
           const size_t n =
               static_cast<size_t>(std::min<uint64_t>(junk.size(), size - off));
           ASSERT_EQ(pwrite(fd, junk.data(), n, static_cast<off_t>(off)),
                     static_cast<ssize_t>(n));
         }
         close(fd);
       }},
      {"is replaced by rename",
       [](const std::string& p, uint64_t size) {
         const std::string tmp = p + ".new";
         int fd =
             open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
         ASSERT_GE(fd, 0);
         ASSERT_EQ(ftruncate(fd, static_cast<off_t>(size)), 0);
         ASSERT_EQ(pwrite(fd, "new", 3, 0), 3);
         close(fd);
         ASSERT_EQ(rename(tmp.c_str(), p.c_str()), 0);
       }},
      {"is deleted",
       [](const std::string& p, uint64_t) { ASSERT_EQ(unlink(p.c_str()), 0); }},
  };
}

// Builds `t`/src, whose file `victim` (of `size` bytes) undergoes `m` just
// before the builder's read number `read_no` of it, and checks the outcome:
// without skip_unreadable, the build fails with "changed as we read it"
// naming the file and the previous pack stays; with it, the file is skipped
// with that warning and every other record is exact, with nothing of the
// changed file in data.ufs (no padding, no partial record).
void CheckChangedWhileRead(const TempDir& t, const std::string& victim,
                           uint64_t size, const Mutation& m, int read_no,
                           bool skip) {
  SCOPED_TRACE(std::string("file ") + m.name + " before read " +
               std::to_string(read_no) + (skip ? ", skip_unreadable" : ""));
  PreviousPack prev;
  ASSERT_NO_FATAL_FAILURE(BuildPrevious(t, &prev));
  ASSERT_NO_FATAL_FAILURE(AgeFile(victim));
  const std::string suffix = victim.substr(t.path().size());
  fault::ScopedFaults faults;
  const int id = fault::Inject(
      fault::Do(Call::kRead, suffix, [&] { m.apply(victim, size); })
          .After(read_no)
          .Times(1));
  BuildOptions o = Flat();
  o.skip_unreadable = skip;
  BuildSummary summary;
  Status s = BuildPack(t / "src", t / "out", o, &summary);
  ASSERT_EQ(fault::Fired(id), 1);
  fault::Clear();
  if (!skip) {
    EXPECT_TRUE(s.IsIOError()) << s.ToString();
    EXPECT_TRUE(Contains(s, victim + ": file changed as we read it"))
        << s.ToString();
    ExpectPreviousIntact(t, prev);
    return;
  }
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(summary.skipped, 1u);
  ASSERT_EQ(summary.warnings.size(), 1u);
  EXPECT_TRUE(
      Contains(summary.warnings[0], victim + ": file changed as we read it"))
      << summary.warnings[0];
  std::map<std::string, std::string> recs;
  ASSERT_EQ(ReadPack(t / "out", &recs), "");
  const std::string victim_name = victim.substr((t / "src/").size());
  EXPECT_EQ(recs.count(victim_name), 0u);
  uint64_t total = 0;
  for (const auto& [name, bytes] : recs) {
    EXPECT_TRUE(bytes == ReadFile(t / "src/" + name)) << name;
    total += bytes.size();
  }
  EXPECT_EQ(test::FileSize(t / "out/data.ufs"),
            DataHeader::kEncodedLength + total);
  EXPECT_TRUE(test::PackTempFiles(t / "out").empty());
}

// Small files are read whole: read 0 returns every byte, read 1 sees the
// end.  A change before read 0 (after open and fstat) or between the two
// is caught.
TEST(BuilderFaultTest, SmallFileChangedWhileReadFails) {
  for (const Mutation& m : Mutations()) {
    for (int read_no : {0, 1}) {
      for (bool skip : {false, true}) {
        TempDir t;
        MakeTree(t / "src", 8);
        const uint64_t size = test::FileSize(t / "src/d0/f6.bin");
        ASSERT_GT(size, 4096u);
        ASSERT_NO_FATAL_FAILURE(CheckChangedWhileRead(t, t / "src/d0/f6.bin",
                                                      size, m, read_no, skip));
      }
    }
  }
}

// Files over the streaming threshold are copied in 4 MiB chunks by the
// writer: a change before the first chunk or after it is caught, and the
// chunks already written are cut back out of data.ufs.
TEST(BuilderFaultTest, StreamedFileChangedWhileReadFails) {
  for (const Mutation& m : Mutations()) {
    for (int read_no : {0, 1}) {
      for (bool skip : {false, true}) {
        TempDir t;
        MakeTree(t / "src", 8);
        const uint64_t size = kStreamThreshold + 5000;
        ASSERT_NO_FATAL_FAILURE(MakeBigFile(t / "src/d1/big.bin", size));
        ASSERT_NO_FATAL_FAILURE(CheckChangedWhileRead(t, t / "src/d1/big.bin",
                                                      size, m, read_no, skip));
      }
    }
  }
}

// --- Errors writing the pack
// -------------------------------------------------------

struct WriteFault {
  const char* what;
  Call call;
  const char* file;  // temporary file prefix in the output directory
  int err;
  int after;
};

TEST(BuilderFaultTest, WriteFsyncAndRenameErrorsKeepThePreviousPack) {
  const WriteFault faults[] = {
      {"data write EIO", Call::kWrite, ".data.ufs.tmp-", EIO, 0},
      {"data write ENOSPC", Call::kWrite, ".data.ufs.tmp-", ENOSPC, 0},
      {"data write ENOSPC mid-build", Call::kWrite, ".data.ufs.tmp-", ENOSPC,
       1},
      {"data header pwrite EIO", Call::kPwrite, ".data.ufs.tmp-", EIO, 0},
      {"data fsync EIO", Call::kFsync, ".data.ufs.tmp-", EIO, 0},
      {"index write ENOSPC", Call::kWrite, ".index.ufs.tmp-", ENOSPC, 0},
      {"index write EIO", Call::kWrite, ".index.ufs.tmp-", EIO, 1},
      {"index fsync EIO", Call::kFsync, ".index.ufs.tmp-", EIO, 0},
      {"data rename EIO", Call::kRename, ".data.ufs.tmp-", EIO, 0},
  };
  for (const WriteFault& f : faults) {
    SCOPED_TRACE(f.what);
    TempDir t;
    PreviousPack prev;
    ASSERT_NO_FATAL_FAILURE(BuildPrevious(t, &prev));
    MakeBigTree(t / "src");
    fault::ScopedFaults scoped;
    const int id =
        fault::Inject(fault::Fail(f.call, std::string("/out/") + f.file, f.err)
                          .After(f.after)
                          .Times(1));
    BuildSummary summary;
    Status s = BuildPack(t / "src", t / "out", Flat(), &summary);
    EXPECT_EQ(fault::Fired(id), 1);
    EXPECT_TRUE(s.IsIOError()) << s.ToString();
    EXPECT_EQ(s.errno_value(), f.err) << s.ToString();
    EXPECT_TRUE(Contains(s, t / "out/" + f.file)) << s.ToString();
    EXPECT_TRUE(Contains(s, std::strerror(f.err))) << s.ToString();
    ExpectPreviousIntact(t, prev);
  }
}

TEST(BuilderFaultTest, ShortWriteThenEnospcKeepsThePreviousPack) {
  // What a full disk looks like: part of a write lands, the next fails.
  TempDir t;
  PreviousPack prev;
  ASSERT_NO_FATAL_FAILURE(BuildPrevious(t, &prev));
  MakeBigTree(t / "src");
  fault::ScopedFaults faults;
  fault::Inject(fault::Short(Call::kWrite, "/out/.data.ufs.tmp-", 1000)
                    .After(1)
                    .Times(1));
  fault::Inject(fault::Fail(Call::kWrite, "/out/.data.ufs.tmp-", ENOSPC)
                    .After(2)
                    .Times(1));
  BuildSummary summary;
  Status s = BuildPack(t / "src", t / "out", Flat(), &summary);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_TRUE(Contains(s, t / "out/.data.ufs.tmp-")) << s.ToString();
  EXPECT_TRUE(Contains(s, std::strerror(ENOSPC))) << s.ToString();
  ExpectPreviousIntact(t, prev);
}

TEST(BuilderFaultTest, StreamedFileWriteErrorKeepsThePreviousPack) {
  TempDir t;
  PreviousPack prev;
  ASSERT_NO_FATAL_FAILURE(BuildPrevious(t, &prev));
  ASSERT_NO_FATAL_FAILURE(MakeBigFile(t / "src/big.bin", kStreamThreshold + 1));
  fault::ScopedFaults faults;
  fault::Inject(
      fault::Fail(Call::kWrite, "/out/.data.ufs.tmp-", EIO).After(3).Times(1));
  BuildOptions o = Flat();
  o.skip_unreadable = true;  // a write error is never skipped
  BuildSummary summary;
  Status s = BuildPack(t / "src", t / "out", o, &summary);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_TRUE(Contains(s, t / "out/.data.ufs.tmp-")) << s.ToString();
  ExpectPreviousIntact(t, prev);
}

// Once both files are renamed into place the new pack is published; an
// error syncing the directory afterwards is still reported (the renames may
// not survive a power cut), but the pack in place is the new, complete one.
TEST(BuilderFaultTest, DirectoryFsyncErrorAfterPublishingIsReported) {
  TempDir t;
  PreviousPack prev;
  ASSERT_NO_FATAL_FAILURE(BuildPrevious(t, &prev));
  MakeTree(t / "src");
  {
    fault::ScopedFaults faults;
    fault::Inject(fault::Fail(Call::kFsync, "", EIO).Suffix("/out"));
    BuildSummary summary;
    Status s = BuildPack(t / "src", t / "out", Flat(), &summary);
    EXPECT_TRUE(s.IsIOError()) << s.ToString();
    EXPECT_TRUE(Contains(s, t / "out: fsync: " + std::strerror(EIO)))
        << s.ToString();
  }
  ExpectPackEqualsTree(t / "out", t / "src");
}

// The index rename failing after the data rename succeeded: the previous
// data file, linked as .data.ufs.prev before the renames, is renamed back,
// so the previous pack is whole again; the error names the files and says
// so; no temporary files remain.
TEST(BuilderFaultTest, IndexRenameErrorKeepsThePreviousPack) {
  TempDir t;
  PreviousPack prev;
  ASSERT_NO_FATAL_FAILURE(BuildPrevious(t, &prev));
  MakeTree(t / "src");
  fault::ScopedFaults faults;
  fault::Inject(fault::Fail(Call::kRename, "/out/.index.ufs.tmp-", EIO));
  BuildSummary summary;
  Status s = BuildPack(t / "src", t / "out", Flat(), &summary);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_TRUE(Contains(s, t / "out/index.ufs")) << s.ToString();
  EXPECT_TRUE(Contains(s, "the previous pack is kept")) << s.ToString();
  ExpectPreviousIntact(t, prev);
}

// The same, and renaming the previous data file back fails too (the state a
// kill between the two renames leaves): new data.ufs, previous index.ufs,
// previous data as .data.ufs.prev.  Reader::Open falls back to it, so the
// previous pack still opens and reads; the next build puts it back in place
// before doing anything else.
TEST(BuilderFaultTest, InterruptedPublishIsReadAndRestored) {
  TempDir t;
  PreviousPack prev;
  ASSERT_NO_FATAL_FAILURE(BuildPrevious(t, &prev));
  MakeTree(t / "src");
  {
    fault::ScopedFaults faults;
    fault::Inject(fault::Fail(Call::kRename, "/out/.index.ufs.tmp-", EIO));
    fault::Inject(fault::Fail(Call::kRename, "/out/.data.ufs.prev", EIO));
    BuildSummary summary;
    Status s = BuildPack(t / "src", t / "out", Flat(), &summary);
    EXPECT_TRUE(s.IsIOError()) << s.ToString();
    EXPECT_TRUE(Contains(s, "the previous pack is lost")) << s.ToString();
  }
  fault::Clear();
  EXPECT_TRUE(ReadFile(t / "out/index.ufs") == prev.index);
  EXPECT_FALSE(ReadFile(t / "out/data.ufs") == prev.data);
  EXPECT_TRUE(ReadFile(t / "out/" + kPrevDataFileName) == prev.data);
  std::map<std::string, std::string> recs;
  ASSERT_EQ(ReadPack(t / "out", &recs), "");
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs["first.bin"], "first");
  std::unique_ptr<Reader> reader;
  ASSERT_TRUE(Reader::Open(t / "out", ReaderOptions(), &reader).ok());
  EXPECT_EQ(reader->info().data_path, t / "out/" + kPrevDataFileName);
  // The next build's writer restores the pair (and is then abandoned).
  {
    std::unique_ptr<PackWriter> w;
    ASSERT_TRUE(PackWriter::Create(t / "out", PackWriterOptions(), &w).ok());
    w->Abandon();
  }
  ExpectPreviousIntact(t, prev);
  EXPECT_FALSE(test::Exists(t / "out/" + kPrevDataFileName));
}

// --- A real full file system
// ---------------------------------------------------------

// In a child with its own mount namespace, mounts a 1 MiB tmpfs on
// `t`/tiny, builds a small pack there, then a 3 MiB tree: the build must
// fail with ENOSPC naming the data file, leave the small pack intact and no
// temporary files; the CLI likewise.  Skipped where mounting is not
// permitted (no CAP_SYS_ADMIN, e.g. an unprivileged container).
TEST(BuilderFaultTest, RealEnospcOnASmallTmpfs) {
  TempDir t;
  WriteFile(t / "old/first.bin", "first");
  WriteFile(t / "old/second.bin", test::RandomBytes(5000, 1));
  for (int i = 0; i < 12; ++i) {
    WriteFile(t / "src/f" + std::to_string(i) + ".bin",
              test::RandomBytes(256 << 10, static_cast<uint64_t>(i)));
  }
  test::MakeDirs(t / "tiny");
  const std::string report = RunInChild([&]() -> std::string {
    if (unshare(CLONE_NEWNS) != 0) {
      return std::string("SKIP: unshare(CLONE_NEWNS): ") +
             std::strerror(errno) + " (needs CAP_SYS_ADMIN)";
    }
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      return std::string("SKIP: making mounts private: ") +
             std::strerror(errno);
    }
    const std::string tiny = t / "tiny";
    if (mount("tmpfs", tiny.c_str(), "tmpfs", 0, "size=1m,mode=0755") != 0) {
      return std::string("SKIP: mount tmpfs: ") + std::strerror(errno);
    }
    std::string r;
    const std::string out = tiny + "/out";
    BuildSummary summary;
    Status s = BuildPack(t / "old", out, Flat(), &summary);
    if (!s.ok()) return "first build: " + s.ToString();
    const std::string data = ReadFile(out + "/data.ufs");
    const std::string index = ReadFile(out + "/index.ufs");

    auto intact = [&](const std::string& when) {
      CHILD_CHECK(r, ReadFile(out + "/data.ufs") == data,
                  when + ": data.ufs changed");
      CHILD_CHECK(r, ReadFile(out + "/index.ufs") == index,
                  when + ": index.ufs changed");
      std::map<std::string, std::string> recs;
      const std::string err = ReadPack(out, &recs);
      CHILD_CHECK(
          r, err.empty() && recs.size() == 2 && recs["first.bin"] == "first",
          when + ": " + err);
      CHILD_CHECK(r, test::PackTempFiles(out).empty(),
                  when + ": temporary files left");
    };

    s = BuildPack(t / "src", out, Flat(), &summary);
    CHILD_CHECK(r, s.IsIOError(), s.ToString());
    CHILD_CHECK(r, s.errno_value() == ENOSPC, s.ToString());
    CHILD_CHECK(r, Contains(s, out + "/.data.ufs.tmp-"), s.ToString());
    CHILD_CHECK(r, Contains(s, std::strerror(ENOSPC)), s.ToString());
    intact("BuildPack");

    test::CommandResult cli = test::RunCli(
        {"build", "--flat", "--all-files", "-q", t / "src", "-o", out});
    CHILD_CHECK(r, cli.exit_code == 1, cli.err);
    CHILD_CHECK(r, Contains(cli.err, out + "/.data.ufs.tmp-"), cli.err);
    CHILD_CHECK(r, Contains(cli.err, std::strerror(ENOSPC)), cli.err);
    intact("ufspack build");

    // A fresh directory on the full file system: nothing that opens.
    s = BuildPack(t / "src", tiny + "/fresh", Flat(), &summary);
    CHILD_CHECK(r, s.errno_value() == ENOSPC, s.ToString());
    std::unique_ptr<Reader> reader;
    Status open = Reader::Open(tiny + "/fresh", ReaderOptions(), &reader);
    CHILD_CHECK(r, open.IsNotFound(), open.ToString());
    CHILD_CHECK(r, test::PackTempFiles(tiny + "/fresh").empty(),
                "temporary files left in fresh");
    umount(tiny.c_str());
    return r;
  });
  ReportChild(report);
}

}  // namespace
}  // namespace ufspack
