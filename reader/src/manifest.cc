// Copyright 2026 The ufspack Authors.
// See docs/format.md, "Merged packs".
#include "ufspack/manifest.h"

#include <cstring>
#include <string>
#include <vector>

#include "ufspack/coding.h"
#include "ufspack/file.h"
#include "ufspack/text.h"

namespace ufspack {
namespace {

static_assert(ManifestHeader::kEncodedLength == 160,
              "docs/format.md: manifest header");
static_assert(PartEntry::kEncodedLength == 64, "docs/format.md: part entry");

bool AllZero(const char* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != 0) return false;
  }
  return true;
}

}  // namespace

// --- ManifestHeader
// -----------------------------------------------------------
//   0  8  magic            64  8  file_size
//   8  4  version          72 16  parts (offset, size)
//  12  4  required_flags   88 16  classes
//  16  4  optional_flags  104 16  strings
//  20  4  reserved (0)    120 16  meta
//  24 16  pack_id         136  8  body_checksum
//  40  8  part_count      144  8  reserved (0)
//  48  8  record_count    152  8  header_checksum of [0, 152)
//  56  8  class_count

void ManifestHeader::EncodeTo(std::string* dst) const {
  char buf[kEncodedLength] = {};
  std::memcpy(buf, kManifestMagic, 8);
  EncodeFixed32(buf + 8, version);
  EncodeFixed32(buf + 12, required_flags);
  EncodeFixed32(buf + 16, optional_flags);
  std::memcpy(buf + 24, pack_id.bytes.data(), 16);
  EncodeFixed64(buf + 40, part_count);
  EncodeFixed64(buf + 48, record_count);
  EncodeFixed64(buf + 56, class_count);
  EncodeFixed64(buf + 64, file_size);
  const Section* sections[4] = {&parts, &classes, &strings, &meta};
  for (int i = 0; i < 4; ++i) {
    EncodeFixed64(buf + 72 + 16 * i, sections[i]->offset);
    EncodeFixed64(buf + 80 + 16 * i, sections[i]->size);
  }
  EncodeFixed64(buf + kBodyChecksumOffset, body_checksum);
  EncodeFixed64(buf + kHeaderChecksumOffset,
                Checksum64(buf, kHeaderChecksumOffset));
  dst->append(buf, kEncodedLength);
}

Status ManifestHeader::DecodeFrom(std::string_view* input) {
  if (input->size() < 8 || std::memcmp(input->data(), kManifestMagic, 8) != 0) {
    return Status::Corruption("not a ufspack manifest (bad magic)");
  }
  if (input->size() < kEncodedLength) {
    return Status::Corruption("truncated: manifest header needs " +
                              std::to_string(kEncodedLength) +
                              " bytes, found " + std::to_string(input->size()));
  }
  const char* p = input->data();
  version = DecodeFixed32(p + 8);
  if (version < 1 || version > kMaxReadableManifestVersion) {
    return Status::NotSupported(
        "unsupported manifest version " + std::to_string(version) +
        ", this build reads 1.." + std::to_string(kMaxReadableManifestVersion));
  }
  const uint64_t stored = DecodeFixed64(p + kHeaderChecksumOffset);
  const uint64_t actual = Checksum64(p, kHeaderChecksumOffset);
  if (stored != actual) {
    return Status::Corruption("manifest header checksum mismatch: expected " +
                              HexU64(stored) + ", found " + HexU64(actual));
  }
  required_flags = DecodeFixed32(p + 12);
  if (required_flags != 0) {
    return Status::NotSupported("manifest requires features " +
                                HexU64(required_flags) +
                                " this build does not know");
  }
  optional_flags = DecodeFixed32(p + 16);
  if (!AllZero(p + 20, 4) || !AllZero(p + 144, 8)) {
    return Status::Corruption("manifest header: reserved bytes are not zero");
  }
  std::memcpy(pack_id.bytes.data(), p + 24, 16);
  part_count = DecodeFixed64(p + 40);
  record_count = DecodeFixed64(p + 48);
  class_count = DecodeFixed64(p + 56);
  file_size = DecodeFixed64(p + 64);
  Section* sections[4] = {&parts, &classes, &strings, &meta};
  for (int i = 0; i < 4; ++i) {
    sections[i]->offset = DecodeFixed64(p + 72 + 16 * i);
    sections[i]->size = DecodeFixed64(p + 80 + 16 * i);
  }
  body_checksum = DecodeFixed64(p + kBodyChecksumOffset);

  // Layout: the four sections follow the header in this order, with no
  // gaps, and the last ends at file_size.
  if (part_count > kMaxParts) {
    return Status::Corruption("manifest header: part count " +
                              std::to_string(part_count) + " exceeds " +
                              std::to_string(kMaxParts));
  }
  if (record_count > kMaxRecords * kMaxParts) {
    return Status::Corruption("manifest header: record count " +
                              std::to_string(record_count) + " is impossible");
  }
  if (class_count >= kNoLabel) {
    return Status::Corruption("manifest header: class count " +
                              std::to_string(class_count) +
                              " exceeds the format limit");
  }
  if (flat() && class_count != 0) {
    return Status::Corruption("manifest header: flat pack with " +
                              std::to_string(class_count) + " classes");
  }
  struct Named {
    const char* name;
    const Section* s;
    uint64_t expected_size;  // UINT64_MAX: any
  };
  const Named named[4] = {
      {"part table", &parts, part_count * PartEntry::kEncodedLength},
      {"class table", &classes, class_count * ClassEntry::kEncodedLength},
      {"string pool", &strings, UINT64_MAX},
      {"metadata", &meta, UINT64_MAX},
  };
  uint64_t at = kEncodedLength;
  for (const Named& n : named) {
    if (n.expected_size != UINT64_MAX && n.s->size != n.expected_size) {
      return Status::Corruption(std::string("manifest header: ") + n.name +
                                " size: expected " +
                                std::to_string(n.expected_size) + ", found " +
                                std::to_string(n.s->size));
    }
    if (n.s->offset != at || n.s->size > file_size - at) {
      return Status::Corruption(
          std::string("manifest header: ") + n.name + " at offset " +
          std::to_string(n.s->offset) + " + " + std::to_string(n.s->size) +
          ": expected offset " + std::to_string(at) +
          " and an end within the file size " + std::to_string(file_size));
    }
    at += n.s->size;
  }
  if (at != file_size) {
    return Status::Corruption("manifest header: sections end at " +
                              std::to_string(at) + ", file size is " +
                              std::to_string(file_size));
  }
  input->remove_prefix(kEncodedLength);
  return Status::OK();
}

