// Copyright 2026 The ufspack Authors.
//
// The PackWriter's implementation (ufspack/builder.h is its public face):
// its files, scratch files and index state, and the two calls the packer's
// own builders use that users do not: PrepareRecord, which encodes a
// record on a reader thread, and AddPrepared, which appends it.  Internal
// to the packer (not installed); exported for the tests in shared builds.
//
// Thread safety: as PackWriter (one writer thread); PrepareRecord is
// thread-safe.
//
// Processes: a writer belongs to the process that created it (ufspack/
// builder.h, "fork()").  In any other process (a fork() child's copy)
// every call fails with CheckOwner()'s error before it touches a file;
// the child's copies of the descriptors are closed at the fork (a
// pthread_atfork handler), and Abandon() and the destructor there neither
// write nor remove anything: the files are the creator's.
#ifndef UFSPACK_PACKER_SRC_PACK_WRITER_IMPL_H_
#define UFSPACK_PACKER_SRC_PACK_WRITER_IMPL_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ufspack/builder.h"
#include "ufspack/export.h"
#include "ufspack/format.h"
#include "ufspack/status.h"
#include "ufspack/types.h"

namespace ufspack {
namespace internal {

class SpillFile;

// A record's bytes encoded for storage (see PrepareRecord).
struct PreparedRecord {
  Codec codec = Codec::kRaw;
  uint64_t original_length = 0;
  uint64_t checksum = 0;  // of `stored`
  std::string stored;
};

// Encodes `bytes` as it will be stored: zstd when options.compress is set
// and the frame is smaller than the input, else raw.  Thread-safe (keeps a
// compression context per thread).
UFSPACK_EXPORT Status PrepareRecord(std::string bytes,
                                    const PackWriterOptions& options,
                                    PreparedRecord* out);

class UFSPACK_EXPORT PackWriterImpl {
 public:
  // PackWriter::Create.
  static Status Create(const std::string& out_dir,
                       const PackWriterOptions& options,
                       std::unique_ptr<PackWriterImpl>* writer);
  // The implementation behind a PackWriter.
  static PackWriterImpl* Of(PackWriter* writer) { return writer->impl_.get(); }

  ~PackWriterImpl();
  PackWriterImpl(const PackWriterImpl&) = delete;
  PackWriterImpl& operator=(const PackWriterImpl&) = delete;

  // OK in the process that created this writer; else InvalidArgument
  // "<out_dir>: this pack writer was opened by process P; this is process
  // Q: ...".  Every call below checks it first.
  Status CheckOwner() const;

  // As PackWriter's methods of the same names.
  Status AddClass(std::string_view name);
  Status Add(std::string_view name, uint32_t label, std::string_view bytes);
  // Add() of a record PrepareRecord() encoded with this writer's options.
  Status AddPrepared(std::string_view name, uint32_t label,
                     const PreparedRecord& record);
  Status AddFromFd(std::string_view name, uint32_t label, int fd, uint64_t size,
                   const std::string& path);
  // Appends the bytes `read` yields (it fills up to `cap` bytes of `buf`
  // and sets *got; 0 at the end) as a raw record of `size` bytes, in
  // bounded memory; then `check(bytes read)` (at most size + one chunk)
  // says whether the source was whole.  A failed read or check cuts
  // data.ufs back to where the record began and returns that error; the
  // writer stays usable.
  using ChunkReader = std::function<Status(char* buf, size_t cap, size_t* got)>;
  Status AddStreamed(std::string_view name, uint32_t label, uint64_t size,
                     const ChunkReader& read,
                     const std::function<Status(uint64_t done)>& check);
  Status SetMetadata(std::string_view key, std::string_view value);

  // A run of records whose data order differs from their index order (the
  // shuffled layout, docs/format.md "Data file"): between BeginRun() and
  // EndRun(), each Add*() appends its bytes to data.ufs at once but holds
  // its index entry, keyed by the position SetRunPosition() gave it last;
  // EndRun() enters the held entries in position order.  Labels need only
  // be non-decreasing in position order (checked by EndRun()).  Positions
  // must be distinct; a record that failed (a skipped source) is simply
  // absent.  Memory: about 80 bytes plus the name per held record.
  Status BeginRun();
  void SetRunPosition(uint64_t position) { run_position_ = position; }
  Status EndRun();

