// Copyright 2026 The ufspack Authors.
//
// Building in parts (BuildOptions::parts), merging (MergePacks) and reading
// merged packs (Reader over a manifest): a merge of N parts is the pack one
// build gives (same records, order, labels, bytes, classes, lookups), and
// missing, rebuilt, foreign or damaged pieces are refused by name.
#include "ufspack/merge.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "part_plan.h"
#include "testutil.h"
#include "ufspack/builder.h"
#include "ufspack/format.h"
#include "ufspack/manifest.h"
#include "ufspack/reader.h"
#include "ufspack/scan.h"

namespace ufspack {
namespace {

using test::Contains;
using test::FlipByte;
using test::RandomBytes;
using test::ReadFile;
using test::RunCli;
using test::TempDir;
using test::WriteFile;

// An ImageFolder tree: `classes` classes (one left empty of images when
// `with_sparse_class`), nested directories, sizes from 0 to ~20 KB.
void MakeTree(const std::string& root, int classes, int per_class,
              uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (int c = 0; c < classes; ++c) {
    const std::string cls = root + "/class" + std::to_string(c);
    for (int k = 0; k < per_class; ++k) {
      const std::string sub = k % 3 == 0 ? "/sub" + std::to_string(k % 2) : "";
      const size_t size = k == 0 ? 0 : rng() % 20000;
      WriteFile(cls + sub + "/img" + std::to_string(k) + ".jpg",
                RandomBytes(size, rng()));
    }
  }
}

Status Build(const std::string& src, const std::string& out, uint32_t part,
             uint32_t parts, bool flat = false, size_t scan_ahead = 0) {
  BuildOptions o;
  o.part = part;
  o.parts = parts;
  o.scan.flat = flat;
  if (scan_ahead != 0) o.scan_ahead = scan_ahead;
  o.scan.allow_empty = true;
  o.threads = 4;
  BuildSummary summary;
  return BuildPack(src, out, o, &summary);
}

std::unique_ptr<Reader> Open(const std::string& path) {
  std::unique_ptr<Reader> r;
  Status s = Reader::Open(path, {}, &r);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return r;
}

// Every observable of `a` equals `b`'s: records (names, labels, lengths,
// checksums, bytes), classes, lookups, batches.
void ExpectSamePack(const Reader& a, const Reader& b) {
  ASSERT_EQ(a.size(), b.size());
  ASSERT_EQ(a.class_count(), b.class_count());
  for (uint64_t c = 0; c < a.class_count(); ++c) {
    ClassInfo x, y;
    ASSERT_TRUE(a.GetClass(c, &x).ok());
    ASSERT_TRUE(b.GetClass(c, &y).ok());
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.first_record, y.first_record) << "class " << c;
    EXPECT_EQ(x.record_count, y.record_count) << "class " << c;
  }
  std::vector<uint64_t> all;
  for (uint64_t i = 0; i < a.size(); ++i) {
    Record x, y;
    ASSERT_TRUE(a.GetRecord(i, &x).ok());
    ASSERT_TRUE(b.GetRecord(i, &y).ok());
    EXPECT_EQ(x.index, i);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.label, y.label);
    EXPECT_EQ(x.original_length, y.original_length);
    EXPECT_EQ(x.checksum, y.checksum);
    std::string bx, by;
    ASSERT_TRUE(a.Read(i, &bx).ok());
    ASSERT_TRUE(b.Read(i, &by).ok());
    EXPECT_EQ(bx, by) << x.name;
    uint64_t found = 0;
    Status s = a.Find(x.name, &found);
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(found, i);
    all.push_back(i);
  }
  // A batch spanning every part, shuffled, on 1 and 4 threads.
  std::shuffle(all.begin(), all.end(), std::mt19937_64(7));
  for (int threads : {1, 4}) {
    Batch ba, bb;
    ASSERT_TRUE(a.ReadBatch(all.data(), all.size(), &ba, threads).ok());
    ASSERT_TRUE(b.ReadBatch(all.data(), all.size(), &bb, threads).ok());
    EXPECT_EQ(ba.data, bb.data);
    EXPECT_EQ(ba.offsets, bb.offsets);
  }
  uint64_t found = 0;
  EXPECT_TRUE(a.Find("class0/none.jpg", &found).IsNotFound());
  EXPECT_TRUE(a.Find("nope", &found).IsNotFound());
  // The batched calls over every part, shuffled, with misses between.
  std::vector<std::string> names;
  std::vector<uint64_t> expect;
  for (uint64_t i : all) {
    Record x;
    ASSERT_TRUE(b.GetRecord(i, &x).ok());
    names.emplace_back(x.name);
    expect.push_back(i);
    names.emplace_back(std::string(x.name) + ".gone");
    expect.push_back(Reader::kNoRecord);
  }
  const std::vector<std::string_view> views(names.begin(), names.end());
  std::vector<uint64_t> got(views.size());
  ASSERT_TRUE(a.FindMany(views.data(), views.size(), got.data()).ok());
  EXPECT_EQ(got, expect);
  std::vector<Record> recs(all.size());
  ASSERT_TRUE(a.GetRecords(all.data(), all.size(), recs.data()).ok());
  for (size_t k = 0; k < all.size(); ++k) {
    EXPECT_EQ(recs[k].index, all[k]);
    EXPECT_EQ(recs[k].name, views[2 * k]);
  }
}

TEST(SplitSamplesTest, ContiguousBalancedByBytes) {
  std::vector<uint64_t> sizes = {100, 100, 100, 100, 1000, 0, 0, 100};
  EXPECT_EQ(SplitSamples(sizes, 1), (std::vector<uint64_t>{0, 8}));
  // Weights (size + 1): 101 x4, 1001, 1, 1, 101: total 1508.
  EXPECT_EQ(SplitSamples(sizes, 2), (std::vector<uint64_t>{0, 5, 8}));
  // More parts than samples: empty parts, still covering [0, n).
  std::vector<uint64_t> b = SplitSamples({5, 5}, 5);
  ASSERT_EQ(b.size(), 6u);
  EXPECT_EQ(b.front(), 0u);
  EXPECT_EQ(b.back(), 2u);
  EXPECT_TRUE(std::is_sorted(b.begin(), b.end()));
  EXPECT_EQ(SplitSamples({}, 3), (std::vector<uint64_t>{0, 0, 0, 0}));
}

