// Copyright 2026 The ufspack Authors.
#define FUSE_USE_VERSION 35
#include "file_system.h"

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "ufspack/text.h"

namespace ufspack {
namespace mount {
namespace {

// Nothing changes while mounted: the kernel may keep names and attributes
// for as long as it likes.
constexpr double kTimeout = 365.0 * 86400;

FileSystem& Fs(fuse_req_t req) {
  return *static_cast<FileSystem*>(fuse_req_userdata(req));
}

// An open file: its record, read whole at the first read() and kept until
// release(), so that the kernel's chunks of one file cost one request.
// Shared with the reads replying from it: once a reply's bytes reach the
// kernel, the program may close the file and another worker release it
// while fuse_reply_buf has not returned yet.
struct OpenFile {
  std::mutex mu;
  std::shared_ptr<const std::string> bytes;  // guarded by mu; null until read
};

void ReplyEntry(fuse_req_t req, uint64_t ino) {
  fuse_entry_param e;
  std::memset(&e, 0, sizeof(e));
  if (int err = Fs(req).Stat(ino, &e.attr); err != 0) {
    fuse_reply_err(req, err);
    return;
  }
  e.ino = ino;
  e.attr_timeout = kTimeout;
  e.entry_timeout = kTimeout;
  fuse_reply_entry(req, &e);
}

void OpLookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  const uint64_t ino = Fs(req).tree().Lookup(parent, name);
  if (ino != 0) return ReplyEntry(req, ino);
  // A negative entry the kernel may cache as long as the others.
  fuse_entry_param e;
  std::memset(&e, 0, sizeof(e));
  e.entry_timeout = kTimeout;
  fuse_reply_entry(req, &e);
}

void OpForget(fuse_req_t req, fuse_ino_t, uint64_t) { fuse_reply_none(req); }

void OpForgetMulti(fuse_req_t req, size_t, fuse_forget_data*) {
  fuse_reply_none(req);
}

void OpGetattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  struct stat st;
  if (int err = Fs(req).Stat(ino, &st); err != 0) {
    fuse_reply_err(req, err);
    return;
  }
  fuse_reply_attr(req, &st, kTimeout);
}

// One directory entry of a listing: "." (k = 0), ".." (1), child k - 2.
struct DirEntry {
  uint64_t ino;
  std::string_view name;
};

DirEntry EntryAt(const Tree& t, uint64_t dir, uint64_t k) {
  if (k == 0) return {dir, "."};
  if (k == 1) return {t.Parent(dir), ".."};
  const uint64_t child = t.Child(dir, k - 2);
  return {child, t.NameOf(child)};
}

// Adds entry k to buf[0, size) (with its attributes when `plus`); returns
// the bytes it needs (more than `size`: it did not fit) or 0 after
// replying with an error.
size_t AddEntry(fuse_req_t req, uint64_t dir, uint64_t k, bool plus, char* buf,
                size_t size) {
  const Tree& t = Fs(req).tree();
  const DirEntry d = EntryAt(t, dir, k);
  char name[Tree::kMaxComponent + 1];
  std::memcpy(name, d.name.data(), d.name.size());
  name[d.name.size()] = '\0';
  const off_t next = static_cast<off_t>(k + 1);
  if (!plus) {
    struct stat st;
    std::memset(&st, 0, sizeof(st));
    st.st_ino = d.ino;
    st.st_mode = t.IsDir(d.ino) ? S_IFDIR : S_IFREG;
    return fuse_add_direntry(req, buf, size, name, &st, next);
  }
  fuse_entry_param e;
  std::memset(&e, 0, sizeof(e));
  if (k < 2) {  // no lookup count for "." and ".."
    e.attr.st_ino = d.ino;
    e.attr.st_mode = S_IFDIR;
  } else {
    if (int err = Fs(req).Stat(d.ino, &e.attr); err != 0) {
      fuse_reply_err(req, err);
      return 0;
    }
    e.ino = d.ino;
    e.attr_timeout = kTimeout;
    e.entry_timeout = kTimeout;
  }
  return fuse_add_direntry_plus(req, buf, size, name, &e, next);
}

void ReadDir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
             bool plus) {
  const Tree& t = Fs(req).tree();
  if (!t.IsDir(ino)) {
    fuse_reply_err(req, ENOTDIR);
    return;
  }
  std::vector<char> buf(size);
  size_t used = 0;
  const uint64_t n = t.ChildCount(ino) + 2;
  for (uint64_t k = static_cast<uint64_t>(std::max<off_t>(off, 0)); k < n;
       ++k) {
    const size_t need =
        AddEntry(req, ino, k, plus, buf.data() + used, size - used);
    if (need == 0) return;  // replied with an error
    if (need > size - used) break;
    used += need;
  }
  fuse_reply_buf(req, buf.data(), used);
}

