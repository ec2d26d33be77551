// Copyright 2026 The ufspack Authors.
#include "posix_io.h"

#include <ftw.h>
#include <stdio.h>
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

}  // namespace internal
}  // namespace ufspack
