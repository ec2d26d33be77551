// Copyright 2026 The ufspack Authors.
//
// Helpers for the test suite: scratch directories, file I/O, running the
// CLI, and flipping bytes in files.  The file helpers accept paths longer
// than PATH_MAX (they resolve such paths one component at a time).
#ifndef UFSPACK_TESTS_TESTUTIL_H_
#define UFSPACK_TESTS_TESTUTIL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ufspack/status.h"

namespace ufspack {
namespace test {

// A fresh directory under $TMPDIR, removed (recursively) on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const {
    return path_ + "/" + rel;
  }

 private:
  std::string path_;
};

// Writes `contents` to `path`, creating parent directories.
void WriteFile(const std::string& path, const std::string& contents);
std::string ReadFile(const std::string& path);
bool Exists(const std::string& path);
uint64_t FileSize(const std::string& path);
void MakeDirs(const std::string& path);
void Symlink(const std::string& target, const std::string& link);
void RemoveAll(const std::string& path);

// Names of the files a build keeps beside a pack while it writes and
// publishes it (.data.ufs.tmp-*, .index.ufs.tmp-*, .data.ufs.prev) in `dir`.
std::vector<std::string> PackTempFiles(const std::string& dir);

// XORs `mask` into the byte at `offset` of `path`.
void FlipByte(const std::string& path, uint64_t offset, uint8_t mask = 0x01);
// Truncates `path` to `size` bytes.
void Truncate(const std::string& path, uint64_t size);

// Free space for an unprivileged user on the file system holding `dir`, in
// bytes (0 if unknown).
uint64_t FreeDiskBytes(const std::string& dir);
// Bytes allocated under `dir`, itself included (the sum of st_blocks * 512,
// what du counts); symlinks are not followed.
uint64_t DiskUsage(const std::string& dir);
// MemAvailable from /proc/meminfo, in bytes (0 if unknown).
uint64_t AvailableMemoryBytes();
// Whether the file system holding `dir` stores holes without allocating
// them: writes one byte at 64 MiB into a scratch file and checks its
// allocated size.
bool SupportsSparseFiles(const std::string& dir);

// Deterministic pseudo-random bytes (incompressible).
std::string RandomBytes(size_t n, uint64_t seed);
// Highly compressible bytes.
std::string CompressibleBytes(size_t n, uint64_t seed);

// Every regular file under `root` (following directory symlinks), keyed
// by relative path, with its contents.
std::map<std::string, std::string> ReadTree(const std::string& root);

struct CommandResult {
  int exit_code = -1;  // -1: killed by a signal
  std::string out;     // stdout
  std::string err;     // stderr
};
// Runs argv (no shell) with stdin from /dev/null, capturing both streams.
CommandResult Run(const std::vector<std::string>& argv);
// Whether `haystack` (or a Status's message) contains `needle`.
inline bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}
inline bool Contains(const Status& s, const std::string& needle) {
  return Contains(s.ToString(), needle);
}

// Runs the ufspack CLI built alongside the tests.
CommandResult RunCli(const std::vector<std::string>& args);
// Starts the CLI with `args` and returns its pid (the caller reaps it):
// stdin from /dev/null, stdout and stderr to `out_file` / `err_file`, and
// `env` ("NAME=value", taking precedence) added to this process's
// environment.  -1 (and a test failure) if it cannot be started.
pid_t SpawnCli(const std::vector<std::string>& args,
               const std::string& out_file = "/dev/null",
               const std::string& err_file = "/dev/null",
               const std::vector<std::string>& env = {});

// Runs argv like Run(), killed (SIGKILL) if still running after `seconds`;
// exit_code is then -1.  For commands that must never block.
CommandResult RunWithTimeout(const std::vector<std::string>& argv, int seconds);

// Creates a FIFO at `path` (mkfifo, mode 0644); fails the test if it cannot.
void MakeFifo(const std::string& path);

// In a child with its own mount namespace, mounts a tmpfs of `size`
// ("64m") on `dir` and returns what fn returns there; "SKIP: ..." when
// mounting is not permitted (no root, no user namespaces).
std::string WithTmpfs(const std::string& dir, const std::string& size,
                      const std::function<std::string()>& fn);

// Runs `fn` on a thread and waits up to `seconds` for it to return.  If it
// has not (blocked opening a FIFO, say), opens each of `fifos` for writing
// without blocking, which releases an open(2) stuck waiting for a writer,
// until `fn` returns, and returns false.  Ends the process if `fn` still
// has not returned 30 s later.
bool ReturnsWithin(int seconds, const std::function<void()>& fn,
                   const std::vector<std::string>& fifos);

// --- Hostile zstd records ---------------------------------------------------

// A zstd frame holding `content` in raw blocks, with a 128 KiB window, whose
// header declares `declared_size` bytes of content (what
// ZSTD_getFrameContentSize returns), true or not.
std::string ZstdFrameDeclaring(const std::string& content,
                               uint64_t declared_size);

// Writes a flat pack into `dir` with two records: "hostile.bin", codec zstd,
// whose entry claims original_length = 32768 x stored_length (the largest
// the format allows) while its frame really holds `content_bytes` random
// bytes, and "ok.txt", 10 raw bytes.  With `forged_header` the frame header
// declares the same claimed size as the entry, so only decoding can tell;
// otherwise it declares the truth.  The record checksums, the index body
// checksum and the header checksum are all valid, so every check behind
// them is reached.  Sets *claimed (if given) to the claimed length.
void WriteShortZstdFramePack(const std::string& dir, size_t content_bytes,
                             bool forged_header, uint64_t* claimed = nullptr);

// True in ASan, TSan and MSan builds: their shadow memory reserves terabytes
// of address space, so no RLIMIT_AS (ulimit -v) test can run there.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitizerReservesAddressSpace = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
constexpr bool kSanitizerReservesAddressSpace = true;
#else
constexpr bool kSanitizerReservesAddressSpace = false;
#endif
#else
constexpr bool kSanitizerReservesAddressSpace = false;
#endif
constexpr const char* kNoAddressSpaceLimitUnderSanitizers =
    "address-space limits (RLIMIT_AS) cannot work under ASan/TSan/MSan, "
    "whose shadow memory reserves terabytes; run this test in a plain build";

// Runs fn() in a forked child under setrlimit(RLIMIT_AS, limit_bytes) and
// returns its exit code: fn()'s result, or -1 if the child was killed by a
// signal (as std::bad_alloc, uncaught, aborts it).
int RunWithAddressSpaceLimit(uint64_t limit_bytes,
                             const std::function<int()>& fn);

// RunCli() with the CLI under the same limit (sh's ulimit -v).
CommandResult RunCliWithAddressSpaceLimit(uint64_t limit_bytes,
                                          const std::vector<std::string>& args);

// Path of ../shared/data/cats_and_dogs_filtered.tar beside the source
// tree, or "" when absent.
std::string SharedPhotosTar();

// Debian's Python, which the decode tests run PIL and torchvision with.
inline constexpr const char* kPython = "/usr/bin/python3";

// Whether kPython exists and runs `import <modules>` (e.g. "PIL.Image" or
// "torch, torchvision"); each answer is computed once.
bool PythonHas(const std::string& modules);

}  // namespace test
}  // namespace ufspack

#endif  // UFSPACK_TESTS_TESTUTIL_H_
