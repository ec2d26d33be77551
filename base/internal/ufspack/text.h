// Copyright 2026 The ufspack Authors.
//
// Text helpers shared by the libraries' error messages, path handling and
// the CLI.
//
// Thread safety: pure functions.
#ifndef UFSPACK_TEXT_H_
#define UFSPACK_TEXT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ufspack/export.h"

namespace ufspack {

// "0x" followed by 16 lower-case hex digits.
UFSPACK_EXPORT std::string HexU64(uint64_t v);

// Length of the valid UTF-8 sequence starting at s[i] (1 for ASCII), or 0
// if none starts there (Python's strict UTF-8 rules: no overlongs, no
// surrogates, nothing above U+10FFFF).  REQUIRES: i < n.
UFSPACK_EXPORT size_t Utf8SequenceLength(const unsigned char* s, size_t n,
                                         size_t i);

// `bytes` as one line of printable text for messages: valid UTF-8 is kept,
// control characters and bytes that are not valid UTF-8 become \xNN, and a
// backslash becomes \\ so the escapes are unambiguous.
UFSPACK_EXPORT std::string EscapeBytes(std::string_view bytes);

// A byte count for people: "512 B", "1.50 KiB", "68.2 MiB" (powers of
// 1024; two decimals below 10, one above).
UFSPACK_EXPORT std::string FormatBytes(uint64_t n);

// The segments of `path` between its '/'s, in order, empty ones included
// (what a caller does with "", "." and ".." is its own rule): "a//b/" gives
// "a", "", "b", ""; "/x" gives "", "x"; "" gives one empty segment.  The
// views point into `path`'s characters.
UFSPACK_EXPORT std::vector<std::string_view> SplitPath(std::string_view path);

}  // namespace ufspack

#endif  // UFSPACK_TEXT_H_
