// Copyright 2026 The ufspack Authors.
#include "ufspack/builder.h"

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
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "build_internal.h"
#include "posix_io.h"
#include "publish.h"
#include "read_ahead.h"
#include "scan_entries.h"
#include "source_file.h"
#include "spill.h"
#include "ufspack/coding.h"
#include "ufspack/format.h"
#include "ufspack/manifest.h"
#include "ufspack/parallel.h"

namespace ufspack {
namespace {

constexpr size_t kWriteBufferSize = 4 << 20;
// Files larger than this are streamed by the writer instead of being read
// whole by a worker.
constexpr uint64_t kStreamThreshold = 64ull << 20;
// Source bytes buffered between the reading threads and the writer.
constexpr uint64_t kInFlightBudget = 256ull << 20;

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
  std::unique_ptr<PackWriter> w(new PackWriter());
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
  w->records_file_ = std::make_unique<internal::SpillFile>();
  w->names_file_ = std::make_unique<internal::SpillFile>();
  w->hashes_file_ = std::make_unique<internal::SpillFile>();
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

PackWriter::PackWriter() = default;

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
  for (auto* f : {&records_file_, &names_file_, &hashes_file_, &lookup_file_}) {
    if (*f) (*f)->Remove();
  }
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

Status PackWriter::FlushData() {
  if (buffer_.empty()) return Status::OK();
  Status s =
      internal::WriteAll(data_fd_, buffer_.data(), buffer_.size(), data_tmp_);
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
  c.name_offset = names_file_->size();
  c.name_length = static_cast<uint32_t>(name.size());
  c.first_record = record_count_;
  UFSPACK_RETURN_IF_ERROR(Spill(names_file_.get(), name.data(), name.size()));
  classes_.push_back(c);
  return Status::OK();
}

Status PackWriter::CheckRecord(uint32_t label, std::string_view name) {
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
  if (record_count_ > 0 && label < last_label_) {
    return Fail(Status::InvalidArgument(
        std::string(name) + ": label " + std::to_string(label) +
        " after label " + std::to_string(last_label_) +
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
  e.name_offset = names_file_->size();
  e.name_length = static_cast<uint32_t>(name.size());
  e.label = label;
  const uint64_t hash = NameHash(name);
  e.name_hash = NameHashTag(hash);
  e.codec = codec;
  std::string entry;
  e.EncodeTo(&entry);
  char h[8];
  EncodeFixed64(h, hash);
  UFSPACK_RETURN_IF_ERROR(Spill(names_file_.get(), name.data(), name.size()));
  UFSPACK_RETURN_IF_ERROR(
      Spill(records_file_.get(), entry.data(), entry.size()));
  UFSPACK_RETURN_IF_ERROR(Spill(hashes_file_.get(), h, sizeof(h)));
  ++record_count_;
  last_label_ = label;
  if (!options_.flat) classes_[label].record_count++;
  return Status::OK();
}

Status PackWriter::Spill(internal::SpillFile* file, const void* p, size_t n) {
  Status s = file->Append(p, n);
  if (!s.ok()) return Fail(s);
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
    Status s = internal::WriteAll(data_fd_, chunk.data(),
                                  static_cast<size_t>(r), data_tmp_);
    if (!s.ok()) return Fail(s);
  }
  if (done != size || (have_before && internal::ChangedSince(fd, before))) {
    return rewind(internal::ChangedWhileRead(path, size, done));
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

Status PackWriter::EncodeIndex(IndexHeader* h, std::string* classes,
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
  lookup_file_ = std::make_unique<internal::SpillFile>();
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
Status PackWriter::WriteHeadersAndIndex(const IndexHeader& h,
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
Status PackWriter::Publish() {
  internal::Publisher publisher(dir_fd_, out_dir_, data_tmp_, index_tmp_);
  Status s = publisher.Publish();
  data_tmp_ = publisher.data_tmp();
  index_tmp_ = publisher.index_tmp();
  if (!s.ok()) return Fail(s);
  return Status::OK();
}

// --- BuildPack --------------------------------------------------------------

namespace {

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

bool Cancelled(const BuildOptions& options) {
  return options.cancel != nullptr &&
         options.cancel->load(std::memory_order_relaxed);
}

// Adds a warning to the summary, up to BuildSummary::kMaxWarnings.
void Warn(BuildSummary* summary, std::string w) {
  if (summary->warnings.size() < BuildSummary::kMaxWarnings) {
    summary->warnings.push_back(std::move(w));
  }
}

Status CheckSourceDir(const std::string& src, struct stat* st) {
  if (::stat(src.c_str(), st) != 0) return Status::FromErrno(src, errno);
  if (!S_ISDIR(st->st_mode)) {
    return Status::InvalidArgument(src + ": not a directory");
  }
  return Status::OK();
}

// Whether the pack's own files can show up among the samples: when the
// output directory is the source root, a previous data.ufs / index.ufs and
// this build's temporary files lie at the top of the tree (only listed in
// flat mode).
bool OutputIsRoot(const struct stat& src_st, const struct stat* out_st) {
  return out_st != nullptr && out_st->st_dev == src_st.st_dev &&
         out_st->st_ino == src_st.st_ino;
}

// Leaves the pack's own files out of `entries` (see OutputIsRoot); true if
// any was.
bool DropPackFiles(std::vector<ScanEntry>* entries) {
  auto end = std::remove_if(
      entries->begin(), entries->end(),
      [](const ScanEntry& e) { return internal::IsPackFileName(e.name); });
  if (end == entries->end()) return false;
  entries->erase(end, entries->end());
  return true;
}

}  // namespace

namespace internal {

// Declares the classes, and the metadata that says where the records came
// from and how they were selected.
Status DescribeSource(const std::string& root,
                      const std::vector<std::string>& classes,
                      const BuildOptions& options, PackWriter* writer) {
  for (const std::string& c : classes) {
    UFSPACK_RETURN_IF_ERROR(writer->AddClass(c));
  }
  // Where the files came from, so readers can give the original paths
  // (MyImageFolder.samples).  As given, without trailing slashes.
  UFSPACK_RETURN_IF_ERROR(writer->SetMetadata(kMetaSourceRoot, root));
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
  return writer->SetMetadata(kMetaExtensions, selection);
}

Status DescribeSource(const ScanResult& scan, const BuildOptions& options,
                      PackWriter* writer) {
  return DescribeSource(scan.root, scan.classes, options, writer);
}

}  // namespace internal

namespace {

// Calls BuildOptions::progress from the building thread: while a --part
// build sizes the tree, once the first files are listed, about four times a
// second while packing, and at the end.
class ProgressReporter {
 public:
  explicit ProgressReporter(const BuildOptions& options)
      : report_(options.progress),
        start_(std::chrono::steady_clock::now()),
        last_(start_) {}

  BuildProgress* progress() { return &progress_; }
  // Called before each report, to bring the counts up to date.
  void SetRefresh(std::function<void(BuildProgress*)> refresh) {
    refresh_ = std::move(refresh);
  }
  void ResetClock() { start_ = last_ = std::chrono::steady_clock::now(); }

  void Start() {
    start_ = last_ = std::chrono::steady_clock::now();
    if (refresh_) refresh_(&progress_);
    if (report_) report_(progress_);
  }
  // Reports if a quarter of a second went by since the last report.
  void Tick(const PackWriter& writer) {
    if (!report_) return;
    auto now = std::chrono::steady_clock::now();
    if (now - last_ >= std::chrono::milliseconds(250)) {
      last_ = now;
      Report(writer);
    }
  }
  void Report(const PackWriter& writer) {
    if (refresh_) refresh_(&progress_);
    progress_.bytes_out = writer.data_bytes();
    progress_.seconds = SecondsSince(start_);
    if (report_) report_(progress_);
  }

 private:
  const std::function<void(const BuildProgress&)>& report_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_;
  std::function<void(BuildProgress*)> refresh_;
  BuildProgress progress_;
};

// One source file on its way from a reading thread to the writer: read
// and encoded for storage, or (a large file) open for the writer to
// stream.
struct Slot {
  PreparedRecord record;
  int stream_fd = -1;
  uint64_t stream_size = 0;
};

// Reads the source at `path` into *slot.  Runs on the read-ahead threads.
Status ReadSlot(const std::string& path, const PackWriterOptions& options,
                const internal::ReadAhead::Reserve& reserve, Slot* slot) {
  int fd;
  struct stat st;
  UFSPACK_RETURN_IF_ERROR(internal::OpenSource(path, &fd, &st));
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > kStreamThreshold) {
    slot->stream_fd = fd;
    slot->stream_size = size;
    return Status::OK();
  }
  reserve(size);
  std::string bytes;
  UFSPACK_RETURN_IF_ERROR(internal::ReadSource(fd, path, st, &bytes));
  return PrepareRecord(std::move(bytes), options, &slot->record);
}

// Appends the record read into *slot (closing a streamed source).
Status AddSlot(const ScanEntry& entry, const std::string& path, Slot* slot,
               PackWriter* writer, BuildProgress* progress,
               BuildSummary* summary) {
  Status s;
  if (slot->stream_fd >= 0) {
    s = writer->AddFromFd(entry.name, entry.label, slot->stream_fd,
                          slot->stream_size, path);
    ::close(slot->stream_fd);
    slot->stream_fd = -1;
    if (s.ok()) progress->bytes_in += slot->stream_size;
  } else {
    s = writer->AddPrepared(entry.name, entry.label, slot->record);
    if (s.ok()) progress->bytes_in += slot->record.original_length;
    if (s.ok() && slot->record.codec == Codec::kZstd) summary->compressed++;
  }
  return s;
}

// Reads the files `entries` name (under `root`) with options.threads
// threads in flight and adds them to the pack in order.  A source that
// fails is skipped with a warning under skip_unreadable; any other error
// stops the build.
Status AddRecords(const std::string& root,
                  const std::vector<ScanEntry>& entries,
                  const BuildOptions& options, PackWriter* writer,
                  ProgressReporter* reporter, BuildSummary* summary) {
  internal::ReadAhead::Options ra;
  ra.count = entries.size();
  ra.threads = options.threads;
  ra.window = std::max<size_t>(64, static_cast<size_t>(options.threads) * 4);
  ra.budget = kInFlightBudget;
  ra.stop_on_error = !options.skip_unreadable;
  ra.cancel = options.cancel;
  auto path_of = [&](size_t k) { return root + "/" + entries[k].name; };
  std::vector<Slot> slots(internal::ReadAhead::SlotsFor(ra));
  internal::ReadAhead ahead(
      ra, [&](size_t k, const internal::ReadAhead::Reserve& reserve) {
        return ReadSlot(path_of(k), options.writer, reserve,
                        &slots[k % slots.size()]);
      });

  BuildProgress& progress = *reporter->progress();
  Status result;
  if (Cancelled(options)) result = Status::Aborted("interrupted");
  size_t k;
  Status item;
  for (size_t n = 0; result.ok() && n < ra.count; ++n) {
    if (!ahead.Next(&k, &item)) {
      result = Status::Aborted("interrupted");
      break;
    }
    Slot slot = std::move(slots[k % slots.size()]);
    slots[k % slots.size()] = Slot();
    Status s = item;
    if (s.ok()) {
      s = AddSlot(entries[k], path_of(k), &slot, writer, &progress, summary);
    }
    if (!s.ok()) {
      if (!writer->status().ok() || !options.skip_unreadable) {
        result = s;
        break;
      }
      summary->skipped++;
      Warn(summary, std::string(s.message()) + "; skipped");
    } else {
      progress.files_done++;
    }
    ahead.Done();
    if (Cancelled(options)) {
      result = Status::Aborted("interrupted");
      break;
    }
    reporter->Tick(*writer);
  }
  ahead.Stop();
  for (Slot& slot : slots) {
    if (slot.stream_fd >= 0) ::close(slot.stream_fd);
  }
  return result;
}

// Fills in the summary of a build that published its pack.
void Summarize(uint64_t classes, const PackWriter& writer,
               const BuildProgress& progress, BuildSummary* summary) {
  summary->index_path = writer.out_dir() + "/" + kIndexFileName;
  summary->data_path = writer.out_dir() + "/" + kDataFileName;
  summary->files = progress.files_done;
  summary->classes = classes;
  summary->bytes_in = progress.bytes_in;
  summary->bytes_out = writer.data_bytes();
  struct stat ist;
  if (::stat(summary->index_path.c_str(), &ist) == 0) {
    summary->index_bytes = static_cast<uint64_t>(ist.st_size);
  }
  if (summary->warnings.size() >= BuildSummary::kMaxWarnings) {
    summary->warnings.push_back("(more warnings not shown)");
  }
}

// Publishes the pack written so far (or abandons it on error).
Status FinishPack(Status s, const BuildOptions& options, PackWriter* writer,
                  ProgressReporter* reporter, uint64_t classes,
                  BuildSummary* summary) {
  // A writer-side failure may also be sticky without having been returned.
  if (s.ok()) s = writer->status();
  if (s.ok() && Cancelled(options)) s = Status::Aborted("interrupted");
  if (!s.ok()) {
    writer->Abandon();
    return s;
  }
  UFSPACK_RETURN_IF_ERROR(writer->Finish(&summary->pack_id));
  reporter->Report(*writer);
  Summarize(classes, *writer, *reporter->progress(), summary);
  return Status::OK();
}

// --- Part builds (BuildOptions::parts > 1) -----------------------------------
//
// Two passes over the tree, neither holding its sample list:
//   1. every class is listed and its files stat'ed (in class order, a
//      window of classes at a time); the samples feed the split's hash, and
//      only each class's count, weight and a hash of its samples are kept;
//   2. only the classes this part's range touches are listed again, their
//      samples checked against pass 1 (the hash), the boundary classes cut
//      where the split's targets fall, and the rest packed.

// A class's samples as pass 1 saw them (flat: a directory's, as
// ScanTreeByClass hands them over).
struct ClassWeight {
  uint64_t count = 0;
  uint64_t weight = 0;  // sum of size + 1
  uint64_t hash = 0;    // XXH3-64 of each sample's name, label and size
};

// One cut of the split, SplitSamples's b[i]: the first sample whose
// preceding weights reach `target`.  Pass 1 finds the class holding it,
// `cls` (whose first sample is `start`, the samples before it weighing
// `before`); pass 2 re-lists that class and finds `index` (CutClass).
struct Cut {
  bool fixed = false;    // b[0] = 0 or b[N] = total: no class to re-list
  bool located = false;  // found by pass 2
  uint64_t index = 0;    // b[i] when fixed (or once located)
  uint64_t target = 0;   // ceil(W * i / N)
  uint32_t cls = 0;      // the class holding the cut
  uint64_t start = 0;    // index of that class's first sample
  uint64_t before = 0;   // weight of the samples before that class
};

struct PartPlan {
  uint64_t split = 0;  // kMetaPartSplit
  uint64_t samples = 0;
  std::vector<ClassWeight> classes;  // flat: one per directory with samples
  std::vector<std::string> class_names;
  Cut lo, hi;  // b[part], b[part + 1]
};

// Sizes of `entries` (under `root`), stat'ed with `threads` in flight.  A
// file no job can stat weighs nothing (its read fails later and is skipped
// or fatal) under skip_unreadable, reported in *warnings if not null;
// otherwise it is an error.
Status SizeEntries(const std::string& root,
                   const std::vector<ScanEntry>& entries,
                   const BuildOptions& options, std::vector<uint64_t>* sizes,
                   std::vector<std::string>* warnings) {
  const size_t n = entries.size();
  sizes->assign(n, 0);
  std::vector<int> errnos(n, 0);
  ParallelFor(n, options.threads, [&](size_t k) {
    struct stat st;
    const std::string path = root + "/" + entries[k].name;
    if (::stat(path.c_str(), &st) == 0) {
      (*sizes)[k] = static_cast<uint64_t>(st.st_size);
    } else {
      errnos[k] = errno;
    }
  });
  for (size_t k = 0; k < n; ++k) {
    if (errnos[k] == 0) continue;
    Status e = Status::FromErrno(root + "/" + entries[k].name, errnos[k]);
    if (!options.skip_unreadable) {
      return e.WithContext("--part needs every file's size");
    }
    if (warnings != nullptr) {
      warnings->push_back(e.ToString() + "; weighs 0 in the part split");
    }
  }
  return Status::OK();
}

class Hasher {
 public:
  Hasher() : state_(XXH3_createState()) { Reset(); }
  ~Hasher() { XXH3_freeState(state_); }
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;
  bool ok() const { return state_ != nullptr; }
  void Reset() {
    if (state_ != nullptr) XXH3_64bits_reset(state_);
  }
  void Put(const void* p, size_t len) {
    if (state_ != nullptr) UFSPACK_XXH3_UPDATE(state_, p, len);
  }
  void Put64(uint64_t v) {
    char b[8];
    EncodeFixed64(b, v);
    Put(b, 8);
  }
  void PutSample(const ScanEntry& e, uint64_t size) {
    Put64(e.name.size());
    Put(e.name.data(), e.name.size());
    Put64(e.label);
    Put64(size);
  }
  uint64_t Digest() const { return XXH3_64bits_digest(state_); }

 private:
  XXH3_state_t* state_;
};

// Pass 1: lists and sizes the whole tree, computes the split's hash and
// where this part's cuts fall.
Status PlanPart(const std::string& src, const BuildOptions& options,
                bool drop_pack_files, ProgressReporter* reporter,
                PartPlan* plan, BuildSummary* summary) {
  Hasher split, cls_hash;
  if (!split.ok() || !cls_hash.ok()) return Status::IOError("out of memory");
  static constexpr char kDomain[] = "ufspack-split";
  split.Put(kDomain, sizeof(kDomain));
  split.Put64(options.parts);
  std::vector<std::string> empty, weightless;
  std::vector<uint64_t> sizes;
  bool dropped = false;
  ScanResult scan;
  BuildProgress& progress = *reporter->progress();
  progress.splitting = true;
  progress.scan_done = false;
  // The first class is reported at once, then four times a second.
  auto last_report = std::chrono::steady_clock::time_point();
  // The class table, hashed before the first sample (flat: none).
  bool hashed_classes = false;
  auto hash_classes = [&] {
    hashed_classes = true;
    split.Put64(scan.classes.size());
    for (const std::string& c : scan.classes) {
      split.Put64(c.size());
      split.Put(c.data(), c.size());
    }
  };
  Status s = ScanTreeByClass(
      src, options.scan, nullptr,
      [&](ScanClass* cls) -> Status {
        if (Cancelled(options)) return Status::Aborted("interrupted");
        if (!hashed_classes) {
          hash_classes();
          progress.classes_total = scan.classes.size();
        }
        if (drop_pack_files && DropPackFiles(&cls->entries)) dropped = true;
        UFSPACK_RETURN_IF_ERROR(
            SizeEntries(scan.root, cls->entries, options, &sizes, &weightless));
        ClassWeight w;
        cls_hash.Reset();
        for (size_t k = 0; k < cls->entries.size(); ++k) {
          split.PutSample(cls->entries[k], sizes[k]);
          cls_hash.PutSample(cls->entries[k], sizes[k]);
          w.weight += sizes[k] + 1;
        }
        w.count = cls->entries.size();
        w.hash = cls_hash.Digest();
        if (w.count == 0 && !options.scan.flat) {
          empty.push_back(scan.classes[cls->label]);
        }
        plan->classes.push_back(w);
        plan->samples += w.count;
        progress.files_total = plan->samples;
        if (!options.scan.flat) progress.classes_scanned = plan->classes.size();
        auto now = std::chrono::steady_clock::now();
        if (options.progress &&
            now - last_report >= std::chrono::milliseconds(250)) {
          last_report = now;
          options.progress(progress);
        }
        return Status::OK();
      },
      &scan);
  summary->skipped += scan.skipped;
  for (std::string& w : scan.warnings) Warn(summary, std::move(w));
  for (std::string& w : weightless) Warn(summary, std::move(w));
  if (dropped) {
    Warn(summary, src +
                      ": the output directory is the source root; not packing "
                      "the pack's own files");
  }
  UFSPACK_RETURN_IF_ERROR(s);
  if (!empty.empty() && !options.scan.allow_empty) {
    return EmptyClassesError(scan.root, empty, options.scan);
  }
  progress.scan_done = true;  // the tree is sized
  if (options.progress) options.progress(progress);
  if (!hashed_classes) hash_classes();  // a flat tree with no file
  // The sample count goes last: it is known only now.
  split.Put64(plan->samples);
  plan->split = split.Digest();
  plan->class_names = std::move(scan.classes);
  progress.splitting = false;

  // The cuts b[part] and b[part + 1] (SplitSamples): the class holding the
  // first sample whose preceding weights reach ceil(W * i / N).
  unsigned __int128 total = 0;
  for (const ClassWeight& w : plan->classes) total += w.weight;
  auto place = [&](uint32_t i, Cut* cut) {
    if (i == 0 || i == options.parts || total == 0) {
      cut->fixed = true;
      cut->index = i == 0 || total == 0 ? 0 : plan->samples;
      cut->cls = i == 0 || total == 0
                     ? 0
                     : static_cast<uint32_t>(plan->classes.size() - 1);
      return;
    }
    cut->target =
        static_cast<uint64_t>((total * i + options.parts - 1) / options.parts);
    uint64_t before = 0, start = 0;
    for (size_t c = 0; c < plan->classes.size(); ++c) {
      const ClassWeight& w = plan->classes[c];
      if (before + w.weight >= cut->target) {
        cut->cls = static_cast<uint32_t>(c);
        cut->start = start;
        cut->before = before;
        return;
      }
      before += w.weight;
      start += w.count;
    }
  };
  place(options.part, &plan->lo);
  place(options.part + 1, &plan->hi);
  return Status::OK();
}

constexpr char kChangedDuringPart[] = "changed while the part was built";
constexpr char kSameTree[] = "every part of a split must see the same tree";

// Pass 2, for one re-listed class: checks it against pass 1 and cuts it to
// the part's range.
Status CutClass(const std::string& root, uint32_t c,
                const BuildOptions& options, PartPlan* plan, ScanClass* cls) {
  std::vector<uint64_t> sizes;
  UFSPACK_RETURN_IF_ERROR(
      SizeEntries(root, cls->entries, options, &sizes, nullptr));
  Hasher h;
  if (!h.ok()) return Status::IOError("out of memory");
  for (size_t k = 0; k < cls->entries.size(); ++k) {
    h.PutSample(cls->entries[k], sizes[k]);
  }
  const ClassWeight& w = plan->classes[c];
  if (cls->entries.size() != w.count || h.Digest() != w.hash) {
    const std::string where =
        options.scan.flat ? root : root + "/" + plan->class_names[c];
    return Status::IOError(
        where + ": " + kChangedDuringPart + " (" +
        std::to_string(cls->entries.size()) + " files now, " +
        std::to_string(w.count) +
        " with other names or sizes when the split was computed); " +
        kSameTree);
  }
  // The first sample of the class whose preceding weights reach the cut.
  auto locate = [&](Cut* cut) -> size_t {
    uint64_t sum = cut->before;
    size_t j = 0;
    while (j < sizes.size() && sum < cut->target) sum += sizes[j++] + 1;
    cut->index = cut->start + j;
    cut->located = true;
    return j;
  };
  size_t end = cls->entries.size(), begin = 0;
  if (!plan->hi.fixed && plan->hi.cls == c) end = locate(&plan->hi);
  if (!plan->lo.fixed && plan->lo.cls == c) begin = locate(&plan->lo);
  cls->entries.erase(cls->entries.begin() + static_cast<ptrdiff_t>(end),
                     cls->entries.end());
  cls->entries.erase(cls->entries.begin(),
                     cls->entries.begin() + static_cast<ptrdiff_t>(begin));
  return Status::OK();
}

Status RecordPart(const BuildOptions& options, const PartPlan& plan,
                  PackWriter* writer, BuildSummary* summary) {
  const uint64_t first = plan.lo.index, count = plan.hi.index - plan.lo.index;
  summary->part_first = first;
  summary->part_samples = count;
  summary->split_samples = plan.samples;
  UFSPACK_RETURN_IF_ERROR(writer->SetMetadata(
      kMetaPart,
      std::to_string(options.part) + "/" + std::to_string(options.parts)));
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx",
                static_cast<unsigned long long>(plan.split));
  UFSPACK_RETURN_IF_ERROR(writer->SetMetadata(kMetaPartSplit, hex));
  return writer->SetMetadata(kMetaPartRange, std::to_string(first) + " " +
                                                 std::to_string(count) + " " +
                                                 std::to_string(plan.samples));
}

// --- The scan, a class at a time, ahead of the packing -----------------------

// Classes handed from the scanning thread to the building thread.  Holds at
// most `capacity` samples, unless one class alone has more (a class is
// never split).
class ClassQueue {
 public:
  explicit ClassQueue(size_t capacity) : capacity_(capacity) {}

  // Scanning thread.  Blocks while the queue is full; false once the
  // building thread stopped it.
  bool Push(ScanClass* cls) {
    std::unique_lock<std::mutex> lock(mu_);
    auto fits = [&] {
      return stopped_ || buffered_ == 0 ||
             buffered_ + cls->entries.size() <= capacity_;
    };
    if (!fits()) {
      // The building thread may be waiting for more samples (WaitFor):
      // it must take what there is.
      const auto t0 = std::chrono::steady_clock::now();
      blocked_ = true;
      changed_.notify_all();
      not_full_.wait(lock, fits);
      blocked_ = false;
      blocked_seconds_ += SecondsSince(t0);
    }
    if (stopped_) return false;
    buffered_ += cls->entries.size();
    listed_ += cls->entries.size();
    if (!names_.empty()) ++classes_;
    queue_.push_back(std::move(*cls));
    changed_.notify_all();
    return true;
  }
  void SetClasses(const std::vector<std::string>& names, size_t wanted) {
    std::lock_guard<std::mutex> lock(mu_);
    names_ = names;
    wanted_ = names.empty() ? 0 : wanted;
  }
  void Finish(Status s) {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    status_ = std::move(s);
    changed_.notify_all();
  }
  void Stop() {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
    not_full_.notify_all();
  }

  // Building thread.  Waits until more than `n` samples wait, the scan is
  // over or cannot go on until some are taken; false if cancelled.  Calls
  // `idle` about every 100 ms while it waits.
  bool WaitFor(size_t n, const std::atomic<bool>* cancel,
               const std::function<void()>& idle) {
    std::unique_lock<std::mutex> lock(mu_);
    while (!done_ && !blocked_ && buffered_ <= n) {
      if (!Poll(&lock, cancel, idle)) return false;
    }
    return true;
  }
  // The next class; false when the scan is over and every class was taken,
  // at once when the scan failed, or when cancelled.
  bool Pop(ScanClass* out, const std::atomic<bool>* cancel,
           const std::function<void()>& idle) {
    std::unique_lock<std::mutex> lock(mu_);
    while (!done_ && queue_.empty()) {
      if (!Poll(&lock, cancel, idle)) return false;
    }
    if (queue_.empty() || (done_ && !status_.ok())) return false;
    *out = std::move(queue_.front());
    queue_.pop_front();
    buffered_ -= out->entries.size();
    not_full_.notify_all();
    return true;
  }
  // Progress, as of now: samples and classes listed, of how many classes.
  void Describe(BuildProgress* p) {
    std::lock_guard<std::mutex> lock(mu_);
    p->files_total = listed_;
    p->classes_scanned = classes_;
    p->classes_total = wanted_;
    p->scan_done = done_;
  }
  std::vector<std::string> names() {
    std::lock_guard<std::mutex> lock(mu_);
    return names_;
  }
  bool done() {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }
  Status status() {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }
  // Time the scanning thread spent waiting for room.
  double blocked_seconds() {
    std::lock_guard<std::mutex> lock(mu_);
    return blocked_seconds_;
  }

 private:
  bool Poll(std::unique_lock<std::mutex>* lock, const std::atomic<bool>* cancel,
            const std::function<void()>& idle) {
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) {
      return false;
    }
    changed_.wait_for(*lock, std::chrono::milliseconds(100));
    if (idle) {
      lock->unlock();
      idle();
      lock->lock();
    }
    return true;
  }

  const size_t capacity_;
  std::mutex mu_;
  std::condition_variable changed_, not_full_;
  std::deque<ScanClass> queue_;
  size_t buffered_ = 0;
  uint64_t listed_ = 0;
  uint64_t classes_ = 0;
  uint64_t wanted_ = 0;
  std::vector<std::string> names_;
  bool done_ = false;
  bool stopped_ = false;
  bool blocked_ = false;
  double blocked_seconds_ = 0;
  Status status_;
};

}  // namespace

std::vector<uint64_t> SplitSamples(const std::vector<uint64_t>& sizes,
                                   uint32_t parts) {
  const uint64_t n = sizes.size();
  std::vector<uint64_t> prefix(n + 1, 0);  // weights of samples [0, k)
  for (uint64_t k = 0; k < n; ++k) prefix[k + 1] = prefix[k] + sizes[k] + 1;
  const unsigned __int128 total = prefix[n];
  std::vector<uint64_t> bounds(parts + 1, n);
  bounds[0] = 0;
  for (uint32_t i = 1; i < parts; ++i) {
    // The first k with prefix[k] >= ceil(total * i / parts).
    const uint64_t target =
        static_cast<uint64_t>((total * i + parts - 1) / parts);
    bounds[i] = static_cast<uint64_t>(
        std::lower_bound(prefix.begin(), prefix.end(), target) -
        prefix.begin());
  }
  return bounds;
}

Status BuildPack(const std::string& src, const std::string& out_dir,
                 const BuildOptions& options_in, BuildSummary* summary) {
  const auto t0 = std::chrono::steady_clock::now();
  BuildOptions options = options_in;
  options.writer.flat = options.scan.flat;
  if (options.skip_unreadable) options.scan.skip_unreadable = true;
  options.scan.threads = std::min(options.threads, 64);
  if (options.threads < 1) {
    return Status::InvalidArgument("--threads must be at least 1");
  }
  if (options.parts < 1 || options.part >= options.parts) {
    return Status::InvalidArgument("part " + std::to_string(options.part) +
                                   " of " + std::to_string(options.parts) +
                                   ": expected 0 <= part < parts");
  }
  *summary = BuildSummary();
  struct stat src_st;
  UFSPACK_RETURN_IF_ERROR(CheckSourceDir(src, &src_st));

  std::unique_ptr<PackWriter> writer;
  UFSPACK_RETURN_IF_ERROR(PackWriter::Create(out_dir, options.writer, &writer));
  struct stat out_st;
  const bool out_known = ::stat(writer->out_dir().c_str(), &out_st) == 0;
  if (out_known) {
    // Never descend into the output directory.
    options.scan.exclude_dev = out_st.st_dev;
    options.scan.exclude_ino = out_st.st_ino;
  }
  const bool drop_pack_files =
      OutputIsRoot(src_st, out_known ? &out_st : nullptr);
  std::string root = src;  // as ScanTreeByClass gives it
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  ProgressReporter reporter(options);
  BuildProgress& progress = *reporter.progress();
  const size_t scan_ahead = std::max<size_t>(options.scan_ahead, 4);
  options.scan.max_held_files = scan_ahead;

  // A part build sizes the whole tree first (pass 1), then lists only the
  // classes its range touches.
  const bool part_build = options.parts > 1;
  PartPlan plan;
  if (part_build) {
    options.scan.cancel = options.cancel;
    UFSPACK_RETURN_IF_ERROR(
        PlanPart(src, options, drop_pack_files, &reporter, &plan, summary));
    summary->scan_seconds = SecondsSince(t0);
    progress = BuildProgress();
    reporter.ResetClock();
  }
  // The scanning thread stops (between directories) when the building
  // thread does: on an error, Ctrl-C, or when done.
  std::atomic<bool> scan_stop{false};
  options.scan.cancel = &scan_stop;
  // Pass 2 lists the classes from the first cut's to the second's.  (A flat
  // tree is listed whole: its directories, the units of pass 1 there, are
  // only known as it is walked; the sink skips those out of range.)
  auto want = [&](uint32_t label) {
    if (!part_build) return true;
    if (options.scan.flat) return plan.samples > 0;
    return plan.samples > 0 && label >= plan.lo.cls && label <= plan.hi.cls;
  };
  uint64_t units = 0;  // classes (flat: directories) handed over

  // The scan runs on a thread of its own, ahead of the packing by at most
  // options.scan_ahead samples, and hands classes over in order.
  // Samples packed per read-ahead run: large enough (by default) that the
  // pipeline's drain at the end of a run costs nothing measurable.
  const size_t chunk_samples = scan_ahead / 4;
  ClassQueue queue(scan_ahead);
  ScanResult scan;       // the scanning thread's until it is joined
  bool dropped = false;  // likewise
  const std::string changed_classes =
      root + ": " + kChangedDuringPart +
      " (its class directories differ from those when the split was "
      "computed); " +
      kSameTree;
  double walk_seconds = 0;  // the scanning thread's until it is joined
  auto scan_body = [&] {
    const auto walk_t0 = std::chrono::steady_clock::now();
    bool first = true;
    Status s = ScanTreeByClass(
        src, options.scan, want,
        [&](ScanClass* cls) -> Status {
          if (first) {
            first = false;
            if (part_build && scan.classes != plan.class_names) {
              return Status::IOError(changed_classes);
            }
            size_t wanted = 0;
            for (size_t c = 0; c < scan.classes.size(); ++c) {
              if (want(static_cast<uint32_t>(c))) ++wanted;
            }
            queue.SetClasses(scan.classes, wanted);
          }
          if (drop_pack_files && DropPackFiles(&cls->entries)) {
            dropped = true;
          }
          if (part_build) {
            const uint64_t c = options.scan.flat ? units : cls->label;
            ++units;
            if (c >= plan.classes.size()) {
              return Status::IOError(changed_classes);
            }
            if (c < plan.lo.cls || c > plan.hi.cls) return Status::OK();
            UFSPACK_RETURN_IF_ERROR(
                CutClass(root, static_cast<uint32_t>(c), options, &plan, cls));
          }
          if (!queue.Push(cls)) return Status::Aborted("interrupted");
          return Status::OK();
        },
        &scan);
    // A part whose cuts were not both found (a class gone) is not the
    // part the other jobs agree on.
    if (s.ok() && part_build &&
        (scan.classes != plan.class_names ||
         (options.scan.flat && plan.samples > 0 &&
          units != plan.classes.size()) ||
         (!plan.lo.fixed && !plan.lo.located) ||
         (!plan.hi.fixed && !plan.hi.located))) {
      s = Status::IOError(changed_classes);
    }
    walk_seconds = SecondsSince(walk_t0);
    queue.Finish(std::move(s));
  };
  std::thread scanner;
  try {
    scanner = std::thread(scan_body);
  } catch (const std::system_error& e) {
    writer->Abandon();
    return Status::IOError(std::string("cannot start a thread: ") + e.what());
  }
  struct Joiner {
    ClassQueue& queue;
    std::atomic<bool>& stop;
    std::thread& thread;
    ~Joiner() {
      stop = true;
      queue.Stop();
      if (thread.joinable()) thread.join();
    }
  } joiner{queue, scan_stop, scanner};
  reporter.SetRefresh([&](BuildProgress* p) { queue.Describe(p); });

  // Pack the classes as they come, chunk_samples at a time.  The first run
  // waits for chunk_samples or the whole scan: a tree that small is listed
  // whole first, so its empty classes and scan errors stop the build before
  // any file is read and its progress has an exact total from the start.
  // While it waits for the scan the building thread still reports (and
  // so notices a Ctrl-C the callback raises).
  auto idle = [&] { reporter.Tick(*writer); };
  Status s;
  if (!queue.WaitFor(chunk_samples, options.cancel, idle)) {
    s = Status::Aborted("interrupted");
  }
  // The class table: pass 1's, or the scan's (set before its first class).
  std::vector<std::string> names;
  bool named = false;
  auto name_classes = [&] {
    if (named) return;
    named = true;
    names = part_build ? plan.class_names : queue.names();
  };
  std::vector<std::string> empty;
  std::vector<ScanEntry> chunk;
  bool started = false, more = true;
  while (s.ok() && more) {
    chunk.clear();
    ScanClass cls;
    while (chunk.size() < chunk_samples) {
      if (!queue.Pop(&cls, options.cancel, idle)) {
        more = false;
        break;
      }
      name_classes();
      if (cls.entries.empty() && !options.scan.flat && !part_build &&
          !options.scan.allow_empty) {
        empty.push_back(names[cls.label]);
      }
      if (!empty.empty()) continue;  // the build fails: list the rest only
      internal::MoveEntries(&cls.entries, &chunk);
    }
    if (Cancelled(options)) {
      s = Status::Aborted("interrupted");
      break;
    }
    if (!more) {
      // The scan's own error comes first (it may be why no class came).
      if (queue.done()) {
        s = queue.status();
      } else {
        s = Status::Aborted("interrupted");
      }
      if (!s.ok()) break;
    }
    if (!empty.empty() || chunk.empty()) continue;
    if (!started) {
      started = true;
      s = internal::DescribeSource(root, names, options, writer.get());
      if (!s.ok()) break;
      reporter.Start();
    }
    s = AddRecords(root, chunk, options, writer.get(), &reporter, summary);
  }
  scan_stop = true;
  queue.Stop();
  scanner.join();
  // Listing time: pass 1, and the scanning thread's time not spent waiting
  // for the packing to take what it listed.
  summary->scan_seconds +=
      std::max(0.0, walk_seconds - queue.blocked_seconds());
  // The scan's warnings go first, as the scan came first.
  {
    std::vector<std::string> read_warnings = std::move(summary->warnings);
    summary->warnings.clear();
    if (!part_build) {
      for (std::string& w : scan.warnings) Warn(summary, std::move(w));
      summary->skipped += scan.skipped;
      if (dropped) {
        Warn(summary, src +
                          ": the output directory is the source root; not "
                          "packing the pack's own files");
      }
    } else if (!s.ok()) {
      // Pass 1 reported the tree's warnings; pass 2's may say why its
      // classes changed (a directory now unreadable, skipped).
      for (std::string& w : scan.warnings) Warn(summary, std::move(w));
    }
    for (std::string& w : read_warnings) Warn(summary, std::move(w));
  }
  if (s.ok() && !empty.empty()) {
    s = EmptyClassesError(root, empty, options.scan);
  }
  if (s.ok() && !started) {
    // Nothing to pack (empty classes allowed, or a part with no sample):
    // still a valid pack, with its class table.
    name_classes();
    s = internal::DescribeSource(root, names, options, writer.get());
    if (s.ok()) reporter.Start();
  }
  if (s.ok() && part_build)
    s = RecordPart(options, plan, writer.get(), summary);
  const uint64_t classes = options.scan.flat ? 0 : names.size();
  UFSPACK_RETURN_IF_ERROR(
      FinishPack(s, options, writer.get(), &reporter, classes, summary));
  summary->seconds = SecondsSince(t0);
  return Status::OK();
}

namespace internal {

Status PackRecords(const ScanResult& scan, const BuildOptions& options,
                   PackWriter* writer, BuildSummary* summary) {
  ProgressReporter reporter(options);
  reporter.progress()->files_total = scan.entries.size();
  reporter.progress()->classes_scanned = scan.classes.size();
  reporter.progress()->classes_total = scan.classes.size();
  reporter.Start();
  Status s =
      AddRecords(scan.root, scan.entries, options, writer, &reporter, summary);
  return FinishPack(s, options, writer, &reporter, scan.classes.size(),
                    summary);
}

}  // namespace internal

}  // namespace ufspack
