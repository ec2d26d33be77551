// Copyright 2026 The ufspack Authors.
//
// Mount points (mount/src/mountpoint.h, CheckMountpoint and Unmount in
// ufspack/mount.h): the checks before a mount and the refusals of umount,
// none of which needs FUSE.  Real mounts: tests/python/test_mount.py.
#include "mountpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "testutil.h"
#include "ufspack/mount.h"

namespace ufspack {
namespace mount {
namespace {

TEST(MountpointTest, MountinfoEscapesAreDecoded) {
  EXPECT_EQ(UnescapeMountField("/mnt/a\\040b"), "/mnt/a b");
  EXPECT_EQ(UnescapeMountField("/t\\011ab\\012nl\\134bs"), "/t\tab\nnl\\bs");
  EXPECT_EQ(UnescapeMountField("/plain"), "/plain");
  EXPECT_EQ(UnescapeMountField("/short\\04"), "/short\\04");
}

TEST(MountpointTest, AbsolutePathKeepsTheLastComponentUnresolved) {
  test::TempDir tmp;
  test::MakeDirs(tmp / "d/m");
  char real[4096];
  ASSERT_NE(realpath(tmp.path().c_str(), real), nullptr);
  std::string abs;
  ASSERT_TRUE(AbsoluteMountPath(tmp / "d/m/", &abs).ok());
  EXPECT_EQ(abs, std::string(real) + "/d/m");
  // The last component need not exist (a stale mount cannot be stat'ed).
  ASSERT_TRUE(AbsoluteMountPath(tmp / "d/gone", &abs).ok());
  EXPECT_EQ(abs, std::string(real) + "/d/gone");
  ASSERT_TRUE(AbsoluteMountPath("/", &abs).ok());
  EXPECT_EQ(abs, "/");
  EXPECT_FALSE(AbsoluteMountPath(tmp / "nodir/m", &abs).ok());
}

TEST(MountpointTest, OnlyAnEmptyDirectoryTakesAMount) {
  test::TempDir tmp;
  test::MakeDirs(tmp / "empty");
  EXPECT_TRUE(CheckMountpoint(tmp / "empty").ok());
  Status s = CheckMountpoint(tmp / "missing");
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_TRUE(test::Contains(s, "no such directory")) << s.ToString();
  test::WriteFile(tmp / "full/x", "x");
  s = CheckMountpoint(tmp / "full");
  EXPECT_TRUE(test::Contains(s, "not empty")) << s.ToString();
  s = CheckMountpoint(tmp / "full/x");
  EXPECT_TRUE(test::Contains(s, "not a directory")) << s.ToString();
}

TEST(MountpointTest, StaleMountMessageSaysHowToClearIt) {
  const std::string m = StaleMountMessage("/mnt/t");
  EXPECT_NE(m.find("stale mount"), std::string::npos) << m;
  EXPECT_NE(m.find("fusermount3 -u /mnt/t"), std::string::npos) << m;
  EXPECT_NE(m.find("ufspack umount /mnt/t"), std::string::npos) << m;
}

TEST(MountpointTest, UmountRefusesWhatIsNotAUfspackMount) {
  test::TempDir tmp;
  test::MakeDirs(tmp / "plain");
  Status s = Unmount(tmp / "plain");
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_TRUE(test::Contains(s, "not a mount point")) << s.ToString();
  std::string type;
  if (MountedFsType("/proc", &type).ok()) {
    s = Unmount("/proc");
    EXPECT_TRUE(s.IsInvalidArgument());
    EXPECT_TRUE(test::Contains(s, "not a ufspack mount (a proc file system"))
        << s.ToString();
  }
}

}  // namespace
}  // namespace mount
}  // namespace ufspack
