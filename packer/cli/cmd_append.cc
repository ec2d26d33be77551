// Copyright 2026 The ufspack Authors.
//
// `ufspack append`: a tree's new files added to a pack as a new part, in
// ImageFolder's order (AppendPack, ufspack/merge.h).
#include <cerrno>
#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"
#include "ufspack/merge.h"
#include "util.h"

namespace ufspack {
namespace cli {

const char kAppendHelp[] =
    R"(Usage: ufspack append <pack> <dir> [--relabel] [--files-from LIST] [options]

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

With --files-from LIST, <dir> is not scanned: the candidates are the files
LIST names, one per line (NUL-separated with --null; "-" reads standard
input), each a path relative to <dir> as the pack names records
("class/sub/x.jpg"; a leading "./" or "<dir>/" is dropped, so the output of
`find <dir> -newer ...` works).  The append then costs what the listed files
cost, whatever the size of the tree.  Listed files the pack holds are
skipped; names outside the pack's selection (other extensions, a file
directly under <dir>) are skipped with a warning; a listed file that cannot
be read fails the append naming it (or is skipped with --skip-unreadable).
Each new record goes where ImageFolder's order of the grown tree puts it
(binary search in its class): the pack's records must be in that order,
checked for each class that gets a file (a build leaves them so; records
kept for deleted files by a scanning append, or a merge of separately built
packs, may not: then append by scanning, or rebuild).  Listed files inside
the pack's own directory are skipped.  Records whose files are gone from
<dir> are not looked for.

Options:
      --relabel             accept changed labels (see above)
      --files-from <list>   append the files named in <list> ("-": stdin)
                            instead of scanning <dir>
      --null                <list> is NUL-separated (find -print0)
  -j, --threads <n>         files read concurrently (default 32)
      --compress <codec>    none (default) or zstd[:level], for the new part
      --layout <layout>     sorted or shuffled[:SEED], for the new part
                            (default: the pack's layout; see build --help)
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
  find /nas/train -newer train.ufspack/index.ufs -type f |
      ufspack append train.ufspack /nas/train --files-from -
)";

// The names of --files-from `path` ("-": standard input), split at '\n'
// (or NUL), empty lines dropped.
bool ReadFileList(const std::string& path, bool null_separated,
                  std::vector<std::string>* names) {
  FILE* f = path == "-" ? stdin : std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    PrintError(
        Status::FromErrno(path + ": cannot open --files-from list", errno));
    return false;
  }
  std::string all;
  char buf[1 << 16];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof(buf), f)) > 0) all.append(buf, got);
  const bool failed = std::ferror(f) != 0;
  if (f != stdin) std::fclose(f);
  if (failed) {
    PrintError(Status::IOError(path + ": cannot read --files-from list"));
    return false;
  }
  const char sep = null_separated ? '\0' : '\n';
  size_t start = 0;
  while (start < all.size()) {
    size_t end = all.find(sep, start);
    if (end == std::string::npos) end = all.size();
    if (end > start) names->push_back(all.substr(start, end - start));
    start = end + 1;
  }
  return true;
}

int CmdAppend(const Argv& argv) {
  CommandLine cl("append");
  std::string pack, dir, threads_text, compress = "none", layout;
  std::string files_from;
  bool relabel = false, skip = false, quiet = false, no_progress = false,
       json = false, null_separated = false;
  cl.app().add_option("pack", pack)->required();
  cl.app().add_option("dir", dir)->required();
  CLI::Option* files_opt = cl.app().add_option("--files-from", files_from);
  cl.app().add_flag("--null", null_separated);
  CLI::Option* threads_opt = cl.app().add_option("-j,--threads", threads_text);
  cl.app().add_option("--compress", compress);
  CLI::Option* layout_opt = cl.app().add_option("--layout", layout);
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
  if (layout_opt->count() > 0) {
    options.layout.emplace();
    if (Status s = ParseDataLayout(layout, &*options.layout); !s.ok()) {
      return Usage("append", "--layout: " + std::string(s.message()));
    }
  }
  options.build.skip_unreadable = skip;
  options.relabel = relabel;
  if (null_separated && files_opt->count() == 0) {
    std::fprintf(stderr, "ufspack append: --null needs --files-from\n");
    return kExitUsage;
  }
  if (files_opt->count() > 0) {
    options.files.emplace();
    if (!ReadFileList(files_from, null_separated, &*options.files))
      return kExitFailure;
  }
  InstallSignalHandlers();
  options.build.cancel = InterruptFlag();
  Progress progress(!quiet && !no_progress);
  progress.Update(options.files
                      ? "looking up " + FormatCount(options.files->size()) +
                            " listed files ..."
                      : "scanning " + Printable(dir) + " ...",
                  true);
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
      std::fputs(
          JsonObject{{"ok", false}, {"error", s.message()}, {"exit_code", code}}
              .Line()
              .c_str(),
          stdout);
    }
    return code;
  }
  if (json) {
    const JsonObject j{
        {"ok", true},
        {"pack", pack},
        {"manifest", summary.manifest_path},
        {"part", summary.part_dir},
        {"pack_id", summary.pack_id.ToHex()},
        {"appended", summary.appended},
        {"records", summary.records},
        {"new_classes", summary.new_classes},
        {"relabeled_classes", summary.relabeled_classes},
        {"kept", summary.kept},
        {"already_packed", summary.already_packed},
        {"parts", summary.parts},
        {"segments", summary.segments},
        {"seconds", JsonObject::Value::Fixed(summary.seconds, 3)}};
    std::fputs(j.Line().c_str(), stdout);
  } else if (!quiet) {
    if (summary.appended == 0) {
      std::printf("nothing to append: every %s is in %s\n",
                  options.files ? "listed file"
                                : ("file under " + Printable(dir)).c_str(),
                  Printable(pack).c_str());
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
