// Copyright 2026 The ufspack Authors.
//
// Micro benchmarks of in-memory image decoding (ufspack/decode.h), one
// thread, encoded bytes already in memory.  Items/s is images/s; "pixels"
// is decoded pixels/s; bytes/s counts encoded bytes.
//
//   BM_DecodeTurboJpeg   DecodeRgbTurboJpeg: JPEG through TurboJPEG.
//   BM_DecodeOpenCv      DecodeRgbOpenCv: JPEG through OpenCV's imdecode
//                        (+ BGR->RGB).
//   BM_DecodeRgb         DecodeRgb: format detection, then TurboJPEG.
//   BM_DecodePng         DecodeRgb on PNGs (OpenCV path).
//
// JPEGs: the 3,000 real photos of cats_and_dogs_filtered.tar, extracted at
// start-up into a temporary directory (removed once read), from
// $UFSPACK_SHARED_DATA (default: <source dir>/../shared/data).  Without the
// tar: 200 synthetic gradient images (256x256 and 500x375) encoded with
// cv::imencode at quality 90.  PNGs are always synthetic (the same images,
// cv::imencode defaults).  The benchmark label says which set ran.
//
//   build/bench/decode_bench --benchmark_filter=Jpeg
#include <benchmark/benchmark.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <random>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "decoders.h"
#include "ufspack/decode.h"
#include "ufspack/status.h"

extern char** environ;

