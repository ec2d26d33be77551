// Copyright 2026 The ufspack Authors.
//
// MoveEntries: the samples of one ScanTreeByClass class appended to a list
// (build runs, append batches, ScanTree's whole list).  Internal to the
// packer (not installed).
//
// Thread safety: none needed (plain function on caller-owned vectors).
#ifndef UFSPACK_PACKER_SRC_SCAN_ENTRIES_H_
#define UFSPACK_PACKER_SRC_SCAN_ENTRIES_H_

#include <iterator>
#include <utility>
#include <vector>

#include "ufspack/scan.h"

namespace ufspack {
namespace internal {

// Moves *from onto the end of *to, leaving *from empty.  An empty *to takes
// *from's buffer whole (a flat tree's directory, a large class: no copy).
inline void MoveEntries(std::vector<ScanEntry>* from,
                        std::vector<ScanEntry>* to) {
  if (to->empty()) {
    *to = std::move(*from);
  } else {
    to->insert(to->end(), std::make_move_iterator(from->begin()),
               std::make_move_iterator(from->end()));
  }
  from->clear();
}

}  // namespace internal
}  // namespace ufspack

#endif  // UFSPACK_PACKER_SRC_SCAN_ENTRIES_H_
