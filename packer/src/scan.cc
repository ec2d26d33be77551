// Copyright 2026 The ufspack Authors.
#include "ufspack/scan.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "scan_entries.h"
#include "scan_order.h"
#include "ufspack/posix_io.h"

namespace ufspack {
namespace {

// Decodes one code point at s[*i] the way Python's UTF-8 codec with the
// surrogateescape handler does: a valid sequence yields its code point; any
// other byte >= 0x80 yields U+DC00 + byte and advances by one.
uint32_t NextCodePoint(const unsigned char* s, size_t n, size_t* i) {
  const unsigned char c = s[*i];
  if (c < 0x80) {
    *i += 1;
    return c;
  }
  size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  uint32_t cp = 0;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    cp = c & 0x0F;
    if (c == 0xE0) lo = 0xA0;  // no overlongs
    if (c == 0xED) hi = 0x9F;  // no UTF-16 surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    cp = c & 0x07;
    if (c == 0xF0) lo = 0x90;  // no overlongs
    if (c == 0xF4) hi = 0x8F;  // <= U+10FFFF
  }
  if (len != 0 && *i + len <= n) {
    bool ok = s[*i + 1] >= lo && s[*i + 1] <= hi;
    for (size_t k = 2; ok && k < len; ++k) {
      ok = s[*i + k] >= 0x80 && s[*i + k] <= 0xBF;
    }
    if (ok) {
      for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (s[*i + k] & 0x3F);
      *i += len;
      return cp;
    }
  }
  *i += 1;
  return 0xDC00u + c;
}

constexpr uint32_t kFlatLabel = 0xFFFFFFFFu;  // kNoLabel (ufspack/types.h)

struct DirListing {
  std::string rel;  // "" for the walk's top, else "/a/b" below it
  std::vector<std::string> files;
};

struct Walker {
  const ScanOptions& options;
  ScanResult* result;
  std::vector<std::pair<dev_t, ino_t>> ancestors;

  // Lists the directory `path` (`rel` below the walk's top) into *listing
  // (its files) and *subdirs (its directories, following symlinks), and
  // sets *id to its device and inode.  Sets *listed to false, with a
  // warning, for a directory not to descend into: the output directory, a
  // symlink loop (one of `ancestors`), or under skip_unreadable one that
  // cannot be read.
  Status List(const std::string& path, const std::string& rel,
              DirListing* listing, std::vector<std::string>* subdirs,
              std::pair<dev_t, ino_t>* id, bool* listed) {
    *listed = false;
    if (options.cancel != nullptr &&
        options.cancel->load(std::memory_order_relaxed)) {
      return Status::Aborted("interrupted");
    }
    int fd = internal::OpenAnyLength(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return Unreadable(path, errno);
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      int e = errno;
      ::close(fd);
      return Unreadable(path, e);
    }
    if (!rel.empty() && options.exclude_ino != 0 &&
        st.st_dev == options.exclude_dev && st.st_ino == options.exclude_ino) {
      ::close(fd);
      result->warnings.push_back(path +
                                 ": the output directory lies inside the "
                                 "source tree; not packing it");
      return Status::OK();
    }
    for (const auto& a : ancestors) {
      if (a.first == st.st_dev && a.second == st.st_ino) {
        ::close(fd);
        result->warnings.push_back(path +
                                   ": symlink loop (leads back to an "
                                   "ancestor directory); not followed");
        result->skipped++;
        return Status::OK();
      }
    }
    DIR* dir = ::fdopendir(fd);
    if (dir == nullptr) {
      int e = errno;
      ::close(fd);
      return Unreadable(path, e);
    }
    listing->rel = rel;
    errno = 0;
    while (struct dirent* ent = ::readdir(dir)) {
      const char* n = ent->d_name;
      if (n[0] == '.' && (n[1] == 0 || (n[1] == '.' && n[2] == 0))) continue;
      bool is_dir = false;
      if (ent->d_type == DT_DIR) {
        is_dir = true;
      } else if (ent->d_type == DT_LNK || ent->d_type == DT_UNKNOWN) {
        // os.walk(followlinks=True): entry.is_dir() follows symlinks; a
        // dangling link is a file.
        struct stat est;
        is_dir =
            ::fstatat(::dirfd(dir), n, &est, 0) == 0 && S_ISDIR(est.st_mode);
      }
      if (is_dir) {
        subdirs->emplace_back(n);
      } else {
        listing->files.emplace_back(n);
      }
      errno = 0;
    }
    int read_errno = errno;
    ::closedir(dir);
    if (read_errno != 0) return Unreadable(path, read_errno);
    *id = {st.st_dev, st.st_ino};
    *listed = true;
    return Status::OK();
  }

