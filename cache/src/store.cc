// Copyright 2026 The ufspack Authors.
#include "store.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "ufspack/coding.h"
#include "ufspack/format.h"
#include "ufspack/text.h"
#include "ufspack/types.h"

namespace ufspack {
namespace cache_internal {
namespace {

static_assert(sizeof(std::atomic<uint64_t>) == 8 &&
                  std::atomic<uint64_t>::is_always_lock_free,
              "shared counters need lock-free 64-bit atomics");

constexpr char kHeaderMagic[8] = {'U', 'F', 'S', 'P', 'C', 'A', 'C', 'H'};
constexpr char kSlotsMagic[8] = {'U', 'F', 'S', 'P', 'S', 'L', 'O', 'T'};
constexpr uint32_t kEntryMagic = 0x45434655;  // "UFCE" little-endian

// Header fields (byte offsets in DIR/ufspack-cache).
constexpr uint64_t kHdrVersion = 8;    // u32
constexpr uint64_t kHdrSize = 12;      // u32
constexpr uint64_t kHdrLimit = 16;     // u64
constexpr uint64_t kHdrCharged = 24;   // u64
constexpr uint64_t kHdrCounters = 32;  // u64 x kCounterCount
constexpr uint64_t kHdrCreated = 96;   // u64, unix seconds
static_assert(kHdrCounters + 8 * kCounterCount <= kHdrCreated, "layout");

// Slots header fields (byte offsets in ns/<hex>/slots).
constexpr uint64_t kSlVersion = 8;   // u32
constexpr uint64_t kSlCount = 16;    // u64 slot count
constexpr uint64_t kSlTail = 24;     // u64 log bytes handed out
constexpr uint64_t kSlCharged = 32;  // u64 bytes this table charged
constexpr uint64_t kSlTableId = 40;  // u64 low 64 bits of the name's hash
constexpr uint64_t kSlEntries = 48;  // u64 entries published

uint64_t RoundUp(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string UniqueSuffix() {
  static std::atomic<uint64_t> counter{0};
  const uint64_t t = static_cast<uint64_t>(
      std::chrono::system_clock::now().time_since_epoch().count());
  return std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" +
         HexU64(t).substr(8);
}

std::string NameHex(const std::string& name) {
  return PackId::Of(name.data(), name.size()).ToHex();
}

uint64_t NameId(const std::string& name) {
  PackId id = PackId::Of(name.data(), name.size());
  return DecodeFixed64(reinterpret_cast<const char*>(id.bytes.data()));
}

Status ReadWholeFile(const std::string& path, std::string* out,
                     size_t max = 1 << 20) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(path, errno);
  out->clear();
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      return Status::FromErrno(path, e);
    }
    if (n == 0) break;
    out->append(buf, static_cast<size_t>(n));
    if (out->size() > max) {
      ::close(fd);
      return Status::Corruption(path + ": larger than " + std::to_string(max) +
                                " bytes");
    }
  }
  ::close(fd);
  return Status::OK();
}

}  // namespace

// Writes all of `iov` at `offset`, 1024 iovecs (Linux's UIO_MAXIOV) at a
// time, retrying short writes and EINTR.
Status WriteVec(int fd, std::vector<struct iovec> iov, uint64_t offset) {
  constexpr size_t kMaxIov = 1024;
  size_t first = 0;
  for (;;) {
    while (first < iov.size() && iov[first].iov_len == 0) ++first;
    if (first == iov.size()) break;
    const int count = static_cast<int>(std::min(iov.size() - first, kMaxIov));
    ssize_t n =
        ::pwritev(fd, iov.data() + first, count, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("pwritev", errno);
    }
    if (n == 0) return Status::IOError("pwritev wrote nothing");
    offset += static_cast<uint64_t>(n);
    size_t left = static_cast<size_t>(n);
    while (first < iov.size() && left >= iov[first].iov_len) {
      left -= iov[first].iov_len;
      ++first;
    }
    if (first < iov.size()) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
  return Status::OK();
}

namespace {

// Writes `contents` to a new file `path` (O_EXCL).
Status WriteNewFile(const std::string& path, const std::string& contents) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return Status::FromErrno(path, errno);
  Status s =
      WriteVec(fd, {{const_cast<char*>(contents.data()), contents.size()}}, 0);
  if (!s.ok()) s = s.WithContext(path);
  ::close(fd);
  if (!s.ok()) ::unlink(path.c_str());
  return s;
}

int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) {
  ::remove(path);
  return 0;
}

// Removes the tree at `path` (only ever called on paths inside a cache
// directory's ns/ or tmp/).
void RemoveTree(const std::string& path) {
  ::nftw(path.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS);
}

uint64_t g_disk_bytes = 0;
int AddBlocks(const char*, const struct stat* st, int, struct FTW*) {
  g_disk_bytes += static_cast<uint64_t>(st->st_blocks) * 512;
  return 0;
}
std::mutex g_du_mu;

uint64_t DiskUsage(const std::string& dir) {
  std::lock_guard<std::mutex> lock(g_du_mu);
  g_disk_bytes = 0;
  ::nftw(dir.c_str(), AddBlocks, 16, FTW_PHYS);
  return g_disk_bytes;
}

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (struct dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  return names;
}

