// Copyright 2026 The ufspack Authors.
#include "ufspack/builder.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#ifdef UFSPACK_HAVE_XXH_DISPATCH
#include <xxh_x86dispatch.h>
#define UFSPACK_XXH3_UPDATE XXH3_64bits_update_dispatch
#else
#define UFSPACK_XXH3_UPDATE XXH3_64bits_update
#endif
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "open_any_length.h"
#include "ufspack/coding.h"
#include "ufspack/format.h"

namespace ufspack {
namespace {

constexpr size_t kWriteBufferSize = 4 << 20;
// Files larger than this are streamed by the writer instead of being read
// whole by a worker.
constexpr uint64_t kStreamThreshold = 64ull << 20;
// Source bytes buffered between the reading threads and the writer.
constexpr uint64_t kInFlightBudget = 256ull << 20;

constexpr char kDataTmpPrefix[] = ".data.ufs.tmp-";
constexpr char kIndexTmpPrefix[] = ".index.ufs.tmp-";

struct ZstdCCtxDeleter {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};

ZSTD_CCtx* ThreadCCtx() {
  thread_local std::unique_ptr<ZSTD_CCtx, ZstdCCtxDeleter> ctx(
      ZSTD_createCCtx());
  return ctx.get();
}

Status WriteAll(int fd, const char* p, size_t n, const std::string& path) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(path + ": write", errno);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::OK();
}

Status PwriteAll(int fd, const char* p, size_t n, uint64_t off,
                 const std::string& path) {
  while (n > 0) {
    ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(off));
    if (w < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(path + ": write", errno);
    }
    p += w;
    n -= static_cast<size_t>(w);
    off += static_cast<uint64_t>(w);
  }
  return Status::OK();
}

Status MakeDirs(const std::string& path) {
  if (path.empty()) return Status::OK();
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return Status::OK();
    return Status::InvalidArgument(path + ": exists and is not a directory");
  }
  size_t slash = path.find_last_of('/');
  if (slash != std::string::npos && slash > 0) {
    UFSPACK_RETURN_IF_ERROR(MakeDirs(path.substr(0, slash)));
  }
  if (::mkdir(path.c_str(), 0777) != 0 && errno != EEXIST) {
    return Status::FromErrno(path + ": cannot create directory", errno);
  }
  return Status::OK();
}

// Creates a new file `dir`/`prefix`XXXXXXXX (8 random characters from a-z0-9)
// with O_EXCL and mode 0666 & ~umask, the permissions any other new file would
// get.
Status CreateTemp(const std::string& dir, const char* prefix, int* fd,
                  std::string* path) {
  static const char kChars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::random_device rd;
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string name = dir + "/" + prefix;
    for (int k = 0; k < 8; ++k) name.push_back(kChars[rd() % 36]);
    int f = ::open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (f >= 0) {
      *fd = f;
      *path = name;
      return Status::OK();
    }
    if (errno != EEXIST)
      return Status::FromErrno(name + ": cannot create", errno);
  }
  return Status::IOError(dir + ": cannot create a temporary file");
}

// Removes temporary files left in `dir` by builds that died.  Called with
// the directory lock held, so no live build owns them.
void RemoveStaleTemps(int dir_fd) {
  int fd = ::dup(dir_fd);
  if (fd < 0) return;
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    ::close(fd);
    return;
  }
  std::vector<std::string> stale;
  while (struct dirent* e = ::readdir(d)) {
    std::string_view n = e->d_name;
    if (n.rfind(kDataTmpPrefix, 0) == 0 || n.rfind(kIndexTmpPrefix, 0) == 0) {
      stale.emplace_back(n);
    }
  }
  ::closedir(d);
  for (const auto& n : stale) ::unlinkat(dir_fd, n.c_str(), 0);
}

