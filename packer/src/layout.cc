// Copyright 2026 The ufspack Authors.

#include "ufspack/layout.h"

#include <charconv>
#include <numeric>
#include <utility>

namespace ufspack {

namespace {

// SplitMix64 (Steele, Lea and Flood, 2014), as in java.util.SplittableRandom.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t state) : state_(state) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, bound), bound > 0: Lemire's multiply-and-reject
  // (ACM TOMACS 2019), so no draw is biased towards small values.
  uint64_t Below(uint64_t bound) {
    unsigned __int128 m = static_cast<unsigned __int128>(Next()) * bound;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < bound) {
      const uint64_t threshold = (0 - bound) % bound;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(Next()) * bound;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

 private:
  uint64_t state_;
};

}  // namespace

Status ParseDataLayout(std::string_view text, DataLayout* out) {
  DataLayout l;
  if (text == "sorted") {
    *out = l;
    return Status::OK();
  }
  constexpr std::string_view kShuffled = "shuffled";
  constexpr std::string_view kSamples = "-samples";
  if (text.substr(0, kShuffled.size()) == kShuffled) {
    std::string_view rest = text.substr(kShuffled.size());
    l.shuffled = true;
    if (rest.substr(0, kSamples.size()) == kSamples) {
      l.samples = true;
      rest.remove_prefix(kSamples.size());
    }
    if (rest.empty()) {
      *out = l;
      return Status::OK();
    }
    if (rest.front() == ':' && rest.size() > 1 && rest.size() <= 21) {
      rest.remove_prefix(1);
      const char* end = rest.data() + rest.size();
      auto [p, ec] = std::from_chars(rest.data(), end, l.seed);
      if (ec == std::errc() && p == end) {
        *out = l;
        return Status::OK();
      }
    }
  }
  return Status::InvalidArgument(
      "layout '" + std::string(text) +
      "': expected 'sorted', 'shuffled[:SEED]' or 'shuffled-samples[:SEED]' "
      "(SEED a non-negative integer below 2^64)");
}

std::string DataLayoutName(const DataLayout& layout) {
  if (!layout.shuffled) return "sorted";
  return (layout.samples ? "shuffled-samples:" : "shuffled:") +
         std::to_string(layout.seed);
}

std::vector<uint32_t> ShuffledRunOrder(uint32_t n, uint64_t seed,
                                       uint64_t run) {
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  // The run number goes through the generator once so that neighbouring
  // runs (and seeds) start from unrelated states.
  SplitMix64 mix(seed);
  SplitMix64 rng(mix.Next() ^ SplitMix64(run).Next());
  for (uint32_t i = n; i > 1; --i) {
    const uint32_t j = static_cast<uint32_t>(rng.Below(i));
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

std::vector<uint32_t> ShuffledSampleOrder(const std::vector<uint32_t>& starts,
                                          uint64_t seed, uint64_t run) {
  const uint32_t samples = static_cast<uint32_t>(starts.size() - 1);
  std::vector<uint32_t> order;
  order.reserve(starts.back());
  for (uint32_t s : ShuffledRunOrder(samples, seed, run)) {
    for (uint32_t i = starts[s]; i < starts[s + 1]; ++i) order.push_back(i);
  }
  return order;
}

}  // namespace ufspack
