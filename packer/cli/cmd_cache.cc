// Copyright 2026 The ufspack Authors.
//
// `ufspack cache stat` and `ufspack cache clear`: a node-local cache
// directory's figures, and emptying it (ufspack/cache.h).
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"
#include "ufspack/cache.h"
#include "util.h"

namespace ufspack {
namespace cli {

const char kCacheHelp[] = R"(Usage: ufspack cache stat <dir>... [--json]
       ufspack cache clear <dir>... [--json]

Inspects and empties node-local cache directories, as 'ufspack warmup'
and readers given a cache fill them.  Each <dir> is one tier: give the
disk directory and the RAM directory (--ram-dir) to see both.

Commands:
  stat <dir>...    limit, bytes charged and on disk, entries, tables, hits,
                   misses, hit rate, inserts, refusals, damaged entries
                   dropped, errors, tables evicted
  clear <dir>...   remove every table no running process uses

'ufspack cache <command> --help' explains each command.

Exit status: 0 done, 1 a <dir> is missing or not a ufspack cache, 2 usage
error.

Examples:
  ufspack cache stat /local/nvme/ufspack
  ufspack cache clear /local/nvme/ufspack /dev/shm/ufspack
)";

const char kCacheStatHelp[] = R"(Usage: ufspack cache stat <dir>... [--json]

Prints the figures of each cache directory <dir> (one tier), without
attaching to it (running readers are not disturbed):

  limit           the most the directory may hold
  charged         bytes reserved for its entries and tables (<= limit)
  on disk         bytes allocated under <dir> (st_blocks)
  entries         records and samples held, in how many tables (packs)
  hits, misses    lookups served from the cache, and not; the hit rate
  inserts         entries added
  refused         admissions refused because the directory was full
  dropped         damaged entries found (checksum, torn write) and dropped
  errors          failed cache reads or writes (EIO, ENOSPC)
  evicted tables  whole packs evicted to make room

The counters are shared by every process using the directory and count
from its creation (or from the last 'ufspack cache clear' no process
overlapped).

Options:
      --json    one JSON object: {"tiers": [{dir, limit, charged_bytes,
                disk_bytes, entries, tables, hits, misses, hit_rate,
                inserts, refused, dropped, errors, evicted_tables}]}

Exit status: 0 printed, 1 a <dir> is missing or not a ufspack cache.

Examples:
  ufspack cache stat /local/nvme/ufspack
  ufspack cache stat /local/nvme/ufspack /dev/shm/ufspack --json
)";

const char kCacheClearHelp[] = R"(Usage: ufspack cache clear <dir>... [--json]

Removes every table (a pack's cached records, or a sample table) of each
cache directory <dir> that no running process has attached, and says what
was removed and how many tables were kept because running processes use
them.  When no process uses <dir> at all, the counters start again at 0.
Nothing but the cache's own files is ever removed.

Options:
      --json    one JSON object: {"dirs": [{dir, removed_tables,
                removed_entries, freed_bytes, kept_tables}]}

Exit status: 0 cleared, 1 a <dir> is missing or not a ufspack cache.

Example:
  ufspack cache clear /local/nvme/ufspack /dev/shm/ufspack
)";

std::string CacheTierJson(const CacheTierStats& t) {
  const uint64_t lookups = t.hits + t.misses;
  const JsonObject::Value hit_rate =
      lookups > 0
          ? JsonObject::Value::Fixed(
                static_cast<double>(t.hits) / static_cast<double>(lookups), 4)
          : JsonObject::Value::Null();
  return JsonObject{{"dir", t.dir},
                    {"limit", t.limit},
                    {"charged_bytes", t.charged_bytes},
                    {"disk_bytes", t.disk_bytes},
                    {"entries", t.entries},
                    {"tables", t.tables},
                    {"hits", t.hits},
                    {"misses", t.misses},
                    {"hit_rate", hit_rate},
                    {"inserts", t.inserts},
                    {"refused", t.refused},
                    {"dropped", t.dropped},
                    {"errors", t.errors},
                    {"evicted_tables", t.evicted_tables}}
      .Text();
}

namespace {

// Cache::Stat with a clearer error for a missing path or a file.
Status StatCacheDir(const std::string& dir, CacheTierStats* stats) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    return Status::FromErrno(dir + ": cache directory", errno);
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status::IOError(dir + ": not a directory (a ufspack cache is one)");
  }
  return Cache::Stat(dir, stats);
}