// Reads the pack id from the header of `name` in `dir_fd`: an index.ufs
// when `is_index`, else a data file.  False if absent, not a regular file
// (opened O_NONBLOCK, so a FIFO planted there cannot block) or not valid.
bool ReadPackId(int dir_fd, const char* name, bool is_index, PackId* id) {
  int fd = ::openat(dir_fd, name,
                    O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return false;
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return false;
  }
  char buf[IndexHeader::kEncodedLength];
  const size_t want =
      is_index ? IndexHeader::kEncodedLength : DataHeader::kEncodedLength;
  ssize_t n;
  do {
    n = ::pread(fd, buf, want, 0);
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  if (n != static_cast<ssize_t>(want)) return false;
  std::string_view in(buf, want);
  if (is_index) {
    IndexHeader h;
    if (!h.DecodeFrom(&in).ok()) return false;
    *id = h.pack_id;
  } else {
    DataHeader h;
    if (!h.DecodeFrom(&in).ok()) return false;
    *id = h.pack_id;
  }
  return true;
}

// A build killed between its two renames leaves its new data.ufs beside the
// previous index.ufs, with the previous data file linked as .data.ufs.prev:
// put the previous pack back together.  Any other .data.ufs.prev is a
// leftover of a publish that completed, and is removed.  Called with the
// directory lock held.
void RestoreInterruptedPublish(int dir_fd) {
  PackId prev_id, index_id, data_id;
  if (!ReadPackId(dir_fd, kPrevDataFileName, false, &prev_id)) {
    ::unlinkat(dir_fd, kPrevDataFileName, 0);
    return;
  }
  if (ReadPackId(dir_fd, kIndexFileName, true, &index_id) &&
      index_id == prev_id &&
      !(ReadPackId(dir_fd, kDataFileName, false, &data_id) &&
        data_id == index_id) &&
      ::renameat(dir_fd, kPrevDataFileName, dir_fd, kDataFileName) == 0) {
    ::fsync(dir_fd);
    return;
  }
  ::unlinkat(dir_fd, kPrevDataFileName, 0);
}

}  // namespace

Status PrepareRecord(std::string bytes, const PackWriterOptions& options,
                     PreparedRecord* out) {
  out->original_length = bytes.size();
  out->codec = Codec::kRaw;
  if (options.compress && !bytes.empty()) {
    ZSTD_CCtx* cctx = ThreadCCtx();
    if (cctx == nullptr)
      return Status::IOError("out of memory (ZSTD_createCCtx)");
    std::string z;
    z.resize(ZSTD_compressBound(bytes.size()));
    size_t n = ZSTD_compressCCtx(cctx, z.data(), z.size(), bytes.data(),
                                 bytes.size(), options.zstd_level);
    if (ZSTD_isError(n)) {
      return Status::InvalidArgument(std::string("zstd: ") +
                                     ZSTD_getErrorName(n));
    }
    if (n < bytes.size()) {
      z.resize(n);
      out->codec = Codec::kZstd;
      out->stored = std::move(z);
    }
  }
  if (out->codec == Codec::kRaw) out->stored = std::move(bytes);
  out->checksum = Checksum64(out->stored.data(), out->stored.size());
  return Status::OK();
}

// --- PackWriter -------------------------------------------------------------

