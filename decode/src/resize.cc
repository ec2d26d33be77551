// Copyright 2026 The ufspack Authors.
//
// Pillow 9.4's resampling of 8-bit RGB, reimplemented; see resize.h.  The
// arithmetic that decides the bytes, in the order Pillow does it
// (libImaging/Resample.c precompute_coeffs, normalize_coeffs_8bpc,
// ImagingResampleHorizontal_8bpc / Vertical_8bpc, ImagingResampleInner;
// libImaging/Geometry.c ImagingScaleAffine; _imaging.c _resize):
//
//   scale   = (double)(float)in_size / out_size      (the box is float)
//   fscale  = max(scale, 1);  support = filter_support * fscale
//   taps    = (int)ceil(support) * 2 + 1              (table stride)
//   center  = (i + 0.5) * scale
//   first   = max(0, (int)(center - support + 0.5))
//   last    = min(in_size, (int)(center + support + 0.5))
//   w[j]    = filter((j + first - center + 0.5) / fscale), j < last - first
//             (computed as * (1.0 / fscale)), each divided by their sum
//             (skipped when the sum is 0)
//   fixed   = (int)(w * 2^22 +- 0.5), rounding half away from zero
//   pixel   = clip((2^21 + sum v * fixed) >> 22, 0, 255)
//
// The double-precision steps must happen in this order and without fused
// multiply-adds; libm's sin/cos (Hamming, Lanczos) are the ones Pillow
// calls.  The integer sums are exact, so the passes may sum in any order.
#include "resize.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace ufspack {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;
constexpr int32_t kHalf = int32_t{1} << (kPrecisionBits - 1);
constexpr double kPi = 3.14159265358979323846;  // M_PI

// --- The filters, as Pillow evaluates them ---------------------------------

double BoxFilter(double x) { return (x > -0.5 && x <= 0.5) ? 1.0 : 0.0; }

double BilinearFilter(double x) {
  if (x < 0.0) x = -x;
  return x < 1.0 ? 1.0 - x : 0.0;
}

double HammingFilter(double x) {
  if (x < 0.0) x = -x;
  if (x == 0.0) return 1.0;
  if (x >= 1.0) return 0.0;
  x = x * kPi;
  // The window's constants are float literals in Pillow.
  return std::sin(x) / x * (0.54f + 0.46f * std::cos(x));
}

