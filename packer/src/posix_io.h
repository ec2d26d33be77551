// Copyright 2026 The ufspack Authors.
//
// Writing to file descriptors: the loops every writer in ufspack needs
// (EINTR, short writes) and fsync, in one place; removing a tree; checking
// a relative path.  Internal to the packer
// and the command line tool (not installed).
//
// Every function returns an IOError carrying errno (Status::errno_value())
// and a message naming `path`: "<path>: write: <strerror>".  An empty
// `path` (an unnamed descriptor such as standard output) gives
// "write: <strerror>".
//
// Thread safety: the functions keep no state; concurrent calls on one
// descriptor interleave as write(2) does.
#ifndef UFSPACK_PACKER_SRC_POSIX_IO_H_
#define UFSPACK_PACKER_SRC_POSIX_IO_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "ufspack/status.h"

namespace ufspack {
namespace internal {

// Writes all `n` bytes at `p` at the descriptor's position, retrying on
// EINTR and continuing after short writes.
Status WriteAll(int fd, const char* p, size_t n, const std::string& path);

// Writes all `n` bytes at `p` at file offset `offset` (pwrite(2): the
// descriptor's position does not move), likewise.
Status PwriteAll(int fd, const char* p, size_t n, uint64_t offset,
                 const std::string& path);

// fsync(2): "<path>: fsync: <strerror>" on failure.
Status SyncFile(int fd, const std::string& path);

// fsync(2) of a directory, making renames and new names in it durable.
// EINVAL (a file system that cannot sync directories) is not an error.
Status SyncDir(int dir_fd, const std::string& path);

// close(2); sets *fd to -1 whatever the outcome (the descriptor is gone
// even when close reports an error).  "<path>: close: <strerror>".
Status CloseFile(int* fd, const std::string& path);

// Removes `path` and everything below it (nftw, not following symlinks),
// best effort: what cannot be removed is left.
void RemoveTree(const std::string& path);

// Why `name` is not a plain relative path under a root ("" when it is):
// empty, absolute, a NUL byte, an empty, "." or ".." component, or a
// component longer than 255 bytes.  For names that come from outside (an
// index being extracted, a list of files to append) before they are joined
// to a directory.
std::string UnsafeRelativePath(std::string_view name);

}  // namespace internal
}  // namespace ufspack

#endif  // UFSPACK_PACKER_SRC_POSIX_IO_H_
