// Copyright 2026 The ufspack Authors.
// See docs/format.md.
#include "ufspack/format.h"

#include <xxhash.h>
#ifdef UFSPACK_HAVE_XXH_DISPATCH
#include <xxh_x86dispatch.h>
#endif

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ufspack/coding.h"
#include "ufspack/text.h"

namespace ufspack {
namespace {

static_assert(DataHeader::kEncodedLength == 64, "docs/format.md: data header");
static_assert(IndexHeader::kEncodedLength == 176,
              "docs/format.md: index header");
static_assert(RecordEntry::kEncodedLength == 56,
              "docs/format.md: record entry");
static_assert(ClassEntry::kEncodedLength == 32, "docs/format.md: class entry");
static_assert(sizeof(kDataMagic) == 8 && sizeof(kIndexMagic) == 8, "magic");

bool AllZero(const char* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != 0) return false;
  }
  return true;
}

Status CheckVersion(uint32_t version, const char* what) {
  if (version < kMinReadableVersion || version > kMaxReadableVersion) {
    return Status::NotSupported(std::string("unsupported ") + what +
                                " version " + std::to_string(version) +
                                ", this build reads " +
                                std::to_string(kMinReadableVersion) + ".." +
                                std::to_string(kMaxReadableVersion));
  }
  return Status::OK();
}

}  // namespace

std::string ShortInput(const char* what, size_t want, size_t got) {
  return std::string(what) + " needs " + std::to_string(want) +
         " bytes, found " + std::to_string(got);
}

Status CheckHeaderFrame(std::string_view input, const char* magic,
                        size_t length, const char* what) {
  if (input.size() < 8 || std::memcmp(input.data(), magic, 8) != 0) {
    return Status::Corruption(std::string("not a ufspack ") + what +
                              " (bad magic)");
  }
  if (input.size() < length) {
    return Status::Corruption(
        "truncated: " + ShortInput((std::string(what) + " header").c_str(),
                                   length, input.size()));
  }
  return Status::OK();
}

Status CheckHeaderChecksum(const char* p, size_t checksum_offset,
                           const char* what) {
  const uint64_t stored = DecodeFixed64(p + checksum_offset);
  const uint64_t actual = Checksum64(p, checksum_offset);
  if (stored != actual) {
    return Status::Corruption(std::string(what) +
                              " header checksum mismatch: expected " +
                              HexU64(stored) + ", found " + HexU64(actual));
  }
  return Status::OK();
}

void EncodeSections(const Section* const* sections, int n, char* at) {
  for (int i = 0; i < n; ++i) {
    EncodeFixed64(at + 16 * i, sections[i]->offset);
    EncodeFixed64(at + 8 + 16 * i, sections[i]->size);
  }
}

void DecodeSections(const char* at, Section* const* sections, int n) {
  for (int i = 0; i < n; ++i) {
    sections[i]->offset = DecodeFixed64(at + 16 * i);
    sections[i]->size = DecodeFixed64(at + 8 + 16 * i);
  }
}

void SealHeader(char* buf, size_t checksum_offset, size_t length,
                std::string* dst) {
  EncodeFixed64(buf + checksum_offset, Checksum64(buf, checksum_offset));
  dst->append(buf, length);
}

const char* CodecName(Codec codec) {
  switch (codec) {
    case Codec::kRaw:
      return "raw";
    case Codec::kZstd:
      return "zstd";
  }
  return "unknown";
}

uint64_t Checksum64(const void* data, size_t n) {
#ifdef UFSPACK_HAVE_XXH_DISPATCH
  return XXH3_64bits_dispatch(data, n);  // SSE2/AVX2/AVX512 chosen at run time
#else
  return XXH3_64bits(data, n);
#endif
}

PackId PackId::Of(const void* data, size_t n) {
#ifdef UFSPACK_HAVE_XXH_DISPATCH
  XXH128_hash_t h = XXH3_128bits_dispatch(data, n);
#else
  XXH128_hash_t h = XXH3_128bits(data, n);
#endif
  PackId id;
  char buf[16];
  EncodeFixed64(buf, h.low64);
  EncodeFixed64(buf + 8, h.high64);
  std::memcpy(id.bytes.data(), buf, 16);
  return id;
}

