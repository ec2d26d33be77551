// Copyright 2026 The ufspack Authors.
//
// Tests for ScanTree, PyFsLess and HasAllowedExtension: the sample list
// must be exactly torchvision.datasets.ImageFolder's, including its order.
#include "ufspack/scan.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "scan_order.h"
#include "testutil.h"
#include "ufspack/format.h"

namespace ufspack {
namespace {

using test::TempDir;
using test::WriteFile;

using EntryList = std::vector<std::pair<std::string, uint32_t>>;

EntryList Entries(const ScanResult& r) {
  EntryList out;
  for (const auto& e : r.entries) out.emplace_back(e.name, e.label);
  return out;
}

std::vector<std::string> Names(const ScanResult& r) {
  std::vector<std::string> out;
  for (const auto& e : r.entries) out.push_back(e.name);
  return out;
}

std::string Hex(const std::string& s) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

std::string Unhex(const std::string& h) {
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) {
    out += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
  }
  return out;
}

// Printable form of a byte string for failure messages.
std::string Show(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

std::string ShowList(const EntryList& l) {
  std::string out;
  for (const auto& e : l) {
    out += "  " + Show(e.first) + " -> " + std::to_string(e.second) + "\n";
  }
  return out;
}

constexpr char kPython[] = "/usr/bin/python3";

bool HavePython() { return access(kPython, X_OK) == 0; }

// --- PyFsLess ---------------------------------------------------------------

TEST(PyFsLessTest, AsciiIsByteOrder) {
  EXPECT_TRUE(PyFsLess("a", "b"));
  EXPECT_FALSE(PyFsLess("b", "a"));
  EXPECT_TRUE(PyFsLess("B", "a"));  // upper case sorts first
  EXPECT_TRUE(PyFsLess("a-b", "a/b"));
  EXPECT_TRUE(PyFsLess("Z", "_"));
  EXPECT_FALSE(PyFsLess("a", "a"));
  EXPECT_FALSE(PyFsLess("", ""));
}

TEST(PyFsLessTest, PrefixSortsFirst) {
  EXPECT_TRUE(PyFsLess("", "a"));
  EXPECT_FALSE(PyFsLess("a", ""));
  EXPECT_TRUE(PyFsLess("ab", "abc"));
  EXPECT_FALSE(PyFsLess("abc", "ab"));
  EXPECT_TRUE(PyFsLess("\xc3\xa9", "\xc3\xa9x"));
  EXPECT_TRUE(PyFsLess("\xff", "\xff\xff"));
  EXPECT_FALSE(PyFsLess("\xff\xff", "\xff"));
}

TEST(PyFsLessTest, ValidUtf8IsCodePointOrder) {
  EXPECT_TRUE(PyFsLess("z", "\xc3\xa9"));                     // z < é
  EXPECT_TRUE(PyFsLess("\xc3\xa9", "\xe2\x82\xac"));          // é < €
  EXPECT_TRUE(PyFsLess("\xe2\x82\xac", "\xf0\x9f\x98\x80"));  // € < 😀
  EXPECT_FALSE(PyFsLess("\xf0\x9f\x98\x80", "\xe2\x82\xac"));
}

TEST(PyFsLessTest, SurrogateEscapeSortsBeforeFourByteUtf8) {
  // b"\xff" decodes to U+DCFF, which is below U+1F600 although the byte
  // 0xFF is above 0xF0.
  const std::string ff = "\xff.jpg";
  const std::string emoji = "\xf0\x9f\x98\x80.jpg";
  EXPECT_TRUE(PyFsLess(ff, emoji));
  EXPECT_FALSE(PyFsLess(emoji, ff));
  EXPECT_GT(ff, emoji);  // byte order disagrees
}

TEST(PyFsLessTest, SurrogateEscapeSortsBetweenThreeByteRanges) {
  // U+DC80..U+DCFF lie above U+0800..U+D7FF and below U+E000..U+FFFF.
  EXPECT_TRUE(PyFsLess("\xc3\xa9", "\x80"));      // U+E9 < U+DC80
  EXPECT_TRUE(PyFsLess("\xed\x9f\xbf", "\x80"));  // U+D7FF < U+DC80
  EXPECT_TRUE(PyFsLess("\xff", "\xee\x80\x80"));  // U+DCFF < U+E000
  EXPECT_FALSE(PyFsLess("\xee\x80\x80", "\xff"));
  EXPECT_TRUE(PyFsLess("\x80", "\xff"));  // U+DC80 < U+DCFF
}

TEST(PyFsLessTest, InvalidContinuationIsEscapedBytewise) {
  // b"\xe2\x82A" -> U+DCE2 U+DC82 'A'; b"\xe2\x82\xac" is U+20AC.
  EXPECT_TRUE(PyFsLess("\xe2\x82\xac",
                       "\xe2\x82"
                       "A"));
  EXPECT_FALSE(
      PyFsLess("\xe2\x82"
               "A",
               "\xe2\x82\xac"));
  // Truncated sequence at the end of the name.
  EXPECT_TRUE(PyFsLess("\xe2\x82\xac", "\xe2\x82"));
  // The escaped lead byte, then a valid sequence starting at the next byte:
  // "\xe2" + "€" is U+DCE2 U+20AC, above "€" + anything.
  EXPECT_TRUE(PyFsLess("\xe2\x82\xac\xe2\x82\xac", "\xe2\xe2\x82\xac"));
  // Escaped bytes compare by their own value: U+DCE2 U+DC82 'A' vs
  // U+DCE2 U+DC82 'B'.
  EXPECT_TRUE(
      PyFsLess("\xe2\x82"
               "A",
               "\xe2\x82"
               "B"));
}

TEST(PyFsLessTest, OverlongAndOutOfRangeSequencesAreEscaped) {
  // b"\xc0\xaf" (overlong '/') -> U+DCC0 U+DCAF, not '/'.
  EXPECT_TRUE(PyFsLess("0", "\xc0\xaf"));
  EXPECT_TRUE(PyFsLess("\xed\x9f\xbf", "\xc0\xaf"));  // U+D7FF < U+DCC0
  EXPECT_FALSE(PyFsLess("\xc0\xaf", "\xed\x9f\xbf"));
  // Overlong 3-byte (E0 80..9F) and 4-byte (F0 80..8F) forms.
  EXPECT_TRUE(PyFsLess("\xed\x9f\xbf", "\xe0\x80\xaf"));
  EXPECT_TRUE(PyFsLess("\xf0\x8f\xbf\xbf", "\xee\x80\x80"));  // U+DCF0 < U+E000
  EXPECT_TRUE(PyFsLess("\xf0\x8f\xbf\xbf", "\xf0\x9f\x98\x80"));
  // Encoded UTF-16 surrogate b"\xed\xa0\x80" -> U+DCED U+DCA0 U+DC80.
  EXPECT_TRUE(PyFsLess("\xed\x9f\xbf", "\xed\xa0\x80"));
  EXPECT_TRUE(PyFsLess("\xed\xa0\x80", "\xee\x80\x80"));
  // Above U+10FFFF: b"\xf4\x90\x80\x80" -> U+DCF4 ..., below U+10FFFF.
  EXPECT_TRUE(PyFsLess("\xf4\x90\x80\x80", "\xf4\x8f\xbf\xbf"));
  EXPECT_FALSE(PyFsLess("\xf4\x8f\xbf\xbf", "\xf4\x90\x80\x80"));
  // F5..FF never start a sequence.
  EXPECT_TRUE(PyFsLess("\xf5\x80\x80\x80", "\xf0\x90\x80\x80"));
}

TEST(PyFsLessTest, IsAStrictWeakOrderOnSamples) {
  const std::vector<std::string> names = {"",
                                          "a",
                                          "B",
                                          "\xff",
                                          "\x80",
                                          "\xc3\xa9",
                                          "\xe2\x82\xac",
                                          "\xe2\x82"
                                          "A",
                                          "\xc0\xaf",
                                          "\xed\xa0\x80",
                                          "\xee\x80\x80",
                                          "\xf0\x9f\x98\x80",
                                          "\xf4\x90\x80\x80",
                                          "a/b",
                                          "a-b"};
  for (const auto& a : names) {
    EXPECT_FALSE(PyFsLess(a, a)) << Show(a);
    for (const auto& b : names) {
      if (a == b) continue;
      // Distinct byte strings decode to distinct code point strings.
      EXPECT_NE(PyFsLess(a, b), PyFsLess(b, a)) << Show(a) << " vs " << Show(b);
      for (const auto& c : names) {
        if (PyFsLess(a, b) && PyFsLess(b, c)) {
          EXPECT_TRUE(PyFsLess(a, c))
              << Show(a) << " " << Show(b) << " " << Show(c);
        }
      }
    }
  }
}

// --- HasAllowedExtension ----------------------------------------------------

TEST(HasAllowedExtensionTest, CaseInsensitive) {
  const auto& ext = DefaultImageExtensions();
  EXPECT_TRUE(HasAllowedExtension("cat.jpg", ext));
  EXPECT_TRUE(HasAllowedExtension("cat.JPG", ext));
  EXPECT_TRUE(HasAllowedExtension("cat.JpEg", ext));
  EXPECT_TRUE(HasAllowedExtension("x.TIFF", ext));
  EXPECT_TRUE(HasAllowedExtension("x.webp", ext));
  EXPECT_TRUE(HasAllowedExtension("x.pgm", ext));
  EXPECT_TRUE(HasAllowedExtension("x.ppm", ext));
  EXPECT_TRUE(HasAllowedExtension("x.bmp", ext));
  EXPECT_TRUE(HasAllowedExtension("x.png", ext));
  EXPECT_TRUE(HasAllowedExtension("x.tif", ext));
}

TEST(HasAllowedExtensionTest, RequiresTheDot) {
  const auto& ext = DefaultImageExtensions();
  EXPECT_FALSE(HasAllowedExtension("xjpg", ext));
  EXPECT_FALSE(HasAllowedExtension("jpg", ext));
  EXPECT_FALSE(HasAllowedExtension("", ext));
  EXPECT_FALSE(HasAllowedExtension("cat.jpg.txt", ext));
  EXPECT_FALSE(HasAllowedExtension("cat.jpgx", ext));
  EXPECT_FALSE(HasAllowedExtension("cat.gif", ext));
  // Python: ".jpg".lower().endswith(".jpg") is True.
  EXPECT_TRUE(HasAllowedExtension(".jpg", ext));
}

TEST(HasAllowedExtensionTest, OnlyAsciiIsFolded) {
  const auto& ext = DefaultImageExtensions();
  // Non-ASCII bytes before the extension do not matter.
  EXPECT_TRUE(HasAllowedExtension("\xff\xc3\xa9.PNG", ext));
  // A non-ASCII byte inside the extension never matches.
  EXPECT_FALSE(HasAllowedExtension("x.jp\xc7", ext));
}

TEST(HasAllowedExtensionTest, CustomList) {
  const std::vector<std::string> ext = {".txt"};
  EXPECT_TRUE(HasAllowedExtension("a.TXT", ext));
  EXPECT_FALSE(HasAllowedExtension("a.jpg", ext));
  EXPECT_FALSE(HasAllowedExtension("a.txt", {}));
}

// --- ScanTree ---------------------------------------------------------------

TEST(ScanTreeTest, SimpleClassTree) {
  TempDir t;
  WriteFile(t / "dog/b.jpg", "1");
  WriteFile(t / "dog/a.png", "2");
  WriteFile(t / "cat/z.jpeg", "3");
  WriteFile(t / "cat/readme.txt", "x");
  WriteFile(t / "top.jpg", "not in a class");
  ScanResult r;
  ASSERT_TRUE(ScanTree(t.path(), ScanOptions(), &r).ok());
  EXPECT_EQ(r.root, t.path());
  EXPECT_EQ(r.classes, (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(Entries(r),
            (EntryList{{"cat/z.jpeg", 0}, {"dog/a.png", 1}, {"dog/b.jpg", 1}}));
  EXPECT_EQ(r.PathOf(1), t.path() + "/dog/a.png");
  EXPECT_EQ(r.skipped, 0u);
}

// ScanTreeByClass hands the classes over in order, whatever the threads and
// the budget of files held, and its concatenation is ScanTree's list; flat
// mode hands over one directory at a time in sorted(os.walk()) order.
TEST(ScanTreeTest, ByClassEqualsTheWholeListForAnyWindow) {
  TempDir t;
  for (int c = 0; c < 25; ++c) {
    const int files = c == 4 ? 0 : c == 11 ? 40 : c % 5 + 1;
    test::MakeDirs(t / ("c" + std::to_string(100 + c)));
    for (int k = 0; k < files; ++k) {
      WriteFile(t / ("c" + std::to_string(100 + c) + (k % 3 ? "" : "/s") +
                     (k % 6 ? "" : "-x") + "/f" + std::to_string(k) + ".jpg"),
                "x");
    }
  }
  for (bool flat : {false, true}) {
    ScanOptions whole;
    whole.allow_empty = true;
    whole.flat = flat;
    ScanResult expect;
    ASSERT_TRUE(ScanTree(t.path(), whole, &expect).ok());
    for (int threads : {1, 3, 8}) {
      for (uint64_t budget : {0, 1, 7, 100}) {
        SCOPED_TRACE(std::string(flat ? "flat" : "classes") + " threads " +
                     std::to_string(threads) + " budget " +
                     std::to_string(budget));
        ScanOptions o = whole;
        o.threads = threads;
        o.max_held_files = budget;
        std::vector<ScanEntry> got;
        std::vector<uint32_t> labels;
        ScanResult r;
        Status s = ScanTreeByClass(
            t.path(), o, nullptr,
            [&](ScanClass* cls) {
              labels.push_back(cls->label);
              for (ScanEntry& e : cls->entries) got.push_back(std::move(e));
              return Status::OK();
            },
            &r);
        ASSERT_TRUE(s.ok()) << s.ToString();
        EXPECT_TRUE(r.entries.empty());
        EXPECT_EQ(r.classes, expect.classes);
        ASSERT_EQ(got.size(), expect.entries.size());
        for (size_t k = 0; k < got.size(); ++k) {
          EXPECT_EQ(got[k].name, expect.entries[k].name);
          EXPECT_EQ(got[k].label, expect.entries[k].label);
        }
        if (!flat) {
          ASSERT_EQ(labels.size(), 25u);  // the empty class too
          for (size_t k = 0; k < labels.size(); ++k) EXPECT_EQ(labels[k], k);
        } else {
          EXPECT_GT(labels.size(), 25u);  // a call per directory
        }
      }
    }
  }
}

// A sink's error and a cancel flag stop the scan with that status.
TEST(ScanTreeTest, ByClassStopsOnASinkErrorAndOnCancel) {
  TempDir t;
  for (int c = 0; c < 12; ++c) {
    WriteFile(t / ("c" + std::to_string(c + 10) + "/f.jpg"), "x");
  }
  ScanOptions o;
  o.threads = 4;
  int calls = 0;
  ScanResult r;
  Status s = ScanTreeByClass(
      t.path(), o, nullptr,
      [&](ScanClass*) {
        return ++calls == 3 ? Status::IOError("sink full") : Status::OK();
      },
      &r);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_EQ(calls, 3);
  std::atomic<bool> cancel{true};
  o.cancel = &cancel;
  calls = 0;
  s = ScanTreeByClass(
      t.path(), o, nullptr,
      [&](ScanClass*) {
        ++calls;
        return Status::OK();
      },
      &r);
  EXPECT_TRUE(s.IsAborted()) << s.ToString();
  EXPECT_EQ(calls, 0);
  o.flat = true;
  s = ScanTreeByClass(
      t.path(), o, nullptr, [&](ScanClass*) { return Status::OK(); }, &r);
  EXPECT_TRUE(s.IsAborted()) << s.ToString();
}

TEST(ScanTreeTest, TrailingSlashIsDropped) {
  TempDir t;
  WriteFile(t / "c/x.jpg", "1");
  ScanResult r;
  ASSERT_TRUE(ScanTree(t.path() + "//", ScanOptions(), &r).ok());
  EXPECT_EQ(r.root, t.path());
  ASSERT_EQ(r.entries.size(), 1u);
  EXPECT_EQ(r.PathOf(0), t.path() + "/c/x.jpg");
}

TEST(ScanTreeTest, HiddenAndSymlinkedClassesAreClasses) {
  TempDir t;
  WriteFile(t / "src/x.jpg", "1");
  WriteFile(t / "root/.hidden/h.jpg", "2");
  WriteFile(t / "root/real/r.jpg", "3");
  test::Symlink(t / "src", t / "root/linked");
  test::Symlink(t / "root/real/r.jpg", t / "root/filelink");  // not a class
  test::Symlink(t / "nowhere", t / "root/dangling");          // not a class
  ScanResult r;
  ASSERT_TRUE(ScanTree(t / "root", ScanOptions(), &r).ok());
  EXPECT_EQ(r.classes, (std::vector<std::string>{".hidden", "linked", "real"}));
  EXPECT_EQ(Entries(r),
            (EntryList{
                {".hidden/h.jpg", 0}, {"linked/x.jpg", 1}, {"real/r.jpg", 2}}));
}

TEST(ScanTreeTest, WalkOrderComparesWholePaths) {
  TempDir t;
  // Directories of sorted(os.walk(c)): c, c/sub, c/sub-x, c/sub/deeper
  // ("c/sub-x" < "c/sub/deeper" because '-' < '/').
  WriteFile(t / "c/sub/deeper/d.jpg", "1");
  WriteFile(t / "c/sub-x/x.jpg", "2");
  WriteFile(t / "c/sub/s.jpg", "3");
  WriteFile(t / "c/zz.jpg", "4");
  WriteFile(t / "c/A.jpg", "5");
  ScanResult r;
  ASSERT_TRUE(ScanTree(t.path(), ScanOptions(), &r).ok());
  EXPECT_EQ(Names(r),
            (std::vector<std::string>{"c/A.jpg", "c/zz.jpg", "c/sub/s.jpg",
                                      "c/sub-x/x.jpg", "c/sub/deeper/d.jpg"}));
}

TEST(ScanTreeTest, FileNamesSortInPythonOrder) {
  TempDir t;
  const std::string ff = "\xff.jpg";
  const std::string emoji = "\xf0\x9f\x98\x80.jpg";
  WriteFile(t / ("c/" + emoji), "1");
  WriteFile(t / ("c/" + ff), "2");
  WriteFile(t / "c/\xc3\xa9.jpg", "3");
  WriteFile(t / "c/z.jpg", "4");
  ScanResult r;
  ASSERT_TRUE(ScanTree(t.path(), ScanOptions(), &r).ok());
  EXPECT_EQ(Names(r), (std::vector<std::string>{"c/z.jpg", "c/\xc3\xa9.jpg",
                                                "c/" + ff, "c/" + emoji}));
}

TEST(ScanTreeTest, ClassNamesSortInPythonOrder) {
  TempDir t;
  WriteFile(t / "\xf0\x9f\x98\x80/1.jpg", "1");
  WriteFile(t / "\xff/2.jpg", "2");
  WriteFile(t / "a/3.jpg", "3");
  WriteFile(t / "B/4.jpg", "4");
  ScanResult r;
  ASSERT_TRUE(ScanTree(t.path(), ScanOptions(), &r).ok());
  EXPECT_EQ(r.classes,
            (std::vector<std::string>{"B", "a", "\xff", "\xf0\x9f\x98\x80"}));
  EXPECT_EQ(Entries(r), (EntryList{{"B/4.jpg", 0},
                                   {"a/3.jpg", 1},
                                   {"\xff/2.jpg", 2},
                                   {"\xf0\x9f\x98\x80/1.jpg", 3}}));
}

TEST(ScanTreeTest, ExtensionsAreCaseInsensitive) {
  TempDir t;
  WriteFile(t / "c/a.JPG", "1");
  WriteFile(t / "c/b.Png", "2");
  WriteFile(t / "c/c.txt", "3");
  WriteFile(t / "c/djpg", "4");
  WriteFile(t / "c/.jpg", "5");
  ScanResult r;
  ASSERT_TRUE(ScanTree(t.path(), ScanOptions(), &r).ok());
  EXPECT_EQ(Names(r),
            (std::vector<std::string>{"c/.jpg", "c/a.JPG", "c/b.Png"}));
}

TEST(ScanTreeTest, DanglingSymlinkIsAFile) {
  // os.walk puts a dangling link among the file names; ImageFolder keeps it
  // (it only looks at the name).
  TempDir t;
  WriteFile(t / "c/a.jpg", "1");
  test::Symlink(t / "missing.jpg", t / "c/b.jpg");
  ScanResult r;
  ASSERT_TRUE(ScanTree(t.path(), ScanOptions(), &r).ok());
  EXPECT_EQ(Names(r), (std::vector<std::string>{"c/a.jpg", "c/b.jpg"}));
}

TEST(ScanTreeTest, SymlinkedSubdirectoryIsFollowed) {
  TempDir t;
  WriteFile(t / "other/deep/o.jpg", "1");
  WriteFile(t / "root/c/a.jpg", "2");
  test::Symlink(t / "other", t / "root/c/link");
  ScanResult r;
  ASSERT_TRUE(ScanTree(t / "root", ScanOptions(), &r).ok());
  EXPECT_EQ(Names(r),
            (std::vector<std::string>{"c/a.jpg", "c/link/deep/o.jpg"}));
}

TEST(ScanTreeTest, SymlinkLoopIsNotFollowedAndWarned) {
  TempDir t;
  WriteFile(t / "c/sub/a.jpg", "1");
  test::Symlink("..", t / "c/sub/up");  // c/sub/up -> c
  test::Symlink(".", t / "c/self");     // c/self -> c
  ScanResult r;
  ASSERT_TRUE(ScanTree(t.path(), ScanOptions(), &r).ok());
  EXPECT_EQ(Names(r), (std::vector<std::string>{"c/sub/a.jpg"}));
  EXPECT_EQ(r.skipped, 2u);
  ASSERT_EQ(r.warnings.size(), 2u);
  for (const auto& w : r.warnings) {
    EXPECT_NE(w.find("symlink loop"), std::string::npos) << w;
  }
}

TEST(ScanTreeTest, SymlinkToSiblingIsNotALoop) {
  TempDir t;
  WriteFile(t / "c/a/x.jpg", "1");
  test::Symlink("a", t / "c/b");  // c/b -> c/a: followed, not an ancestor
  ScanResult r;
  ASSERT_TRUE(ScanTree(t.path(), ScanOptions(), &r).ok());
  EXPECT_EQ(Names(r), (std::vector<std::string>{"c/a/x.jpg", "c/b/x.jpg"}));
  EXPECT_TRUE(r.warnings.empty());
}

// A directory path longer than PATH_MAX (4096 bytes) cannot be opened
// whole; the walk opens it one component at a time and lists it.
// (os.walk, hence ImageFolder, silently skips it: scandir fails with
// ENAMETOOLONG.)
TEST(ScanTreeTest, PathsLongerThanPathMaxAreWalked) {
  TempDir t;
  std::string deep = "c";
  for (int i = 0; i < 22; ++i) {
    deep += "/" + std::string(200, static_cast<char>('a' + i));
  }
  ASSERT_GT(t.path().size() + deep.size(), 4096u);
  WriteFile(t / (deep + "/x.jpg"), "x");
  WriteFile(t / (deep + "/sub/y.png"), "y");
  WriteFile(t / "c/a.jpg", "a");
  for (bool flat : {false, true}) {
    SCOPED_TRACE(flat ? "flat" : "classes");
    ScanOptions o;
    o.flat = flat;
    ScanResult r;
    Status s = ScanTree(t.path(), o, &r);
    ASSERT_TRUE(s.ok()) << s.ToString().substr(0, 300);
    EXPECT_TRUE(Names(r) ==
                (std::vector<std::string>{"c/a.jpg", deep + "/x.jpg",
                                          deep + "/sub/y.png"}));
    EXPECT_EQ(r.skipped, 0u);
    EXPECT_TRUE(r.warnings.empty());
  }
}

TEST(ScanTreeTest, EmptyClassIsAnErrorNamingIt) {
  TempDir t;
  WriteFile(t / "full/a.jpg", "1");
  test::MakeDirs(t / "hollow");
  WriteFile(t / "textonly/notes.txt", "1");
  ScanResult r;
  Status s = ScanTree(t.path(), ScanOptions(), &r);
  ASSERT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.ToString().find("'hollow'"), std::string::npos) << s.ToString();
  EXPECT_NE(s.ToString().find("'textonly'"), std::string::npos) << s.ToString();
  EXPECT_EQ(s.ToString().find("'full'"), std::string::npos) << s.ToString();
}

TEST(ScanTreeTest, AllowEmptyKeepsEmptyClasses) {
  TempDir t;
  WriteFile(t / "b/a.jpg", "1");
  test::MakeDirs(t / "a");
  test::MakeDirs(t / "c");
  ScanOptions o;
  o.allow_empty = true;
  ScanResult r;
  ASSERT_TRUE(ScanTree(t.path(), o, &r).ok());
  EXPECT_EQ(r.classes, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(Entries(r), (EntryList{{"b/a.jpg", 1}}));
}

TEST(ScanTreeTest, AllFilesTakesEveryName) {
  TempDir t;
  WriteFile(t / "c/a.txt", "1");
  WriteFile(t / "c/noext", "2");
  WriteFile(t / "c/b.jpg", "3");
  ScanOptions o;
  o.all_files = true;
  ScanResult r;
  ASSERT_TRUE(ScanTree(t.path(), o, &r).ok());
  EXPECT_EQ(Names(r),
            (std::vector<std::string>{"c/a.txt", "c/b.jpg", "c/noext"}));
}

TEST(ScanTreeTest, CustomExtensionsWithoutDotOrUpperCase) {
  TempDir t;
  WriteFile(t / "c/a.txt", "1");
  WriteFile(t / "c/b.TXT", "2");
  WriteFile(t / "c/c.jpg", "3");
  WriteFile(t / "c/dtxt", "4");
  WriteFile(t / "c/e.Dat", "5");
  for (const auto& exts : std::vector<std::vector<std::string>>{
           {"txt", "DAT"}, {".TXT", ".dat"}, {"TxT", ".Dat"}}) {
    ScanOptions o;
    o.extensions = exts;
    ScanResult r;
    ASSERT_TRUE(ScanTree(t.path(), o, &r).ok());
    EXPECT_EQ(Names(r),
              (std::vector<std::string>{"c/a.txt", "c/b.TXT", "c/e.Dat"}))
        << exts[0] << " " << exts[1];
  }
}

TEST(ScanTreeTest, CustomExtensionsReplaceTheDefaults) {
  TempDir t;
  WriteFile(t / "c/a.jpg", "1");
  ScanOptions o;
  o.extensions = {"png"};
  ScanResult r;
  Status s = ScanTree(t.path(), o, &r);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.ToString().find(".png"), std::string::npos) << s.ToString();
}

TEST(ScanTreeTest, FlatNamesAreRelativeToRoot) {
  TempDir t;
  WriteFile(t / "top.jpg", "1");
  WriteFile(t / "d/x.png", "2");
  WriteFile(t / "d/e/y.jpg", "3");
  WriteFile(t / "d-e/z.jpg", "4");
  WriteFile(t / "d/skip.txt", "5");
  ScanOptions o;
  o.flat = true;
  ScanResult r;
  ASSERT_TRUE(ScanTree(t.path(), o, &r).ok());
  EXPECT_TRUE(r.classes.empty());
  EXPECT_EQ(Names(r), (std::vector<std::string>{"top.jpg", "d/x.png",
                                                "d-e/z.jpg", "d/e/y.jpg"}));
  for (const auto& e : r.entries) EXPECT_EQ(e.label, kNoLabel) << e.name;
  EXPECT_EQ(r.PathOf(0), t.path() + "/top.jpg");
}

TEST(ScanTreeTest, FlatTreeWithoutFilesIsEmptyNotAnError) {
  TempDir t;
  test::MakeDirs(t / "d/e");
  ScanOptions o;
  o.flat = true;
  ScanResult r;
  ASSERT_TRUE(ScanTree(t.path(), o, &r).ok());
  EXPECT_TRUE(r.entries.empty());
}

TEST(ScanTreeTest, NoClassDirectoriesIsInvalidArgument) {
  TempDir t;
  WriteFile(t / "a.jpg", "1");
  ScanResult r;
  Status s = ScanTree(t.path(), ScanOptions(), &r);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.ToString().find("no class directories"), std::string::npos)
      << s.ToString();
}

TEST(ScanTreeTest, MissingRootIsNotFound) {
  TempDir t;
  ScanResult r;
  Status s = ScanTree(t / "nope", ScanOptions(), &r);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_NE(s.ToString().find("nope"), std::string::npos) << s.ToString();
}

TEST(ScanTreeTest, RootThatIsAFileIsInvalidArgument) {
  TempDir t;
  WriteFile(t / "f.jpg", "1");
  ScanResult r;
  Status s = ScanTree(t / "f.jpg", ScanOptions(), &r);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  ScanOptions o;
  o.flat = true;
  s = ScanTree(t / "f.jpg", o, &r);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
}

TEST(ScanTreeTest, ExcludedDirectoryIsNotScanned) {
  TempDir t;
  WriteFile(t / "c/a.jpg", "1");
  WriteFile(t / "c/out/data.jpg", "2");
  WriteFile(t / "out2/x.jpg", "3");
  struct stat st;
  ASSERT_EQ(stat((t / "c/out").c_str(), &st), 0);
  ScanOptions o;
  o.exclude_dev = st.st_dev;
  o.exclude_ino = st.st_ino;
  ScanResult r;
  ASSERT_TRUE(ScanTree(t.path(), o, &r).ok());
  EXPECT_EQ(Names(r), (std::vector<std::string>{"c/a.jpg", "out2/x.jpg"}));
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("c/out"), std::string::npos) << r.warnings[0];

  // An excluded directory directly under the root is not a class.
  ASSERT_EQ(stat((t / "out2").c_str(), &st), 0);
  o.exclude_dev = st.st_dev;
  o.exclude_ino = st.st_ino;
  ASSERT_TRUE(ScanTree(t.path(), o, &r).ok());
  EXPECT_EQ(r.classes, (std::vector<std::string>{"c"}));
  EXPECT_EQ(Names(r), (std::vector<std::string>{"c/a.jpg", "c/out/data.jpg"}));

  // Also in flat mode.
  ASSERT_EQ(stat((t / "c/out").c_str(), &st), 0);
  o.exclude_dev = st.st_dev;
  o.exclude_ino = st.st_ino;
  o.flat = true;
  ASSERT_TRUE(ScanTree(t.path(), o, &r).ok());
  EXPECT_EQ(Names(r), (std::vector<std::string>{"c/a.jpg", "out2/x.jpg"}));
}

TEST(ScanTreeTest, ByteExactNonUtf8AndLongNames) {
  TempDir t;
  const std::string long_name = std::string(251, 'n') + ".jpg";  // 255 bytes
  const std::string bad = "\x80\xfe\xc0\xaf.jpg";
  WriteFile(t / ("c/" + long_name), "1");
  WriteFile(t / ("c/" + bad), "2");
  WriteFile(t / "\xe9t\xe9/x.png", "3");  // Latin-1 class name
  ScanResult r;
  ASSERT_TRUE(ScanTree(t.path(), ScanOptions(), &r).ok());
  EXPECT_EQ(r.classes, (std::vector<std::string>{"c", "\xe9t\xe9"}));
  EXPECT_EQ(Entries(r), (EntryList{{"c/" + long_name, 0},
                                   {"c/" + bad, 0},
                                   {"\xe9t\xe9/x.png", 1}}));
}

// --- Parity with Python -----------------------------------------------------

// Python: the classes and samples of ImageFolder(argv[1]) (torchvision's own
// when importable, else, or with argv[2] == "inline", a reimplementation of
// its find_classes / make_dataset), or of the flat walk with argv[2] ==
// "flat".  Paths are
// printed as hex of their bytes, relative to the root.
constexpr char kImageFolderScript[] = R"PY(
import os, sys
root = os.fsdecode(bytes.fromhex(sys.argv[1]))
mode = sys.argv[2]
EXT = ('.jpg', '.jpeg', '.png', '.ppm', '.bmp', '.pgm', '.tif', '.tiff',
       '.webp')
def walk_samples(top, label):
    out = []
    for d, _, fnames in sorted(os.walk(top, followlinks=True)):
        for f in sorted(fnames):
            p = os.path.join(d, f)
            if p.lower().endswith(EXT):
                out.append((p, label))
    return out
source = 'inline'
if mode == 'flat':
    classes = []
    samples = walk_samples(root, 4294967295)
else:
    try:
        if mode == 'inline':
            raise ImportError('inline reimplementation requested')
        from torchvision.datasets import ImageFolder
        ds = ImageFolder(root, loader=lambda p: None)
        classes, samples, source = ds.classes, ds.samples, 'torchvision'
    except ImportError:
        classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
        samples = []
        for i, c in enumerate(classes):
            samples += walk_samples(os.path.join(root, c), i)
print('SOURCE', source)
for c in classes:
    print('C', os.fsencode(c).hex())
prefix = root + '/'
for p, label in samples:
    assert p.startswith(prefix), p
    print('S', os.fsencode(p[len(prefix):]).hex(), label)
)PY";

