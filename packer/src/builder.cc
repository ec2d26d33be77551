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
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "build_internal.h"
#include "posix_io.h"
#include "publish.h"
#include "read_ahead.h"
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

// Lists the files to pack (ScanTree), never descending into the output
// directory `out_st` (null if it could not be stat'ed).
Status ScanSources(const std::string& src, const struct stat* out_st,
                   BuildOptions* options, ScanResult* scan,
                   BuildSummary* summary) {
  if (out_st != nullptr) {
    options->scan.exclude_dev = out_st->st_dev;
    options->scan.exclude_ino = out_st->st_ino;
  }
  UFSPACK_RETURN_IF_ERROR(ScanTree(src, options->scan, scan));
  summary->skipped = scan->skipped;
  for (auto& w : scan->warnings) Warn(summary, std::move(w));
  return Status::OK();
}

// When the output directory is the source root, the pack's own files (a
// previous data.ufs / index.ufs, this build's temporary files) lie at the
// top of the tree (only listed in flat mode): leave them out.
void DropPackFiles(const std::string& src, const struct stat& src_st,
                   const struct stat* out_st, ScanResult* scan,
                   BuildSummary* summary) {
  if (out_st == nullptr || out_st->st_dev != src_st.st_dev ||
      out_st->st_ino != src_st.st_ino) {
    return;
  }
  auto end = std::remove_if(
      scan->entries.begin(), scan->entries.end(),
      [](const ScanEntry& e) { return internal::IsPackFileName(e.name); });
  if (end != scan->entries.end()) {
    Warn(summary, src +
                      ": the output directory is the source root; not packing "
                      "the pack's own files");
    scan->entries.erase(end, scan->entries.end());
  }
}

}  // namespace

namespace internal {

// Declares the classes, and the metadata that says where the records came
// from and how they were selected.
Status DescribeSource(const ScanResult& scan, const BuildOptions& options,
                      PackWriter* writer) {
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
  return writer->SetMetadata(kMetaExtensions, selection);
}

}  // namespace internal

namespace {

// Keeps only part options.part of options.parts of the scanned samples
// (BuildOptions::parts) and records the split in the pack's metadata.
Status SelectPart(const BuildOptions& options, ScanResult* scan,
                  PackWriter* writer, BuildSummary* summary) {
  const size_t n = scan->entries.size();
  std::vector<uint64_t> sizes(n, 0);
  std::vector<Status> errors(n);
  ParallelFor(n, options.threads, [&](size_t k) {
    struct stat st;
    const std::string path = scan->PathOf(k);
    if (::stat(path.c_str(), &st) == 0) {
      sizes[k] = static_cast<uint64_t>(st.st_size);
    } else {
      errors[k] = Status::FromErrno(path, errno);
    }
  });
  for (size_t k = 0; k < n; ++k) {
    if (errors[k].ok()) continue;
    // Every part job must see the same split: a file no job can stat
    // weighs nothing (its read fails later and is skipped or fatal).
    if (!options.skip_unreadable) {
      return errors[k].WithContext("--part needs every file's size");
    }
    Warn(summary, errors[k].ToString() + "; weighs 0 in the part split");
  }
  XXH3_state_t* state = XXH3_createState();
  if (state == nullptr) return Status::IOError("out of memory");
  XXH3_64bits_reset(state);
  auto put = [&](const void* p, size_t len) {
    XXH3_64bits_update(state, p, len);
  };
  auto put64 = [&](uint64_t v) {
    char b[8];
    EncodeFixed64(b, v);
    put(b, 8);
  };
  static constexpr char kDomain[] = "ufspack-split";
  put(kDomain, sizeof(kDomain));
  put64(options.parts);
  put64(scan->classes.size());
  for (const std::string& c : scan->classes) {
    put64(c.size());
    put(c.data(), c.size());
  }
  put64(n);
  for (size_t k = 0; k < n; ++k) {
    const ScanEntry& e = scan->entries[k];
    put64(e.name.size());
    put(e.name.data(), e.name.size());
    put64(e.label);
    put64(sizes[k]);
  }
  const uint64_t split = XXH3_64bits_digest(state);
  XXH3_freeState(state);

  const std::vector<uint64_t> bounds = SplitSamples(sizes, options.parts);
  const uint64_t first = bounds[options.part];
  const uint64_t count = bounds[options.part + 1] - first;
  summary->part_first = first;
  summary->part_samples = count;
  summary->split_samples = n;
  scan->entries.erase(
      scan->entries.begin() + static_cast<ptrdiff_t>(first + count),
      scan->entries.end());
  scan->entries.erase(scan->entries.begin(),
                      scan->entries.begin() + static_cast<ptrdiff_t>(first));
  UFSPACK_RETURN_IF_ERROR(writer->SetMetadata(
      kMetaPart,
      std::to_string(options.part) + "/" + std::to_string(options.parts)));
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx",
                static_cast<unsigned long long>(split));
  UFSPACK_RETURN_IF_ERROR(writer->SetMetadata(kMetaPartSplit, hex));
  return writer->SetMetadata(kMetaPartRange, std::to_string(first) + " " +
                                                 std::to_string(count) + " " +
                                                 std::to_string(n));
}