Status MakeDirs(const std::string& dir) {
  std::string partial;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    partial = dir.substr(0, pos);
    if (partial.empty()) continue;
    if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
      return Status::FromErrno(partial + ": cannot create the cache directory",
                               errno);
    }
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return Status::FromErrno(dir, errno);
  if (!S_ISDIR(st.st_mode)) {
    return Status::IOError(dir + ": not a directory");
  }
  return Status::OK();
}

// Reads a table's slots header fields without mapping it.
bool ReadSlotsHeader(const std::string& table_dir, char* hdr) {
  int fd = ::open((table_dir + "/slots").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = ::pread(fd, hdr, kSlotsHeaderSize, 0);
  ::close(fd);
  return n == static_cast<ssize_t>(kSlotsHeaderSize) &&
         std::memcmp(hdr, kSlotsMagic, 8) == 0;
}

}  // namespace

void DefaultWarn(const std::string& message) {
  std::string line = "ufspack: warning: " + message + "\n";
  ssize_t ignored = ::write(2, line.data(), line.size());
  (void)ignored;
}

// --- Store
// --------------------------------------------------------------------

Status Store::Open(const std::string& dir, uint64_t limit, uint64_t min_bytes,
                   const WarnFn& warn, std::unique_ptr<Store>* out) {
  if (dir.empty()) {
    return Status::InvalidArgument("cache directory: empty path");
  }
  std::unique_ptr<Store> s(new Store());
  s->dir_ = dir;
  while (s->dir_.size() > 1 && s->dir_.back() == '/') s->dir_.pop_back();
  s->warn_ = warn ? warn : WarnFn(DefaultWarn);
  UFSPACK_RETURN_IF_ERROR(s->Init(limit, min_bytes));
  *out = std::move(s);
  return Status::OK();
}

Store::~Store() {
  if (header_ != nullptr) FlushLookups();
  if (header_ != nullptr) ::munmap(header_, kHeaderSize);
  if (header_fd_ >= 0) ::close(header_fd_);  // drops the flock
}

std::atomic<uint64_t>* Store::word(uint64_t offset) const {
  return reinterpret_cast<std::atomic<uint64_t>*>(header_ + offset);
}

