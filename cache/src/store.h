// Copyright 2026 The ufspack Authors.
//
// One cache directory (one tier) and the tables in it.  docs/cache.md
// specifies the layout; in short:
//
//   DIR/ufspack-cache          header: magic, version, limit, the charged
//                              byte count and the counters, mmap'd shared
//   DIR/ns/<hex>/key           a table's name (the hex is its XXH3-128)
//   DIR/ns/<hex>/slots         64-byte header + one 64-bit word per slot
//   DIR/ns/<hex>/log           entries: 32-byte header + bytes, 8-aligned
//   DIR/ns/<hex>/index.ufs     raw-record tables: the pack's index copy
//   DIR/sources/<hex>          which pack id a source index path had
//   DIR/locks/<hex>            serialises the creation of one table
//   DIR/tmp/                   tables being created or evicted
//
// Not part of the installed API.
#ifndef UFSPACK_CACHE_STORE_H_
#define UFSPACK_CACHE_STORE_H_

#include <fcntl.h>
#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "safe_dir.h"
#include "ufspack/cache.h"
#include "ufspack/status.h"

namespace ufspack {
namespace cache_internal {

using WarnFn = std::function<void(const std::string&)>;

// The shared counters of a directory's header, in header order.
enum Counter : int {
  kHits = 0,
  kMisses,
  kInserts,
  kRefused,
  kDropped,
  kErrors,
  kEvicted,
  kEntries,
  kCounterCount
};

inline constexpr char kHeaderFileName[] = "ufspack-cache";
// A raw table's copy of the pack's index, in the disk tier.
inline constexpr char kIndexCopyName[] = "index.ufs";
inline constexpr uint64_t kHeaderSize = 4096;
inline constexpr uint32_t kCacheVersion = 1;
inline constexpr uint64_t kSlotsHeaderSize = 64;
inline constexpr uint64_t kEntryHeaderSize = 32;
inline constexpr uint64_t kMaxEntryLength = kMaxCacheEntryBytes;
inline constexpr char kSlotsMagic[8] = {'U', 'F', 'S', 'P', 'S', 'L', 'O', 'T'};
inline constexpr uint32_t kEntryMagic = 0x45434655;  // "UFCE" little-endian
// Slots header fields (byte offsets in ns/<hex>/slots).
inline constexpr uint64_t kSlVersion = 8;   // u32
inline constexpr uint64_t kSlCount = 16;    // u64 slot count
inline constexpr uint64_t kSlTail = 24;     // u64 log bytes handed out
inline constexpr uint64_t kSlCharged = 32;  // u64 bytes this table charged
inline constexpr uint64_t kSlTableId = 40;  // u64 low 64 bits of name's hash
inline constexpr uint64_t kSlEntries = 48;  // u64 entries published

inline uint64_t RoundUp(uint64_t n, uint64_t to) {
  return (n + to - 1) / to * to;
}

// What the directory's own files and subdirectories are charged.
inline constexpr uint64_t kBlock = 4096;
inline constexpr uint64_t kBaseCharge = 8 * kBlock;

class Table;

// Names this process gives what it makes in tmp/ (Recount removes only
// these, and only when they are the cache's own).
inline constexpr const char* kTmpPrefixes[] = {"new-", "evict-", "damaged-",
                                               "src-"};

// Writes all of `iov` at `offset` of `fd` (pwritev, retrying EINTR and
// short writes).
Status WriteVec(int fd, std::vector<struct iovec> iov, uint64_t offset);

// Prints "ufspack: warning: <message>" on stderr.
void DefaultWarn(const std::string& message);

class Store {
 public:
  // Opens or creates the directory.  `limit` 0 keeps the directory's limit
  // (a new one gets half the free space).  `min_bytes` > 0: NotSupported
  // when the tier could hold less (the caller reports and skips it).
  static Status Open(const std::string& dir, uint64_t limit, uint64_t min_bytes,
                     const WarnFn& warn, std::unique_ptr<Store>* out);
  ~Store();

  const std::string& dir() const { return dir_; }
  uint64_t limit() const { return limit_; }

  // Charges `n` bytes against the limit; false (counted as refused) when
  // they do not fit even after evicting tables no process uses.
  bool Reserve(uint64_t n, const Table* keep);
  void Unreserve(uint64_t n);
  void Count(Counter c, int64_t delta = 1);
  // Hits and misses, counted per thread shard in this process and added
  // to the shared header in lumps (a shared cache line written by every
  // hit of every thread costs more than the hit).  Stats() and the
  // destructor flush; a killed process loses at most kLump - 1 per shard.
  void CountLookup(bool hit);
  void FlushLookups() const;

  // Opens table `name` with `slot_count` slots.  When absent and `create`,
  // creates it, first letting `populate(tmp_dir)` add files (the index
  // copy) and set the bytes they are charged; NotFound when absent and
  // !create; IOError when the tier has no room for it, or when what stands
  // at its name is not a table of the cache's (a link, another user's
  // directory: left in place, never used).
  using Populate =
      std::function<Status(const SafeDir& tmp_dir, uint64_t* charged)>;
  Status OpenTable(const std::string& name, uint64_t slot_count, bool create,
                   const Populate& populate, std::unique_ptr<Table>* out);

  // Remembers that the index at `source` (an absolute path) had pack id
  // `pack_hex`; LookupSource reads it back (NotFound if never seen).
  void RememberSource(const std::string& source, const std::string& pack_hex);
  Status LookupSource(const std::string& source, std::string* pack_hex) const;

