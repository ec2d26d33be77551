// Copyright 2026 The ufspack Authors.
#include "store.h"

#include <fcntl.h>
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
#include <thread>
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

// Header fields (byte offsets in DIR/ufspack-cache).
constexpr uint64_t kHdrVersion = 8;    // u32
constexpr uint64_t kHdrSize = 12;      // u32
constexpr uint64_t kHdrLimit = 16;     // u64
constexpr uint64_t kHdrCharged = 24;   // u64
constexpr uint64_t kHdrCounters = 32;  // u64 x kCounterCount
constexpr uint64_t kHdrCreated = 96;   // u64, unix seconds
static_assert(kHdrCounters + 8 * kCounterCount <= kHdrCreated, "layout");

// The subdirectories of a cache directory.
constexpr char kNs[] = "ns";
constexpr char kTmp[] = "tmp";
constexpr char kSources[] = "sources";
constexpr char kLocks[] = "locks";

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

// The names the cache gives tables, sources and locks: 32 lowercase hex
// digits.  Anything else in ns/, sources/ or locks/ is not the cache's.
bool IsHexName(const std::string& n) {
  if (n.size() != 32) return false;
  for (char c : n) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// What a table directory holds (SafeDir::RemoveTree deletes only these).
const std::vector<std::string> kTableFiles = {"key", "slots", "log",
                                              kIndexCopyName};

// How long a lock is waited for.  Holders are brief (an eviction's rename,
// a recount) except a table's creator, which copies the pack's index; a
// lock held longer (by a stuck or hostile process: anyone who can open
// the file can flock it) makes the cache or table unusable for this
// process instead of blocking it.
constexpr int64_t kLockWaitMs = 10 * 1000;
constexpr int64_t kCreateLockWaitMs = 120 * 1000;

// flock(fd, op) within `ms` milliseconds; IOError naming `what` after.
Status LockWithin(int fd, int op, int64_t ms, const std::string& what) {
  const int64_t deadline = NowMs() + ms;
  int64_t pause_us = 100;
  for (;;) {
    if (::flock(fd, op | LOCK_NB) == 0) return Status::OK();
    if (errno != EWOULDBLOCK && errno != EINTR) {
      return Status::FromErrno(what + ": flock", errno);
    }
    if (NowMs() >= deadline) {
      return Status::IOError(what + ": locked by another process for over " +
                             std::to_string(ms / 1000) +
                             " s; not used by this one");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(pause_us));
    pause_us = std::min<int64_t>(pause_us * 2, 20000);
  }
}

bool IsTmpName(const std::string& n) {
  for (const char* p : kTmpPrefixes) {
    if (n.rfind(p, 0) == 0) return true;
  }
  return false;
}

}  // namespace

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

// Reads a table's slots header fields without mapping it.
bool ReadSlotsHeader(const SafeDir& table, char* hdr) {
  int fd;
  if (!table.OpenFile("slots", O_RDONLY, &fd).ok()) return false;
  ssize_t n = ::pread(fd, hdr, kSlotsHeaderSize, 0);
  ::close(fd);
  return n == static_cast<ssize_t>(kSlotsHeaderSize) &&
         std::memcmp(hdr, kSlotsMagic, 8) == 0;
}

