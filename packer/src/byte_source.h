// Copyright 2026 The ufspack Authors.
//
// ByteSource: a stream of bytes handed out block by block, as libarchive's
// read callbacks want them: the archive file itself (FileByteSource), a
// decompressor over another source (GzipByteSource, gzip_source.h), or a
// replay of what a probe read (RewindableByteSource).  StreamWindow keeps
// the most recent of the blocks handed to a reader so that the headers it
// has just parsed can be read again (tar_header_check.h).  Internal to the
// packer (ArchiveReader).
//
// Thread safety: one thread's.
#ifndef UFSPACK_PACKER_SRC_BYTE_SOURCE_H_
#define UFSPACK_PACKER_SRC_BYTE_SOURCE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "ufspack/file.h"
#include "ufspack/status.h"

namespace ufspack {
namespace internal {

// Blocks read from files and handed on: large, for one pass at disk speed.
inline constexpr size_t kSourceBlockSize = size_t{1} << 20;

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // The next bytes of the stream in *data, *n of them; *n == 0 at its end.
  // The bytes stay valid until the next call on this source.  Errors are
  // sticky: once one is returned, every later call returns it again.  A
  // decompressor may hand out the bytes it decoded before a check failed
  // and return the error at the next call (a gzip trailer follows the data
  // it covers), so nothing is known good before *n == 0.  Messages do not
  // name the archive: the caller adds that.
  virtual Status Read(const char** data, size_t* n) = 0;
  // Bytes of the archive file consumed so far (compressed), for progress.
  virtual uint64_t consumed() const = 0;
};

// The archive file, read sequentially in kSourceBlockSize blocks (pread),
// with the skips and seeks libarchive's readers make (a zip's central
// directory is at its end).
class FileByteSource final : public ByteSource {
 public:
  // Opens the regular file at `path` (NewPosixRandomAccessFile).
  static Status Open(const std::string& path,
                     std::unique_ptr<FileByteSource>* source);
  Status Read(const char** data, size_t* n) override;
  uint64_t consumed() const override { return offset_; }

  // Moves the read position (whence: SEEK_SET, SEEK_CUR, SEEK_END) and
  // returns it in *pos; InvalidArgument for a position before the start.
  Status Seek(int64_t offset, int whence, uint64_t* pos);
  // Moves the read position up to `n` bytes on, never past the end of the
  // file; *skipped says how far.
  Status Skip(uint64_t n, uint64_t* skipped);

 private:
  FileByteSource(std::unique_ptr<RandomAccessFile> file, uint64_t size)
      : file_(std::move(file)), size_(size) {}

  std::unique_ptr<RandomAccessFile> file_;
  uint64_t size_;  // at open
  uint64_t offset_ = 0;
  std::string buffer_;
};

// `below`'s bytes, recorded from the start until Rewind() or Forget(), so
// that a reader can look at the start of a stream that cannot seek (an
// archive inside an archive) and then read it again from its first byte.
class RewindableByteSource final : public ByteSource {
 public:
  // `below` must outlive this source.
  explicit RewindableByteSource(ByteSource* below) : below_(below) {}
  Status Read(const char** data, size_t* n) override;
  uint64_t consumed() const override { return below_->consumed(); }
  // From now on Read() returns what it has returned so far, then the rest
  // of `below`.  REQUIRES: called at most once, before Forget().
  void Rewind();
  // Stops recording (the recorded bytes are dropped).
  void Forget();

 private:
  ByteSource* below_;
  std::string saved_;
  bool recording_ = true;
  bool replaying_ = false;
};

// The bytes a reader was handed, kept from a position on (KeepFrom), in
// the reader's stream coordinates (the offsets libarchive reports for its
// headers: archive_read_header_position, archive_filter_bytes(a, 0)).  The
// block handed out last is not copied (it stays valid until its source is
// read again); of the earlier ones only the bytes at or after the position
// kept from are, typically a header that straddles two blocks.
class StreamWindow {
 public:
  // The block handed out last is about to be overwritten (its source is
  // asked for the next): its bytes from the kept position on are copied.
  void Retire();
  // A block [end(), end() + n) is handed out (after Retire(), which it
  // calls if need be).
  void Handed(const char* data, size_t n);
  // `n` bytes were skipped without being handed out.
  void Skipped(uint64_t n);
  // The stream was repositioned at `offset`: everything held is dropped.
  void Moved(uint64_t offset);
  // Bytes before `offset` are not needed any more.
  void KeepFrom(uint64_t offset);
  // Stops copying (the stream is no tar): Handed() only counts.
  void Disable();
  // The bytes [from, to) if they are all held (false otherwise); *scratch
  // holds them when they span blocks.
  bool Get(uint64_t from, uint64_t to, std::string* scratch,
           std::string_view* bytes) const;
  // The stream offset just past the last block handed out.
  uint64_t end() const { return cur_at_ + cur_size_; }

 private:
  bool enabled_ = true;
  uint64_t keep_ = 0;
  std::string carry_;  // copied bytes [carry_at_, cur_at_)
  uint64_t carry_at_ = 0;
  const char* cur_ = nullptr;  // the block handed out last
  size_t cur_size_ = 0;
  uint64_t cur_at_ = 0;
};

}  // namespace internal
}  // namespace ufspack

#endif  // UFSPACK_PACKER_SRC_BYTE_SOURCE_H_
