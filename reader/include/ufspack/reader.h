// Copyright 2026 The ufspack Authors.
//
// Reader: random access to the records of a pack.  See docs/format.md for
// the file layout.
//
//   std::unique_ptr<ufspack::Reader> reader;
//   ufspack::Status s = ufspack::Reader::Open("train.pack", {}, &reader);
//   if (!s.ok()) { std::cerr << s.ToString() << "\n"; return 1; }
//   std::string bytes;
//   s = reader->Read(42, &bytes);          // one pread(2)
//
// Open() maps index.ufs and validates the headers, the section layout and
// the pairing with data.ufs in time independent of the record count: no
// per-record parsing, no directory scan.  Each record entry is decoded and
// bounds-checked when it is used, so a damaged index yields a Status, never
// a crash or out-of-bounds read.
//
// Read() serves a record with exactly one pread(2) on data.ufs (plus zstd
// decompression for compressed records) and verifies the record's XXH3-64
// checksum unless ReaderOptions::verify_checksums is false.
//
// A read that fails is Corruption (bytes or sizes that disagree with the
// index), IOError (the storage failed: an errno, an HTTP error, a remote
// object gone) or Aborted; OutOfRange only for an index past the end, the
// caller's, never for what the storage underneath answered (an HTTP 416).
//
// Thread safety: a Reader is immutable after Open(); every const method may
// be called concurrently from any number of threads.
//
// Fork safety: data.ufs is opened O_CLOEXEC and read with pread only (no
// shared file offset); the index mapping is read-only.  A child process may
// keep using a Reader created before fork().
//
// Lifetimes: string_views returned by the Reader (names, class names) point
// into the index mapping and are valid until the Reader is destroyed.
//
// What may be done to the files of an open pack.  The Reader keeps index.ufs
// mapped (MAP_SHARED) and data.ufs open until it is destroyed:
//   - Replace by rename (what `ufspack build` does; mv, rsync without
//     --inplace): safe.  An open Reader keeps serving the pair it opened; a
//     new Open() sees the new pair.
//   - Delete (rm, even of the whole directory): safe on POSIX file systems;
//     the open Reader keeps reading the unlinked files, whose space is freed
//     when it is destroyed.
//   - Truncate or overwrite in place (truncate(2), `cp new/index.ufs pack/`,
//     a shell `>` redirection, rsync --inplace): undefined.  A read that
//     touches a page of index.ufs past its new end kills the process with
//     SIGBUS, and rewritten index bytes are seen as they change.  On
//     data.ufs the same gives a Corruption status (short read, checksum
//     mismatch), or changed bytes when verify_checksums is false.  Write the
//     new pack elsewhere and rename it into place instead.
//   - Network file systems: another client's in-place changes are not
//     reliably seen; the rules above assume the files are only ever
//     replaced by rename.
// Open() accepts only regular files and never blocks: a FIFO, device or
// directory in place of either file is refused as "<path>: not a regular
// file (FIFO)" (and one at .data.ufs.prev is not used as a fallback).
#ifndef UFSPACK_READER_H_
#define UFSPACK_READER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ufspack/export.h"
#include "ufspack/record_cache.h"
#include "ufspack/status.h"
#include "ufspack/types.h"

