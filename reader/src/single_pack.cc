// Copyright 2026 The ufspack Authors.
//
// SinglePack (single_pack.h): record entries decoded and checked on use,
// lookups through the on-disk hash table, stored bytes read with one pread
// (or one ReadMany for a batch) and checksummed, the cache asked first.
// Opening is in open.cc, the full index check in check_index.cc.
#include "single_pack.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "record_codec.h"
#include "ufspack/coding.h"
#include "ufspack/file.h"
#include "ufspack/format.h"
#include "ufspack/parallel.h"
#include "ufspack/text.h"

namespace ufspack {
namespace internal {
namespace {

// A failed read of data.ufs as the reader reports it: IOError, Corruption
// or Aborted, never a code that means something else to the caller.
// OutOfRange is "index past the end" (Python's IndexError, which a `for`
// loop takes for the end of the sequence), NotFound "no such pack or
// record", InvalidArgument "bad call": from the file underneath (an
// HTTP 416 or 404, a server that ignores ranges) they are failures of this
// read, reported as IOError with their message.
Status AsReadError(Status s) {
  if (s.ok() || s.IsIOError() || s.IsCorruption() || s.IsAborted()) return s;
  return Status::IOError(s.message());
}

}  // namespace

bool SinglePack::prefers_batches() const { return data_->prefers_batches(); }

Status SinglePack::Init() {
  const std::string& iname = index_->name();
  const std::string& dname = data_->name();
  info_.index_path = iname;
  info_.data_path = dname;
  std::string_view bytes = index_->bytes();
  if (bytes.empty()) {
    return Status::Corruption(iname + ": empty file, not a ufspack index");
  }
  std::string_view in = bytes;
  IndexHeader header;
  UFSPACK_RETURN_IF_ERROR(header.DecodeFrom(&in).WithContext(iname));
  UFSPACK_RETURN_IF_ERROR(header.ValidateLayout().WithContext(iname));
  if (header.index_size != bytes.size()) {
    return Status::Corruption(
        iname + ": size: expected " + std::to_string(header.index_size) +
        " bytes (recorded in the header), found " +
        std::to_string(bytes.size()) +
        (bytes.size() < header.index_size ? " (truncated)" : ""));
  }

  // Pairing: the data header's pack id must match, and the size must be the
  // one the index recorded.  (Offline, the cache checked the pair when it
  // copied the index; every cached record is checksummed.)
  if (!offline_) {
    char dh[DataHeader::kEncodedLength];
    size_t got = 0;
    UFSPACK_RETURN_IF_ERROR(data_->Read(0, sizeof(dh), dh, &got));
    DataHeader data_header;
    std::string_view din(dh, got);
    UFSPACK_RETURN_IF_ERROR(data_header.DecodeFrom(&din).WithContext(dname));
    if (data_header.pack_id != header.pack_id) {
      return Status::Corruption(iname + " and " + dname +
                                " are not one pack: index pack id " +
                                header.pack_id.ToHex() + ", data pack id " +
                                data_header.pack_id.ToHex());
    }
    if (data_header.version != header.version) {
      return Status::Corruption(
          iname + " is version " + std::to_string(header.version) + " but " +
          dname + " is version " + std::to_string(data_header.version));
    }
    uint64_t data_size = 0;
    UFSPACK_RETURN_IF_ERROR(data_->Size(&data_size));
    if (data_size != header.data_size) {
      return Status::Corruption(dname + ": size: expected " +
                                std::to_string(header.data_size) +
                                " bytes (recorded in " + iname + "), found " +
                                std::to_string(data_size));
    }
  }

  if (options_.verify_index_checksum) {
    const uint64_t actual =
        Checksum64(bytes.data() + IndexHeader::kEncodedLength,
                   bytes.size() - IndexHeader::kEncodedLength);
    if (actual != header.body_checksum) {
      return Status::Corruption(
          iname + ": index body checksum mismatch: expected " +
          HexU64(header.body_checksum) + ", found " + HexU64(actual));
    }
  }

  records_ = bytes.substr(header.records.offset, header.records.size);
  classes_ = bytes.substr(header.classes.offset, header.classes.size);
  lookup_ = bytes.substr(header.lookup.offset, header.lookup.size);
  names_ = bytes.substr(header.names.offset, header.names.size);
  meta_ = bytes.substr(header.meta.offset, header.meta.size);

  info_.version = header.version;
  info_.pack_id = header.pack_id;
  info_.record_count = header.record_count;
  info_.class_count = header.class_count;
  info_.data_size = header.data_size;
  info_.index_size = header.index_size;
  info_.flat = header.flat();
  info_.optional_flags = header.optional_flags;
  info_.checksum_type = header.checksum_type;
  body_checksum_ = header.body_checksum;
  if (options_.block_bytes > 0 && !offline_) {
    BlockFile::Options bo;
    bo.block_bytes = options_.block_bytes;
    bo.cache_bytes = options_.block_cache_bytes;
    bo.prefetch_threads = options_.block_prefetch_threads;
    auto blocks = std::make_unique<BlockFile>(
        std::move(data_), info_.data_size, bo,
        [this](uint64_t block_bytes, std::vector<BlockFile::Extent>* e) {
          return BlockExtents(block_bytes, e);
        });
    blocks_ = blocks.get();
    data_ = std::move(blocks);
  }
  return Status::OK();
}

Status SinglePack::BlockExtents(uint64_t block_bytes,
                                std::vector<BlockFile::Extent>* extents) const {
  // Entries that do not decode, or lie outside the data, are left out:
  // their reads bypass the blocks and fail as they would without them.
  constexpr uint64_t kReleaseEvery = uint64_t{1} << 20;
  for (uint64_t i = 0; i < info_.record_count; ++i) {
    std::string_view in = records_.substr(i * RecordEntry::kEncodedLength,
                                          RecordEntry::kEncodedLength);
    RecordEntry e;
    if (e.DecodeFrom(&in).ok() && e.stored_length > 0 &&
        e.stored_length < block_bytes &&
        e.offset >= DataHeader::kEncodedLength && e.offset <= info_.data_size &&
        e.stored_length <= info_.data_size - e.offset) {
      BlockFile::Extent& x = (*extents)[e.offset / block_bytes];
      x.begin = std::min(x.begin, e.offset);
      x.end = std::max(x.end, e.offset + e.stored_length);
      x.records++;
    }
    if ((i + 1) % kReleaseEvery == 0)
      ReleaseRecords(i + 1 - kReleaseEvery, kReleaseEvery);
  }
  return Status::OK();
}

uint64_t SinglePack::WillNeed(uint32_t part, uint64_t offset,
                              uint64_t n) const {
  const uint64_t size = info().data_size;
  if (part != 0 || offset >= size) return 0;
  n = std::min(n, size - offset);
  data_->WillNeed(offset, n);
  return n;
}

void SinglePack::PrefetchBlocks(const Record* records, size_t count) const {
  if (blocks_ == nullptr || count == 0) return;
  std::vector<uint64_t> offsets(count);
  for (size_t k = 0; k < count; ++k) offsets[k] = records[k].offset;
  blocks_->Prefetch(offsets.data(), count);
}

BlockReadStats SinglePack::block_stats() const {
  return blocks_ != nullptr ? blocks_->stats() : BlockReadStats();
}

Status SinglePack::Corrupt(uint64_t i, std::string_view name,
                           std::string_view what) const {
  std::string msg = info_.index_path + ": record " + std::to_string(i);
  if (!name.empty()) {
    msg += " '";
    msg += EscapeBytes(name);
    msg += "'";
  }
  msg += ": ";
  msg += what;
  return Status::Corruption(msg);
}

Status SinglePack::RecordOffsets(uint64_t first, uint64_t count,
                                 uint64_t* offsets, uint32_t* parts) const {
  const uint64_t data_size = info_.data_size;
  const char* p = records_.data() + first * RecordEntry::kEncodedLength;
  for (uint64_t k = 0; k < count; ++k, p += RecordEntry::kEncodedLength) {
    const uint64_t offset = DecodeFixed64(p + RecordEntry::kOffsetAt);
    const uint64_t length = DecodeFixed64(p + RecordEntry::kStoredLengthAt);
    if (offset < DataHeader::kEncodedLength || offset > data_size ||
        length > data_size - offset) {
      Record r;  // GetRecord's error, which names the record
      Status s = GetRecord(first + k, &r);
      return s.ok() ? Status::Corruption(info_.index_path + ": record " +
                                         std::to_string(first + k) +
                                         ": outside the data area")
                    : s;
    }
    offsets[k] = offset;
    if (parts != nullptr) parts[k] = 0;
  }
  return Status::OK();
}

Status SinglePack::GetRecord(uint64_t i, Record* record) const {
  UFSPACK_RETURN_IF_ERROR(CheckRange("record", i, info_.record_count));
  RecordEntry e;
  std::string_view name;
  Status s = DecodeNamedEntry(records_, i, &e, &name);
  if (!s.ok()) return Corrupt(i, {}, s.message());
  if (NameHashTag(NameHash(name)) != e.name_hash) {
    return Corrupt(i, name, "name hash mismatch (damaged name or name pool)");
  }
  const uint64_t data_size = info_.data_size;
  if (e.offset < DataHeader::kEncodedLength || e.offset > data_size ||
      e.stored_length > data_size - e.offset) {
    return Corrupt(i, name,
                   "offset " + std::to_string(e.offset) + " + length " +
                       std::to_string(e.stored_length) +
                       " lies outside the data area [64, " +
                       std::to_string(data_size) + ")");
  }
  if (info_.class_count == 0) {
    if (e.label != kNoLabel) {
      return Corrupt(
          i, name,
          "label " + std::to_string(e.label) + " but the pack has no classes");
    }
  } else if (e.label >= info_.class_count) {
    return Corrupt(i, name,
                   "label " + std::to_string(e.label) + " >= class count " +
                       std::to_string(info_.class_count));
  }
  if (e.codec == Codec::kZstd) {
    if (e.stored_length == 0) {
      return Corrupt(i, name,
                     "codec zstd with stored_length " +
                         std::to_string(e.stored_length) +
                         ": a zstd frame needs at least " +
                         std::to_string(kMinZstdFrame) + " bytes");
    }
    if (e.original_length / kMaxZstdExpansion > e.stored_length) {
      return Corrupt(i, name,
                     "codec zstd with stored_length " +
                         std::to_string(e.stored_length) +
                         " cannot expand to original_length " +
                         std::to_string(e.original_length) +
                         " (a zstd frame expands at most " +
                         std::to_string(kMaxZstdExpansion) + " times)");
    }
  }
  record->index = i;
  record->offset = e.offset;
  record->stored_length = e.stored_length;
  record->original_length = e.original_length;
  record->checksum = e.checksum;
  record->label = e.label;
  record->codec = e.codec;
  record->name = name;
  return Status::OK();
}

Status SinglePack::Find(std::string_view name, uint64_t* index) const {
  uint64_t found;
  UFSPACK_RETURN_IF_ERROR(Probe(name, NameHash(name), &found));
  if (found == Reader::kNoRecord) {
    return Status::NotFound(info_.index_path + ": no record named '" +
                            EscapeBytes(name) + "'");
  }
  *index = found;
  return Status::OK();
}

Status SinglePack::Probe(std::string_view name, uint64_t hash,
                         uint64_t* index) const {
  *index = Reader::kNoRecord;
  const uint64_t slots = lookup_.size() / 4;
  if (slots == 0) return Status::OK();
  const uint32_t tag = NameHashTag(hash);
  uint64_t pos = LookupHome(hash, slots);
  for (uint64_t probe = 0; probe < slots; ++probe) {
    const uint32_t v = DecodeFixed32(lookup_.data() + pos * 4);
    if (v == 0) break;
    const uint64_t candidate = static_cast<uint64_t>(v) - 1;
    if (candidate >= info_.record_count) {
      return Status::Corruption(info_.index_path + ": lookup slot " +
                                std::to_string(pos) + " refers to record " +
                                std::to_string(candidate) + " of " +
                                std::to_string(info_.record_count));
    }
    // Cheap reject on the stored hash tag before decoding the entry.
    const uint32_t stored_tag = DecodeFixed32(
        records_.data() + candidate * RecordEntry::kEncodedLength +
        RecordEntry::kNameHashAt);
    if (stored_tag == tag) {
      Record r;
      UFSPACK_RETURN_IF_ERROR(GetRecord(candidate, &r));
      if (r.name == name) {
        *index = candidate;
        return Status::OK();
      }
    }
    pos = (pos + 1) & (slots - 1);
  }
  return Status::OK();
}

namespace {

// Batched lookups work in groups this size: enough independent cache
// misses in flight to fill a core's line fill buffers (10-16 on current
// x86 and ARM cores), few enough that the group's lines stay cached
// between its passes.
constexpr size_t kPrefetchGroup = 16;

inline void PrefetchBytes(const char* p, size_t n) {
  __builtin_prefetch(p, 0, 1);
  if (n > 1) __builtin_prefetch(p + n - 1, 0, 1);  // a second cache line
}

// Prefetches the name of the encoded record entry at `entry` from `pool`
// (the name pool).  Fields out of range are skipped: GetRecord() reports
// them.
inline void PrefetchName(const char* entry, std::string_view pool) {
  const uint64_t offset = DecodeFixed64(entry + RecordEntry::kNameOffsetAt);
  const uint32_t length = DecodeFixed32(entry + RecordEntry::kNameLengthAt);
  if (length > 0 && offset < pool.size() && length <= pool.size() - offset)
    PrefetchBytes(pool.data() + offset, length);
}

}  // namespace

Status SinglePack::FindMany(const std::string_view* names, size_t count,
                            uint64_t* indices) const {
  const uint64_t slots = lookup_.size() / 4;
  uint64_t hashes[kPrefetchGroup];
  for (size_t g = 0; g < count; g += kPrefetchGroup) {
    const size_t n = std::min(kPrefetchGroup, count - g);
    const std::string_view* batch = names + g;
    // Pass 1: hash every name, prefetch its home slot.
    for (size_t k = 0; k < n; ++k) {
      hashes[k] = NameHash(batch[k]);
      if (slots > 0)
        PrefetchBytes(lookup_.data() + LookupHome(hashes[k], slots) * 4, 4);
    }
    // Pass 2: the home slot's record entry.
    const char* entries[kPrefetchGroup];
    for (size_t k = 0; k < n; ++k) {
      entries[k] = nullptr;
      if (slots == 0) continue;
      const uint32_t v =
          DecodeFixed32(lookup_.data() + LookupHome(hashes[k], slots) * 4);
      if (v == 0 || v - 1 >= info_.record_count) continue;
      entries[k] = records_.data() +
                   static_cast<uint64_t>(v - 1) * RecordEntry::kEncodedLength;
      PrefetchBytes(entries[k], RecordEntry::kEncodedLength);
    }
    // Pass 3: the name of an entry whose hash tag matches.
    for (size_t k = 0; k < n; ++k) {
      if (entries[k] == nullptr ||
          DecodeFixed32(entries[k] + RecordEntry::kNameHashAt) !=
              NameHashTag(hashes[k])) {
        continue;
      }
      PrefetchName(entries[k], names_);
    }
    // Pass 4: the probes, as Find() makes them, now mostly from cache.
    for (size_t k = 0; k < n; ++k)
      UFSPACK_RETURN_IF_ERROR(Probe(batch[k], hashes[k], &indices[g + k]));
  }
  return Status::OK();
}

void SinglePack::PrefetchRecords(const uint64_t* indices, size_t n) const {
  for (size_t k = 0; k < n; ++k) {
    if (indices[k] >= info_.record_count) continue;
    PrefetchBytes(records_.data() + indices[k] * RecordEntry::kEncodedLength,
                  RecordEntry::kEncodedLength);
  }
  for (size_t k = 0; k < n; ++k) {
    if (indices[k] >= info_.record_count) continue;
    PrefetchName(records_.data() + indices[k] * RecordEntry::kEncodedLength,
                 names_);
  }
}

// Reads the stored bytes of `r` into dst[0, r.stored_length) with one pread
// and verifies the checksum.

Status SinglePack::ReadStored(const Record& r, char* dst) const {
  if (cache_ && cache_->Lookup(r.index, r.stored_length, r.checksum, dst)) {
    return Status::OK();
  }
  size_t got = 0;
  Status s = AsReadError(data_->Read(r.offset, r.stored_length, dst, &got));
  if (!s.ok()) {
    return s.WithContext("record " + std::to_string(r.index) + " '" +
                         EscapeBytes(r.name) + "'");
  }
  return CheckStored(r, dst, got);
}

// Checks `got` stored bytes of `r` read from data.ufs into dst (their
// length and checksum) and offers them to the cache.

Status SinglePack::CheckStored(const Record& r, const char* dst,
                               size_t got) const {
  if (got != r.stored_length) {
    return Status::Corruption(
        data_->name() + ": record " + std::to_string(r.index) + " '" +
        EscapeBytes(r.name) + "' at offset " + std::to_string(r.offset) +
        ": short read: expected " + std::to_string(r.stored_length) +
        " bytes, found " + std::to_string(got) + " (data file truncated?)");
  }
  if (options_.verify_checksums || cache_) {
    const uint64_t actual = Checksum64(dst, got);
    if (actual == r.checksum) {
      if (cache_) cache_->Insert(r.index, dst, got, r.checksum);
    } else if (options_.verify_checksums) {
      return Status::Corruption(
          data_->name() + ": record " + std::to_string(r.index) + " '" +
          EscapeBytes(r.name) + "' at offset " + std::to_string(r.offset) +
          " + " + std::to_string(r.stored_length) +
          ": checksum mismatch: expected " + HexU64(r.checksum) + ", found " +
          HexU64(actual));
    }
  }
  return Status::OK();
}

// Reads the stored bytes of records[0, count) with one ReadMany() of the
// cache's misses (concurrent requests for a remote data file), then checks
// each.  dsts[k] receives records[k]'s stored_length bytes.  The cache
// is asked first, on `threads` threads (a hit is a local read and a
// checksum).

Status SinglePack::ReadStoredMany(const Record* records, char* const* dsts,
                                  size_t count, int threads) const {
  std::vector<char> hit(count, 0);
  if (cache_) {
    auto lookup = [&](size_t k) {
      const Record& r = records[k];
      hit[k] = cache_->Lookup(r.index, r.stored_length, r.checksum, dsts[k]);
    };
    if (threads > 1 && count > 1) {
      ParallelFor(count, threads, lookup);
    } else {
      for (size_t k = 0; k < count; ++k) lookup(k);
    }
  }
  // One pread for records whose stored bytes lie back to back both in
  // data.ufs and in the destination (a multi-file sample, a batch of
  // neighbours): `runs[j]` covers records which[first[j], first[j + 1]).
  // A remote data file merges neighbours itself (with its own gap and size
  // rules, counted in RemoteStats::coalesced), so it gets them one by one.
  const bool merge = !data_->prefers_batches();
  std::vector<RandomAccessFile::ReadOp> runs;
  std::vector<size_t> which, first;
  runs.reserve(count);
  which.reserve(count);
  for (size_t k = 0; k < count; ++k) {
    const Record& r = records[k];
    if (hit[k]) continue;
    const size_t n = static_cast<size_t>(r.stored_length);
    if (merge && !runs.empty()) {
      RandomAccessFile::ReadOp& last = runs.back();
      if (last.offset + last.n == r.offset && last.dst + last.n == dsts[k]) {
        last.n += n;
        which.push_back(k);
        continue;
      }
    }
    RandomAccessFile::ReadOp op;
    op.offset = r.offset;
    op.n = n;
    op.dst = dsts[k];
    runs.push_back(op);
    first.push_back(which.size());
    which.push_back(k);
  }
  if (runs.empty()) return Status::OK();
  first.push_back(which.size());
  size_t failed = runs.size();
  Status s = AsReadError(data_->ReadMany(runs.data(), runs.size(), &failed));
  if (!s.ok()) {
    if (failed < runs.size()) {
      const Record& r = records[which[first[failed]]];
      return s.WithContext("record " + std::to_string(r.index) + " '" +
                           EscapeBytes(r.name) + "'");
    }
    return s;
  }
  for (size_t j = 0; j < runs.size(); ++j) {
    size_t left = runs[j].got;  // shared out in order: a short read ends
    for (size_t i = first[j]; i < first[j + 1]; ++i) {  // the run early
      const Record& r = records[which[i]];
      const size_t got = std::min<size_t>(left, r.stored_length);
      left -= got;
      UFSPACK_RETURN_IF_ERROR(CheckStored(r, dsts[which[i]], got));
    }
  }
  return Status::OK();
}

// Reads and checksums the stored frame of zstd record `r` into a per-thread
// buffer, then decodes it into `output`.

Status SinglePack::ReadZstd(const Record& r, ZstdOutput* output) const {
  std::string& scratch = ThreadScratch();
  if (scratch.size() < r.stored_length) scratch.resize(r.stored_length);
  UFSPACK_RETURN_IF_ERROR(ReadStored(r, scratch.data()));
  return DecodeZstdRecord(data_->name(), r, scratch.data(), output);
}

Status SinglePack::ReadBatchMany(const std::vector<Record>& records, Batch* out,
                                 int threads) const {
  const size_t count = records.size();
  std::vector<uint64_t> offsets(count + 1, 0);
  std::vector<char*> dsts(count);
  bool any_zstd = false;
  for (const Record& r : records) any_zstd |= r.codec == Codec::kZstd;
  if (!any_zstd) {
    // Raw records go straight into the batch buffer.
    uint64_t total = 0;
    for (size_t k = 0; k < count; ++k) {
      offsets[k] = total;
      total += records[k].original_length;
    }
    offsets[count] = total;
    out->data.resize(static_cast<size_t>(total));
    for (size_t k = 0; k < count; ++k) {
      dsts[k] = out->data.data() + offsets[k];
    }
    UFSPACK_RETURN_IF_ERROR(
        ReadStoredMany(records.data(), dsts.data(), count, threads));
    out->offsets = std::move(offsets);
    return Status::OK();
  }
  // Stored bytes first (one ReadMany), then zstd frames are decoded from
  // memory, each into a string grown as its frame produces bytes, and the
  // batch is assembled from what they produced.
  uint64_t stored_total = 0;
  std::vector<uint64_t> stored_at(count);
  for (size_t k = 0; k < count; ++k) {
    stored_at[k] = stored_total;
    if (records[k].stored_length > info_.data_size) {
      return Status::Corruption(info_.index_path + ": record " +
                                std::to_string(records[k].index) +
                                " is larger than the data file");
    }
    stored_total += records[k].stored_length;
  }
  std::string stored(static_cast<size_t>(stored_total), '\0');
  for (size_t k = 0; k < count; ++k) dsts[k] = stored.data() + stored_at[k];
  UFSPACK_RETURN_IF_ERROR(
      ReadStoredMany(records.data(), dsts.data(), count, threads));
  std::vector<std::string> decoded(count);
  uint64_t total = 0;
  for (size_t k = 0; k < count; ++k) {
    offsets[k] = total;
    if (records[k].codec == Codec::kZstd) {
      StringOutput output(&decoded[k]);
      UFSPACK_RETURN_IF_ERROR(
          DecodeZstdRecord(data_->name(), records[k], dsts[k], &output));
      output.Trim();
      total += decoded[k].size();
    } else {
      total += records[k].stored_length;
    }
  }
  offsets[count] = total;
  out->data.resize(static_cast<size_t>(total));
  for (size_t k = 0; k < count; ++k) {
    char* dst = out->data.data() + offsets[k];
    if (records[k].codec == Codec::kZstd) {
      std::memcpy(dst, decoded[k].data(), decoded[k].size());
    } else {
      std::memcpy(dst, dsts[k], static_cast<size_t>(records[k].stored_length));
    }
  }
  out->offsets = std::move(offsets);
  return Status::OK();
}

void SinglePack::ReleaseRecords(uint64_t first, uint64_t count) const {
  const char* entries = records_.data() + first * RecordEntry::kEncodedLength;
  // Names: from the first record's to the end of the last one's (the span
  // they lie in when the pool is in record order, as the writer makes it).
  // Read before the entries are released: reading them after would map
  // their pages straight back.
  const char* last = entries + (count - 1) * RecordEntry::kEncodedLength;
  const uint64_t lo = DecodeFixed64(entries + RecordEntry::kNameOffsetAt);
  const uint64_t hi = DecodeFixed64(last + RecordEntry::kNameOffsetAt) +
                      DecodeFixed32(last + RecordEntry::kNameLengthAt);
  index_->Release(entries, count * RecordEntry::kEncodedLength);
  if (lo < hi && hi <= names_.size())
    index_->Release(names_.data() + lo, hi - lo);
}

void SinglePack::ReleaseIndex() const {
  index_->Release(index_->bytes().data(), index_->bytes().size());
}

}  // namespace internal
}  // namespace ufspack
