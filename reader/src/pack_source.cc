// Copyright 2026 The ufspack Authors.
//
// PackSource (pack_source.h): what every kind of pack reads the same way,
// from the class table, name pool and metadata of its index or manifest.
#include "pack_source.h"

#include <string>

#include "ufspack/format.h"
#include "ufspack/text.h"

namespace ufspack {
namespace internal {

PackSource::~PackSource() = default;

Status PackSource::NameAt(uint64_t offset, uint64_t length,
                          std::string_view* name) const {
  if (offset > names_.size() || length > names_.size() - offset) {
    return Status::Corruption("name at pool offset " + std::to_string(offset) +
                              " + " + std::to_string(length) +
                              " exceeds the name pool (" +
                              std::to_string(names_.size()) + " bytes)");
  }
  *name = names_.substr(offset, length);
  return Status::OK();
}

Status PackSource::CheckRange(const char* what, uint64_t i, uint64_t n) const {
  if (i < n) return Status::OK();
  return Status::OutOfRange(info_.index_path + ": " + what + " " +
                            std::to_string(i) + " out of range (pack has " +
                            std::to_string(n) + " " + what + "s)");
}

Status PackSource::GetClass(uint64_t c, ClassInfo* out) const {
  UFSPACK_RETURN_IF_ERROR(CheckRange("class", c, info_.class_count));
  ClassEntry e;
  std::string_view name;
  Status s = DecodeNamedEntry(classes_, c, &e, &name);
  std::string where = info_.index_path + ": class " + std::to_string(c);
  if (!s.ok())
    return Status::Corruption(where + ": " + std::string(s.message()));
  if (e.first_record > info_.record_count ||
      e.record_count > info_.record_count - e.first_record) {
    return Status::Corruption(
        where + ": records " + std::to_string(e.first_record) + " + " +
        std::to_string(e.record_count) + " exceed the record count " +
        std::to_string(info_.record_count));
  }
  out->name = name;
  out->first_record = e.first_record;
  out->record_count = e.record_count;
  return Status::OK();
}

Status PackSource::ListMetadata(
    std::vector<std::pair<std::string_view, std::string_view>>* entries) const {
  return DecodeMetadata(meta_, entries).WithContext(info_.index_path);
}

}  // namespace internal
}  // namespace ufspack
