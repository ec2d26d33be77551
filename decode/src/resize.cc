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
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define UFSPACK_RESIZE_AVX2 1
#endif
#include <cmath>
#include <cstring>
#include <memory>
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

}  // namespace

// --- Weights ---------------------------------------------------------------

// Fixed-point weights of one pass over an output window: window index i
// (output win0 + i) reads source pixels first[i] .. first[i] + count[i] - 1
// (absolute source coordinates) with weights coeffs[i * taps ..].
struct Weights {
  int taps = 0;
  std::vector<int> first;
  std::vector<int> count;
  std::vector<int32_t> coeffs;
  // For the AVX2 horizontal pass: per output, the taps in pairs, each pair
  // as 8 int32 (k0 k0 k0 0 k1 k1 k1 0), (taps + 1) / 2 pairs per output.
  std::vector<int32_t> pairs;
};

namespace {

Status ComputeWeights(const ResizeAxis& a, const FilterDef& filter,
                      Weights* w) {
  // Pillow receives the box as floats and subtracts them in float.
  const double scale = static_cast<double>(a.in1 - a.in0) / a.out;
  const double fscale = scale < 1.0 ? 1.0 : scale;
  const double support = filter.support * fscale;
  const int in_size = a.hi - a.origin;  // Pillow's inSize, for messages
  if (!(support < (1 << 26))) {
    return Status::InvalidArgument("resize: " + std::to_string(in_size) +
                                   " -> " + std::to_string(a.out) +
                                   " needs too wide a filter");
  }
  const int taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  // Pillow refuses (MemoryError) where its double table would pass INT_MAX.
  if (int64_t{a.out} * taps * int64_t{sizeof(double)} > INT_MAX) {
    return Status::InvalidArgument(
        "resize: weight table for " + std::to_string(in_size) + " -> " +
        std::to_string(a.out) + " (" + std::to_string(taps) +
        " taps) is too large");
  }
  const int lo_rel = a.lo - a.origin;
  const int hi_rel = a.hi - a.origin;
  w->taps = taps;
  w->first.assign(a.win_n, 0);
  w->count.assign(a.win_n, 0);
  w->coeffs.assign(static_cast<size_t>(a.win_n) * taps, 0);
  std::vector<double> k(taps);
  const double ss = 1.0 / fscale;
  for (int wi = 0; wi < a.win_n; ++wi) {
    const int i = a.win0 + wi;
    const double center = a.in0 + (i + 0.5) * scale;
    int lo = static_cast<int>(center - support + 0.5);
    if (lo < lo_rel) lo = lo_rel;
    int hi = static_cast<int>(center + support + 0.5);
    if (hi > hi_rel) hi = hi_rel;
    const int n = hi > lo ? hi - lo : 0;
    double sum = 0.0;
    for (int j = 0; j < n; ++j) {
      const double v = filter.fn((j + lo - center + 0.5) * ss);
      k[j] = v;
      sum += v;
    }
    int32_t* out = &w->coeffs[static_cast<size_t>(wi) * taps];
    for (int j = 0; j < n; ++j) {
      double v = k[j];
      if (sum != 0.0) v /= sum;
      const double fixed = v * (1 << kPrecisionBits);
      out[j] = static_cast<int32_t>(v < 0 ? -0.5 + fixed : 0.5 + fixed);
    }
    w->first[wi] = a.origin + lo;
    w->count[wi] = n;
  }
  return Status::OK();
}

inline uint8_t Clip8(int32_t acc) {
  const int32_t v = acc >> kPrecisionBits;  // arithmetic shift, as Pillow
  return static_cast<uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : v));
}

// --- The two passes ----------------------------------------------------------

