// Copyright 2026 The ufspack Authors.
//
// The shuffled data layout (ufspack/layout.h): the index and the samples
// are those of the sorted layout, data.ufs holds the same stored bytes in a
// seeded permutation of each run, and the same tree and seed give the same
// pack.
#include "ufspack/layout.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "pack_writer_impl.h"
#include "testutil.h"
#include "ufspack/builder.h"
#include "ufspack/merge.h"
#include "ufspack/reader.h"

namespace ufspack {
namespace {

using test::ReadFile;
using test::TempDir;
using test::WriteFile;

// Five classes of 40 files, sizes 0 to ~20 KB, a nested directory.
void MakeTree(const std::string& root, int per_class = 40) {
  for (int c = 0; c < 5; ++c) {
    for (int i = 0; i < per_class; ++i) {
      const std::string name = root + "/c" + std::to_string(c) +
                               (i % 5 == 0 ? "/sub/" : "/") + "f" +
                               std::to_string(i) + ".jpg";
      WriteFile(name, test::RandomBytes((i * 7919u + c * 104729u) % 20000,
                                        i * 31 + c));
    }
  }
}

struct Sample {
  std::string name;
  uint32_t label;
  std::string bytes;
  uint64_t offset;
  uint64_t stored_length;
  bool operator==(const Sample& o) const {
    return name == o.name && label == o.label && bytes == o.bytes;
  }
};

std::vector<Sample> Samples(const std::string& dir, std::string* layout) {
  std::unique_ptr<Reader> r;
  Status s = Reader::Open(dir, ReaderOptions(), &r);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return {};
  EXPECT_TRUE(r->CheckIndex().ok());
  std::string_view l;
  *layout = r->GetMetadata(kMetaLayout, &l).ok() ? std::string(l) : "(none)";
  std::vector<Sample> out;
  for (uint64_t i = 0; i < r->size(); ++i) {
    Record rec;
    EXPECT_TRUE(r->GetRecord(i, &rec).ok());
    std::string bytes;
    EXPECT_TRUE(r->Read(i, &bytes).ok());
    out.push_back({std::string(rec.name), rec.label, bytes, rec.offset,
                   rec.stored_length});
  }
  return out;
}

// The records tile data.ufs from offset 64 with no gap or overlap.
void ExpectTiled(const std::vector<Sample>& samples, uint64_t data_size) {
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const Sample& s : samples) ranges.push_back({s.offset, s.stored_length});
  std::sort(ranges.begin(), ranges.end());
  uint64_t at = 64;
  for (const auto& [offset, length] : ranges) {
    ASSERT_EQ(offset, at);
    at += length;
  }
  EXPECT_EQ(at, data_size);
}

// How many neighbours in data order are also neighbours in record order.
size_t InOrderNeighbours(const std::vector<Sample>& samples) {
  std::vector<std::pair<uint64_t, size_t>> by_offset;
  for (size_t i = 0; i < samples.size(); ++i) {
    by_offset.push_back({samples[i].offset, i});
  }
  std::sort(by_offset.begin(), by_offset.end());
  size_t n = 0;
  for (size_t k = 1; k < by_offset.size(); ++k) {
    n += by_offset[k].second == by_offset[k - 1].second + 1;
  }
  return n;
}

Status Build(const std::string& src, const std::string& out,
             const std::string& layout, size_t scan_ahead = size_t{1} << 18,
             BuildSummary* summary = nullptr) {
  BuildOptions o;
  o.threads = 4;
  o.scan_ahead = scan_ahead;
  Status s = ParseDataLayout(layout, &o.layout);
  if (!s.ok()) return s;
  BuildSummary ignored;
  return BuildPack(src, out, o, summary ? summary : &ignored);
}

TEST(DataLayoutTest, ParsesAndNames) {
  DataLayout l;
  ASSERT_TRUE(ParseDataLayout("sorted", &l).ok());
  EXPECT_FALSE(l.shuffled);
  ASSERT_TRUE(ParseDataLayout("shuffled", &l).ok());
  EXPECT_TRUE(l.shuffled);
  EXPECT_EQ(l.seed, 0u);
  ASSERT_TRUE(ParseDataLayout("shuffled:18446744073709551615", &l).ok());
  EXPECT_EQ(l.seed, UINT64_MAX);
  EXPECT_EQ(DataLayoutName(l), "shuffled:18446744073709551615");
  EXPECT_EQ(DataLayoutName(DataLayout()), "sorted");
  for (const char* bad :
       {"", "random", "shuffled:", "shuffled:-1", "shuffled:1x",
        "shuffled:18446744073709551616", "shuffled 1", "Sorted"}) {
    Status s = ParseDataLayout(bad, &l);
    EXPECT_TRUE(s.IsInvalidArgument()) << bad;
    EXPECT_NE(s.message().find("'" + std::string(bad) + "'"), std::string::npos)
        << s.ToString();
  }
}

TEST(DataLayoutTest, RunOrderIsAFixedPermutation) {
  // Pinned values: a change to the algorithm changes every shuffled pack,
  // so it must be deliberate (docs/format.md describes it).
  const std::vector<uint32_t> order = ShuffledRunOrder(10, 0, 0);
  EXPECT_EQ(order, (std::vector<uint32_t>{4, 9, 2, 5, 1, 7, 6, 0, 3, 8}));
  std::vector<uint32_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (uint32_t k = 0; k < 10; ++k) EXPECT_EQ(sorted[k], k);
  EXPECT_NE(order, ShuffledRunOrder(10, 1, 0));
  EXPECT_NE(order, ShuffledRunOrder(10, 0, 1));
  EXPECT_TRUE(ShuffledRunOrder(0, 5, 5).empty());
  EXPECT_EQ(ShuffledRunOrder(1, 5, 5), std::vector<uint32_t>{0});
  // Every position is as likely for every element (chi-square over 8
  // positions x 8 elements, 40,000 shuffles: far below the 0.1% critical
  // value of 88 for 49 degrees of freedom when unbiased).
  std::vector<std::vector<int>> counts(8, std::vector<int>(8, 0));
  const int kTrials = 40000;
  for (int t = 0; t < kTrials; ++t) {
    const std::vector<uint32_t> o = ShuffledRunOrder(8, 3, t);
    for (int j = 0; j < 8; ++j) counts[j][o[j]]++;
  }
  double chi2 = 0;
  const double expected = kTrials / 8.0;
  for (const auto& row : counts) {
    for (int c : row) chi2 += (c - expected) * (c - expected) / expected;
  }
  EXPECT_LT(chi2, 88.0);
}

TEST(DataLayoutTest, ShuffledSamplesKeepEachSamplesRecordsTogether) {
  DataLayout l;
  ASSERT_TRUE(ParseDataLayout("shuffled-samples:7", &l).ok());
  EXPECT_TRUE(l.shuffled && l.samples);
  EXPECT_EQ(l.seed, 7u);
  EXPECT_EQ(DataLayoutName(l), "shuffled-samples:7");
  ASSERT_TRUE(ParseDataLayout("shuffled-samples", &l).ok());
  EXPECT_TRUE(l.samples && l.seed == 0);
  EXPECT_TRUE(ParseDataLayout("shuffled-sample", &l).IsInvalidArgument());
  EXPECT_TRUE(ParseDataLayout("shuffled-samples:", &l).IsInvalidArgument());
  // Samples of 3, 1, 2 and 4 records: the samples move as ShuffledRunOrder
  // moves 4 things; each sample's records stay together and in order.
  const std::vector<uint32_t> starts = {0, 3, 4, 6, 10};
  const std::vector<uint32_t> order = ShuffledSampleOrder(starts, 9, 2);
  std::vector<uint32_t> want;
  for (uint32_t s : ShuffledRunOrder(4, 9, 2)) {
    for (uint32_t i = starts[s]; i < starts[s + 1]; ++i) want.push_back(i);
  }
  EXPECT_EQ(order, want);
  EXPECT_EQ(ShuffledSampleOrder({0, 1, 2, 3}, 9, 2), ShuffledRunOrder(3, 9, 2));
}

TEST(ShuffledLayoutTest, SameSamplesPermutedDataDeterministic) {
  TempDir t;
  MakeTree(t / "src");
  ASSERT_TRUE(Build(t / "src", t / "sorted", "sorted").ok());
  ASSERT_TRUE(Build(t / "src", t / "a", "shuffled:42").ok());
  ASSERT_TRUE(Build(t / "src", t / "b", "shuffled:42").ok());
  ASSERT_TRUE(Build(t / "src", t / "c", "shuffled:43").ok());
  std::string la, lb, lc, ls;
  const std::vector<Sample> sorted = Samples(t / "sorted", &ls);
  const std::vector<Sample> a = Samples(t / "a", &la);
  EXPECT_EQ(ls, "sorted");
  EXPECT_EQ(la, "shuffled:42");
  ASSERT_EQ(a.size(), 200u);
  EXPECT_TRUE(a == sorted);  // names, labels, bytes, in record order
  ExpectTiled(a, test::FileSize(t / "a/data.ufs"));
  EXPECT_EQ(test::FileSize(t / "a/data.ufs"),
            test::FileSize(t / "sorted/data.ufs"));
  EXPECT_EQ(InOrderNeighbours(sorted), 199u);
  EXPECT_LT(InOrderNeighbours(a), 10u);  // ~1 expected
  // Same tree and seed: the same bytes; another seed: another order.
  EXPECT_TRUE(ReadFile(t / "a/data.ufs") == ReadFile(t / "b/data.ufs"));
  EXPECT_TRUE(ReadFile(t / "a/index.ufs") == ReadFile(t / "b/index.ufs"));
  EXPECT_FALSE(ReadFile(t / "a/data.ufs") == ReadFile(t / "c/data.ufs"));
  EXPECT_TRUE(Samples(t / "c", &lc) == sorted);
  EXPECT_EQ(lc, "shuffled:43");
}

TEST(ShuffledLayoutTest, RunsOfABuildPackedWhileListed) {
  // scan_ahead 64: runs of at least 16 records, at class boundaries; each
  // run is permuted within itself, so its records stay in its byte range.
  TempDir t;
  MakeTree(t / "src");
  ASSERT_TRUE(Build(t / "src", t / "sorted", "sorted").ok());
  ASSERT_TRUE(Build(t / "src", t / "a", "shuffled", 64).ok());
  ASSERT_TRUE(Build(t / "src", t / "b", "shuffled", 64).ok());
  std::string l;
  const std::vector<Sample> a = Samples(t / "a", &l);
  EXPECT_TRUE(a == Samples(t / "sorted", &l));
  ExpectTiled(a, test::FileSize(t / "a/data.ufs"));
  EXPECT_LT(InOrderNeighbours(a), 20u);
  EXPECT_TRUE(ReadFile(t / "a/data.ufs") == ReadFile(t / "b/data.ufs"));
  // Runs are whole classes here (40 records >= 16): class c's records fill
  // a contiguous byte range, in class order.
  uint64_t previous_end = 64;
  for (uint32_t c = 0; c < 5; ++c) {
    uint64_t lo = UINT64_MAX, hi = 0;
    for (const Sample& s : a) {
      if (s.label != c) continue;
      lo = std::min(lo, s.offset);
      hi = std::max(hi, s.offset + s.stored_length);
    }
    EXPECT_EQ(lo, previous_end) << "class " << c;
    previous_end = hi;
  }
}

TEST(ShuffledLayoutTest, SkippedSourcesLeaveNoHole) {
  TempDir t;
  MakeTree(t / "src");
  test::MakeFifo(t / "src/c2/f3.jpg.fifo.jpg");
  ASSERT_EQ(::chmod((t / "src/c1/f7.jpg").c_str(), 0), 0);
  if (::geteuid() == 0) std::remove((t / "src/c1/f7.jpg").c_str());
  BuildOptions o;
  o.threads = 4;
  o.skip_unreadable = true;
  o.layout.shuffled = true;
  BuildSummary summary;
  ASSERT_TRUE(BuildPack(t / "src", t / "a", o, &summary).ok());
  std::string l;
  const std::vector<Sample> a = Samples(t / "a", &l);
  EXPECT_EQ(a.size(), 199u);
  ExpectTiled(a, test::FileSize(t / "a/data.ufs"));
  for (size_t i = 1; i < a.size(); ++i) EXPECT_LE(a[i - 1].label, a[i].label);
}

TEST(ShuffledLayoutTest, PartsMergeAndAppendKeepTheLayout) {
  TempDir t;
  MakeTree(t / "src");
  ASSERT_TRUE(Build(t / "src", t / "whole", "sorted").ok());
  std::vector<std::string> parts;
  for (uint32_t p = 0; p < 3; ++p) {
    BuildOptions o;
    o.threads = 4;
    o.part = p;
    o.parts = 3;
    o.layout.shuffled = true;
    o.layout.seed = 9;
    BuildSummary s;
    parts.push_back(t / ("part" + std::to_string(p)));
    ASSERT_TRUE(BuildPack(t / "src", parts.back(), o, &s).ok());
  }
  MergeSummary ms;
  ASSERT_TRUE(MergePacks(parts, t / "merged", &ms).ok());
  std::string l, lw;
  const std::vector<Sample> merged = Samples(t / "merged", &l);
  EXPECT_EQ(l, "shuffled:9");
  EXPECT_TRUE(merged == Samples(t / "whole", &lw));

  // Appending to a shuffled pack shuffles the new part by default.
  for (int i = 0; i < 30; ++i) {
    WriteFile(t / ("src/c4/g" + std::to_string(i) + ".jpg"),
              test::RandomBytes(1000 + i, i));
  }
  AppendSummary as;
  ASSERT_TRUE(AppendPack(t / "merged", t / "src", AppendOptions(), &as).ok());
  EXPECT_EQ(as.appended, 30u);
  std::string lp;
  const std::vector<Sample> part = Samples(as.part_dir, &lp);
  EXPECT_EQ(lp, "shuffled:9");
  EXPECT_LT(InOrderNeighbours(part), 10u);
  ASSERT_TRUE(Build(t / "src", t / "whole2", "sorted").ok());
  EXPECT_TRUE(Samples(t / "merged", &l) == Samples(t / "whole2", &lw));
  EXPECT_EQ(l, "shuffled:9");
}

TEST(PackWriterRunTest, HeldEntriesEnterInPositionOrder) {
  TempDir t;
  std::unique_ptr<PackWriter> w;
  ASSERT_TRUE(PackWriter::Create(t / "p", PackWriterOptions(), &w).ok());
  internal::PackWriterImpl* impl = internal::PackWriterImpl::Of(w.get());
  ASSERT_TRUE(w->AddClass("a").ok());
  ASSERT_TRUE(w->AddClass("b").ok());
  ASSERT_TRUE(w->Add("a/0", 0, "zero").ok());  // before the run
  ASSERT_TRUE(impl->BeginRun().ok());
  const char* names[] = {"a/1", "a/2", "b/0", "b/1"};
  const uint32_t labels[] = {0, 0, 1, 1};
  for (uint64_t p : {3, 0, 2, 1}) {
    impl->SetRunPosition(p);
    ASSERT_TRUE(w->Add(names[p], labels[p], std::string(names[p]) + "!").ok());
  }
  ASSERT_TRUE(impl->EndRun().ok());
  ASSERT_TRUE(w->Finish().ok());
  std::string layout;
  const std::vector<Sample> s = Samples(t / "p", &layout);
  ASSERT_EQ(s.size(), 5u);
  EXPECT_EQ(s[0].bytes, "zero");
  for (size_t p = 0; p < 4; ++p) {
    EXPECT_EQ(s[p + 1].name, names[p]);
    EXPECT_EQ(s[p + 1].bytes, std::string(names[p]) + "!");
  }
  // Data order: zero, then positions 3, 0, 2, 1.
  EXPECT_EQ(s[0].offset, 64u);
  EXPECT_EQ(s[4].offset, 64u + 4);
  EXPECT_EQ(s[1].offset, 64u + 4 + 4);
}

TEST(PackWriterRunTest, MisuseFailsStickily) {
  TempDir t;
  {
    std::unique_ptr<PackWriter> w;
    ASSERT_TRUE(PackWriter::Create(t / "dup", PackWriterOptions(), &w).ok());
    internal::PackWriterImpl* impl = internal::PackWriterImpl::Of(w.get());
    ASSERT_TRUE(w->AddClass("a").ok());
    ASSERT_TRUE(impl->BeginRun().ok());
    impl->SetRunPosition(1);
    ASSERT_TRUE(w->Add("a/x", 0, "x").ok());
    ASSERT_TRUE(w->Add("a/y", 0, "y").ok());
    Status s = impl->EndRun();
    EXPECT_TRUE(s.IsInvalidArgument());
    EXPECT_NE(s.message().find("run position 1 given twice"), std::string::npos)
        << s.ToString();
    EXPECT_FALSE(w->Finish().ok());
  }
  {
    // Labels must not decrease in position order.
    std::unique_ptr<PackWriter> w;
    ASSERT_TRUE(PackWriter::Create(t / "lab", PackWriterOptions(), &w).ok());
    internal::PackWriterImpl* impl = internal::PackWriterImpl::Of(w.get());
    ASSERT_TRUE(w->AddClass("a").ok());
    ASSERT_TRUE(w->AddClass("b").ok());
    ASSERT_TRUE(impl->BeginRun().ok());
    impl->SetRunPosition(0);
    ASSERT_TRUE(w->Add("b/x", 1, "x").ok());
    impl->SetRunPosition(1);
    ASSERT_TRUE(w->Add("a/y", 0, "y").ok());
    Status s = impl->EndRun();
    EXPECT_NE(s.message().find("records must be added class by class"),
              std::string::npos)
        << s.ToString();
  }
  {
    std::unique_ptr<PackWriter> w;
    ASSERT_TRUE(PackWriter::Create(t / "open", PackWriterOptions(), &w).ok());
    internal::PackWriterImpl* impl = internal::PackWriterImpl::Of(w.get());
    ASSERT_TRUE(impl->BeginRun().ok());
    EXPECT_TRUE(impl->BeginRun().IsInvalidArgument());
  }
  {
    std::unique_ptr<PackWriter> w;
    ASSERT_TRUE(PackWriter::Create(t / "fin", PackWriterOptions(), &w).ok());
    internal::PackWriterImpl* impl = internal::PackWriterImpl::Of(w.get());
    ASSERT_TRUE(impl->BeginRun().ok());
    Status s = w->Finish();
    EXPECT_NE(s.message().find("Finish() in a run"), std::string::npos)
        << s.ToString();
    EXPECT_FALSE(test::Exists(t / "fin/index.ufs"));
  }
}

}  // namespace
}  // namespace ufspack
