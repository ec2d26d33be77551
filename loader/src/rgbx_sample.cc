// Copyright 2026 The ufspack Authors.
#include "rgbx_sample.h"

#include <cstddef>

#include "ufspack/parallel.h"

namespace ufspack {

void DecodeRgbxBatch(std::vector<RgbxSample>* samples, int threads) {
  ParallelFor(samples->size(), threads, [&](size_t k) {
    RgbxSample& s = (*samples)[k];
    if (!s.prepared_ok()) return;
    s.decoded = s.rows.empty()
                    ? DecodeRgb(s.bytes.data(), s.bytes.size(), &s.array)
                    : s.decoder.DecodeInto(s.rows.data());
  });
}

}  // namespace ufspack