Status Store::Init(uint64_t limit, uint64_t min_bytes) {
  if (!HostIsLittleEndian()) {
    return Status::NotSupported(
        "the cache's shared counters are "
        "little-endian; this host is not");
  }
  const std::string header_path = dir_ + "/" + kHeaderFileName;
  // The file system the directory is (or will be) on: that of its nearest
  // existing ancestor, so a tier too small to use is refused before
  // anything is created in it.
  struct statvfs vfs;
  std::string probe = dir_;
  while (::statvfs(probe.c_str(), &vfs) != 0) {
    const size_t slash = probe.find_last_of('/');
    if ((errno != ENOENT && errno != ENOTDIR) || slash == std::string::npos) {
      return Status::FromErrno(dir_ + ": statvfs", errno);
    }
    probe = slash == 0 ? "/" : probe.substr(0, slash);
  }
  const uint64_t fs_avail =
      static_cast<uint64_t>(vfs.f_bavail) * static_cast<uint64_t>(vfs.f_frsize);
  const uint64_t fs_total =
      static_cast<uint64_t>(vfs.f_blocks) * static_cast<uint64_t>(vfs.f_frsize);
  struct stat hst;
  if (min_bytes > 0 && ::stat(header_path.c_str(), &hst) != 0) {
    const uint64_t keep_free = fs_total / 100;
    const uint64_t reachable = fs_avail > keep_free ? fs_avail - keep_free : 0;
    const uint64_t would =
        std::min(limit != 0 ? limit : fs_avail / 2, reachable);
    if (would < min_bytes) {
      return Status::NotSupported(
          dir_ + " could hold only " + FormatBytes(would) + " (file system " +
          FormatBytes(fs_total) + ", " + FormatBytes(fs_avail) +
          " free), less than the " + FormatBytes(min_bytes) +
          " a RAM tier needs to be useful");
    }
  }
  UFSPACK_RETURN_IF_ERROR(MakeDirs(dir_));

  int fd = ::open(header_path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) {
    // A new cache: only in an empty directory, so that clearing or
    // evicting can never touch anything that was not the cache's.
    for (const std::string& n : ListDir(dir_)) {
      if (n.rfind(".ufspack-cache.", 0) == 0) continue;  // a racing creator
      return Status::IOError(
          dir_ +
          ": not a ufspack cache directory (it is not empty and has no " +
          kHeaderFileName + " file); give a new or empty directory");
    }
    std::string hdr(kHeaderSize, '\0');
    std::memcpy(&hdr[0], kHeaderMagic, 8);
    EncodeFixed32(&hdr[kHdrVersion], kCacheVersion);
    EncodeFixed32(&hdr[kHdrSize], static_cast<uint32_t>(kHeaderSize));
    EncodeFixed64(&hdr[kHdrLimit], limit != 0 ? limit : fs_avail / 2);
    EncodeFixed64(&hdr[kHdrCharged], kBaseCharge);
    EncodeFixed64(&hdr[kHdrCreated], static_cast<uint64_t>(::time(nullptr)));
    const std::string tmp = dir_ + "/.ufspack-cache." + UniqueSuffix();
    UFSPACK_RETURN_IF_ERROR(WriteNewFile(tmp, hdr));
    // link(2) publishes it only if no other process did first.
    if (::link(tmp.c_str(), header_path.c_str()) != 0 && errno != EEXIST) {
      int e = errno;
      ::unlink(tmp.c_str());
      return Status::FromErrno(header_path, e);
    }
    ::unlink(tmp.c_str());
    fd = ::open(header_path.c_str(), O_RDWR | O_CLOEXEC);
  }
  if (fd < 0) return Status::FromErrno(header_path, errno);
  header_fd_ = fd;
  struct stat st;
  if (::fstat(fd, &st) != 0) return Status::FromErrno(header_path, errno);
  if (static_cast<uint64_t>(st.st_size) != kHeaderSize) {
    return Status::Corruption(header_path + ": size: expected " +
                              std::to_string(kHeaderSize) + " bytes, found " +
                              std::to_string(st.st_size) +
                              " (not a ufspack cache header)");
  }
  char check[16];
  if (::pread(fd, check, sizeof(check), 0) != sizeof(check)) {
    return Status::FromErrno(header_path + ": read", errno);
  }
  if (std::memcmp(check, kHeaderMagic, 8) != 0) {
    return Status::Corruption(header_path +
                              ": bad magic, not a ufspack cache header");
  }
  const uint32_t version = DecodeFixed32(check + kHdrVersion);
  if (version != kCacheVersion) {
    return Status::NotSupported(
        header_path + ": cache version " + std::to_string(version) +
        ", this build reads version " + std::to_string(kCacheVersion));
  }
  // The header is written only through the mapping's atomics: reserve its
  // blocks (tmpfs: ENOSPC here, never SIGBUS later).
  int e = ::posix_fallocate(fd, 0, kHeaderSize);
  if (e != 0 && e != EOPNOTSUPP && e != EINVAL) {
    return Status::FromErrno(header_path + ": reserving its blocks", e);
  }
  void* m =
      ::mmap(nullptr, kHeaderSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) return Status::FromErrno(header_path + ": mmap", errno);
  header_ = static_cast<char*>(m);
  for (const char* sub : {"ns", "tmp", "sources", "locks"}) {
    const std::string p = dir_ + "/" + sub;
    if (::mkdir(p.c_str(), 0755) != 0 && errno != EEXIST) {
      return Status::FromErrno(p, errno);
    }
  }
  // Alone (no process holds the shared lock): repair what crashed
  // processes left.  Then hold the shared lock while attached.
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) Recount();
  while (::flock(fd, LOCK_SH) != 0) {
    if (errno != EINTR)
      return Status::FromErrno(header_path + ": flock", errno);
  }

  if (limit != 0) word(kHdrLimit)->store(limit);
  const uint64_t configured = word(kHdrLimit)->load();
  const uint64_t charged = word(kHdrCharged)->load();
  // What this file system can still give the cache.  Kept free: 1% of it.
  const uint64_t keep_free = fs_total / 100;
  const uint64_t reachable =
      charged + (fs_avail > keep_free ? fs_avail - keep_free : 0);
  limit_ = std::min(configured, reachable);
  if (min_bytes > 0 && limit_ < min_bytes) {
    return Status::NotSupported(
        dir_ + " can hold only " + FormatBytes(limit_) + " (file system " +
        FormatBytes(fs_total) + ", " + FormatBytes(fs_avail) +
        " free), less than the " + FormatBytes(min_bytes) +
        " a RAM tier needs to be useful");
  }
  if (configured > reachable) {
    WarnOnce("limit", "cache " + dir_ + ": limit " + FormatBytes(configured) +
                          " is more than its file system can hold (" +
                          FormatBytes(fs_avail) + " free); using " +
                          FormatBytes(limit_));
  }
  return Status::OK();
}

void Store::Recount() {
  for (const std::string& n : ListDir(dir_ + "/tmp")) {
    RemoveTree(dir_ + "/tmp/" + n);
  }
  uint64_t charged = kBaseCharge;
  uint64_t entries = 0;
  for (const std::string& n : ListDir(dir_ + "/ns")) {
    char hdr[kSlotsHeaderSize];
    const std::string t = dir_ + "/ns/" + n;
    if (!ReadSlotsHeader(t, hdr)) {
      RemoveTree(t);  // not a complete table: cannot be served
      continue;
    }
    charged += DecodeFixed64(hdr + kSlCharged);
    entries += DecodeFixed64(hdr + kSlEntries);
  }
  charged += kBlock * ListDir(dir_ + "/sources").size();
  word(kHdrCharged)->store(charged);
  word(kHdrCounters + 8 * kEntries)->store(entries);
}

