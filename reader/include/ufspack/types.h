// Copyright 2026 The ufspack Authors.
//
// The small vocabulary the public API shares: the format version this
// library writes, the names of a pack's two files, a record's codec, the
// pack id and the "no label" value of a flat pack.  docs/format.md is the
// specification these come from.
//
// Thread safety: plain value types and constants.
#ifndef UFSPACK_TYPES_H_
#define UFSPACK_TYPES_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "ufspack/export.h"

namespace ufspack {

// The pack format version this build writes (docs/format.md, "Version").
inline constexpr uint32_t kFormatVersion = 1;

// File names inside a pack directory.
inline constexpr char kDataFileName[] = "data.ufs";
inline constexpr char kIndexFileName[] = "index.ufs";

// Metadata keys `ufspack build` writes (docs/format.md, "Metadata
// section"); Reader::GetMetadata() reads them.
// The directory packed, as given to the build.
inline constexpr char kMetaSourceRoot[] = "source_root";
// The files selected: "*" for all, else the comma-separated extensions
// (lower case, with a leading '.') a file name had to end with.
inline constexpr char kMetaExtensions[] = "extensions";
// The order of the records in data.ufs: "sorted" (record-index order) or
// "shuffled:SEED" (runs of records in a seeded permutation; ufspack/
// layout.h).  Absent in packs built before layouts existed: sorted.
inline constexpr char kMetaLayout[] = "layout";

// Label of every record in a flat pack (a pack with no classes).
inline constexpr uint32_t kNoLabel = 0xFFFFFFFFu;

// How a record's stored bytes encode it.
enum class Codec : uint8_t {
  kRaw = 0,   // stored bytes are the original bytes
  kZstd = 1,  // stored bytes are one zstd frame with the content size set
};
// "raw", "zstd" (or "unknown").
UFSPACK_EXPORT const char* CodecName(Codec codec);

// The checksum algorithm a pack uses (IndexHeader.checksum_type).
enum class ChecksumType : uint8_t {
  kXXH3_64 = 1,  // XXH3_64bits with seed 0
};

// 128-bit pack identifier written into both files: XXH3-128 of the index
// body, so equal trees give equal ids and a mismatched pair is caught.
struct UFSPACK_EXPORT PackId {
  std::array<uint8_t, 16> bytes{};

  // XXH3-128 (seed 0) of `n` bytes, stored little-endian low64 then high64.
  static PackId Of(const void* data, size_t n);
  std::string ToHex() const;  // 32 lower-case hex digits
  bool operator==(const PackId& o) const { return bytes == o.bytes; }
  bool operator!=(const PackId& o) const { return bytes != o.bytes; }
};

}  // namespace ufspack

#endif  // UFSPACK_TYPES_H_