TEST(MergeTest, PartsMergedEqualOneBuild) {
  TempDir dir;
  MakeTree(dir / "src", 5, 23, 1);
  ASSERT_TRUE(Build(dir / "src", dir / "single", 0, 1).ok());
  std::unique_ptr<Reader> single = Open(dir / "single");
  for (uint32_t n : {1u, 2u, 3u, 7u, 200u}) {
    SCOPED_TRACE("parts " + std::to_string(n));
    std::vector<std::string> parts;
    // Given in reverse: merge puts a split's parts in order.
    for (uint32_t i = n; i-- > 0;) {
      const std::string p =
          dir / ("p" + std::to_string(n) + "/part" + std::to_string(i));
      Status s = Build(dir / "src", p, i, n);
      ASSERT_TRUE(s.ok()) << s.ToString();
      parts.push_back(p);
    }
    const std::string out = dir / ("merged" + std::to_string(n));
    MergeSummary summary;
    Status s = MergePacks(parts, out, &summary);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(summary.parts, n);
    EXPECT_EQ(summary.split, n > 1);
    EXPECT_EQ(summary.records, single->size());
    std::unique_ptr<Reader> merged = Open(out);
    ASSERT_TRUE(merged);
    EXPECT_EQ(merged->info().part_count, n);
    ExpectSamePack(*merged, *single);
    s = merged->CheckIndex();
    EXPECT_TRUE(s.ok()) << s.ToString();
    std::string_view root;
    ASSERT_TRUE(merged->GetMetadata(kMetaSourceRoot, &root).ok());
    EXPECT_EQ(root, dir / "src");
    std::string_view v;
    EXPECT_TRUE(merged->GetMetadata(kMetaPart, &v).IsNotFound());
    // Opening the manifest file itself works too.
    std::unique_ptr<Reader> by_file = Open(out + "/manifest.ufs");
    ASSERT_TRUE(by_file);
    EXPECT_EQ(by_file->info().pack_id, merged->info().pack_id);
  }
}

// A part build's two passes (the first keeps per class only a count, a
// weight and a hash) cut the tree exactly where SplitSamples cuts the
// whole sample list, for classes of every size (empty ones too), and a
// part streamed through a small scan window is the same part.
TEST(MergeTest, PartRangesAreSplitSamples) {
  TempDir dir;
  std::mt19937_64 rng(5);
  for (int c = 0; c < 14; ++c) {
    const std::string cls = dir / ("src/k" + std::to_string(c));
    test::MakeDirs(cls);
    const int files = c == 3 ? 0 : c == 9 ? 60 : static_cast<int>(rng() % 9);
    for (int k = 0; k < files; ++k) {
      WriteFile(
          cls + (k % 5 == 4 ? "/s" : "") + "/f" + std::to_string(k) + ".png",
          RandomBytes(k == 1           ? 0
                      : rng() % 7 == 0 ? 9000
                                       : rng() % 400,
                      rng()));
    }
  }
  // The sizes of a scan's samples, as SplitSamples takes them.
  auto sizes_of = [](const ScanResult& scan) {
    std::vector<uint64_t> sizes;
    for (size_t k = 0; k < scan.entries.size(); ++k) {
      struct stat st;
      EXPECT_EQ(::stat(scan.PathOf(k).c_str(), &st), 0);
      sizes.push_back(static_cast<uint64_t>(st.st_size));
    }
    return sizes;
  };
  ScanResult scan;
  ScanOptions so;
  so.allow_empty = true;
  ASSERT_TRUE(ScanTree(dir / "src", so, &scan).ok());
  const std::vector<uint64_t> sizes = sizes_of(scan);
  for (uint32_t n : {2u, 3u, 5u, 11u, 40u, 150u}) {
    SCOPED_TRACE("parts " + std::to_string(n));
    const std::vector<uint64_t> bounds = SplitSamples(sizes, n);
    std::string split;
    for (uint32_t i = 0; i < n; ++i) {
      const std::string p =
          dir / ("p" + std::to_string(n) + "-" + std::to_string(i));
      Status s = Build(dir / "src", p, i, n, false, i % 2 ? 4 : 0);
      ASSERT_TRUE(s.ok()) << s.ToString();
      std::unique_ptr<Reader> r = Open(p);
      ASSERT_TRUE(r);
      std::string_view range, id;
      ASSERT_TRUE(r->GetMetadata(kMetaPartRange, &range).ok());
      EXPECT_EQ(range, std::to_string(bounds[i]) + " " +
                           std::to_string(bounds[i + 1] - bounds[i]) + " " +
                           std::to_string(sizes.size()))
          << "part " << i;
      ASSERT_EQ(r->size(), bounds[i + 1] - bounds[i]);
      for (uint64_t j = 0; j < r->size(); ++j) {
        Record rec;
        ASSERT_TRUE(r->GetRecord(j, &rec).ok());
        EXPECT_EQ(rec.name, scan.entries[bounds[i] + j].name);
        EXPECT_EQ(rec.label, scan.entries[bounds[i] + j].label);
      }
      EXPECT_EQ(r->class_count(), 14u);
      ASSERT_TRUE(r->GetMetadata(kMetaPartSplit, &id).ok());
      if (i == 0) split = std::string(id);
      EXPECT_EQ(id, split);
    }
  }
  // Flat: one class, whatever the window.
  ScanResult flat;
  so.flat = true;
  ASSERT_TRUE(ScanTree(dir / "src", so, &flat).ok());
  const std::vector<uint64_t> flat_sizes = sizes_of(flat);
  for (uint32_t n : {3u, 7u}) {
    const std::vector<uint64_t> bounds = SplitSamples(flat_sizes, n);
    for (uint32_t i = 0; i < n; ++i) {
      SCOPED_TRACE("flat part " + std::to_string(i) + "/" + std::to_string(n));
      const std::string p =
          dir / ("flat" + std::to_string(n) + "-" + std::to_string(i));
      Status s = Build(dir / "src", p, i, n, true, 4);
      ASSERT_TRUE(s.ok()) << s.ToString();
      std::unique_ptr<Reader> r = Open(p);
      ASSERT_TRUE(r);
      ASSERT_EQ(r->size(), bounds[i + 1] - bounds[i]);
      for (uint64_t j = 0; j < r->size(); ++j) {
        Record rec;
        ASSERT_TRUE(r->GetRecord(j, &rec).ok());
        EXPECT_EQ(rec.name, flat.entries[bounds[i] + j].name);
      }
    }
  }
}

