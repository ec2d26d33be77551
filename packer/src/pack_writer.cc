// Copyright 2026 The ufspack Authors.
//
// PackWriterImpl (pack_writer_impl.h), behind ufspack/builder.h's
// PackWriter: records appended to temporary files, the
// index spilled to scratch files and encoded by Finish(), the pack
// published by renames (docs/format.md, "Publishing a pack").
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "pack_writer_impl.h"
#include "publish.h"
#include "source_file.h"
#include "spill.h"
#include "ufspack/builder.h"
#include "ufspack/coding.h"
#include "ufspack/format.h"
#include "ufspack/manifest.h"
#include "ufspack/posix_io.h"
#include "xxh3.h"

namespace ufspack {
namespace internal {
namespace {

constexpr size_t kWriteBufferSize = 4 << 20;

struct ZstdCCtxDeleter {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};

ZSTD_CCtx* ThreadCCtx() {
  thread_local std::unique_ptr<ZSTD_CCtx, ZstdCCtxDeleter> ctx(
      ZSTD_createCCtx());
  return ctx.get();
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

Status PackWriterImpl::Create(const std::string& out_dir_in,
                              const PackWriterOptions& options,
                              std::unique_ptr<PackWriterImpl>* writer) {
  if (options.zstd_level < 1 || options.zstd_level > ZSTD_maxCLevel()) {
    return Status::InvalidArgument(
        "zstd level " + std::to_string(options.zstd_level) +
        " out of range 1.." + std::to_string(ZSTD_maxCLevel()));
  }
  std::string out_dir = out_dir_in;
  while (out_dir.size() > 1 && out_dir.back() == '/') out_dir.pop_back();
  std::unique_ptr<PackWriterImpl> w(new PackWriterImpl());
  w->options_ = options;
  w->out_dir_ = out_dir;
  bool locked = false;
  UFSPACK_RETURN_IF_ERROR(internal::LockPackDir(out_dir, &w->dir_fd_, &locked));
  if (locked) internal::RecoverPackDir(w->dir_fd_);
  // A merged pack's directory holds its manifest only; a pack published
  // beside it would be shadowed by it.
  struct stat mst;
  if (::fstatat(w->dir_fd_, kManifestFileName, &mst, 0) == 0) {
    return Status::InvalidArgument(
        out_dir + ": holds a merged pack (" + kManifestFileName +
        "); build into another directory, or remove the manifest first");
  }
  UFSPACK_RETURN_IF_ERROR(internal::CreateTemp(
      out_dir, internal::kDataTmpPrefix, &w->data_fd_, &w->data_tmp_));
  UFSPACK_RETURN_IF_ERROR(internal::CreateTemp(
      out_dir, internal::kIndexTmpPrefix, &w->index_fd_, &w->index_tmp_));
  w->records_file_ = std::make_unique<SpillFile>();
  w->names_file_ = std::make_unique<SpillFile>();
  w->hashes_file_ = std::make_unique<SpillFile>();
  UFSPACK_RETURN_IF_ERROR(
      w->records_file_->Create(out_dir, internal::kRecordsTmpPrefix));
  UFSPACK_RETURN_IF_ERROR(
      w->names_file_->Create(out_dir, internal::kNamesTmpPrefix));
  UFSPACK_RETURN_IF_ERROR(
      w->hashes_file_->Create(out_dir, internal::kHashesTmpPrefix));
  // Placeholder header; the pack id is patched in by Finish().
  DataHeader header;
  std::string h;
  header.EncodeTo(&h);
  w->buffer_.reserve(kWriteBufferSize);
  UFSPACK_RETURN_IF_ERROR(w->WriteData(h.data(), h.size()));
  *writer = std::move(w);
  return Status::OK();
}

// --- Across fork() -------------------------------------------------------

// The writers alive in this process.  A fork() child drops its copies of
// their descriptors at once (DropDescriptors, from a pthread_atfork
// handler): the build lock is an flock(2), which belongs to the open file
// the parent and the child then share, so the child's copy of the
// directory's descriptor would keep the directory locked after the
// parent's writer is gone, refusing the parent's next writer there for as
// long as the child lives.  The handlers hold mu across the fork, so the
// child sees the set whole.
struct PackWriterImpl::Live {
  std::mutex mu;
  std::set<PackWriterImpl*> writers;

  static Live& Get() {
    static Live* live = [] {
      Live* l = new Live;  // never destroyed: a writer may outlive statics
      ::pthread_atfork([] { Get().mu.lock(); }, [] { Get().mu.unlock(); },
                       [] {
                         Live& g = Get();
                         for (PackWriterImpl* w : g.writers) {
                           w->DropDescriptors();
                         }
                         g.mu.unlock();
                       });
      return l;
    }();
    return *live;
  }
};

PackWriterImpl::PackWriterImpl() : owner_pid_(::getpid()) {
  Live& live = Live::Get();
  std::lock_guard<std::mutex> l(live.mu);
  live.writers.insert(this);
}

PackWriterImpl::~PackWriterImpl() {
  {
    Live& live = Live::Get();
    std::lock_guard<std::mutex> l(live.mu);
    live.writers.erase(this);
  }
  if (!finished_) Abandon();
  if (dir_fd_ >= 0) ::close(dir_fd_);  // releases the lock
}

// In a fork() child, before anything else runs: only close(2), which is
// async-signal-safe (the parent may have had other threads).
void PackWriterImpl::DropDescriptors() {
  for (int* fd : {&dir_fd_, &data_fd_, &index_fd_}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

Status PackWriterImpl::CheckOwner() const {
  const pid_t self = ::getpid();
  if (self == owner_pid_) return Status::OK();
  return Status::InvalidArgument(
      out_dir_ + ": this pack writer was opened by process " +
      std::to_string(owner_pid_) + "; this is process " + std::to_string(self) +
      ": a writer cannot be used across fork() (its files are the other "
      "process's); open one per process");
}

Status PackWriterImpl::Usable() const {
  UFSPACK_RETURN_IF_ERROR(CheckOwner());
  return status_;
}

void PackWriterImpl::Release() {
  DropDescriptors();
  data_tmp_.clear();
  index_tmp_.clear();
  buffer_.clear();
  for (auto* f : {&records_file_, &names_file_, &hashes_file_, &lookup_file_}) {
    if (*f) (*f)->Forget();
  }
  if (status_.ok()) status_ = CheckOwner();
}

void PackWriterImpl::Abandon() {
  if (!CheckOwner().ok()) return Release();  // the files are the owner's
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
  for (auto* f : {&records_file_, &names_file_, &hashes_file_, &lookup_file_}) {
    if (*f) (*f)->Remove();
  }
  if (status_.ok() && !finished_) status_ = Status::Aborted("pack abandoned");
}

Status PackWriterImpl::Fail(Status s) {
  if (status_.ok()) status_ = s;
  return s;
}

Status PackWriterImpl::WriteData(const char* p, size_t n) {
  if (buffer_.size() + n > kWriteBufferSize) {
    UFSPACK_RETURN_IF_ERROR(FlushData());
    if (n >= kWriteBufferSize) {
      Status s = internal::WriteAll(data_fd_, p, n, data_tmp_);
      if (!s.ok()) return Fail(s);
      data_offset_ += n;
      return Status::OK();
    }
  }
  buffer_.append(p, n);
  data_offset_ += n;
  return Status::OK();
}

Status PackWriterImpl::FlushData() {
  if (buffer_.empty()) return Status::OK();
  Status s =
      internal::WriteAll(data_fd_, buffer_.data(), buffer_.size(), data_tmp_);
  buffer_.clear();
  if (!s.ok()) return Fail(s);
  return Status::OK();
}

Status PackWriterImpl::AddClass(std::string_view name) {
  UFSPACK_RETURN_IF_ERROR(Usable());
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
  c.name_offset = names_file_->size();
  c.name_length = static_cast<uint32_t>(name.size());
  c.first_record = record_count_;
  UFSPACK_RETURN_IF_ERROR(Spill(names_file_.get(), name.data(), name.size()));
  classes_.push_back(c);
  return Status::OK();
}

Status PackWriterImpl::CheckRecord(uint32_t label, std::string_view name) {
  UFSPACK_RETURN_IF_ERROR(CheckLabel(label, name));
  if (record_count_ >= kMaxRecords) {
    return Fail(Status::InvalidArgument("too many records (format limit " +
                                        std::to_string(kMaxRecords) + ")"));
  }
  if (name.size() > UINT32_MAX) {
    return Fail(Status::InvalidArgument("record name too long"));
  }
  return Status::OK();
}

Status PackWriterImpl::CheckLabel(uint32_t label, std::string_view name) {
  if (in_run_ && run_labels_deferred_ && label == kNoLabel) {
    return Status::OK();  // set and checked by EndRun(assign)
  }
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
  if (!in_run_ && record_count_ > 0 && label < last_label_) {
    return Fail(Status::InvalidArgument(
        std::string(name) + ": label " + std::to_string(label) +
        " after label " + std::to_string(last_label_) +
        " (records must be added class by class)"));
  }
  return Status::OK();
}

Status PackWriterImpl::AppendEntry(std::string_view name, uint32_t label,
                                   Codec codec, uint64_t stored,
                                   uint64_t original, uint64_t checksum) {
  RecordEntry e;
  e.offset = data_offset_ - stored;
  e.stored_length = stored;
  e.original_length = original;
  e.checksum = checksum;
  e.name_length = static_cast<uint32_t>(name.size());
  e.label = label;
  e.codec = codec;
  if (in_run_) {
    held_.push_back({run_position_, e, std::string(name)});
    ++record_count_;
    return Status::OK();
  }
  ++record_count_;
  return EnterRecord(name, e);
}

Status PackWriterImpl::EnterRecord(std::string_view name,
                                   const RecordEntry& entry) {
  RecordEntry e = entry;
  e.name_offset = names_file_->size();
  const uint64_t hash = NameHash(name);
  e.name_hash = NameHashTag(hash);
  std::string encoded;
  e.EncodeTo(&encoded);
  char h[8];
  EncodeFixed64(h, hash);
  UFSPACK_RETURN_IF_ERROR(Spill(names_file_.get(), name.data(), name.size()));
  UFSPACK_RETURN_IF_ERROR(
      Spill(records_file_.get(), encoded.data(), encoded.size()));
  UFSPACK_RETURN_IF_ERROR(Spill(hashes_file_.get(), h, sizeof(h)));
  last_label_ = e.label;
  if (!options_.flat) classes_[e.label].record_count++;
  return Status::OK();
}

Status PackWriterImpl::BeginRun() {
  UFSPACK_RETURN_IF_ERROR(Usable());
  if (in_run_) return Fail(Status::InvalidArgument("BeginRun() in a run"));
  in_run_ = true;
  held_.clear();
  return Status::OK();
}

Status PackWriterImpl::BeginDeferredRun() {
  UFSPACK_RETURN_IF_ERROR(BeginRun());
  run_labels_deferred_ = true;
  return Status::OK();
}

Status PackWriterImpl::EndRun(const RunAssigner& assign) {
  UFSPACK_RETURN_IF_ERROR(Usable());
  if (!in_run_ || !run_labels_deferred_) {
    return Fail(
        Status::InvalidArgument("EndRun(assign) outside a deferred run"));
  }
  run_labels_deferred_ = false;
  const size_t n = held_.size();
  std::vector<uint64_t> positions(n);
  std::vector<uint32_t> labels(n);
  {
    std::vector<std::string_view> names(n);
    for (size_t k = 0; k < n; ++k) {
      names[k] = held_[k].name;
      positions[k] = held_[k].position;
      labels[k] = held_[k].entry.label;
    }
    Status s = assign(names, &positions, &labels);
    if (!s.ok()) return Fail(s);
  }
  for (size_t k = 0; k < n; ++k) {
    held_[k].position = positions[k];
    held_[k].entry.label = labels[k];
    UFSPACK_RETURN_IF_ERROR(CheckLabel(labels[k], held_[k].name));
  }
  return EndRun();
}

Status PackWriterImpl::EndRun() {
  UFSPACK_RETURN_IF_ERROR(Usable());
  if (!in_run_) return Fail(Status::InvalidArgument("EndRun() outside a run"));
  if (run_labels_deferred_) {
    return Fail(Status::InvalidArgument("EndRun() of a deferred run"));
  }
  in_run_ = false;
  std::sort(held_.begin(), held_.end(),
            [](const HeldRecord& a, const HeldRecord& b) {
              return a.position < b.position;
            });
  for (size_t k = 0; k < held_.size(); ++k) {
    const HeldRecord& h = held_[k];
    if (k > 0 && h.position == held_[k - 1].position) {
      return Fail(Status::InvalidArgument(
          h.name + ": run position " + std::to_string(h.position) +
          " given twice (also to " + held_[k - 1].name + ")"));
    }
    // The labels' order is checked here, in index order, as Add*() checks
    // it outside a run.
    if (!options_.flat && h.entry.label < last_label_ &&
        record_count_ - held_.size() + k > 0) {
      return Fail(Status::InvalidArgument(
          h.name + ": label " + std::to_string(h.entry.label) +
          " after label " + std::to_string(last_label_) +
          " (records must be added class by class)"));
    }
    UFSPACK_RETURN_IF_ERROR(EnterRecord(h.name, h.entry));
  }
  held_.clear();
  held_.shrink_to_fit();
  return Status::OK();
}

Status PackWriterImpl::Spill(SpillFile* file, const void* p, size_t n) {
  Status s = file->Append(p, n);
  if (!s.ok()) return Fail(s);
  return Status::OK();
}

Status PackWriterImpl::Add(std::string_view name, uint32_t label,
                           std::string_view bytes) {
  UFSPACK_RETURN_IF_ERROR(Usable());
  PreparedRecord r;
  Status s = PrepareRecord(std::string(bytes), options_, &r);
  if (!s.ok()) return Fail(s);
  return AddPrepared(name, label, r);
}

Status PackWriterImpl::AddPrepared(std::string_view name, uint32_t label,
                                   const PreparedRecord& r) {
  UFSPACK_RETURN_IF_ERROR(Usable());
  UFSPACK_RETURN_IF_ERROR(CheckRecord(label, name));
  UFSPACK_RETURN_IF_ERROR(WriteData(r.stored.data(), r.stored.size()));
  return AppendEntry(name, label, r.codec, r.stored.size(), r.original_length,
                     r.checksum);
}

Status PackWriterImpl::AddFromFd(std::string_view name, uint32_t label, int fd,
                                 uint64_t size, const std::string& path) {
  struct stat before;
  const bool have_before = ::fstat(fd, &before) == 0;
  auto read = [&](char* buf, size_t cap, size_t* got) -> Status {
    for (;;) {
      const ssize_t r = ::read(fd, buf, cap);
      if (r >= 0) {
        *got = static_cast<size_t>(r);
        return Status::OK();
      }
      if (errno != EINTR) return Status::FromErrno(path + ": read", errno);
    }
  };
  auto check = [&](uint64_t done) -> Status {
    if (done != size || (have_before && internal::ChangedSince(fd, before))) {
      return internal::ChangedWhileRead(path, size, done);
    }
    return Status::OK();
  };
  return AddStreamed(name, label, size, read, check);
}

Status PackWriterImpl::AddStreamed(
    std::string_view name, uint32_t label, uint64_t size,
    const ChunkReader& read, const std::function<Status(uint64_t)>& check) {
  UFSPACK_RETURN_IF_ERROR(Usable());
  UFSPACK_RETURN_IF_ERROR(CheckRecord(label, name));
  UFSPACK_RETURN_IF_ERROR(FlushData());
  const uint64_t start = data_offset_;
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
    size_t got = 0;
    Status s = read(chunk.data(), chunk.size(), &got);
    if (!s.ok()) return rewind(s);
    if (got == 0) break;
    done += got;
    if (done > size) break;
    UFSPACK_XXH3_UPDATE(state.get(), chunk.data(), got);
    s = internal::WriteAll(data_fd_, chunk.data(), got, data_tmp_);
    if (!s.ok()) return Fail(s);
  }
  Status s = check(done);
  if (!s.ok()) return rewind(s);
  data_offset_ += size;
  return AppendEntry(name, label, Codec::kRaw, size, size,
                     XXH3_64bits_digest(state.get()));
}

Status PackWriterImpl::SetMetadata(std::string_view key,
                                   std::string_view value) {
  UFSPACK_RETURN_IF_ERROR(Usable());
  if (key.size() > UINT32_MAX || value.size() > UINT32_MAX) {
    return Fail(Status::InvalidArgument("metadata entry too long"));
  }
  metadata_[std::string(key)] = std::string(value);
  return Status::OK();
}

Status PackWriterImpl::Finish(PackId* pack_id) {
  UFSPACK_RETURN_IF_ERROR(Usable());
  if (finished_) return Status::InvalidArgument("Finish() called twice");
  if (in_run_) return Fail(Status::InvalidArgument("Finish() in a run"));
  UFSPACK_RETURN_IF_ERROR(FlushData());
  IndexHeader header;
  std::string classes, meta;
  UFSPACK_RETURN_IF_ERROR(EncodeIndex(&header, &classes, &meta));
  UFSPACK_RETURN_IF_ERROR(WriteHeadersAndIndex(header, classes, meta));
  UFSPACK_RETURN_IF_ERROR(Publish());
  finished_ = true;
  if (pack_id != nullptr) *pack_id = header.pack_id;
  return Status::OK();
}

// The lookup table's stripe (spill.h): 2^22 slots, 32 MiB of working
// memory, whatever the record count; packs of up to 2^21 records are built
// in one stripe.
constexpr uint64_t kLookupStripeSlots = uint64_t{1} << 22;

Status PackWriterImpl::EncodeIndex(IndexHeader* h, std::string* classes,
                                   std::string* meta) {
  for (auto* f : {&records_file_, &names_file_, &hashes_file_}) {
    Status s = (*f)->Flush();
    if (!s.ok()) return Fail(s);
  }
  // Lookup table: open addressing, linear probing, slots hold index + 1,
  // built in bounded memory from the spilled hashes into a scratch file.
  const uint64_t n = record_count_;
  const uint64_t slots = LookupSlotsFor(n);
  auto name_of = [&](uint64_t i, std::string* name) -> Status {
    char buf[RecordEntry::kEncodedLength];
    UFSPACK_RETURN_IF_ERROR(
        records_file_->ReadAt(i * sizeof(buf), sizeof(buf), buf));
    std::string_view in(buf, sizeof(buf));
    RecordEntry e;
    UFSPACK_RETURN_IF_ERROR(e.DecodeFrom(&in));
    name->resize(e.name_length);
    return names_file_->ReadAt(e.name_offset, e.name_length, name->data());
  };
  auto check_distinct = [&](uint64_t a, uint64_t b) -> Status {
    std::string x, y;
    UFSPACK_RETURN_IF_ERROR(name_of(a, &x));
    UFSPACK_RETURN_IF_ERROR(name_of(b, &y));
    if (x == y) {
      return Status::InvalidArgument("duplicate record name '" + x + "'");
    }
    return Status::OK();
  };
  lookup_file_ = std::make_unique<SpillFile>();
  Status s = lookup_file_->Create(out_dir_, internal::kLookupTmpPrefix);
  if (s.ok()) {
    s = internal::BuildLookupTable(n, *hashes_file_, check_distinct,
                                   kLookupStripeSlots, lookup_file_.get());
  }
  if (!s.ok()) return Fail(s);
  hashes_file_->Remove();

  // Index body: records | classes | lookup | names | meta, contiguous
  // after the header.
  h->optional_flags = options_.flat ? kOptionalFlagFlat : 0;
  h->record_size = RecordEntry::kEncodedLength;
  h->record_count = n;
  h->class_count = classes_.size();
  h->data_size = data_offset_;
  // Records are added class by class, so class c starts after the records
  // of every class before it (classes may be declared before any record).
  uint64_t first = 0;
  for (ClassEntry& c : classes_) {
    c.first_record = first;
    first += c.record_count;
    c.EncodeTo(classes);
  }
  EncodeMetadata(metadata_, meta);
  uint64_t at = IndexHeader::kEncodedLength;
  auto place = [&](Section* sec, uint64_t size) {
    sec->offset = at;
    sec->size = size;
    at += size;
  };
  place(&h->records, records_file_->size());
  place(&h->classes, classes->size());
  place(&h->lookup, slots * 4);
  place(&h->names, names_file_->size());
  place(&h->meta, meta->size());
  h->index_size = at;
  // The body checksum and the pack id, streamed over the sections in order.
  // The pack id is derived from the index body, which holds every record's
  // checksum: the same input gives the same id, different packs differ.
  std::unique_ptr<XXH3_state_t, XXH_errorcode (*)(XXH3_state_t*)> sum(
      XXH3_createState(), XXH3_freeState),
      id(XXH3_createState(), XXH3_freeState);
  if (!sum || !id) return Fail(Status::IOError("out of memory (XXH3 state)"));
  XXH3_64bits_reset(sum.get());
  XXH3_128bits_reset(id.get());
  auto feed = [&](const char* p, size_t len) -> Status {
    XXH3_64bits_update(sum.get(), p, len);
    XXH3_128bits_update(id.get(), p, len);
    return Status::OK();
  };
  s = records_file_->ForEachPiece(feed);
  if (s.ok()) s = feed(classes->data(), classes->size());
  if (s.ok()) s = lookup_file_->ForEachPiece(feed);
  if (s.ok()) s = names_file_->ForEachPiece(feed);
  if (s.ok()) s = feed(meta->data(), meta->size());
  if (!s.ok()) return Fail(s);
  h->body_checksum = XXH3_64bits_digest(sum.get());
  const XXH128_hash_t digest = XXH3_128bits_digest(id.get());
  char idbuf[16];
  EncodeFixed64(idbuf, digest.low64);
  EncodeFixed64(idbuf + 8, digest.high64);
  std::memcpy(h->pack_id.bytes.data(), idbuf, 16);
  s = h->ValidateLayout();
  if (!s.ok()) return Fail(s.WithContext("internal error"));
  return Status::OK();
}

// Steps 6 and 7 of docs/format.md, "Publishing a pack".
Status PackWriterImpl::WriteHeadersAndIndex(const IndexHeader& h,
                                            const std::string& classes,
                                            const std::string& meta) {
  DataHeader dh;
  dh.pack_id = h.pack_id;
  std::string dbytes;
  dh.EncodeTo(&dbytes);
  Status s =
      internal::PwriteAll(data_fd_, dbytes.data(), dbytes.size(), 0, data_tmp_);
  if (s.ok()) s = internal::SyncFile(data_fd_, data_tmp_);
  if (!s.ok()) return Fail(s);

  std::string header;
  h.EncodeTo(&header);
  s = internal::WriteAll(index_fd_, header.data(), header.size(), index_tmp_);
  if (s.ok()) s = records_file_->CopyTo(index_fd_, index_tmp_);
  if (s.ok()) {
    s = internal::WriteAll(index_fd_, classes.data(), classes.size(),
                           index_tmp_);
  }
  if (s.ok()) s = lookup_file_->CopyTo(index_fd_, index_tmp_);
  if (s.ok()) s = names_file_->CopyTo(index_fd_, index_tmp_);
  if (s.ok()) {
    s = internal::WriteAll(index_fd_, meta.data(), meta.size(), index_tmp_);
  }
  if (s.ok()) s = internal::SyncFile(index_fd_, index_tmp_);
  if (s.ok()) s = internal::CloseFile(&data_fd_, data_tmp_);
  if (s.ok()) s = internal::CloseFile(&index_fd_, index_tmp_);
  if (!s.ok()) return Fail(s);
  for (auto* f : {&records_file_, &names_file_, &lookup_file_}) {
    (*f)->Remove();
  }
  return Status::OK();
}

// Steps 8 and 9: the temporaries that were renamed are no longer ours to
// remove.
Status PackWriterImpl::Publish() {
  internal::Publisher publisher(dir_fd_, out_dir_, data_tmp_, index_tmp_);
  Status s = publisher.Publish();
  data_tmp_ = publisher.data_tmp();
  index_tmp_ = publisher.index_tmp();
  if (!s.ok()) return Fail(s);
  return Status::OK();
}

// --- BuildPack --------------------------------------------------------------

}  // namespace internal

// --- PackWriter: the public face ---------------------------------------------

PackWriter::PackWriter(std::unique_ptr<internal::PackWriterImpl> impl)
    : impl_(std::move(impl)) {}
PackWriter::~PackWriter() = default;

Status PackWriter::Create(const std::string& out_dir,
                          const PackWriterOptions& options,
                          std::unique_ptr<PackWriter>* writer) {
  std::unique_ptr<internal::PackWriterImpl> impl;
  UFSPACK_RETURN_IF_ERROR(
      internal::PackWriterImpl::Create(out_dir, options, &impl));
  writer->reset(new PackWriter(std::move(impl)));
  return Status::OK();
}

Status PackWriter::AddClass(std::string_view name) {
  return impl_->AddClass(name);
}
Status PackWriter::Add(std::string_view name, uint32_t label,
                       std::string_view bytes) {
  return impl_->Add(name, label, bytes);
}
Status PackWriter::AddFromFd(std::string_view name, uint32_t label, int fd,
                             uint64_t size, const std::string& path) {
  return impl_->AddFromFd(name, label, fd, size, path);
}
Status PackWriter::SetMetadata(std::string_view key, std::string_view value) {
  return impl_->SetMetadata(key, value);
}
Status PackWriter::Finish(PackId* pack_id) { return impl_->Finish(pack_id); }
void PackWriter::Abandon() { impl_->Abandon(); }
const Status& PackWriter::status() const { return impl_->status(); }
uint64_t PackWriter::record_count() const { return impl_->record_count(); }
uint64_t PackWriter::data_bytes() const { return impl_->data_bytes(); }
const std::string& PackWriter::out_dir() const { return impl_->out_dir(); }

}  // namespace ufspack