void OpReaddir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
               fuse_file_info*) {
  ReadDir(req, ino, size, off, false);
}

void OpReaddirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                   fuse_file_info*) {
  ReadDir(req, ino, size, off, true);
}

void OpOpendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  if (!Fs(req).tree().IsDir(ino)) {
    fuse_reply_err(req, ENOTDIR);
    return;
  }
  if (Fs(req).zero_message_opendirs()) {
    // The kernel then opens directories itself, keeping their listings.
    fuse_reply_err(req, ENOSYS);
    return;
  }
  fi->cache_readdir = 1;  // the kernel keeps the listing
  fi->keep_cache = 1;
  fuse_reply_open(req, fi);
}

void OpOpen(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  if (!Fs(req).tree().IsFile(ino)) {
    fuse_reply_err(req, Fs(req).tree().IsDir(ino) ? EISDIR : ENOENT);
    return;
  }
  if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
    fuse_reply_err(req, EROFS);
    return;
  }
  if (Fs(req).zero_message_opens()) {
    fuse_reply_err(req, ENOSYS);  // no opens from now on (keep_cache)
    return;
  }
  OpenFile* f = new OpenFile;
  fi->fh = reinterpret_cast<uint64_t>(f);
  fi->keep_cache = 1;  // the pack is immutable: cached pages stay valid
  if (fuse_reply_open(req, fi) != 0) delete f;  // interrupted: no release
}

// Sets *bytes to the record of `f`, reading it if not yet read.  Returns 0
// or an errno.  The caller replies only after this returns, from *bytes:
// once the reply is sent, the kernel may release the file (and another
// worker delete `f`) at once.
int LoadOpenFile(fuse_req_t req, fuse_ino_t ino, OpenFile* f,
                 std::shared_ptr<const std::string>* bytes) {
  std::lock_guard<std::mutex> lock(f->mu);
  if (f->bytes == nullptr) {
    // A failure is not kept: the next read tries again (the storage may be
    // back).
    auto b = std::make_shared<std::string>();
    if (int err = Fs(req).ReadRecord(ino, b.get()); err != 0) return err;
    f->bytes = std::move(b);
  }
  *bytes = f->bytes;
  return 0;
}

void ReplyRange(fuse_req_t req, const std::string& b, size_t size, off_t off) {
  const uint64_t start =
      std::min<uint64_t>(static_cast<uint64_t>(off), b.size());
  const size_t n = std::min<uint64_t>(size, b.size() - start);
  fuse_reply_buf(req, b.data() + start, n);
}

// A read without an open file (zero-message opens): a read of the whole
// file is served and forgotten; a file read in pieces is kept in
// RecentRecords for its next pieces, so it too costs one request.
void ReadWithoutOpen(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off) {
  FileSystem& fs = Fs(req);
  uint64_t length = 0;
  int err = fs.tree().IsFile(ino) ? fs.Length(ino, &length) : EIO;
  if (err == 0 && off == 0 && size >= length) {
    std::string b;
    err = fs.ReadRecord(ino, &b);
    if (err == 0) return ReplyRange(req, b, size, off);
  } else if (err == 0) {
    std::shared_ptr<const std::string> b;
    err = fs.recent().Get(
        ino, [&](std::string* out) { return fs.ReadRecord(ino, out); }, &b);
    if (err == 0) return ReplyRange(req, *b, size, off);
  }
  fuse_reply_err(req, err);
}

void OpRead(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
            fuse_file_info* fi) {
  if (fi->fh == 0) return ReadWithoutOpen(req, ino, size, off);
  OpenFile* f = reinterpret_cast<OpenFile*>(fi->fh);
  std::shared_ptr<const std::string> bytes;
  if (int err = LoadOpenFile(req, ino, f, &bytes); err != 0) {
    fuse_reply_err(req, err);
    return;
  }
  ReplyRange(req, *bytes, size, off);
}

