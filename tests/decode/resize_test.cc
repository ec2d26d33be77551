// Copyright 2026 The ufspack Authors.
//
// Tests for ResizeRgb and ResizeRgbToChwFloat (decode/src/resize.h).  The
// parity tests write random RGB images (and, when ../shared/data has them,
// real photos decoded by PIL) and a list of resize cases to a scratch
// directory, run Pillow and torchvision on them with Debian's
// /usr/bin/python3, and require byte-for-byte (uint8) and bit-for-bit
// (float32) equality.  They skip without PIL (or, for the float cases,
// without torch and torchvision).
#include "resize.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "testutil.h"

namespace ufspack {
namespace {

using test::TempDir;

using test::kPython;

// The ImageNet statistics every torchvision example normalises with.
constexpr float kImageNetMean[3] = {0.485f, 0.456f, 0.406f};
constexpr float kImageNetStd[3] = {0.229f, 0.224f, 0.225f};
constexpr float kZeroMean[3] = {0.0f, 0.0f, 0.0f};
constexpr float kUnitStd[3] = {1.0f, 1.0f, 1.0f};

// Reads <dir>/cases.txt, one case per line:
//   crop <id> <src.rgb> <src_w> <src_h> <x> <y> <w> <h> <out_w> <out_h>
//        <filter> <norm> <flip>
//     <id>.u8:  Image.crop((x, y, x + w, y + h)).resize((out_w, out_h), f)
//     <id>.f32 (norm >= 0): torchvision's resized_crop, hflip if flip,
//               to_tensor, normalize (norm 0: mean 0, std 1; 1: ImageNet)
//   eval <id> <src.rgb> <src_w> <src_h> <size> <crop> <filter> <norm> <flip>
//     <id>.u8:  F.resize(img, size, f) (shorter side to size)
//     <id>.f32: normalize(to_tensor([hflip](center_crop(that, crop))))
// Filters are PIL's numbers (NEAREST 0, LANCZOS 1, BILINEAR 2, BICUBIC 3,
// BOX 4, HAMMING 5).
constexpr const char* kReferenceScript = R"PY(
import os, sys
from PIL import Image

d = sys.argv[1]
cases = [line.split() for line in open(os.path.join(d, 'cases.txt')) if line.strip()]
need_torch = any(c[0] == 'eval' or int(c[12]) >= 0 for c in cases)
if need_torch:
    import torch
    torch.set_num_threads(1)
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms import functional as F
    MODES = {0: InterpolationMode.NEAREST, 1: InterpolationMode.LANCZOS,
             2: InterpolationMode.BILINEAR, 3: InterpolationMode.BICUBIC,
             4: InterpolationMode.BOX, 5: InterpolationMode.HAMMING}
    NORMS = {0: ([0.0, 0.0, 0.0], [1.0, 1.0, 1.0]),
             1: ([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])}

sources = {}


def source(path, w, h):
    if path not in sources:
        with open(os.path.join(d, path), 'rb') as f:
            sources[path] = Image.frombytes('RGB', (w, h), f.read())
    return sources[path]


def write(name, data):
    with open(os.path.join(d, name), 'wb') as f:
        f.write(data)


def tensor(img, norm, flip):
    if flip:
        img = F.hflip(img)
    mean, std = NORMS[norm]
    t = F.normalize(F.to_tensor(img), mean, std)
    assert t.dtype == torch.float32 and t.is_contiguous()
    return t.numpy().tobytes()


for c in cases:
    kind, cid, path = c[0], c[1], c[2]
    im = source(path, int(c[3]), int(c[4]))
    if kind == 'crop':
        x, y, w, h, ow, oh, f, norm, flip = map(int, c[5:14])
        write(cid + '.u8', im.crop((x, y, x + w, y + h)).resize((ow, oh), f).tobytes())
        if norm >= 0:
            r = F.resized_crop(im, y, x, h, w, [oh, ow], MODES[f])
            write(cid + '.f32', tensor(r, norm, flip))
    else:
        size, crop, f, norm, flip = map(int, c[5:10])
        r = F.resize(im, size, MODES[f])
        write(cid + '.u8', r.tobytes())
        write(cid + '.f32', tensor(F.center_crop(r, crop), norm, flip))
)PY";

// Writes RGB bytes of `n` JPEG photos (evenly spaced, sorted by name) from
// a tar as <i>.rgb, decoded by PIL; lines "<i> <w> <h> <name>".
constexpr const char* kPhotosScript = R"PY(
import io, os, sys, tarfile
from PIL import Image
tar, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
lines = []
with tarfile.open(tar) as t:
    names = sorted(m.name for m in t.getmembers()
                   if m.isfile() and m.name.lower().endswith('.jpg'))
    step = max(1, len(names) // n)
    for i, name in enumerate(names[::step][:n]):
        im = Image.open(io.BytesIO(t.extractfile(name).read())).convert('RGB')
        with open(os.path.join(out, 'photo%d.rgb' % i), 'wb') as f:
            f.write(im.tobytes())
        lines.append('%d %d %d %s' % (i, im.width, im.height, name))
with open(os.path.join(out, 'photos.txt'), 'w') as f:
    f.write('\n'.join(lines) + '\n')
)PY";

bool HavePil() { return test::PythonHas("PIL.Image"); }

bool HaveTorchvision() {
  return test::PythonHas("PIL.Image, torch, torchvision");
}

constexpr Filter kAllFilters[] = {Filter::kNearest,  Filter::kBox,
                                  Filter::kBilinear, Filter::kHamming,
                                  Filter::kBicubic,  Filter::kLanczos};

struct Image {
  std::string file;  // name in the scratch directory
  int w = 0;
  int h = 0;
  std::string rgb;
};

struct Case {
  std::string id;
  bool eval = false;  // Resize(size) + CenterCrop(crop), else crop+resize
  const Image* src = nullptr;
  int x = 0, y = 0, w = 0, h = 0;  // crop: the box
  int out_w = 0, out_h = 0;        // crop: the output size
  int size = 0, crop = 0;          // eval
  Filter filter = Filter::kBilinear;
  int norm = -1;  // -1: bytes only; 0: ToTensor; 1: ToTensor + ImageNet
  bool flip = false;
  std::string want_u8;   // Pillow's bytes
  std::string want_f32;  // torchvision's floats (norm >= 0)

