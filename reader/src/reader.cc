// Copyright 2026 The ufspack Authors.
#include "ufspack/reader.h"

#include <sys/stat.h>
#include <xxhash.h>
#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "merged.h"
#include "ufspack/coding.h"
#include "ufspack/file.h"
#include "ufspack/format.h"
#include "ufspack/manifest.h"
#include "ufspack/parallel.h"
#include "ufspack/text.h"

namespace ufspack {
namespace {

// A zstd block of at most 128 KiB needs at least 4 bytes (3-byte header and
// one RLE byte), so no frame expands by more than this factor.  Bounds the
// allocation a damaged index can ask for.
constexpr uint64_t kMaxZstdExpansion = 32768;

// The smallest zstd frame: 4-byte magic, 2-byte frame header (descriptor and
// window or 1-byte content size) and a 3-byte last block header.  Only named
// in messages: the format requires stored_length >= 1, and a shorter frame
// is caught when it is decoded.
constexpr uint64_t kMinZstdFrame = 9;

struct ZstdDCtxDeleter {
  void operator()(ZSTD_DCtx* c) const { ZSTD_freeDCtx(c); }
};

// Per-thread decompression state: no locks on the read path, and nothing
// shared that a fork() could leave locked.
ZSTD_DCtx* ThreadDCtx() {
  thread_local std::unique_ptr<ZSTD_DCtx, ZstdDCtxDeleter> ctx(
      ZSTD_createDCtx());
  return ctx.get();
}

std::string& ThreadScratch() {
  thread_local std::string scratch;
  return scratch;
}

}  // namespace

namespace internal {

// Where a zstd record's decompressed bytes go.  The decoder asks for room
// only as output really comes out of the frame, so nothing is ever sized
// from original_length (which a hostile index and frame header may both
// claim to be 32768 times the stored bytes) before the bytes exist.
class ZstdOutput {
 public:
  virtual ~ZstdOutput() = default;
  // Room for the next output bytes, `produced` bytes having been written
  // so far: sets *dst and *size, 1 <= *size <= remaining.
  virtual Status Room(uint64_t produced, uint64_t remaining, char** dst,
                      size_t* size) = 0;
  // The first `n` bytes of the last room hold output.
  virtual Status Filled(size_t n) = 0;
};

}  // namespace internal

Status ResolvePackPath(const std::string& path, std::string* index_path,
                       std::string* data_path) {
  if (IsUrl(path)) {
    // An object store has no directories to stat: a URL ending in
    // "/index.ufs" names the index, any other names the pack's prefix.
    // (A query string, as in a presigned URL, names one object only.)
    if (path.find('?') != std::string::npos) {
      return Status::InvalidArgument(
          path.substr(0, path.find('?')) +
          ": a URL with a query string names one object; a pack needs "
          "two (index.ufs and data.ufs)");
    }
    std::string base = path;
    while (!base.empty() && base.back() == '/') base.pop_back();
    const std::string suffix = std::string("/") + kIndexFileName;
    if (base.size() > suffix.size() &&
        base.compare(base.size() - suffix.size(), suffix.size(), suffix) == 0) {
      *index_path = base;
      *data_path =
          base.substr(0, base.size() - suffix.size()) + "/" + kDataFileName;
    } else {
      *index_path = base + suffix;
      *data_path = base + "/" + kDataFileName;
    }
    return Status::OK();
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return Status::FromErrno(path, errno);
  }
  if (S_ISDIR(st.st_mode)) {
    std::string base = path;
    while (base.size() > 1 && base.back() == '/') base.pop_back();
    *index_path = base + "/" + kIndexFileName;
    *data_path = base + "/" + kDataFileName;
    struct stat ist;
    if (::stat(index_path->c_str(), &ist) != 0) {
      return Status::NotFound(path + ": not a ufspack pack (no " +
                              kIndexFileName + " or " + kManifestFileName +
                              " in this directory)");
    }
  } else {
    *index_path = path;
    *data_path = DirName(path) + "/" + kDataFileName;
  }
  return Status::OK();
}

Reader::~Reader() = default;

bool Reader::prefers_batches() const {
  return parts_ ? parts_->remote : data_->prefers_batches();
}

namespace {

// data.ufs of a pack whose source could not be opened: every read fails
// with the source's error (the cache serves what it holds before this is
// reached).
class UnreachableFile final : public RandomAccessFile {
 public:
  UnreachableFile(std::string name, Status why, uint64_t size)
      : name_(std::move(name)), why_(std::move(why)), size_(size) {}
  Status Read(uint64_t offset, size_t n, char* scratch,
              size_t* bytes_read) const override {
    *bytes_read = 0;
    return Status::IOError(
        name_ + ": source unreachable, and this record is not in the cache (" +
        why_.ToString() + ")");
  }
  Status Size(uint64_t* size) const override {
    *size = size_;
    return Status::OK();
  }
  const std::string& name() const override { return name_; }

