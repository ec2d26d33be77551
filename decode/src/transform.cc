// Copyright 2026 The ufspack Authors.
//
// The fused decode + transform pipeline; see transform.h.  The geometry is
// planned in source coordinates first, so the JPEG decoder is asked only for
// the pixels the first resampling stage reads:
//
//   "direct" geometry (no padding; boxes inside the image), at most two
//   stages:
//     resize_before [-> crop]        one resize, producing only the crop's
//                                    window of the resized image
//     crop [-> resize_after]         one resize (or copy) of the crop box
//     then, when both a resize_before and a resize_after are present, a
//     second resize of the first stage's output.
//   anything else (padding, a box reaching past the image): the whole image
//   is decoded and each step materialised, as PIL does it.
//
// Only the last stage writes into the caller's output, in its layout, with
// the flip and the float conversion folded into storing each row.
#include "ufspack/transform.h"

// jpeglib.h needs FILE and size_t declared first.
#include <jpeglib.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "resize.h"

namespace ufspack {
namespace {

std::string Str(long long v) { return std::to_string(v); }

Filter ToFilter(Resample r) { return static_cast<Filter>(static_cast<int>(r)); }

bool ValidResample(Resample r) {
  return r == Resample::kNearest || r == Resample::kBilinear ||
         r == Resample::kBicubic;
}

// --- Geometry ----------------------------------------------------------------

// A stage: a ResizePlan over its input, producing win_w x win_h pixels.
struct Stage {
  ResizeAxis x, y;
  Filter filter = Filter::kBilinear;
};

struct Geometry {
  bool direct = false;
  // direct: stage 0 reads the source; stage 1 (if two) reads stage 0's
  // output, whose pixel (0, 0) is then treated as source (0, 0).
  std::vector<Stage> stages;
};

// Pillow's full-image resize of a w x h image to out_w x out_h, window as
// given.
Stage ResizeStage(int w, int h, const ResizeSpec& r, int wx, int wy, int ww,
                  int wh) {
  Stage s;
  s.x = ResizeAxis{0, 0.0f, static_cast<float>(w), 0, w, r.width, wx, ww};
  s.y = ResizeAxis{0, 0.0f, static_cast<float>(h), 0, h, r.height, wy, wh};
  s.filter = ToFilter(r.filter);
  return s;
}

Stage CropStage(const int box[4], int out_w, int out_h, Filter f) {
  Stage s;
  s.x = ResizeAxis::Crop(box[0], box[2], out_w);
  s.y = ResizeAxis::Crop(box[1], box[3], out_h);
  s.filter = f;
  return s;
}

Geometry PlanGeometry(const TransformSpec& spec) {
  Geometry g;
  const bool padded = spec.pad[0] || spec.pad[1] || spec.pad[2] || spec.pad[3];
  int w = spec.in_width, h = spec.in_height;
  if (spec.has_resize_before) {
    w = spec.resize_before.width;
    h = spec.resize_before.height;
  }
  const bool box_inside =
      !spec.has_crop || (!padded && spec.box[0] + spec.box[2] <= w &&
                         spec.box[1] + spec.box[3] <= h);
  if (!box_inside) return g;  // materialised step by step
  g.direct = true;
  if (spec.has_resize_before) {
    if (spec.has_crop) {
      g.stages.push_back(ResizeStage(spec.in_width, spec.in_height,
                                     spec.resize_before, spec.box[0],
                                     spec.box[1], spec.box[2], spec.box[3]));
      w = spec.box[2];
      h = spec.box[3];
    } else {
      g.stages.push_back(ResizeStage(spec.in_width, spec.in_height,
                                     spec.resize_before, 0, 0, w, h));
    }
    if (spec.has_resize_after) {
      g.stages.push_back(ResizeStage(w, h, spec.resize_after, 0, 0,
                                     spec.resize_after.width,
                                     spec.resize_after.height));
    }
    return g;
  }
  const int full[4] = {0, 0, spec.in_width, spec.in_height};
  const int* box = spec.has_crop ? spec.box : full;
  if (spec.has_resize_after) {
    g.stages.push_back(CropStage(box, spec.resize_after.width,
                                 spec.resize_after.height,
                                 ToFilter(spec.resize_after.filter)));
  } else {
    g.stages.push_back(CropStage(box, box[2], box[3], Filter::kNearest));
  }
  return g;
}

// --- Images in flight --------------------------------------------------------

// A region of an image: pixel (0, 0) of `p` is image pixel (x, y).
struct Region {
  const uint8_t* p = nullptr;
  int x = 0, y = 0, w = 0, h = 0;
  size_t stride = 0;
};

PixelSink SinkFor(const TransformSpec& spec, void* out) {
  PixelSink sink;
  sink.hflip = spec.hflip;
  sink.dst = out;
  switch (spec.output) {
    case TransformOutput::kRgb:
      sink.layout = PixelLayout::kRgb;
      sink.stride = static_cast<size_t>(spec.out_width()) * 3;
      break;
    case TransformOutput::kChwU8:
      sink.layout = PixelLayout::kChwU8;
      break;
    case TransformOutput::kChwF32:
      sink.layout = PixelLayout::kChwF32;
      sink.mean = spec.mean;
      sink.std = spec.std;
      break;
  }
  return sink;
}

// Runs `plan` from `in` into a new RGB image (*buf), described by *out.
Status RunToBuffer(const ResizePlan& plan, const Stage& st, const Region& in,
                   std::vector<uint8_t>* buf, Region* out) {
  const int w = st.x.win_n, h = st.y.win_n;
  buf->resize(static_cast<size_t>(w) * h * 3);
  PixelSink sink;
  sink.layout = PixelLayout::kRgb;
  sink.dst = buf->data();
  sink.stride = static_cast<size_t>(w) * 3;
  Status s = plan.Run(in.p, in.x, in.y, in.w, in.h, in.stride, sink);
  *out = Region{buf->data(), 0, 0, w, h, sink.stride};
  return s;
}

// Runs the stages after the first, whose output is `r`.
Status RunRest(const Geometry& g, const TransformSpec& spec, Region r,
               const PixelSink& final_sink, size_t first) {
  std::vector<uint8_t> a, b;
  for (size_t i = first; i < g.stages.size(); ++i) {
    const Stage& st = g.stages[i];
    ResizePlan plan;
    UFSPACK_RETURN_IF_ERROR(ResizePlan::Make(st.x, st.y, st.filter, &plan));
    if (i + 1 == g.stages.size()) {
      return plan.Run(r.p, r.x, r.y, r.w, r.h, r.stride, final_sink);
    }
    std::vector<uint8_t>& buf = (i % 2) ? a : b;
    UFSPACK_RETURN_IF_ERROR(RunToBuffer(plan, st, r, &buf, &r));
  }
  (void)spec;
  return Status::OK();
}

// The step-by-step path on the whole decoded image (padding, or a box past
// the image's edges): resize_before, pad, crop + resize_after, each as PIL.
Status RunMaterialised(const TransformSpec& spec, Region r,
                       const PixelSink& sink) {
  std::vector<uint8_t> resized, padded;
  if (spec.has_resize_before) {
    Stage st = ResizeStage(r.w, r.h, spec.resize_before, 0, 0,
                           spec.resize_before.width, spec.resize_before.height);
    ResizePlan plan;
    UFSPACK_RETURN_IF_ERROR(ResizePlan::Make(st.x, st.y, st.filter, &plan));
    UFSPACK_RETURN_IF_ERROR(RunToBuffer(plan, st, r, &resized, &r));
  }
  if (spec.has_crop) {
    const int pl = spec.pad[0], pt = spec.pad[1];
    const int pw = r.w + pl + spec.pad[2], ph = r.h + pt + spec.pad[3];
    const size_t stride = static_cast<size_t>(pw) * 3;
    padded.resize(stride * ph);
    for (int y = 0; y < ph; ++y) {
      uint8_t* row = padded.data() + y * stride;
      for (int x = 0; x < pw; ++x) std::memcpy(row + 3 * x, spec.fill, 3);
      if (y >= pt && y < pt + r.h) {
        std::memcpy(row + 3 * pl, r.p + (y - pt) * r.stride,
                    static_cast<size_t>(r.w) * 3);
      }
    }
    r = Region{padded.data(), 0, 0, pw, ph, stride};
  }
  const int full[4] = {0, 0, r.w, r.h};
  const int* box = spec.has_crop ? spec.box : full;
  Stage st =
      spec.has_resize_after
          ? CropStage(box, spec.resize_after.width, spec.resize_after.height,
                      ToFilter(spec.resize_after.filter))
          : CropStage(box, box[2], box[3], Filter::kNearest);
  ResizePlan plan;
  UFSPACK_RETURN_IF_ERROR(ResizePlan::Make(st.x, st.y, st.filter, &plan));
  return plan.Run(r.p, r.x, r.y, r.w, r.h, r.stride, sink);
}

// --- JPEG region decoding (libjpeg API: jpeg_crop_scanline and
// jpeg_skip_scanlines have no TurboJPEG 2.1 equivalent) ----------------------

struct JpegError {
  jpeg_error_mgr mgr;
  jmp_buf jump;
  bool warned = false;
  char message[JMSG_LENGTH_MAX] = {0};
};

void OnJpegError(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  longjmp(err->jump, 1);
}

void OnJpegMessage(j_common_ptr cinfo, int level) {
  if (level >= 0) return;  // trace messages
  auto* err = reinterpret_cast<JpegError*>(cinfo->err);
  if (!err->warned) (*cinfo->err->format_message)(cinfo, err->message);
  err->warned = true;  // any warning: PIL decides, as the full decode does
}

// Columns and rows beyond the used ones that are decoded too, so that fancy
// upsampling at the decoded region's edges (which sees no neighbour there)
// never changes a used pixel.  The triangle filter reaches one chroma sample
// (two pixels) away; transform_test's random crops fail with 0 or 1 and pass
// with 2 on every subsampling; 4 leaves room.
constexpr int kMargin = 4;

// Decodes the region [x0, x1) x [y0, y1) of the JPEG scaled by 1/denom
// (clamped to the image, widened to iMCU columns and by kMargin) into *buf.
// Everything between setjmp and the end uses no object with a destructor
// but the caller-owned *buf, which is only resized.
Status DecodeJpegRegion(const uint8_t* data, size_t size, int denom, int x0,
                        int x1, int y0, int y1, int expect_w, int expect_h,
                        uint64_t max_pixels, std::vector<uint8_t>* buf,
                        std::vector<JSAMPROW>* rows,
                        std::vector<uint8_t>* scratch, Region* out,
                        TransformStats* stats) {
  jpeg_decompress_struct cinfo;
  JpegError err;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = OnJpegError;
  err.mgr.emit_message = OnJpegMessage;
  // 0 ok, 1 bad size, 2 CMYK, 3 warning, 4 too large
  volatile int outcome = 0;
  volatile int got_w = 0, got_h = 0;
  jpeg_create_decompress(&cinfo);
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return Status::NotSupported(std::string("JPEG: ") + err.message +
                                " (corrupt or truncated data: PIL decides)");
  }
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  got_w = static_cast<int>(cinfo.image_width);
  got_h = static_cast<int>(cinfo.image_height);
  if (cinfo.jpeg_color_space == JCS_CMYK ||
      cinfo.jpeg_color_space == JCS_YCCK) {
    outcome = 2;
  } else if (got_w != expect_w || got_h != expect_h) {
    outcome = 1;
  } else if (static_cast<uint64_t>(got_w) * static_cast<uint64_t>(got_h) >
             max_pixels) {
    outcome = 4;
  } else if (err.warned) {
    outcome = 3;
  }
  if (outcome == 0) {
    // What PIL asks libjpeg for (ISLOW DCT, fancy upsampling), and RGB.
    cinfo.out_color_space = JCS_RGB;
    cinfo.dct_method = JDCT_ISLOW;
    cinfo.do_fancy_upsampling = TRUE;
    cinfo.scale_num = 1;
    cinfo.scale_denom = static_cast<unsigned int>(denom);
    jpeg_start_decompress(&cinfo);
    const int ow = static_cast<int>(cinfo.output_width);
    const int oh = static_cast<int>(cinfo.output_height);
    JDIMENSION xoff = static_cast<JDIMENSION>(std::max(0, x0 - kMargin));
    JDIMENSION xw = static_cast<JDIMENSION>(std::min(ow, x1 + kMargin)) - xoff;
    if (xoff != 0 || static_cast<int>(xw) != ow) {
      jpeg_crop_scanline(&cinfo, &xoff, &xw);
    }
    const int ys = std::max(0, y0 - kMargin);
    const int ye = std::min(oh, y1 + kMargin);
    const size_t stride = static_cast<size_t>(xw) * 3;
    buf->resize(stride * static_cast<size_t>(ye - ys));
    if (ys > 0) jpeg_skip_scanlines(&cinfo, static_cast<JDIMENSION>(ys));
    // All row pointers at once, as TurboJPEG does: libjpeg then upsamples
    // and converts whole row groups into place (one row per call is about
    // twice as slow with 4:2:0 fancy upsampling).
    rows->resize(static_cast<size_t>(ye - ys));
    for (int y = ys; y < ye; ++y) {
      (*rows)[y - ys] = buf->data() + stride * static_cast<size_t>(y - ys);
    }
    while (static_cast<int>(cinfo.output_scanline) < ye) {
      const int done = static_cast<int>(cinfo.output_scanline) - ys;
      jpeg_read_scanlines(&cinfo, rows->data() + done,
                          static_cast<JDIMENSION>(ye - ys - done));
    }
    // The rest is entropy-decoded so that damage anywhere is seen, as a
    // full decode sees it.  Not with one skip to the end: libjpeg-turbo
    // returns from a skip that reaches the last row without reading
    // anything, and jpeg_finish_decompress then reads nothing more either
    // (a single-scan decoder's consume_input is a no-op), so a truncated
    // file would pass.  A skip that stops short of the end decodes the
    // entropy-coded data of the rows it skips (without the IDCT, upsampling
    // or colour conversion); the last row is then read for real.
    if (ye < oh) {
      if (oh - 1 > ye) {
        jpeg_skip_scanlines(&cinfo, static_cast<JDIMENSION>(oh - 1 - ye));
      }
      scratch->resize(static_cast<size_t>(xw) * 3);
      JSAMPROW last = scratch->data();
      while (static_cast<int>(cinfo.output_scanline) < oh) {
        jpeg_read_scanlines(&cinfo, &last, 1);
      }
    }
    jpeg_finish_decompress(&cinfo);
    *out = Region{buf->data(), static_cast<int>(xoff),
                  ys,          static_cast<int>(xw),
                  ye - ys,     stride};
    if (stats != nullptr) {
      stats->scale_denom = denom;
      stats->decoded_x = static_cast<int>(xoff);
      stats->decoded_y = ys;
      stats->decoded_width = static_cast<int>(xw);
      stats->decoded_height = ye - ys;
    }
    if (err.warned) outcome = 3;
  }
  jpeg_destroy_decompress(&cinfo);
  switch (outcome) {
    case 1:
      return Status::InvalidArgument("JPEG: image is " + Str(got_w) + "x" +
                                     Str(got_h) +
                                     ", the transform was drawn for " +
                                     Str(expect_w) + "x" + Str(expect_h));
    case 2:
      return Status::NotSupported("JPEG: CMYK/YCCK color space needs PIL");
    case 3:
      return Status::NotSupported(std::string("JPEG warning: ") + err.message +
                                  " (corrupt or truncated data: PIL decides)");
    case 4:
      return Status::NotSupported("JPEG: " + Str(got_w) + "x" + Str(got_h) +
                                  " is over the pixel limit: PIL decides");
    default:
      return Status::OK();
  }
}

// The DCT scale for the first stage: the largest 1/d (d <= 8) that keeps the
// box at least the output size on both axes; 1 when the stage does not
// resample with a convolution filter.
int ChooseDenom(const Stage& st) {
  if (st.filter == Filter::kNearest) return 1;
  const double bw = st.x.in1 - st.x.in0, bh = st.y.in1 - st.y.in0;
  int d = 1;
  while (d < 8 && bw / (2 * d) >= st.x.out && bh / (2 * d) >= st.y.out) d *= 2;
  return d;
}

// The stage's axis with its box mapped to a 1/d-scaled image of `scaled`
// pixels: a fractional box, reading the scaled pixels that cover it.
ResizeAxis ScaleAxis(const ResizeAxis& a, int d, int scaled) {
  const double b0 = (a.origin + static_cast<double>(a.in0)) / d;
  const double b1 = (a.origin + static_cast<double>(a.in1)) / d;
  ResizeAxis s = a;
  s.origin = static_cast<int>(b0);
  s.in0 = static_cast<float>(b0 - s.origin);
  s.in1 = static_cast<float>(b1 - s.origin);
  s.lo = std::max(0, static_cast<int>(static_cast<double>(a.lo) / d));
  s.hi = std::min(scaled, static_cast<int>((a.hi + d - 1) / d));
  if (s.hi <= s.lo) s.hi = std::min(scaled, s.lo + 1);
  return s;
}

}  // namespace

