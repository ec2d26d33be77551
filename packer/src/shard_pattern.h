// Copyright 2026 The ufspack Authors.
//
// Shard patterns: WebDataset's brace notation for a list of archive files,
// 'shards-{000000..000099}.tar' or 'x-{a,b}.tar'.  A pattern comes from the
// command line, so it is untrusted: the number of names it makes is the
// product of its groups' sizes, bounded (kMaxShardNames) before a single
// name is made.
//
// Internal to the packer.  Thread safety: reentrant.
#ifndef UFSPACK_PACKER_SRC_SHARD_PATTERN_H_
#define UFSPACK_PACKER_SRC_SHARD_PATTERN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "ufspack/status.h"

namespace ufspack {
namespace internal {

// The most names one pattern may make (ten times the shards of the largest
// public WebDataset sets; each name is also stat'ed before the build).
inline constexpr uint64_t kMaxShardNames = 1000000;

// The files of a shard pattern, in order: each {FIRST..LAST} a range of
// zero-padded numbers (as wide as FIRST), each {a,b,c} a list; several
// groups multiply, the last varying fastest.  A path without braces is
// itself.  InvalidArgument, naming the group, for a range that is not one
// (FIRST > LAST, not decimal), and, naming the count, for a pattern that
// would make more than `max_names` names; nothing is expanded then.
Status ExpandShards(const std::string& pattern, std::vector<std::string>* out,
                    uint64_t max_names = kMaxShardNames);

}  // namespace internal
}  // namespace ufspack

#endif  // UFSPACK_PACKER_SRC_SHARD_PATTERN_H_
