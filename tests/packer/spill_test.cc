// Copyright 2026 The ufspack Authors.
//
// BuildLookupTable (packer/src/spill.h): built in stripes of any size, the
// lookup table is byte for byte the one that inserting every record in
// index order into one array gives (docs/format.md), including insertions
// that run off a stripe's end and off the table's end (wrap-around), and a
// duplicate name is found whichever stripe its twin landed in.
#include "spill.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "testutil.h"
#include "ufspack/coding.h"
#include "ufspack/format.h"

namespace ufspack {
namespace {

using internal::SpillFile;

// The table as format.md defines it: insertion in index order.
std::string Reference(const std::vector<uint64_t>& hashes) {
  const uint64_t slots = LookupSlotsFor(hashes.size());
  std::vector<uint32_t> table(slots, 0);
  for (uint64_t i = 0; i < hashes.size(); ++i) {
    uint64_t pos = LookupHome(hashes[i], slots);
    while (table[pos] != 0) pos = (pos + 1) & (slots - 1);
    table[pos] = static_cast<uint32_t>(i + 1);
  }
  std::string out;
  for (uint32_t v : table) PutFixed32(&out, v);
  return out;
}

std::string Striped(const test::TempDir& dir,
                    const std::vector<uint64_t>& hashes, uint64_t stripe,
                    Status* status) {
  SpillFile in, out;
  EXPECT_TRUE(in.Create(dir.path(), ".hashes.ufs.tmp-").ok());
  EXPECT_TRUE(out.Create(dir.path(), ".lookup.ufs.tmp-").ok());
  for (uint64_t h : hashes) {
    char b[8];
    EncodeFixed64(b, h);
    EXPECT_TRUE(in.Append(b, 8).ok());
  }
  EXPECT_TRUE(in.Flush().ok());
  *status = internal::BuildLookupTable(
      hashes.size(), in,
      [&](uint64_t a, uint64_t b) {
        // Records with equal full hashes have "the same name".
        return hashes[a] == hashes[b]
                   ? Status::InvalidArgument("duplicate " + std::to_string(a) +
                                             " " + std::to_string(b))
                   : Status::OK();
      },
      stripe, &out);
  std::string bytes(out.size(), '\0');
  if (out.size() > 0) {
    EXPECT_TRUE(out.ReadAt(0, bytes.size(), bytes.data()).ok());
  }
  return bytes;
}

TEST(LookupTableTest, StripesGiveTheIndexOrderTable) {
  test::TempDir dir;
  std::mt19937_64 rng(42);
  int cases = 0;
  for (uint64_t n : {1u, 2u, 3u, 7u, 64u, 100u, 1000u, 4096u}) {
    const uint64_t slots = LookupSlotsFor(n);
    for (int shape = 0; shape < 4; ++shape) {
      std::vector<uint64_t> hashes(n);
      for (uint64_t i = 0; i < n; ++i) {
        // Distinct in the high bits (no "duplicates"), homes: uniform;
        // crowded at the table's end (runs wrap to slot 0); crowded at
        // stripe ends; all one slot.
        const uint64_t high = (rng() << 32) | (i + 1) << 16;
        uint64_t home = rng() & (slots - 1);
        if (shape == 1)
          home = slots - 1 - (rng() % std::max<uint64_t>(1, slots / 8));
        if (shape == 2)
          home = (rng() % 8 == 0) ? 0 : ((rng() | 3) & (slots - 1));
        if (shape == 3) home = slots - 1;
        hashes[i] = (high & ~(slots - 1)) | home;
      }
      const std::string want = Reference(hashes);
      for (uint64_t stripe = 1; stripe <= slots; stripe *= 2) {
        SCOPED_TRACE("n " + std::to_string(n) + " shape " +
                     std::to_string(shape) + " stripe " +
                     std::to_string(stripe));
        Status s;
        EXPECT_EQ(Striped(dir, hashes, stripe, &s), want);
        EXPECT_TRUE(s.ok()) << s.ToString();
        ++cases;
      }
    }
  }
  EXPECT_GT(cases, 100);
}

TEST(LookupTableTest, DuplicatesFoundAcrossStripes) {
  test::TempDir dir;
  const uint64_t n = 300;
  const uint64_t slots = LookupSlotsFor(n);
  std::vector<uint64_t> hashes(n);
  std::mt19937_64 rng(7);
  for (auto& h : hashes) h = rng();
  // Record 250 repeats record 3's name: its probe may cross stripes.
  hashes[250] = hashes[3];
  for (uint64_t stripe : {uint64_t{1}, uint64_t{4}, uint64_t{64}, slots}) {
    Status s;
    Striped(dir, hashes, stripe, &s);
    EXPECT_TRUE(s.IsInvalidArgument()) << stripe << ": " << s.ToString();
    EXPECT_TRUE(test::Contains(s, "duplicate 3 250")) << s.ToString();
  }
}

TEST(LookupTableTest, EmptyPackHasNoTable) {
  test::TempDir dir;
  Status s;
  EXPECT_EQ(Striped(dir, {}, 16, &s), "");
  EXPECT_TRUE(s.ok());
}

}  // namespace
}  // namespace ufspack