// A tree that changes between a part's two passes is refused by name: the
// part would not be the part other jobs agree on.
TEST(MergeTest, ATreeChangedBetweenThePassesIsRefused) {
  TempDir dir;
  MakeTree(dir / "src", 4, 6, 3);
  for (int change : {0, 1, 2, 3, 4}) {
    SCOPED_TRACE(change == 0   ? "resized"
                 : change == 1 ? "renamed"
                 : change == 2 ? "class added"
                 : change == 3 ? "flat directory"
                               : "class removed");
    BuildOptions o;
    o.part = 0;
    o.parts = 2;
    o.threads = 2;
    o.scan.flat = change == 3;
    bool changed = false;
    o.progress = [&](const BuildProgress& p) {
      if (!p.splitting || changed) return;
      // Class removed: once the first pass is over (a class it has not
      // walked yet would fail it instead).
      if (change == 4 && !p.scan_done) return;
      changed = true;  // after class0 was sized, before it is packed
      if (change == 1) {
        ASSERT_EQ(::rename((dir / "src/class0/img1.jpg").c_str(),
                           (dir / "src/class0/img1b.jpg").c_str()),
                  0);
      } else if (change == 0) {
        WriteFile(dir / "src/class0/img2.jpg", "other size");
      } else if (change == 2) {
        // A class the first pass did not list (it lists the classes
        // first): the part's class table would not be the split's.
        WriteFile(dir / "src/class9/new.jpg", "new");
      } else if (change == 3) {
        // Flat: a directory below one the first pass already listed.
        WriteFile(dir / "src/class0/zz/new.jpg", "new");
      } else {
        std::filesystem::remove_all(dir / "src/class1");
      }
    };
    BuildSummary summary;
    Status s = BuildPack(dir / "src", dir / "part", o, &summary);
    ASSERT_TRUE(changed);
    EXPECT_TRUE(s.IsIOError()) << s.ToString();
    EXPECT_TRUE(Contains(s.ToString(), change >= 2 ? dir / "src: changed"
                                                   : dir / "src/class0: "))
        << s.ToString();
    EXPECT_TRUE(Contains(s.ToString(), "changed while the part was built"))
        << s.ToString();
    EXPECT_FALSE(test::Exists(dir / "part/index.ufs"));
  }
}

TEST(MergeTest, FlatPacksAndSeparatelyBuiltPacks) {
  TempDir dir;
  MakeTree(dir / "src", 3, 10, 2);
  ASSERT_TRUE(Build(dir / "src", dir / "single", 0, 1, true).ok());
  std::vector<std::string> parts;
  for (uint32_t i = 0; i < 4; ++i) {
    parts.push_back(dir / ("part" + std::to_string(i)));
    ASSERT_TRUE(Build(dir / "src", parts.back(), i, 4, true).ok());
  }
  MergeSummary summary;
  ASSERT_TRUE(MergePacks(parts, dir / "merged", &summary).ok());
  std::unique_ptr<Reader> merged = Open(dir / "merged");
  std::unique_ptr<Reader> single = Open(dir / "single");
  EXPECT_TRUE(merged->info().flat);
  ExpectSamePack(*merged, *single);
  EXPECT_TRUE(merged->CheckIndex().ok());
}

TEST(MergeTest, SeparatelyBuiltPacks) {
  TempDir dir;
  // x: class0/a, class1/c; y: class1/d only; z: class0/b only.
  WriteFile(dir / "x/class0/a.jpg", "a");
  WriteFile(dir / "x/class1/c.jpg", "c");
  WriteFile(dir / "y/class1/d.jpg", "d");
  test::MakeDirs(dir / "y/class0");
  WriteFile(dir / "z/class0/b.jpg", "b");
  test::MakeDirs(dir / "z/class1");
  for (const char* t : {"x", "y", "z"}) {
    ASSERT_TRUE(Build(dir / t, dir / (std::string("p") + t), 0, 1).ok());
  }
  MergeSummary summary;
  // In the order given; class 1 continues from x into y.
  ASSERT_TRUE(MergePacks({dir / "px", dir / "py"}, dir / "xy", &summary).ok());
  EXPECT_FALSE(summary.split);
  std::unique_ptr<Reader> xy = Open(dir / "xy");
  ASSERT_EQ(xy->size(), 3u);
  ClassInfo c1;
  ASSERT_TRUE(xy->GetClass(1, &c1).ok());
  EXPECT_EQ(c1.first_record, 1u);
  EXPECT_EQ(c1.record_count, 2u);
  std::string bytes;
  ASSERT_TRUE(xy->Read(2, &bytes).ok());
  EXPECT_EQ(bytes, "d");
  EXPECT_TRUE(xy->CheckIndex().ok());
  // x ends with class 1, z starts with class 0: not contiguous.
  Status s = MergePacks({dir / "px", dir / "pz"}, dir / "xz", &summary);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_TRUE(Contains(s, "class order")) << s.ToString();
  // The same name in two parts: merge takes it, verify finds it.
  WriteFile(dir / "w/class1/c.jpg", "c again");
  test::MakeDirs(dir / "w/class0");
  ASSERT_TRUE(Build(dir / "w", dir / "pw", 0, 1).ok());
  ASSERT_TRUE(MergePacks({dir / "px", dir / "pw"}, dir / "xw", &summary).ok());
  s = Open(dir / "xw")->CheckIndex();
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s, "the same name in two parts")) << s.ToString();
  // Other class tables.
  WriteFile(dir / "v/other/e.jpg", "e");
  ASSERT_TRUE(Build(dir / "v", dir / "pv", 0, 1).ok());
  s = MergePacks({dir / "px", dir / "pv"}, dir / "xv", &summary);
  EXPECT_TRUE(Contains(s, "share one class table")) << s.ToString();
}

TEST(MergeTest, MissingRebuiltAndForeignPartsAreNamed) {
  TempDir dir;
  MakeTree(dir / "src", 4, 9, 5);
  std::vector<std::string> parts;
  for (uint32_t i = 0; i < 3; ++i) {
    parts.push_back(dir / ("parts/p" + std::to_string(i)));
    ASSERT_TRUE(Build(dir / "src", parts.back(), i, 3).ok());
  }
  MergeSummary summary;
  // A part missing from the command line, or given twice.
  Status s = MergePacks({parts[0], parts[2]}, dir / "m", &summary);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_TRUE(Contains(s, "part 1/3 is missing")) << s.ToString();
  s = MergePacks({parts[0], parts[1], parts[1], parts[2]}, dir / "m", &summary);
  EXPECT_TRUE(Contains(s, "given twice")) << s.ToString();
  // A part of another split of the same tree.
  ASSERT_TRUE(Build(dir / "src", dir / "other", 1, 4).ok());
  s = MergePacks({parts[0], dir / "other", parts[2]}, dir / "m", &summary);
  EXPECT_TRUE(Contains(s, "different splits")) << s.ToString();
  EXPECT_FALSE(test::Exists(dir / "m/manifest.ufs"));

  ASSERT_TRUE(MergePacks(parts, dir / "m", &summary).ok());
  // Missing at open: NotFound naming the part.
  ASSERT_EQ(::rename(parts[1].c_str(), (parts[1] + ".moved").c_str()), 0);
  std::unique_ptr<Reader> r;
  s = Reader::Open(dir / "m", {}, &r);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_TRUE(Contains(s, "part 1 (")) << s.ToString();
  EXPECT_TRUE(Contains(s, "parts/p1")) << s.ToString();
  ASSERT_EQ(::rename((parts[1] + ".moved").c_str(), parts[1].c_str()), 0);
  ASSERT_TRUE(Reader::Open(dir / "m", {}, &r).ok());
  // A reader opened before the part is rebuilt keeps its pack until it
  // touches the part, then says which part changed.
  ASSERT_TRUE(Build(dir / "src", parts[1], 1, 4).ok());  // other records
  std::unique_ptr<Reader> again;
  s = Reader::Open(dir / "m", {}, &again);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s, "is not the part that was merged")) << s.ToString();
  EXPECT_TRUE(Contains(s, "parts/p1")) << s.ToString();
  Record rec;
  s = r->GetRecord(r->size() - 1, &rec);  // part 2: as merged
  EXPECT_TRUE(s.ok()) << s.ToString();
  const uint64_t in_part1 = Open(parts[0])->size();
  s = r->GetRecord(in_part1, &rec);
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_TRUE(Contains(s, "part 1 (")) << s.ToString();
  EXPECT_TRUE(Contains(s, "rebuilt or replaced")) << s.ToString();
}

