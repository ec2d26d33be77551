// Copyright 2026 The ufspack Authors.
//
// Small helpers for the `ufspack` command line tool: exit codes, human
// readable numbers, JSON strings, terminal progress.  Not part of the
// libraries' API.
#ifndef UFSPACK_CLI_UTIL_H_
#define UFSPACK_CLI_UTIL_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "json_object.h"
#include "ufspack/status.h"
#include "ufspack/text.h"

namespace ufspack {
namespace cli {

// Exit codes, documented in docs/cli.md.
enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,  // the operation failed (I/O, not found, bad input)
  kExitUsage = 2,    // bad command line
  kExitCorrupt = 3,  // the pack is damaged (verify found problems, or a
                     // read hit corruption)
  kExitInterrupted = 130,
};

// Exit code for a failed Status.
int ExitCodeFor(const Status& s);

// Parses a non-negative decimal integer; false if `s` is not one.
bool ParseUint(const std::string& s, uint64_t* out);
// Parses a size: a number of bytes ("1048576"), or a number, possibly with
// a fraction, followed by K, M, G or T, powers of 1024, case-insensitive,
// optionally spelt KiB, MiB, GiB, TiB ("500M", "20G", "1.5T", "64KiB"); a
// fraction of a byte is dropped.  False if `s` is not one or overflows.
bool ParseSize(const std::string& s, uint64_t* out);

// "68.2 MiB", "512 B" (ufspack/text.h).
using ::ufspack::FormatBytes;
// "1,234,567".
std::string FormatCount(uint64_t n);
// "1:02:03" or "2:03".
std::string FormatDuration(double seconds);

// Message-safe form of raw bytes (ufspack::EscapeBytes).
inline std::string Printable(std::string_view s) { return EscapeBytes(s); }

// Writes all of `data` to file descriptor `fd`.
Status WriteFd(int fd, std::string_view data);

// A one-line, self-overwriting progress display on stderr, enabled only
// when stderr is a terminal (and not disabled by the caller).
class Progress {
 public:
  explicit Progress(bool enabled);
  ~Progress();
  bool enabled() const { return enabled_; }
  // Redraws the line (rate-limited to ~10 per second unless `force`).
  void Update(const std::string& line, bool force = false);
  // Erases the line.
  void Clear();

 private:
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_;
};

// True once SIGINT, SIGTERM or SIGHUP arrived (after InstallSignalHandlers).
// A second signal of the same kind terminates at once.
void InstallSignalHandlers();
bool Interrupted();
const std::atomic<bool>* InterruptFlag();

}  // namespace cli
}  // namespace ufspack

#endif  // UFSPACK_CLI_UTIL_H_