double BicubicFilter(double x) {
  constexpr double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

double Sinc(double x) {
  if (x == 0.0) return 1.0;
  x = x * kPi;
  return std::sin(x) / x;
}

double LanczosFilter(double x) {
  if (-3.0 <= x && x < 3.0) return Sinc(x) * Sinc(x / 3);
  return 0.0;
}

struct FilterDef {
  double (*fn)(double);
  double support;
};

bool GetFilter(Filter filter, FilterDef* def) {
  switch (filter) {
    case Filter::kBox:
      *def = {BoxFilter, 0.5};
      return true;
    case Filter::kBilinear:
      *def = {BilinearFilter, 1.0};
      return true;
    case Filter::kHamming:
      *def = {HammingFilter, 1.0};
      return true;
    case Filter::kBicubic:
      *def = {BicubicFilter, 2.0};
      return true;
    case Filter::kLanczos:
      *def = {LanczosFilter, 3.0};
      return true;
    case Filter::kNearest:
      break;
  }
  return false;
}

// --- Weights ---------------------------------------------------------------

// Fixed-point weights of one pass: output i reads inputs first[i] ..
// first[i] + count[i] - 1 with weights coeffs[i * taps ..].
struct Weights {
  int taps = 0;
  std::vector<int> first;
  std::vector<int> count;
  std::vector<int32_t> coeffs;
};

Status ComputeWeights(int in_size, int out_size, const FilterDef& filter,
                      Weights* w) {
  // Pillow receives the box as floats and subtracts them in float.
  const float in0 = 0.0f;
  const float in1 = static_cast<float>(in_size);
  const double scale = static_cast<double>(in1 - in0) / out_size;
  const double fscale = scale < 1.0 ? 1.0 : scale;
  const double support = filter.support * fscale;
  if (!(support < (1 << 26))) {
    return Status::InvalidArgument("resize: " + std::to_string(in_size) +
                                   " -> " + std::to_string(out_size) +
                                   " needs too wide a filter");
  }
  const int taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  // Pillow refuses (MemoryError) where its double table would pass INT_MAX.
  if (int64_t{out_size} * taps * int64_t{sizeof(double)} > INT_MAX) {
    return Status::InvalidArgument(
        "resize: weight table for " + std::to_string(in_size) + " -> " +
        std::to_string(out_size) + " (" + std::to_string(taps) +
        " taps) is too large");
  }
  w->taps = taps;
  w->first.assign(out_size, 0);
  w->count.assign(out_size, 0);
  w->coeffs.assign(static_cast<size_t>(out_size) * taps, 0);
  std::vector<double> k(taps);
  const double ss = 1.0 / fscale;
  for (int i = 0; i < out_size; ++i) {
    const double center = in0 + (i + 0.5) * scale;
    int lo = static_cast<int>(center - support + 0.5);
    if (lo < 0) lo = 0;
    int hi = static_cast<int>(center + support + 0.5);
    if (hi > in_size) hi = in_size;
    const int n = hi - lo;
    double sum = 0.0;
    for (int j = 0; j < n; ++j) {
      const double v = filter.fn((j + lo - center + 0.5) * ss);
      k[j] = v;
      sum += v;
    }
    int32_t* out = &w->coeffs[static_cast<size_t>(i) * taps];
    for (int j = 0; j < n; ++j) {
      double v = k[j];
      if (sum != 0.0) v /= sum;
      const double fixed = v * (1 << kPrecisionBits);
      out[j] = static_cast<int32_t>(v < 0 ? -0.5 + fixed : 0.5 + fixed);
    }
    w->first[i] = lo;
    w->count[i] = n;
  }
  return Status::OK();
}

inline uint8_t Clip8(int32_t acc) {
  const int32_t v = acc >> kPrecisionBits;  // arithmetic shift, as Pillow
  return static_cast<uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
}

// --- The two passes ----------------------------------------------------------

// One row: out[x] (RGB, w.first.size() pixels) from `in` (RGB pixels).
void HorizontalRow(const uint8_t* in, const Weights& w, uint8_t* out) {
  const int out_w = static_cast<int>(w.first.size());
  for (int xx = 0; xx < out_w; ++xx) {
    const int32_t* k = &w.coeffs[static_cast<size_t>(xx) * w.taps];
    const uint8_t* p = in + static_cast<size_t>(w.first[xx]) * 3;
    const int n = w.count[xx];
    int32_t s0 = kHalf, s1 = kHalf, s2 = kHalf;
    for (int x = 0; x < n; ++x) {
      s0 += p[3 * x + 0] * k[x];
      s1 += p[3 * x + 1] * k[x];
      s2 += p[3 * x + 2] * k[x];
    }
    out[3 * xx + 0] = Clip8(s0);
    out[3 * xx + 1] = Clip8(s1);
    out[3 * xx + 2] = Clip8(s2);
  }
}

// Output row `yy` of the vertical pass: `bytes` bytes per row from the rows
// of `in` (row 0 is input row `row0`), summed into `acc` (bytes int32s).
void VerticalRow(const uint8_t* in, size_t stride, int row0, const Weights& w,
                 int yy, size_t bytes, int32_t* __restrict acc,
                 uint8_t* __restrict out) {
  const int32_t* k = &w.coeffs[static_cast<size_t>(yy) * w.taps];
  const int first = w.first[yy] - row0;
  const int n = w.count[yy];
  std::fill(acc, acc + bytes, kHalf);
  for (int y = 0; y < n; ++y) {
    const uint8_t* __restrict row =
        in + static_cast<size_t>(first + y) * stride;
    const int32_t c = k[y];
    for (size_t i = 0; i < bytes; ++i) acc[i] += row[i] * c;
  }
  for (size_t i = 0; i < bytes; ++i) out[i] = Clip8(acc[i]);
}

// --- Where the rows go ------------------------------------------------------

// Output rows written straight into an RGB image.
class ByteRows {
 public:
  ByteRows(uint8_t* dst, size_t stride) : dst_(dst), stride_(stride) {}
  uint8_t* Row(int y) { return dst_ + static_cast<size_t>(y) * stride_; }
  void Done(int) {}

 private:
  uint8_t* dst_;
  size_t stride_;
};

// Output rows converted to CHW float (flip, ToTensor, Normalize) one by one.
class FloatRows {
 public:
  FloatRows(int w, int h, bool hflip, const float mean[3], const float std[3],
            float* dst)
      : w_(w),
        plane_(static_cast<size_t>(w) * h),
        hflip_(hflip),
        dst_(dst),
        row_(static_cast<size_t>(w) * 3) {
    for (int c = 0; c < 3; ++c) {
      for (int v = 0; v < 256; ++v) {
        // ToTensor: img.to(float32).div(255); Normalize: sub_(mean).div_(std).
        const float x = static_cast<float>(v) / 255.0f;
        lut_[c][v] = (x - mean[c]) / std[c];
      }
    }
  }
  uint8_t* Row(int) { return row_.data(); }
  void Done(int y) {
    const uint8_t* row = row_.data();
    for (int c = 0; c < 3; ++c) {
      const float* lut = lut_[c];
      float* out = dst_ + c * plane_ + static_cast<size_t>(y) * w_;
      if (hflip_) {
        for (int x = 0; x < w_; ++x) out[w_ - 1 - x] = lut[row[3 * x + c]];
      } else {
        for (int x = 0; x < w_; ++x) out[x] = lut[row[3 * x + c]];
      }
    }
  }

 private:
  int w_;
  size_t plane_;
  bool hflip_;
  float* dst_;
  std::vector<uint8_t> row_;
  float lut_[3][256];
};

struct Box {
  const uint8_t* src;  // the box's top-left pixel
  size_t stride;
  int w;
  int h;
};

template <typename Rows>
void Copy(const Box& box, Rows* rows) {
  for (int y = 0; y < box.h; ++y) {
    std::memcpy(rows->Row(y), box.src + static_cast<size_t>(y) * box.stride,
                static_cast<size_t>(box.w) * 3);
    rows->Done(y);
  }
}

// PIL's NEAREST: ImagingScaleAffine with a = (w / out_w, 0, 0, 0, h / out_h,
// 0), positions accumulated in double, COORD() truncating.
template <typename Rows>
void Nearest(const Box& box, int out_w, int out_h, Rows* rows) {
  const double ax = static_cast<double>(static_cast<float>(box.w)) / out_w;
  const double ay = static_cast<double>(static_cast<float>(box.h)) / out_h;
  auto coord = [](double v) { return v < 0.0 ? -1 : static_cast<int>(v); };
  // Columns outside the image are left black; those between the first and
  // last valid column read column 0 (calloc'ed table), as in Pillow.
  std::vector<int> xin(out_w, 0);
  int xmin = out_w, xmax = 0;
  double xo = 0.0 + ax * 0.5;
  for (int x = 0; x < out_w; ++x) {
    const int xi = coord(xo);
    if (xi >= 0 && xi < box.w) {
      xmax = x + 1;
      if (x < xmin) xmin = x;
      xin[x] = xi;
    }
    xo += ax;
  }
  double yo = 0.0 + ay * 0.5;
  for (int y = 0; y < out_h; ++y) {
    const int yi = coord(yo);
    uint8_t* out = rows->Row(y);
    std::memset(out, 0, static_cast<size_t>(out_w) * 3);
    if (yi >= 0 && yi < box.h) {
      const uint8_t* in = box.src + static_cast<size_t>(yi) * box.stride;
      for (int x = xmin; x < xmax; ++x) {
        std::memcpy(out + 3 * x, in + 3 * static_cast<size_t>(xin[x]), 3);
      }
    }
    rows->Done(y);
    yo += ay;
  }
}

// PIL's ImagingResampleInner: horizontal pass over the rows the vertical
// pass reads, into one intermediate image, then the vertical pass; a pass
// whose size does not change is skipped.
template <typename Rows>
Status Convolve(const Box& box, int out_w, int out_h, const FilterDef& filter,
                Rows* rows) {
  const bool need_h = out_w != box.w;
  const bool need_v = out_h != box.h;
  Weights wx, wy;
  Status s = ComputeWeights(box.w, out_w, filter, &wx);
  if (!s.ok()) return s;
  s = ComputeWeights(box.h, out_h, filter, &wy);
  if (!s.ok()) return s;

  if (!need_v) {  // horizontal pass only, row by row
    for (int y = 0; y < out_h; ++y) {
      HorizontalRow(box.src + static_cast<size_t>(y) * box.stride, wx,
                    rows->Row(y));
      rows->Done(y);
    }
    return Status::OK();
  }

  // Rows [row0, row1) of the box feed the vertical pass.
  const int row0 = wy.first[0];
  const int row1 = wy.first[out_h - 1] + wy.count[out_h - 1];
  const uint8_t* in = box.src + static_cast<size_t>(row0) * box.stride;
  size_t in_stride = box.stride;
  std::vector<uint8_t> tmp;
  if (need_h) {
    in_stride = static_cast<size_t>(out_w) * 3;
    tmp.resize(in_stride * (row1 - row0));
    for (int y = row0; y < row1; ++y) {
      HorizontalRow(box.src + static_cast<size_t>(y) * box.stride, wx,
                    tmp.data() + (y - row0) * in_stride);
    }
    in = tmp.data();
  }
  const size_t bytes = static_cast<size_t>(out_w) * 3;
  std::vector<int32_t> acc(bytes);
  for (int y = 0; y < out_h; ++y) {
    VerticalRow(in, in_stride, row0, wy, y, bytes, acc.data(), rows->Row(y));
    rows->Done(y);
  }
  return Status::OK();
}

Status CheckArgs(const uint8_t* src, int src_w, int src_h, size_t src_stride,
                 int box_x, int box_y, int box_w, int box_h, int dst_w,
                 int dst_h, Filter filter, const void* dst) {
  auto str = [](long long v) { return std::to_string(v); };
  if (src == nullptr || dst == nullptr) {
    return Status::InvalidArgument("resize: null image");
  }
  if (src_w < 1 || src_h < 1) {
    return Status::InvalidArgument("resize: empty source image " + str(src_w) +
                                   "x" + str(src_h));
  }
  if (src_stride / 3 < static_cast<size_t>(src_w)) {
    return Status::InvalidArgument(
        "resize: source stride " + str(static_cast<long long>(src_stride)) +
        " is shorter than a row of " + str(src_w) + " RGB pixels");
  }
  if (box_w < 1 || box_h < 1 || box_x < 0 || box_y < 0 ||
      box_x > src_w - box_w || box_y > src_h - box_h) {
    return Status::InvalidArgument("resize: box " + str(box_w) + "x" +
                                   str(box_h) + " at (" + str(box_x) + ", " +
                                   str(box_y) + ") is empty or outside the " +
                                   str(src_w) + "x" + str(src_h) + " image");
  }
  if (dst_w < 1 || dst_h < 1) {
    return Status::InvalidArgument("resize: empty output size " + str(dst_w) +
                                   "x" + str(dst_h));
  }
  FilterDef def;
  if (filter != Filter::kNearest && !GetFilter(filter, &def)) {
    return Status::InvalidArgument("resize: unknown filter " +
                                   str(static_cast<int>(filter)));
  }
  return Status::OK();
}

template <typename Rows>
Status Resize(const Box& box, int dst_w, int dst_h, Filter filter, Rows* rows) {
  // Image.resize copies when the size does not change (so does _resize
  // for an integer box the size of the output), whatever the filter.
  if (dst_w == box.w && dst_h == box.h) {
    Copy(box, rows);
    return Status::OK();
  }
  if (filter == Filter::kNearest) {
    Nearest(box, dst_w, dst_h, rows);
    return Status::OK();
  }
  FilterDef def;
  GetFilter(filter, &def);
  return Convolve(box, dst_w, dst_h, def, rows);
}

}  // namespace

