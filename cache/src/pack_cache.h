// Copyright 2026 The ufspack Authors.
//
// The raw-record view of one pack in every tier of a Cache (the
// PackCache a Reader uses).  Not part of the installed API.
#ifndef UFSPACK_CACHE_PACK_CACHE_H_
#define UFSPACK_CACHE_PACK_CACHE_H_

#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "store.h"
#include "ufspack/file.h"
#include "ufspack/record_cache.h"

namespace ufspack {
namespace cache_internal {

class PackCacheImpl final : public PackCache {
 public:
  // `index_fd`: the verified index copy, open (owned from here), or -1 to
  // map `index_path` (the source's index).
  PackCacheImpl(std::vector<std::unique_ptr<Table>> tables,
                std::string index_path, int index_fd, Status source_status)
      : tables_(std::move(tables)),
        index_path_(std::move(index_path)),
        index_fd_(index_fd),
        source_status_(std::move(source_status)) {}
  ~PackCacheImpl() override {
    if (index_fd_ >= 0) ::close(index_fd_);
  }

  const std::string& index_path() const override { return index_path_; }
  // The copy is mapped from the descriptor it was verified through, never
  // opened again by name (the cache directory is untrusted).
  Status MapIndex(std::unique_ptr<Region>* index) const override {
    if (index_fd_ < 0) return PackCache::MapIndex(index);
    return MapFd(index_fd_, index_path_, index);
  }
  const Status& source_status() const override { return source_status_; }

  bool Lookup(uint64_t i, uint64_t length, uint64_t checksum,
              char* dst) override {
    for (auto& t : tables_) {
      if (t->Lookup(i, length, checksum, dst)) return true;
    }
    return false;
  }

  void Insert(uint64_t i, const char* data, uint64_t length,
              uint64_t checksum) override {
    Put(i, data, length, checksum);
  }

  // The first tier with room takes the record (RAM, then disk).
  Table::PutResult Put(uint64_t i, const char* data, uint64_t length,
                       uint64_t checksum) {
    Table::PutResult last = Table::PutResult::kRefused;
    for (auto& t : tables_) {
      last = t->Put(i, data, length, checksum);
      if (last == Table::PutResult::kStored ||
          last == Table::PutResult::kPresent) {
        return last;
      }
    }
    return last;
  }

  // Table::PutMany over the tiers: what one tier refuses goes to the next.
  void PutMany(std::vector<Table::Item> items,
               std::vector<Table::PutResult>* results) {
    results->assign(items.size(), Table::PutResult::kRefused);
    std::vector<size_t> where(items.size());
    for (size_t k = 0; k < where.size(); ++k) where[k] = k;
    for (auto& t : tables_) {
      if (items.empty()) break;
      std::vector<Table::PutResult> r;
      t->PutMany(items, &r);
      std::vector<Table::Item> next;
      std::vector<size_t> next_where;
      for (size_t k = 0; k < items.size(); ++k) {
        (*results)[where[k]] = r[k];
        if (r[k] == Table::PutResult::kRefused ||
            r[k] == Table::PutResult::kFailed) {  // kTooLarge: anywhere
          next.push_back(items[k]);
          next_where.push_back(where[k]);
        }
      }
      items = std::move(next);
      where = std::move(next_where);
    }
  }

  bool Contains(uint64_t i) const {
    for (auto& t : tables_) {
      if (t->Contains(i)) return true;
    }
    return false;
  }

  bool empty() const { return tables_.empty(); }

 private:
  std::vector<std::unique_ptr<Table>> tables_;  // RAM tier first
  const std::string index_path_;
  const int index_fd_;
  const Status source_status_;
};

}  // namespace cache_internal
}  // namespace ufspack

#endif  // UFSPACK_CACHE_PACK_CACHE_H_
