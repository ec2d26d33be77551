// Copyright 2026 The ufspack Authors.
//
// The input format of ufspack_pack_fuzzer (tests/fuzz/pack_fuzzer.cc), shared
// with the seed generator (tests/fuzz/make_seeds.cc).  See
// tests/fuzz/README.md.
//
//   byte 0       flags: which fix-ups to apply after mutation (kFix*), and
//                kFlagThreads (ReadBatch with two threads)
//   bytes 1..4   u32 little-endian: length L of the index bytes (clamped to
//                what is left of the input)
//   bytes 5..    L bytes of index.ufs, then the rest of the input is data.ufs
#ifndef UFSPACK_TESTS_FUZZ_PACK_FUZZER_H_
#define UFSPACK_TESTS_FUZZ_PACK_FUZZER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ufspack {
namespace fuzz {

inline constexpr size_t kPrefixLength = 5;

// Fix-ups, applied in this order so that each sees the bytes the previous
// ones wrote.  Each is best effort: a field whose bytes (or whose target
// range) lie outside the input is left alone.
inline constexpr uint8_t kFixNameHashes = 1u << 0;  // RecordEntry.name_hash
inline constexpr uint8_t kFixRecordChecksums = 1u << 1;  // RecordEntry.checksum
inline constexpr uint8_t kFixSizes = 1u << 2;           // index_size, data_size
inline constexpr uint8_t kFixPackId = 1u << 3;          // both headers' pack id
inline constexpr uint8_t kFixBodyChecksum = 1u << 4;    // body_checksum
inline constexpr uint8_t kFixHeaderChecksum = 1u << 5;  // header_checksum
inline constexpr uint8_t kFixAll = 0x3f;
// Not a fix-up: ReadBatch() with two threads instead of one.
inline constexpr uint8_t kFlagThreads = 1u << 6;

// Builds a fuzzer input from a pack's two files.
inline std::string MakeInput(uint8_t flags, std::string_view index,
                             std::string_view data) {
  std::string out;
  out.push_back(static_cast<char>(flags));
  const uint32_t n = static_cast<uint32_t>(index.size());
  for (int k = 0; k < 4; ++k) out.push_back(static_cast<char>(n >> (8 * k)));
  out.append(index);
  out.append(data);
  return out;
}

}  // namespace fuzz
}  // namespace ufspack

#endif  // UFSPACK_TESTS_FUZZ_PACK_FUZZER_H_
