// Copyright 2026 The ufspack Authors.
//
// `ufspack build`: packs a directory tree (ImageFolder layout by default),
// into a local directory or, through a staging directory, to S3.
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "ufspack/builder.h"
#include "ufspack/file.h"
#include "ufspack/manifest.h"
#include "ufspack/merge.h"
#include "ufspack/posix_io.h"
#include "ufspack/reader.h"
#include "ufspack/remote.h"
#include "util.h"

namespace ufspack {
namespace cli {

const char kBuildHelp[] =
    R"(Usage: ufspack build <dir>|<archive>... [-o <out>] [options]

Packs the files under <dir> into <out>/data.ufs and <out>/index.ufs.
<out> may be s3://bucket/prefix/name.ufspack: the pack is built in a
staging directory, then uploaded (data.ufs first, index.ufs last; large
files as S3 multipart uploads) and the staging directory removed.  With
--parts <n>, the <n> parts of the split are built and merged there, and
the merged pack goes up: each part under a key of its own, the manifest
last (see docs/remote.md, "Merged packs on S3").
https:// and http:// packs are read-only: they can be read, not written.

By default <dir> is read as torchvision's ImageFolder reads it: every
directory directly under <dir> is a class (sorted by name, hidden ones
included); its files, walked recursively with directory symlinks
followed, become the samples, in ImageFolder's order.  Only files whose
lower-cased name ends with .jpg .jpeg .png .ppm .bmp .pgm .tif .tiff
.webp are packed.  Labels, order and names match ImageFolder exactly.

<archive>: a tar (plain or .gz .bz2 .xz .zst), a zip, or another format
libarchive reads, packed as the tree that extracting it gives, with
nothing extracted: the archive is read once, in order.  A top-level
member that is itself an archive is a class named after it without its
suffix (ImageNet's train tar holds n01440764.tar, ...).  Records are
stored in archive order (layout "source"; the index is in ImageFolder
order as always); --part, --parts and --layout shuffled need a tree.  A
member named outside the tree (.., an absolute path) or twice, a size
far beyond what the archive can hold, and a damaged or truncated archive
fail the build; links, devices and archives nested deeper are skipped
and reported, encrypted members too with --skip-unreadable.
WebDataset shards: several archives (shards/*.tar, with -o), a brace
pattern ('shards-{000000..000099}.tar', quoted; at most 1,000,000 names)
or an {a,b} list, read one after another, in the order given, into one
pack.  An archive whose first member is a file at the top level is taken
as shards: its samples (000123.jpg, 000123.cls, ... sharing a key) are
packed with every field, without classes, each sample's files back to
back; --label-field labels them.  An archive with no member is refused,
as an empty directory is.

Options:
  -o, --output <out>        output directory (default: ./<name of dir or
                            archive, without its suffix>.ufspack)
                            created if missing; an existing pack there is
                            replaced only when the new one is complete;
                            or an s3:// URL (credentials, region, endpoint
                            from the AWS environment; see docs/remote.md)
      --staging <dir>       s3:// output: where the pack is built before the
                            upload (needs room for it; default $TMPDIR or
                            /tmp); a fresh directory made there is removed
                            afterwards, whether the upload succeeds or not
      --part-size <size>    s3:// output: files larger than this go up as
                            multipart uploads in parts of this size (default
                            16M; 5M to 5G)
      --parts <n>           s3:// output: build all <n> parts of the split
                            below, one after another in the staging
                            directory, merge them, and upload the merged
                            pack: part k goes to <out>/<pack id>-part-<k>/
                            (keys led by the part's pack id spread the
                            parts over S3's prefixes), <out>/manifest.ufs
                            last; parts already uploaded by an interrupted
                            run are not sent again; a single pack at <out>
                            from before is deleted once the manifest is up.
                            (For local output, run --part <i>/<n> jobs and
                            `ufspack merge`, or ufspack.build(parts=<n>).)
      --part <i>/<n>        build only part <i> (0-based) of <n>: the
                            ImageFolder-ordered sample list is split into
                            <n> contiguous ranges of about equal bytes
                            (every part job scans the whole tree and stats
                            every file, so all agree on the split, then
                            lists again only the classes of its range; the
                            tree must not change meanwhile); the part
                            keeps the whole class table.  Run the <n> jobs
                            anywhere (a Slurm array, a Kubernetes indexed
                            Job), then join them with `ufspack merge`
                            (see docs/scale.md)
  -j, --threads <n>         files read concurrently (default 32: on network
                            storage every open and read is a round trip)
      --compress <codec>    none (default) or zstd[:level] (level 1-19, default
                            3); a record is stored compressed only when that
                            makes it smaller (JPEGs rarely, PNG/PPM/BMP/text do)
      --layout <layout>     order of the records in data.ufs: sorted
                            (default: ImageFolder order) or shuffled[:SEED]
                            (SEED default 0): runs of about 65,536 records
                            written in a seeded permutation, so that every
                            byte range of data.ufs mixes many classes and
                            ufspack.BlockSampler's blocks shuffle well.  The
                            index, the samples and their order are the same
                            either way; the same tree and SEED give the same
                            pack.  shuffled-samples[:SEED] permutes
                            multi-file samples (000123.jpg + 000123.cls)
                            instead of files, each one's files kept together
      --extensions <list>   comma-separated suffixes to pack instead of the
                            image defaults, e.g. .jpg,.png (case-insensitive)
      --all-files           pack every file, whatever its name
      --flat                no classes: pack every (matching) file under <dir>,
                            named by its path relative to <dir>
      --allow-empty         keep class directories with no matching file
                            (ImageFolder refuses them; so does build by default)
      --label-field <f>     archives (WebDataset shards): each sample's label
                            is the decimal number in its file of field <f>
                            (000123.cls for --label-field cls); the classes
                            are 0, 1, ...; every field is kept (unless
                            --extensions names some)
      --skip-unreadable     skip (and report) files or directories that cannot
                            be read or change while being read, instead of failing
  -q, --quiet               no progress and no summary
      --no-progress         no progress display (it is shown only on a terminal)
      --json                one JSON object on stdout instead of the summary
                            line: what was packed, what was skipped and why;
                            on failure {"ok": false, "error": ...}
  -v, --verbose             per-file detail on stderr: each packed record's
                            name, size and codec (read back from the new index)

The same tree given by the same <dir> path always gives a byte-identical
pack.  Interrupting (Ctrl-C) or any error removes the temporary files and
leaves <out> as it was.  For s3:// output, Ctrl-C during the build or the
upload of data.ufs aborts the upload (no part stays stored) and leaves
<out> as it was; once data.ufs is replaced, index.ufs is uploaded too (a
new data.ufs beside the old index.ufs would be a pack nobody can open).
While a pack is replaced in place, a reader opening it between the two
uploads gets an error "not one pack", never a mix of the two packs.

Exit status: 0 packed, 1 failed (nothing written; a damaged or hostile
source archive too), 2 usage error, 130 interrupted.

Examples:
  ufspack build /nas/imagenet/train -o /nas/imagenet/train.ufspack
  ufspack build ILSVRC2012_img_train.tar -o /nas/imagenet/train.ufspack
  ufspack build 'shards-{000000..000099}.tar' -o shards.ufspack
  ufspack build 'shards-{000000..000099}.tar' --label-field cls
  ufspack build logs/ --flat --all-files --compress zstd:9 -o logs.pack
  ufspack build train/ -j64 --skip-unreadable --json > build.json
  ufspack build /data/train -o s3://my-bucket/datasets/train.ufspack
  ufspack build /data/train --parts 8 -o s3://my-bucket/datasets/train.ufspack
  ufspack build /nas/train --part 3/64 -o /nas/train.parts/part-003
)";

namespace {

std::string DefaultOutput(const std::string& src) {
  std::string s = src;
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  size_t slash = s.find_last_of('/');
  std::string base = slash == std::string::npos ? s : s.substr(slash + 1);
  if (std::string_view stem = ArchiveStem(base); !stem.empty()) {
    base = std::string(stem);
  }
  // A shard pattern ("shards-{000000..000099}"): the name before it.
  if (size_t brace = base.find('{'); brace != std::string::npos) {
    base.erase(brace);
    while (!base.empty() &&
           (base.back() == '-' || base.back() == '_' || base.back() == '.')) {
      base.pop_back();
    }
  }
  if (base.empty() || base == "." || base == ".." || base == "/") base = "pack";
  return base + ".ufspack";
}

// A warning of the build split into the path it is about and the reason.
// Warnings read "<path>: <reason>" (a skipped file's ends "; skipped"); the
// path starts with `src` as given, so the split is looked for after it.
// BuildSummary keeps warnings as text only: a path that itself holds ": "
// below `src` is split at that point.
struct Skip {
  std::string path, reason;
};
Skip SplitWarning(const std::string& src, const std::string& w) {
  size_t from = w.compare(0, src.size(), src) == 0 ? src.size() : 0;
  size_t colon = w.find(": ", from);
  if (colon == std::string::npos) return {"", w};
  Skip s{w.substr(0, colon), w.substr(colon + 2)};
  const std::string kSkipped = "; skipped";
  if (s.reason.size() > kSkipped.size() &&
      s.reason.compare(s.reason.size() - kSkipped.size(), kSkipped.size(),
                       kSkipped) == 0) {
    s.reason.erase(s.reason.size() - kSkipped.size());
  }
  return s;
}

// The "skipped" fields of build --json: every warning as {path, reason}.
void AddSkipsJson(const std::string& src, const BuildSummary& summary,
                  JsonObject* j) {
  JsonArray skipped;
  bool truncated = false;
  for (const std::string& w : summary.warnings) {
    if (w == "(more warnings not shown)") {
      truncated = true;
      continue;
    }
    Skip s = SplitWarning(src, w);
    skipped.Add(JsonObject::Value::Raw(
        JsonObject{{"path", s.path}, {"reason", s.reason}}.Text()));
  }
  j->Add({{"skipped_count", summary.skipped},
          {"skipped", JsonObject::Value::Raw(skipped.Text())},
          {"skipped_truncated", truncated}});
}

// -v: the records of the new pack, read back from its index (the build
// reports no per-file events), one line each on stderr.
void PrintPackedRecords(const std::string& out) {
  std::unique_ptr<Reader> reader;
  Status s = Reader::Open(out, {}, &reader);
  if (!s.ok()) {
    PrintError(s);
    return;
  }
  std::string lines;
  for (uint64_t i = 0; i < reader->size(); ++i) {
    Record r;
    if (!reader->GetRecord(i, &r).ok()) break;
    lines += "ufspack: packed " + Printable(r.name) + " (" +
             FormatCount(r.original_length) + " bytes";
    if (r.codec == Codec::kZstd) {
      lines += ", zstd " + FormatCount(r.stored_length);
    }
    lines += ")\n";
    if (lines.size() > (1 << 16)) {
      (void)WriteFd(2, lines);
      lines.clear();
    }
  }
  (void)WriteFd(2, lines);
}

bool IsS3(const std::string& out) { return out.rfind("s3://", 0) == 0; }

bool IsHttp(const std::string& out) {
  return out.rfind("http://", 0) == 0 || out.rfind("https://", 0) == 0;
}

// A fresh directory made with mkdtemp under a parent directory, removed
// with everything in it on destruction.
class StagingDir {
 public:
  StagingDir() = default;
  ~StagingDir() {
    if (!path_.empty()) {
      internal::RemoveTree(path_);
    }
  }
  StagingDir(const StagingDir&) = delete;
  StagingDir& operator=(const StagingDir&) = delete;

  // `parent` empty: $TMPDIR, else /tmp.
  Status Create(std::string parent) {
    if (parent.empty()) {
      const char* tmp = ::getenv("TMPDIR");
      parent = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
    }
    while (parent.size() > 1 && parent.back() == '/') parent.pop_back();
    std::string templ = parent + "/ufspack-build-XXXXXX";
    if (::mkdtemp(templ.data()) == nullptr) {
      return Status::FromErrno(
          "staging directory: cannot create " + templ + " (--staging)", errno);
    }
    path_ = templ;
    return Status::OK();
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Uploads the pack built in `staging` (single or merged) to `url`, showing
// progress and, unless `quiet`, the upload's log lines.  Sets *bytes (every
// file) and *seconds.
Status Upload(const std::string& staging, const std::string& url,
              uint64_t part_bytes, bool quiet, Progress* progress,
              uint64_t* bytes, double* seconds) {
  UploadOptions uo;
  uo.part_bytes = part_bytes;
  uo.cancel = InterruptFlag();
  uo.remote = RemoteOptions::FromEnvironment();
  const auto started = std::chrono::steady_clock::now();
  uo.progress = [&](uint64_t done, uint64_t total) {
    *bytes = total;
    if (!progress->enabled()) return;
    progress->Update(TransferLine("uploading", done, total, Since(started)));
  };
  uo.log = [&](const std::string& line) {
    if (quiet) return;
    progress->Clear();
    std::fprintf(stderr, "ufspack: %s\n", Printable(line).c_str());
  };
  progress->Update("uploading to " + Printable(url) + " ...", true);
  Status s = UploadPack(staging, url, uo);
  *seconds = Since(started);
  return s;
}

// What `ufspack build` was asked to do.
struct BuildArgs {
  std::string src, out, staging_parent;  // src: the first of sources
  std::vector<std::string> sources;      // several: archives into one pack
  bool to_s3 = false, quiet = false, no_progress = false, json = false,
       verbose = false;
  uint64_t part_bytes = UploadOptions().part_bytes;
  uint32_t all_parts = 0;  // --parts: build and merge this many (s3:// only)
  BuildOptions options;
};

// --extensions lists (comma-separated, repeatable) into the scan options.
int ParseExtensions(const std::vector<std::string>& lists, ScanOptions* scan) {
  scan->extensions.clear();
  for (const std::string& list : lists) {
    size_t start = 0;
    while (start <= list.size()) {
      size_t comma = list.find(',', start);
      if (comma == std::string::npos) comma = list.size();
      std::string ext = list.substr(start, comma - start);
      if (!ext.empty()) scan->extensions.push_back(ext);
      start = comma + 1;
    }
  }
  if (scan->extensions.empty()) {
    return Usage("build", "--extensions needs at least one suffix");
  }
  return kExitOk;
}

// --part <i>/<n>.
int ParsePart(const std::string& text, BuildOptions* options) {
  const size_t slash = text.find('/');
  uint64_t part = 0, parts = 0;
  if (slash == std::string::npos || !ParseUint(text.substr(0, slash), &part) ||
      !ParseUint(text.substr(slash + 1), &parts) || parts < 1 ||
      parts > 1000000 || part >= parts) {
    return Usage("build",
                 "--part takes <i>/<n> with 0 <= i < n <= 1000000, "
                 "not '" +
                     text + "'");
  }
  options->part = static_cast<uint32_t>(part);
  options->parts = static_cast<uint32_t>(parts);
  return kExitOk;
}

// The exit status when the command ends here (--help, a usage error), else
// -1 (as CommandLine::Parse).
int ParseBuildArgs(const Argv& argv, BuildArgs* a) {
  CommandLine cl("build");
  CLI::App& app = cl.app();
  std::string threads_text, compress = "none", part_size_text, part_text,
                            layout = "sorted";
  std::vector<std::string> extension_lists;
  bool all_files = false, flat = false, allow_empty = false,
       skip_unreadable = false;
  app.add_option("dir", a->sources)->required();
  CLI::Option* output_opt = app.add_option("-o,--output", a->out);
  CLI::Option* threads_opt = app.add_option("-j,--threads", threads_text);
  CLI::Option* staging_opt = app.add_option("--staging", a->staging_parent);
  CLI::Option* part_size_opt = app.add_option("--part-size", part_size_text);
  app.add_option("--compress", compress);
  app.add_option("--layout", layout);
  CLI::Option* part_opt = app.add_option("--part", part_text);
  std::string parts_text;
  CLI::Option* parts_opt = app.add_option("--parts", parts_text);
  CLI::Option* extensions_opt =
      app.add_option("--extensions", extension_lists)
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_flag("--all-files", all_files);
  app.add_flag("--flat", flat);
  app.add_flag("--allow-empty", allow_empty);
  app.add_option("--label-field", a->options.label_field);
  app.add_flag("--skip-unreadable", skip_unreadable);
  app.add_flag("-q,--quiet", a->quiet);
  app.add_flag("--no-progress", a->no_progress);
  app.add_flag("--json", a->json);
  app.add_flag("-v,--verbose", a->verbose);
  if (int rc = cl.Parse(argv); rc >= 0) return rc;
  a->src = a->sources[0];
  if (a->sources.size() > 1) {
    if (output_opt->count() == 0) {
      return Usage("build",
                   "name the pack with -o when packing several "
                   "archives into one");
    }
    for (const std::string& src : a->sources) {
      struct stat st;
      if (::stat(src.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        return Usage("build",
                     "several sources are archives (WebDataset "
                     "shards) packed into one; '" +
                         src + "' is a directory");
      }
    }
  }
  if (output_opt->count() == 0) a->out = DefaultOutput(a->src);
  a->to_s3 = IsS3(a->out);
  if (IsHttp(a->out)) {
    return Usage("build", a->out.substr(0, a->out.find('?')) +
                              ": read-only: upload to s3:// only (https:// "
                              "and http:// packs can be read, not written)");
  }
  if (!a->to_s3 && (staging_opt->count() > 0 || part_size_opt->count() > 0)) {
    return Usage("build", "--staging and --part-size are for s3:// output");
  }
  if (part_size_opt->count() > 0 &&
      (!ParseSize(part_size_text, &a->part_bytes) ||
       a->part_bytes < (5 << 20) || a->part_bytes > (uint64_t{5} << 30))) {
    return Usage("build", "--part-size takes a size from 5M to 5G, not '" +
                              part_size_text + "'");
  }
  BuildOptions& options = a->options;
  int threads = 0;
  if (int rc =
          ThreadsOption("build", threads_opt, threads_text, 32, 1024, &threads);
      rc != kExitOk) {
    return rc;
  }
  options.threads = threads;
  if (int rc = CompressOption("build", compress, &options.writer);
      rc != kExitOk) {
    return rc;
  }
  if (Status s = ParseDataLayout(layout, &options.layout); !s.ok()) {
    return Usage("build", "--layout: " + std::string(s.message()));
  }
  if (extensions_opt->count() > 0) {
    if (int rc = ParseExtensions(extension_lists, &options.scan);
        rc != kExitOk) {
      return rc;
    }
  }
  if (part_opt->count() > 0) {
    if (int rc = ParsePart(part_text, &options); rc != kExitOk) return rc;
  }
  if (parts_opt->count() > 0) {
    uint64_t n = 0;
    if (!ParseUint(parts_text, &n) || n < 1 || n > 1000000) {
      return Usage("build", "--parts takes a count from 1 to 1000000, not '" +
                                parts_text + "'");
    }
    if (part_opt->count() > 0) {
      return Usage("build",
                   "--parts builds every part; --part <i>/<n> builds one");
    }
    if (!a->to_s3) {
      return Usage("build",
                   "--parts is for s3:// output (the parts are built and "
                   "merged in the staging directory); for a local pack run "
                   "--part <i>/<n> for each part, then `ufspack merge`");
    }
    a->all_parts = static_cast<uint32_t>(n);
  }
  options.scan.all_files = all_files;
  options.scan.flat = flat;
  options.scan.allow_empty = allow_empty;
  options.skip_unreadable = skip_unreadable;
  return -1;
}

// The progress line of a build of `src`.
std::function<void(const BuildProgress&)> ProgressLine(const std::string& src,
                                                       Progress* progress) {
  return [src, progress](const BuildProgress& p) {
    if (!progress->enabled()) return;
    const std::string classes =
        p.classes_total > 0 ? "class " + FormatCount(p.classes_scanned) + "/" +
                                  FormatCount(p.classes_total)
                            : "";
    if (p.splitting) {
      progress->Update("sizing " + Printable(src) +
                       " for the split: " + FormatCount(p.files_total) +
                       " files" + (classes.empty() ? "" : ", " + classes));
      return;
    }
    // While a large tree is still being listed the total grows: estimate
    // it from the share of classes listed.
    double total = static_cast<double>(p.files_total);
    if (!p.scan_done && p.classes_scanned > 0 && p.classes_total > 0) {
      total = std::max(total, total * static_cast<double>(p.classes_total) /
                                  static_cast<double>(p.classes_scanned));
    }
    double rate =
        p.seconds > 0 ? static_cast<double>(p.files_done) / p.seconds : 0;
    double eta = rate > 0 && (p.scan_done || p.classes_total > 0)
                     ? (total - static_cast<double>(p.files_done)) / rate
                     : -1;
    progress->Update(
        "packing " + FormatCount(p.files_done) + "/" +
        (p.scan_done
             ? FormatCount(p.files_total)
             : FormatCount(p.files_total) + "+ (listing " +
                   (classes.empty() ? std::string("files") : classes) + ")") +
        " files  " + FormatBytes(p.bytes_in) + "  " +
        FormatCount(static_cast<uint64_t>(rate)) + " files/s  ETA " +
        (p.scan_done || eta < 0 ? "" : "~") + FormatDuration(eta));
  };
}

// A failed (or interrupted) build: the message, and the JSON object.
int ReportFailure(const BuildArgs& a, const Status& s,
                  const BuildSummary& summary, bool upload_started) {
  // Never kExitCorrupt: that says a pack is damaged, and a build reads no
  // pack; a damaged source (an archive's bad CRC) is a failure like any.
  const int code = s.IsAborted() ? kExitInterrupted : kExitFailure;
  if (s.IsAborted()) {
    std::fprintf(stderr, "ufspack: interrupted; %s left as it was\n",
                 Printable(a.out).c_str());
  } else {
    PrintError(s);
    // An upload error says itself what it left at the destination.
    if (!upload_started) {
      std::fprintf(stderr, "ufspack: nothing written; %s left as it was\n",
                   Printable(a.out).c_str());
    }
  }
  if (a.json) {
    JsonObject j{{"ok", false},
                 {"error", s.message()},
                 {"interrupted", s.IsAborted()},
                 {"exit_code", code},
                 {"output", a.out}};
    AddSkipsJson(a.src, summary, &j);
    std::fflush(stderr);
    std::fputs(j.Line().c_str(), stdout);
  }
  return code;
}

// The JSON object of a build that succeeded.
std::string SuccessJson(const BuildArgs& a, const BuildSummary& summary,
                        const std::string& index_name,
                        const std::string& data_name, double ratio,
                        uint64_t uploaded, double upload_seconds) {
  const BuildOptions& options = a.options;
  using Value = JsonObject::Value;
  JsonObject j{{"ok", true}, {"output", a.out}};
  if (a.all_parts > 1) {
    // A merged pack: its manifest, no data file of its own.
    j.Add({{"manifest", index_name}, {"parts", a.all_parts}});
  } else {
    j.Add({{"index", index_name}, {"data", data_name}});
  }
  if (a.to_s3) {
    j.Add({{"url", a.out},
           {"uploaded_bytes", uploaded},
           {"upload_seconds", Value::Fixed(upload_seconds, 3)}});
  }
  j.Add({{"pack_id", summary.pack_id.ToHex()},
         {"files", summary.files},
         {"classes", summary.classes},
         {"compressed_records", summary.compressed},
         {"bytes_in", summary.bytes_in},
         {"bytes_out", summary.bytes_out},
         {"index_bytes", summary.index_bytes},
         {"compression_ratio", Value::Fixed(ratio, 4)}});
  if (options.parts > 1) {
    j.Add({{"part", options.part},
           {"parts", options.parts},
           {"part_first", summary.part_first},
           {"part_samples", summary.part_samples},
           {"split_samples", summary.split_samples}});
  }
  if (summary.not_matching > 0) j.Add({{"not_matching", summary.not_matching}});
  j.Add({{"scan_seconds", Value::Fixed(summary.scan_seconds, 3)},
         {"seconds", Value::Fixed(summary.seconds, 3)}});
  AddSkipsJson(a.src, summary, &j);
  return j.Line();
}

// The summary lines of a build that succeeded.
void PrintSuccess(const BuildArgs& a, const BuildSummary& summary, double ratio,
                  uint64_t uploaded, double upload_seconds) {
  const BuildOptions& options = a.options;
  const std::string classes =
      summary.classes == 0 ? "without classes"
                           : "in " + FormatCount(summary.classes) + " classes";
  std::printf(
      "packed %s files (%s in, %s data + %s index out, ratio %s) %s, %s "
      "skipped, %s s (%s files/s) -> %s\n",
      FormatCount(summary.files).c_str(), FormatBytes(summary.bytes_in).c_str(),
      FormatBytes(summary.bytes_out).c_str(),
      FormatBytes(summary.index_bytes).c_str(), Fixed(ratio, 2).c_str(),
      classes.c_str(), FormatCount(summary.skipped).c_str(),
      Fixed(summary.seconds, 2).c_str(),
      FormatCount(summary.seconds > 0
                      ? static_cast<uint64_t>(summary.files / summary.seconds)
                      : summary.files)
          .c_str(),
      Printable(a.out).c_str());
  if (summary.not_matching > 0) {
    std::printf(
        "left out %s archive members whose names do not match the "
        "extensions (--all-files packs every file)\n",
        FormatCount(summary.not_matching).c_str());
  }
  if (options.parts > 1) {
    std::printf("part %u/%u: samples %s to %s of %s\n", options.part,
                options.parts, FormatCount(summary.part_first).c_str(),
                FormatCount(summary.part_first + summary.part_samples).c_str(),
                FormatCount(summary.split_samples).c_str());
  }
  if (a.all_parts > 1) {
    std::printf("in %u parts, merged: pack id %s\n", a.all_parts,
                summary.pack_id.ToHex().c_str());
  }
  if (a.to_s3) {
    std::printf("uploaded %s to %s in %s s (%s MB/s)\n",
                FormatBytes(uploaded).c_str(), Printable(a.out).c_str(),
                Fixed(upload_seconds, 2).c_str(),
                Fixed(upload_seconds > 0
                          ? static_cast<double>(uploaded) / upload_seconds / 1e6
                          : 0,
                      1)
                    .c_str());
  }
}

// --parts: builds the a.all_parts parts of the split into
// <dir>/parts/part-NNNNN, one after another, and merges them into <dir>.
// The summary adds up the parts' (the classes and the pack id are the
// merged pack's).
Status BuildAllParts(const BuildArgs& a, const std::string& dir,
                     Progress* progress, BuildSummary* summary) {
  const auto started = std::chrono::steady_clock::now();
  const std::string parts_dir = dir + "/parts";
  if (::mkdir(parts_dir.c_str(), 0777) != 0) {
    return Status::FromErrno(parts_dir, errno);
  }
  std::vector<std::string> names;
  for (uint32_t k = 0; k < a.all_parts; ++k) {
    char leaf[32];
    std::snprintf(leaf, sizeof(leaf), "/part-%05u", k);
    names.push_back(parts_dir + leaf);
    BuildOptions options = a.options;
    options.part = k;
    options.parts = a.all_parts;
    const std::string what =
        "part " + std::to_string(k) + "/" + std::to_string(a.all_parts);
    options.progress = ProgressLine(a.src + " (" + what + ")", progress);
    progress->Update("building " + what + " ...", true);
    BuildSummary part;
    UFSPACK_RETURN_IF_ERROR(BuildPack(a.src, names.back(), options, &part)
                                .WithContext("building " + what));
    summary->files += part.files;
    summary->classes = part.classes;
    summary->skipped += part.skipped;
    summary->compressed += part.compressed;
    summary->bytes_in += part.bytes_in;
    summary->bytes_out += part.bytes_out;
    summary->index_bytes += part.index_bytes;
    summary->scan_seconds += part.scan_seconds;
    for (std::string& w : part.warnings) {
      if (summary->warnings.size() < BuildSummary::kMaxWarnings) {
        summary->warnings.push_back(std::move(w));
      }
    }
  }
  progress->Update("merging " + std::to_string(a.all_parts) + " parts ...",
                   true);
  MergeSummary merged;
  UFSPACK_RETURN_IF_ERROR(MergePacks(names, dir, &merged));
  summary->pack_id = merged.pack_id;
  summary->index_bytes += merged.manifest_bytes;
  summary->index_path = merged.manifest_path;
  summary->seconds = Since(started);
  return Status::OK();
}

}  // namespace

int CmdBuild(const Argv& argv) {
  BuildArgs a;
  if (int rc = ParseBuildArgs(argv, &a); rc >= 0) return rc;
  InstallSignalHandlers();
  // s3:// output: built here first, removed (with the pack) on return.
  StagingDir staging;
  std::string build_dir = a.out;
  if (a.to_s3) {
    Status st = staging.Create(a.staging_parent);
    if (!st.ok()) {
      PrintError(st);
      if (a.json) {
        const JsonObject j{{"ok", false},
                           {"error", st.message()},
                           {"interrupted", false},
                           {"exit_code", kExitFailure},
                           {"output", a.out}};
        std::fputs(j.Line().c_str(), stdout);
      }
      return kExitFailure;
    }
    build_dir = staging.path();
  }
  a.options.cancel = InterruptFlag();
  Progress progress(!a.quiet && !a.no_progress);
  progress.Update("scanning " + Printable(a.src) + " ...", true);
  a.options.progress = ProgressLine(a.src, &progress);

  BuildSummary summary;
  Status s =
      a.all_parts > 1 ? BuildAllParts(a, build_dir, &progress, &summary)
      : a.sources.size() > 1
          ? BuildPackFromArchives(a.sources, build_dir, a.options, &summary)
          : BuildPack(a.src, build_dir, a.options, &summary);
  uint64_t uploaded = 0;
  double upload_seconds = 0;
  bool upload_started = false;
  if (s.ok() && a.to_s3) {
    upload_started = true;
    if (a.verbose) {
      progress.Clear();
      PrintPackedRecords(build_dir);
    }
    s = Upload(build_dir, a.out, a.part_bytes, a.quiet, &progress, &uploaded,
               &upload_seconds);
  }
  progress.Clear();
  for (const std::string& w : summary.warnings) {
    std::fprintf(stderr, "ufspack: warning: %s\n", Printable(w).c_str());
  }
  if (!s.ok()) return ReportFailure(a, s, summary, upload_started);
  if (a.verbose && !a.to_s3) PrintPackedRecords(a.out);
  std::string index_name = summary.index_path, data_name = summary.data_path;
  if (a.to_s3 && !ResolvePackPath(a.out, &index_name, &data_name).ok()) {
    index_name = data_name = a.out;  // not reached: the upload resolved it
  }
  if (a.all_parts > 1) {
    index_name = DirName(index_name) + "/" + kManifestFileName;
    data_name.clear();
  }
  const double ratio = summary.bytes_out > 0
                           ? static_cast<double>(summary.bytes_in) /
                                 static_cast<double>(summary.bytes_out)
                           : 1.0;
  if (a.json) {
    std::fputs(SuccessJson(a, summary, index_name, data_name, ratio, uploaded,
                           upload_seconds)
                   .c_str(),
               stdout);
  } else if (!a.quiet) {
    PrintSuccess(a, summary, ratio, uploaded, upload_seconds);
  }
  return kExitOk;
}

}  // namespace cli
}  // namespace ufspack