  // Lists `path` and everything below it, appending one DirListing per
  // directory, in walk order.
  Status Walk(const std::string& path, const std::string& rel,
              std::vector<DirListing>* out) {
    DirListing listing;
    std::vector<std::string> subdirs;
    std::pair<dev_t, ino_t> id;
    bool listed = false;
    UFSPACK_RETURN_IF_ERROR(List(path, rel, &listing, &subdirs, &id, &listed));
    if (!listed) return Status::OK();
    out->push_back(std::move(listing));
    ancestors.push_back(id);
    for (const std::string& d : subdirs) {
      Status s = Walk(path + "/" + d, rel + "/" + d, out);
      if (!s.ok()) {
        ancestors.pop_back();
        return s;
      }
    }
    ancestors.pop_back();
    return Status::OK();
  }

  Status Unreadable(const std::string& path, int errnum) {
    Status s = Status::FromErrno(path + ": cannot read directory", errnum);
    if (options.skip_unreadable) {
      result->warnings.push_back(std::string(s.message()) + "; skipped");
      result->skipped++;
      return Status::OK();
    }
    return Status::IOError(s.message());
  }
};

std::string ExtensionList(const std::vector<std::string>& exts) {
  std::string s;
  for (const auto& e : exts) {
    if (!s.empty()) s += ", ";
    s += e;
  }
  return s;
}

}  // namespace

const std::vector<std::string>& DefaultImageExtensions() {
  static const std::vector<std::string> kExtensions = {
      ".jpg", ".jpeg", ".png",  ".ppm", ".bmp",
      ".pgm", ".tif",  ".tiff", ".webp"};
  return kExtensions;
}

std::vector<std::string> NormalizeExtensions(std::vector<std::string> exts) {
  for (std::string& e : exts) {
    for (char& c : e) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    if (e.empty() || e[0] != '.') e.insert(e.begin(), '.');
  }
  return exts;
}

bool PyFsLess(std::string_view a, std::string_view b) {
  const auto* pa = reinterpret_cast<const unsigned char*>(a.data());
  const auto* pb = reinterpret_cast<const unsigned char*>(b.data());
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    // Fast path: equal ASCII bytes.
    if (pa[i] < 0x80 && pb[j] < 0x80) {
      if (pa[i] != pb[j]) return pa[i] < pb[j];
      ++i;
      ++j;
      continue;
    }
    uint32_t ca = NextCodePoint(pa, a.size(), &i);
    uint32_t cb = NextCodePoint(pb, b.size(), &j);
    if (ca != cb) return ca < cb;
  }
  return i == a.size() && j < b.size();
}

bool ImageFolderLess(std::string_view a, std::string_view b) {
  const size_t sa = a.rfind('/'), sb = b.rfind('/');
  const std::string_view da =
      sa == std::string_view::npos ? "" : a.substr(0, sa);
  const std::string_view db =
      sb == std::string_view::npos ? "" : b.substr(0, sb);
  if (da != db) return PyFsLess(da, db);
  return PyFsLess(a.substr(sa == std::string_view::npos ? 0 : sa + 1),
                  b.substr(sb == std::string_view::npos ? 0 : sb + 1));
}

bool HasAllowedExtension(std::string_view name,
                         const std::vector<std::string>& extensions) {
  for (const std::string& ext : extensions) {
    if (ext.size() > name.size()) continue;
    std::string_view tail = name.substr(name.size() - ext.size());
    bool match = true;
    for (size_t k = 0; k < ext.size() && match; ++k) {
      char c = tail[k];
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      match = c == ext[k];
    }
    if (match) return true;
  }
  return false;
}

