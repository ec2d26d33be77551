// Copyright 2026 The ufspack Authors.
#include "ufspack/cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "pack_cache.h"
#include "store.h"
#include "ufspack/coding.h"
#include "ufspack/file.h"
#include "ufspack/format.h"
#include "ufspack/types.h"

namespace ufspack {

using cache_internal::kIndexCopyName;
using cache_internal::PackCacheImpl;
using cache_internal::Store;
using cache_internal::Table;

namespace {

// `path` made absolute and lexically normal ("a/./b/../c" -> "/cwd/a/c"),
// without touching the file system: the source may be unreachable.
std::string AbsolutePath(const std::string& path) {
  if (IsUrl(path)) return path;  // a URL names its object already
  std::string full = path;
  if (full.empty() || full[0] != '/') {
    char cwd[4096];
    if (::getcwd(cwd, sizeof(cwd)) != nullptr) {
      full = std::string(cwd) + "/" + path;
    }
  }
  std::vector<std::string> parts;
  size_t pos = 0;
  while (pos <= full.size()) {
    size_t next = full.find('/', pos);
    if (next == std::string::npos) next = full.size();
    const std::string part = full.substr(pos, next - pos);
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    pos = next + 1;
  }
  std::string out;
  for (const std::string& p : parts) out += "/" + p;
  return out.empty() ? "/" : out;
}

// Reads and decodes the header of the index `source` (a local file or a
// URL).
Status ReadIndexHeader(const RandomAccessFile& source, IndexHeader* header) {
  char buf[IndexHeader::kEncodedLength];
  size_t n = 0;
  UFSPACK_RETURN_IF_ERROR(source.Read(0, sizeof(buf), buf, &n));
  std::string_view in(buf, n);
  UFSPACK_RETURN_IF_ERROR(header->DecodeFrom(&in).WithContext(source.name()));
  return header->ValidateLayout().WithContext(source.name());
}

// Copies the index `source` to `dst`, checking that its size is the
// header's and that its body hashes to the pack id (the id is XXH3-128 of
// the body): a copy that passes is the index the source had.
Status CopyIndex(const RandomAccessFile& source, const IndexHeader& header,
                 const cache_internal::SafeDir& dir, const std::string& name) {
  const std::string dst = dir.PathOf(name);
  int out;
  UFSPACK_RETURN_IF_ERROR(
      dir.OpenFile(name, O_WRONLY | O_CREAT | O_EXCL, &out));
  XXH3_state_t* state = XXH3_createState();
  XXH3_128bits_reset(state);
  // Large pieces: a remote index is one request per piece.
  std::vector<char> buf(8 << 20);
  uint64_t offset = 0;
  Status s;
  while (s.ok() && offset < header.index_size) {
    const size_t want = static_cast<size_t>(
        std::min<uint64_t>(buf.size(), header.index_size - offset));
    size_t n = 0;
    s = source.Read(offset, want, buf.data(), &n);
    if (!s.ok()) {
      s = s.WithContext("read at offset " + std::to_string(offset));
      break;
    }
    if (n == 0) break;
    const char* p = buf.data();
    // The body starts after the header.
    if (offset < IndexHeader::kEncodedLength) {
      const size_t skip = static_cast<size_t>(
          std::min<uint64_t>(n, IndexHeader::kEncodedLength - offset));
      XXH3_128bits_update(state, p + skip, n - skip);
    } else {
      XXH3_128bits_update(state, p, n);
    }
    s = cache_internal::WriteVec(out, {{const_cast<char*>(p), n}}, offset);
    if (!s.ok()) {
      s = s.WithContext(dst);
      break;
    }
    offset += n;
  }
  const XXH128_hash_t h = XXH3_128bits_digest(state);
  XXH3_freeState(state);
  if (::close(out) != 0 && s.ok())
    s = Status::FromErrno(dst + ": close", errno);
  if (!s.ok()) return s;
  uint64_t size = 0;
  UFSPACK_RETURN_IF_ERROR(source.Size(&size));
  if (offset != header.index_size || size != header.index_size) {
    return Status::Corruption(source.name() + ": size: expected " +
                              std::to_string(header.index_size) +
                              " bytes (recorded in its header), found " +
                              std::to_string(size));
  }
  PackId id;
  EncodeFixed64(reinterpret_cast<char*>(id.bytes.data()), h.low64);
  EncodeFixed64(reinterpret_cast<char*>(id.bytes.data()) + 8, h.high64);
  if (id != header.pack_id) {
    return Status::Corruption(source.name() +
                              ": index body does not hash to its pack id " +
                              header.pack_id.ToHex() + " (found " + id.ToHex() +
                              "): changed while being copied, or damaged");
  }
  return Status::OK();
}

// Checks a cached index copy (untrusted, like everything in the cache),
// open at `fd` and named `path`: its body must hash to the pack id
// `pack_hex`.  O(index size), about 10 ms per million records from the
// page cache, so done once per process and version of the file.
Status VerifyIndexCopy(int fd, const std::string& path,
                       const std::string& pack_hex) {
  // Once per process and version of the file: every DataLoader worker
  // opens the pack (forked ones inherit what their parent checked), and
  // warm-up attaches twice; a copy changed since (its size, inode or mtime)
  // is checked again.
  static std::mutex mu;
  static std::set<std::string> verified;
  struct stat st;
  if (::fstat(fd, &st) != 0) return Status::FromErrno(path, errno);
  const std::string key = pack_hex + ":" + std::to_string(st.st_dev) + ":" +
                          std::to_string(st.st_ino) + ":" +
                          std::to_string(st.st_size) + ":" +
                          std::to_string(st.st_mtim.tv_sec) + "." +
                          std::to_string(st.st_mtim.tv_nsec);
  {
    std::lock_guard<std::mutex> lock(mu);
    if (verified.count(key) != 0) return Status::OK();
  }
  std::unique_ptr<Region> region;
  UFSPACK_RETURN_IF_ERROR(MapFd(fd, path, &region));
  std::string_view bytes = region->bytes();
  if (bytes.size() < IndexHeader::kEncodedLength) {
    return Status::Corruption(path + ": truncated index copy");
  }
  const PackId id = PackId::Of(bytes.data() + IndexHeader::kEncodedLength,
                               bytes.size() - IndexHeader::kEncodedLength);
  IndexHeader header;
  std::string_view in = bytes;
  UFSPACK_RETURN_IF_ERROR(header.DecodeFrom(&in).WithContext(path));
  if (id.ToHex() != pack_hex || header.pack_id != id ||
      header.index_size != bytes.size()) {
    return Status::Corruption(path + ": index copy does not match pack id " +
                              pack_hex);
  }
  std::lock_guard<std::mutex> lock(mu);
  verified.insert(key);
  return Status::OK();
}

// Opens and verifies the index copy of raw table `t` (in the disk tier):
// *fd is the open copy, or -1 with the reason in the result.
Status OpenIndexCopy(const Table& t, const std::string& pack_hex, int* fd) {
  *fd = -1;
  int f;
  UFSPACK_RETURN_IF_ERROR(t.OpenFile(kIndexCopyName, &f));
  Status s = VerifyIndexCopy(f, t.dir() + "/" + kIndexCopyName, pack_hex);
  if (!s.ok()) {
    ::close(f);
    return s;
  }
  *fd = f;
  return Status::OK();
}

std::string RawTableName(const std::string& pack_hex) {
  return "raw/" + pack_hex;
}

}  // namespace

SampleTable::~SampleTable() = default;

bool SampleTable::Get(uint64_t slot, std::string* out) {
  for (auto& t : tables_) {
    if (t->Get(slot, out)) return true;
  }
  return false;
}

bool SampleTable::Put(uint64_t slot, const char* data, uint64_t length) {
  const uint64_t checksum = Checksum64(data, static_cast<size_t>(length));
  for (auto& t : tables_) {
    Table::PutResult r = t->Put(slot, data, length, checksum);
    if (r == Table::PutResult::kStored || r == Table::PutResult::kPresent) {
      return true;
    }
  }
  return false;
}

Cache::~Cache() = default;

Status Cache::Open(const CacheOptions& options, std::shared_ptr<Cache>* cache) {
  if (options.dir.empty()) {
    return Status::InvalidArgument("cache: no directory given");
  }
  std::shared_ptr<Cache> c(new Cache());
  c->options_ = options;
  if (!c->options_.warn) c->options_.warn = cache_internal::DefaultWarn;
  if (!options.ram_dir.empty()) {
    std::unique_ptr<Store> ram;
    Status s = Store::Open(options.ram_dir, options.ram_limit,
                           options.min_ram_tier_bytes, c->options_.warn, &ram);
    if (s.ok()) {
      c->tiers_.push_back(std::move(ram));
    } else {
      c->options_.warn("RAM tier " + options.ram_dir +
                       " not used: " + std::string(s.message()) +
                       "; caching in " + options.dir + " only");
    }
  }
  std::unique_ptr<Store> disk;
  UFSPACK_RETURN_IF_ERROR(
      Store::Open(options.dir, options.limit, 0, c->options_.warn, &disk));
  c->tiers_.push_back(std::move(disk));
  *cache = std::move(c);
  return Status::OK();
}

Status Cache::AttachPack(const std::string& index_path,
                         const std::string& data_path,
                         std::unique_ptr<PackCache>* pack) {
  const std::string source = AbsolutePath(index_path);
  Store* disk = tiers_.back().get();
  IndexHeader header;
  std::unique_ptr<RandomAccessFile> source_file;
  Status source_status = OpenRandomAccessFile(index_path, &source_file);
  if (source_status.ok()) {
    source_status = ReadIndexHeader(*source_file, &header);
  }
  if (source_status.IsCorruption() || source_status.IsNotSupported()) {
    return source_status;  // readable, but not an index this build serves
  }
  std::vector<std::unique_ptr<Table>> tables;
  if (!source_status.ok()) {
    // Unreachable: serve the copy of the index this path had, if any.
    std::string hex;
    if (!disk->LookupSource(source, &hex).ok()) return source_status;
    for (auto& tier : tiers_) {
      std::unique_ptr<Table> t;
      if (tier->OpenTable(RawTableName(hex), 0, false, nullptr, &t).ok()) {
        tables.push_back(std::move(t));
      }
    }
    if (tables.empty() || tables.back()->store() != disk) return source_status;
    const std::string copy = tables.back()->dir() + "/" + kIndexCopyName;
    int copy_fd;
    Status v = OpenIndexCopy(*tables.back(), hex, &copy_fd);
    if (!v.ok()) {
      disk->WarnOnce("copy:" + copy,
                     "cache " + disk->dir() + ": " + v.ToString());
      return source_status;
    }
    disk->WarnOnce("offline:" + source,
                   index_path + " is unreachable (" + source_status.ToString() +
                       "); serving the records cached in " + disk->dir() +
                       " (others fail)");
    pack->reset(
        new PackCacheImpl(std::move(tables), copy, copy_fd, source_status));
    return Status::OK();
  }

  const std::string hex = header.pack_id.ToHex();
  const std::string name = RawTableName(hex);
  std::string copy;
  int copy_fd = -1;
  for (auto& tier : tiers_) {
    const bool is_disk = tier.get() == disk;
    Store::Populate populate;
    if (is_disk) {
      populate = [&](const cache_internal::SafeDir& tmp,
                     uint64_t* charged) -> Status {
        UFSPACK_RETURN_IF_ERROR(
            CopyIndex(*source_file, header, tmp, kIndexCopyName));
        *charged = (header.index_size + cache_internal::kBlock - 1) /
                   cache_internal::kBlock * cache_internal::kBlock;
        return Status::OK();
      };
    }
    std::unique_ptr<Table> t;
    Status s = tier->OpenTable(name, header.record_count, true, populate, &t);
    if (s.ok()) {
      if (is_disk) {
        copy = t->dir() + "/" + kIndexCopyName;
        Status v = OpenIndexCopy(*t, hex, &copy_fd);
        if (!v.ok()) {
          disk->WarnOnce("copy:" + copy, "cache " + disk->dir() + ": " +
                                             v.ToString() +
                                             "; using the source's index");
          copy.clear();
        }
      }
      tables.push_back(std::move(t));
    } else if (s.IsCorruption() && s.message().find(index_path) == 0) {
      return s;  // the source index itself is damaged
    } else {
      tier->WarnOnce("attach:" + hex, "cache " + tier->dir() + ": pack " +
                                          index_path +
                                          " not cached there: " + s.ToString());
    }
  }
  if (!copy.empty()) disk->RememberSource(source, hex);
  pack->reset(new PackCacheImpl(std::move(tables),
                                copy.empty() ? index_path : copy, copy_fd,
                                Status::OK()));
  return Status::OK();
}

Status Cache::OpenSampleTable(const std::string& name, uint64_t slot_count,
                              std::unique_ptr<SampleTable>* table) {
  std::unique_ptr<SampleTable> st(new SampleTable());
  st->slot_count_ = slot_count;
  for (auto& tier : tiers_) {
    std::unique_ptr<Table> t;
    Status s = tier->OpenTable(name, slot_count, true, nullptr, &t);
    if (s.ok()) {
      st->tables_.push_back(std::move(t));
    } else if (s.IsCorruption()) {
      return s;
    } else {
      tier->WarnOnce("attach:" + name,
                     "cache " + tier->dir() + ": table " + name +
                         " not cached there: " + s.ToString());
    }
  }
  *table = std::move(st);
  return Status::OK();
}

void Cache::FlushStats() const {
  for (auto& tier : tiers_) tier->FlushLookups();
}

std::vector<CacheTierStats> Cache::Stats() const {
  std::vector<CacheTierStats> out;
  for (auto& tier : tiers_) out.push_back(tier->Stats());
  return out;
}

Status Cache::Stat(const std::string& dir, CacheTierStats* stats) {
  return Store::StatDir(dir, stats);
}

Status Cache::Clear(const std::string& dir, uint64_t* kept) {
  return Store::ClearDir(dir, kept);
}

}  // namespace ufspack
