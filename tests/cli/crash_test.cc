// Copyright 2026 The ufspack Authors.
//
// Crash safety of `ufspack build` (docs/format.md, "Publishing a pack";
// docs/cli.md, "Safety").  The CLI is killed with SIGKILL at 31 points per
// scenario (18 under TSan; see kTimeKillPoints) -- by time, by bytes written to
// the data temporary, at the file transitions near the end (polled), and
// exactly at each system call that publishes the pack (the build's main thread
// traced with ptrace, which alone can land a kill between the two renames) --
// into an empty directory and into one holding a previous pack.  After each
// kill the directory must hold the previous complete pack, the new complete
// pack, or nothing that opens (a clean NotFound or Corruption) -- never a pack
// that opens and reads wrong -- and exactly the state format.md documents for
// the phase the build reached; `ufspack verify` must agree; the next build into
// the directory must succeed and leave no temporary files.  Two builds into the
// same directory at once: one is refused with a clear error, never a mixed
// pack.
//
// The kill points are drawn from a seeded PRNG; the seed is printed and may
// be set with UFSPACK_CRASH_SEED to replay a run (where a timed kill lands
// still varies with the machine's load; each scenario prints a table of the
// phases reached and the outcomes).
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "testutil.h"
#include "ufspack/format.h"
#include "ufspack/reader.h"

extern char** environ;

namespace ufspack {
namespace {

using Clock = std::chrono::steady_clock;
using test::CommandResult;
using test::RunCli;
using test::TempDir;

constexpr char kDataTmpPrefix[] = ".data.ufs.tmp-";
constexpr char kIndexTmpPrefix[] = ".index.ufs.tmp-";
constexpr uint64_t kDefaultSeed = 0x5eed2026;

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

using test::Contains;

uint64_t Seed() {
  const char* env = std::getenv("UFSPACK_CRASH_SEED");
  if (env != nullptr && *env != '\0') return std::strtoull(env, nullptr, 0);
  return kDefaultSeed;
}

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return "[" + s + "]";
}

// Inode of `path`, 0 when absent.
ino_t InodeOf(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

// Size of `path`, or -1 when absent.
int64_t SizeOf(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
}

using test::SpawnCli;

// Waits for `pid`; returns the raw wait status.
int Reap(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// --- Source trees and what a pack of them must hold ------------------------

// Where the source trees go: $UFSPACK_CRASH_SRC_DIR, else /dev/shm when it
// is a writable directory, else "" (the test's TempDir).  The sources are
// only read; keeping their ~300 MB in memory spares the disk their
// writeback, which otherwise makes deleting them take tens of seconds on a
// busy machine.  The output directories, where crash safety is at stake,
// stay under $TMPDIR.
std::string SourceBase() {
  const char* env = std::getenv("UFSPACK_CRASH_SRC_DIR");
  if (env != nullptr && *env != '\0') return env;
  struct stat st;
  if (::stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) &&
      ::access("/dev/shm", W_OK) == 0) {
    return "/dev/shm";
  }
  return "";
}

// A fresh directory under `base`, removed (recursively) on destruction.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& base) {
    std::string tmpl = base + "/ufspack-crash-src-XXXXXX";
    if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~ScratchDir() {
    if (!path_.empty()) test::RemoveAll(path_);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }  // "" if not created

 private:
  std::string path_;
};

// A record as the source tree defines it.  The bytes are kept as their
// length and a seeded XXH3-64 (a different function from the pack's own
// record checksum, which is unseeded), so the trees need not stay in memory.
struct ExpectedRecord {
  uint32_t label = 0;
  uint64_t size = 0;
  uint64_t hash = 0;
};

constexpr uint64_t kHashSeed = 0x7e57c0de;

uint64_t HashOf(const std::string& bytes) {
  return XXH3_64bits_withSeed(bytes.data(), bytes.size(), kHashSeed);
}

struct Tree {
  std::string root;
  std::string tag;                                // "A", "B", "C"
  std::map<std::string, ExpectedRecord> records;  // by name
  uint64_t bytes = 0;
};

// Writes an ImageFolder tree of `classes` classes with `per_class` files
// each (plus `extra` more in class 1), sizes uniform in [min, max] bytes,
// contents derived from `seed`.  Trees built with the same shape and a
// different seed have the same names and different bytes.
Tree MakeTree(const std::string& root, const std::string& tag, int classes,
              int per_class, int extra, size_t min_size, size_t max_size,
              uint64_t seed) {
  Tree t;
  t.root = root;
  t.tag = tag;
  std::mt19937_64 rng(seed);
  for (int c = 0; c < classes; ++c) {
    const int n = per_class + (c == 1 ? extra : 0);
    for (int i = 0; i < n; ++i) {
      char name[64];
      std::snprintf(name, sizeof(name), "class%d/img%05d.jpg", c, i);
      const size_t size =
          min_size + static_cast<size_t>(rng() % (max_size - min_size + 1));
      const std::string bytes = test::RandomBytes(size, rng());
      test::WriteFile(root + "/" + name, bytes);
      t.bytes += size;
      t.records[name] = {static_cast<uint32_t>(c), size, HashOf(bytes)};
    }
  }
  return t;
}

// What a directory held after a kill, as seen through the reader.
enum class Outcome { kNothing, kTreeA, kTreeB, kTreeC, kAppended, kWrong };

const char* OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kNothing:
      return "nothing opens";
    case Outcome::kTreeA:
      return "old (A)";
    case Outcome::kTreeB:
      return "new (B)";
    case Outcome::kTreeC:
      return "C";
    case Outcome::kAppended:
      return "appended (A + B's new files)";
    case Outcome::kWrong:
      return "WRONG";
  }
  return "?";
}

