// Copyright 2026 The ufspack Authors.
#include "ufspack/text.h"

#include <cstdio>
#include <string>

namespace ufspack {

std::string HexU64(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%016llx",
                static_cast<unsigned long long>(v));
  return buf;
}

size_t Utf8SequenceLength(const unsigned char* s, size_t n, size_t i) {
  const unsigned char c = s[i];
  if (c < 0x80) return 1;
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;  // no overlongs
    if (c == 0xED) hi = 0x9F;  // no UTF-16 surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;  // no overlongs
    if (c == 0xF4) hi = 0x8F;  // <= U+10FFFF
  } else {
    return 0;
  }
  if (i + len > n) return 0;
  if (s[i + 1] < lo || s[i + 1] > hi) return 0;
  for (size_t k = 2; k < len; ++k) {
    if (s[i + k] < 0x80 || s[i + k] > 0xBF) return 0;
  }
  return len;
}

std::string EscapeBytes(std::string_view bytes) {
  const auto* s = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  std::string out;
  out.reserve(n);
  char buf[8];
  for (size_t i = 0; i < n;) {
    const unsigned char c = s[i];
    if (c == '\\') {
      out += "\\\\";
      ++i;
      continue;
    }
    const size_t len = c >= 0x20 && c != 0x7f ? Utf8SequenceLength(s, n, i) : 0;
    if (len == 0) {
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
      ++i;
    } else {
      out.append(bytes.data() + i, len);
      i += len;
    }
  }
  return out;
}

std::string FormatBytes(uint64_t n) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (n < 1024) return std::to_string(n) + " B";
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), v < 10 ? "%.2f %s" : "%.1f %s", v, kUnits[u]);
  return buf;
}

std::vector<std::string_view> SplitPath(std::string_view path) {
  std::vector<std::string_view> segments;
  size_t start = 0;
  while (true) {
    size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) slash = path.size();
    segments.push_back(path.substr(start, slash - start));
    if (slash == path.size()) return segments;
    start = slash + 1;
  }
}

}  // namespace ufspack