int TransformSpec::out_width() const {
  if (has_resize_after) return resize_after.width;
  if (has_crop) return box[2];
  if (has_resize_before) return resize_before.width;
  return in_width;
}

int TransformSpec::out_height() const {
  if (has_resize_after) return resize_after.height;
  if (has_crop) return box[3];
  if (has_resize_before) return resize_before.height;
  return in_height;
}

size_t TransformSpec::output_bytes() const {
  const size_t n = static_cast<size_t>(out_width()) * out_height() * 3;
  return output == TransformOutput::kChwF32 ? n * sizeof(float) : n;
}

Status TransformSpec::Validate() const {
  constexpr int kMax = 1 << 20;  // per side: far past any image PIL opens
  auto bad = [](const std::string& what) {
    return Status::InvalidArgument("transform spec: " + what);
  };
  auto size_ok = [](int w, int h) {
    return w >= 1 && h >= 1 && w <= kMax && h <= kMax;
  };
  if (!size_ok(in_width, in_height)) {
    return bad("input size " + Str(in_width) + "x" + Str(in_height));
  }
  int w = in_width, h = in_height;
  if (has_resize_before) {
    if (!size_ok(resize_before.width, resize_before.height) ||
        !ValidResample(resize_before.filter)) {
      return bad("resize_before " + Str(resize_before.width) + "x" +
                 Str(resize_before.height) + " filter " +
                 Str(static_cast<int>(resize_before.filter)));
    }
    w = resize_before.width;
    h = resize_before.height;
  }
  if (has_crop) {
    for (int p : pad) {
      if (p < 0 || p > kMax) return bad("padding " + Str(p));
    }
    const long long pw = static_cast<long long>(w) + pad[0] + pad[2];
    const long long ph = static_cast<long long>(h) + pad[1] + pad[3];
    if (box[2] < 1 || box[3] < 1 || box[0] < 0 || box[1] < 0 ||
        box[0] + static_cast<long long>(box[2]) > pw ||
        box[1] + static_cast<long long>(box[3]) > ph) {
      return bad("crop box " + Str(box[2]) + "x" + Str(box[3]) + " at (" +
                 Str(box[0]) + ", " + Str(box[1]) + ") outside the " + Str(pw) +
                 "x" + Str(ph) + " padded image");
    }
  }
  if (has_resize_after && (!size_ok(resize_after.width, resize_after.height) ||
                           !ValidResample(resize_after.filter))) {
    return bad("resize_after " + Str(resize_after.width) + "x" +
               Str(resize_after.height));
  }
  if (output != TransformOutput::kRgb && output != TransformOutput::kChwU8 &&
      output != TransformOutput::kChwF32) {
    return bad("output " + Str(static_cast<int>(output)));
  }
  if (output == TransformOutput::kChwF32) {
    for (int c = 0; c < 3; ++c) {
      if (std[c] == 0.0f) return bad("std[" + Str(c) + "] is zero");
    }
  }
  return Status::OK();
}

