// Copyright 2026 The ufspack Authors.
#include "publish.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <random>
#include <utility>
#include <vector>

#include "ufspack/format.h"
#include "ufspack/manifest.h"
#include "ufspack/posix_io.h"

namespace ufspack {
namespace internal {
namespace {

bool IsTempName(std::string_view name) {
  return name.rfind(kDataTmpPrefix, 0) == 0 ||
         name.rfind(kIndexTmpPrefix, 0) == 0 ||
         name.rfind(kManifestTmpPrefix, 0) == 0 ||
         name.rfind(kRecordsTmpPrefix, 0) == 0 ||
         name.rfind(kNamesTmpPrefix, 0) == 0 ||
         name.rfind(kHashesTmpPrefix, 0) == 0 ||
         name.rfind(kLookupTmpPrefix, 0) == 0;
}

void RemoveStaleTemps(int dir_fd) {
  int fd = ::dup(dir_fd);
  if (fd < 0) return;
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    ::close(fd);
    return;
  }
  std::vector<std::string> stale;
  while (struct dirent* e = ::readdir(d)) {
    if (IsTempName(e->d_name)) stale.emplace_back(e->d_name);
  }
  ::closedir(d);
  for (const auto& n : stale) ::unlinkat(dir_fd, n.c_str(), 0);
}

// Reads the pack id from the header of `name` in `dir_fd`: an index.ufs
// when `is_index`, else a data file.  False if absent, not a regular file
// (opened O_NONBLOCK, so a FIFO planted there cannot block) or not valid.
bool ReadPackId(int dir_fd, const char* name, bool is_index, PackId* id) {
  int fd = ::openat(dir_fd, name,
                    O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return false;
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return false;
  }
  char buf[IndexHeader::kEncodedLength];
  const size_t want =
      is_index ? IndexHeader::kEncodedLength : DataHeader::kEncodedLength;
  ssize_t n;
  do {
    n = ::pread(fd, buf, want, 0);
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  if (n != static_cast<ssize_t>(want)) return false;
  std::string_view in(buf, want);
  if (is_index) {
    IndexHeader h;
    if (!h.DecodeFrom(&in).ok()) return false;
    *id = h.pack_id;
  } else {
    DataHeader h;
    if (!h.DecodeFrom(&in).ok()) return false;
    *id = h.pack_id;
  }
  return true;
}

// A build killed between its two renames leaves its new data.ufs beside the
// previous index.ufs, with the previous data file linked as .data.ufs.prev:
// put the previous pack back together.  Any other .data.ufs.prev is a
// leftover of a publish that completed, and is removed.
void RestoreInterruptedPublish(int dir_fd) {
  PackId prev_id, index_id, data_id;
  if (!ReadPackId(dir_fd, kPrevDataFileName, false, &prev_id)) {
    ::unlinkat(dir_fd, kPrevDataFileName, 0);
    return;
  }
  if (ReadPackId(dir_fd, kIndexFileName, true, &index_id) &&
      index_id == prev_id &&
      !(ReadPackId(dir_fd, kDataFileName, false, &data_id) &&
        data_id == index_id) &&
      ::renameat(dir_fd, kPrevDataFileName, dir_fd, kDataFileName) == 0) {
    ::fsync(dir_fd);
    return;
  }
  ::unlinkat(dir_fd, kPrevDataFileName, 0);
}

}  // namespace

bool IsPackFileName(std::string_view name) {
  return name == kDataFileName || name == kIndexFileName ||
         name == kManifestFileName || IsTempName(name);
}

Status LockPackDir(const std::string& dir, int* dir_fd, bool* locked) {
  UFSPACK_RETURN_IF_ERROR(MakeDirs(dir));
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(dir, errno);
  *locked = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  if (!*locked && errno == EWOULDBLOCK) {
    ::close(fd);
    return Status::InvalidArgument(
        dir + ": another ufspack build is writing to this directory");
  }
  // Any other flock error: a file system without flock (some network
  // mounts); carry on unlocked.
  *dir_fd = fd;
  return Status::OK();
}

void RecoverPackDir(int dir_fd) {
  RemoveStaleTemps(dir_fd);
  RestoreInterruptedPublish(dir_fd);
}

Status CreateTemp(const std::string& dir, const char* prefix, int* fd,
                  std::string* path) {
  static const char kChars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::random_device rd;
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string name = dir + "/" + prefix;
    for (int k = 0; k < 8; ++k) name.push_back(kChars[rd() % 36]);
    int f = ::open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (f >= 0) {
      *fd = f;
      *path = name;
      return Status::OK();
    }
    if (errno != EEXIST)
      return Status::FromErrno(name + ": cannot create", errno);
  }
  return Status::IOError(dir + ": cannot create a temporary file");
}

// --- Publisher
// ----------------------------------------------------------------

Publisher::Publisher(int dir_fd, std::string dir, std::string data_tmp,
                     std::string index_tmp)
    : dir_fd_(dir_fd),
      dir_(std::move(dir)),
      data_tmp_(std::move(data_tmp)),
      index_tmp_(std::move(index_tmp)),
      data_final_(dir_ + "/" + kDataFileName),
      index_final_(dir_ + "/" + kIndexFileName),
      prev_(dir_ + "/" + kPrevDataFileName) {}

Status Publisher::Publish() {
  LinkPrevious();
  UFSPACK_RETURN_IF_ERROR(RenameData());
  UFSPACK_RETURN_IF_ERROR(RenameIndex());
  RemovePrevious();
  return SyncDir();
}

void Publisher::LinkPrevious() {
  ::unlink(prev_.c_str());
  have_prev_ = ::link(data_final_.c_str(), prev_.c_str()) == 0;
}

Status Publisher::RenameData() {
  if (::rename(data_tmp_.c_str(), data_final_.c_str()) != 0) {
    const int e = errno;
    if (have_prev_) ::unlink(prev_.c_str());
    return Status::FromErrno("rename " + data_tmp_ + " -> " + data_final_, e);
  }
  data_tmp_.clear();
  return Status::OK();
}

Status Publisher::RenameIndex() {
  if (::rename(index_tmp_.c_str(), index_final_.c_str()) != 0) {
    const int e = errno;
    const bool restored =
        have_prev_ && ::rename(prev_.c_str(), data_final_.c_str()) == 0;
    return Status::FromErrno(
        "rename " + index_tmp_ + " -> " + index_final_ +
            (restored ? " (the previous pack is kept)"
                      : " (the previous pack is lost: new data.ufs, previous "
                        "index.ufs)"),
        e);
  }
  index_tmp_.clear();
  return Status::OK();
}

void Publisher::RemovePrevious() {
  if (have_prev_) ::unlink(prev_.c_str());
}

Status Publisher::SyncDir() { return internal::SyncDir(dir_fd_, dir_); }

}  // namespace internal
}  // namespace ufspack
