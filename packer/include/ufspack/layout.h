// Copyright 2026 The ufspack Authors.
//
// The order of the records in data.ufs (docs/format.md, "Data file").  The
// index is always in ImageFolder order; the data file is either in the same
// order (sorted) or in a seeded permutation of it (shuffled), so that any
// contiguous byte range of data.ufs (a block, ufspack.BlockSampler) holds
// records of many classes.  Reading never depends on the layout.
//
// Thread safety: plain values and pure functions.
#ifndef UFSPACK_LAYOUT_H_
#define UFSPACK_LAYOUT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ufspack/export.h"
#include "ufspack/status.h"

namespace ufspack {

struct DataLayout {
  // false: data.ufs in record-index order.  true: each run of records the
  // build packs together (whole classes, about 65,536 records, or the whole
  // tree if smaller; BuildOptions::scan_ahead / 4) is written in a seeded
  // random permutation, the run after the one before.
  bool shuffled = false;
  uint64_t seed = 0;
  // With shuffled: the permutation moves multi-file samples (the files of
  // one key, Reader::SplitSampleName), not files, so a sample's files stay
  // back to back and in order ("shuffled-samples:SEED").
  bool samples = false;
};

// Parses "sorted", "shuffled" (seed 0), "shuffled:SEED" (SEED a decimal
// u64), "shuffled-samples" or "shuffled-samples:SEED".  InvalidArgument
// naming the text otherwise.
UFSPACK_EXPORT Status ParseDataLayout(std::string_view text, DataLayout* out);
// "sorted", "shuffled:SEED" or "shuffled-samples:SEED": the value of
// metadata kMetaLayout, which ParseDataLayout() reads back.
UFSPACK_EXPORT std::string DataLayoutName(const DataLayout& layout);

// The data order of run number `run` (0-based, in build order) of `n`
// records: order[j] is the run-relative record index written j-th.  A
// Fisher-Yates shuffle driven by SplitMix64 seeded with a mix of `seed` and
// `run`, with unbiased bounded draws (docs/format.md gives the algorithm):
// the same on every platform, so the same tree and seed give the same pack.
UFSPACK_EXPORT std::vector<uint32_t> ShuffledRunOrder(uint32_t n, uint64_t seed,
                                                      uint64_t run);

// The data order of a run whose samples start at `starts` (starts[0] = 0,
// starts.back() = the run's records): the samples in the order
// ShuffledRunOrder(samples, seed, run) gives, each sample's records
// together and in order.
UFSPACK_EXPORT std::vector<uint32_t> ShuffledSampleOrder(
    const std::vector<uint32_t>& starts, uint64_t seed, uint64_t run);

}  // namespace ufspack

#endif  // UFSPACK_LAYOUT_H_
