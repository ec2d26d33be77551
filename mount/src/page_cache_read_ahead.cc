// Copyright 2026 The ufspack Authors.
#include "page_cache_read_ahead.h"

#include <algorithm>

namespace ufspack {
namespace mount {

PageCacheReadAhead::PageCacheReadAhead(const Reader* reader, uint64_t distance)
    : reader_(reader), distance_(distance) {}

void PageCacheReadAhead::Read(const Record& r) {
  if (distance_ == 0) return;
  const uint64_t end = r.offset + r.stored_length;
  uint64_t from = 0, to = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++tick_;
    Stream* s = nullptr;
    Stream* oldest = &streams_[0];
    for (Stream& t : streams_) {
      if (t.used && t.part == r.part && t.next == r.index) {
        s = &t;
        break;
      }
      if (!t.used || (oldest->used && t.last_use < oldest->last_use)) {
        oldest = &t;
      }
    }
    if (s == nullptr) {  // a new run, maybe: nothing asked for yet
      *oldest = Stream{true, r.part, r.index + 1, end, tick_};
      return;
    }
    s->next = r.index + 1;
    s->last_use = tick_;
    from = std::max(s->hinted_to, end);
    to = end + distance_;
    if (to < from + std::min(kStepBytes, distance_)) return;
    s->hinted_to = to;
  }
  const uint64_t asked = reader_->WillNeed(r.part, from, to - from);
  if (asked == 0) return;  // past the end of the data file
  stats_.hints.fetch_add(1, std::memory_order_relaxed);
  stats_.hinted_bytes.fetch_add(asked, std::memory_order_relaxed);
}

}  // namespace mount
}  // namespace ufspack