void OpRelease(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  delete reinterpret_cast<OpenFile*>(fi->fh);  // null: nothing
  fuse_reply_err(req, 0);
}

void OpStatfs(fuse_req_t req, fuse_ino_t) {
  const FileSystem& fs = Fs(req);
  struct statvfs sv;
  std::memset(&sv, 0, sizeof(sv));
  sv.f_bsize = 4096;
  sv.f_frsize = 4096;
  sv.f_blocks = (fs.reader().info().data_size + 4095) / 4096;
  sv.f_files = fs.tree().dir_count() + fs.tree().file_count();
  sv.f_namemax = Tree::kMaxComponent;
  fuse_reply_statfs(req, &sv);
}

// Everything that would change the tree: a read-only file system ("ro"
// makes the kernel refuse most of these before they get here).
void ReplyRofs(fuse_req_t req) { fuse_reply_err(req, EROFS); }

void SetReadOnlyOps(fuse_lowlevel_ops* ops) {
  ops->setattr = [](fuse_req_t r, fuse_ino_t, struct stat*, int,
                    fuse_file_info*) { ReplyRofs(r); };
  ops->mknod = [](fuse_req_t r, fuse_ino_t, const char*, mode_t, dev_t) {
    ReplyRofs(r);
  };
  ops->mkdir = [](fuse_req_t r, fuse_ino_t, const char*, mode_t) {
    ReplyRofs(r);
  };
  ops->unlink = [](fuse_req_t r, fuse_ino_t, const char*) { ReplyRofs(r); };
  ops->rmdir = [](fuse_req_t r, fuse_ino_t, const char*) { ReplyRofs(r); };
  ops->symlink = [](fuse_req_t r, const char*, fuse_ino_t, const char*) {
    ReplyRofs(r);
  };
  ops->rename = [](fuse_req_t r, fuse_ino_t, const char*, fuse_ino_t,
                   const char*, unsigned) { ReplyRofs(r); };
  ops->link = [](fuse_req_t r, fuse_ino_t, fuse_ino_t, const char*) {
    ReplyRofs(r);
  };
  ops->create = [](fuse_req_t r, fuse_ino_t, const char*, mode_t,
                   fuse_file_info*) { ReplyRofs(r); };
  ops->write = [](fuse_req_t r, fuse_ino_t, const char*, size_t, off_t,
                  fuse_file_info*) { ReplyRofs(r); };
  ops->setxattr = [](fuse_req_t r, fuse_ino_t, const char*, const char*, size_t,
                     int) { ReplyRofs(r); };
  ops->removexattr = [](fuse_req_t r, fuse_ino_t, const char*) {
    ReplyRofs(r);
  };
  ops->fallocate = [](fuse_req_t r, fuse_ino_t, int, off_t, off_t,
                      fuse_file_info*) { ReplyRofs(r); };
}

// No readdirplus: with it the kernel makes an inode for every name listed,
// which made `find` over 1M names 2-3x slower (5.3-6.7 s against 2.1-3.1
// s); a program that stats each file (`ls -l`) pays a lookup per file
// instead.  See docs/design.md, "The mount".
void OpInit(void* userdata, fuse_conn_info* conn) {
  conn->want &= ~(FUSE_CAP_READDIRPLUS | FUSE_CAP_READDIRPLUS_AUTO);
  FileSystem* fs = static_cast<FileSystem*>(userdata);
  const bool allow = fs->allow_zero_message_opens();
  fs->set_zero_message_opens(
      allow && (conn->capable & FUSE_CAP_NO_OPEN_SUPPORT) != 0,
      allow && (conn->capable & FUSE_CAP_NO_OPENDIR_SUPPORT) != 0);
}

