// Copyright 2026 The ufspack Authors.
//
// What the subcommands share: the command line parser, usage errors,
// opening a pack, the help table.
#include "commands.h"

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include "util.h"

namespace ufspack {
namespace cli {
namespace {

const char kMainHelp[] =
    R"(ufspack: pack a directory of small files (an ImageFolder tree) into one
data file and a fixed-width index, and read any file back with one pread.

Usage: ufspack <command> [options] [arguments]
       ufspack --version

Commands:
  build <dir> [-o <out>]   pack a directory tree into <out>/data.ufs + index.ufs
  info <pack>              header, counts, classes with sizes, compression ratio
  ls <pack>                list record names (--long: labels, sizes, codecs)
  cat <pack> <name|#N>     write one record's original bytes to stdout
  extract <pack> <dir>     recreate the original files under <dir>
  verify <pack>            check every record's checksum and the index
  merge <part>... -o <out> one pack over several (build --part i/n), no copying
  append <pack> <dir>      add the files of <dir> that <pack> lacks, in place
  warmup <pack> --cache <dir>
                           copy a pack's records into a node-local cache
  cache stat <dir>         a cache directory's size, entries, hits, misses
  cache clear <dir>        empty a cache directory (tables in use are kept)
  mount <pack> <dir>       the pack as a read-only directory tree (FUSE)
  umount <dir>             unmount it (also a stale mount)
  help [<command>]         show help for a command

A <pack> is the directory holding index.ufs and data.ufs, or the index.ufs
file itself, or a merged pack (a directory holding manifest.ufs).  'ufspack <command> --help' explains each command.

Exit status: 0 success, 1 failure, 2 usage error, 3 the pack is corrupt,
130 interrupted.  See docs/cli.md.
)";

}  // namespace

const char* MainHelp() { return kMainHelp; }

const char* HelpFor(const std::string& command) {
  if (command == "build") return kBuildHelp;
  if (command == "info") return kInfoHelp;
  if (command == "ls") return kLsHelp;
  if (command == "cat") return kCatHelp;
  if (command == "extract") return kExtractHelp;
  if (command == "verify") return kVerifyHelp;
  if (command == "merge") return kMergeHelp;
  if (command == "append") return kAppendHelp;
  if (command == "warmup") return kWarmupHelp;
  if (command == "cache") return kCacheHelp;
  if (command == "cache stat") return kCacheStatHelp;
  if (command == "cache clear") return kCacheClearHelp;
  if (command == "mount") return kMountHelp;
  if (command == "umount") return kUmountHelp;
  return nullptr;
}

CommandLine::CommandLine(const std::string& command)
    : command_(command), app_("", "ufspack " + command) {
  // The hand-written help texts replace CLI11's generated one (they carry
  // the examples and exit codes); -h/--help still ends parsing at once.
  app_.set_help_flag("-h,--help");
  // As before CLI11: a repeated option keeps its last value.
  app_.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

int CommandLine::Parse(const Argv& argv) {
  // CLI11 takes the arguments in reverse order.
  std::vector<std::string> args(argv.rbegin(), argv.rend());
  try {
    app_.parse(args);
  } catch (const CLI::CallForHelp&) {
    std::fputs(HelpFor(command_), stdout);
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    return Usage(command_, e.what());
  }
  return -1;
}

void PrintError(const Status& s) {
  std::fprintf(stderr, "ufspack: error: %s\n", Printable(s.message()).c_str());
}

int Usage(const std::string& cmd, const std::string& message) {
  std::fprintf(stderr, "ufspack %s: %s\n(see 'ufspack %s --help')\n",
               cmd.c_str(), message.c_str(), cmd.c_str());
  return kExitUsage;
}

int ThreadsOption(const std::string& cmd, const CLI::Option* option,
                  const std::string& text, int default_threads, int max,
                  int* threads) {
  *threads = default_threads;
  if (option->count() == 0) return kExitOk;
  uint64_t v = 0;
  if (!ParseUint(text, &v) || v < 1 || v > static_cast<uint64_t>(max)) {
    return Usage(cmd,
                 "--threads takes a number from 1 to " + std::to_string(max));
  }
  *threads = static_cast<int>(v);
  return kExitOk;
}

int CompressOption(const std::string& cmd, const std::string& text,
                   PackWriterOptions* writer) {
  if (text == "none") return kExitOk;
  if (text != "zstd" && text.rfind("zstd:", 0) != 0) {
    return Usage(
        cmd, "--compress takes 'none' or 'zstd[:level]', not '" + text + "'");
  }
  writer->compress = true;
  if (text.size() > 5) {
    uint64_t level = 0;
    if (!ParseUint(text.substr(5), &level) || level < 1 || level > 19) {
      return Usage(cmd, "--compress zstd:<level> takes a level from 1 to 19");
    }
    writer->zstd_level = static_cast<int>(level);
  }
  return kExitOk;
}

int OpenPack(const std::string& path, const ReaderOptions& options,
             std::unique_ptr<Reader>* reader) {
  Status s = Reader::Open(path, options, reader);
  if (!s.ok()) {
    PrintError(s);
    return ExitCodeFor(s);
  }
  return kExitOk;
}

void OpenCache(const std::string& dir, ReaderOptions* options) {
  CacheOptions co;
  co.dir = dir;
  std::shared_ptr<Cache> cache;
  Status s = Cache::Open(co, &cache);
  if (!s.ok()) {
    std::fprintf(stderr,
                 "ufspack: warning: cache %s not used (%s); reading from the "
                 "source\n",
                 Printable(dir).c_str(), Printable(s.ToString()).c_str());
    return;
  }
  options->cache = std::move(cache);
}

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

std::string TransferLine(const std::string& verb, uint64_t done, uint64_t total,
                         double seconds) {
  const double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0;
  const double eta = rate > 0 ? static_cast<double>(total - done) / rate : -1;
  const int pct = total > 0 ? static_cast<int>(100 * done / total) : 100;
  return verb + " " + FormatBytes(done) + " / " + FormatBytes(total) + " (" +
         std::to_string(pct) + "%)  " + Fixed(rate / 1e6, 1) + " MB/s  ETA " +
         FormatDuration(eta);
}

}  // namespace cli
}  // namespace ufspack
