// Copyright 2026 The ufspack Authors.
#include "spill.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <utility>
#include <vector>

#include "publish.h"
#include "ufspack/coding.h"
#include "ufspack/format.h"
#include "ufspack/posix_io.h"

namespace ufspack {
namespace internal {
namespace {

constexpr size_t kSpillBuffer = 1 << 20;
constexpr size_t kPiece = 4 << 20;  // a multiple of 8

}  // namespace

Status SpillFile::Create(const std::string& dir, const char* prefix) {
  return CreateTemp(dir, prefix, &fd_, &path_);
}

Status SpillFile::Append(const void* p, size_t n) {
  buffer_.append(static_cast<const char*>(p), n);
  size_ += n;
  if (buffer_.size() >= kSpillBuffer) return Flush();
  return Status::OK();
}

Status SpillFile::Flush() {
  if (buffer_.empty()) return Status::OK();
  if (::lseek(fd_, static_cast<off_t>(written_), SEEK_SET) < 0) {
    return Status::FromErrno(path_ + ": lseek", errno);
  }
  UFSPACK_RETURN_IF_ERROR(WriteAll(fd_, buffer_.data(), buffer_.size(), path_));
  written_ += buffer_.size();
  buffer_.clear();
  return Status::OK();
}

Status SpillFile::WriteAt(uint64_t offset, const void* p, size_t n) {
  if (::lseek(fd_, static_cast<off_t>(offset), SEEK_SET) < 0) {
    return Status::FromErrno(path_ + ": lseek", errno);
  }
  UFSPACK_RETURN_IF_ERROR(WriteAll(fd_, static_cast<const char*>(p), n, path_));
  written_ = std::max<uint64_t>(written_, offset + n);
  size_ = std::max<uint64_t>(size_, written_);
  return Status::OK();
}

Status SpillFile::ReadAt(uint64_t offset, size_t n, void* dst) const {
  char* out = static_cast<char*>(dst);
  size_t done = 0;
  while (done < n) {
    const ssize_t r =
        ::pread(fd_, out + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(path_ + ": read", errno);
    }
    if (r == 0) {
      return Status::IOError(path_ + ": short read at " +
                             std::to_string(offset + done) + " (scratch file)");
    }
    done += static_cast<size_t>(r);
  }
  return Status::OK();
}

Status SpillFile::ForEachPiece(
    const std::function<Status(const char*, size_t)>& sink) const {
  std::string piece(static_cast<size_t>(std::min<uint64_t>(kPiece, size_)),
                    '\0');
  for (uint64_t at = 0; at < size_; at += piece.size()) {
    const size_t n =
        static_cast<size_t>(std::min<uint64_t>(kPiece, size_ - at));
    UFSPACK_RETURN_IF_ERROR(ReadAt(at, n, piece.data()));
    UFSPACK_RETURN_IF_ERROR(sink(piece.data(), n));
  }
  return Status::OK();
}

Status SpillFile::CopyTo(int fd, const std::string& fd_path) const {
  loff_t in = 0;
  while (static_cast<uint64_t>(in) < size_) {
    const ssize_t r =
        ::copy_file_range(fd_, &in, fd, nullptr,
                          static_cast<size_t>(std::min<uint64_t>(
                              size_ - static_cast<uint64_t>(in), 1u << 30)),
                          0);
    if (r > 0) continue;
    if (r < 0 && errno == EINTR) continue;
    if (r == 0 || errno == EXDEV || errno == EINVAL || errno == ENOSYS ||
        errno == EOPNOTSUPP) {
      break;  // copy the rest by hand
    }
    return Status::FromErrno(fd_path + ": copy from " + path_, errno);
  }
  std::string piece;
  while (static_cast<uint64_t>(in) < size_) {
    const size_t n = static_cast<size_t>(
        std::min<uint64_t>(kPiece, size_ - static_cast<uint64_t>(in)));
    piece.resize(n);
    UFSPACK_RETURN_IF_ERROR(ReadAt(static_cast<uint64_t>(in), n, piece.data()));
    UFSPACK_RETURN_IF_ERROR(WriteAll(fd, piece.data(), n, fd_path));
    in += static_cast<loff_t>(n);
  }
  return Status::OK();
}

void SpillFile::Remove() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!path_.empty()) ::unlink(path_.c_str());
  path_.clear();
  buffer_.clear();
}

