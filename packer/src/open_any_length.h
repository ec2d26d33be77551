// Copyright 2026 The ufspack Authors.
//
// Internal to the packer library (not installed).
#ifndef UFSPACK_PACKER_SRC_OPEN_ANY_LENGTH_H_
#define UFSPACK_PACKER_SRC_OPEN_ANY_LENGTH_H_

#include <string>

namespace ufspack {
namespace internal {

// open(2) for a path of any length.  A path the kernel refuses as longer
// than PATH_MAX (ENAMETOOLONG) is opened one component at a time with
// openat(2), following symlinks as open(2) does; `flags` apply to the last
// component.  Returns the descriptor, or -1 with errno set.  Thread-safe
// (uses no process state besides the working directory for relative paths).
int OpenAnyLength(const std::string& path, int flags);

}  // namespace internal
}  // namespace ufspack

#endif  // UFSPACK_PACKER_SRC_OPEN_ANY_LENGTH_H_
