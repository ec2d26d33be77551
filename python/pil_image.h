// Copyright 2026 The ufspack Authors.
//
// The pixel rows of a PIL "RGB" image, so that a decoder can write into a
// new image in place (RgbxDecoder: 4 bytes a pixel, R, G, B, X = 255).
// This reads Pillow's private struct ImagingMemoryInstance, which is not an
// API: PilRgbRows trusts it only as far as it checks it.
#ifndef UFSPACK_PYTHON_PIL_IMAGE_H_
#define UFSPACK_PYTHON_PIL_IMAGE_H_

#include <pybind11/pybind11.h>

#include <cstdint>
#include <vector>

namespace py = pybind11;

namespace ufspack {

// The rows of `image` (a new PIL image of `width` x `height`) into *rows.
// Used only if the image is exactly what the decoder writes: mode "RGB"
// with 3 bands, that size, 4 bytes a pixel, rows of width * 4 bytes, the
// 32-bit row table and no 8-bit one, and (Pillow < 11, where
// ImagingCore.unsafe_ptrs is not deprecated) the same row table as
// unsafe_ptrs reports.  Anything else, a missing attribute included,
// returns false: the caller then decodes to an array instead.  The rows
// live as long as `image`.  REQUIRES: the GIL held.
bool PilRgbRows(const py::object& image, int width, int height,
                std::vector<uint8_t*>* rows);

}  // namespace ufspack

#endif  // UFSPACK_PYTHON_PIL_IMAGE_H_
