// Copyright 2026 The ufspack Authors.

#include "byte_source.h"

#include <algorithm>
#include <cstdio>

namespace ufspack {
namespace internal {

namespace {
// StreamWindow holds no more than this besides the block at hand.  A tar
// entry's headers are far shorter; more is only held while a reader that is
// not tar's parses its first header (a 7z reads its header at the end of
// the file); a longer chain goes unchecked.
constexpr size_t kMaxHeld = size_t{64} << 20;
}  // namespace

Status FileByteSource::Open(const std::string& path,
                            std::unique_ptr<FileByteSource>* source) {
  std::unique_ptr<RandomAccessFile> file;
  UFSPACK_RETURN_IF_ERROR(NewPosixRandomAccessFile(path, &file));
  uint64_t size = 0;
  UFSPACK_RETURN_IF_ERROR(file->Size(&size));
  source->reset(new FileByteSource(std::move(file), size));
  return Status::OK();
}

Status FileByteSource::Read(const char** data, size_t* n) {
  buffer_.resize(kSourceBlockSize);
  size_t got = 0;
  UFSPACK_RETURN_IF_ERROR(
      file_->Read(offset_, buffer_.size(), buffer_.data(), &got));
  offset_ += got;
  *data = buffer_.data();
  *n = got;
  return Status::OK();
}

Status FileByteSource::Seek(int64_t offset, int whence, uint64_t* pos) {
  int64_t base = 0;
  if (whence == SEEK_CUR) base = static_cast<int64_t>(offset_);
  if (whence == SEEK_END) base = static_cast<int64_t>(size_);
  if (offset < -base) {
    return Status::InvalidArgument("a seek before the start of the file");
  }
  offset_ = static_cast<uint64_t>(base + offset);
  *pos = offset_;
  return Status::OK();
}

Status FileByteSource::Skip(uint64_t n, uint64_t* skipped) {
  *skipped = std::min(n, size_ > offset_ ? size_ - offset_ : 0);
  offset_ += *skipped;
  return Status::OK();
}

Status RewindableByteSource::Read(const char** data, size_t* n) {
  if (replaying_) {
    replaying_ = false;
    if (!saved_.empty()) {
      // saved_ stays valid until the next call, which drops it.
      *data = saved_.data();
      *n = saved_.size();
      return Status::OK();
    }
  }
  if (!recording_) saved_ = std::string();
  UFSPACK_RETURN_IF_ERROR(below_->Read(data, n));
  if (recording_) saved_.append(*data, *n);
  return Status::OK();
}

void RewindableByteSource::Rewind() {
  recording_ = false;
  replaying_ = true;
}

void RewindableByteSource::Forget() {
  recording_ = false;
  replaying_ = false;
  saved_ = std::string();
}

void StreamWindow::Retire() {
  const uint64_t at = end();
  if (enabled_) {
    // carry_ holds [carry_at_, cur_at_) when not empty; drop what is before
    // keep_, then add the outgoing block's bytes from keep_ on.
    if (keep_ >= cur_at_) {
      carry_.clear();
    } else if (keep_ > carry_at_ && !carry_.empty()) {
      carry_.erase(0, static_cast<size_t>(keep_ - carry_at_));
      carry_at_ = keep_;
    }
    const uint64_t from = std::max(keep_, cur_at_);
    if (carry_.empty()) carry_at_ = std::min(from, at);
    if (from < at) {
      carry_.append(cur_ + (from - cur_at_), static_cast<size_t>(at - from));
    }
    if (carry_.size() > kMaxHeld) {  // no header chain is this long
      carry_.clear();
      carry_at_ = at;
    }
  }
  cur_ = nullptr;
  cur_size_ = 0;
  cur_at_ = at;
}

void StreamWindow::Handed(const char* data, size_t n) {
  Retire();
  cur_ = data;
  cur_size_ = n;
}

void StreamWindow::Skipped(uint64_t n) { Moved(end() + n); }

void StreamWindow::Moved(uint64_t offset) {
  carry_.clear();
  carry_at_ = offset;
  cur_ = nullptr;
  cur_size_ = 0;
  cur_at_ = offset;
}

void StreamWindow::KeepFrom(uint64_t offset) { keep_ = offset; }

void StreamWindow::Disable() {
  enabled_ = false;
  carry_ = std::string();
  carry_at_ = cur_at_;
}

bool StreamWindow::Get(uint64_t from, uint64_t to, std::string* scratch,
                       std::string_view* bytes) const {
  if (from > to || to > end()) return false;
  if (from >= cur_at_) {
    *bytes = std::string_view(cur_ + (from - cur_at_),
                              static_cast<size_t>(to - from));
    return true;
  }
  if (carry_.empty() || from < carry_at_) return false;
  const size_t skip = static_cast<size_t>(from - carry_at_);
  if (to <= cur_at_) {
    *bytes =
        std::string_view(carry_).substr(skip, static_cast<size_t>(to - from));
    return true;
  }
  scratch->assign(carry_, skip, std::string::npos);
  scratch->append(cur_, static_cast<size_t>(to - cur_at_));
  *bytes = *scratch;
  return true;
}

}  // namespace internal
}  // namespace ufspack
