// Copyright 2026 The ufspack Authors.
//
// MergePacks and AppendPack (below).
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
#include <optional>
#include <string>
#include <vector>

#include "ufspack/builder.h"
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

// Publishes `manifest` (bytes EncodeManifest made, ufspack/manifest.h) as
// out_dir/manifest.ufs exactly as MergePacks publishes its own: out_dir
// locked (InvalidArgument if another build holds it), temporary files of a
// crashed writer removed, a directory holding a single pack refused, a
// synced temporary file renamed over the previous manifest, the directory
// synced.  For writers that compute a merge themselves (ufspack.write).
UFSPACK_EXPORT Status PublishMergedManifest(const std::string& out_dir,
                                            const std::string& manifest);

// AppendPack: `ufspack append PACK DIR`.  Adds to the pack in directory
// `pack` (a single pack or a merged one) every file of the ImageFolder tree
// `dir` whose name the pack lacks, without rewriting anything the pack
// holds: the new files become a new part, PACK/append-XXXXXX, and
// PACK/manifest.ufs (written beside a single pack's files, or replacing a
// merged pack's manifest) lists the records in ImageFolder's order of
// `dir`: the pack then reads as a build of `dir` would (classes, order,
// labels), plus any of its records whose files are gone from `dir`, kept
// where they were.  Files are selected as the pack's were (its flat mode
// and extensions); a file whose name the pack already holds keeps its
// packed bytes, even if it changed (rebuild to pick up changes).
//
// Labels follow ImageFolder's sorted class order.  A new class that sorts
// before an existing one would change existing labels: refused with
// InvalidArgument naming the classes, unless options.relabel (the manifest
// then maps the old parts' labels; no record is rewritten).
//
// Crash-safe: the new part is complete before the manifest is renamed into
// place, so at every instant PACK opens as before or as after; readers that
// opened PACK before keep reading what they opened.  A crash leaves at most
// an unreferenced append-* directory, which the next append removes.  PACK
// is locked (as by a build) for the duration.  Nothing to append (every
// file already packed) writes nothing and reports appended == 0.
struct AppendOptions {
  // How the new files are read (threads, compression, skip_unreadable,
  // progress, cancel); the file selection (flat, extensions) is the pack's.
  // BuildOptions::layout is not used: the new part's data order is
  // `layout` when set, else the pack's own (metadata kMetaLayout; sorted
  // when absent, or when the parts differ).
  BuildOptions build;
  std::optional<DataLayout> layout;
  bool relabel = false;
  // When set, exactly these files are the candidates (`--files-from`) and
  // `dir` is not scanned.  Each is relative to `dir`, '/'-separated (a
  // leading "./" or "<dir>/" is dropped).  Errors: InvalidArgument for an
  // unsafe name (empty, "..", an empty component), or when the records of
  // a class that gets a file are not in ImageFolder's order.  Skipped: names
  // outside the pack's selection or inside its own directory (a warning
  // each), names already packed (AppendSummary::already_packed).  Records
  // whose files are gone are not looked for (AppendSummary::kept is 0).
  // Cost and placement: docs/design.md, "Appending a list of files".
  std::optional<std::vector<std::string>> files;
};

struct AppendSummary {
  std::string manifest_path;
  std::string part_dir;  // the new part, empty when nothing was appended
  PackId pack_id;
  uint64_t appended = 0;  // records added
  uint64_t records = 0;   // records in the pack after the append
  uint64_t new_classes = 0;
  uint64_t relabeled_classes = 0;  // existing classes whose label changed
  uint64_t kept = 0;  // records of the pack no longer under `dir`, kept
  uint64_t already_packed = 0;  // candidates the pack already held
  uint64_t parts = 0;
  uint64_t segments = 0;
  std::vector<std::string> warnings;
  double seconds = 0;
};

UFSPACK_EXPORT Status AppendPack(const std::string& pack,
                                 const std::string& dir,
                                 const AppendOptions& options,
                                 AppendSummary* summary);

}  // namespace ufspack

#endif  // UFSPACK_MERGE_H_
