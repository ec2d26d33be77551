// Copyright 2026 The ufspack Authors.
//
// The mount's directory tree (mount/src/tree.h): names to directories and
// files, lookups, and the names a mount refuses.
#include "tree.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "testutil.h"
#include "ufspack/builder.h"
#include "ufspack/reader.h"

namespace ufspack {
namespace mount {
namespace {

// The tree as "path/" (directories) and "path" (files) strings, walked
// from the root in listing order.
void Walk(const Tree& t, uint64_t dir, const std::string& prefix,
          std::vector<std::string>* out) {
  for (uint64_t k = 0; k < t.ChildCount(dir); ++k) {
    const uint64_t c = t.Child(dir, k);
    const std::string path = prefix + std::string(t.NameOf(c));
    if (t.IsDir(c)) {
      out->push_back(path + "/");
      EXPECT_EQ(t.Parent(c), dir);
      Walk(t, c, path + "/", out);
    } else {
      ASSERT_TRUE(t.IsFile(c));
      EXPECT_EQ(t.PathOf(c), path);
      out->push_back(path);
    }
  }
}

std::vector<std::string> Listing(const Tree& t) {
  std::vector<std::string> out;
  Walk(t, Tree::kRootInode, "", &out);
  return out;
}

// REQUIRES: `names` outlives *t (the tree keeps views of them).
Status BuildFrom(const std::vector<std::string>& names, Tree* t) {
  return t->Build(std::vector<std::string_view>(names.begin(), names.end()));
}

TEST(TreeTest, NamesBecomeDirectoriesAndFiles) {
  // In the index's (ImageFolder's) order: a directory's files before its
  // subdirectories' ("a/z.jpg" before "a/sub/x.jpg").
  const std::vector<std::string> names = {
      "a/y.jpg", "a/z.jpg", "a/sub/x.jpg", "a/sub-x/w.jpg", "b/c.png", "top"};
  Tree t;
  ASSERT_TRUE(BuildFrom(names, &t).ok());
  EXPECT_EQ(t.file_count(), 6u);
  EXPECT_EQ(t.dir_count(), 5u);  // root, a, a/sub, a/sub-x, b
  const std::vector<std::string> want = {
      "a/",      "a/sub/",  "a/sub/x.jpg", "a/sub-x/", "a/sub-x/w.jpg",
      "a/y.jpg", "a/z.jpg", "b/",          "b/c.png",  "top"};
  EXPECT_EQ(Listing(t), want);
  const uint64_t a = t.Lookup(Tree::kRootInode, "a");
  ASSERT_TRUE(t.IsDir(a));
  EXPECT_EQ(t.SubdirCount(a), 2u);
  EXPECT_EQ(t.ChildCount(a), 4u);
  const uint64_t z = t.Lookup(a, "z.jpg");
  ASSERT_TRUE(t.IsFile(z));
  EXPECT_EQ(t.RecordOf(z), 1u);
  EXPECT_EQ(t.FileInode(1), z);
  EXPECT_EQ(t.Lookup(a, "nope"), 0u);
  EXPECT_EQ(t.Lookup(z, "x"), 0u);  // a file has no children
  EXPECT_EQ(t.Lookup(Tree::kRootInode, "top"), t.FileInode(5));
  EXPECT_EQ(t.Parent(Tree::kRootInode), Tree::kRootInode);
}

TEST(TreeTest, ChildrenAreInByteOrderWhateverTheIndexOrder) {
  std::vector<std::string> names;
  for (int i = 0; i < 300; ++i) {
    names.push_back("d" + std::to_string(i % 7) + "/" +
                    std::to_string(i * 7919 % 1000) + (i % 3 ? ".jpg" : "/f"));
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  std::vector<std::string> shuffled = names;
  std::reverse(shuffled.begin(), shuffled.end());
  Tree t;
  ASSERT_TRUE(BuildFrom(shuffled, &t).ok());
  EXPECT_EQ(t.file_count(), names.size());
  for (uint64_t ino = 1; ino <= t.dir_count(); ++ino) {
    for (uint64_t k = 1; k < t.ChildCount(ino); ++k) {
      EXPECT_LT(t.NameOf(t.Child(ino, k - 1)), t.NameOf(t.Child(ino, k)));
    }
  }
  for (uint64_t r = 0; r < shuffled.size(); ++r) {
    // Every file is found by walking its path.
    uint64_t ino = Tree::kRootInode;
    std::string_view rest = shuffled[r];
    for (size_t slash; (slash = rest.find('/')) != std::string_view::npos;
         rest.remove_prefix(slash + 1)) {
      ino = t.Lookup(ino, rest.substr(0, slash));
      ASSERT_TRUE(t.IsDir(ino)) << shuffled[r];
    }
    EXPECT_EQ(t.Lookup(ino, rest), t.FileInode(r)) << shuffled[r];
  }
}

TEST(TreeTest, FlatPackAndEmptyPack) {
  const std::vector<std::string> names = {"b", "a", "c"};  // outlive t
  Tree t;
  ASSERT_TRUE(BuildFrom(names, &t).ok());
  EXPECT_EQ(t.dir_count(), 1u);
  EXPECT_EQ(Listing(t), (std::vector<std::string>{"a", "b", "c"}));
  Tree empty;
  ASSERT_TRUE(BuildFrom({}, &empty).ok());
  EXPECT_EQ(empty.dir_count(), 1u);
  EXPECT_EQ(empty.ChildCount(Tree::kRootInode), 0u);
}

TEST(TreeTest, NamesThatCannotBePathsAreRefused) {
  const std::vector<std::string> bad = {"",
                                        "/abs",
                                        "dir/",
                                        "a//b",
                                        "./a",
                                        "a/./b",
                                        "a/..",
                                        "../x",
                                        ".",
                                        std::string("a\0b", 3),
                                        "d/" + std::string(256, 'n')};
  for (const std::string& name : bad) {
    Tree t;
    Status s = BuildFrom({"ok/fine.jpg", name}, &t);
    EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
    EXPECT_NE(s.message().find("record 1"), std::string_view::npos)
        << s.message();
    EXPECT_NE(s.message().find("cannot be mounted"), std::string_view::npos)
        << s.message();
  }
  Tree t;
  EXPECT_TRUE(BuildFrom({"d/" + std::string(255, 'n')}, &t).ok());
}

TEST(TreeTest, FileAndDirectoryOfOneNameAreRefused) {
  Tree t;
  Status s = BuildFrom({"a/b.jpg", "a"}, &t);
  ASSERT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("record 0"), std::string_view::npos)
      << s.message();
  EXPECT_NE(s.message().find("record 1"), std::string_view::npos)
      << s.message();
  s = BuildFrom({"x/y", "x/y/z"}, &t);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
}

TEST(TreeTest, DuplicateNamesAreRefused) {
  Tree t;
  Status s = BuildFrom({"c/1.jpg", "c/2.jpg", "c/1.jpg"}, &t);
  ASSERT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("same name"), std::string_view::npos)
      << s.message();
}

// A pack's classes without records (--allow-empty) are empty directories,
// among the others in byte order, wherever they sort.
TEST(TreeTest, EmptyDirectoriesAreShown) {
  const std::vector<std::string> names = {"b/1.jpg", "d/2.jpg", "a-z/3.jpg"};
  const std::vector<std::string> empty = {"c", "a", "e", "c"};  // "c" twice
  const std::vector<std::string_view> dirs(empty.begin(), empty.end());
  Tree t;
  ASSERT_TRUE(
      t.Build(std::vector<std::string_view>(names.begin(), names.end()), dirs)
          .ok());
  EXPECT_EQ(t.file_count(), 3u);
  EXPECT_EQ(t.dir_count(), 7u);  // the root, a, a-z, b, c, d, e
  EXPECT_EQ(Listing(t),
            (std::vector<std::string>{"a/", "a-z/", "a-z/3.jpg", "b/",
                                      "b/1.jpg", "c/", "d/", "d/2.jpg", "e/"}));
  const uint64_t c = t.Lookup(Tree::kRootInode, "c");
  ASSERT_TRUE(t.IsDir(c));
  EXPECT_EQ(t.ChildCount(c), 0u);
  EXPECT_EQ(t.SubdirCount(Tree::kRootInode), 6u);
}

TEST(TreeTest, EmptyDirectoryThatIsAFileIsRefused) {
  const std::vector<std::string> names = {"a/1.jpg", "top"};
  const std::vector<std::string> empty = {"top"};
  Tree t;
  Status s = t.Build(std::vector<std::string_view>(names.begin(), names.end()),
                     std::vector<std::string_view>(empty.begin(), empty.end()));
  ASSERT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("the class 'top' (no records)"),
            std::string_view::npos)
      << s.message();
  EXPECT_NE(s.message().find("record 1"), std::string_view::npos)
      << s.message();
  const std::vector<std::string> bad = {"a/../b"};
  s = t.Build({}, std::vector<std::string_view>(bad.begin(), bad.end()));
  ASSERT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("the class 'a/../b' (no records): name has a "
                             "'..' component"),
            std::string_view::npos)
      << s.message();
}

