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
#include <memory>
#include <vector>

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

// --- The general form, for the fused transform pipeline (transform.cc) ------
//
// One axis of a resize of a box to `out` pixels, of which only the output
// window [win0, win0 + win_n) is produced (each output pixel depends only on
// its own row's and column's weights, so a window of Pillow's result is
// exactly those pixels of it).  The box is [origin + in0, origin + in1) in
// source coordinates, as Pillow's float box relative to `origin`; the filter
// reads only source pixels in [lo, hi).
struct ResizeAxis {
  int origin = 0;
  float in0 = 0.0f;
  float in1 = 0.0f;
  int lo = 0;
  int hi = 0;
  int out = 0;
  int win0 = 0;
  int win_n = 0;

  // Image.crop((x, ., x + w, .)).resize((out, .)): Pillow's crop-then-resize
  // (the filter sees only the crop), the whole output.
  static ResizeAxis Crop(int x, int w, int out) {
    return ResizeAxis{x, 0.0f, static_cast<float>(w), x, x + w, out, 0, out};
  }
};

// Where the produced pixels go.
enum class PixelLayout {
  kRgb,     // rows of RGB bytes, `stride` bytes apart
  kChwU8,   // 3 planes of h x w bytes (PILToTensor, contiguous)
  kChwF32,  // 3 planes of h x w float32: ((float)v / 255 - mean) / std
};
struct PixelSink {
  PixelLayout layout = PixelLayout::kRgb;
  bool hflip = false;           // left-right flip of the produced window
  const float* mean = nullptr;  // kChwF32: 3 values
  const float* std = nullptr;   // kChwF32: 3 non-zero values
  void* dst = nullptr;
  size_t stride = 0;  // kRgb only
};

struct Weights;  // resize.cc

// A resize whose weights are computed once; Run may then be called on any
// region of the source that holds the pixels it needs (decoders that
// decode only part of an image ask need_*() first).
class ResizePlan {
 public:
  // InvalidArgument for an empty or inverted box, window or source range,
  // a fractional box with kNearest, or too wide a filter.
  static Status Make(const ResizeAxis& x, const ResizeAxis& y, Filter filter,
                     ResizePlan* plan);

  // The source pixels the window reads: [need_x0, need_x1) x [need_y0,
  // need_y1) (a subset of [lo, hi) on each axis).
  int need_x0() const { return need_x0_; }
  int need_x1() const { return need_x1_; }
  int need_y0() const { return need_y0_; }
  int need_y1() const { return need_y1_; }

  // Produces the window from `region`: region_h rows of region_w RGB pixels,
  // `stride` bytes apart, whose top-left pixel is source pixel (region_x,
  // region_y).  InvalidArgument when the region lacks a needed pixel.
  Status Run(const uint8_t* region, int region_x, int region_y, int region_w,
             int region_h, size_t stride, const PixelSink& sink) const;

 private:
  ResizeAxis x_, y_;
  Filter filter_ = Filter::kBilinear;
  bool copy_x_ = false, copy_y_ = false;
  int need_x0_ = 0, need_x1_ = 0, need_y0_ = 0, need_y1_ = 0;
  std::shared_ptr<const Weights> wx_, wy_;
  std::vector<int> nearest_x_, nearest_y_;
};

}  // namespace ufspack

#endif  // UFSPACK_DECODE_RESIZE_H_