Status ProbeJpeg(const void* data, size_t size, int* width, int* height,
                 uint64_t max_pixels) {
  const auto* p = static_cast<const uint8_t*>(data);
  if (size < 3 || p[0] != 0xFF || p[1] != 0xD8 || p[2] != 0xFF) {
    return Status::NotSupported("not a JPEG");
  }
  jpeg_decompress_struct cinfo;
  JpegError err;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = OnJpegError;
  err.mgr.emit_message = OnJpegMessage;
  jpeg_create_decompress(&cinfo);
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return Status::NotSupported(std::string("JPEG header: ") + err.message);
  }
  jpeg_mem_src(&cinfo, p, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  const J_COLOR_SPACE cs = cinfo.jpeg_color_space;
  const uint64_t w = cinfo.image_width, h = cinfo.image_height;
  const bool warned = err.warned;
  jpeg_destroy_decompress(&cinfo);
  if (cs == JCS_CMYK || cs == JCS_YCCK) {
    return Status::NotSupported("JPEG: CMYK/YCCK color space needs PIL");
  }
  if (warned) return Status::NotSupported("JPEG header warning: PIL decides");
  if (w == 0 || h == 0 || w * h > max_pixels || w > (1u << 20) ||
      h > (1u << 20)) {
    return Status::NotSupported("JPEG: size " + Str(static_cast<long long>(w)) +
                                "x" + Str(static_cast<long long>(h)) +
                                ": PIL decides");
  }
  *width = static_cast<int>(w);
  *height = static_cast<int>(h);
  return Status::OK();
}

