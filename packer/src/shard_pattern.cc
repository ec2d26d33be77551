// Copyright 2026 The ufspack Authors.
//
// ExpandShards: the pattern is parsed into groups first, their product
// bounded with saturating arithmetic, and only then expanded.

#include "shard_pattern.h"

#include <string_view>
#include <utility>

#include "ufspack/text.h"

namespace ufspack {
namespace internal {

namespace {

// One brace group: a list of items, or a numeric range made lazily.
struct Group {
  std::string head;                // the literal text before the group
  std::vector<std::string> items;  // a list
  bool range = false;
  uint64_t first = 0, last = 0;
  size_t width = 0;  // a range's zero padding: FIRST's digits

  uint64_t size() const { return range ? last - first + 1 : items.size(); }
  std::string item(uint64_t k) const {
    if (!range) return items[k];
    std::string n = std::to_string(first + k);
    if (n.size() < width) n.insert(0, width - n.size(), '0');
    return n;
  }
};

bool Decimal(std::string_view x, uint64_t* v) {
  // 18 digits: below 2^63, so LAST - FIRST + 1 cannot overflow.
  if (x.empty() || x.size() > 18) return false;
  uint64_t n = 0;
  for (char c : x) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  *v = n;
  return true;
}

Status ParseGroup(const std::string& pattern, std::string_view body, Group* g) {
  const size_t dots = body.find("..");
  if (dots == std::string_view::npos) {
    for (size_t at = 0;;) {
      const size_t comma = body.find(',', at);
      g->items.emplace_back(body.substr(at, comma - at));
      if (comma == std::string_view::npos) break;
      at = comma + 1;
    }
    return Status::OK();
  }
  const std::string_view a = body.substr(0, dots), b = body.substr(dots + 2);
  if (!Decimal(a, &g->first) || !Decimal(b, &g->last) || g->first > g->last) {
    return Status::InvalidArgument(
        EscapeBytes(pattern) + ": '{" + EscapeBytes(body) +
        "}' is not a range of shard numbers (expected {FIRST..LAST} of "
        "decimal numbers, FIRST <= LAST, e.g. {000000..000099})");
  }
  g->range = true;
  g->width = a.size();
  return Status::OK();
}

// 1000000 as "1,000,000".
std::string Count(uint64_t n) {
  std::string s = std::to_string(n);
  for (size_t i = s.size(); i > 3; i -= 3) s.insert(i - 3, ",");
  return s;
}

}  // namespace

Status ExpandShards(const std::string& pattern, std::vector<std::string>* out,
                    uint64_t max_names) {
  out->clear();
  std::vector<Group> groups;
  size_t at = 0;
  for (;;) {
    const size_t open = pattern.find('{', at);
    const size_t close =
        open == std::string::npos ? open : pattern.find('}', open);
    if (close == std::string::npos) break;
    Group g;
    g.head = pattern.substr(at, open - at);
    const std::string_view body =
        std::string_view(pattern).substr(open + 1, close - open - 1);
    UFSPACK_RETURN_IF_ERROR(ParseGroup(pattern, body, &g));
    if (g.size() > max_names) {
      return Status::InvalidArgument(
          EscapeBytes(pattern) + ": '{" + EscapeBytes(body) + "}' is a " +
          (g.range ? "range" : "list") + " of " + Count(g.size()) +
          " shards, more than the limit of " + Count(max_names) +
          " names a pattern may make");
    }
    groups.push_back(std::move(g));
    at = close + 1;
  }
  const std::string tail = pattern.substr(at);
  // The product, saturated: 40 groups of {0,1} is 2^40, more than any limit.
  // The product, counted without overflow (40 groups of {0,1} make 2^40;
  // 64 of them more than 64 bits hold).
  uint64_t total = 1;
  bool overflow = false;
  for (const Group& g : groups) {
    overflow = overflow || __builtin_mul_overflow(total, g.size(), &total);
  }
  if (overflow || total > max_names) {
    return Status::InvalidArgument(
        EscapeBytes(pattern) + ": its " + std::to_string(groups.size()) +
        " brace groups would make " +
        (overflow ? "more than 2^64" : Count(total)) +
        " names, more than the limit of " + Count(max_names) +
        " (list the shards, or use one {FIRST..LAST} range)");
  }
  out->reserve(total);
  std::vector<uint64_t> k(groups.size(), 0);  // an odometer, last fastest
  for (uint64_t n = 0; n < total; ++n) {
    std::string name;
    for (size_t j = 0; j < groups.size(); ++j) {
      name += groups[j].head;
      name += groups[j].item(k[j]);
    }
    name += tail;
    out->push_back(std::move(name));
    for (size_t j = groups.size(); j-- > 0;) {
      if (++k[j] < groups[j].size()) break;
      k[j] = 0;
    }
  }
  return Status::OK();
}

}  // namespace internal
}  // namespace ufspack