TEST(MergeTest, DamagedManifestIsCorruption) {
  TempDir dir;
  MakeTree(dir / "src", 2, 5, 6);
  std::vector<std::string> parts;
  for (uint32_t i = 0; i < 2; ++i) {
    parts.push_back(dir / ("p" + std::to_string(i)));
    ASSERT_TRUE(Build(dir / "src", parts.back(), i, 2).ok());
  }
  MergeSummary summary;
  ASSERT_TRUE(MergePacks(parts, dir / "m", &summary).ok());
  const std::string manifest = dir / "m/manifest.ufs";
  const std::string good = ReadFile(manifest);
  // Every byte flipped, one at a time: never opens, never crashes.
  for (uint64_t off = 0; off < good.size(); ++off) {
    WriteFile(manifest, good);
    FlipByte(manifest, off, 0x10);
    std::unique_ptr<Reader> r;
    Status s = Reader::Open(dir / "m", {}, &r);
    EXPECT_FALSE(s.ok()) << "byte " << off;
    EXPECT_TRUE(s.IsCorruption() || s.IsNotSupported()) << s.ToString();
  }
  // Truncated anywhere.
  for (uint64_t len : {uint64_t{0}, uint64_t{7}, uint64_t{100},
                       static_cast<uint64_t>(good.size() - 1)}) {
    WriteFile(manifest, good.substr(0, len));
    std::unique_ptr<Reader> r;
    Status s = Reader::Open(dir / "m", {}, &r);
    EXPECT_TRUE(s.IsCorruption()) << len << ": " << s.ToString();
  }
  WriteFile(manifest, good);
  std::unique_ptr<Reader> r;
  EXPECT_TRUE(Reader::Open(dir / "m", {}, &r).ok());
}

// docs/format.md: the segments MUST cover each part's records exactly
// once.  A manifest whose checksums are right but which repeats a run (or
// overlaps two) is refused at open, not served with duplicated samples.
TEST(MergeTest, DuplicatedOrOverlappingSegmentsAreRefused) {
  ManifestContents c;
  ManifestContents::Part part;
  part.pack_id = PackId::Of("p", 1);
  part.record_count = 3;
  part.path = "p0";
  c.parts.push_back(part);
  c.classes.push_back({"a", 0, 0});
  struct Case {
    const char* what;
    std::vector<SegmentEntry> segments;
    bool ok;
  };
  const std::vector<Case> cases = {
      {"one run", {{0, 0, 3}}, true},
      {"two runs out of order", {{0, 2, 1}, {0, 0, 2}}, true},
      {"an exact duplicate", {{0, 0, 3}, {0, 0, 3}}, false},
      {"a duplicated middle run",
       {{0, 0, 1}, {0, 1, 1}, {0, 1, 1}, {0, 2, 1}},
       false},
      {"overlapping runs", {{0, 0, 2}, {0, 1, 2}}, false},
      {"a gap", {{0, 0, 1}, {0, 2, 1}}, false},
  };
  for (const Case& k : cases) {
    c.segments = k.segments;
    uint64_t total = 0;
    for (const SegmentEntry& g : k.segments) total += g.count;
    c.classes[0].record_count = total;
    std::string bytes;
    PackId id;
    EncodeManifest(c, &bytes, &id);
    Manifest m;
    Status s = DecodeManifest(bytes, "m/manifest.ufs", &m);
    if (k.ok) {
      EXPECT_TRUE(s.ok()) << k.what << ": " << s.ToString();
    } else {
      EXPECT_TRUE(s.IsCorruption()) << k.what << ": " << s.ToString();
      EXPECT_TRUE(Contains(s,
                           "m/manifest.ufs: part 0: the segments cover its "
                           "3 records not exactly once"))
          << k.what << ": " << s.ToString();
    }
  }
}

TEST(MergeTest, ManifestContentsOfEncodesTheSameManifest) {
  // Label maps, classes and metadata survive a decode; new part paths
  // keep the merged pack id (it does not cover paths).
  ManifestContents c;
  for (int k = 0; k < 2; ++k) {
    ManifestContents::Part part;
    part.pack_id = PackId::Of(k == 0 ? "p0" : "p1", 2);
    part.record_count = 2;
    part.data_size = 100 + static_cast<uint64_t>(k);
    part.index_size = 300 + static_cast<uint64_t>(k);
    part.path = "parts/p" + std::to_string(k);
    if (k == 1) part.label_map = {1, 0};
    c.parts.push_back(part);
  }
  c.segments = {{0, 0, 2}, {1, 0, 2}};
  c.classes = {{"a", 0, 3}, {"b", 3, 1}};
  c.meta = {{"layout", "sorted"}, {"source_root", "/x"}};
  std::string bytes;
  PackId id;
  EncodeManifest(c, &bytes, &id);
  Manifest m;
  ASSERT_TRUE(DecodeManifest(bytes, "m", &m).ok());
  ManifestContents again;
  ASSERT_TRUE(ManifestContentsOf(m, "m", &again).ok());
  std::string bytes2;
  PackId id2;
  EncodeManifest(again, &bytes2, &id2);
  EXPECT_TRUE(bytes2 == bytes);
  again.parts[0].path = "0123456789abcdef-part-00000";
  EncodeManifest(again, &bytes2, &id2);
  EXPECT_EQ(id2, id);
  Manifest m2;
  ASSERT_TRUE(DecodeManifest(bytes2, "m2", &m2).ok());
  EXPECT_EQ(m2.part_paths[0], "0123456789abcdef-part-00000");
  EXPECT_EQ(m2.GlobalLabel(1, 0), 1u);
}

