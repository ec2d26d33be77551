// Copyright 2026 The ufspack Authors.
//
// SinglePack::CheckIndex: the full pass `ufspack verify` runs over an index
// (every record entry, name, class range and lookup slot), in bounded
// memory.
#include <xxhash.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "single_pack.h"
#include "ufspack/coding.h"
#include "ufspack/file.h"
#include "ufspack/format.h"
#include "ufspack/reader.h"
#include "ufspack/text.h"

namespace ufspack {
namespace internal {
namespace {

// One-pass scans release the index pages behind them every this many
// records (about 5 MiB of entries and names).
constexpr uint64_t kReleaseEvery = 1 << 16;
// CheckIndex() checks the lookup table this many bytes of slots at a time.
constexpr uint64_t kLookupStripeBytes = uint64_t{256} << 20;

}  // namespace

Status SinglePack::CheckIndex() const {
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
      uint64_t found = Reader::kNoRecord;
      Status s = Probe(r.name, h, &found);
      if (!s.ok() || found != i) {
        return Corrupt(
            i, r.name,
            !s.ok()
                ? "lookup cannot find this name: " + std::string(s.message())
            : found == Reader::kNoRecord
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

}  // namespace internal
}  // namespace ufspack
