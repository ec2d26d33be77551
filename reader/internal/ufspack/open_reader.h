// Copyright 2026 The ufspack Authors.
//
// Opening a Reader over storage that is already open: tests, fuzzers, fault
// injection, and the uploader (which verifies a pack through a borrowed
// file).  Internal to ufspack's targets (not installed).
//
// Thread safety: reentrant.
#ifndef UFSPACK_OPEN_READER_H_
#define UFSPACK_OPEN_READER_H_

#include <memory>

#include "ufspack/export.h"
#include "ufspack/file.h"
#include "ufspack/reader.h"
#include "ufspack/status.h"

namespace ufspack {
namespace internal {

// Reader::Open of a single pack whose index is `index` and data file
// `data`; takes ownership of both.  Errors as Reader::Open's.
UFSPACK_EXPORT Status OpenReader(std::unique_ptr<Region> index,
                                 std::unique_ptr<RandomAccessFile> data,
                                 const ReaderOptions& options,
                                 std::unique_ptr<Reader>* reader);

}  // namespace internal
}  // namespace ufspack

#endif  // UFSPACK_OPEN_READER_H_