// One row: out[x] (RGB, w.first.size() pixels) from `in`, whose pixel 0 is
// source column x0.
void HorizontalRowScalar(const uint8_t* in, int x0, const Weights& w,
                         uint8_t* out) {
  const int out_w = static_cast<int>(w.first.size());
  for (int xx = 0; xx < out_w; ++xx) {
    const int32_t* k = &w.coeffs[static_cast<size_t>(xx) * w.taps];
    const uint8_t* p = in + static_cast<size_t>(w.first[xx] - x0) * 3;
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

#ifdef UFSPACK_RESIZE_AVX2
bool HaveAvx2() {
  static const bool have = __builtin_cpu_supports("avx2");
  return have;
}

void ExpandPairs(Weights* w) {
  const int pairs = (w->taps + 1) / 2;
  const size_t n = w->first.size();
  w->pairs.assign(n * pairs * 8, 0);
  for (size_t i = 0; i < n; ++i) {
    const int32_t* k = &w->coeffs[i * w->taps];
    int32_t* e = &w->pairs[i * pairs * 8];
    for (int j = 0; j < w->count[i]; ++j) {
      int32_t* lane = e + (j / 2) * 8 + (j % 2) * 4;
      lane[0] = lane[1] = lane[2] = k[j];
    }
  }
}

// The same sums as HorizontalRowScalar, two taps per step: 8 bytes (two
// RGB pixels and two bytes more) widened to 8 int32 lanes (R G B 0 R G B 0)
// and multiplied by the tap pair.  Integer arithmetic: exactly the same
// results.  `end` bounds what may be read (the row's last pixel is read
// with scalar code when 8 bytes from it would pass `end`).
constexpr int8_t kSpread[16] = {0,  1,  2,  -1, 3,  4,  5,  -1,
                                -1, -1, -1, -1, -1, -1, -1, -1};

// Clip8 of four int32 sums (R G B x): an arithmetic shift, then saturation
// to 0..255 (packus), as bytes R G B x.
__attribute__((target("avx2"))) inline uint32_t Pack(__m128i sum) {
  sum =
      _mm_srai_epi32(_mm_add_epi32(sum, _mm_set1_epi32(kHalf)), kPrecisionBits);
  sum = _mm_packus_epi32(sum, sum);
  sum = _mm_packus_epi16(sum, sum);
  return static_cast<uint32_t>(_mm_cvtsi128_si32(sum));
}

__attribute__((target("avx2"))) inline __m128i Fold(__m256i acc) {
  return _mm_add_epi32(_mm256_castsi256_si128(acc),
                       _mm256_extracti128_si256(acc, 1));
}

// One output pixel's sums, two taps per step: 8 bytes (two RGB pixels and
// two bytes more) widened to 8 int32 lanes (R G B 0 R G B 0) and multiplied
// by the tap pair.  The taps past the last two-step that fits before `end`
// are summed one by one.
__attribute__((target("avx2"))) inline __m128i PixelSums(const uint8_t* p,
                                                         int n,
                                                         const int32_t* e,
                                                         const int32_t* k,
                                                         const uint8_t* end) {
  const __m128i spread =
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(kSpread));
  __m256i acc = _mm256_setzero_si256();
  int x = 0;
  for (; x < n && p + 3 * x + 8 <= end; x += 2) {
    __m128i px = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 3 * x));
    const __m256i v = _mm256_cvtepu8_epi32(_mm_shuffle_epi8(px, spread));
    const __m256i kk =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(e + x * 4));
    acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(v, kk));
  }
  __m128i sum = Fold(acc);
  if (x < n) {
    alignas(16) int32_t s[4];
    _mm_store_si128(reinterpret_cast<__m128i*>(s), sum);
    for (; x < n; ++x) {
      s[0] += p[3 * x + 0] * k[x];
      s[1] += p[3 * x + 1] * k[x];
      s[2] += p[3 * x + 2] * k[x];
    }
    sum = _mm_load_si128(reinterpret_cast<const __m128i*>(s));
  }
  return sum;
}

inline void StorePixel(uint8_t* out, int xx, int out_w, uint32_t rgbx) {
  if (xx + 1 < out_w) {
    std::memcpy(out + 3 * xx, &rgbx, 4);  // the 4th byte is overwritten next
  } else {
    out[3 * xx + 0] = static_cast<uint8_t>(rgbx);
    out[3 * xx + 1] = static_cast<uint8_t>(rgbx >> 8);
    out[3 * xx + 2] = static_cast<uint8_t>(rgbx >> 16);
  }
}

