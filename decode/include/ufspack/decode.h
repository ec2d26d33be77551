// Copyright 2026 The ufspack Authors.
//
// In-memory image decoding to 8-bit RGB with exactly the pixels that
// torchvision's default loader gives:
//
//   PIL.Image.open(f).convert("RGB") (torchvision.datasets.folder.pil_loader)
//
// Fast paths, each used only where it is known to match PIL pixel for pixel:
//   JPEG  libjpeg-turbo's TurboJPEG API, decoding straight to RGB (no BGR
//         swap), ISLOW DCT and fancy upsampling like PIL; grayscale JPEGs
//         are replicated to RGB as PIL's convert("RGB") does.  EXIF
//         orientation is ignored, as ImageFolder ignores it.
//   PNG, BMP, PPM/PGM
//         OpenCV's imdecode(IMREAD_UNCHANGED) for 8-bit images: gray is
//         replicated, alpha is dropped, BGR is reordered to RGB.
//
// Everything else returns NotSupported so the caller can fall back to PIL
// itself: CMYK/YCCK JPEGs, 16-bit and other non-8-bit images, TIFF, WebP,
// GIF, unknown formats, and any input a fast decoder reports a warning for
// (truncated or corrupt data: PIL decides what happens to those).
//
// Thread safety: all functions are safe to call concurrently; decoder state
// is kept per thread.  They touch no Python object (call them with the GIL
// released).
#ifndef UFSPACK_DECODE_H_
#define UFSPACK_DECODE_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "ufspack/export.h"
#include "ufspack/status.h"

namespace ufspack {

enum class ImageFormat {
  kUnknown,
  kJpeg,
  kPng,
  kBmp,
  kPnm,  // PBM/PGM/PPM (P1-P6)
  kTiff,
  kWebp,
  kGif,
};

// Identifies the format from the first bytes (magic numbers), never from a
// file name.
UFSPACK_EXPORT ImageFormat SniffImageFormat(const void* data, size_t size);
UFSPACK_EXPORT const char* ImageFormatName(ImageFormat format);

// A decoded image: height x width x 3 bytes, rows top to bottom, RGB.
struct RgbImage {
  int width = 0;
  int height = 0;
  // width * height * 3 bytes, allocated with new[]; ownership may be taken
  // (e.g. handed to numpy without a copy).
  std::unique_ptr<uint8_t[]> pixels;
  size_t size() const {
    return static_cast<size_t>(width) * static_cast<size_t>(height) * 3;
  }
};

// Decodes `data` into *out.  Returns NotSupported (with the reason) when
// the input needs PIL for exact parity, Corruption when a fast decoder
// positively rejects it.  Refuses images over `max_pixels` pixels with
// InvalidArgument (PIL's default decompression-bomb limit is 178,956,970).
UFSPACK_EXPORT Status DecodeRgb(const void* data, size_t size, RgbImage* out,
                                uint64_t max_pixels = 178956970);

// Decodes into rows the caller provides, 4 bytes per pixel: R, G, B and an
// X byte set to 255, which is how PIL holds an "RGB" image in memory.  A
// PIL image can so be filled in place, with no HxWx3 buffer in between.
// Two steps, since the rows can only be allocated once the size is known:
//
//   RgbxDecoder d;
//   Status s = d.Prepare(data, size);  // the header (JPEG), or the whole
//                                      // decode (PNG, BMP, PNM)
//   ... allocate d.height() rows of d.width() * 4 bytes ...
//   s = d.DecodeInto(rows);            // the pixels
//
// The same inputs take the fast path as with DecodeRgb, with the same
// pixels, and either step returns what DecodeRgb would: NotSupported means
// PIL must decode the input (after a failed DecodeInto the rows hold
// garbage), InvalidArgument an image over `max_pixels`.
//
// Thread safety: one decoder per image.  Different decoders may be used
// concurrently, and the two steps of one may run on different threads (one
// after the other).  `data` must stay valid and unchanged from Prepare
// until DecodeInto returns.
class UFSPACK_EXPORT RgbxDecoder {
 public:
  RgbxDecoder();
  ~RgbxDecoder();
  RgbxDecoder(RgbxDecoder&&) noexcept;
  RgbxDecoder& operator=(RgbxDecoder&&) noexcept;

  // Reads the header (or decodes, see above).  On OK, width() and height()
  // are set (both at least 1).
  Status Prepare(const void* data, size_t size,
                 uint64_t max_pixels = 178956970);
  int width() const { return width_; }
  int height() const { return height_; }

  // Writes the pixels.  REQUIRES: Prepare returned OK, DecodeInto not yet
  // called; rows[y], for y < height(), points to width() * 4 writable bytes.
  // Rows evenly spaced in memory are decoded in place (JPEG); others, e.g.
  // an image spread over several blocks, through a scratch buffer.
  Status DecodeInto(uint8_t* const* rows);

 private:
  struct Decoded;  // what Prepare decoded (PNG, BMP, PNM)
  const void* data_ = nullptr;
  size_t size_ = 0;
  int width_ = 0;
  int height_ = 0;
  std::unique_ptr<Decoded> decoded_;
};

}  // namespace ufspack

#endif  // UFSPACK_DECODE_H_
