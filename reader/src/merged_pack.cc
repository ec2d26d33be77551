// Copyright 2026 The ufspack Authors.
//
// MergedPack (merged_pack.h).
#include "merged_pack.h"

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
namespace internal {
namespace {

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

// The class count part `e` must have: its label map's length, or the
// manifest's.
uint64_t PartClassCount(const PartEntry& e, const ManifestHeader& m) {
  return e.label_map_length > 0 ? e.label_map_length : m.class_count;
}

// What a part's index header says about it, as Mismatch() compares it.
struct PartFacts {
  PackId pack_id;
  uint64_t record_count = 0, class_count = 0, data_size = 0, index_size = 0;
  bool flat = false;
};

PartFacts FactsOf(const IndexHeader& h) {
  return {h.pack_id,   h.record_count, h.class_count,
          h.data_size, h.index_size,   h.flat()};
}

PartFacts FactsOf(const PackInfo& i) {
  return {i.pack_id,   i.record_count, i.class_count,
          i.data_size, i.index_size,   i.flat};
}

// Why the part is not the part the manifest names, or "".
std::string Mismatch(const PartFacts& h, const PartEntry& e,
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
  if (h.class_count != PartClassCount(e, m)) {
    return differs("class count", h.class_count, PartClassCount(e, m));
  }
  if (h.data_size != e.data_size) {
    return differs("data size", h.data_size, e.data_size);
  }
  if (h.index_size != e.index_size) {
    return differs("index size", h.index_size, e.index_size);
  }
  if (h.flat != m.flat()) return "flat and classed packs mixed";
  return "";
}

// The error of a part that could not be opened: NotFound naming the part
// when it is missing.
Status PartOpenError(const std::string& what, const Status& s) {
  if (s.IsNotFound()) {
    return Status::NotFound(what + " is missing: " + std::string(s.message()));
  }
  return s.WithContext(what);
}

}  // namespace

Status MergedPack::Open(const std::string& manifest_path,
                        const ReaderOptions& options,
                        std::unique_ptr<MergedPack>* pack) {
  std::unique_ptr<Region> region;
  UFSPACK_RETURN_IF_ERROR(LoadFile(manifest_path, &region));
  const std::string& mname = region->name();
  auto parts = std::make_unique<PartSet>();
  Manifest& m = parts->manifest;
  UFSPACK_RETURN_IF_ERROR(DecodeManifest(region->bytes(), mname, &m));
  parts->options = options;
  parts->remote = IsUrl(manifest_path);
  parts->slots.reset(new PartSlot[m.parts.size()]);
  const std::string dir = DirName(manifest_path);
  uint64_t data_size = 0, index_size = region->bytes().size();
  for (size_t k = 0; k < m.parts.size(); ++k) {
    UFSPACK_RETURN_IF_ERROR(
        JoinPartPath(dir, m.part_paths[k], &parts->slots[k].path)
            .WithContext(mname + ": part " + std::to_string(k)));
    data_size += m.parts[k].data_size;
    index_size += m.parts[k].index_size;
  }
  for (size_t s = 0; s < m.segments.size(); ++s) {
    const SegmentEntry& g = m.segments[s];
    parts->slots[g.part].runs.push_back(
        {g.first, m.segment_starts[s], g.count});
  }
  for (size_t k = 0; k < m.parts.size(); ++k) {
    auto& runs = parts->slots[k].runs;
    std::sort(runs.begin(), runs.end(),
              [](const PartSlot::Run& a, const PartSlot::Run& b) {
                return a.local < b.local;
              });
  }
  // Every part must be there and be the pack that was merged: one header
  // read each, nothing mapped yet.  Parts at URLs are checked when each is
  // first opened instead (OpenPart, the same checks): up front, a reader
  // that reads a few parts would pay a request per part, serially, and a
  // cluster of readers parts x readers requests at start.
  for (size_t k = 0; k < m.parts.size() && !parts->remote; ++k) {
    const std::string& path = parts->slots[k].path;
    IndexHeader h;
    Status s = ReadPartHeader(path, &h);
    if (!s.ok()) return PartOpenError(PartName(mname, k, path), s);
    const std::string why = Mismatch(FactsOf(h), m.parts[k], m.header);
    if (!why.empty()) {
      return Status::Corruption(PartName(mname, k, path) +
                                " is not the part that was merged: " + why);
    }
  }

  std::unique_ptr<MergedPack> r(new MergedPack());
  r->options_ = options;
  r->info_.index_path = mname;
  r->info_.version = m.header.version;
  r->info_.pack_id = m.header.pack_id;
  r->info_.record_count = m.header.record_count;
  r->info_.class_count = m.header.class_count;
  r->info_.data_size = data_size;
  r->info_.index_size = index_size;
  r->info_.flat = m.header.flat();
  r->info_.optional_flags = m.header.optional_flags;
  r->info_.part_count = m.header.part_count;
  r->body_checksum_ = m.header.body_checksum;
  // GetClass(), NameAt() and the metadata read the manifest as they read
  // an index.
  r->classes_ = m.classes;
  r->names_ = m.strings;
  r->meta_ = m.meta;
  r->index_ = std::move(region);
  r->parts_ = std::move(parts);
  *pack = std::move(r);
  return Status::OK();
}

Status MergedPack::OpenPart(size_t k, const SinglePack** part) const {
  PartSlot& slot = parts_->slots[k];
  std::call_once(slot.once, [&] {
    const std::string what = PartName(info_.index_path, k, slot.path);
    std::unique_ptr<SinglePack> r;
    // Always a single pack: a manifest beside the part's files (a pack
    // appended to in place) is the merged pack, not the part.
    Status s = SinglePack::Open(slot.path, parts_->options, &r);
    if (!s.ok()) {
      s = PartOpenError(what, s);
    } else {
      // Everything Open() checks of a local part's header, again: a part
      // at a URL is checked here only, and any part may have been
      // replaced since.
      const std::string why =
          Mismatch(FactsOf(r->info()), parts_->manifest.parts[k],
                   parts_->manifest.header);
      if (!why.empty()) {
        s = Status::Corruption(what +
                               " is not the part that was merged: " + why);
      }
    }
    if (s.ok()) {
      slot.pack = std::move(r);
      slot.opened.store(true, std::memory_order_release);
    } else {
      slot.status = s;
    }
  });
  if (!slot.pack) return slot.status;
  *part = slot.pack.get();
  return Status::OK();
}

Status MergedPack::PartFor(uint64_t i, const SinglePack** part, uint64_t* local,
                           size_t* k) const {
  UFSPACK_RETURN_IF_ERROR(CheckRange("record", i, info_.record_count));
  const Manifest& m = parts_->manifest;
  const auto& starts = m.segment_starts;
  const size_t s = static_cast<size_t>(
      std::upper_bound(starts.begin(), starts.end(), i) - starts.begin() - 1);
  const SegmentEntry& g = m.segments[s];
  UFSPACK_RETURN_IF_ERROR(OpenPart(g.part, part));
  *local = g.first + (i - starts[s]);
  if (k != nullptr) *k = g.part;
  return Status::OK();
}

uint64_t MergedPack::GlobalIndex(size_t k, uint64_t local) const {
  const auto& runs = parts_->slots[k].runs;
  auto it = std::upper_bound(
      runs.begin(), runs.end(), local,
      [](uint64_t v, const PartSlot::Run& r) { return v < r.local; });
  --it;  // the segments cover every local index (DecodeManifest)
  return it->global + (local - it->local);
}

Status MergedPack::RecordOffsets(uint64_t first, uint64_t count,
                                 uint64_t* offsets, uint32_t* parts) const {
  const Manifest& m = parts_->manifest;
  const auto& starts = m.segment_starts;
  size_t s = static_cast<size_t>(
      std::upper_bound(starts.begin(), starts.end(), first) - starts.begin() -
      1);
  for (uint64_t done = 0; done < count; ++s) {
    const SegmentEntry& g = m.segments[s];
    const uint64_t at = first + done - starts[s];  // into the segment
    const uint64_t n = std::min(count - done, g.count - at);
    const SinglePack* part;
    UFSPACK_RETURN_IF_ERROR(OpenPart(g.part, &part));
    UFSPACK_RETURN_IF_ERROR(
        part->RecordOffsets(g.first + at, n, offsets + done, nullptr));
    if (parts != nullptr) std::fill(parts + done, parts + done + n, g.part);
    done += n;
  }
  return Status::OK();
}

Status MergedPack::GetRecord(uint64_t i, Record* record) const {
  const SinglePack* part;
  uint64_t local;
  size_t k;
  UFSPACK_RETURN_IF_ERROR(PartFor(i, &part, &local, &k));
  UFSPACK_RETURN_IF_ERROR(part->GetRecord(local, record));
  record->index = i;
  record->part = static_cast<uint32_t>(k);
  if (record->label != kNoLabel) {
    record->label = parts_->manifest.GlobalLabel(k, record->label);
  }
  return Status::OK();
}

Status MergedPack::Find(std::string_view name, uint64_t* index) const {
  // Records of class c all lie in c's range, so only the parts of the
  // segments overlapping it are asked.  The class is the name's first
  // segment; the class table is sorted (Python's order equals byte order
  // for UTF-8 names), and a name whose class is not found that way asks
  // every part.
  const Manifest& m = parts_->manifest;
  std::vector<char> ask(m.parts.size(), 1);
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
      std::fill(ask.begin(), ask.end(), 0);
      const auto& starts = m.segment_starts;
      if (ci.record_count > 0) {
        size_t s = static_cast<size_t>(
            std::upper_bound(starts.begin(), starts.end(), ci.first_record) -
            starts.begin() - 1);
        for (;
             s < starts.size() && starts[s] < ci.first_record + ci.record_count;
             ++s) {
          ask[m.segments[s].part] = 1;
        }
      }
    }
  }
  for (size_t k = 0; k < m.parts.size(); ++k) {
    if (!ask[k] || m.parts[k].record_count == 0) continue;
    const SinglePack* part;
    UFSPACK_RETURN_IF_ERROR(OpenPart(k, &part));
    uint64_t local;
    Status s = part->Find(name, &local);
    if (s.ok()) {
      *index = GlobalIndex(k, local);
      return Status::OK();
    }
    if (!s.IsNotFound()) return s;
  }
  return Status::NotFound(info_.index_path + ": no record named '" +
                          EscapeBytes(name) + "'");
}

