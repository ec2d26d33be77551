// Copyright 2026 The ufspack Authors.
//
// Fast decoding to RGB with PIL's pixels; see decode.h.  Every rule below
// that sends an input to PIL (NotSupported) was found by comparing the fast
// decoders with Pillow 9.4 (Debian 12) on generated variants of each format;
// tests/decode/decode_test.cc holds those variants.
//
// Where the fast decoders and PIL disagree (all cheap to see in the header):
//   PNG   16-bit samples (PIL keeps the high byte or makes mode I);
//         a pre-IDAT chunk with a bad CRC (PIL refuses, libpng skips it);
//         no IEND at the very end (truncated: libpng fails noisily, PIL may
//         still decode what is there).
//         A palette shorter than 2^depth is not a fallback: PIL maps indices
//         past its end to gray (i,i,i), libpng to black, so the palette is
//         padded with PIL's gray ramp in a scratch copy before decoding.
//   BMP   OS/2 and other headers than 40/52/56/108/124 bytes (OpenCV misreads
//         OS/2 v1); 16-bit (PIL scales 5-bit channels, OpenCV shifts);
//         bit fields other than 8-8-8(-8) RGB(A) (PIL refuses them, OpenCV
//         swaps); RLE4/RLE8 (PIL refuses streams that end early or skip
//         pixels, OpenCV fills them); a palette of more than 2^depth
//         colours, or a short one of 1 or 2 colours (PIL takes those for
//         mode 1/L whatever the depth);
//         pixel data shorter than the header says (truncated).
//         A short palette otherwise is padded like PNG's.
//   PNM   maxval other than 255 (PIL rescales, OpenCV does not, or gives
//         16 bits); binary data shorter than the header says; plain (ASCII)
//         data with comments, values over 255 or too few values; headers
//         this parser does not fully understand.
//   JPEG  CMYK/YCCK; any libjpeg warning or error (PIL decides).
#include "ufspack/decode.h"

#include <turbojpeg.h>
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <string>
#include <utility>
#include <vector>

#include "decoders.h"
#include "ufspack/coding.h"

namespace ufspack {
namespace {

constexpr uint64_t kDefaultMaxPixels = 178956970;  // PIL's MAX_IMAGE_PIXELS

// PNG is big-endian; BMP little-endian, read with coding.h's helpers.
uint32_t LoadBe32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) |
         (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}
void StoreBe32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}
uint32_t LoadLe32(const uint8_t* p) {
  return DecodeFixed32(reinterpret_cast<const char*>(p));
}
uint16_t LoadLe16(const uint8_t* p) {
  return DecodeFixed16(reinterpret_cast<const char*>(p));
}
void StoreLe32(uint8_t* p, uint32_t v) {
  EncodeFixed32(reinterpret_cast<char*>(p), v);
}

std::string Dims(uint64_t width, uint64_t height) {
  return std::to_string(width) + "x" + std::to_string(height);
}

// Refuses empty and over-limit images before anything is allocated.
Status CheckDims(const char* format, uint64_t width, uint64_t height,
                 uint64_t max_pixels) {
  if (width == 0 || height == 0) {
    return Status::NotSupported(std::string(format) + ": empty image " +
                                Dims(width, height) + " needs PIL");
  }
  // Both are below 2^32 here, so the product cannot overflow.
  uint64_t pixels = width * height;
  if (pixels > max_pixels || width > INT32_MAX || height > INT32_MAX) {
    return Status::InvalidArgument(
        std::string(format) + ": image " + Dims(width, height) + " has " +
        std::to_string(pixels) + " pixels, over the limit of " +
        std::to_string(max_pixels));
  }
  return Status::OK();
}

void Allocate(int width, int height, RgbImage* out) {
  out->width = width;
  out->height = height;
  out->pixels.reset(new uint8_t[out->size()]);  // uninitialised on purpose
}

// CRC-32 of PNG chunks: zlib's crc32() (the same polynomial, ISO 3309).
uint32_t Crc32(const uint8_t* p, size_t n) {
  return static_cast<uint32_t>(::crc32_z(::crc32(0L, Z_NULL, 0), p, n));
}

// ---------------------------------------------------------------------------
// JPEG through TurboJPEG
// ---------------------------------------------------------------------------

struct TjDecompressor {
  tjhandle handle = nullptr;
  ~TjDecompressor() { Reset(); }
  void Reset() {
    if (handle != nullptr) tjDestroy(handle);
    handle = nullptr;
  }
};