std::string PackId::ToHex() const {
  static const char kDigits[] = "0123456789abcdef";
  std::string s;
  s.reserve(32);
  for (uint8_t b : bytes) {
    s.push_back(kDigits[b >> 4]);
    s.push_back(kDigits[b & 15]);
  }
  return s;
}

uint64_t LookupSlotsFor(uint64_t record_count) {
  // Past 2^62 records, 2 * record_count has no power-of-two bound in 64 bits;
  // such counts are far beyond kMaxRecords and rejected before this matters.
  if (record_count == 0 || record_count > (1ull << 62)) return 0;
  uint64_t slots = 1;
  while (slots < 2 * record_count) slots <<= 1;
  return slots;
}

// --- DataHeader --------------------------------------------------------------
//   0  8  magic "\x89UFSDAT\n"
//   8  4  version
//  12  4  header size (64)
//  16 16  pack id
//  32 32  reserved, zero

void DataHeader::EncodeTo(std::string* dst) const {
  char buf[kEncodedLength] = {};
  std::memcpy(buf, kDataMagic, 8);
  EncodeFixed32(buf + 8, version);
  EncodeFixed32(buf + 12, static_cast<uint32_t>(kEncodedLength));
  std::memcpy(buf + 16, pack_id.bytes.data(), 16);
  dst->append(buf, kEncodedLength);
}

Status DataHeader::DecodeFrom(std::string_view* input) {
  if (input->size() < 8 || std::memcmp(input->data(), kDataMagic, 8) != 0) {
    return Status::Corruption("not a ufspack data file (bad magic)");
  }
  if (input->size() < kEncodedLength) {
    return Status::Corruption(
        ShortInput("data header", kEncodedLength, input->size()));
  }
  const char* p = input->data();
  version = DecodeFixed32(p + 8);
  UFSPACK_RETURN_IF_ERROR(CheckVersion(version, "data file"));
  uint32_t header_size = DecodeFixed32(p + 12);
  if (header_size != kEncodedLength) {
    return Status::Corruption(
        "data header: header size at offset 12: expected " +
        std::to_string(kEncodedLength) + ", found " +
        std::to_string(header_size));
  }
  std::memcpy(pack_id.bytes.data(), p + 16, 16);
  if (!AllZero(p + 32, 32)) {
    return Status::Corruption(
        "data header: reserved bytes 32..63 are not zero");
  }
  input->remove_prefix(kEncodedLength);
  return Status::OK();
}

// --- IndexHeader -------------------------------------------------------------
//   0  8  magic "\x89UFSIDX\n"        80  8  records.offset
//   8  4  version                     88  8  records.size
//  12  4  header size (176)           96  8  classes.offset
//  16  4  required flags             104  8  classes.size
//  20  4  optional flags             112  8  lookup.offset
//  24  1  checksum type              120  8  lookup.size
//  25  3  reserved, zero             128  8  names.offset
//  28  4  record size (56)           136  8  names.size
//  32 16  pack id                    144  8  meta.offset
//  48  8  record count               152  8  meta.size
//                                    160  8  body checksum
//                                    168  8  header checksum (of bytes 0..167)
//  56  8  class count
//  64  8  data size
//  72  8  index size

void IndexHeader::EncodeTo(std::string* dst) const {
  char buf[kEncodedLength] = {};
  std::memcpy(buf, kIndexMagic, 8);
  EncodeFixed32(buf + 8, version);
  EncodeFixed32(buf + 12, static_cast<uint32_t>(kEncodedLength));
  EncodeFixed32(buf + 16, required_flags);
  EncodeFixed32(buf + 20, optional_flags);
  buf[24] = static_cast<char>(checksum_type);
  EncodeFixed32(buf + 28, record_size);
  std::memcpy(buf + 32, pack_id.bytes.data(), 16);
  EncodeFixed64(buf + 48, record_count);
  EncodeFixed64(buf + 56, class_count);
  EncodeFixed64(buf + 64, data_size);
  EncodeFixed64(buf + 72, index_size);
  const Section* sections[5] = {&records, &classes, &lookup, &names, &meta};
  EncodeSections(sections, 5, buf + 80);
  EncodeFixed64(buf + kBodyChecksumOffset, body_checksum);
  SealHeader(buf, kHeaderChecksumOffset, kEncodedLength, dst);
}

