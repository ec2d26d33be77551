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
// (WebDataset's shard lists, ExpandShards).
bool IsArchiveSource(const std::string& src);

// The files of a shard pattern, in order: each {FIRST..LAST} a range of
// zero-padded numbers (as wide as FIRST), each {a,b,c} a list; several
// groups multiply.  A path without braces is itself.  InvalidArgument for
// a range that is not one.
Status ExpandShards(const std::string& pattern, std::vector<std::string>* out);

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