namespace ufspack {

struct ReaderOptions {
  // Verify each record's XXH3-64 checksum on Read().  A mismatch is
  // reported as Corruption; wrong bytes are never returned.
  bool verify_checksums = true;
  // Hash the whole index body at Open() (O(index size)).  Off by default so
  // Open() stays constant-time; `ufspack verify` always checks it.
  bool verify_index_checksum = false;
  // A cache of record bytes (the node-local cache: ufspack/cache.h).  When
  // set, Open() maps the cache's verified copy of index.ufs, Read() serves
  // cached records from it and offers every record read from data.ufs to
  // it.  Cached bytes are always checksummed, whatever verify_checksums
  // says.  If the source cannot be opened but the cache holds a copy of its
  // index, Open() succeeds and only uncached records fail, with an IOError
  // naming the source.  Shared: one cache may serve many readers.
  std::shared_ptr<RecordCache> cache;
  // Block reads (docs/remote.md, "Block reads"), for readers that visit
  // records block by block (ufspack.BlockSampler).  When > 0, the records
  // whose stored bytes start in each aligned block_bytes range of a data
  // file form a block, fetched whole with one request (one pread, one
  // ranged GET) when one of them is first read, and kept in memory: reads
  // of its other records cost no request.  A record of block_bytes or more
  // is read alone.  Checksums, the cache and errors are as for any read.
  // The first read costs one pass over the index (the blocks' extents:
  // 16 bytes per block).  In a random order each read would fetch a whole
  // block: leave it 0 (the default) then.
  uint64_t block_bytes = 0;
  // Blocks kept (least recently used dropped first beyond this many bytes;
  // the blocks being read are kept in any case), per data file.
  uint64_t block_cache_bytes = uint64_t{256} << 20;
  // Threads fetching the blocks PrefetchBlocks() asks for, per data file.
  int block_prefetch_threads = 4;
};

// What block reads did (ReaderOptions::block_bytes), summed over the data
// files.
struct BlockReadStats {
  uint64_t block_fetches = 0;      // requests for whole blocks
  uint64_t bytes_fetched = 0;      // their bytes
  uint64_t reads_from_blocks = 0;  // reads served from a block
  uint64_t reads_bypassed = 0;     // reads sent to the file (too large)
};

// One record's index entry, decoded and validated.
struct Record {
  uint64_t index = 0;
  uint64_t offset = 0;           // of the stored bytes in data.ufs
  uint64_t stored_length = 0;    // bytes on disk
  uint64_t original_length = 0;  // bytes Read() returns
  uint64_t checksum = 0;         // XXH3-64 of the stored bytes
  uint32_t label = 0;            // class index, kNoLabel in a flat pack
  uint32_t part = 0;             // the part holding it in a merged pack, else 0
  Codec codec = Codec::kRaw;
  std::string_view name;  // relative path, raw bytes; valid while the
                          // Reader lives
};

// One class: its name and the contiguous range of records it labels.
struct ClassInfo {
  std::string_view name;  // valid while the Reader lives
  uint64_t first_record = 0;
  uint64_t record_count = 0;
};

// Pack-level facts from the index header.
struct PackInfo {
  std::string index_path;
  std::string data_path;
  uint32_t version = 0;
  PackId pack_id;
  uint64_t record_count = 0;
  uint64_t class_count = 0;
  uint64_t data_size = 0;
  uint64_t index_size = 0;
  bool flat = false;
  uint32_t optional_flags = 0;
  // A merged pack (`ufspack merge`): the number of parts its manifest
  // names; index_path is then the manifest, data_path is empty, and
  // data_size and index_size are the parts' totals.  0 for a single pack.
  uint64_t part_count = 0;
  ChecksumType checksum_type = ChecksumType::kXXH3_64;
};

class Reader;
namespace internal {
class PackSource;  // reader/src/pack_source.h: one type per kind of pack
std::unique_ptr<Reader> WrapSource(std::unique_ptr<PackSource> source);
}  // namespace internal

// Records read by ReadBatch(): all payloads in one buffer.
struct Batch {
  std::string data;               // payloads back to back
  std::vector<uint64_t> offsets;  // size() + 1 entries into data

  size_t size() const { return offsets.empty() ? 0 : offsets.size() - 1; }
  std::string_view get(size_t k) const {
    return std::string_view(data.data() + offsets[k],
                            offsets[k + 1] - offsets[k]);
  }
};

class UFSPACK_EXPORT Reader {
 public:
  // Opens a pack.  `path` is the pack directory (holding index.ufs and
  // data.ufs) or the index file itself (data.ufs is then taken from the same
  // directory).  Errors: NotFound when the files are missing; Corruption for
  // a damaged or mismatched pair; NotSupported for a newer format.
  //
  // A merged pack (`ufspack merge`: a directory holding manifest.ufs, or
  // the manifest itself) opens the same way and behaves as one pack over
  // its parts, in the manifest's order.  Open() reads the manifest and the
  // header of every part's index.ufs, and fails naming the part when one is
  // missing or is not the pack that was merged (rebuilt: another pack id).
  // A part's index is mapped and its data file opened on first use, so a
  // process touches only the parts its records live in (and holds one
  // file descriptor per part it touched).  Records, classes and Find() are
  // global; errors from a part name the part's files.
  static Status Open(const std::string& path, const ReaderOptions& options,
                     std::unique_ptr<Reader>* reader);

  // True when Open() found the source unreachable and serves the pack from
  // options().cache alone (see ReaderOptions::cache).
  bool offline() const;

  // True when records are best read in batches (ReadBatch) rather than one
  // by one on a few threads: the data file is remote (s3://, https://),
  // where a batch's requests are all in flight at once.
  bool prefers_batches() const;

  ~Reader();
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  const PackInfo& info() const;
  const ReaderOptions& options() const;
  uint64_t size() const;
  uint64_t class_count() const;

  // Decodes and validates entry `i`.  OutOfRange for i >= size();
  // Corruption when the entry is inconsistent with the pack.
  Status GetRecord(uint64_t i, Record* record) const;

  // Class `c` (0 <= c < class_count()).
  Status GetClass(uint64_t c, ClassInfo* info) const;

  // Index of the record named `name` (its relative path, e.g.
  // "cats/cat.1.jpg").  NotFound if absent.  O(1) expected: probes the
  // on-disk hash table; nothing is built at Open().
  Status Find(std::string_view name, uint64_t* index) const;

