// Copyright 2026 The ufspack Authors.
//
// The ufspack on-disk format, version 1.  See docs/format.md: that document
// is the specification; this header implements it.
//
// A pack is two files in one directory:
//
//   data.ufs   DataHeader (64 bytes), then every record's stored bytes back
//              to back.
//   index.ufs  IndexHeader (176 bytes), then five sections located by the
//              header: the record table (RecordEntry, 56 bytes each), the
//              class table (ClassEntry, 32 bytes each), the name lookup table
//              (uint32 slots), the name pool (raw bytes) and the metadata
//              (key/value pairs such as the source root).
//
// Every structure encodes itself with EncodeTo() and decodes with
// DecodeFrom(); nothing is ever read by casting a struct over mapped bytes.
// DecodeFrom() checks only what the structure can check on its own (magic,
// reserved bits, field ranges); cross-checks against the other file and the
// section sizes live in the Reader.
//
// Thread safety: plain value types; all functions are pure.
#ifndef UFSPACK_FORMAT_H_
#define UFSPACK_FORMAT_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ufspack/export.h"
#include "ufspack/status.h"
#include "ufspack/types.h"

namespace ufspack {

// ---------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------

// "\x89UFSDAT\n" and "\x89UFSIDX\n": a high-bit first byte (catches 7-bit
// transfers and text files), a readable name, and a trailing LF (catches
// CRLF translation), after PNG's signature.
inline constexpr char kDataMagic[8] = {'\x89', 'U', 'F', 'S',
                                       'D',    'A', 'T', '\n'};
inline constexpr char kIndexMagic[8] = {'\x89', 'U', 'F', 'S',
                                        'I',    'D', 'X', '\n'};

// The range of versions this build reads (kFormatVersion, the version it
// writes, is in types.h).
inline constexpr uint32_t kMinReadableVersion = 1;
inline constexpr uint32_t kMaxReadableVersion = 1;

// Feature checks by version, rather than scattered comparisons.
inline constexpr bool FormatHasZstdRecords(uint32_t version) {
  return version >= 1;
}

// The previous data.ufs, hard-linked here while a build publishes its pair
// (see docs/format.md, "Publishing a pack"): a build killed between its two
// renames leaves the previous index.ufs complete with this file.
inline constexpr char kPrevDataFileName[] = ".data.ufs.prev";

// The record table uses uint32 lookup slots holding index + 1, so a pack
// holds at most this many records.
inline constexpr uint64_t kMaxRecords = 0xFFFFFFFEull;

// Index header flags.  Required flags are features a reader must understand
// to read the pack: an unknown required bit makes the pack NotSupported.
// Optional flags describe the pack; unknown optional bits are ignored.
inline constexpr uint32_t kKnownRequiredFlags = 0;
inline constexpr uint32_t kOptionalFlagFlat = 1u << 0;  // built without classes

// XXH3-64 (seed 0) of `n` bytes: the record and index checksum.
UFSPACK_EXPORT uint64_t Checksum64(const void* data, size_t n);

// Hash of a record name used by the lookup table: XXH3-64 (seed 0).
inline uint64_t NameHash(std::string_view name) {
  return Checksum64(name.data(), name.size());
}

// ---------------------------------------------------------------------------
// data.ufs header
// ---------------------------------------------------------------------------

struct UFSPACK_EXPORT DataHeader {
  static constexpr size_t kEncodedLength = 64;

  uint32_t version = kFormatVersion;
  PackId pack_id;