// One decompressor per thread, created on first use.
TjDecompressor& ThreadTurboJpeg() {
  thread_local TjDecompressor d;
  if (d.handle == nullptr) d.handle = tjInitDecompress();
  return d;
}

// Turns the failure of a TurboJPEG call into a Status.  `fallback`: report
// decoder errors as NotSupported (PIL decides what such files give) rather
// than Corruption.
Status JpegFailure(TjDecompressor& decompressor, const char* step,
                   bool fallback) {
  tjhandle tj = decompressor.handle;
  bool warning = tjGetErrorCode(tj) == TJERR_WARNING;
  std::string msg = std::string("JPEG: ") + step +
                    (warning ? " warning" : " error") + ": " +
                    tjGetErrorStr2(tj);
  // libjpeg-turbo 2.1 leaves the decompressor unusable after some errors
  // (the next header read fails with "Unsupported marker"): start afresh.
  decompressor.Reset();
  if (warning || fallback) {
    return Status::NotSupported(msg +
                                " (corrupt or truncated data: PIL decides)");
  }
  return Status::Corruption(msg);
}

// This thread's decompressor, or IOError.
Status JpegDecompressor(tjhandle* tj) {
  *tj = ThreadTurboJpeg().handle;
  if (*tj == nullptr) {
    return Status::IOError(std::string("JPEG: tjInitDecompress failed: ") +
                           tjGetErrorStr2(nullptr));
  }
  return Status::OK();
}

// Reads the header: the size, and NotSupported for what needs PIL.
Status JpegHeader(const void* data, size_t size, uint64_t max_pixels,
                  bool fallback, int* width, int* height) {
  tjhandle tj;
  UFSPACK_RETURN_IF_ERROR(JpegDecompressor(&tj));
  static_assert(sizeof(unsigned long) >= sizeof(size_t), "jpegSize");
  int subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(tj, static_cast<const unsigned char*>(data),
                          static_cast<unsigned long>(size), width, height,
                          &subsamp, &colorspace) != 0) {
    return JpegFailure(ThreadTurboJpeg(), "header", fallback);
  }
  if (colorspace == TJCS_CMYK || colorspace == TJCS_YCCK) {
    return Status::NotSupported(std::string("JPEG: ") +
                                (colorspace == TJCS_CMYK ? "CMYK" : "YCCK") +
                                " color space needs PIL");
  }
  return CheckDims("JPEG", static_cast<uint64_t>(*width),
                   static_cast<uint64_t>(*height), max_pixels);
}

// Decompresses a JPEG whose header gave `width` x `height` into `dst`, rows
// `pitch` bytes apart, as `pixel_format` (TJPF_RGB or TJPF_RGBX; RGBX's X
// is 0xFF, TurboJPEG's documented guarantee).
Status JpegDecompress(const void* data, size_t size, int width, int height,
                      uint8_t* dst, int pitch, int pixel_format,
                      bool fallback) {
  tjhandle tj;
  UFSPACK_RETURN_IF_ERROR(JpegDecompressor(&tj));
  // flags 0: ISLOW DCT, fancy upsampling, top-down: what PIL asks libjpeg.
  if (tjDecompress2(tj, static_cast<const unsigned char*>(data),
                    static_cast<unsigned long>(size), dst, width, pitch, height,
                    pixel_format, 0) != 0) {
    return JpegFailure(ThreadTurboJpeg(), "decode", fallback);
  }
  return Status::OK();
}

Status DecodeJpeg(const void* data, size_t size, uint64_t max_pixels,
                  bool fallback, RgbImage* out) {
  int width = 0, height = 0;
  UFSPACK_RETURN_IF_ERROR(
      JpegHeader(data, size, max_pixels, fallback, &width, &height));
  Allocate(width, height, out);
  Status s = JpegDecompress(data, size, width, height, out->pixels.get(),
                            width * 3, TJPF_RGB, fallback);
  if (!s.ok()) *out = RgbImage();
  return s;
}

// ---------------------------------------------------------------------------
// OpenCV (PNG, BMP, PNM)
// ---------------------------------------------------------------------------

