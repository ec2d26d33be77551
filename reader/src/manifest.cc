// Copyright 2026 The ufspack Authors.
// See docs/format.md, "Merged packs".
#include "ufspack/manifest.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "ufspack/coding.h"
#include "ufspack/file.h"
#include "ufspack/text.h"

namespace ufspack {
namespace {

static_assert(ManifestHeader::kEncodedLength == 200,
              "docs/format.md: manifest header");
static_assert(PartEntry::kEncodedLength == 64, "docs/format.md: part entry");
static_assert(SegmentEntry::kEncodedLength == 24,
              "docs/format.md: segment entry");

bool AllZero(const char* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != 0) return false;
  }
  return true;
}

}  // namespace

// --- ManifestHeader
// -----------------------------------------------------------
//   0  8  magic            72  8  file_size
//   8  4  version          80 16  parts (offset, size)
//  12  4  required_flags   96 16  segments
//  16  4  optional_flags  112 16  classes
//  20  4  reserved (0)    128 16  label_maps
//  24 16  pack_id         144 16  strings
//  40  8  part_count      160 16  meta
//  48  8  segment_count   176  8  body_checksum
//  56  8  record_count    184  8  reserved (0)
//  64  8  class_count     192  8  header_checksum of [0, 192)

void ManifestHeader::EncodeTo(std::string* dst) const {
  char buf[kEncodedLength] = {};
  std::memcpy(buf, kManifestMagic, 8);
  EncodeFixed32(buf + 8, version);
  EncodeFixed32(buf + 12, required_flags);
  EncodeFixed32(buf + 16, optional_flags);
  std::memcpy(buf + 24, pack_id.bytes.data(), 16);
  EncodeFixed64(buf + 40, part_count);
  EncodeFixed64(buf + 48, segment_count);
  EncodeFixed64(buf + 56, record_count);
  EncodeFixed64(buf + 64, class_count);
  EncodeFixed64(buf + 72, file_size);
  const Section* sections[6] = {&parts,      &segments, &classes,
                                &label_maps, &strings,  &meta};
  EncodeSections(sections, 6, buf + 80);
  EncodeFixed64(buf + kBodyChecksumOffset, body_checksum);
  SealHeader(buf, kHeaderChecksumOffset, kEncodedLength, dst);
}