struct PythonScan {
  std::string source;
  std::vector<std::string> classes;
  EntryList entries;
};

::testing::AssertionResult RunPythonScan(const std::string& root,
                                         const std::string& mode,
                                         PythonScan* out) {
  test::CommandResult r =
      test::Run({kPython, "-c", kImageFolderScript, Hex(root), mode});
  if (r.exit_code != 0) {
    return ::testing::AssertionFailure()
           << "python exited " << r.exit_code << ": " << r.err;
  }
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string kind, hex;
    fields >> kind >> hex;
    if (kind == "SOURCE") {
      out->source = hex;
    } else if (kind == "C") {
      out->classes.push_back(Unhex(hex));
    } else if (kind == "S") {
      uint64_t label = 0;
      fields >> label;
      out->entries.emplace_back(Unhex(hex), static_cast<uint32_t>(label));
    } else {
      return ::testing::AssertionFailure() << "unexpected line: " << line;
    }
  }
  return ::testing::AssertionSuccess();
}

// A tree whose names sort differently byte-wise, naively, and in Python.
void MakeEdgeCaseTree(const TempDir& t, const std::string& root) {
  const std::vector<std::string> files = {
      "B/one.jpg",
      "a/two.jpg",
      "a/b/nested.png",
      "a/b/deeper/x.jpg",
      "a/b-c/y.jpg",
      "a-b/three.jpeg",
      "\xc3\xa9/e.jpg",  // é
      "z/\xc3\xa9.jpg",  // é sorts after z
      "z/z.jpg",
      "z/\xff.jpg",              // U+DCFF
      "z/\xf0\x9f\x98\x80.jpg",  // U+1F600: after U+DCFF in Python
      "z/\xee\x80\x80.jpg",      // U+E000: after U+DCFF in Python
      "z/\x80.jpg",              // U+DC80: after é in Python
      "z/\xe2\x82"
      "A.jpg",               // invalid continuation
      "z/\xe2\x82\xac.jpg",  // €
      "z/\xc0\xaf.jpg",      // overlong
      "z/\xed\x9f\xbf.jpg",  // U+D7FF
      "z/.jpg",
      "z/UPPER.JPG",
      "z/Mixed.TiFf",
      "z/notes.txt",
      "z/xjpg",
      ".hidden/h.png",
      "c/top.bmp",
      "c/sub/deeper/d.webp",
      "c/sub/s.ppm",
      "c/sub-x/x.pgm",
      "c/sub-x/skip.gif",
      "c/\xff\x64ir/f.jpg",  // non-UTF-8 directory name
      "c/\xf0\x9f\x98\x80"
      "dir/g.jpg",
      "\xff"
      "class/k.jpg",
      "\xf0\x9f\x98\x80"
      "class/k.jpg",
  };
  for (size_t i = 0; i < files.size(); ++i) {
    WriteFile(root + "/" + files[i], std::to_string(i));
  }
  WriteFile(t / "elsewhere/linked.tif", "l");
  WriteFile(t / "elsewhere/in/deep.jpg", "d");
  test::Symlink(t / "elsewhere", root + "/c/sub/link");  // symlinked subdir
  test::Symlink(t / "elsewhere", root + "/linkclass");   // symlinked class
  test::Symlink(root + "/z/z.jpg", root + "/c/filelink.jpg");
  test::Symlink(t / "missing", root + "/c/dangling.jpg");
  test::Symlink(t / "missing", root + "/danglingclass");
}

