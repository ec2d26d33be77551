// Copyright 2026 The ufspack Authors.
//
// Mount points: whether a directory can take a mount (CheckMountpoint, in
// ufspack/mount.h), which file system is mounted where (/proc/self/
// mountinfo), and taking a ufspack mount down (Unmount).
//
// Thread safety: no state; safe from any thread.
#ifndef UFSPACK_MOUNT_MOUNTPOINT_H_
#define UFSPACK_MOUNT_MOUNTPOINT_H_

#include <string>

#include "ufspack/status.h"

namespace ufspack {
namespace mount {

// The file system type of ufspack mounts in /proc/self/mountinfo.
inline constexpr char kFsType[] = "fuse.ufspack";

// `path` made absolute without resolving its last component (which may be
// a stale mount that cannot be stat'ed): realpath of its directory, then
// the last component.  Trailing '/'s are dropped.
Status AbsoluteMountPath(const std::string& path, std::string* out);

// Sets *fstype to the type of the file system mounted at `abs_path` (as
// AbsoluteMountPath gives it), the last one mounted there.  NotFound when
// nothing is mounted there.
Status MountedFsType(const std::string& abs_path, std::string* fstype);

// The field of a mountinfo line with its octal escapes (\040 for ' ',
// \011, \012, \134) decoded.
std::string UnescapeMountField(const std::string& field);

// The message for a stale mount at `path`: how to clear it.
std::string StaleMountMessage(const std::string& path);

}  // namespace mount
}  // namespace ufspack

#endif  // UFSPACK_MOUNT_MOUNTPOINT_H_