  // Prints `message` once per process for `key`.
  void WarnOnce(const std::string& key, const std::string& message);
  // A write to the tier failed: counted, warned once, and caching into
  // this tier is off for this process.
  void WriteFailed(const std::string& what, const Status& s);
  bool writes_disabled() const {
    return writes_disabled_.load(std::memory_order_relaxed);
  }

  CacheTierStats Stats() const;
  static Status StatDir(const std::string& dir, CacheTierStats* stats);
  static Status ClearDir(const std::string& dir, uint64_t* kept);

 private:
  Store() = default;
  Status Init(uint64_t limit, uint64_t min_bytes);
  // With the exclusive lock: recomputes the charged bytes and entries from
  // the tables, removes tmp/ leftovers.
  void Recount();
  // Opens and checks the files of the table whose directory t->home_ is:
  // Corruption when damaged, Aborted when it was evicted meanwhile.
  Status OpenTableFiles(const std::string& name, uint64_t slot_count, Table* t);
  // Creates table `name` (its directory ns/<hex>) under its lock; OK also
  // when another process created it first.
  Status CreateTable(const std::string& name, const std::string& hex,
                     uint64_t slot_count, const Populate& populate);
  // Evicts unused tables, least recently attached first, until `need`
  // bytes are free or none is left.  Returns the bytes freed.
  uint64_t EvictUnused(uint64_t need, const Table* keep);
  std::atomic<uint64_t>* word(uint64_t offset) const;

  std::string dir_;
  // The directory and its four subdirectories, opened once without
  // following links (safe_dir.h); every name below is reached from these.
  SafeDir root_, ns_, tmp_, sources_, locks_;
  WarnFn warn_;
  int header_fd_ = -1;  // flock(LOCK_SH) while attached
  char* header_ = nullptr;
  uint64_t limit_ = 0;  // effective: min(configured, what the FS can hold)
  std::atomic<bool> writes_disabled_{false};
  std::atomic<int64_t> last_evict_ms_{0};
  static constexpr int kShards = 16;
  static constexpr uint64_t kLump = 64;
  struct alignas(64) Shard {
    std::atomic<uint64_t> hits{0};
    std::atomic<uint64_t> misses{0};
  };
  mutable Shard shards_[kShards];
  mutable std::mutex warn_mu_;
  std::set<std::string> warned_;
};

// One table: slot words in a shared mapping, entries in an append-only log.
class Table {
 public:
  ~Table();
  const std::string& dir() const { return home_.path(); }
  uint64_t slot_count() const { return slot_count_; }
  Store* store() const { return store_; }
  // Opens the table's file `name` (e.g. the index copy) read-only, as
  // SafeDir::OpenFile does.
  Status OpenFile(const std::string& name, int* fd) const {
    return home_.OpenFile(name, O_RDONLY, fd);
  }
  bool Contains(uint64_t slot) const;
  // Raw records: exactly `length` bytes whose XXH3-64 is `checksum`.
  bool Lookup(uint64_t slot, uint64_t length, uint64_t checksum, char* dst);
  // Samples: whatever bytes the slot holds (checksummed).
  bool Get(uint64_t slot, std::string* out);
  // kRefused: the tier is full; kTooLarge: over kMaxEntryLength, never
  // cached; kFailed: the tier's disk failed.
  enum class PutResult { kStored, kPresent, kRefused, kTooLarge, kFailed };
  PutResult Put(uint64_t slot, const char* data, uint64_t length,
                uint64_t checksum);
  // Several entries with one charge and one write (warm-up): a large
  // write also leaves the page cache in large folios, which later hits
  // read faster than the 4 KiB pages of one-entry writes.  Sets
  // (*results)[k] for items[k]; when the whole run does not fit, falls
  // back to Put() one by one.
  struct Item {
    uint64_t slot;
    const char* data;
    uint64_t length;
    uint64_t checksum;
  };
  void PutMany(const std::vector<Item>& items, std::vector<PutResult>* results);

 private:
  friend class Store;
  Table() = default;
  std::atomic<uint64_t>* slot_word(uint64_t slot) const;
  std::atomic<uint64_t>* header_word(uint64_t offset) const;
  // Reads and checks the entry `word` points at; false if damaged.
  bool ReadEntry(uint64_t slot, uint64_t word, char* dst, uint64_t length,
                 const uint64_t* expected_checksum);
  void Drop(uint64_t slot, uint64_t word);
  // A write of [offset, offset + size) of the log failed: gives its charge
  // back if the range can be deallocated.
  void Release(uint64_t offset, uint64_t size);
  void EncodeEntryHeader(char* hdr, uint64_t slot, uint64_t length,
                         uint64_t checksum) const;
  // Points `slot` at the entry written at `offset`; false if another
  // writer got there first.
  bool Publish(uint64_t slot, uint64_t offset, uint64_t length);

  Store* store_ = nullptr;
  std::string hex_;  // its name in ns/
  SafeDir home_;     // ns/<hex>, open
  uint64_t slot_count_ = 0;
  uint64_t table_id_ = 0;
  int key_fd_ = -1;  // flock(LOCK_SH): the table is in use
  int log_fd_ = -1;
  char* slots_ = nullptr;
  size_t slots_bytes_ = 0;
};

}  // namespace cache_internal
}  // namespace ufspack

#endif  // UFSPACK_CACHE_STORE_H_
