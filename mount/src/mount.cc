// Copyright 2026 The ufspack Authors.
//
// PackMount: the FUSE session of one mount (fuse_session_new, _mount,
// _loop_mt, _unmount), and the signals that end it.
#if defined(UFSPACK_FUSE_LOOP_CONFIG)
#define FUSE_USE_VERSION 312  // fuse_loop_cfg_set_max_threads
#else
#define FUSE_USE_VERSION 35
#endif
#include "ufspack/mount.h"

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "file_system.h"
#include "mountpoint.h"
#include "tree.h"
#include "ufspack/text.h"

extern char** environ;

namespace ufspack {
namespace {

// The write end of the pipe SIGINT, SIGTERM and SIGHUP are reported to
// while Run() runs (-1 otherwise).
int g_signal_fd = -1;

void OnSignal(int sig) {
  const int saved = errno;
  const char c = static_cast<char>(sig);
  if (g_signal_fd >= 0) (void)!write(g_signal_fd, &c, 1);
  errno = saved;
}

// Takes the mount at `abs` out of the tree now (MNT_DETACH): the session's
// reads then end as soon as no file of the mount is open.
void DetachMount(const std::string& abs) {
  if (geteuid() == 0 && umount2(abs.c_str(), MNT_DETACH) == 0) return;
  std::vector<std::string> args = {"fusermount3", "-u", "-z", "-q", abs};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawnp(&pid, "fusermount3", nullptr, nullptr, argv.data(),
                   environ) != 0) {
    return;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

// "fsname=..." and the other options in one -o argument; ',' and '\' in
// values escaped for libfuse's option parser.
std::string MountOptionString(const std::string& fsname,
                              const std::vector<std::string>& extra) {
  std::string escaped;
  for (char c : fsname) {
    if (c == ',' || c == '\\') escaped.push_back('\\');
    escaped.push_back(c);
  }
  std::string o = "ro,default_permissions,subtype=ufspack,fsname=" + escaped;
  for (const std::string& e : extra) o += "," + e;
  return o;
}

int64_t PackMtime(const Reader& reader) {
  struct stat st;
  if (stat(reader.info().index_path.c_str(), &st) == 0) return st.st_mtime;
  return 0;
}

Status ReadNames(const Reader& reader, std::vector<std::string_view>* names) {
  names->resize(reader.size());
  Record r;
  for (uint64_t i = 0; i < reader.size(); ++i) {
    UFSPACK_RETURN_IF_ERROR(reader.GetRecord(i, &r));
    (*names)[i] = r.name;
  }
  return Status::OK();
}

// The pack's classes without records (built with --allow-empty), shown as
// empty directories as the source tree had them: ImageFolder on the mount
// then finds the classes (and targets) that MyImageFolder does, or refuses
// an empty class as it would in the source tree.  The root's class ("", a
// flat pack's) is the root itself.
Status EmptyClasses(const Reader& reader, std::vector<std::string_view>* dirs) {
  ClassInfo c;
  for (uint64_t k = 0; k < reader.class_count(); ++k) {
    UFSPACK_RETURN_IF_ERROR(reader.GetClass(k, &c));
    if (c.record_count == 0 && !c.name.empty()) dirs->push_back(c.name);
  }
  return Status::OK();
}

}  // namespace

class PackMount::Impl {
 public:
  Impl(std::unique_ptr<Reader> reader, std::string mountpoint,
       MountOptions options)
      : reader_(std::move(reader)),
        mountpoint_(std::move(mountpoint)),
        options_(std::move(options)) {}
  ~Impl() { Close(); }

  Status Start();
  Status Run();
  void Close();

  const std::string& mountpoint() const { return mountpoint_; }
  const mount::Tree& tree() const { return tree_; }

 private:
  Status Serve();
  void LogSummary();

