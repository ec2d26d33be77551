// Copyright 2026 The ufspack Authors.

#include "gzip_source.h"

#include <cstdio>
#include <cstring>

namespace ufspack {
namespace internal {

namespace {

std::string Hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", static_cast<unsigned>(v));
  return buf;
}

}  // namespace

GzipByteSource::GzipByteSource(ByteSource* below) : below_(below) {
  // 15 + 16: a gzip wrapper (only), whose trailer inflate() checks.
  if (inflateInit2(&z_, 15 + 16) != Z_OK) {
    status_ = Status::IOError("zlib: cannot start a gzip decompressor: " +
                              std::string(z_.msg ? z_.msg : "out of memory"));
    return;
  }
  z_ready_ = true;
  inflateGetHeader(&z_, &head_);
}

GzipByteSource::~GzipByteSource() {
  if (z_ready_) inflateEnd(&z_);
}

uint64_t GzipByteSource::in_offset() const {
  if (block_ == nullptr) return block_at_;
  return block_at_ + static_cast<uint64_t>(
                         reinterpret_cast<const char*>(z_.next_in) - block_);
}

std::string GzipByteSource::Members() const {
  return "gzip member " + std::to_string(member_) + " (compressed bytes " +
         std::to_string(member_at_) + ".." + std::to_string(in_offset()) + ")";
}

uint32_t GzipByteSource::LastField() const {
  // The consumed input: tail_, then the block at hand up to next_in.
  unsigned char last[8];
  size_t have = 0;
  const size_t used =
      block_ == nullptr
          ? 0
          : static_cast<size_t>(reinterpret_cast<const char*>(z_.next_in) -
                                block_);
  const size_t from_block = used < 4 ? used : 4;
  const size_t from_tail =
      tail_size_ < 4 - from_block ? tail_size_ : 4 - from_block;
  std::memcpy(last, tail_ + tail_size_ - from_tail, from_tail);
  have = from_tail;
  std::memcpy(last + have, block_ + used - from_block, from_block);
  have += from_block;
  uint32_t v = 0;
  for (size_t k = have; k > 0; --k) v = (v << 8) | last[k - 1];
  return v;
}

Status GzipByteSource::Refill(bool* more) {
  if (block_ != nullptr) {
    // The block at hand is consumed: keep its last bytes (a trailer field
    // may straddle two blocks), and the next block starts where it ended.
    const size_t used =
        static_cast<size_t>(reinterpret_cast<const char*>(z_.next_in) - block_);
    const unsigned char* b = reinterpret_cast<const unsigned char*>(block_);
    for (size_t k = used > sizeof tail_ ? used - sizeof tail_ : 0; k < used;
         ++k) {
      if (tail_size_ == sizeof tail_) {
        std::memmove(tail_, tail_ + 1, sizeof tail_ - 1);
        --tail_size_;
      }
      tail_[tail_size_++] = b[k];
    }
    block_at_ += used;
  }
  const char* p = nullptr;
  size_t n = 0;
  UFSPACK_RETURN_IF_ERROR(below_->Read(&p, &n));
  block_ = p;
  z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(p));
  z_.avail_in = static_cast<uInt>(n);
  *more = n > 0;
  return Status::OK();
}

Status GzipByteSource::SkipZeros() {
  for (uInt k = 0; k < z_.avail_in; ++k) {
    if (z_.next_in[k] != 0) {
      z_.next_in += k;
      z_.avail_in -= k;
      return Status::Corruption(
          "non-zero bytes at compressed byte " + std::to_string(in_offset()) +
          ", in the zero padding after gzip member " + std::to_string(member_) +
          " (trailing garbage: gzip -t refuses it too)");
    }
  }
  z_.next_in += z_.avail_in;
  z_.avail_in = 0;
  return Status::OK();
}

void GzipByteSource::NextMember() {
  ++member_;
  member_at_ = in_offset();
  inflateReset(&z_);
  inflateGetHeader(&z_, &head_);
}

Status GzipByteSource::DataError(int rc) {
  if (rc == Z_MEM_ERROR) return Status::IOError("zlib: out of memory");
  const std::string why =
      z_.msg != nullptr ? z_.msg : "error " + std::to_string(rc);
  if (member_ > 1 && head_.done != 1) {  // no (whole) gzip header
    return Status::Corruption(
        "the bytes from compressed byte " + std::to_string(member_at_) +
        " on, after gzip member " + std::to_string(member_ - 1) +
        ", are neither another gzip member nor zero padding (trailing "
        "garbage: gzip -t refuses it too; zlib: " +
        why + ")");
  }
  // zlib's messages for the two trailer fields (inflate.c).
  if (why == "incorrect data check") {
    return Status::Corruption("gzip data damaged: CRC-32 mismatch in " +
                              Members() + ": stored " + Hex32(LastField()) +
                              ", computed " +
                              Hex32(static_cast<uint32_t>(z_.adler)));
  }
  if (why == "incorrect length check") {
    return Status::Corruption(
        "gzip data damaged: length mismatch in " + Members() +
        ": the trailer says " + std::to_string(LastField()) +
        " bytes (mod 2^32), the member holds " +
        std::to_string(static_cast<uint32_t>(z_.total_out)));
  }
  return Status::Corruption("gzip data damaged at compressed byte " +
                            std::to_string(in_offset()) + " in " + Members() +
                            ": zlib: " + why);
}

Status GzipByteSource::Read(const char** data, size_t* n) {
  *n = 0;
  if (!status_.ok()) return status_;
  out_.resize(kSourceBlockSize);
  z_.next_out = reinterpret_cast<Bytef*>(out_.data());
  z_.avail_out = static_cast<uInt>(out_.size());
  while (z_.avail_out == out_.size() && state_ != State::kDone) {
    if (z_.avail_in == 0) {
      bool more = false;
      status_ = Refill(&more);
      if (!status_.ok()) return status_;
      if (!more) {
        if (state_ == State::kMember) {
          status_ = Status::Corruption(
              "gzip data truncated: the file ends inside " + Members());
          return status_;
        }
        state_ = State::kDone;
      }
      continue;
    }
    if (state_ == State::kZeros) {
      status_ = SkipZeros();
      if (!status_.ok()) return status_;
      continue;
    }
    if (state_ == State::kBetween) {
      if (*z_.next_in == 0) {
        state_ = State::kZeros;
        continue;
      }
      NextMember();
      state_ = State::kMember;
    }
    const int rc = inflate(&z_, Z_NO_FLUSH);
    if (rc == Z_STREAM_END) {  // the trailer matched
      state_ = State::kBetween;
    } else if (rc != Z_OK && !(rc == Z_BUF_ERROR && z_.avail_in == 0)) {
      status_ = DataError(rc);
      // The bytes before the damage go out first (a trailer mismatch comes
      // with the member's last bytes); the error with the next call, when
      // the reader knows which of its members it is in.
      if (z_.avail_out == out_.size()) return status_;
      break;
    }
  }
  *data = out_.data();
  *n = out_.size() - z_.avail_out;
  return Status::OK();
}

}  // namespace internal
}  // namespace ufspack
