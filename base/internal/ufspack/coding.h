// Copyright 2026 The ufspack Authors.
//
// Little-endian fixed-width integer encoding used by every on-disk structure
// (see docs/format.md, "Conventions").  Decoding goes through memcpy so it is
// correct for unaligned input and on any host byte order; the compiler turns
// it into a single load on little-endian machines.
//
// Thread safety: all functions are pure.
#ifndef UFSPACK_CODING_H_
#define UFSPACK_CODING_H_

#include <cstdint>
#include <cstring>
#include <string>

namespace ufspack {

inline bool HostIsLittleEndian() {
  const uint16_t probe = 1;
  unsigned char first;
  std::memcpy(&first, &probe, 1);
  return first == 1;
}

inline void EncodeFixed16(char* dst, uint16_t v) {
  dst[0] = static_cast<char>(v & 0xff);
  dst[1] = static_cast<char>((v >> 8) & 0xff);
}

inline void EncodeFixed32(char* dst, uint32_t v) {
  for (int i = 0; i < 4; ++i) dst[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

inline void EncodeFixed64(char* dst, uint64_t v) {
  for (int i = 0; i < 8; ++i) dst[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

inline uint16_t DecodeFixed16(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return static_cast<uint16_t>(u[0] | (u[1] << 8));
}

inline uint32_t DecodeFixed32(const char* p) {
  if (HostIsLittleEndian()) {
    uint32_t v;
    std::memcpy(&v, p, sizeof(v));
    return v;
  }
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return static_cast<uint32_t>(u[0]) | (static_cast<uint32_t>(u[1]) << 8) |
         (static_cast<uint32_t>(u[2]) << 16) |
         (static_cast<uint32_t>(u[3]) << 24);
}

inline uint64_t DecodeFixed64(const char* p) {
  if (HostIsLittleEndian()) {
    uint64_t v;
    std::memcpy(&v, p, sizeof(v));
    return v;
  }
  return static_cast<uint64_t>(DecodeFixed32(p)) |
         (static_cast<uint64_t>(DecodeFixed32(p + 4)) << 32);
}

inline void PutFixed32(std::string* dst, uint32_t v) {
  char buf[4];
  EncodeFixed32(buf, v);
  dst->append(buf, sizeof(buf));
}

inline void PutFixed64(std::string* dst, uint64_t v) {
  char buf[8];
  EncodeFixed64(buf, v);
  dst->append(buf, sizeof(buf));
}

}  // namespace ufspack

#endif  // UFSPACK_CODING_H_