TEST(MergeTest, DirectoriesKeepOneKindOfPack) {
  TempDir dir;
  MakeTree(dir / "src", 2, 4, 7);
  ASSERT_TRUE(Build(dir / "src", dir / "p0", 0, 2).ok());
  ASSERT_TRUE(Build(dir / "src", dir / "p1", 1, 2).ok());
  ASSERT_TRUE(Build(dir / "src", dir / "single", 0, 1).ok());
  MergeSummary summary;
  // Into a single pack's directory: refused.
  Status s = MergePacks({dir / "p0", dir / "p1"}, dir / "single", &summary);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_TRUE(Contains(s, "holds a single pack")) << s.ToString();
  // Into a part: refused.
  s = MergePacks({dir / "p0", dir / "p1"}, dir / "p1", &summary);
  EXPECT_FALSE(s.ok());
  // A build into a merged pack's directory: refused.
  ASSERT_TRUE(MergePacks({dir / "p0", dir / "p1"}, dir / "m", &summary).ok());
  s = Build(dir / "src", dir / "m", 0, 1);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_TRUE(Contains(s, "holds a merged pack")) << s.ToString();
  // A merged pack is not a part.
  s = MergePacks({dir / "m"}, dir / "m2", &summary);
  EXPECT_TRUE(Contains(s, "is a merged pack")) << s.ToString();
  // Merging again replaces the manifest; readers of the old one go on.
  std::unique_ptr<Reader> before = Open(dir / "m");
  ASSERT_TRUE(MergePacks({dir / "p1", dir / "p0"}, dir / "m", &summary).ok());
  EXPECT_EQ(before->size(), Open(dir / "m")->size());
  EXPECT_EQ(test::PackTempFiles(dir / "m").size(), 0u);
}

// --- Append
// -------------------------------------------------------------------

// A merged pack at `out` whose records are out of ImageFolder's order: two
// packs of one class merged in name order b, a (built under `dir`).
void MakeUnorderedPack(const TempDir& dir, const std::string& out) {
  WriteFile(dir / "x/c0/b.jpg", "b");
  WriteFile(dir / "y/c0/a.jpg", "a");
  ASSERT_TRUE(Build(dir / "x", dir / "px", 0, 1).ok());
  ASSERT_TRUE(Build(dir / "y", dir / "py", 0, 1).ok());
  MergeSummary merged;
  ASSERT_TRUE(MergePacks({dir / "px", dir / "py"}, out, &merged).ok());
}

Status Append(const std::string& pack, const std::string& dir,
              AppendSummary* summary, bool relabel = false) {
  AppendOptions o;
  o.build.threads = 4;
  o.relabel = relabel;
  return AppendPack(pack, dir, o, summary);
}

TEST(AppendTest, AppendedPackEqualsARebuild) {
  TempDir dir;
  MakeTree(dir / "src", 3, 12, 11);
  ASSERT_TRUE(Build(dir / "src", dir / "pack", 0, 1).ok());
  std::unique_ptr<Reader> before = Open(dir / "pack");
  std::vector<std::string> old_bytes;
  for (uint64_t i = 0; i < before->size(); ++i) {
    old_bytes.emplace_back();
    ASSERT_TRUE(before->Read(i, &old_bytes.back()).ok());
  }
  // New files that sort between old ones, in a new subdirectory, and a new
  // class that sorts last.
  WriteFile(dir / "src/class0/img1a.jpg", RandomBytes(300, 1));
  WriteFile(dir / "src/class1/sub0/new.jpg", RandomBytes(301, 2));
  WriteFile(dir / "src/class1/zz/z.jpg", RandomBytes(302, 3));
  WriteFile(dir / "src/zeta/z.jpg", RandomBytes(303, 4));
  AppendSummary summary;
  Status s = Append(dir / "pack", dir / "src", &summary);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(summary.appended, 4u);
  EXPECT_EQ(summary.new_classes, 1u);
  EXPECT_EQ(summary.relabeled_classes, 0u);
  EXPECT_EQ(summary.kept, 0u);
  EXPECT_EQ(summary.parts, 2u);
  ASSERT_TRUE(Build(dir / "src", dir / "rebuilt", 0, 1).ok());
  std::unique_ptr<Reader> appended = Open(dir / "pack");
  ExpectSamePack(*appended, *Open(dir / "rebuilt"));
  s = appended->CheckIndex();
  EXPECT_TRUE(s.ok()) << s.ToString();
  // A reader opened before the append still reads the old pack.
  ASSERT_EQ(before->size(), old_bytes.size());
  for (uint64_t i = 0; i < before->size(); ++i) {
    std::string b;
    ASSERT_TRUE(before->Read(i, &b).ok());
    EXPECT_EQ(b, old_bytes[i]);
  }
  // Appending to the merged pack again; then nothing left to append.
  WriteFile(dir / "src/class2/img99.jpg", RandomBytes(304, 5));
  s = Append(dir / "pack", dir / "src", &summary);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(summary.appended, 1u);
  EXPECT_EQ(summary.parts, 3u);
  ASSERT_TRUE(Build(dir / "src", dir / "rebuilt2", 0, 1).ok());
  ExpectSamePack(*Open(dir / "pack"), *Open(dir / "rebuilt2"));
  const std::string manifest = ReadFile(dir / "pack/manifest.ufs");
  s = Append(dir / "pack", dir / "src", &summary);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(summary.appended, 0u);
  EXPECT_EQ(ReadFile(dir / "pack/manifest.ufs"), manifest);
}

TEST(AppendTest, RelabelingNeedsConsent) {
  TempDir dir;
  MakeTree(dir / "src", 2, 5, 12);
  ASSERT_TRUE(Build(dir / "src", dir / "pack", 0, 1).ok());
  WriteFile(dir / "src/Aardvark/a.jpg", "a");  // sorts first
  AppendSummary summary;
  Status s = Append(dir / "pack", dir / "src", &summary);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_TRUE(Contains(s, "'Aardvark' sorts before existing classes"))
      << s.ToString();
  EXPECT_TRUE(Contains(s, "'class0' 0 -> 1")) << s.ToString();
  EXPECT_FALSE(test::Exists(dir / "pack/manifest.ufs"));
  s = Append(dir / "pack", dir / "src", &summary, /*relabel=*/true);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(summary.relabeled_classes, 2u);
  ASSERT_TRUE(Build(dir / "src", dir / "rebuilt", 0, 1).ok());
  std::unique_ptr<Reader> appended = Open(dir / "pack");
  ExpectSamePack(*appended, *Open(dir / "rebuilt"));
  EXPECT_TRUE(appended->CheckIndex().ok());
  // The old pack's own files still read with the old labels.
  std::unique_ptr<Reader> single;
  ASSERT_TRUE(Reader::Open(dir / "pack/index.ufs", {}, &single).ok());
  Record r;
  ASSERT_TRUE(single->GetRecord(0, &r).ok());
  EXPECT_EQ(r.label, 0u);
}