// Lets gtest print an Outcome by name.
void PrintTo(Outcome o, std::ostream* os) { *os << OutcomeName(o); }

// Opens `dir` with every check on and reads every record.  Returns which of
// `trees` it holds exactly (names, labels, bytes), kNothing when it does not
// open (the error must then be a clean NotFound or Corruption, whose code
// goes to `open_code`), or kWrong with `detail` saying why.
Outcome Inspect(const std::string& dir, const std::vector<const Tree*>& trees,
                std::string* detail, Status::Code* open_code = nullptr) {
  ReaderOptions options;
  options.verify_checksums = true;
  options.verify_index_checksum = true;
  std::unique_ptr<Reader> reader;
  Status s = Reader::Open(dir, options, &reader);
  if (open_code != nullptr) *open_code = s.code();
  if (!s.ok()) {
    *detail = s.ToString();
    if (s.code() == Status::Code::kNotFound ||
        s.code() == Status::Code::kCorruption) {
      return Outcome::kNothing;
    }
    *detail = "open failed with an unexpected status: " + s.ToString();
    return Outcome::kWrong;
  }
  s = reader->CheckIndex();
  if (!s.ok()) {
    *detail = "opened, but CheckIndex failed: " + s.ToString();
    return Outcome::kWrong;
  }
  std::vector<bool> match(trees.size(), true);
  for (size_t t = 0; t < trees.size(); ++t) {
    match[t] = reader->size() == trees[t]->records.size();
  }
  std::string bytes;
  for (uint64_t i = 0; i < reader->size(); ++i) {
    Record r;
    s = reader->GetRecord(i, &r);
    if (s.ok()) s = reader->Read(i, &bytes);
    if (!s.ok()) {
      *detail = "opened, but record " + std::to_string(i) +
                " does not read: " + s.ToString();
      return Outcome::kWrong;
    }
    const std::string name(r.name);
    for (size_t t = 0; t < trees.size(); ++t) {
      if (!match[t]) continue;
      auto it = trees[t]->records.find(name);
      match[t] = it != trees[t]->records.end() && it->second.label == r.label &&
                 it->second.size == bytes.size() &&
                 it->second.hash == HashOf(bytes);
    }
  }
  std::string which;
  Outcome outcome = Outcome::kWrong;
  int matches = 0;
  for (size_t t = 0; t < trees.size(); ++t) {
    if (!match[t]) continue;
    ++matches;
    which = trees[t]->tag;
  }
  if (matches != 1) {
    *detail = "opened with " + std::to_string(reader->size()) +
              " records that are not exactly one source tree (" +
              std::to_string(matches) + " matches)";
    return Outcome::kWrong;
  }
  *detail = "opened as tree " + which;
  if (which == "A") outcome = Outcome::kTreeA;
  if (which == "B") outcome = Outcome::kTreeB;
  if (which == "C") outcome = Outcome::kTreeC;
  if (which == "AB") outcome = Outcome::kAppended;
  return outcome;
}

// --- Kill points ------------------------------------------------------------

// Where the build was when it died, from the directory it left.
enum class Phase {
  kBeforeTemps,     // no temporary files yet (startup, lock)
  kDataEmpty,       // temporaries created, nothing flushed (scan, first reads)
  kDataFirstHalf,   // data temporary below half its final size
  kDataSecondHalf,  // at least half, not all
  kDataComplete,    // all records written, index temporary still empty
  kIndexWritten,    // index temporary written, nothing renamed
  kBetweenRenames,  // data.ufs renamed into place, index not yet
  kPublished,       // both renamed, killed before it exited
  kExited,          // finished before the kill
};
constexpr int kPhaseCount = 9;

const char* PhaseName(Phase p) {
  switch (p) {
    case Phase::kBeforeTemps:
      return "before temp files";
    case Phase::kDataEmpty:
      return "temps created, data not flushed";
    case Phase::kDataFirstHalf:
      return "writing data, < 50%";
    case Phase::kDataSecondHalf:
      return "writing data, >= 50%";
    case Phase::kDataComplete:
      return "data complete, index temp empty";
    case Phase::kIndexWritten:
      return "index temp written, not renamed";
    case Phase::kBetweenRenames:
      return "between the two renames";
    case Phase::kPublished:
      return "both renamed, before exit";
    case Phase::kExited:
      return "build finished before kill";
  }
  return "?";
}

// Before the first rename the previous pack (if any) must be untouched.
bool BeforeRenames(Phase p) {
  return p != Phase::kBetweenRenames && p != Phase::kPublished &&
         p != Phase::kExited;
}

enum class Trigger {
  kTime,              // `value` microseconds after the start
  kDataBytes,         // the data temporary reaches `value` bytes
  kIndexTempWritten,  // the index temporary is no longer empty
  kDataRenamed,       // the data temporary is gone (renamed to data.ufs)
  kIndexRenamed,      // the index temporary is gone (renamed to index.ufs)
  kSyscall,           // at a system call of the build's main thread (ptrace)
};

// The system calls that publish a pack (PackWriter::Finish, on the thread
// that calls BuildPack: the CLI's main thread), in order: pwrite (the real
// data header), fsync (data), write (index), fsync (index), close, close,
// rename (data), rename (index), fsync (directory).
enum class SysClass { kPwrite, kFsync, kRename, kOther };

