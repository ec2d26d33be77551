// Copyright 2026 The ufspack Authors.
//
// BuildPack of an archive (a tar, compressed or not, a zip, ...): the
// archive is read once, in order, with no scratch copy, and its members
// become the samples of the tree that extracting it would give, with each
// top-level member that is itself an archive (ImageNet's n01440764.tar)
// extracted into a directory named after it without its suffix
// (docs/cli.md, "Building from an archive").  Records go to data.ufs in
// archive order (metadata kMetaLayout "source"); the index is in
// ImageFolder order, so the pack reads exactly as a build of that tree.
// Archives whose first member is a file at the top level are WebDataset
// shards: a pack without classes of every sample with all its fields
// (000123.jpg, 000123.cls, ...), labelled with --label-field; should a
// class directory follow after all, the archives are read again as a tree.
// An archive with no member is refused, as an empty tree is.
//
// The archive is untrusted: a member named with '..' or an absolute path,
// a size beyond what its archive can hold compressed (kMaxExpansion), a
// member that appears twice, a damaged or truncated archive each fail the
// build naming archive and member, and nothing is published; links,
// device files and encrypted members are skipped with a warning
// (encrypted: an error unless skip_unreadable), as are nested archives
// deeper than one level (packed as plain files when they match).
//
// Internal to the packer.  Thread safety: reentrant.
#ifndef UFSPACK_PACKER_SRC_ARCHIVE_BUILD_H_
#define UFSPACK_PACKER_SRC_ARCHIVE_BUILD_H_

#include <string>
#include <string_view>
#include <vector>

#include "ufspack/builder.h"
#include "ufspack/status.h"

namespace ufspack {
namespace internal {

// Whether BuildPack takes `src` as archives: a regular file (or a symlink
// to one), or a path that does not exist and holds a brace pattern
// (WebDataset's shard lists, ExpandShards in shard_pattern.h).
bool IsArchiveSource(const std::string& src);

// No member may declare more than this many bytes per byte of the archive
// file (deflate's limit is about 1032; more is a zip bomb).
inline constexpr uint64_t kMaxExpansion = 1100;

// BuildPackFromArchives: the archives of `sources` (each a file or a
// shard pattern, ExpandShards), read one after another into one pack.
Status BuildFromArchives(const std::vector<std::string>& sources,
                         const std::string& out_dir,
                         const BuildOptions& options, BuildSummary* summary);

}  // namespace internal
}  // namespace ufspack

#endif  // UFSPACK_PACKER_SRC_ARCHIVE_BUILD_H_
