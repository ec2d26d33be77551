// Copyright 2026 The ufspack Authors.
#include "testutil.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "ufspack/builder.h"
#include "ufspack/coding.h"
#include "ufspack/format.h"
#include "ufspack/reader.h"

extern char** environ;

namespace ufspack {
namespace test {

namespace {
[[noreturn]] void Die(const std::string& what) {
  throw std::runtime_error(what + ": " + std::strerror(errno));
}

uint64_t SplitMix(uint64_t* s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Paths at least this long are resolved one component at a time with the
// *at() system calls: the kernel refuses a whole path longer than PATH_MAX
// (4096 bytes), and tests build trees deeper than that.
constexpr size_t kLongPath = 4000;
constexpr int kDirPath = O_PATH | O_DIRECTORY | O_CLOEXEC;

// A directory descriptor and a name in it that together denote a path, for
// the *at() calls: AT_FDCWD and the path itself when it is short enough.
// Follows symlinks in the directory part, as path resolution does.
class At {
 public:
  explicit At(const std::string& path) {
    const size_t slash = path.find_last_of('/');
    if (path.size() < kLongPath || slash == std::string::npos) {
      name_ = path;
      return;
    }
    name_ = path.substr(slash + 1);
    const std::string dir = path.substr(0, slash);
    fd_ = open(path[0] == '/' ? "/" : ".", kDirPath);
    size_t start = 0;
    while (fd_ >= 0 && start < dir.size()) {
      size_t end = dir.find('/', start);
      if (end == std::string::npos) end = dir.size();
      if (end > start) {
        const int next =
            openat(fd_, dir.substr(start, end - start).c_str(), kDirPath);
        const int e = errno;
        close(fd_);
        fd_ = next;
        errno = e;
      }
      start = end + 1;
    }
  }
  ~At() {
    if (fd_ >= 0) close(fd_);
  }
  At(const At&) = delete;
  At& operator=(const At&) = delete;
  bool ok() const { return fd_ != -1; }
  int fd() const { return fd_; }
  const char* name() const { return name_.c_str(); }

 private:
  int fd_ = AT_FDCWD;
  std::string name_;
};

std::string Slurp(int fd);

void ReadTreeAt(int dir_fd, const std::string& rel,
                std::map<std::string, std::string>* out) {
  const int list_fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR* d = list_fd < 0 ? nullptr : fdopendir(list_fd);
  if (d == nullptr) Die("opendir " + rel);
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    names.push_back(n);
  }
  closedir(d);
  for (const auto& n : names) {
    std::string r = rel.empty() ? n : rel + "/" + n;
    struct stat st;
    if (fstatat(dir_fd, n.c_str(), &st, 0) != 0) continue;  // dangling
    if (S_ISDIR(st.st_mode)) {
      const int sub = openat(dir_fd, n.c_str(), kDirPath);
      if (sub < 0) Die("open " + r);
      ReadTreeAt(sub, r, out);
      close(sub);
    } else if (S_ISREG(st.st_mode)) {
      const int fd = openat(dir_fd, n.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) Die("open " + r);
      (*out)[r] = Slurp(fd);
      close(fd);
    }
  }
}

void RemoveAllAt(int dir_fd, const char* name) {
  struct stat st;
  if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return;
  if (!S_ISDIR(st.st_mode)) {
    unlinkat(dir_fd, name, 0);
    return;
  }
  fchmodat(dir_fd, name, 0755, 0);
  const int fd =
      openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) {
    std::vector<std::string> names;
    const int list_fd = dup(fd);
    if (DIR* d = list_fd < 0 ? nullptr : fdopendir(list_fd)) {
      while (dirent* e = readdir(d)) {
        std::string n = e->d_name;
        if (n != "." && n != "..") names.push_back(n);
      }
      closedir(d);
    } else if (list_fd >= 0) {
      close(list_fd);
    }
    for (const auto& n : names) RemoveAllAt(fd, n.c_str());
    close(fd);
  }
  unlinkat(dir_fd, name, AT_REMOVEDIR);
}

std::string Slurp(int fd) {
  std::string s;
  char buf[65536];
  for (;;) {
    ssize_t r = read(fd, buf, sizeof(buf));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    s.append(buf, static_cast<size_t>(r));
  }
  return s;
}
}  // namespace

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl =
      std::string(base && *base ? base : "/tmp") + "/ufspack-test-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) Die("mkdtemp");
  path_ = buf.data();
}

