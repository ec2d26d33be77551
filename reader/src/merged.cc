// Copyright 2026 The ufspack Authors.
//
// Merged packs: one logical pack over the parts a manifest names
// (docs/format.md, "Merged packs").  The Reader's record, class and
// metadata methods work unchanged over the manifest's sections; what needs
// a part (entries, data, lookups) is sent to it here.
#include "merged.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "ufspack/coding.h"
#include "ufspack/file.h"
#include "ufspack/format.h"
#include "ufspack/manifest.h"
#include "ufspack/reader.h"
#include "ufspack/text.h"

namespace ufspack {
namespace {

std::string DirOf(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// "<manifest>: part k (<path>)": how errors name a part.
std::string PartName(const std::string& manifest, size_t k,
                     const std::string& path) {
  return manifest + ": part " + std::to_string(k) + " (" + path + ")";
}

// Reads the index header of the part at `dir` (one read of 176 bytes).
Status ReadPartHeader(const std::string& dir, IndexHeader* header) {
  const std::string index_path = dir + "/" + kIndexFileName;
  std::unique_ptr<RandomAccessFile> file;
  UFSPACK_RETURN_IF_ERROR(OpenRandomAccessFile(index_path, &file));
  char buf[IndexHeader::kEncodedLength];
  size_t got = 0;
  UFSPACK_RETURN_IF_ERROR(file->Read(0, sizeof(buf), buf, &got));
  std::string_view in(buf, got);
  return header->DecodeFrom(&in).WithContext(index_path);
}

// Why the part's header says it is not the part the manifest names, or "".
std::string Mismatch(const IndexHeader& h, const PartEntry& e,
                     const ManifestHeader& m) {
  if (h.pack_id != e.pack_id) {
    return "pack id " + h.pack_id.ToHex() + ", the manifest expects " +
           e.pack_id.ToHex() + " (rebuilt or replaced since the merge)";
  }
  auto differs = [](const char* what, uint64_t found, uint64_t expected) {
    return std::string(what) + " " + std::to_string(found) +
           ", the manifest expects " + std::to_string(expected);
  };
  if (h.record_count != e.record_count) {
    return differs("record count", h.record_count, e.record_count);
  }
  if (h.class_count != m.class_count) {
    return differs("class count", h.class_count, m.class_count);
  }
  if (h.data_size != e.data_size) {
    return differs("data size", h.data_size, e.data_size);
  }
  if (h.index_size != e.index_size) {
    return differs("index size", h.index_size, e.index_size);
  }
  if (h.flat() != m.flat()) return "flat and classed packs mixed";
  return "";
}

}  // namespace

Status Reader::OpenMerged(const std::string& manifest_path,
                          const ReaderOptions& options,
                          std::unique_ptr<Reader>* reader) {
  std::unique_ptr<Region> region;
  UFSPACK_RETURN_IF_ERROR(LoadFile(manifest_path, &region));
  const std::string& mname = region->name();
  const std::string_view bytes = region->bytes();
  std::string_view in = bytes;
  ManifestHeader m;
  UFSPACK_RETURN_IF_ERROR(m.DecodeFrom(&in).WithContext(mname));
  if (m.file_size != bytes.size()) {
    return Status::Corruption(mname + ": size: expected " +
                              std::to_string(m.file_size) +
                              " bytes (recorded in the header), found " +
                              std::to_string(bytes.size()));
  }
  const uint64_t body =
      Checksum64(bytes.data() + ManifestHeader::kEncodedLength,
                 bytes.size() - ManifestHeader::kEncodedLength);
  if (body != m.body_checksum) {
    return Status::Corruption(
        mname + ": manifest body checksum mismatch: " + "expected " +
        HexU64(m.body_checksum) + ", found " + HexU64(body));
  }
  const std::string_view strings =
      bytes.substr(m.strings.offset, m.strings.size);

  auto parts = std::make_unique<internal::PartSet>();
  parts->manifest_path = mname;
  parts->options = options;
  parts->remote = IsUrl(manifest_path);
  parts->count = static_cast<size_t>(m.part_count);
  parts->slots.reset(new internal::PartSlot[parts->count]);
  parts->firsts.resize(parts->count);
  const std::string dir = DirOf(manifest_path);
  uint64_t next = 0, data_size = 0, index_size = bytes.size();
  for (size_t k = 0; k < parts->count; ++k) {
    internal::PartSlot& slot = parts->slots[k];
    std::string_view e =
        bytes.substr(m.parts.offset + k * PartEntry::kEncodedLength,
                     PartEntry::kEncodedLength);
    UFSPACK_RETURN_IF_ERROR(slot.entry.DecodeFrom(&e).WithContext(
        mname + ": part " + std::to_string(k)));
    const PartEntry& p = slot.entry;
    if (p.path_offset > strings.size() ||
        p.path_length > strings.size() - p.path_offset) {
      return Status::Corruption(mname + ": part " + std::to_string(k) +
                                ": path lies outside the string pool");
    }
    if (p.first_record != next) {
      return Status::Corruption(
          mname + ": part " + std::to_string(k) + ": first record " +
          std::to_string(p.first_record) + ", expected " +
          std::to_string(next) + " (the records of the parts before it)");
    }
    next += p.record_count;
    data_size += p.data_size;
    index_size += p.index_size;
    parts->firsts[k] = p.first_record;
    UFSPACK_RETURN_IF_ERROR(
        JoinPartPath(dir, strings.substr(p.path_offset, p.path_length),
                     &slot.path)
            .WithContext(mname + ": part " + std::to_string(k)));
  }
  if (next != m.record_count) {
    return Status::Corruption(mname + ": the parts hold " +
                              std::to_string(next) + " records, the header " +
                              std::to_string(m.record_count));
  }
  // Every part must be there and be the pack that was merged: one header
  // read each, nothing mapped yet.
  for (size_t k = 0; k < parts->count; ++k) {
    const internal::PartSlot& slot = parts->slots[k];
    IndexHeader h;
    Status s = ReadPartHeader(slot.path, &h);
    if (!s.ok()) {
      const std::string what = PartName(mname, k, slot.path);
      if (s.IsNotFound()) {
        return Status::NotFound(what +
                                " is missing: " + std::string(s.message()));
      }
      return s.WithContext(what);
    }
    const std::string why = Mismatch(h, slot.entry, m);
    if (!why.empty()) {
      return Status::Corruption(PartName(mname, k, slot.path) +
                                " is not the part that was merged: " + why);
    }
  }

  std::unique_ptr<Reader> r(new Reader());
  r->options_ = options;
  r->info_.index_path = mname;
  r->info_.version = m.version;
  r->info_.pack_id = m.pack_id;
  r->info_.record_count = m.record_count;
  r->info_.class_count = m.class_count;
  r->info_.data_size = data_size;
  r->info_.index_size = index_size;
  r->info_.flat = m.flat();
  r->info_.optional_flags = m.optional_flags;
  r->info_.part_count = m.part_count;
  r->body_checksum_ = m.body_checksum;
  // GetClass(), NameAt() and the metadata read the manifest as they read
  // an index.
  r->classes_ = bytes.substr(m.classes.offset, m.classes.size);
  r->names_ = strings;
  r->meta_ = bytes.substr(m.meta.offset, m.meta.size);
  r->index_ = std::move(region);
  r->parts_ = std::move(parts);
  *reader = std::move(r);
  return Status::OK();
}

Status Reader::OpenPart(size_t k, const Reader** part) const {
  internal::PartSlot& slot = parts_->slots[k];
  std::call_once(slot.once, [&] {
    std::unique_ptr<Reader> r;
    Status s = Open(slot.path, parts_->options, &r);
    if (s.ok() && r->info().pack_id != slot.entry.pack_id) {
      s = Status::Corruption(PartName(parts_->manifest_path, k, slot.path) +
                             " is not the part that was merged: pack id " +
                             r->info().pack_id.ToHex() +
                             ", the manifest expects " +
                             slot.entry.pack_id.ToHex() +
                             " (rebuilt or replaced since the merge)");
    }
    if (s.ok() &&
        (r->size() != slot.entry.record_count ||
         r->class_count() != info_.class_count || r->info().part_count != 0)) {
      s = Status::Corruption(PartName(parts_->manifest_path, k, slot.path) +
                             " does not match the manifest (record or class "
                             "count, or a merged pack as a part)");
    }
    if (s.ok()) {
      slot.reader = std::move(r);
    } else {
      slot.status = s;
    }
  });
  if (!slot.reader) return slot.status;
  *part = slot.reader.get();
  return Status::OK();
}

Status Reader::PartFor(uint64_t i, const Reader** part, uint64_t* local) const {
  if (i >= info_.record_count) {
    return Status::OutOfRange(info_.index_path + ": record " +
                              std::to_string(i) + " out of range (pack has " +
                              std::to_string(info_.record_count) + " records)");
  }
  // The last part starting at or before i; empty parts start where the
  // next one does, so this is the part that holds i.
  const auto& firsts = parts_->firsts;
  const size_t k = static_cast<size_t>(
      std::upper_bound(firsts.begin(), firsts.end(), i) - firsts.begin() - 1);
  UFSPACK_RETURN_IF_ERROR(OpenPart(k, part));
  *local = i - firsts[k];
  return Status::OK();
}

Status Reader::MergedGetRecord(uint64_t i, Record* record) const {
  const Reader* part;
  uint64_t local;
  UFSPACK_RETURN_IF_ERROR(PartFor(i, &part, &local));
  UFSPACK_RETURN_IF_ERROR(part->GetRecord(local, record));
  record->index = i;
  return Status::OK();
}

Status Reader::MergedFind(std::string_view name, uint64_t* index) const {
  // Records of class c all lie in c's range, so only the parts overlapping
  // it are asked.  The class is the name's first segment; the class table
  // is sorted (Python's order equals byte order for UTF-8 names), and a
  // name whose class is not found that way asks every part.
  size_t lo = 0, hi = parts_->count;
  if (info_.class_count > 0) {
    const size_t slash = name.find('/');
    if (slash == std::string_view::npos) {
      return Status::NotFound(info_.index_path + ": no record named '" +
                              EscapeBytes(name) + "'");
    }
    const std::string_view cls = name.substr(0, slash);
    uint64_t a = 0, b = info_.class_count;
    ClassInfo ci;
    bool found = false;
    while (a < b) {
      const uint64_t mid = a + (b - a) / 2;
      UFSPACK_RETURN_IF_ERROR(GetClass(mid, &ci));
      if (ci.name == cls) {
        found = true;
        break;
      }
      if (ci.name < cls) {
        a = mid + 1;
      } else {
        b = mid;
      }
    }
    if (found) {
      if (ci.record_count == 0) {
        return Status::NotFound(info_.index_path + ": no record named '" +
                                EscapeBytes(name) + "'");
      }
      const auto& firsts = parts_->firsts;
      lo = static_cast<size_t>(
          std::upper_bound(firsts.begin(), firsts.end(), ci.first_record) -
          firsts.begin() - 1);
      hi = static_cast<size_t>(
          std::upper_bound(firsts.begin(), firsts.end(),
                           ci.first_record + ci.record_count - 1) -
          firsts.begin());
    }
  }
  for (size_t k = lo; k < hi; ++k) {
    if (parts_->slots[k].entry.record_count == 0) continue;
    const Reader* part;
    UFSPACK_RETURN_IF_ERROR(OpenPart(k, &part));
    uint64_t local;
    Status s = part->Find(name, &local);
    if (s.ok()) {
      *index = parts_->firsts[k] + local;
      return Status::OK();
    }
    if (!s.IsNotFound()) return s;
  }
  return Status::NotFound(info_.index_path + ": no record named '" +
                          EscapeBytes(name) + "'");
}

Status Reader::MergedCheckIndex() const {
  const std::string& mname = info_.index_path;
  // The manifest's classes: in order, covering every record.
  uint64_t covered = 0;
  for (uint64_t c = 0; c < info_.class_count; ++c) {
    ClassInfo ci;
    UFSPACK_RETURN_IF_ERROR(GetClass(c, &ci));
    if (ci.first_record != covered) {
      return Status::Corruption(mname + ": class " + std::to_string(c) +
                                " starts at record " +
                                std::to_string(ci.first_record) +
                                ", expected " + std::to_string(covered));
    }
    covered += ci.record_count;
  }
  if (info_.class_count > 0 && covered != info_.record_count) {
    return Status::Corruption(mname + ": class table covers " +
                              std::to_string(covered) + " of " +
                              std::to_string(info_.record_count) + " records");
  }
  std::vector<std::pair<std::string_view, std::string_view>> meta;
  UFSPACK_RETURN_IF_ERROR(ListMetadata(&meta));
  // Each part: its own full check, then its classes against the manifest's
  // (same names; its records of class c inside c's global range).
  std::vector<uint64_t> counted(info_.class_count, 0);
  for (size_t k = 0; k < parts_->count; ++k) {
    const Reader* part;
    UFSPACK_RETURN_IF_ERROR(OpenPart(k, &part));
    UFSPACK_RETURN_IF_ERROR(part->CheckIndex());
    const uint64_t base = parts_->firsts[k];
    for (uint64_t c = 0; c < info_.class_count; ++c) {
      ClassInfo global, local;
      UFSPACK_RETURN_IF_ERROR(GetClass(c, &global));
      UFSPACK_RETURN_IF_ERROR(part->GetClass(c, &local));
      const std::string where = PartName(mname, k, parts_->slots[k].path) +
                                ": class " + std::to_string(c);
      if (local.name != global.name) {
        return Status::Corruption(where + " is '" + EscapeBytes(local.name) +
                                  "', the manifest says '" +
                                  EscapeBytes(global.name) + "'");
      }
      if (local.record_count > 0 &&
          (base + local.first_record < global.first_record ||
           base + local.first_record + local.record_count >
               global.first_record + global.record_count)) {
        return Status::Corruption(
            where + ": records " + std::to_string(base + local.first_record) +
            " + " + std::to_string(local.record_count) +
            " lie outside the class's records in the manifest (" +
            std::to_string(global.first_record) + " + " +
            std::to_string(global.record_count) + ")");
      }
      counted[c] += local.record_count;
    }
  }
  for (uint64_t c = 0; c < info_.class_count; ++c) {
    ClassInfo ci;
    UFSPACK_RETURN_IF_ERROR(GetClass(c, &ci));
    if (counted[c] != ci.record_count) {
      return Status::Corruption(
          mname + ": class " + std::to_string(c) + ": the parts hold " +
          std::to_string(counted[c]) + " records, the manifest " +
          std::to_string(ci.record_count));
    }
  }
  // Names are unique across parts: each finds itself.
  for (uint64_t i = 0; i < info_.record_count; ++i) {
    Record r;
    UFSPACK_RETURN_IF_ERROR(GetRecord(i, &r));
    uint64_t found = 0;
    Status s = Find(r.name, &found);
    if (!s.ok() || found != i) {
      return Status::Corruption(
          mname + ": record " + std::to_string(i) + " '" + EscapeBytes(r.name) +
          "': " +
          (s.ok()
               ? "lookup finds record " + std::to_string(found) +
                     " for this name (the same name in two parts?)"
               : "lookup cannot find this name: " + std::string(s.message())));
    }
  }
  return Status::OK();
}

Status Reader::MergedReadStoredMany(const Record* records, char* const* dsts,
                                    size_t count, int threads) const {
  // Grouped by part, each group one ReadStoredMany of that part.
  std::vector<std::vector<size_t>> members(parts_->count);
  for (size_t k = 0; k < count; ++k) {
    const uint64_t i = records[k].index;
    if (i >= info_.record_count) {
      return Status::OutOfRange(info_.index_path + ": record " +
                                std::to_string(i) + " out of range");
    }
    const auto& firsts = parts_->firsts;
    members[static_cast<size_t>(
                std::upper_bound(firsts.begin(), firsts.end(), i) -
                firsts.begin() - 1)]
        .push_back(k);
  }
  std::vector<Record> local;
  std::vector<char*> local_dsts;
  for (size_t p = 0; p < parts_->count; ++p) {
    if (members[p].empty()) continue;
    const Reader* part;
    UFSPACK_RETURN_IF_ERROR(OpenPart(p, &part));
    local.clear();
    local_dsts.clear();
    for (size_t k : members[p]) {
      local.push_back(records[k]);
      local.back().index -= parts_->firsts[p];
      local_dsts.push_back(dsts[k]);
    }
    UFSPACK_RETURN_IF_ERROR(part->ReadStoredMany(
        local.data(), local_dsts.data(), local.size(), threads));
  }
  return Status::OK();
}

Status Reader::MergedReadBatchMany(const std::vector<Record>& records,
                                   Batch* out, int threads) const {
  const size_t count = records.size();
  std::vector<std::vector<size_t>> members(parts_->count);
  const auto& firsts = parts_->firsts;
  for (size_t k = 0; k < count; ++k) {
    members[static_cast<size_t>(std::upper_bound(firsts.begin(), firsts.end(),
                                                 records[k].index) -
                                firsts.begin() - 1)]
        .push_back(k);
  }
  // Each part's records as one batch of its own, then copied into place.
  std::vector<Batch> batches(parts_->count);
  std::vector<std::pair<size_t, size_t>> where(count);  // (part, position)
  for (size_t p = 0; p < parts_->count; ++p) {
    if (members[p].empty()) continue;
    const Reader* part;
    UFSPACK_RETURN_IF_ERROR(OpenPart(p, &part));
    std::vector<Record> local;
    local.reserve(members[p].size());
    for (size_t j = 0; j < members[p].size(); ++j) {
      const size_t k = members[p][j];
      local.push_back(records[k]);
      local.back().index -= firsts[p];
      where[k] = {p, j};
    }
    UFSPACK_RETURN_IF_ERROR(part->ReadBatchMany(local, &batches[p], threads));
  }
  std::vector<uint64_t> offsets(count + 1, 0);
  uint64_t total = 0;
  for (size_t k = 0; k < count; ++k) {
    offsets[k] = total;
    total += batches[where[k].first].get(where[k].second).size();
  }
  offsets[count] = total;
  out->data.resize(static_cast<size_t>(total));
  for (size_t k = 0; k < count; ++k) {
    const std::string_view v = batches[where[k].first].get(where[k].second);
    if (!v.empty())
      std::memcpy(out->data.data() + offsets[k], v.data(), v.size());
  }
  out->offsets = std::move(offsets);
  return Status::OK();
}

}  // namespace ufspack
