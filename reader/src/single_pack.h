// Copyright 2026 The ufspack Authors.
//
// SinglePack: a pack of one index.ufs and one data.ufs (docs/format.md),
// optionally served through a node-local cache (ReaderOptions::cache).
// Its record entries are decoded and bounds-checked when used; lookups
// probe the on-disk hash table.  Private to the reader.
//
// Thread safety: as PackSource (immutable after Open).
#ifndef UFSPACK_READER_SRC_SINGLE_PACK_H_
#define UFSPACK_READER_SRC_SINGLE_PACK_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "block_file.h"
#include "pack_source.h"
#include "ufspack/file.h"
#include "ufspack/reader.h"
#include "ufspack/record_cache.h"
#include "ufspack/status.h"

namespace ufspack {
namespace internal {

class SinglePack final : public PackSource {
 public:
  // Opens the pack at `path` (its directory, or its index.ufs): through
  // options.cache when set (OpenCached), else the files themselves, with
  // the fallback to .data.ufs.prev that a build killed between its two
  // renames needs (open.cc).
  static Status Open(const std::string& path, const ReaderOptions& options,
                     std::unique_ptr<SinglePack>* pack);
  // Opens a pack over already opened storage.
  static Status Open(std::unique_ptr<Region> index,
                     std::unique_ptr<RandomAccessFile> data,
                     const ReaderOptions& options,
                     std::unique_ptr<SinglePack>* pack);

  bool prefers_batches() const override;
  // Names: a binary search of the name table.
  Status Find(std::string_view name, uint64_t* index) const override;
  Status FindMany(const std::string_view* names, size_t count,
                  uint64_t* indices) const override;
  // Entries: decoded from the mapped index, checked against data.ufs.
  Status GetRecord(uint64_t i, Record* record) const override;
  Status RecordOffsets(uint64_t first, uint64_t count, uint64_t* offsets,
                       uint32_t* parts) const override;
  Status CheckIndex() const override;  // check_index.cc
  void ReleaseRecords(uint64_t first, uint64_t count) const override;
  void ReleaseIndex() const override;
  void PrefetchRecords(const uint64_t* indices, size_t count) const override;
  void PrefetchBlocks(const Record* records, size_t count) const override;
  // Part 0 only; the range cut at the end of the data area.
  uint64_t WillNeed(uint32_t part, uint64_t offset, uint64_t n) const override;
  BlockReadStats block_stats() const override;
  Status ReadStored(const Record& r, char* dst) const override;
  Status ReadStoredMany(const Record* records, char* const* dsts, size_t count,
                        int threads) const override;
  Status ReadZstd(const Record& r, ZstdOutput* output) const override;
  Status ReadBatchMany(const std::vector<Record>& records, Batch* out,
                       int threads) const override;

 private:
  SinglePack() = default;
  // Open() with options.cache set (open.cc).
  static Status OpenCached(const std::string& path,
                           const ReaderOptions& options,
                           std::unique_ptr<SinglePack>* pack);
  // Decodes and validates the index header and the pairing with data.ufs.
  Status Init();
  Status Corrupt(uint64_t i, std::string_view name,
                 std::string_view what) const;
  // Checks `got` stored bytes of `r` read from data.ufs (their length and
  // checksum) and offers them to the cache.
  Status CheckStored(const Record& r, const char* dst, size_t got) const;
  // Probes the lookup table for `name` (hash `hash`) from its home slot:
  // *index is the record or Reader::kNoRecord.  Errors only for a damaged
  // index.
  Status Probe(std::string_view name, uint64_t hash, uint64_t* index) const;

  // With ReaderOptions::block_bytes, the extents of the blocks of
  // data.ufs (block_file.h), from the record table.
  Status BlockExtents(uint64_t block_bytes,
                      std::vector<BlockFile::Extent>* extents) const;

  std::unique_ptr<RandomAccessFile> data_;
  const BlockFile* blocks_ = nullptr;  // data_ itself, with block reads
  std::unique_ptr<PackCache> cache_;   // options_.cache's view of this pack
  std::string_view records_;           // record table bytes
  std::string_view lookup_;            // lookup slots
};

}  // namespace internal
}  // namespace ufspack

#endif  // UFSPACK_READER_SRC_SINGLE_PACK_H_
