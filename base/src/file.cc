// Copyright 2026 The ufspack Authors.
#include "ufspack/file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "ufspack/posix_io.h"

namespace ufspack {

RandomAccessFile::~RandomAccessFile() = default;
Region::~Region() = default;
void Region::Release(const char*, size_t) const {}

namespace {

class PosixRandomAccessFile final : public RandomAccessFile {
 public:
  PosixRandomAccessFile(std::string name, int fd)
      : name_(std::move(name)), fd_(fd) {}
  ~PosixRandomAccessFile() override { ::close(fd_); }

  Status Read(uint64_t offset, size_t n, char* scratch,
              size_t* bytes_read) const override {
    size_t done = 0;
    while (done < n) {
      ssize_t r = ::pread(fd_, scratch + done, n - done,
                          static_cast<off_t>(offset + done));
      if (r < 0) {
        if (errno == EINTR) continue;
        *bytes_read = done;
        return Status::FromErrno(
            name_ + ": read at offset " + std::to_string(offset + done), errno);
      }
      if (r == 0) break;  // end of file
      done += static_cast<size_t>(r);
    }
    *bytes_read = done;
    return Status::OK();
  }

  Status Size(uint64_t* size) const override {
    struct stat st;
    if (::fstat(fd_, &st) != 0)
      return Status::FromErrno(name_ + ": fstat", errno);
    *size = static_cast<uint64_t>(st.st_size);
    return Status::OK();
  }

  const std::string& name() const override { return name_; }

  // In steps of 128 KiB: the kernel starts at most one read-ahead window
  // per call (the file system's read_ahead_kb, 128 KiB unless raised) and
  // drops the rest of a larger range.  Pages already cached cost a lookup.
  void WillNeed(uint64_t offset, uint64_t n) const override {
    constexpr uint64_t kStep = uint64_t{128} << 10;
    for (uint64_t done = 0; done < n; done += kStep) {
      (void)::posix_fadvise(fd_, static_cast<off_t>(offset + done),
                            static_cast<off_t>(std::min(kStep, n - done)),
                            POSIX_FADV_WILLNEED);
    }
  }

 private:
  const std::string name_;
  const int fd_;
};

// A file over bytes it does not own; MemoryRandomAccessFile owns them.
class ViewRandomAccessFile : public RandomAccessFile {
 public:
  ViewRandomAccessFile(std::string name, std::string_view bytes)
      : name_(std::move(name)), bytes_(bytes) {}

  Status Read(uint64_t offset, size_t n, char* scratch,
              size_t* bytes_read) const override {
    const uint64_t begin = std::min<uint64_t>(offset, bytes_.size());
    const size_t got =
        static_cast<size_t>(std::min<uint64_t>(n, bytes_.size() - begin));
    std::memcpy(scratch, bytes_.data() + begin, got);
    *bytes_read = got;
    return Status::OK();
  }

  Status Size(uint64_t* size) const override {
    *size = bytes_.size();
    return Status::OK();
  }

  const std::string& name() const override { return name_; }

 protected:
  void set_bytes(std::string_view bytes) { bytes_ = bytes; }

 private:
  const std::string name_;
  std::string_view bytes_;
};

class MemoryRandomAccessFile final : public ViewRandomAccessFile {
 public:
  MemoryRandomAccessFile(std::string name, std::string contents)
      : ViewRandomAccessFile(std::move(name), {}),
        contents_(std::move(contents)) {
    set_bytes(contents_);
  }

