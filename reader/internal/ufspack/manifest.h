// Copyright 2026 The ufspack Authors.
//
// The merged-pack manifest, version 1 (docs/format.md, "Merged packs"): one
// logical pack over several ordinary packs (its parts), published by
// `ufspack merge` as manifest.ufs in a directory of its own.  The parts'
// records are not copied: the manifest names each part by its path
// relative to the manifest's directory and by its pack id, and lists the
// global class table.
//
// Layout (little-endian):
//
//   ManifestHeader (160 bytes)
//   part table     part_count x PartEntry (64 bytes each)
//   class table    class_count x ClassEntry (32 bytes, as in index.ufs; the
//                  names in the string pool)
//   string pool    part paths and class names
//   metadata       as index.ufs's metadata section
//
// As with the index, every structure encodes and decodes itself, and
// DecodeFrom() checks only what the structure can check alone; the merged
// reader cross-checks the parts (reader/src/merged.cc).
//
// Thread safety: plain value types; all functions are pure.
#ifndef UFSPACK_MANIFEST_H_
#define UFSPACK_MANIFEST_H_

#include <cstddef>
#include <cstdint>
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
// At most this many parts (a bound on what a hostile header can make a
// reader allocate at open: one small slot per part).
inline constexpr uint64_t kMaxParts = 1u << 20;

struct UFSPACK_EXPORT ManifestHeader {
  static constexpr size_t kEncodedLength = 160;
  static constexpr size_t kBodyChecksumOffset = 136;
  static constexpr size_t kHeaderChecksumOffset = 152;

  uint32_t version = kManifestVersion;
  uint32_t required_flags = 0;
  uint32_t optional_flags = 0;  // kOptionalFlagFlat as in the index
  PackId pack_id;               // of the merged pack (see MergedPackId)
  uint64_t part_count = 0;
  uint64_t record_count = 0;  // sum of the parts' record counts
  uint64_t class_count = 0;
  uint64_t file_size = 0;      // exact size of manifest.ufs
  Section parts;               // part_count * PartEntry::kEncodedLength
  Section classes;             // class_count * ClassEntry::kEncodedLength
  Section strings;             // part paths and class names
  Section meta;                // metadata, may be empty
  uint64_t body_checksum = 0;  // Checksum64 of [kEncodedLength, file_size)

  bool flat() const { return (optional_flags & kOptionalFlagFlat) != 0; }

  void EncodeTo(std::string* dst) const;
  // Checks, in order: length and magic ("not a ufspack manifest"), version
  // (NotSupported), header checksum, required flags (NotSupported),
  // reserved bytes, then the sections against each other, the counts and
  // file_size.  O(1).
  Status DecodeFrom(std::string_view* input);
};

struct UFSPACK_EXPORT PartEntry {
  static constexpr size_t kEncodedLength = 64;

  PackId pack_id;             // the part's index header's pack id
  uint64_t record_count = 0;  // the part's record count
  uint64_t first_record = 0;  // global index of its first record
  uint64_t data_size = 0;     // the part's data.ufs size
  uint64_t index_size = 0;    // the part's index.ufs size
  uint64_t path_offset = 0;   // into the string pool
  uint32_t path_length = 0;   // the part directory, relative to the
                              // manifest's directory, '/'-separated

  void EncodeTo(std::string* dst) const;
  Status DecodeFrom(std::string_view* input);
};

// The merged pack's id: PackId::Of the parts' pack ids in order, each 16
// bytes, preceded by "ufspack-merge\0" (so no merged pack shares an id with
// a single pack).
UFSPACK_EXPORT PackId MergedPackId(const std::vector<PackId>& parts);

// Joins a part path from the manifest onto the manifest's directory `dir`
// (a local directory or a URL prefix): "." and ".." segments are resolved
// textually.  InvalidArgument for an absolute part path, an empty segment,
// or ".." above a URL's bucket or host.
UFSPACK_EXPORT Status JoinPartPath(const std::string& dir,
                                   std::string_view relative, std::string* out);

}  // namespace ufspack

#endif  // UFSPACK_MANIFEST_H_
