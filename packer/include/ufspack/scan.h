// Copyright 2026 The ufspack Authors.
//
// ScanTree: lists the samples of a directory tree in exactly the order and
// with exactly the labels torchvision.datasets.ImageFolder gives them.
//
//   classes  = sorted names of the directories directly under the root
//              (hidden ones included, symlinks to directories included)
//   samples  = for each class in order, for each directory `d` of
//              sorted(os.walk(class_dir, followlinks=True)), for each file
//              `f` in sorted(filenames of d): d/f when f's lower-cased name
//              ends with an allowed extension.
//
// "sorted" is Python's str order on file names decoded with the file system
// encoding (UTF-8, undecodable bytes as surrogate escapes): see PyFsLess.
// Whole root paths are compared, so "a/sub-x" sorts before "a/sub/deeper".
//
// Deliberate differences from os.walk, each reported as a warning:
//   * a directory symlink that leads back to one of its own ancestors is not
//     followed (os.walk would recurse until the path is too long);
//   * the output directory of a build is not scanned when it lies inside
//     the source tree.
// An unreadable directory is an error (os.walk silently skips it) unless
// ScanOptions::skip_unreadable is set.
//
// Thread safety: ScanTree is reentrant; it keeps no global state (it walks
// the classes on the process-wide pool of ufspack/parallel.h).
#ifndef UFSPACK_SCAN_H_
#define UFSPACK_SCAN_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ufspack/export.h"
#include "ufspack/status.h"

namespace ufspack {

// torchvision.datasets.folder.IMG_EXTENSIONS:
// .jpg .jpeg .png .ppm .bmp .pgm .tif .tiff .webp
UFSPACK_EXPORT const std::vector<std::string>& DefaultImageExtensions();

struct ScanOptions {
  // No classes: every matching file under the root is a sample (label
  // kNoLabel), named by its path relative to the root.
  bool flat = false;
  // Accept every file, whatever its name.
  bool all_files = false;
  // Allowed suffixes, compared against the ASCII-lower-cased file name.
  // A missing leading '.' is added; upper case is folded.
  std::vector<std::string> extensions = DefaultImageExtensions();
  // A class directory with no matching file is kept (with no samples)
  // instead of being an error.
  bool allow_empty = false;
  // An unreadable directory is skipped with a warning instead of failing.
  bool skip_unreadable = false;
  // Class directories walked concurrently (a network file system answers
  // each directory read in a round trip).  The result does not depend on it.
  int threads = 8;
  // A directory never to descend into (the build's output directory), by
  // device and inode; ignored when both are 0.
  dev_t exclude_dev = 0;
  ino_t exclude_ino = 0;
};

struct ScanEntry {
  std::string name;  // path relative to the root, '/'-separated, raw bytes
  uint32_t label = 0;
};

struct ScanResult {
  std::string root;                  // as given, without trailing '/'
  std::vector<std::string> classes;  // empty in flat mode
  std::vector<ScanEntry> entries;    // ImageFolder order
  std::vector<std::string> warnings;
  uint64_t skipped = 0;  // directories skipped (unreadable, loops)

  // Path to open for entry `k`: root + "/" + name.
  std::string PathOf(size_t k) const { return root + "/" + entries[k].name; }
};

// Scans `root`.  Errors: NotFound if root does not exist, InvalidArgument
// if it is not a directory, has no class directories (class mode) or has a
// class with no matching file (unless allow_empty); IOError for a directory
// that cannot be read (unless skip_unreadable).
UFSPACK_EXPORT Status ScanTree(const std::string& root,
                               const ScanOptions& options, ScanResult* result);

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

// Extensions as ScanTree compares them: ASCII lower case, leading '.'.
UFSPACK_EXPORT std::vector<std::string> NormalizeExtensions(
    std::vector<std::string> extensions);

// Whether `name` ends (ASCII case-insensitively) with one of `extensions`
// (each already lower-case with a leading '.').
UFSPACK_EXPORT bool HasAllowedExtension(
    std::string_view name, const std::vector<std::string>& extensions);

}  // namespace ufspack

#endif  // UFSPACK_SCAN_H_