  std::unique_ptr<Reader> reader_;
  std::string mountpoint_;
  std::string abs_mountpoint_;
  MountOptions options_;
  mount::Tree tree_;
  std::unique_ptr<mount::FileSystem> fs_;
  fuse_session* se_ = nullptr;
  bool mounted_ = false;
};

Status PackMount::Impl::Start() {
  UFSPACK_RETURN_IF_ERROR(CheckMountpoint(mountpoint_));
  UFSPACK_RETURN_IF_ERROR(
      mount::AbsoluteMountPath(mountpoint_, &abs_mountpoint_));
  std::vector<std::string_view> names;
  UFSPACK_RETURN_IF_ERROR(ReadNames(*reader_, &names));
  std::vector<std::string_view> empty_classes;
  UFSPACK_RETURN_IF_ERROR(EmptyClasses(*reader_, &empty_classes));
  UFSPACK_RETURN_IF_ERROR(tree_.Build(std::move(names), empty_classes));
  if (!options_.log) {
    options_.log = [](const std::string& line) {
      std::fprintf(stderr, "ufspack mount: %s\n", line.c_str());
    };
  }
  const int64_t mtime =
      options_.mtime >= 0 ? options_.mtime : PackMtime(*reader_);
  fs_ = std::make_unique<mount::FileSystem>(
      reader_.get(), &tree_, mtime, options_.zero_message_opens,
      options_.read_ahead_bytes, options_.log);
  const std::string fsname =
      options_.fsname.empty() ? "ufspack" : options_.fsname;
  std::vector<std::string> argv = {
      "ufspack", "-o", MountOptionString(fsname, options_.fuse_options)};
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  fuse_args fargs = FUSE_ARGS_INIT(static_cast<int>(args.size()), args.data());
  se_ = fuse_session_new(&fargs, mount::FileSystem::Ops(),
                         sizeof(fuse_lowlevel_ops), fs_.get());
  fuse_opt_free_args(&fargs);
  if (se_ == nullptr) {
    return Status::InvalidArgument("FUSE refused the mount options '" +
                                   argv[2] + "' (see the message above)");
  }
  if (fuse_session_mount(se_, abs_mountpoint_.c_str()) != 0) {
    return Status::IOError(
        "mounting on " + EscapeBytes(mountpoint_) +
        " failed (see the message above; FUSE needs /dev/fuse, and "
        "fusermount3 when not root)");
  }
  mounted_ = true;
  return Status::OK();
}

Status PackMount::Impl::Run() {
  if (se_ == nullptr || !mounted_) {
    return Status::InvalidArgument("not mounted");
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Status::FromErrno("pipe", errno);
  g_signal_fd = fds[1];
  struct sigaction sa, old_int, old_term, old_hup;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = OnSignal;
  sa.sa_flags = SA_RESETHAND;  // a second signal: the default (terminate)
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  sigaction(SIGHUP, &sa, &old_hup);
  // The watcher: a signal (any byte but 0) detaches the mount, which ends
  // the session's reads; 0 is Run()'s own "done".
  std::thread watcher([this, fd = fds[0]] {
    char c = 0;
    ssize_t n;
    while ((n = read(fd, &c, 1)) < 0 && errno == EINTR) {
    }
    if (n == 1 && c != 0) DetachMount(abs_mountpoint_);
  });
  Status s = Serve();
  const char done = 0;
  (void)!write(fds[1], &done, 1);
  watcher.join();
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  sigaction(SIGHUP, &old_hup, nullptr);
  g_signal_fd = -1;
  close(fds[0]);
  close(fds[1]);
  Close();
  LogSummary();
  return s;
}

// One line at the end, the mount's FileSystemStats: what it served and
// how many reads failed (their lines are in the log above it).
void PackMount::Impl::LogSummary() {
  const mount::FileSystemStats& st = fs_->stats();
  const mount::SequentialReadStats& ra = fs_->read_ahead_stats();
  std::string line = "unmounted " + EscapeBytes(abs_mountpoint_) + ": " +
                     std::to_string(st.record_reads.load()) + " record reads";
  const mount::PageCacheReadAheadStats& hints =
      fs_->page_cache_read_ahead_stats();
  if (ra.windows.load() > 0) {
    line += " (" + std::to_string(ra.reads_from_windows.load()) + " from " +
            std::to_string(ra.windows.load()) + " read-ahead windows)";
  } else if (hints.hints.load() > 0) {
    line += " (" + std::to_string(hints.hinted_bytes.load()) +
            " bytes read ahead in " + std::to_string(hints.hints.load()) +
            (hints.hints.load() == 1 ? " hint)" : " hints)");
  }
  line += ", " + std::to_string(st.read_errors.load()) + " failed";
  if (st.stat_errors.load() > 0) {
    line += ", " + std::to_string(st.stat_errors.load()) +
            " record entries unreadable";
  }
  if (fs_->log().suppressed() > 0) {
    line += " (" + std::to_string(fs_->log().suppressed()) +
            " repeated failures not logged)";
  }
  fs_->log().Write(line);
}

Status PackMount::Impl::Serve() {
  const unsigned max_threads =
      static_cast<unsigned>(std::max(1, options_.max_threads));
  const unsigned idle =
      std::min(max_threads,
               static_cast<unsigned>(std::max(1, options_.max_idle_threads)));
#if defined(UFSPACK_FUSE_LOOP_CONFIG)
  fuse_loop_config* config = fuse_loop_cfg_create();
  if (config == nullptr)
    return Status::IOError("fuse_loop_cfg_create: out of memory");
  fuse_loop_cfg_set_clone_fd(config, 0);
  fuse_loop_cfg_set_max_threads(config, max_threads);
  fuse_loop_cfg_set_idle_threads(config, idle);
  const int rc = fuse_session_loop_mt(se_, config);
  fuse_loop_cfg_destroy(config);
#else
  (void)max_threads;  // libfuse before 3.12 starts as many as requests wait
  fuse_loop_config config;
  std::memset(&config, 0, sizeof(config));
  config.clone_fd = 0;
  config.max_idle_threads = idle;
  const int rc = fuse_session_loop_mt(se_, &config);
#endif
  if (rc < 0) {
    return Status::IOError("serving " + EscapeBytes(mountpoint_) + ": " +
                           std::strerror(-rc));
  }
  return Status::OK();
}

void PackMount::Impl::Close() {
  if (se_ == nullptr) return;
  if (mounted_) fuse_session_unmount(se_);
  mounted_ = false;
  fuse_session_destroy(se_);
  se_ = nullptr;
}

PackMount::PackMount(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PackMount::~PackMount() = default;

Status PackMount::Mount(std::unique_ptr<Reader> reader,
                        const std::string& mountpoint,
                        const MountOptions& options,
                        std::unique_ptr<PackMount>* mount) {
  auto impl = std::make_unique<Impl>(std::move(reader), mountpoint, options);
  UFSPACK_RETURN_IF_ERROR(impl->Start());
  mount->reset(new PackMount(std::move(impl)));
  return Status::OK();
}

Status PackMount::Run() { return impl_->Run(); }
const std::string& PackMount::mountpoint() const { return impl_->mountpoint(); }
uint64_t PackMount::file_count() const { return impl_->tree().file_count(); }
uint64_t PackMount::dir_count() const { return impl_->tree().dir_count(); }

}  // namespace ufspack