const char* FilterName(Filter filter) {
  switch (filter) {
    case Filter::kNearest:
      return "nearest";
    case Filter::kLanczos:
      return "lanczos";
    case Filter::kBilinear:
      return "bilinear";
    case Filter::kBicubic:
      return "bicubic";
    case Filter::kBox:
      return "box";
    case Filter::kHamming:
      return "hamming";
  }
  return "unknown";
}

Status ResizeRgb(const uint8_t* src, int src_w, int src_h, size_t src_stride,
                 int box_x, int box_y, int box_w, int box_h, int dst_w,
                 int dst_h, Filter filter, uint8_t* dst, size_t dst_stride) {
  Status s = CheckArgs(src, src_w, src_h, src_stride, box_x, box_y, box_w,
                       box_h, dst_w, dst_h, filter, dst);
  if (!s.ok()) return s;
  if (dst_stride / 3 < static_cast<size_t>(dst_w)) {
    return Status::InvalidArgument(
        "resize: output stride " + std::to_string(dst_stride) +
        " is shorter than a row of " + std::to_string(dst_w) + " RGB pixels");
  }
  const Box box{src + static_cast<size_t>(box_y) * src_stride +
                    static_cast<size_t>(box_x) * 3,
                src_stride, box_w, box_h};
  ByteRows rows(dst, dst_stride);
  return Resize(box, dst_w, dst_h, filter, &rows);
}

Status ResizeRgbToChwFloat(const uint8_t* src, int src_w, int src_h,
                           size_t src_stride, int box_x, int box_y, int box_w,
                           int box_h, int dst_w, int dst_h, Filter filter,
                           bool hflip, const float mean[3], const float std[3],
                           float* dst) {
  Status s = CheckArgs(src, src_w, src_h, src_stride, box_x, box_y, box_w,
                       box_h, dst_w, dst_h, filter, dst);
  if (!s.ok()) return s;
  if (mean == nullptr || std == nullptr) {
    return Status::InvalidArgument("resize: null mean or std");
  }
  for (int c = 0; c < 3; ++c) {
    if (std[c] == 0.0f) {
      return Status::InvalidArgument("resize: std[" + std::to_string(c) +
                                     "] is zero");
    }
  }
  const Box box{src + static_cast<size_t>(box_y) * src_stride +
                    static_cast<size_t>(box_x) * 3,
                src_stride, box_w, box_h};
  FloatRows rows(dst_w, dst_h, hflip, mean, std, dst);
  return Resize(box, dst_w, dst_h, filter, &rows);
}

}  // namespace ufspack