TEST(AppendTest, GoneFilesAreKeptAndStalePartsRemoved) {
  TempDir dir;
  MakeTree(dir / "src", 3, 6, 13);
  ASSERT_TRUE(Build(dir / "src", dir / "pack", 0, 1).ok());
  std::unique_ptr<Reader> old = Open(dir / "pack");
  Record gone;
  ASSERT_TRUE(old->GetRecord(7, &gone).ok());
  const std::string gone_name(gone.name);
  ASSERT_EQ(::unlink((dir / ("src/" + gone_name)).c_str()), 0);
  WriteFile(dir / "src/class2/new.jpg", "new");
  test::MakeDirs(dir / "pack/append-stale1");  // a dead append's part
  AppendSummary summary;
  Status s = Append(dir / "pack", dir / "src", &summary);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(summary.kept, 1u);
  EXPECT_FALSE(test::Exists(dir / "pack/append-stale1"));
  std::unique_ptr<Reader> appended = Open(dir / "pack");
  ASSERT_EQ(appended->size(), old->size() + 1);
  uint64_t at = 0;
  ASSERT_TRUE(appended->Find(gone_name, &at).ok());
  EXPECT_EQ(at, 7u);  // where it was
  s = appended->CheckIndex();
  EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST(AppendTest, FlatPacksAndForeignOrders) {
  TempDir dir;
  MakeTree(dir / "src", 2, 4, 14);
  ASSERT_TRUE(Build(dir / "src", dir / "flat", 0, 1, /*flat=*/true).ok());
  WriteFile(dir / "src/aaa.jpg", "top");
  WriteFile(dir / "src/class1/m.jpg", "m");
  AppendSummary summary;
  Status s = Append(dir / "flat", dir / "src", &summary);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(summary.appended, 2u);
  ASSERT_TRUE(Build(dir / "src", dir / "flat2", 0, 1, true).ok());
  ExpectSamePack(*Open(dir / "flat"), *Open(dir / "flat2"));
  // A pack whose order is not the tree's: refused, nothing written.
  MakeUnorderedPack(dir, dir / "xy");
  WriteFile(dir / "t/c0/a.jpg", "a");
  WriteFile(dir / "t/c0/b.jpg", "b");
  WriteFile(dir / "t/c0/c.jpg", "c");
  const std::string manifest = ReadFile(dir / "xy/manifest.ufs");
  s = Append(dir / "xy", dir / "t", &summary);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_TRUE(Contains(s, "out of the order")) << s.ToString();
  EXPECT_EQ(ReadFile(dir / "xy/manifest.ufs"), manifest);
  for (const std::string& n : test::PackTempFiles(dir / "xy"))
    ADD_FAILURE() << n;
}

Status AppendList(const std::string& pack, const std::string& dir,
                  std::vector<std::string> files, AppendSummary* summary,
                  bool relabel = false) {
  AppendOptions o;
  o.build.threads = 4;
  o.relabel = relabel;
  o.files = std::move(files);
  return AppendPack(pack, dir, o, summary);
}

// Appending a list of files gives what appending by a scan gives: the pack
// of a rebuild, whatever the order of the list, with the listed names the
// pack holds or does not select skipped.
TEST(AppendFilesTest, ListedFilesEqualARebuild) {
  TempDir dir;
  MakeTree(dir / "src", 3, 12, 21);
  ASSERT_TRUE(Build(dir / "src", dir / "pack", 0, 1).ok());
  WriteFile(dir / "src/class0/img1a.jpg", RandomBytes(300, 1));
  WriteFile(dir / "src/class1/sub0/new.jpg", RandomBytes(301, 2));
  WriteFile(dir / "src/class1/sub-x/n.jpg", RandomBytes(302, 3));  // '-'<'/'
  WriteFile(dir / "src/class1/zz/z.jpg", RandomBytes(303, 4));
  WriteFile(dir / "src/class2/aaa.jpg", RandomBytes(304, 5));
  WriteFile(dir / "src/zeta/z.jpg", RandomBytes(305, 6));
  WriteFile(dir / "src/zeta/notes.txt", "not a sample");
  WriteFile(dir / "src/top.jpg", "not in a class");
  AppendSummary summary;
  Status s = AppendList(dir / "pack", dir / "src",
                        {"zeta/z.jpg", "class1/zz/z.jpg",
                         dir / "src/class1/sub0/new.jpg",  // absolute
                         "./class0/img1a.jpg", "class2/aaa.jpg",
                         "class1/sub-x/n.jpg", "class0/img1a.jpg",  // twice
                         "class0/img2.jpg",  // already packed
                         "zeta/notes.txt", "top.jpg"},
                        &summary);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(summary.appended, 6u);
  EXPECT_EQ(summary.already_packed, 1u);
  EXPECT_EQ(summary.new_classes, 1u);
  EXPECT_EQ(summary.kept, 0u);
  ASSERT_EQ(summary.warnings.size(), 1u);
  EXPECT_TRUE(Contains(summary.warnings[0], "2 listed files are not samples"))
      << summary.warnings[0];
  ASSERT_TRUE(Build(dir / "src", dir / "rebuilt", 0, 1).ok());
  std::unique_ptr<Reader> appended = Open(dir / "pack");
  ExpectSamePack(*appended, *Open(dir / "rebuilt"));
  EXPECT_TRUE(appended->CheckIndex().ok());
  // Again, onto the merged pack: a new class that sorts between, with
  // consent, and a file before every old one of its class.
  WriteFile(dir / "src/class10/x.jpg", RandomBytes(306, 7));
  WriteFile(dir / "src/class2/0.jpg", RandomBytes(307, 8));
  s = AppendList(dir / "pack", dir / "src", {"class2/0.jpg", "class10/x.jpg"},
                 &summary);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_TRUE(Contains(s, "'class10' sorts before existing classes"));
  s = AppendList(dir / "pack", dir / "src", {"class2/0.jpg", "class10/x.jpg"},
                 &summary, /*relabel=*/true);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(summary.appended, 2u);
  EXPECT_EQ(summary.relabeled_classes, 2u);  // class2, zeta
  ASSERT_TRUE(Build(dir / "src", dir / "rebuilt2", 0, 1).ok());
  ExpectSamePack(*Open(dir / "pack"), *Open(dir / "rebuilt2"));
  // Nothing new listed: nothing written.
  const std::string manifest = ReadFile(dir / "pack/manifest.ufs");
  s = AppendList(dir / "pack", dir / "src", {"class2/0.jpg"}, &summary);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(summary.appended, 0u);
  EXPECT_EQ(summary.already_packed, 1u);
  EXPECT_EQ(ReadFile(dir / "pack/manifest.ufs"), manifest);
}

TEST(AppendFilesTest, BadNamesMissingFilesAndForeignOrders) {
  TempDir dir;
  MakeTree(dir / "src", 2, 4, 22);
  ASSERT_TRUE(Build(dir / "src", dir / "pack", 0, 1).ok());
  AppendSummary summary;
  for (const char* bad : {"", "/etc/passwd.jpg", "class0/../x.jpg",
                          "class0//x.jpg", "class0/./x.jpg", "class0/"}) {
    SCOPED_TRACE(bad);
    Status s = AppendList(dir / "pack", dir / "src", {"class0/img1.jpg", bad},
                          &summary);
    EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
    EXPECT_TRUE(Contains(s, "listed file 2 '")) << s.ToString();
    EXPECT_TRUE(Contains(s, "not a path relative to")) << s.ToString();
  }
  // A listed file that is not there: an error naming it, nothing written.
  Status s =
      AppendList(dir / "pack", dir / "src", {"class0/gone.jpg"}, &summary);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s, "class0/gone.jpg")) << s.ToString();
  EXPECT_FALSE(test::Exists(dir / "pack/manifest.ufs"));
  for (const std::string& n : test::PackTempFiles(dir / "pack"))
    ADD_FAILURE() << n;
  // Skipped as unreadable, every one (a new class's only file among them):
  // nothing written, no empty class.
  {
    AppendOptions o;
    o.build.skip_unreadable = true;
    o.files = std::vector<std::string>{"class0/gone.jpg", "zz/gone.jpg"};
    s = AppendPack(dir / "pack", dir / "src", o, &summary);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(summary.appended, 0u);
    EXPECT_FALSE(test::Exists(dir / "pack/manifest.ufs"));
    EXPECT_EQ(Open(dir / "pack")->class_count(), 2u);
  }
  // A pack inside its own tree: listed files in it are skipped.
  ASSERT_TRUE(Build(dir / "src", dir / "src/inner.ufspack", 0, 1).ok());
  WriteFile(dir / "src/class0/new.jpg", "new");
  s = AppendList(
      dir / "src/inner.ufspack", dir / "src",
      {"inner.ufspack/index.ufs", "inner.ufspack/x.jpg", "class0/new.jpg"},
      &summary);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(summary.appended, 1u);
  ASSERT_EQ(summary.warnings.size(), 1u);
  EXPECT_TRUE(Contains(summary.warnings[0],
                       "2 listed files lie in the pack's own directory"))
      << summary.warnings[0];
  // Flat packs take any relative name.
  ASSERT_TRUE(Build(dir / "src", dir / "flat", 0, 1, /*flat=*/true).ok());
  WriteFile(dir / "src/aaa.jpg", "top");
  WriteFile(dir / "src/class1/m.jpg", "m");
  s = AppendList(dir / "flat", dir / "src", {"class1/m.jpg", "aaa.jpg"},
                 &summary);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(summary.appended, 2u);
  ASSERT_TRUE(Build(dir / "src", dir / "flat2", 0, 1, true).ok());
  ExpectSamePack(*Open(dir / "flat"), *Open(dir / "flat2"));
  // A pack whose records are not in ImageFolder's order: refused, nothing
  // written.
  MakeUnorderedPack(dir, dir / "xy");
  WriteFile(dir / "t/c0/ab.jpg", "ab");
  const std::string manifest = ReadFile(dir / "xy/manifest.ufs");
  s = AppendList(dir / "xy", dir / "t", {"c0/ab.jpg"}, &summary);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_TRUE(Contains(s,
                       "record 1 'c0/a.jpg' comes after 'c0/b.jpg', out "
                       "of ImageFolder's order"))
      << s.ToString();
  EXPECT_EQ(ReadFile(dir / "xy/manifest.ufs"), manifest);
  for (const std::string& n : test::PackTempFiles(dir / "xy"))
    ADD_FAILURE() << n;
}

