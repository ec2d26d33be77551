// Copyright 2026 The ufspack Authors.
//
// The two ways the reader touches storage, as small interfaces so tests and
// fuzzers can substitute in-memory files and inject faults:
//
//   RandomAccessFile  positioned reads (pread) of the data file.
//   Region            a read-only view of a whole file (mmap of the index).
//
// The POSIX implementations open with O_CLOEXEC and never use the file
// offset (pread only), so they are safe to share between threads and remain
// usable in a child after fork().
#ifndef UFSPACK_FILE_H_
#define UFSPACK_FILE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "ufspack/export.h"
#include "ufspack/status.h"

namespace ufspack {

// Positioned reads from a file.
//
// Thread safety: Read() and Size() are safe to call concurrently from any
// number of threads.
class UFSPACK_EXPORT RandomAccessFile {
 public:
  virtual ~RandomAccessFile();

  // Reads up to `n` bytes at `offset` into `scratch` and sets *bytes_read.
  // Fewer than `n` bytes are returned only at end of file.  Retries EINTR
  // and short reads; in the common case this is exactly one pread(2).
  virtual Status Read(uint64_t offset, size_t n, char* scratch,
                      size_t* bytes_read) const = 0;

  // Current size of the file.
  virtual Status Size(uint64_t* size) const = 0;

  // The path (or a descriptive name) used in error messages.
  virtual const std::string& name() const = 0;
};

// What kind of file a stat(2) st_mode describes, as a noun: "FIFO",
// "directory", "character device", ...  For messages refusing a file that
// is not a regular one.
UFSPACK_EXPORT const char* FileTypeName(unsigned mode);

// Opens `path` read-only for positioned reads.
UFSPACK_EXPORT Status NewPosixRandomAccessFile(
    const std::string& path, std::unique_ptr<RandomAccessFile>* result);

// An in-memory file holding `contents`, named `name` in messages.
UFSPACK_EXPORT std::unique_ptr<RandomAccessFile> NewMemoryRandomAccessFile(
    std::string name, std::string contents);

// A read-only, contiguous view of a whole file.
//
// Thread safety: immutable; bytes() may be read from any thread.
// Lifetime: the view returned by bytes() is valid until the Region is
// destroyed.
class UFSPACK_EXPORT Region {
 public:
  virtual ~Region();
  virtual std::string_view bytes() const = 0;
  virtual const std::string& name() const = 0;
};

// Maps `path` read-only (MAP_SHARED, PROT_READ).  The file descriptor is
// closed before returning; the mapping stays valid.  An empty file yields
// an empty region.
UFSPACK_EXPORT Status MapFile(const std::string& path,
                              std::unique_ptr<Region>* result);

// A region owning `contents`.
UFSPACK_EXPORT std::unique_ptr<Region> NewMemoryRegion(std::string name,
                                                       std::string contents);

}  // namespace ufspack

#endif  // UFSPACK_FILE_H_