// Calls BuildOptions::progress from the building thread: once the files
// are counted, about four times a second while packing, and at the end.
class ProgressReporter {
 public:
  ProgressReporter(const BuildOptions& options, uint64_t files_total)
      : report_(options.progress),
        start_(std::chrono::steady_clock::now()),
        last_(start_) {
    progress_.files_total = files_total;
  }

  BuildProgress* progress() { return &progress_; }

  void Start() {
    if (report_) report_(progress_);
  }
  void Tick(const PackWriter& writer) {
    if (!report_) return;
    auto now = std::chrono::steady_clock::now();
    if (now - last_ >= std::chrono::milliseconds(250)) {
      last_ = now;
      Report(writer);
    }
  }
  void Report(const PackWriter& writer) {
    progress_.bytes_out = writer.data_bytes();
    progress_.seconds = SecondsSince(start_);
    if (report_) report_(progress_);
  }

 private:
  const std::function<void(const BuildProgress&)>& report_;
  const std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_;
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

// Reads the scanned files with options.threads threads in flight and adds
// them to the pack in the scan's order.  A source that fails is skipped
// with a warning under skip_unreadable; any other error stops the build.
Status AddRecords(const ScanResult& scan, const BuildOptions& options,
                  PackWriter* writer, ProgressReporter* reporter,
                  BuildSummary* summary) {
  internal::ReadAhead::Options ra;
  ra.count = scan.entries.size();
  ra.threads = options.threads;
  ra.window = std::max<size_t>(64, static_cast<size_t>(options.threads) * 4);
  ra.budget = kInFlightBudget;
  ra.stop_on_error = !options.skip_unreadable;
  ra.cancel = options.cancel;
  std::vector<Slot> slots(internal::ReadAhead::SlotsFor(ra));
  internal::ReadAhead ahead(
      ra, [&](size_t k, const internal::ReadAhead::Reserve& reserve) {
        return ReadSlot(scan.PathOf(k), options.writer, reserve,
                        &slots[k % slots.size()]);
      });

  BuildProgress& progress = *reporter->progress();
  reporter->Start();  // the count is known
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
      s = AddSlot(scan.entries[k], scan.PathOf(k), &slot, writer, &progress,
                  summary);
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
void Summarize(const ScanResult& scan, const PackWriter& writer,
               const BuildProgress& progress, BuildSummary* summary) {
  summary->index_path = writer.out_dir() + "/" + kIndexFileName;
  summary->data_path = writer.out_dir() + "/" + kDataFileName;
  summary->files = progress.files_done;
  summary->classes = scan.classes.size();
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

  ScanResult scan;
  UFSPACK_RETURN_IF_ERROR(ScanSources(src, out_known ? &out_st : nullptr,
                                      &options, &scan, summary));
  summary->scan_seconds = SecondsSince(t0);
  if (Cancelled(options)) return Status::Aborted("interrupted");
  DropPackFiles(src, src_st, out_known ? &out_st : nullptr, &scan, summary);
  UFSPACK_RETURN_IF_ERROR(
      internal::DescribeSource(scan, options, writer.get()));
  if (options.parts > 1) {
    UFSPACK_RETURN_IF_ERROR(SelectPart(options, &scan, writer.get(), summary));
  }

  UFSPACK_RETURN_IF_ERROR(
      internal::PackRecords(scan, options, writer.get(), summary));
  summary->seconds = SecondsSince(t0);
  return Status::OK();
}

namespace internal {

Status PackRecords(const ScanResult& scan, const BuildOptions& options,
                   PackWriter* writer, BuildSummary* summary) {
  ProgressReporter reporter(options, scan.entries.size());
  Status s = AddRecords(scan, options, writer, &reporter, summary);
  // A writer-side failure may also be sticky without having been returned.
  if (s.ok()) s = writer->status();
  if (s.ok() && Cancelled(options)) s = Status::Aborted("interrupted");
  if (!s.ok()) {
    writer->Abandon();
    return s;
  }
  UFSPACK_RETURN_IF_ERROR(writer->Finish(&summary->pack_id));
  reporter.Report(*writer);
  Summarize(scan, *writer, *reporter.progress(), summary);
  return Status::OK();
}

}  // namespace internal

}  // namespace ufspack