// The same sums as HorizontalRowScalar (integer arithmetic: the same
// results), for `rows` (1 or 2) rows `stride` bytes apart sharing the
// weights.  An odd last tap reads one pixel more, with weight 0 (pairs are
// zero-padded); `end` bounds what may be read.
__attribute__((target("avx2"))) void HorizontalRowsAvx2(
    const uint8_t* in, size_t stride, int rows, int x0, const Weights& w,
    const uint8_t* end, uint8_t* out, size_t out_stride) {
  const int out_w = static_cast<int>(w.first.size());
  const int pairs = (w.taps + 1) / 2;
  const __m128i spread =
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(kSpread));
  for (int xx = 0; xx < out_w; ++xx) {
    const uint8_t* p = in + static_cast<size_t>(w.first[xx] - x0) * 3;
    const int n = w.count[xx];
    const int32_t* e = &w.pairs[static_cast<size_t>(xx) * pairs * 8];
    const int32_t* k = &w.coeffs[static_cast<size_t>(xx) * w.taps];
    const uint8_t* q = p + stride;
    if (rows == 2 && q + 3 * ((n + 1) & ~1) + 2 <= end) {
      __m256i a0 = _mm256_setzero_si256(), a1 = _mm256_setzero_si256();
      for (int x = 0; x < n; x += 2) {
        const __m256i kk =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(e + x * 4));
        __m128i p0 =
            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 3 * x));
        __m128i p1 =
            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + 3 * x));
        const __m256i v0 = _mm256_cvtepu8_epi32(_mm_shuffle_epi8(p0, spread));
        const __m256i v1 = _mm256_cvtepu8_epi32(_mm_shuffle_epi8(p1, spread));
        a0 = _mm256_add_epi32(a0, _mm256_mullo_epi32(v0, kk));
        a1 = _mm256_add_epi32(a1, _mm256_mullo_epi32(v1, kk));
      }
      StorePixel(out, xx, out_w, Pack(Fold(a0)));
      StorePixel(out + out_stride, xx, out_w, Pack(Fold(a1)));
      continue;
    }
    StorePixel(out, xx, out_w, Pack(PixelSums(p, n, e, k, end)));
    if (rows == 2) {
      StorePixel(out + out_stride, xx, out_w, Pack(PixelSums(q, n, e, k, end)));
    }
  }
}
#endif

// `end`: one past the last byte of the source that may be read.
void HorizontalRow(const uint8_t* in, int x0, const Weights& w,
                   const uint8_t* end, uint8_t* out) {
#ifdef UFSPACK_RESIZE_AVX2
  if (!w.pairs.empty()) {
    return HorizontalRowsAvx2(in, 0, 1, x0, w, end, out, 0);
  }
#endif
  (void)end;
  HorizontalRowScalar(in, x0, w, out);
}

// Rows y0 .. y1 - 1 of `in` (`stride` apart) into `out` (`out_stride`
// apart), two at a time where the AVX2 pass runs.
void HorizontalRows(const uint8_t* in, size_t stride, int n_rows, int x0,
                    const Weights& w, const uint8_t* end, uint8_t* out,
                    size_t out_stride) {
  int y = 0;
#ifdef UFSPACK_RESIZE_AVX2
  if (!w.pairs.empty()) {
    for (; y + 1 < n_rows; y += 2) {
      HorizontalRowsAvx2(in + y * stride, stride, 2, x0, w, end,
                         out + y * out_stride, out_stride);
    }
  }
#endif
  for (; y < n_rows; ++y) {
    HorizontalRow(in + y * stride, x0, w, end, out + y * out_stride);
  }
}