  // Appends exactly kEncodedLength bytes.
  void EncodeTo(std::string* dst) const;
  // Consumes kEncodedLength bytes from *input.  Errors: Corruption for a bad
  // magic, short input or non-zero reserved bytes; NotSupported for a
  // version outside [kMinReadableVersion, kMaxReadableVersion].
  Status DecodeFrom(std::string_view* input);
};

// ---------------------------------------------------------------------------
// index.ufs header
// ---------------------------------------------------------------------------

// A half-open byte range [offset, offset + size) of index.ufs.
struct Section {
  uint64_t offset = 0;
  uint64_t size = 0;
};

// The pieces both headers (index.ufs, manifest.ufs) are made of.
// "<what> needs <want> bytes, found <got>".
UFSPACK_EXPORT std::string ShortInput(const char* what, size_t want,
                                      size_t got);
// Corruption "not a ufspack <what> (bad magic)" unless `input` starts with
// the 8 bytes at `magic`; "truncated: <what> header needs ..." when it is
// shorter than `length`.
UFSPACK_EXPORT Status CheckHeaderFrame(std::string_view input,
                                       const char* magic, size_t length,
                                       const char* what);
// Corruption "<what> header checksum mismatch: expected X, found Y" unless
// the XXH3-64 at p + checksum_offset covers [p, p + checksum_offset).
UFSPACK_EXPORT Status CheckHeaderChecksum(const char* p, size_t checksum_offset,
                                          const char* what);
// `n` sections as (offset, size) fixed64 pairs from `at`.
UFSPACK_EXPORT void EncodeSections(const Section* const* sections, int n,
                                   char* at);
UFSPACK_EXPORT void DecodeSections(const char* at, Section* const* sections,
                                   int n);
// Writes the checksum of buf[0, checksum_offset) at checksum_offset, then
// appends buf[0, length) to *dst.
UFSPACK_EXPORT void SealHeader(char* buf, size_t checksum_offset, size_t length,
                               std::string* dst);

// Where a sealed header (the index's, the manifest's) keeps its two
// checksums: body_checksum at kBodyChecksumOffset, header_checksum at
// kHeaderChecksumOffset covering bytes [0, kHeaderChecksumOffset), in a
// header of kEncodedLength bytes.
template <size_t EncodedLength, size_t BodyChecksumOffset,
          size_t HeaderChecksumOffset>
struct SealedHeaderLayout {
  static_assert(BodyChecksumOffset + 8 <= HeaderChecksumOffset &&
                HeaderChecksumOffset + 8 <= EncodedLength);
  static constexpr size_t kEncodedLength = EncodedLength;
  static constexpr size_t kBodyChecksumOffset = BodyChecksumOffset;
  static constexpr size_t kHeaderChecksumOffset = HeaderChecksumOffset;
};

struct UFSPACK_EXPORT IndexHeader : SealedHeaderLayout<176, 160, 168> {
  uint32_t version = kFormatVersion;
  uint32_t required_flags = 0;
  uint32_t optional_flags = 0;
  ChecksumType checksum_type = ChecksumType::kXXH3_64;
  uint32_t record_size = 0;  // RecordEntry::kEncodedLength in version 1
  PackId pack_id;
  uint64_t record_count = 0;
  uint64_t class_count = 0;
  uint64_t data_size = 0;      // exact size of data.ufs in bytes
  uint64_t index_size = 0;     // exact size of index.ufs in bytes
  Section records;             // record_count * record_size bytes
  Section classes;             // class_count * ClassEntry::kEncodedLength bytes
  Section lookup;              // lookup slot count * 4 bytes
  Section names;               // the name pool
  Section meta;                // key/value metadata, may be empty
  uint64_t body_checksum = 0;  // Checksum64 of bytes [176, index_size)

  bool flat() const { return (optional_flags & kOptionalFlagFlat) != 0; }
  uint64_t lookup_slots() const { return lookup.size / 4; }

