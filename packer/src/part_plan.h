// Copyright 2026 The ufspack Authors.
//
// Part builds (BuildOptions::parts > 1, `ufspack build --part I/N`): two
// passes over the tree, neither holding its sample list:
//   1. PlanPart: every class is listed and its files stat'ed (in class
//      order, a window of classes at a time); the samples feed the split's
//      hash, and only each class's count, weight and a hash of its samples
//      are kept;
//   2. CutClass, per class the part's range touches, listed again: its
//      samples checked against pass 1 (the hash), the boundary classes cut
//      where the split's targets fall; RecordPart writes the part's
//      metadata.
// Internal to the packer.
//
// Thread safety: reentrant; a PartPlan is one build's.
#ifndef UFSPACK_PACKER_SRC_PART_PLAN_H_
#define UFSPACK_PACKER_SRC_PART_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "progress_reporter.h"
#include "ufspack/builder.h"
#include "ufspack/export.h"
#include "ufspack/scan.h"
#include "ufspack/status.h"

namespace ufspack {

// The split of BuildOptions::parts: boundaries b[0] = 0 <= b[1] <= ... <=
// b[parts] = weights.size(), part i being samples [b[i], b[i+1]); b[i] is
// the first sample whose preceding weights sum to at least i/parts of the
// total.  A sample's weight is its size in bytes + 1.
UFSPACK_EXPORT std::vector<uint64_t> SplitSamples(
    const std::vector<uint64_t>& sizes, uint32_t parts);

namespace internal {

// A class's samples as pass 1 saw them (flat: a directory's, as
// ScanTreeByClass hands them over).
struct ClassWeight {
  uint64_t count = 0;
  uint64_t weight = 0;  // sum of size + 1
  uint64_t hash = 0;    // XXH3-64 of each sample's name, label and size
};

// One cut of the split, SplitSamples's b[i]: the first sample whose
// preceding weights reach `target`.  Pass 1 finds the class holding it,
// `cls` (whose first sample is `start`, the samples before it weighing
// `before`); pass 2 re-lists that class and finds `index` (CutClass).
struct Cut {
  bool fixed = false;    // b[0] = 0 or b[N] = total: no class to re-list
  bool located = false;  // found by pass 2
  uint64_t index = 0;    // b[i] when fixed (or once located)
  uint64_t target = 0;   // ceil(W * i / N)
  uint32_t cls = 0;      // the class holding the cut
  uint64_t start = 0;    // index of that class's first sample
  uint64_t before = 0;   // weight of the samples before that class
};

struct PartPlan {
  uint64_t split = 0;  // kMetaPartSplit
  uint64_t samples = 0;
  std::vector<ClassWeight> classes;  // flat: one per directory with samples
  std::vector<std::string> class_names;
  Cut lo, hi;  // b[part], b[part + 1]
};

// Errors of a tree that changed between the passes.
inline constexpr char kChangedDuringPart[] = "changed while the part was built";
inline constexpr char kSameTree[] =
    "every part of a split must see the same tree";

// Pass 1: lists and sizes the whole tree at `src`, computes the split's
// hash and where this part's cuts fall.  `drop_pack_files`: leave the
// pack's own files out (the output directory is the source root).
Status PlanPart(const std::string& src, const BuildOptions& options,
                bool drop_pack_files, ProgressReporter* reporter,
                PartPlan* plan, BuildSummary* summary);

// Pass 2, for class `c` listed again (under `root`): checks it against
// pass 1 and cuts *cls to the part's range.
Status CutClass(const std::string& root, uint32_t c,
                const BuildOptions& options, PartPlan* plan, ScanClass* cls);

// Sets the part's metadata (kMetaPart, kMetaPartSplit, kMetaPartRange) and
// its range in *summary.
Status RecordPart(const BuildOptions& options, const PartPlan& plan,
                  PackWriter* writer, BuildSummary* summary);

}  // namespace internal
}  // namespace ufspack

#endif  // UFSPACK_PACKER_SRC_PART_PLAN_H_