void Store::CountLookup(bool hit) {
  static std::atomic<unsigned> next_thread{0};
  thread_local const unsigned thread = next_thread.fetch_add(1);
  Shard& shard = shards_[thread % kShards];
  std::atomic<uint64_t>& local = hit ? shard.hits : shard.misses;
  if (local.fetch_add(1, std::memory_order_relaxed) + 1 >= kLump) {
    const uint64_t n = local.exchange(0, std::memory_order_relaxed);
    if (n > 0) Count(hit ? kHits : kMisses, static_cast<int64_t>(n));
  }
}

void Store::FlushLookups() const {
  for (Shard& shard : shards_) {
    const uint64_t h = shard.hits.exchange(0, std::memory_order_relaxed);
    const uint64_t m = shard.misses.exchange(0, std::memory_order_relaxed);
    if (h > 0) {
      word(kHdrCounters + 8 * kHits)->fetch_add(h, std::memory_order_relaxed);
    }
    if (m > 0) {
      word(kHdrCounters + 8 * kMisses)->fetch_add(m, std::memory_order_relaxed);
    }
  }
}

void Store::Count(Counter c, int64_t delta) {
  word(kHdrCounters + 8 * c)
      ->fetch_add(static_cast<uint64_t>(delta), std::memory_order_relaxed);
}

bool Store::Reserve(uint64_t n, const Table* keep) {
  std::atomic<uint64_t>* charged = word(kHdrCharged);
  for (int attempt = 0; attempt < 2; ++attempt) {
    uint64_t u = charged->load();
    while (u <= limit_ && n <= limit_ - u) {
      if (charged->compare_exchange_weak(u, u + n)) return true;
    }
    // Full.  Evicting means listing the directory: at most once a second
    // per process, so a full cache does not turn every miss into a scan.
    const int64_t now = NowMs();
    int64_t last = last_evict_ms_.load();
    if (attempt > 0 || now - last < 1000 ||
        !last_evict_ms_.compare_exchange_strong(last, now)) {
      break;
    }
    if (EvictUnused(n, keep) == 0) break;
  }
  Count(kRefused);
  return false;
}

void Store::Unreserve(uint64_t n) { word(kHdrCharged)->fetch_sub(n); }

uint64_t Store::EvictUnused(uint64_t need, const Table* keep) {
  struct Candidate {
    int64_t mtime;
    std::string name;
    int fd;
  };
  std::vector<Candidate> unused;
  for (const std::string& n : ListDir(dir_ + "/ns")) {
    const std::string t = dir_ + "/ns/" + n;
    if (keep != nullptr && keep->dir() == t) continue;
    int fd = ::open((t + "/key").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st;
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0 || ::fstat(fd, &st) != 0) {
      ::close(fd);  // in use
      continue;
    }
    unused.push_back({static_cast<int64_t>(st.st_mtime), n, fd});
  }
  std::sort(
      unused.begin(), unused.end(),
      [](const Candidate& a, const Candidate& b) { return a.mtime < b.mtime; });
  uint64_t freed = 0;
  for (const Candidate& c : unused) {
    if (freed < need) {
      const std::string t = dir_ + "/ns/" + c.name;
      char hdr[kSlotsHeaderSize];
      const bool valid = ReadSlotsHeader(t, hdr);
      const std::string gone = dir_ + "/tmp/evict-" + UniqueSuffix();
      if (::rename(t.c_str(), gone.c_str()) == 0) {
        RemoveTree(gone);
        if (valid) {
          const uint64_t charged = DecodeFixed64(hdr + kSlCharged);
          Unreserve(charged);
          Count(kEntries,
                -static_cast<int64_t>(DecodeFixed64(hdr + kSlEntries)));
          freed += charged;
        }
        Count(kEvicted);
      }
    }
    ::close(c.fd);
  }
  return freed;
}