Status PackWriter::Create(const std::string& out_dir_in,
                          const PackWriterOptions& options,
                          std::unique_ptr<PackWriter>* writer) {
  if (options.zstd_level < 1 || options.zstd_level > ZSTD_maxCLevel()) {
    return Status::InvalidArgument(
        "zstd level " + std::to_string(options.zstd_level) +
        " out of range 1.." + std::to_string(ZSTD_maxCLevel()));
  }
  std::string out_dir = out_dir_in;
  while (out_dir.size() > 1 && out_dir.back() == '/') out_dir.pop_back();
  UFSPACK_RETURN_IF_ERROR(MakeDirs(out_dir));
  std::unique_ptr<PackWriter> w(new PackWriter());
  w->options_ = options;
  w->out_dir_ = out_dir;
  w->dir_fd_ = ::open(out_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (w->dir_fd_ < 0) return Status::FromErrno(out_dir, errno);
  if (::flock(w->dir_fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      return Status::InvalidArgument(
          out_dir + ": another ufspack build is writing to this directory");
    }
    // File systems without flock (some network mounts): carry on unlocked.
  } else {
    RemoveStaleTemps(w->dir_fd_);
    RestoreInterruptedPublish(w->dir_fd_);
  }
  UFSPACK_RETURN_IF_ERROR(
      CreateTemp(out_dir, kDataTmpPrefix, &w->data_fd_, &w->data_tmp_));
  UFSPACK_RETURN_IF_ERROR(
      CreateTemp(out_dir, kIndexTmpPrefix, &w->index_fd_, &w->index_tmp_));
  // Placeholder header; the pack id is patched in by Finish().
  DataHeader header;
  std::string h;
  header.EncodeTo(&h);
  w->buffer_.reserve(kWriteBufferSize);
  UFSPACK_RETURN_IF_ERROR(w->WriteData(h.data(), h.size()));
  *writer = std::move(w);
  return Status::OK();
}

uint64_t PackWriter::record_count() const { return records_.size(); }

PackWriter::~PackWriter() {
  if (!finished_) Abandon();
  if (dir_fd_ >= 0) ::close(dir_fd_);  // releases the lock
}

void PackWriter::Abandon() {
  if (data_fd_ >= 0) {
    ::close(data_fd_);
    data_fd_ = -1;
  }
  if (index_fd_ >= 0) {
    ::close(index_fd_);
    index_fd_ = -1;
  }
  if (!data_tmp_.empty()) ::unlink(data_tmp_.c_str());
  if (!index_tmp_.empty()) ::unlink(index_tmp_.c_str());
  data_tmp_.clear();
  index_tmp_.clear();
  if (status_.ok() && !finished_) status_ = Status::Aborted("pack abandoned");
}

Status PackWriter::Fail(Status s) {
  if (status_.ok()) status_ = s;
  return s;
}

Status PackWriter::WriteData(const char* p, size_t n) {
  if (buffer_.size() + n > kWriteBufferSize) {
    UFSPACK_RETURN_IF_ERROR(FlushData());
    if (n >= kWriteBufferSize) {
      Status s = WriteAll(data_fd_, p, n, data_tmp_);
      if (!s.ok()) return Fail(s);
      data_offset_ += n;
      return Status::OK();
    }
  }
  buffer_.append(p, n);
  data_offset_ += n;
  return Status::OK();
}

Status PackWriter::FlushData() {
  if (buffer_.empty()) return Status::OK();
  Status s = WriteAll(data_fd_, buffer_.data(), buffer_.size(), data_tmp_);
  buffer_.clear();
  if (!s.ok()) return Fail(s);
  return Status::OK();
}

Status PackWriter::AddClass(std::string_view name) {
  UFSPACK_RETURN_IF_ERROR(status_);
  if (options_.flat) {
    return Fail(Status::InvalidArgument("a flat pack has no classes"));
  }
  if (classes_.size() >= kNoLabel - 1) {
    return Fail(Status::InvalidArgument("too many classes"));
  }
  if (name.size() > UINT32_MAX) {
    return Fail(Status::InvalidArgument("class name too long"));
  }
  ClassEntry c;
  c.name_offset = names_.size();
  c.name_length = static_cast<uint32_t>(name.size());
  c.first_record = records_.size();
  names_.append(name);
  classes_.push_back(c);
  return Status::OK();
}

Status PackWriter::CheckRecord(uint32_t label, std::string_view name) {
  UFSPACK_RETURN_IF_ERROR(CheckLabel(label, name));
  if (records_.size() >= kMaxRecords) {
    return Fail(Status::InvalidArgument("too many records (format limit " +
                                        std::to_string(kMaxRecords) + ")"));
  }
  if (name.size() > UINT32_MAX) {
    return Fail(Status::InvalidArgument("record name too long"));
  }
  return Status::OK();
}

Status PackWriter::CheckLabel(uint32_t label, std::string_view name) {
  if (options_.flat) {
    if (label != kNoLabel) {
      return Fail(Status::InvalidArgument(std::string(name) +
                                          ": a flat pack takes no labels"));
    }
    return Status::OK();
  }
  if (label >= classes_.size()) {
    return Fail(Status::InvalidArgument(
        std::string(name) + ": label " + std::to_string(label) + " but only " +
        std::to_string(classes_.size()) + " classes declared"));
  }
  if (!records_.empty() && label < records_.back().label) {
    return Fail(Status::InvalidArgument(
        std::string(name) + ": label " + std::to_string(label) +
        " after label " + std::to_string(records_.back().label) +
        " (records must be added class by class)"));
  }
  return Status::OK();
}

Status PackWriter::AppendEntry(std::string_view name, uint32_t label,
                               Codec codec, uint64_t stored, uint64_t original,
                               uint64_t checksum) {
  RecordEntry e;
  e.offset = data_offset_ - stored;
  e.stored_length = stored;
  e.original_length = original;
  e.checksum = checksum;
  e.name_offset = names_.size();
  e.name_length = static_cast<uint32_t>(name.size());
  e.label = label;
  e.name_hash = NameHashTag(NameHash(name));
  e.codec = codec;
  names_.append(name);
  records_.push_back(e);
  if (!options_.flat) classes_[label].record_count++;
  return Status::OK();
}

Status PackWriter::Add(std::string_view name, uint32_t label,
                       std::string_view bytes) {
  UFSPACK_RETURN_IF_ERROR(status_);
  PreparedRecord r;
  Status s = PrepareRecord(std::string(bytes), options_, &r);
  if (!s.ok()) return Fail(s);
  return AddPrepared(name, label, r);
}

Status PackWriter::AddPrepared(std::string_view name, uint32_t label,
                               const PreparedRecord& r) {
  UFSPACK_RETURN_IF_ERROR(status_);
  UFSPACK_RETURN_IF_ERROR(CheckRecord(label, name));
  UFSPACK_RETURN_IF_ERROR(WriteData(r.stored.data(), r.stored.size()));
  return AppendEntry(name, label, r.codec, r.stored.size(), r.original_length,
                     r.checksum);
}

Status PackWriter::AddFromFd(std::string_view name, uint32_t label, int fd,
                             uint64_t size, const std::string& path) {
  UFSPACK_RETURN_IF_ERROR(status_);
  UFSPACK_RETURN_IF_ERROR(CheckRecord(label, name));
  UFSPACK_RETURN_IF_ERROR(FlushData());
  const uint64_t start = data_offset_;
  struct stat before;
  const bool have_before = ::fstat(fd, &before) == 0;
  // On a source error, cut the data file back to where this record began so
  // the pack stays consistent and the build may go on (skip_unreadable).
  auto rewind = [&](Status source_error) -> Status {
    if (::ftruncate(data_fd_, static_cast<off_t>(start)) != 0 ||
        ::lseek(data_fd_, static_cast<off_t>(start), SEEK_SET) < 0) {
      return Fail(Status::FromErrno(data_tmp_ + ": truncate", errno));
    }
    return source_error;
  };
  std::unique_ptr<XXH3_state_t, XXH_errorcode (*)(XXH3_state_t*)> state(
      XXH3_createState(), XXH3_freeState);
  if (!state) return Fail(Status::IOError("out of memory (XXH3_createState)"));
  XXH3_64bits_reset(state.get());
  std::string chunk(kWriteBufferSize, '\0');
  uint64_t done = 0;
  for (;;) {
    ssize_t r = ::read(fd, chunk.data(), chunk.size());
    if (r < 0) {
      if (errno == EINTR) continue;
      return rewind(Status::FromErrno(path + ": read", errno));
    }
    if (r == 0) break;
    done += static_cast<uint64_t>(r);
    if (done > size) break;
    UFSPACK_XXH3_UPDATE(state.get(), chunk.data(), static_cast<size_t>(r));
    Status s =
        WriteAll(data_fd_, chunk.data(), static_cast<size_t>(r), data_tmp_);
    if (!s.ok()) return Fail(s);
  }
  struct stat after;
  const bool changed =
      have_before &&
      (::fstat(fd, &after) != 0 || after.st_size != before.st_size ||
       after.st_mtim.tv_sec != before.st_mtim.tv_sec ||
       after.st_mtim.tv_nsec != before.st_mtim.tv_nsec ||
       after.st_ctim.tv_sec != before.st_ctim.tv_sec ||
       after.st_ctim.tv_nsec != before.st_ctim.tv_nsec);
  if (done != size || changed) {
    return rewind(
        Status::IOError(path + ": file changed as we read it (size was " +
                        std::to_string(size) + " bytes, read " +
                        (done > size ? "more" : std::to_string(done)) + ")"));
  }
  data_offset_ += size;
  return AppendEntry(name, label, Codec::kRaw, size, size,
                     XXH3_64bits_digest(state.get()));
}

Status PackWriter::SetMetadata(std::string_view key, std::string_view value) {
  UFSPACK_RETURN_IF_ERROR(status_);
  if (key.size() > UINT32_MAX || value.size() > UINT32_MAX) {
    return Fail(Status::InvalidArgument("metadata entry too long"));
  }
  metadata_[std::string(key)] = std::string(value);
  return Status::OK();
}

Status PackWriter::Finish(PackId* pack_id) {
  UFSPACK_RETURN_IF_ERROR(status_);
  if (finished_) return Status::InvalidArgument("Finish() called twice");
  UFSPACK_RETURN_IF_ERROR(FlushData());

  // Lookup table: open addressing, linear probing, slots hold index + 1.
  const uint64_t n = records_.size();
  const uint64_t slots = LookupSlotsFor(n);
  std::vector<uint32_t> table(slots, 0);
  for (uint64_t i = 0; i < n; ++i) {
    const RecordEntry& e = records_[i];
    std::string_view name(names_.data() + e.name_offset, e.name_length);
    const uint64_t h = NameHash(name);
    uint64_t pos = LookupHome(h, slots);
    while (table[pos] != 0) {
      const RecordEntry& o = records_[table[pos] - 1];
      if (o.name_hash == e.name_hash &&
          std::string_view(names_.data() + o.name_offset, o.name_length) ==
              name) {
        return Fail(Status::InvalidArgument("duplicate record name '" +
                                            std::string(name) + "'"));
      }
      pos = (pos + 1) & (slots - 1);
    }
    table[pos] = static_cast<uint32_t>(i + 1);
  }

  // Index body: records | classes | lookup | names, contiguous after the
  // header.
  IndexHeader h;
  h.optional_flags = options_.flat ? kOptionalFlagFlat : 0;
  h.record_size = RecordEntry::kEncodedLength;
  h.record_count = n;
  h.class_count = classes_.size();
  h.data_size = data_offset_;
  std::string body;
  body.reserve(n * RecordEntry::kEncodedLength +
               classes_.size() * ClassEntry::kEncodedLength + slots * 4 +
               names_.size());
  uint64_t base = IndexHeader::kEncodedLength;
  h.records.offset = base;
  for (const RecordEntry& e : records_) e.EncodeTo(&body);
  h.records.size = body.size();
  h.classes.offset = base + body.size();
  // Records are added class by class, so class c starts after the records
  // of every class before it (classes may be declared before any record).
  uint64_t first = 0;
  for (ClassEntry& c : classes_) {
    c.first_record = first;
    first += c.record_count;
    c.EncodeTo(&body);
  }
  h.classes.size = base + body.size() - h.classes.offset;
  h.lookup.offset = base + body.size();
  for (uint32_t v : table) PutFixed32(&body, v);
  h.lookup.size = base + body.size() - h.lookup.offset;
  h.names.offset = base + body.size();
  body.append(names_);
  h.names.size = names_.size();
  h.meta.offset = base + body.size();
  EncodeMetadata(metadata_, &body);
  h.meta.size = base + body.size() - h.meta.offset;
  h.index_size = base + body.size();
  h.body_checksum = Checksum64(body.data(), body.size());
  // The pack id is derived from the index body, which holds every record's
  // checksum: the same input gives the same id, different packs differ.
  h.pack_id = PackId::Of(body.data(), body.size());
  Status s = h.ValidateLayout();
  if (!s.ok()) return Fail(s.WithContext("internal error"));

  DataHeader dh;
  dh.pack_id = h.pack_id;
  std::string dbytes;
  dh.EncodeTo(&dbytes);
  s = PwriteAll(data_fd_, dbytes.data(), dbytes.size(), 0, data_tmp_);
  if (!s.ok()) return Fail(s);
  if (::fsync(data_fd_) != 0)
    return Fail(Status::FromErrno(data_tmp_ + ": fsync", errno));

  std::string header;
  h.EncodeTo(&header);
  s = WriteAll(index_fd_, header.data(), header.size(), index_tmp_);
  if (s.ok()) s = WriteAll(index_fd_, body.data(), body.size(), index_tmp_);
  if (!s.ok()) return Fail(s);
  if (::fsync(index_fd_) != 0)
    return Fail(Status::FromErrno(index_tmp_ + ": fsync", errno));
  if (::close(data_fd_) != 0) {
    data_fd_ = -1;
    return Fail(Status::FromErrno(data_tmp_ + ": close", errno));
  }
  data_fd_ = -1;
  if (::close(index_fd_) != 0) {
    index_fd_ = -1;
    return Fail(Status::FromErrno(index_tmp_ + ": close", errno));
  }
  index_fd_ = -1;

  // Publish: data first, then index.  Between the two renames the pair is
  // mismatched and never reads wrong bytes; the previous data file stays
  // linked as .data.ufs.prev until the new index is in place, so the
  // previous pack survives a failed index rename (restored here) or a crash
  // between the renames (Reader::Open falls back to it, and the next build
  // restores it).  File systems without hard links publish without it.
  const std::string data_final = out_dir_ + "/" + kDataFileName;
  const std::string index_final = out_dir_ + "/" + kIndexFileName;
  const std::string prev = out_dir_ + "/" + kPrevDataFileName;
  ::unlink(prev.c_str());
  const bool have_prev = ::link(data_final.c_str(), prev.c_str()) == 0;
  if (::rename(data_tmp_.c_str(), data_final.c_str()) != 0) {
    const int e = errno;
    if (have_prev) ::unlink(prev.c_str());
    return Fail(
        Status::FromErrno("rename " + data_tmp_ + " -> " + data_final, e));
  }
  data_tmp_.clear();
  if (::rename(index_tmp_.c_str(), index_final.c_str()) != 0) {
    const int e = errno;
    const bool restored =
        have_prev && ::rename(prev.c_str(), data_final.c_str()) == 0;
    return Fail(Status::FromErrno(
        "rename " + index_tmp_ + " -> " + index_final +
            (restored ? " (the previous pack is kept)"
                      : " (the previous pack is lost: new data.ufs, previous "
                        "index.ufs)"),
        e));
  }
  index_tmp_.clear();
  if (have_prev) ::unlink(prev.c_str());
  if (::fsync(dir_fd_) != 0 && errno != EINVAL) {
    return Fail(Status::FromErrno(out_dir_ + ": fsync", errno));
  }
  finished_ = true;
  if (pack_id != nullptr) *pack_id = h.pack_id;
  return Status::OK();
}

// --- BuildPack --------------------------------------------------------------

namespace {

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

const char* FileTypeName(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  return "not a regular file";
}

// One source file on its way from a reading thread to the writer.
struct Slot {
  bool ready = false;
  Status status;
  PreparedRecord record;
  int stream_fd = -1;  // large file left for the writer to stream
  uint64_t stream_size = 0;
  uint64_t budget = 0;  // bytes counted against kInFlightBudget
};

// Opens and fully reads one source file, detecting changes while reading.
// Never blocks on FIFOs or devices: opens with O_NONBLOCK and checks the
// type before reading.
Status ReadSource(const std::string& path, Slot* slot,
                  const std::function<void(uint64_t)>& reserve,
                  std::string* bytes) {
  int fd;
  do {
    fd = internal::OpenAnyLength(path,
                                 O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return Status::FromErrno(path + ": cannot open", errno);
  struct stat before;
  if (::fstat(fd, &before) != 0) {
    int e = errno;
    ::close(fd);
    return Status::FromErrno(path + ": fstat", e);
  }
  if (!S_ISREG(before.st_mode)) {
    ::close(fd);
    return Status::InvalidArgument(
        path + ": is " + FileTypeName(before.st_mode) + ", not a regular file");
  }
  const uint64_t size = static_cast<uint64_t>(before.st_size);
  if (size > kStreamThreshold) {
    slot->stream_fd = fd;
    slot->stream_size = size;
    return Status::OK();
  }
  reserve(size);
  slot->budget = size;
  std::string buf(static_cast<size_t>(size) + 1, '\0');
  uint64_t done = 0;
  for (;;) {
    ssize_t r = ::read(fd, buf.data() + done, buf.size() - done);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        // Only special files return EAGAIN; regular files never block.
        continue;
      }
      int e = errno;
      ::close(fd);
      return Status::FromErrno(path + ": read", e);
    }
    if (r == 0) break;
    done += static_cast<uint64_t>(r);
    if (done == buf.size()) break;  // grew past its size
  }
  struct stat after;
  int fst = ::fstat(fd, &after);
  ::close(fd);
  // As GNU tar does, the ctime counts too: it also moves when the file is
  // replaced by a rename or deleted while we read it (the link count
  // drops), which leaves size and mtime as they were.
  if (done != size || fst != 0 || after.st_size != before.st_size ||
      after.st_mtim.tv_sec != before.st_mtim.tv_sec ||
      after.st_mtim.tv_nsec != before.st_mtim.tv_nsec ||
      after.st_ctim.tv_sec != before.st_ctim.tv_sec ||
      after.st_ctim.tv_nsec != before.st_ctim.tv_nsec) {
    return Status::IOError(path + ": file changed as we read it (size was " +
                           std::to_string(size) + " bytes, read " +
                           (done > size ? "more" : std::to_string(done)) + ")");
  }
  buf.resize(static_cast<size_t>(size));
  *bytes = std::move(buf);
  return Status::OK();
}

}  // namespace

Status BuildPack(const std::string& src, const std::string& out_dir,
                 const BuildOptions& options_in, BuildSummary* summary) {
  const auto t0 = std::chrono::steady_clock::now();
  BuildOptions options = options_in;
  options.writer.flat = options.scan.flat;
  if (options.skip_unreadable) options.scan.skip_unreadable = true;
  if (options.threads < 1) {
    return Status::InvalidArgument("--threads must be at least 1");
  }
  *summary = BuildSummary();
  auto cancelled = [&]() {
    return options.cancel != nullptr &&
           options.cancel->load(std::memory_order_relaxed);
  };

  struct stat src_st;
  if (::stat(src.c_str(), &src_st) != 0) return Status::FromErrno(src, errno);
  if (!S_ISDIR(src_st.st_mode)) {
    return Status::InvalidArgument(src + ": not a directory");
  }

  std::unique_ptr<PackWriter> writer;
  UFSPACK_RETURN_IF_ERROR(PackWriter::Create(out_dir, options.writer, &writer));
  struct stat out_st;
  const bool out_known = ::stat(writer->out_dir().c_str(), &out_st) == 0;
  if (out_known) {
    options.scan.exclude_dev = out_st.st_dev;
    options.scan.exclude_ino = out_st.st_ino;
  }

  ScanResult scan;
  UFSPACK_RETURN_IF_ERROR(ScanTree(src, options.scan, &scan));
  summary->scan_seconds = SecondsSince(t0);
  summary->skipped = scan.skipped;
  auto warn = [&](std::string w) {
    if (summary->warnings.size() < BuildSummary::kMaxWarnings) {
      summary->warnings.push_back(std::move(w));
    }
  };
  for (auto& w : scan.warnings) warn(std::move(w));
  if (cancelled()) return Status::Aborted("interrupted");

  // When the output directory is the source root, the pack's own files (a
  // previous data.ufs / index.ufs, this build's temporary files) lie at the
  // top of the tree (only listed in flat mode): leave them out.
  if (out_known && out_st.st_dev == src_st.st_dev &&
      out_st.st_ino == src_st.st_ino) {
    auto own_file = [](const ScanEntry& e) {
      const std::string& name = e.name;
      return name == kDataFileName || name == kIndexFileName ||
             name.rfind(kDataTmpPrefix, 0) == 0 ||
             name.rfind(kIndexTmpPrefix, 0) == 0;
    };
    auto end =
        std::remove_if(scan.entries.begin(), scan.entries.end(), own_file);
    if (end != scan.entries.end()) {
      warn(src +
           ": the output directory is the source root; not packing the "
           "pack's own files");
      scan.entries.erase(end, scan.entries.end());
    }
  }

  for (const std::string& c : scan.classes) {
    UFSPACK_RETURN_IF_ERROR(writer->AddClass(c));
  }
  // Where the files came from, so readers can give the original paths
  // (MyImageFolder.samples).  As given, without trailing slashes.
  UFSPACK_RETURN_IF_ERROR(writer->SetMetadata(kMetaSourceRoot, scan.root));
  // Which files were selected: "*" (all) or the extension list.  Readers
  // that filter like ImageFolder use it to know whether they must.
  std::string selection = "*";
  if (!options.scan.all_files) {
    selection.clear();
    for (const std::string& e : NormalizeExtensions(options.scan.extensions)) {
      if (!selection.empty()) selection += ',';
      selection += e;
    }
  }
  UFSPACK_RETURN_IF_ERROR(writer->SetMetadata(kMetaExtensions, selection));

  const size_t total = scan.entries.size();
  const size_t window =
      std::max<size_t>(64, static_cast<size_t>(options.threads) * 4);
  std::vector<Slot> slots(std::min(window, std::max<size_t>(total, 1)));
  const size_t ring = slots.size();
  std::mutex mu;
  // Each waiter kind has its own condition variable so that a record
  // written wakes one worker, not all of them.
  std::condition_variable work_cv;    // workers wait for a free slot
  std::condition_variable budget_cv;  // workers wait for buffer budget
  std::condition_variable ready_cv;   // the writer waits for its next slot
  int budget_waiters = 0;
  size_t next_claim = 0;
  size_t written = 0;
  uint64_t in_flight = 0;
  bool stop = false;

  auto worker = [&]() {
    for (;;) {
      size_t k;
      {
        std::unique_lock<std::mutex> lock(mu);
        work_cv.wait(lock, [&] {
          return stop || next_claim >= total || next_claim < written + ring;
        });
        if (stop || next_claim >= total) return;
        k = next_claim++;
      }
      Slot local;
      auto reserve = [&](uint64_t bytes) {
        std::unique_lock<std::mutex> lock(mu);
        ++budget_waiters;
        budget_cv.wait(lock, [&] {
          return stop || k == written || in_flight + bytes <= kInFlightBudget;
        });
        --budget_waiters;
        in_flight += bytes;
      };
      std::string bytes;
      local.status = ReadSource(scan.PathOf(k), &local, reserve, &bytes);
      if (local.status.ok() && local.stream_fd < 0) {
        local.status =
            PrepareRecord(std::move(bytes), options.writer, &local.record);
      }
      std::lock_guard<std::mutex> lock(mu);
      slots[k % ring] = std::move(local);
      slots[k % ring].ready = true;
      ready_cv.notify_one();
    }
  };

  const int n_threads = static_cast<int>(std::min<size_t>(
      static_cast<size_t>(options.threads), std::max<size_t>(total, 1)));
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(n_threads));
  for (int t = 0; t < n_threads; ++t) pool.emplace_back(worker);
  auto shutdown = [&]() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    work_cv.notify_all();
    budget_cv.notify_all();
    for (auto& t : pool) t.join();
    pool.clear();
    for (Slot& sl : slots) {
      if (sl.stream_fd >= 0) ::close(sl.stream_fd);
      sl.stream_fd = -1;
    }
  };

  const auto t_read = std::chrono::steady_clock::now();
  auto last_report = t_read;
  BuildProgress progress;
  progress.files_total = total;
  if (options.progress) options.progress(progress);  // the count is known
  if (cancelled()) {
    shutdown();
    writer->Abandon();
    return Status::Aborted("interrupted");
  }
  Status result;
  for (size_t k = 0; k < total; ++k) {
    Slot slot;
    {
      std::unique_lock<std::mutex> lock(mu);
      while (!slots[k % ring].ready) {
        if (cancelled()) break;
        ready_cv.wait_for(lock, std::chrono::milliseconds(100));
      }
      if (!slots[k % ring].ready) {
        result = Status::Aborted("interrupted");
        break;
      }
      slot = std::move(slots[k % ring]);
      slots[k % ring] = Slot();
    }
    const std::string& name = scan.entries[k].name;
    const uint32_t label = scan.entries[k].label;
    Status s = slot.status;
    if (s.ok() && slot.stream_fd >= 0) {
      s = writer->AddFromFd(name, label, slot.stream_fd, slot.stream_size,
                            scan.PathOf(k));
      ::close(slot.stream_fd);
      slot.stream_fd = -1;
      if (s.ok()) progress.bytes_in += slot.stream_size;
    } else if (s.ok()) {
      s = writer->AddPrepared(name, label, slot.record);
      if (s.ok()) progress.bytes_in += slot.record.original_length;
      if (s.ok() && slot.record.codec == Codec::kZstd) summary->compressed++;
    }
    if (!s.ok()) {
      if (!writer->status().ok() || !options.skip_unreadable) {
        result = s;
        break;
      }
      summary->skipped++;
      warn(std::string(s.message()) + "; skipped");
    } else {
      progress.files_done++;
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      written = k + 1;
      in_flight -= slot.budget;
      if (budget_waiters > 0) budget_cv.notify_all();
    }
    work_cv.notify_one();
    if (cancelled()) {
      result = Status::Aborted("interrupted");
      break;
    }
    if (options.progress) {
      auto now = std::chrono::steady_clock::now();
      if (now - last_report >= std::chrono::milliseconds(250)) {
        last_report = now;
        progress.bytes_out = writer->data_bytes();
        progress.seconds = SecondsSince(t_read);
        options.progress(progress);
      }
    }
  }
  shutdown();
  if (!result.ok()) {
    writer->Abandon();
    return result;
  }
  // A writer-side failure may also be sticky without having been returned.
  if (!writer->status().ok()) {
    Status s = writer->status();
    writer->Abandon();
    return s;
  }
  if (cancelled()) {
    writer->Abandon();
    return Status::Aborted("interrupted");
  }
  UFSPACK_RETURN_IF_ERROR(writer->Finish(&summary->pack_id));
  progress.bytes_out = writer->data_bytes();
  progress.seconds = SecondsSince(t_read);
  if (options.progress) options.progress(progress);

  summary->index_path = writer->out_dir() + "/" + kIndexFileName;
  summary->data_path = writer->out_dir() + "/" + kDataFileName;
  summary->files = progress.files_done;
  summary->classes = scan.classes.size();
  summary->bytes_in = progress.bytes_in;
  summary->bytes_out = writer->data_bytes();
  struct stat ist;
  if (::stat(summary->index_path.c_str(), &ist) == 0) {
    summary->index_bytes = static_cast<uint64_t>(ist.st_size);
  }
  if (summary->warnings.size() >= BuildSummary::kMaxWarnings) {
    summary->warnings.push_back("(more warnings not shown)");
  }
  summary->seconds = SecondsSince(t0);
  return Status::OK();
}

}  // namespace ufspack
