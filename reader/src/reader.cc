// Copyright 2026 The ufspack Authors.
#include "ufspack/reader.h"

#include <sys/stat.h>
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

#include "ufspack/coding.h"
#include "ufspack/parallel.h"
#include "ufspack/text.h"

namespace ufspack {
namespace {

// A zstd block of at most 128 KiB needs at least 4 bytes (3-byte header and
// one RLE byte), so no frame expands by more than this factor.  Bounds the
// allocation a damaged index can ask for.
constexpr uint64_t kMaxZstdExpansion = 32768;

std::string DirName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

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

Status ResolvePackPath(const std::string& path, std::string* index_path,
                       std::string* data_path) {
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
                              kIndexFileName + " in this directory)");
    }
  } else {
    *index_path = path;
    *data_path = DirName(path) + "/" + kDataFileName;
  }
  return Status::OK();
}

Reader::~Reader() = default;

Status Reader::Open(const std::string& path, const ReaderOptions& options,
                    std::unique_ptr<Reader>* reader) {
  std::string index_path, data_path;
  UFSPACK_RETURN_IF_ERROR(ResolvePackPath(path, &index_path, &data_path));
  std::unique_ptr<Region> index;
  UFSPACK_RETURN_IF_ERROR(MapFile(index_path, &index));
  std::unique_ptr<RandomAccessFile> data;
  Status s = NewPosixRandomAccessFile(data_path, &data);
  if (!s.ok()) {
    if (s.IsNotFound()) {
      return Status::NotFound(data_path + ": missing (" + index_path +
                              " needs its data file beside it)");
    }
    return s;
  }
  s = Open(std::move(index), std::move(data), options, reader);
  if (s.ok() || !s.IsCorruption()) return s;
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
  UFSPACK_RETURN_IF_ERROR(header_.DecodeFrom(&in).WithContext(iname));
  UFSPACK_RETURN_IF_ERROR(header_.ValidateLayout().WithContext(iname));
  if (header_.index_size != bytes.size()) {
    return Status::Corruption(
        iname + ": size: expected " + std::to_string(header_.index_size) +
        " bytes (recorded in the header), found " +
        std::to_string(bytes.size()) +
        (bytes.size() < header_.index_size ? " (truncated)" : ""));
  }

  // Pairing: the data header's pack id must match, and the size must be the
  // one the index recorded.
  char dh[DataHeader::kEncodedLength];
  size_t got = 0;
  UFSPACK_RETURN_IF_ERROR(data_->Read(0, sizeof(dh), dh, &got));
  DataHeader data_header;
  std::string_view din(dh, got);
  UFSPACK_RETURN_IF_ERROR(data_header.DecodeFrom(&din).WithContext(dname));
  if (data_header.pack_id != header_.pack_id) {
    return Status::Corruption(iname + " and " + dname +
                              " are not one pack: index pack id " +
                              header_.pack_id.ToHex() + ", data pack id " +
                              data_header.pack_id.ToHex());
  }
  if (data_header.version != header_.version) {
    return Status::Corruption(
        iname + " is version " + std::to_string(header_.version) + " but " +
        dname + " is version " + std::to_string(data_header.version));
  }
  uint64_t data_size = 0;
  UFSPACK_RETURN_IF_ERROR(data_->Size(&data_size));
  if (data_size != header_.data_size) {
    return Status::Corruption(dname + ": size: expected " +
                              std::to_string(header_.data_size) +
                              " bytes (recorded in " + iname + "), found " +
                              std::to_string(data_size));
  }

  if (options_.verify_index_checksum) {
    const uint64_t actual =
        Checksum64(bytes.data() + IndexHeader::kEncodedLength,
                   bytes.size() - IndexHeader::kEncodedLength);
    if (actual != header_.body_checksum) {
      return Status::Corruption(
          iname + ": index body checksum mismatch: expected " +
          HexU64(header_.body_checksum) + ", found " + HexU64(actual));
    }
  }

  records_ = bytes.substr(header_.records.offset, header_.records.size);
  classes_ = bytes.substr(header_.classes.offset, header_.classes.size);
  lookup_ = bytes.substr(header_.lookup.offset, header_.lookup.size);
  names_ = bytes.substr(header_.names.offset, header_.names.size);
  meta_ = bytes.substr(header_.meta.offset, header_.meta.size);

  info_.version = header_.version;
  info_.pack_id = header_.pack_id;
  info_.record_count = header_.record_count;
  info_.class_count = header_.class_count;
  info_.data_size = header_.data_size;
  info_.index_size = header_.index_size;
  info_.flat = header_.flat();
  info_.optional_flags = header_.optional_flags;
  info_.checksum_type = header_.checksum_type;
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
    if (e.stored_length == 0 ||
        e.original_length / kMaxZstdExpansion > e.stored_length) {
      return Corrupt(i, name,
                     "zstd record of " + std::to_string(e.stored_length) +
                         " bytes cannot expand to " +
                         std::to_string(e.original_length));
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
  const uint64_t slots = lookup_.size() / 4;
  if (slots == 0) {
    return Status::NotFound(info_.index_path + ": no record named '" +
                            EscapeBytes(name) + "'");
  }
  const uint64_t h = NameHash(name);
  const uint32_t tag = NameHashTag(h);
  uint64_t pos = LookupHome(h, slots);
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
        records_.data() + candidate * RecordEntry::kEncodedLength + 48);
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
  return Status::NotFound(info_.index_path + ": no record named '" +
                          EscapeBytes(name) + "'");
}

