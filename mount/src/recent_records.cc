// Copyright 2026 The ufspack Authors.
#include "recent_records.h"

#include <utility>

namespace ufspack {
namespace mount {

RecentRecords::RecentRecords(size_t slots)
    : count_(slots > 0 ? slots : 1), slots_(new Slot[count_]) {}

int RecentRecords::Get(uint64_t key,
                       const std::function<int(std::string*)>& load,
                       std::shared_ptr<const std::string>* out) {
  // Keys are inodes, consecutive for neighbouring files: a multiplicative
  // hash spreads them.
  Slot& slot = slots_[(key * 0x9E3779B97F4A7C15ull >> 32) % count_];
  std::lock_guard<std::mutex> lock(slot.mu);
  if (slot.bytes == nullptr || slot.key != key) {
    auto bytes = std::make_shared<std::string>();
    if (int err = load(bytes.get()); err != 0) return err;
    slot.key = key;
    slot.bytes = std::move(bytes);
  }
  *out = slot.bytes;
  return 0;
}

}  // namespace mount
}  // namespace ufspack