Status Store::OpenTable(const std::string& name, uint64_t slot_count,
                        bool create, const Populate& populate,
                        std::unique_ptr<Table>* out) {
  const std::string hex = NameHex(name);
  const std::string path = dir_ + "/ns/" + hex;
  for (int attempt = 0; attempt < 4; ++attempt) {
    std::unique_ptr<Table> t(new Table());
    t->store_ = this;
    t->dir_ = path;
    t->table_id_ = NameId(name);
    t->key_fd_ = ::open((path + "/key").c_str(), O_RDWR | O_CLOEXEC);
    if (t->key_fd_ >= 0) {
      while (::flock(t->key_fd_, LOCK_SH) != 0 && errno == EINTR) {
      }
      // Evicted between open and flock?  Then it is no longer at `path`.
      struct stat a, b;
      if (::fstat(t->key_fd_, &a) != 0 ||
          ::stat((path + "/key").c_str(), &b) != 0 || a.st_ino != b.st_ino ||
          a.st_dev != b.st_dev) {
        continue;
      }
      uint64_t count = 0;
      struct stat st;
      int sfd = -1;
      Status valid = [&]() -> Status {
        char buf[4096];
        ssize_t n = ::pread(t->key_fd_, buf, sizeof(buf), 0);
        if (n < 0 || std::string(buf, static_cast<size_t>(n)) != name) {
          return Status::Corruption(path + "/key: expected table name '" +
                                    EscapeBytes(name) + "'");
        }
        const std::string slots = path + "/slots";
        sfd = ::open(slots.c_str(), O_RDWR | O_CLOEXEC);
        if (sfd < 0)
          return Status::Corruption(slots + ": " + std::strerror(errno));
        char hdr[kSlotsHeaderSize];
        if (::fstat(sfd, &st) != 0 || ::pread(sfd, hdr, sizeof(hdr), 0) !=
                                          static_cast<ssize_t>(sizeof(hdr))) {
          return Status::Corruption(slots + ": unreadable slots header");
        }
        count = DecodeFixed64(hdr + kSlCount);
        if (std::memcmp(hdr, kSlotsMagic, 8) != 0 ||
            DecodeFixed32(hdr + kSlVersion) != kCacheVersion ||
            DecodeFixed64(hdr + kSlTableId) != t->table_id_ ||
            count >
                (static_cast<uint64_t>(st.st_size) - kSlotsHeaderSize) / 8 ||
            static_cast<uint64_t>(st.st_size) != kSlotsHeaderSize + 8 * count ||
            (slot_count != 0 && count != slot_count)) {
          return Status::Corruption(slots + ": bad slots header (expected " +
                                    std::to_string(slot_count) + " slots of " +
                                    EscapeBytes(name) + ", found " +
                                    std::to_string(count) + ")");
        }
        if (::access((path + "/log").c_str(), R_OK | W_OK) != 0) {
          return Status::Corruption(path + "/log: " + std::strerror(errno));
        }
        return Status::OK();
      }();
      if (!valid.ok()) {
        if (sfd >= 0) ::close(sfd);
        // The cache is untrusted: a damaged table nobody else has open is
        // discarded and made anew; one in use is left to its users.
        if (::flock(t->key_fd_, LOCK_EX | LOCK_NB) != 0) return valid;
        const std::string gone = dir_ + "/tmp/damaged-" + UniqueSuffix();
        if (::rename(path.c_str(), gone.c_str()) != 0) return valid;
        RemoveTree(gone);
        Count(kDropped);
        WarnOnce("damaged:" + path, "cache " + dir_ +
                                        ": discarded a damaged table (" +
                                        valid.ToString() + ")");
        continue;
      }
      const std::string slots = path + "/slots";
      t->slot_count_ = count;
      t->slots_bytes_ = static_cast<size_t>(st.st_size);
      void* m = ::mmap(nullptr, t->slots_bytes_, PROT_READ | PROT_WRITE,
                       MAP_SHARED, sfd, 0);
      ::close(sfd);
      if (m == MAP_FAILED) return Status::FromErrno(slots + ": mmap", errno);
      t->slots_ = static_cast<char*>(m);
      const std::string log = path + "/log";
      t->log_fd_ = ::open(log.c_str(), O_RDWR | O_CLOEXEC);
      if (t->log_fd_ < 0) return Status::FromErrno(log, errno);
      ::futimens(t->key_fd_, nullptr);  // least recently attached goes first
      *out = std::move(t);
      return Status::OK();
    }
    if (errno != ENOENT) return Status::FromErrno(path + "/key", errno);
    if (!create)
      return Status::NotFound(path + ": no table " + EscapeBytes(name));

    // Create: one process at a time per table (the others then open it).
    const std::string lock_path = dir_ + "/locks/" + hex;
    int lock_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock_fd < 0) return Status::FromErrno(lock_path, errno);
    while (::flock(lock_fd, LOCK_EX) != 0 && errno == EINTR) {
    }
    struct stat st;
    if (::stat((path + "/key").c_str(), &st) == 0) {
      ::close(lock_fd);
      continue;  // created meanwhile
    }
    const std::string tmp = dir_ + "/tmp/new-" + UniqueSuffix();
    uint64_t charge = 0;
    Status s = [&]() -> Status {
      if (::mkdir(tmp.c_str(), 0755) != 0) return Status::FromErrno(tmp, errno);
      UFSPACK_RETURN_IF_ERROR(WriteNewFile(tmp + "/key", name));
      UFSPACK_RETURN_IF_ERROR(WriteNewFile(tmp + "/log", ""));
      const uint64_t slots_size = kSlotsHeaderSize + 8 * slot_count;
      uint64_t extra = 0;
      if (populate) UFSPACK_RETURN_IF_ERROR(populate(tmp, &extra));
      // The directory, key, log's last partial block and the ns/ entry.
      charge = 4 * kBlock + RoundUp(slots_size, kBlock) + extra;
      if (!Reserve(charge, nullptr)) {
        charge = 0;
        return Status::IOError("cache " + dir_ + " is full (limit " +
                               FormatBytes(limit_) + ")");
      }
      std::string hdr(kSlotsHeaderSize, '\0');
      std::memcpy(&hdr[0], kSlotsMagic, 8);
      EncodeFixed32(&hdr[kSlVersion], kCacheVersion);
      EncodeFixed64(&hdr[kSlCount], slot_count);
      EncodeFixed64(&hdr[kSlCharged], charge);
      EncodeFixed64(&hdr[kSlTableId], NameId(name));
      const std::string slots = tmp + "/slots";
      UFSPACK_RETURN_IF_ERROR(WriteNewFile(slots, hdr));
      int fd = ::open(slots.c_str(), O_RDWR | O_CLOEXEC);
      if (fd < 0) return Status::FromErrno(slots, errno);
      // The slot words are written through a shared mapping: allocate
      // them now (ENOSPC here, never SIGBUS later on a full tmpfs).
      int e = ::posix_fallocate(fd, 0, static_cast<off_t>(slots_size));
      ::close(fd);
      if (e != 0) return Status::FromErrno(slots + ": allocating", e);
      if (::rename(tmp.c_str(), path.c_str()) != 0) {
        return Status::FromErrno(path, errno);
      }
      return Status::OK();
    }();
    ::close(lock_fd);
    if (!s.ok()) {
      RemoveTree(tmp);
      if (charge > 0) Unreserve(charge);
      return s;
    }
  }
  return Status::IOError(path +
                         ": table keeps disappearing (evicted while "
                         "being opened?)");
}

