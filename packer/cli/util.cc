// Copyright 2026 The ufspack Authors.
#include "util.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <string>
#include <string_view>

#include "ufspack/posix_io.h"
#include "ufspack/text.h"

namespace ufspack {
namespace cli {
namespace {

std::atomic<bool> g_interrupted{false};

// Installed with SA_RESETHAND: the next signal of the same kind takes the
// default action and terminates at once.
extern "C" void OnSignal(int) { g_interrupted.store(true); }

}  // namespace

int ExitCodeFor(const Status& s) {
  if (s.ok()) return kExitOk;
  if (s.IsCorruption()) return kExitCorrupt;
  if (s.IsAborted()) return kExitInterrupted;
  return kExitFailure;
}

bool ParseUint(const std::string& s, uint64_t* out) {
  if (s.empty() || s.size() > 19) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = v;
  return true;
}

bool ParseSize(const std::string& s, uint64_t* out) {
  size_t i = 0;
  unsigned __int128 whole = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
    whole = whole * 10 + static_cast<unsigned>(s[i] - '0');
    if (whole > UINT64_MAX) return false;
    ++i;
  }
  const size_t whole_digits = i;
  std::string fraction;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      if (fraction.size() < 18) fraction.push_back(s[i]);
      ++i;
    }
    if (fraction.empty()) return false;  // "1." is not a number
  }
  if (whole_digits == 0 && fraction.empty()) return false;
  unsigned __int128 unit = 1;
  if (i < s.size()) {
    // K, M, G, T (either case): 1024 to the 1st, 2nd, 3rd, 4th power.
    constexpr std::string_view kUnits = "kmgt";
    const size_t power = kUnits.find(
        static_cast<char>(std::tolower(static_cast<unsigned char>(s[i]))));
    if (power == std::string_view::npos) return false;
    unit = static_cast<unsigned __int128>(1) << (10 * (power + 1));
    ++i;
    const std::string rest = s.substr(i);
    if (!rest.empty() && rest != "iB") return false;
  } else if (!fraction.empty()) {
    return false;  // "1.5" bytes
  }
  unsigned __int128 v = whole * unit;
  if (!fraction.empty()) {
    unsigned __int128 num = 0, den = 1;
    for (char c : fraction) {
      num = num * 10 + static_cast<unsigned>(c - '0');
      den *= 10;
    }
    v += num * unit / den;
  }
  if (v > UINT64_MAX) return false;
  *out = static_cast<uint64_t>(v);
  return true;
}

std::string FormatCount(uint64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  int k = 0;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    if (k > 0 && k % 3 == 0) out.push_back(',');
    out.push_back(*it);
    ++k;
  }
  return std::string(out.rbegin(), out.rend());
}

std::string FormatDuration(double seconds) {
  if (seconds < 0 || seconds > 1e7) return "?";
  uint64_t s = static_cast<uint64_t>(seconds + 0.5);
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof(buf), "%llu:%02llu:%02llu",
                  static_cast<unsigned long long>(s / 3600),
                  static_cast<unsigned long long>(s / 60 % 60),
                  static_cast<unsigned long long>(s % 60));
  } else {
    std::snprintf(buf, sizeof(buf), "%llu:%02llu",
                  static_cast<unsigned long long>(s / 60),
                  static_cast<unsigned long long>(s % 60));
  }
  return buf;
}

Status WriteFd(int fd, std::string_view data) {
  return internal::WriteAll(fd, data.data(), data.size(), "");
}

Progress::Progress(bool enabled) : enabled_(enabled && ::isatty(2)) {}

Progress::~Progress() { Clear(); }

void Progress::Update(const std::string& line, bool force) {
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  if (!force && drawn_ && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  std::string s = "\r" + line + "\x1b[K";
  (void)WriteFd(2, s);
  drawn_ = true;
}

void Progress::Clear() {
  if (!enabled_ || !drawn_) return;
  (void)WriteFd(2, "\r\x1b[K");
  drawn_ = false;
}

void InstallSignalHandlers() {
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sa.sa_flags = SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
}

bool Interrupted() { return g_interrupted.load(); }
const std::atomic<bool>* InterruptFlag() { return &g_interrupted; }

}  // namespace cli
}  // namespace ufspack