SysClass ClassOf(uint64_t nr) {
  switch (nr) {
    case SYS_pwrite64:
      return SysClass::kPwrite;
    case SYS_fsync:
    case SYS_fdatasync:
      return SysClass::kFsync;
#ifdef SYS_rename
    case SYS_rename:
#endif
    case SYS_renameat:
#ifdef SYS_renameat2
    case SYS_renameat2:
#endif
      return SysClass::kRename;
    default:
      return SysClass::kOther;
  }
}

struct KillPoint {
  Trigger trigger;
  uint64_t value = 0;
  // kSyscall: at the entry or exit of the `nth` (from 1) call of `sys`.
  SysClass sys = SysClass::kOther;
  int nth = 0;
  bool at_exit = true;
  Phase expected = Phase::kExited;  // where the build must be then
  std::string Describe() const {
    switch (trigger) {
      case Trigger::kTime:
        return "after " + std::to_string(value / 1000) + " ms";
      case Trigger::kDataBytes:
        return "data temp >= " + std::to_string(value) + " bytes";
      case Trigger::kIndexTempWritten:
        return "index temp written";
      case Trigger::kDataRenamed:
        return "data temp renamed";
      case Trigger::kIndexRenamed:
        return "index temp renamed";
      case Trigger::kSyscall: {
        const char* names[] = {"pwrite", "fsync", "rename", "?"};
        return std::string(at_exit ? "after " : "before ") +
               names[static_cast<int>(sys)] + " #" + std::to_string(nth);
      }
    }
    return "?";
  }
};

struct KillResult {
  bool killed = false;  // false: the build exited by itself first
  int exit_code = -1;   // when not killed
  Phase phase = Phase::kExited;
  double seconds = 0;
  int64_t data_tmp_size = -1;
  bool unavailable = false;  // ptrace refused: the point was not run
};

// The random kill points per scenario (the 11 at fixed transitions and
// system calls always run).  Under TSan every kill point is a whole build
// of the instrumented CLI, 3-4x slower: it keeps 4 + 3 random points, enough
// to kill the builder's threads mid-build, which is what TSan can check; the
// plain and ASan runs draw all 12 + 8.
#if defined(__SANITIZE_THREAD__)
constexpr int kTimeKillPoints = 4, kByteKillPoints = 3;
#else
constexpr int kTimeKillPoints = 12, kByteKillPoints = 8;
#endif

class CrashTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const auto t0 = Clock::now();
    seed_ = Seed();
    dir_ = new TempDir();
    const std::string base = SourceBase();
    if (!base.empty()) src_dir_ = new ScratchDir(base);
    const std::string src = src_dir_ != nullptr && !src_dir_->path().empty()
                                ? src_dir_->path()
                                : dir_->path();
    // About 4,000 files of 8-64 KiB (about 150 MiB) per tree, so that a
    // build takes a noticeable time (about 0.5 s with the sources cached)
    // and its data file grows in a few dozen 4 MiB writes.  B has the same
    // names as A with other bytes, plus 100 more files and a fifth class.
    tree_a_ = new Tree(MakeTree(src + "/src-a", "A", 4, 900, 0, 8 << 10,
                                64 << 10, seed_ ^ 0xa));
    tree_b_ = new Tree(MakeTree(src + "/src-b", "B", 5, 900, 100, 8 << 10,
                                64 << 10, seed_ ^ 0xb));
    tree_c_ =
        new Tree(MakeTree(src + "/src-c", "C", 2, 3, 0, 10, 500, seed_ ^ 0xc));
    // Pristine packs of A and B; A's files are hard-linked into an output
    // directory to give it a "previous pack" (builds only ever rename over
    // pack files, never write into them, so the links stay intact, which
    // every Inspect() re-checks).
    pristine_a_ = *dir_ / "pristine-a";
    CommandResult r = RunCli({"build", tree_a_->root, "-o", pristine_a_, "-q"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // Time builds of B (the build being killed): the median of three.
    std::vector<double> seconds;
    for (int k = 0; k < 3; ++k) {
      std::string out = *dir_ / ("measure-" + std::to_string(k));
      const auto b0 = Clock::now();
      r = RunCli({"build", tree_b_->root, "-o", out, "-q"});
      seconds.push_back(SecondsSince(b0));
      ASSERT_EQ(r.exit_code, 0) << r.err;
      b_data_size_ = test::FileSize(out + "/" + kDataFileName);
      test::RemoveAll(out);
    }
    std::sort(seconds.begin(), seconds.end());
    build_seconds_ = seconds[1];
    std::cout << "[crash] seed " << seed_ << " (UFSPACK_CRASH_SEED), trees A "
              << tree_a_->records.size() << " files " << tree_a_->bytes
              << " bytes, B " << tree_b_->records.size() << " files "
              << tree_b_->bytes << " bytes; build of B "
              << static_cast<int>(build_seconds_ * 1000) << " ms, data.ufs "
              << b_data_size_ << " bytes; sources in " << src << ", outputs in "
              << dir_->path() << "; setup " << SecondsSince(t0) << " s"
              << std::endl;
  }

  static void TearDownTestSuite() {
    const auto t0 = Clock::now();
    delete tree_a_;
    delete tree_b_;
    delete tree_c_;
    delete src_dir_;
    delete dir_;
    src_dir_ = nullptr;
    tree_a_ = tree_b_ = tree_c_ = nullptr;
    dir_ = nullptr;
    std::cout << "[crash] teardown " << SecondsSince(t0) << " s" << std::endl;
  }

  void SetUp() override {
    ASSERT_NE(tree_b_, nullptr) << "suite setup failed";
    ASSERT_GT(b_data_size_, 0u);
  }

  // Empties `out` and, when `with_a`, puts pack A in it.
  static void ResetOutput(const std::string& out, bool with_a) {
    test::RemoveAll(out);
    test::MakeDirs(out);
    if (!with_a) return;
    for (const char* f : {kDataFileName, kIndexFileName}) {
      const std::string from = pristine_a_ + "/" + f;
      const std::string to = out + "/" + f;
      ASSERT_EQ(::link(from.c_str(), to.c_str()), 0)
          << from << ": " << std::strerror(errno);
    }
  }

  static std::string FindTemp(const std::string& dir, const char* prefix) {
    for (const auto& n : ListDir(dir)) {
      if (StartsWith(n, prefix)) return dir + "/" + n;
    }
    return "";
  }

  // Reads the phase a killed build reached from what it left in `out`.
  static Phase Classify(const std::string& out, ino_t index_before,
                        int64_t* data_tmp_size) {
    const std::string data_tmp = FindTemp(out, kDataTmpPrefix);
    const std::string index_tmp = FindTemp(out, kIndexTmpPrefix);
    *data_tmp_size = data_tmp.empty() ? -1 : SizeOf(data_tmp);
    if (data_tmp.empty() && index_tmp.empty()) {
      return InodeOf(out + "/" + kIndexFileName) != index_before
                 ? Phase::kPublished
                 : Phase::kBeforeTemps;
    }
    if (data_tmp.empty()) return Phase::kBetweenRenames;
    if (!index_tmp.empty() && SizeOf(index_tmp) > 0)
      return Phase::kIndexWritten;
    const uint64_t size =
        static_cast<uint64_t>(std::max<int64_t>(0, *data_tmp_size));
    if (size == 0) return Phase::kDataEmpty;
    if (size >= b_data_size_) return Phase::kDataComplete;
    return 2 * size < b_data_size_ ? Phase::kDataFirstHalf
                                   : Phase::kDataSecondHalf;
  }

  // Runs a build of B into `out` with its main thread traced and SIGKILLs
  // it stopped at the system call `point` names (so it dies exactly there,
  // e.g. between the two renames, which polling from outside cannot hit).
  // Returns the wait status; sets `*unavailable` when ptrace is refused.
  static int TracedBuildAndKill(const std::string& out, const KillPoint& point,
                                bool* exited, bool* unavailable) {
    std::vector<std::string> argv = {
        UFSPACK_CLI_PATH, "build", tree_b_->root, "-o", out, "-q"};
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) {
      ADD_FAILURE() << "fork: " << std::strerror(errno);
      return 0;
    }
    if (pid == 0) {
      // Only async-signal-safe calls between fork and exec.
      int null = ::open("/dev/null", O_RDWR);
      ::dup2(null, 0);
      ::dup2(null, 1);
      ::dup2(null, 2);
      if (::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr) != 0) ::_exit(99);
      ::execv(cargv[0], cargv.data());
      ::_exit(127);
    }
    *exited = false;
    *unavailable = false;
    int status = Reap(pid);  // the SIGTRAP stop after exec
    if (!WIFSTOPPED(status)) {
      *exited = true;
      *unavailable = WIFEXITED(status) && WEXITSTATUS(status) == 99;
      return status;
    }
    // Tracing stops at every system call of the main thread only (the
    // reading threads are not traced).
    if (::ptrace(PTRACE_SETOPTIONS, pid, nullptr,
                 PTRACE_O_TRACESYSGOOD | PTRACE_O_EXITKILL) != 0) {
      *unavailable = true;
    }
    int count[4] = {};
    SysClass current = SysClass::kOther;
    int forward = 0;
    while (!*unavailable) {
      if (::ptrace(PTRACE_SYSCALL, pid, nullptr, forward) != 0) break;
      forward = 0;
      status = Reap(pid);
      if (WIFEXITED(status) || WIFSIGNALED(status)) {
        *exited = true;
        return status;
      }
      if (!WIFSTOPPED(status)) continue;
      if (WSTOPSIG(status) != (SIGTRAP | 0x80)) {
        forward = WSTOPSIG(status);  // a real signal: deliver it
        continue;
      }
      struct __ptrace_syscall_info info;
      if (::ptrace(PTRACE_GET_SYSCALL_INFO, pid, sizeof(info), &info) <= 0) {
        ADD_FAILURE() << "PTRACE_GET_SYSCALL_INFO: " << std::strerror(errno);
        break;
      }
      bool fire = false;
      if (info.op == PTRACE_SYSCALL_INFO_ENTRY) {
        current = ClassOf(info.entry.nr);
        const int n = ++count[static_cast<int>(current)];
        fire = !point.at_exit && current == point.sys && n == point.nth;
      } else if (info.op == PTRACE_SYSCALL_INFO_EXIT) {
        fire = point.at_exit && current == point.sys &&
               count[static_cast<int>(current)] == point.nth;
      }
      if (fire) break;
    }
    ::kill(pid, SIGKILL);
    for (;;) {
      status = Reap(pid);
      if (WIFEXITED(status) || WIFSIGNALED(status)) return status;
    }
  }

  // Starts a build of B into `out` and SIGKILLs it at `point`.
  static KillResult BuildAndKill(const std::string& out,
                                 const KillPoint& point) {
    KillResult result;
    const ino_t index_before = InodeOf(out + "/" + kIndexFileName);
    const auto t0 = Clock::now();
    if (point.trigger == Trigger::kSyscall) {
      bool exited = false;
      const int status =
          TracedBuildAndKill(out, point, &exited, &result.unavailable);
      result.seconds = SecondsSince(t0);
      result.killed =
          !exited && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
      result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      result.phase = result.killed
                         ? Classify(out, index_before, &result.data_tmp_size)
                         : Phase::kExited;
      return result;
    }
    pid_t pid = SpawnCli({"build", tree_b_->root, "-o", out, "-q"});
    if (pid < 0) return result;
    bool exited = false;
    int status = 0;
    if (point.trigger == Trigger::kTime) {
      std::this_thread::sleep_until(t0 +
                                    std::chrono::microseconds(point.value));
    } else {
      std::string data_tmp, index_tmp;
      bool seen_data = false, seen_index = false;
      for (;;) {
        if (::waitpid(pid, &status, WNOHANG) == pid) {
          exited = true;
          break;
        }
        if (SecondsSince(t0) > 60) {
          ADD_FAILURE() << "build did not finish in 60 s";
          break;
        }
        if (data_tmp.empty()) data_tmp = FindTemp(out, kDataTmpPrefix);
        if (index_tmp.empty()) index_tmp = FindTemp(out, kIndexTmpPrefix);
        const int64_t dsize = data_tmp.empty() ? -1 : SizeOf(data_tmp);
        const int64_t isize = index_tmp.empty() ? -1 : SizeOf(index_tmp);
        seen_data = seen_data || dsize >= 0;
        seen_index = seen_index || isize >= 0;
        bool fire = false;
        switch (point.trigger) {
          case Trigger::kTime:
          case Trigger::kSyscall:
            break;
          case Trigger::kDataBytes:
            fire = dsize >= 0 && static_cast<uint64_t>(dsize) >= point.value;
            break;
          case Trigger::kIndexTempWritten:
            fire = isize > 0;
            break;
          case Trigger::kDataRenamed:
            fire = seen_data && dsize < 0;
            break;
          case Trigger::kIndexRenamed:
            fire = seen_index && isize < 0;
            break;
        }
        if (fire) break;
        if (point.trigger == Trigger::kDataBytes) {
          std::this_thread::sleep_for(std::chrono::microseconds(100));
        } else {
          ::sched_yield();
        }
      }
    }
    if (!exited) {
      // Not reaped yet, so the pid cannot have been reused: kill is safe
      // even when the build has just exited (it is then a zombie).
      ::kill(pid, SIGKILL);
      status = Reap(pid);
    }
    result.seconds = SecondsSince(t0);
    result.killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    result.phase = result.killed
                       ? Classify(out, index_before, &result.data_tmp_size)
                       : Phase::kExited;
    return result;
  }

  // The kill points for one scenario: by time across the build, by bytes
  // across the data file, and at the transitions near the end.
  static std::vector<KillPoint> MakePoints(std::mt19937_64* rng, int by_time,
                                           int by_bytes) {
    std::vector<KillPoint> points;
    const double span_us = build_seconds_ * 1.1e6;
    for (int i = 0; i < by_time; ++i) {
      // Stratified: one delay drawn in each slice of the build.
      std::uniform_real_distribution<double> u(i * span_us / by_time,
                                               (i + 1) * span_us / by_time);
      points.push_back({Trigger::kTime, static_cast<uint64_t>(u(*rng))});
    }
    for (int i = 0; i < by_bytes; ++i) {
      std::uniform_real_distribution<double> u(0, 1);
      const double f = (i + u(*rng)) / by_bytes;
      points.push_back(
          {Trigger::kDataBytes,
           std::max<uint64_t>(1, static_cast<uint64_t>(f * b_data_size_))});
    }
    points.push_back({Trigger::kDataBytes, b_data_size_});
    points.push_back({Trigger::kIndexTempWritten, 0});
    points.push_back({Trigger::kDataRenamed, 0});
    points.push_back({Trigger::kIndexRenamed, 0});
    // Exactly at each step of publishing.
    auto at = [&](SysClass sys, int nth, bool at_exit, Phase expected) {
      KillPoint p{Trigger::kSyscall};
      p.sys = sys;
      p.nth = nth;
      p.at_exit = at_exit;
      p.expected = expected;
      points.push_back(p);
    };
    // All records written, placeholder header; then the real header.
    at(SysClass::kPwrite, 1, false, Phase::kDataComplete);
    at(SysClass::kPwrite, 1, true, Phase::kDataComplete);
    // The data temporary, then the index temporary, made durable.
    at(SysClass::kFsync, 1, true, Phase::kDataComplete);
    at(SysClass::kFsync, 2, true, Phase::kIndexWritten);
    // data.ufs replaced, index.ufs not yet; then both.
    at(SysClass::kRename, 1, true, Phase::kBetweenRenames);
    at(SysClass::kRename, 2, true, Phase::kPublished);
    // The directory made durable; the build has not exited yet.
    at(SysClass::kFsync, 3, true, Phase::kPublished);
    std::shuffle(points.begin(), points.end(), *rng);
    return points;
  }

  // Kills builds of B into a directory that starts empty or holding pack A
  // and checks what each leaves; see the file comment.
  void RunScenario(bool with_previous, uint64_t seed) {
    const auto t0 = Clock::now();
    const char* scenario = with_previous ? "previous pack A" : "empty output";
    SCOPED_TRACE(std::string("scenario: ") + scenario +
                 ", seed: " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    const std::vector<KillPoint> points =
        MakePoints(&rng, kTimeKillPoints, kByteKillPoints);
    const std::string out = *dir_ / (with_previous ? "out-prev" : "out-empty");
    const std::vector<const Tree*> trees = {tree_a_, tree_b_, tree_c_};
    // Per phase: kill points by kind (time, bytes, polled transition,
    // traced system call) and outcomes (indexed by Outcome).
    int kinds[kPhaseCount][4] = {};
    int counts[kPhaseCount][5] = {};
    int lost_previous = 0, untraced = 0;
    for (size_t k = 0; k < points.size(); ++k) {
      const KillPoint& p = points[k];
      SCOPED_TRACE("kill point " + std::to_string(k) + ": " + p.Describe());
      ResetOutput(out, with_previous);
      if (HasFatalFailure()) return;
      const KillResult kr = BuildAndKill(out, p);
      if (kr.unavailable) {
        ++untraced;  // ptrace refused here: nothing ran
        continue;
      }
      const std::vector<std::string> left = ListDir(out);
      SCOPED_TRACE(std::string("phase: ") + PhaseName(kr.phase) + " after " +
                   std::to_string(kr.seconds) + " s, data temp " +
                   std::to_string(kr.data_tmp_size) + " bytes; left " +
                   Join(left));
      if (!kr.killed) {
        EXPECT_EQ(kr.exit_code, 0) << "the build failed by itself";
      }
      if (p.trigger == Trigger::kSyscall) {
        // Publishing is: pwrite the data header, fsync data, write and
        // fsync the index, rename data, rename index, fsync the directory
        // (format.md steps 6-9), each system call leaving this state.
        EXPECT_TRUE(kr.killed) << "the build never made this system call";
        EXPECT_EQ(PhaseName(kr.phase), std::string(PhaseName(p.expected)));
      }

      // 1. What the reader sees.
      std::string detail;
      Status::Code open_code = Status::Code::kOk;
      const Outcome o = Inspect(out, trees, &detail, &open_code);
      counts[static_cast<int>(kr.phase)][static_cast<int>(o)]++;
      const int kind = p.trigger == Trigger::kTime        ? 0
                       : p.trigger == Trigger::kDataBytes ? 1
                       : p.trigger == Trigger::kSyscall   ? 3
                                                          : 2;
      kinds[static_cast<int>(kr.phase)][kind]++;
      EXPECT_NE(o, Outcome::kWrong) << detail;
      EXPECT_NE(o, Outcome::kTreeC) << detail;
      if (!with_previous) {
        EXPECT_NE(o, Outcome::kTreeA) << detail;
      }
      if (with_previous && o == Outcome::kNothing) ++lost_previous;
      // The documented state for each phase (format.md, "What a crash
      // leaves").
      if (BeforeRenames(kr.phase)) {
        EXPECT_EQ(o, with_previous ? Outcome::kTreeA : Outcome::kNothing)
            << "before the renames the directory must be as it was: " << detail;
      } else if (kr.phase == Phase::kBetweenRenames) {
        // The new data.ufs beside the previous index.ufs; the previous
        // data file is still linked as .data.ufs.prev, and Reader::Open
        // falls back to it: the previous pack still opens.
        EXPECT_EQ(o, with_previous ? Outcome::kTreeA : Outcome::kNothing)
            << detail;
      } else {
        EXPECT_EQ(o, Outcome::kTreeB) << detail;
      }

      // 2. What `ufspack verify` says agrees.
      CommandResult v = RunCli({"verify", out});
      if (o == Outcome::kTreeA || o == Outcome::kTreeB) {
        EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
        EXPECT_TRUE(StartsWith(v.out, "OK: ")) << v.out;
      } else if (open_code == Status::Code::kCorruption) {
        // A mismatched pair: damaged (exit 3).
        EXPECT_EQ(v.exit_code, 3) << v.out << v.err;
        EXPECT_TRUE(StartsWith(v.out, "CORRUPT: ")) << v.out;
        EXPECT_TRUE(Contains(v.out, "not one pack")) << v.out;
      } else {
        // No index.ufs: cannot be read at all (exit 1).
        EXPECT_EQ(v.exit_code, 1) << v.out << v.err;
        EXPECT_TRUE(StartsWith(v.out, "FAILED: ")) << v.out;
        EXPECT_TRUE(Contains(v.out, "not a ufspack pack")) << v.out;
      }

      // 3. The next build succeeds (the lock died with the process) and
      // removes the killed build's temporary files.
      CommandResult b = RunCli({"build", tree_c_->root, "-o", out, "-q"});
      EXPECT_EQ(b.exit_code, 0) << b.err;
      EXPECT_EQ(ListDir(out),
                (std::vector<std::string>{kDataFileName, kIndexFileName}));
      EXPECT_EQ(Inspect(out, trees, &detail), Outcome::kTreeC) << detail;
      if (HasFailure()) {
        std::cout << "[crash] FAILED at kill point " << k << " ("
                  << p.Describe() << "), seed " << seed << std::endl;
        break;
      }
    }
    test::RemoveAll(out);

    // The report: kill points per phase, by kind, and what each left.
    std::ostringstream report;
    report << "[crash] " << scenario << ": " << points.size() - untraced
           << " kill points, seed " << seed << ", " << SecondsSince(t0)
           << " s\n";
    if (untraced > 0) {
      report << "[crash]   ptrace unavailable: " << untraced
             << " system-call kill points not run\n";
    }
    auto row = [&](const char* name, const int* kind, const int* outcome) {
      char line[200];
      std::snprintf(line, sizeof(line),
                    "[crash]   %-32s | %4d %5d %5d %7d | %5d %5d %7d\n", name,
                    kind[0], kind[1], kind[2], kind[3],
                    outcome[static_cast<int>(Outcome::kTreeA)],
                    outcome[static_cast<int>(Outcome::kTreeB)],
                    outcome[static_cast<int>(Outcome::kNothing)]);
      report << line;
    };
    report << "[crash]   phase reached                    | time bytes trans "
              "syscall | old A new B nothing\n";
    int kind_total[4] = {}, total[5] = {};
    for (int ph = 0; ph < kPhaseCount; ++ph) {
      if (kinds[ph][0] + kinds[ph][1] + kinds[ph][2] + kinds[ph][3] == 0)
        continue;
      row(PhaseName(static_cast<Phase>(ph)), kinds[ph], counts[ph]);
      for (int c = 0; c < 4; ++c) kind_total[c] += kinds[ph][c];
      for (int o = 0; o < 5; ++o) total[o] += counts[ph][o];
    }
    row("total", kind_total, total);
    if (with_previous) {
      report << "[crash]   previous pack unreadable (nothing opens) after "
             << lost_previous << " of " << points.size() - untraced
             << " kills\n";
      // Nothing the user had is lost: every kill leaves A or B.
      EXPECT_EQ(lost_previous, 0);
    }
    std::cout << report.str() << std::flush;
  }

  static uint64_t seed_;
  static TempDir* dir_;         // outputs
  static ScratchDir* src_dir_;  // sources (may be null: under dir_)
  static Tree* tree_a_;
  static Tree* tree_b_;
  static Tree* tree_c_;
  static std::string pristine_a_;
  static double build_seconds_;
  static uint64_t b_data_size_;
};