// Reads the stored bytes of `r` into dst[0, r.stored_length) with one pread
// and verifies the checksum.
Status Reader::ReadStored(const Record& r, char* dst) const {
  size_t got = 0;
  Status s = data_->Read(r.offset, r.stored_length, dst, &got);
  if (!s.ok()) {
    return s.WithContext("record " + std::to_string(r.index) + " '" +
                         EscapeBytes(r.name) + "'");
  }
  if (got != r.stored_length) {
    return Status::Corruption(
        data_->name() + ": record " + std::to_string(r.index) + " '" +
        EscapeBytes(r.name) + "' at offset " + std::to_string(r.offset) +
        ": short read: expected " + std::to_string(r.stored_length) +
        " bytes, found " + std::to_string(got) + " (data file truncated?)");
  }
  if (options_.verify_checksums) {
    const uint64_t actual = Checksum64(dst, got);
    if (actual != r.checksum) {
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

namespace {

Status BadFrame(const std::string& data_name, const Record& r,
                const std::string& what) {
  return Status::Corruption(data_name + ": record " + std::to_string(r.index) +
                            " '" + EscapeBytes(r.name) + "' at offset " +
                            std::to_string(r.offset) + ": " + what);
}

// Checks that the zstd frame in frame[0, r.stored_length) declares exactly
// r.original_length bytes of content.  Done before any output buffer is
// sized from original_length, so a damaged length cannot cause a large
// allocation.
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

// Decompresses the frame into dst[0, r.original_length).
Status Decompress(const std::string& data_name, const Record& r,
                  const char* frame, char* dst) {
  ZSTD_DCtx* dctx = ThreadDCtx();
  if (dctx == nullptr)
    return Status::IOError("out of memory (ZSTD_createDCtx)");
  // Bound the output by the record's length, not the buffer's capacity:
  // zstd may use spare room at the end of its output buffer as workspace,
  // and the caller's bytes past original_length must stay untouched.
  size_t n =
      ZSTD_decompressDCtx(dctx, dst, static_cast<size_t>(r.original_length),
                          frame, r.stored_length);
  if (ZSTD_isError(n)) {
    return BadFrame(data_name, r, std::string("zstd: ") + ZSTD_getErrorName(n));
  }
  if (n != r.original_length) {
    return BadFrame(data_name, r,
                    "decompressed to " + std::to_string(n) +
                        " bytes, expected " +
                        std::to_string(r.original_length));
  }
  return Status::OK();
}

}  // namespace

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
    std::string& scratch = ThreadScratch();
    if (scratch.size() < r.stored_length) scratch.resize(r.stored_length);
    s = ReadStored(r, scratch.data());
    if (s.ok()) s = CheckFrameSize(data_->name(), r, scratch.data());
    if (s.ok()) s = Decompress(data_->name(), r, scratch.data(), dst);
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
  Status s;
  if (r.codec == Codec::kZstd) {
    // Read and check the frame before sizing *out from original_length.
    std::string& scratch = ThreadScratch();
    if (scratch.size() < r.stored_length) scratch.resize(r.stored_length);
    s = ReadStored(r, scratch.data());
    if (s.ok()) s = CheckFrameSize(data_->name(), r, scratch.data());
    if (s.ok()) {
      out->resize(static_cast<size_t>(r.original_length));
      s = Decompress(data_->name(), r, scratch.data(), out->data());
    }
  } else {
    out->resize(static_cast<size_t>(r.original_length));
    s = ReadStored(r, out->data());
  }
  if (!s.ok()) out->clear();
  return s;
}

Status Reader::ReadBatch(const uint64_t* indices, size_t count, Batch* out,
                         int threads) const {
  // On any error *out is left empty, never half filled.
  out->data.clear();
  out->offsets.clear();
  std::vector<Record> records(count);
  std::vector<uint64_t> offsets(count + 1, 0);
  // Each length is <= 32768 * data size, but their sum may still exceed
  // what one buffer can hold (or wrap around): refuse before allocating.
  const uint64_t limit = static_cast<uint64_t>(out->data.max_size());
  uint64_t total = 0;
  bool any_zstd = false;
  for (size_t k = 0; k < count; ++k) {
    UFSPACK_RETURN_IF_ERROR(GetRecord(indices[k], &records[k]));
    any_zstd |= records[k].codec == Codec::kZstd;
    offsets[k] = total;
    if (records[k].original_length > limit - total) {
      return Status::InvalidArgument(
          "batch of " + std::to_string(count) + " records exceeds " +
          std::to_string(limit) + " bytes at record " +
          std::to_string(records[k].index) + " '" +
          EscapeBytes(records[k].name) + "' (" +
          std::to_string(records[k].original_length) + " bytes)");
    }
    total += records[k].original_length;
  }
  offsets[count] = total;

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

  // As in Read(), a zstd record's original_length is trusted only once its
  // frame (read and checksummed) declares that content size: the frames are
  // read and checked before the batch buffer is sized, so a damaged index
  // cannot make that buffer 32768 times the data the records point at.
  // Still one pread per record; the frames are held until decompressed.
  // A batch of raw records (the usual case) skips this pass.
  std::vector<std::string> frames(any_zstd ? count : 0);
  Status s;
  if (any_zstd) {
    s = for_each([&](size_t k) -> Status {
      const Record& r = records[k];
      if (r.codec != Codec::kZstd) return Status::OK();
      frames[k].resize(static_cast<size_t>(r.stored_length));
      UFSPACK_RETURN_IF_ERROR(ReadStored(r, frames[k].data()));
      return CheckFrameSize(data_->name(), r, frames[k].data());
    });
  }
  if (s.ok()) {
    out->offsets = std::move(offsets);
    out->data.resize(static_cast<size_t>(total));
    s = for_each([&](size_t k) -> Status {
      const Record& r = records[k];
      char* dst = out->data.data() + out->offsets[k];
      if (r.codec == Codec::kZstd) {
        return Decompress(data_->name(), r, frames[k].data(), dst);
      }
      return ReadStored(r, dst);
    });
  }
  if (!s.ok()) {
    out->data.clear();
    out->offsets.clear();
  }
  return s;
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

Status Reader::CheckIndex() const {
  const std::string& iname = info_.index_path;
  std::string_view bytes = index_->bytes();
  const uint64_t actual =
      Checksum64(bytes.data() + IndexHeader::kEncodedLength,
                 bytes.size() - IndexHeader::kEncodedLength);
  if (actual != header_.body_checksum) {
    return Status::Corruption(
        iname + ": index body checksum mismatch: expected " +
        HexU64(header_.body_checksum) + ", found " + HexU64(actual));
  }
  for (uint64_t i = 0; i < info_.record_count; ++i) {
    Record r;
    UFSPACK_RETURN_IF_ERROR(GetRecord(i, &r));
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
  }
  if (used != info_.record_count) {
    return Status::Corruption(iname + ": lookup table holds " +
                              std::to_string(used) + " entries for " +
                              std::to_string(info_.record_count) + " records");
  }
  for (uint64_t i = 0; i < info_.record_count; ++i) {
    Record r;
    UFSPACK_RETURN_IF_ERROR(GetRecord(i, &r));
    uint64_t found = 0;
    Status s = Find(r.name, &found);
    if (!s.ok() || found != i) {
      return Corrupt(
          i, r.name,
          s.ok() ? "lookup finds record " + std::to_string(found) +
                       " for this name (duplicate name?)"
                 : "lookup cannot find this name: " + std::string(s.message()));
    }
  }
  return Status::OK();
}

}  // namespace ufspack