  // FindMany() sets indices[k] to this for a name the pack does not hold.
  static constexpr uint64_t kNoRecord = ~uint64_t{0};

  // Find() for names[k], k < count: indices[k] is the record's index, or
  // kNoRecord when the pack holds no record of that name.  Returns OK
  // unless the index is damaged (then Corruption, as Find(), and indices
  // are unspecified).  The same answers as `count` Find() calls; faster
  // from a large index, because each small group of names has its hash
  // slots, record entries and names fetched from memory together
  // (prefetched) instead of one dependent cache miss after another.
  Status FindMany(const std::string_view* names, size_t count,
                  uint64_t* indices) const;

  // GetRecord() for indices[k] into records[k], k < count, with the record
  // entries and names of each small group prefetched together (as
  // FindMany()).  Returns the first error (records are then unspecified).
  Status GetRecords(const uint64_t* indices, size_t count,
                    Record* records) const;

  // Reads record `i`'s original bytes into dst[0, original_length) and sets
  // *length.  REQUIRES: capacity >= original_length (else InvalidArgument;
  // GetRecord() tells the size).  Exactly one pread(2) for raw records; the
  // caller's buffer receives the bytes directly.  On any error *length is
  // left as it was and dst[0, original_length) is zeroed: never a part of
  // the record, never bytes that failed their checksum.
  Status Read(uint64_t i, char* dst, size_t capacity, size_t* length) const;

  // As above, resizing *out to the record's length.  A zstd record's
  // string grows as its frame really produces bytes (geometrically, from
  // at most 1 MiB): a damaged or hostile original_length (and frame header)
  // claiming up to 32768 times the stored bytes allocates no more than the
  // frame holds.
  Status Read(uint64_t i, std::string* out) const;
  Status Read(const Record& record, std::string* out) const;

  // Feeds record `record`'s original bytes to `sink`, in order: a raw
  // record in one piece (one pread), a zstd record in pieces of at most
  // 128 KiB as they are decompressed, so memory stays bounded whatever
  // original_length claims.  The stored bytes are checksummed before the
  // first piece.  On error the pieces already given are not the record (a
  // zstd frame found to end early or to run on is only found so at its
  // end); a sink's error stops the read and is returned.
  Status Stream(const Record& record,
                const std::function<Status(std::string_view)>& sink) const;

  // As above for an already decoded record (saves the second decode when
  // the caller needed GetRecord() anyway).
  Status Read(const Record& record, char* dst, size_t capacity) const;

  // Reads `count` records into one buffer.  With threads > 1 the reads are
  // spread over that many threads of the process-wide pool (ParallelFor in
  // ufspack/parallel.h): several reads in flight.  The first error stops the
  // batch and leaves *out empty.  As in Read(&string), a compressed
  // record's original_length sizes nothing: zstd records are decoded first
  // (each into a buffer grown as its frame produces bytes) and *out is sized
  // from what they produced; raw records are read straight into *out.
  // A remote pack (prefers_batches()) sends every record's request at once
  // from the calling thread; there `threads` only serve the cache's hits.
  Status ReadBatch(const uint64_t* indices, size_t count, Batch* out,
                   int threads = 1) const;

  // Reads records [first, first + count) into one buffer, as ReadBatch of
  // those indices, with the records' stored bytes that lie back to back in
  // one data file read with one request (one pread, one ranged GET): a
  // multi-file sample (SampleStarts) as the packer writes it.  Each record
  // is checksummed (and a zstd one decoded) on its own.
  Status ReadRange(uint64_t first, uint64_t count, Batch* out) const;

  // Multi-file samples, as WebDataset groups a shard's files: a record's
  // *key* is its name up to the first '.' of its last component, its
  // *field* the rest ("train/000123.seg.png": key "train/000123", field
  // "seg.png").  The records of one key are consecutive in the index of
  // every pack (names sort by directory, then by file name).  Sets
  // starts[s] to the first record of sample s, in index order, and
  // starts.back() to size(); *fields (if not null) to the distinct fields
  // seen, at most `max_fields` of them (then *fields_complete is false).
  // O(records): every name is read once.
  Status SampleStarts(std::vector<uint64_t>* starts,
                      std::vector<std::string>* fields = nullptr,
                      size_t max_fields = 256,
                      bool* fields_complete = nullptr) const;
  // The key and field of a record name, as SampleStarts splits it (no
  // '.' in the last component: the whole name is the key, the field "").
  static void SplitSampleName(std::string_view name, std::string_view* key,
                              std::string_view* field);