// --- What a rank maps
// ------------------------------------------------------------

// Resident bytes of each mapping of a file named `suffix` under `dir`, by
// path, from /proc/self/smaps.
std::map<std::string, uint64_t> MappedIndexes(const std::string& dir) {
  std::map<std::string, uint64_t> out;
  std::ifstream in("/proc/self/smaps");
  std::string line, current;
  while (std::getline(in, line)) {
    const size_t slash = line.find('/');
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) &&
        line.find('-') < line.find(' ')) {
      current.clear();
      if (slash != std::string::npos) {
        const std::string path = line.substr(slash);
        if (path.rfind(dir, 0) == 0 && path.size() > 10 &&
            path.compare(path.size() - 10, 10, "/index.ufs") == 0) {
          current = path;
          out[current] += 0;
        }
      }
      continue;
    }
    unsigned long long kb = 0;
    if (!current.empty() &&
        std::sscanf(line.c_str(), "Rss: %llu kB", &kb) == 1) {
      out[current] += kb * 1024;
    }
  }
  return out;
}

TEST(RanksTest, AMergedPackMapsOnlyThePartsUsed) {
  TempDir dir;
  // Four parts of 20,000 records, part k holding class k of four.
  constexpr uint64_t kPer = 20000;
  std::vector<std::string> parts;
  for (uint32_t k = 0; k < 4; ++k) {
    parts.push_back(dir / ("parts/p" + std::to_string(k)));
    std::unique_ptr<PackWriter> w;
    ASSERT_TRUE(PackWriter::Create(parts.back(), {}, &w).ok());
    for (int c = 0; c < 4; ++c) {
      ASSERT_TRUE(w->AddClass("class" + std::to_string(c)).ok());
    }
    for (uint64_t i = 0; i < kPer; ++i) {
      char name[48];
      std::snprintf(name, sizeof(name), "class%u/r%08llu.jpg", k,
                    static_cast<unsigned long long>(i));
      ASSERT_TRUE(w->Add(name, k, std::string(16, static_cast<char>(i))).ok());
    }
    ASSERT_TRUE(w->Finish().ok());
  }
  MergeSummary summary;
  ASSERT_TRUE(MergePacks(parts, dir / "merged", &summary).ok());
  const std::string parts_dir = dir / "parts";

  std::unique_ptr<Reader> r = Open(dir / "merged");
  // At open: the manifest only; no part's index is mapped.
  EXPECT_TRUE(MappedIndexes(parts_dir).empty());
  // A rank reading a contiguous shard inside part 1 maps part 1 alone, and
  // only the pages its records touch.
  std::string bytes;
  for (uint64_t i = kPer + 1000; i < kPer + 3000; ++i) {
    ASSERT_TRUE(r->Read(i, &bytes).ok());
  }
  std::map<std::string, uint64_t> mapped = MappedIndexes(parts_dir);
  ASSERT_EQ(mapped.size(), 1u);
  EXPECT_NE(mapped.begin()->first.find("/parts/p1/index.ufs"),
            std::string::npos);
  const uint64_t index_size = Open(parts[1])->info().index_size;
  // 2,000 entries (112 KB) and their names (44 KB), plus the header page,
  // each region rounded out by the kernel's fault-around (64 KiB by
  // default): well under the 1.7 MB index.
  EXPECT_LT(mapped.begin()->second, 512u << 10) << "of " << index_size;
  EXPECT_GT(index_size, 1u << 20);
  // A lookup asks only the part of the name's class.
  uint64_t at = 0;
  ASSERT_TRUE(r->Find("class3/r00000007.jpg", &at).ok());
  EXPECT_EQ(at, 3 * kPer + 7);
  mapped = MappedIndexes(parts_dir);
  EXPECT_EQ(mapped.size(), 2u);
  EXPECT_EQ(mapped.count(parts_dir + "/p0/index.ufs"), 0u);

  // Released pages leave the resident set; a later use maps them back.
  const uint64_t before = MappedIndexes(parts_dir)[parts_dir + "/p1/index.ufs"];
  r->ReleaseRecords(kPer, kPer);  // all of part 1's records
  uint64_t after = MappedIndexes(parts_dir)[parts_dir + "/p1/index.ufs"];
  EXPECT_LT(after, before);
  EXPECT_LE(after, 128u << 10);  // what fault-around mapped beyond them
  r->ReleaseIndex();
  for (const auto& [path, resident] : MappedIndexes(parts_dir))
    EXPECT_EQ(resident, 0u) << path;
  for (uint64_t i : {kPer + 1000, 3 * kPer + 7}) {
    ASSERT_TRUE(r->Read(i, &bytes).ok());
    EXPECT_EQ(bytes, std::string(16, static_cast<char>(i % kPer)));
  }
  ASSERT_TRUE(r->Find("class1/r00001000.jpg", &at).ok());
  EXPECT_EQ(at, kPer + 1000);
  // Out of range and empty: nothing happens.
  r->ReleaseRecords(4 * kPer, 10);
  r->ReleaseRecords(0, 0);
  // A single pack the same way (after a CheckIndex, which releases as it
  // goes).
  std::unique_ptr<Reader> single = Open(parts[2]);
  ASSERT_TRUE(single->CheckIndex().ok());
  single->ReleaseRecords(0, kPer);
  Record rec;
  ASSERT_TRUE(single->GetRecord(kPer - 1, &rec).ok());
  EXPECT_EQ(rec.name, "class2/r00019999.jpg");
  single->ReleaseIndex();
  EXPECT_EQ(MappedIndexes(parts_dir)[parts_dir + "/p2/index.ufs"], 0u);
}

