// Copyright 2026 The ufspack Authors.
//
// The merged-pack manifest, version 1 (docs/format.md, "Merged packs"): one
// logical pack over several ordinary packs (its parts), published by
// `ufspack merge` and `ufspack append` as manifest.ufs.  The parts' records
// are not copied: the manifest names each part by its path relative to the
// manifest's directory and by its pack id, lists the segments (runs of a
// part's records) whose concatenation is the merged pack's record order,
// maps each part's labels to the global class table, and holds that table.
//
// Layout (little-endian):
//
//   ManifestHeader (200 bytes)
//   part table     part_count x PartEntry (64 bytes each)
//   segment table  segment_count x SegmentEntry (24 bytes each)
//   class table    class_count x ClassEntry (32 bytes, as in index.ufs; the
//                  names in the string pool)
//   label maps     u32 global labels, referred to by the part entries
//   string pool    part paths and class names
//   metadata       as index.ufs's metadata section
//
// As with the index, every structure encodes and decodes itself.
// DecodeManifest() checks everything that the manifest alone can check, in
// O(parts + segments + label maps); the merged reader checks the parts
// against it (reader/src/merged.cc).
//
// Thread safety: plain value types; all functions are pure.
#ifndef UFSPACK_MANIFEST_H_
#define UFSPACK_MANIFEST_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ufspack/export.h"
#include "ufspack/format.h"
#include "ufspack/status.h"
#include "ufspack/types.h"

namespace ufspack {

// "\x89UFSMAN\n", as the other two magics.
inline constexpr char kManifestMagic[8] = {'\x89', 'U', 'F', 'S',
                                           'M',    'A', 'N', '\n'};
inline constexpr char kManifestFileName[] = "manifest.ufs";
inline constexpr uint32_t kManifestVersion = 1;
inline constexpr uint32_t kMaxReadableManifestVersion = 1;
// Bounds on what a hostile header can make a reader allocate at open.
inline constexpr uint64_t kMaxParts = 1u << 20;
inline constexpr uint64_t kMaxSegments = 1u << 26;

struct UFSPACK_EXPORT ManifestHeader : SealedHeaderLayout<200, 176, 192> {
  uint32_t version = kManifestVersion;
  uint32_t required_flags = 0;
  uint32_t optional_flags = 0;  // kOptionalFlagFlat as in the index
  PackId pack_id;               // of the merged pack (see MergedPackId)
  uint64_t part_count = 0;
  uint64_t segment_count = 0;
  uint64_t record_count = 0;  // sum of the segments' counts
  uint64_t class_count = 0;
  uint64_t file_size = 0;      // exact size of manifest.ufs
  Section parts;               // part_count * PartEntry::kEncodedLength
  Section segments;            // segment_count * SegmentEntry::kEncodedLength
  Section classes;             // class_count * ClassEntry::kEncodedLength
  Section label_maps;          // u32 entries (a multiple of 4 bytes)
  Section strings;             // part paths and class names
  Section meta;                // metadata, may be empty
  uint64_t body_checksum = 0;  // Checksum64 of [kEncodedLength, file_size)

  bool flat() const { return (optional_flags & kOptionalFlagFlat) != 0; }

  void EncodeTo(std::string* dst) const;
  // Checks, in order: length and magic ("not a ufspack manifest"), version
  // (NotSupported), header checksum, required flags (NotSupported),
  // reserved bytes, then the counts and the sections against each other
  // and file_size.  O(1).
  Status DecodeFrom(std::string_view* input);
};

struct UFSPACK_EXPORT PartEntry {
  static constexpr size_t kEncodedLength = 64;

  PackId pack_id;             // the part's index header's pack id
  uint64_t record_count = 0;  // the part's record count
  uint64_t data_size = 0;     // the part's data.ufs size
  uint64_t index_size = 0;    // the part's index.ufs size
  uint64_t path_offset = 0;   // into the string pool
  uint32_t path_length = 0;   // the part directory, relative to the
                              // manifest's directory, '/'-separated
  // The part's labels in the global class table: label_map_length (the
  // part's class count) u32 entries at byte label_map_offset of the label
  // maps; 0 when the part's labels are the global ones.
  uint32_t label_map_length = 0;
  uint64_t label_map_offset = 0;

