// Copyright 2026 The ufspack Authors.
//
// Reader (ufspack/reader.h): what does not depend on the kind of pack
// (argument checks, buffers, batches, zstd output, the first-error rule of
// threaded reads) over the PackSource that does (pack_source.h).
#include "ufspack/reader.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "pack_source.h"
#include "record_codec.h"
#include "ufspack/file.h"
#include "ufspack/parallel.h"
#include "ufspack/text.h"

namespace ufspack {

using internal::BufferOutput;
using internal::SinkOutput;
using internal::StringOutput;

namespace internal {
std::unique_ptr<Reader> WrapSource(std::unique_ptr<PackSource> source) {
  return std::unique_ptr<Reader>(new Reader(std::move(source)));
}
}  // namespace internal

Reader::Reader(std::unique_ptr<internal::PackSource> source)
    : source_(std::move(source)) {}
Reader::~Reader() = default;

bool Reader::offline() const { return source_->offline(); }
bool Reader::prefers_batches() const { return source_->prefers_batches(); }
const PackInfo& Reader::info() const { return source_->info(); }
const ReaderOptions& Reader::options() const { return source_->options(); }
uint64_t Reader::size() const { return source_->info().record_count; }
uint64_t Reader::class_count() const { return source_->info().class_count; }

Status Reader::GetRecord(uint64_t i, Record* record) const {
  return source_->GetRecord(i, record);
}
Status Reader::GetClass(uint64_t c, ClassInfo* info) const {
  return source_->GetClass(c, info);
}
Status Reader::Find(std::string_view name, uint64_t* index) const {
  return source_->Find(name, index);
}
Status Reader::FindMany(const std::string_view* names, size_t count,
                        uint64_t* indices) const {
  return source_->FindMany(names, count, indices);
}
Status Reader::CheckIndex() const { return source_->CheckIndex(); }
Status Reader::ListMetadata(
    std::vector<std::pair<std::string_view, std::string_view>>* entries) const {
  return source_->ListMetadata(entries);
}

void Reader::ReleaseRecords(uint64_t first, uint64_t count) const {
  const uint64_t n = size();
  if (first >= n || count == 0) return;
  source_->ReleaseRecords(first, std::min(count, n - first));
}
void Reader::ReleaseIndex() const { source_->ReleaseIndex(); }

Status Reader::GetRecords(const uint64_t* indices, size_t count,
                          Record* records) const {
  // In small groups: each group's entries and names are fetched from memory
  // together (PrefetchRecords) before they are decoded.
  constexpr size_t kGroup = 16;
  for (size_t g = 0; g < count; g += kGroup) {
    const size_t n = std::min(kGroup, count - g);
    source_->PrefetchRecords(indices + g, n);
    for (size_t k = 0; k < n; ++k)
      UFSPACK_RETURN_IF_ERROR(GetRecord(indices[g + k], &records[g + k]));
  }
  return Status::OK();
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
    s = source_->ReadStored(r, dst);
  } else {
    BufferOutput output(dst);
    s = source_->ReadZstd(r, &output);
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
    s = source_->ReadZstd(r, &output);
    output.Trim();
  } else {
    out->resize(static_cast<size_t>(r.original_length));
    s = source_->ReadStored(r, out->data());
  }
  if (!s.ok()) out->clear();
  return s;
}

Status Reader::Stream(
    const Record& r,
    const std::function<Status(std::string_view)>& sink) const {
  if (r.codec == Codec::kZstd) {
    SinkOutput output(sink);
    return source_->ReadZstd(r, &output);
  }
  // Raw: stored_length bytes really are in the data file.
  std::string buf(static_cast<size_t>(r.stored_length), '\0');
  UFSPACK_RETURN_IF_ERROR(source_->ReadStored(r, buf.data()));
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
    Status s = source_->ReadBatchMany(records, out, threads);
    if (!s.ok()) {
      out->data.clear();
      out->offsets.clear();
    }
    return s;
  }

  // Runs body(k) for every k on `threads` threads; the first error wins.
  auto for_each = [&](const std::function<Status(size_t)>& body) {
    return ParallelForStatus(count, threads, body);
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
      return source_->ReadStored(records[k], dst);
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
    return source_->ReadStoredMany(records, dsts, count, threads);
  }
  return ParallelForStatus(count, threads, [&](size_t k) {
    return source_->ReadStored(records[k], dsts[k]);
  });
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
  return Status::NotFound(info().index_path + ": no metadata '" +
                          EscapeBytes(key) + "'");
}

PackCache::~PackCache() = default;

Status PackCache::MapIndex(std::unique_ptr<Region>* index) const {
  return LoadFile(index_path(), index);
}

RecordCache::~RecordCache() = default;

}  // namespace ufspack
