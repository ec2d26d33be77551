// Copyright 2026 The ufspack Authors.
//
// numpy and buffer-protocol conversions.  REQUIRES: the GIL held.
#ifndef UFSPACK_PYTHON_BUFFERS_H_
#define UFSPACK_PYTHON_BUFFERS_H_

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>

#include "ufspack/decode.h"

namespace py = pybind11;

namespace ufspack {

// An HxWx3 uint8 array that takes ownership of img->pixels (no copy).
py::array_t<uint8_t> ToArray(RgbImage* img);

// A new 1-D int64 array of `n` elements (uninitialised), its stride given.
// pybind11 before 2.12 (Debian 12 ships 2.10) computes a new array's
// strides from the item size it reads out of numpy 1's PyArray_Descr
// layout; numpy 2 moved that field, so an array_t<T>(n) made there has
// stride 0: every element aliases the first, silently.  Every array this
// module makes passes its strides.
py::array_t<int64_t> NewInt64Array(size_t n);

// Whether the buffer's bytes are contiguous in C order (dimensions of one
// element may have any stride).
bool IsContiguous(const py::buffer_info& b);

// The buffer's size in bytes.
inline size_t ByteSize(const py::buffer_info& b) {
  return static_cast<size_t>(b.size) * b.itemsize;
}

}  // namespace ufspack

#endif  // UFSPACK_PYTHON_BUFFERS_H_