// OpenCV 4.6 builds imdecode's codec registry (ImageCodecInitializer: one
// decoder object per format, GDAL's driver registration among them) in a
// function-local static on first use.  That construction is thread-safe, but
// the check that skips it once done is an inline load of the guard byte in
// uninstrumented libopencv_imgcodecs (getCodecs(): `movzbl guard; test; je
// slow path`), so ThreadSanitizer sees no happens-before edge between the
// thread that built the registry and a later thread that reads a decoder's
// signature in it (memcmp in checkSignature): the report of issue 10, a
// false positive, since on x86-64 that load is an acquire.  Decoding a tiny
// PNG once, under std::call_once (pthread_once, which TSan models), before
// any other imdecode or cvtColor makes the ordering explicit for every thread
// and keeps the one-time set-up out of the first real decode.
void InitOpenCvOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    // 1x1 RGB PNG (pixel 1,2,3), written by Pillow.
    static const unsigned char kPng[] =
        "\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR\x00\x00\x00\x01\x00\x00\x00"
        "\x01\x08\x02\x00\x00\x00\x90\x77\x53\xde\x00\x00\x00\x0cIDAT\x78"
        "\xda\x63\x60\x64\x62\x06\x00\x00\x0e\x00\x07\xe9\x92\x37\xd4\x00"
        "\x00\x00\x00IEND\xae\x42\x60\x82";
    try {
      const cv::Mat buf(1, static_cast<int>(sizeof(kPng) - 1), CV_8U,
                        const_cast<unsigned char*>(kPng));
      cv::Mat img = cv::imdecode(buf, cv::IMREAD_UNCHANGED);
      // The three conversions DecodeOpenCv uses, for whatever cvtColor
      // sets up lazily (its dispatch tables, IPP/HAL state).
      cv::Mat rgb;
      if (!img.empty()) cv::cvtColor(img, rgb, cv::COLOR_BGR2RGB);
      cv::cvtColor(cv::Mat(1, 1, CV_8UC1, cv::Scalar(0)), rgb,
                   cv::COLOR_GRAY2RGB);
      cv::cvtColor(cv::Mat(1, 1, CV_8UC4, cv::Scalar(0)), rgb,
                   cv::COLOR_BGRA2RGB);
    } catch (...) {
      // Best effort: a failure here shows again, and is reported, on the
      // real decode.
    }
  });
}

// Decodes with imdecode(IMREAD_UNCHANGED) into *img: 8-bit samples, 1, 3
// (BGR) or 4 (BGRA) channels.  `expect_w`/`expect_h` (from the header, or
// 0) must match.
Status ImdecodeChecked(const char* format, const void* data, size_t size,
                       int expect_w, int expect_h, uint64_t max_pixels,
                       bool fallback, cv::Mat* img) {
  if (size > static_cast<size_t>(INT32_MAX)) {
    return Status::NotSupported(std::string(format) +
                                ": input too large for OpenCV");
  }
  InitOpenCvOnce();
  try {
    const cv::Mat buf(1, static_cast<int>(size), CV_8U,
                      const_cast<void*>(data));
    // Not the imdecode(buf, flags, Mat* dst) overload with a reused
    // scratch Mat: on failure OpenCV 4.6 returns *dst untouched, i.e. the
    // previous image.
    *img = cv::imdecode(buf, cv::IMREAD_UNCHANGED);
  } catch (const std::exception& e) {
    *img = cv::Mat();
    return Status::NotSupported(std::string(format) + ": OpenCV: " + e.what());
  }
  if (img->empty()) {
    std::string msg = std::string(format) + ": OpenCV could not decode it";
    return fallback ? Status::NotSupported(msg + " (PIL decides)")
                    : Status::Corruption(msg);
  }
  if (img->depth() != CV_8U || img->dims != 2) {
    return Status::NotSupported(std::string(format) + ": " +
                                std::to_string(img->elemSize1() * 8) +
                                "-bit samples need PIL");
  }
  if ((expect_w != 0 && img->cols != expect_w) ||
      (expect_h != 0 && img->rows != expect_h)) {
    return Status::NotSupported(std::string(format) + ": OpenCV decoded " +
                                Dims(img->cols, img->rows) + ", header says " +
                                Dims(expect_w, expect_h));
  }
  const int channels = img->channels();
  if (channels != 1 && channels != 3 && channels != 4) {
    return Status::NotSupported(std::string(format) + ": " +
                                std::to_string(channels) +
                                " channels need PIL");
  }
  return CheckDims(format, static_cast<uint64_t>(img->cols),
                   static_cast<uint64_t>(img->rows), max_pixels);
}

