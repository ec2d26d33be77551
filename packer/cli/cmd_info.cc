// Copyright 2026 The ufspack Authors.
//
// `ufspack info`: a pack's header, counts, classes and compression ratio.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "util.h"
#ifdef UFSPACK_HAVE_REMOTE
#include "ufspack/remote.h"
#endif

namespace ufspack {
namespace cli {

const char kInfoHelp[] =
    R"(Usage: ufspack info <pack> [--json] [--explain-credentials]

<pack> is a pack directory, its index.ufs, or a pack URL: s3://bucket/prefix
(AWS settings from the environment and ~/.aws) or https://host/path
(docs/remote.md).

Prints the pack's header (format version, pack id, sizes), the number of
records and classes, each class with its record count and bytes, and the
compression ratio.

With --explain-credentials, first prints (to stderr with --json) where the credentials for the
pack's URL come from: the AWS settings, each provider of the chain asked,
in order, and why it was skipped, failed or chosen, the access key id's
last 4 characters and when the credentials expire and are refreshed
(never a secret or token); then the pack's info as usual.

Exit status: 0 printed, 1 the pack cannot be read (or its credentials
cannot be loaded), 3 it is damaged.

Examples:
  ufspack info /nas/imagenet/train.ufspack
  ufspack info train.ufspack/index.ufs --json
  ufspack info s3://bucket/train.ufspack --explain-credentials

Options:
      --json                 one JSON object instead of text
      --explain-credentials  where the credentials come from (s3://)
)";

namespace {

// Prints ExplainCredentials(pack) to `out`; false when they cannot be
// loaded (the error ends the text).
bool ExplainCredentialsOf(const std::string& pack, std::FILE* out) {
#ifdef UFSPACK_HAVE_REMOTE
  std::string text;
  Status s = ExplainCredentials(pack, &text);
  std::fputs(text.c_str(), out);
  std::fflush(out);
  return s.ok();
#else
  std::fputs(
      "credentials: none (this ufspack is built without remote "
      "packs)\n",
      out);
  (void)pack;
  return true;
#endif
}

}  // namespace

int CmdInfo(const Argv& argv) {
  CommandLine cl("info");
  std::string pack;
  bool json = false, explain = false;
  cl.app().add_option("pack", pack)->required();
  cl.app().add_flag("--json", json);
  cl.app().add_flag("--explain-credentials", explain);
  if (int rc = cl.Parse(argv); rc >= 0) return rc;
  // With --json the explanation goes to stderr, keeping stdout one object.
  if (explain && !ExplainCredentialsOf(pack, json ? stderr : stdout)) {
    return kExitFailure;
  }
  if (explain && !json) std::printf("\n");
  std::unique_ptr<Reader> reader;
  if (int rc = OpenPack(pack, {}, &reader); rc != kExitOk) return rc;
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

  if (json) {
    std::string j = "{";
    j += "\"index\":" + JsonString(info.index_path);
    j += ",\"data\":" + JsonString(info.data_path);
    j += ",\"version\":" + std::to_string(info.version);
    j += ",\"pack_id\":\"" + info.pack_id.ToHex() + "\"";
    std::string_view source_root;
    if (reader->GetMetadata(kMetaSourceRoot, &source_root).ok()) {
      j += ",\"source_root\":" + JsonString(source_root);
    }
    std::string_view layout;
    if (reader->GetMetadata(kMetaLayout, &layout).ok()) {
      j += ",\"layout\":" + JsonString(layout);
    } else {
      j += ",\"layout\":null";
    }
    j += ",\"flat\":" + std::string(info.flat ? "true" : "false");
    j += ",\"parts\":" + std::to_string(info.part_count);
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
  std::string_view layout;
  if (reader->GetMetadata(kMetaLayout, &layout).ok()) {
    std::printf("layout:        %s\n", Printable(layout).c_str());
  } else {
    std::printf(
        "layout:        not recorded (built before layouts existed, or "
        "merged parts differ): read as sorted\n");
  }
  std::printf("records:       %s\n", FormatCount(info.record_count).c_str());
  std::printf("classes:       %s\n", FormatCount(info.class_count).c_str());
  if (info.part_count > 0) {
    std::printf(
        "parts:         %s (a merged pack: the sizes below are the "
        "parts' totals)\n",
        FormatCount(info.part_count).c_str());
  }
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

}  // namespace cli
}  // namespace ufspack