uint64_t CrashTest::seed_ = 0;
TempDir* CrashTest::dir_ = nullptr;
ScratchDir* CrashTest::src_dir_ = nullptr;
Tree* CrashTest::tree_a_ = nullptr;
Tree* CrashTest::tree_b_ = nullptr;
Tree* CrashTest::tree_c_ = nullptr;
std::string CrashTest::pristine_a_;
double CrashTest::build_seconds_ = 0;
uint64_t CrashTest::b_data_size_ = 0;

TEST_F(CrashTest, KillDuringFirstBuild) { RunScenario(false, seed_ + 1); }

TEST_F(CrashTest, KillWhileReplacingPreviousPack) {
  RunScenario(true, seed_ + 2);
}

// `ufspack append` killed with SIGKILL at kTimeKillPoints random times over
// its duration: pack A (hard-linked from the pristine copy) grows by the
// files of tree B it lacks (B's 100 extra files in class 1 and its fifth
// class; the names A has keep A's bytes).  After each kill the directory
// must open as A or as the appended pack, exactly, with A's files never
// written (same inodes, same bytes); the next append must then succeed and
// leave only the part its manifest names.
TEST_F(CrashTest, KillDuringAppend) {
  Tree ab;
  ab.tag = "AB";
  ab.records = tree_a_->records;
  for (const auto& [name, rec] : tree_b_->records)
    ab.records.emplace(name, rec);
  const std::string out = *dir_ / "out-append";
  // Time the append: the median of three.
  std::vector<double> seconds;
  for (int k = 0; k < 3; ++k) {
    ResetOutput(out, true);
    const auto t0 = Clock::now();
    CommandResult r = RunCli({"append", out, tree_b_->root, "-q"});
    seconds.push_back(SecondsSince(t0));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::string detail;
    ASSERT_EQ(Inspect(out, {tree_a_, &ab}, &detail), Outcome::kAppended)
        << detail;
  }
  std::sort(seconds.begin(), seconds.end());
  const double append_seconds = seconds[1];
  std::mt19937_64 rng(seed_ + 3);
  std::map<Outcome, int> outcomes;
  for (int k = 0; k < kTimeKillPoints; ++k) {
    ResetOutput(out, true);
    const ino_t index_inode = InodeOf(out + "/" + kIndexFileName);
    const ino_t data_inode = InodeOf(out + "/" + kDataFileName);
    const double at =
        append_seconds * 1.2 * static_cast<double>(rng() % 1000) / 1000.0;
    pid_t pid = SpawnCli({"append", out, tree_b_->root, "-q"});
    ASSERT_GT(pid, 0);
    std::this_thread::sleep_for(std::chrono::duration<double>(at));
    ::kill(pid, SIGKILL);
    Reap(pid);
    std::string detail;
    const Outcome o = Inspect(out, {tree_a_, &ab}, &detail);
    ++outcomes[o];
    EXPECT_TRUE(o == Outcome::kTreeA || o == Outcome::kAppended)
        << "kill at " << at << " s: " << detail;
    EXPECT_EQ(InodeOf(out + "/" + kIndexFileName), index_inode);
    EXPECT_EQ(InodeOf(out + "/" + kDataFileName), data_inode);
    // The next append completes the job and leaves one part.
    CommandResult r = RunCli({"append", out, tree_b_->root, "-q"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ASSERT_EQ(Inspect(out, {tree_a_, &ab}, &detail), Outcome::kAppended)
        << detail;
    int parts = 0;
    for (const auto& n : ListDir(out)) {
      parts += StartsWith(n, "append-") ? 1 : 0;
      EXPECT_FALSE(StartsWith(n, ".manifest.ufs.tmp-")) << n;
    }
    EXPECT_EQ(parts, 1) << Join(ListDir(out));
  }
  // A's files were linked, never written: the pristine pack still reads.
  std::string detail;
  EXPECT_EQ(Inspect(pristine_a_, {tree_a_}, &detail), Outcome::kTreeA)
      << detail;
  std::cout << "[crash] append of "
            << ab.records.size() - tree_a_->records.size() << " files in "
            << static_cast<int>(append_seconds * 1000) << " ms; outcomes:";
  for (const auto& [o, n] : outcomes)
    std::cout << " " << OutcomeName(o) << " " << n;
  std::cout << std::endl;
}

// Deterministic lock check: while one build holds the directory (stopped
// with SIGSTOP after creating its temporary files), a second build into it
// is refused with exit status 1 and a message naming the directory, and
// touches nothing; the first then completes normally.
TEST_F(CrashTest, SecondBuildIsRefusedWhileFirstHoldsTheLock) {
  const std::string out = *dir_ / "out-lock";
  ResetOutput(out, true);
  const std::vector<const Tree*> trees = {tree_a_, tree_b_, tree_c_};
  pid_t first = SpawnCli({"build", tree_b_->root, "-o", out, "-q"});
  ASSERT_GT(first, 0);
  const auto t0 = Clock::now();
  std::string data_tmp;
  while ((data_tmp = FindTemp(out, kDataTmpPrefix)).empty() &&
         SecondsSince(t0) < 30) {
    ::sched_yield();
  }
  ::kill(first, SIGSTOP);
  // kill() only queues the signal: wait until the build has really stopped,
  // or it may still create files after `before` is taken (CI saw its index
  // temporary file appear in between).
  int stopped = 0;
  ASSERT_EQ(::waitpid(first, &stopped, WUNTRACED), first);
  ASSERT_TRUE(WIFSTOPPED(stopped)) << "status " << stopped;
  ASSERT_FALSE(data_tmp.empty()) << "the first build made no temporary file";
  const std::vector<std::string> before = ListDir(out);

  CommandResult second = RunCli({"build", tree_c_->root, "-o", out, "-q"});
  EXPECT_EQ(second.exit_code, 1) << second.out << second.err;
  EXPECT_TRUE(StartsWith(second.err, "ufspack: error: ")) << second.err;
  EXPECT_TRUE(Contains(second.err, out)) << second.err;
  EXPECT_TRUE(Contains(second.err,
                       "another ufspack build is writing to this "
                       "directory"))
      << second.err;
  // The refused build neither removed the first build's temporary files
  // nor created its own.
  EXPECT_EQ(ListDir(out), before);
  std::string detail;
  EXPECT_EQ(Inspect(out, trees, &detail), Outcome::kTreeA) << detail;

  ::kill(first, SIGCONT);
  const int status = Reap(first);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(Inspect(out, trees, &detail), Outcome::kTreeB) << detail;
  EXPECT_EQ(ListDir(out),
            (std::vector<std::string>{kDataFileName, kIndexFileName}));
  test::RemoveAll(out);
}

// Two builds of different trees started together into one directory,
// repeated: each either succeeds or is refused (exit 1, the lock message);
// at least one succeeds; what is left is exactly one tree -- the one that
// succeeded, or either when both did (one after the other) -- and no
// temporary files remain.
TEST_F(CrashTest, ConcurrentBuildsIntoOneDirectory) {
  const std::string out = *dir_ / "out-concurrent";
  const std::vector<const Tree*> trees = {tree_a_, tree_b_, tree_c_};
  const std::vector<const Tree*> pair = {tree_a_, tree_b_};
  int refused = 0, serialized = 0;
  constexpr int kRounds = 6;
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    ResetOutput(out, round % 2 == 1);
    const Tree* first = pair[round % 2];
    const Tree* second = pair[1 - round % 2];
    const std::string err1 = *dir_ / "err1", err2 = *dir_ / "err2";
    pid_t p1 =
        SpawnCli({"build", first->root, "-o", out, "-q"}, "/dev/null", err1);
    pid_t p2 =
        SpawnCli({"build", second->root, "-o", out, "-q"}, "/dev/null", err2);
    ASSERT_GT(p1, 0);
    ASSERT_GT(p2, 0);
    const int s1 = Reap(p1), s2 = Reap(p2);
    ASSERT_TRUE(WIFEXITED(s1) && WIFEXITED(s2));
    const int rc[2] = {WEXITSTATUS(s1), WEXITSTATUS(s2)};
    const std::string err[2] = {test::ReadFile(err1), test::ReadFile(err2)};
    const Tree* tree[2] = {first, second};
    int ok = 0;
    const Tree* winner = nullptr;
    for (int i = 0; i < 2; ++i) {
      if (rc[i] == 0) {
        ++ok;
        winner = tree[i];
        EXPECT_EQ(err[i], "");
        continue;
      }
      EXPECT_EQ(rc[i], 1) << err[i];
      EXPECT_TRUE(StartsWith(err[i], "ufspack: error: " + out)) << err[i];
      EXPECT_TRUE(Contains(err[i],
                           "another ufspack build is writing to "
                           "this directory"))
          << err[i];
    }
    EXPECT_GE(ok, 1) << "both builds failed: " << err[0] << err[1];
    if (ok == 1) ++refused;
    if (ok == 2) ++serialized;
    std::string detail;
    const Outcome o = Inspect(out, trees, &detail);
    EXPECT_TRUE(o == Outcome::kTreeA || o == Outcome::kTreeB) << detail;
    if (ok == 1) {
      EXPECT_EQ(o, winner == tree_a_ ? Outcome::kTreeA : Outcome::kTreeB)
          << detail;
    }
    EXPECT_EQ(ListDir(out),
              (std::vector<std::string>{kDataFileName, kIndexFileName}));
  }
  std::cout << "[crash] concurrent builds: " << kRounds << " rounds, "
            << refused << " with one refused, " << serialized
            << " ran one after the other" << std::endl;
  test::RemoveAll(out);
}

}  // namespace
}  // namespace ufspack