TEST(TreeTest, TreeOrderPutsSlashFirst) {
  EXPECT_LT(CompareTreeOrder("a/x", "a-b"), 0);
  EXPECT_LT(CompareTreeOrder("a", "a/b"), 0);
  EXPECT_LT(CompareTreeOrder("a/b", "a\x01"), 0);
  EXPECT_GT(CompareTreeOrder("a\xff", "a/z"), 0);
  EXPECT_EQ(CompareTreeOrder("a/b", "a/b"), 0);
}

// From a real pack's index: the names a Reader gives build the source
// tree's shape.
TEST(TreeTest, BuildsFromAPacksIndex) {
  test::TempDir tmp;
  test::WriteFile(tmp / "src/cats/c1.jpg", "one");
  test::WriteFile(tmp / "src/cats/deep/c2.jpg", "two");
  test::WriteFile(tmp / "src/dogs/d1.jpg", "three");
  BuildSummary summary;
  ASSERT_TRUE(
      BuildPack(tmp / "src", tmp / "pack", BuildOptions(), &summary).ok());
  std::unique_ptr<Reader> reader;
  ASSERT_TRUE(Reader::Open(tmp / "pack", {}, &reader).ok());
  std::vector<std::string_view> names;
  for (uint64_t i = 0; i < reader->size(); ++i) {
    Record r;
    ASSERT_TRUE(reader->GetRecord(i, &r).ok());
    names.push_back(r.name);
  }
  Tree t;
  ASSERT_TRUE(t.Build(names).ok());
  EXPECT_EQ(Listing(t), (std::vector<std::string>{
                            "cats/", "cats/c1.jpg", "cats/deep/",
                            "cats/deep/c2.jpg", "dogs/", "dogs/d1.jpg"}));
}

}  // namespace
}  // namespace mount
}  // namespace ufspack