// Window row `yy` of the vertical pass: `bytes` bytes per row from the rows
// of `in` (row 0 is source row `row0`), summed into `acc` (bytes int32s).
// The loops, for the compiler to vectorise: built twice below.
inline void VerticalRowBody(const uint8_t* in, size_t stride, int row0,
                            const Weights& w, int yy, size_t bytes,
                            int32_t* __restrict acc, uint8_t* __restrict out) {
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

#ifdef UFSPACK_RESIZE_AVX2
// AVX2 (vpmulld: 8 int32 products per instruction).  Dispatched by hand,
// not with target_clones: an ifunc resolver runs before ThreadSanitizer's
// runtime is initialised and crashes instrumented binaries.
__attribute__((target("avx2"))) void VerticalRowAvx2(
    const uint8_t* in, size_t stride, int row0, const Weights& w, int yy,
    size_t bytes, int32_t* __restrict acc, uint8_t* __restrict out) {
  VerticalRowBody(in, stride, row0, w, yy, bytes, acc, out);
}
#endif

void VerticalRow(const uint8_t* in, size_t stride, int row0, const Weights& w,
                 int yy, size_t bytes, int32_t* __restrict acc,
                 uint8_t* __restrict out) {
#ifdef UFSPACK_RESIZE_AVX2
  if (HaveAvx2()) {
    return VerticalRowAvx2(in, stride, row0, w, yy, bytes, acc, out);
  }
#endif
  VerticalRowBody(in, stride, row0, w, yy, bytes, acc, out);
}

// --- Where the rows go ------------------------------------------------------

// ToTensor's (float)v / 255 then Normalize's (x - mean) / std, in float32 as
// torch computes them, for each of the 256 values of each channel.
struct FloatLut {
  float v[3][256];
  FloatLut(const float* mean, const float* std) {
    for (int c = 0; c < 3; ++c) {
      for (int i = 0; i < 256; ++i) {
        v[c][i] = (static_cast<float>(i) / 255.0f - mean[c]) / std[c];
      }
    }
  }
};

// One RGB row to three float planes, one pass over the row.
void StoreFloatRow(const uint8_t* __restrict row, int w, bool flip,
                   const FloatLut& lut, float* __restrict dst, size_t plane) {
  float* __restrict r = dst;
  float* __restrict g = dst + plane;
  float* __restrict b = dst + 2 * plane;
  if (flip) {
    for (int x = 0, o = w - 1; x < w; ++x, --o) {
      r[o] = lut.v[0][row[3 * x]];
      g[o] = lut.v[1][row[3 * x + 1]];
      b[o] = lut.v[2][row[3 * x + 2]];
    }
  } else {
    for (int x = 0; x < w; ++x) {
      r[x] = lut.v[0][row[3 * x]];
      g[x] = lut.v[1][row[3 * x + 1]];
      b[x] = lut.v[2][row[3 * x + 2]];
    }
  }
}

// Window rows, each RGB, handed to the sink one by one: Row(y) is where row
// y is produced, Done(y) stores it in the sink's layout (flipped if asked).
class Rows {
 public:
  Rows(const PixelSink& sink, int w, int h)
      : sink_(sink),
        w_(w),
        plane_(static_cast<size_t>(w) * h),
        row_(static_cast<size_t>(w) * 3) {
    if (sink.layout == PixelLayout::kChwF32) {
      lut_ = std::make_unique<FloatLut>(sink.mean, sink.std);
    }
  }
  uint8_t* Row(int y) {
    if (sink_.layout == PixelLayout::kRgb && !sink_.hflip) {
      return static_cast<uint8_t*>(sink_.dst) +
             static_cast<size_t>(y) * sink_.stride;
    }
    return row_.data();
  }
  void Done(int y) {
    const uint8_t* row = row_.data();
    const bool flip = sink_.hflip;
    switch (sink_.layout) {
      case PixelLayout::kRgb: {
        if (!flip) return;
        uint8_t* out = static_cast<uint8_t*>(sink_.dst) +
                       static_cast<size_t>(y) * sink_.stride;
        for (int x = 0; x < w_; ++x) {
          std::memcpy(out + 3 * (w_ - 1 - x), row + 3 * x, 3);
        }
        return;
      }
      case PixelLayout::kChwU8:
        for (int c = 0; c < 3; ++c) {
          uint8_t* out = static_cast<uint8_t*>(sink_.dst) + c * plane_ +
                         static_cast<size_t>(y) * w_;
          if (flip) {
            for (int x = 0; x < w_; ++x) out[w_ - 1 - x] = row[3 * x + c];
          } else {
            for (int x = 0; x < w_; ++x) out[x] = row[3 * x + c];
          }
        }
        return;
      case PixelLayout::kChwF32:
        StoreFloatRow(
            row, w_, flip, *lut_,
            static_cast<float*>(sink_.dst) + static_cast<size_t>(y) * w_,
            plane_);
        return;
    }
  }

 private:
  PixelSink sink_;
  int w_;
  size_t plane_;
  std::vector<uint8_t> row_;
  std::unique_ptr<FloatLut> lut_;
};

// An axis Pillow does not resample: an integer box the size of the output.
bool IsIdentity(const ResizeAxis& a) {
  return a.in0 == 0.0f && a.in1 == static_cast<float>(a.out) &&
         a.lo == a.origin && a.hi == a.origin + a.out;
}

std::string AxisText(const ResizeAxis& a) {
  return "box [" + std::to_string(a.origin) + "+" + std::to_string(a.in0) +
         ", " + std::to_string(a.origin) + "+" + std::to_string(a.in1) +
         ") -> " + std::to_string(a.out) + " (window " +
         std::to_string(a.win0) + "+" + std::to_string(a.win_n) + ", source " +
         std::to_string(a.lo) + ".." + std::to_string(a.hi) + ")";
}

Status CheckAxis(const ResizeAxis& a, const char* name) {
  if (a.out < 1 || a.win_n < 1 || a.win0 < 0 || a.win0 > a.out - a.win_n ||
      !(a.in1 > a.in0) || a.hi <= a.lo) {
    return Status::InvalidArgument(std::string("resize: bad ") + name +
                                   " axis: " + AxisText(a));
  }
  return Status::OK();
}

// PIL's NEAREST: ImagingScaleAffine with a = (w / out_w, 0, 0, 0, h / out_h,
// 0), positions accumulated in double, COORD() truncating; a position
// outside the box reads -1 (left black).  Only integer boxes (in0 == 0).
void NearestIndex(const ResizeAxis& a, std::vector<int>* index) {
  const double step = static_cast<double>(a.in1) / a.out;
  auto coord = [](double v) { return v < 0.0 ? -1 : static_cast<int>(v); };
  const int n = a.hi - a.origin;
  index->assign(a.win_n, -1);
  double pos = 0.0 + step * 0.5;
  for (int i = 0; i < a.win0 + a.win_n; ++i) {
    const int v = coord(pos);
    if (i >= a.win0 && v >= 0 && v < n) (*index)[i - a.win0] = a.origin + v;
    pos += step;
  }
}

}  // namespace

