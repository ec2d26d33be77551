// Copyright 2026 The ufspack Authors.
//
// The publishing protocol (packer/src/publish.h; docs/format.md,
// "Publishing a pack"), step by step: stopping after any step, as a crash
// would, leaves the previous pack, the new pack, or a pair the reader
// refuses -- never one it misreads -- and the next build's recovery
// (step 2) leaves a complete pack.  A failing rename leaves what publish.h
// says.
#include "publish.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string>
#include <vector>

#include "testutil.h"
#include "ufspack/builder.h"
#include "ufspack/format.h"
#include "ufspack/reader.h"

namespace ufspack {
namespace internal {
namespace {

using test::Exists;
using test::ReadFile;
using test::TempDir;
using test::WriteFile;

// Publishes a pack of one record "x" holding `content` into `dir`.
void BuildPackWith(const std::string& dir, const std::string& content) {
  PackWriterOptions o;
  o.flat = true;
  std::unique_ptr<PackWriter> w;
  ASSERT_TRUE(PackWriter::Create(dir, o, &w).ok());
  ASSERT_TRUE(w->Add("x", kNoLabel, content).ok());
  ASSERT_TRUE(w->Finish().ok());
}

// What a reader makes of `dir`: the content of record "x" ("old", "new"),
// or "refused" when Open fails cleanly (NotFound or Corruption).
std::string Opened(const std::string& dir) {
  std::unique_ptr<Reader> r;
  Status s = Reader::Open(dir, ReaderOptions(), &r);
  if (!s.ok()) {
    EXPECT_TRUE(s.IsNotFound() || s.IsCorruption()) << s.ToString();
    return "refused";
  }
  EXPECT_EQ(r->size(), 1u);
  std::string bytes;
  s = r->Read(0, &bytes);
  EXPECT_TRUE(s.ok()) << s.ToString();  // a pair that opens reads right
  return bytes;
}

// A directory holding the pack "old" (unless `with_previous` is false),
// locked, with the complete temporaries of the pack "new" beside it.
class Scene {
 public:
  explicit Scene(bool with_previous) { Prepare(with_previous); }
  ~Scene() {
    if (dir_fd_ >= 0) ::close(dir_fd_);
  }
  Scene(const Scene&) = delete;
  Scene& operator=(const Scene&) = delete;

  void Prepare(bool with_previous) {
    if (with_previous) BuildPackWith(dir(), "old");
    BuildPackWith(t_ / "stage", "new");
    data_tmp_ = dir() + "/" + kDataTmpPrefix + "testtest";
    index_tmp_ = dir() + "/" + kIndexTmpPrefix + "testtest";
    WriteFile(data_tmp_, ReadFile(t_ / "stage/data.ufs"));
    WriteFile(index_tmp_, ReadFile(t_ / "stage/index.ufs"));
    bool locked = false;
    ASSERT_TRUE(LockPackDir(dir(), &dir_fd_, &locked).ok());
    ASSERT_TRUE(locked);
  }
  std::string dir() const { return t_ / "out"; }
  std::unique_ptr<Publisher> NewPublisher() {
    return std::make_unique<Publisher>(dir_fd_, dir(), data_tmp_, index_tmp_);
  }
  bool HasPrev() const { return Exists(dir() + "/" + kPrevDataFileName); }
  // The next build: step 2 with the lock (already held here).
  void Recover() { RecoverPackDir(dir_fd_); }

  const std::string& data_tmp() const { return data_tmp_; }
  const std::string& index_tmp() const { return index_tmp_; }