Status IndexHeader::DecodeFrom(std::string_view* input) {
  UFSPACK_RETURN_IF_ERROR(
      CheckHeaderFrame(*input, kIndexMagic, kEncodedLength, "index"));
  const char* p = input->data();
  version = DecodeFixed32(p + 8);
  UFSPACK_RETURN_IF_ERROR(CheckVersion(version, "index"));
  UFSPACK_RETURN_IF_ERROR(
      CheckHeaderChecksum(p, kHeaderChecksumOffset, "index"));
  uint32_t header_size = DecodeFixed32(p + 12);
  if (header_size != kEncodedLength) {
    return Status::Corruption(
        "index header: header size at offset 12: expected " +
        std::to_string(kEncodedLength) + ", found " +
        std::to_string(header_size));
  }
  required_flags = DecodeFixed32(p + 16);
  if ((required_flags & ~kKnownRequiredFlags) != 0) {
    return Status::NotSupported(
        "index requires features this build lacks "
        "(required flags " +
        HexU64(required_flags & ~kKnownRequiredFlags) + ")");
  }
  optional_flags = DecodeFixed32(p + 20);
  uint8_t ck = static_cast<uint8_t>(p[24]);
  if (ck != static_cast<uint8_t>(ChecksumType::kXXH3_64)) {
    return Status::NotSupported("index: unsupported checksum type " +
                                std::to_string(ck) +
                                ", this build reads 1 (XXH3-64)");
  }
  checksum_type = static_cast<ChecksumType>(ck);
  if (!AllZero(p + 25, 3)) {
    return Status::Corruption(
        "index header: reserved bytes 25..27 are not zero");
  }
  record_size = DecodeFixed32(p + 28);
  if (record_size != RecordEntry::kEncodedLength) {
    return Status::Corruption(
        "index header: record size at offset 28: expected " +
        std::to_string(RecordEntry::kEncodedLength) + ", found " +
        std::to_string(record_size));
  }
  std::memcpy(pack_id.bytes.data(), p + 32, 16);
  record_count = DecodeFixed64(p + 48);
  class_count = DecodeFixed64(p + 56);
  data_size = DecodeFixed64(p + 64);
  index_size = DecodeFixed64(p + 72);
  Section* sections[5] = {&records, &classes, &lookup, &names, &meta};
  DecodeSections(p + 80, sections, 5);
  body_checksum = DecodeFixed64(p + kBodyChecksumOffset);
  input->remove_prefix(kEncodedLength);
  return Status::OK();
}