 private:
  const std::string contents_;
};

class MmapRegion final : public Region {
 public:
  MmapRegion(std::string name, void* base, size_t length)
      : name_(std::move(name)), base_(base), length_(length) {}
  ~MmapRegion() override {
    if (base_ != nullptr) ::munmap(base_, length_);
  }
  std::string_view bytes() const override {
    return std::string_view(static_cast<const char*>(base_), length_);
  }
  const std::string& name() const override { return name_; }
  void Release(const char* p, size_t n) const override {
    static const uintptr_t page =
        static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    // Every page the range touches, partial ones included (a page that
    // other bytes still need is mapped back on their next read): rounding
    // inward would leave up to two pages per call resident, without bound
    // over many calls.  The mapping starts on a page boundary.
    const uintptr_t base = reinterpret_cast<uintptr_t>(base_);
    const uintptr_t end = base + length_;
    const uintptr_t from = reinterpret_cast<uintptr_t>(p);
    if (n == 0 || from < base || from >= end) return;
    const uintptr_t lo = from & ~(page - 1);
    const uintptr_t hi =
        (from + std::min<uintptr_t>(n, end - from) + page - 1) & ~(page - 1);
    // Advice only: a failure changes nothing that can be observed.
    ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
  }

 private:
  const std::string name_;
  void* const base_;
  const size_t length_;
};

class MemoryRegion final : public Region {
 public:
  MemoryRegion(std::string name, std::string contents)
      : name_(std::move(name)), contents_(std::move(contents)) {}
  std::string_view bytes() const override { return contents_; }
  const std::string& name() const override { return name_; }

 private:
  const std::string name_;
  const std::string contents_;
};

// Opens `path` read-only and checks that it is a regular file; on success
// the caller owns *fd.  Never blocks: the open is O_NONBLOCK (a FIFO with no
// writer, or a device, would otherwise hang it), and O_NONBLOCK is cleared
// again once the file is known to be regular.
Status OpenRegularFile(const std::string& path, int* fd, struct stat* st) {
  int f = -1, err = 0;
  switch (internal::OpenRegular(path, &f, st, &err)) {
    case internal::OpenedRegular::kOpenFailed:
      return Status::FromErrno(path, err);
    case internal::OpenedRegular::kFstatFailed:
      return Status::FromErrno(path + ": fstat", err);
    case internal::OpenedRegular::kNotRegular:
      return Status::InvalidArgument(path + ": not a regular file (" +
                                     FileTypeName(st->st_mode) + ")");
    case internal::OpenedRegular::kOpened:
      break;
  }
  const int flags = ::fcntl(f, F_GETFL);
  if (flags < 0 || ::fcntl(f, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    int e = errno;
    ::close(f);
    return Status::FromErrno(path + ": fcntl", e);
  }
  *fd = f;
  return Status::OK();
}

}  // namespace

const char* FileTypeName(unsigned mode) {
  const mode_t m = static_cast<mode_t>(mode);
  if (S_ISREG(m)) return "regular file";
  if (S_ISDIR(m)) return "directory";
  if (S_ISFIFO(m)) return "FIFO";
  if (S_ISSOCK(m)) return "socket";
  if (S_ISCHR(m)) return "character device";
  if (S_ISBLK(m)) return "block device";
  if (S_ISLNK(m)) return "symbolic link";
  return "file of unknown type";
}

Status NewPosixRandomAccessFile(const std::string& path,
                                std::unique_ptr<RandomAccessFile>* result) {
  int fd;
  struct stat st;
  UFSPACK_RETURN_IF_ERROR(OpenRegularFile(path, &fd, &st));
  result->reset(new PosixRandomAccessFile(path, fd));
  return Status::OK();
}

std::unique_ptr<RandomAccessFile> NewMemoryRandomAccessFile(
    std::string name, std::string contents) {
  return std::make_unique<MemoryRandomAccessFile>(std::move(name),
                                                  std::move(contents));
}

std::unique_ptr<RandomAccessFile> NewViewRandomAccessFile(
    std::string name, std::string_view bytes) {
  return std::make_unique<ViewRandomAccessFile>(std::move(name), bytes);
}

Status MapFd(int fd, const std::string& name, std::unique_ptr<Region>* result) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return Status::FromErrno(name + ": fstat", errno);
  if (!S_ISREG(st.st_mode)) {
    return Status::InvalidArgument(name + ": not a regular file (" +
                                   FileTypeName(st.st_mode) + ")");
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > SIZE_MAX) return Status::NotSupported(name + ": too large to map");
  void* base = nullptr;
  if (size > 0) {
    base = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_SHARED, fd,
                  0);
    if (base == MAP_FAILED) return Status::FromErrno(name + ": mmap", errno);
  }
  result->reset(new MmapRegion(name, base, static_cast<size_t>(size)));
  return Status::OK();
}

