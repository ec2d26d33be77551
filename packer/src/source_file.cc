// Copyright 2026 The ufspack Authors.
#include "source_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "ufspack/file.h"
#include "ufspack/posix_io.h"

namespace ufspack {
namespace internal {

Status OpenSource(const std::string& path, int* fd, struct stat* st) {
  int err = 0;
  switch (OpenRegular(path, fd, st, &err)) {
    case OpenedRegular::kOpenFailed:
      return Status::FromErrno(path + ": cannot open", err);
    case OpenedRegular::kFstatFailed:
      return Status::FromErrno(path + ": fstat", err);
    case OpenedRegular::kNotRegular:
      return Status::InvalidArgument(path + ": is a " +
                                     FileTypeName(st->st_mode) +
                                     ", not a regular file");
    case OpenedRegular::kOpened:
      break;
  }
  return Status::OK();
}

Status ReadSource(int fd, const std::string& path, const struct stat& before,
                  std::string* bytes) {
  const uint64_t size = static_cast<uint64_t>(before.st_size);
  // One byte more than the size, to see a file that grew.
  std::string buf(static_cast<size_t>(size) + 1, '\0');
  uint64_t done = 0;
  for (;;) {
    ssize_t r = ::read(fd, buf.data() + done, buf.size() - done);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        // Only special files return EAGAIN; regular files never block.
        continue;
      }
      int e = errno;
      ::close(fd);
      return Status::FromErrno(path + ": read", e);
    }
    if (r == 0) break;
    done += static_cast<uint64_t>(r);
    if (done == buf.size()) break;  // grew past its size
  }
  const bool changed = ChangedSince(fd, before);
  ::close(fd);
  if (done != size || changed) return ChangedWhileRead(path, size, done);
  buf.resize(static_cast<size_t>(size));
  *bytes = std::move(buf);
  return Status::OK();
}

bool ChangedSince(int fd, const struct stat& before) {
  struct stat after;
  return ::fstat(fd, &after) != 0 || after.st_size != before.st_size ||
         after.st_mtim.tv_sec != before.st_mtim.tv_sec ||
         after.st_mtim.tv_nsec != before.st_mtim.tv_nsec ||
         after.st_ctim.tv_sec != before.st_ctim.tv_sec ||
         after.st_ctim.tv_nsec != before.st_ctim.tv_nsec;
}

Status ChangedWhileRead(const std::string& path, uint64_t size, uint64_t done) {
  return Status::IOError(path + ": file changed as we read it (size was " +
                         std::to_string(size) + " bytes, read " +
                         (done > size ? "more" : std::to_string(done)) + ")");
}

}  // namespace internal
}  // namespace ufspack