// An ImdecodeChecked image to RGB in a new buffer: gray is replicated,
// alpha dropped, BGR reordered.
Status MatToRgb(const char* format, const cv::Mat& img, RgbImage* out) {
  const int code = img.channels() == 1   ? cv::COLOR_GRAY2RGB
                   : img.channels() == 3 ? cv::COLOR_BGR2RGB
                                         : cv::COLOR_BGRA2RGB;
  try {
    Allocate(img.cols, img.rows, out);
    cv::Mat dst(img.rows, img.cols, CV_8UC3, out->pixels.get());
    cv::cvtColor(img, dst, code);
    if (dst.data != out->pixels.get()) {  // cvtColor reallocated: never
      *out = RgbImage();
      return Status::NotSupported(std::string(format) +
                                  ": OpenCV conversion reallocated");
    }
  } catch (const std::exception& e) {
    *out = RgbImage();
    return Status::NotSupported(std::string(format) + ": OpenCV: " + e.what());
  }
  return Status::OK();
}

// The same conversion into rows of RGBX (X = 255, as PIL's unpackers set
// it).  Plain loops: cvtColor's RGBA targets would copy a source alpha.
void MatToRgbx(const cv::Mat& img, uint8_t* const* rows) {
  const int w = img.cols;
  for (int y = 0; y < img.rows; ++y) {
    const uint8_t* s = img.ptr<uint8_t>(y);
    uint8_t* d = rows[y];
    switch (img.channels()) {
      case 1:
        for (int x = 0; x < w; ++x, d += 4) {
          d[0] = d[1] = d[2] = s[x];
          d[3] = 255;
        }
        break;
      case 3:
        for (int x = 0; x < w; ++x, s += 3, d += 4) {
          d[0] = s[2];
          d[1] = s[1];
          d[2] = s[0];
          d[3] = 255;
        }
        break;
      default:  // 4: BGRA, alpha dropped
        for (int x = 0; x < w; ++x, s += 4, d += 4) {
          d[0] = s[2];
          d[1] = s[1];
          d[2] = s[0];
          d[3] = 255;
        }
        break;
    }
  }
}

Status DecodeOpenCv(const char* format, const void* data, size_t size,
                    int expect_w, int expect_h, uint64_t max_pixels,
                    bool fallback, RgbImage* out) {
  cv::Mat img;
  UFSPACK_RETURN_IF_ERROR(ImdecodeChecked(
      format, data, size, expect_w, expect_h, max_pixels, fallback, &img));
  return MatToRgb(format, img, out);
}

// PNG: checks IHDR, CRCs of the chunks before IDAT, the trailing IEND, and
// pads a short palette in a copy.  *decode_from is data or the copy.
Status ProbePng(const uint8_t* p, size_t size, uint64_t max_pixels, int* width,
                int* height, const uint8_t** decode_from, size_t* decode_size) {
  static constexpr uint8_t kIend[12] = {0,   0,   0,    0,    'I',  'E',
                                        'N', 'D', 0xae, 0x42, 0x60, 0x82};
  thread_local std::vector<uint8_t> padded;
  *decode_from = p;
  *decode_size = size;
  if (size < 8 + 25 + 12 || LoadBe32(p + 8) != 13 ||
      std::memcmp(p + 12, "IHDR", 4) != 0) {
    return Status::NotSupported("PNG: no IHDR chunk");
  }
  uint32_t w = LoadBe32(p + 16), h = LoadBe32(p + 20);
  int depth = p[24], color_type = p[25];
  if (depth == 16) {
    return Status::NotSupported("PNG: 16-bit samples (" + Dims(w, h) +
                                ") need PIL");
  }
  if (w > 0x7fffffffu || h > 0x7fffffffu) {
    return Status::NotSupported("PNG: bad dimensions " + Dims(w, h));
  }
  UFSPACK_RETURN_IF_ERROR(CheckDims("PNG", w, h, max_pixels));
  if (std::memcmp(p + size - 12, kIend, 12) != 0) {
    return Status::NotSupported(
        "PNG: does not end with IEND (truncated?): PIL decides");
  }
  size_t pos = 8;
  size_t plte = 0, plte_len = 0;
  bool have_idat = false;
  while (pos + 12 <= size) {
    uint32_t len = LoadBe32(p + pos);
    if (len > size - pos - 12) break;
    const uint8_t* type = p + pos + 4;
    if (std::memcmp(type, "IDAT", 4) == 0) {
      have_idat = true;
      break;
    }
    // PIL checks the CRC of every chunk before IDAT and refuses the file on
    // a mismatch; libpng skips a bad ancillary chunk.
    if (Crc32(type, 4 + size_t{len}) != LoadBe32(type + 4 + len)) {
      return Status::NotSupported("PNG: bad CRC in chunk '" +
                                  std::string(type, type + 4) + "' at offset " +
                                  std::to_string(pos) + ": PIL decides");
    }
    if (std::memcmp(type, "PLTE", 4) == 0) {
      plte = pos;
      plte_len = len;
    }
    pos += 12 + size_t{len};
  }
  if (!have_idat) {
    return Status::NotSupported("PNG: no IDAT chunk found: PIL decides");
  }
  *width = static_cast<int>(w);
  *height = static_cast<int>(h);
  if (color_type != 3 || depth > 8) return Status::OK();
  if (plte == 0 || plte_len == 0 || plte_len % 3 != 0 || plte_len > 768) {
    return Status::NotSupported("PNG: palette image without a valid PLTE");
  }
  size_t entries = plte_len / 3, want = size_t{1} << depth;
  if (entries >= want) return Status::OK();
  // Indices past the palette: PIL gives gray (i,i,i), libpng black.  Pad
  // the palette to 2^depth entries with PIL's ramp.
  size_t extra = 3 * (want - entries);
  padded.resize(size + extra);
  uint8_t* q = padded.data();
  size_t data_end = plte + 8 + plte_len;
  std::memcpy(q, p, data_end);
  for (size_t i = entries; i < want; ++i) {
    uint8_t* e = q + data_end + 3 * (i - entries);
    e[0] = e[1] = e[2] = static_cast<uint8_t>(i);
  }
  StoreBe32(q + plte, static_cast<uint32_t>(3 * want));
  StoreBe32(q + data_end + extra, Crc32(q + plte + 4, 4 + 3 * want));
  std::memcpy(q + data_end + extra + 4, p + data_end + 4, size - data_end - 4);
  *decode_from = q;
  *decode_size = size + extra;
  return Status::OK();
}