// The file system `dir` is (or will be) on: that of its nearest existing
// ancestor ("." for a relative path with none), so that a tier too small to
// use is refused before anything is created in it.
Status StatFileSystem(const std::string& dir, struct statvfs* vfs) {
  std::string probe = dir;
  while (::statvfs(probe.c_str(), vfs) != 0) {
    const int e = errno;
    if ((e != ENOENT && e != ENOTDIR) || probe == "." || probe == "/") {
      return Status::FromErrno(dir + ": statvfs of " + probe, e);
    }
    const size_t slash = probe.find_last_of('/');
    probe = slash == std::string::npos ? "."
            : slash == 0               ? "/"
                                       : probe.substr(0, slash);
  }
  return Status::OK();
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
  struct statvfs vfs;
  UFSPACK_RETURN_IF_ERROR(StatFileSystem(dir_, &vfs));
  const uint64_t fs_avail =
      static_cast<uint64_t>(vfs.f_bavail) * static_cast<uint64_t>(vfs.f_frsize);
  const uint64_t fs_total =
      static_cast<uint64_t>(vfs.f_blocks) * static_cast<uint64_t>(vfs.f_frsize);
  struct stat hst;
  if (min_bytes > 0 && ::lstat(header_path.c_str(), &hst) != 0) {
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
  UFSPACK_RETURN_IF_ERROR(SafeDir::OpenRoot(dir_, true, &root_));

  int fd = -1;
  struct stat st;
  // Any link count: a header is used only after its size, magic and
  // version are checked (and link(2) publishes it with two links for a
  // moment where renameat2 is missing).
  Status hs = root_.OpenFile(kHeaderFileName, O_RDWR, &fd, &st, true);
  if (hs.IsNotFound()) {
    // A new cache: only in an empty directory, so that clearing or
    // evicting can never touch anything that was not the cache's.
    for (const std::string& n : root_.List()) {
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
    const std::string tmp = ".ufspack-cache." + UniqueSuffix();
    UFSPACK_RETURN_IF_ERROR(root_.WriteNewFile(tmp, hdr));
    // Published whole, and only if no other process published first.
    UFSPACK_RETURN_IF_ERROR(root_.RenameNoReplace(tmp, kHeaderFileName));
    hs = root_.OpenFile(kHeaderFileName, O_RDWR, &fd, &st, true);
  }
  UFSPACK_RETURN_IF_ERROR(hs);
  header_fd_ = fd;
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
  UFSPACK_RETURN_IF_ERROR(root_.OpenDir(kNs, true, &ns_));
  UFSPACK_RETURN_IF_ERROR(root_.OpenDir(kTmp, true, &tmp_));
  UFSPACK_RETURN_IF_ERROR(root_.OpenDir(kSources, true, &sources_));
  UFSPACK_RETURN_IF_ERROR(root_.OpenDir(kLocks, true, &locks_));
  // Alone (no process holds the shared lock): repair what crashed
  // processes left.  Then hold the shared lock while attached.
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) Recount();
  UFSPACK_RETURN_IF_ERROR(LockWithin(fd, LOCK_SH, kLockWaitMs, header_path));

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
  for (const std::string& n : tmp_.List()) {
    if (IsTmpName(n)) tmp_.RemoveTree(n, kTableFiles);
  }
  uint64_t charged = kBaseCharge;
  uint64_t entries = 0;
  for (const std::string& n : ns_.List()) {
    if (!IsHexName(n)) continue;  // not the cache's: never touched
    SafeDir t;
    if (!ns_.OpenDir(n, false, &t).ok()) continue;  // a link, or foreign
    char hdr[kSlotsHeaderSize];
    if (!ReadSlotsHeader(t, hdr)) {
      ns_.RemoveTree(n, kTableFiles);  // incomplete: cannot be served
      continue;
    }
    charged += DecodeFixed64(hdr + kSlCharged);
    entries += DecodeFixed64(hdr + kSlEntries);
  }
  charged += kBlock * sources_.List().size();
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

void Store::Unreserve(uint64_t n) {
  // Saturating: `n` may come from a damaged table's slots header.
  std::atomic<uint64_t>* charged = word(kHdrCharged);
  uint64_t u = charged->load();
  while (!charged->compare_exchange_weak(u, u > n ? u - n : 0)) {
  }
}

uint64_t Store::EvictUnused(uint64_t need, const Table* keep) {
  struct Candidate {
    int64_t mtime;
    std::string name;
    int fd;
  };
  std::vector<Candidate> unused;
  for (const std::string& n : ns_.List()) {
    if (!IsHexName(n) || (keep != nullptr && keep->hex_ == n)) continue;
    // Only the cache's own tables: a real directory of ours holding a
    // regular `key` file (safe_dir.h).
    SafeDir t;
    if (!ns_.OpenDir(n, false, &t).ok()) continue;
    int fd;
    struct stat st;
    if (!t.OpenFile("key", O_RDONLY, &fd, &st).ok()) continue;
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
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
      SafeDir t;
      char hdr[kSlotsHeaderSize];
      const bool valid =
          ns_.OpenDir(c.name, false, &t).ok() && ReadSlotsHeader(t, hdr);
      const std::string gone = "evict-" + UniqueSuffix();
      if (ns_.Rename(c.name, tmp_, gone).ok()) {
        tmp_.RemoveTree(gone, kTableFiles);
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
  const std::string path = ns_.PathOf(hex);
  for (int attempt = 0; attempt < 4; ++attempt) {
    std::unique_ptr<Table> t(new Table());
    t->store_ = this;
    t->hex_ = hex;
    t->table_id_ = NameId(name);
    Status opened = ns_.OpenDir(hex, false, &t->home_);
    if (opened.ok()) {
      Status valid = OpenTableFiles(name, slot_count, t.get());
      if (valid.IsAborted()) continue;  // evicted between open and lock
      if (valid.ok()) {
        ::futimens(t->key_fd_, nullptr);  // least recently attached first
        *out = std::move(t);
        return Status::OK();
      }
      // Not damaged (out of descriptors or memory, a lock held too long):
      // the table stays; this process reads from the source.
      if (!valid.IsCorruption()) return valid;
      // The cache is untrusted: a damaged table nobody has attached (no
      // shared lock on a usable key) is discarded and made anew; one in
      // use is left to its users.
      if (t->key_fd_ >= 0 && ::flock(t->key_fd_, LOCK_EX | LOCK_NB) != 0) {
        return valid;
      }
      // Still the directory that was checked (not a table made since
      // under the same name)?
      struct stat here, now;
      if (::fstat(t->home_.fd(), &here) != 0 || !ns_.Lstat(hex, &now).ok() ||
          here.st_ino != now.st_ino || here.st_dev != now.st_dev) {
        continue;
      }
      char hdr[kSlotsHeaderSize];
      const bool counted = ReadSlotsHeader(t->home_, hdr);
      const std::string gone = "damaged-" + UniqueSuffix();
      if (!ns_.Rename(hex, tmp_, gone).ok()) return valid;
      tmp_.RemoveTree(gone, kTableFiles);
      if (counted) {
        // Its charge and entries leave with it (as on eviction).
        Unreserve(DecodeFixed64(hdr + kSlCharged));
        Count(kEntries, -static_cast<int64_t>(DecodeFixed64(hdr + kSlEntries)));
      }
      Count(kDropped);
      WarnOnce("damaged:" + path, "cache " + dir_ +
                                      ": discarded a damaged table (" +
                                      valid.ToString() + ")");
      continue;
    }
    if (!opened.IsNotFound()) {
      // Something other than a table of ours stands at its name (a link,
      // a file, another user's directory): not ours to remove.
      return opened;
    }
    if (!create)
      return Status::NotFound(path + ": no table " + EscapeBytes(name));
    Status created = CreateTable(name, hex, slot_count, populate);
    if (!created.ok()) return created;
  }
  return Status::IOError(path +
                         ": table keeps disappearing (evicted while "
                         "being opened?)");
}

Status Store::OpenTableFiles(const std::string& name, uint64_t slot_count,
                             Table* t) {
  const SafeDir& home = t->home_;
  // Damaged-table errors are Corruption (the caller discards the table);
  // Aborted: evicted meanwhile, try again.
  Status s = home.OpenFile("key", O_RDWR, &t->key_fd_);
  if (!s.ok()) {
    // Missing, or something other than our file (no errno: a link, a
    // FIFO, another user's): damaged.  Anything else (EMFILE, ENOMEM) is
    // this process's trouble, not the table's.
    if (s.IsNotFound() || s.errno_value() == 0) {
      return Status::Corruption(s.message());
    }
    return s;
  }
  UFSPACK_RETURN_IF_ERROR(
      LockWithin(t->key_fd_, LOCK_SH, kLockWaitMs, home.PathOf("key")));
  // Evicted between the open and the lock?  Then the directory is no
  // longer ns/<hex>, or its key no longer this file.
  struct stat a, b, c, d;
  if (::fstat(t->key_fd_, &a) != 0 || home.Lstat("key", &b).ok() == false ||
      a.st_ino != b.st_ino || a.st_dev != b.st_dev ||
      ::fstat(home.fd(), &c) != 0 || !ns_.Lstat(t->hex_, &d).ok() ||
      c.st_ino != d.st_ino || c.st_dev != d.st_dev) {
    return Status::Aborted(t->dir() + ": evicted while being opened");
  }
  char buf[4096];
  ssize_t n = ::pread(t->key_fd_, buf, sizeof(buf), 0);
  if (n < 0 || std::string(buf, static_cast<size_t>(n)) != name) {
    return Status::Corruption(t->dir() + "/key: expected table name '" +
                              EscapeBytes(name) + "'");
  }
  int sfd = -1;
  struct stat st;
  s = home.OpenFile("slots", O_RDWR, &sfd, &st);
  if (!s.ok()) {
    if (s.IsNotFound() || s.errno_value() == 0) {
      return Status::Corruption(s.message());
    }
    return s;
  }
  const std::string slots = home.PathOf("slots");
  char hdr[kSlotsHeaderSize];
  if (::pread(sfd, hdr, sizeof(hdr), 0) != static_cast<ssize_t>(sizeof(hdr))) {
    ::close(sfd);
    return Status::Corruption(slots + ": unreadable slots header");
  }
  const uint64_t count = DecodeFixed64(hdr + kSlCount);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (std::memcmp(hdr, kSlotsMagic, 8) != 0 ||
      DecodeFixed32(hdr + kSlVersion) != kCacheVersion ||
      DecodeFixed64(hdr + kSlTableId) != t->table_id_ ||
      count > (size - kSlotsHeaderSize) / 8 ||
      size != kSlotsHeaderSize + 8 * count ||
      (slot_count != 0 && count != slot_count)) {
    ::close(sfd);
    return Status::Corruption(slots + ": bad slots header (expected " +
                              std::to_string(slot_count) + " slots of " +
                              EscapeBytes(name) + ", found " +
                              std::to_string(count) + ")");
  }
  s = home.OpenFile("log", O_RDWR, &t->log_fd_);
  if (!s.ok()) {
    ::close(sfd);
    if (s.IsNotFound() || s.errno_value() == 0) {
      return Status::Corruption(s.message());
    }
    return s;
  }
  void* m = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ | PROT_WRITE,
                   MAP_SHARED, sfd, 0);
  const int e = errno;
  ::close(sfd);
  if (m == MAP_FAILED) return Status::FromErrno(slots + ": mmap", e);
  t->slot_count_ = count;
  t->slots_bytes_ = static_cast<size_t>(size);
  t->slots_ = static_cast<char*>(m);
  return Status::OK();
}

Status Store::CreateTable(const std::string& name, const std::string& hex,
                          uint64_t slot_count, const Populate& populate) {
  // One process at a time per table (the others then open it).
  int lock_fd = -1;
  UFSPACK_RETURN_IF_ERROR(locks_.OpenFile(hex, O_RDONLY | O_CREAT, &lock_fd));
  Status locked =
      LockWithin(lock_fd, LOCK_EX, kCreateLockWaitMs, locks_.PathOf(hex));
  if (!locked.ok()) {
    ::close(lock_fd);
    return locked;
  }
  struct stat st;
  if (ns_.Lstat(hex, &st).ok()) {
    ::close(lock_fd);
    return Status::OK();  // created meanwhile
  }
  const std::string tmp = "new-" + UniqueSuffix();
  uint64_t charge = 0;
  Status s = [&]() -> Status {
    if (::mkdirat(tmp_.fd(), tmp.c_str(), 0755) != 0) {
      return Status::FromErrno(tmp_.PathOf(tmp), errno);
    }
    SafeDir dir;
    UFSPACK_RETURN_IF_ERROR(tmp_.OpenDir(tmp, false, &dir));
    UFSPACK_RETURN_IF_ERROR(dir.WriteNewFile("key", name));
    UFSPACK_RETURN_IF_ERROR(dir.WriteNewFile("log", ""));
    const uint64_t slots_size = kSlotsHeaderSize + 8 * slot_count;
    uint64_t extra = 0;
    if (populate) UFSPACK_RETURN_IF_ERROR(populate(dir, &extra));
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
    UFSPACK_RETURN_IF_ERROR(dir.WriteNewFile("slots", hdr));
    int fd;
    UFSPACK_RETURN_IF_ERROR(dir.OpenFile("slots", O_RDWR, &fd));
    // The slot words are written through a shared mapping: allocate
    // them now (ENOSPC here, never SIGBUS later on a full tmpfs).
    int e = ::posix_fallocate(fd, 0, static_cast<off_t>(slots_size));
    ::close(fd);
    if (e != 0)
      return Status::FromErrno(dir.PathOf("slots") + ": allocating", e);
    return tmp_.Rename(tmp, ns_, hex);
  }();
  ::close(lock_fd);
  if (!s.ok()) {
    tmp_.RemoveTree(tmp, kTableFiles);
    if (charge > 0) Unreserve(charge);
  }
  return s;
}

void Store::RememberSource(const std::string& source,
                           const std::string& pack_hex) {
  const std::string hex = NameHex(source);
  const std::string contents = pack_hex + "\n" + source + "\n";
  std::string old;
  const bool existed = sources_.ReadFile(hex, 1 << 20, &old).ok();
  if (existed && old == contents) return;
  struct stat st;
  // Something else at its name (a link, a FIFO, a directory) is left.
  if (!existed && sources_.Lstat(hex, &st).ok()) return;
  if (!existed && !Reserve(kBlock, nullptr)) return;
  const std::string tmp = "src-" + UniqueSuffix();
  if (!tmp_.WriteNewFile(tmp, contents).ok() ||
      !tmp_.Rename(tmp, sources_, hex).ok()) {
    tmp_.RemoveTree(tmp, {});
    if (!existed) Unreserve(kBlock);
  }
}

Status Store::LookupSource(const std::string& source,
                           std::string* pack_hex) const {
  const std::string hex = NameHex(source);
  std::string contents;
  Status s = sources_.ReadFile(hex, 1 << 20, &contents);
  if (s.IsNotFound()) {
    return Status::NotFound(source + ": never opened through " + dir_);
  }
  if (!s.ok()) return s;
  const size_t nl = contents.find('\n');
  if (nl != 32 || contents.substr(33) != source + "\n") {
    return Status::Corruption(sources_.PathOf(hex) + ": damaged source record");
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
  st.disk_bytes = root_.DiskBytes();
  st.tables = ns_.List().size();
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
  SafeDir root;
  Status s = SafeDir::OpenRoot(dir, false, &root);
  if (s.IsNotFound()) {
    return Status::NotFound(dir + ": no such cache directory");
  }
  UFSPACK_RETURN_IF_ERROR(s);
  const std::string header_path = root.PathOf(kHeaderFileName);
  std::string hdr;
  s = root.ReadFile(kHeaderFileName, kHeaderSize, &hdr);
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
  SafeDir ns;
  s = root.OpenDir(kNs, false, &ns);
  if (!s.ok() && !s.IsNotFound()) return s;
  stats->dir = dir;
  stats->limit = DecodeFixed64(hdr.data() + kHdrLimit);
  stats->charged_bytes = DecodeFixed64(hdr.data() + kHdrCharged);
  stats->disk_bytes = root.DiskBytes();
  stats->tables = s.ok() ? ns.List().size() : 0;
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
    // Only the cache's own files: anything else (a link, a directory,
    // another user's file) is left where it is.
    for (const std::string& n : s->sources_.List()) {
      if (IsHexName(n)) (void)s->sources_.Unlink(n);
    }
    for (const std::string& n : s->locks_.List()) {
      if (IsHexName(n)) (void)s->locks_.Unlink(n);
    }
    for (int i = 0; i < kCounterCount; ++i) {
      s->word(kHdrCounters + 8 * i)->store(0);
    }
    s->Recount();
  }
  *kept = s->ns_.List().size();
  return Status::OK();
}

}  // namespace cache_internal
}  // namespace ufspack
