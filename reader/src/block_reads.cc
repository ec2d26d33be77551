// Copyright 2026 The ufspack Authors.
//
// The Reader's block-read methods (ReaderOptions::block_bytes): grouping
// records by block, background fetches, and what block reads did.  The
// reads themselves go through BlockFile (block_file.h).

#include <algorithm>
#include <string>
#include <vector>

#include "pack_source.h"
#include "ufspack/reader.h"

namespace ufspack {

Status Reader::BlockMembers(uint64_t block_bytes, std::vector<uint64_t>* first,
                            std::vector<uint64_t>* members) const {
  if (block_bytes == 0) {
    return Status::InvalidArgument(info().index_path +
                                   ": block_bytes must be at least 1");
  }
  const uint64_t n = size();
  // Pass 1: each record's (part, block in its part), and each part's
  // block count.  Pass 2: block numbers, parts one after another, then a
  // counting sort (stable: record order within a block).
  std::vector<uint64_t> block(n);
  std::vector<uint32_t> part(n);
  std::vector<uint64_t> part_blocks;
  for (uint64_t i = 0; i < n; ++i) {
    Record r;
    UFSPACK_RETURN_IF_ERROR(GetRecord(i, &r));
    block[i] = r.offset / block_bytes;
    part[i] = r.part;
    if (part_blocks.size() <= r.part) part_blocks.resize(r.part + 1, 0);
    part_blocks[r.part] = std::max(part_blocks[r.part], block[i] + 1);
  }
  std::vector<uint64_t> base(part_blocks.size() + 1, 0);
  for (size_t k = 0; k < part_blocks.size(); ++k) {
    base[k + 1] = base[k] + part_blocks[k];
  }
  const uint64_t blocks = base.back();
  first->assign(blocks + 1, 0);
  for (uint64_t i = 0; i < n; ++i) {
    block[i] += base[part[i]];
    (*first)[block[i] + 1]++;
  }
  for (uint64_t b = 0; b < blocks; ++b) (*first)[b + 1] += (*first)[b];
  members->assign(n, 0);
  std::vector<uint64_t> at(first->begin(), first->end() - 1);
  for (uint64_t i = 0; i < n; ++i) (*members)[at[block[i]]++] = i;
  return Status::OK();
}

Status Reader::PrefetchBlocks(const uint64_t* indices, size_t count) const {
  std::vector<Record> records(count);
  for (size_t k = 0; k < count; ++k) {
    UFSPACK_RETURN_IF_ERROR(GetRecord(indices[k], &records[k]));
  }
  source_->PrefetchBlocks(records.data(), count);
  return Status::OK();
}

BlockReadStats Reader::block_stats() const { return source_->block_stats(); }

}  // namespace ufspack
