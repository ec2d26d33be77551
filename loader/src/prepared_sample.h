// Copyright 2026 The ufspack Authors.
//
// PreparedSample: one record made ready for a fused decode + transform
// (MyImageFolder(fast_transforms=...)).  A sample goes through two phases,
// with the caller in between drawing the random parameters for the image's
// size (as torchvision would) into a TransformSpec:
//   1. Prepare: the record's bytes and its image size (the JPEG header
//      only; other formats the fast decoder handles are decoded in full;
//      anything else is left for PIL, whose pixels SetPixels takes);
//   2. TransformPrepared: TransformJpeg on the bytes, or TransformRgb on the
//      pixels, straight into an output buffer the caller owns.
//
// Thread safety: a PreparedSample is a plain value; the functions touch no
// Python object and may run concurrently on different samples.
#ifndef UFSPACK_LOADER_PREPARED_SAMPLE_H_
#define UFSPACK_LOADER_PREPARED_SAMPLE_H_

#include <string>
#include <vector>

#include "ufspack/decode.h"
#include "ufspack/status.h"
#include "ufspack/transform.h"

namespace ufspack {

struct PreparedSample {
  enum Kind { kJpeg, kPixels, kNeedsPil };

  // Phase 1 on a record's bytes (taken over): sets kind, width and height.
  void Prepare(std::string bytes);
  // Takes decoded pixels (PIL's, for a kNeedsPil sample): kind kPixels.
  void SetPixels(RgbImage image);

  Status status;  // reading the record
  Kind kind = kNeedsPil;
  std::string data;  // the encoded bytes
  RgbImage pixels;   // kPixels
  int width = 0, height = 0;
};

// Phase 2 for one sample into `out` (spec.output_bytes() bytes).
// NotSupported: PIL must decode (kNeedsPil, or a JPEG libjpeg warned
// about); the caller then SetPixels and runs it again.
Status TransformPrepared(const PreparedSample& sample,
                         const TransformSpec& spec, void* out);

// TransformPrepared(*samples[k], specs[k], outs[k]) for every k, on up to
// `threads` threads.  REQUIRES: the three have the same size.
std::vector<Status> TransformPreparedBatch(
    const std::vector<const PreparedSample*>& samples,
    const std::vector<TransformSpec>& specs, const std::vector<void*>& outs,
    int threads);

}  // namespace ufspack

#endif  // UFSPACK_LOADER_PREPARED_SAMPLE_H_