// BMP: checks the header; pads a short palette in a copy.  *decode_from is
// data or the copy.
Status ProbeBmp(const uint8_t* p, size_t size, uint64_t max_pixels, int* width,
                int* height, const uint8_t** decode_from, size_t* decode_size) {
  thread_local std::vector<uint8_t> padded;
  *decode_from = p;
  *decode_size = size;
  if (size < 14 + 40) return Status::NotSupported("BMP: header truncated");
  uint32_t offset = LoadLe32(p + 10);
  uint32_t header = LoadLe32(p + 14);
  if (header != 40 && header != 52 && header != 56 && header != 108 &&
      header != 124) {
    return Status::NotSupported(
        "BMP: " + std::to_string(header) +
        "-byte info header (OS/2 or unknown) needs PIL");
  }
  int32_t w = static_cast<int32_t>(LoadLe32(p + 18));
  int32_t h = static_cast<int32_t>(LoadLe32(p + 22));
  int bpp = LoadLe16(p + 28);
  uint32_t compression = LoadLe32(p + 30);
  uint32_t colors = LoadLe32(p + 46);
  if (w <= 0 || h == 0 || h == INT32_MIN) {
    return Status::NotSupported("BMP: bad dimensions " + std::to_string(w) +
                                "x" + std::to_string(h));
  }
  uint64_t abs_h =
      h < 0 ? static_cast<uint64_t>(-int64_t{h}) : static_cast<uint64_t>(h);
  UFSPACK_RETURN_IF_ERROR(
      CheckDims("BMP", static_cast<uint64_t>(w), abs_h, max_pixels));
  if (bpp != 1 && bpp != 4 && bpp != 8 && bpp != 24 && bpp != 32) {
    return Status::NotSupported("BMP: " + std::to_string(bpp) +
                                "-bit pixels need PIL");
  }
  if (compression == 3 && bpp == 32) {
    // Only the usual 8-8-8 masks: PIL refuses some others, OpenCV
    // reorders them differently.
    if (size < 14 + 40 + 12) return Status::NotSupported("BMP: truncated");
    uint32_t alpha = header >= 56 ? LoadLe32(p + 66) : 0;
    if (LoadLe32(p + 54) != 0xff0000u || LoadLe32(p + 58) != 0xff00u ||
        LoadLe32(p + 62) != 0xffu || (alpha != 0 && alpha != 0xff000000u)) {
      return Status::NotSupported("BMP: unusual 32-bit bit fields need PIL");
    }
  } else if (compression != 0) {
    return Status::NotSupported(
        "BMP: compression " + std::to_string(compression) +
        (compression == 1 || compression == 2 ? " (RLE)" : "") + " needs PIL");
  }
  uint64_t stride = ((static_cast<uint64_t>(w) * bpp + 31) / 32) * 4;
  if (offset > size || (size - offset) / abs_h < stride) {
    return Status::NotSupported("BMP: " + Dims(w, abs_h) +
                                " pixel data truncated: PIL decides");
  }
  *width = w;
  *height = static_cast<int>(abs_h);
  const uint32_t full = 1u << (bpp <= 8 ? bpp : 0);
  if (bpp > 8 || colors == 0 || colors == full) return Status::OK();
  // A short palette.  Indices past its end: PIL gives gray (i,i,i) (it
  // also decodes gray-ramp palettes as mode L, the same thing), OpenCV
  // black.  Pad the palette with PIL's ramp.  With 1 or 2 colours PIL
  // takes the image for mode "1"/"L" and misreads 4/8-bit data: PIL's job.
  const size_t palette_end = 14 + size_t{header} + 4 * size_t{colors};
  if (colors > full || colors <= 2 || palette_end > offset) {
    return Status::NotSupported("BMP: " + std::to_string(colors) +
                                "-colour palette for " + std::to_string(bpp) +
                                "-bit pixels needs PIL");
  }
  const size_t extra = 4 * size_t{full - colors};
  padded.resize(size + extra);
  uint8_t* q = padded.data();
  std::memcpy(q, p, palette_end);
  for (uint32_t i = colors; i < full; ++i) {
    uint8_t* e = q + palette_end + 4 * (i - colors);
    e[0] = e[1] = e[2] = static_cast<uint8_t>(i);
    e[3] = 0;
  }
  std::memcpy(q + palette_end + extra, p + palette_end, size - palette_end);
  StoreLe32(q + 2, static_cast<uint32_t>(size + extra));
  StoreLe32(q + 10, static_cast<uint32_t>(offset + extra));
  StoreLe32(q + 46, full);
  *decode_from = q;
  *decode_size = size + extra;
  return Status::OK();
}

