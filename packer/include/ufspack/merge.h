// Copyright 2026 The ufspack Authors.
//
// MergePacks: `ufspack merge PART... -o OUT`.  Publishes one logical pack
// over several packs (its parts) without copying their records: OUT gets a
// manifest.ufs (docs/format.md, "Merged packs") naming each part by its
// path relative to OUT and by its pack id.  Every reader opens OUT like a
// single pack (ufspack/reader.h).
//
// The parts are either all the parts of one `ufspack build --part I/N`
// split (in any order on the command line: they are put in part order, and
// a missing, repeated or foreign part is an error), or packs built
// separately, merged in the order given.  Either way they must agree on
// the classes (same names in the same order, or all flat), and each class's
// records must be contiguous across them (labels do not decrease from one
// part to the next), as ImageFolder's order requires.  Names must be unique
// across parts: `ufspack verify` checks it (O(records)); merge does not.
//
// The manifest's metadata holds each key that every part has with the same
// value, except the split's own keys (kMetaPart...).
//
// Publishing: the manifest is written to a temporary file in OUT, synced
// and renamed over manifest.ufs, so OUT holds the previous manifest or the
// new one at every instant.  OUT is locked as a build locks its directory;
// a directory that holds a single pack (index.ufs) is refused.  The parts
// must be local directories; OUT may be a part's parent or sibling, never a
// part itself.
//
// Thread safety: reentrant.
#ifndef UFSPACK_MERGE_H_
#define UFSPACK_MERGE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "ufspack/export.h"
#include "ufspack/status.h"
#include "ufspack/types.h"

namespace ufspack {

struct MergeSummary {
  std::string manifest_path;
  PackId pack_id;
  uint64_t parts = 0;
  uint64_t records = 0;
  uint64_t classes = 0;
  uint64_t data_bytes = 0;      // the parts' data files together
  uint64_t manifest_bytes = 0;  // the manifest written
  bool split = false;           // the parts of one --part split
  double seconds = 0;
};

UFSPACK_EXPORT Status MergePacks(const std::vector<std::string>& parts,
                                 const std::string& out_dir,
                                 MergeSummary* summary);

}  // namespace ufspack

#endif  // UFSPACK_MERGE_H_
