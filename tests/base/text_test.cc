// Copyright 2026 The ufspack Authors.
//
// Tests for ufspack/text.h: SplitPath.
#include "ufspack/text.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace ufspack {
namespace {

using Segments = std::vector<std::string_view>;

TEST(SplitPathTest, EmptyPathIsOneEmptySegment) {
  EXPECT_EQ(SplitPath(""), Segments({""}));
}

TEST(SplitPathTest, NoSlashIsOneSegment) {
  EXPECT_EQ(SplitPath("a"), Segments({"a"}));
}

TEST(SplitPathTest, KeepsEmptySegments) {
  EXPECT_EQ(SplitPath("a//b/"), Segments({"a", "", "b", ""}));
  EXPECT_EQ(SplitPath("/x"), Segments({"", "x"}));
  EXPECT_EQ(SplitPath("/"), Segments({"", ""}));
}

TEST(SplitPathTest, KeepsDotSegments) {
  EXPECT_EQ(SplitPath("./a/../b"), Segments({".", "a", "..", "b"}));
}

TEST(SplitPathTest, ViewsPointIntoThePath) {
  const std::string path = "ab/cd";
  const Segments segments = SplitPath(path);
  ASSERT_EQ(segments.size(), 2u);
  EXPECT_EQ(segments[0].data(), path.data());
  EXPECT_EQ(segments[1].data(), path.data() + 3);
}

TEST(SplitPathTest, NulBytesAreOrdinary) {
  EXPECT_EQ(SplitPath(std::string_view("a\0b/c", 5)),
            Segments({std::string_view("a\0b", 3), "c"}));
}

}  // namespace
}  // namespace ufspack