  void EncodeTo(std::string* dst) const;
  Status DecodeFrom(std::string_view* input);
};

// A run of one part's records: records [first, first + count) of part
// `part`.  The merged pack's records are the segments' runs, in order.
struct UFSPACK_EXPORT SegmentEntry {
  static constexpr size_t kEncodedLength = 24;

  uint32_t part = 0;
  uint64_t first = 0;
  uint64_t count = 0;

  void EncodeTo(std::string* dst) const;
  Status DecodeFrom(std::string_view* input);
};

// A manifest decoded and checked on its own (DecodeManifest): every
// structure, the paths and class names in the string pool, each part's
// records covered by the segments exactly once, label maps within the
// class table.  Views point into the decoded bytes.
struct UFSPACK_EXPORT Manifest {
  ManifestHeader header;
  std::vector<PartEntry> parts;
  std::vector<std::string_view> part_paths;
  std::vector<SegmentEntry> segments;
  std::vector<uint64_t> segment_starts;  // global index of each segment
  std::string_view classes;              // the class table bytes
  std::string_view label_maps;
  std::string_view strings;
  std::string_view meta;

  // Label `local` of part `k` in the global class table (kNoLabel stays).
  uint32_t GlobalLabel(size_t k, uint32_t local) const;
};

// Decodes and checks manifest `bytes`; `name` prefixes errors.  Corruption
// for anything malformed, NotSupported for a newer version or an unknown
// required flag.
UFSPACK_EXPORT Status DecodeManifest(std::string_view bytes,
                                     const std::string& name, Manifest* out);

// What a writer gives EncodeManifest: the parts with their paths, label
// maps (empty: identity), the segments, the class names and record
// ranges, and the metadata.
struct ManifestContents {
  bool flat = false;
  struct Part {
    PackId pack_id;
    uint64_t record_count = 0;
    uint64_t data_size = 0;
    uint64_t index_size = 0;
    std::string path;
    std::vector<uint32_t> label_map;
  };
  std::vector<Part> parts;
  std::vector<SegmentEntry> segments;
  struct Class {
    std::string name;
    uint64_t first_record = 0;
    uint64_t record_count = 0;
  };
  std::vector<Class> classes;
  std::map<std::string, std::string> meta;
};

// The contents that encode `m` again (EncodeManifest gives the same pack
// id; the metadata in key order): for a writer that changes the part
// paths of a decoded manifest, as an upload does.  `name` prefixes errors
// (Corruption for a class name or metadata section that does not decode).
UFSPACK_EXPORT Status ManifestContentsOf(const Manifest& m,
                                         const std::string& name,
                                         ManifestContents* out);

// Encodes a complete manifest file (header, sections, checksums, the pack
// id from MergedPackId of the parts and segments).
UFSPACK_EXPORT void EncodeManifest(const ManifestContents& contents,
                                   std::string* out, PackId* pack_id);

// The merged pack's id: PackId::Of "ufspack-merge\0", then each part's
// pack id (16 bytes), then each segment as encoded (24 bytes).  No single
// pack shares it, and it changes with any part, and with the order.
UFSPACK_EXPORT PackId MergedPackId(const std::vector<PackId>& parts,
                                   const std::vector<SegmentEntry>& segments);

// Joins a part path from the manifest onto the manifest's directory `dir`
// (a local directory or a URL prefix): "." and ".." segments are resolved
// textually for URLs and left to the kernel for local paths.
// InvalidArgument for an absolute part path, an empty segment, or ".."
// above a URL's bucket or host.
UFSPACK_EXPORT Status JoinPartPath(const std::string& dir,
                                   std::string_view relative, std::string* out);

}  // namespace ufspack

#endif  // UFSPACK_MANIFEST_H_