void Store::RememberSource(const std::string& source,
                           const std::string& pack_hex) {
  const std::string path = dir_ + "/sources/" + NameHex(source);
  const std::string contents = pack_hex + "\n" + source + "\n";
  std::string old;
  const bool existed = ReadWholeFile(path, &old).ok();
  if (existed && old == contents) return;
  if (!existed && !Reserve(kBlock, nullptr)) return;
  const std::string tmp = dir_ + "/tmp/src-" + UniqueSuffix();
  if (!WriteNewFile(tmp, contents).ok() ||
      ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    if (!existed) Unreserve(kBlock);
  }
}

Status Store::LookupSource(const std::string& source,
                           std::string* pack_hex) const {
  const std::string path = dir_ + "/sources/" + NameHex(source);
  std::string contents;
  Status s = ReadWholeFile(path, &contents);
  if (!s.ok())
    return Status::NotFound(source + ": never opened through " + dir_);
  const size_t nl = contents.find('\n');
  if (nl != 32 || contents.substr(33) != source + "\n") {
    return Status::Corruption(path + ": damaged source record");
  }
  *pack_hex = contents.substr(0, 32);
  return Status::OK();
}

void Store::WarnOnce(const std::string& key, const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(warn_mu_);
    if (!warned_.insert(key).second) return;
  }
  warn_(message);
}

void Store::WriteFailed(const std::string& what, const Status& s) {
  Count(kErrors);
  writes_disabled_.store(true);
  WarnOnce("write", "cache " + dir_ + ": " + what + " failed (" + s.ToString() +
                        "); records are read from the source and no longer "
                        "cached in this directory by this process");
}

CacheTierStats Store::Stats() const {
  FlushLookups();
  CacheTierStats st;
  st.dir = dir_;
  st.limit = limit_;
  st.charged_bytes = word(kHdrCharged)->load();
  st.disk_bytes = DiskUsage(dir_);
  st.tables = ListDir(dir_ + "/ns").size();
  uint64_t c[kCounterCount];
  for (int i = 0; i < kCounterCount; ++i) {
    c[i] = word(kHdrCounters + 8 * i)->load(std::memory_order_relaxed);
  }
  st.hits = c[kHits];
  st.misses = c[kMisses];
  st.inserts = c[kInserts];
  st.refused = c[kRefused];
  st.dropped = c[kDropped];
  st.errors = c[kErrors];
  st.evicted_tables = c[kEvicted];
  st.entries = c[kEntries];
  return st;
}

Status Store::StatDir(const std::string& dir, CacheTierStats* stats) {
  const std::string header_path = dir + "/" + kHeaderFileName;
  std::string hdr;
  Status s = ReadWholeFile(header_path, &hdr, kHeaderSize);
  if (!s.ok()) {
    if (s.IsNotFound()) {
      return Status::NotFound(dir + ": not a ufspack cache directory (no " +
                              kHeaderFileName + ")");
    }
    return s;
  }
  if (hdr.size() != kHeaderSize ||
      std::memcmp(hdr.data(), kHeaderMagic, 8) != 0) {
    return Status::Corruption(header_path + ": not a ufspack cache header");
  }
  if (DecodeFixed32(hdr.data() + kHdrVersion) != kCacheVersion) {
    return Status::NotSupported(
        header_path + ": unsupported cache version " +
        std::to_string(DecodeFixed32(hdr.data() + kHdrVersion)));
  }
  stats->dir = dir;
  stats->limit = DecodeFixed64(hdr.data() + kHdrLimit);
  stats->charged_bytes = DecodeFixed64(hdr.data() + kHdrCharged);
  stats->disk_bytes = DiskUsage(dir);
  stats->tables = ListDir(dir + "/ns").size();
  auto c = [&](int i) {
    return DecodeFixed64(hdr.data() + kHdrCounters + 8 * i);
  };
  stats->hits = c(kHits);
  stats->misses = c(kMisses);
  stats->inserts = c(kInserts);
  stats->refused = c(kRefused);
  stats->dropped = c(kDropped);
  stats->errors = c(kErrors);
  stats->evicted_tables = c(kEvicted);
  stats->entries = c(kEntries);
  return Status::OK();
}

