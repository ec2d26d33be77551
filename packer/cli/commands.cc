// Copyright 2026 The ufspack Authors.
#include "commands.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ufspack/builder.h"
#include "ufspack/format.h"
#include "ufspack/reader.h"
#include "util.h"

namespace ufspack {
namespace cli {
namespace {

const char kMainHelp[] =
    "ufspack: pack a directory of small files (an ImageFolder tree) into one\n"
    "data file and a fixed-width index, and read any file back with one "
    "pread.\n"
    "\n"
    "Usage: ufspack <command> [options] [arguments]\n"
    "\n"
    "Commands:\n"
    "  build <dir> [-o <out>]   pack a directory tree into <out>/data.ufs + "
    "index.ufs\n"
    "  info <pack>              header, counts, classes with sizes, "
    "compression ratio\n"
    "  ls <pack>                list record names (--long: labels, sizes, "
    "codecs)\n"
    "  cat <pack> <name|#N>     write one record's original bytes to stdout\n"
    "  extract <pack> <dir>     recreate the original files under <dir>\n"
    "  verify <pack>            check every record's checksum and the index\n"
    "  help [<command>]         show help for a command\n"
    "\n"
    "A <pack> is the directory holding index.ufs and data.ufs, or the "
    "index.ufs\n"
    "file itself.  'ufspack <command> --help' explains each command.\n"
    "\n"
    "Exit status: 0 success, 1 failure, 2 usage error, 3 the pack is corrupt,\n"
    "130 interrupted.  See docs/cli.md.\n";

const char kBuildHelp[] =
    "Usage: ufspack build <dir> [-o <out>] [options]\n"
    "\n"
    "Packs the files under <dir> into <out>/data.ufs and <out>/index.ufs.\n"
    "\n"
    "By default <dir> is read as torchvision's ImageFolder reads it: every\n"
    "directory directly under <dir> is a class (sorted by name, hidden ones\n"
    "included); its files, walked recursively with directory symlinks\n"
    "followed, become the samples, in ImageFolder's order.  Only files whose\n"
    "lower-cased name ends with .jpg .jpeg .png .ppm .bmp .pgm .tif .tiff\n"
    ".webp are packed.  Labels, order and names match ImageFolder exactly.\n"
    "\n"
    "Options:\n"
    "  -o, --output <out>        output directory (default: ./<name of "
    "dir>.ufspack)\n"
    "                            created if missing; an existing pack there "
    "is\n"
    "                            replaced only when the new one is complete\n"
    "  -j, --threads <n>         files read concurrently (default 32: on "
    "network\n"
    "                            storage every open and read is a round trip)\n"
    "      --compress <codec>    none (default) or zstd[:level] (level 1-19, "
    "default\n"
    "                            3); a record is stored compressed only when "
    "that\n"
    "                            makes it smaller (JPEGs rarely, "
    "PNG/PPM/BMP/text do)\n"
    "      --extensions <list>   comma-separated suffixes to pack instead of "
    "the\n"
    "                            image defaults, e.g. .jpg,.png "
    "(case-insensitive)\n"
    "      --all-files           pack every file, whatever its name\n"
    "      --flat                no classes: pack every (matching) file under "
    "<dir>,\n"
    "                            named by its path relative to <dir>\n"
    "      --allow-empty         keep class directories with no matching file\n"
    "                            (ImageFolder refuses them; so does build by "
    "default)\n"
    "      --skip-unreadable     skip (and report) files or directories that "
    "cannot\n"
    "                            be read or change while being read, instead "
    "of failing\n"
    "  -q, --quiet               no progress and no summary\n"
    "      --no-progress         no progress display (it is shown only on a "
    "terminal)\n"
    "\n"
    "The same tree given by the same <dir> path always gives a byte-identical\n"
    "pack.  Interrupting (Ctrl-C) or any error removes the temporary files "
    "and\n"
    "leaves <out> as it was.\n"
    "\n"
    "Examples:\n"
    "  ufspack build /nas/imagenet/train -o /nas/imagenet/train.ufspack\n"
    "  ufspack build logs/ --flat --all-files --compress zstd:9 -o logs.pack\n";

const char kInfoHelp[] =
    "Usage: ufspack info <pack> [--json]\n"
    "\n"
    "Prints the pack's header (format version, pack id, sizes), the number of\n"
    "records and classes, each class with its record count and bytes, and the\n"
    "compression ratio.\n"
    "\n"
    "Options:\n"
    "      --json    one JSON object instead of text\n";

const char kLsHelp[] =
    "Usage: ufspack ls <pack> [--long] [--json | --null]\n"
    "\n"
    "Lists the records' names (paths relative to the packed directory), one "
    "per\n"
    "line, in pack order (ImageFolder order).  As tar does in its listings, a\n"
    "backslash is shown as \\\\ and control characters and bytes that are "
    "not UTF-8\n"
    "as \\xNN, so that every name is one line; --null and --json give the "
    "exact\n"
    "bytes.\n"
    "\n"
    "Options:\n"
    "  -l, --long    also index, label, class, stored and original size, "
    "codec\n"
    "      --json    a JSON array of objects (name, index, label, class, "
    "sizes,\n"
    "                codec, checksum); non-UTF-8 bytes in names appear as "
    "\\udcXX\n"
    "                escapes, which Python's os.fsencode() turns back into "
    "bytes\n"
    "  -0, --null    end each name with a NUL byte instead of a newline\n";

const char kCatHelp[] =
    "Usage: ufspack cat <pack> <name | #index>\n"
    "\n"
    "Writes one record's original bytes to standard output.  The record is\n"
    "named by its path in the pack (as 'ufspack ls -0' gives it) or by its\n"
    "index as #N.  A record whose name starts with '#' is named with --name "
    "or\n"
    "with a leading './' ('./#0'); '#N' that is also a record's name is "
    "refused\n"
    "as ambiguous.\n"
    "\n"
    "Options:\n"
    "      --name <name>    the record with this name\n"
    "      --index <n>      the record with this index\n"
    "      --no-verify      skip the checksum check\n";

const char kExtractHelp[] =
    "Usage: ufspack extract <pack> <dir> [--force]\n"
    "\n"
    "Writes every record back to <dir>/<name>, creating directories as "
    "needed.\n"
    "<dir> is created if missing.  Refuses, before writing anything, names "
    "that\n"
    "are absolute or contain '..', '.' or empty components.  Never writes\n"
    "through a symbolic link, and never overwrites an existing file unless\n"
    "--force is given.\n"
    "\n"
    "Options:\n"
    "  -f, --force         replace existing files (a symlink in the way is\n"
    "                      replaced, never followed)\n"
    "  -q, --quiet         no progress and no summary\n"
    "      --no-progress   no progress display\n";

const char kVerifyHelp[] =
    "Usage: ufspack verify <pack> [--json] [--quiet]\n"
    "\n"
    "Checks the index (header and body checksums, every record entry, the "
    "class\n"
    "and lookup tables) and reads every record, checking its XXH3-64 checksum\n"
    "and, for compressed records, its decompressed size.  Reports every "
    "problem\n"
    "found with record, name and offset.\n"
    "\n"
    "Exit status: 0 when the pack is intact, 3 when it is damaged, 1 when it\n"
    "cannot be read at all (missing files, I/O errors).\n"
    "\n"
    "Options:\n"
    "      --json          one JSON object: ok, records, bytes, problems\n"
    "  -q, --quiet         print nothing; the exit status tells\n"
    "      --no-progress   no progress display\n";

void PrintError(const Status& s) {
  std::fprintf(stderr, "ufspack: error: %s\n", Printable(s.message()).c_str());
}

int Usage(const std::string& cmd, const std::string& message) {
  std::fprintf(stderr, "ufspack %s: %s\n(see 'ufspack %s --help')\n",
               cmd.c_str(), message.c_str(), cmd.c_str());
  return kExitUsage;
}

bool ParseOrUsage(const std::string& cmd, const Argv& argv,
                  const std::vector<OptionSpec>& specs, size_t min_pos,
                  size_t max_pos, Args* args, int* exit_code) {
  std::string error;
  if (!args->Parse(argv, specs, &error)) {
    *exit_code = Usage(cmd, error);
    return false;
  }
  if (args->positional().size() < min_pos) {
    *exit_code = Usage(cmd, "missing argument");
    return false;
  }
  if (args->positional().size() > max_pos) {
    *exit_code =
        Usage(cmd, "unexpected argument '" + args->positional()[max_pos] + "'");
    return false;
  }
  return true;
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

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

std::string DefaultOutput(const std::string& src) {
  std::string s = src;
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  size_t slash = s.find_last_of('/');
  std::string base = slash == std::string::npos ? s : s.substr(slash + 1);
  if (base.empty() || base == "." || base == ".." || base == "/") base = "pack";
  return base + ".ufspack";
}

}  // namespace

const char* MainHelp() { return kMainHelp; }

const char* HelpFor(const std::string& command) {
  if (command == "build") return kBuildHelp;
  if (command == "info") return kInfoHelp;
  if (command == "ls") return kLsHelp;
  if (command == "cat") return kCatHelp;
  if (command == "extract") return kExtractHelp;
  if (command == "verify") return kVerifyHelp;
  return nullptr;
}

// --- build
// ---------------------------------------------------------------------

int CmdBuild(const Argv& argv) {
  Args args;
  int rc;
  if (!ParseOrUsage("build", argv,
                    {{"output", 'o', true},
                     {"threads", 'j', true},
                     {"compress", 0, true},
                     {"extensions", 0, true},
                     {"all-files", 0, false},
                     {"flat", 0, false},
                     {"allow-empty", 0, false},
                     {"skip-unreadable", 0, false},
                     {"quiet", 'q', false},
                     {"no-progress", 0, false}},
                    1, 1, &args, &rc)) {
    return rc;
  }
  const std::string src = args.positional()[0];
  const std::string out = args.Get("output", DefaultOutput(src));
  BuildOptions options;
  uint64_t threads = 32;
  if (args.Has("threads") && (!ParseUint(args.Get("threads"), &threads) ||
                              threads < 1 || threads > 1024)) {
    return Usage("build", "--threads takes a number from 1 to 1024");
  }
  options.threads = static_cast<int>(threads);
  const std::string compress = args.Get("compress", "none");
  if (compress == "zstd" || compress.rfind("zstd:", 0) == 0) {
    options.writer.compress = true;
    if (compress.size() > 5) {
      uint64_t level = 0;
      if (!ParseUint(compress.substr(5), &level) || level < 1 || level > 19) {
        return Usage("build",
                     "--compress zstd:<level> takes a level from 1 to 19");
      }
      options.writer.zstd_level = static_cast<int>(level);
    }
  } else if (compress != "none") {
    return Usage("build", "--compress takes 'none' or 'zstd[:level]', not '" +
                              compress + "'");
  }
  if (args.Has("extensions")) {
    options.scan.extensions.clear();
    for (const std::string& list : args.GetAll("extensions")) {
      size_t start = 0;
      while (start <= list.size()) {
        size_t comma = list.find(',', start);
        if (comma == std::string::npos) comma = list.size();
        std::string ext = list.substr(start, comma - start);
        if (!ext.empty()) options.scan.extensions.push_back(ext);
        start = comma + 1;
      }
    }
    if (options.scan.extensions.empty()) {
      return Usage("build", "--extensions needs at least one suffix");
    }
  }
  options.scan.all_files = args.Has("all-files");
  options.scan.flat = args.Has("flat");
  options.scan.allow_empty = args.Has("allow-empty");
  options.skip_unreadable = args.Has("skip-unreadable");
  const bool quiet = args.Has("quiet");

  InstallSignalHandlers();
  options.cancel = InterruptFlag();
  Progress progress(!quiet && !args.Has("no-progress"));
  progress.Update("scanning " + Printable(src) + " ...", true);
  options.progress = [&](const BuildProgress& p) {
    if (!progress.enabled()) return;
    double rate =
        p.seconds > 0 ? static_cast<double>(p.files_done) / p.seconds : 0;
    double eta = rate > 0
                     ? static_cast<double>(p.files_total - p.files_done) / rate
                     : -1;
    progress.Update("packing " + FormatCount(p.files_done) + "/" +
                    FormatCount(p.files_total) + " files  " +
                    FormatBytes(p.bytes_in) + "  " +
                    FormatCount(static_cast<uint64_t>(rate)) +
                    " files/s  ETA " + FormatDuration(eta));
  };

  BuildSummary summary;
  Status s = BuildPack(src, out, options, &summary);
  progress.Clear();
  for (const std::string& w : summary.warnings) {
    std::fprintf(stderr, "ufspack: warning: %s\n", Printable(w).c_str());
  }
  if (!s.ok()) {
    if (s.IsAborted()) {
      std::fprintf(stderr, "ufspack: interrupted; %s left as it was\n",
                   Printable(out).c_str());
      return kExitInterrupted;
    }
    PrintError(s);
    std::fprintf(stderr, "ufspack: nothing written; %s left as it was\n",
                 Printable(out).c_str());
    return ExitCodeFor(s);
  }
  if (!quiet) {
    double ratio = summary.bytes_out > 0
                       ? static_cast<double>(summary.bytes_in) /
                             static_cast<double>(summary.bytes_out)
                       : 1.0;
    std::printf(
        "packed %s files (%s in, %s data + %s index out, ratio %s) in %s "
        "classes, %s skipped, %s s (%s files/s) -> %s\n",
        FormatCount(summary.files).c_str(),
        FormatBytes(summary.bytes_in).c_str(),
        FormatBytes(summary.bytes_out).c_str(),
        FormatBytes(summary.index_bytes).c_str(), Fixed(ratio, 2).c_str(),
        FormatCount(summary.classes).c_str(),
        FormatCount(summary.skipped).c_str(), Fixed(summary.seconds, 2).c_str(),
        FormatCount(summary.seconds > 0
                        ? static_cast<uint64_t>(summary.files / summary.seconds)
                        : summary.files)
            .c_str(),
        Printable(out).c_str());
  }
  return kExitOk;
}

// --- info
// ------------------------------------------------------------------------

int CmdInfo(const Argv& argv) {
  Args args;
  int rc;
  if (!ParseOrUsage("info", argv, {{"json", 0, false}}, 1, 1, &args, &rc))
    return rc;
  std::unique_ptr<Reader> reader;
  if ((rc = OpenPack(args.positional()[0], {}, &reader)) != kExitOk) return rc;
  const PackInfo& info = reader->info();

  struct ClassStats {
    std::string_view name;
    uint64_t records = 0, stored = 0, original = 0;
  };
  std::vector<ClassStats> classes(info.class_count);
  for (uint64_t c = 0; c < info.class_count; ++c) {
    ClassInfo ci;
    Status s = reader->GetClass(c, &ci);
    if (!s.ok()) {
      PrintError(s);
      return ExitCodeFor(s);
    }
    classes[c].name = ci.name;
  }
  uint64_t stored = 0, original = 0, compressed = 0;
  for (uint64_t i = 0; i < info.record_count; ++i) {
    Record r;
    Status s = reader->GetRecord(i, &r);
    if (!s.ok()) {
      PrintError(s);
      return ExitCodeFor(s);
    }
    stored += r.stored_length;
    original += r.original_length;
    if (r.codec == Codec::kZstd) ++compressed;
    if (r.label < classes.size()) {
      ClassStats& cs = classes[r.label];
      cs.records++;
      cs.stored += r.stored_length;
      cs.original += r.original_length;
    }
  }
  const double ratio =
      stored > 0 ? static_cast<double>(original) / static_cast<double>(stored)
                 : 1.0;

  if (args.Has("json")) {
    std::string j = "{";
    j += "\"index\":" + JsonString(info.index_path);
    j += ",\"data\":" + JsonString(info.data_path);
    j += ",\"version\":" + std::to_string(info.version);
    j += ",\"pack_id\":\"" + info.pack_id.ToHex() + "\"";
    std::string_view source_root;
    if (reader->GetMetadata(kMetaSourceRoot, &source_root).ok()) {
      j += ",\"source_root\":" + JsonString(source_root);
    }
    j += ",\"flat\":" + std::string(info.flat ? "true" : "false");
    j += ",\"records\":" + std::to_string(info.record_count);
    j += ",\"classes\":" + std::to_string(info.class_count);
    j += ",\"data_size\":" + std::to_string(info.data_size);
    j += ",\"index_size\":" + std::to_string(info.index_size);
    j += ",\"stored_bytes\":" + std::to_string(stored);
    j += ",\"original_bytes\":" + std::to_string(original);
    j += ",\"compressed_records\":" + std::to_string(compressed);
    j += ",\"compression_ratio\":" + Fixed(ratio, 4);
    j += ",\"checksum\":\"xxh3-64\"";
    j += ",\"class_table\":[";
    for (size_t c = 0; c < classes.size(); ++c) {
      if (c) j += ",";
      j += "{\"label\":" + std::to_string(c) +
           ",\"name\":" + JsonString(classes[c].name) +
           ",\"records\":" + std::to_string(classes[c].records) +
           ",\"stored_bytes\":" + std::to_string(classes[c].stored) +
           ",\"original_bytes\":" + std::to_string(classes[c].original) + "}";
    }
    j += "]}\n";
    std::fputs(j.c_str(), stdout);
    return kExitOk;
  }

  std::printf("pack:          %s\n", Printable(info.index_path).c_str());
  std::printf("format:        ufspack version %u, checksums xxh3-64%s\n",
              info.version, info.flat ? ", flat (no classes)" : "");
  std::printf("pack id:       %s\n", info.pack_id.ToHex().c_str());
  std::string_view source_root;
  if (reader->GetMetadata(kMetaSourceRoot, &source_root).ok()) {
    std::printf("built from:    %s\n", Printable(source_root).c_str());
  }
  std::printf("records:       %s\n", FormatCount(info.record_count).c_str());
  std::printf("classes:       %s\n", FormatCount(info.class_count).c_str());
  std::printf("data.ufs:      %s (%s bytes)\n",
              FormatBytes(info.data_size).c_str(),
              FormatCount(info.data_size).c_str());
  std::printf("index.ufs:     %s (%s bytes, %s per record)\n",
              FormatBytes(info.index_size).c_str(),
              FormatCount(info.index_size).c_str(),
              info.record_count
                  ? FormatBytes(info.index_size / info.record_count).c_str()
                  : "-");
  std::printf("original size: %s, stored %s, ratio %s (%s records zstd)\n",
              FormatBytes(original).c_str(), FormatBytes(stored).c_str(),
              Fixed(ratio, 2).c_str(), FormatCount(compressed).c_str());
  if (!classes.empty()) {
    std::printf("\n%7s  %10s  %12s  %s\n", "label", "records", "bytes",
                "class");
    for (size_t c = 0; c < classes.size(); ++c) {
      std::printf("%7zu  %10s  %12s  %s\n", c,
                  FormatCount(classes[c].records).c_str(),
                  FormatBytes(classes[c].original).c_str(),
                  Printable(classes[c].name).c_str());
    }
  }
  return kExitOk;
}

// --- ls
// ------------------------------------------------------------------------------

int CmdLs(const Argv& argv) {
  Args args;
  int rc;
  if (!ParseOrUsage(
          "ls", argv,
          {{"long", 'l', false}, {"json", 0, false}, {"null", '0', false}}, 1,
          1, &args, &rc)) {
    return rc;
  }
  if (args.Has("json") && args.Has("null")) {
    return Usage("ls", "--json and --null cannot be combined");
  }
  std::unique_ptr<Reader> reader;
  if ((rc = OpenPack(args.positional()[0], {}, &reader)) != kExitOk) return rc;
  const bool json = args.Has("json"), long_format = args.Has("long");
  const char end = args.Has("null") ? '\0' : '\n';
  std::vector<std::string_view> class_names(reader->class_count());
  for (uint64_t c = 0; c < reader->class_count(); ++c) {
    ClassInfo ci;
    Status s = reader->GetClass(c, &ci);
    if (!s.ok()) {
      PrintError(s);
      return ExitCodeFor(s);
    }
    class_names[c] = ci.name;
  }
  // Newline-terminated output escapes names (one line per record, like
  // tar's listings); NUL-terminated output is for programs: exact bytes.
  auto AppendName = [](std::string_view name, char terminator,
                       std::string* out) {
    if (terminator == '\0') {
      out->append(name.data(), name.size());
    } else {
      *out += Printable(name);
    }
    out->push_back(terminator);
  };
  std::string buf;
  if (json) buf += "[";
  for (uint64_t i = 0; i < reader->size(); ++i) {
    Record r;
    Status s = reader->GetRecord(i, &r);
    if (!s.ok()) {
      (void)WriteFd(1, buf);
      PrintError(s);
      return ExitCodeFor(s);
    }
    const bool has_label = r.label != kNoLabel;
    if (json) {
      if (i) buf += ",";
      buf += "\n{\"index\":" + std::to_string(i) +
             ",\"name\":" + JsonString(r.name);
      buf += ",\"label\":" +
             (has_label ? std::to_string(r.label) : std::string("null"));
      buf += ",\"class\":" + (has_label ? JsonString(class_names[r.label])
                                        : std::string("null"));
      buf += ",\"size\":" + std::to_string(r.original_length);
      buf += ",\"stored_size\":" + std::to_string(r.stored_length);
      buf += ",\"codec\":\"" + std::string(CodecName(r.codec)) + "\"";
      buf += ",\"offset\":" + std::to_string(r.offset);
      buf += ",\"checksum\":\"" + HexU64(r.checksum).substr(2) + "\"}";
    } else if (long_format) {
      char line[160];
      std::snprintf(line, sizeof(line), "%8llu  %6s  %10llu  %10llu  %-4s  ",
                    static_cast<unsigned long long>(i),
                    has_label ? std::to_string(r.label).c_str() : "-",
                    static_cast<unsigned long long>(r.stored_length),
                    static_cast<unsigned long long>(r.original_length),
                    CodecName(r.codec));
      buf += line;
      AppendName(r.name, end, &buf);
    } else {
      AppendName(r.name, end, &buf);
    }
    if (buf.size() > (1 << 16)) {
      if (!WriteFd(1, buf).ok()) return kExitFailure;
      buf.clear();
    }
  }
  if (json) buf += "\n]\n";
  if (!WriteFd(1, buf).ok()) return kExitFailure;
  return kExitOk;
}

// --- cat
// --------------------------------------------------------------------------------

int CmdCat(const Argv& argv) {
  Args args;
  int rc;
  if (!ParseOrUsage(
          "cat", argv,
          {{"name", 0, true}, {"index", 0, true}, {"no-verify", 0, false}}, 1,
          2, &args, &rc)) {
    return rc;
  }
  const size_t selectors =
      (args.positional().size() == 2) + args.Has("name") + args.Has("index");
  if (selectors != 1) {
    return Usage("cat",
                 "name exactly one record: <name>, #N, --name or --index");
  }
  ReaderOptions options;
  options.verify_checksums = !args.Has("no-verify");
  std::unique_ptr<Reader> reader;
  if ((rc = OpenPack(args.positional()[0], options, &reader)) != kExitOk)
    return rc;
  uint64_t index = 0;
  Status s;
  std::string index_text;
  bool by_index = false;  // an empty --index is an error, not a name
  // The positional "#N" form; a record may really be named "#N" (or "#x"),
  // which --name or a leading "./" selects.
  const std::string hash_form = args.positional().size() == 2 &&
                                        args.positional()[1].size() > 1 &&
                                        args.positional()[1][0] == '#'
                                    ? args.positional()[1]
                                    : std::string();
  if (args.Has("index")) {
    index_text = args.Get("index");
    by_index = true;
  } else if (!hash_form.empty()) {
    index_text = hash_form.substr(1);
    by_index = true;
  }
  if (by_index) {
    if (!ParseUint(index_text, &index)) {
      std::string msg = "'" + Printable(index_text) + "' is not a record index";
      if (!hash_form.empty()) {
        msg += "; for a record named '" + Printable(hash_form) +
               "' use --name '" + Printable(hash_form) + "' or './" +
               Printable(hash_form) + "'";
      }
      return Usage("cat", msg);
    }
    uint64_t named = 0;
    if (!hash_form.empty() && reader->Find(hash_form, &named).ok() &&
        named != index) {
      return Usage("cat", "'" + Printable(hash_form) + "' is both record " +
                              std::to_string(index) +
                              " and the name of record " +
                              std::to_string(named) + ": say --index " +
                              std::to_string(index) + " or --name '" +
                              Printable(hash_form) + "'");
    }
  } else {
    std::string name =
        args.Has("name") ? args.Get("name") : args.positional()[1];
    // "./x" names record "x": no record name starts with "./" (extract
    // refuses '.' components), so this form is never ambiguous.
    if (!args.Has("name") && name.size() > 2 && name.compare(0, 2, "./") == 0)
      name.erase(0, 2);
    s = reader->Find(name, &index);
  }
  Record r;
  if (s.ok()) s = reader->GetRecord(index, &r);
  if (s.ok() && r.codec == Codec::kZstd) {
    // Streamed to stdout as it is decompressed, like zcat: memory stays
    // bounded whatever original_length claims.  A frame found to end early
    // is reported (exit status) after the bytes it did hold.
    bool stdout_failed = false;
    s = reader->Stream(r, [&](std::string_view piece) {
      Status w = WriteFd(1, piece);
      stdout_failed = !w.ok();
      return w.WithContext("stdout");
    });
    if (!s.ok()) {
      PrintError(s);
      return stdout_failed ? kExitFailure : ExitCodeFor(s);
    }
    return kExitOk;
  }
  std::string bytes;
  if (s.ok()) s = reader->Read(r, &bytes);
  if (!s.ok()) {
    PrintError(s);
    return ExitCodeFor(s);
  }
  s = WriteFd(1, bytes);
  if (!s.ok()) {
    PrintError(s.WithContext("stdout"));
    return kExitFailure;
  }
  return kExitOk;
}

// --- extract
// ------------------------------------------------------------------------

namespace {

// Why `name` may not be extracted, or "" if it may.
std::string UnsafeName(std::string_view name) {
  if (name.empty()) return "empty name";
  if (name.front() == '/') return "absolute path";
  if (name.find('\0') != std::string_view::npos) return "contains a NUL byte";
  size_t start = 0;
  while (start <= name.size()) {
    size_t slash = name.find('/', start);
    if (slash == std::string_view::npos) slash = name.size();
    std::string_view comp = name.substr(start, slash - start);
    if (comp.empty()) return "empty path component";
    if (comp == ".") return "'.' path component";
    if (comp == "..") return "'..' path component";
    if (comp.size() > 255) return "path component longer than 255 bytes";
    start = slash + 1;
  }
  return "";
}

// Keeps the directory of the previous file open: pack order groups files
// by directory, so most records reuse it.
class DirCache {
 public:
  explicit DirCache(int root_fd) : root_fd_(root_fd) {}
  ~DirCache() {
    if (fd_ >= 0 && fd_ != root_fd_) ::close(fd_);
  }
  // Opens (creating as needed) the directory `dir` (relative, may be "")
  // without following symlinks.
  Status Get(const std::string& dir, const std::string& shown_root, int* out) {
    if (fd_ >= 0 && dir == path_) {
      *out = fd_;
      return Status::OK();
    }
    if (fd_ >= 0 && fd_ != root_fd_) ::close(fd_);
    fd_ = -1;
    int cur = root_fd_;
    size_t start = 0;
    std::string so_far;
    while (start < dir.size()) {
      size_t slash = dir.find('/', start);
      if (slash == std::string::npos) slash = dir.size();
      std::string comp = dir.substr(start, slash - start);
      so_far += (so_far.empty() ? "" : "/") + comp;
      if (::mkdirat(cur, comp.c_str(), 0777) != 0 && errno != EEXIST) {
        Status s =
            Status::FromErrno(shown_root + "/" + so_far + ": mkdir", errno);
        if (cur != root_fd_) ::close(cur);
        return s;
      }
      int next = ::openat(cur, comp.c_str(),
                          O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      int e = errno;
      if (cur != root_fd_) ::close(cur);
      if (next < 0) {
        if (e == ELOOP || e == ENOTDIR) {
          return Status::InvalidArgument(shown_root + "/" + so_far +
                                         ": is a symlink or not a directory; "
                                         "refusing to write through it");
        }
        return Status::FromErrno(shown_root + "/" + so_far, e);
      }
      cur = next;
      start = slash + 1;
    }
    fd_ = cur;
    path_ = dir;
    *out = cur;
    return Status::OK();
  }

 private:
  const int root_fd_;
  int fd_ = -1;
  std::string path_;
};

}  // namespace

int CmdExtract(const Argv& argv) {
  Args args;
  int rc;
  if (!ParseOrUsage("extract", argv,
                    {{"force", 'f', false},
                     {"quiet", 'q', false},
                     {"no-progress", 0, false}},
                    2, 2, &args, &rc)) {
    return rc;
  }
  const std::string dest = args.positional()[1];
  const bool force = args.Has("force"), quiet = args.Has("quiet");
  std::unique_ptr<Reader> reader;
  if ((rc = OpenPack(args.positional()[0], {}, &reader)) != kExitOk) return rc;
  const uint64_t n = reader->size();

  // Check every name before writing anything.  A repeated name or a lookup
  // table that does not find a record is a damaged index (exit status 3, as
  // verify says); an unsafe name in an intact index is refused (status 1).
  std::vector<std::string> refused;
  bool corrupt = false;
  for (uint64_t i = 0; i < n; ++i) {
    Record r;
    Status s = reader->GetRecord(i, &r);
    if (!s.ok()) {
      PrintError(s);
      return ExitCodeFor(s);
    }
    std::string why = UnsafeName(r.name);
    if (why.empty()) {
      // Names are unique in a valid pack; a damaged or crafted one may
      // repeat a name, and its second record would replace (--force) or
      // collide with the file just written for the first.  The lookup
      // table maps each name to one record, so every record must be the
      // one its own name finds.
      uint64_t found = 0;
      Status fs = reader->Find(r.name, &found);
      if (fs.ok() && found != i) {
        why = "corrupt index: same name as record " + std::to_string(found);
        corrupt = true;
      } else if (!fs.ok() && !fs.IsNotFound()) {
        PrintError(fs);
        return ExitCodeFor(fs);
      } else if (!fs.ok()) {
        why = "corrupt index: the name lookup table does not find it";
        corrupt = true;
      }
    } else {
      why = "unsafe name: " + why;
    }
    if (!why.empty()) {
      refused.push_back("record " + std::to_string(i) + " '" +
                        Printable(r.name) + "': " + why);
    }
  }
  if (!refused.empty()) {
    for (size_t k = 0; k < refused.size() && k < 20; ++k) {
      std::fprintf(stderr, "ufspack: error: refusing %s\n", refused[k].c_str());
    }
    if (refused.size() > 20) {
      std::fprintf(stderr, "ufspack: error: ... and %zu more refused names\n",
                   refused.size() - 20);
    }
    std::fprintf(stderr, "ufspack: nothing extracted%s\n",
                 corrupt ? " (the index is damaged: 'ufspack verify' lists "
                           "every problem)"
                         : "");
    return corrupt ? kExitCorrupt : kExitFailure;
  }

  Status s = Status::OK();
  {
    // mkdir -p dest
    std::string partial;
    size_t start = 0;
    while (start <= dest.size()) {
      size_t slash = dest.find('/', start);
      if (slash == std::string::npos) slash = dest.size();
      partial = dest.substr(0, slash);
      if (!partial.empty() && ::mkdir(partial.c_str(), 0777) != 0 &&
          errno != EEXIST) {
        PrintError(Status::FromErrno(partial + ": mkdir", errno));
        return kExitFailure;
      }
      start = slash + 1;
    }
  }
  int root_fd = ::open(dest.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root_fd < 0) {
    PrintError(Status::FromErrno(dest, errno));
    return kExitFailure;
  }
  // Refuse to overwrite: find existing entries first, before writing.
  if (!force) {
    std::vector<std::string> existing;
    uint64_t existing_count = 0;
    for (uint64_t i = 0; i < n; ++i) {
      Record r;
      (void)reader->GetRecord(i, &r);
      std::string name(r.name);
      struct stat st;
      if (::fstatat(root_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (existing.size() < 10) existing.push_back(name);
        ++existing_count;
      }
    }
    if (existing_count > 0) {
      for (const std::string& e : existing) {
        std::fprintf(stderr, "ufspack: error: %s/%s: exists\n",
                     Printable(dest).c_str(), Printable(e).c_str());
      }
      if (existing_count > existing.size()) {
        std::fprintf(stderr, "ufspack: error: ... and %s more existing files\n",
                     FormatCount(existing_count - existing.size()).c_str());
      }
      std::fprintf(
          stderr,
          "ufspack: nothing extracted (use --force to replace existing "
          "files)\n");
      ::close(root_fd);
      return kExitFailure;
    }
  }

  InstallSignalHandlers();
  Progress progress(!quiet && !args.Has("no-progress"));
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t bytes = 0, files = 0;
  {
    DirCache dirs(root_fd);
    std::string buf;
    for (uint64_t i = 0; i < n && s.ok(); ++i) {
      if (Interrupted()) {
        s = Status::Aborted("interrupted");
        break;
      }
      Record r;
      s = reader->GetRecord(i, &r);
      if (!s.ok()) break;
      const std::string name(r.name);
      const size_t slash = name.find_last_of('/');
      const std::string dir =
          slash == std::string::npos ? "" : name.substr(0, slash);
      const std::string base =
          slash == std::string::npos ? name : name.substr(slash + 1);
      const std::string shown = dest + "/" + name;
      int dfd = -1;
      s = dirs.Get(dir, dest, &dfd);
      if (!s.ok()) break;
      const bool zstd = r.codec == Codec::kZstd;
      if (!zstd) {
        buf.resize(r.original_length);  // raw: bytes really in data.ufs
        s = reader->Read(r, buf.data(), buf.size());
        if (!s.ok()) break;
      }
      int fd =
          ::openat(dfd, base.c_str(),
                   O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
      if (fd < 0 && errno == EEXIST && force) {
        struct stat st;
        if (::fstatat(dfd, base.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISDIR(st.st_mode)) {
          s = Status::InvalidArgument(shown +
                                      ": is a directory; not replacing it");
          break;
        }
        // Replace the entry itself (a symlink is removed, never followed).
        if (::unlinkat(dfd, base.c_str(), 0) != 0) {
          s = Status::FromErrno(shown + ": cannot replace", errno);
          break;
        }
        fd = ::openat(dfd, base.c_str(),
                      O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                      0666);
      }
      if (fd < 0) {
        s = errno == EEXIST ? Status::InvalidArgument(
                                  shown + ": exists (use --force to replace)")
                            : Status::FromErrno(shown, errno);
        break;
      }
      // A zstd record is streamed into its file as it is decompressed
      // (original_length sizes nothing); on error the file is removed.
      if (zstd) {
        s = reader->Stream(r, [&](std::string_view piece) {
          return WriteFd(fd, piece).WithContext(shown);
        });
      } else {
        s = WriteFd(fd, buf);
      }
      if (::close(fd) != 0 && s.ok())
        s = Status::FromErrno(shown + ": close", errno);
      if (!s.ok()) {
        ::unlinkat(dfd, base.c_str(), 0);  // never leave a partial file
        if (!zstd) s = s.WithContext(shown);
        break;
      }
      ++files;
      bytes += r.original_length;
      progress.Update("extracting " + FormatCount(files) + "/" +
                      FormatCount(n) + " files  " + FormatBytes(bytes));
    }
  }
  ::close(root_fd);
  progress.Clear();
  if (!s.ok()) {
    PrintError(s);
    std::fprintf(stderr, "ufspack: extracted %s of %s files before stopping\n",
                 FormatCount(files).c_str(), FormatCount(n).c_str());
    return ExitCodeFor(s);
  }
  if (!quiet) {
    std::printf("extracted %s files (%s) into %s in %s s\n",
                FormatCount(files).c_str(), FormatBytes(bytes).c_str(),
                Printable(dest).c_str(), Fixed(Since(t0), 2).c_str());
  }
  return kExitOk;
}

// --- verify
// --------------------------------------------------------------------------

int CmdVerify(const Argv& argv) {
  Args args;
  int rc;
  if (!ParseOrUsage("verify", argv,
                    {{"json", 0, false},
                     {"quiet", 'q', false},
                     {"no-progress", 0, false}},
                    1, 1, &args, &rc)) {
    return rc;
  }
  const bool json = args.Has("json"), quiet = args.Has("quiet");
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> problems;
  uint64_t problem_count = 0;
  auto problem = [&](const Status& st) {
    ++problem_count;
    if (problems.size() < 1000) problems.push_back(std::string(st.message()));
  };
  auto report = [&](bool opened, uint64_t records, uint64_t bytes, int code) {
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
        if (problem_count > problems.size()) {
          std::printf("  ... %s more\n",
                      FormatCount(problem_count - problems.size()).c_str());
        }
      }
    }
    return code;
  };

  std::unique_ptr<Reader> reader;
  Status s = Reader::Open(args.positional()[0], {}, &reader);
  if (!s.ok()) {
    problem(s);
    return report(false, 0, 0,
                  ExitCodeFor(s) == kExitOk ? kExitFailure : ExitCodeFor(s));
  }
  s = reader->CheckIndex();
  if (!s.ok()) problem(s);
  Progress progress(!quiet && !json && !args.Has("no-progress"));
  InstallSignalHandlers();
  bool io_failure = false;
  uint64_t bytes = 0;
  std::string buf;
  const uint64_t n = reader->size();
  for (uint64_t i = 0; i < n; ++i) {
    if (Interrupted()) {
      progress.Clear();
      std::fprintf(stderr, "ufspack: interrupted after %s of %s records\n",
                   FormatCount(i).c_str(), FormatCount(n).c_str());
      return kExitInterrupted;
    }
    Record r;
    s = reader->GetRecord(i, &r);
    if (s.ok() && r.codec == Codec::kZstd) {
      // Streamed: original_length (which a hostile entry and frame header
      // may both claim to be 32768 times the stored bytes) sizes nothing.
      s = reader->Stream(r, [](std::string_view) { return Status::OK(); });
    } else if (s.ok()) {
      buf.resize(r.original_length);  // raw: bytes really in data.ufs
      s = reader->Read(r, buf.data(), buf.size());
    }
    if (!s.ok()) {
      if (!s.IsCorruption()) io_failure = true;
      problem(s);
      continue;
    }
    bytes += r.original_length;
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
