// Copyright 2026 The ufspack Authors.

#include "tar_header_check.h"

#include <string>

#include "ufspack/text.h"

namespace ufspack {
namespace internal {

namespace {

constexpr size_t kBlock = 512;
constexpr size_t kSizeField = 124;  // ustar: offset and length of "size"
constexpr size_t kSizeFieldLength = 12;
constexpr size_t kTypeFlag = 156;
constexpr size_t kShown = 40;  // bytes of a bad value in messages

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

std::string Shown(std::string_view bytes) {
  return "'" + EscapeBytes(bytes.substr(0, kShown)) +
         (bytes.size() > kShown ? "...'" : "'");
}

// Unsigned decimal below 2^63 (leading zeros allowed).
bool IsUnsigned(std::string_view v) {
  if (v.empty()) return false;
  for (char c : v) {
    if (!IsDigit(c)) return false;
  }
  while (v.size() > 1 && v[0] == '0') v.remove_prefix(1);
  constexpr std::string_view kMax = "9223372036854775807";
  return v.size() < kMax.size() || (v.size() == kMax.size() && v <= kMax);
}

// [-]DIGITS[.DIGITS]: a pax time (seconds, optionally with a fraction).
bool IsTime(std::string_view v) {
  if (!v.empty() && v[0] == '-') v.remove_prefix(1);
  size_t i = 0;
  while (i < v.size() && IsDigit(v[i])) ++i;
  if (i == 0) return false;
  if (i == v.size()) return true;
  if (v[i] != '.') return false;
  for (++i; i < v.size(); ++i) {
    if (!IsDigit(v[i])) return false;
  }
  return true;
}

// DIGITS(,DIGITS)*
bool IsList(std::string_view v) {
  for (size_t at = 0;;) {
    const size_t comma = v.find(',', at);
    if (!IsUnsigned(v.substr(at, comma - at))) return false;
    if (comma == std::string_view::npos) return true;
    at = comma + 1;
  }
}

enum class Kind { kOther, kUnsigned, kTime, kList };

Kind KindOf(std::string_view key) {
  static constexpr std::string_view kUnsignedKeys[] = {"size",
                                                       "uid",
                                                       "gid",
                                                       "SCHILY.dev",
                                                       "SCHILY.ino",
                                                       "SCHILY.nlink",
                                                       "SCHILY.devmajor",
                                                       "SCHILY.devminor",
                                                       "SCHILY.realsize",
                                                       "GNU.sparse.size",
                                                       "GNU.sparse.realsize",
                                                       "GNU.sparse.numblocks",
                                                       "GNU.sparse.offset",
                                                       "GNU.sparse.numbytes",
                                                       "GNU.sparse.major",
                                                       "GNU.sparse.minor"};
  for (std::string_view k : kUnsignedKeys) {
    if (key == k) return Kind::kUnsigned;
  }
  if (key == "mtime" || key == "atime" || key == "ctime" ||
      key == "LIBARCHIVE.creationtime") {
    return Kind::kTime;
  }
  if (key == "GNU.sparse.map") return Kind::kList;
  return Kind::kOther;
}

Status CheckValue(std::string_view key, std::string_view value, bool global,
                  const std::string& where) {
  if (global && (key == "size" || key.substr(0, 11) == "GNU.sparse.")) {
    return Status::Corruption(
        where + ": sets " + Shown(key) +
        " for every member that follows; libarchive ignores global headers "
        "and other readers apply them, so the members' bytes would depend on "
        "the reader (refused)");
  }
  const char* expected = nullptr;
  switch (KindOf(key)) {
    case Kind::kUnsigned:
      if (!IsUnsigned(value)) expected = "an unsigned decimal number";
      break;
    case Kind::kTime:
      if (!IsTime(value)) expected = "a decimal time ([-]SECONDS[.FRACTION])";
      break;
    case Kind::kList:
      if (!IsList(value)) expected = "decimal numbers separated by commas";
      break;
    case Kind::kOther:
      break;
  }
  if (expected == nullptr) return Status::OK();
  return Status::Corruption(where + ": " + Shown(key) + " is " + Shown(value) +
                            ", expected " + expected);
}

// The records "LENGTH KEY=VALUE\n" of a pax header's body.
Status CheckPaxRecords(std::string_view body, bool global,
                       const std::string& where) {
  for (size_t at = 0; at < body.size() && body[at] != '\0';) {
    const std::string_view rest = body.substr(at);
    size_t d = 0;
    uint64_t length = 0;
    while (d < rest.size() && d < 19 && IsDigit(rest[d])) {
      length = length * 10 + static_cast<uint64_t>(rest[d] - '0');
      ++d;
    }
    const bool framed = d > 0 && d < rest.size() && rest[d] == ' ' &&
                        length > d + 1 && length <= rest.size() &&
                        rest[length - 1] == '\n';
    const std::string_view kv =
        framed ? rest.substr(d + 1, length - d - 2) : std::string_view();
    const size_t eq = kv.find('=');
    if (!framed || eq == 0 || eq == std::string_view::npos) {
      return Status::Corruption(
          where + ": a malformed record at byte " + std::to_string(at) +
          " of its " + std::to_string(body.size()) + ": " + Shown(rest) +
          " (expected \"LENGTH KEY=VALUE\\n\" of LENGTH bytes)");
    }
    UFSPACK_RETURN_IF_ERROR(
        CheckValue(kv.substr(0, eq), kv.substr(eq + 1), global, where));
    at += static_cast<size_t>(length);
  }
  return Status::OK();
}

// The size field of the header at `h` (GNU tar's syntax, see the header);
// its value in *size.
Status SizeField(const char* h, const std::string& where, uint64_t* size) {
  const std::string_view f(h + kSizeField, kSizeFieldLength);
  *size = 0;
  if (static_cast<unsigned char>(f[0]) == 0x80) {  // base-256, positive
    for (size_t k = 1; k < f.size(); ++k) {
      if ((*size >> 56) != 0) {
        return Status::Corruption(where + ": a base-256 size field over 2^64");
      }
      *size = (*size << 8) | static_cast<unsigned char>(f[k]);
    }
    return Status::OK();
  }
  size_t i = 0;
  while (i < f.size() && f[i] == ' ') ++i;
  size_t d = i;
  for (; d < f.size() && f[d] >= '0' && f[d] <= '7'; ++d) {
    *size = *size * 8 + static_cast<uint64_t>(f[d] - '0');
  }
  if (d < f.size() && f[d] != ' ' && f[d] != '\0') {
    return Status::Corruption(where + ": the size field " + Shown(f) +
                              " is not an octal number");
  }
  return Status::OK();
}

}  // namespace

Status CheckTarHeaders(std::string_view chain, uint64_t offset) {
  for (size_t pos = 0; chain.size() - pos >= kBlock;) {
    const char* h = chain.data() + pos;
    if (std::string_view(h, kBlock).find_first_not_of('\0') ==
        std::string_view::npos) {
      return Status::OK();  // an end-of-archive block
    }
    const char type = h[kTypeFlag];
    const bool pax = type == 'x' || type == 'X' || type == 'g';
    const std::string where =
        std::string(pax ? "pax extended header" : "tar header") + " at byte " +
        std::to_string(offset + pos);
    uint64_t size = 0;
    UFSPACK_RETURN_IF_ERROR(SizeField(h, where, &size));
    if (!pax && type != 'L' && type != 'K') return Status::OK();  // its own
    const size_t room = chain.size() - pos - kBlock;
    if (size > room) return Status::OK();  // not all here
    if (pax) {
      UFSPACK_RETURN_IF_ERROR(
          CheckPaxRecords(chain.substr(pos + kBlock, static_cast<size_t>(size)),
                          type == 'g', where));
    }
    const size_t padded =
        static_cast<size_t>(size) + (kBlock - size % kBlock) % kBlock;
    if (padded > room) return Status::OK();
    pos += kBlock + padded;
  }
  return Status::OK();
}

}  // namespace internal
}  // namespace ufspack
