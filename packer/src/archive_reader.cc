// Copyright 2026 The ufspack Authors.
//
// libarchive behind ArchiveReader (Debian's libarchive-dev): every format
// and filter it reads; a nested archive is opened over its outer reader's
// archive_read_data() through read callbacks.

#include "archive_reader.h"

#include <archive.h>
#include <archive_entry.h>

#include <cerrno>
#include <utility>

#include "ufspack/text.h"

namespace ufspack {
namespace internal {

namespace {

constexpr size_t kBlockSize = size_t{1} << 20;
constexpr char kNotAnArchive[] =
    "not a readable archive (tar, optionally .gz/.bz2/.xz/.zst, zip, ...)";

struct archive* NewReader() {
  struct archive* a = archive_read_new();
  if (a == nullptr) return nullptr;
  archive_read_support_filter_all(a);
  archive_read_support_format_all(a);
  return a;
}

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

}  // namespace

// The read callback of a nested archive: its outer reader's current member.
struct NestedSource {
  static la_ssize_t Read(struct archive* a, void* client, const void** buf) {
    auto* self = static_cast<ArchiveReader*>(client);
    ArchiveReader* outer = self->outer_;
    self->buffer_.resize(kBlockSize);
    const la_ssize_t n = archive_read_data(outer->a_, self->buffer_.data(),
                                           self->buffer_.size());
    if (n < 0) {
      const char* why = archive_error_string(outer->a_);
      archive_set_error(a, EIO, "%s", why != nullptr ? why : "read error");
      return -1;
    }
    *buf = self->buffer_.data();
    return n;
  }
};

ArchiveReader::ArchiveReader(struct archive* a, std::string label,
                             ArchiveReader* outer)
    : a_(a), label_(std::move(label)), outer_(outer) {}

ArchiveReader::~ArchiveReader() { archive_read_free(a_); }

Status ArchiveReader::Open(const std::string& path,
                           std::unique_ptr<ArchiveReader>* reader) {
  struct archive* a = NewReader();
  if (a == nullptr) return Status::IOError(path + ": out of memory");
  std::unique_ptr<ArchiveReader> r(new ArchiveReader(a, path, nullptr));
  if (archive_read_open_filename(a, path.c_str(), kBlockSize) != ARCHIVE_OK) {
    return r->NotAnArchive();
  }
  *reader = std::move(r);
  return Status::OK();
}

Status ArchiveReader::OpenNested(ArchiveReader* outer,
                                 std::unique_ptr<ArchiveReader>* reader) {
  struct archive* a = NewReader();
  const std::string label = outer->label_ + "/" + EscapeBytes(outer->member_);
  if (a == nullptr) return Status::IOError(label + ": out of memory");
  std::unique_ptr<ArchiveReader> r(new ArchiveReader(a, label, outer));
  if (archive_read_open(a, r.get(), nullptr, &NestedSource::Read, nullptr) !=
      ARCHIVE_OK) {
    return r->Error(kNotAnArchive);
  }
  *reader = std::move(r);
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

Status ArchiveReader::Error(const std::string& what) const {
  const char* why = archive_error_string(a_);
  std::string where = label_;
  if (!member_.empty()) where += ", member '" + EscapeBytes(member_) + "'";
  return Status::Corruption(where + ": " + what + ": " +
                            (why != nullptr ? why : "unknown error"));
}

Status ArchiveReader::Next(ArchiveMember* member, bool* more) {
  struct archive_entry* e = nullptr;
  const int rc = archive_read_next_header(a_, &e);
  if (rc == ARCHIVE_EOF) {
    member_.clear();
    *more = false;
    return Status::OK();
  }
  if (rc < ARCHIVE_WARN) {  // RETRY or FATAL: nothing more can be read
    if (member_.empty() && outer_ == nullptr) return NotAnArchive();
    return Error(member_.empty() ? kNotAnArchive
                                 : "damaged or truncated after this member");
  }
  const char* name = archive_entry_pathname(e);
  if (name == nullptr) name = archive_entry_pathname_utf8(e);
  if (name == nullptr) {
    return Error("a member's name cannot be read");
  }
  member_ = name;
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

Status ArchiveReader::Read(char* buf, size_t cap, size_t* got) {
  const la_ssize_t n = archive_read_data(a_, buf, cap);
  if (n < 0) return Error("cannot read the member (damaged or truncated)");
  *got = static_cast<size_t>(n);
  return Status::OK();
}

uint64_t ArchiveReader::bytes_consumed() const {
  if (outer_ != nullptr) return outer_->bytes_consumed();
  const la_int64_t n = archive_filter_bytes(a_, -1);
  return n > 0 ? static_cast<uint64_t>(n) : 0;
}

}  // namespace internal
}  // namespace ufspack
