// Copyright 2026 The ufspack Authors.
//
// The Reader's block-read methods for ufspack._core.Reader (bindings.cc
// binds them): what ufspack.BlockSampler and MyImageFolder's block reads
// use.  REQUIRES: the GIL held; each releases it while it works.
#ifndef UFSPACK_PYTHON_BLOCK_BINDINGS_H_
#define UFSPACK_PYTHON_BLOCK_BINDINGS_H_

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>

#include "ufspack/reader.h"

namespace py = pybind11;

namespace ufspack {

// Reader::BlockMembers as two int64 arrays (first, members).
py::tuple BlockMembers(const Reader& reader, uint64_t block_bytes);
// Reader::PrefetchBlocks of a sequence of record indices.
void PrefetchBlocks(const Reader& reader, const py::array_t<int64_t>& indices);
// Reader::block_stats as a dict.
py::dict BlockStats(const Reader& reader);

}  // namespace ufspack

#endif  // UFSPACK_PYTHON_BLOCK_BINDINGS_H_
