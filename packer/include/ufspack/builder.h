// Copyright 2026 The ufspack Authors.
//
// Writing packs.  Two layers:
//
//   PackWriter  appends records to a new pack in a directory and publishes
//               it atomically on Finish().  Add / Finish / Abandon with a
//               sticky status, after LevelDB's TableBuilder.
//   BuildPack   `ufspack build`: scans a tree (ScanTreeByClass, a class at
//               a time, ahead of the packing), reads its files with many
//               threads in flight, and feeds a PackWriter in the scan's
//               order, so the output is deterministic.  Its memory does not
//               grow with the tree: it holds the file names of at most
//               about 600,000 files, or of the largest classes (flat: the
//               largest directories) if larger (docs/scale.md).
//
// Publishing: records go to a temporary data file and the index to a
// temporary index file, both created in the output directory; Finish()
// fsyncs them, renames data then index over data.ufs and index.ufs, and
// fsyncs the directory.  Until the renames, the previous pack in the
// directory (if any) is untouched and usable; after a failure or Abandon()
// the temporary files are removed.  A crash (kill -9) can leave temporary
// files behind: they are named ".data.ufs.tmp-*" and ".index.ufs.tmp-*",
// are ignored by readers, and are removed by the next build into that
// directory.  Before the renames the previous data.ufs is hard-linked as
// .data.ufs.prev (removed once index.ufs is in place): a failed index
// rename renames it back, and after a crash between the two renames
// Reader::Open pairs the previous index.ufs with it (the new data.ufs has
// another pack id) and the next build restores it.  So every crash leaves
// the previous pack, the new pack, or (no previous pack) nothing that opens.
//
// Concurrency: one build at a time per output directory, enforced with an
// flock(2) on the directory; a second build fails with InvalidArgument.
//
// fork(): a PackWriter belongs to the process that created it.  In a
// fork() child (any other process) every call fails with InvalidArgument
// ("<dir>: this pack writer was opened by process P; this is process Q:
// a writer cannot be used across fork() ...") before it touches a file,
// and Abandon() and the destructor neither write nor remove anything; the
// child's copies of the writer's descriptors are closed at the fork (a
// pthread_atfork handler: fork(2) through libc, as os.fork), so the
// directory's lock goes with the creator's writer, not with the child.
// The creator goes on and publishes as if there were no child.
// Open a writer per process, each into its own directory.
//
// Thread safety: a PackWriter is not thread-safe (one writer thread).
// BuildPack is reentrant.
#ifndef UFSPACK_BUILDER_H_
#define UFSPACK_BUILDER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ufspack/export.h"
#include "ufspack/layout.h"
#include "ufspack/scan.h"
#include "ufspack/status.h"
#include "ufspack/types.h"

namespace ufspack {

namespace internal {
class PackWriterImpl;  // packer/src/pack_writer_impl.h
}  // namespace internal

struct PackWriterOptions {
  // Store a record as zstd when that makes it smaller; otherwise raw.
  bool compress = false;
  int zstd_level = 3;  // 1..19 (ZSTD_maxCLevel())
  // A pack without classes (labels are kNoLabel).
  bool flat = false;
};

class UFSPACK_EXPORT PackWriter {
 public:
  // Creates `out_dir` (and missing parents) if needed, locks it, removes
  // temporary files left by crashed builds, and opens new temporary files.
  static Status Create(const std::string& out_dir,
                       const PackWriterOptions& options,
                       std::unique_ptr<PackWriter>* writer);

  // Abandons the pack unless Finish() succeeded.
  ~PackWriter();
  PackWriter(const PackWriter&) = delete;
  PackWriter& operator=(const PackWriter&) = delete;

  // Declares the next class; its index is the number of classes before it.
  // REQUIRES: not a flat pack; called before any record with this label.
  Status AddClass(std::string_view name);

  // Appends a record.  Labels must be non-decreasing (records of a class
  // are contiguous) and < the number of classes, or kNoLabel in a flat
  // pack.  Names must be unique (checked by Finish()).
  Status Add(std::string_view name, uint32_t label, std::string_view bytes);

  // Appends `size` bytes read from `fd` (from its current position) as a
  // raw record, in bounded memory.  `path` names the source in errors; the
  // file must yield exactly `size` bytes.
  Status AddFromFd(std::string_view name, uint32_t label, int fd, uint64_t size,
                   const std::string& path);

  // Sets a metadata entry (e.g. kMetaSourceRoot), replacing any earlier
  // value for `key`.  Stored in key order.
  Status SetMetadata(std::string_view key, std::string_view value);

  // Writes the index and publishes the pack.  Sets *pack_id if non-null.
  Status Finish(PackId* pack_id = nullptr);

  // Removes the temporary files; the directory keeps its previous pack.
  void Abandon();

  // The first error, sticky: once set, every call returns it.
  const Status& status() const;
  uint64_t record_count() const;
  uint64_t data_bytes() const;
  const std::string& out_dir() const;

