// Copyright 2026 The ufspack Authors.
//
// The subcommands of the `ufspack` tool, one file each (cmd_build.cc,
// cmd_info.cc, cmd_ls.cc, cmd_cat.cc, cmd_extract.cc, cmd_verify.cc,
// cmd_merge.cc,
// cmd_warmup.cc, cmd_cache.cc, cmd_mount.cc), and
// what they share: the command line parser (CLI11), usage errors, opening a
// pack.  Each command takes its arguments (after the subcommand name) and
// returns the process exit code (see util.h).
#ifndef UFSPACK_CLI_COMMANDS_H_
#define UFSPACK_CLI_COMMANDS_H_

#include <CLI/CLI.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "ufspack/builder.h"
#include "ufspack/cache.h"
#include "ufspack/reader.h"
#include "ufspack/status.h"

namespace ufspack {
namespace cli {

using Argv = std::vector<std::string>;

int CmdBuild(const Argv& args);
int CmdInfo(const Argv& args);
int CmdLs(const Argv& args);
int CmdCat(const Argv& args);
int CmdExtract(const Argv& args);
int CmdVerify(const Argv& args);
int CmdMerge(const Argv& args);
int CmdAppend(const Argv& args);
int CmdWarmup(const Argv& args);
// `ufspack cache stat|clear ...`.
int CmdCache(const Argv& args);
// `ufspack mount` and `ufspack umount` (an error without UFSPACK_HAVE_MOUNT).
int CmdMount(const Argv& args);
int CmdUmount(const Argv& args);

// Help texts, each defined beside its command.
extern const char kBuildHelp[];
extern const char kInfoHelp[];
extern const char kLsHelp[];
extern const char kCatHelp[];
extern const char kExtractHelp[];
extern const char kVerifyHelp[];
extern const char kMergeHelp[];
extern const char kAppendHelp[];
extern const char kWarmupHelp[];
extern const char kCacheHelp[];
extern const char kCacheStatHelp[];
extern const char kCacheClearHelp[];
extern const char kMountHelp[];
extern const char kUmountHelp[];

// Help text of a subcommand ("cache stat" for the cache's), or nullptr if
// there is no such subcommand.
const char* HelpFor(const std::string& command);
// The top-level help.
const char* MainHelp();

// The command line of one subcommand, parsed with CLI11: "--name value",
// "--name=value", "-n value", "-nvalue", bundled flags ("-qf"), options
// before or after the arguments, and "--" to end the options.  Repeating an
// option keeps the last value unless the option collects all of them.
class CommandLine {
 public:
  explicit CommandLine(const std::string& command);
  CLI::App& app() { return app_; }
  // Parses `argv`.  Returns -1 when the command should go on; otherwise the
  // exit code to return at once: kExitOk after printing the command's help
  // (-h, --help), kExitUsage after a usage error naming the command.
  int Parse(const Argv& argv);

 private:
  std::string command_;
  CLI::App app_;
};

// Prints "ufspack: error: <message>" on stderr.
void PrintError(const Status& s);
// Prints a usage error naming `cmd` and returns kExitUsage.
int Usage(const std::string& cmd, const std::string& message);
// Sets *threads from `-j, --threads` (`option`, whose value is `text`):
// `default_threads` when not given, else 1..`max`.  Returns kExitOk, or
// the usage error's exit status after printing it for `cmd`.
int ThreadsOption(const std::string& cmd, const CLI::Option* option,
                  const std::string& text, int default_threads, int max,
                  int* threads);
// Sets writer->compress and zstd_level from `--compress` (`text`: "none",
// "zstd" or "zstd:<level>", level 1-19).  Returns kExitOk, or the usage
// error's exit status after printing it for `cmd`.
int CompressOption(const std::string& cmd, const std::string& text,
                   PackWriterOptions* writer);
// Opens a pack; on failure prints the error and returns its exit code.
int OpenPack(const std::string& path, const ReaderOptions& options,
             std::unique_ptr<Reader>* reader);
// Opens the node-local cache `dir` (--cache) with the limit it has, and
// sets options->cache.  A cache that cannot be opened (damaged or tampered
// with, unreadable, read-only, not a cache, on a full disk) is reported
// with one warning on stderr and not used: the records are read from the
// source (docs/cache.md: a cache never fails a read).
void OpenCache(const std::string& dir, ReaderOptions* options);
// One tier's figures as a JSON object (cache stat --json, warmup --json).
std::string CacheTierJson(const CacheTierStats& stats);
// Seconds since t0.
double Since(std::chrono::steady_clock::time_point t0);
// `v` with `digits` decimals.
std::string Fixed(double v, int digits);
// A progress line for `done` of `total` bytes after `seconds`:
// "<verb> 1.2 MiB / 3.4 MiB (35%)  12.5 MB/s  ETA 0:07".
std::string TransferLine(const std::string& verb, uint64_t done, uint64_t total,
                         double seconds);

}  // namespace cli
}  // namespace ufspack

#endif  // UFSPACK_CLI_COMMANDS_H_
