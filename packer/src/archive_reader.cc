// Copyright 2026 The ufspack Authors.
//
// libarchive behind ArchiveReader (Debian's libarchive-dev).  Two
// libarchive objects at most: a probe with every filter and the "raw"
// format finds the compression; it stays as the decompressor (bzip2, xz,
// zstd, ...) unless there is none or it is gzip (zlib then, which checks
// the trailer).  The format reader (every format, no filter) reads the
// decompressed bytes through read callbacks, or the file itself with skip
// and seek callbacks too (a zip's central directory).

#include "archive_reader.h"

#include <archive.h>
#include <archive_entry.h>
#include <locale.h>

#include <cerrno>
#include <cstdio>
#include <utility>

#include "gzip_source.h"
#include "tar_header_check.h"
#include "ufspack/text.h"

namespace ufspack {
namespace internal {

namespace {

constexpr char kNotAnArchive[] =
    "not a readable archive (tar, optionally .gz/.bz2/.xz/.zst, zip, ...)";

// Makes libarchive read names under a UTF-8 character type on this thread,
// whatever the process locale: it converts names to the current locale's
// charset, which under "C" refuses every zip name marked UTF-8, and under a
// Latin-1 locale would change its bytes.  UTF-8 to UTF-8 keeps valid bytes;
// names not marked are copied as stored.  Where no UTF-8 locale exists, the
// process's stands.
class Utf8Names {
 public:
  Utf8Names() {
    static const locale_t utf8 = [] {
      for (const char* name : {"C.UTF-8", "C.utf8", "en_US.UTF-8"}) {
        const locale_t l = newlocale(LC_CTYPE_MASK, name, locale_t{});
        if (l != locale_t{}) return l;
      }
      return locale_t{};
    }();
    if (utf8 != locale_t{}) previous_ = uselocale(utf8);
  }
  ~Utf8Names() {
    if (previous_ != locale_t{}) uselocale(previous_);
  }
  Utf8Names(const Utf8Names&) = delete;
  Utf8Names& operator=(const Utf8Names&) = delete;

 private:
  locale_t previous_{};
};

ArchiveMember::Type TypeOf(struct archive_entry* e) {
  if (archive_entry_hardlink(e) != nullptr) {
    return ArchiveMember::Type::kHardlink;
  }
  switch (archive_entry_filetype(e)) {
    case AE_IFREG:
      return ArchiveMember::Type::kFile;
    case AE_IFDIR:
      return ArchiveMember::Type::kDirectory;
    case AE_IFLNK:
      return ArchiveMember::Type::kSymlink;
    default:
      return ArchiveMember::Type::kOther;
  }
}

bool IsTar(struct archive* a) {
  return (archive_format(a) & ARCHIVE_FORMAT_BASE_MASK) == ARCHIVE_FORMAT_TAR;
}

// libarchive's filters (and its "raw" format) over a ByteSource: first the
// probe that finds the compression, then, for all but gzip, its
// decompressor.
class FilterByteSource final : public ByteSource {
 public:
  explicit FilterByteSource(ByteSource* below) : below_(below) {}
  ~FilterByteSource() override {
    if (a_ != nullptr) archive_read_free(a_);
  }
  FilterByteSource(const FilterByteSource&) = delete;
  FilterByteSource& operator=(const FilterByteSource&) = delete;

  // Looks at the stream's start: *filters says how many compressions
  // libarchive recognises there (0: none, or an empty stream), *gzip
  // whether one is gzip.  Errors: below's, or Corruption when a
  // decompressor fails on the first bytes.
  Status Open(int* filters, bool* gzip) {
    *filters = 0;
    *gzip = false;
    a_ = archive_read_new();
    if (a_ == nullptr) return Status::IOError("out of memory");
    archive_read_support_filter_all(a_);
    archive_read_support_format_raw(a_);
    archive_read_set_callback_data(a_, this);
    archive_read_set_read_callback(a_, &ReadCallback);
    if (archive_read_open1(a_) != ARCHIVE_OK) {
      if (!status_.ok()) return status_;
      // Only the client's "none" left: no compression (an empty stream,
      // which the raw format refuses).  None at all: a decompressor failed
      // on the first bytes and libarchive dropped them.
      if (archive_filter_count(a_) == 1) return Status::OK();
      const char* why = archive_error_string(a_);
      return Status::Corruption(std::string("compressed data damaged: ") +
                                (why != nullptr ? why : "unknown error"));
    }
    *filters = archive_filter_count(a_) - 1;  // less the client's "none"
    for (int k = 0; k < *filters; ++k) {
      if (archive_filter_code(a_, k) == ARCHIVE_FILTER_GZIP) *gzip = true;
    }
    return Status::OK();
  }

