// Copyright 2026 The ufspack Authors.
//
// DecodeRgb with one decoder forced, for the benchmarks and tests that
// compare them.  Internal to decode (not installed); exported for them in
// shared builds.
//
// Thread safety: as DecodeRgb (reentrant).
#ifndef UFSPACK_DECODE_SRC_DECODERS_H_
#define UFSPACK_DECODE_SRC_DECODERS_H_

#include <cstddef>

#include "ufspack/decode.h"
#include "ufspack/export.h"
#include "ufspack/status.h"

namespace ufspack {

// DecodeRgb forcing one decoder:
// JPEG through TurboJPEG, or any format through OpenCV's imdecode (JPEG
// included, with the BGR->RGB reorder).
UFSPACK_EXPORT Status DecodeRgbTurboJpeg(const void* data, size_t size,
                                         RgbImage* out);
UFSPACK_EXPORT Status DecodeRgbOpenCv(const void* data, size_t size,
                                      RgbImage* out);

}  // namespace ufspack

#endif  // UFSPACK_DECODE_SRC_DECODERS_H_
