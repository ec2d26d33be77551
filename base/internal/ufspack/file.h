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

  // One read of a batch given to ReadMany().
  struct ReadOp {
    uint64_t offset = 0;
    size_t n = 0;
    char* dst = nullptr;  // room for n bytes
    size_t got = 0;       // set by ReadMany: n, or fewer at end of file
  };

  // Performs every read of ops[0, count), in any order and possibly
  // concurrently, and returns the first error (ops then hold unspecified
  // bytes), setting *failed to the index of the op it concerns (count when
  // it concerns none in particular).  The default performs them one by one
  // with Read(); a remote object issues them as concurrent requests,
  // merging close ranges.
  virtual Status ReadMany(ReadOp* ops, size_t count, size_t* failed) const;

  // True when ReadMany() of a batch is much faster than its reads one by
  // one on a few threads (a remote object: each read is a round trip).
  virtual bool prefers_batches() const { return false; }

  // A hint that bytes [offset, offset + n) are about to be read: a local
  // file asks the kernel to start reading them into the page cache
  // (posix_fadvise WILLNEED) and returns without waiting for them; the
  // default does nothing.  Changes no result; errors are ignored.
  virtual void WillNeed(uint64_t offset, uint64_t n) const {}
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
// The same over `bytes`, which it does not own: they must outlive it.
UFSPACK_EXPORT std::unique_ptr<RandomAccessFile> NewViewRandomAccessFile(
    std::string name, std::string_view bytes);

// Files named by URL ("s3://bucket/key", "https://host/path"), opened by
// the storage registered for the URL's scheme.  The reader itself only
// knows local files; the remote component (ufspack/remote.h) registers
// "s3", "http" and "https".
class UFSPACK_EXPORT UrlStorage {
 public:
  virtual ~UrlStorage();
  // Opens `url` for positioned reads.  Errors name the URL (with any query
  // string, which may hold a signature, left out).
  virtual Status OpenFile(const std::string& url,
                          std::unique_ptr<RandomAccessFile>* file) = 0;
};

// Makes `storage` open URLs of `scheme` ("s3") in this process.  Replaces
// an earlier registration.  Thread-safe.
UFSPACK_EXPORT void RegisterUrlStorage(const std::string& scheme,
                                       std::shared_ptr<UrlStorage> storage);

// True when `path` is a URL ("<scheme>://..."), whether or not a storage is
// registered for its scheme.
UFSPACK_EXPORT bool IsUrl(const std::string& path);

// The directory part of `path`: "." when it has no '/', "/" for a file in
// the root ("/x"), else everything before the last '/'.
UFSPACK_EXPORT std::string DirName(const std::string& path);

// Opens a local path (NewPosixRandomAccessFile) or a URL (its registered
// storage; NotSupported naming the scheme when none is).
UFSPACK_EXPORT Status OpenRandomAccessFile(
    const std::string& path, std::unique_ptr<RandomAccessFile>* result);

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
  // Hints that bytes [p, p + n) of bytes() will not be needed again soon.
  // A file mapping drops every page that range touches from this process's
  // page tables (madvise MADV_DONTNEED: the page cache keeps them
  // and a later read maps them back), so a one-pass scan over a large
  // index does not leave it all resident.  The bytes stay readable.
  virtual void Release(const char* p, size_t n) const;
};

// Maps `path` read-only (MAP_SHARED, PROT_READ).  The file descriptor is
// closed before returning; the mapping stays valid.  An empty file yields
// an empty region.
UFSPACK_EXPORT Status MapFile(const std::string& path,
                              std::unique_ptr<Region>* result);

// Maps the whole regular file open at `fd` read-only, as MapFile does;
// `name` names it in errors.  `fd` stays open and the caller's.
UFSPACK_EXPORT Status MapFd(int fd, const std::string& name,
                            std::unique_ptr<Region>* result);

// Maps a local file (MapFile) or reads a whole URL into memory.
UFSPACK_EXPORT Status LoadFile(const std::string& path,
                               std::unique_ptr<Region>* result);

// A region owning `contents`.
UFSPACK_EXPORT std::unique_ptr<Region> NewMemoryRegion(std::string name,
                                                       std::string contents);

}  // namespace ufspack

#endif  // UFSPACK_FILE_H_
