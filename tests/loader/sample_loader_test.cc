// Copyright 2026 The ufspack Authors.
//
// Tests for SampleLoader (loader/src/sample_loader.h) and the per-sample
// steps it runs: a small pack of PPM images (one stored as zstd), bytes no
// decoder takes, and a record damaged on disk, loaded in every mode and
// compared with Reader::Read and single-sample DecodeRgb.
#include "sample_loader.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "testutil.h"
#include "ufspack/builder.h"
#include "ufspack/decode.h"
#include "ufspack/reader.h"
#include "ufspack/transform.h"

namespace ufspack {
namespace {

constexpr int kThreads = 4;

// A binary PPM (P6) of width x height: what DecodeRgb decodes itself.
std::string Ppm(int width, int height, const std::string& pixels) {
  return "P6\n" + std::to_string(width) + " " + std::to_string(height) +
         "\n255\n" + pixels;
}

class SampleLoaderTest : public ::testing::Test {
 protected:
  // Records: 0 noisy PPM (raw), 1 flat PPM (zstd), 2 not an image, 3 PPM
  // damaged on disk after the build, 4 noisy PPM (raw).
  void SetUp() override {
    pixels_ = {test::RandomBytes(5 * 4 * 3, 1), std::string(8 * 6 * 3, 'x'), "",
               test::RandomBytes(3 * 3 * 3, 2),
               test::RandomBytes(7 * 2 * 3, 3)};
    files_ = {Ppm(5, 4, pixels_[0]), Ppm(8, 6, pixels_[1]),
              "not an image at all", Ppm(3, 3, pixels_[3]),
              Ppm(7, 2, pixels_[4])};
    PackWriterOptions options;
    options.compress = true;
    options.flat = true;
    std::unique_ptr<PackWriter> w;
    ASSERT_TRUE(PackWriter::Create(dir_.path(), options, &w).ok());
    for (size_t k = 0; k < files_.size(); ++k) {
      ASSERT_TRUE(w->Add("r" + std::to_string(k), kNoLabel, files_[k]).ok());
    }
    ASSERT_TRUE(w->Finish().ok());
    ASSERT_TRUE(Reader::Open(dir_.path(), {}, &reader_).ok());
    Record r;
    ASSERT_TRUE(reader_->GetRecord(3, &r).ok());
    test::FlipByte(dir_ / "data.ufs", r.offset + r.stored_length - 1);
  }

