// Copyright 2026 The ufspack Authors.
#include "safe_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <utility>
#include <vector>

#include "ufspack/file.h"

namespace ufspack {
namespace cache_internal {
namespace {

// DiskBytes counts planted trees to this depth only (a table has no
// subdirectories at all).
constexpr int kMaxDepth = 8;

constexpr char kTampered[] =
    " (the cache directory is damaged or was tampered with; nothing is "
    "read or written through it)";

std::string Found(const struct stat& st) {
  return std::string("a ") + FileTypeName(st.st_mode);
}

Status Unexpected(const std::string& path, const std::string& found,
                  const char* expected) {
  return Status::IOError(path + ": " + found + ", expected " + expected +
                         kTampered);
}

int OpenAt(int dir, const std::string& name, int flags, mode_t mode = 0) {
  int f;
  do {
    f = ::openat(dir, name.c_str(), flags, mode);
  } while (f < 0 && errno == EINTR);
  return f;
}

// The names in the open directory `dir_fd` (not "." and ".."), read
// through a descriptor of its own (readdir moves the open file's offset).
std::vector<std::string> NamesIn(int dir_fd) {
  std::vector<std::string> names;
  const int listing = OpenAt(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (listing < 0) return names;
  DIR* d = ::fdopendir(listing);
  if (d == nullptr) {
    ::close(listing);
    return names;
  }
  while (struct dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  return names;
}

// An entry of another owner (safe_dir.h: whose entries the cache uses).
Status Foreign(const std::string& path, const char* kind,
               const struct stat& st) {
  return Unexpected(
      path, std::string("a ") + kind + " of user " + std::to_string(st.st_uid),
      "one of root, this process's user or the cache "
      "directory's owner");
}

}  // namespace

SafeDir::~SafeDir() {
  if (fd_ >= 0) ::close(fd_);
}

SafeDir::SafeDir(SafeDir&& other) noexcept
    : fd_(other.fd_),
      path_(std::move(other.path_)),
      root_owner_(other.root_owner_) {
  other.fd_ = -1;
}

SafeDir& SafeDir::operator=(SafeDir&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    path_ = std::move(other.path_);
    root_owner_ = other.root_owner_;
    other.fd_ = -1;
  }
  return *this;
}

Status SafeDir::OpenRoot(const std::string& path, bool create, SafeDir* out) {
  if (create) {
    // Every missing component, as mkdir -p: the path is the user's.
    size_t pos = 0;
    while (pos != std::string::npos) {
      pos = path.find('/', pos + 1);
      const std::string partial = path.substr(0, pos);
      if (partial.empty()) continue;
      if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
        return Status::FromErrno(
            partial + ": cannot create the cache directory", errno);
      }
    }
  }
  const int f = OpenAt(AT_FDCWD, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (f < 0) {
    if (errno == ENOTDIR) {
      return Status::IOError(path +
                             ": not a directory (a cache directory "
                             "was expected)");
    }
    return Status::FromErrno(path, errno);
  }
  struct stat st;
  if (::fstat(f, &st) != 0) {
    const int e = errno;
    ::close(f);
    return Status::FromErrno(path, e);
  }
  SafeDir d;
  d.fd_ = f;
  d.path_ = path;
  d.root_owner_ = st.st_uid;
  *out = std::move(d);
  return Status::OK();
}

bool SafeDir::OwnedByUs(const struct stat& st) const {
  return st.st_uid == 0 || st.st_uid == ::geteuid() || st.st_uid == root_owner_;
}

Status SafeDir::Lstat(const std::string& name, struct stat* st) const {
  if (::fstatat(fd_, name.c_str(), st, AT_SYMLINK_NOFOLLOW) != 0) {
    return Status::FromErrno(PathOf(name), errno);
  }
  return Status::OK();
}

Status SafeDir::OpenDir(const std::string& name, bool create,
                        SafeDir* out) const {
  const std::string path = PathOf(name);
  if (create && ::mkdirat(fd_, name.c_str(), 0755) != 0 && errno != EEXIST) {
    return Status::FromErrno(path, errno);
  }
  const int f =
      OpenAt(fd_, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (f < 0) {
    const int e = errno;
    struct stat st;
    if ((e == ELOOP || e == ENOTDIR) &&
        ::fstatat(fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      return Unexpected(path, Found(st), "a directory");
    }
    return Status::FromErrno(path, e);
  }
  struct stat st;
  if (::fstat(f, &st) != 0) {
    const int e = errno;
    ::close(f);
    return Status::FromErrno(path, e);
  }
  if (!OwnedByUs(st)) {
    ::close(f);
    return Foreign(path, "directory", st);
  }
  SafeDir d;
  d.fd_ = f;
  d.path_ = path;
  d.root_owner_ = root_owner_;
  *out = std::move(d);
  return Status::OK();
}

Status SafeDir::OpenFile(const std::string& name, int flags, int* fd,
                         struct stat* st_out, bool any_links) const {
  const std::string path = PathOf(name);
  const int f = OpenAt(
      fd_, name, flags | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0644);
  if (f < 0) {
    const int e = errno;
    struct stat st;
    // ELOOP: a link; ENXIO: a FIFO nobody reads, opened for writing;
    // EISDIR: a directory opened for writing.
    if ((e == ELOOP || e == ENXIO || e == EISDIR || e == EWOULDBLOCK) &&
        ::fstatat(fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      return Unexpected(path, Found(st), "a regular file");
    }
    return Status::FromErrno(path, e);
  }
  struct stat st;
  Status s;
  if (::fstat(f, &st) != 0) {
    s = Status::FromErrno(path, errno);
  } else if (!S_ISREG(st.st_mode)) {
    s = Unexpected(path, Found(st), "a regular file");
  } else if (!OwnedByUs(st)) {
    s = Foreign(path, "file", st);
  } else if ((flags & O_ACCMODE) != O_RDONLY && !any_links &&
             st.st_nlink != 1) {
    s = Unexpected(path,
                   "a file with " + std::to_string(st.st_nlink) + " links",
                   "a file with one link");
  } else {
    const int fl = ::fcntl(f, F_GETFL);
    if (fl < 0 || ::fcntl(f, F_SETFL, fl & ~O_NONBLOCK) != 0) {
      s = Status::FromErrno(path + ": fcntl", errno);
    }
  }
  if (!s.ok()) {
    ::close(f);
    return s;
  }
  if (st_out != nullptr) *st_out = st;
  *fd = f;
  return Status::OK();
}

Status SafeDir::ReadFile(const std::string& name, size_t max,
                         std::string* out) const {
  int f;
  UFSPACK_RETURN_IF_ERROR(OpenFile(name, O_RDONLY, &f));
  out->clear();
  char buf[4096];
  Status s;
  for (;;) {
    const ssize_t n = ::read(f, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      s = Status::FromErrno(PathOf(name), errno);
      break;
    }
    if (n == 0) break;
    out->append(buf, static_cast<size_t>(n));
    if (out->size() > max) {
      s = Status::Corruption(PathOf(name) + ": larger than " +
                             std::to_string(max) + " bytes");
      break;
    }
  }
  ::close(f);
  return s;
}

Status SafeDir::WriteNewFile(const std::string& name,
                             const std::string& contents) const {
  int f;
  UFSPACK_RETURN_IF_ERROR(
      OpenFile(name, O_WRONLY | O_CREAT | O_EXCL | O_TRUNC, &f));
  Status s;
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n =
        ::pwrite(f, contents.data() + done, contents.size() - done,
                 static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      s = Status::FromErrno(PathOf(name), errno);
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (::close(f) != 0 && s.ok()) {
    s = Status::FromErrno(PathOf(name) + ": close", errno);
  }
  if (!s.ok()) ::unlinkat(fd_, name.c_str(), 0);
  return s;
}

Status SafeDir::Rename(const std::string& from, const SafeDir& dir,
                       const std::string& to) const {
  if (::renameat(fd_, from.c_str(), dir.fd_, to.c_str()) != 0) {
    return Status::FromErrno(PathOf(from) + " -> " + dir.PathOf(to), errno);
  }
  return Status::OK();
}

Status SafeDir::RenameNoReplace(const std::string& from,
                                const std::string& to) const {
  if (::renameat2(fd_, from.c_str(), fd_, to.c_str(), RENAME_NOREPLACE) == 0) {
    return Status::OK();
  }
  int e = errno;
  if (e == EINVAL || e == ENOSYS) {
    // No RENAME_NOREPLACE here (NFS, old kernels): link(2) also fails when
    // the name exists; the second link goes away at once.
    if (::linkat(fd_, from.c_str(), fd_, to.c_str(), 0) == 0) {
      ::unlinkat(fd_, from.c_str(), 0);
      return Status::OK();
    }
    e = errno;
  }
  ::unlinkat(fd_, from.c_str(), 0);
  if (e == EEXIST) return Status::OK();
  return Status::FromErrno(PathOf(to), e);
}

Status SafeDir::Unlink(const std::string& name) const {
  struct stat st;
  UFSPACK_RETURN_IF_ERROR(Lstat(name, &st));
  if (S_ISDIR(st.st_mode) || !OwnedByUs(st)) {
    return Unexpected(PathOf(name),
                      Found(st) + " of user " + std::to_string(st.st_uid),
                      "a file of the cache's");
  }
  if (::unlinkat(fd_, name.c_str(), 0) != 0 && errno != ENOENT) {
    return Status::FromErrno(PathOf(name), errno);
  }
  return Status::OK();
}

bool SafeDir::RemoveTree(const std::string& name,
                         const std::vector<std::string>& contents) const {
  struct stat st;
  if (::fstatat(fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return errno == ENOENT;
  }
  if (!OwnedByUs(st)) return false;
  if (!S_ISDIR(st.st_mode)) {
    return ::unlinkat(fd_, name.c_str(), 0) == 0 || errno == ENOENT;
  }
  const int f =
      OpenAt(fd_, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (f < 0) return false;
  struct stat opened;
  bool same = ::fstat(f, &opened) == 0 && opened.st_dev == st.st_dev &&
              opened.st_ino == st.st_ino;
  if (same) {
    for (const std::string& n : contents) {
      struct stat e;
      if (::fstatat(f, n.c_str(), &e, AT_SYMLINK_NOFOLLOW) != 0) continue;
      if (S_ISDIR(e.st_mode) || !OwnedByUs(e)) continue;
      ::unlinkat(f, n.c_str(), 0);  // a link: the link itself
    }
  }
  ::close(f);
  // Fails (ENOTEMPTY) when anything else is in it: then it stays.
  return same && ::unlinkat(fd_, name.c_str(), AT_REMOVEDIR) == 0;
}

std::vector<std::string> SafeDir::List() const { return NamesIn(fd_); }

uint64_t SafeDir::DiskBytes() const {
  struct stat st;
  uint64_t total = 0;
  if (::fstat(fd_, &st) == 0)
    total += static_cast<uint64_t>(st.st_blocks) * 512;
  return total + DiskBytesBelow(fd_, 1);
}

uint64_t SafeDir::DiskBytesBelow(int dir_fd, int depth) const {
  if (depth > kMaxDepth) return 0;
  uint64_t total = 0;
  std::vector<std::string> dirs;
  for (const std::string& n : NamesIn(dir_fd)) {
    struct stat st;
    if (::fstatat(dir_fd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    total += static_cast<uint64_t>(st.st_blocks) * 512;
    if (S_ISDIR(st.st_mode)) dirs.push_back(n);
  }
  for (const std::string& n : dirs) {
    const int sub =
        OpenAt(dir_fd, n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0) continue;
    total += DiskBytesBelow(sub, depth + 1);
    ::close(sub);
  }
  return total;
}

}  // namespace cache_internal
}  // namespace ufspack