  std::string Describe() const {
    std::ostringstream s;
    s << id << ": " << src->file << " " << src->w << "x" << src->h << " ";
    if (eval) {
      s << "Resize(" << size << ") CenterCrop(" << crop << ")";
    } else {
      s << "box " << w << "x" << h << "+" << x << "+" << y << " -> " << out_w
        << "x" << out_h;
    }
    s << " " << FilterName(filter) << " norm " << norm
      << (flip ? " flipped" : "");
    return s.str();
  }
};

const float* MeanFor(int norm) { return norm == 1 ? kImageNetMean : kZeroMean; }
const float* StdFor(int norm) { return norm == 1 ? kImageNetStd : kUnitStd; }

// "" when equal, else where the first difference is and how many differ.
std::string CompareBytes(const std::string& got, const std::string& want,
                         int width) {
  if (got.size() != want.size()) {
    return "size " + std::to_string(got.size()) + " vs Pillow's " +
           std::to_string(want.size());
  }
  size_t first = got.size(), count = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) {
      if (count++ == 0) first = i;
    }
  }
  if (count == 0) return "";
  const size_t pixel = first / 3;
  return std::to_string(count) +
         " bytes differ; first at x=" + std::to_string(pixel % width) +
         " y=" + std::to_string(pixel / width) +
         " c=" + std::to_string(first % 3) + ": " +
         std::to_string(static_cast<uint8_t>(got[first])) + " vs Pillow's " +
         std::to_string(static_cast<uint8_t>(want[first]));
}

