// Copyright 2026 The ufspack Authors.
//
// Decode + torchvision's standard transforms, fused: what
// MyImageFolder(fast_transforms=True) runs for a sample once its random
// parameters are drawn (python/ufspack/fast_transforms.py draws them from
// torch's RNG and fills a TransformSpec).  The pipeline, each stage
// optional, on the RGB image PIL.Image.open(f).convert("RGB") would give:
//
//   resize_before -> pad -> crop -> resize_after -> hflip -> output
//
// with output HWC RGB bytes (a PIL image), CHW uint8 (PILToTensor) or CHW
// float32 ((v / 255 - mean) / std: ToTensor [+ Normalize]).  Every resize
// is Pillow 9.4's Image.resize of the (cropped) image, bit for bit.
//
// JPEG (TransformJpeg) decodes only what the output needs: the rows and
// iMCU columns the first resize (or the crop) reads, with libjpeg-turbo's
// jpeg_crop_scanline / jpeg_skip_scanlines, plus a margin so chroma
// upsampling at the region's edges never touches a pixel that is used.
// Without dct_scaling the result is identical to running torchvision on
// PIL's decode.  With dct_scaling, when the first resize shrinks by at
// least 2 on both axes, the JPEG is decoded at 1/2, 1/4 or 1/8 scale
// (libjpeg's scaled IDCT, the largest factor that keeps the decoded box at
// least the output size) and resized from there with the box in scaled
// coordinates: close to torchvision (see docs/transforms.md), not equal.
//
// Anything the fast decoder would hand to PIL (CMYK/YCCK, any libjpeg
// warning or error: truncated or corrupt data) returns NotSupported, so the
// caller decodes with PIL and calls TransformRgb on PIL's pixels.  Corrupt
// data is detected as in a full decode: the rows after the region are
// still entropy-decoded (skipped, not reconstructed) to the end of the
// image.
//
// Thread safety: all functions may be called concurrently; they touch no
// Python object (call them with the GIL released).
#ifndef UFSPACK_TRANSFORM_H_
#define UFSPACK_TRANSFORM_H_

#include <cstddef>
#include <cstdint>

#include "ufspack/export.h"
#include "ufspack/status.h"

namespace ufspack {

// PIL.Image.Resampling values of the filters torchvision maps its
// InterpolationMode to.
enum class Resample : int { kNearest = 0, kBilinear = 2, kBicubic = 3 };

struct ResizeSpec {
  int width = 0;
  int height = 0;
  Resample filter = Resample::kBilinear;
};

enum class TransformOutput : int {
  kRgb = 0,     // height x width x 3 bytes (for a PIL image)
  kChwU8 = 1,   // 3 x height x width bytes (PILToTensor)
  kChwF32 = 2,  // 3 x height x width float32 (ToTensor [+ Normalize])
};

// One sample's concrete operations (sizes are width, height).
struct TransformSpec {
  int in_width = 0;  // the image size the parameters were drawn for
  int in_height = 0;
  bool has_resize_before = false;
  ResizeSpec resize_before;
  bool has_crop = false;
  int pad[4] = {0, 0, 0, 0};  // left, top, right, bottom, >= 0
  uint8_t fill[3] = {0, 0, 0};
  int box[4] = {0, 0, 0, 0};  // left, top, width, height in padded coords
  bool has_resize_after = false;
  ResizeSpec resize_after;
  bool hflip = false;
  TransformOutput output = TransformOutput::kRgb;
  float mean[3] = {0.0f, 0.0f, 0.0f};  // kChwF32 only
  float std[3] = {1.0f, 1.0f, 1.0f};   // kChwF32 only, non-zero
  bool dct_scaling = false;  // JPEG only: allow approximate DCT downscaling

  int out_width() const;
  int out_height() const;
  // Bytes the output takes (out_width * out_height * 3, times 4 for float).
  size_t output_bytes() const;
  // InvalidArgument naming the field when the spec is inconsistent (sizes,
  // a box outside the padded image, std 0, negative padding...).
  Status Validate() const;
};

// What TransformJpeg did, for tests and benchmarks.
struct TransformStats {
  int scale_denom = 1;  // 1, 2, 4 or 8
  int decoded_x = 0;    // the region decoded, in (scaled) pixels
  int decoded_y = 0;
  int decoded_width = 0;
  int decoded_height = 0;
};

// The size of a JPEG the fused path can decode (baseline or progressive,
// gray/YCbCr/RGB); NotSupported for anything else (CMYK/YCCK, not a JPEG,
// a header libjpeg rejects or warns about, over `max_pixels`).
UFSPACK_EXPORT Status ProbeJpeg(const void* data, size_t size, int* width,
                                int* height, uint64_t max_pixels = 178956970);

// Runs `spec` on a JPEG, writing spec.output_bytes() bytes at `out`.
// InvalidArgument for a bad spec or an image whose size is not
// spec.in_width x spec.in_height; NotSupported when PIL must decode.
UFSPACK_EXPORT Status TransformJpeg(const void* data, size_t size,
                                    const TransformSpec& spec, void* out,
                                    TransformStats* stats = nullptr,
                                    uint64_t max_pixels = 178956970);

// Runs `spec` (dct_scaling ignored) on decoded RGB pixels: height rows of
// width RGB pixels, `stride` bytes apart.
UFSPACK_EXPORT Status TransformRgb(const uint8_t* rgb, int width, int height,
                                   size_t stride, const TransformSpec& spec,
                                   void* out);

}  // namespace ufspack

#endif  // UFSPACK_TRANSFORM_H_
