// Copyright 2026 The ufspack Authors.
//
// What `ufspack merge` (packer/src/merge.cc) and `ufspack append`
// (packer/src/append.cc) share.  Internal to the packer (not installed).
//
// Thread safety: reentrant.
#ifndef UFSPACK_PACKER_SRC_MERGE_INTERNAL_H_
#define UFSPACK_PACKER_SRC_MERGE_INTERNAL_H_

#include <string>

#include "ufspack/status.h"

namespace ufspack {
namespace internal {

// The real path (realpath(3)) of directory `path`.
Status RealDir(const std::string& path, std::string* out);

// Writes `bytes` as out_dir/manifest.ufs: a temporary file in out_dir
// (whose open descriptor is `dir_fd`), synced, renamed over the manifest,
// the directory synced.
Status PublishManifest(int dir_fd, const std::string& out_dir,
                       const std::string& bytes);

}  // namespace internal
}  // namespace ufspack

#endif  // UFSPACK_PACKER_SRC_MERGE_INTERNAL_H_