std::string CompareFloats(const std::vector<float>& got,
                          const std::string& want) {
  if (got.size() * sizeof(float) != want.size()) {
    return "size " + std::to_string(got.size() * sizeof(float)) +
           " vs torchvision's " + std::to_string(want.size());
  }
  size_t first = got.size(), count = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], want.data() + i * sizeof(float), sizeof(float))) {
      if (count++ == 0) first = i;
    }
  }
  if (count == 0) return "";
  float w;
  std::memcpy(&w, want.data() + first * sizeof(float), sizeof(float));
  char buf[160];
  std::snprintf(buf, sizeof(buf),
                "%zu floats differ; first at %zu: %.9g vs torchvision's %.9g",
                count, first, got[first], w);
  return buf;
}

// torchvision's Resize(size) output size for a w x h image.
void EvalResizeSize(int w, int h, int size, int* out_w, int* out_h) {
  const int shorter = std::min(w, h), longer = std::max(w, h);
  const int new_long = static_cast<int>(static_cast<double>(size) * longer /
                                        static_cast<double>(shorter));
  *out_w = w <= h ? size : new_long;
  *out_h = w <= h ? new_long : size;
}

// Runs our side of an eval case: Resize then CenterCrop (Python's round
// half to even for the offsets), flip, ToTensor, Normalize.
Status RunEval(const Case& c, std::string* u8, std::vector<float>* f32) {
  int rw = 0, rh = 0;
  EvalResizeSize(c.src->w, c.src->h, c.size, &rw, &rh);
  u8->assign(static_cast<size_t>(rw) * rh * 3, '\0');
  Status s =
      ResizeRgb(reinterpret_cast<const uint8_t*>(c.src->rgb.data()), c.src->w,
                c.src->h, c.src->w * 3, 0, 0, c.src->w, c.src->h, rw, rh,
                c.filter, reinterpret_cast<uint8_t*>(&(*u8)[0]), rw * 3);
  if (!s.ok()) return s;
  const int top = static_cast<int>(std::nearbyint((rh - c.crop) / 2.0));
  const int left = static_cast<int>(std::nearbyint((rw - c.crop) / 2.0));
  f32->assign(static_cast<size_t>(3) * c.crop * c.crop, 0.0f);
  return ResizeRgbToChwFloat(reinterpret_cast<const uint8_t*>(u8->data()), rw,
                             rh, rw * 3, left, top, c.crop, c.crop, c.crop,
                             c.crop, c.filter, c.flip, MeanFor(c.norm),
                             StdFor(c.norm), f32->data());
}

class ResizeParityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!HavePil()) return;
    dir_ = new TempDir();
    images_ = new std::vector<std::unique_ptr<Image>>();
    cases_ = new std::vector<Case>();
    MakeRandomCases();
    MakePhotoCases();
    std::ostringstream spec;
    for (const Case& c : *cases_) {
      const Image& im = *c.src;
      spec << (c.eval ? "eval " : "crop ") << c.id << " " << im.file << " "
           << im.w << " " << im.h << " ";
      if (c.eval) {
        spec << c.size << " " << c.crop << " ";
      } else {
        spec << c.x << " " << c.y << " " << c.w << " " << c.h << " " << c.out_w
             << " " << c.out_h << " ";
      }
      spec << static_cast<int>(c.filter) << " " << c.norm << " "
           << (c.flip ? 1 : 0) << "\n";
    }
    test::WriteFile(*dir_ / "cases.txt", spec.str());
    test::WriteFile(*dir_ / "reference.py", kReferenceScript);
    auto r = test::Run({kPython, *dir_ / "reference.py", dir_->path()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    int floats = 0;
    for (Case& c : *cases_) {
      c.want_u8 = test::ReadFile(*dir_ / (c.id + ".u8"));
      if (c.norm >= 0) {
        c.want_f32 = test::ReadFile(*dir_ / (c.id + ".f32"));
        ++floats;
      }
    }
    std::printf(
        "%zu cases against Pillow (%d also against torchvision), %d "
        "photos\n",
        cases_->size(), floats, photos_);
  }
  static void TearDownTestSuite() {
    delete cases_;
    cases_ = nullptr;
    delete images_;
    images_ = nullptr;
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (!HavePil()) GTEST_SKIP() << kPython << " with PIL is not available";
    ASSERT_NE(cases_, nullptr);
  }

  static const Image* AddImage(const std::string& file, int w, int h,
                               std::string rgb) {
    auto im = std::make_unique<Image>();
    im->file = file;
    im->w = w;
    im->h = h;
    im->rgb = std::move(rgb);
    test::WriteFile(*dir_ / file, im->rgb);
    images_->push_back(std::move(im));
    return images_->back().get();
  }

  static void AddCrop(const Image* src, int x, int y, int w, int h, int out_w,
                      int out_h, Filter filter, int norm, bool flip) {
    Case c;
    c.id = "c" + std::to_string(cases_->size());
    c.src = src;
    c.x = x;
    c.y = y;
    c.w = w;
    c.h = h;
    c.out_w = out_w;
    c.out_h = out_h;
    c.filter = filter;
    c.norm = HaveTorchvision() ? norm : -1;
    c.flip = flip;
    cases_->push_back(std::move(c));
  }

  // Random images of many sizes; for each, every filter on the full image
  // (same size, one dimension, up and down by non-integer factors, 1x1,
  // 224x224) and on boxes touching each edge, inside, and of one pixel.
  static void MakeRandomCases() {
    const int sizes[][2] = {{1, 1},   {2, 3},   {3, 2},     {7, 5},
                            {31, 17}, {64, 64}, {500, 375}, {333, 500}};
    std::mt19937 rng(13);
    for (const auto& size : sizes) {
      const int w = size[0], h = size[1];
      const std::string name = std::to_string(w) + "x" + std::to_string(h);
      const Image* noise = AddImage(
          "noise" + name + ".rgb", w, h,
          test::RandomBytes(static_cast<size_t>(w) * h * 3, w * 1000 + h));
      std::vector<std::array<int, 6>> boxes;  // x y w h out_w out_h
      auto full = [&](int ow, int oh) {
        boxes.push_back({0, 0, w, h, std::max(1, ow), std::max(1, oh)});
      };
      full(w, h);              // copy
      full(w, h * 7 / 5 + 1);  // vertical only, up
      full(w * 3 / 5, h);      // horizontal only, down
      full(1, 1);
      full(w * 13 / 10 + 2, h * 17 / 10 + 1);  // up, non-integer
      full(w * 3 / 7, h * 5 / 11);             // down, non-integer
      full(224, 224);
      full(w * 2, h * 2);  // up by exactly 2
      full(std::max(1, w / 2), std::max(1, h / 3));
      // Boxes: touching the left/top, the right/bottom, inside, one pixel.
      auto rand = [&](int lo, int hi) {
        return std::uniform_int_distribution<int>(lo, hi)(rng);
      };
      for (int i = 0; i < 4; ++i) {
        const int bw = rand(1, w), bh = rand(1, h);
        int bx = rand(0, w - bw), by = rand(0, h - bh);
        if (i == 0) bx = by = 0;
        if (i == 1) bx = w - bw, by = h - bh;
        if (i == 2) bx = 0, by = h - bh;
        boxes.push_back({bx, by, bw, bh, rand(1, 96), rand(1, 96)});
      }
      boxes.push_back({w - 1, h - 1, 1, 1, 5, 3});
      boxes.push_back({rand(0, w - 1), rand(0, h - 1), 1, 1, 224, 224});
      if (w > 2 && h > 2) boxes.push_back({1, 1, w - 2, h - 2, w - 2, h - 2});
      for (Filter f : kAllFilters) {
        for (size_t i = 0; i < boxes.size(); ++i) {
          const auto& b = boxes[i];
          // The float path on about half the cases, both flips.
          const int norm = (i % 2 == 0) ? static_cast<int>(i / 2 % 2) : -1;
          AddCrop(noise, b[0], b[1], b[2], b[3], b[4], b[5], f, norm,
                  i % 4 == 0);
        }
      }
    }
    // Saturated edges: a 0/255 checkerboard drives bicubic and Lanczos past
    // 0..255, so clipping is exercised.
    std::string board(23 * 19 * 3, '\0');
    for (int y = 0; y < 19; ++y) {
      for (int x = 0; x < 23; ++x) {
        for (int c = 0; c < 3; ++c) {
          board[(y * 23 + x) * 3 + c] = ((x + y + c) % 2) ? '\xff' : '\0';
        }
      }
    }
    const Image* checker = AddImage("checker.rgb", 23, 19, board);
    for (Filter f : kAllFilters) {
      AddCrop(checker, 0, 0, 23, 19, 57, 41, f, 1, false);
      AddCrop(checker, 2, 3, 11, 9, 16, 5, f, 1, true);
      AddCrop(checker, 0, 0, 23, 19, 9, 7, f, 0, false);
    }
  }

  // A few real photos: RandomResizedCrop-like boxes to 224x224 and the
  // evaluation pipeline Resize(256) + CenterCrop(224).
  static void MakePhotoCases() {
    const std::string tar = test::SharedPhotosTar();
    if (tar.empty()) return;
    test::WriteFile(*dir_ / "photos.py", kPhotosScript);
    auto r = test::Run({kPython, *dir_ / "photos.py", tar, "6", dir_->path()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::istringstream lines(test::ReadFile(*dir_ / "photos.txt"));
    std::string line;
    std::mt19937 rng(224);
    while (std::getline(lines, line)) {
      std::istringstream fields(line);
      int i = 0, w = 0, h = 0;
      fields >> i >> w >> h;
      const std::string file = "photo" + std::to_string(i) + ".rgb";
      const Image* im = AddImage(file, w, h, test::ReadFile(*dir_ / file));
      ++photos_;
      auto rand = [&](int lo, int hi) {
        return std::uniform_int_distribution<int>(lo, hi)(rng);
      };
      for (Filter f : kAllFilters) {
        for (int k = 0; k < 2; ++k) {
          const int bw = rand(w / 4, w), bh = rand(h / 4, h);
          AddCrop(im, rand(0, w - bw), rand(0, h - bh), bw, bh, 224, 224, f, 1,
                  k == 1);
        }
        AddCrop(im, 0, 0, w, h, w, h, f, -1, false);  // unchanged: a copy
        if (HaveTorchvision()) {
          Case c;
          c.id = "e" + std::to_string(cases_->size());
          c.eval = true;
          c.src = im;
          c.size = 256;
          c.crop = 224;
          c.filter = f;
          c.norm = 1;
          c.flip = f == Filter::kBicubic;
          cases_->push_back(std::move(c));
        }
      }
    }
  }

  // Checks the crop cases `pick` selects; returns how many.
  static int CheckWhere(const std::function<bool(const Case&)>& pick) {
    int n = 0;
    for (const Case& c : *cases_) {
      if (c.eval || !pick(c)) continue;
      ++n;
      SCOPED_TRACE(c.Describe());
      const uint8_t* src = reinterpret_cast<const uint8_t*>(c.src->rgb.data());
      std::string got(static_cast<size_t>(c.out_w) * c.out_h * 3, '\0');
      Status s = ResizeRgb(src, c.src->w, c.src->h, c.src->w * 3, c.x, c.y, c.w,
                           c.h, c.out_w, c.out_h, c.filter,
                           reinterpret_cast<uint8_t*>(&got[0]), c.out_w * 3);
      EXPECT_TRUE(s.ok()) << s.ToString();
      if (s.ok()) {
        EXPECT_EQ(CompareBytes(got, c.want_u8, c.out_w), "");
      }
    }
    return n;
  }

  static TempDir* dir_;
  static std::vector<std::unique_ptr<Image>>* images_;
  static std::vector<Case>* cases_;
  static int photos_;
};

TempDir* ResizeParityTest::dir_ = nullptr;
std::vector<std::unique_ptr<Image>>* ResizeParityTest::images_ = nullptr;
std::vector<Case>* ResizeParityTest::cases_ = nullptr;
int ResizeParityTest::photos_ = 0;

bool IsPhoto(const Case& c) { return c.src->file.rfind("photo", 0) == 0; }

TEST_F(ResizeParityTest, EveryFilterMatchesPillowBytes) {
  for (Filter f : kAllFilters) {
    SCOPED_TRACE(FilterName(f));
    EXPECT_GT(CheckWhere([f](const Case& c) { return c.filter == f; }), 20);
  }
}

TEST_F(ResizeParityTest, SameSizeIsACopy) {
  EXPECT_GT(CheckWhere(
                [](const Case& c) { return c.w == c.out_w && c.h == c.out_h; }),
            0);
}

TEST_F(ResizeParityTest, OneDimensionUnchangedSkipsThatPass) {
  EXPECT_GT(CheckWhere([](const Case& c) {
              return (c.w == c.out_w) != (c.h == c.out_h);
            }),
            0);
}

TEST_F(ResizeParityTest, UpscalesByNonIntegerFactors) {
  EXPECT_GT(CheckWhere([](const Case& c) {
              return c.out_w > c.w && c.out_h > c.h && c.out_w % c.w != 0;
            }),
            0);
}

TEST_F(ResizeParityTest, DownscalesByNonIntegerFactors) {
  EXPECT_GT(CheckWhere([](const Case& c) {
              return c.out_w < c.w && c.out_h < c.h && c.w % c.out_w != 0;
            }),
            0);
}

TEST_F(ResizeParityTest, BoxesTouchingTheEdgesSeeOnlyTheBox) {
  EXPECT_GT(CheckWhere([](const Case& c) {
              return (c.x == 0 || c.x + c.w == c.src->w || c.y == 0 ||
                      c.y + c.h == c.src->h) &&
                     (c.w < c.src->w || c.h < c.src->h);
            }),
            0);
}

TEST_F(ResizeParityTest, OnePixelBox) {
  EXPECT_GT(CheckWhere([](const Case& c) { return c.w == 1 && c.h == 1; }), 0);
}

TEST_F(ResizeParityTest, TinyImages) {
  EXPECT_GT(CheckWhere([](const Case& c) { return c.src->w * c.src->h <= 6; }),
            0);
}

TEST_F(ResizeParityTest, RealPhotosMatchPillow) {
  if (photos_ == 0) GTEST_SKIP() << "../shared/data photos absent";
  EXPECT_GT(CheckWhere(IsPhoto), 0);
}

// The fused path against torchvision's resized_crop, hflip, to_tensor and
// normalize: the float32 bits must be the same.
TEST_F(ResizeParityTest, ChwFloatMatchesTorchvisionBits) {
  if (!HaveTorchvision()) GTEST_SKIP() << "torch/torchvision not available";
  int n = 0, flipped = 0;
  for (const Case& c : *cases_) {
    if (c.eval || c.norm < 0) continue;
    ++n;
    flipped += c.flip;
    SCOPED_TRACE(c.Describe());
    std::vector<float> got(static_cast<size_t>(3) * c.out_w * c.out_h, -7.0f);
    Status s = ResizeRgbToChwFloat(
        reinterpret_cast<const uint8_t*>(c.src->rgb.data()), c.src->w, c.src->h,
        c.src->w * 3, c.x, c.y, c.w, c.h, c.out_w, c.out_h, c.filter, c.flip,
        MeanFor(c.norm), StdFor(c.norm), got.data());
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(CompareFloats(got, c.want_f32), "");
  }
  EXPECT_GT(n, 100);
  EXPECT_GT(flipped, 20);
}

// Resize(256) then CenterCrop(224), flip, ToTensor, Normalize on photos.
TEST_F(ResizeParityTest, EvalPipelineMatchesTorchvision) {
  if (!HaveTorchvision()) GTEST_SKIP() << "torch/torchvision not available";
  if (photos_ == 0) GTEST_SKIP() << "../shared/data photos absent";
  int n = 0;
  for (const Case& c : *cases_) {
    if (!c.eval) continue;
    ++n;
    SCOPED_TRACE(c.Describe());
    std::string u8;
    std::vector<float> f32;
    Status s = RunEval(c, &u8, &f32);
    ASSERT_TRUE(s.ok()) << s.ToString();
    int rw = 0, rh = 0;
    EvalResizeSize(c.src->w, c.src->h, c.size, &rw, &rh);
    EXPECT_EQ(CompareBytes(u8, c.want_u8, rw), "");
    EXPECT_EQ(CompareFloats(f32, c.want_f32), "");
  }
  EXPECT_GT(n, 0);
}

// ---------------------------------------------------------------------------
// Without Pillow
// ---------------------------------------------------------------------------

std::string Noise(int w, int h, uint64_t seed) {
  return test::RandomBytes(static_cast<size_t>(w) * h * 3, seed);
}

const uint8_t* U8(const std::string& s) {
  return reinterpret_cast<const uint8_t*>(s.data());
}

TEST(ResizeTest, RejectsBadArguments) {
  const std::string src = Noise(8, 6, 1);
  std::vector<uint8_t> dst(64 * 3);
  auto resize = [&](int x, int y, int w, int h, int ow, int oh,
                    size_t src_stride = 24, Filter f = Filter::kBilinear) {
    return ResizeRgb(U8(src), 8, 6, src_stride, x, y, w, h, ow, oh, f,
                     dst.data(), 8 * 3);
  };
  EXPECT_TRUE(resize(0, 0, 8, 6, 4, 4).ok());
  EXPECT_TRUE(resize(-1, 0, 8, 6, 4, 4).IsInvalidArgument());
  EXPECT_TRUE(resize(1, 0, 8, 6, 4, 4).IsInvalidArgument());
  EXPECT_TRUE(resize(0, 1, 8, 6, 4, 4).IsInvalidArgument());
  EXPECT_TRUE(resize(0, 0, 0, 6, 4, 4).IsInvalidArgument());
  EXPECT_TRUE(resize(0, 0, 8, 6, 0, 4).IsInvalidArgument());
  EXPECT_TRUE(resize(0, 0, 8, 6, 9, 4).IsInvalidArgument());  // dst stride
  EXPECT_TRUE(resize(0, 0, 8, 6, 4, 4, 23).IsInvalidArgument());
  EXPECT_TRUE(
      resize(0, 0, 8, 6, 4, 4, 24, static_cast<Filter>(9)).IsInvalidArgument());
  // Weight tables Pillow refuses too (MemoryError): 2^28 x 3 taps.
  EXPECT_TRUE(ResizeRgb(U8(src), 8, 6, 24, 0, 0, 8, 6, 1 << 28, 1,
                        Filter::kBilinear, dst.data(), size_t{3} << 28)
                  .IsInvalidArgument());
  Status s = resize(7, 0, 2, 6, 4, 4);
  ASSERT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.ToString().find("2x6 at (7, 0)"), std::string::npos)
      << s.ToString();
  float out[3 * 16];
  const float zero_std[3] = {1.0f, 0.0f, 1.0f};
  EXPECT_TRUE(ResizeRgbToChwFloat(U8(src), 8, 6, 24, 0, 0, 8, 6, 4, 4,
                                  Filter::kBilinear, false, kZeroMean, zero_std,
                                  out)
                  .IsInvalidArgument());
}

TEST(ResizeTest, SameSizeCopiesTheBoxWithEveryFilter) {
  const std::string src = Noise(9, 7, 2);
  for (Filter f : kAllFilters) {
    SCOPED_TRACE(FilterName(f));
    std::string dst(5 * 4 * 3, '\0');
    ASSERT_TRUE(ResizeRgb(U8(src), 9, 7, 27, 3, 2, 5, 4, 5, 4, f,
                          reinterpret_cast<uint8_t*>(&dst[0]), 15)
                    .ok());
    for (int y = 0; y < 4; ++y) {
      EXPECT_EQ(dst.substr(y * 15, 15), src.substr((y + 2) * 27 + 9, 15));
    }
  }
}

TEST(ResizeTest, StridesArePadded) {
  // Rows with padding give the same pixels as packed rows.
  const int w = 13, h = 11;
  const std::string packed = Noise(w, h, 3);
  std::string padded(static_cast<size_t>(h) * (w * 3 + 5), '\x5a');
  for (int y = 0; y < h; ++y) {
    padded.replace(y * (w * 3 + 5), w * 3, packed.substr(y * w * 3, w * 3));
  }
  for (Filter f : kAllFilters) {
    SCOPED_TRACE(FilterName(f));
    std::string a(6 * 17 * 3, '\0'), b(6 * 17 * 3 + 17 * 2, '\x11');
    ASSERT_TRUE(ResizeRgb(U8(packed), w, h, w * 3, 1, 2, 10, 8, 6, 17, f,
                          reinterpret_cast<uint8_t*>(&a[0]), 18)
                    .ok());
    ASSERT_TRUE(ResizeRgb(U8(padded), w, h, w * 3 + 5, 1, 2, 10, 8, 6, 17, f,
                          reinterpret_cast<uint8_t*>(&b[0]), 20)
                    .ok());
    for (int y = 0; y < 17; ++y) {
      EXPECT_EQ(a.substr(y * 18, 18), b.substr(y * 20, 18));
      EXPECT_EQ(b.substr(y * 20 + 18, 2), "\x11\x11");  // padding untouched
    }
  }
}

// The fused path is ResizeRgb, then a flip, then ToTensor and Normalize
// in float32: the same operations give the same bits.
TEST(ResizeTest, ChwFloatIsResizeFlipAndNormalize) {
  const int w = 40, h = 30, ow = 17, oh = 9;
  const std::string src = Noise(w, h, 4);
  std::string rgb(ow * oh * 3, '\0');
  ASSERT_TRUE(ResizeRgb(U8(src), w, h, w * 3, 3, 1, 30, 25, ow, oh,
                        Filter::kBicubic, reinterpret_cast<uint8_t*>(&rgb[0]),
                        ow * 3)
                  .ok());
  for (bool flip : {false, true}) {
    std::vector<float> got(3 * ow * oh);
    ASSERT_TRUE(ResizeRgbToChwFloat(U8(src), w, h, w * 3, 3, 1, 30, 25, ow, oh,
                                    Filter::kBicubic, flip, kImageNetMean,
                                    kImageNetStd, got.data())
                    .ok());
    for (int c = 0; c < 3; ++c) {
      for (int y = 0; y < oh; ++y) {
        for (int x = 0; x < ow; ++x) {
          const int sx = flip ? ow - 1 - x : x;
          const uint8_t v = static_cast<uint8_t>(rgb[(y * ow + sx) * 3 + c]);
          volatile float t = static_cast<float>(v) / 255.0f;
          volatile float n = (t - kImageNetMean[c]) / kImageNetStd[c];
          ASSERT_EQ(got[(c * oh + y) * ow + x], n)
              << "flip " << flip << " c " << c << " y " << y << " x " << x;
        }
      }
    }
  }
}

}  // namespace
}  // namespace ufspack
