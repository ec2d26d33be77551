// Copyright 2026 The ufspack Authors.
//
// ArchiveReader: the members of an archive (tar, with or without gzip,
// bzip2, xz or zstd compression; zip; whatever libarchive reads), one pass,
// in archive order, each member's bytes streamed.  An archive member that
// is itself an archive is read the same way from the outer one's stream
// (OpenNested), with no scratch copy.  Internal to the packer.
//
// The archive is untrusted input: member names come as stored (raw bytes,
// unchecked), sizes as declared; errors name the archive, the member and
// what is wrong.  Beyond libarchive's own checks:
//  - gzip is decompressed with zlib (gzip_source.h), which checks each gzip
//    member's CRC-32 and length; libarchive's gzip filter does not;
//  - a compressed stream is read to its end once the archive in it ends
//    (tar's end-of-archive blocks come before the compressor's trailer), so
//    its checks (gzip's, and xz's, zstd's and bzip2's in libarchive) run
//    before the last Next() says there is no more;
//  - every tar entry's header numbers are checked (tar_header_check.h).
// Names are read under a UTF-8 character type whatever the process locale
// (libarchive converts names to the current locale and refuses, under "C",
// a zip name marked UTF-8): a zip's UTF-8 names (flag bit 11, Info-ZIP's
// Unicode path field) and pax 'path' records come as their UTF-8 bytes, other
// names as the bytes stored, as a tree build of the extracted files sees
// them.  A name marked UTF-8 that is not valid UTF-8 is Corruption.
//
// Thread safety: one thread's.  A nested reader borrows its outer reader's
// current member: it must be used and closed before the outer one moves on.
#ifndef UFSPACK_PACKER_SRC_ARCHIVE_READER_H_
#define UFSPACK_PACKER_SRC_ARCHIVE_READER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "byte_source.h"
#include "ufspack/status.h"

struct archive;

namespace ufspack {
namespace internal {

class NestedByteSource;

struct ArchiveMember {
  enum class Type { kFile, kDirectory, kSymlink, kHardlink, kOther };
  std::string name;  // as stored
  Type type = Type::kOther;
  bool size_known = false;  // a zip member written to a stream may not say
  uint64_t size = 0;        // declared (kFile)
  bool encrypted = false;
};

class ArchiveReader {
 public:
  // Opens the archive file at `path`.
  static Status Open(const std::string& path,
                     std::unique_ptr<ArchiveReader>* reader);
  // Opens the current member of `outer` as an archive of its own, named
  // "<outer's label>/<member>" in messages.
  static Status OpenNested(ArchiveReader* outer,
                           std::unique_ptr<ArchiveReader>* reader);
  ~ArchiveReader();
  ArchiveReader(const ArchiveReader&) = delete;
  ArchiveReader& operator=(const ArchiveReader&) = delete;

  // The next member's header; false at the end of the archive (and of a
  // compressed stream's checks).  Corruption for a damaged or truncated
  // archive; InvalidArgument when the file is no archive at all (no first
  // header).
  Status Next(ArchiveMember* member, bool* more);
  // Up to `cap` bytes of the current member into `buf`; *got 0 at its end.
  Status Read(char* buf, size_t cap, size_t* got);
  // Bytes of the archive file consumed so far (compressed; for a nested
  // reader, its outer one's).
  uint64_t bytes_consumed() const;
  // The archive's name in messages; the current member's name.
  const std::string& label() const { return label_; }
  const std::string& member_name() const { return member_; }

 private:
  ArchiveReader(std::string label, ArchiveReader* outer);
  // Finds the compression (libarchive's filters) and opens the format
  // reader over base_ decompressed.
  Status Start();
  // Opens a_ over source_.
  Status OpenFormat();
  // Checks the tar headers of the entry just read.
  Status CheckHeaders();
  // At the end of the archive: reads a compressed stream to its end.
  Status Finish();
  Status Error(const std::string& what) const;
  // InvalidArgument: the file is not an archive libarchive reads.
  Status NotAnArchive() const;
  // source_status_ with where it surfaced (the outer reader's errors, for a
  // nested one, are whole already).
  Status SourceError() const;
  std::string Where() const;

  friend struct FormatCallbacks;  // libarchive's callbacks on a_

  std::string label_;
  std::string member_;    // the current member's name
  ArchiveReader* outer_;  // a nested reader's source; null for a file
  // The bytes, bottom up: base_ (the file, or the outer reader's member),
  // replayable_ (over a nested base_, for the look at its start),
  // decompressor_ (gzip, or libarchive's filters), source_ (what a_ reads).
  std::unique_ptr<ByteSource> base_;
  FileByteSource* file_ = nullptr;      // base_, when a file
  NestedByteSource* nested_ = nullptr;  // base_, when a member
  std::unique_ptr<RewindableByteSource> replayable_;
  std::unique_ptr<ByteSource> decompressor_;
  ByteSource* source_ = nullptr;
  struct archive* a_ = nullptr;  // the format reader
  Status source_status_;         // source_'s error, seen by a callback
  StreamWindow window_;          // source_'s recent bytes (tar headers)
  bool frozen_ = true;           // keep window_ from its start (in Next)
  bool in_member_ = false;       // a header was read, its data not skipped
  bool ended_ = false;
  uint64_t count_ = 0;  // members read
};

}  // namespace internal
}  // namespace ufspack

#endif  // UFSPACK_PACKER_SRC_ARCHIVE_READER_H_
