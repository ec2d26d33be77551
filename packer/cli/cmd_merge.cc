// Copyright 2026 The ufspack Authors.
//
// `ufspack merge`: one logical pack over several packs, without copying
// their records (MergePacks, ufspack/merge.h).
#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"
#include "ufspack/merge.h"
#include "util.h"

namespace ufspack {
namespace cli {

const char kMergeHelp[] =
    R"(Usage: ufspack merge <part>... -o <out> [--json] [--quiet]

Publishes one pack over the packs <part>... without copying their records:
<out>/manifest.ufs names each part by its path relative to <out> and by its
pack id (docs/format.md, "Merged packs").  Every reader (ufspack info, ls,
cat, extract, verify, the C++ Reader, ufspack.Pack, MyImageFolder) opens
<out> as it opens a single pack.  Merging is fast (it reads each part's
header, metadata, first and last records and class table, nothing more),
so 1,000 parts merge in well under a second.

The parts are either all the parts of one `ufspack build --part <i>/<n>`
split, given in any order (they are put in part order; a missing, repeated
or foreign part is an error naming it), or packs built separately, joined
in the order given.  They must share one class table (or all be flat),
and each class's records must be contiguous across them.  Record names
must be unique across the parts: `ufspack verify <out>` checks that, and
every part, in full.

Keep the parts where they are: moving <out> and the parts together (same
relative layout) is fine; moving one alone breaks the merged pack, and
opening it then fails naming the missing part.  Rebuilding a part (another
pack id) makes opening the merged pack fail until it is merged again.
<out> is created if missing; an existing manifest there is replaced
atomically.  A directory holding a single pack (index.ufs) is refused.

Options:
  -o, --output <out>   the merged pack's directory (required)
      --json           one JSON object on stdout instead of the summary line
  -q, --quiet          no summary

Exit status: 0 merged, 1 failed (nothing written), 2 usage error, 3 a part
is damaged.

Examples:
  ufspack merge train.parts/part-* -o train.ufspack
  for i in $(seq 0 63); do ufspack build /nas/train --part $i/64 \
      -o /nas/train.parts/part-$i; done; ufspack merge /nas/train.parts/* \
      -o /nas/train.ufspack
)";

int CmdMerge(const Argv& argv) {
  CommandLine cl("merge");
  std::vector<std::string> parts;
  std::string out;
  bool json = false, quiet = false;
  cl.app()
      .add_option("part", parts)
      ->required()
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cl.app().add_option("-o,--output", out)->required();
  cl.app().add_flag("--json", json);
  cl.app().add_flag("-q,--quiet", quiet);
  if (int rc = cl.Parse(argv); rc >= 0) return rc;
  MergeSummary summary;
  Status s = MergePacks(parts, out, &summary);
  if (!s.ok()) {
    PrintError(s);
    std::fprintf(stderr, "ufspack: nothing written; %s left as it was\n",
                 Printable(out).c_str());
    if (json) {
      std::fputs(("{\"ok\":false,\"error\":" + JsonString(s.message()) +
                  ",\"output\":" + JsonString(out) + "}\n")
                     .c_str(),
                 stdout);
    }
    return ExitCodeFor(s);
  }
  if (json) {
    std::string j = "{\"ok\":true";
    j += ",\"output\":" + JsonString(out);
    j += ",\"manifest\":" + JsonString(summary.manifest_path);
    j += ",\"pack_id\":\"" + summary.pack_id.ToHex() + "\"";
    j += ",\"parts\":" + std::to_string(summary.parts);
    j += ",\"split\":" + std::string(summary.split ? "true" : "false");
    j += ",\"records\":" + std::to_string(summary.records);
    j += ",\"classes\":" + std::to_string(summary.classes);
    j += ",\"data_bytes\":" + std::to_string(summary.data_bytes);
    j += ",\"manifest_bytes\":" + std::to_string(summary.manifest_bytes);
    j += ",\"seconds\":" + Fixed(summary.seconds, 3) + "}\n";
    std::fputs(j.c_str(), stdout);
  } else if (!quiet) {
    std::printf(
        "merged %s parts%s (%s records, %s classes, %s of data; manifest %s) "
        "in %s s -> %s\n",
        FormatCount(summary.parts).c_str(),
        summary.split ? " of one split" : "",
        FormatCount(summary.records).c_str(),
        FormatCount(summary.classes).c_str(),
        FormatBytes(summary.data_bytes).c_str(),
        FormatBytes(summary.manifest_bytes).c_str(),
        Fixed(summary.seconds, 3).c_str(), Printable(out).c_str());
  }
  return kExitOk;
}

const char kAppendHelp[] =
    R"(Usage: ufspack append <pack> <dir> [--relabel] [options]

Adds to <pack> every file of the ImageFolder tree <dir> that the pack does
not hold yet (by name), without rewriting anything: the new files become a
new part, <pack>/append-XXXXXX, and <pack>/manifest.ufs lists the records in
ImageFolder's order of <dir>.  <pack> then reads (MyImageFolder, ls, cat, the
C++ Reader) as a fresh build of <dir> would: same classes, order, labels and
bytes.  Records whose files are gone from <dir> are kept where they were.
Files are selected as the pack's were (its --flat and --extensions); a file
whose name the pack already holds keeps its packed bytes even if it changed
(rebuild to pick up changed files).

Labels follow ImageFolder's sorted class order.  A new class sorting before
an existing one would change existing labels (every class after it moves up
by one): append refuses and names the classes, unless --relabel is given;
then the pack's labels become ImageFolder's on <dir> (no record is rewritten;
the manifest maps the old parts' labels).  A new class sorting after every
existing one needs no flag.

Crash-safe: the new part is complete before the manifest is renamed into
place, so a crash or Ctrl-C at any point leaves <pack> as it was (a stray
append-* directory is removed by the next append); readers that opened
<pack> before keep reading what they opened.  Nothing to append (every file
already packed) changes nothing.

Options:
      --relabel             accept changed labels (see above)
  -j, --threads <n>         files read concurrently (default 32)
      --compress <codec>    none (default) or zstd[:level], for the new part
      --skip-unreadable     skip (and report) files that cannot be read
  -q, --quiet               no progress and no summary
      --no-progress         no progress display
      --json                one JSON object on stdout instead of the summary

Exit status: 0 appended (or nothing to append), 1 failed (the pack is left
as it was), 2 usage error (a relabeling append without --relabel included),
130 interrupted.

Examples:
  ufspack append /nas/train.ufspack /nas/train
  ufspack append train.ufspack /nas/train --relabel --json
)";

int CmdAppend(const Argv& argv) {
  CommandLine cl("append");
  std::string pack, dir, threads_text, compress = "none";
  bool relabel = false, skip = false, quiet = false, no_progress = false,
       json = false;
  cl.app().add_option("pack", pack)->required();
  cl.app().add_option("dir", dir)->required();
  CLI::Option* threads_opt = cl.app().add_option("-j,--threads", threads_text);
  cl.app().add_option("--compress", compress);
  cl.app().add_flag("--relabel", relabel);
  cl.app().add_flag("--skip-unreadable", skip);
  cl.app().add_flag("-q,--quiet", quiet);
  cl.app().add_flag("--no-progress", no_progress);
  cl.app().add_flag("--json", json);
  if (int rc = cl.Parse(argv); rc >= 0) return rc;
  AppendOptions options;
  int threads = 0;
  if (int rc = ThreadsOption("append", threads_opt, threads_text, 32, 1024,
                             &threads);
      rc != kExitOk) {
    return rc;
  }
  options.build.threads = threads;
  if (int rc = CompressOption("append", compress, &options.build.writer);
      rc != kExitOk) {
    return rc;
  }
  options.build.skip_unreadable = skip;
  options.relabel = relabel;
  InstallSignalHandlers();
  options.build.cancel = InterruptFlag();
  Progress progress(!quiet && !no_progress);
  progress.Update("scanning " + Printable(dir) + " ...", true);
  options.build.progress = [&](const BuildProgress& p) {
    if (!progress.enabled()) return;
    progress.Update("appending " + FormatCount(p.files_done) + "/" +
                    FormatCount(p.files_total) + " files  " +
                    FormatBytes(p.bytes_in));
  };
  AppendSummary summary;
  Status s = AppendPack(pack, dir, options, &summary);
  progress.Clear();
  for (const std::string& w : summary.warnings) {
    std::fprintf(stderr, "ufspack: warning: %s\n", Printable(w).c_str());
  }
  if (!s.ok()) {
    const int code = s.IsAborted() ? kExitInterrupted
                     : s.IsInvalidArgument() && summary.relabeled_classes > 0
                         ? kExitUsage
                         : ExitCodeFor(s);
    if (s.IsAborted()) {
      std::fprintf(stderr, "ufspack: interrupted; %s left as it was\n",
                   Printable(pack).c_str());
    } else {
      PrintError(s);
      std::fprintf(stderr, "ufspack: nothing appended; %s left as it was\n",
                   Printable(pack).c_str());
    }
    if (json) {
      std::fputs(("{\"ok\":false,\"error\":" + JsonString(s.message()) +
                  ",\"exit_code\":" + std::to_string(code) + "}\n")
                     .c_str(),
                 stdout);
    }
    return code;
  }
  if (json) {
    std::string j = "{\"ok\":true";
    j += ",\"pack\":" + JsonString(pack);
    j += ",\"manifest\":" + JsonString(summary.manifest_path);
    j += ",\"part\":" + JsonString(summary.part_dir);
    j += ",\"pack_id\":\"" + summary.pack_id.ToHex() + "\"";
    j += ",\"appended\":" + std::to_string(summary.appended);
    j += ",\"records\":" + std::to_string(summary.records);
    j += ",\"new_classes\":" + std::to_string(summary.new_classes);
    j += ",\"relabeled_classes\":" + std::to_string(summary.relabeled_classes);
    j += ",\"kept\":" + std::to_string(summary.kept);
    j += ",\"parts\":" + std::to_string(summary.parts);
    j += ",\"segments\":" + std::to_string(summary.segments);
    j += ",\"seconds\":" + Fixed(summary.seconds, 3) + "}\n";
    std::fputs(j.c_str(), stdout);
  } else if (!quiet) {
    if (summary.appended == 0) {
      std::printf("nothing to append: every file under %s is in %s\n",
                  Printable(dir).c_str(), Printable(pack).c_str());
    } else {
      std::printf(
          "appended %s records (%s new classes%s) in %s s -> %s: %s records "
          "in %s parts\n",
          FormatCount(summary.appended).c_str(),
          FormatCount(summary.new_classes).c_str(),
          summary.relabeled_classes > 0
              ? (", " + FormatCount(summary.relabeled_classes) +
                 " classes relabeled")
                    .c_str()
              : "",
          Fixed(summary.seconds, 3).c_str(), Printable(pack).c_str(),
          FormatCount(summary.records).c_str(),
          FormatCount(summary.parts).c_str());
    }
    if (summary.kept > 0) {
      std::printf("kept %s records whose files are no longer under %s\n",
                  FormatCount(summary.kept).c_str(), Printable(dir).c_str());
    }
  }
  return kExitOk;
}

}  // namespace cli
}  // namespace ufspack
