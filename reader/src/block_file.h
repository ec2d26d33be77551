// Copyright 2026 The ufspack Authors.
//
// BlockFile: block reads of a data file (ReaderOptions::block_bytes).  The
// records whose stored bytes start in the aligned range
// [k * block_bytes, (k + 1) * block_bytes) of data.ufs form block k; its
// extent is [first record start, last record end), so the blocks of a
// pack written back to back tile its data with no byte twice.  A read that
// falls inside a block's extent is served from the block, which is fetched
// whole with one request (one pread, one ranged GET) on first use and kept
// in memory; any other read (an op larger than a block, a range outside
// every extent) goes to the file underneath, unchanged.
//
// A decorator over the data file's RandomAccessFile, so everything above it
// (checksums, the record cache, zstd) is as for any read.  Private to the
// reader.
//
// Memory: the blocks kept (once their bytes exceed `cache_bytes`, those
// whose every record has been read are dropped first, then the least
// recently used; one block always fits), the blocks in flight,
// and 16 bytes per block_bytes of data for the extents, which the first
// read computes with `extents` (one pass over the index).
//
// Thread safety: every method may be called concurrently.  A block is
// fetched once however many readers want it: the others wait for it.  A
// failed fetch is never kept: the readers waiting for it get its error and
// the next read fetches again.  Prefetch() runs fetches on background
// threads, started on first use and joined by the destructor (not in a
// child of fork(), which has no such threads).
#ifndef UFSPACK_READER_SRC_BLOCK_FILE_H_
#define UFSPACK_READER_SRC_BLOCK_FILE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ufspack/file.h"
#include "ufspack/reader.h"
#include "ufspack/status.h"

namespace ufspack {
namespace internal {

class BlockFile final : public RandomAccessFile {
 public:
  struct Extent {
    uint64_t begin = UINT64_MAX;  // UINT64_MAX: no record starts here
    uint64_t end = 0;
    uint64_t records = 0;  // whose stored bytes start here
  };
  // Fills (*extents)[k] for every block k < extents->size() (sized by the
  // caller to cover the data file) from the index.
  using ExtentsFn =
      std::function<Status(uint64_t block_bytes, std::vector<Extent>* extents)>;

  struct Options {
    uint64_t block_bytes = 0;          // > 0
    uint64_t cache_bytes = 256 << 20;  // blocks kept, least recent dropped
    int prefetch_threads = 4;          // >= 1
  };

  BlockFile(std::unique_ptr<RandomAccessFile> inner, uint64_t data_size,
            const Options& options, ExtentsFn extents);
  ~BlockFile() override;
  BlockFile(const BlockFile&) = delete;
  BlockFile& operator=(const BlockFile&) = delete;

  Status Read(uint64_t offset, size_t n, char* scratch,
              size_t* bytes_read) const override;
  // The blocks the ops need are fetched with one ReadMany of the file
  // underneath (every request in flight at once on a remote one), then
  // the ops are served from them.
  Status ReadMany(ReadOp* ops, size_t count, size_t* failed) const override;
  Status Size(uint64_t* size) const override { return inner_->Size(size); }
  const std::string& name() const override { return inner_->name(); }
  bool prefers_batches() const override { return inner_->prefers_batches(); }
  void WillNeed(uint64_t offset, uint64_t n) const override {
    inner_->WillNeed(offset, n);
  }

  // Starts fetching, in the background, the blocks holding these data
  // offsets that are neither kept nor in flight.  Never blocks on a fetch;
  // errors are dropped (a later read fetches again and reports them).
  void Prefetch(const uint64_t* offsets, size_t count) const;

  BlockReadStats stats() const;

 private:
  class State;
  std::unique_ptr<RandomAccessFile> inner_;
  std::unique_ptr<State> state_;
};

}  // namespace internal
}  // namespace ufspack

#endif  // UFSPACK_READER_SRC_BLOCK_FILE_H_
