// Copyright 2026 The ufspack Authors.
//
// The publishing protocol of docs/format.md, "Publishing a pack": how a
// new pack replaces the previous one in its directory so that, at every
// instant and after a crash at any point, the directory holds the complete
// previous pack, the complete new pack, or a pair that readers refuse at
// open.  Internal to the packer (not installed); PackWriter is its user.
//
// The steps, numbered as in format.md:
//
//   1. LockPackDir      create the directory, open it, flock it
//   2. RecoverPackDir   remove dead builds' temporaries; put back a previous
//                       pack that a kill between the two renames split
//   3. CreateTemp       .data.ufs.tmp-XXXXXXXX / .index.ufs.tmp-XXXXXXXX
//   4-7.                (PackWriter: write, fsync and close the temporaries)
//   8-9. Publisher      link the previous data.ufs as .data.ufs.prev,
//                       rename data then index, remove .data.ufs.prev,
//                       fsync the directory
//
// Thread safety: none of this is thread-safe; one build owns a directory
// (the lock of step 1 makes it so across processes).
#ifndef UFSPACK_PACKER_SRC_PUBLISH_H_
#define UFSPACK_PACKER_SRC_PUBLISH_H_

#include <string>
#include <string_view>

#include "ufspack/status.h"

namespace ufspack {
namespace internal {

// Prefixes of the temporary files of step 3 (8 random characters follow).
inline constexpr char kDataTmpPrefix[] = ".data.ufs.tmp-";
inline constexpr char kIndexTmpPrefix[] = ".index.ufs.tmp-";
// The temporary manifest of `ufspack merge` (MergePacks).
inline constexpr char kManifestTmpPrefix[] = ".manifest.ufs.tmp-";
// PackWriter's scratch files (spill.h): the record table, the name pool and
// the name hashes while a pack is built, and the lookup table at the end.
inline constexpr char kRecordsTmpPrefix[] = ".records.ufs.tmp-";
inline constexpr char kNamesTmpPrefix[] = ".names.ufs.tmp-";
inline constexpr char kHashesTmpPrefix[] = ".hashes.ufs.tmp-";
inline constexpr char kLookupTmpPrefix[] = ".lookup.ufs.tmp-";

// True for the names a pack's files take in its directory while it is
// built and after: data.ufs, index.ufs, manifest.ufs and the temporaries.
bool IsPackFileName(std::string_view name);

// Step 1.  Creates `dir` and missing parents if needed, opens it
// (*dir_fd) and takes an exclusive, non-blocking flock(2) on it.  Sets
// *locked to false on a file system without flock (the build goes on
// unlocked).  If another build holds the lock, closes the directory and
// returns InvalidArgument "<dir>: another ufspack build is writing to this
// directory".  The lock is released when *dir_fd is closed.
Status LockPackDir(const std::string& dir, int* dir_fd, bool* locked);

// Step 2.  Deletes the temporaries of builds that died and resolves a
// leftover .data.ufs.prev: when index.ufs has its pack id and data.ufs
// has not (a kill between the two renames), renames it back to data.ufs;
// otherwise deletes it.  Best effort: errors leave files for the next
// build.  REQUIRES: the lock of step 1 is held.
void RecoverPackDir(int dir_fd);

// Step 3.  Creates a new file `dir`/`prefix`XXXXXXXX (8 random characters
// from a-z0-9) with O_EXCL and mode 0666 & ~umask, the permissions any
// other new file would get; sets *fd (read-write) and *path.
Status CreateTemp(const std::string& dir, const char* prefix, int* fd,
                  std::string* path);

// Steps 8 and 9: publishes two complete temporaries over data.ufs and
// index.ufs.  Publish() runs the steps in order; each step is also a
// method, so tests can stop between them as a crash would.
//
// What each step leaves (the previous pack is P, the new one N):
//
//   LinkPrevious    P, plus .data.ufs.prev (a second name of P's data)
//   RenameData      N's data.ufs, P's index.ufs: a pair readers refuse by
//                   pack id, and pair P's index with .data.ufs.prev instead
//                   (P).  On failure .data.ufs.prev is removed: P.
//   RenameIndex     N.  On failure .data.ufs.prev is renamed back over
//                   data.ufs (P) and the error says "(the previous pack is
//                   kept)"; if that rename fails too, the directory stays
//                   as after a crash between the renames and the error
//                   says "(the previous pack is lost: ...)".
//   RemovePrevious  N without .data.ufs.prev.
//   SyncDir         N, durable.
//
// Where the file system has no hard links, LinkPrevious links nothing and
// a crash between the renames leaves a pair that readers refuse.
//
// REQUIRES: `dir_fd` is the directory `dir`, locked (step 1); the
// temporaries are complete, fsynced and closed (steps 4-7).
class Publisher {
 public:
  Publisher(int dir_fd, std::string dir, std::string data_tmp,
            std::string index_tmp);
  Publisher(const Publisher&) = delete;
  Publisher& operator=(const Publisher&) = delete;

  // All the steps below in order, stopping at the first error.  On
  // success the new pack is in place and durable.
  Status Publish();

  // Step 8, one call each, in this order.
  void LinkPrevious();
  Status RenameData();
  Status RenameIndex();
  void RemovePrevious();
  // Step 9.  "<dir>: fsync: <strerror>"; the new pack is in place even
  // then, but its renames may not survive a power cut.
  Status SyncDir();

  // The temporaries not renamed yet ("" once renamed), for the caller to
  // remove after a failure.
  const std::string& data_tmp() const { return data_tmp_; }
  const std::string& index_tmp() const { return index_tmp_; }

 private:
  const int dir_fd_;
  const std::string dir_;
  std::string data_tmp_;
  std::string index_tmp_;
  const std::string data_final_;
  const std::string index_final_;
  const std::string prev_;
  bool have_prev_ = false;
};

}  // namespace internal
}  // namespace ufspack

#endif  // UFSPACK_PACKER_SRC_PUBLISH_H_
