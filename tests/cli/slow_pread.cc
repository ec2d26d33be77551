// Copyright 2026 The ufspack Authors.
//
// An LD_PRELOAD shim for cli_cache_test: every pread() of 64 KiB or more
// sleeps UFSPACK_TEST_PREAD_DELAY_MS milliseconds first, as a network file
// system's round trip would.  A warm-up of a small pack then takes seconds
// on any machine, so a test can interrupt it part way; nothing is timed.
#include <dlfcn.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace {

void Delay(size_t n) {
  static const long ms = [] {
    const char* v = std::getenv("UFSPACK_TEST_PREAD_DELAY_MS");
    return v != nullptr ? std::atol(v) : 0L;
  }();
  if (ms <= 0 || n < (64u << 10)) return;
  const int saved = errno;
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
  errno = saved;
}

template <typename Fn>
Fn Real(const char* name) {
  return reinterpret_cast<Fn>(::dlsym(RTLD_NEXT, name));
}

}  // namespace

// Exported whatever the build's default symbol visibility.
#define UFSPACK_SHIM_EXPORT __attribute__((visibility("default")))

extern "C" {

UFSPACK_SHIM_EXPORT ssize_t pread(int fd, void* buf, size_t n, off_t off) {
  using Fn = ssize_t (*)(int, void*, size_t, off_t);
  static const Fn real = Real<Fn>("pread");
  Delay(n);
  return real(fd, buf, n, off);
}

UFSPACK_SHIM_EXPORT ssize_t pread64(int fd, void* buf, size_t n, off64_t off) {
  using Fn = ssize_t (*)(int, void*, size_t, off64_t);
  static const Fn real = Real<Fn>("pread64");
  Delay(n);
  return real(fd, buf, n, off);
}

// What _FORTIFY_SOURCE builds call instead.
UFSPACK_SHIM_EXPORT ssize_t __pread_chk(int fd, void* buf, size_t n, off_t off,
                                        size_t buflen) {
  return pread(fd, buf, n, off);
}
UFSPACK_SHIM_EXPORT ssize_t __pread64_chk(int fd, void* buf, size_t n,
                                          off64_t off, size_t buflen) {
  return pread64(fd, buf, n, off);
}

}  // extern "C"