Status MergedPack::CheckIndex() const {
  const std::string& mname = info_.index_path;
  const Manifest& m = parts_->manifest;
  // The manifest's classes: in order, covering every record.
  std::vector<ClassInfo> classes(info_.class_count);
  uint64_t covered = 0;
  for (uint64_t c = 0; c < info_.class_count; ++c) {
    ClassInfo& ci = classes[c];
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
  // Each part in full, and its class names against the manifest's through
  // its label map.
  for (size_t k = 0; k < m.parts.size(); ++k) {
    const SinglePack* part;
    UFSPACK_RETURN_IF_ERROR(OpenPart(k, &part));
    UFSPACK_RETURN_IF_ERROR(part->CheckIndex());
    for (uint64_t c = 0; c < part->info().class_count; ++c) {
      ClassInfo local;
      UFSPACK_RETURN_IF_ERROR(part->GetClass(c, &local));
      const uint32_t g = m.GlobalLabel(k, static_cast<uint32_t>(c));
      if (local.name != classes[g].name) {
        return Status::Corruption(
            PartName(mname, k, parts_->slots[k].path) + ": class " +
            std::to_string(c) + " is '" + EscapeBytes(local.name) +
            "', the manifest's class " + std::to_string(g) + " is '" +
            EscapeBytes(classes[g].name) + "'");
      }
    }
  }
  // Every record: its label's class holds it, and its name finds it (names
  // unique across parts).
  for (uint64_t i = 0; i < info_.record_count; ++i) {
    Record r;
    UFSPACK_RETURN_IF_ERROR(GetRecord(i, &r));
    const std::string where = mname + ": record " + std::to_string(i) + " '" +
                              EscapeBytes(r.name) + "': ";
    if (r.label != kNoLabel) {
      const ClassInfo& ci = classes[r.label];
      if (i < ci.first_record || i - ci.first_record >= ci.record_count) {
        return Status::Corruption(where + "label " + std::to_string(r.label) +
                                  " but the class table puts it elsewhere");
      }
    }
    uint64_t found = 0;
    Status s = Find(r.name, &found);
    if (!s.ok() || found != i) {
      return Status::Corruption(
          where + (s.ok() ? "lookup finds record " + std::to_string(found) +
                                " for this name (the same name in two parts?)"
                          : "lookup cannot find this name: " +
                                std::string(s.message())));
    }
  }
  return Status::OK();
}

void MergedPack::PrefetchBlocks(const Record* records, size_t count) const {
  std::vector<std::vector<Record>> local(parts_->manifest.parts.size());
  for (size_t j = 0; j < count; ++j) {
    if (records[j].part < local.size())
      local[records[j].part].push_back(records[j]);
  }
  for (size_t k = 0; k < local.size(); ++k) {
    const SinglePack* part;
    if (!local[k].empty() && OpenPart(k, &part).ok()) {
      part->PrefetchBlocks(local[k].data(), local[k].size());
    }
  }
}

uint64_t MergedPack::WillNeed(uint32_t part, uint64_t offset,
                              uint64_t n) const {
  if (part >= parts_->manifest.parts.size()) return 0;
  const PartSlot& slot = parts_->slots[part];
  if (!slot.opened.load(std::memory_order_acquire)) return 0;
  return slot.pack->WillNeed(0, offset, n);
}

BlockReadStats MergedPack::block_stats() const {
  BlockReadStats sum;
  for (size_t k = 0; k < parts_->manifest.parts.size(); ++k) {
    const PartSlot& slot = parts_->slots[k];
    if (!slot.opened.load(std::memory_order_acquire)) continue;
    const BlockReadStats s = slot.pack->block_stats();
    sum.block_fetches += s.block_fetches;
    sum.bytes_fetched += s.bytes_fetched;
    sum.reads_from_blocks += s.reads_from_blocks;
    sum.reads_bypassed += s.reads_bypassed;
  }
  return sum;
}

Status MergedPack::ReadStoredMany(const Record* records, char* const* dsts,
                                  size_t count, int threads) const {
  const size_t parts = parts_->manifest.parts.size();
  std::vector<std::vector<size_t>> positions(parts);
  std::vector<std::vector<Record>> local(parts);
  for (size_t j = 0; j < count; ++j) {
    const SinglePack* part;
    Record r = records[j];
    size_t k;
    UFSPACK_RETURN_IF_ERROR(PartFor(records[j].index, &part, &r.index, &k));
    positions[k].push_back(j);
    local[k].push_back(r);
  }
  std::vector<char*> local_dsts;
  for (size_t k = 0; k < parts; ++k) {
    if (positions[k].empty()) continue;
    const SinglePack* part;
    UFSPACK_RETURN_IF_ERROR(OpenPart(k, &part));
    local_dsts.clear();
    for (size_t j : positions[k]) local_dsts.push_back(dsts[j]);
    UFSPACK_RETURN_IF_ERROR(part->ReadStoredMany(
        local[k].data(), local_dsts.data(), local[k].size(), threads));
  }
  return Status::OK();
}

Status MergedPack::ReadBatchMany(const std::vector<Record>& records, Batch* out,
                                 int threads) const {
  const size_t count = records.size();
  const size_t parts = parts_->manifest.parts.size();
  std::vector<std::vector<Record>> local(parts);
  std::vector<std::pair<size_t, size_t>> where(count);  // (part, position)
  for (size_t j = 0; j < count; ++j) {
    const SinglePack* part;
    Record r = records[j];
    size_t k;
    UFSPACK_RETURN_IF_ERROR(PartFor(records[j].index, &part, &r.index, &k));
    where[j] = {k, local[k].size()};
    local[k].push_back(r);
  }
  // Each part's records as one batch of its own, then copied into place.
  std::vector<Batch> batches(parts);
  for (size_t k = 0; k < parts; ++k) {
    if (local[k].empty()) continue;
    const SinglePack* part;
    UFSPACK_RETURN_IF_ERROR(OpenPart(k, &part));
    UFSPACK_RETURN_IF_ERROR(
        part->ReadBatchMany(local[k], &batches[k], threads));
  }
  std::vector<uint64_t> offsets(count + 1, 0);
  uint64_t total = 0;
  for (size_t j = 0; j < count; ++j) {
    offsets[j] = total;
    total += batches[where[j].first].get(where[j].second).size();
  }
  offsets[count] = total;
  out->data.resize(static_cast<size_t>(total));
  for (size_t j = 0; j < count; ++j) {
    const std::string_view v = batches[where[j].first].get(where[j].second);
    if (!v.empty()) {
      std::memcpy(out->data.data() + offsets[j], v.data(), v.size());
    }
  }
  out->offsets = std::move(offsets);
  return Status::OK();
}

Status MergedPack::FindMany(const std::string_view* names, size_t count,
                            uint64_t* indices) const {
  for (size_t k = 0; k < count; ++k) {
    Status s = Find(names[k], &indices[k]);
    if (s.IsNotFound()) {
      indices[k] = Reader::kNoRecord;
    } else if (!s.ok()) {
      return s;
    }
  }
  return Status::OK();
}

Status MergedPack::ReadStored(const Record& r, char* dst) const {
  const SinglePack* part;
  Record local = r;
  UFSPACK_RETURN_IF_ERROR(PartFor(r.index, &part, &local.index));
  return part->ReadStored(local, dst);
}

Status MergedPack::ReadZstd(const Record& r, ZstdOutput* output) const {
  const SinglePack* part;
  Record local = r;
  UFSPACK_RETURN_IF_ERROR(PartFor(r.index, &part, &local.index));
  return part->ReadZstd(local, output);
}

void MergedPack::ReleaseRecords(uint64_t first, uint64_t count) const {
  // Each part's run of these records, where the part is open already.
  const uint64_t end = first + count;
  const auto& starts = parts_->manifest.segment_starts;
  const auto& segments = parts_->manifest.segments;
  size_t s = static_cast<size_t>(
      std::upper_bound(starts.begin(), starts.end(), first) - starts.begin() -
      1);
  for (; first < end && s < segments.size(); ++s) {
    const uint64_t off = first - starts[s];
    const uint64_t run = std::min(end - first, segments[s].count - off);
    const PartSlot& slot = parts_->slots[segments[s].part];
    if (slot.opened.load(std::memory_order_acquire))  // never opens one
      slot.pack->ReleaseRecords(segments[s].first + off, run);
    first += run;
  }
}

void MergedPack::ReleaseIndex() const {
  for (size_t k = 0; k < parts_->manifest.parts.size(); ++k) {
    const PartSlot& slot = parts_->slots[k];
    if (slot.opened.load(std::memory_order_acquire)) slot.pack->ReleaseIndex();
  }
}

}  // namespace internal
}  // namespace ufspack
