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
// encoding (UTF-8, undecodable bytes as surrogate escapes).
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
// Thread safety: ScanTree and ScanTreeByClass are reentrant; they keep no
// global state (they walk the classes on up to ScanOptions::threads threads
// of their own, started and joined within the call).
#ifndef UFSPACK_SCAN_H_
#define UFSPACK_SCAN_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
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
  // ScanTreeByClass: at most about this many samples walked and not yet
  // handed to the sink (0: no limit); see ScanTreeByClass.
  uint64_t max_held_files = 0;
  // Polled before each directory is read; when it becomes true the scan
  // stops with Aborted.
  const std::atomic<bool>* cancel = nullptr;
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

// The samples of one class (in flat mode: of the whole tree), as
// ScanTreeByClass hands them over.
struct ScanClass {
  uint32_t label = 0;  // index in ScanResult::classes; kNoLabel in flat mode
  std::vector<ScanEntry> entries;  // ImageFolder order; may be empty
};

// ScanTree for trees too large to list at once.  Lists the classes (sets
// result->root and result->classes before the first call to `sink`), then
// walks them on options.threads threads of its own and calls `sink` on
// the calling thread once per class, in class order, with that class's
// samples (the sink may move them out).  The walk runs ahead of the sink
// by at most options.threads classes (a sliding window: one slow class
// holds the others up only once the window is full behind it).  Classes
// for which `want` (if set) returns false are neither walked nor handed
// over.  Warnings and skipped directories go to *result as ScanTree gives
// them; result->entries stays empty.
//
// In flat mode (no classes) the tree is walked on the calling thread and
// `sink` is called once per directory that holds samples, in the order of
// the samples (label kNoLabel); `want(kNoLabel)` false skips the walk.
//
// Held at a time (besides what the sink keeps): the samples of at most
// options.threads classes, and with options.max_held_files, about that
// many (the first class is walked alone, then classes start while the
// samples walked and not handed over plus the largest class seen so far
// for each class in progress fit; a class larger than any before can
// overshoot), so memory follows the largest classes, not the tree; in
// flat mode, one directory's samples and the paths of the directories
// found but not yet listed.  A class with no sample is handed
// over with no entries: refusing it (ScanOptions::allow_empty) is the
// caller's choice; ScanTree does.  The first error, the scan's or the
// first non-OK status `sink` returns, stops the walk and is returned.
UFSPACK_EXPORT Status ScanTreeByClass(
    const std::string& root, const ScanOptions& options,
    const std::function<bool(uint32_t label)>& want,
    const std::function<Status(ScanClass* cls)>& sink, ScanResult* result);

// Extensions as ScanTree compares them: ASCII lower case, leading '.'.
UFSPACK_EXPORT std::vector<std::string> NormalizeExtensions(
    std::vector<std::string> extensions);

// Whether `name` ends (ASCII case-insensitively) with one of `extensions`
// (each already lower-case with a leading '.').
UFSPACK_EXPORT bool HasAllowedExtension(
    std::string_view name, const std::vector<std::string>& extensions);

}  // namespace ufspack

#endif  // UFSPACK_SCAN_H_
