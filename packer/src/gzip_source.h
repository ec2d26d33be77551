// Copyright 2026 The ufspack Authors.
//
// GzipByteSource: a gzip stream (RFC 1952) decompressed with zlib, which
// checks every member's CRC-32 and length trailer (libarchive's gzip filter
// does not: its consume_trailer skips them).  Internal to the packer
// (ArchiveReader reads .tar.gz through it).
//
// The stream is one or more gzip members (`cat a.gz b.gz`), optionally
// followed by zero bytes (tape and block padding, which gzip -t accepts
// too).  Anything else after a member is refused: gzip calls it "trailing
// garbage" (exit status 2, so `tar xzf` fails), and it can be a damaged
// member whose data would otherwise be dropped silently.
//
// Errors are Corruption (IOError for zlib's out of memory) and sticky; their
// messages say what is wrong and where, in compressed bytes, and leave the
// archive and member to the caller: "gzip data damaged: CRC-32 mismatch in
// gzip member 1 (compressed bytes 0..122): stored 0x..., computed 0x...".
//
// Thread safety: one thread's.
#ifndef UFSPACK_PACKER_SRC_GZIP_SOURCE_H_
#define UFSPACK_PACKER_SRC_GZIP_SOURCE_H_

#include <zlib.h>

#include <cstdint>
#include <string>

#include "byte_source.h"

namespace ufspack {
namespace internal {

class GzipByteSource final : public ByteSource {
 public:
  // Decompresses `below`, which must outlive this source and start with a
  // gzip member.
  explicit GzipByteSource(ByteSource* below);
  ~GzipByteSource() override;
  GzipByteSource(const GzipByteSource&) = delete;
  GzipByteSource& operator=(const GzipByteSource&) = delete;

  Status Read(const char** data, size_t* n) override;
  uint64_t consumed() const override { return below_->consumed(); }

 private:
  enum class State { kMember, kBetween, kZeros, kDone };
  // Gives zlib the next input block; false at the end of `below`.
  Status Refill(bool* more);
  // Checks that the input at hand is zero bytes (padding) and drops it.
  Status SkipZeros();
  // Starts the next member at the input at hand.
  void NextMember();
  Status DataError(int rc);
  // The compressed offset of the next input byte.
  uint64_t in_offset() const;
  // The last 4 input bytes consumed, little-endian (a trailer field).
  uint32_t LastField() const;
  std::string Members() const;

  ByteSource* below_;
  z_stream z_{};
  gz_header head_{};
  bool z_ready_ = false;
  State state_ = State::kMember;
  Status status_;
  std::string out_;
  const char* block_ = nullptr;  // the input block at hand
  uint64_t block_at_ = 0;        // its compressed offset
  unsigned char tail_[8] = {};   // the input consumed before it, last bytes
  size_t tail_size_ = 0;
  uint64_t member_ = 1;     // the member being read, from 1
  uint64_t member_at_ = 0;  // its compressed offset
};

}  // namespace internal
}  // namespace ufspack

#endif  // UFSPACK_PACKER_SRC_GZIP_SOURCE_H_