  const std::vector<uint64_t> all_ = {0, 1, 2, 3, 4};
  test::TempDir dir_;
  std::vector<std::string> pixels_, files_;
  std::unique_ptr<Reader> reader_;
};

TEST_F(SampleLoaderTest, PackHasBothCodecs) {
  Record r0, r1;
  ASSERT_TRUE(reader_->GetRecord(0, &r0).ok());
  ASSERT_TRUE(reader_->GetRecord(1, &r1).ok());
  EXPECT_EQ(r0.codec, Codec::kRaw);
  EXPECT_EQ(r1.codec, Codec::kZstd);
}

TEST_F(SampleLoaderTest, RawMatchesReaderRead) {
  const std::vector<uint64_t> order = {4, 1, 3, 0, 2, 1};
  std::vector<RawSample> got = SampleLoader(*reader_, kThreads).LoadRaw(order);
  ASSERT_EQ(got.size(), order.size());
  for (size_t k = 0; k < order.size(); ++k) {
    std::string want;
    const Status s = reader_->Read(order[k], &want);
    EXPECT_EQ(got[k].status.ToString(), s.ToString()) << k;
    if (order[k] == 3) {
      EXPECT_TRUE(got[k].status.IsCorruption()) << got[k].status.ToString();
    } else {
      EXPECT_TRUE(got[k].status.ok()) << k;
      EXPECT_EQ(got[k].bytes, want) << k;
      EXPECT_EQ(got[k].bytes, files_[order[k]]) << k;
    }
  }
}

TEST_F(SampleLoaderTest, DecodedMatchesSingleDecode) {
  std::vector<DecodedSample> got =
      SampleLoader(*reader_, kThreads).LoadDecoded(all_);
  ASSERT_EQ(got.size(), all_.size());
  for (uint64_t i : {0, 1, 4}) {
    ASSERT_TRUE(got[i].status.ok()) << i;
    RgbImage want;
    ASSERT_TRUE(DecodeRgb(files_[i].data(), files_[i].size(), &want).ok());
    ASSERT_TRUE(got[i].image.pixels) << i;
    EXPECT_EQ(got[i].image.width, want.width);
    EXPECT_EQ(got[i].image.height, want.height);
    EXPECT_EQ(std::string(reinterpret_cast<char*>(got[i].image.pixels.get()),
                          got[i].image.size()),
              pixels_[i]);
    EXPECT_TRUE(got[i].fallback.empty());
  }
  // Not an image: no error, the bytes are kept for PIL.
  EXPECT_TRUE(got[2].status.ok());
  EXPECT_FALSE(got[2].image.pixels);
  EXPECT_EQ(got[2].fallback, files_[2]);
  // The damaged record: its read error, and nothing else.
  EXPECT_TRUE(got[3].status.IsCorruption()) << got[3].status.ToString();
  EXPECT_FALSE(got[3].image.pixels);
  EXPECT_TRUE(got[3].fallback.empty());
}

TEST_F(SampleLoaderTest, PreparedThenTransformed) {
  std::vector<PreparedSample> got =
      SampleLoader(*reader_, kThreads).LoadPrepared(all_);
  ASSERT_EQ(got.size(), all_.size());
  EXPECT_TRUE(got[3].status.IsCorruption());
  EXPECT_EQ(got[2].kind, PreparedSample::kNeedsPil);
  EXPECT_EQ(got[2].data, files_[2]);
  std::vector<const PreparedSample*> samples;
  std::vector<TransformSpec> specs;
  std::vector<std::string> outs;
  for (uint64_t i : {0, 1, 2, 4}) {
    ASSERT_TRUE(got[i].status.ok()) << i;
    TransformSpec spec;  // no operations: the pixels as they are
    spec.in_width = got[i].width;
    spec.in_height = got[i].height;
    samples.push_back(&got[i]);
    specs.push_back(spec);
    outs.emplace_back(i == 2 ? 1 : spec.output_bytes(), '\0');
  }
  EXPECT_EQ(got[0].kind, PreparedSample::kPixels);
  EXPECT_EQ(got[0].width, 5);
  EXPECT_EQ(got[0].height, 4);
  std::vector<void*> dsts;
  for (std::string& o : outs) dsts.push_back(o.data());
  specs[2].in_width = specs[2].in_height = 1;  // never run: needs PIL
  std::vector<Status> s =
      TransformPreparedBatch(samples, specs, dsts, kThreads);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_TRUE(s[0].ok()) << s[0].ToString();
  EXPECT_TRUE(s[1].ok()) << s[1].ToString();
  EXPECT_TRUE(s[2].IsNotSupported()) << s[2].ToString();
  EXPECT_TRUE(s[3].ok()) << s[3].ToString();
  EXPECT_EQ(outs[0], pixels_[0]);
  EXPECT_EQ(outs[1], pixels_[1]);
  EXPECT_EQ(outs[3], pixels_[4]);
}

TEST_F(SampleLoaderTest, RgbxIntoCallerRows) {
  std::vector<RgbxSample> got = SampleLoader(*reader_, kThreads).LoadRgbx(all_);
  ASSERT_EQ(got.size(), all_.size());
  EXPECT_TRUE(got[3].status.IsCorruption());
  EXPECT_FALSE(got[3].prepared_ok());
  EXPECT_TRUE(got[2].status.ok());
  EXPECT_FALSE(got[2].prepared_ok());
  // Record 0 into rows, record 1 left without rows (decoded to `array`).
  ASSERT_TRUE(got[0].prepared_ok());
  ASSERT_TRUE(got[1].prepared_ok());
  const int w = got[0].decoder.width(), h = got[0].decoder.height();
  std::vector<uint8_t> image(static_cast<size_t>(w) * h * 4);
  for (int y = 0; y < h; ++y) got[0].rows.push_back(&image[y * w * 4]);
  DecodeRgbxBatch(&got, kThreads);
  EXPECT_TRUE(got[0].decoded_ok());
  EXPECT_TRUE(got[1].decoded_ok());
  EXPECT_FALSE(got[2].decoded_ok());
  EXPECT_EQ(got[2].bytes, files_[2]);
  for (int p = 0; p < w * h; ++p) {
    EXPECT_EQ(0, std::memcmp(&image[p * 4], &pixels_[0][p * 3], 3)) << p;
    EXPECT_EQ(image[p * 4 + 3], 255) << p;
  }
  EXPECT_EQ(std::string(reinterpret_cast<char*>(got[1].array.pixels.get()),
                        got[1].array.size()),
            pixels_[1]);
}

TEST_F(SampleLoaderTest, ReadIntoCallerBuffers) {
  const std::vector<uint64_t> order = {4, 1, 0};
  std::vector<Record> records(order.size());
  std::vector<std::string> raw(order.size());
  std::vector<char*> dsts(order.size(), nullptr);
  for (size_t k = 0; k < order.size(); ++k) {
    ASSERT_TRUE(reader_->GetRecord(order[k], &records[k]).ok());
    if (records[k].codec == Codec::kZstd) continue;
    raw[k].resize(records[k].original_length);
    dsts[k] = raw[k].data();
  }
  std::vector<std::string> grown(order.size());
  const SampleLoader loader(*reader_, kThreads);
  ASSERT_TRUE(loader.ReadInto(records, dsts.data(), &grown).ok());
  EXPECT_EQ(raw[0], files_[4]);
  EXPECT_EQ(grown[1], files_[1]);
  EXPECT_EQ(raw[2], files_[0]);
  // One damaged record fails the call.
  Record damaged;
  ASSERT_TRUE(reader_->GetRecord(3, &damaged).ok());
  std::string buf(damaged.original_length, '\0');
  char* dst = buf.data();
  std::vector<std::string> unused(1);
  EXPECT_TRUE(loader.ReadInto({damaged}, &dst, &unused).IsCorruption());
}

}  // namespace
}  // namespace ufspack