  // Reads raw records[k] into dsts[k] (room for its original_length, as
  // Read(record, dst, capacity) requires) for every k < count: on `threads`
  // threads of the pool from a local pack, as one ReadMany of every
  // request at once from a remote one (the cache's hits looked up on
  // `threads` threads).  The caller's buffers receive the bytes directly.
  // InvalidArgument for a zstd record (its original_length sizes nothing:
  // use Read(record, &string)).  Returns the first error; the buffers then
  // hold unspecified bytes.
  Status ReadMany(const Record* records, char* const* dsts, size_t count,
                  int threads = 1) const;

  // Full structural check of the index: body checksum, every record entry,
  // the class table and the lookup table.  O(records).  Does not read
  // data.ufs.  Returns the first problem found.  Its passes release the
  // index pages they are done with (ReleaseRecords), and it checks the
  // lookup table in stripes of 256 MiB, so the process's resident set stays
  // bounded whatever the index's size (each stripe costs one more pass over
  // the records and their names).
  Status CheckIndex() const;

  // Hints that records [first, first + count) will not be used again soon:
  // the pages of the mapped index holding their entries and names are
  // dropped from this process's resident set (madvise MADV_DONTNEED on the
  // file mapping; the page cache keeps them, and a later use maps them back
  // at the cost of a minor fault).  For one-pass scans over a large pack,
  // whose resident set would otherwise grow to the index's size.  Affects
  // nothing else: every call stays valid, from any thread.
  void ReleaseRecords(uint64_t first, uint64_t count) const;
  // As ReleaseRecords() for every page of the index (and of each part's
  // index already opened): for scans with random accesses (a batch of
  // lookups), called between batches.
  void ReleaseIndex() const;

  // Block reads (ReaderOptions::block_bytes).  Groups the records by
  // block of `block_bytes` bytes: block b's records are
  // members[first[b], first[b + 1]) in record order; blocks are numbered in
  // data order within each part, parts in order, and may be empty.  O(records)
  // (the offset field of each index entry, checked as GetRecord checks it,
  // on up to 8 threads; a merged pack opens every part); memory: 8 bytes
  // per record and per block.  InvalidArgument if block_bytes is 0.
  Status BlockMembers(uint64_t block_bytes, std::vector<uint64_t>* first,
                      std::vector<uint64_t>* members) const;
  // The same into members[0, size()), which the caller allocated: memory
  // that is not yet touched (a fresh mapping) is then first written by
  // the sorting threads, not zeroed by one thread beforehand.
  Status BlockMembers(uint64_t block_bytes, std::vector<uint64_t>* first,
                      uint64_t* members) const;
  // Starts fetching, in the background, the blocks holding records
  // indices[0, count), so that reading them later costs no wait.  A hint:
  // does nothing without block reads, never blocks on a fetch, and a fetch
  // that fails is fetched again (and its error reported) by the read.
  // OutOfRange for an index out of range.
  Status PrefetchBlocks(const uint64_t* indices, size_t count) const;
  BlockReadStats block_stats() const;

  // A hint that bytes [offset, offset + length) of the data file of part
  // `part` (Record::part and Record::offset locate a record's stored
  // bytes; part 0 in a single pack) are about to be read: a pack on a file
  // system asks the kernel to start reading them into the page cache
  // (posix_fadvise WILLNEED, in 128 KiB steps) and returns without waiting,
  // so that reads of records there, in the order stored, find them
  // arriving or arrived (a network file system's latency overlapped: the
  // kernel's own read-ahead keeps only its window in flight).  Does
  // nothing for a remote pack (use ReadBatch), with a cache (its hits need
  // no data file), or for a part not opened yet.  Changes no result.
  // Returns the bytes asked for (the range cut at the end of the data
  // file; 0 when nothing was).  Thread-safe.
  uint64_t WillNeed(uint32_t part, uint64_t offset, uint64_t length) const;

  // The value of metadata `key` (e.g. kMetaSourceRoot, the directory the
  // pack was built from, as given to `ufspack build`).  NotFound if absent;
  // Corruption if the metadata section is malformed.  The view is valid
  // while the Reader lives.
  Status GetMetadata(std::string_view key, std::string_view* value) const;
  // Every metadata entry, in key order.
  Status ListMetadata(
      std::vector<std::pair<std::string_view, std::string_view>>* entries)
      const;

 private:
  friend std::unique_ptr<Reader> internal::WrapSource(
      std::unique_ptr<internal::PackSource> source);
  explicit Reader(std::unique_ptr<internal::PackSource> source);
  std::unique_ptr<internal::PackSource> source_;  // the pack, by kind
};

// Resolves a pack path given to Reader::Open() into its two file paths.
UFSPACK_EXPORT Status ResolvePackPath(const std::string& path,
                                      std::string* index_path,
                                      std::string* data_path);

}  // namespace ufspack

#endif  // UFSPACK_READER_H_