Status ManifestHeader::DecodeFrom(std::string_view* input) {
  UFSPACK_RETURN_IF_ERROR(
      CheckHeaderFrame(*input, kManifestMagic, kEncodedLength, "manifest"));
  const char* p = input->data();
  version = DecodeFixed32(p + 8);
  if (version < 1 || version > kMaxReadableManifestVersion) {
    return Status::NotSupported(
        "unsupported manifest version " + std::to_string(version) +
        ", this build reads 1.." + std::to_string(kMaxReadableManifestVersion));
  }
  UFSPACK_RETURN_IF_ERROR(
      CheckHeaderChecksum(p, kHeaderChecksumOffset, "manifest"));
  required_flags = DecodeFixed32(p + 12);
  if (required_flags != 0) {
    return Status::NotSupported("manifest requires features " +
                                HexU64(required_flags) +
                                " this build does not know");
  }
  optional_flags = DecodeFixed32(p + 16);
  if (!AllZero(p + 20, 4) || !AllZero(p + 184, 8)) {
    return Status::Corruption("manifest header: reserved bytes are not zero");
  }
  std::memcpy(pack_id.bytes.data(), p + 24, 16);
  part_count = DecodeFixed64(p + 40);
  segment_count = DecodeFixed64(p + 48);
  record_count = DecodeFixed64(p + 56);
  class_count = DecodeFixed64(p + 64);
  file_size = DecodeFixed64(p + 72);
  Section* sections[6] = {&parts,      &segments, &classes,
                          &label_maps, &strings,  &meta};
  DecodeSections(p + 80, sections, 6);
  body_checksum = DecodeFixed64(p + kBodyChecksumOffset);

  if (part_count > kMaxParts || segment_count > kMaxSegments) {
    return Status::Corruption(
        "manifest header: " + std::to_string(part_count) + " parts and " +
        std::to_string(segment_count) + " segments exceed the limits " +
        std::to_string(kMaxParts) + " and " + std::to_string(kMaxSegments));
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
  // The sections follow the header in this order, with no gaps, and the
  // last ends at file_size.
  struct Named {
    const char* name;
    const Section* s;
    uint64_t expected_size;  // UINT64_MAX: any
  };
  const Named named[6] = {
      {"part table", &parts, part_count * PartEntry::kEncodedLength},
      {"segment table", &segments,
       segment_count * SegmentEntry::kEncodedLength},
      {"class table", &classes, class_count * ClassEntry::kEncodedLength},
      {"label maps", &label_maps, UINT64_MAX},
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
    if (n.s->offset != at || at > file_size || n.s->size > file_size - at) {
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
  if (label_maps.size % 4 != 0) {
    return Status::Corruption("manifest header: label maps size " +
                              std::to_string(label_maps.size) +
                              " is not a multiple of 4");
  }
  input->remove_prefix(kEncodedLength);
  return Status::OK();
}

// --- PartEntry
// ----------------------------------------------------------------
//   0 16  pack_id         40  8  path_offset
//  16  8  record_count    48  4  path_length
//  24  8  data_size       52  4  label_map_length
//  32  8  index_size      56  8  label_map_offset

void PartEntry::EncodeTo(std::string* dst) const {
  char buf[kEncodedLength] = {};
  std::memcpy(buf, pack_id.bytes.data(), 16);
  EncodeFixed64(buf + 16, record_count);
  EncodeFixed64(buf + 24, data_size);
  EncodeFixed64(buf + 32, index_size);
  EncodeFixed64(buf + 40, path_offset);
  EncodeFixed32(buf + 48, path_length);
  EncodeFixed32(buf + 52, label_map_length);
  EncodeFixed64(buf + 56, label_map_offset);
  dst->append(buf, kEncodedLength);
}

Status PartEntry::DecodeFrom(std::string_view* input) {
  if (input->size() < kEncodedLength) {
    return Status::Corruption(
        ShortInput("part entry", kEncodedLength, input->size()));
  }
  const char* p = input->data();
  std::memcpy(pack_id.bytes.data(), p, 16);
  record_count = DecodeFixed64(p + 16);
  data_size = DecodeFixed64(p + 24);
  index_size = DecodeFixed64(p + 32);
  path_offset = DecodeFixed64(p + 40);
  path_length = DecodeFixed32(p + 48);
  label_map_length = DecodeFixed32(p + 52);
  label_map_offset = DecodeFixed64(p + 56);
  if (record_count > kMaxRecords) {
    return Status::Corruption("part entry: record count " +
                              std::to_string(record_count) +
                              " exceeds the format limit");
  }
  input->remove_prefix(kEncodedLength);
  return Status::OK();
}

// --- SegmentEntry
// -------------------------------------------------------------
//   0  4  part   4  4  reserved (0)   8  8  first   16  8  count

void SegmentEntry::EncodeTo(std::string* dst) const {
  char buf[kEncodedLength] = {};
  EncodeFixed32(buf, part);
  EncodeFixed64(buf + 8, first);
  EncodeFixed64(buf + 16, count);
  dst->append(buf, kEncodedLength);
}

Status SegmentEntry::DecodeFrom(std::string_view* input) {
  if (input->size() < kEncodedLength) {
    return Status::Corruption(
        ShortInput("segment entry", kEncodedLength, input->size()));
  }
  const char* p = input->data();
  part = DecodeFixed32(p);
  if (!AllZero(p + 4, 4)) {
    return Status::Corruption(
        "segment entry: reserved bytes 4..7 are not zero");
  }
  first = DecodeFixed64(p + 8);
  count = DecodeFixed64(p + 16);
  input->remove_prefix(kEncodedLength);
  return Status::OK();
}

// --- Manifest
// -----------------------------------------------------------------

uint32_t Manifest::GlobalLabel(size_t k, uint32_t local) const {
  const PartEntry& p = parts[k];
  if (p.label_map_length == 0 || local >= p.label_map_length) return local;
  return DecodeFixed32(label_maps.data() + p.label_map_offset + 4 * local);
}

Status DecodeManifest(std::string_view bytes, const std::string& name,
                      Manifest* m) {
  std::string_view in = bytes;
  ManifestHeader& h = m->header;
  UFSPACK_RETURN_IF_ERROR(h.DecodeFrom(&in).WithContext(name));
  if (h.file_size != bytes.size()) {
    return Status::Corruption(name + ": size: expected " +
                              std::to_string(h.file_size) +
                              " bytes (recorded in the header), found " +
                              std::to_string(bytes.size()));
  }
  const uint64_t body =
      Checksum64(bytes.data() + ManifestHeader::kEncodedLength,
                 bytes.size() - ManifestHeader::kEncodedLength);
  if (body != h.body_checksum) {
    return Status::Corruption(
        name + ": manifest body checksum mismatch: " + "expected " +
        HexU64(h.body_checksum) + ", found " + HexU64(body));
  }
  m->classes = bytes.substr(h.classes.offset, h.classes.size);
  m->label_maps = bytes.substr(h.label_maps.offset, h.label_maps.size);
  m->strings = bytes.substr(h.strings.offset, h.strings.size);
  m->meta = bytes.substr(h.meta.offset, h.meta.size);
  const uint64_t label_entries = h.label_maps.size / 4;
  m->parts.resize(static_cast<size_t>(h.part_count));
  m->part_paths.resize(m->parts.size());
  for (size_t k = 0; k < m->parts.size(); ++k) {
    const std::string where = name + ": part " + std::to_string(k);
    std::string_view e =
        bytes.substr(h.parts.offset + k * PartEntry::kEncodedLength,
                     PartEntry::kEncodedLength);
    PartEntry& p = m->parts[k];
    UFSPACK_RETURN_IF_ERROR(p.DecodeFrom(&e).WithContext(where));
    if (p.path_offset > m->strings.size() ||
        p.path_length > m->strings.size() - p.path_offset) {
      return Status::Corruption(where + ": path lies outside the string pool");
    }
    m->part_paths[k] = m->strings.substr(p.path_offset, p.path_length);
    if (p.label_map_length > 0) {
      if (p.label_map_offset % 4 != 0 ||
          p.label_map_offset / 4 > label_entries ||
          p.label_map_length > label_entries - p.label_map_offset / 4) {
        return Status::Corruption(where + ": label map lies outside the maps");
      }
      for (uint32_t c = 0; c < p.label_map_length; ++c) {
        const uint32_t g = m->GlobalLabel(k, c);
        if (g >= h.class_count) {
          return Status::Corruption(where + ": label " + std::to_string(c) +
                                    " maps to " + std::to_string(g) +
                                    ", beyond the class count " +
                                    std::to_string(h.class_count));
        }
      }
    } else if (p.label_map_offset != 0) {
      return Status::Corruption(where + ": label map offset without a map");
    }
  }
  // The segments: in range, and together covering each part's records
  // exactly once.
  m->segments.resize(static_cast<size_t>(h.segment_count));
  m->segment_starts.resize(m->segments.size());
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> runs(m->parts.size());
  uint64_t next = 0;
  for (size_t s = 0; s < m->segments.size(); ++s) {
    const std::string where = name + ": segment " + std::to_string(s);
    std::string_view e =
        bytes.substr(h.segments.offset + s * SegmentEntry::kEncodedLength,
                     SegmentEntry::kEncodedLength);
    SegmentEntry& g = m->segments[s];
    UFSPACK_RETURN_IF_ERROR(g.DecodeFrom(&e).WithContext(where));
    if (g.part >= m->parts.size()) {
      return Status::Corruption(where + ": part " + std::to_string(g.part) +
                                " of " + std::to_string(m->parts.size()));
    }
    const uint64_t n = m->parts[g.part].record_count;
    if (g.count == 0 || g.first > n || g.count > n - g.first) {
      return Status::Corruption(where + ": records " + std::to_string(g.first) +
                                " + " + std::to_string(g.count) + " of part " +
                                std::to_string(g.part) + ", which has " +
                                std::to_string(n));
    }
    m->segment_starts[s] = next;
    next += g.count;
    runs[g.part].emplace_back(g.first, g.count);
  }
  if (next != h.record_count) {
    return Status::Corruption(name + ": the segments hold " +
                              std::to_string(next) + " records, the header " +
                              std::to_string(h.record_count));
  }
  for (size_t k = 0; k < runs.size(); ++k) {
    std::sort(runs[k].begin(), runs[k].end());
    // Sorted, the runs must tile [0, record_count): each starts where the
    // previous one ended (a duplicated or overlapping run does not).
    uint64_t covered = 0;
    size_t tiled = 0;
    for (const auto& [first, count] : runs[k]) {
      if (first != covered) break;
      covered += count;
      ++tiled;
    }
    if (tiled != runs[k].size() || covered != m->parts[k].record_count) {
      return Status::Corruption(name + ": part " + std::to_string(k) +
                                ": the segments cover its " +
                                std::to_string(m->parts[k].record_count) +
                                " records not exactly once (from record " +
                                std::to_string(covered) + ")");
    }
  }
  return Status::OK();
}

PackId MergedPackId(const std::vector<PackId>& parts,
                    const std::vector<SegmentEntry>& segments) {
  static constexpr char kDomain[] = "ufspack-merge";  // with its '\0'
  std::string buf(kDomain, sizeof(kDomain));
  for (const PackId& id : parts) {
    buf.append(reinterpret_cast<const char*>(id.bytes.data()), 16);
  }
  for (const SegmentEntry& s : segments) s.EncodeTo(&buf);
  return PackId::Of(buf.data(), buf.size());
}

Status ManifestContentsOf(const Manifest& m, const std::string& name,
                          ManifestContents* out) {
  ManifestContents c;
  c.flat = m.header.flat();
  c.parts.resize(m.parts.size());
  for (size_t k = 0; k < m.parts.size(); ++k) {
    const PartEntry& e = m.parts[k];
    ManifestContents::Part& p = c.parts[k];
    p.pack_id = e.pack_id;
    p.record_count = e.record_count;
    p.data_size = e.data_size;
    p.index_size = e.index_size;
    p.path = std::string(m.part_paths[k]);
    for (uint32_t j = 0; j < e.label_map_length; ++j) {
      p.label_map.push_back(m.GlobalLabel(k, j));
    }
  }
  c.segments = m.segments;
  std::string_view classes = m.classes;
  for (uint64_t g = 0; g < m.header.class_count; ++g) {
    ClassEntry e;
    UFSPACK_RETURN_IF_ERROR(e.DecodeFrom(&classes).WithContext(
        name + ": class " + std::to_string(g)));
    if (e.name_offset > m.strings.size() ||
        e.name_length > m.strings.size() - e.name_offset) {
      return Status::Corruption(name + ": class " + std::to_string(g) +
                                ": name lies outside the string pool");
    }
    c.classes.push_back(
        {std::string(m.strings.substr(e.name_offset, e.name_length)),
         e.first_record, e.record_count});
  }
  std::vector<std::pair<std::string_view, std::string_view>> meta;
  UFSPACK_RETURN_IF_ERROR(
      DecodeMetadata(m.meta, &meta).WithContext(name + ": metadata"));
  for (const auto& [key, value] : meta) {
    c.meta[std::string(key)] = std::string(value);
  }
  *out = std::move(c);
  return Status::OK();
}

void EncodeManifest(const ManifestContents& c, std::string* out,
                    PackId* pack_id) {
  std::string part_table, segment_table, class_table, maps, strings, meta;
  std::vector<PackId> ids;
  for (const ManifestContents::Part& p : c.parts) {
    PartEntry e;
    e.pack_id = p.pack_id;
    e.record_count = p.record_count;
    e.data_size = p.data_size;
    e.index_size = p.index_size;
    e.path_offset = strings.size();
    e.path_length = static_cast<uint32_t>(p.path.size());
    strings += p.path;
    if (!p.label_map.empty()) {
      e.label_map_offset = maps.size();
      e.label_map_length = static_cast<uint32_t>(p.label_map.size());
      for (uint32_t g : p.label_map) PutFixed32(&maps, g);
    }
    e.EncodeTo(&part_table);
    ids.push_back(p.pack_id);
  }
  uint64_t records = 0;
  for (const SegmentEntry& s : c.segments) {
    s.EncodeTo(&segment_table);
    records += s.count;
  }
  for (const ManifestContents::Class& k : c.classes) {
    ClassEntry e;
    e.name_offset = strings.size();
    e.name_length = static_cast<uint32_t>(k.name.size());
    e.first_record = k.first_record;
    e.record_count = k.record_count;
    strings += k.name;
    e.EncodeTo(&class_table);
  }
  EncodeMetadata(c.meta, &meta);

  ManifestHeader h;
  h.optional_flags = c.flat ? kOptionalFlagFlat : 0;
  h.pack_id = MergedPackId(ids, c.segments);
  h.part_count = c.parts.size();
  h.segment_count = c.segments.size();
  h.record_count = records;
  h.class_count = c.classes.size();
  uint64_t at = ManifestHeader::kEncodedLength;
  std::string body;
  auto place = [&](Section* s, const std::string& bytes) {
    s->offset = at;
    s->size = bytes.size();
    at += bytes.size();
    body += bytes;
  };
  place(&h.parts, part_table);
  place(&h.segments, segment_table);
  place(&h.classes, class_table);
  place(&h.label_maps, maps);
  place(&h.strings, strings);
  place(&h.meta, meta);
  h.file_size = at;
  h.body_checksum = Checksum64(body.data(), body.size());
  out->clear();
  h.EncodeTo(out);
  *out += body;
  if (pack_id != nullptr) *pack_id = h.pack_id;
}

Status JoinPartPath(const std::string& dir, std::string_view relative,
                    std::string* out) {
  const std::string shown(relative);
  if (relative.empty() || relative.front() == '/') {
    return Status::InvalidArgument("part path '" + shown +
                                   "' is not a relative path");
  }
  const std::vector<std::string_view> segments = SplitPath(relative);
  for (std::string_view seg : segments) {
    if (seg.empty() || seg.find('\0') != std::string_view::npos) {
      return Status::InvalidArgument("part path '" + shown +
                                     "' has an empty or invalid segment");
    }
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
    for (std::string_view seg :
         SplitPath(std::string_view(dir).substr(path_start + 1))) {
      if (!seg.empty()) path.emplace_back(seg);
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
