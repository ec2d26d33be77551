// Copyright 2026 The ufspack Authors.
//
// RgbxSample: one record decoded into rows the caller allocates (4 bytes a
// pixel, R, G, B, X = 255: how PIL holds an "RGB" image), in two steps with
// the caller allocating in between:
//   1. SampleLoader::LoadRgbx reads the record and RgbxDecoder::Prepare's
//      it (the size);
//   2. the caller sets `rows` (height rows of width * 4 bytes), or leaves
//      them empty to have the pixels decoded into `array` instead (HxWx3);
//   3. DecodeRgbxBatch decodes.
//
// Thread safety: a plain value; DecodeRgbxBatch touches no Python object.
// Lifetimes: `rows` must stay valid until DecodeRgbxBatch returns; the
// decoder points into `bytes`, so a sample must not be moved from step 1 to
// step 3 (a vector of them may be moved whole).
#ifndef UFSPACK_LOADER_RGBX_SAMPLE_H_
#define UFSPACK_LOADER_RGBX_SAMPLE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "ufspack/decode.h"
#include "ufspack/status.h"

namespace ufspack {

struct RgbxSample {
  // Whether step 1 succeeded, so that the caller should allocate rows.
  bool prepared_ok() const { return status.ok() && prepared.ok(); }
  // Whether the pixels are in `rows` or `array` (else PIL must decode
  // `bytes`: NotSupported, or an error PIL reports its own way).
  bool decoded_ok() const { return prepared_ok() && decoded.ok(); }

  Status status;  // reading the record
  std::string bytes;
  RgbxDecoder decoder;
  Status prepared;             // decoder.Prepare's
  std::vector<uint8_t*> rows;  // the caller's rows, or empty: use `array`
  Status decoded;              // DecodeInto's, or DecodeRgb's into `array`
  RgbImage array;
};

// Step 3 for every sample that prepared_ok(), on up to `threads` threads.
void DecodeRgbxBatch(std::vector<RgbxSample>* samples, int threads);

}  // namespace ufspack

#endif  // UFSPACK_LOADER_RGBX_SAMPLE_H_
