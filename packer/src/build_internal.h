// Copyright 2026 The ufspack Authors.
//
// The steps of BuildPack (packer/src/build.cc) that part planning and
// `ufspack append` (packer/src/merge.cc) reuse.  Internal to the packer
// (not installed).
//
// Thread safety: as BuildPack (reentrant; a PackWriter is one thread's).
#ifndef UFSPACK_PACKER_SRC_BUILD_INTERNAL_H_
#define UFSPACK_PACKER_SRC_BUILD_INTERNAL_H_

#include <string>
#include <vector>

#include "ufspack/builder.h"
#include "ufspack/scan.h"
#include "ufspack/status.h"

namespace ufspack {
namespace internal {

// Whether options.cancel asks the build to stop.
bool Cancelled(const BuildOptions& options);
// Adds a warning to the summary, up to BuildSummary::kMaxWarnings.
void Warn(BuildSummary* summary, std::string w);
// Leaves the pack's own files (data.ufs, index.ufs, their temporary files)
// out of `entries`, as when the output directory is the source root; true
// if any was.
bool DropPackFiles(std::vector<ScanEntry>* entries);

// Declares scan.classes on `writer` and sets the source metadata (root,
// extension selection).
Status DescribeSource(const ScanResult& scan, const BuildOptions& options,
                      PackWriter* writer);
Status DescribeSource(const std::string& root,
                      const std::vector<std::string>& classes,
                      const BuildOptions& options, PackWriter* writer);

// Which files a build selected, as metadata kMetaExtensions records it: "*"
// (all) or the normalized extension list, comma-separated.  Readers that
// filter like ImageFolder use it to know whether they must.
std::string ExtensionSelection(const ScanOptions& scan);

// Reads scan.entries (with options.threads in flight), adds them to
// `writer` in order and publishes the pack (Finish); fills *summary.  On
// error the writer is abandoned and its directory left as it was.
Status PackRecords(const ScanResult& scan, const BuildOptions& options,
                   PackWriter* writer, BuildSummary* summary);

}  // namespace internal
}  // namespace ufspack

#endif  // UFSPACK_PACKER_SRC_BUILD_INTERNAL_H_