// --- PartEntry
// ----------------------------------------------------------------
//   0 16  pack_id        40  8  index_size
//  16  8  record_count   48  8  path_offset
//  24  8  first_record   56  4  path_length
//  32  8  data_size      60  4  reserved (0)

void PartEntry::EncodeTo(std::string* dst) const {
  char buf[kEncodedLength] = {};
  std::memcpy(buf, pack_id.bytes.data(), 16);
  EncodeFixed64(buf + 16, record_count);
  EncodeFixed64(buf + 24, first_record);
  EncodeFixed64(buf + 32, data_size);
  EncodeFixed64(buf + 40, index_size);
  EncodeFixed64(buf + 48, path_offset);
  EncodeFixed32(buf + 56, path_length);
  dst->append(buf, kEncodedLength);
}

Status PartEntry::DecodeFrom(std::string_view* input) {
  if (input->size() < kEncodedLength) {
    return Status::Corruption("part entry needs " +
                              std::to_string(kEncodedLength) +
                              " bytes, found " + std::to_string(input->size()));
  }
  const char* p = input->data();
  std::memcpy(pack_id.bytes.data(), p, 16);
  record_count = DecodeFixed64(p + 16);
  first_record = DecodeFixed64(p + 24);
  data_size = DecodeFixed64(p + 32);
  index_size = DecodeFixed64(p + 40);
  path_offset = DecodeFixed64(p + 48);
  path_length = DecodeFixed32(p + 56);
  if (!AllZero(p + 60, 4)) {
    return Status::Corruption("part entry: reserved bytes 60..63 are not zero");
  }
  if (record_count > kMaxRecords) {
    return Status::Corruption("part entry: record count " +
                              std::to_string(record_count) +
                              " exceeds the format limit");
  }
  input->remove_prefix(kEncodedLength);
  return Status::OK();
}

PackId MergedPackId(const std::vector<PackId>& parts) {
  static constexpr char kDomain[] = "ufspack-merge";  // with its '\0'
  std::string buf(kDomain, sizeof(kDomain));
  for (const PackId& id : parts) {
    buf.append(reinterpret_cast<const char*>(id.bytes.data()), 16);
  }
  return PackId::Of(buf.data(), buf.size());
}

Status JoinPartPath(const std::string& dir, std::string_view relative,
                    std::string* out) {
  const std::string shown(relative);
  if (relative.empty() || relative.front() == '/') {
    return Status::InvalidArgument("part path '" + shown +
                                   "' is not a relative path");
  }
  std::vector<std::string_view> segments;
  size_t start = 0;
  while (start <= relative.size()) {
    size_t slash = relative.find('/', start);
    if (slash == std::string_view::npos) slash = relative.size();
    std::string_view seg = relative.substr(start, slash - start);
    if (seg.empty() || seg.find('\0') != std::string_view::npos) {
      return Status::InvalidArgument("part path '" + shown +
                                     "' has an empty or invalid segment");
    }
    segments.push_back(seg);
    start = slash + 1;
  }
  if (!IsUrl(dir)) {
    // The kernel resolves "." and ".." (after symlinks, as a shell would).
    *out = dir + "/" + shown;
    return Status::OK();
  }
  // A URL: scheme://authority/key-prefix.  The first path segment is the
  // bucket (s3://) or the first directory (https://); ".." may not climb
  // above the authority.
  const size_t scheme_end = dir.find("://");
  const size_t path_start = dir.find('/', scheme_end + 3);
  std::string base = path_start == std::string::npos
                         ? dir
                         : dir.substr(0, path_start);  // scheme://authority
  std::vector<std::string> path;
  if (path_start != std::string::npos) {
    std::string_view rest = std::string_view(dir).substr(path_start + 1);
    size_t s = 0;
    while (s < rest.size()) {
      size_t e = rest.find('/', s);
      if (e == std::string_view::npos) e = rest.size();
      if (e > s) path.emplace_back(rest.substr(s, e - s));
      s = e + 1;
    }
  }
  for (std::string_view seg : segments) {
    if (seg == ".") continue;
    if (seg == "..") {
      if (path.empty()) {
        return Status::InvalidArgument("part path '" + shown +
                                       "' climbs above " + base);
      }
      path.pop_back();
      continue;
    }
    path.emplace_back(seg);
  }
  *out = base;
  for (const std::string& seg : path) *out += "/" + seg;
  return Status::OK();
}

}  // namespace ufspack