Status IndexHeader::ValidateLayout() const {
  if (record_count > kMaxRecords) {
    return Status::Corruption(
        "index header: record count " + std::to_string(record_count) +
        " exceeds the format limit " + std::to_string(kMaxRecords));
  }
  if (class_count >= kNoLabel) {
    return Status::Corruption(
        "index header: class count " + std::to_string(class_count) +
        " exceeds the format limit " + std::to_string(kNoLabel - 1));
  }
  if (flat() && class_count != 0) {
    return Status::Corruption("index header: flat pack with " +
                              std::to_string(class_count) + " classes");
  }
  if (data_size < DataHeader::kEncodedLength) {
    return Status::Corruption("index header: data size " +
                              std::to_string(data_size) +
                              " is smaller than the data header (64 bytes)");
  }
  if (index_size < kEncodedLength) {
    return Status::Corruption("index header: index size " +
                              std::to_string(index_size) +
                              " is smaller than the index header (" +
                              std::to_string(kEncodedLength) + " bytes)");
  }
  struct Named {
    const char* name;
    const Section* s;
    uint64_t expected_size;  // UINT64_MAX: any
  };
  // record_count <= 2^32 and class_count < 2^32, so these cannot overflow.
  const uint64_t lookup_bytes = LookupSlotsFor(record_count) * 4;
  Named named[5] = {
      {"record table", &records, record_count * RecordEntry::kEncodedLength},
      {"class table", &classes, class_count * ClassEntry::kEncodedLength},
      {"lookup table", &lookup, lookup_bytes},
      {"name pool", &names, UINT64_MAX},
      {"metadata", &meta, UINT64_MAX},
  };
  for (const Named& n : named) {
    if (n.expected_size != UINT64_MAX && n.s->size != n.expected_size) {
      return Status::Corruption(std::string("index header: ") + n.name +
                                " size: expected " +
                                std::to_string(n.expected_size) + ", found " +
                                std::to_string(n.s->size));
    }
    if (n.s->offset < kEncodedLength || n.s->offset > index_size ||
        n.s->size > index_size - n.s->offset) {
      return Status::Corruption(
          std::string("index header: ") + n.name + " at offset " +
          std::to_string(n.s->offset) + " + " + std::to_string(n.s->size) +
          " lies outside the index (header " + std::to_string(kEncodedLength) +
          " bytes, index size " + std::to_string(index_size) + ")");
    }
  }
  // Non-empty sections must not overlap.  Sorted by offset, each non-empty
  // section is compared with the previous non-empty one (not merely its
  // neighbour, which may be an empty section between the two).  The ends
  // cannot overflow: each was checked against index_size above.
  std::stable_sort(
      std::begin(named), std::end(named),
      [](const Named& a, const Named& b) { return a.s->offset < b.s->offset; });
  const Named* prev = nullptr;
  for (const Named& n : named) {
    if (n.s->size == 0) continue;
    if (prev != nullptr && prev->s->offset + prev->s->size > n.s->offset) {
      return Status::Corruption(std::string("index header: ") + prev->name +
                                " overlaps " + n.name);
    }
    prev = &n;
  }
  return Status::OK();
}

// --- RecordEntry -------------------------------------------------------------
//   0  8  offset            40  4  name length
//   8  8  stored length     44  4  label
//  16  8  original length   48  4  name hash (high 32 bits)
//  24  8  checksum          52  1  codec
//  32  8  name offset       53  3  reserved, zero

void RecordEntry::EncodeTo(std::string* dst) const {
  char buf[kEncodedLength] = {};
  EncodeFixed64(buf + kOffsetAt, offset);
  EncodeFixed64(buf + kStoredLengthAt, stored_length);
  EncodeFixed64(buf + kOriginalLengthAt, original_length);
  EncodeFixed64(buf + kChecksumAt, checksum);
  EncodeFixed64(buf + kNameOffsetAt, name_offset);
  EncodeFixed32(buf + kNameLengthAt, name_length);
  EncodeFixed32(buf + kLabelAt, label);
  EncodeFixed32(buf + kNameHashAt, name_hash);
  buf[kCodecAt] = static_cast<char>(codec);
  dst->append(buf, kEncodedLength);
}

Status RecordEntry::DecodeFrom(std::string_view* input) {
  if (input->size() < kEncodedLength) {
    return Status::Corruption(
        ShortInput("record entry", kEncodedLength, input->size()));
  }
  const char* p = input->data();
  offset = DecodeFixed64(p + kOffsetAt);
  stored_length = DecodeFixed64(p + kStoredLengthAt);
  original_length = DecodeFixed64(p + kOriginalLengthAt);
  checksum = DecodeFixed64(p + kChecksumAt);
  name_offset = DecodeFixed64(p + kNameOffsetAt);
  name_length = DecodeFixed32(p + kNameLengthAt);
  label = DecodeFixed32(p + kLabelAt);
  name_hash = DecodeFixed32(p + kNameHashAt);
  uint8_t c = static_cast<uint8_t>(p[kCodecAt]);
  if (c > static_cast<uint8_t>(Codec::kZstd)) {
    return Status::Corruption("unknown codec " + std::to_string(c));
  }
  codec = static_cast<Codec>(c);
  if (!AllZero(p + kReservedAt, 3)) {
    return Status::Corruption("reserved bytes 53..55 are not zero");
  }
  if (codec == Codec::kRaw && stored_length != original_length) {
    return Status::Corruption(
        "raw record with stored length " + std::to_string(stored_length) +
        " != original length " + std::to_string(original_length));
  }
  input->remove_prefix(kEncodedLength);
  return Status::OK();
}