Status EmptyClassesError(const std::string& root,
                         const std::vector<std::string>& empty,
                         const ScanOptions& options) {
  std::string names;
  for (const auto& c : empty) {
    if (!names.empty()) names += ", ";
    names += "'" + c + "'";
  }
  return Status::InvalidArgument(
      root + ": found no valid file for the class" +
      (empty.size() > 1 ? "es " : " ") + names +
      (options.all_files
           ? std::string()
           : " (supported extensions: " +
                 ExtensionList(NormalizeExtensions(options.extensions)) + ")") +
      "; use --allow-empty to keep empty classes");
}

namespace {

bool Accepted(const ScanOptions& options, const std::string& fname) {
  return options.all_files || HasAllowedExtension(fname, options.extensions);
}

// Appends the accepted files of `listings` (directories below `prefix`) to
// *out with `label`, in ImageFolder's order: directories by relative path,
// files by name.  Each listing's names are freed as soon as emitted.
void Emit(const ScanOptions& options, std::vector<DirListing>* listings,
          const std::string& prefix, std::vector<ScanEntry>* out,
          uint32_t label) {
  std::sort(listings->begin(), listings->end(),
            [](const DirListing& x, const DirListing& y) {
              return PyFsLess(x.rel, y.rel);
            });
  for (DirListing& d : *listings) {
    std::sort(d.files.begin(), d.files.end(), PyFsLess);
    for (const std::string& f : d.files) {
      if (!Accepted(options, f)) continue;
      std::string name = prefix + d.rel;
      if (!name.empty() && name[0] == '/') name.erase(0, 1);
      if (!name.empty()) name += '/';
      name += f;
      out->push_back(ScanEntry{std::move(name), label});
    }
    d.files = std::vector<std::string>();
  }
}

// A flat tree: sorted(os.walk(root)) without holding the tree.  The
// directory listed next is the smallest pending path (every directory not
// found yet lies below a pending one, and a path sorts after its prefixes),
// and its files are handed over at once.  What is held is the frontier of
// directories found and not yet listed.
Status ScanFlat(const std::string& root, Walker* walker,
                const std::function<Status(ScanClass*)>& sink) {
  struct Pending {
    std::string rel;
    std::vector<std::pair<dev_t, ino_t>> ancestors;
  };
  auto later = [](const Pending& a, const Pending& b) {
    return PyFsLess(b.rel, a.rel);
  };
  std::vector<Pending> pending(1);  // a heap: the smallest path first
  while (!pending.empty()) {
    std::pop_heap(pending.begin(), pending.end(), later);
    Pending p = std::move(pending.back());
    pending.pop_back();
    walker->ancestors = std::move(p.ancestors);
    std::vector<DirListing> listing(1);
    std::vector<std::string> subdirs;
    std::pair<dev_t, ino_t> id;
    bool listed = false;
    UFSPACK_RETURN_IF_ERROR(
        walker->List(root + p.rel, p.rel, &listing[0], &subdirs, &id, &listed));
    if (!listed) continue;
    walker->ancestors.push_back(id);
    for (const std::string& d : subdirs) {
      pending.push_back(Pending{p.rel + "/" + d, walker->ancestors});
      std::push_heap(pending.begin(), pending.end(), later);
    }
    ScanClass files;
    files.label = kFlatLabel;
    Emit(walker->options, &listing, "", &files.entries, kFlatLabel);
    if (!files.entries.empty()) UFSPACK_RETURN_IF_ERROR(sink(&files));
  }
  return Status::OK();
}

// The classes: directories (following symlinks) directly under the root,
// sorted, into result->classes.
Status ListClasses(const std::string& root, const ScanOptions& options,
                   ScanResult* result) {
  DIR* dir = ::opendir(root.c_str());
  if (dir == nullptr)
    return Status::FromErrno(root + ": cannot read directory", errno);
  std::vector<std::string> classes;
  errno = 0;
  while (struct dirent* ent = ::readdir(dir)) {
    const char* n = ent->d_name;
    if (n[0] == '.' && (n[1] == 0 || (n[1] == '.' && n[2] == 0))) continue;
    bool is_dir = ent->d_type == DT_DIR;
    if (ent->d_type == DT_LNK || ent->d_type == DT_UNKNOWN) {
      struct stat est;
      is_dir = ::fstatat(::dirfd(dir), n, &est, 0) == 0 && S_ISDIR(est.st_mode);
    }
    if (is_dir && options.exclude_ino != 0 &&
        (ent->d_ino == options.exclude_ino || ent->d_type != DT_DIR)) {
      struct stat est;
      if (::fstatat(::dirfd(dir), n, &est, 0) == 0 &&
          est.st_dev == options.exclude_dev &&
          est.st_ino == options.exclude_ino) {
        result->warnings.push_back(root + "/" + n +
                                   ": the output directory lies inside the "
                                   "source tree; not packing it");
        is_dir = false;
      }
    }
    if (is_dir) classes.emplace_back(n);
    errno = 0;
  }
  int read_errno = errno;
  ::closedir(dir);
  if (read_errno != 0) {
    return Status::FromErrno(root + ": cannot read directory", read_errno);
  }
  std::sort(classes.begin(), classes.end(), PyFsLess);
  if (classes.empty()) {
    return Status::InvalidArgument(
        root +
        ": no class directories found (an ImageFolder tree is "
        "root/<class>/<file>; use --flat for a tree without classes)");
  }
  if (classes.size() >= 0xFFFFFFFFu) {
    return Status::InvalidArgument(root + ": too many classes");
  }
  result->classes = std::move(classes);
  return Status::OK();
}

// Walks the classes `todo` (labels) and hands them to the sink in class
// order on the calling thread.  The classes are walked concurrently (on a
// network file system every directory read is a round trip), each into a
// result of its own, so the output does not depend on the thread count.  A
// sliding window: class i is walked only once class i - window was handed
// over, and one slow class holds up the others only when the window is full
// behind it.  Under options.max_held_files, a class is started only while
// the samples walked and not handed over, plus the largest class seen so
// far for each class being walked and this one, stay within it (the first
// class is walked alone; the next class to hand over always starts).
class ClassWalk {
 public:
  ClassWalk(const std::string& root, const ScanOptions& options,
            const std::vector<std::pair<dev_t, ino_t>>& ancestors,
            std::vector<uint32_t> todo,
            const std::function<Status(ScanClass*)>& sink, ScanResult* result)
      : root_(root),
        options_(options),
        ancestors_(ancestors),
        todo_(std::move(todo)),
        sink_(sink),
        result_(result),
        window_(std::min<size_t>(
            todo_.size(), static_cast<size_t>(std::max(1, options.threads)))),
        budget_(options.max_held_files) {}