 private:
  const std::string name_;
  const Status why_;
  const uint64_t size_;
};

}  // namespace

Status Reader::OpenCached(const std::string& path, const ReaderOptions& options,
                          std::unique_ptr<Reader>* reader) {
  std::string index_path, data_path;
  Status s = ResolvePackPath(path, &index_path, &data_path);
  if (!s.ok()) {
    // The source may be gone (unmounted, network down): the cache knows
    // packs by their index path, so derive it as ResolvePackPath would.
    std::string base = path;
    while (base.size() > 1 && base.back() == '/') base.pop_back();
    const size_t slash = base.find_last_of('/');
    const std::string leaf =
        slash == std::string::npos ? base : base.substr(slash + 1);
    if (leaf == kIndexFileName) {
      index_path = base;
      data_path = DirName(base) + "/" + kDataFileName;
    } else {
      index_path = base + "/" + kIndexFileName;
      data_path = base + "/" + kDataFileName;
    }
  }
  std::unique_ptr<PackCache> pack;
  Status attached = options.cache->AttachPack(index_path, data_path, &pack);
  if (!attached.ok()) return s.ok() ? attached : s;
  std::unique_ptr<Region> index;
  UFSPACK_RETURN_IF_ERROR(pack->MapIndex(&index));
  std::unique_ptr<RandomAccessFile> data;
  const bool offline = !pack->source_status().ok();
  if (!offline) {
    s = OpenRandomAccessFile(data_path, &data);
    if (!s.ok()) {
      if (s.IsNotFound()) {
        return Status::NotFound(data_path + ": missing (" + index_path +
                                " needs its data file beside it)");
      }
      return s;
    }
  } else {
    IndexHeader header;
    std::string_view in = index->bytes();
    UFSPACK_RETURN_IF_ERROR(header.DecodeFrom(&in).WithContext(index->name()));
    data.reset(new UnreachableFile(data_path, pack->source_status(),
                                   header.data_size));
  }
  std::unique_ptr<Reader> r(new Reader());
  r->options_ = options;
  r->index_ = std::move(index);
  r->data_ = std::move(data);
  r->cache_ = std::move(pack);
  r->offline_ = offline;
  UFSPACK_RETURN_IF_ERROR(r->Init());
  // Messages and info() name the source, not the cache's copy.
  r->info_.index_path = index_path;
  *reader = std::move(r);
  return Status::OK();
}

namespace {

// Whether `path` names a merged pack, and its manifest: a manifest file, or
// a local directory holding one.  (A URL prefix is tried as a single pack
// first; see Reader::Open.)
bool ManifestOf(const std::string& path, std::string* manifest) {
  std::string base = path;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  const std::string suffix = std::string("/") + kManifestFileName;
  if (base == kManifestFileName ||
      (base.size() > suffix.size() &&
       base.compare(base.size() - suffix.size(), suffix.size(), suffix) == 0)) {
    *manifest = base;
    return true;
  }
  if (IsUrl(path)) return false;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return false;
  const std::string candidate = base + suffix;
  if (::stat(candidate.c_str(), &st) != 0) return false;
  *manifest = candidate;
  return true;
}

}  // namespace

Status Reader::Open(const std::string& path, const ReaderOptions& options,
                    std::unique_ptr<Reader>* reader) {
  std::string manifest;
  if (ManifestOf(path, &manifest)) {
    return OpenMerged(manifest, options, reader);
  }
  if (IsUrl(path) && !options.cache) {
    // A URL prefix may hold either kind: a single pack is tried first.
    Status s = OpenSingle(path, options, reader);
    if (!s.IsNotFound()) return s;
    std::string base = path;
    while (!base.empty() && base.back() == '/') base.pop_back();
    Status m = OpenMerged(base + "/" + kManifestFileName, options, reader);
    return m.IsNotFound() ? s : m;
  }
  return OpenSingle(path, options, reader);
}

Status Reader::OpenSingle(const std::string& path, const ReaderOptions& options,
                          std::unique_ptr<Reader>* reader) {
  if (options.cache) return OpenCached(path, options, reader);
  std::string index_path, data_path;
  UFSPACK_RETURN_IF_ERROR(ResolvePackPath(path, &index_path, &data_path));
  std::unique_ptr<Region> index;
  UFSPACK_RETURN_IF_ERROR(LoadFile(index_path, &index));
  std::unique_ptr<RandomAccessFile> data;
  Status s = OpenRandomAccessFile(data_path, &data);
  if (!s.ok()) {
    if (s.IsNotFound()) {
      return Status::NotFound(data_path + ": missing (" + index_path +
                              " needs its data file beside it)");
    }
    return s;
  }
  s = Open(std::move(index), std::move(data), options, reader);
  if (s.ok() || !s.IsCorruption() || IsUrl(index_path)) return s;
  // A build killed between its two renames left its new data.ufs beside the
  // previous index.ufs, and the previous data.ufs as .data.ufs.prev: with
  // that file, the previous index is still a complete pack.
  std::unique_ptr<Region> index_again;
  std::unique_ptr<RandomAccessFile> prev;
  std::unique_ptr<Reader> r;
  if (NewPosixRandomAccessFile(DirName(index_path) + "/" + kPrevDataFileName,
                               &prev)
          .ok() &&
      MapFile(index_path, &index_again).ok() &&
      Open(std::move(index_again), std::move(prev), options, &r).ok()) {
    *reader = std::move(r);
    return Status::OK();
  }
  return s;
}

Status Reader::Open(std::unique_ptr<Region> index,
                    std::unique_ptr<RandomAccessFile> data,
                    const ReaderOptions& options,
                    std::unique_ptr<Reader>* reader) {
  std::unique_ptr<Reader> r(new Reader());
  r->options_ = options;
  r->index_ = std::move(index);
  r->data_ = std::move(data);
  UFSPACK_RETURN_IF_ERROR(r->Init());
  *reader = std::move(r);
  return Status::OK();
}

Status Reader::Init() {
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
  return Status::OK();
}

Status Reader::Corrupt(uint64_t i, std::string_view name,
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

Status Reader::NameAt(uint64_t offset, uint64_t length,
                      std::string_view* name) const {
  if (offset > names_.size() || length > names_.size() - offset) {
    return Status::Corruption("name at pool offset " + std::to_string(offset) +
                              " + " + std::to_string(length) +
                              " exceeds the name pool (" +
                              std::to_string(names_.size()) + " bytes)");
  }
  *name = names_.substr(offset, length);
  return Status::OK();
}

Status Reader::GetRecord(uint64_t i, Record* record) const {
  if (parts_) return MergedGetRecord(i, record);
  if (i >= info_.record_count) {
    return Status::OutOfRange(info_.index_path + ": record " +
                              std::to_string(i) + " out of range (pack has " +
                              std::to_string(info_.record_count) + " records)");
  }
  std::string_view in = records_.substr(i * RecordEntry::kEncodedLength,
                                        RecordEntry::kEncodedLength);
  RecordEntry e;
  Status s = e.DecodeFrom(&in);
  if (!s.ok()) return Corrupt(i, {}, s.message());
  std::string_view name;
  s = NameAt(e.name_offset, e.name_length, &name);
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

Status Reader::GetClass(uint64_t c, ClassInfo* out) const {
  if (c >= info_.class_count) {
    return Status::OutOfRange(info_.index_path + ": class " +
                              std::to_string(c) + " out of range (pack has " +
                              std::to_string(info_.class_count) + " classes)");
  }
  std::string_view in = classes_.substr(c * ClassEntry::kEncodedLength,
                                        ClassEntry::kEncodedLength);
  ClassEntry e;
  Status s = e.DecodeFrom(&in);
  std::string where = info_.index_path + ": class " + std::to_string(c);
  if (!s.ok())
    return Status::Corruption(where + ": " + std::string(s.message()));
  std::string_view name;
  s = NameAt(e.name_offset, e.name_length, &name);
  if (!s.ok())
    return Status::Corruption(where + ": " + std::string(s.message()));
  if (e.first_record > info_.record_count ||
      e.record_count > info_.record_count - e.first_record) {
    return Status::Corruption(
        where + ": records " + std::to_string(e.first_record) + " + " +
        std::to_string(e.record_count) + " exceed the record count " +
        std::to_string(info_.record_count));
  }
  out->name = name;
  out->first_record = e.first_record;
  out->record_count = e.record_count;
  return Status::OK();
}

Status Reader::Find(std::string_view name, uint64_t* index) const {
  if (parts_) return MergedFind(name, index);
  uint64_t found;
  UFSPACK_RETURN_IF_ERROR(Probe(name, NameHash(name), &found));
  if (found == kNoRecord) {
    return Status::NotFound(info_.index_path + ": no record named '" +
                            EscapeBytes(name) + "'");
  }
  *index = found;
  return Status::OK();
}

Status Reader::Probe(std::string_view name, uint64_t hash,
                     uint64_t* index) const {
  *index = kNoRecord;
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

Status Reader::FindMany(const std::string_view* names, size_t count,
                        uint64_t* indices) const {
  if (parts_) {
    for (size_t k = 0; k < count; ++k) {
      Status s = MergedFind(names[k], &indices[k]);
      if (s.IsNotFound()) {
        indices[k] = kNoRecord;
      } else if (!s.ok()) {
        return s;
      }
    }
    return Status::OK();
  }
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

Status Reader::GetRecords(const uint64_t* indices, size_t count,
                          Record* records) const {
  for (size_t g = 0; g < count; g += kPrefetchGroup) {
    const size_t n = std::min(kPrefetchGroup, count - g);
    if (!parts_) {
      for (size_t k = 0; k < n; ++k) {
        if (indices[g + k] >= info_.record_count) continue;
        PrefetchBytes(
            records_.data() + indices[g + k] * RecordEntry::kEncodedLength,
            RecordEntry::kEncodedLength);
      }
      for (size_t k = 0; k < n; ++k) {
        if (indices[g + k] >= info_.record_count) continue;
        PrefetchName(
            records_.data() + indices[g + k] * RecordEntry::kEncodedLength,
            names_);
      }
    }
    for (size_t k = 0; k < n; ++k)
      UFSPACK_RETURN_IF_ERROR(GetRecord(indices[g + k], &records[g + k]));
  }
  return Status::OK();
}

// Reads the stored bytes of `r` into dst[0, r.stored_length) with one pread
// and verifies the checksum.
Status Reader::ReadStored(const Record& r, char* dst) const {
  if (parts_) {
    const Reader* part;
    Record local = r;
    UFSPACK_RETURN_IF_ERROR(PartFor(r.index, &part, &local.index));
    return part->ReadStored(local, dst);
  }
  if (cache_ && cache_->Lookup(r.index, r.stored_length, r.checksum, dst)) {
    return Status::OK();
  }
  size_t got = 0;
  Status s = data_->Read(r.offset, r.stored_length, dst, &got);
  if (!s.ok()) {
    return s.WithContext("record " + std::to_string(r.index) + " '" +
                         EscapeBytes(r.name) + "'");
  }
  return CheckStored(r, dst, got);
}

// Checks `got` stored bytes of `r` read from data.ufs into dst (their
// length and checksum) and offers them to the cache.
Status Reader::CheckStored(const Record& r, const char* dst, size_t got) const {
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
Status Reader::ReadStoredMany(const Record* records, char* const* dsts,
                              size_t count, int threads) const {
  if (parts_) return MergedReadStoredMany(records, dsts, count, threads);
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
  std::vector<RandomAccessFile::ReadOp> ops;
  std::vector<size_t> which;
  ops.reserve(count);
  which.reserve(count);
  for (size_t k = 0; k < count; ++k) {
    const Record& r = records[k];
    if (hit[k]) continue;
    RandomAccessFile::ReadOp op;
    op.offset = r.offset;
    op.n = static_cast<size_t>(r.stored_length);
    op.dst = dsts[k];
    ops.push_back(op);
    which.push_back(k);
  }
  if (ops.empty()) return Status::OK();
  size_t failed = ops.size();
  Status s = data_->ReadMany(ops.data(), ops.size(), &failed);
  if (!s.ok()) {
    if (failed < ops.size()) {
      const Record& r = records[which[failed]];
      return s.WithContext("record " + std::to_string(r.index) + " '" +
                           EscapeBytes(r.name) + "'");
    }
    return s;
  }
  for (size_t j = 0; j < ops.size(); ++j) {
    UFSPACK_RETURN_IF_ERROR(
        CheckStored(records[which[j]], ops[j].dst, ops[j].got));
  }
  return Status::OK();
}

namespace {

Status BadFrame(const std::string& data_name, const Record& r,
                const std::string& what) {
  return Status::Corruption(data_name + ": record " + std::to_string(r.index) +
                            " '" + EscapeBytes(r.name) + "' at offset " +
                            std::to_string(r.offset) + ": " + what);
}

// Checks that the zstd frame in frame[0, r.stored_length) declares exactly
// r.original_length bytes of content.  Necessary, not sufficient: the frame
// header is as untrusted as the index, so ZstdRecordDecoder below also never
// allocates more than the frame has actually produced.
Status CheckFrameSize(const std::string& data_name, const Record& r,
                      const char* frame) {
  const unsigned long long content =
      ZSTD_getFrameContentSize(frame, r.stored_length);
  if (content != r.original_length) {
    return BadFrame(data_name, r,
                    "zstd frame content size: expected " +
                        std::to_string(r.original_length) + ", found " +
                        (content == ZSTD_CONTENTSIZE_ERROR ||
                                 content == ZSTD_CONTENTSIZE_UNKNOWN
                             ? std::string("none")
                             : std::to_string(content)));
  }
  return Status::OK();
}

// The caller's buffer of at least original_length bytes: one room, so zstd
// decodes the whole frame in one pass straight into it.
class BufferOutput : public internal::ZstdOutput {
 public:
  explicit BufferOutput(char* dst) : dst_(dst) {}
  Status Room(uint64_t produced, uint64_t remaining, char** dst,
              size_t* size) override {
    *dst = dst_ + produced;
    *size = static_cast<size_t>(remaining);
    return Status::OK();
  }
  Status Filled(size_t) override { return Status::OK(); }

 private:
  char* const dst_;
};

// A string grown geometrically as output arrives: first at most
// kFirstRoom bytes, then doubling, never past original_length.  A record of
// at most kFirstRoom bytes is still decoded in one pass.
class StringOutput : public internal::ZstdOutput {
 public:
  static constexpr uint64_t kFirstRoom = uint64_t{1} << 20;
  explicit StringOutput(std::string* out) : out_(out) { out_->clear(); }
  Status Room(uint64_t produced, uint64_t remaining, char** dst,
              size_t* size) override {
    const uint64_t grow = std::min(remaining, std::max(kFirstRoom, produced));
    out_->resize(static_cast<size_t>(produced + grow));
    *dst = out_->data() + produced;
    *size = static_cast<size_t>(grow);
    return Status::OK();
  }
  Status Filled(size_t n) override {
    filled_ += n;
    return Status::OK();
  }
  // Drops the unfilled tail of the last room.
  void Trim() { out_->resize(static_cast<size_t>(filled_)); }

 private:
  std::string* const out_;
  uint64_t filled_ = 0;
};

// Pieces of at most kPiece bytes handed to a sink, through one buffer.
class SinkOutput : public internal::ZstdOutput {
 public:
  static constexpr size_t kPiece = 128 << 10;
  explicit SinkOutput(const std::function<Status(std::string_view)>& sink)
      : sink_(sink) {}
  Status Room(uint64_t, uint64_t remaining, char** dst, size_t* size) override {
    *size = static_cast<size_t>(std::min<uint64_t>(remaining, kPiece));
    if (buffer_.size() < *size) buffer_.resize(*size);
    *dst = buffer_.data();
    return Status::OK();
  }
  Status Filled(size_t n) override {
    return n == 0 ? Status::OK() : sink_(std::string_view(buffer_.data(), n));
  }

 private:
  const std::function<Status(std::string_view)>& sink_;
  std::string buffer_;
};

// The one zstd read path.  Checks the frame header against the entry, then
// decodes frame[0, r.stored_length) (already read and checksummed) with
// ZSTD_decompressStream into the rooms `output` gives, and checks that
// exactly original_length bytes come out: a frame that ends early, or goes
// on past the end, is Corruption naming the data file, record, offset and
// both sizes.  Memory: the output's rooms plus zstd's window buffer, which
// zstd bounds (2^27 bytes by default) whatever the frame claims.
Status DecodeZstdRecord(const std::string& data_name, const Record& r,
                        const char* frame, internal::ZstdOutput* output) {
  UFSPACK_RETURN_IF_ERROR(CheckFrameSize(data_name, r, frame));
  ZSTD_DCtx* dctx = ThreadDCtx();
  if (dctx == nullptr)
    return Status::IOError("out of memory (ZSTD_createDCtx)");
  ZSTD_DCtx_reset(dctx, ZSTD_reset_session_only);
  const uint64_t expected = r.original_length;
  auto sizes = [&](uint64_t found) {
    return "expected " + std::to_string(expected) + " bytes, found " +
           std::to_string(found);
  };
  ZSTD_inBuffer in{frame, static_cast<size_t>(r.stored_length), 0};
  uint64_t produced = 0;
  size_t ret = 1;  // 0 once the last frame is complete
  char spill[1];   // catches output past original_length
  for (;;) {
    ZSTD_outBuffer out{spill, sizeof(spill), 0};
    const bool past_end = produced == expected;
    if (!past_end) {
      char* dst = nullptr;
      size_t size = 0;
      UFSPACK_RETURN_IF_ERROR(
          output->Room(produced, expected - produced, &dst, &size));
      out = ZSTD_outBuffer{dst, size, 0};
    }
    bool stalled = false;
    while (out.pos < out.size && !(ret == 0 && in.pos == in.size)) {
      const size_t in_before = in.pos, out_before = out.pos;
      ret = ZSTD_decompressStream(dctx, &out, &in);
      if (ZSTD_isError(ret)) {
        if (!past_end) UFSPACK_RETURN_IF_ERROR(output->Filled(out.pos));
        produced += past_end ? 0 : out.pos;
        // zstd checks the declared size when it decodes the last block,
        // before handing that block out, so `produced` may miss up to one
        // block (128 KiB) of what the frame holds.
        return BadFrame(
            data_name, r,
            "zstd frame ends early or is damaged: " + sizes(produced) +
                " before zstd stopped (" + ZSTD_getErrorName(ret) + ")");
      }
      if (in.pos == in_before && out.pos == out_before) {
        stalled = true;  // input used up inside a frame
        break;
      }
    }
    if (past_end) {
      if (out.pos > 0) {
        return BadFrame(data_name, r,
                        "zstd frame goes on past its size: expected " +
                            std::to_string(expected) + " bytes, found more");
      }
    } else {
      UFSPACK_RETURN_IF_ERROR(output->Filled(out.pos));
      produced += out.pos;
    }
    if (stalled) {
      return BadFrame(data_name, r, "zstd frame truncated: " + sizes(produced));
    }
    if (ret == 0 && in.pos == in.size) break;
  }
  if (produced != expected) {
    return BadFrame(data_name, r, "zstd frame ends early: " + sizes(produced));
  }
  return Status::OK();
}

}  // namespace

// Reads and checksums the stored frame of zstd record `r` into a per-thread
// buffer, then decodes it into `output`.
Status Reader::ReadZstd(const Record& r, internal::ZstdOutput* output) const {
  if (parts_) {
    const Reader* part;
    Record local = r;
    UFSPACK_RETURN_IF_ERROR(PartFor(r.index, &part, &local.index));
    return part->ReadZstd(local, output);
  }
  std::string& scratch = ThreadScratch();
  if (scratch.size() < r.stored_length) scratch.resize(r.stored_length);
  UFSPACK_RETURN_IF_ERROR(ReadStored(r, scratch.data()));
  return DecodeZstdRecord(data_->name(), r, scratch.data(), output);
}

Status Reader::Read(const Record& r, char* dst, size_t capacity) const {
  if (capacity < r.original_length) {
    return Status::InvalidArgument(
        "record " + std::to_string(r.index) + " '" + EscapeBytes(r.name) +
        "' needs " + std::to_string(r.original_length) +
        " bytes, buffer holds " + std::to_string(capacity));
  }
  Status s;
  if (r.codec == Codec::kRaw) {
    s = ReadStored(r, dst);
  } else {
    BufferOutput output(dst);
    s = ReadZstd(r, &output);
  }
  // The pread (or decompression) writes straight into dst: after an error,
  // never leave part of a record (or of a damaged one) there.
  if (!s.ok()) std::memset(dst, 0, static_cast<size_t>(r.original_length));
  return s;
}

Status Reader::Read(uint64_t i, char* dst, size_t capacity,
                    size_t* length) const {
  Record r;
  UFSPACK_RETURN_IF_ERROR(GetRecord(i, &r));
  UFSPACK_RETURN_IF_ERROR(Read(r, dst, capacity));
  *length = static_cast<size_t>(r.original_length);
  return Status::OK();
}

Status Reader::Read(uint64_t i, std::string* out) const {
  Record r;
  UFSPACK_RETURN_IF_ERROR(GetRecord(i, &r));
  return Read(r, out);
}

Status Reader::Read(const Record& r, std::string* out) const {
  Status s;
  if (r.codec == Codec::kZstd) {
    // Grown as the frame really produces bytes, never sized from
    // original_length up front.
    StringOutput output(out);
    s = ReadZstd(r, &output);
    output.Trim();
  } else {
    out->resize(static_cast<size_t>(r.original_length));
    s = ReadStored(r, out->data());
  }
  if (!s.ok()) out->clear();
  return s;
}

Status Reader::Stream(
    const Record& r,
    const std::function<Status(std::string_view)>& sink) const {
  if (r.codec == Codec::kZstd) {
    SinkOutput output(sink);
    return ReadZstd(r, &output);
  }
  // Raw: stored_length bytes really are in the data file.
  std::string buf(static_cast<size_t>(r.stored_length), '\0');
  UFSPACK_RETURN_IF_ERROR(ReadStored(r, buf.data()));
  return sink(buf);
}

Status Reader::ReadBatch(const uint64_t* indices, size_t count, Batch* out,
                         int threads) const {
  // On any error *out is left empty, never half filled.
  out->data.clear();
  out->offsets.clear();
  std::vector<Record> records(count);
  // Each length is <= 32768 * data size, but their sum may still exceed
  // what one buffer can hold (or wrap around): refuse before allocating.
  const uint64_t limit = static_cast<uint64_t>(out->data.max_size());
  uint64_t claimed = 0;
  bool any_zstd = false;
  for (size_t k = 0; k < count; ++k) {
    UFSPACK_RETURN_IF_ERROR(GetRecord(indices[k], &records[k]));
    any_zstd |= records[k].codec == Codec::kZstd;
    if (records[k].original_length > limit - claimed) {
      return Status::InvalidArgument(
          "batch of " + std::to_string(count) + " records exceeds " +
          std::to_string(limit) + " bytes at record " +
          std::to_string(records[k].index) + " '" +
          EscapeBytes(records[k].name) + "' (" +
          std::to_string(records[k].original_length) + " bytes)");
    }
    claimed += records[k].original_length;
  }
  if (prefers_batches() && count > 1) {
    Status s = ReadBatchMany(records, out, threads);
    if (!s.ok()) {
      out->data.clear();
      out->offsets.clear();
    }
    return s;
  }

  // Runs body(k) for every k on `threads` threads; the first error wins.
  auto for_each = [&](const std::function<Status(size_t)>& body) -> Status {
    if (threads <= 1 || count <= 1) {
      for (size_t k = 0; k < count; ++k) UFSPACK_RETURN_IF_ERROR(body(k));
      return Status::OK();
    }
    std::atomic<bool> failed{false};
    std::mutex mu;
    Status first_error;
    ParallelFor(count, threads, [&](size_t k) {
      if (failed.load(std::memory_order_relaxed)) return;
      Status s = body(k);
      if (!s.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (first_error.ok()) first_error = s;
        failed.store(true);
      }
    });
    return first_error;
  };

  // A zstd record's original_length is not trusted to size anything: the
  // zstd records are decoded first, each into its own string grown as its
  // frame really produces bytes, and the batch buffer is sized from what
  // they produced (plus the raw lengths, which are bytes in the data file).
  // Still one pread per record; a batch of raw records (the usual case)
  // skips this pass and reads straight into the batch buffer.
  std::vector<std::string> decoded(any_zstd ? count : 0);
  Status s;
  if (any_zstd) {
    s = for_each([&](size_t k) -> Status {
      if (records[k].codec != Codec::kZstd) return Status::OK();
      return Read(records[k], &decoded[k]);
    });
  }
  if (s.ok()) {
    std::vector<uint64_t> offsets(count + 1, 0);
    uint64_t total = 0;
    for (size_t k = 0; k < count; ++k) {
      offsets[k] = total;
      total += records[k].codec == Codec::kZstd ? decoded[k].size()
                                                : records[k].original_length;
    }
    offsets[count] = total;
    out->offsets = std::move(offsets);
    out->data.resize(static_cast<size_t>(total));
    s = for_each([&](size_t k) -> Status {
      char* dst = out->data.data() + out->offsets[k];
      if (records[k].codec == Codec::kZstd) {
        std::memcpy(dst, decoded[k].data(), decoded[k].size());
        return Status::OK();
      }
      return ReadStored(records[k], dst);
    });
  }
  if (!s.ok()) {
    out->data.clear();
    out->offsets.clear();
  }
  return s;
}

Status Reader::ReadMany(const Record* records, char* const* dsts, size_t count,
                        int threads) const {
  for (size_t k = 0; k < count; ++k) {
    if (records[k].codec != Codec::kRaw) {
      return Status::InvalidArgument(
          "ReadMany: record " + std::to_string(records[k].index) + " '" +
          EscapeBytes(records[k].name) +
          "' is zstd-compressed; read it with Read(record, &string)");
    }
  }
  if (prefers_batches()) {
    return ReadStoredMany(records, dsts, count, threads);
  }
  if (threads <= 1 || count <= 1) {
    for (size_t k = 0; k < count; ++k) {
      UFSPACK_RETURN_IF_ERROR(ReadStored(records[k], dsts[k]));
    }
    return Status::OK();
  }
  std::atomic<bool> failed{false};
  std::mutex mu;
  Status first_error;
  ParallelFor(count, threads, [&](size_t k) {
    if (failed.load(std::memory_order_relaxed)) return;
    Status s = ReadStored(records[k], dsts[k]);
    if (!s.ok()) {
      std::lock_guard<std::mutex> lock(mu);
      if (first_error.ok()) first_error = s;
      failed.store(true);
    }
  });
  return first_error;
}

Status Reader::ReadBatchMany(const std::vector<Record>& records, Batch* out,
                             int threads) const {
  if (parts_) return MergedReadBatchMany(records, out, threads);
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

Status Reader::ListMetadata(
    std::vector<std::pair<std::string_view, std::string_view>>* entries) const {
  return DecodeMetadata(meta_, entries).WithContext(info_.index_path);
}

Status Reader::GetMetadata(std::string_view key,
                           std::string_view* value) const {
  std::vector<std::pair<std::string_view, std::string_view>> entries;
  UFSPACK_RETURN_IF_ERROR(ListMetadata(&entries));
  for (const auto& [k, v] : entries) {
    if (k == key) {
      *value = v;
      return Status::OK();
    }
  }
  return Status::NotFound(info_.index_path + ": no metadata '" +
                          EscapeBytes(key) + "'");
}

namespace {

// One-pass scans release the index pages behind them every this many
// records (about 5 MiB of entries and names).
constexpr uint64_t kReleaseEvery = 1 << 16;
// CheckIndex() checks the lookup table this many bytes of slots at a time.
constexpr uint64_t kLookupStripeBytes = uint64_t{256} << 20;

}  // namespace

void Reader::ReleaseRecords(uint64_t first, uint64_t count) const {
  if (first >= info_.record_count || count == 0) return;
  count = std::min(count, info_.record_count - first);
  if (parts_) {
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
      const internal::PartSlot& slot = parts_->slots[segments[s].part];
      if (slot.opened.load(std::memory_order_acquire))  // never opens one
        slot.reader->ReleaseRecords(segments[s].first + off, run);
      first += run;
    }
    return;
  }
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

void Reader::ReleaseIndex() const {
  if (parts_) {
    for (size_t k = 0; k < parts_->manifest.parts.size(); ++k) {
      const internal::PartSlot& slot = parts_->slots[k];
      if (slot.opened.load(std::memory_order_acquire))
        slot.reader->ReleaseIndex();
    }
    return;
  }
  index_->Release(index_->bytes().data(), index_->bytes().size());
}

Status Reader::CheckIndex() const {
  if (parts_) return MergedCheckIndex();
  const std::string& iname = info_.index_path;
  std::string_view bytes = index_->bytes();
  {
    // The body checksum, streamed in chunks released behind it.
    XXH3_state_t* state = XXH3_createState();
    if (state == nullptr) return Status::IOError(iname + ": out of memory");
    XXH3_64bits_reset(state);
    constexpr size_t kChunk = 16 << 20;
    for (size_t at = IndexHeader::kEncodedLength; at < bytes.size();
         at += kChunk) {
      const size_t n = std::min(kChunk, bytes.size() - at);
      XXH3_64bits_update(state, bytes.data() + at, n);
      index_->Release(bytes.data() + at, n);
    }
    const uint64_t actual = XXH3_64bits_digest(state);
    XXH3_freeState(state);
    if (actual != body_checksum_) {
      return Status::Corruption(
          iname + ": index body checksum mismatch: expected " +
          HexU64(body_checksum_) + ", found " + HexU64(actual));
    }
  }
  for (uint64_t i = 0; i < info_.record_count; ++i) {
    Record r;
    UFSPACK_RETURN_IF_ERROR(GetRecord(i, &r));
    if ((i + 1) % kReleaseEvery == 0)
      ReleaseRecords(i + 1 - kReleaseEvery, kReleaseEvery);
  }
  uint64_t covered = 0;
  for (uint64_t c = 0; c < info_.class_count; ++c) {
    ClassInfo ci;
    UFSPACK_RETURN_IF_ERROR(GetClass(c, &ci));
    if (ci.first_record != covered) {
      return Status::Corruption(iname + ": class " + std::to_string(c) +
                                " starts at record " +
                                std::to_string(ci.first_record) +
                                ", expected " + std::to_string(covered));
    }
    for (uint64_t i = ci.first_record; i < ci.first_record + ci.record_count;
         ++i) {
      Record r;
      UFSPACK_RETURN_IF_ERROR(GetRecord(i, &r));
      if (r.label != c) {
        return Corrupt(i, r.name,
                       "label " + std::to_string(r.label) +
                           " but the class table puts it in class " +
                           std::to_string(c));
      }
      if ((i + 1) % kReleaseEvery == 0)
        ReleaseRecords(i + 1 - kReleaseEvery, kReleaseEvery);
    }
    covered += ci.record_count;
  }
  if (info_.class_count > 0 && covered != info_.record_count) {
    return Status::Corruption(iname + ": class table covers " +
                              std::to_string(covered) + " of " +
                              std::to_string(info_.record_count) + " records");
  }
  std::vector<std::pair<std::string_view, std::string_view>> meta;
  UFSPACK_RETURN_IF_ERROR(ListMetadata(&meta));
  uint64_t used = 0;
  const uint64_t slots = lookup_.size() / 4;
  for (uint64_t k = 0; k < slots; ++k) {
    if (DecodeFixed32(lookup_.data() + k * 4) != 0) ++used;
    if ((k + 1) % kReleaseEvery == 0)
      index_->Release(lookup_.data() + (k + 1 - kReleaseEvery) * 4,
                      kReleaseEvery * 4);
  }
  index_->Release(lookup_.data(), lookup_.size());
  if (used != info_.record_count) {
    return Status::Corruption(iname + ": lookup table holds " +
                              std::to_string(used) + " entries for " +
                              std::to_string(info_.record_count) + " records");
  }
  // Every name looks up to its own record.  The lookups whose home slot
  // lies in one stripe of the table at a time, so that only that stripe is
  // resident, with the records and names of the pass, released behind it,
  // and the entries of other records that the probes visit (at random),
  // released every kProbeRelease records.
  constexpr uint64_t kProbeRelease = 1 << 15;
  const uint64_t stripe_slots = std::max<uint64_t>(1, kLookupStripeBytes / 4);
  for (uint64_t lo = 0; lo < std::max<uint64_t>(slots, 1); lo += stripe_slots) {
    const uint64_t hi = lo + stripe_slots;
    for (uint64_t i = 0; i < info_.record_count; ++i) {
      if (i % kProbeRelease == 0 && i > 0)
        index_->Release(records_.data(), records_.size());
      if (i % kReleaseEvery == 0 && i > 0)
        ReleaseRecords(i - kReleaseEvery, kReleaseEvery);
      Record r;
      UFSPACK_RETURN_IF_ERROR(GetRecord(i, &r));
      const uint64_t h = NameHash(r.name);
      if (slots > 0) {
        const uint64_t home = LookupHome(h, slots);
        if (home < lo || home >= hi) continue;
      }
      uint64_t found = kNoRecord;
      Status s = Probe(r.name, h, &found);
      if (!s.ok() || found != i) {
        return Corrupt(
            i, r.name,
            !s.ok()
                ? "lookup cannot find this name: " + std::string(s.message())
            : found == kNoRecord
                ? "lookup cannot find this name: " + info_.index_path +
                      ": no record named '" + EscapeBytes(r.name) + "'"
                : "lookup finds record " + std::to_string(found) +
                      " for this name (duplicate name?)");
      }
    }
    index_->Release(lookup_.data() + lo * 4,
                    (std::min(hi, slots) - std::min(lo, slots)) * 4);
  }
  return Status::OK();
}

}  // namespace ufspack

namespace ufspack {
PackCache::~PackCache() = default;

Status PackCache::MapIndex(std::unique_ptr<Region>* index) const {
  return LoadFile(index_path(), index);
}

RecordCache::~RecordCache() = default;
}  // namespace ufspack
