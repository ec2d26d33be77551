// Copyright 2026 The ufspack Authors.
//
// POSIX helpers every component shares: the write loops (EINTR, short
// writes), fsync, creating and removing directory trees, opening a path of
// any length, checking a relative path.  Internal to ufspack's targets (not
// installed).
//
// Every function returns an IOError carrying errno (Status::errno_value())
// and a message naming `path`: "<path>: write: <strerror>".  An empty
// `path` (an unnamed descriptor such as standard output) gives
// "write: <strerror>".
//
// Thread safety: the functions keep no state; concurrent calls on one
// descriptor interleave as write(2) does.
#ifndef UFSPACK_BASE_POSIX_IO_H_
#define UFSPACK_BASE_POSIX_IO_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

struct stat;

#include "ufspack/export.h"
#include "ufspack/status.h"

namespace ufspack {
namespace internal {

// Writes all `n` bytes at `p` at the descriptor's position, retrying on
// EINTR and continuing after short writes.
UFSPACK_EXPORT Status WriteAll(int fd, const char* p, size_t n,
                               const std::string& path);

// Writes all `n` bytes at `p` at file offset `offset` (pwrite(2): the
// descriptor's position does not move), likewise.
UFSPACK_EXPORT Status PwriteAll(int fd, const char* p, size_t n,
                                uint64_t offset, const std::string& path);

// fsync(2): "<path>: fsync: <strerror>" on failure.
UFSPACK_EXPORT Status SyncFile(int fd, const std::string& path);

// fsync(2) of a directory, making renames and new names in it durable.
// EINVAL (a file system that cannot sync directories) is not an error.
UFSPACK_EXPORT Status SyncDir(int dir_fd, const std::string& path);

// close(2); sets *fd to -1 whatever the outcome (the descriptor is gone
// even when close reports an error).  "<path>: close: <strerror>".
UFSPACK_EXPORT Status CloseFile(int* fd, const std::string& path);

// Removes `path` and everything below it (nftw, not following symlinks),
// best effort: what cannot be removed is left.
UFSPACK_EXPORT void RemoveTree(const std::string& path);

// Why `name` is not a plain relative path under a root ("" when it is):
// empty, absolute, a NUL byte, an empty, "." or ".." component, or a
// component longer than 255 bytes.  For names that come from outside (an
// index being extracted, a list of files to append) before they are joined
// to a directory.
UFSPACK_EXPORT std::string UnsafeRelativePath(std::string_view name);

// mkdir -p: creates `path` and its missing parents (mode 0777 less the
// umask).  InvalidArgument when a component exists and is not a directory;
// IOError "<path>: cannot create directory: <strerror>".
UFSPACK_EXPORT Status MakeDirs(const std::string& path);

// open(2) for a path of any length.  A path the kernel refuses as longer
// than PATH_MAX (ENAMETOOLONG) is opened one component at a time with
// openat(2), following symlinks as open(2) does; `flags` apply to the last
// component.  Returns the descriptor, or -1 with errno set.
UFSPACK_EXPORT int OpenAnyLength(const std::string& path, int flags);

// Opens `path` (any length) read-only without blocking (O_NONBLOCK: a FIFO
// or device cannot hang the caller; O_NOCTTY, O_CLOEXEC), retrying EINTR,
// fstats it into *st and keeps it only if it is a regular file.  Nothing is
// left open unless the result is kOpened; callers word the errors.
enum class OpenedRegular {
  kOpened,       // *fd is the descriptor, still O_NONBLOCK
  kOpenFailed,   // *err: open's errno
  kFstatFailed,  // *err: fstat's errno
  kNotRegular,   // st->st_mode says what it is (FileTypeName)
};
UFSPACK_EXPORT OpenedRegular OpenRegular(const std::string& path, int* fd,
                                         struct stat* st, int* err);

}  // namespace internal
}  // namespace ufspack

#endif  // UFSPACK_BASE_POSIX_IO_H_