// PNM (P1-P6): magic, width, height, maxval, each token followed by
// whitespace, '#' comments between tokens.
Status ProbePnm(const uint8_t* p, size_t size, uint64_t max_pixels, int* width,
                int* height) {
  int kind = p[1] - '0';
  size_t pos = 2;
  uint64_t v[3] = {0, 0, 0};
  int tokens = (kind == 1 || kind == 4) ? 2 : 3;
  for (int t = 0; t < tokens; ++t) {
    for (;;) {  // whitespace and comments
      if (pos >= size) return Status::NotSupported("PNM: header truncated");
      if (p[pos] == '#') {
        while (pos < size && p[pos] != '\n' && p[pos] != '\r') ++pos;
      } else if (p[pos] == ' ' || (p[pos] >= '\t' && p[pos] <= '\r')) {
        ++pos;
      } else {
        break;
      }
    }
    size_t start = pos;
    while (pos < size && p[pos] >= '0' && p[pos] <= '9' && pos - start < 10) {
      v[t] = v[t] * 10 + static_cast<uint64_t>(p[pos] - '0');
      ++pos;
    }
    if (pos == start || pos >= size ||
        !(p[pos] == ' ' || (p[pos] >= '\t' && p[pos] <= '\r'))) {
      return Status::NotSupported("PNM: header not understood: PIL decides");
    }
  }
  ++pos;  // the single whitespace character before binary data
  uint64_t w = v[0], h = v[1];
  if (tokens == 3 && v[2] != 255) {
    return Status::NotSupported("PNM: maxval " + std::to_string(v[2]) + " (" +
                                Dims(w, h) + ") needs PIL");
  }
  UFSPACK_RETURN_IF_ERROR(CheckDims("PNM", w, h, max_pixels));
  if (kind >= 4) {
    uint64_t row = kind == 4 ? (w + 7) / 8 : kind == 5 ? w : 3 * w;
    if ((size - pos) / h < row) {
      return Status::NotSupported("PNM: P" + std::to_string(kind) + " " +
                                  Dims(w, h) +
                                  " pixel data truncated: PIL decides");
    }
  } else {
    // Plain (ASCII) data: only digits and whitespace, values <= 255 (P1:
    // single 0/1 digits, packed or not), and enough of them.  Anything else
    // (comments, short data) is left to PIL, which reads some such files
    // OpenCV refuses (with a message on stderr).
    const uint64_t need = w * h * (kind == 3 ? 3 : 1);
    uint64_t have = 0;
    while (pos < size && have < need) {
      uint8_t c = p[pos];
      if (c == ' ' || (c >= '\t' && c <= '\r')) {
        ++pos;
      } else if (kind == 1 && (c == '0' || c == '1')) {
        ++pos;
        ++have;
      } else if (kind != 1 && c >= '0' && c <= '9') {
        unsigned value = 0;
        while (pos < size && p[pos] >= '0' && p[pos] <= '9' && value <= 255) {
          value = value * 10 + (p[pos++] - '0');
        }
        if (value > 255) break;
        ++have;
      } else {
        break;
      }
    }
    if (have < need) {
      return Status::NotSupported("PNM: P" + std::to_string(kind) + " " +
                                  Dims(w, h) +
                                  " plain data not understood: PIL decides");
    }
  }
  *width = static_cast<int>(w);
  *height = static_cast<int>(h);
  return Status::OK();
}

}  // namespace

