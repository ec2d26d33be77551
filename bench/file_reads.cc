// Copyright 2026 The ufspack Authors.
//
// file_reads: whole-file reads of a list of files on T threads, as a
// compiled program reads them: the file system's rate without an
// interpreter's lock in the way (bench/mount_bench.py, docs/benchmarks.md
// "The mount").
//
//   file_reads LIST [--threads T] [--calls c|python] [--warm W] [--timed K]
//
// LIST holds one path per line, read in that order (shuffle it first for
// random reads); each thread takes the next path.  --calls c: open, read
// to the end, close (cat, OpenCV's imread).  --calls python: the calls
// CPython 3.11's open(p, "rb").read() makes: open, isatty (an ioctl),
// fstat, lseek, read to the end, close.  Every file is read W times
// untimed (default 1: warm reads; 0: first reads), then K times timed
// (default 1; a pass over thousands of cached files takes milliseconds).
//
// Prints one JSON object: {"files": N, "bytes": B, "seconds": S,
// "files_s": N * K / S}, B and S of the K timed passes.  Exit status 0; 1 when
// a file cannot be read (its path and the error on stderr); 2 on a usage error.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Options {
  std::string list;
  int threads = 8;
  bool python_calls = false;
  int warm = 1;
  int timed = 1;
};

[[noreturn]] void Usage(const std::string& why) {
  std::fprintf(stderr,
               "file_reads: %s\nusage: file_reads LIST [--threads T] "
               "[--calls c|python] [--warm W] [--timed K]\n",
               why.c_str());
  std::exit(2);
}

int WholeNumber(const char* flag, const char* value, long min) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(value, &end, 10);
  if (errno != 0 || *end != '\0' || v < min || v > 4096)
    Usage(std::string(flag) + " wants a whole number from " +
          std::to_string(min) + " to 4096, not '" + value + "'");
  return static_cast<int>(v);
}

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) Usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--threads") {
      o.threads = WholeNumber("--threads", value(), 1);
    } else if (a == "--warm") {
      o.warm = WholeNumber("--warm", value(), 0);
    } else if (a == "--timed") {
      o.timed = WholeNumber("--timed", value(), 1);
    } else if (a == "--calls") {
      const std::string v = value();
      if (v != "c" && v != "python")
        Usage("--calls is c or python, not '" + v + "'");
      o.python_calls = v == "python";
    } else if (!a.empty() && a[0] == '-') {
      Usage("unknown option " + a);
    } else if (o.list.empty()) {
      o.list = a;
    } else {
      Usage("one LIST only");
    }
  }
  if (o.list.empty()) Usage("no LIST of files given");
  return o;
}

// The first error of a pass, kept for the message; the pass stops early.
class FirstError {
 public:
  void Set(const std::string& path, const char* call, int err) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!message_.empty()) return;
    message_ = path + ": " + call + ": " + std::strerror(err);
    failed_.store(true, std::memory_order_relaxed);
  }
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  const std::string& message() const { return message_; }

 private:
  std::mutex mu_;
  std::string message_;
  std::atomic<bool> failed_{false};
};

// Reads `path` whole; returns its bytes, or -1 after recording the error.
int64_t ReadWhole(const std::string& path, bool python_calls,
                  std::vector<char>* buf, FirstError* error) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error->Set(path, "open", errno);
    return -1;
  }
  if (python_calls) {
    (void)::isatty(fd);  // its answer is not the point: its cost is
    struct stat st;
    if (::fstat(fd, &st) != 0 || ::lseek(fd, 0, SEEK_CUR) < 0) {
      error->Set(path, "fstat/lseek", errno);
      ::close(fd);
      return -1;
    }
  }
  int64_t total = 0;
  for (;;) {
    const ssize_t n = ::read(fd, buf->data(), buf->size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error->Set(path, "read", errno);
      ::close(fd);
      return -1;
    }
    if (n == 0) break;
    total += n;
  }
  ::close(fd);
  return total;
}

// Reads every path `passes` times on `threads` threads (read k of path
// i % n is item i of one queue, so no thread waits for a pass to end).
// Returns false after printing the first error.
bool ReadPasses(const std::vector<std::string>& paths, int passes,
                const Options& o, int64_t* bytes, double* seconds) {
  const size_t items = paths.size() * static_cast<size_t>(passes);
  std::atomic<size_t> next{0};
  std::atomic<int64_t> total{0};
  FirstError error;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < o.threads; ++t) {
    threads.emplace_back([&] {
      std::vector<char> buf(1 << 20);
      for (size_t i; !error.failed() && (i = next++) < items;) {
        const int64_t n =
            ReadWhole(paths[i % paths.size()], o.python_calls, &buf, &error);
        if (n > 0) total.fetch_add(n, std::memory_order_relaxed);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  *seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  *bytes = total.load();
  if (!error.failed()) return true;
  std::fprintf(stderr, "file_reads: %s\n", error.message().c_str());
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = Parse(argc, argv);
  std::vector<std::string> paths;
  {
    std::ifstream in(o.list);
    if (!in) {
      std::fprintf(stderr, "file_reads: %s: cannot open: %s\n", o.list.c_str(),
                   std::strerror(errno));
      return 1;
    }
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) paths.push_back(line);
  }
  if (paths.empty()) Usage(o.list + " lists no files");

  int64_t bytes = 0;
  double seconds = 0;
  if (o.warm > 0 && !ReadPasses(paths, o.warm, o, &bytes, &seconds)) return 1;
  if (!ReadPasses(paths, o.timed, o, &bytes, &seconds)) return 1;
  const size_t files = paths.size() * static_cast<size_t>(o.timed);
  std::printf(
      "{\"files\": %zu, \"bytes\": %lld, \"seconds\": %.6f, \"files_s\": "
      "%.1f}\n",
      files, static_cast<long long>(bytes), seconds,
      static_cast<double>(files) / seconds);
  return 0;
}
