// Copyright 2026 The ufspack Authors.
//
// Record codecs: how a zstd record's stored frame becomes its bytes.  The
// frame header is as untrusted as the index, so nothing is ever sized from
// original_length before the bytes exist.  Private to the reader.
//
// Thread safety: DecodeZstdRecord and ThreadScratch keep per-thread state
// (no locks, nothing a fork() could leave locked); an output is one call's.
#ifndef UFSPACK_READER_SRC_RECORD_CODEC_H_
#define UFSPACK_READER_SRC_RECORD_CODEC_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "ufspack/reader.h"
#include "ufspack/status.h"

namespace ufspack {
namespace internal {

// A zstd block of at most 128 KiB needs at least 4 bytes (3-byte header and
// one RLE byte), so no frame expands by more than this factor.  Bounds the
// allocation a damaged index can ask for.
inline constexpr uint64_t kMaxZstdExpansion = 32768;

// The smallest zstd frame: 4-byte magic, 2-byte frame header (descriptor and
// window or 1-byte content size) and a 3-byte last block header.  Only named
// in messages: the format requires stored_length >= 1, and a shorter frame
// is caught when it is decoded.
inline constexpr uint64_t kMinZstdFrame = 9;

// Where a zstd record's decompressed bytes go.  The decoder asks for room
// only as output really comes out of the frame, so nothing is ever sized
// from original_length (which a hostile index and frame header may both
// claim to be 32768 times the stored bytes) before the bytes exist.
class ZstdOutput {
 public:
  virtual ~ZstdOutput() = default;
  // Room for the next output bytes, `produced` bytes having been written
  // so far: sets *dst and *size, 1 <= *size <= remaining.
  virtual Status Room(uint64_t produced, uint64_t remaining, char** dst,
                      size_t* size) = 0;
  // The first `n` bytes of the last room hold output.
  virtual Status Filled(size_t n) = 0;
};

// The caller's buffer of at least original_length bytes: one room, so zstd
// decodes the whole frame in one pass straight into it.
class BufferOutput : public ZstdOutput {
 public:
  explicit BufferOutput(char* dst) : dst_(dst) {}
  Status Room(uint64_t produced, uint64_t remaining, char** dst,
              size_t* size) override {
    *dst = dst_ + produced;
    *size = static_cast<size_t>(remaining);
    return Status::OK();
  }
  Status Filled(size_t) override { return Status::OK(); }

 private:
  char* const dst_;
};

// A string grown geometrically as output arrives: first at most
// kFirstRoom bytes, then doubling, never past original_length.  A record of
// at most kFirstRoom bytes is still decoded in one pass.
class StringOutput : public ZstdOutput {
 public:
  static constexpr uint64_t kFirstRoom = uint64_t{1} << 20;
  explicit StringOutput(std::string* out) : out_(out) { out_->clear(); }
  Status Room(uint64_t produced, uint64_t remaining, char** dst,
              size_t* size) override {
    const uint64_t grow = std::min(remaining, std::max(kFirstRoom, produced));
    out_->resize(static_cast<size_t>(produced + grow));
    *dst = out_->data() + produced;
    *size = static_cast<size_t>(grow);
    return Status::OK();
  }
  Status Filled(size_t n) override {
    filled_ += n;
    return Status::OK();
  }
  // Drops the unfilled tail of the last room.
  void Trim() { out_->resize(static_cast<size_t>(filled_)); }

 private:
  std::string* const out_;
  uint64_t filled_ = 0;
};

// Pieces of at most kPiece bytes handed to a sink, through one buffer.
class SinkOutput : public ZstdOutput {
 public:
  static constexpr size_t kPiece = 128 << 10;
  explicit SinkOutput(const std::function<Status(std::string_view)>& sink)
      : sink_(sink) {}
  Status Room(uint64_t, uint64_t remaining, char** dst, size_t* size) override {
    *size = static_cast<size_t>(std::min<uint64_t>(remaining, kPiece));
    if (buffer_.size() < *size) buffer_.resize(*size);
    *dst = buffer_.data();
    return Status::OK();
  }
  Status Filled(size_t n) override {
    return n == 0 ? Status::OK() : sink_(std::string_view(buffer_.data(), n));
  }

 private:
  const std::function<Status(std::string_view)>& sink_;
  std::string buffer_;
};

// A per-thread buffer for a record's stored frame.
std::string& ThreadScratch();

// The one zstd read path: checks the frame header against the entry, then
// decodes frame[0, r.stored_length) (already read and checksummed) into the
// rooms `output` gives, and checks that exactly original_length bytes come
// out.  A frame that ends early, or goes on past the end, is Corruption
// naming `data_name`, the record, its offset and both sizes.  Memory: the
// output's rooms plus zstd's window buffer, which zstd bounds (2^27 bytes by
// default) whatever the frame claims.
Status DecodeZstdRecord(const std::string& data_name, const Record& r,
                        const char* frame, ZstdOutput* output);

}  // namespace internal
}  // namespace ufspack

#endif  // UFSPACK_READER_SRC_RECORD_CODEC_H_
