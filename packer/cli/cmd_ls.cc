// Copyright 2026 The ufspack Authors.
//
// `ufspack ls`: the records' names, in pack order.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "util.h"

namespace ufspack {
namespace cli {

const char kLsHelp[] = R"(Usage: ufspack ls <pack> [--long] [--json | --null]

<pack> is a pack directory, its index.ufs, or a pack URL: s3://bucket/prefix
(AWS settings from the environment and ~/.aws) or https://host/path
(docs/remote.md).

Lists the records' names (paths relative to the packed directory), one per
line, in pack order (ImageFolder order).  As tar does in its listings, a
backslash is shown as \\ and control characters and bytes that are not UTF-8
as \xNN, so that every name is one line; --null and --json give the exact
bytes.

Options:
  -l, --long    also index, label, class, stored and original size, codec
      --json    a JSON array of objects (name, index, label, class, sizes,
                codec, checksum); non-UTF-8 bytes in names appear as \udcXX
                escapes, which Python's os.fsencode() turns back into bytes
  -0, --null    end each name with a NUL byte instead of a newline

Exit status: 0 listed, 1 the pack cannot be read, 3 it is damaged.

Examples:
  ufspack ls train.ufspack -l
  ufspack ls train.ufspack -0 | xargs -0 -n1 echo
)";

int CmdLs(const Argv& argv) {
  CommandLine cl("ls");
  std::string pack;
  bool long_format = false, json = false, null = false;
  cl.app().add_option("pack", pack)->required();
  cl.app().add_flag("-l,--long", long_format);
  cl.app().add_flag("--json", json);
  cl.app().add_flag("-0,--null", null);
  if (int rc = cl.Parse(argv); rc >= 0) return rc;
  if (json && null) {
    return Usage("ls", "--json and --null cannot be combined");
  }
  std::unique_ptr<Reader> reader;
  if (int rc = OpenPack(pack, {}, &reader); rc != kExitOk) return rc;
  const char end = null ? '\0' : '\n';
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

}  // namespace cli
}  // namespace ufspack
