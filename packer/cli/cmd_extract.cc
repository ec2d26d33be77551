// Copyright 2026 The ufspack Authors.
//
// `ufspack extract`: writes every record of a pack back to a file.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "commands.h"
#include "record_read_ahead.h"
#include "ufspack/posix_io.h"
#include "ufspack/reader.h"
#include "util.h"

namespace ufspack {
namespace cli {

const char kExtractHelp[] =
    R"(Usage: ufspack extract <pack> <dir> [-j <n>] [--force]

<pack> is a pack directory, its index.ufs, or a pack URL: s3://bucket/prefix
(AWS settings from the environment and ~/.aws) or https://host/path
(docs/remote.md).

Writes every record back to <dir>/<name>, creating directories as needed.
<dir> is created if missing.  Refuses, before writing anything, names that
are absolute or contain '..', '.' or empty components.  Never writes
through a symbolic link, and never overwrites an existing file unless
--force is given.  Records are read on <n> threads; files are written in
record order, so what is written and reported does not depend on <n>.

Exit status: 0 extracted, 1 failed (an unsafe name, an existing file, an
I/O error), 3 the pack is damaged, 130 interrupted (no file is left
partly written).

Example:
  ufspack extract /nas/imagenet/train.ufspack restored/ -j16

Options:
  -f, --force         replace existing files (a symlink in the way is
                      replaced, never followed)
  -j, --threads <n>   records read concurrently (default 8, 32 for an
                      s3:// or https:// pack; 1-256)
      --cache <dir>   read through the node-local cache <dir> (see
                      'ufspack warmup'); cached records come from it; a
                      cache that cannot be used is reported once and skipped
  -q, --quiet         no progress and no summary
      --no-progress   no progress display
)";

namespace {

// Keeps the directory of the previous file open: pack order groups files
// by directory, so most records reuse it.
class DirCache {
 public:
  explicit DirCache(int root_fd) : root_fd_(root_fd) {}
  ~DirCache() {
    if (fd_ >= 0 && fd_ != root_fd_) ::close(fd_);
  }
  // Opens (creating as needed) the directory `dir` (relative, may be "")
  // without following symlinks.
  Status Get(const std::string& dir, const std::string& shown_root, int* out) {
    if (fd_ >= 0 && dir == path_) {
      *out = fd_;
      return Status::OK();
    }
    if (fd_ >= 0 && fd_ != root_fd_) ::close(fd_);
    fd_ = -1;
    int cur = root_fd_;
    size_t start = 0;
    std::string so_far;
    while (start < dir.size()) {
      size_t slash = dir.find('/', start);
      if (slash == std::string::npos) slash = dir.size();
      std::string comp = dir.substr(start, slash - start);
      so_far += (so_far.empty() ? "" : "/") + comp;
      if (::mkdirat(cur, comp.c_str(), 0777) != 0 && errno != EEXIST) {
        Status s =
            Status::FromErrno(shown_root + "/" + so_far + ": mkdir", errno);
        if (cur != root_fd_) ::close(cur);
        return s;
      }
      int next = ::openat(cur, comp.c_str(),
                          O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      int e = errno;
      if (cur != root_fd_) ::close(cur);
      if (next < 0) {
        if (e == ELOOP || e == ENOTDIR) {
          return Status::InvalidArgument(shown_root + "/" + so_far +
                                         ": is a symlink or not a directory; "
                                         "refusing to write through it");
        }
        return Status::FromErrno(shown_root + "/" + so_far, e);
      }
      cur = next;
      start = slash + 1;
    }
    fd_ = cur;
    path_ = dir;
    *out = cur;
    return Status::OK();
  }

 private:
  const int root_fd_;
  int fd_ = -1;
  std::string path_;
};

// Checks every name before anything is written.  A repeated name or a
// lookup table that does not find a record is a damaged index (exit status
// 3, as verify says); an unsafe name in an intact index is refused (status
// 1).  Returns the exit status, or -1 when every name is safe.
int CheckNames(const Reader& reader) {
  std::vector<std::string> refused;
  bool corrupt = false;
  for (uint64_t i = 0; i < reader.size(); ++i) {
    Record r;
    Status s = reader.GetRecord(i, &r);
    if (!s.ok()) {
      PrintError(s);
      return ExitCodeFor(s);
    }
    std::string why = internal::UnsafeRelativePath(r.name);
    if (why.empty()) {
      // Names are unique in a valid pack; a damaged or crafted one may
      // repeat a name, and its second record would replace (--force) or
      // collide with the file just written for the first.  The lookup
      // table maps each name to one record, so every record must be the
      // one its own name finds.
      uint64_t found = 0;
      Status fs = reader.Find(r.name, &found);
      if (fs.ok() && found != i) {
        why = "corrupt index: same name as record " + std::to_string(found);
        corrupt = true;
      } else if (!fs.ok() && !fs.IsNotFound()) {
        PrintError(fs);
        return ExitCodeFor(fs);
      } else if (!fs.ok()) {
        why = "corrupt index: the name lookup table does not find it";
        corrupt = true;
      }
    } else {
      why = "unsafe name: " + why;
    }
    if (!why.empty()) {
      refused.push_back("record " + std::to_string(i) + " '" +
                        Printable(r.name) + "': " + why);
    }
  }
  if (refused.empty()) return -1;
  for (size_t k = 0; k < refused.size() && k < 20; ++k) {
    std::fprintf(stderr, "ufspack: error: refusing %s\n", refused[k].c_str());
  }
  if (refused.size() > 20) {
    std::fprintf(stderr, "ufspack: error: ... and %zu more refused names\n",
                 refused.size() - 20);
  }
  std::fprintf(stderr, "ufspack: nothing extracted%s\n",
               corrupt ? " (the index is damaged: 'ufspack verify' lists "
                         "every problem)"
                       : "");
  return corrupt ? kExitCorrupt : kExitFailure;
}

// mkdir -p `dest`, then opens it.
Status OpenDestination(const std::string& dest, int* root_fd) {
  size_t start = 0;
  while (start <= dest.size()) {
    size_t slash = dest.find('/', start);
    if (slash == std::string::npos) slash = dest.size();
    const std::string partial = dest.substr(0, slash);
    if (!partial.empty() && ::mkdir(partial.c_str(), 0777) != 0 &&
        errno != EEXIST) {
      return Status::FromErrno(partial + ": mkdir", errno);
    }
    start = slash + 1;
  }
  *root_fd = ::open(dest.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (*root_fd < 0) return Status::FromErrno(dest, errno);
  return Status::OK();
}

// Without --force nothing is overwritten: existing entries are found (and
// named) before anything is written.  False if any.
bool NothingThere(const Reader& reader, int root_fd, const std::string& dest) {
  std::vector<std::string> existing;
  uint64_t existing_count = 0;
  for (uint64_t i = 0; i < reader.size(); ++i) {
    Record r;
    (void)reader.GetRecord(i, &r);
    std::string name(r.name);
    struct stat st;
    if (::fstatat(root_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      if (existing.size() < 10) existing.push_back(name);
      ++existing_count;
    }
  }
  if (existing_count == 0) return true;
  for (const std::string& e : existing) {
    std::fprintf(stderr, "ufspack: error: %s/%s: exists\n",
                 Printable(dest).c_str(), Printable(e).c_str());
  }
  if (existing_count > existing.size()) {
    std::fprintf(stderr, "ufspack: error: ... and %s more existing files\n",
                 FormatCount(existing_count - existing.size()).c_str());
  }
  std::fprintf(stderr,
               "ufspack: nothing extracted (use --force to replace existing "
               "files)\n");
  return false;
}

// Creates file `base` in directory `dfd` (shown as `shown`); with `force`
// an existing entry is replaced (a symlink removed, never followed; a
// directory refused).
Status CreateOutput(int dfd, const std::string& base, const std::string& shown,
                    bool force, int* fd) {
  const int kFlags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  *fd = ::openat(dfd, base.c_str(), kFlags, 0666);
  if (*fd < 0 && errno == EEXIST && force) {
    struct stat st;
    if (::fstatat(dfd, base.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISDIR(st.st_mode)) {
      return Status::InvalidArgument(shown +
                                     ": is a directory; not replacing it");
    }
    if (::unlinkat(dfd, base.c_str(), 0) != 0) {
      return Status::FromErrno(shown + ": cannot replace", errno);
    }
    *fd = ::openat(dfd, base.c_str(), kFlags, 0666);
  }
  if (*fd < 0) {
    return errno == EEXIST ? Status::InvalidArgument(
                                 shown + ": exists (use --force to replace)")
                           : Status::FromErrno(shown, errno);
  }
  return Status::OK();
}

// The extraction proper: records are read ahead on `threads` threads and
// held in memory (up to `held_cap` bytes each; larger ones are read here,
// as with -j1); this thread writes them in record order, so the files
// written, the messages and where an error stops the extraction are those
// of -j1.
class Extraction {
 public:
  Extraction(Reader* reader, int root_fd, const std::string& dest, bool force,
             int threads, Progress* progress)
      : reader_(reader),
        dest_(dest),
        force_(force),
        threads_(threads),
        progress_(progress),
        window_(PrefetchWindow(threads)),
        held_cap_(std::max<size_t>(256 << 10, (64 << 20) / window_)),
        dirs_(root_fd) {}

  Status Run() {
    const uint64_t n = reader_->size();
    RecordReadAhead prefetch(
        n, threads_, window_,
        [this](uint64_t i, Prefetched* out) { Fetch(i, out); });
    for (uint64_t i = 0; i < n; ++i) {
      if (Interrupted()) return Status::Aborted("interrupted");
      Prefetched item = prefetch.Take(i);
      UFSPACK_RETURN_IF_ERROR(Write(i, &item));
    }
    return Status::OK();
  }
  uint64_t files() const { return files_; }
  uint64_t bytes() const { return bytes_; }

 private:
  // Reads record i ahead (on a prefetch thread), or defers it to Write.
  void Fetch(uint64_t i, Prefetched* out) {
    Record r;
    if (threads_ <= 1 || Interrupted() || !reader_->GetRecord(i, &r).ok()) {
      out->deferred = true;
      return;
    }
    if (r.codec == Codec::kZstd) {
      // Decompressed into memory only up to held_cap_: original_length
      // (which a hostile entry may inflate) sizes nothing.
      bool too_big = false;
      out->status = reader_->Stream(r, [&](std::string_view piece) {
        if (out->bytes.size() + piece.size() > held_cap_) {
          too_big = true;
          return Status::Aborted("record larger than the read-ahead cap");
        }
        out->bytes.append(piece.data(), piece.size());
        return Status::OK();
      });
      if (too_big) *out = Prefetched{Status::OK(), std::string(), true};
    } else if (r.original_length > held_cap_) {
      out->deferred = true;
    } else {
      out->bytes.resize(r.original_length);
      out->status = reader_->Read(r, out->bytes.data(), out->bytes.size());
    }
  }

  // Writes record i's file; on error the file is removed.
  Status Write(uint64_t i, Prefetched* item) {
    Record r;
    UFSPACK_RETURN_IF_ERROR(reader_->GetRecord(i, &r));
    const std::string name(r.name);
    const size_t slash = name.find_last_of('/');
    const std::string dir =
        slash == std::string::npos ? "" : name.substr(0, slash);
    const std::string base =
        slash == std::string::npos ? name : name.substr(slash + 1);
    const std::string shown = dest_ + "/" + name;
    int dfd = -1;
    UFSPACK_RETURN_IF_ERROR(dirs_.Get(dir, dest_, &dfd));
    const bool zstd = r.codec == Codec::kZstd;
    if (!zstd && item->deferred) {
      buf_.resize(r.original_length);  // raw: bytes really in data.ufs
      UFSPACK_RETURN_IF_ERROR(reader_->Read(r, buf_.data(), buf_.size()));
    } else if (!zstd) {
      UFSPACK_RETURN_IF_ERROR(item->status);
      buf_.swap(item->bytes);
    }
    int fd = -1;
    UFSPACK_RETURN_IF_ERROR(CreateOutput(dfd, base, shown, force_, &fd));
    Status s;
    // A zstd record is streamed into its file as it is decompressed
    // (original_length sizes nothing).
    if (zstd && item->deferred) {
      s = reader_->Stream(r, [&](std::string_view piece) {
        return WriteFd(fd, piece).WithContext(shown);
      });
    } else if (zstd) {
      // What the stream gave before any error, then the error: as above.
      s = WriteFd(fd, item->bytes).WithContext(shown);
      if (s.ok()) s = item->status;
    } else {
      s = WriteFd(fd, buf_);
    }
    if (::close(fd) != 0 && s.ok()) {
      s = Status::FromErrno(shown + ": close", errno);
    }
    if (!s.ok()) {
      ::unlinkat(dfd, base.c_str(), 0);  // never leave a partial file
      return zstd ? s : s.WithContext(shown);
    }
    ++files_;
    bytes_ += r.original_length;
    progress_->Update("extracting " + FormatCount(files_) + "/" +
                      FormatCount(reader_->size()) + " files  " +
                      FormatBytes(bytes_));
    return Status::OK();
  }

  Reader* const reader_;
  const std::string dest_;
  const bool force_;
  const int threads_;
  Progress* const progress_;
  const size_t window_;
  const size_t held_cap_;
  DirCache dirs_;
  std::string buf_;
  uint64_t files_ = 0, bytes_ = 0;
};

}  // namespace

int CmdExtract(const Argv& argv) {
  CommandLine cl("extract");
  std::string pack, dest, threads_text;
  bool force = false, quiet = false, no_progress = false;
  cl.app().add_option("pack", pack)->required();
  cl.app().add_option("dir", dest)->required();
  CLI::Option* threads_opt = cl.app().add_option("-j,--threads", threads_text);
  cl.app().add_flag("-f,--force", force);
  cl.app().add_flag("-q,--quiet", quiet);
  cl.app().add_flag("--no-progress", no_progress);
  std::string cache_dir;
  CLI::Option* cache_opt = cl.app().add_option("--cache", cache_dir);
  if (int rc = cl.Parse(argv); rc >= 0) return rc;
  ReaderOptions options;
  if (cache_opt->count() > 0) OpenCache(cache_dir, &options);
  int threads = 0;
  if (int rc =
          ThreadsOption("extract", threads_opt, threads_text,
                        ReadThreads::kDefault, ReadThreads::kMax, &threads);
      rc != kExitOk) {
    return rc;
  }
  std::unique_ptr<Reader> reader;
  if (int rc = OpenPack(pack, options, &reader); rc != kExitOk) return rc;
  if (threads_opt->count() == 0 && reader->prefers_batches()) {
    threads = ReadThreads::kDefaultRemote;
  }
  if (int rc = CheckNames(*reader); rc >= 0) return rc;
  int root_fd = -1;
  if (Status ds = OpenDestination(dest, &root_fd); !ds.ok()) {
    PrintError(ds);
    return kExitFailure;
  }
  if (!force && !NothingThere(*reader, root_fd, dest)) {
    ::close(root_fd);
    return kExitFailure;
  }
  InstallSignalHandlers();
  Progress progress(!quiet && !no_progress);
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t files = 0, bytes = 0;
  Status s;
  {
    Extraction extraction(reader.get(), root_fd, dest, force, threads,
                          &progress);
    s = extraction.Run();
    files = extraction.files();
    bytes = extraction.bytes();
  }
  ::close(root_fd);
  progress.Clear();
  if (!s.ok()) {
    PrintError(s);
    std::fprintf(stderr, "ufspack: extracted %s of %s files before stopping\n",
                 FormatCount(files).c_str(),
                 FormatCount(reader->size()).c_str());
    return ExitCodeFor(s);
  }
  if (!quiet) {
    std::printf("extracted %s files (%s) into %s in %s s\n",
                FormatCount(files).c_str(), FormatBytes(bytes).c_str(),
                Printable(dest).c_str(), Fixed(Since(t0), 2).c_str());
  }
  return kExitOk;
}

}  // namespace cli
}  // namespace ufspack
