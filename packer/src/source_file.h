// Copyright 2026 The ufspack Authors.
//
// Reading the source files of a build: opening without blocking on what
// is not a regular file, reading exactly the size seen at open, and
// noticing a file that changes meanwhile.  Internal to the packer (not
// installed).
//
// Thread safety: the functions keep no state; safe on any thread.
#ifndef UFSPACK_PACKER_SRC_SOURCE_FILE_H_
#define UFSPACK_PACKER_SRC_SOURCE_FILE_H_

#include <sys/stat.h>

#include <cstdint>
#include <string>

#include "ufspack/status.h"

namespace ufspack {
namespace internal {

// Opens `path` read-only with O_NONBLOCK (a FIFO or device cannot block
// the build) and fstats it; sets *fd and *st.  A path that is not a
// regular file is InvalidArgument "<path>: is a FIFO, not a regular file"
// (and is not left open).
Status OpenSource(const std::string& path, int* fd, struct stat* st);

// Reads the whole file `fd` opened by OpenSource (whose fstat was
// `before`) into *bytes, and closes it.  IOError "<path>: file changed as
// we read it (...)" when it yields another number of bytes or
// ChangedSince() says so.
Status ReadSource(int fd, const std::string& path, const struct stat& before,
                  std::string* bytes);

// True when fstat(fd) fails or shows another size, mtime or ctime than
// `before`.  As GNU tar does, the ctime counts too: it also moves when the
// file is replaced by a rename or deleted while read (the link count
// drops), which leaves size and mtime as they were.
bool ChangedSince(int fd, const struct stat& before);

// The error for a source that changed while read: `size` bytes expected,
// `done` read (more than `size`: "more").
Status ChangedWhileRead(const std::string& path, uint64_t size, uint64_t done);

}  // namespace internal
}  // namespace ufspack

#endif  // UFSPACK_PACKER_SRC_SOURCE_FILE_H_