  // A run whose order and labels are known only at its end (records added
  // in any order: SampleWriter): Add*() takes kNoLabel and checks no label;
  // EndRun(assign) calls `assign` once with the held records' names in the
  // order added, to set each one's position and label (`positions` and
  // `labels` come sized to match, positions as SetRunPosition() gave
  // them); both are then checked as EndRun() checks them, so every class
  // must be declared by then (`assign` may declare them).
  Status BeginDeferredRun();
  using RunAssigner = std::function<Status(
      const std::vector<std::string_view>& names,
      std::vector<uint64_t>* positions, std::vector<uint32_t>* labels)>;
  Status EndRun(const RunAssigner& assign);

  Status Finish(PackId* pack_id);
  void Abandon();
  const Status& status() const { return status_; }
  uint64_t record_count() const { return record_count_; }
  uint64_t data_bytes() const { return data_offset_; }
  const std::string& out_dir() const { return out_dir_; }

 private:
  PackWriterImpl();
  Status CheckLabel(uint32_t label, std::string_view name);
  // CheckLabel plus the format's record count and name length limits.
  Status CheckRecord(uint32_t label, std::string_view name);
  // Enters the record whose stored bytes end at data_offset_ (held when a
  // run is open).
  Status AppendEntry(std::string_view name, uint32_t label, Codec codec,
                     uint64_t stored, uint64_t original, uint64_t checksum);
  // Enters a record in the index, after every record entered so far.
  Status EnterRecord(std::string_view name, const RecordEntry& entry);
  Status WriteData(const char* p, size_t n);
  Status FlushData();
  Status Spill(SpillFile* file, const void* p, size_t n);
  // Finish(), step by step: the lookup table and the index header from the
  // scratch files, the files written and synced, the pack published
  // (docs/format.md, "Publishing a pack").
  Status EncodeIndex(IndexHeader* header, std::string* classes,
                     std::string* meta);
  Status WriteHeadersAndIndex(const IndexHeader& header,
                              const std::string& classes,
                              const std::string& meta);
  Status Publish();
  Status Fail(Status s);
  // CheckOwner(), then the sticky status: what every call checks first.
  Status Usable() const;
  // Abandon() in a process that does not own the writer: closes this
  // copy's descriptors and forgets its files, leaving them to their owner.
  void Release();
  // Closes the directory (lock), data and index descriptors; only
  // close(2), so a fork() child may call it before anything else.
  void DropDescriptors();
  struct Live;  // the writers of this process, for a fork() child

  PackWriterOptions options_;
  pid_t owner_pid_ = 0;  // the process that created the writer
  std::string out_dir_;
  int dir_fd_ = -1;
  int data_fd_ = -1;
  int index_fd_ = -1;
  std::string data_tmp_;
  std::string index_tmp_;
  std::string buffer_;
  uint64_t data_offset_ = 0;  // logical size of data.ufs so far
  // The index grows in scratch files, not in memory (docs/scale.md): the
  // record table, the name pool (class and record names in the order
  // added) and each record's NameHash, for the lookup table.
  std::unique_ptr<SpillFile> records_file_, names_file_, hashes_file_,
      lookup_file_;
  uint64_t record_count_ = 0;  // entered, and held by an open run
  uint32_t last_label_ = 0;
  // The open run's held entries (name_offset unset), with their names.
  struct HeldRecord {
    uint64_t position;
    RecordEntry entry;
    std::string name;
  };
  bool in_run_ = false;
  bool run_labels_deferred_ = false;
  uint64_t run_position_ = 0;
  std::vector<HeldRecord> held_;
  std::vector<ClassEntry> classes_;
  std::map<std::string, std::string> metadata_;
  Status status_;
  bool finished_ = false;
};

}  // namespace internal
}  // namespace ufspack

#endif  // UFSPACK_PACKER_SRC_PACK_WRITER_IMPL_H_