namespace ufspack {
namespace {

namespace fs = std::filesystem;

struct ImageSet {
  std::string label;                // which images, for the report
  std::vector<std::string> images;  // encoded bytes
};

std::string SharedPhotosTar() {
  const char* env = std::getenv("UFSPACK_SHARED_DATA");
  const std::string dir =
      env && *env ? std::string(env)
                  : std::string(UFSPACK_SOURCE_DIR) + "/../shared/data";
  const std::string tar = dir + "/cats_and_dogs_filtered.tar";
  std::error_code ec;
  return fs::is_regular_file(tar, ec) ? tar : "";
}

// Runs `argv` (searched in PATH) and returns true if it exits with 0.
bool RunCommand(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid;
  if (posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0)
    return false;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return false;
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

bool ReadWholeFile(const fs::path& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = std::move(ss).str();
  return static_cast<bool>(in) || in.eof();
}

// Every *.jpg / *.jpeg of the tar, in path order.  Empty on any failure.
std::vector<std::string> LoadTarJpegs(const std::string& tar) {
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl =
      std::string(tmp && *tmp ? tmp : "/tmp") + "/ufspack-decode-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) return {};
  const fs::path dir = tmpl;
  std::vector<std::string> images;
  if (RunCommand({"tar", "-xf", tar, "-C", dir.string()})) {
    std::vector<fs::path> paths;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (!it->is_regular_file(ec)) continue;
      std::string ext = it->path().extension().string();
      std::transform(ext.begin(), ext.end(), ext.begin(),
                     [](unsigned char c) { return std::tolower(c); });
      if (ext == ".jpg" || ext == ".jpeg") paths.push_back(it->path());
    }
    std::sort(paths.begin(), paths.end());
    for (const fs::path& p : paths) {
      std::string bytes;
      if (!ReadWholeFile(p, &bytes)) {
        images.clear();
        break;
      }
      images.push_back(std::move(bytes));
    }
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  return images;
}

// A smooth random gradient with a ripple and mild noise: compresses like a
// (plain) photo rather than like flat colour or white noise.
cv::Mat SyntheticImage(int width, int height, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  double base[3], gx[3], gy[3], amp[3];
  for (int c = 0; c < 3; ++c) {
    base[c] = 40 + 120 * u(rng);
    gx[c] = (u(rng) - 0.5) * 160.0 / width;
    gy[c] = (u(rng) - 0.5) * 160.0 / height;
    amp[c] = 10 + 25 * u(rng);
  }
  const double fx = 0.02 + 0.08 * u(rng), fy = 0.02 + 0.08 * u(rng);
  const double phase = 6.283 * u(rng);
  std::uniform_int_distribution<int> noise(-6, 6);
  cv::Mat m(height, width, CV_8UC3);
  for (int y = 0; y < height; ++y) {
    uint8_t* row = m.ptr<uint8_t>(y);
    for (int x = 0; x < width; ++x) {
      const double ripple = std::sin(fx * x + phase) * std::cos(fy * y);
      for (int c = 0; c < 3; ++c) {
        double v =
            base[c] + gx[c] * x + gy[c] * y + amp[c] * ripple + noise(rng);
        row[3 * x + c] = static_cast<uint8_t>(std::clamp(v, 0.0, 255.0));
      }
    }
  }
  return m;
}

// `count` synthetic images, half 256x256 and half 500x375, encoded as
// `ext` (".jpg" at quality 90, or ".png").
std::vector<std::string> SyntheticImages(int count, const std::string& ext) {
  std::mt19937_64 rng(2026);
  std::vector<int> params;
  if (ext == ".jpg") params = {cv::IMWRITE_JPEG_QUALITY, 90};
  std::vector<std::string> images;
  for (int i = 0; i < count; ++i) {
    const bool small = i % 2 == 0;
    cv::Mat m = SyntheticImage(small ? 256 : 500, small ? 256 : 375, rng);
    std::vector<uint8_t> buf;
    if (!cv::imencode(ext, m, buf, params)) return {};
    images.emplace_back(buf.begin(), buf.end());
  }
  return images;
}

std::string Describe(const std::string& what,
                     const std::vector<std::string>& images) {
  size_t total = 0;
  for (const std::string& s : images) total += s.size();
  char buf[160];
  std::snprintf(buf, sizeof(buf), "%s: %zu images, mean %.1f KB", what.c_str(),
                images.size(),
                images.empty() ? 0.0 : total / 1000.0 / images.size());
  return buf;
}

const ImageSet& Jpegs() {
  static const ImageSet set = [] {
    ImageSet s;
    const std::string tar = SharedPhotosTar();
    if (!tar.empty()) {
      s.images = LoadTarJpegs(tar);
      if (!s.images.empty()) {
        s.label = Describe("cats_and_dogs_filtered", s.images);
        return s;
      }
      std::fprintf(stderr, "decode_bench: could not read %s; synthetic\n",
                   tar.c_str());
    }
    s.images = SyntheticImages(200, ".jpg");
    s.label = Describe("synthetic JPEG q90", s.images);
    return s;
  }();
  return set;
}

const ImageSet& Pngs() {
  static const ImageSet set = [] {
    ImageSet s;
    s.images = SyntheticImages(200, ".png");
    s.label = Describe("synthetic PNG", s.images);
    return s;
  }();
  return set;
}

using DecodeFn = Status (*)(const void*, size_t, RgbImage*);

void DecodeBench(benchmark::State& state, const ImageSet& set,
                 DecodeFn decode) {
  if (set.images.empty()) {
    state.SkipWithError("no images");
    return;
  }
  state.SetLabel(set.label);
  int64_t bytes = 0;
  double pixels = 0;
  size_t k = 0;
  for (auto _ : state) {
    const std::string& data = set.images[k];
    RgbImage img;
    Status s = decode(data.data(), data.size(), &img);
    if (!s.ok()) {
      state.SkipWithError(
          ("image " + std::to_string(k) + ": " + s.ToString()).c_str());
      break;
    }
    benchmark::DoNotOptimize(img.pixels.get());
    bytes += static_cast<int64_t>(data.size());
    pixels += static_cast<double>(img.width) * img.height;
    if (++k == set.images.size()) k = 0;
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(bytes);
  state.counters["pixels"] =
      benchmark::Counter(pixels, benchmark::Counter::kIsRate);
}

Status DecodeRgbDefault(const void* data, size_t size, RgbImage* out) {
  return DecodeRgb(data, size, out);
}

void BM_DecodeTurboJpeg(benchmark::State& state) {
  DecodeBench(state, Jpegs(), DecodeRgbTurboJpeg);
}
void BM_DecodeOpenCv(benchmark::State& state) {
  DecodeBench(state, Jpegs(), DecodeRgbOpenCv);
}
void BM_DecodeRgb(benchmark::State& state) {
  DecodeBench(state, Jpegs(), DecodeRgbDefault);
}
void BM_DecodePng(benchmark::State& state) {
  DecodeBench(state, Pngs(), DecodeRgbDefault);
}
BENCHMARK(BM_DecodeTurboJpeg)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DecodeOpenCv)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DecodeRgb)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DecodePng)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace ufspack

BENCHMARK_MAIN();
