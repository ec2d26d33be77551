// Copyright 2026 The ufspack Authors.
#include "fault_injection.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <utility>
#include <vector>

namespace ufspack {
namespace fault {
namespace {

struct RuleState {
  Rule rule;
  bool active = true;
  int matched = 0;
  int fired = 0;
  uint64_t rng = 0;
};

std::mutex& Mu() {
  static std::mutex* mu = new std::mutex;  // never destroyed: used at exit
  return *mu;
}
std::vector<RuleState>& Rules() {
  static std::vector<RuleState>* rules = new std::vector<RuleState>;
  return *rules;
}
std::atomic<int> g_active{0};
// Set while a callback runs (and inside this file's own work) so that the
// calls it makes go straight to libc.
thread_local bool t_bypass = false;

uint64_t NextRandom(uint64_t* s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// What to do with one call.
struct Decision {
  Action action = Action::kObserve;
  int err = 0;
  size_t bytes = 0;  // for kShort / kShortRandom: the size to pass on
  std::function<void()> callback;
};

// Matches a call of kind `call` on `path` asking for `n` bytes against the
// rules, counting it in each rule it matches.
Decision Decide(Call call, const std::string& path, size_t n) {
  Decision d;
  std::lock_guard<std::mutex> lock(Mu());
  bool decided = false;
  for (RuleState& st : Rules()) {
    if (!st.active || st.rule.call != call) continue;
    if (!st.rule.path_contains.empty() &&
        path.find(st.rule.path_contains) == std::string::npos) {
      continue;
    }
    if (!st.rule.path_suffix.empty() && !EndsWith(path, st.rule.path_suffix))
      continue;
    const int k = st.matched++;
    if (decided || k < st.rule.after) continue;
    if (st.rule.times >= 0 && k >= st.rule.after + st.rule.times) continue;
    if (st.rule.action == Action::kObserve) continue;
    st.fired++;
    decided = true;
    d.action = st.rule.action;
    d.err = st.rule.err;
    switch (st.rule.action) {
      case Action::kShort:
        d.bytes = std::min(n, std::max<size_t>(st.rule.max_bytes, 1));
        break;
      case Action::kShortRandom:
        d.bytes = n == 0 ? 0 : 1 + NextRandom(&st.rng) % n;
        break;
      case Action::kCallback:
        d.callback = st.rule.callback;
        break;
      default:
        break;
    }
  }
  return d;
}

bool Active() {
  return !t_bypass && g_active.load(std::memory_order_relaxed) > 0;
}

std::string JoinAt(int dirfd, const char* path) {
  if (path == nullptr) return "";
  if (path[0] == '/' || dirfd == AT_FDCWD) return path;
  std::string dir = PathOfFd(dirfd);
  return dir.empty() ? std::string(path) : dir + "/" + path;
}

// Runs the decision's side effects.  Returns true when the call must fail
// with -1 and errno = d.err; otherwise *n is the size to pass on.
bool Apply(Decision& d, size_t* n) {
  switch (d.action) {
    case Action::kErrno:
      return true;
    case Action::kShort:
    case Action::kShortRandom:
      if (n != nullptr) *n = d.bytes;
      return false;
    case Action::kCallback: {
      const int saved = errno;
      t_bypass = true;
      d.callback();
      t_bypass = false;
      errno = saved;
      return false;
    }
    default:
      return false;
  }
}

// Resolves the next definition of `name` (libc, or a sanitizer's
// interceptor in front of it).
void* Next(const char* name) {
  void* f = dlsym(RTLD_NEXT, name);
  if (f == nullptr) {
    std::fprintf(stderr, "fault_injection: dlsym(RTLD_NEXT, %s) failed\n",
                 name);
    std::abort();
  }
  return f;
}

#define UFSPACK_REAL(name, type)  \
  static const auto real_##name = \
      reinterpret_cast<type>(::ufspack::fault::Next(#name))

// Shared bodies.  Each returns true if the fault answered the call (result
// in *ret).
template <typename Ret>
bool MaybeFail(const Decision& d, Ret* ret) {
  if (d.action != Action::kErrno) return false;
  errno = d.err;
  *ret = static_cast<Ret>(-1);
  return true;
}

Decision DecideFd(Call call, int fd, size_t n) {
  const int saved = errno;
  t_bypass = true;
  Decision d = Decide(call, PathOfFd(fd), n);
  t_bypass = false;
  errno = saved;
  return d;
}

Decision DecidePath(Call call, const std::string& path) {
  const int saved = errno;
  t_bypass = true;
  Decision d = Decide(call, path, 0);
  t_bypass = false;
  errno = saved;
  return d;
}

bool NeedsMode(int flags) {
#ifdef O_TMPFILE
  if ((flags & O_TMPFILE) == O_TMPFILE) return true;
#endif
  return (flags & O_CREAT) != 0;
}

}  // namespace

std::string PathOfFd(int fd) {
  char link[64];
  std::snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  char buf[4096];
  ssize_t r = ::readlink(link, buf, sizeof(buf) - 1);
  if (r < 0) return "";
  return std::string(buf, static_cast<size_t>(r));
}

Rule Observe(Call call, std::string path) {
  Rule r;
  r.call = call;
  r.path_contains = std::move(path);
  r.action = Action::kObserve;
  return r;
}

Rule Fail(Call call, std::string path, int err) {
  Rule r = Observe(call, std::move(path));
  r.action = Action::kErrno;
  r.err = err;
  return r;
}

Rule Short(Call call, std::string path, size_t max_bytes) {
  Rule r = Observe(call, std::move(path));
  r.action = Action::kShort;
  r.max_bytes = max_bytes;
  return r;
}

Rule ShortRandom(Call call, std::string path, uint64_t seed) {
  Rule r = Observe(call, std::move(path));
  r.action = Action::kShortRandom;
  r.seed = seed;
  return r;
}

Rule Do(Call call, std::string path, std::function<void()> callback) {
  Rule r = Observe(call, std::move(path));
  r.action = Action::kCallback;
  r.callback = std::move(callback);
  return r;
}

int Inject(Rule rule) {
  std::lock_guard<std::mutex> lock(Mu());
  RuleState st;
  st.rng = rule.seed;
  st.rule = std::move(rule);
  Rules().push_back(std::move(st));
  g_active.fetch_add(1);
  return static_cast<int>(Rules().size() - 1);
}

int Matched(int id) {
  std::lock_guard<std::mutex> lock(Mu());
  return Rules().at(static_cast<size_t>(id)).matched;
}

int Fired(int id) {
  std::lock_guard<std::mutex> lock(Mu());
  return Rules().at(static_cast<size_t>(id)).fired;
}

void Clear() {
  std::lock_guard<std::mutex> lock(Mu());
  for (RuleState& st : Rules()) {
    if (st.active) {
      st.active = false;
      // Callbacks may hold references to test state that is going away.
      st.rule.callback = nullptr;
      g_active.fetch_sub(1);
    }
  }
}

}  // namespace fault
}  // namespace ufspack

// --- The interposed libc functions ------------------------------------------

using ufspack::fault::Call;
using ufspack::fault::Decision;

namespace {

int OpenCommon(Call call, int dirfd, const char* path, int flags, mode_t mode,
               bool at, bool is64) {
  using OpenFn = int (*)(const char*, int, ...);
  using OpenAtFn = int (*)(int, const char*, int, ...);
  UFSPACK_REAL(open, OpenFn);
  UFSPACK_REAL(open64, OpenFn);
  UFSPACK_REAL(openat, OpenAtFn);
  UFSPACK_REAL(openat64, OpenAtFn);
  if (ufspack::fault::Active()) {
    Decision d = ufspack::fault::DecidePath(
        call, ufspack::fault::JoinAt(at ? dirfd : AT_FDCWD, path));
    int ret;
    if (ufspack::fault::MaybeFail(d, &ret)) return ret;
    ufspack::fault::Apply(d, nullptr);
  }
  if (at) {
    return is64 ? real_openat64(dirfd, path, flags, mode)
                : real_openat(dirfd, path, flags, mode);
  }
  return is64 ? real_open64(path, flags, mode) : real_open(path, flags, mode);
}

mode_t ModeArg(int flags, va_list ap) {
  return ufspack::fault::NeedsMode(flags) ? static_cast<mode_t>(va_arg(ap, int))
                                          : 0;
}

template <typename Real, typename Buf>
ssize_t ReadCommon(Call call, Real real, int fd, Buf buf, size_t n) {
  if (ufspack::fault::Active()) {
    Decision d = ufspack::fault::DecideFd(call, fd, n);
    ssize_t ret;
    if (ufspack::fault::MaybeFail(d, &ret)) return ret;
    ufspack::fault::Apply(d, &n);
  }
  return real(fd, buf, n);
}

template <typename Real, typename Buf, typename Off>
ssize_t PreadCommon(Call call, Real real, int fd, Buf buf, size_t n, Off off) {
  if (ufspack::fault::Active()) {
    Decision d = ufspack::fault::DecideFd(call, fd, n);
    ssize_t ret;
    if (ufspack::fault::MaybeFail(d, &ret)) return ret;
    ufspack::fault::Apply(d, &n);
  }
  return real(fd, buf, n, off);
}

// preadv/pwritev: the size asked is the iovecs' total; a short transfer
// passes a copy of them cut to the allowed length.
template <typename Real, typename Off>
ssize_t VecCommon(Call call, Real real, int fd, const struct iovec* iov,
                  int iovcnt, Off off) {
  if (ufspack::fault::Active()) {
    size_t n = 0;
    for (int i = 0; i < iovcnt; ++i) n += iov[i].iov_len;
    Decision d = ufspack::fault::DecideFd(call, fd, n);
    ssize_t ret;
    if (ufspack::fault::MaybeFail(d, &ret)) return ret;
    const size_t asked = n;
    ufspack::fault::Apply(d, &n);
    if (n < asked) {
      std::vector<struct iovec> cut;
      for (int i = 0; i < iovcnt && n > 0; ++i) {
        struct iovec v = iov[i];
        v.iov_len = std::min(v.iov_len, n);
        n -= v.iov_len;
        cut.push_back(v);
      }
      return real(fd, cut.data(), static_cast<int>(cut.size()), off);
    }
  }
  return real(fd, iov, iovcnt, off);
}

}  // namespace

extern "C" {

ssize_t preadv(int fd, const struct iovec* iov, int iovcnt, off_t off) {
  using Fn = ssize_t (*)(int, const struct iovec*, int, off_t);
  UFSPACK_REAL(preadv, Fn);
  return VecCommon(Call::kPread, real_preadv, fd, iov, iovcnt, off);
}

ssize_t preadv64(int fd, const struct iovec* iov, int iovcnt, off64_t off) {
  using Fn = ssize_t (*)(int, const struct iovec*, int, off64_t);
  UFSPACK_REAL(preadv64, Fn);
  return VecCommon(Call::kPread, real_preadv64, fd, iov, iovcnt, off);
}

ssize_t pwritev(int fd, const struct iovec* iov, int iovcnt, off_t off) {
  using Fn = ssize_t (*)(int, const struct iovec*, int, off_t);
  UFSPACK_REAL(pwritev, Fn);
  return VecCommon(Call::kPwrite, real_pwritev, fd, iov, iovcnt, off);
}

ssize_t pwritev64(int fd, const struct iovec* iov, int iovcnt, off64_t off) {
  using Fn = ssize_t (*)(int, const struct iovec*, int, off64_t);
  UFSPACK_REAL(pwritev64, Fn);
  return VecCommon(Call::kPwrite, real_pwritev64, fd, iov, iovcnt, off);
}

// Declared here as well: glibc declares the _chk variants only under
// _FORTIFY_SOURCE.
ssize_t __read_chk(int fd, void* buf, size_t n, size_t buflen);
ssize_t __pread_chk(int fd, void* buf, size_t n, off_t off, size_t buflen);
ssize_t __pread64_chk(int fd, void* buf, size_t n, off64_t off, size_t buflen);
int __open_2(const char* path, int flags);
int __open64_2(const char* path, int flags);
int __openat_2(int dirfd, const char* path, int flags);
int __openat64_2(int dirfd, const char* path, int flags);

int open(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = ModeArg(flags, ap);
  va_end(ap);
  return OpenCommon(Call::kOpen, AT_FDCWD, path, flags, mode, false, false);
}

int open64(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = ModeArg(flags, ap);
  va_end(ap);
  return OpenCommon(Call::kOpen, AT_FDCWD, path, flags, mode, false, true);
}

int openat(int dirfd, const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = ModeArg(flags, ap);
  va_end(ap);
  return OpenCommon(Call::kOpen, dirfd, path, flags, mode, true, false);
}

int openat64(int dirfd, const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  mode_t mode = ModeArg(flags, ap);
  va_end(ap);
  return OpenCommon(Call::kOpen, dirfd, path, flags, mode, true, true);
}

// The fortified forms are only used without O_CREAT, so no mode.
int __open_2(const char* path, int flags) {
  return OpenCommon(Call::kOpen, AT_FDCWD, path, flags, 0, false, false);
}
int __open64_2(const char* path, int flags) {
  return OpenCommon(Call::kOpen, AT_FDCWD, path, flags, 0, false, true);
}
int __openat_2(int dirfd, const char* path, int flags) {
  return OpenCommon(Call::kOpen, dirfd, path, flags, 0, true, false);
}
int __openat64_2(int dirfd, const char* path, int flags) {
  return OpenCommon(Call::kOpen, dirfd, path, flags, 0, true, true);
}

ssize_t read(int fd, void* buf, size_t n) {
  using Fn = ssize_t (*)(int, void*, size_t);
  UFSPACK_REAL(read, Fn);
  return ReadCommon(Call::kRead, real_read, fd, buf, n);
}

ssize_t __read_chk(int fd, void* buf, size_t n, size_t buflen) {
  if (n > buflen)
    std::abort();  // what glibc's __chk_fail does, minus the
                   // message
  return read(fd, buf, n);
}

ssize_t pread(int fd, void* buf, size_t n, off_t off) {
  using Fn = ssize_t (*)(int, void*, size_t, off_t);
  UFSPACK_REAL(pread, Fn);
  return PreadCommon(Call::kPread, real_pread, fd, buf, n, off);
}

ssize_t pread64(int fd, void* buf, size_t n, off64_t off) {
  using Fn = ssize_t (*)(int, void*, size_t, off64_t);
  UFSPACK_REAL(pread64, Fn);
  return PreadCommon(Call::kPread, real_pread64, fd, buf, n, off);
}

ssize_t __pread_chk(int fd, void* buf, size_t n, off_t off, size_t buflen) {
  if (n > buflen) std::abort();
  return pread(fd, buf, n, off);
}

ssize_t __pread64_chk(int fd, void* buf, size_t n, off64_t off, size_t buflen) {
  if (n > buflen) std::abort();
  return pread64(fd, buf, n, off);
}

ssize_t write(int fd, const void* buf, size_t n) {
  using Fn = ssize_t (*)(int, const void*, size_t);
  UFSPACK_REAL(write, Fn);
  return ReadCommon(Call::kWrite, real_write, fd, buf, n);
}

ssize_t pwrite(int fd, const void* buf, size_t n, off_t off) {
  using Fn = ssize_t (*)(int, const void*, size_t, off_t);
  UFSPACK_REAL(pwrite, Fn);
  return PreadCommon(Call::kPwrite, real_pwrite, fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void* buf, size_t n, off64_t off) {
  using Fn = ssize_t (*)(int, const void*, size_t, off64_t);
  UFSPACK_REAL(pwrite64, Fn);
  return PreadCommon(Call::kPwrite, real_pwrite64, fd, buf, n, off);
}

int fsync(int fd) {
  using Fn = int (*)(int);
  UFSPACK_REAL(fsync, Fn);
  if (ufspack::fault::Active()) {
    Decision d = ufspack::fault::DecideFd(Call::kFsync, fd, 0);
    int ret;
    if (ufspack::fault::MaybeFail(d, &ret)) return ret;
    ufspack::fault::Apply(d, nullptr);
  }
  return real_fsync(fd);
}

int fdatasync(int fd) {
  using Fn = int (*)(int);
  UFSPACK_REAL(fdatasync, Fn);
  if (ufspack::fault::Active()) {
    Decision d = ufspack::fault::DecideFd(Call::kFsync, fd, 0);
    int ret;
    if (ufspack::fault::MaybeFail(d, &ret)) return ret;
    ufspack::fault::Apply(d, nullptr);
  }
  return real_fdatasync(fd);
}

int rename(const char* from, const char* to) noexcept {
  using Fn = int (*)(const char*, const char*);
  UFSPACK_REAL(rename, Fn);
  if (ufspack::fault::Active()) {
    Decision d = ufspack::fault::DecidePath(Call::kRename, from);
    int ret;
    if (ufspack::fault::MaybeFail(d, &ret)) return ret;
    ufspack::fault::Apply(d, nullptr);
  }
  return real_rename(from, to);
}

}  // extern "C"
