// Copyright 2026 The ufspack Authors.
//
// A directory of the node-local cache, held open, in which every name is
// reached without following a symbolic link.  The cache directory is
// untrusted input (docs/cache.md, "Trust"): anyone who can write into it
// can plant links, FIFOs and other users' files, so
//   - every name is one path component opened relative to an open
//     directory (openat, O_NOFOLLOW): a link is never followed, only
//     refused (or, when deleted, unlinked itself);
//   - files are opened O_NONBLOCK (a FIFO never blocks the open) and used
//     only when fstat says they are regular files; directories only when
//     they are real directories;
//   - what is used must be owned by root, this process's user or the cache
//     directory's owner, and a file opened for writing must have exactly
//     one link (a planted hard link to another file is refused);
//   - deletions are unlinkat()s relative to an open directory, of entries
//     whose owner passes the same check.
// The root itself may be (or pass through) a link the user chose.
//
// Thread safety: a SafeDir is immutable after Open; its methods may be
// called concurrently.  Not part of the installed API.
#ifndef UFSPACK_CACHE_SAFE_DIR_H_
#define UFSPACK_CACHE_SAFE_DIR_H_

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ufspack/status.h"

namespace ufspack {
namespace cache_internal {

class SafeDir {
 public:
  SafeDir() = default;
  ~SafeDir();
  SafeDir(SafeDir&& other) noexcept;
  SafeDir& operator=(SafeDir&& other) noexcept;
  SafeDir(const SafeDir&) = delete;
  SafeDir& operator=(const SafeDir&) = delete;

  // Opens the cache directory `path` (links in it are followed: the user
  // chose it), creating it and its missing parents (mode 0755 less the
  // umask) when `create`.  Its owner joins root and this process's user as
  // the owners whose entries the cache uses.
  static Status OpenRoot(const std::string& path, bool create, SafeDir* out);

  // Subdirectory `name`: a real directory (a link is refused) of an
  // allowed owner; made first (mode 0755 less the umask) when `create`.
  Status OpenDir(const std::string& name, bool create, SafeDir* out) const;

  // Opens file `name` with `flags` (O_RDONLY/O_RDWR/O_WRONLY, O_CREAT,
  // O_EXCL, O_TRUNC; mode 0644 less the umask): a regular file of an
  // allowed owner, with one link when opened for writing.  The descriptor
  // is blocking and close-on-exec.  Errors name the path and what was
  // found there (a symbolic link, a FIFO, a directory, another user's file,
  // a file with N links).
  // `any_links`: skip the one-link check (the header, whose size, magic
  // and version are checked before anything is written to it).
  Status OpenFile(const std::string& name, int flags, int* fd,
                  struct stat* st = nullptr, bool any_links = false) const;

  // The whole of regular file `name`; Corruption when over `max` bytes.
  Status ReadFile(const std::string& name, size_t max, std::string* out) const;
  // Writes a new file `name` (O_EXCL); removed again on failure.
  Status WriteNewFile(const std::string& name,
                      const std::string& contents) const;

  // fstatat without following a link.
  Status Lstat(const std::string& name, struct stat* st) const;
  // Whether `st` (of an entry here) is owned by an allowed owner.
  bool OwnedByUs(const struct stat& st) const;

  // renameat(2) of `from` here to `to` in `dir` (a link is moved itself).
  Status Rename(const std::string& from, const SafeDir& dir,
                const std::string& to) const;
  // Publishes `from` as `to` only if `to` does not exist: renameat2
  // RENAME_NOREPLACE, or link + unlink where the file system lacks it.
  // `from` is gone afterwards; OK also when `to` existed (another
  // publisher was first).
  Status RenameNoReplace(const std::string& from, const std::string& to) const;
  // Unlinks file (or link) `name` if an allowed owner's.
  Status Unlink(const std::string& name) const;
  // Removes entry `name`: a file or link (unlinked itself, never its
  // target), or a real directory holding only files named in `contents`
  // (the cache's directories are one level deep: a table's key, slots, log
  // and index copy).  Entries of other owners, other names and
  // subdirectories are left, and so then is the directory holding them:
  // a directory moved in from elsewhere is never emptied.  Returns false
  // when something was left.
  bool RemoveTree(const std::string& name,
                  const std::vector<std::string>& contents) const;

  // The names in this directory (not "." and "..").
  std::vector<std::string> List() const;
  // Bytes allocated (st_blocks) to everything below, links not followed.
  uint64_t DiskBytes() const;

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  std::string PathOf(const std::string& name) const {
    return path_ + "/" + name;
  }

 private:
  uint64_t DiskBytesBelow(int dir_fd, int depth) const;

  int fd_ = -1;
  std::string path_;
  uid_t root_owner_ = 0;  // the cache directory's owner
};

}  // namespace cache_internal
}  // namespace ufspack

#endif  // UFSPACK_CACHE_SAFE_DIR_H_
