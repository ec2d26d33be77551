// Copyright 2026 The ufspack Authors.
//
// `ufspack warmup`: fills a node-local cache (ufspack/cache.h) with the
// records of a pack, reading its data file in large sequential blocks.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "commands.h"
#include "ufspack/cache.h"
#include "ufspack/reader.h"
#include "util.h"

namespace ufspack {
namespace cli {

const char kWarmupHelp[] =
    R"(Usage: ufspack warmup <pack> --cache <dir> [--limit <size>] [options]

<pack> is a pack directory, its index.ufs, or a pack URL: s3://bucket/prefix
(AWS settings from the environment and ~/.aws) or https://host/path
(docs/remote.md).

Copies the records of <pack> (typically on NFS, SSHFS or another network
file system) into the node-local cache <dir>, reading data.ufs in large
sequential blocks, so that readers opened with that cache ('ufspack cat
--cache', verify and extract --cache, ReaderOptions::cache) serve them from
local disk.  Records already cached are skipped: an interrupted warm-up resumes
where it stopped when run again.  A full cache refuses new records; the
warm-up then stops, says how many were not cached, and exits with status 0.

<size> is a number of bytes or a number with K, M, G or T (powers of
1024; KiB, MiB, GiB, TiB also accepted): 500M, 20G, 1.5T, 1048576.

Options:
      --cache <dir>       the cache directory (created if missing; a new
                          one must be empty)
      --limit <size>      the directory's limit, kept for later runs
                          (default: the limit it has; a new directory gets
                          half of its file system's free space)
      --ram-dir <dir>     a RAM tier (tmpfs, e.g. /dev/shm/ufspack) in
                          front of <dir>: records go to the first tier
                          with room
      --ram-limit <size>  the RAM tier's limit (default as --limit)
  -j, --threads <n>       blocks read concurrently (default 4; 1-64)
      --block <size>      bytes per read (default 8M; 64K-1G)
      --json              one JSON object on stdout instead of the summary
  -q, --quiet             no progress and no summary
      --no-progress       no progress display (shown only on a terminal)

Exit status: 0 done (also when the cache filled up), 1 failed (the pack
or the cache cannot be read or written), 2 usage error, 3 the pack is
damaged, 130 interrupted (what was cached stays; run again to resume).

Examples:
  ufspack warmup /nfs/imagenet/train.ufspack --cache /local/nvme/ufspack --limit 200G
  ufspack warmup /nfs/val.ufspack --cache /local/nvme/ufspack --ram-dir /dev/shm/ufspack --ram-limit 20G -j8
)";

namespace {

// Reads `text` (the value of `option`) as a size into *out; 0 is refused.
// Returns kExitOk, or the usage error's exit status after printing it.
int SizeOption(const char* option, const std::string& text, uint64_t min,
               uint64_t max, uint64_t* out) {
  uint64_t v = 0;
  if (!ParseSize(text, &v)) {
    return Usage("warmup", std::string(option) +
                               " takes a size such as 500M, 20G, 1.5T or a "
                               "number of bytes, not '" +
                               Printable(text) + "'");
  }
  if (v < min || v > max) {
    return Usage("warmup", std::string(option) + " takes a size from " +
                               FormatBytes(min) + " to " + FormatBytes(max) +
                               ", not '" + Printable(text) + "'");
  }
  *out = v;
  return kExitOk;
}

}  // namespace

namespace {

// One `ufspack warmup`: ParseArgs, then Run (the pack probed, the cache
// opened, the warm-up with its progress line), then Outcome (the summary,
// the exit status and, with --json, the JSON object, whatever happened).
class WarmupCommand {
 public:
  int Main(const Argv& argv) {
    if (int rc = ParseArgs(argv); rc >= 0) return rc;
    return Run();
  }

 private:
  // The exit status when the command ends here (--help, a usage error),
  // else -1 (as CommandLine::Parse).
  int ParseArgs(const Argv& argv);
  int Run();
  int Outcome(const Status& s, const std::vector<CacheTierStats>& before);
  void Warn(const std::string& m);
  bool OnProgress(uint64_t done, uint64_t total);
  // Writes the JSON object (--json) and returns `code`.
  int Report(int code, const std::string& error, bool cache_full,
             uint64_t not_cached);

  std::string pack_, cache_dir_, ram_dir_;
  bool json_ = false, quiet_ = false, no_progress_ = false;
  CacheOptions co_;
  WarmupOptions wo_;
  const std::chrono::steady_clock::time_point t0_ =
      std::chrono::steady_clock::now();
  std::unique_ptr<Progress> progress_;
  std::chrono::steady_clock::time_point started_;
  bool first_call_ = true;
  WarmupResult result_;
  std::vector<CacheTierStats> tiers_;
  std::mutex warnings_mu_;
  std::vector<std::string> warnings_;
  uint64_t records_ = 0;    // in the pack
  uint64_t oversized_ = 0;  // records larger than the cache takes
};

int WarmupCommand::ParseArgs(const Argv& argv) {
  CommandLine cl("warmup");
  CLI::App& app = cl.app();
  std::string limit_text, ram_limit_text, threads_text, block_text;
  app.add_option("pack", pack_)->required();
  app.add_option("--cache", cache_dir_)->required();
  CLI::Option* limit_opt = app.add_option("--limit", limit_text);
  CLI::Option* ram_dir_opt = app.add_option("--ram-dir", ram_dir_);
  CLI::Option* ram_limit_opt = app.add_option("--ram-limit", ram_limit_text);
  CLI::Option* threads_opt = app.add_option("-j,--threads", threads_text);
  CLI::Option* block_opt = app.add_option("--block", block_text);
  app.add_flag("--json", json_);
  app.add_flag("-q,--quiet", quiet_);
  app.add_flag("--no-progress", no_progress_);
  if (int rc = cl.Parse(argv); rc >= 0) return rc;

  co_.dir = cache_dir_;
  if (cache_dir_.empty()) return Usage("warmup", "--cache needs a directory");
  const uint64_t kMaxSize = UINT64_MAX;
  if (limit_opt->count() > 0) {
    if (int rc = SizeOption("--limit", limit_text, 1, kMaxSize, &co_.limit);
        rc != kExitOk) {
      return rc;
    }
  }
  if (ram_limit_opt->count() > 0 && ram_dir_opt->count() == 0) {
    return Usage("warmup", "--ram-limit needs --ram-dir");
  }
  if (ram_dir_opt->count() > 0) {
    if (ram_dir_.empty()) return Usage("warmup", "--ram-dir needs a directory");
    co_.ram_dir = ram_dir_;
    if (ram_limit_opt->count() > 0) {
      if (int rc = SizeOption("--ram-limit", ram_limit_text, 1, kMaxSize,
                              &co_.ram_limit);
          rc != kExitOk) {
        return rc;
      }
    }
  }
  int threads = 0;
  if (int rc =
          ThreadsOption("warmup", threads_opt, threads_text, 4, 64, &threads);
      rc != kExitOk) {
    return rc;
  }
  wo_.threads = threads;
  if (block_opt->count() > 0) {
    if (int rc = SizeOption("--block", block_text, 64 << 10, 1ull << 30,
                            &wo_.block_bytes);
        rc != kExitOk) {
      return rc;
    }
  }
  return -1;
}

int WarmupCommand::Report(int code, const std::string& error, bool cache_full,
                          uint64_t not_cached) {
  if (!json_) return code;
  std::string j = "{\"ok\":" + std::string(error.empty() ? "true" : "false");
  if (!error.empty()) j += ",\"error\":" + JsonString(error);
  j += ",\"exit_code\":" + std::to_string(code);
  j += ",\"interrupted\":" +
       std::string(code == kExitInterrupted ? "true" : "false");
  j += ",\"pack\":" + JsonString(pack_);
  j += ",\"cache\":" + JsonString(cache_dir_);
  j += ",\"ram_dir\":" +
       (co_.ram_dir.empty() ? std::string("null") : JsonString(ram_dir_));
  j += ",\"records\":" + std::to_string(result_.records);
  j += ",\"already_cached\":" + std::to_string(result_.already_cached);
  j += ",\"added\":" + std::to_string(result_.added);
  j += ",\"refused\":" + std::to_string(result_.refused);
  j += ",\"not_cached\":" + std::to_string(not_cached);
  j += ",\"cache_full\":" + std::string(cache_full ? "true" : "false");
  j += ",\"oversized_records\":" + std::to_string(oversized_);
  j += ",\"bytes_read\":" + std::to_string(result_.bytes_read);
  j += ",\"bytes_total\":" + std::to_string(result_.bytes_total);
  const double seconds = result_.seconds > 0 ? result_.seconds : Since(t0_);
  j += ",\"seconds\":" + Fixed(seconds, 3);
  j += ",\"mb_per_s\":" +
       Fixed(seconds > 0
                 ? static_cast<double>(result_.bytes_read) / 1e6 / seconds
                 : 0.0,
             1);
  j += ",\"tiers\":[";
  for (size_t k = 0; k < tiers_.size(); ++k) {
    if (k) j += ",";
    j += CacheTierJson(tiers_[k]);
  }
  j += "],\"warnings\":[";
  {
    std::lock_guard<std::mutex> lock(warnings_mu_);
    for (size_t k = 0; k < warnings_.size(); ++k) {
      if (k) j += ",";
      j += JsonString(warnings_[k]);
    }
  }
  j += "]}\n";
  std::fflush(stderr);
  std::fputs(j.c_str(), stdout);
  return code;
}

// The cache's warnings: kept for --json, and printed over the progress
// line (erased first; it is redrawn at the next update).
void WarmupCommand::Warn(const std::string& m) {
  {
    std::lock_guard<std::mutex> lock(warnings_mu_);
    warnings_.push_back(m);
  }
  std::string line = std::string(progress_->enabled() ? "\r\x1b[K" : "") +
                     "ufspack: warning: " + Printable(m) + "\n";
  (void)WriteFd(2, line);
}

bool WarmupCommand::OnProgress(uint64_t done, uint64_t total) {
  if (first_call_) {
    started_ = std::chrono::steady_clock::now();
    first_call_ = false;
  }
  if (progress_->enabled()) {
    progress_->Update(TransferLine("warming up", done, total, Since(started_)));
  }
  return !Interrupted();
}

int WarmupCommand::Run() {
  // The pack first, without the cache: a missing or unreachable source is
  // an error naming it (nothing to warm up from), and no cache directory
  // is created for a mistyped path.
  {
    std::unique_ptr<Reader> probe;
    Status s = Reader::Open(pack_, {}, &probe);
    if (!s.ok()) {
      PrintError(s);
      return Report(ExitCodeFor(s), std::string(s.message()), false, 0);
    }
    records_ = probe->size();
  }
  progress_ = std::make_unique<Progress>(!quiet_ && !json_ && !no_progress_);
  co_.warn = [this](const std::string& m) { Warn(m); };
  std::shared_ptr<Cache> cache;
  Status s = Cache::Open(co_, &cache);
  if (!s.ok()) {
    PrintError(s);
    // A damaged cache directory is not a damaged pack (exit status 3).
    return Report(kExitFailure, std::string(s.message()), false, 0);
  }
  const std::vector<CacheTierStats> before = cache->Stats();
  InstallSignalHandlers();
  started_ = std::chrono::steady_clock::now();
  wo_.progress = [this](uint64_t done, uint64_t total) {
    return OnProgress(done, total);
  };
  s = Warmup(pack_, cache, wo_, &result_);
  progress_->Clear();
  tiers_ = cache->Stats();
  return Outcome(s, before);
}

int WarmupCommand::Outcome(const Status& s,
                           const std::vector<CacheTierStats>& before) {
  // Set only once Warmup() got as far as planning; the pack's count anyway.
  result_.records = records_;
  const uint64_t not_cached =
      result_.records - result_.already_cached - result_.added;
  const double rate =
      result_.seconds > 0
          ? static_cast<double>(result_.bytes_read) / 1e6 / result_.seconds
          : 0;
  // Cache read and write errors during this run, from the tiers' shared
  // counters (a cache clear cannot reset them while this process is
  // attached).
  uint64_t errors = 0;
  for (size_t k = 0; k < tiers_.size() && k < before.size(); ++k) {
    errors += tiers_[k].errors - before[k].errors;
  }
  std::string limits;
  for (const CacheTierStats& t : tiers_) {
    if (!limits.empty()) limits += ", ";
    limits += FormatBytes(t.limit);
    if (tiers_.size() > 1) limits += " in " + Printable(t.dir);
  }
  oversized_ = result_.too_large;
  if (!s.ok()) {
    PrintError(s);
    std::fprintf(stderr,
                 "ufspack: %s records cached by this run before the error; "
                 "what was cached stays\n",
                 FormatCount(result_.added).c_str());
    return Report(ExitCodeFor(s), std::string(s.message()), false, not_cached);
  }
  if (result_.stopped) {
    std::fprintf(stderr,
                 "ufspack: interrupted: %s of %s read, %s records added "
                 "(%s of %s cached); run the same command again to resume\n",
                 FormatBytes(result_.bytes_read).c_str(),
                 FormatBytes(result_.bytes_total).c_str(),
                 FormatCount(result_.added).c_str(),
                 FormatCount(result_.already_cached + result_.added).c_str(),
                 FormatCount(result_.records).c_str());
    return Report(kExitInterrupted, "interrupted", false, not_cached);
  }
  const bool full = result_.refused > 0 && errors == 0;
  if (!quiet_ && !json_) {
    std::printf(
        "warmed up %s: %s records, %s already cached, %s added, "
        "%s refused by a full cache%s; %s read in %s s (%s MB/s) -> %s\n",
        Printable(pack_).c_str(), FormatCount(result_.records).c_str(),
        FormatCount(result_.already_cached).c_str(),
        FormatCount(result_.added).c_str(),
        FormatCount(result_.refused).c_str(),
        oversized_ > 0 ? (", " + FormatCount(oversized_) +
                          " larger than the cache takes (" +
                          FormatBytes(kMaxCacheEntryBytes + 1) + ")")
                             .c_str()
                       : "",
        FormatBytes(result_.bytes_read).c_str(),
        Fixed(result_.seconds, 2).c_str(), Fixed(rate, 1).c_str(),
        Printable(cache_dir_).c_str());
    std::fflush(stdout);  // before what follows on stderr, when both are one
  }
  if (errors > 0 && not_cached > 0) {
    // A failing cache disk (EIO, ENOSPC): the warm-up did not do its job.
    const std::string msg =
        FormatCount(not_cached) +
        " records not cached: the cache could not be read or written (" +
        FormatCount(errors) + " errors; see the warning above)";
    PrintError(Status::IOError(msg));
    return Report(kExitFailure, msg, false, not_cached);
  }
  if (full) {
    std::fprintf(stderr,
                 "ufspack: cache full: %s records not cached (limit %s); "
                 "raise --limit\n",
                 FormatCount(not_cached).c_str(), limits.c_str());
  }
  return Report(kExitOk, "", full, not_cached);
}

}  // namespace

int CmdWarmup(const Argv& argv) {
  WarmupCommand command;
  return command.Main(argv);
}

}  // namespace cli
}  // namespace ufspack
