// Copyright 2026 The ufspack Authors.
//
// The interface through which a Reader uses a cache of record bytes
// (ReaderOptions::cache).  The reader owns nothing of the cache: the
// node-local cache component (ufspack/cache.h, target ufspack::cache)
// implements it, as RocksDB's SecondaryCache is an interface its table
// reader calls and the implementations live elsewhere.
//
//   Reader::Open(path, options)    with options.cache set:
//     cache->AttachPack(index, data)      -> a PackCache for this pack id
//     pack_cache->MapIndex()             (a local, verified index copy)
//   Reader::Read(i)
//     pack_cache->Lookup(i, ...)          hit: the bytes, checksummed
//     else pread data.ufs, verify, pack_cache->Insert(i, ...)
//
// Thread safety: implementations must allow every method to be called
// concurrently from any number of threads (a Reader's reads are).
#ifndef UFSPACK_RECORD_CACHE_H_
#define UFSPACK_RECORD_CACHE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "ufspack/export.h"
#include "ufspack/status.h"

namespace ufspack {

class Region;  // ufspack/file.h

// The cached records of one pack (one pack id).
class UFSPACK_EXPORT PackCache {
 public:
  virtual ~PackCache();

  // A local copy of the pack's index.ufs, already checked against the
  // source's pack id; the Reader maps it instead of the source's index.
  virtual const std::string& index_path() const = 0;

  // Maps that index.  The default maps index_path(); an implementation
  // that holds its copy open (the node-local cache, whose directory is
  // untrusted: a name there may be swapped for a link) maps what it holds.
  virtual Status MapIndex(std::unique_ptr<Region>* index) const;

  // OK when the source index could be read at attach time.  Otherwise the
  // error the source gave: the cache then serves the copy of the index it
  // holds for that path, and the Reader reads data.ufs only on a miss.
  virtual const Status& source_status() const = 0;

  // Copies record `i`'s `length` stored bytes into dst and returns true if
  // the cache holds them and they are intact (their XXH3-64 equals
  // `checksum`); a damaged entry is dropped and reported as a miss.
  virtual bool Lookup(uint64_t i, uint64_t length, uint64_t checksum,
                      char* dst) = 0;

  // Offers record `i`'s stored bytes, already verified against `checksum`.
  // The cache may refuse them (full, too large, a failing cache disk);
  // failures of the cache never fail the read.
  virtual void Insert(uint64_t i, const char* data, uint64_t length,
                      uint64_t checksum) = 0;
};

class UFSPACK_EXPORT RecordCache {
 public:
  virtual ~RecordCache();

  // Attaches the pack whose files are `index_path` and `data_path`.  Errors:
  // the source's own error when it cannot be read and the cache holds no
  // copy of its index; Corruption for a source index that is not one.
  virtual Status AttachPack(const std::string& index_path,
                            const std::string& data_path,
                            std::unique_ptr<PackCache>* pack) = 0;
};

}  // namespace ufspack

#endif  // UFSPACK_RECORD_CACHE_H_
