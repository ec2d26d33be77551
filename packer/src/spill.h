// Copyright 2026 The ufspack Authors.
//
// What lets PackWriter build an index of any size in bounded memory
// (docs/scale.md): scratch files that the record table, the name pool and
// the name hashes are spilled to as records are added, and the name lookup
// table built from them in stripes.  Internal to the packer (not
// installed).
//
// Thread safety: none; one PackWriter's thread uses them.
#ifndef UFSPACK_PACKER_SRC_SPILL_H_
#define UFSPACK_PACKER_SRC_SPILL_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "ufspack/status.h"

namespace ufspack {
namespace internal {

// A scratch file in the output directory, named `prefix` + 8 random
// characters (so that RecoverPackDir removes it after a crash), appended to
// through a buffer and read back with pread.  Removed on destruction.
class SpillFile {
 public:
  SpillFile() = default;
  ~SpillFile() { Remove(); }
  SpillFile(const SpillFile&) = delete;
  SpillFile& operator=(const SpillFile&) = delete;

  Status Create(const std::string& dir, const char* prefix);
  Status Append(const void* p, size_t n);
  // Writes out the buffer.  Reads and copies need it done.
  Status Flush();
  // Writes `n` bytes at `offset` (positioned with lseek: a scratch file is
  // this thread's alone, and pwrite(2) is kept for the publishing steps,
  // which the crash test traces by system call).  REQUIRES: flushed.
  Status WriteAt(uint64_t offset, const void* p, size_t n);
  // Reads exactly `n` bytes at `offset`.  REQUIRES: flushed.
  Status ReadAt(uint64_t offset, size_t n, void* dst) const;
  // Calls sink() with the file's bytes [0, size()) in order, in pieces of
  // at most 4 MiB.  REQUIRES: flushed.
  Status ForEachPiece(
      const std::function<Status(const char*, size_t)>& sink) const;
  // Appends the whole file to `fd` (at its position) with
  // copy_file_range(2), falling back to read and write.  REQUIRES: flushed.
  Status CopyTo(int fd, const std::string& fd_path) const;
  // Closes and deletes the file.
  void Remove();
  // Closes the file without deleting it: it is another process's (this is
  // a fork() child's copy of its writer).
  void Forget();

  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
  std::string buffer_;
  uint64_t size_ = 0;     // bytes appended
  uint64_t written_ = 0;  // bytes of them in the file
};

// Builds the name lookup table of docs/format.md ("The name lookup table")
// for `n` records, exactly as inserting them in record-index order would,
// into `table` (LookupSlotsFor(n) little-endian u32 slots, written with
// WriteAt): `hashes` holds each record's NameHash, 8 bytes little-endian,
// in index order; `check_distinct(a, b)` returns InvalidArgument when
// records a and b have the same name (it is asked only when their hash
// tags agree), else OK.
//
// Memory: two arrays of `stripe_slots` u32 (a power of two), whatever n
// is.  The table is built stripe by stripe, each from a pass over
// `hashes`; an insertion that probes past a stripe's end continues at the
// next stripe's start at its turn in index order (and past the last, at
// the first, until the carried keys stop changing), which is what linear
// probing in index order does.
Status BuildLookupTable(
    uint64_t n, const SpillFile& hashes,
    const std::function<Status(uint64_t, uint64_t)>& check_distinct,
    uint64_t stripe_slots, SpillFile* table);

}  // namespace internal
}  // namespace ufspack

#endif  // UFSPACK_PACKER_SRC_SPILL_H_