void SpillFile::Forget() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  path_.clear();
  buffer_.clear();
}

Status BuildLookupTable(
    uint64_t n, const SpillFile& hashes,
    const std::function<Status(uint64_t, uint64_t)>& check_distinct,
    uint64_t stripe_slots, SpillFile* table) {
  const uint64_t slots = LookupSlotsFor(n);
  if (slots == 0) return Status::OK();
  const uint64_t stripe = std::min(slots, stripe_slots);
  const uint64_t stripes = slots / stripe;
  int shift = 0;
  while ((uint64_t{1} << shift) < stripe) ++shift;
  struct Key {
    uint64_t index, hash;
    bool operator==(const Key& o) const {
      return index == o.index && hash == o.hash;
    }
  };
  std::vector<uint32_t> vals(stripe), tags(stripe);
  std::vector<std::vector<Key>> carry_in(stripes);
  std::string encoded(stripe * 4, '\0');
  for (int iteration = 0;; ++iteration) {
    if (iteration == 64) {
      return Status::Corruption(
          "internal error: the lookup table's wrap-around did not settle");
    }
    bool settled = false;
    std::vector<Key> wrap;
    for (uint64_t s = 0; s < stripes; ++s) {
      std::fill(vals.begin(), vals.end(), 0);
      std::vector<Key> carry_out;
      const std::vector<Key>& in = carry_in[s];
      size_t next_carried = 0;
      // Probes from `pos` to the stripe's end; what runs off goes on in
      // the next stripe.
      auto insert = [&](uint64_t i, uint64_t h, uint64_t pos) -> Status {
        const uint32_t tag = NameHashTag(h);
        while (pos < stripe && vals[pos] != 0) {
          if (tags[pos] == tag) {
            UFSPACK_RETURN_IF_ERROR(check_distinct(vals[pos] - 1, i));
          }
          ++pos;
        }
        if (pos == stripe) {
          carry_out.push_back({i, h});
        } else {
          vals[pos] = static_cast<uint32_t>(i + 1);
          tags[pos] = tag;
        }
        return Status::OK();
      };
      auto carried_before = [&](uint64_t i) -> Status {
        while (next_carried < in.size() && in[next_carried].index < i) {
          UFSPACK_RETURN_IF_ERROR(
              insert(in[next_carried].index, in[next_carried].hash, 0));
          ++next_carried;
        }
        return Status::OK();
      };
      uint64_t i = 0;
      const Status scanned =
          hashes.ForEachPiece([&](const char* p, size_t len) -> Status {
            for (size_t off = 0; off + 8 <= len; off += 8, ++i) {
              const uint64_t h = DecodeFixed64(p + off);
              const uint64_t home = LookupHome(h, slots);
              if ((home >> shift) != s) continue;
              UFSPACK_RETURN_IF_ERROR(carried_before(i));
              UFSPACK_RETURN_IF_ERROR(insert(i, h, home & (stripe - 1)));
            }
            return Status::OK();
          });
      if (!scanned.ok()) return scanned;
      UFSPACK_RETURN_IF_ERROR(carried_before(UINT64_MAX));
      for (uint64_t k = 0; k < stripe; ++k) {
        EncodeFixed32(encoded.data() + 4 * k, vals[k]);
      }
      UFSPACK_RETURN_IF_ERROR(
          table->WriteAt(s * stripe * 4, encoded.data(), encoded.size()));
      if (s + 1 < stripes) {
        if (iteration > 0 && carry_out == carry_in[s + 1]) {
          settled = true;  // the later stripes are as they were
          break;
        }
        carry_in[s + 1] = std::move(carry_out);
      } else {
        wrap = std::move(carry_out);
      }
    }
    if (settled || wrap == carry_in[0]) return Status::OK();
    carry_in[0] = std::move(wrap);
  }
}

}  // namespace internal
}  // namespace ufspack
