// Copyright 2026 The ufspack Authors.
//
// Tests for the POSIX file layer (NewPosixRandomAccessFile, MapFile): only
// regular files are opened, and opening never blocks, whatever sits at the
// path.
#include "ufspack/file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "testutil.h"

namespace ufspack {
namespace {

using test::TempDir;

// A FIFO with no writer blocks open(O_RDONLY) forever; the open must not
// wait for one, and the FIFO is refused by type, naming the path.
TEST(PosixRandomAccessFileTest, FifoIsRefusedWithoutBlocking) {
  TempDir t;
  const std::string path = t / "data.ufs";
  ASSERT_NO_FATAL_FAILURE(test::MakeFifo(path));
  Status s;
  std::unique_ptr<RandomAccessFile> f;
  EXPECT_TRUE(test::ReturnsWithin(
      10, [&] { s = NewPosixRandomAccessFile(path, &f); }, {path}))
      << "NewPosixRandomAccessFile blocked on a FIFO";
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_EQ(s.message(), path + ": not a regular file (FIFO)");
  EXPECT_EQ(f, nullptr);
}

TEST(MapFileTest, FifoIsRefusedWithoutBlocking) {
  TempDir t;
  const std::string path = t / "index.ufs";
  ASSERT_NO_FATAL_FAILURE(test::MakeFifo(path));
  Status s;
  std::unique_ptr<Region> r;
  EXPECT_TRUE(test::ReturnsWithin(10, [&] { s = MapFile(path, &r); }, {path}))
      << "MapFile blocked on a FIFO";
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_EQ(s.message(), path + ": not a regular file (FIFO)");
  EXPECT_EQ(r, nullptr);
}

TEST(FileTest, DirectoryAndDeviceAreRefusedByType) {
  TempDir t;
  std::unique_ptr<Region> r;
  Status s = MapFile(t.path(), &r);
  EXPECT_EQ(s.message(), t.path() + ": not a regular file (directory)");
  std::unique_ptr<RandomAccessFile> f;
  s = NewPosixRandomAccessFile("/dev/zero", &f);
  EXPECT_EQ(s.message(), "/dev/zero: not a regular file (character device)");
}

// A regular file opens (the O_NONBLOCK open is cleared again) and reads.
TEST(FileTest, RegularFileOpensAndReads) {
  TempDir t;
  const std::string path = t / "f";
  test::WriteFile(path, "hello");
  std::unique_ptr<RandomAccessFile> f;
  ASSERT_TRUE(NewPosixRandomAccessFile(path, &f).ok());
  char buf[8];
  size_t n = 0;
  ASSERT_TRUE(f->Read(1, sizeof(buf), buf, &n).ok());
  EXPECT_EQ(std::string(buf, n), "ello");
  std::unique_ptr<Region> r;
  ASSERT_TRUE(MapFile(path, &r).ok());
  EXPECT_EQ(r->bytes(), "hello");
}

}  // namespace
}  // namespace ufspack
