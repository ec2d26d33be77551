// Copyright 2026 The ufspack Authors.
//
// Table (store.h): one table's slot words in a shared mapping and its
// entries in an append-only log (docs/cache.md, "Slots header", "Entry").
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "store.h"
#include "ufspack/coding.h"
#include "ufspack/format.h"

namespace ufspack {
namespace cache_internal {

// --- Table
// --------------------------------------------------------------------

Table::~Table() {
  if (slots_ != nullptr) ::munmap(slots_, slots_bytes_);
  if (log_fd_ >= 0) ::close(log_fd_);
  if (key_fd_ >= 0) ::close(key_fd_);
}

std::atomic<uint64_t>* Table::header_word(uint64_t offset) const {
  return reinterpret_cast<std::atomic<uint64_t>*>(slots_ + offset);
}

std::atomic<uint64_t>* Table::slot_word(uint64_t slot) const {
  return header_word(kSlotsHeaderSize + 8 * slot);
}

bool Table::Contains(uint64_t slot) const {
  return slot < slot_count_ &&
         slot_word(slot)->load(std::memory_order_acquire) != 0;
}

// A slot word: bits 63..24 hold (log offset / 8) + 1, bits 23..0 the
// entry's length.  0 is an empty slot.
bool Table::ReadEntry(uint64_t slot, uint64_t w, char* dst, uint64_t length,
                      const uint64_t* expected_checksum) {
  const uint64_t offset = ((w >> 24) - 1) * 8;
  const uint64_t len = w & kMaxEntryLength;
  if (len != length) {
    Drop(slot, w);
    return false;
  }
  char hdr[kEntryHeaderSize];
  struct iovec iov[2] = {{hdr, sizeof(hdr)}, {dst, static_cast<size_t>(len)}};
  const uint64_t total = kEntryHeaderSize + len;
  uint64_t done = 0;
  int iovcnt = 2;
  struct iovec* v = iov;
  while (done < total) {
    ssize_t n = ::preadv(log_fd_, v, iovcnt, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      store_->Count(kErrors);
      store_->WarnOnce("read", "cache " + store_->dir() + ": reading " + dir() +
                                   "/log failed (" + std::strerror(errno) +
                                   "); reading from the source instead");
      return false;
    }
    if (n == 0) break;
    done += static_cast<uint64_t>(n);
    // Advance the iovecs past what was read.
    size_t left = static_cast<size_t>(n);
    while (iovcnt > 0 && left >= v->iov_len) {
      left -= v->iov_len;
      ++v;
      --iovcnt;
    }
    if (iovcnt > 0) {
      v->iov_base = static_cast<char*>(v->iov_base) + left;
      v->iov_len -= left;
    }
  }
  const uint64_t checksum = DecodeFixed64(hdr + 24);
  if (done != total || DecodeFixed32(hdr) != kEntryMagic ||
      DecodeFixed32(hdr + 4) != len || DecodeFixed64(hdr + 8) != slot ||
      DecodeFixed64(hdr + 16) != table_id_ ||
      (expected_checksum != nullptr && checksum != *expected_checksum) ||
      Checksum64(dst, static_cast<size_t>(len)) != checksum) {
    Drop(slot, w);
    return false;
  }
  return true;
}

void Table::Drop(uint64_t slot, uint64_t w) {
  if (slot_word(slot)->compare_exchange_strong(w, 0)) {
    store_->Count(kDropped);
    store_->Count(kEntries, -1);
    header_word(kSlEntries)->fetch_sub(1);
  }
}

bool Table::Lookup(uint64_t slot, uint64_t length, uint64_t checksum,
                   char* dst) {
  if (slot < slot_count_) {
    const uint64_t w = slot_word(slot)->load(std::memory_order_acquire);
    if (w != 0 && ReadEntry(slot, w, dst, length, &checksum)) {
      store_->CountLookup(true);
      return true;
    }
  }
  store_->CountLookup(false);
  return false;
}

bool Table::Get(uint64_t slot, std::string* out) {
  if (slot < slot_count_) {
    const uint64_t w = slot_word(slot)->load(std::memory_order_acquire);
    if (w != 0) {
      out->resize(static_cast<size_t>(w & kMaxEntryLength));
      if (ReadEntry(slot, w, out->data(), out->size(), nullptr)) {
        store_->CountLookup(true);
        return true;
      }
    }
  }
  out->clear();
  store_->CountLookup(false);
  return false;
}

void Table::Release(uint64_t offset, uint64_t size) {
  // Whatever part of the write reached the disk is deallocated first, so
  // the charge can go without the directory outgrowing it.  Where the file
  // system cannot punch holes the charge stays (space wasted, limit kept).
  if (::fallocate(log_fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                  static_cast<off_t>(offset), static_cast<off_t>(size)) == 0) {
    header_word(kSlCharged)->fetch_sub(size);
    store_->Unreserve(size);
  }
}

void Table::EncodeEntryHeader(char* hdr, uint64_t slot, uint64_t length,
                              uint64_t checksum) const {
  EncodeFixed32(hdr, kEntryMagic);
  EncodeFixed32(hdr + 4, static_cast<uint32_t>(length));
  EncodeFixed64(hdr + 8, slot);
  EncodeFixed64(hdr + 16, table_id_);
  EncodeFixed64(hdr + 24, checksum);
}

bool Table::Publish(uint64_t slot, uint64_t offset, uint64_t length) {
  uint64_t expected = 0;
  const uint64_t w = ((offset / 8 + 1) << 24) | length;
  if (!slot_word(slot)->compare_exchange_strong(expected, w,
                                                std::memory_order_release)) {
    return false;  // another process filled it meanwhile
  }
  header_word(kSlEntries)->fetch_add(1);
  store_->Count(kEntries);
  store_->Count(kInserts);
  return true;
}

void Table::PutMany(const std::vector<Item>& items,
                    std::vector<PutResult>* results) {
  results->assign(items.size(), PutResult::kPresent);
  std::vector<size_t> todo;
  uint64_t total = 0;
  for (size_t k = 0; k < items.size(); ++k) {
    const Item& it = items[k];
    if (it.slot >= slot_count_) {
      (*results)[k] = PutResult::kRefused;
    } else if (it.length > kMaxEntryLength) {
      (*results)[k] = PutResult::kTooLarge;
    } else if (slot_word(it.slot)->load(std::memory_order_acquire) == 0) {
      todo.push_back(k);
      total += RoundUp(kEntryHeaderSize + it.length, 8);
    }
  }
  if (todo.empty()) return;
  if (store_->writes_disabled()) {
    for (size_t k : todo) (*results)[k] = PutResult::kFailed;
    return;
  }
  if (!store_->Reserve(total, this)) {
    // The run does not fit: offer its entries one by one (some may).
    if (todo.size() == 1) {
      (*results)[todo[0]] = PutResult::kRefused;
      return;
    }
    std::vector<PutResult> one;
    for (size_t k : todo) {
      PutMany({items[k]}, &one);
      (*results)[k] = one[0];
    }
    return;
  }
  header_word(kSlCharged)->fetch_add(total);
  const uint64_t offset = header_word(kSlTail)->fetch_add(total);
  if (((offset + total) / 8 + 1) >> 40 != 0) {
    store_->Count(kRefused);
    for (size_t k : todo) (*results)[k] = PutResult::kRefused;
    return;
  }
  static const char kZeros[8] = {0};
  std::vector<char> headers(todo.size() * kEntryHeaderSize);
  std::vector<struct iovec> iov;
  std::vector<uint64_t> offsets;
  uint64_t at = offset;
  for (size_t j = 0; j < todo.size(); ++j) {
    const Item& it = items[todo[j]];
    char* hdr = headers.data() + j * kEntryHeaderSize;
    EncodeEntryHeader(hdr, it.slot, it.length, it.checksum);
    iov.push_back({hdr, kEntryHeaderSize});
    if (it.length > 0) {
      iov.push_back(
          {const_cast<char*>(it.data), static_cast<size_t>(it.length)});
    }
    const uint64_t size = RoundUp(kEntryHeaderSize + it.length, 8);
    const uint64_t pad = size - kEntryHeaderSize - it.length;
    if (pad > 0 && j + 1 < todo.size()) {
      iov.push_back({const_cast<char*>(kZeros), static_cast<size_t>(pad)});
    }
    offsets.push_back(at);
    at += size;
  }
  Status ws = WriteVec(log_fd_, std::move(iov), offset);
  if (!ws.ok()) {
    store_->WriteFailed("writing " + dir() + "/log", ws);
    Release(offset, total);
    for (size_t k : todo) (*results)[k] = PutResult::kFailed;
    return;
  }
  for (size_t j = 0; j < todo.size(); ++j) {
    const Item& it = items[todo[j]];
    (*results)[todo[j]] = Publish(it.slot, offsets[j], it.length)
                              ? PutResult::kStored
                              : PutResult::kPresent;
  }
}

Table::PutResult Table::Put(uint64_t slot, const char* data, uint64_t length,
                            uint64_t checksum) {
  std::vector<PutResult> result;
  PutMany({{slot, data, length, checksum}}, &result);
  return result[0];
}

}  // namespace cache_internal
}  // namespace ufspack