// ImageFolderLess puts each class's names (ImageFolder's order, from
// Python) back in that order from a scrambled copy.
void ExpectImageFolderLessSorts(const EntryList& entries) {
  std::map<uint32_t, std::vector<std::string>> by_class;
  for (const auto& [name, label] : entries) by_class[label].push_back(name);
  for (const auto& [label, names] : by_class) {
    SCOPED_TRACE(label);
    for (size_t k = 1; k < names.size(); ++k) {
      EXPECT_TRUE(ImageFolderLess(names[k - 1], names[k]))
          << names[k - 1] << " < " << names[k];
      EXPECT_FALSE(ImageFolderLess(names[k], names[k - 1]));
    }
    std::vector<std::string> scrambled(names.rbegin(), names.rend());
    std::rotate(scrambled.begin(), scrambled.begin() + scrambled.size() / 3,
                scrambled.end());
    std::sort(scrambled.begin(), scrambled.end(), ImageFolderLess);
    EXPECT_EQ(scrambled, names);
  }
}

TEST(ScanParityTest, MatchesImageFolder) {
  if (!HavePython()) GTEST_SKIP() << kPython << " not found";
  TempDir t;
  const std::string root = t / "root";
  MakeEdgeCaseTree(t, root);

  PythonScan py;
  ASSERT_TRUE(RunPythonScan(root, "classes", &py));
  ASSERT_FALSE(py.entries.empty());
  std::cout << "[          ] python reference: " << py.source << "\n";

  ScanResult r;
  Status s = ScanTree(root, ScanOptions(), &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(r.classes, py.classes);
  EXPECT_EQ(Entries(r), py.entries) << "ufspack:\n"
                                    << ShowList(Entries(r)) << "python:\n"
                                    << ShowList(py.entries);
  // The tree must exercise the differences from byte order.
  std::vector<std::string> byte_sorted = r.classes;
  std::sort(byte_sorted.begin(), byte_sorted.end());
  EXPECT_NE(byte_sorted, r.classes);
  EXPECT_TRUE(std::find(r.classes.begin(), r.classes.end(), ".hidden") !=
              r.classes.end());
  EXPECT_TRUE(std::find(r.classes.begin(), r.classes.end(), "linkclass") !=
              r.classes.end());

  // The inline reimplementation (used where torchvision is missing) agrees.
  PythonScan inline_py;
  ASSERT_TRUE(RunPythonScan(root, "inline", &inline_py));
  EXPECT_EQ(inline_py.source, "inline");
  EXPECT_EQ(inline_py.classes, py.classes);
  EXPECT_EQ(inline_py.entries, py.entries);
  ExpectImageFolderLessSorts(py.entries);
}

TEST(ScanParityTest, FlatMatchesSortedWalk) {
  if (!HavePython()) GTEST_SKIP() << kPython << " not found";
  TempDir t;
  const std::string root = t / "root";
  MakeEdgeCaseTree(t, root);
  WriteFile(root + "/top.jpg", "top");

  PythonScan py;
  ASSERT_TRUE(RunPythonScan(root, "flat", &py));
  ScanOptions o;
  o.flat = true;
  ScanResult r;
  Status s = ScanTree(root, o, &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(r.classes.empty());
  EXPECT_EQ(Entries(r), py.entries) << "ufspack:\n"
                                    << ShowList(Entries(r)) << "python:\n"
                                    << ShowList(py.entries);
  ExpectImageFolderLessSorts(py.entries);
}

// PyFsLess against Python's sorted(key=os.fsdecode) on many byte strings
// built from bytes around every UTF-8 boundary.
TEST(ScanParityTest, PyFsLessMatchesPythonSort) {
  if (!HavePython()) GTEST_SKIP() << kPython << " not found";
  const std::vector<std::string> atoms = {"a",
                                          "B",
                                          "-",
                                          "/",
                                          "\x7f",
                                          "\x80",
                                          "\xbf",
                                          "\xc0",
                                          "\xc1",
                                          "\xc2",
                                          "\xc3\xa9",
                                          "\xdf\xbf",
                                          "\xe0",
                                          "\xa0",
                                          "\xe0\xa0\x80",
                                          "\xed",
                                          "\xed\x9f\xbf",
                                          "\xee\x80\x80",
                                          "\xef\xbf\xbf",
                                          "\xf0",
                                          "\x90",
                                          "\xf0\x90\x80\x80",
                                          "\xf0\x9f\x98\x80",
                                          "\xf4",
                                          "\xf4\x8f\xbf\xbf",
                                          "\xf5",
                                          "\xff",
                                          "\xe2\x82",
                                          "\xe2\x82\xac"};
  uint64_t state = 12345;
  auto next = [&state]() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 33;
  };
  std::vector<std::string> names;
  for (int i = 0; i < 3000; ++i) {
    std::string n;
    const size_t len = next() % 5;
    for (size_t k = 0; k < len; ++k) n += atoms[next() % atoms.size()];
    names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());

  std::string hexes;
  for (const auto& n : names) hexes += Hex(n) + "\n";
  TempDir t;
  WriteFile(t / "names", hexes);
  test::CommandResult r = test::Run(
      {kPython, "-c",
       "import os, sys\n"
       "names = [bytes.fromhex(l.strip()) for l in open(sys.argv[1])]\n"
       "for n in sorted(names, key=os.fsdecode): print(n.hex())\n",
       t / "names"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> expected;
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line)) expected.push_back(Unhex(line));
  ASSERT_EQ(expected.size(), names.size());

  std::vector<std::string> ours = names;
  std::sort(ours.begin(), ours.end(), PyFsLess);
  size_t mismatches = 0;
  for (size_t i = 0; i < ours.size(); ++i) {
    if (ours[i] != expected[i] && mismatches++ < 10) {
      ADD_FAILURE() << "position " << i << ": ours " << Show(ours[i])
                    << ", python " << Show(expected[i]);
    }
  }
  EXPECT_EQ(mismatches, 0u);
  EXPECT_NE(names, expected);  // byte order differs somewhere
}

}  // namespace
}  // namespace ufspack
