// Copyright 2026 The ufspack Authors.
#include "buffers.h"

namespace ufspack {

py::array_t<uint8_t> ToArray(RgbImage* img) {
  const py::ssize_t h = img->height, w = img->width;
  uint8_t* p = img->pixels.release();
  py::capsule owner(p, [](void* q) { delete[] static_cast<uint8_t*>(q); });
  return py::array_t<uint8_t>({h, w, py::ssize_t{3}},
                              {w * 3, py::ssize_t{3}, py::ssize_t{1}}, p,
                              owner);
}

py::array_t<int64_t> NewInt64Array(size_t n) {
  return py::array_t<int64_t>({static_cast<py::ssize_t>(n)},
                              {static_cast<py::ssize_t>(sizeof(int64_t))});
}

bool IsContiguous(const py::buffer_info& b) {
  py::ssize_t expect = b.itemsize;
  for (int d = b.ndim - 1; d >= 0; --d) {
    if (b.shape[d] != 1 && b.strides[d] != expect) return false;
    expect *= b.shape[d];
  }
  return true;
}

}  // namespace ufspack
