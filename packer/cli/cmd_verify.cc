// Copyright 2026 The ufspack Authors.
//
// `ufspack verify`: checks the index and every record of a pack.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "commands.h"
#include "record_read_ahead.h"
#include "ufspack/reader.h"
#include "util.h"

namespace ufspack {
namespace cli {

const char kVerifyHelp[] =
    R"(Usage: ufspack verify <pack> [-j <n>] [--cache <dir>] [--json] [--quiet]

<pack> is a pack directory, its index.ufs, or a pack URL: s3://bucket/prefix
(AWS settings from the environment and ~/.aws) or https://host/path
(docs/remote.md).

Checks the index (header and body checksums, every record entry, the class
and lookup tables) and reads every record, checking its XXH3-64 checksum
and, for compressed records, its decompressed size.  Reports every problem
found with record, name and offset.

Exit status: 0 when the pack is intact, 3 when it is damaged, 1 when it
cannot be read at all (missing files, I/O errors).

Example:
  ufspack verify /nas/imagenet/train.ufspack -j32

Options:
      --json          one JSON object: ok, records, bytes, problems
  -q, --quiet         print nothing; the exit status tells
  -j, --threads <n>   records read concurrently (default 8, 32 for an
                      s3:// or https:// pack; 1-256); the
                      report is the same, in record order, whatever <n> is
      --no-progress   no progress display
      --cache <dir>   read through the node-local cache <dir>: cached
                      records are checked as the cache serves them, the
                      others are read from data.ufs and cached; a cache
                      that cannot be used is reported once and skipped
)";

int CmdVerify(const Argv& argv) {
  CommandLine cl("verify");
  std::string pack, threads_text;
  bool json = false, quiet = false, no_progress = false;
  cl.app().add_option("pack", pack)->required();
  CLI::Option* threads_opt = cl.app().add_option("-j,--threads", threads_text);
  cl.app().add_flag("--json", json);
  cl.app().add_flag("-q,--quiet", quiet);
  cl.app().add_flag("--no-progress", no_progress);
  std::string cache_dir;
  CLI::Option* cache_opt = cl.app().add_option("--cache", cache_dir);
  if (int rc = cl.Parse(argv); rc >= 0) return rc;
  int threads = 0;
  if (int rc = ThreadsOption("verify", threads_opt, threads_text,
                             kDefaultReadThreads, kMaxReadThreads, &threads);
      rc != kExitOk) {
    return rc;
  }
  const auto t0 = std::chrono::steady_clock::now();
  // The first 1000 problems, as messages.  Records that fail with the
  // message of the problem before (a part of a merged pack that cannot be
  // opened fails each of its records with one message naming the part)
  // are said once, with their count.
  std::vector<std::string> problems;
  uint64_t problem_count = 0;
  uint64_t shown = 0;  // problems the kept messages stand for
  std::string last;
  bool last_kept = false;
  uint64_t repeats = 0;
  auto end_repeats = [&] {
    if (repeats > 0 && last_kept) {
      problems.back() += " (the same for " + FormatCount(repeats) +
                         " more record" + (repeats == 1 ? "" : "s") + ")";
    }
    repeats = 0;
  };
  auto problem = [&](const Status& st) {
    ++problem_count;
    std::string message(st.message());
    if (problem_count > 1 && message == last) {
      ++repeats;
      if (last_kept) ++shown;
      return;
    }
    end_repeats();
    last_kept = problems.size() < 1000;
    if (last_kept) {
      problems.push_back(message);
      ++shown;
    }
    last = std::move(message);
  };
  auto report = [&](bool opened, uint64_t records, uint64_t bytes, int code) {
    end_repeats();
    if (json) {
      std::string j =
          "{\"ok\":" + std::string(code == kExitOk ? "true" : "false");
      j += ",\"opened\":" + std::string(opened ? "true" : "false");
      j += ",\"records\":" + std::to_string(records);
      j += ",\"bytes\":" + std::to_string(bytes);
      j += ",\"problem_count\":" + std::to_string(problem_count);
      j += ",\"problems\":[";
      for (size_t k = 0; k < problems.size(); ++k) {
        if (k) j += ",";
        j += JsonString(problems[k]);
      }
      j += "],\"seconds\":" + Fixed(Since(t0), 3) + "}\n";
      std::fputs(j.c_str(), stdout);
    } else if (!quiet) {
      if (code == kExitOk) {
        std::printf("OK: %s records, %s verified in %s s\n",
                    FormatCount(records).c_str(), FormatBytes(bytes).c_str(),
                    Fixed(Since(t0), 2).c_str());
      } else {
        std::printf("%s: %s problem%s found\n",
                    code == kExitCorrupt ? "CORRUPT" : "FAILED",
                    FormatCount(problem_count).c_str(),
                    problem_count == 1 ? "" : "s");
        for (const std::string& p : problems)
          std::printf("  %s\n", Printable(p).c_str());
        if (problem_count > shown) {
          std::printf("  ... %s more\n",
                      FormatCount(problem_count - shown).c_str());
        }
      }
    }
    return code;
  };

  ReaderOptions options;
  if (cache_opt->count() > 0) OpenCache(cache_dir, &options);
  std::unique_ptr<Reader> reader;
  Status s = Reader::Open(pack, options, &reader);
  if (!s.ok()) {
    problem(s);
    return report(false, 0, 0,
                  ExitCodeFor(s) == kExitOk ? kExitFailure : ExitCodeFor(s));
  }
  if (threads_opt->count() == 0 && reader->prefers_batches()) {
    threads = kDefaultRemoteReadThreads;
  }
  s = reader->CheckIndex();
  if (!s.ok()) problem(s);
  Progress progress(!quiet && !json && !no_progress);
  InstallSignalHandlers();
  bool io_failure = false;
  uint64_t bytes = 0;
  const uint64_t n = reader->size();
  // Records are read on `threads` threads; problems are collected here, in
  // record order, so the report does not depend on the thread count.
  RecordReadAhead prefetch(
      n, threads, PrefetchWindow(threads), [&](uint64_t i, Prefetched* out) {
        if (Interrupted()) {  // the consumer stops at record i
          out->status = Status::Aborted("interrupted");
          return;
        }
        Record r;
        out->status = reader->GetRecord(i, &r);
        if (!out->status.ok()) return;
        if (r.codec == Codec::kZstd) {
          // Streamed: original_length (which a hostile entry and frame
          // header may both claim to be 32768 times the stored bytes) sizes
          // nothing.
          out->status =
              reader->Stream(r, [](std::string_view) { return Status::OK(); });
        } else {
          thread_local std::string buf;
          buf.resize(r.original_length);  // raw: bytes really in data.ufs
          out->status = reader->Read(r, buf.data(), buf.size());
        }
      });
  for (uint64_t i = 0; i < n; ++i) {
    if (!Interrupted()) s = prefetch.Take(i).status;
    if (Interrupted() || s.IsAborted()) {
      progress.Clear();
      std::fprintf(stderr, "ufspack: interrupted after %s of %s records\n",
                   FormatCount(i).c_str(), FormatCount(n).c_str());
      return kExitInterrupted;
    }
    Record r;
    if (s.ok()) s = reader->GetRecord(i, &r);
    if (!s.ok()) {
      if (!s.IsCorruption()) io_failure = true;
      problem(s);
      continue;
    }
    bytes += r.original_length;
    // The index pages of records behind us leave the resident set (a
    // 100M-record index is 9 GB; see Reader::ReleaseRecords).
    constexpr uint64_t kReleaseEvery = 1 << 16;
    if ((i + 1) % kReleaseEvery == 0)
      reader->ReleaseRecords(i + 1 - kReleaseEvery, kReleaseEvery);
    progress.Update("verifying " + FormatCount(i + 1) + "/" + FormatCount(n) +
                    " records  " + FormatBytes(bytes));
  }
  progress.Clear();
  int code =
      problem_count == 0 ? kExitOk : (io_failure ? kExitFailure : kExitCorrupt);
  return report(true, n, bytes, code);
}

}  // namespace cli
}  // namespace ufspack