Status Store::ClearDir(const std::string& dir, uint64_t* kept) {
  CacheTierStats ignored;
  UFSPACK_RETURN_IF_ERROR(StatDir(dir, &ignored));
  std::unique_ptr<Store> s;
  UFSPACK_RETURN_IF_ERROR(Open(dir, 0, 0, WarnFn(), &s));
  s->EvictUnused(UINT64_MAX, nullptr);
  // Alone?  Then the counters start again too.
  if (::flock(s->header_fd_, LOCK_EX | LOCK_NB) == 0) {
    for (const std::string& n : ListDir(dir + "/sources")) {
      ::unlink((dir + "/sources/" + n).c_str());
    }
    for (const std::string& n : ListDir(dir + "/locks")) {
      ::unlink((dir + "/locks/" + n).c_str());
    }
    for (int i = 0; i < kCounterCount; ++i) {
      s->word(kHdrCounters + 8 * i)->store(0);
    }
    s->Recount();
  }
  *kept = ListDir(dir + "/ns").size();
  return Status::OK();
}

// --- Table
// --------------------------------------------------------------------

Table::~Table() {
  if (slots_ != nullptr) ::munmap(slots_, slots_bytes_);
  if (log_fd_ >= 0) ::close(log_fd_);
  if (key_fd_ >= 0) ::close(key_fd_);
}

std::atomic<uint64_t>* Table::header_word(uint64_t offset) const {
  return reinterpret_cast<std::atomic<uint64_t>*>(slots_ + offset);
}

std::atomic<uint64_t>* Table::slot_word(uint64_t slot) const {
  return header_word(kSlotsHeaderSize + 8 * slot);
}

bool Table::Contains(uint64_t slot) const {
  return slot < slot_count_ &&
         slot_word(slot)->load(std::memory_order_acquire) != 0;
}

// A slot word: bits 63..24 hold (log offset / 8) + 1, bits 23..0 the
// entry's length.  0 is an empty slot.
bool Table::ReadEntry(uint64_t slot, uint64_t w, char* dst, uint64_t length,
                      const uint64_t* expected_checksum) {
  const uint64_t offset = ((w >> 24) - 1) * 8;
  const uint64_t len = w & kMaxEntryLength;
  if (len != length) {
    Drop(slot, w);
    return false;
  }
  char hdr[kEntryHeaderSize];
  struct iovec iov[2] = {{hdr, sizeof(hdr)}, {dst, static_cast<size_t>(len)}};
  const uint64_t total = kEntryHeaderSize + len;
  uint64_t done = 0;
  int iovcnt = 2;
  struct iovec* v = iov;
  while (done < total) {
    ssize_t n = ::preadv(log_fd_, v, iovcnt, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      store_->Count(kErrors);
      store_->WarnOnce("read", "cache " + store_->dir() + ": reading " + dir_ +
                                   "/log failed (" + std::strerror(errno) +
                                   "); reading from the source instead");
      return false;
    }
    if (n == 0) break;
    done += static_cast<uint64_t>(n);
    // Advance the iovecs past what was read.
    size_t left = static_cast<size_t>(n);
    while (iovcnt > 0 && left >= v->iov_len) {
      left -= v->iov_len;
      ++v;
      --iovcnt;
    }
    if (iovcnt > 0) {
      v->iov_base = static_cast<char*>(v->iov_base) + left;
      v->iov_len -= left;
    }
  }
  const uint64_t checksum = DecodeFixed64(hdr + 24);
  if (done != total || DecodeFixed32(hdr) != kEntryMagic ||
      DecodeFixed32(hdr + 4) != len || DecodeFixed64(hdr + 8) != slot ||
      DecodeFixed64(hdr + 16) != table_id_ ||
      (expected_checksum != nullptr && checksum != *expected_checksum) ||
      Checksum64(dst, static_cast<size_t>(len)) != checksum) {
    Drop(slot, w);
    return false;
  }
  return true;
}

void Table::Drop(uint64_t slot, uint64_t w) {
  if (slot_word(slot)->compare_exchange_strong(w, 0)) {
    store_->Count(kDropped);
    store_->Count(kEntries, -1);
    header_word(kSlEntries)->fetch_sub(1);
  }
}

bool Table::Lookup(uint64_t slot, uint64_t length, uint64_t checksum,
                   char* dst) {
  if (slot < slot_count_) {
    const uint64_t w = slot_word(slot)->load(std::memory_order_acquire);
    if (w != 0 && ReadEntry(slot, w, dst, length, &checksum)) {
      store_->CountLookup(true);
      return true;
    }
  }
  store_->CountLookup(false);
  return false;
}

bool Table::Get(uint64_t slot, std::string* out) {
  if (slot < slot_count_) {
    const uint64_t w = slot_word(slot)->load(std::memory_order_acquire);
    if (w != 0) {
      out->resize(static_cast<size_t>(w & kMaxEntryLength));
      if (ReadEntry(slot, w, out->data(), out->size(), nullptr)) {
        store_->CountLookup(true);
        return true;
      }
    }
  }
  out->clear();
  store_->CountLookup(false);
  return false;
}