  // The filters in the order they are undone: "xz", "xz, then gzip".
  std::string names() const {
    std::string s;
    for (int k = archive_filter_count(a_) - 2; k >= 0; --k) {
      if (!s.empty()) s += ", then ";
      s += archive_filter_name(a_, k);
    }
    return s;
  }

  Status Read(const char** data, size_t* n) override {
    *n = 0;
    if (!status_.ok()) return status_;
    if (!started_) {
      struct archive_entry* e = nullptr;
      if (archive_read_next_header(a_, &e) != ARCHIVE_OK) return Failed();
      started_ = true;
    }
    const void* buf = nullptr;
    size_t size = 0;
    la_int64_t offset = 0;
    const int rc = archive_read_data_block(a_, &buf, &size, &offset);
    if (rc == ARCHIVE_EOF) return Status::OK();
    if (rc != ARCHIVE_OK) return Failed();
    *data = static_cast<const char*>(buf);
    *n = size;
    return Status::OK();
  }
  uint64_t consumed() const override { return below_->consumed(); }

 private:
  static la_ssize_t ReadCallback(struct archive* a, void* client,
                                 const void** buf) {
    auto* self = static_cast<FilterByteSource*>(client);
    const char* data = nullptr;
    size_t n = 0;
    self->status_ = self->below_->Read(&data, &n);
    if (!self->status_.ok()) {
      archive_set_error(a, EIO, "%s",
                        std::string(self->status_.message()).c_str());
      return -1;
    }
    *buf = data;
    return static_cast<la_ssize_t>(n);
  }

  Status Failed() {
    if (status_.ok()) {
      const char* why = archive_error_string(a_);
      status_ = Status::Corruption(
          names() + " data damaged: " + (why != nullptr ? why : "unknown"));
    }
    return status_;
  }

  ByteSource* below_;
  struct archive* a_ = nullptr;
  Status status_;  // below's error, or the decompressor's
  bool started_ = false;
};

}  // namespace

// The current member of an outer reader, as a ByteSource.
class NestedByteSource final : public ByteSource {
 public:
  explicit NestedByteSource(ArchiveReader* outer) : outer_(outer) {}
  Status Read(const char** data, size_t* n) override {
    *n = 0;
    if (!status_.ok()) return status_;
    buffer_.resize(kSourceBlockSize);
    size_t got = 0;
    status_ = outer_->Read(buffer_.data(), buffer_.size(), &got);
    if (!status_.ok()) return status_;
    *data = buffer_.data();
    *n = got;
    return Status::OK();
  }
  uint64_t consumed() const override { return outer_->bytes_consumed(); }
  bool failed() const { return !status_.ok(); }