Status ResizePlan::Make(const ResizeAxis& x, const ResizeAxis& y, Filter filter,
                        ResizePlan* plan) {
  Status s = CheckAxis(x, "x");
  if (s.ok()) s = CheckAxis(y, "y");
  if (!s.ok()) return s;
  plan->x_ = x;
  plan->y_ = y;
  plan->filter_ = filter;
  plan->copy_x_ = IsIdentity(x);
  plan->copy_y_ = IsIdentity(y);
  auto range = [](const std::vector<int>& first, const std::vector<int>& count,
                  int* lo, int* hi) {
    *lo = INT_MAX;
    *hi = INT_MIN;
    for (size_t i = 0; i < first.size(); ++i) {
      if (count[i] < 1) continue;
      *lo = std::min(*lo, first[i]);
      *hi = std::max(*hi, first[i] + count[i]);
    }
    if (*lo > *hi) *lo = *hi = first.empty() ? 0 : first[0];
  };
  if (filter == Filter::kNearest) {
    if (x.in0 != 0.0f || y.in0 != 0.0f) {
      return Status::InvalidArgument(
          "resize: nearest needs an integer box (in0 = 0)");
    }
    NearestIndex(x, &plan->nearest_x_);
    NearestIndex(y, &plan->nearest_y_);
    std::vector<int> ones_x(plan->nearest_x_.size()),
        ones_y(plan->nearest_y_.size());
    for (size_t i = 0; i < ones_x.size(); ++i)
      ones_x[i] = plan->nearest_x_[i] >= 0;
    for (size_t i = 0; i < ones_y.size(); ++i)
      ones_y[i] = plan->nearest_y_[i] >= 0;
    range(plan->nearest_x_, ones_x, &plan->need_x0_, &plan->need_x1_);
    range(plan->nearest_y_, ones_y, &plan->need_y0_, &plan->need_y1_);
    return Status::OK();
  }
  FilterDef def;
  if (!GetFilter(filter, &def)) {
    return Status::InvalidArgument("resize: unknown filter " +
                                   std::to_string(static_cast<int>(filter)));
  }
  auto wx = std::make_shared<Weights>();
  auto wy = std::make_shared<Weights>();
  s = ComputeWeights(x, def, wx.get());
  if (s.ok()) s = ComputeWeights(y, def, wy.get());
  if (!s.ok()) return s;
#ifdef UFSPACK_RESIZE_AVX2
  if (!IsIdentity(x) && HaveAvx2()) ExpandPairs(wx.get());
#endif
  if (plan->copy_x_) {
    plan->need_x0_ = x.origin + x.win0;
    plan->need_x1_ = plan->need_x0_ + x.win_n;
  } else {
    range(wx->first, wx->count, &plan->need_x0_, &plan->need_x1_);
  }
  if (plan->copy_y_) {
    plan->need_y0_ = y.origin + y.win0;
    plan->need_y1_ = plan->need_y0_ + y.win_n;
  } else {
    range(wy->first, wy->count, &plan->need_y0_, &plan->need_y1_);
  }
  plan->wx_ = std::move(wx);
  plan->wy_ = std::move(wy);
  return Status::OK();
}