Status MapFile(const std::string& path, std::unique_ptr<Region>* result) {
  int fd;
  struct stat st;
  UFSPACK_RETURN_IF_ERROR(OpenRegularFile(path, &fd, &st));
  Status s = MapFd(fd, path, result);
  ::close(fd);
  return s;
}

std::unique_ptr<Region> NewMemoryRegion(std::string name,
                                        std::string contents) {
  return std::make_unique<MemoryRegion>(std::move(name), std::move(contents));
}

Status RandomAccessFile::ReadMany(ReadOp* ops, size_t count,
                                  size_t* failed) const {
  for (size_t k = 0; k < count; ++k) {
    Status s = Read(ops[k].offset, ops[k].n, ops[k].dst, &ops[k].got);
    if (!s.ok()) {
      *failed = k;
      return s;
    }
  }
  return Status::OK();
}

UrlStorage::~UrlStorage() = default;

namespace {

struct UrlRegistry {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<UrlStorage>> schemes;
};

UrlRegistry& Registry() {
  static UrlRegistry* registry = new UrlRegistry();  // never destroyed
  return *registry;
}

// The scheme of a URL ("s3" of "s3://b/k"), or "" for a local path.
std::string SchemeOf(const std::string& path) {
  const size_t colon = path.find("://");
  if (colon == std::string::npos || colon == 0) return "";
  for (size_t i = 0; i < colon; ++i) {
    const char c = path[i];
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
        (i > 0 && ((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.'));
    if (!ok) return "";
  }
  std::string scheme = path.substr(0, colon);
  for (char& c : scheme) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return scheme;
}

}  // namespace

void RegisterUrlStorage(const std::string& scheme,
                        std::shared_ptr<UrlStorage> storage) {
  UrlRegistry& r = Registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.schemes[scheme] = std::move(storage);
}

std::string DirName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

bool IsUrl(const std::string& path) { return !SchemeOf(path).empty(); }

Status OpenRandomAccessFile(const std::string& path,
                            std::unique_ptr<RandomAccessFile>* result) {
  const std::string scheme = SchemeOf(path);
  if (scheme.empty()) return NewPosixRandomAccessFile(path, result);
  std::shared_ptr<UrlStorage> storage;
  {
    UrlRegistry& r = Registry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.schemes.find(scheme);
    if (it != r.schemes.end()) storage = it->second;
  }
  if (!storage) {
    const size_t q = path.find('?');
    return Status::NotSupported(
        path.substr(0, q) + ": no storage for '" + scheme +
        "://' URLs in this program (link ufspack::remote and include "
        "ufspack/remote.h, which registers s3, http and https)");
  }
  return storage->OpenFile(path, result);
}

Status LoadFile(const std::string& path, std::unique_ptr<Region>* result) {
  if (!IsUrl(path)) return MapFile(path, result);
  std::unique_ptr<RandomAccessFile> file;
  UFSPACK_RETURN_IF_ERROR(OpenRandomAccessFile(path, &file));
  uint64_t size = 0;
  UFSPACK_RETURN_IF_ERROR(file->Size(&size));
  if (size > std::string().max_size()) {
    return Status::NotSupported(file->name() + ": too large to load");
  }
  std::string contents(static_cast<size_t>(size), '\0');
  size_t got = 0;
  UFSPACK_RETURN_IF_ERROR(
      file->Read(0, contents.size(), contents.data(), &got));
  if (got != size) {
    return Status::Corruption(file->name() + ": short read: expected " +
                              std::to_string(size) + " bytes, found " +
                              std::to_string(got));
  }
  *result = NewMemoryRegion(file->name(), std::move(contents));
  return Status::OK();
}

}  // namespace ufspack
