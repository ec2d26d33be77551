// Copyright 2026 The ufspack Authors.
//
// The Reader's block-read methods (ReaderOptions::block_bytes): grouping
// records by block, background fetches, and what block reads did.  The
// reads themselves go through BlockFile (block_file.h).

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "pack_source.h"
#include "ufspack/reader.h"

namespace ufspack {

namespace {

// Runs fn(t, lo, hi) for t in [0, threads), the records [0, n) cut into
// `threads` contiguous ranges in order; the last on the calling thread.
template <typename Fn>
void ForEachRange(uint64_t threads, uint64_t n, const Fn& fn) {
  std::vector<std::thread> pool;
  for (uint64_t t = 0; t < threads; ++t) {
    const uint64_t lo = n * t / threads, hi = n * (t + 1) / threads;
    if (t + 1 == threads) {
      fn(t, lo, hi);
    } else {
      pool.emplace_back([&fn, t, lo, hi] { fn(t, lo, hi); });
    }
  }
  for (auto& th : pool) th.join();
}

// Pass 1 of BlockMembers over records [lo, hi): each record's block within
// its part (and its part, for a merged pack), and the blocks each part
// needs.
struct BlockPass {
  Status status;
  std::vector<uint64_t> part_blocks;

  void Run(const internal::PackSource& source, uint64_t block_bytes,
           uint64_t lo, uint64_t hi, uint32_t* block, uint32_t* part) {
    constexpr uint64_t kChunk = 1 << 14;
    std::vector<uint64_t> offsets(kChunk);
    std::vector<uint32_t> parts(kChunk);
    for (uint64_t at = lo; at < hi; at += kChunk) {
      const uint64_t n = std::min(kChunk, hi - at);
      status = source.RecordOffsets(at, n, offsets.data(), parts.data());
      if (!status.ok()) return;
      for (uint64_t k = 0; k < n; ++k) {
        const uint64_t b = offsets[k] / block_bytes;
        if (b >= UINT32_MAX) {
          status = Status::InvalidArgument(
              source.info().index_path + ": block_bytes " +
              std::to_string(block_bytes) + " makes more than 2^32 blocks");
          return;
        }
        block[at - lo + k] = static_cast<uint32_t>(b);
        if (part != nullptr) part[at - lo + k] = parts[k];
        if (part_blocks.size() <= parts[k]) part_blocks.resize(parts[k] + 1);
        part_blocks[parts[k]] = std::max(part_blocks[parts[k]], b + 1);
      }
    }
  }
};

}  // namespace

Status Reader::BlockMembers(uint64_t block_bytes, std::vector<uint64_t>* first,
                            std::vector<uint64_t>* members) const {
  members->resize(size());
  return BlockMembers(block_bytes, first, members->data());
}

Status Reader::BlockMembers(uint64_t block_bytes, std::vector<uint64_t>* first,
                            uint64_t* members) const {
  if (block_bytes == 0) {
    return Status::InvalidArgument(info().index_path +
                                   ": block_bytes must be at least 1");
  }
  const uint64_t n = size();
  // A parallel counting sort, on up to 8 threads (an index of 100M records
  // is 5.6 GB of entries to touch), each over a contiguous range of
  // records.  Pass 1: each record's block in its part (and its part), and
  // each part's block count.  Pass 2: block numbers of the pack (parts one
  // after another) and each range's count per block.  Pass 3: each range
  // writes its records where its counts say, so a block's records stay in
  // record order.
  constexpr uint64_t kRecordsPerThread = 1 << 16;  // at least
  const uint64_t threads = std::clamp<uint64_t>(
      std::min<uint64_t>(std::thread::hardware_concurrency(),
                         n / kRecordsPerThread),
      1, 8);
  const bool merged = info().part_count > 0;
  std::unique_ptr<uint32_t[]> block(new uint32_t[n]);  // written by pass 1
  std::unique_ptr<uint32_t[]> part(merged ? new uint32_t[n] : nullptr);
  std::vector<BlockPass> passes(threads);
  ForEachRange(threads, n, [&](uint64_t t, uint64_t lo, uint64_t hi) {
    passes[t].Run(*source_, block_bytes, lo, hi, block.get() + lo,
                  merged ? part.get() + lo : nullptr);
  });
  std::vector<uint64_t> part_blocks;
  for (const BlockPass& p : passes) {  // in record order: the first error
    UFSPACK_RETURN_IF_ERROR(p.status);
    if (part_blocks.size() < p.part_blocks.size()) {
      part_blocks.resize(p.part_blocks.size());
    }
    for (size_t k = 0; k < p.part_blocks.size(); ++k) {
      part_blocks[k] = std::max(part_blocks[k], p.part_blocks[k]);
    }
  }
  std::vector<uint64_t> base(part_blocks.size() + 1, 0);
  for (size_t k = 0; k < part_blocks.size(); ++k) {
    base[k + 1] = base[k] + part_blocks[k];
  }
  const uint64_t blocks = base.back();
  if (blocks >= UINT32_MAX) {
    return Status::InvalidArgument(info().index_path + ": block_bytes " +
                                   std::to_string(block_bytes) +
                                   " makes more than 2^32 blocks");
  }
  // A count per block per range: no more ranges than keep those counters
  // within the size of `members` (tiny blocks in a huge pack: fewer).
  const uint64_t ranges =
      std::clamp<uint64_t>(n / std::max<uint64_t>(blocks, 1), 1, threads);
  std::vector<std::vector<uint64_t>> counts(ranges);
  ForEachRange(ranges, n, [&](uint64_t t, uint64_t lo, uint64_t hi) {
    std::vector<uint64_t>& c = counts[t];
    c.assign(blocks, 0);
    for (uint64_t i = lo; i < hi; ++i) {
      if (merged) block[i] += static_cast<uint32_t>(base[part[i]]);
      c[block[i]]++;
    }
  });
  part.reset();
  // first[b]: where block b starts; counts[t][b] becomes where range t's
  // records of block b go.
  first->assign(blocks + 1, 0);
  uint64_t at = 0;
  for (uint64_t b = 0; b < blocks; ++b) {
    (*first)[b] = at;
    for (uint64_t t = 0; t < ranges; ++t) {
      const uint64_t c = counts[t][b];
      counts[t][b] = at;
      at += c;
    }
  }
  (*first)[blocks] = at;
  uint64_t* out = members;  // first written here, by several threads
  ForEachRange(ranges, n, [&](uint64_t t, uint64_t lo, uint64_t hi) {
    std::vector<uint64_t>& next = counts[t];
    for (uint64_t i = lo; i < hi; ++i) out[next[block[i]]++] = i;
  });
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

uint64_t Reader::WillNeed(uint32_t part, uint64_t offset,
                          uint64_t length) const {
  if (length == 0 || options().cache != nullptr || prefers_batches()) return 0;
  return source_->WillNeed(part, offset, length);
}

}  // namespace ufspack
