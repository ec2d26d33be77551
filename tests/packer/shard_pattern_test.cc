// Copyright 2026 The ufspack Authors.
//
// ExpandShards: WebDataset's brace patterns, and their bounds.

#include "shard_pattern.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ufspack {
namespace internal {
namespace {

std::vector<std::string> Expand(const std::string& pattern) {
  std::vector<std::string> out;
  Status s = ExpandShards(pattern, &out);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

std::string Error(const std::string& pattern, uint64_t limit = kMaxShardNames) {
  std::vector<std::string> out{"left over"};
  Status s = ExpandShards(pattern, &out, limit);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_TRUE(out.empty());
  return std::string(s.message());
}

TEST(ShardPatternTest, PlainPathIsItself) {
  EXPECT_EQ(Expand("a/b.tar"), std::vector<std::string>{"a/b.tar"});
  EXPECT_EQ(Expand("a{b.tar"), std::vector<std::string>{"a{b.tar"});
}

TEST(ShardPatternTest, RangesArePaddedToFirstsWidthAndListsKeepOrder) {
  EXPECT_EQ(Expand("s-{008..011}.tar"),
            (std::vector<std::string>{"s-008.tar", "s-009.tar", "s-010.tar",
                                      "s-011.tar"}));
  EXPECT_EQ(
      Expand("{b,a}-{0..1}.tar"),
      (std::vector<std::string>{"b-0.tar", "b-1.tar", "a-0.tar", "a-1.tar"}));
}

TEST(ShardPatternTest, NotARangeSaysSo) {
  for (const char* p : {"s-{5..3}.tar", "s-{a..b}.tar", "s-{1..}.tar",
                        "s-{0..9999999999999999999}.tar"}) {
    EXPECT_NE(Error(p).find("is not a range of shard numbers"),
              std::string::npos)
        << p;
  }
}

TEST(ShardPatternTest, ARangeTooLargeSaysItIsTooLargeNotNotARange) {
  const std::string why = Error("s-{0..99999999}.tar");
  EXPECT_NE(why.find("'{0..99999999}' is a range of 100,000,000 shards, more "
                     "than the limit of 1,000,000"),
            std::string::npos)
      << why;
  EXPECT_EQ(why.find("not a range"), std::string::npos) << why;
}

TEST(ShardPatternTest, TheProductIsBoundedBeforeExpanding) {
  // 10^9 names of ~20 bytes: 23 GB before the bound, an error now.
  const std::string why = Error("sh-{0..999}{0..999}{0..999}.tar");
  EXPECT_NE(why.find("its 3 brace groups would make 1,000,000,000 names, "
                     "more than the limit of 1,000,000"),
            std::string::npos)
      << why;
  std::string forty, seventy;
  for (int i = 0; i < 40; ++i) forty += "{0,1}";
  EXPECT_NE(Error(forty).find("would make 1,099,511,627,776 names"),
            std::string::npos);
  for (int i = 0; i < 70; ++i) seventy += "{0,1}";
  EXPECT_NE(Error(seventy).find("would make more than 2^64 names"),
            std::string::npos);
}

TEST(ShardPatternTest, TheLimitItselfExpands) {
  std::vector<std::string> out;
  ASSERT_TRUE(ExpandShards("{0..9}{0..9}", &out, 100).ok());
  EXPECT_EQ(out.size(), 100u);
  EXPECT_EQ(out.back(), "99");
  EXPECT_NE(Error("{0..9}{0..9}{0,1}", 100).find("200 names"),
            std::string::npos);
}

}  // namespace
}  // namespace internal
}  // namespace ufspack
