// Copyright 2026 The ufspack Authors.
//
// `ufspack cat`: one record's original bytes to standard output.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "util.h"

namespace ufspack {
namespace cli {

const char kCatHelp[] = R"(Usage: ufspack cat <pack> <name | #index>

<pack> is a pack directory, its index.ufs, or a pack URL: s3://bucket/prefix
(AWS settings from the environment and ~/.aws) or https://host/path
(docs/remote.md).

Writes one record's original bytes to standard output.  The record is
named by its path in the pack (as 'ufspack ls -0' gives it) or by its
index as #N.  A record whose name starts with '#' is named with --name or
with a leading './' ('./#0'); '#N' that is also a record's name is refused
as ambiguous.

Options:
      --name <name>    the record with this name
      --index <n>      the record with this index
      --no-verify      skip the checksum check
      --cache <dir>    read through the node-local cache <dir> (see
                       'ufspack warmup'): a cached record is served from
                       it (checksummed), others are read and cached; works
                       while the pack's storage is unreachable for records
                       cached earlier; a cache that cannot be used (not a
                       cache, damaged, read-only, full) is reported once
                       and the pack read without it

Exit status: 0 written, 1 no such record or an I/O error, 2 a malformed or
ambiguous index, 3 the record is damaged (nothing is written).

Examples:
  ufspack cat train.ufspack n01440764/n01440764_10026.JPEG > x.jpg
  ufspack cat train.ufspack '#42' | file -
)";

int CmdCat(const Argv& argv) {
  CommandLine cl("cat");
  std::string pack, record;
  cl.app().add_option("pack", pack)->required();
  CLI::Option* record_opt = cl.app().add_option("record", record);
  CLI::Option* name_opt = cl.app().add_option("--name", record);
  std::string index_arg;
  CLI::Option* index_opt = cl.app().add_option("--index", index_arg);
  bool no_verify = false;
  cl.app().add_flag("--no-verify", no_verify);
  std::string cache_dir;
  CLI::Option* cache_opt = cl.app().add_option("--cache", cache_dir);
  if (int rc = cl.Parse(argv); rc >= 0) return rc;
  const bool has_record = record_opt->count() > 0;
  const bool has_name = name_opt->count() > 0;
  const bool has_index = index_opt->count() > 0;
  const size_t selectors =
      size_t{has_record} + size_t{has_name} + size_t{has_index};
  if (selectors != 1) {
    return Usage("cat",
                 "name exactly one record: <name>, #N, --name or --index");
  }
  ReaderOptions options;
  options.verify_checksums = !no_verify;
  if (cache_opt->count() > 0) OpenCache(cache_dir, &options);
  std::unique_ptr<Reader> reader;
  if (int rc = OpenPack(pack, options, &reader); rc != kExitOk) return rc;
  uint64_t index = 0;
  Status s;
  std::string index_text;
  bool by_index = false;  // an empty --index is an error, not a name
  // The positional "#N" form; a record may really be named "#N" (or "#x"),
  // which --name or a leading "./" selects.
  const std::string hash_form =
      has_record && record.size() > 1 && record[0] == '#' ? record
                                                          : std::string();
  if (has_index) {
    index_text = index_arg;
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
    std::string name = record;
    // "./x" names record "x": no record name starts with "./" (extract
    // refuses '.' components), so this form is never ambiguous.
    if (!has_name && name.size() > 2 && name.compare(0, 2, "./") == 0)
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

}  // namespace cli
}  // namespace ufspack