ImageFormat SniffImageFormat(const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  if (size >= 3 && p[0] == 0xff && p[1] == 0xd8 && p[2] == 0xff) {
    return ImageFormat::kJpeg;
  }
  if (size >= 8 && std::memcmp(p, "\x89PNG\r\n\x1a\n", 8) == 0) {
    return ImageFormat::kPng;
  }
  if (size >= 2 && p[0] == 'B' && p[1] == 'M') return ImageFormat::kBmp;
  if (size >= 3 && p[0] == 'P' && p[1] >= '1' && p[1] <= '6' &&
      (p[2] == ' ' || (p[2] >= '\t' && p[2] <= '\r') || p[2] == '#')) {
    return ImageFormat::kPnm;
  }
  if (size >= 4 &&
      (std::memcmp(p, "II*\0", 4) == 0 || std::memcmp(p, "MM\0*", 4) == 0 ||
       std::memcmp(p, "II+\0", 4) == 0 || std::memcmp(p, "MM\0+", 4) == 0)) {
    return ImageFormat::kTiff;
  }
  if (size >= 12 && std::memcmp(p, "RIFF", 4) == 0 &&
      std::memcmp(p + 8, "WEBP", 4) == 0) {
    return ImageFormat::kWebp;
  }
  if (size >= 6 &&
      (std::memcmp(p, "GIF87a", 6) == 0 || std::memcmp(p, "GIF89a", 6) == 0)) {
    return ImageFormat::kGif;
  }
  return ImageFormat::kUnknown;
}

const char* ImageFormatName(ImageFormat format) {
  switch (format) {
    case ImageFormat::kUnknown:
      return "unknown";
    case ImageFormat::kJpeg:
      return "JPEG";
    case ImageFormat::kPng:
      return "PNG";
    case ImageFormat::kBmp:
      return "BMP";
    case ImageFormat::kPnm:
      return "PNM";
    case ImageFormat::kTiff:
      return "TIFF";
    case ImageFormat::kWebp:
      return "WebP";
    case ImageFormat::kGif:
      return "GIF";
  }
  return "unknown";
}

namespace {

// The fast path for every format but JPEG: the format's header checks, then
// ImdecodeChecked.  NotSupported for formats without a fast decoder.
Status DecodeWithOpenCv(ImageFormat format, const void* data, size_t size,
                        uint64_t max_pixels, cv::Mat* img) {
  const auto* p = static_cast<const uint8_t*>(data);
  const uint8_t* from = p;
  size_t from_size = size;
  int w = 0, h = 0;
  switch (format) {
    case ImageFormat::kPng:
      UFSPACK_RETURN_IF_ERROR(
          ProbePng(p, size, max_pixels, &w, &h, &from, &from_size));
      break;
    case ImageFormat::kBmp:
      UFSPACK_RETURN_IF_ERROR(
          ProbeBmp(p, size, max_pixels, &w, &h, &from, &from_size));
      break;
    case ImageFormat::kPnm:
      UFSPACK_RETURN_IF_ERROR(ProbePnm(p, size, max_pixels, &w, &h));
      break;
    case ImageFormat::kJpeg:  // not here: TurboJPEG
    case ImageFormat::kTiff:
    case ImageFormat::kWebp:
    case ImageFormat::kGif:
      return Status::NotSupported(std::string(ImageFormatName(format)) +
                                  ": no fast decoder, needs PIL");
    case ImageFormat::kUnknown:
      return Status::NotSupported("unrecognised image format (" +
                                  std::to_string(size) + " bytes): needs PIL");
  }
  return ImdecodeChecked(ImageFormatName(format), from, from_size, w, h,
                         max_pixels, /*fallback=*/true, img);
}

}  // namespace

Status DecodeRgb(const void* data, size_t size, RgbImage* out,
                 uint64_t max_pixels) {
  *out = RgbImage();
  ImageFormat format = SniffImageFormat(data, size);
  if (format == ImageFormat::kJpeg) {
    return DecodeJpeg(data, size, max_pixels, /*fallback=*/true, out);
  }
  cv::Mat img;
  UFSPACK_RETURN_IF_ERROR(
      DecodeWithOpenCv(format, data, size, max_pixels, &img));
  return MatToRgb(ImageFormatName(format), img, out);
}

