// Copyright 2026 The ufspack Authors.
//
// Tree: the directory tree of a pack's record names, built once at mount
// time, answering the file system's lookups and listings from memory.
//
// Inode numbers (what FUSE hands back to us):
//   1                               the root directory (FUSE_ROOT_ID)
//   2 .. dir_count()                the other directories
//   file_base() + i                 the file of record i
// so a file's inode gives its record with one subtraction, and nothing per
// record is stored but its name (a view into the index mapping) and one
// slot in its directory's child list: 24 bytes a record.
//
// A directory's children are in byte order of their names (what Lookup()
// searches); the order of the records in the index does not matter, so
// single packs, merged packs (one namespace over their parts) and flat
// packs all build the same way.
//
// Thread safety: immutable after Build(); every const method may be called
// concurrently.  Lifetime: the names given to Build() must outlive the
// Tree (they are the Reader's views into its index).
#ifndef UFSPACK_MOUNT_TREE_H_
#define UFSPACK_MOUNT_TREE_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "ufspack/status.h"

namespace ufspack {
namespace mount {

class Tree {
 public:
  static constexpr uint64_t kRootInode = 1;
  // The longest name component a file system on Linux takes (NAME_MAX).
  static constexpr size_t kMaxComponent = 255;

  // Builds the tree of `names` (names[i]: record i's name, '/'-separated)
  // and of `empty_dirs`, directories shown even with nothing under them (a
  // pack's classes with no records, which ImageFolder lists as classes).
  // InvalidArgument naming the record (or directory) when a name cannot be
  // a path on the host (ValidateName), when two records have one name, or
  // when a name is both a file and a directory ("a" and "a/b").
  // O(n log n) in the number of names (O(n) when they come in the tree's
  // order already).  The directories' names must outlive the Tree too.
  Status Build(std::vector<std::string_view> names,
               const std::vector<std::string_view>& empty_dirs = {});

  uint64_t dir_count() const { return dirs_.size(); }
  uint64_t file_count() const { return names_.size(); }
  uint64_t file_base() const { return dirs_.size() + 1; }

  bool IsDir(uint64_t ino) const { return ino >= 1 && ino <= dirs_.size(); }
  bool IsFile(uint64_t ino) const {
    return ino >= file_base() && ino - file_base() < names_.size();
  }
  // REQUIRES: IsFile(ino).
  uint64_t RecordOf(uint64_t ino) const { return ino - file_base(); }
  uint64_t FileInode(uint64_t record) const { return file_base() + record; }

  // The last component of `ino`'s path ("" for the root).
  // REQUIRES: IsDir(ino) || IsFile(ino).
  std::string_view NameOf(uint64_t ino) const;
  // The full name of a file: its record's name.  REQUIRES: IsFile(ino).
  std::string_view PathOf(uint64_t ino) const { return names_[RecordOf(ino)]; }

  // Directory `dir`'s parent (the root's is the root), its children (in
  // byte order of their names) and how many of them are directories.
  // REQUIRES: IsDir(dir), k < ChildCount(dir).
  uint64_t Parent(uint64_t dir) const { return D(dir).parent; }
  uint64_t ChildCount(uint64_t dir) const { return D(dir).child_count; }
  uint64_t Child(uint64_t dir, uint64_t k) const {
    return children_[D(dir).first_child + k];
  }
  uint64_t SubdirCount(uint64_t dir) const { return D(dir).subdirs; }

  // The inode of `name` in directory `dir`, or 0 if it has none (or `dir`
  // is not a directory).  O(log children).
  uint64_t Lookup(uint64_t dir, std::string_view name) const;

  // OK if `name` can be a relative path on the host: not empty, no leading
  // or trailing '/', no empty, "." or ".." component, no NUL byte, no
  // component longer than kMaxComponent.  InvalidArgument saying which.
  static Status ValidateName(std::string_view name);

 private:
  struct Dir {
    uint64_t parent = kRootInode;
    std::string_view name;
    uint64_t first_child = 0;
    uint64_t child_count = 0;
    uint64_t subdirs = 0;
  };
  class Builder;
  const Dir& D(uint64_t ino) const { return dirs_[ino - 1]; }

  std::vector<Dir> dirs_;                // dirs_[ino - 1]
  std::vector<uint64_t> children_;       // inodes, grouped by directory
  std::vector<std::string_view> names_;  // names_[record]
};

// Orders names as the tree walks them: byte order with '/' below every
// other byte, so that a directory's subtree is one contiguous run and its
// children come in byte order of their names.  <0, 0, >0 as memcmp.
int CompareTreeOrder(std::string_view a, std::string_view b);

}  // namespace mount
}  // namespace ufspack

#endif  // UFSPACK_MOUNT_TREE_H_
