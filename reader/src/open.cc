// Copyright 2026 The ufspack Authors.
//
// Opening a pack: ResolvePackPath, Reader::Open for a single pack, a
// merged pack (its manifest) or a pack read through a RecordCache (the
// cache's index copy, and an unreachable source served from the cache).
#include <sys/stat.h>

#include <memory>
#include <string>
#include <utility>

#include "merged_pack.h"
#include "single_pack.h"
#include "ufspack/file.h"
#include "ufspack/format.h"
#include "ufspack/manifest.h"
#include "ufspack/open_reader.h"
#include "ufspack/reader.h"
#include "ufspack/record_cache.h"
#include "ufspack/text.h"

namespace ufspack {

Status ResolvePackPath(const std::string& path, std::string* index_path,
                       std::string* data_path) {
  if (IsUrl(path)) {
    // An object store has no directories to stat: a URL ending in
    // "/index.ufs" names the index, any other names the pack's prefix.
    // (A query string, as in a presigned URL, names one object only.)
    if (path.find('?') != std::string::npos) {
      return Status::InvalidArgument(
          path.substr(0, path.find('?')) +
          ": a URL with a query string names one object; a pack needs "
          "two (index.ufs and data.ufs)");
    }
    std::string base = path;
    while (!base.empty() && base.back() == '/') base.pop_back();
    const std::string suffix = std::string("/") + kIndexFileName;
    if (base.size() > suffix.size() &&
        base.compare(base.size() - suffix.size(), suffix.size(), suffix) == 0) {
      *index_path = base;
      *data_path =
          base.substr(0, base.size() - suffix.size()) + "/" + kDataFileName;
    } else {
      *index_path = base + suffix;
      *data_path = base + "/" + kDataFileName;
    }
    return Status::OK();
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return Status::FromErrno(path, errno);
  }
  if (S_ISDIR(st.st_mode)) {
    std::string base = path;
    while (base.size() > 1 && base.back() == '/') base.pop_back();
    *index_path = base + "/" + kIndexFileName;
    *data_path = base + "/" + kDataFileName;
    struct stat ist;
    if (::stat(index_path->c_str(), &ist) != 0) {
      return Status::NotFound(path + ": not a ufspack pack (no " +
                              kIndexFileName + " or " + kManifestFileName +
                              " in this directory)");
    }
  } else {
    *index_path = path;
    *data_path = DirName(path) + "/" + kDataFileName;
  }
  return Status::OK();
}

namespace {

// data.ufs of a pack whose source could not be opened: every read fails
// with the source's error (the cache serves what it holds before this is
// reached).
class UnreachableFile final : public RandomAccessFile {
 public:
  UnreachableFile(std::string name, Status why, uint64_t size)
      : name_(std::move(name)), why_(std::move(why)), size_(size) {}
  Status Read(uint64_t offset, size_t n, char* scratch,
              size_t* bytes_read) const override {
    *bytes_read = 0;
    return Status::IOError(
        name_ + ": source unreachable, and this record is not in the cache (" +
        why_.ToString() + ")");
  }
  Status Size(uint64_t* size) const override {
    *size = size_;
    return Status::OK();
  }
  const std::string& name() const override { return name_; }

