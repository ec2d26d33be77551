// Copyright 2026 The ufspack Authors.
//
// Resizing 8-bit RGB with exactly Pillow's pixels, for running torchvision's
// transforms natively.  torchvision 0.14 on a PIL image computes
//
//   Resize, RandomResizedCrop, CenterCrop+Resize:
//       img.crop((left, top, left + width, top + height))
//          .resize((out_w, out_h), resample)
//   RandomHorizontalFlip:  img.transpose(FLIP_LEFT_RIGHT)
//   ToTensor:              CHW float32, (float)v / 255.0f
//   Normalize:             (x - mean) / std, float32, mean and std rounded
//                          to float32 first
//
// and these functions reproduce the bytes (ResizeRgb) and floats
// (ResizeRgbToChwFloat) of that, bit for bit, for Pillow 9.4
// (libImaging/Resample.c and Geometry.c's nearest-neighbour scaling):
//
//  * kBox, kBilinear, kHamming, kBicubic (a = -0.5), kLanczos: separable
//    convolution with the filter's support widened by the scale factor
//    when shrinking (antialiased).  Per output column / row the weights are
//    computed in double, normalised to sum 1, then rounded to 22-bit fixed
//    point; each pass accumulates in int32 with a rounding bias of 2^21 and
//    clips to 0..255.  The horizontal pass runs first (over the rows the
//    vertical pass needs), and a pass whose size does not change is
//    skipped.  The filter sees only the crop: weights past the box's edges
//    are dropped, not taken from the pixels beyond (this is what makes
//    crop-then-resize differ from Image.resize(size, box=...) on the whole
//    image near the box's edges).
//  * kNearest: source column COORD(x0 + (x + 0.5) * w / out_w) with the
//    position accumulated in double, as ImagingScaleAffine does.
//  * A box the size of the output is copied, whatever the filter.
//
// This is an internal unit of ufspack_decode (not installed).
//
// Thread safety: the functions keep no state; concurrent calls are safe.
// Each allocates its scratch memory once per call: at most one intermediate
// image (dst_w x box_h x 3 bytes, only when both passes run), one row of
// dst_w x 3 int32 sums (and, for the float output, one RGB row), and the
// weight tables; nothing per pixel.
#ifndef UFSPACK_DECODE_RESIZE_H_
#define UFSPACK_DECODE_RESIZE_H_

#include <cstddef>
#include <cstdint>

#include "ufspack/status.h"

namespace ufspack {

// Pillow's resampling filters, with PIL.Image.Resampling's values.
enum class Filter : int {
  kNearest = 0,
  kLanczos = 1,
  kBilinear = 2,
  kBicubic = 3,
  kBox = 4,
  kHamming = 5,
};

// "nearest", "bilinear", ... ("unknown" for other values).
const char* FilterName(Filter filter);

// Resizes the box (box_x, box_y, box_w, box_h) of `src` (src_h rows of
// src_w RGB pixels, rows src_stride bytes apart) to dst_w x dst_h RGB pixels
// at `dst` (rows dst_stride bytes apart): the bytes of
//
//   Image.frombytes("RGB", (src_w, src_h), src)
//        .crop((box_x, box_y, box_x + box_w, box_y + box_h))
//        .resize((dst_w, dst_h), filter)
//
// REQUIRES: src and dst do not overlap.
// Returns InvalidArgument for a box outside the image, an empty box or
// output, strides shorter than a row, or sizes whose weight tables would
// not fit in memory.
Status ResizeRgb(const uint8_t* src, int src_w, int src_h, size_t src_stride,
                 int box_x, int box_y, int box_w, int box_h, int dst_w,
                 int dst_h, Filter filter, uint8_t* dst, size_t dst_stride);

// The same resize, then (if `hflip`) a left-right flip, then torchvision's
// ToTensor and Normalize(mean, std): writes 3 planes of dst_h x dst_w
// float32 (channel, row, column; 3 * dst_h * dst_w floats, contiguous) with
//
//   dst[c][y][x] = ((float)rgb[y][x'][c] / 255.0f - mean[c]) / std[c]
//
// in float32 arithmetic, x' = hflip ? dst_w - 1 - x : x.  Pass mean = {0,0,0}
// and std = {1,1,1} for ToTensor alone.
// REQUIRES: std[c] != 0.
Status ResizeRgbToChwFloat(const uint8_t* src, int src_w, int src_h,
                           size_t src_stride, int box_x, int box_y, int box_w,
                           int box_h, int dst_w, int dst_h, Filter filter,
                           bool hflip, const float mean[3], const float std[3],
                           float* dst);

}  // namespace ufspack

#endif  // UFSPACK_DECODE_RESIZE_H_