 private:
  friend class internal::PackWriterImpl;  // Of(): the packer's own callers
  explicit PackWriter(std::unique_ptr<internal::PackWriterImpl> impl);
  std::unique_ptr<internal::PackWriterImpl> impl_;
};

struct BuildProgress {
  uint64_t files_done = 0;
  // Files to pack.  While the tree is still being listed (a tree of more
  // than about 65,000 files is packed as it is listed) this counts the files
  // listed so far and grows; scan_done says when it is final.
  uint64_t files_total = 0;
  bool scan_done = true;
  // Classes listed so far, of classes_total (those to list: every class,
  // or those a part's range touches); 0 and 0 in flat mode.
  uint64_t classes_scanned = 0;
  uint64_t classes_total = 0;
  // A --part build's first pass: listing and sizing the whole tree to
  // compute the split.  files_total counts the tree's files sized so far;
  // files_done stays 0.
  bool splitting = false;
  uint64_t bytes_in = 0;   // source bytes read
  uint64_t bytes_out = 0;  // bytes written to data.ufs
  double seconds = 0;      // since the start of reading
};

struct BuildOptions {
  ScanOptions scan;
  PackWriterOptions writer;
  // The order of the records in data.ufs (ufspack/layout.h); recorded as
  // metadata kMetaLayout.  The index is in ImageFolder order either way.
  DataLayout layout;
  // Source files read concurrently.  Large by default: on network storage
  // every open and read is a round trip, so many must be in flight.
  int threads = 32;
  // A file that cannot be read (missing, not a regular file, permission
  // denied, changed while read) is skipped and reported instead of failing
  // the build.  Also skips unreadable directories.
  bool skip_unreadable = false;
  // Called from the calling thread: about four times a second while a
  // --part build sizes the tree (BuildProgress::splitting), while the
  // build waits for the scan, once packing starts, about four times a
  // second while packing, and once at the end.
  std::function<void(const BuildProgress&)> progress;
  // Polled; when it becomes true the build stops with Aborted and leaves
  // the output directory as it was.
  const std::atomic<bool>* cancel = nullptr;
  // Build only part `part` (0-based) of a split of the source into `parts`
  // (`ufspack build --part I/N`): every part job lists the whole tree and
  // stats every file, splits the ImageFolder-ordered sample list into
  // `parts` contiguous ranges of about equal bytes (docs/format.md), and packs
  // its own range, with the whole class table, so that `ufspack merge` of
  // the N parts is the pack a single build would give.  The part records
  // the split in its metadata (kMetaPart, kMetaPartSplit, kMetaPartRange).
  // Neither pass holds the tree's file list: the first keeps a count, a
  // weight and a hash per class (flat: per directory); the second lists
  // again only the classes the part's range touches (flat: the whole
  // tree, packing only the directories in range), and fails if they
  // changed in between.
  uint32_t part = 0;
  uint32_t parts = 1;
  // Files the scan may list ahead of the packing (held in memory, about
  // 100 bytes each); packing starts once a quarter of that is listed, or
  // the whole tree if smaller.  A class is never cut, so a class larger
  // than this is held whole.
  size_t scan_ahead = size_t{1} << 18;
  // Archive sources only (WebDataset shards): each sample's label is the
  // decimal number in its field of this name (the "cls" of 000123.cls);
  // the classes are "0", "1", ... and every file of a sample needs one
  // (docs/cli.md, "WebDataset shards").  Empty: labels as ImageFolder's.
  std::string label_field;
};

// Metadata of a part built with BuildOptions::parts > 1:
//   kMetaPart       "I/N"
//   kMetaPartSplit  16 hex digits identifying the split: XXH3-64 of N, the
//                   class names, every sample's name, label and size, and
//                   the sample count (docs/format.md); equal in every part
//                   of one split of one tree
//   kMetaPartRange  "<first> <count> <total>": the part's samples are
//                   [first, first + count) of the split's `total`
inline constexpr char kMetaPart[] = "part";
inline constexpr char kMetaPartSplit[] = "part_split";
inline constexpr char kMetaPartRange[] = "part_range";

struct BuildSummary {
  std::string index_path;
  std::string data_path;
  PackId pack_id;
  uint64_t files = 0;
  uint64_t classes = 0;
  uint64_t skipped = 0;  // files and directories skipped
  // Archive builds: members left out as a tree build leaves out files
  // (their names do not match the extensions; no --all-files), e.g. the
  // .cls and .txt fields of WebDataset shards.
  uint64_t not_matching = 0;
  uint64_t compressed = 0;  // records stored as zstd
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;  // size of data.ufs
  uint64_t index_bytes = 0;
  double scan_seconds = 0;
  // A part build: its samples [part_first, part_first + part_samples) of
  // split_samples in the whole tree.
  uint64_t part_first = 0;
  uint64_t part_samples = 0;
  uint64_t split_samples = 0;
  double seconds = 0;                 // whole build
  std::vector<std::string> warnings;  // at most kMaxWarnings, then a count
  static constexpr size_t kMaxWarnings = 1000;
};

// Packs the tree at `src` into `out_dir` (data.ufs + index.ufs).  A
// regular file `src` is read as an archive (tar, compressed or not, zip,
// ...): packed as the tree extracting it gives, each top-level member that
// is itself an archive a class named by ArchiveStem(); read once, in
// order, with no scratch copy; records stored in archive order (metadata
// kMetaLayout "source"); options.parts and options.layout.shuffled are
// refused (docs/cli.md, "Building from an archive").
UFSPACK_EXPORT Status BuildPack(const std::string& src,
                                const std::string& out_dir,
                                const BuildOptions& options,
                                BuildSummary* summary);

// BuildPack of several archives (WebDataset shards, each file or shard
// pattern of `archives` in turn), read one after another, in that order,
// into one pack, as a shard pattern naming them would be.
UFSPACK_EXPORT Status BuildPackFromArchives(
    const std::vector<std::string>& archives, const std::string& out_dir,
    const BuildOptions& options, BuildSummary* summary);

// `name` without an archive suffix (.tar, .tar.gz, .tgz, .tar.bz2, .tbz2,
// .tar.xz, .txz, .tar.zst, .tzst, .zip; ASCII case-insensitive); empty if
// it has none.
UFSPACK_EXPORT std::string_view ArchiveStem(std::string_view name);

}  // namespace ufspack

#endif  // UFSPACK_BUILDER_H_