Status ResizePlan::Run(const uint8_t* region, int region_x, int region_y,
                       int region_w, int region_h, size_t stride,
                       const PixelSink& sink) const {
  if (need_x0_ < region_x || need_x1_ > region_x + region_w ||
      need_y0_ < region_y || need_y1_ > region_y + region_h) {
    return Status::InvalidArgument(
        "resize: source region " + std::to_string(region_w) + "x" +
        std::to_string(region_h) + " at (" + std::to_string(region_x) + ", " +
        std::to_string(region_y) + ") does not hold the pixels [" +
        std::to_string(need_x0_) + ", " + std::to_string(need_x1_) + ") x [" +
        std::to_string(need_y0_) + ", " + std::to_string(need_y1_) + ")");
  }
  if (stride / 3 < static_cast<size_t>(region_w)) {
    return Status::InvalidArgument("resize: source stride " +
                                   std::to_string(stride) +
                                   " is shorter than a row");
  }
  const int out_w = x_.win_n, out_h = y_.win_n;
  Rows rows(sink, out_w, out_h);
  auto src = [&](int x, int y) {
    return region + static_cast<size_t>(y - region_y) * stride +
           static_cast<size_t>(x - region_x) * 3;
  };
  const size_t bytes = static_cast<size_t>(out_w) * 3;
  // The region's last byte: reads never go past it.
  const uint8_t* end = region + static_cast<size_t>(region_h - 1) * stride +
                       static_cast<size_t>(region_w) * 3;
  if (filter_ == Filter::kNearest && !(copy_x_ && copy_y_)) {
    for (int y = 0; y < out_h; ++y) {
      uint8_t* out = rows.Row(y);
      std::memset(out, 0, bytes);
      const int yi = nearest_y_[y];
      if (yi >= 0) {
        for (int x = 0; x < out_w; ++x) {
          if (nearest_x_[x] >= 0)
            std::memcpy(out + 3 * x, src(nearest_x_[x], yi), 3);
        }
      }
      rows.Done(y);
    }
    return Status::OK();
  }
  const int x0 = x_.origin + x_.win0, y0 = y_.origin + y_.win0;
  if (copy_x_ && copy_y_) {
    for (int y = 0; y < out_h; ++y) {
      std::memcpy(rows.Row(y), src(x0, y0 + y), bytes);
      rows.Done(y);
    }
    return Status::OK();
  }
  if (copy_y_) {  // horizontal pass only, row by row
    for (int y = 0; y < out_h; ++y) {
      HorizontalRow(src(region_x, y0 + y), region_x, *wx_, end, rows.Row(y));
      rows.Done(y);
    }
    return Status::OK();
  }
  // Rows [need_y0_, need_y1_) feed the vertical pass.
  const uint8_t* in = src(copy_x_ ? x0 : region_x, need_y0_);
  size_t in_stride = stride;
  std::unique_ptr<uint8_t[]> tmp;
  if (!copy_x_) {
    in_stride = bytes;
    // Not zero-filled: every byte is written before it is read.
    tmp.reset(new uint8_t[in_stride * (need_y1_ - need_y0_)]);
    HorizontalRows(src(region_x, need_y0_), stride, need_y1_ - need_y0_,
                   region_x, *wx_, end, tmp.get(), in_stride);
    in = tmp.get();
  }
  std::vector<int32_t> acc(bytes);
  for (int y = 0; y < out_h; ++y) {
    VerticalRow(in, in_stride, need_y0_, *wy_, y, bytes, acc.data(),
                rows.Row(y));
    rows.Done(y);
  }
  return Status::OK();
}