TempDir::~TempDir() { RemoveAll(path_); }

void MakeDirs(const std::string& path) {
  if (path.size() >= kLongPath) {
    // One component at a time: mkdir(2) refuses the whole path.
    int fd = open(path[0] == '/' ? "/" : ".", kDirPath);
    size_t start = 0;
    while (fd >= 0 && start < path.size()) {
      size_t end = path.find('/', start);
      if (end == std::string::npos) end = path.size();
      if (end > start) {
        const std::string comp = path.substr(start, end - start);
        if (mkdirat(fd, comp.c_str(), 0755) != 0 && errno != EEXIST) {
          close(fd);
          Die("mkdir (long path) " + comp);
        }
        const int next = openat(fd, comp.c_str(), kDirPath);
        close(fd);
        fd = next;
      }
      start = end + 1;
    }
    if (fd < 0) Die("mkdir (long path)");
    close(fd);
    return;
  }
  size_t pos = 0;
  while ((pos = path.find('/', pos + 1)) != std::string::npos) {
    mkdir(path.substr(0, pos).c_str(), 0755);
  }
  if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) Die("mkdir " + path);
}

void WriteFile(const std::string& path, const std::string& contents) {
  size_t slash = path.find_last_of('/');
  if (slash != std::string::npos && slash > 0) MakeDirs(path.substr(0, slash));
  At at(path);
  int fd = at.ok() ? openat(at.fd(), at.name(),
                            O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)
                   : -1;
  if (fd < 0) Die("open " + path);
  size_t done = 0;
  while (done < contents.size()) {
    ssize_t w = write(fd, contents.data() + done, contents.size() - done);
    if (w < 0) {
      close(fd);
      Die("write " + path);
    }
    done += static_cast<size_t>(w);
  }
  close(fd);
}

std::string ReadFile(const std::string& path) {
  At at(path);
  int fd = at.ok() ? openat(at.fd(), at.name(), O_RDONLY | O_CLOEXEC) : -1;
  if (fd < 0) Die("open " + path);
  std::string s = Slurp(fd);
  close(fd);
  return s;
}

bool Exists(const std::string& path) {
  At at(path);
  struct stat st;
  return at.ok() && fstatat(at.fd(), at.name(), &st, AT_SYMLINK_NOFOLLOW) == 0;
}

uint64_t FileSize(const std::string& path) {
  At at(path);
  struct stat st;
  if (!at.ok() || fstatat(at.fd(), at.name(), &st, 0) != 0) {
    Die("stat " + path);
  }
  return static_cast<uint64_t>(st.st_size);
}

void Symlink(const std::string& target, const std::string& link) {
  size_t slash = link.find_last_of('/');
  if (slash != std::string::npos && slash > 0) MakeDirs(link.substr(0, slash));
  if (symlink(target.c_str(), link.c_str()) != 0) Die("symlink " + link);
}

void RemoveAll(const std::string& path) {
  At at(path);
  if (at.ok()) RemoveAllAt(at.fd(), at.name());
}

std::vector<std::string> PackTempFiles(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n.rfind(".data.ufs.tmp-", 0) == 0 ||
        n.rfind(".index.ufs.tmp-", 0) == 0 ||
        n.rfind(".records.ufs.tmp-", 0) == 0 ||
        n.rfind(".names.ufs.tmp-", 0) == 0 ||
        n.rfind(".hashes.ufs.tmp-", 0) == 0 ||
        n.rfind(".lookup.ufs.tmp-", 0) == 0 ||
        n.rfind(".manifest.ufs.tmp-", 0) == 0 || n == ".data.ufs.prev") {
      out.push_back(n);
    }
  }
  closedir(d);
  return out;
}

