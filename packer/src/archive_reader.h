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
// libarchive's reason.
//
// Thread safety: one thread's.  A nested reader borrows its outer reader's
// current member: it must be used and closed before the outer one moves on.
#ifndef UFSPACK_PACKER_SRC_ARCHIVE_READER_H_
#define UFSPACK_PACKER_SRC_ARCHIVE_READER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ufspack/status.h"

struct archive;

namespace ufspack {
namespace internal {

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

  // The next member's header; false at the end of the archive.  Corruption
  // for a damaged or truncated archive; InvalidArgument when the file is no
  // archive at all (no first header).
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
  ArchiveReader(struct archive* a, std::string label, ArchiveReader* outer);
  static Status OpenWith(struct archive* a, std::string label,
                         ArchiveReader* outer,
                         std::unique_ptr<ArchiveReader>* reader);
  Status Error(const std::string& what) const;
  // InvalidArgument: the file is not an archive libarchive reads.
  Status NotAnArchive() const;

  struct archive* a_;
  std::string label_;
  std::string member_;    // the current member's name
  ArchiveReader* outer_;  // a nested reader's source; null for a file
  std::string buffer_;    // a nested reader's read buffer
  friend struct NestedSource;
};

}  // namespace internal
}  // namespace ufspack

#endif  // UFSPACK_PACKER_SRC_ARCHIVE_READER_H_
