// Copyright 2026 The ufspack Authors.
#include "prepared_sample.h"

#include <cstddef>
#include <utility>

#include "ufspack/parallel.h"

namespace ufspack {

void PreparedSample::Prepare(std::string bytes) {
  data = std::move(bytes);
  if (ProbeJpeg(data.data(), data.size(), &width, &height).ok()) {
    kind = kJpeg;
    return;
  }
  if (SniffImageFormat(data.data(), data.size()) != ImageFormat::kJpeg &&
      DecodeRgb(data.data(), data.size(), &pixels).ok()) {
    kind = kPixels;
    width = pixels.width;
    height = pixels.height;
    return;
  }
  kind = kNeedsPil;  // PIL decodes (and raises what it raises)
}

void PreparedSample::SetPixels(RgbImage image) {
  pixels = std::move(image);
  kind = kPixels;
  width = pixels.width;
  height = pixels.height;
}

Status TransformPrepared(const PreparedSample& sample,
                         const TransformSpec& spec, void* out) {
  switch (sample.kind) {
    case PreparedSample::kJpeg:
      return TransformJpeg(sample.data.data(), sample.data.size(), spec, out);
    case PreparedSample::kPixels:
      return TransformRgb(
          sample.pixels.pixels.get(), sample.pixels.width, sample.pixels.height,
          static_cast<size_t>(sample.pixels.width) * 3, spec, out);
    case PreparedSample::kNeedsPil:
      break;
  }
  return Status::NotSupported("needs PIL");
}

std::vector<Status> TransformPreparedBatch(
    const std::vector<const PreparedSample*>& samples,
    const std::vector<TransformSpec>& specs, const std::vector<void*>& outs,
    int threads) {
  std::vector<Status> results(samples.size());
  ParallelFor(samples.size(), threads, [&](size_t k) {
    results[k] = TransformPrepared(*samples[k], specs[k], outs[k]);
  });
  return results;
}

}  // namespace ufspack
