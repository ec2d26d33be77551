// Copyright 2026 The ufspack Authors.
//
// CheckTarHeaders: the numbers in a tar entry's headers are well formed.
// libarchive reads a number up to its first unexpected character, so a pax
// record "size=12abc" makes a 12-byte member of a 20-byte one and an
// octal size field "0000012x45\0" makes one of 10 bytes; the member is then
// stored short, silently.  GNU tar refuses both ("Archive contains ... where
// numeric off_t value expected", "malformed extended header").  Internal
// to the packer (ArchiveReader runs it on every tar entry, over the header
// bytes libarchive has just parsed).
//
// Checked, in every header of the entry (its pax 'x', 'X' and 'g' headers,
// GNU 'L'/'K' long names, and its own header):
//  - the size field: optional leading spaces, octal digits, then the end
//    of the field, a space or a NUL (GNU tar's rule); or base-256 (a first
//    byte 0x80); an empty (all NUL or space) field reads 0 everywhere;
//  - each pax record: "LENGTH KEY=VALUE\n" with LENGTH decimal and the
//    record's exact length (records end at a NUL, as libarchive reads them);
//  - the values libarchive reads as numbers: 'size', 'uid', 'gid',
//    'SCHILY.{dev,ino,nlink,devmajor,devminor,realsize}' and
//    'GNU.sparse.{size,realsize,numblocks,offset,numbytes,major,minor}' are
//    unsigned decimal below 2^63; 'mtime', 'atime', 'ctime' and
//    'LIBARCHIVE.creationtime' are [-]DIGITS[.DIGITS]; 'GNU.sparse.map' is
//    decimals separated by commas;
//  - a global ('g') header sets neither 'size' nor 'GNU.sparse.*':
//    libarchive ignores global headers, other readers (Python's tarfile)
//    apply them, so the member's bytes would depend on the reader.
//
// Thread safety: a pure function.
#ifndef UFSPACK_PACKER_SRC_TAR_HEADER_CHECK_H_
#define UFSPACK_PACKER_SRC_TAR_HEADER_CHECK_H_

#include <cstdint>
#include <string_view>

#include "ufspack/status.h"

namespace ufspack {
namespace internal {

// `chain`: an entry's header bytes, from its first header (at stream offset
// `offset`) up to its data.  OK, or Corruption whose message says what is
// wrong, where (stream offsets) and shows the bad bytes (escaped, at most
// 40), without naming the archive or member: "pax extended header at byte
// 0: 'size' is '12abc', expected an unsigned decimal number".  Headers
// that do not fit in `chain` whole are not checked (libarchive reports a
// truncated archive itself).
Status CheckTarHeaders(std::string_view chain, uint64_t offset);

}  // namespace internal
}  // namespace ufspack

#endif  // UFSPACK_PACKER_SRC_TAR_HEADER_CHECK_H_