void Table::Release(uint64_t offset, uint64_t size) {
  // Whatever part of the write reached the disk is deallocated first, so
  // the charge can go without the directory outgrowing it.  Where the file
  // system cannot punch holes the charge stays (space wasted, limit kept).
  if (::fallocate(log_fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                  static_cast<off_t>(offset), static_cast<off_t>(size)) == 0) {
    header_word(kSlCharged)->fetch_sub(size);
    store_->Unreserve(size);
  }
}

void Table::EncodeEntryHeader(char* hdr, uint64_t slot, uint64_t length,
                              uint64_t checksum) const {
  EncodeFixed32(hdr, kEntryMagic);
  EncodeFixed32(hdr + 4, static_cast<uint32_t>(length));
  EncodeFixed64(hdr + 8, slot);
  EncodeFixed64(hdr + 16, table_id_);
  EncodeFixed64(hdr + 24, checksum);
}

bool Table::Publish(uint64_t slot, uint64_t offset, uint64_t length) {
  uint64_t expected = 0;
  const uint64_t w = ((offset / 8 + 1) << 24) | length;
  if (!slot_word(slot)->compare_exchange_strong(expected, w,
                                                std::memory_order_release)) {
    return false;  // another process filled it meanwhile
  }
  header_word(kSlEntries)->fetch_add(1);
  store_->Count(kEntries);
  store_->Count(kInserts);
  return true;
}

void Table::PutMany(const std::vector<Item>& items,
                    std::vector<PutResult>* results) {
  results->assign(items.size(), PutResult::kPresent);
  std::vector<size_t> todo;
  uint64_t total = 0;
  for (size_t k = 0; k < items.size(); ++k) {
    const Item& it = items[k];
    if (it.slot >= slot_count_) {
      (*results)[k] = PutResult::kRefused;
    } else if (it.length > kMaxEntryLength) {
      (*results)[k] = PutResult::kTooLarge;
    } else if (slot_word(it.slot)->load(std::memory_order_acquire) == 0) {
      todo.push_back(k);
      total += RoundUp(kEntryHeaderSize + it.length, 8);
    }
  }
  if (todo.empty()) return;
  if (store_->writes_disabled()) {
    for (size_t k : todo) (*results)[k] = PutResult::kFailed;
    return;
  }
  if (!store_->Reserve(total, this)) {
    // The run does not fit: offer its entries one by one (some may).
    if (todo.size() == 1) {
      (*results)[todo[0]] = PutResult::kRefused;
      return;
    }
    std::vector<PutResult> one;
    for (size_t k : todo) {
      PutMany({items[k]}, &one);
      (*results)[k] = one[0];
    }
    return;
  }
  header_word(kSlCharged)->fetch_add(total);
  const uint64_t offset = header_word(kSlTail)->fetch_add(total);
  if (((offset + total) / 8 + 1) >> 40 != 0) {
    store_->Count(kRefused);
    for (size_t k : todo) (*results)[k] = PutResult::kRefused;
    return;
  }
  static const char kZeros[8] = {0};
  std::vector<char> headers(todo.size() * kEntryHeaderSize);
  std::vector<struct iovec> iov;
  std::vector<uint64_t> offsets;
  uint64_t at = offset;
  for (size_t j = 0; j < todo.size(); ++j) {
    const Item& it = items[todo[j]];
    char* hdr = headers.data() + j * kEntryHeaderSize;
    EncodeEntryHeader(hdr, it.slot, it.length, it.checksum);
    iov.push_back({hdr, kEntryHeaderSize});
    if (it.length > 0) {
      iov.push_back(
          {const_cast<char*>(it.data), static_cast<size_t>(it.length)});
    }
    const uint64_t size = RoundUp(kEntryHeaderSize + it.length, 8);
    const uint64_t pad = size - kEntryHeaderSize - it.length;
    if (pad > 0 && j + 1 < todo.size()) {
      iov.push_back({const_cast<char*>(kZeros), static_cast<size_t>(pad)});
    }
    offsets.push_back(at);
    at += size;
  }
  Status ws = WriteVec(log_fd_, std::move(iov), offset);
  if (!ws.ok()) {
    store_->WriteFailed("writing " + dir_ + "/log", ws);
    Release(offset, total);
    for (size_t k : todo) (*results)[k] = PutResult::kFailed;
    return;
  }
  for (size_t j = 0; j < todo.size(); ++j) {
    const Item& it = items[todo[j]];
    (*results)[todo[j]] = Publish(it.slot, offsets[j], it.length)
                              ? PutResult::kStored
                              : PutResult::kPresent;
  }
}

Table::PutResult Table::Put(uint64_t slot, const char* data, uint64_t length,
                            uint64_t checksum) {
  std::vector<PutResult> result;
  PutMany({{slot, data, length, checksum}}, &result);
  return result[0];
}

}  // namespace cache_internal
}  // namespace ufspack
