// Copyright 2026 The ufspack Authors.
//
// The parts of a merged pack, as the Reader holds them (reader/src/merged.cc
// implements the Reader's merged-pack methods).  Private to the reader.
//
// Thread safety: a part is opened at most once (std::call_once), by the
// first thread that needs it; every other field is immutable after Open().
#ifndef UFSPACK_READER_SRC_MERGED_H_
#define UFSPACK_READER_SRC_MERGED_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ufspack/manifest.h"
#include "ufspack/reader.h"
#include "ufspack/status.h"

namespace ufspack {
namespace internal {

struct PartSlot {
  std::string path;  // the part's directory, resolved
  std::once_flag once;
  std::unique_ptr<Reader> reader;   // set by the first successful use
  Status status;                    // of that first use
  std::atomic<bool> opened{false};  // reader is set (ReleaseIndex)
  // The part's segments, by local first record: (local first, global
  // first, count), for mapping its record indices to global ones.
  struct Run {
    uint64_t local = 0, global = 0, count = 0;
  };
  std::vector<Run> runs;
};

struct PartSet {
  Manifest manifest;      // views into the Reader's index_ (the manifest bytes)
  ReaderOptions options;  // each part is opened with these
  bool remote = false;    // the parts are URLs
  std::unique_ptr<PartSlot[]> slots;  // manifest.parts.size() of them
};

}  // namespace internal
}  // namespace ufspack

#endif  // UFSPACK_READER_SRC_MERGED_H_
