// Copyright 2026 The ufspack Authors.
//
// ImageFolder's order and the scan's empty-class error, shared by the
// scanner, the builder, part planning and append.  Internal to the packer
// (not installed); exported for the tests in shared builds.
//
// Thread safety: pure functions.
#ifndef UFSPACK_PACKER_SRC_SCAN_ORDER_H_
#define UFSPACK_PACKER_SRC_SCAN_ORDER_H_

#include <string>
#include <string_view>
#include <vector>

#include "ufspack/export.h"
#include "ufspack/scan.h"
#include "ufspack/status.h"

namespace ufspack {

// The InvalidArgument ScanTree returns for class directories with no
// matching file (`empty`: their names, in class order).
UFSPACK_EXPORT Status EmptyClassesError(const std::string& root,
                                        const std::vector<std::string>& empty,
                                        const ScanOptions& options);

// Python's `a < b` for two file names as os.fsdecode() decodes them on
// Linux: UTF-8 with surrogateescape, compared by code point.  Equals byte
// order except where undecodable bytes meet 4-byte UTF-8 sequences.
UFSPACK_EXPORT bool PyFsLess(std::string_view a, std::string_view b);

// Whether sample name `a` (a path relative to the root, as ScanEntry::name)
// comes before `b` in ScanTree's order, for two names of one class (or of a
// flat tree): by directory (the part before the last '/', whole paths
// compared with PyFsLess, as sorted(os.walk()) compares them), then by file
// name.
UFSPACK_EXPORT bool ImageFolderLess(std::string_view a, std::string_view b);

}  // namespace ufspack

#endif  // UFSPACK_PACKER_SRC_SCAN_ORDER_H_
