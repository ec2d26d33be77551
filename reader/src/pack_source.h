// Copyright 2026 The ufspack Authors.
//
// PackSource: the pack behind a Reader, one type per kind of pack.
//
//   SinglePack  index.ufs + data.ufs (single_pack.h)
//   MergedPack  a manifest over parts, each a SinglePack (merged_pack.h)
//
// A Reader (reader.cc) holds one and adds what does not depend on the kind:
// argument checks, buffers, batches, zstd output, the first-error rule of
// threaded reads.  A new kind of pack is a new subclass; no Reader method
// asks which kind it has.  Private to the reader.
//
// Thread safety: immutable after it is opened; every const method may be
// called concurrently (MergedPack opens its parts once, on first use).
// Lifetimes: views (names, metadata) point into the mapped index or
// manifest and live as long as the PackSource.
#ifndef UFSPACK_READER_SRC_PACK_SOURCE_H_
#define UFSPACK_READER_SRC_PACK_SOURCE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "ufspack/file.h"
#include "ufspack/reader.h"
#include "ufspack/status.h"

namespace ufspack {
namespace internal {

class ZstdOutput;  // record_codec.h

class PackSource {
 public:
  virtual ~PackSource();
  PackSource(const PackSource&) = delete;
  PackSource& operator=(const PackSource&) = delete;

  const PackInfo& info() const { return info_; }
  const ReaderOptions& options() const { return options_; }
  bool offline() const { return offline_; }

  // Over the class table, name pool and metadata of the index (a manifest
  // has the same sections): the same for every kind.
  Status GetClass(uint64_t c, ClassInfo* info) const;
  Status ListMetadata(
      std::vector<std::pair<std::string_view, std::string_view>>* entries)
      const;

  // As the Reader's methods of the same names.
  virtual bool prefers_batches() const = 0;
  virtual Status GetRecord(uint64_t i, Record* record) const = 0;
  virtual Status Find(std::string_view name, uint64_t* index) const = 0;
  virtual Status FindMany(const std::string_view* names, size_t count,
                          uint64_t* indices) const = 0;
  virtual Status CheckIndex() const = 0;
  // REQUIRES: count > 0 and first + count <= info().record_count.
  virtual void ReleaseRecords(uint64_t first, uint64_t count) const = 0;
  virtual void ReleaseIndex() const = 0;
  // A hint that entries indices[0, count) are about to be decoded (their
  // cache lines are fetched); changes no result.
  virtual void PrefetchRecords(const uint64_t* indices, size_t count) const {}
  // Where records [first, first + count) lie: offsets[k] is record
  // first + k's offset in its part's data.ufs and parts[k] its part (0 for
  // a single pack), each checked against its data area as GetRecord checks
  // it (the same Corruption otherwise; the other fields are checked when
  // the record is read).  For BlockMembers: one field per entry, no name.
  // REQUIRES: first + count <= info().record_count.
  virtual Status RecordOffsets(uint64_t first, uint64_t count,
                               uint64_t* offsets, uint32_t* parts) const = 0;
  // Reader::WillNeed: bytes [offset, offset + n) of part `part`'s data
  // file (0 for a single pack) are about to be read.  A hint; a part not
  // opened yet is left alone.  Returns the bytes asked for.
  virtual uint64_t WillNeed(uint32_t part, uint64_t offset,
                            uint64_t n) const = 0;
  // Block reads: the background fetch of the blocks holding records[0,
  // count) (records GetRecord returned), and what block reads did.
  virtual void PrefetchBlocks(const Record* records, size_t count) const = 0;
  virtual BlockReadStats block_stats() const = 0;

  // Reads the stored bytes of `r` (a record GetRecord returned) into
  // dst[0, r.stored_length): the cache, or one pread, then the checksum.
  virtual Status ReadStored(const Record& r, char* dst) const = 0;
  // ReadStored for records[k] into dsts[k], k < count: the cache's hits on
  // `threads` threads, the misses as one ReadMany of the data file (every
  // request in flight at once on a remote one).  The first error.
  virtual Status ReadStoredMany(const Record* records, char* const* dsts,
                                size_t count, int threads) const = 0;
  // Reads, checksums and decodes zstd record `r` into `output`.
  virtual Status ReadZstd(const Record& r, ZstdOutput* output) const = 0;
  // ReadBatch of `records` when prefers_batches(): their stored bytes with
  // ReadStoredMany, zstd frames decoded from memory.  Sets out->data and
  // out->offsets on success.
  virtual Status ReadBatchMany(const std::vector<Record>& records, Batch* out,
                               int threads) const = 0;

 protected:
  PackSource() = default;
  // OutOfRange "<index>: record <i> out of range (pack has <n> records)"
  // when i >= n (`what`: "record" or "class"), else OK.
  Status CheckRange(const char* what, uint64_t i, uint64_t n) const;
  // The bounds-checked view of name pool bytes [offset, offset + length).
  Status NameAt(uint64_t offset, uint64_t length, std::string_view* name) const;
  // Decodes entry i of `table` (Entry: a ClassEntry or RecordEntry of
  // format.h) into *entry and its name (NameAt) into *name; the decode or
  // name pool error as it is (the caller says which entry).
  // REQUIRES: table holds at least i + 1 entries.
  template <typename Entry>
  Status DecodeNamedEntry(std::string_view table, uint64_t i, Entry* entry,
                          std::string_view* name) const {
    std::string_view in =
        table.substr(i * Entry::kEncodedLength, Entry::kEncodedLength);
    UFSPACK_RETURN_IF_ERROR(entry->DecodeFrom(&in));
    return NameAt(entry->name_offset, entry->name_length, name);
  }

  ReaderOptions options_;
  PackInfo info_;
  uint64_t body_checksum_ = 0;  // of the index body (or manifest body)
  bool offline_ = false;
  std::unique_ptr<Region> index_;  // index.ufs, or the manifest
  std::string_view classes_;       // class table bytes
  std::string_view names_;         // name pool
  std::string_view meta_;          // metadata section
};

// A Reader over `source` (the reader's own Open paths).
std::unique_ptr<Reader> WrapSource(std::unique_ptr<PackSource> source);

}  // namespace internal
}  // namespace ufspack

#endif  // UFSPACK_READER_SRC_PACK_SOURCE_H_