namespace {

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

// Crop-then-resize of an integer box, the whole output.
Status ResizeBox(const uint8_t* src, int src_w, int src_h, size_t src_stride,
                 int box_x, int box_y, int box_w, int box_h, int dst_w,
                 int dst_h, Filter filter, const PixelSink& sink) {
  Status s = CheckArgs(src, src_w, src_h, src_stride, box_x, box_y, box_w,
                       box_h, dst_w, dst_h, filter, sink.dst);
  if (!s.ok()) return s;
  ResizePlan plan;
  s = ResizePlan::Make(ResizeAxis::Crop(box_x, box_w, dst_w),
                       ResizeAxis::Crop(box_y, box_h, dst_h), filter, &plan);
  if (!s.ok()) return s;
  return plan.Run(src, 0, 0, src_w, src_h, src_stride, sink);
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
  if (dst_stride / 3 < static_cast<size_t>(dst_w)) {
    return Status::InvalidArgument(
        "resize: output stride " + std::to_string(dst_stride) +
        " is shorter than a row of " + std::to_string(dst_w) + " RGB pixels");
  }
  PixelSink sink;
  sink.layout = PixelLayout::kRgb;
  sink.dst = dst;
  sink.stride = dst_stride;
  return ResizeBox(src, src_w, src_h, src_stride, box_x, box_y, box_w, box_h,
                   dst_w, dst_h, filter, sink);
}

Status ResizeRgbToChwFloat(const uint8_t* src, int src_w, int src_h,
                           size_t src_stride, int box_x, int box_y, int box_w,
                           int box_h, int dst_w, int dst_h, Filter filter,
                           bool hflip, const float mean[3], const float std[3],
                           float* dst) {
  if (mean == nullptr || std == nullptr) {
    return Status::InvalidArgument("resize: null mean or std");
  }
  for (int c = 0; c < 3; ++c) {
    if (std[c] == 0.0f) {
      return Status::InvalidArgument("resize: std[" + std::to_string(c) +
                                     "] is zero");
    }
  }
  PixelSink sink;
  sink.layout = PixelLayout::kChwF32;
  sink.hflip = hflip;
  sink.mean = mean;
  sink.std = std;
  sink.dst = dst;
  return ResizeBox(src, src_w, src_h, src_stride, box_x, box_y, box_w, box_h,
                   dst_w, dst_h, filter, sink);
}

}  // namespace ufspack