int CmdCacheStat(const Argv& argv) {
  CommandLine cl("cache stat");
  std::vector<std::string> dirs;
  bool json = false;
  cl.app().add_option("dir", dirs)->required();
  cl.app().add_flag("--json", json);
  if (int rc = cl.Parse(argv); rc >= 0) return rc;
  std::vector<CacheTierStats> tiers(dirs.size());
  for (size_t k = 0; k < dirs.size(); ++k) {
    Status s = StatCacheDir(dirs[k], &tiers[k]);
    if (!s.ok()) {
      PrintError(s);
      return kExitFailure;
    }
  }
  if (json) {
    std::string j = "{\"tiers\":[";
    for (size_t k = 0; k < tiers.size(); ++k) {
      if (k) j += ",";
      j += CacheTierJson(tiers[k]);
    }
    j += "]}\n";
    std::fputs(j.c_str(), stdout);
    return kExitOk;
  }
  for (size_t k = 0; k < tiers.size(); ++k) {
    const CacheTierStats& t = tiers[k];
    if (k) std::printf("\n");
    const double pct = t.limit > 0
                           ? 100.0 * static_cast<double>(t.charged_bytes) /
                                 static_cast<double>(t.limit)
                           : 0;
    const uint64_t lookups = t.hits + t.misses;
    std::printf("cache:          %s\n", Printable(t.dir).c_str());
    std::printf("limit:          %s (%s bytes)\n", FormatBytes(t.limit).c_str(),
                FormatCount(t.limit).c_str());
    std::printf("charged:        %s (%s%% of the limit)\n",
                FormatBytes(t.charged_bytes).c_str(), Fixed(pct, 1).c_str());
    std::printf("on disk:        %s\n", FormatBytes(t.disk_bytes).c_str());
    std::printf("entries:        %s in %s table%s\n",
                FormatCount(t.entries).c_str(), FormatCount(t.tables).c_str(),
                t.tables == 1 ? "" : "s");
    std::printf("hits:           %s\n", FormatCount(t.hits).c_str());
    std::printf("misses:         %s\n", FormatCount(t.misses).c_str());
    std::printf("hit rate:       %s\n",
                lookups > 0 ? (Fixed(100.0 * static_cast<double>(t.hits) /
                                         static_cast<double>(lookups),
                                     1) +
                               "%")
                                  .c_str()
                            : "-");
    std::printf("inserts:        %s\n", FormatCount(t.inserts).c_str());
    std::printf("refused:        %s (the cache was full)\n",
                FormatCount(t.refused).c_str());
    std::printf("dropped:        %s (damaged entries)\n",
                FormatCount(t.dropped).c_str());
    std::printf("errors:         %s\n", FormatCount(t.errors).c_str());
    std::printf("evicted tables: %s\n", FormatCount(t.evicted_tables).c_str());
  }
  return kExitOk;
}

int CmdCacheClear(const Argv& argv) {
  CommandLine cl("cache clear");
  std::vector<std::string> dirs;
  bool json = false;
  cl.app().add_option("dir", dirs)->required();
  cl.app().add_flag("--json", json);
  if (int rc = cl.Parse(argv); rc >= 0) return rc;
  // Every directory is checked before any is cleared.
  std::vector<CacheTierStats> before(dirs.size());
  for (size_t k = 0; k < dirs.size(); ++k) {
    Status s = StatCacheDir(dirs[k], &before[k]);
    if (!s.ok()) {
      PrintError(s);
      return kExitFailure;
    }
  }
  auto minus = [](uint64_t a, uint64_t b) { return a > b ? a - b : 0; };
  std::string j = "{\"dirs\":[";
  for (size_t k = 0; k < dirs.size(); ++k) {
    uint64_t kept = 0;
    Status s = Cache::Clear(dirs[k], &kept);
    CacheTierStats after;
    if (s.ok()) s = Cache::Stat(dirs[k], &after);
    if (!s.ok()) {
      PrintError(s);
      return kExitFailure;
    }
    const uint64_t tables = minus(before[k].tables, after.tables);
    const uint64_t entries = minus(before[k].entries, after.entries);
    const uint64_t freed = minus(before[k].disk_bytes, after.disk_bytes);
    if (json) {
      if (k) j += ",";
      j += JsonObject{{"dir", dirs[k]},
                      {"removed_tables", tables},
                      {"removed_entries", entries},
                      {"freed_bytes", freed},
                      {"kept_tables", kept}}
               .Text();
      continue;
    }
    std::printf("cleared %s: removed %s table%s (%s entries, %s freed)",
                Printable(dirs[k]).c_str(), FormatCount(tables).c_str(),
                tables == 1 ? "" : "s", FormatCount(entries).c_str(),
                FormatBytes(freed).c_str());
    if (kept > 0) {
      std::printf("; kept %s table%s in use by running processes\n",
                  FormatCount(kept).c_str(), kept == 1 ? "" : "s");
    } else {
      std::printf("; none in use\n");
    }
  }
  if (json) std::fputs((j + "]}\n").c_str(), stdout);
  return kExitOk;
}

}  // namespace

int CmdCache(const Argv& argv) {
  if (argv.empty()) {
    std::fputs(kCacheHelp, stderr);
    return kExitUsage;
  }
  const std::string& sub = argv[0];
  const Argv rest(argv.begin() + 1, argv.end());
  if (sub == "stat") return CmdCacheStat(rest);
  if (sub == "clear") return CmdCacheClear(rest);
  // --help wins over anything else on the line, as for every command.
  for (const std::string& a : argv) {
    if (a == "-h" || a == "--help") {
      std::fputs(kCacheHelp, stdout);
      return kExitOk;
    }
  }
  return Usage("cache",
               "unknown command '" + Printable(sub) + "' (stat or clear)");
}

}  // namespace cli
}  // namespace ufspack
