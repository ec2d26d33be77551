// Copyright 2026 The ufspack Authors.
#include "mountpoint.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "ufspack/mount.h"
#include "ufspack/text.h"

extern char** environ;

namespace ufspack {
namespace mount {
namespace {

std::string Show(const std::string& path) { return EscapeBytes(path); }

// True when directory `path` has an entry besides "." and "..".
Status IsEmptyDir(const std::string& path, bool* empty) {
  DIR* d = opendir(path.c_str());
  if (d == nullptr) return Status::FromErrno(path, errno);
  *empty = true;
  while (dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") {
      *empty = false;
      break;
    }
  }
  closedir(d);
  return Status::OK();
}

// Runs `fusermount3 -u path`; its own message goes to our stderr.
Status RunFusermount(const std::string& path) {
  std::vector<std::string> args = {"fusermount3", "-u", path};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  int rc =
      posix_spawnp(&pid, "fusermount3", nullptr, nullptr, argv.data(), environ);
  if (rc != 0) return Status::FromErrno("fusermount3", rc);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return Status::FromErrno("waitpid", errno);
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::OK();
  return Status::IOError("fusermount3 -u " + Show(path) + " failed");
}

}  // namespace

std::string StaleMountMessage(const std::string& path) {
  return Show(path) +
         ": stale mount (its server is gone): run 'fusermount3 -u " +
         Show(path) + "' (or 'ufspack umount " + Show(path) + "')";
}

Status AbsoluteMountPath(const std::string& path, std::string* out) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  if (p.empty()) return Status::InvalidArgument("empty mount point");
  const size_t slash = p.rfind('/');
  std::string dir = slash == std::string::npos ? "." : p.substr(0, slash);
  if (dir.empty()) dir = "/";
  const std::string base = slash == std::string::npos ? p : p.substr(slash + 1);
  char buf[PATH_MAX];
  if (realpath(dir.c_str(), buf) == nullptr) {
    return Status::FromErrno(dir, errno);
  }
  std::string abs = buf;
  if (base.empty() || base == "/") {  // path was "/"
    *out = "/";
    return Status::OK();
  }
  if (base == "." || base == "..") {
    // Resolvable (a stale mount is never "." of anything we can reach).
    const std::string full = abs + "/" + base;
    if (realpath(full.c_str(), buf) == nullptr) {
      return Status::FromErrno(full, errno);
    }
    *out = buf;
    return Status::OK();
  }
  *out = (abs == "/" ? "" : abs) + "/" + base;
  return Status::OK();
}

std::string UnescapeMountField(const std::string& field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() && field[i + 1] >= '0' &&
        field[i + 1] <= '3') {
      const int v = (field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 +
                    (field[i + 3] - '0');
      out.push_back(static_cast<char>(v));
      i += 3;
    } else {
      out.push_back(field[i]);
    }
  }
  return out;
}

Status MountedFsType(const std::string& abs_path, std::string* fstype) {
  std::ifstream in("/proc/self/mountinfo");
  if (!in) return Status::IOError("/proc/self/mountinfo: cannot be read");
  bool found = false;
  std::string line;
  while (std::getline(in, line)) {
    // id parent major:minor root mount-point options [optional...] - type
    std::istringstream fields(line);
    std::string id, parent, dev, root, point, f;
    fields >> id >> parent >> dev >> root >> point;
    if (UnescapeMountField(point) != abs_path) continue;
    while (fields >> f && f != "-") {
    }
    std::string type;
    fields >> type;
    *fstype = type;  // the last mount there is the visible one
    found = true;
  }
  if (!found) return Status::NotFound(Show(abs_path) + ": not a mount point");
  return Status::OK();
}

}  // namespace mount

Status CheckMountpoint(const std::string& path) {
  // statfs, not stat: the kernel may answer stat of a dead FUSE mount from
  // its attribute cache, while statfs always asks the server.
  struct statfs sfs;
  struct stat st;
  int err = 0;
  if (statfs(path.c_str(), &sfs) != 0) {
    err = errno;
  } else if (stat(path.c_str(), &st) != 0) {
    err = errno;
  }
  if (err != 0) {
    if (err == ENOTCONN) {
      return Status::InvalidArgument(mount::StaleMountMessage(path));
    }
    if (err == ENOENT) {
      return Status::InvalidArgument(mount::Show(path) +
                                     ": no such directory (create it first)");
    }
    return Status::FromErrno(path, err);
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument(mount::Show(path) +
                                   ": not a directory (a mount point must be "
                                   "an empty directory)");
  }
  std::string abs, fstype;
  if (mount::AbsoluteMountPath(path, &abs).ok() &&
      mount::MountedFsType(abs, &fstype).ok() && fstype == mount::kFsType) {
    return Status::InvalidArgument(
        mount::Show(path) +
        ": a ufspack mount is already there ('ufspack "
        "umount " +
        mount::Show(path) + "' takes it down)");
  }
  bool empty = false;
  UFSPACK_RETURN_IF_ERROR(mount::IsEmptyDir(path, &empty));
  if (!empty) {
    return Status::InvalidArgument(mount::Show(path) +
                                   ": not empty (a mount point must be an "
                                   "empty directory)");
  }
  return Status::OK();
}

Status Unmount(const std::string& path) {
  std::string abs, fstype;
  UFSPACK_RETURN_IF_ERROR(mount::AbsoluteMountPath(path, &abs));
  Status s = mount::MountedFsType(abs, &fstype);
  if (s.IsNotFound()) return Status::InvalidArgument(s.message());
  UFSPACK_RETURN_IF_ERROR(s);
  if (fstype != mount::kFsType) {
    return Status::InvalidArgument(mount::Show(path) +
                                   ": not a ufspack mount (a " + fstype +
                                   " file system is mounted there)");
  }
  if (geteuid() != 0) return mount::RunFusermount(abs);
  if (umount2(abs.c_str(), 0) == 0) return Status::OK();
  const int err = errno;
  if (err == EBUSY) {
    return Status::IOError(
        mount::Show(path) +
        ": busy (a process has a file or its working directory there); "
        "'fusermount3 -u -z " +
        mount::Show(path) +
        "' detaches it now and "
        "unmounts it when no longer used");
  }
  return Status::FromErrno("umount " + abs, err);
}

}  // namespace ufspack