void FlipByte(const std::string& path, uint64_t offset, uint8_t mask) {
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) Die("open " + path);
  unsigned char c;
  if (pread(fd, &c, 1, static_cast<off_t>(offset)) != 1) Die("pread " + path);
  c ^= mask;
  if (pwrite(fd, &c, 1, static_cast<off_t>(offset)) != 1) Die("pwrite " + path);
  close(fd);
}

void Truncate(const std::string& path, uint64_t size) {
  if (truncate(path.c_str(), static_cast<off_t>(size)) != 0)
    Die("truncate " + path);
}

namespace {
uint64_t g_disk_usage = 0;
std::mutex g_disk_usage_mu;
int AddBlocks(const char*, const struct stat* st, int, struct FTW*) {
  g_disk_usage += static_cast<uint64_t>(st->st_blocks) * 512;
  return 0;
}
}  // namespace

uint64_t DiskUsage(const std::string& dir) {
  std::lock_guard<std::mutex> lock(g_disk_usage_mu);
  g_disk_usage = 0;
  EXPECT_EQ(::nftw(dir.c_str(), AddBlocks, 16, FTW_PHYS), 0) << dir;
  return g_disk_usage;
}

uint64_t FreeDiskBytes(const std::string& dir) {
  struct statvfs vs;
  if (statvfs(dir.c_str(), &vs) != 0) return 0;
  return static_cast<uint64_t>(vs.f_bavail) * vs.f_frsize;
}

uint64_t AvailableMemoryBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  uint64_t value = 0;
  while (in >> key >> value >> unit) {
    if (key == "MemAvailable:") return value * 1024;
  }
  return 0;
}

bool SupportsSparseFiles(const std::string& dir) {
  const std::string path = dir + "/.sparse-probe";
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  bool sparse = false;
  struct stat st;
  if (pwrite(fd, "x", 1, off_t{64} << 20) == 1 && fsync(fd) == 0 &&
      fstat(fd, &st) == 0) {
    sparse = static_cast<uint64_t>(st.st_blocks) * 512 < (uint64_t{1} << 20);
  }
  close(fd);
  unlink(path.c_str());
  return sparse;
}

std::string RandomBytes(size_t n, uint64_t seed) {
  std::string s(n, '\0');
  uint64_t state = seed;
  for (size_t i = 0; i < n; i += 8) {
    uint64_t v = SplitMix(&state);
    std::memcpy(&s[i], &v, std::min<size_t>(8, n - i));
  }
  return s;
}

std::string CompressibleBytes(size_t n, uint64_t seed) {
  std::string s;
  s.reserve(n);
  uint64_t state = seed;
  while (s.size() < n) {
    s += "line " + std::to_string(SplitMix(&state) % 100) + " of a text file\n";
  }
  s.resize(n);
  return s;
}

std::map<std::string, std::string> ReadTree(const std::string& root) {
  std::map<std::string, std::string> out;
  At at(root);
  const int fd = at.ok() ? openat(at.fd(), at.name(), kDirPath) : -1;
  if (fd < 0) Die("opendir " + root);
  ReadTreeAt(fd, "", &out);
  close(fd);
  return out;
}