  // Appends exactly kEncodedLength bytes, computing header_checksum.
  void EncodeTo(std::string* dst) const;
  // Consumes kEncodedLength bytes.  Checks, in order: length, magic ("not a
  // ufspack index"), version (NotSupported), header checksum, required
  // flags (NotSupported), checksum type (NotSupported), record size,
  // reserved bytes.  Section bounds are checked by ValidateLayout().
  Status DecodeFrom(std::string_view* input);
  // Checks the sections against each other, the counts and index_size, with
  // overflow-safe arithmetic.  O(1).
  Status ValidateLayout() const;
};

// ---------------------------------------------------------------------------
// Record table entry
// ---------------------------------------------------------------------------

struct UFSPACK_EXPORT RecordEntry {
  static constexpr size_t kEncodedLength = 56;
  // Field offsets within the encoded entry (docs/format.md, "Record
  // table"), for code that reads one field in place, such as a lookup
  // comparing name hash tags.
  static constexpr size_t kOffsetAt = 0;
  static constexpr size_t kStoredLengthAt = 8;
  static constexpr size_t kOriginalLengthAt = 16;
  static constexpr size_t kChecksumAt = 24;
  static constexpr size_t kNameOffsetAt = 32;
  static constexpr size_t kNameLengthAt = 40;
  static constexpr size_t kLabelAt = 44;
  static constexpr size_t kNameHashAt = 48;
  static constexpr size_t kCodecAt = 52;
  static constexpr size_t kReservedAt = 53;  // 3 bytes, zero

  uint64_t offset = 0;           // of the stored bytes in data.ufs
  uint64_t stored_length = 0;    // bytes in data.ufs
  uint64_t original_length = 0;  // bytes after decoding
  uint64_t checksum = 0;         // Checksum64 of the stored bytes
  uint64_t name_offset = 0;      // into the name pool
  uint32_t name_length = 0;
  uint32_t label = 0;      // class index, or kNoLabel in a flat pack
  uint32_t name_hash = 0;  // high 32 bits of NameHash(name)
  Codec codec = Codec::kRaw;

  void EncodeTo(std::string* dst) const;
  // Checks the codec is known, reserved bytes are zero and a raw record's
  // lengths agree.  Bounds against the data file and pools are the
  // Reader's job (it knows them).
  Status DecodeFrom(std::string_view* input);
};

// ---------------------------------------------------------------------------
// Class table entry
// ---------------------------------------------------------------------------

struct UFSPACK_EXPORT ClassEntry {
  static constexpr size_t kEncodedLength = 32;

  uint64_t name_offset = 0;  // into the name pool
  uint32_t name_length = 0;
  uint64_t first_record = 0;  // records of a class are contiguous
  uint64_t record_count = 0;

  void EncodeTo(std::string* dst) const;
  Status DecodeFrom(std::string_view* input);
};

// ---------------------------------------------------------------------------
// Name lookup table
// ---------------------------------------------------------------------------

// Number of lookup slots for `record_count` records: the smallest power of
// two >= 2 * record_count (load factor <= 1/2), or 0 for an empty pack (and
// for counts above 2^62, which no valid pack has).
UFSPACK_EXPORT uint64_t LookupSlotsFor(uint64_t record_count);

// The first slot probed for a name hash; probing is linear, wrapping.
inline uint64_t LookupHome(uint64_t hash, uint64_t slots) {
  return hash & (slots - 1);
}
inline uint32_t NameHashTag(uint64_t hash) {
  return static_cast<uint32_t>(hash >> 32);
}

// ---------------------------------------------------------------------------
// Metadata section
// ---------------------------------------------------------------------------

// The keys `ufspack build` writes, kMetaSourceRoot and kMetaExtensions, are
// in types.h.

// Encodes key/value pairs in key order (so output is deterministic).  An
// empty map encodes to nothing (an empty section).
UFSPACK_EXPORT void EncodeMetadata(
    const std::map<std::string, std::string>& entries, std::string* dst);
// Decodes a metadata section: u32 count, then per entry u32 key length, u32
// value length, key, value.  Views point into `section`.
UFSPACK_EXPORT Status DecodeMetadata(
    std::string_view section,
    std::vector<std::pair<std::string_view, std::string_view>>* entries);

}  // namespace ufspack

#endif  // UFSPACK_FORMAT_H_