  Status Run() {
    if (window_ <= 1) return RunAlone();
    slots_.resize(window_);
    // Fewer workers than asked for if threads cannot be started (a process
    // or cgroup limit); none: the calling thread walks alone.
    try {
      for (size_t t = 0; t < window_; ++t) {
        workers_.emplace_back([this] { Work(); });
      }
    } catch (const std::system_error&) {
      if (workers_.empty()) return RunAlone();
    }
    Status status;
    for (size_t i = 0; i < todo_.size() && status.ok(); ++i) {
      ClassScan* cs = &slots_[i % window_];
      {
        std::unique_lock<std::mutex> lock(mu_);
        changed_.wait(lock, [&] { return cs->ready; });
      }
      const uint64_t n = cs->cls.entries.size();
      status = HandOver(cs);
      std::lock_guard<std::mutex> lock(mu_);
      *cs = ClassScan();
      handed_ = i + 1;
      held_ -= n;
      if (!status.ok()) stop_ = true;  // no class started after an error
      changed_.notify_all();
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      changed_.notify_all();
    }
    for (std::thread& t : workers_) t.join();
    return status;
  }

 private:
  struct ClassScan {
    ScanResult part;
    Status status;
    ScanClass cls;
    bool ready = false;
  };

  const std::string& name(uint32_t k) const { return result_->classes[k]; }

  Status RunAlone() {
    for (size_t i = 0; i < todo_.size(); ++i) {
      ClassScan cs;
      Walk(i, &cs);
      UFSPACK_RETURN_IF_ERROR(HandOver(&cs));
    }
    return Status::OK();
  }

  void Walk(size_t i, ClassScan* cs) {
    const uint32_t k = todo_[i];
    Walker w{options_, &cs->part, ancestors_};
    std::vector<DirListing> listings;
    cs->status = w.Walk(root_ + "/" + name(k), "", &listings);
    cs->cls.label = k;
    if (cs->status.ok())
      Emit(options_, &listings, name(k), &cs->cls.entries, k);
  }

