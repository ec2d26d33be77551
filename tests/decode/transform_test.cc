// Copyright 2026 The ufspack Authors.
//
// Tests for TransformJpeg / TransformRgb (decode/include/ufspack/transform.h).
// The reference for every exact case is the full decode (DecodeRgb, equal to
// PIL's pixels: decode_test) followed by the same operations done the plain
// way (crop, ResizeRgb: equal to Pillow's bytes, resize_test), so a region
// decode that differs from the full decode in one byte fails.  JPEGs of
// every kind the fused path takes (4:4:4, 4:2:2, 4:2:0, 4:1:1 subsampling,
// grayscale, progressive, restart markers, odd sizes) are written by PIL;
// with ../shared/data present, real photos too.
#include "ufspack/transform.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "resize.h"
#include "testutil.h"
#include "ufspack/decode.h"

namespace ufspack {
namespace {

using test::TempDir;

using test::kPython;

// <out>/<name>.jpg for each variant, and manifest.txt: "<name> <kind>" with
// kind "fast" (the fused path decodes it) or "pil" (it must say
// NotSupported).
constexpr const char* kJpegScript = R"PY(
import io, os, sys, tarfile
from PIL import Image
out = sys.argv[1]
photos_tar = sys.argv[2] if len(sys.argv) > 2 else ''
import random
rnd = random.Random(7)
def textured(w, h):
    # Smooth gradients plus sharp random rectangles: chroma edges everywhere.
    im = Image.new('RGB', (w, h))
    px = im.load()
    for y in range(h):
        for x in range(w):
            px[x, y] = ((x * 7 + y * 3) % 256, (x * 2 + y * 5) % 256, (x * y) % 256)
    from PIL import ImageDraw
    d = ImageDraw.Draw(im)
    for _ in range(40):
        x0, y0 = rnd.randrange(w), rnd.randrange(h)
        d.rectangle([x0, y0, x0 + rnd.randrange(1, 40), y0 + rnd.randrange(1, 40)],
                    fill=(rnd.randrange(256), rnd.randrange(256), rnd.randrange(256)))
    return im
manifest = []
def save(name, im, kind='fast', **kw):
    im.save(os.path.join(out, name + '.jpg'), 'JPEG', **kw)
    manifest.append('%s %s' % (name, kind))
base = textured(203, 157)
for ss, tag in ((0, '444'), (1, '422'), (2, '420')):
    save('ss' + tag, base, quality=90, subsampling=ss)
save('odd_tiny', textured(5, 3), quality=90)
save('wide', textured(611, 37), quality=85)
save('progressive', base, quality=90, progressive=True)
try:
    save('restart', base, quality=90, restart_marker_blocks=3)
except TypeError:
    pass
save('gray', base.convert('L'), quality=90)
save('cmyk', base.convert('CMYK'), kind='pil', quality=90)
good = open(os.path.join(out, 'ss420.jpg'), 'rb').read()
with open(os.path.join(out, 'truncated.jpg'), 'wb') as f:
    f.write(good[: len(good) * 2 // 3])
manifest.append('truncated pil')
if photos_tar:
    with tarfile.open(photos_tar) as t:
        names = sorted(m.name for m in t.getmembers() if m.isfile() and m.name.lower().endswith('.jpg'))
        for i, name in enumerate(names[:: max(1, len(names) // 12)][:12]):
            with open(os.path.join(out, 'photo%d.jpg' % i), 'wb') as f:
                f.write(t.extractfile(name).read())
            manifest.append('photo%d fast' % i)
with open(os.path.join(out, 'manifest.txt'), 'w') as f:
    f.write('\n'.join(m for m in manifest if m) + '\n')
)PY";

bool HavePil() { return test::PythonHas("PIL.Image"); }

struct Jpeg {
  std::string name;
  std::string data;
  bool fast = false;
  RgbImage full;  // DecodeRgb's pixels (fast ones)
};

class TransformTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!HavePil()) return;
    dir_ = new TempDir();
    test::WriteFile(*dir_ / "jpegs.py", kJpegScript);
    std::vector<std::string> argv = {kPython, *dir_ / "jpegs.py", dir_->path()};
    const std::string tar = test::SharedPhotosTar();
    if (!tar.empty()) argv.push_back(tar);
    auto r = test::Run(argv);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    jpegs_ = new std::vector<Jpeg>();
    std::istringstream manifest(test::ReadFile(*dir_ / "manifest.txt"));
    std::string name, kind;
    while (manifest >> name >> kind) {
      Jpeg j;
      j.name = name;
      j.data = test::ReadFile(*dir_ / (name + ".jpg"));
      j.fast = kind == "fast";
      if (j.fast) {
        Status s = DecodeRgb(j.data.data(), j.data.size(), &j.full);
        ASSERT_TRUE(s.ok()) << name << ": " << s.ToString();
      }
      jpegs_->push_back(std::move(j));
    }
  }
  static void TearDownTestSuite() {
    delete jpegs_;
    jpegs_ = nullptr;
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (!HavePil()) GTEST_SKIP() << kPython << " with PIL is not available";
  }

  static TempDir* dir_;
  static std::vector<Jpeg>* jpegs_;
};
TempDir* TransformTest::dir_ = nullptr;
std::vector<Jpeg>* TransformTest::jpegs_ = nullptr;

// The plain way: resize_before (whole image), pad, crop, resize_after,
// flip; RGB bytes.
std::vector<uint8_t> Reference(const RgbImage& img, const TransformSpec& s) {
  int w = img.width, h = img.height;
  std::vector<uint8_t> cur(img.pixels.get(), img.pixels.get() + img.size());
  auto resize = [&](const ResizeSpec& r) {
    std::vector<uint8_t> next(static_cast<size_t>(r.width) * r.height * 3);
    EXPECT_TRUE(ResizeRgb(cur.data(), w, h, w * 3, 0, 0, w, h, r.width,
                          r.height, static_cast<Filter>(r.filter), next.data(),
                          r.width * 3)
                    .ok());
    cur.swap(next);
    w = r.width;
    h = r.height;
  };
  if (s.has_resize_before) resize(s.resize_before);
  if (s.has_crop) {
    const int pw = w + s.pad[0] + s.pad[2], ph = h + s.pad[1] + s.pad[3];
    std::vector<uint8_t> padded(static_cast<size_t>(pw) * ph * 3);
    for (int y = 0; y < ph; ++y) {
      for (int x = 0; x < pw; ++x) {
        const int sx = x - s.pad[0], sy = y - s.pad[1];
        const uint8_t* p = (sx >= 0 && sx < w && sy >= 0 && sy < h)
                               ? &cur[(static_cast<size_t>(sy) * w + sx) * 3]
                               : s.fill;
        std::memcpy(&padded[(static_cast<size_t>(y) * pw + x) * 3], p, 3);
      }
    }
    std::vector<uint8_t> box(static_cast<size_t>(s.box[2]) * s.box[3] * 3);
    for (int y = 0; y < s.box[3]; ++y) {
      std::memcpy(
          &box[static_cast<size_t>(y) * s.box[2] * 3],
          &padded[(static_cast<size_t>(y + s.box[1]) * pw + s.box[0]) * 3],
          static_cast<size_t>(s.box[2]) * 3);
    }
    cur.swap(box);
    w = s.box[2];
    h = s.box[3];
  }
  if (s.has_resize_after) resize(s.resize_after);
  if (s.hflip) {
    for (int y = 0; y < h; ++y) {
      uint8_t* row = &cur[static_cast<size_t>(y) * w * 3];
      for (int x = 0; x < w / 2; ++x) {
        for (int c = 0; c < 3; ++c)
          std::swap(row[3 * x + c], row[3 * (w - 1 - x) + c]);
      }
    }
  }
  return cur;
}

// A RandomResizedCrop-like spec: a random box, resized to out x out.
TransformSpec RandomCropSpec(std::mt19937* rng, int w, int h, int out,
                             Resample f) {
  TransformSpec s;
  s.in_width = w;
  s.in_height = h;
  s.has_crop = true;
  const int bw = std::uniform_int_distribution<int>(1, w)(*rng);
  const int bh = std::uniform_int_distribution<int>(1, h)(*rng);
  s.box[0] = std::uniform_int_distribution<int>(0, w - bw)(*rng);
  s.box[1] = std::uniform_int_distribution<int>(0, h - bh)(*rng);
  s.box[2] = bw;
  s.box[3] = bh;
  s.has_resize_after = true;
  s.resize_after = {out, out, f};
  s.hflip = (*rng)() & 1;
  return s;
}

double Psnr(const std::vector<uint8_t>& a, const uint8_t* b) {
  double se = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = double(a[i]) - double(b[i]);
    se += d * d;
  }
  if (se == 0) return 99.0;
  return 10 * std::log10(255.0 * 255.0 / (se / a.size()));
}

TEST_F(TransformTest, RegionDecodeEqualsFullDecodeForEveryCrop) {
  std::mt19937 rng(1);
  int checked = 0;
  for (const Jpeg& j : *jpegs_) {
    if (!j.fast) continue;
    SCOPED_TRACE(j.name);
    for (int t = 0; t < 150; ++t) {
      TransformSpec s = RandomCropSpec(&rng, j.full.width, j.full.height, 1,
                                       Resample::kBilinear);
      s.has_resize_after = false;  // crop only: the decoded pixels themselves
      std::vector<uint8_t> out(s.output_bytes());
      TransformStats st;
      Status status =
          TransformJpeg(j.data.data(), j.data.size(), s, out.data(), &st);
      ASSERT_TRUE(status.ok()) << status.ToString();
      ASSERT_EQ(out, Reference(j.full, s))
          << "box " << s.box[0] << "," << s.box[1] << " " << s.box[2] << "x"
          << s.box[3] << " decoded " << st.decoded_x << "," << st.decoded_y
          << " " << st.decoded_width << "x" << st.decoded_height;
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

TEST_F(TransformTest, CropResizeFlipMatchesThePlainWay) {
  std::mt19937 rng(2);
  for (const Jpeg& j : *jpegs_) {
    if (!j.fast) continue;
    SCOPED_TRACE(j.name);
    for (Resample f :
         {Resample::kNearest, Resample::kBilinear, Resample::kBicubic}) {
      for (int t = 0; t < 12; ++t) {
        TransformSpec s =
            RandomCropSpec(&rng, j.full.width, j.full.height, 1 + t * 7, f);
        std::vector<uint8_t> out(s.output_bytes());
        Status status =
            TransformJpeg(j.data.data(), j.data.size(), s, out.data());
        ASSERT_TRUE(status.ok()) << status.ToString();
        ASSERT_EQ(out, Reference(j.full, s));
        // The same from decoded pixels.
        std::vector<uint8_t> out2(s.output_bytes());
        ASSERT_TRUE(TransformRgb(j.full.pixels.get(), j.full.width,
                                 j.full.height, j.full.width * 3, s,
                                 out2.data())
                        .ok());
        ASSERT_EQ(out2, out);
      }
    }
  }
}

// Resize(n) then CenterCrop(c) (the validation transform): only the crop's
// window of the resize is computed, from only the rows it reads.
TEST_F(TransformTest, ResizeThenCropComputesTheWindowExactly) {
  for (const Jpeg& j : *jpegs_) {
    if (!j.fast) continue;
    SCOPED_TRACE(j.name);
    const int w = j.full.width, h = j.full.height;
    for (int size : {3, 64, 256}) {
      for (Resample f :
           {Resample::kNearest, Resample::kBilinear, Resample::kBicubic}) {
        TransformSpec s;
        s.in_width = w;
        s.in_height = h;
        s.has_resize_before = true;
        const bool wide = w >= h;
        s.resize_before = {wide ? size * w / h : size,
                           wide ? size : size * h / w, f};
        if (s.resize_before.width < 1 || s.resize_before.height < 1) continue;
        const int c = std::min(
            {size * 7 / 8 + 1, s.resize_before.width, s.resize_before.height});
        s.has_crop = true;
        s.box[0] = (s.resize_before.width - c) / 2;
        s.box[1] = (s.resize_before.height - c) / 2;
        s.box[2] = s.box[3] = c;
        for (TransformOutput o :
             {TransformOutput::kRgb, TransformOutput::kChwF32}) {
          s.output = o;
          std::vector<uint8_t> out(s.output_bytes());
          Status status =
              TransformJpeg(j.data.data(), j.data.size(), s, out.data());
          ASSERT_TRUE(status.ok()) << status.ToString();
          std::vector<uint8_t> ref = Reference(j.full, s);
          if (o == TransformOutput::kRgb) {
            ASSERT_EQ(out, ref);
          } else {
            const float* x = reinterpret_cast<const float*>(out.data());
            for (int ch = 0; ch < 3; ++ch) {
              for (int i = 0; i < c * c; ++i) {
                ASSERT_EQ(x[ch * c * c + i], ref[i * 3 + ch] / 255.0f);
              }
            }
          }
        }
      }
    }
  }
}

TEST_F(TransformTest, PaddingAndBoxesPastTheEdgeAreMaterialised) {
  std::mt19937 rng(3);
  for (const Jpeg& j : *jpegs_) {
    if (!j.fast) continue;
    SCOPED_TRACE(j.name);
    for (int t = 0; t < 8; ++t) {
      TransformSpec s;
      s.in_width = j.full.width;
      s.in_height = j.full.height;
      s.has_crop = true;
      for (int& p : s.pad) p = std::uniform_int_distribution<int>(0, 9)(rng);
      s.fill[0] = 10;
      s.fill[1] = 200;
      s.fill[2] = 77;
      const int pw = s.in_width + s.pad[0] + s.pad[2];
      const int ph = s.in_height + s.pad[1] + s.pad[3];
      s.box[2] = std::uniform_int_distribution<int>(1, pw)(rng);
      s.box[3] = std::uniform_int_distribution<int>(1, ph)(rng);
      s.box[0] = std::uniform_int_distribution<int>(0, pw - s.box[2])(rng);
      s.box[1] = std::uniform_int_distribution<int>(0, ph - s.box[3])(rng);
      s.hflip = t & 1;
      s.output = TransformOutput::kChwU8;
      std::vector<uint8_t> out(s.output_bytes());
      ASSERT_TRUE(
          TransformJpeg(j.data.data(), j.data.size(), s, out.data()).ok());
      std::vector<uint8_t> ref = Reference(j.full, s);
      const size_t plane = static_cast<size_t>(s.box[2]) * s.box[3];
      for (size_t i = 0; i < plane; ++i) {
        for (int ch = 0; ch < 3; ++ch)
          ASSERT_EQ(out[ch * plane + i], ref[i * 3 + ch]);
      }
    }
  }
}

// DCT-domain downscaling: used only when the crop is at least twice the
// output, and close to the exact result (the issue's floor, 30 dB, on the
// photos; the figures against torchvision are in docs/transforms.md).
TEST_F(TransformTest, DctScalingIsCloseAndOnlyWhenShrinkingTwofold) {
  int scaled = 0;
  for (const Jpeg& j : *jpegs_) {
    if (!j.fast || j.full.width < 64 || j.full.height < 64) continue;
    SCOPED_TRACE(j.name);
    for (int out : {16, 24, 40, 100}) {
      TransformSpec s;
      s.in_width = j.full.width;
      s.in_height = j.full.height;
      s.has_crop = true;
      s.box[2] = j.full.width;
      s.box[3] = j.full.height;
      s.has_resize_after = true;
      s.resize_after = {out, out, Resample::kBilinear};
      s.dct_scaling = true;
      std::vector<uint8_t> fast(s.output_bytes());
      TransformStats st;
      ASSERT_TRUE(
          TransformJpeg(j.data.data(), j.data.size(), s, fast.data(), &st)
              .ok());
      const int shrink = std::min(j.full.width / out, j.full.height / out);
      int expect = 1;
      while (expect < 8 && shrink >= 2 * expect) expect *= 2;
      EXPECT_EQ(st.scale_denom, expect) << out;
      if (st.scale_denom > 1) ++scaled;
      std::vector<uint8_t> ref = Reference(j.full, s);
      const double psnr = Psnr(ref, fast.data());
      // Real photos: the issue's floor.  The generated images are a worst
      // case (pixel-level noise and hard edges, which the scaled IDCT's
      // box-like reduction and Pillow's triangle filter treat differently):
      // 26.7 dB at 1/8 for 4:2:2 when this was written.
      const bool photo = j.name.rfind("photo", 0) == 0;
      EXPECT_GE(psnr, photo ? 30.0 : 25.0) << "scale 1/" << st.scale_denom;
    }
  }
  EXPECT_GT(scaled, 0);
}

TEST_F(TransformTest, WhatPilMustDecodeIsNotSupported) {
  for (const Jpeg& j : *jpegs_) {
    if (j.fast) continue;
    SCOPED_TRACE(j.name);
    int w = 203, h = 157;
    TransformSpec s;
    s.in_width = w;
    s.in_height = h;
    std::vector<uint8_t> out(s.output_bytes());
    Status status = TransformJpeg(j.data.data(), j.data.size(), s, out.data());
    EXPECT_TRUE(status.IsNotSupported()) << status.ToString();
  }
  // Damage below the region: a full decode reports it, so must the region
  // decode (libjpeg-turbo's skip to the last row reads nothing: a 1x1 crop
  // at the top once passed every truncated file).
  for (const Jpeg& j : *jpegs_) {
    if (!j.fast || j.full.height < 32) continue;
    SCOPED_TRACE(j.name);
    const std::string cut = j.data.substr(0, j.data.size() * 3 / 5);
    TransformSpec s;
    s.in_width = j.full.width;
    s.in_height = j.full.height;
    s.has_crop = true;
    s.box[2] = s.box[3] = 1;
    std::vector<uint8_t> out(s.output_bytes());
    RgbImage full;
    EXPECT_FALSE(DecodeRgb(cut.data(), cut.size(), &full).ok());
    Status status = TransformJpeg(cut.data(), cut.size(), s, out.data());
    EXPECT_TRUE(status.IsNotSupported()) << status.ToString();
  }
  // Not a JPEG at all; a size other than the one drawn for.
  const std::string junk = "\xff\xd8\xff not really";
  TransformSpec s;
  s.in_width = s.in_height = 4;
  std::vector<uint8_t> out(s.output_bytes());
  EXPECT_TRUE(
      TransformJpeg(junk.data(), junk.size(), s, out.data()).IsNotSupported());
  int w = 0, h = 0;
  EXPECT_TRUE(ProbeJpeg(junk.data(), junk.size(), &w, &h).IsNotSupported());
  for (const Jpeg& j : *jpegs_) {
    if (!j.fast) continue;
    ASSERT_TRUE(ProbeJpeg(j.data.data(), j.data.size(), &w, &h).ok());
    EXPECT_EQ(w, j.full.width);
    EXPECT_EQ(h, j.full.height);
    TransformSpec wrong;
    wrong.in_width = w + 1;
    wrong.in_height = h;
    std::vector<uint8_t> o(wrong.output_bytes());
    Status status =
        TransformJpeg(j.data.data(), j.data.size(), wrong, o.data());
    EXPECT_TRUE(status.IsInvalidArgument()) << status.ToString();
    EXPECT_NE(status.ToString().find("drawn for"), std::string::npos);
  }
}

// The per-thread decoder state (region buffers) and the AVX2 dispatch are
// safe to use from several threads at once (run under TSan by
// scripts/sanitize.sh).
TEST_F(TransformTest, ConcurrentTransformsGiveTheSerialResults) {
  std::mt19937 rng(4);
  std::vector<std::pair<const Jpeg*, TransformSpec>> work;
  for (const Jpeg& j : *jpegs_) {
    if (!j.fast) continue;
    for (int t = 0; t < 8; ++t) {
      TransformSpec s = RandomCropSpec(&rng, j.full.width, j.full.height, 24,
                                       Resample::kBilinear);
      s.output = TransformOutput::kChwF32;
      s.dct_scaling = t % 2;
      work.emplace_back(&j, s);
    }
  }
  auto run = [&](size_t k, std::vector<uint8_t>* out) {
    const Jpeg& j = *work[k].first;
    out->resize(work[k].second.output_bytes());
    return TransformJpeg(j.data.data(), j.data.size(), work[k].second,
                         out->data());
  };
  std::vector<std::vector<uint8_t>> serial(work.size()), parallel(work.size());
  for (size_t k = 0; k < work.size(); ++k) ASSERT_TRUE(run(k, &serial[k]).ok());
  std::vector<std::thread> threads;
  std::atomic<size_t> next{0};
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (size_t k; (k = next++) < work.size();) {
        if (!run(k, &parallel[k]).ok()) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  for (size_t k = 0; k < work.size(); ++k)
    EXPECT_EQ(parallel[k], serial[k]) << k;
}

TEST(TransformSpecTest, ValidateNamesTheBadField) {
  TransformSpec s;
  EXPECT_TRUE(s.Validate().IsInvalidArgument());
  s.in_width = 10;
  s.in_height = 10;
  EXPECT_TRUE(s.Validate().ok());
  s.has_crop = true;
  s.box[2] = 11;
  s.box[3] = 5;
  Status st = s.Validate();
  EXPECT_TRUE(st.IsInvalidArgument());
  EXPECT_NE(st.ToString().find("crop box"), std::string::npos);
  s.pad[0] = 1;
  EXPECT_TRUE(s.Validate().ok());
  s.pad[1] = -1;
  EXPECT_TRUE(s.Validate().IsInvalidArgument());
  s.pad[1] = 0;
  s.output = TransformOutput::kChwF32;
  s.std[1] = 0.0f;
  st = s.Validate();
  EXPECT_NE(st.ToString().find("std[1]"), std::string::npos);
  s.std[1] = 1.0f;
  s.has_resize_after = true;
  s.resize_after = {4, 4, static_cast<Resample>(1)};  // LANCZOS: not ours
  EXPECT_TRUE(s.Validate().IsInvalidArgument());
}

}  // namespace
}  // namespace ufspack