TEST(JoinPartPathTest, LocalAndUrls) {
  std::string out;
  ASSERT_TRUE(JoinPartPath("/a/b", "../p/q", &out).ok());
  EXPECT_EQ(out, "/a/b/../p/q");
  ASSERT_TRUE(JoinPartPath("s3://bucket/x/merged", "../parts/p0", &out).ok());
  EXPECT_EQ(out, "s3://bucket/x/parts/p0");
  ASSERT_TRUE(JoinPartPath("https://h:9/d", "./p", &out).ok());
  EXPECT_EQ(out, "https://h:9/d/p");
  EXPECT_TRUE(
      JoinPartPath("s3://bucket/x", "../../y", &out).IsInvalidArgument());
  EXPECT_TRUE(JoinPartPath("/a", "/etc", &out).IsInvalidArgument());
  EXPECT_TRUE(JoinPartPath("/a", "p//q", &out).IsInvalidArgument());
  EXPECT_TRUE(JoinPartPath("/a", "", &out).IsInvalidArgument());
}

TEST(MergeCliTest, BuildPartsMergeAndRead) {
  TempDir dir;
  MakeTree(dir / "src", 3, 6, 8);
  for (int i = 0; i < 3; ++i) {
    test::CommandResult r =
        RunCli({"build", dir / "src", "--part", std::to_string(i) + "/3", "-o",
                dir / ("parts/p" + std::to_string(i)), "--no-progress"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(Contains(r.out, "part " + std::to_string(i) + "/3: samples"))
        << r.out;
  }
  test::CommandResult bad =
      RunCli({"build", dir / "src", "--part", "3/3", "-o", dir / "x"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(Contains(bad.err, "--part takes")) << bad.err;
  test::CommandResult m =
      RunCli({"merge", dir / "parts/p2", dir / "parts/p0", dir / "parts/p1",
              "-o", dir / "merged", "--json"});
  ASSERT_EQ(m.exit_code, 0) << m.err;
  EXPECT_TRUE(Contains(m.out, "\"parts\":3,\"split\":true,\"records\":18"))
      << m.out;
  ASSERT_EQ(
      RunCli({"build", dir / "src", "-o", dir / "single", "-q"}).exit_code, 0);
  EXPECT_EQ(RunCli({"ls", dir / "merged"}).out,
            RunCli({"ls", dir / "single"}).out);
  EXPECT_EQ(RunCli({"cat", dir / "merged", "class2/img5.jpg"}).out,
            ReadFile(dir / "src/class2/img5.jpg"));
  test::CommandResult v = RunCli({"verify", dir / "merged"});
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  test::CommandResult info = RunCli({"info", dir / "merged"});
  EXPECT_TRUE(Contains(info.out, "parts:         3")) << info.out;
  test::CommandResult warm =
      RunCli({"warmup", dir / "merged", "--cache", dir / "cache"});
  EXPECT_NE(warm.exit_code, 0);
  EXPECT_TRUE(Contains(warm.err, "a merged pack (3 parts)")) << warm.err;
  // A missing part: exit 1 naming it.
  test::RemoveAll(dir / "parts/p1");
  test::CommandResult gone = RunCli({"ls", dir / "merged"});
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_TRUE(Contains(gone.err, "parts/p1")) << gone.err;
  test::CommandResult missing =
      RunCli({"merge", dir / "parts/p0", dir / "parts/p2", "-o", dir / "m2"});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_TRUE(Contains(missing.err, "part 1/3 is missing")) << missing.err;
}

// `ufspack append --files-from`: a list file, NUL-separated, and a missing
// list; the result reads as a rebuild.
TEST(MergeCliTest, AppendFilesFrom) {
  TempDir dir;
  MakeTree(dir / "src", 2, 5, 9);
  ASSERT_EQ(RunCli({"build", dir / "src", "-o", dir / "pack", "-q"}).exit_code,
            0);
  WriteFile(dir / "src/class0/new.jpg", "n");
  WriteFile(dir / "src/class1/sub0/a.jpg", "a");
  WriteFile(dir / "list", "./class0/new.jpg\n\n" + (dir / "src") +
                              "/class1/sub0/a.jpg\nclass0/img1.jpg\n");
  test::CommandResult r = RunCli({"append", dir / "pack", dir / "src",
                                  "--files-from", dir / "list", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "\"appended\":2,")) << r.out;
  EXPECT_TRUE(Contains(r.out, "\"already_packed\":1")) << r.out;
  ASSERT_EQ(
      RunCli({"build", dir / "src", "-o", dir / "rebuilt", "-q"}).exit_code, 0);
  EXPECT_EQ(RunCli({"ls", dir / "pack"}).out,
            RunCli({"ls", dir / "rebuilt"}).out);
  WriteFile(dir / "src/class1/z\nline.jpg", "z");
  WriteFile(dir / "list0", std::string("class1/z\nline.jpg\0", 18));
  r = RunCli({"append", dir / "pack", dir / "src", "--files-from",
              dir / "list0", "--null"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "appended 1 records")) << r.out;
  r = RunCli({"append", dir / "pack", dir / "src", "--files-from",
              dir / "list0", "--null"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "nothing to append: every listed file is in"))
      << r.out;
  r = RunCli(
      {"append", dir / "pack", dir / "src", "--files-from", dir / "nolist"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, "nolist: cannot open --files-from list"))
      << r.err;
  r = RunCli({"append", dir / "pack", dir / "src", "--null"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Contains(r.err, "--null needs --files-from")) << r.err;
}

}  // namespace
}  // namespace ufspack