// --- ClassEntry --------------------------------------------------------------
//   0  8  name offset       16  8  first record
//   8  4  name length       24  8  record count
//  12  4  reserved, zero

void ClassEntry::EncodeTo(std::string* dst) const {
  char buf[kEncodedLength] = {};
  EncodeFixed64(buf + 0, name_offset);
  EncodeFixed32(buf + 8, name_length);
  EncodeFixed64(buf + 16, first_record);
  EncodeFixed64(buf + 24, record_count);
  dst->append(buf, kEncodedLength);
}

Status ClassEntry::DecodeFrom(std::string_view* input) {
  if (input->size() < kEncodedLength) {
    return Status::Corruption(
        ShortInput("class entry", kEncodedLength, input->size()));
  }
  const char* p = input->data();
  name_offset = DecodeFixed64(p + 0);
  name_length = DecodeFixed32(p + 8);
  if (!AllZero(p + 12, 4)) {
    return Status::Corruption("reserved bytes 12..15 are not zero");
  }
  first_record = DecodeFixed64(p + 16);
  record_count = DecodeFixed64(p + 24);
  input->remove_prefix(kEncodedLength);
  return Status::OK();
}

// --- Metadata section
// ----------------------------------------------------------
//   0  4  entry count
//   then per entry: 4 key length, 4 value length, key bytes, value bytes

void EncodeMetadata(const std::map<std::string, std::string>& entries,
                    std::string* dst) {
  if (entries.empty()) return;
  PutFixed32(dst, static_cast<uint32_t>(entries.size()));
  for (const auto& [key, value] : entries) {
    PutFixed32(dst, static_cast<uint32_t>(key.size()));
    PutFixed32(dst, static_cast<uint32_t>(value.size()));
    dst->append(key);
    dst->append(value);
  }
}

Status DecodeMetadata(
    std::string_view section,
    std::vector<std::pair<std::string_view, std::string_view>>* entries) {
  entries->clear();
  if (section.empty()) return Status::OK();
  if (section.size() < 4) {
    return Status::Corruption("metadata: " + std::to_string(section.size()) +
                              " bytes, too short for the entry count");
  }
  const uint32_t count = DecodeFixed32(section.data());
  size_t pos = 4;
  for (uint32_t k = 0; k < count; ++k) {
    if (section.size() - pos < 8) {
      return Status::Corruption("metadata: entry " + std::to_string(k) +
                                " header at offset " + std::to_string(pos) +
                                " runs past the section (" +
                                std::to_string(section.size()) + " bytes)");
    }
    const uint64_t klen = DecodeFixed32(section.data() + pos);
    const uint64_t vlen = DecodeFixed32(section.data() + pos + 4);
    pos += 8;
    if (klen + vlen > section.size() - pos) {
      return Status::Corruption("metadata: entry " + std::to_string(k) +
                                " of " + std::to_string(klen) + " + " +
                                std::to_string(vlen) + " bytes at offset " +
                                std::to_string(pos) +
                                " runs past the section (" +
                                std::to_string(section.size()) + " bytes)");
    }
    entries->emplace_back(section.substr(pos, klen),
                          section.substr(pos + klen, vlen));
    pos += klen + vlen;
  }
  if (pos != section.size()) {
    return Status::Corruption(
        "metadata: " + std::to_string(section.size() - pos) +
        " trailing bytes after " + std::to_string(count) + " entries");
  }
  return Status::OK();
}

}  // namespace ufspack