 private:
  const std::string name_;
  const Status why_;
  const uint64_t size_;
};

}  // namespace

namespace internal {

Status SinglePack::OpenCached(const std::string& path,
                              const ReaderOptions& options,
                              std::unique_ptr<SinglePack>* pack) {
  std::string index_path, data_path;
  Status s = ResolvePackPath(path, &index_path, &data_path);
  if (!s.ok()) {
    // The source may be gone (unmounted, network down): the cache knows
    // packs by their index path, so derive it as ResolvePackPath would.
    std::string base = path;
    while (base.size() > 1 && base.back() == '/') base.pop_back();
    const size_t slash = base.find_last_of('/');
    const std::string leaf =
        slash == std::string::npos ? base : base.substr(slash + 1);
    if (leaf == kIndexFileName) {
      index_path = base;
      data_path = DirName(base) + "/" + kDataFileName;
    } else {
      index_path = base + "/" + kIndexFileName;
      data_path = base + "/" + kDataFileName;
    }
  }
  std::unique_ptr<PackCache> cached;
  Status attached = options.cache->AttachPack(index_path, data_path, &cached);
  if (!attached.ok()) return s.ok() ? attached : s;
  std::unique_ptr<Region> index;
  UFSPACK_RETURN_IF_ERROR(cached->MapIndex(&index));
  std::unique_ptr<RandomAccessFile> data;
  const bool offline = !cached->source_status().ok();
  if (!offline) {
    s = OpenRandomAccessFile(data_path, &data);
    if (!s.ok()) {
      if (s.IsNotFound()) {
        return Status::NotFound(data_path + ": missing (" + index_path +
                                " needs its data file beside it)");
      }
      return s;
    }
  } else {
    IndexHeader header;
    std::string_view in = index->bytes();
    UFSPACK_RETURN_IF_ERROR(header.DecodeFrom(&in).WithContext(index->name()));
    data.reset(new UnreachableFile(data_path, cached->source_status(),
                                   header.data_size));
  }
  std::unique_ptr<SinglePack> r(new SinglePack());
  r->options_ = options;
  r->index_ = std::move(index);
  r->data_ = std::move(data);
  r->cache_ = std::move(cached);
  r->offline_ = offline;
  UFSPACK_RETURN_IF_ERROR(r->Init());
  // Messages and info() name the source, not the cache's copy.
  r->info_.index_path = index_path;
  *pack = std::move(r);
  return Status::OK();
}

Status SinglePack::Open(const std::string& path, const ReaderOptions& options,
                        std::unique_ptr<SinglePack>* pack) {
  if (options.cache) return OpenCached(path, options, pack);
  std::string index_path, data_path;
  UFSPACK_RETURN_IF_ERROR(ResolvePackPath(path, &index_path, &data_path));
  std::unique_ptr<Region> index;
  UFSPACK_RETURN_IF_ERROR(LoadFile(index_path, &index));
  std::unique_ptr<RandomAccessFile> data;
  Status s = OpenRandomAccessFile(data_path, &data);
  if (!s.ok()) {
    if (s.IsNotFound()) {
      return Status::NotFound(data_path + ": missing (" + index_path +
                              " needs its data file beside it)");
    }
    return s;
  }
  s = Open(std::move(index), std::move(data), options, pack);
  if (s.ok() || !s.IsCorruption() || IsUrl(index_path)) return s;
  // A build killed between its two renames left its new data.ufs beside the
  // previous index.ufs, and the previous data.ufs as .data.ufs.prev: with
  // that file, the previous index is still a complete pack.
  std::unique_ptr<Region> index_again;
  std::unique_ptr<RandomAccessFile> prev;
  std::unique_ptr<SinglePack> r;
  if (NewPosixRandomAccessFile(DirName(index_path) + "/" + kPrevDataFileName,
                               &prev)
          .ok() &&
      MapFile(index_path, &index_again).ok() &&
      Open(std::move(index_again), std::move(prev), options, &r).ok()) {
    *pack = std::move(r);
    return Status::OK();
  }
  return s;
}

Status SinglePack::Open(std::unique_ptr<Region> index,
                        std::unique_ptr<RandomAccessFile> data,
                        const ReaderOptions& options,
                        std::unique_ptr<SinglePack>* pack) {
  std::unique_ptr<SinglePack> r(new SinglePack());
  r->options_ = options;
  r->index_ = std::move(index);
  r->data_ = std::move(data);
  UFSPACK_RETURN_IF_ERROR(r->Init());
  *pack = std::move(r);
  return Status::OK();
}

Status OpenReader(std::unique_ptr<Region> index,
                  std::unique_ptr<RandomAccessFile> data,
                  const ReaderOptions& options,
                  std::unique_ptr<Reader>* reader) {
  std::unique_ptr<SinglePack> pack;
  UFSPACK_RETURN_IF_ERROR(
      SinglePack::Open(std::move(index), std::move(data), options, &pack));
  *reader = WrapSource(std::move(pack));
  return Status::OK();
}

}  // namespace internal

namespace {

// Whether `path` names a merged pack, and its manifest: a manifest file, or
// a local directory holding one.  (A URL prefix is tried as a single pack
// first; see Reader::Open.)
bool ManifestOf(const std::string& path, std::string* manifest) {
  std::string base = path;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  const std::string suffix = std::string("/") + kManifestFileName;
  if (base == kManifestFileName ||
      (base.size() > suffix.size() &&
       base.compare(base.size() - suffix.size(), suffix.size(), suffix) == 0)) {
    *manifest = base;
    return true;
  }
  if (IsUrl(path)) return false;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return false;
  const std::string candidate = base + suffix;
  if (::stat(candidate.c_str(), &st) != 0) return false;
  *manifest = candidate;
  return true;
}

template <typename Pack>
Status Wrapped(Status s, std::unique_ptr<Pack>* pack,
               std::unique_ptr<Reader>* reader) {
  if (s.ok()) *reader = internal::WrapSource(std::move(*pack));
  return s;
}

Status OpenSingle(const std::string& path, const ReaderOptions& options,
                  std::unique_ptr<Reader>* reader) {
  std::unique_ptr<internal::SinglePack> pack;
  return Wrapped(internal::SinglePack::Open(path, options, &pack), &pack,
                 reader);
}

Status OpenMerged(const std::string& manifest, const ReaderOptions& options,
                  std::unique_ptr<Reader>* reader) {
  std::unique_ptr<internal::MergedPack> pack;
  return Wrapped(internal::MergedPack::Open(manifest, options, &pack), &pack,
                 reader);
}

}  // namespace

Status Reader::Open(const std::string& path, const ReaderOptions& options,
                    std::unique_ptr<Reader>* reader) {
  std::string manifest;
  if (ManifestOf(path, &manifest)) {
    return OpenMerged(manifest, options, reader);
  }
  if (IsUrl(path)) {
    // A URL prefix may hold either kind: a single pack is tried first
    // (with a cache too: its index is NotFound when the source says so).
    Status s = OpenSingle(path, options, reader);
    if (!s.IsNotFound()) return s;
    std::string base = path;
    while (!base.empty() && base.back() == '/') base.pop_back();
    Status m = OpenMerged(base + "/" + kManifestFileName, options, reader);
    return m.IsNotFound() ? s : m;
  }
  return OpenSingle(path, options, reader);
}
}  // namespace ufspack