 private:
  TempDir t_;
  int dir_fd_ = -1;
  std::string data_tmp_;
  std::string index_tmp_;
};

TEST(PublishTest, PublishReplacesThePackAndLeavesNothingElse) {
  Scene sc(true);
  auto p = sc.NewPublisher();
  Status s = p->Publish();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(Opened(sc.dir()), "new");
  EXPECT_FALSE(sc.HasPrev());
  EXPECT_TRUE(test::PackTempFiles(sc.dir()).empty());
  EXPECT_EQ(p->data_tmp(), "");
  EXPECT_EQ(p->index_tmp(), "");
}

// A crash after each step: the state the reader sees, then what the next
// build's recovery makes of it.
TEST(PublishTest, EveryStepLeavesTheOldOrTheNewPack) {
  struct Case {
    int steps;  // steps completed before the "crash"
    const char* seen;
    const char* after_recovery;
  };
  const Case cases[] = {
      {0, "old", "old"},  // before step 8: temporaries only
      {1, "old", "old"},  // linked .data.ufs.prev
      {2, "old", "old"},  // data renamed: index.ufs + .data.ufs.prev
      {3, "new", "new"},  // index renamed
      {4, "new", "new"},  // .data.ufs.prev removed
      {5, "new", "new"},  // directory synced
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("steps " + std::to_string(c.steps));
    Scene sc(true);
    auto p = sc.NewPublisher();
    if (c.steps >= 1) p->LinkPrevious();
    if (c.steps >= 2) {
      ASSERT_TRUE(p->RenameData().ok());
    }
    if (c.steps >= 3) {
      ASSERT_TRUE(p->RenameIndex().ok());
    }
    if (c.steps >= 4) p->RemovePrevious();
    if (c.steps >= 5) {
      ASSERT_TRUE(p->SyncDir().ok());
    }
    EXPECT_EQ(Opened(sc.dir()), c.seen);
    if (c.steps == 2) {
      // The reader pairs the previous index with .data.ufs.prev.
      std::unique_ptr<Reader> r;
      ASSERT_TRUE(Reader::Open(sc.dir(), ReaderOptions(), &r).ok());
      EXPECT_EQ(r->info().data_path, sc.dir() + "/" + kPrevDataFileName);
    }
    sc.Recover();
    EXPECT_EQ(Opened(sc.dir()), c.after_recovery);
    EXPECT_FALSE(sc.HasPrev());
    EXPECT_TRUE(test::PackTempFiles(sc.dir()).empty());
  }
}

// Without hard links (LinkPrevious linked nothing) a crash between the
// renames leaves new data.ufs with the previous index.ufs: refused, by
// pack id, before and after recovery.
TEST(PublishTest, WithoutHardLinksACrashBetweenTheRenamesIsRefused) {
  Scene sc(true);
  auto p = sc.NewPublisher();
  ASSERT_TRUE(p->RenameData().ok());
  EXPECT_EQ(Opened(sc.dir()), "refused");
  sc.Recover();  // nothing to put back
  EXPECT_EQ(Opened(sc.dir()), "refused");
}

TEST(PublishTest, FirstPublishIntoAnEmptyDirectory) {
  Scene sc(false);
  auto p = sc.NewPublisher();
  p->LinkPrevious();
  EXPECT_FALSE(sc.HasPrev());
  EXPECT_EQ(Opened(sc.dir()), "refused");
  ASSERT_TRUE(p->RenameData().ok());
  EXPECT_EQ(Opened(sc.dir()), "refused");  // data.ufs without index.ufs
  ASSERT_TRUE(p->RenameIndex().ok());
  EXPECT_EQ(Opened(sc.dir()), "new");
}

TEST(PublishTest, DataRenameFailureKeepsTheOldPack) {
  Scene sc(true);
  ASSERT_EQ(::unlink(sc.data_tmp().c_str()), 0);  // the rename gets ENOENT
  auto p = sc.NewPublisher();
  Status s = p->Publish();
  EXPECT_EQ(s.errno_value(), ENOENT) << s.ToString();
  EXPECT_NE(s.ToString().find("rename " + sc.data_tmp() + " -> " + sc.dir() +
                              "/data.ufs"),
            std::string::npos)
      << s.ToString();
  EXPECT_EQ(p->data_tmp(), sc.data_tmp());  // still the caller's to remove
  EXPECT_EQ(p->index_tmp(), sc.index_tmp());
  EXPECT_FALSE(sc.HasPrev());
  EXPECT_EQ(Opened(sc.dir()), "old");
}

TEST(PublishTest, IndexRenameFailureRestoresTheOldPack) {
  Scene sc(true);
  ASSERT_EQ(::unlink(sc.index_tmp().c_str()), 0);
  auto p = sc.NewPublisher();
  Status s = p->Publish();
  EXPECT_EQ(s.errno_value(), ENOENT) << s.ToString();
  EXPECT_NE(
      s.ToString().find(sc.dir() + "/index.ufs (the previous pack is kept)"),
      std::string::npos)
      << s.ToString();
  EXPECT_EQ(p->data_tmp(), "");
  EXPECT_EQ(p->index_tmp(), sc.index_tmp());
  EXPECT_FALSE(sc.HasPrev());
  EXPECT_EQ(Opened(sc.dir()), "old");
}

// The index rename fails and .data.ufs.prev cannot be put back either: the
// error says the previous pack is lost, and the pair left is refused.
TEST(PublishTest, IndexRenameFailureWithoutThePreviousDataIsRefused) {
  Scene sc(true);
  ASSERT_EQ(::unlink(sc.index_tmp().c_str()), 0);
  auto p = sc.NewPublisher();
  p->LinkPrevious();
  ASSERT_TRUE(p->RenameData().ok());
  ASSERT_EQ(::unlink((sc.dir() + "/" + kPrevDataFileName).c_str()), 0);
  Status s = p->RenameIndex();
  EXPECT_EQ(s.errno_value(), ENOENT) << s.ToString();
  EXPECT_NE(s.ToString().find("the previous pack is lost"), std::string::npos)
      << s.ToString();
  EXPECT_EQ(Opened(sc.dir()), "refused");
}

// Recovery deletes dead builds' temporaries and a .data.ufs.prev left by a
// publish that completed (data.ufs has the index's pack id).
TEST(PublishTest, RecoveryRemovesTemporariesAndAStalePrevious) {
  Scene sc(true);
  WriteFile(sc.dir() + "/" + kPrevDataFileName,
            ReadFile(sc.dir() + "/data.ufs"));
  sc.Recover();
  EXPECT_FALSE(sc.HasPrev());
  EXPECT_FALSE(Exists(sc.data_tmp()));
  EXPECT_FALSE(Exists(sc.index_tmp()));
  EXPECT_EQ(Opened(sc.dir()), "old");
}

TEST(PublishTest, ASecondLockIsRefused) {
  Scene sc(true);
  int fd = -1;
  bool locked = false;
  Status s = LockPackDir(sc.dir(), &fd, &locked);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_EQ(s.message(),
            sc.dir() + ": another ufspack build is writing to this directory");
  EXPECT_EQ(fd, -1);
}

TEST(PublishStepsTest, LockCreatesMissingDirectories) {
  TempDir t;
  int fd = -1;
  bool locked = false;
  ASSERT_TRUE(LockPackDir(t / "a/b/c", &fd, &locked).ok());
  EXPECT_GE(fd, 0);
  struct stat st;
  EXPECT_EQ(::stat((t / "a/b/c").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  ::close(fd);
  WriteFile(t / "file", "x");
  EXPECT_TRUE(LockPackDir(t / "file", &fd, &locked).IsInvalidArgument());
}

TEST(PublishStepsTest, CreateTempNamesAndMode) {
  TempDir t;
  const mode_t old_mask = ::umask(022);
  int fd = -1;
  std::string path;
  Status s = CreateTemp(t.path(), kDataTmpPrefix, &fd, &path);
  ::umask(old_mask);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ::close(fd);
  const std::string prefix = t.path() + "/" + kDataTmpPrefix;
  ASSERT_EQ(path.size(), prefix.size() + 8);
  EXPECT_EQ(path.compare(0, prefix.size(), prefix), 0);
  for (char c : path.substr(prefix.size())) {
    EXPECT_TRUE((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) << path;
  }
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
}

TEST(PublishStepsTest, PackFileNames) {
  EXPECT_TRUE(IsPackFileName("data.ufs"));
  EXPECT_TRUE(IsPackFileName("index.ufs"));
  EXPECT_TRUE(IsPackFileName(".data.ufs.tmp-abcdefgh"));
  EXPECT_TRUE(IsPackFileName(".index.ufs.tmp-abcdefgh"));
  EXPECT_FALSE(IsPackFileName(".data.ufs.prev"));
  EXPECT_FALSE(IsPackFileName("data.ufs.bak"));
  EXPECT_FALSE(IsPackFileName("x/data.ufs"));
}

}  // namespace
}  // namespace internal
}  // namespace ufspack
