// Copyright 2026 The ufspack Authors.
//
// The node-local cache: one directory on a machine that every process and
// every job there shares, with no daemon.  It holds, per pack id,
//   - raw records: the stored bytes of records read from slow storage (an
//     NFS/SSHFS pack), plus a verified local copy of the pack's index, so a
//     pack whose source is unreachable can still serve what was cached;
//   - samples: any bytes a caller keys by (name, slot), used by the Python
//     package for decoded images after the deterministic transforms.
// docs/cache.md is the design and the on-disk layout.
//
//   std::shared_ptr<ufspack::Cache> cache;
//   ufspack::CacheOptions o;
//   o.dir = "/local/nvme/ufspack-cache";
//   o.limit = 200ull << 30;
//   ufspack::Status s = ufspack::Cache::Open(o, &cache);
//   ufspack::ReaderOptions ro;
//   ro.cache = cache;                      // ufspack/reader.h
//   s = ufspack::Reader::Open("/nfs/train.pack", ro, &reader);
//
// Guarantees:
//   - A directory never holds more than its limit: space is charged to a
//     counter shared through the directory before anything is written, so
//     the limit holds with any number of concurrent writers.  A full cache
//     refuses new entries (it does not evict one sample for another, which
//     thrashes on shuffled epochs); only whole packs that no process has
//     attached are evicted, least recently attached first.  Nothing outside
//     the directory is ever touched.
//   - The cache is untrusted input: every entry carries a header and an
//     XXH3-64 checksum checked on every hit; a torn or damaged entry (a
//     process killed mid-write, a bad disk) is dropped and read from the
//     source.  Entries are published by one atomic store after their bytes
//     are written; two processes filling one entry waste space, nothing
//     else.
//   - Locks are flock(2)s, released by the kernel when a process dies.
//   - A failing cache disk (EIO, ENOSPC) never fails a read: a warning is
//     printed once and reads go to the source.
//
// Thread and process safety: a Cache and everything it returns may be used
// from any number of threads; any number of processes may open the same
// directory.  A Cache may be used in a child after fork().
#ifndef UFSPACK_CACHE_H_
#define UFSPACK_CACHE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ufspack/export.h"
#include "ufspack/record_cache.h"
#include "ufspack/status.h"

namespace ufspack {

namespace cache_internal {
class Store;
class Table;
}  // namespace cache_internal

// The largest entry (record or sample) a cache holds: 16 MiB - 1 bytes.
// Larger ones are never cached (they are read from the source each time).
inline constexpr uint64_t kMaxCacheEntryBytes = (1ull << 24) - 1;

struct CacheOptions {
  // The cache directory (the disk tier): created if missing.
  std::string dir;
  // Its limit in bytes.  0: keep the limit the directory has, or for a new
  // directory half of its file system's free space.  A limit larger than
  // the file system can hold is lowered to what it can (with a warning).
  uint64_t limit = 0;
  // Optional RAM tier (a tmpfs directory such as /dev/shm/ufspack) in front
  // of `dir`, with its own limit (0: as above).  New entries go to the
  // first tier with room.  A RAM tier that can hold less than
  // min_ram_tier_bytes (Docker's 64 MB /dev/shm) is reported once and
  // not used.
  std::string ram_dir;
  uint64_t ram_limit = 0;
  uint64_t min_ram_tier_bytes = 128ull << 20;
  // Where warnings go (once each per process).  Default: stderr,
  // "ufspack: warning: ...".
  std::function<void(const std::string&)> warn;
};

// One tier's figures.
struct CacheTierStats {
  std::string dir;
  uint64_t limit = 0;
  uint64_t charged_bytes = 0;  // space reserved for entries (<= limit)
  uint64_t disk_bytes = 0;     // allocated on disk (st_blocks), <= charged
  uint64_t entries = 0;
  uint64_t tables = 0;  // packs (and sample tables) held
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t inserts = 0;
  uint64_t refused = 0;  // admissions refused: the tier was full
  uint64_t dropped = 0;  // damaged entries found and dropped
  uint64_t errors = 0;   // failed cache reads or writes (EIO, ENOSPC)
  uint64_t evicted_tables = 0;
};

// A table of byte strings keyed by slot number (0 <= slot < slot_count()),
// e.g. the decoded samples of one pack under one transform plan.
//
// Thread safety: all methods may be called concurrently.
class UFSPACK_EXPORT SampleTable {
 public:
  ~SampleTable();
  uint64_t slot_count() const { return slot_count_; }
  // The bytes of `slot` (checksummed) into *out; false on a miss.
  bool Get(uint64_t slot, std::string* out);
  // Offers the bytes of `slot`; false if no tier took them.
  bool Put(uint64_t slot, const char* data, uint64_t length);

