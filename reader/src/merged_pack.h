// Copyright 2026 The ufspack Authors.
//
// MergedPack: one logical pack over the parts a manifest names
// (docs/format.md, "Merged packs").  Classes and metadata are the
// manifest's; what needs a part (entries, data, lookups) is sent to it
// through the segments that map global record indices to (part, local
// index).  Private to the reader.
//
// Thread safety: as PackSource.  A part is opened at most once
// (std::call_once), by the first thread that needs it; every other field
// is immutable after Open().
#ifndef UFSPACK_READER_SRC_MERGED_PACK_H_
#define UFSPACK_READER_SRC_MERGED_PACK_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "pack_source.h"
#include "single_pack.h"
#include "ufspack/manifest.h"
#include "ufspack/reader.h"
#include "ufspack/status.h"

namespace ufspack {
namespace internal {

struct PartSlot {
  std::string path;  // the part's directory, resolved
  std::once_flag once;
  std::unique_ptr<SinglePack> pack;  // set by the first successful use
  Status status;                     // of that first use
  std::atomic<bool> opened{false};   // pack is set (ReleaseIndex)
  // The part's segments, by local first record: (local first, global
  // first, count), for mapping its record indices to global ones.
  struct Run {
    uint64_t local = 0, global = 0, count = 0;
  };
  std::vector<Run> runs;
};

struct PartSet {
  Manifest manifest;      // views into the MergedPack's index_ (the manifest)
  ReaderOptions options;  // each part is opened with these
  bool remote = false;    // the parts are URLs
  std::unique_ptr<PartSlot[]> slots;  // manifest.parts.size() of them
};

class MergedPack final : public PackSource {
 public:
  // Reads the manifest at `manifest_path` and, for a local manifest, the
  // header of every part's index.ufs; fails naming the part when one is
  // missing or is not the pack that was merged.  Maps nothing of the
  // parts.  The parts of a manifest at a URL are not touched here: each is
  // checked (NotFound naming it when missing, Corruption when it is not
  // the part that was merged) when a read first needs it, so a reader
  // fetches nothing of the parts it does not read.
  static Status Open(const std::string& manifest_path,
                     const ReaderOptions& options,
                     std::unique_ptr<MergedPack>* pack);

  // When the parts are URLs.
  bool prefers_batches() const override { return parts_->remote; }
  // The part holding record i (opened on first use) reads its entry; the
  // record comes back with its global index and global label.
  Status GetRecord(uint64_t i, Record* record) const override;
  // Segment by segment, each part's own RecordOffsets (opening it).
  Status RecordOffsets(uint64_t first, uint64_t count, uint64_t* offsets,
                       uint32_t* parts) const override;
  // Asks, in manifest order, only the parts whose segments overlap the
  // range of the name's class (the name up to its first '/'; NotFound at
  // once when it has none and the pack has classes), or every part when
  // the pack has no classes or the class is not in the table; each is
  // opened on first use.  The first part that holds the name answers, with
  // the global index.
  Status Find(std::string_view name, uint64_t* index) const override;
  // Find for each name in turn (Reader::kNoRecord where no part holds it).
  Status FindMany(const std::string_view* names, size_t count,
                  uint64_t* indices) const override;
  // The manifest's class table (in order, covering every record) and
  // metadata; then every part, opened if need be: its index in full and its
  // class names against the manifest's through its label map; then every
  // record: its label's class holds it and its name finds it (no name in
  // two parts).
  Status CheckIndex() const override;
  // Passed to the parts holding these records that are open; opens none.
  void ReleaseRecords(uint64_t first, uint64_t count) const override;
  // Releases the index of every part opened so far; the manifest stays.
  void ReleaseIndex() const override;
  // Sent to the part holding r (opened on first use), as its local record.
  Status ReadStored(const Record& r, char* dst) const override;
  Status ReadZstd(const Record& r, ZstdOutput* output) const override;
  // Grouped by part, each group passed to its part (opened on first use):
  // ReadStoredMany reads part after part and returns the first error;
  // ReadBatchMany copies the parts' batches into one, in the order of
  // `records`; each part's data file has its own blocks.
  Status ReadStoredMany(const Record* records, char* const* dsts, size_t count,
                        int threads) const override;
  Status ReadBatchMany(const std::vector<Record>& records, Batch* out,
                       int threads) const override;
  void PrefetchBlocks(const Record* records, size_t count) const override;
  // To the part, if it is open (a read of one of its records opened it).
  uint64_t WillNeed(uint32_t part, uint64_t offset, uint64_t n) const override;
  BlockReadStats block_stats() const override;

 private:
  MergedPack() = default;
  // Part k, opened on first use.
  Status OpenPart(size_t k, const SinglePack** part) const;
  // The part holding global record `i` (opened on first use) and the
  // record's index within it.
  Status PartFor(uint64_t i, const SinglePack** part, uint64_t* local,
                 size_t* k = nullptr) const;
  // The global index of record `local` of part `k`.
  uint64_t GlobalIndex(size_t k, uint64_t local) const;

  std::unique_ptr<PartSet> parts_;
};

}  // namespace internal
}  // namespace ufspack

#endif  // UFSPACK_READER_SRC_MERGED_PACK_H_