// ---------------------------------------------------------------------------
// RgbxDecoder
// ---------------------------------------------------------------------------

struct RgbxDecoder::Decoded {
  cv::Mat image;  // ImdecodeChecked's
};

RgbxDecoder::RgbxDecoder() = default;
RgbxDecoder::~RgbxDecoder() = default;
RgbxDecoder::RgbxDecoder(RgbxDecoder&&) noexcept = default;
RgbxDecoder& RgbxDecoder::operator=(RgbxDecoder&&) noexcept = default;

Status RgbxDecoder::Prepare(const void* data, size_t size,
                            uint64_t max_pixels) {
  data_ = data;
  size_ = size;
  width_ = height_ = 0;
  decoded_.reset();
  const ImageFormat format = SniffImageFormat(data, size);
  int w = 0, h = 0;
  if (format == ImageFormat::kJpeg) {
    UFSPACK_RETURN_IF_ERROR(
        JpegHeader(data, size, max_pixels, /*fallback=*/true, &w, &h));
  } else {
    auto decoded = std::make_unique<Decoded>();
    UFSPACK_RETURN_IF_ERROR(
        DecodeWithOpenCv(format, data, size, max_pixels, &decoded->image));
    w = decoded->image.cols;
    h = decoded->image.rows;
    decoded_ = std::move(decoded);
  }
  // TurboJPEG takes the row pitch as an int; only a max_pixels raised over
  // PIL's default lets a row come near that.
  if (uint64_t{static_cast<uint32_t>(w)} * 4 > INT32_MAX) {
    decoded_.reset();
    return Status::NotSupported(std::string(ImageFormatName(format)) +
                                ": a row of " + std::to_string(w) +
                                " RGBX pixels is over 2 GiB");
  }
  width_ = w;
  height_ = h;
  return Status::OK();
}

Status RgbxDecoder::DecodeInto(uint8_t* const* rows) {
  if (width_ == 0) {
    return Status::InvalidArgument(
        "RgbxDecoder::DecodeInto without a successful Prepare");
  }
  if (decoded_ != nullptr) {
    MatToRgbx(decoded_->image, rows);
    decoded_.reset();
    return Status::OK();
  }
  const size_t row_bytes = static_cast<size_t>(width_) * 4;
  // Evenly spaced rows (one block of memory, as PIL allocates all but huge
  // images): TurboJPEG writes them in place.  Unsigned arithmetic: rows
  // out of order give a huge pitch, not undefined behaviour.
  const uintptr_t first = reinterpret_cast<uintptr_t>(rows[0]);
  const uintptr_t pitch =
      height_ > 1 ? reinterpret_cast<uintptr_t>(rows[1]) - first : row_bytes;
  bool even = pitch >= row_bytes && pitch <= INT32_MAX;
  for (int y = 2; even && y < height_; ++y) {
    even = reinterpret_cast<uintptr_t>(rows[y]) ==
           first + static_cast<uintptr_t>(y) * pitch;
  }
  if (even) {
    return JpegDecompress(data_, size_, width_, height_, rows[0],
                          static_cast<int>(pitch), TJPF_RGBX,
                          /*fallback=*/true);
  }
  std::unique_ptr<uint8_t[]> scratch(new uint8_t[row_bytes * height_]);
  UFSPACK_RETURN_IF_ERROR(JpegDecompress(
      data_, size_, width_, height_, scratch.get(), static_cast<int>(row_bytes),
      TJPF_RGBX, /*fallback=*/true));
  for (int y = 0; y < height_; ++y) {
    std::memcpy(rows[y], scratch.get() + row_bytes * y, row_bytes);
  }
  return Status::OK();
}

Status DecodeRgbTurboJpeg(const void* data, size_t size, RgbImage* out) {
  *out = RgbImage();
  if (SniffImageFormat(data, size) != ImageFormat::kJpeg) {
    return Status::InvalidArgument("TurboJPEG: input is not a JPEG");
  }
  return DecodeJpeg(data, size, kDefaultMaxPixels, /*fallback=*/false, out);
}

Status DecodeRgbOpenCv(const void* data, size_t size, RgbImage* out) {
  *out = RgbImage();
  return DecodeOpenCv(ImageFormatName(SniffImageFormat(data, size)), data, size,
                      0, 0, kDefaultMaxPixels, /*fallback=*/false, out);
}

}  // namespace ufspack