 private:
  ArchiveReader* outer_;
  std::string buffer_;
  Status status_;  // the outer reader's error: it names everything
};

struct FormatCallbacks {
  static la_ssize_t Read(struct archive* a, void* client, const void** buf) {
    auto* r = static_cast<ArchiveReader*>(client);
    if (!r->frozen_) {  // what a_ has consumed, it will not parse again
      const la_int64_t at = archive_filter_bytes(a, 0);
      if (at > 0) r->window_.KeepFrom(static_cast<uint64_t>(at));
    }
    r->window_.Retire();  // before source_ reuses the block's memory
    const char* data = nullptr;
    size_t n = 0;
    Status s = r->source_->Read(&data, &n);
    if (!s.ok()) {
      r->source_status_ = std::move(s);
      archive_set_error(a, EIO, "%s",
                        std::string(r->source_status_.message()).c_str());
      return -1;
    }
    r->window_.Handed(data, n);
    *buf = data;
    return static_cast<la_ssize_t>(n);
  }
  static la_int64_t Skip(struct archive* a, void* client, la_int64_t n) {
    auto* r = static_cast<ArchiveReader*>(client);
    uint64_t skipped = 0;
    if (n <= 0) return 0;
    Status s = r->file_->Skip(static_cast<uint64_t>(n), &skipped);
    if (!s.ok()) {
      archive_set_error(a, EIO, "%s", std::string(s.message()).c_str());
      return ARCHIVE_FATAL;
    }
    r->window_.Skipped(skipped);
    return static_cast<la_int64_t>(skipped);
  }
  static la_int64_t Seek(struct archive* a, void* client, la_int64_t offset,
                         int whence) {
    auto* r = static_cast<ArchiveReader*>(client);
    uint64_t pos = 0;
    Status s = r->file_->Seek(offset, whence, &pos);
    if (!s.ok()) {
      archive_set_error(a, EIO, "%s", std::string(s.message()).c_str());
      return ARCHIVE_FATAL;
    }
    r->window_.Moved(pos);
    return static_cast<la_int64_t>(pos);
  }
};

ArchiveReader::ArchiveReader(std::string label, ArchiveReader* outer)
    : label_(std::move(label)), outer_(outer) {}

ArchiveReader::~ArchiveReader() {
  // Top down: each reads from the one below.
  if (a_ != nullptr) archive_read_free(a_);
  decompressor_.reset();
  replayable_.reset();
  base_.reset();
}

Status ArchiveReader::Open(const std::string& path,
                           std::unique_ptr<ArchiveReader>* reader) {
  std::unique_ptr<FileByteSource> file;
  UFSPACK_RETURN_IF_ERROR(FileByteSource::Open(path, &file));
  std::unique_ptr<ArchiveReader> r(new ArchiveReader(path, nullptr));
  r->file_ = file.get();
  r->base_ = std::move(file);
  UFSPACK_RETURN_IF_ERROR(r->Start());
  *reader = std::move(r);
  return Status::OK();
}

Status ArchiveReader::OpenNested(ArchiveReader* outer,
                                 std::unique_ptr<ArchiveReader>* reader) {
  const std::string label = outer->label_ + "/" + EscapeBytes(outer->member_);
  std::unique_ptr<ArchiveReader> r(new ArchiveReader(label, outer));
  auto nested = std::make_unique<NestedByteSource>(outer);
  r->nested_ = nested.get();
  r->base_ = std::move(nested);
  r->replayable_ = std::make_unique<RewindableByteSource>(r->base_.get());
  UFSPACK_RETURN_IF_ERROR(r->Start());
  *reader = std::move(r);
  return Status::OK();
}

Status ArchiveReader::Start() {
  Utf8Names names;
  ByteSource* below = replayable_ != nullptr ? replayable_.get() : base_.get();
  auto probe = std::make_unique<FilterByteSource>(below);
  int filters = 0;
  bool gzip = false;
  Status s = probe->Open(&filters, &gzip);
  if (!s.ok()) {
    return nested_ != nullptr && nested_->failed() ? s : s.WithContext(label_);
  }
  if (gzip && filters > 1) {
    return Status::NotSupported(
        label_ + ": compressed twice (" + probe->names() +
        "): not read, since libarchive would not check the gzip layer's "
        "CRC-32; decompress the outer layer first");
  }
  if (filters == 0 || gzip) {  // read it again from its first byte
    probe.reset();
    if (file_ != nullptr) {
      uint64_t pos = 0;
      UFSPACK_RETURN_IF_ERROR(file_->Seek(0, SEEK_SET, &pos));
    } else {
      replayable_->Rewind();
    }
  } else if (replayable_ != nullptr) {
    replayable_->Forget();
  }
  if (gzip) {
    decompressor_ = std::make_unique<GzipByteSource>(below);
  } else if (filters > 0) {
    decompressor_ = std::move(probe);
  }
  source_ = decompressor_ != nullptr ? decompressor_.get() : below;
  return OpenFormat();
}

Status ArchiveReader::OpenFormat() {
  a_ = archive_read_new();
  if (a_ == nullptr) return Status::IOError(label_ + ": out of memory");
  archive_read_support_format_all(a_);
  archive_read_set_callback_data(a_, this);
  archive_read_set_read_callback(a_, &FormatCallbacks::Read);
  if (source_ == file_) {
    archive_read_set_skip_callback(a_, &FormatCallbacks::Skip);
    archive_read_set_seek_callback(a_, &FormatCallbacks::Seek);
  }
  if (archive_read_open1(a_) != ARCHIVE_OK) {
    if (!source_status_.ok()) return SourceError();
    return outer_ == nullptr ? NotAnArchive() : Error(kNotAnArchive);
  }
  return Status::OK();
}

Status ArchiveReader::NotAnArchive() const {
  const char* why = archive_error_string(a_);
  return Status::InvalidArgument(
      label_ +
      ": not a directory, nor an archive ufspack reads (tar, optionally "
      ".gz/.bz2/.xz/.zst, zip, ...): " +
      (why != nullptr ? why : "unknown format"));
}

std::string ArchiveReader::Where() const {
  if (member_.empty()) return label_;
  return label_ + (ended_ ? ", after its last member '" : ", member '") +
         EscapeBytes(member_) + "'";
}

Status ArchiveReader::Error(const std::string& what) const {
  const char* why = archive_error_string(a_);
  return Status::Corruption(Where() + ": " + what + ": " +
                            (why != nullptr ? why : "unknown error"));
}

Status ArchiveReader::SourceError() const {
  if (nested_ != nullptr && nested_->failed()) return source_status_;
  return source_status_.WithContext(Where());
}

Status ArchiveReader::Next(ArchiveMember* member, bool* more) {
  Utf8Names names;
  *more = false;
  if (ended_) return Status::OK();
  if (in_member_) {
    // Skipped here rather than in archive_read_next_header, so that the
    // bytes kept for CheckHeaders() start at the next header.
    in_member_ = false;
    if (archive_read_data_skip(a_) < ARCHIVE_WARN) {
      if (!source_status_.ok()) return SourceError();
      return Error("damaged or truncated after this member");
    }
  }
  const la_int64_t at = archive_filter_bytes(a_, 0);
  window_.KeepFrom(at > 0 ? static_cast<uint64_t>(at) : 0);
  frozen_ = true;
  struct archive_entry* e = nullptr;
  const int rc = archive_read_next_header(a_, &e);
  frozen_ = false;
  if (rc == ARCHIVE_EOF) {
    ended_ = true;
    UFSPACK_RETURN_IF_ERROR(Finish());
    member_.clear();
    return Status::OK();
  }
  if (rc < ARCHIVE_WARN) {  // RETRY or FATAL: nothing more can be read
    if (!source_status_.ok()) return SourceError();
    if (member_.empty() && outer_ == nullptr) return NotAnArchive();
    return Error(member_.empty() ? kNotAnArchive
                                 : "damaged or truncated after this member");
  }
  if (count_++ == 0 && !IsTar(a_)) window_.Disable();
  in_member_ = true;
  const char* name = archive_entry_pathname(e);
  if (name == nullptr) name = archive_entry_pathname_utf8(e);
  if (name == nullptr) {
    const char* why = archive_error_string(a_);
    return Status::Corruption(
        label_ + ": member " + std::to_string(count_) +
        (member_.empty() ? "" : " (after '" + EscapeBytes(member_) + "')") +
        ": its name cannot be read (" + (why != nullptr ? why : "unknown") +
        "); a name marked as UTF-8 must be valid UTF-8");
  }
  member_ = name;
  if (IsTar(a_)) UFSPACK_RETURN_IF_ERROR(CheckHeaders());
  *member = ArchiveMember();
  member->name = member_;
  member->type = TypeOf(e);
  member->size_known = archive_entry_size_is_set(e) != 0;
  member->size =
      member->size_known ? static_cast<uint64_t>(archive_entry_size(e)) : 0;
  member->encrypted = archive_entry_is_encrypted(e) != 0;
  *more = true;
  return Status::OK();
}

Status ArchiveReader::CheckHeaders() {
  // The entry's headers are the bytes libarchive has just parsed: from its
  // first header to where its data starts.
  const la_int64_t from = archive_read_header_position(a_);
  const la_int64_t to = archive_filter_bytes(a_, 0);
  std::string scratch;
  std::string_view chain;
  if (from < 0 || to < from ||
      !window_.Get(static_cast<uint64_t>(from), static_cast<uint64_t>(to),
                   &scratch, &chain)) {
    return Status::OK();  // not held: never so when read through callbacks
  }
  Status s = CheckTarHeaders(chain, static_cast<uint64_t>(from));
  return s.ok() ? s : s.WithContext(Where());
}

Status ArchiveReader::Finish() {
  if (decompressor_ == nullptr) return Status::OK();
  // The archive ends before the compressed stream does (tar's padding, the
  // compressor's trailer): read on, so that its checks run.
  for (;;) {
    const char* data = nullptr;
    size_t n = 0;
    source_status_ = source_->Read(&data, &n);
    if (!source_status_.ok()) return SourceError();
    if (n == 0) return Status::OK();
  }
}

Status ArchiveReader::Read(char* buf, size_t cap, size_t* got) {
  const la_ssize_t n = archive_read_data(a_, buf, cap);
  if (n < 0) {
    if (!source_status_.ok()) return SourceError();
    return Error("cannot read the member (damaged or truncated)");
  }
  *got = static_cast<size_t>(n);
  return Status::OK();
}

uint64_t ArchiveReader::bytes_consumed() const {
  if (outer_ != nullptr) return outer_->bytes_consumed();
  return base_->consumed();
}

}  // namespace internal
}  // namespace ufspack