  Status HandOver(ClassScan* cs) {
    for (std::string& w : cs->part.warnings) {
      result_->warnings.push_back(std::move(w));
    }
    result_->skipped += cs->part.skipped;
    UFSPACK_RETURN_IF_ERROR(cs->status);
    return sink_(&cs->cls);
  }

  // REQUIRES: mu_ held.
  bool MayStart() const {
    if (next_ >= handed_ + window_) return false;
    if (budget_ == 0 || next_ == handed_) return true;
    return largest_ > 0 && held_ + (walking_ + 1) * largest_ <= budget_;
  }

  void Work() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      changed_.wait(
          lock, [&] { return stop_ || next_ >= todo_.size() || MayStart(); });
      if (stop_ || next_ >= todo_.size()) return;
      const size_t i = next_++;
      ++walking_;
      ClassScan* cs = &slots_[i % window_];
      lock.unlock();
      Walk(i, cs);
      lock.lock();
      --walking_;
      held_ += cs->cls.entries.size();
      largest_ = std::max<uint64_t>(largest_, cs->cls.entries.size());
      cs->ready = true;
      changed_.notify_all();
    }
  }

  const std::string& root_;
  const ScanOptions& options_;
  const std::vector<std::pair<dev_t, ino_t>>& ancestors_;
  const std::vector<uint32_t> todo_;
  const std::function<Status(ScanClass*)>& sink_;
  ScanResult* const result_;
  const size_t window_;
  const uint64_t budget_;
  std::vector<ClassScan> slots_;  // class i in slots_[i % window_]
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable changed_;
  size_t next_ = 0;       // the next class to walk
  size_t handed_ = 0;     // classes handed over
  size_t walking_ = 0;    // classes being walked
  uint64_t held_ = 0;     // samples walked, not handed over
  uint64_t largest_ = 0;  // samples of the largest class walked
  bool stop_ = false;
};

}  // namespace

Status ScanTreeByClass(const std::string& root_in,
                       const ScanOptions& options_in,
                       const std::function<bool(uint32_t)>& want,
                       const std::function<Status(ScanClass*)>& sink,
                       ScanResult* result) {
  ScanOptions options = options_in;
  options.extensions = NormalizeExtensions(options.extensions);
  std::string root = root_in;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  *result = ScanResult();
  result->root = root;

  struct stat st;
  if (::stat(root.c_str(), &st) != 0) return Status::FromErrno(root, errno);
  if (!S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument(root + ": not a directory");
  }
  Walker walker{options, result, {}};
  if (options.flat) {
    if (want && !want(kFlatLabel)) return Status::OK();
    return ScanFlat(root, &walker, sink);
  }
  // In class mode the root itself is an ancestor of every walk: a symlink
  // back to it is a loop.  (In flat mode the walk starts at the root.)
  walker.ancestors.emplace_back(st.st_dev, st.st_ino);
  UFSPACK_RETURN_IF_ERROR(ListClasses(root, options, result));
  std::vector<uint32_t> todo;
  for (size_t k = 0; k < result->classes.size(); ++k) {
    if (!want || want(static_cast<uint32_t>(k))) {
      todo.push_back(static_cast<uint32_t>(k));
    }
  }
  ClassWalk walk(root, options, walker.ancestors, std::move(todo), sink,
                 result);
  return walk.Run();
}

Status ScanTree(const std::string& root, const ScanOptions& options,
                ScanResult* result) {
  std::vector<ScanEntry> entries;
  std::vector<std::string> empty;
  UFSPACK_RETURN_IF_ERROR(ScanTreeByClass(
      root, options, nullptr,
      [&](ScanClass* cls) {
        if (cls->entries.empty() && !options.flat) {
          empty.push_back(result->classes[cls->label]);
        }
        internal::MoveEntries(&cls->entries, &entries);
        return Status::OK();
      },
      result));
  result->entries = std::move(entries);
  if (!empty.empty() && !options.allow_empty) {
    return EmptyClassesError(result->root, empty, options);
  }
  return Status::OK();
}

}  // namespace ufspack