 private:
  friend class Cache;
  SampleTable() = default;
  uint64_t slot_count_ = 0;
  std::vector<std::unique_ptr<cache_internal::Table>> tables_;
};

class UFSPACK_EXPORT Cache final : public RecordCache {
 public:
  // Opens (creating if needed) the cache directories of `options`.
  // Errors: InvalidArgument for an empty dir; IOError when the directory
  // cannot be created or is not a ufspack cache; NotSupported for a newer
  // cache version.
  static Status Open(const CacheOptions& options,
                     std::shared_ptr<Cache>* cache);
  ~Cache() override;

  // RecordCache: the raw records of one pack (see ufspack/record_cache.h).
  Status AttachPack(const std::string& index_path, const std::string& data_path,
                    std::unique_ptr<PackCache>* pack) override;

  // A table of `slot_count` byte strings named `name` (any bytes; e.g.
  // "decoded/<pack id>/<plan>"); the same name always means the same
  // table, whichever process opens it.
  Status OpenSampleTable(const std::string& name, uint64_t slot_count,
                         std::unique_ptr<SampleTable>* table);

  // The tiers in use, RAM first.  Flushes this process's hit and miss
  // counts first (see FlushStats).
  std::vector<CacheTierStats> Stats() const;
  // Hits and misses are added to the directory's shared counters in lumps
  // (a counter written by every hit of every thread would cost more than
  // the hit); this adds what this process counted so far.  Called by
  // Stats() and the destructor; a process that ends without either (e.g.
  // _exit) leaves up to 16 x 63 lookups per tier uncounted.
  void FlushStats() const;
  const CacheOptions& options() const { return options_; }

  // Figures of the cache directory `dir` without attaching to it.
  static Status Stat(const std::string& dir, CacheTierStats* stats);
  // Removes every table of `dir` no running process has attached; sets
  // *kept to the number of tables in use, left in place.
  static Status Clear(const std::string& dir, uint64_t* kept);

 private:
  Cache() = default;
  CacheOptions options_;
  std::vector<std::unique_ptr<cache_internal::Store>> tiers_;  // RAM first
};

// Warm-up: reads a pack's data file in large sequential blocks and fills
// the cache's raw tier, skipping records already cached (so an interrupted
// warm-up resumes where it stopped).  Stops early, with OK, when the cache
// is full (result->refused > 0).  Errors: the source's (unreachable,
// damaged: Corruption); IOError when the cache has no room for the pack's
// table at all.
struct WarmupOptions {
  int threads = 4;                    // blocks read in parallel
  uint64_t block_bytes = 8ull << 20;  // bytes per read
  // Called from the calling thread about every 100 ms and at the end;
  // returning false stops the warm-up (Ctrl-C).
  std::function<bool(uint64_t bytes_done, uint64_t bytes_total)> progress;
};

struct WarmupResult {
  uint64_t records = 0;         // in the pack
  uint64_t already_cached = 0;  // found in the cache at the start
  uint64_t added = 0;           // cached by this warm-up
  // Not cached because the cache was full: refused, or never offered once
  // it was (the warm-up stops when every tier refuses).
  uint64_t refused = 0;
  uint64_t too_large = 0;    // over kMaxCacheEntryBytes: skipped
  uint64_t bytes_read = 0;   // from the source
  uint64_t bytes_total = 0;  // stored bytes of the records to read
  double seconds = 0;
  bool stopped = false;  // progress() returned false
};

UFSPACK_EXPORT Status Warmup(const std::string& pack_path,
                             const std::shared_ptr<Cache>& cache,
                             const WarmupOptions& options,
                             WarmupResult* result);

}  // namespace ufspack

#endif  // UFSPACK_CACHE_H_