Status TransformRgb(const uint8_t* rgb, int width, int height, size_t stride,
                    const TransformSpec& spec, void* out) {
  UFSPACK_RETURN_IF_ERROR(spec.Validate());
  if (rgb == nullptr || out == nullptr) {
    return Status::InvalidArgument("transform: null image or output");
  }
  if (width != spec.in_width || height != spec.in_height) {
    return Status::InvalidArgument(
        "transform: image is " + Str(width) + "x" + Str(height) +
        ", the transform was drawn for " + Str(spec.in_width) + "x" +
        Str(spec.in_height));
  }
  if (stride / 3 < static_cast<size_t>(width)) {
    return Status::InvalidArgument("transform: stride " + Str(stride) +
                                   " is shorter than a row");
  }
  const PixelSink sink = SinkFor(spec, out);
  const Region src{rgb, 0, 0, width, height, stride};
  const Geometry g = PlanGeometry(spec);
  if (!g.direct) return RunMaterialised(spec, src, sink);
  return RunRest(g, spec, src, sink, 0);
}

Status TransformJpeg(const void* data, size_t size, const TransformSpec& spec,
                     void* out, TransformStats* stats, uint64_t max_pixels) {
  UFSPACK_RETURN_IF_ERROR(spec.Validate());
  if (data == nullptr || out == nullptr) {
    return Status::InvalidArgument("transform: null data or output");
  }
  const auto* p = static_cast<const uint8_t*>(data);
  const PixelSink sink = SinkFor(spec, out);
  const Geometry g = PlanGeometry(spec);
  thread_local std::vector<uint8_t> decoded;
  thread_local std::vector<JSAMPROW> rows;
  thread_local std::vector<uint8_t> scratch;
  Region r;
  if (!g.direct) {
    UFSPACK_RETURN_IF_ERROR(DecodeJpegRegion(
        p, size, 1, 0, spec.in_width, 0, spec.in_height, spec.in_width,
        spec.in_height, max_pixels, &decoded, &rows, &scratch, &r, stats));
    return RunMaterialised(spec, r, sink);
  }
  Stage first = g.stages[0];
  int denom = spec.dct_scaling ? ChooseDenom(first) : 1;
  if (denom > 1) {
    const int sw = (spec.in_width + denom - 1) / denom;
    const int sh = (spec.in_height + denom - 1) / denom;
    first.x = ScaleAxis(first.x, denom, sw);
    first.y = ScaleAxis(first.y, denom, sh);
  }
  ResizePlan plan;
  UFSPACK_RETURN_IF_ERROR(
      ResizePlan::Make(first.x, first.y, first.filter, &plan));
  UFSPACK_RETURN_IF_ERROR(DecodeJpegRegion(
      p, size, denom, plan.need_x0(), plan.need_x1(), plan.need_y0(),
      plan.need_y1(), spec.in_width, spec.in_height, max_pixels, &decoded,
      &rows, &scratch, &r, stats));
  if (g.stages.size() == 1) {
    return plan.Run(r.p, r.x, r.y, r.w, r.h, r.stride, sink);
  }
  std::vector<uint8_t> buf;
  Region mid;
  UFSPACK_RETURN_IF_ERROR(RunToBuffer(plan, first, r, &buf, &mid));
  return RunRest(g, spec, mid, sink, 1);
}

}  // namespace ufspack
