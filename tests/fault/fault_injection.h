// Copyright 2026 The ufspack Authors.
//
// Fault injection for tests: the test executable defines the libc entry
// points the library uses for file I/O (open, read, pread, write, pwrite,
// fsync, rename, and their 64-bit and _FORTIFY_SOURCE variants), so every
// call made by code linked into it (the reader, the packer, the tests)
// passes through here before reaching the real function, found with
// dlsym(RTLD_NEXT, ...).  Under ASan/TSan with a shared sanitizer runtime
// (GCC) "next" is the sanitizer's interceptor, which in turn calls libc
// (checked with -fsanitize=address).  With a runtime linked statically
// (Clang) its interceptors are weak definitions: these win and "next" is
// libc, so the sanitizer does not see these particular calls.
//
// With no rule installed every call goes straight to the real function (one
// relaxed atomic load).  A rule selects calls by kind and by path (the path
// given to open/rename, else the descriptor's /proc/self/fd link), lets
// `after` matching calls through, then acts on the next `times` ones:
//
//   fault::ScopedFaults faults;  // clears every rule when it goes away
//   int id = fault::Inject(
//       fault::Fail(fault::Call::kPread, "data.ufs", EINTR).Times(3));
//   ... reader->Read(...) ...
//   EXPECT_EQ(fault::Fired(id), 3);
//
// Every rule counts every call that matches it; when several rules want to
// act on one call, the first installed wins.  Callbacks run on the calling
// thread, outside the rule lock and with injection disabled on that thread
// (so they may do file I/O freely), before the real call.
//
// Thread safety: all functions may be called from any thread.  Calls made
// by other libraries (libstdc++, the sanitizer runtime) that reach these
// symbols are subject to the rules too; keep path patterns specific.
#ifndef UFSPACK_TESTS_FAULT_FAULT_INJECTION_H_
#define UFSPACK_TESTS_FAULT_FAULT_INJECTION_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace ufspack {
namespace fault {

enum class Call {
  kOpen,    // open, open64, openat, openat64, __open_2, ...
  kRead,    // read, __read_chk
  kPread,   // pread, pread64, __pread_chk, __pread64_chk, preadv, preadv64
  kWrite,   // write
  kPwrite,  // pwrite, pwrite64, pwritev, pwritev64
  kFsync,   // fsync, fdatasync
  kRename,  // rename (matched on the source path)
};

enum class Action {
  kObserve,      // count only
  kErrno,        // fail with `err`, without calling the real function
  kShort,        // transfer at most `max_bytes` bytes (read/pread/write)
  kShortRandom,  // transfer 1..n bytes, n the size asked, drawn from `seed`
  kCallback,     // run `callback`, then make the real call
};

struct Rule {
  Call call = Call::kRead;
  std::string path_contains;  // empty: any path
  std::string path_suffix;    // empty: any path
  int after = 0;              // matching calls let through first
  int times = -1;             // then act on this many (-1: all)
  Action action = Action::kObserve;
  int err = 0;
  size_t max_bytes = 0;
  uint64_t seed = 0;
  std::function<void()> callback;

  Rule& After(int n) {
    after = n;
    return *this;
  }
  Rule& Times(int n) {
    times = n;
    return *this;
  }
  Rule& Suffix(std::string s) {
    path_suffix = std::move(s);
    return *this;
  }
};

// Rule constructors; `path` is a substring the path must contain.
Rule Observe(Call call, std::string path);
Rule Fail(Call call, std::string path, int err);
Rule Short(Call call, std::string path, size_t max_bytes);
Rule ShortRandom(Call call, std::string path, uint64_t seed);
Rule Do(Call call, std::string path, std::function<void()> callback);

// Installs `rule`; returns its id.
int Inject(Rule rule);
// Calls that matched rule `id` so far (let through or acted on).
int Matched(int id);
// Calls rule `id` acted on.
int Fired(int id);
// Removes every rule (their counters stay readable until the next Inject).
void Clear();

// Clears the rules on construction and destruction.
class ScopedFaults {
 public:
  ScopedFaults() { Clear(); }
  ~ScopedFaults() { Clear(); }
  ScopedFaults(const ScopedFaults&) = delete;
  ScopedFaults& operator=(const ScopedFaults&) = delete;
};

// The path of open descriptor `fd` ("" if unknown), as matched by rules.
std::string PathOfFd(int fd);

}  // namespace fault
}  // namespace ufspack

#endif  // UFSPACK_TESTS_FAULT_FAULT_INJECTION_H_