CommandResult Run(const std::vector<std::string>& argv) {
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0)
    Die("pipe");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(out_pipe[1]);
  close(err_pipe[1]);
  CommandResult result;
  if (rc != 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    errno = rc;
    Die("posix_spawn " + argv[0]);
  }
  std::string err;
  std::thread err_reader([&] { err = Slurp(err_pipe[0]); });
  result.out = Slurp(out_pipe[0]);
  err_reader.join();
  result.err = err;
  close(out_pipe[0]);
  close(err_pipe[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

pid_t SpawnCli(const std::vector<std::string>& args,
               const std::string& out_file, const std::string& err_file,
               const std::vector<std::string>& env) {
  std::vector<std::string> argv = {UFSPACK_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out_file.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err_file.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  std::vector<std::string> added = env;
  std::vector<char*> envp;
  for (std::string& e : added) envp.push_back(e.data());
  for (char** e = environ; *e != nullptr; ++e) envp.push_back(*e);
  envp.push_back(nullptr);
  int rc =
      ::posix_spawn(&pid, cargv[0], &fa, nullptr, cargv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    ADD_FAILURE() << "posix_spawn " << argv[0] << ": " << std::strerror(rc);
    return -1;
  }
  return pid;
}

CommandResult RunCli(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {UFSPACK_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  return Run(argv);
}

CommandResult RunWithTimeout(const std::vector<std::string>& argv,
                             int seconds) {
  std::vector<std::string> t = {"/usr/bin/timeout", "-s", "KILL",
                                std::to_string(seconds)};
  t.insert(t.end(), argv.begin(), argv.end());
  CommandResult r = Run(t);
  if (r.exit_code == 137) r.exit_code = -1;  // timeout(1): killed
  return r;
}

void MakeFifo(const std::string& path) {
  ASSERT_EQ(mkfifo(path.c_str(), 0644), 0) << path << ": " << strerror(errno);
}

bool ReturnsWithin(int seconds, const std::function<void()>& fn,
                   const std::vector<std::string>& fifos) {
  auto done = std::async(std::launch::async, fn);
  if (done.wait_for(std::chrono::seconds(seconds)) ==
      std::future_status::ready) {
    done.get();
    return true;
  }
  const auto give_up =
      std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (done.wait_for(std::chrono::milliseconds(100)) !=
         std::future_status::ready) {
    if (std::chrono::steady_clock::now() > give_up) {
      std::fprintf(stderr, "FATAL: blocked for %d s, and unblocking failed\n",
                   seconds + 30);
      std::_Exit(1);
    }
    for (const auto& f : fifos) {
      int fd = open(f.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd >= 0) close(fd);
    }
  }
  done.get();
  return false;
}

std::string ZstdFrameDeclaring(const std::string& content,
                               uint64_t declared_size) {
  std::string f;
  char b8[8];
  EncodeFixed32(b8, 0xFD2FB528u);  // zstd magic
  f.append(b8, 4);
  f += static_cast<char>(0xC0);    // 8-byte content size, not single segment
  f += static_cast<char>(7 << 3);  // window 2^(10+7) = 128 KiB
  EncodeFixed64(b8, declared_size);
  f.append(b8, 8);
  constexpr size_t kMaxBlock = 128 << 10;
  size_t pos = 0;
  do {
    const size_t n = std::min(kMaxBlock, content.size() - pos);
    const bool last = pos + n == content.size();
    const uint32_t header = (last ? 1u : 0u) | (0u << 1) |  // raw block
                            static_cast<uint32_t>(n << 3);
    f += static_cast<char>(header & 0xff);
    f += static_cast<char>((header >> 8) & 0xff);
    f += static_cast<char>((header >> 16) & 0xff);
    f.append(content, pos, n);
    pos += n;
  } while (pos < content.size());
  return f;
}

void WriteShortZstdFramePack(const std::string& dir, size_t content_bytes,
                             bool forged_header, uint64_t* claimed) {
  const std::string content = RandomBytes(content_bytes, 11);
  // The header's size field has a fixed width, so the frame's length does
  // not depend on the size it declares.
  const uint64_t stored = ZstdFrameDeclaring(content, 0).size();
  const uint64_t claim = 32768 * stored;
  const std::string frame =
      ZstdFrameDeclaring(content, forged_header ? claim : content.size());
  if (claimed != nullptr) *claimed = claim;

  PackWriterOptions options;
  options.flat = true;  // and compress = false: both records stored raw
  std::unique_ptr<PackWriter> w;
  Status s = PackWriter::Create(dir, options, &w);
  if (s.ok()) s = w->Add("hostile.bin", kNoLabel, frame);
  if (s.ok()) s = w->Add("ok.txt", kNoLabel, "ten bytes!");
  if (s.ok()) s = w->Finish();
  if (!s.ok()) throw std::runtime_error(s.ToString());
  uint64_t i = 0;
  {
    std::unique_ptr<Reader> r;
    s = Reader::Open(dir, {}, &r);
    if (s.ok()) s = r->Find("hostile.bin", &i);
    if (!s.ok()) throw std::runtime_error(s.ToString());
  }
  // Turn the raw entry into a zstd entry claiming the maximum expansion
  // (RecordEntry fields: original_length at 16, codec at 52), then reseal
  // the index body and header checksums.
  const std::string index_path = dir + "/" + kIndexFileName;
  std::string b = ReadFile(index_path);
  std::string_view in(b);
  IndexHeader h;
  s = h.DecodeFrom(&in);
  if (!s.ok()) throw std::runtime_error(s.ToString());
  const uint64_t entry = h.records.offset + i * RecordEntry::kEncodedLength;
  EncodeFixed64(&b[entry + 16], claim);
  b[entry + RecordEntry::kCodecAt] = static_cast<char>(Codec::kZstd);
  constexpr uint64_t kBody = IndexHeader::kEncodedLength;
  EncodeFixed64(&b[IndexHeader::kBodyChecksumOffset],
                Checksum64(b.data() + kBody, b.size() - kBody));
  EncodeFixed64(&b[IndexHeader::kHeaderChecksumOffset],
                Checksum64(b.data(), IndexHeader::kHeaderChecksumOffset));
  WriteFile(index_path, b);
}

int RunWithAddressSpaceLimit(uint64_t limit_bytes,
                             const std::function<int()>& fn) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) Die("fork");
  if (pid == 0) {
    struct rlimit rl;
    rl.rlim_cur = rl.rlim_max = limit_bytes;
    if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(125);
    const int code = fn();
    std::fflush(nullptr);
    _exit(code);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

CommandResult RunCliWithAddressSpaceLimit(
    uint64_t limit_bytes, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {
      "/bin/sh", "-c",
      "ulimit -v " + std::to_string(limit_bytes / 1024) + " && exec \"$@\"",
      "sh", UFSPACK_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  return Run(argv);
}

std::string SharedPhotosTar() {
  const char* env = std::getenv("UFSPACK_SHARED_DATA");
  std::string dir =
      env && *env ? env : std::string(UFSPACK_SOURCE_DIR) + "/../shared/data";
  std::string tar = dir + "/cats_and_dogs_filtered.tar";
  return Exists(tar) ? tar : "";
}

bool PythonHas(const std::string& modules) {
  static std::mutex mu;
  static std::map<std::string, bool> known;
  std::lock_guard<std::mutex> lock(mu);
  auto it = known.find(modules);
  if (it != known.end()) return it->second;
  const bool have = Exists(kPython) &&
                    Run({kPython, "-c", "import " + modules}).exit_code == 0;
  known[modules] = have;
  return have;
}

// In a child with its own mount namespace, mounts a tmpfs of `size` on
// `dir` and runs fn; "SKIP: ..." when mounting is not permitted.
std::string WithTmpfs(const std::string& dir, const std::string& size,
                      const std::function<std::string()>& fn) {
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::string result;
    if (unshare(CLONE_NEWNS) != 0) {
      result = std::string("SKIP: unshare(CLONE_NEWNS): ") + strerror(errno);
    } else if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) !=
               0) {
      result = std::string("SKIP: private mounts: ") + strerror(errno);
    } else if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      result = std::string("mkdir: ") + strerror(errno);
    } else if (mount("tmpfs", dir.c_str(), "tmpfs", 0,
                     ("size=" + size + ",mode=0755").c_str()) != 0) {
      result = std::string("SKIP: mount tmpfs: ") + strerror(errno);
    } else {
      result = fn();
    }
    if (write(fds[1], result.data(), result.size()) < 0) _exit(2);
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0) out.append(buf, n);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return "child died (status " + std::to_string(status) + "): " + out;
  }
  return out;
}

}  // namespace test
}  // namespace ufspack
