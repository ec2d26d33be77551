// Copyright 2026 The ufspack Authors.
#include "ufspack/posix_io.h"

#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace ufspack {
namespace internal {
namespace {

int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) {
  (void)::remove(path);
  return 0;  // go on: remove what can be removed
}

Status ErrnoStatus(const std::string& path, const char* op, int err) {
  return Status::FromErrno(path.empty() ? std::string(op) : path + ": " + op,
                           err);
}

}  // namespace

Status WriteAll(int fd, const char* p, size_t n, const std::string& path) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(path, "write", errno);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::OK();
}

Status PwriteAll(int fd, const char* p, size_t n, uint64_t offset,
                 const std::string& path) {
  while (n > 0) {
    ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(offset));
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(path, "write", errno);
    }
    p += w;
    n -= static_cast<size_t>(w);
    offset += static_cast<uint64_t>(w);
  }
  return Status::OK();
}

Status SyncFile(int fd, const std::string& path) {
  if (::fsync(fd) != 0) return ErrnoStatus(path, "fsync", errno);
  return Status::OK();
}

Status SyncDir(int dir_fd, const std::string& path) {
  if (::fsync(dir_fd) != 0 && errno != EINVAL) {
    return ErrnoStatus(path, "fsync", errno);
  }
  return Status::OK();
}

Status CloseFile(int* fd, const std::string& path) {
  const int f = *fd;
  *fd = -1;
  if (::close(f) != 0) return ErrnoStatus(path, "close", errno);
  return Status::OK();
}

void RemoveTree(const std::string& path) {
  ::nftw(path.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS);
}

std::string UnsafeRelativePath(std::string_view name) {
  if (name.empty()) return "empty name";
  if (name.front() == '/') return "absolute path";
  if (name.find('\0') != std::string_view::npos) return "contains a NUL byte";
  size_t start = 0;
  while (start <= name.size()) {
    size_t slash = name.find('/', start);
    if (slash == std::string_view::npos) slash = name.size();
    std::string_view comp = name.substr(start, slash - start);
    if (comp.empty()) return "empty path component";
    if (comp == ".") return "'.' path component";
    if (comp == "..") return "'..' path component";
    if (comp.size() > 255) return "path component longer than 255 bytes";
    start = slash + 1;
  }
  return "";
}

Status MakeDirs(const std::string& path) {
  if (path.empty()) return Status::OK();
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return Status::OK();
    return Status::InvalidArgument(path + ": exists and is not a directory");
  }
  size_t slash = path.find_last_of('/');
  if (slash != std::string::npos && slash > 0) {
    UFSPACK_RETURN_IF_ERROR(MakeDirs(path.substr(0, slash)));
  }
  if (::mkdir(path.c_str(), 0777) != 0 && errno != EEXIST) {
    return Status::FromErrno(path + ": cannot create directory", errno);
  }
  return Status::OK();
}

int OpenAnyLength(const std::string& path, int flags) {
  int fd = ::open(path.c_str(), flags);
  if (fd >= 0 || errno != ENAMETOOLONG) return fd;
  constexpr int kDirFlags = O_PATH | O_DIRECTORY | O_CLOEXEC;
  int dir = ::open(path[0] == '/' ? "/" : ".", kDirFlags);
  size_t start = 0;
  while (dir >= 0) {
    while (start < path.size() && path[start] == '/') ++start;
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    size_t next = end;
    while (next < path.size() && path[next] == '/') ++next;
    const bool last = next >= path.size();
    const std::string comp = path.substr(start, end - start);
    fd = ::openat(dir, comp.c_str(), last ? flags : kDirFlags);
    const int e = errno;
    ::close(dir);
    if (last || fd < 0) {
      errno = e;
      return fd;
    }
    dir = fd;
    start = next;
  }
  return -1;
}

OpenedRegular OpenRegular(const std::string& path, int* fd, struct stat* st,
                          int* err) {
  int f;
  do {
    f = OpenAnyLength(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  } while (f < 0 && errno == EINTR);
  if (f < 0) {
    *err = errno;
    return OpenedRegular::kOpenFailed;
  }
  if (::fstat(f, st) != 0) {
    *err = errno;
    ::close(f);
    return OpenedRegular::kFstatFailed;
  }
  if (!S_ISREG(st->st_mode)) {
    ::close(f);
    return OpenedRegular::kNotRegular;
  }
  *fd = f;
  return OpenedRegular::kOpened;
}

}  // namespace internal
}  // namespace ufspack