fuse_lowlevel_ops MakeOps() {
  fuse_lowlevel_ops ops;
  std::memset(&ops, 0, sizeof(ops));
  ops.init = OpInit;
  ops.lookup = OpLookup;
  ops.forget = OpForget;
  ops.forget_multi = OpForgetMulti;
  ops.getattr = OpGetattr;
  ops.opendir = OpOpendir;
  ops.readdir = OpReaddir;
  ops.readdirplus = OpReaddirplus;
  ops.open = OpOpen;
  ops.read = OpRead;
  ops.release = OpRelease;
  ops.statfs = OpStatfs;
  SetReadOnlyOps(&ops);
  return ops;
}

}  // namespace

FileSystem::FileSystem(const Reader* reader, const Tree* tree, int64_t mtime,
                       bool allow_zero_message_opens, uint64_t read_ahead_bytes,
                       std::function<void(const std::string&)> log)
    : reader_(reader),
      tree_(tree),
      mtime_(mtime),
      uid_(getuid()),
      gid_(getgid()),
      allow_zero_message_opens_(allow_zero_message_opens),
      log_(std::move(log), std::chrono::seconds(kQuietSeconds)),
      sequential_reads_(reader,
                        reader->prefers_batches() ? read_ahead_bytes : 0),
      // Reader::WillNeed does nothing for a remote pack (windows above
      // instead) or through a cache (its hits need no data file).
      page_cache_read_ahead_(
          reader, reader->prefers_batches() ||
                          reader->options().cache != nullptr ||
                          read_ahead_bytes < SequentialReads::kFirstWindowBytes
                      ? 0
                      : read_ahead_bytes) {}

const fuse_lowlevel_ops* FileSystem::Ops() {
  static const fuse_lowlevel_ops ops = MakeOps();
  return &ops;
}

int FileSystem::Stat(uint64_t ino, struct stat* st) const {
  std::memset(st, 0, sizeof(*st));
  st->st_ino = ino;
  st->st_uid = uid_;
  st->st_gid = gid_;
  st->st_atime = st->st_mtime = st->st_ctime = static_cast<time_t>(mtime_);
  st->st_blksize = 4096;
  if (tree_->IsDir(ino)) {
    st->st_mode = S_IFDIR | 0555;
    st->st_nlink = 2 + tree_->SubdirCount(ino);
    return 0;
  }
  if (!tree_->IsFile(ino)) return ENOENT;
  uint64_t length = 0;
  if (int err = Length(ino, &length); err != 0) return err;
  st->st_mode = S_IFREG | 0444;
  st->st_nlink = 1;
  st->st_size = static_cast<off_t>(length);
  st->st_blocks = static_cast<blkcnt_t>((length + 511) / 512);
  return 0;
}

int FileSystem::Length(uint64_t ino, uint64_t* length) const {
  Record r;
  Status s = reader_->GetRecord(tree_->RecordOf(ino), &r);
  if (!s.ok()) {
    stats_.stat_errors.fetch_add(1, std::memory_order_relaxed);
    log_.Report(tree_->RecordOf(ino), "EIO: record " +
                                          std::to_string(tree_->RecordOf(ino)) +
                                          ": " + EscapeBytes(s.message()));
    return EIO;
  }
  *length = r.original_length;
  return 0;
}

int FileSystem::ReadRecord(uint64_t ino, std::string* out) const {
  const uint64_t i = tree_->RecordOf(ino);
  stats_.record_reads.fetch_add(1, std::memory_order_relaxed);
  Record r;
  Status s = reader_->GetRecord(i, &r);
  if (s.ok()) page_cache_read_ahead_.Read(r);
  if (s.ok()) s = sequential_reads_.Read(r, out);
  if (s.ok()) return 0;
  stats_.read_errors.fetch_add(1, std::memory_order_relaxed);
  // The reader's own errors (a checksum mismatch) name the file, record
  // and offset already; others (storage unreachable) get them here.
  const std::string message = EscapeBytes(s.message());
  std::string where = "record " + std::to_string(i) + " '" +
                      EscapeBytes(tree_->PathOf(ino)) + "'";
  if (message.find(where) != std::string::npos) {
    log_.Report(i, "EIO: " + message);
  } else {
    if (reader_->info().part_count > 0)
      where += " (part " + std::to_string(r.part) + ")";
    log_.Report(i, "EIO: " + where + " at offset " + std::to_string(r.offset) +
                       "+" + std::to_string(r.stored_length) + ": " + message);
  }
  out->clear();
  return EIO;
}

}  // namespace mount
}  // namespace ufspack
