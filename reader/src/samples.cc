// Copyright 2026 The ufspack Authors.
//
// The Reader's multi-file sample methods: WebDataset's key rule over the
// index's names (SampleStarts), and a range of records read with one
// request per back-to-back run (ReadRange).

#include <algorithm>
#include <cstring>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "pack_source.h"
#include "ufspack/reader.h"
#include "ufspack/text.h"

namespace ufspack {

void Reader::SplitSampleName(std::string_view name, std::string_view* key,
                             std::string_view* field) {
  const size_t slash = name.rfind('/');
  const size_t base = slash == std::string_view::npos ? 0 : slash + 1;
  const size_t dot = name.find('.', base);
  if (dot == std::string_view::npos) {
    *key = name;
    *field = std::string_view();
    return;
  }
  *key = name.substr(0, dot);
  *field = name.substr(dot + 1);
}

Status Reader::SampleStarts(std::vector<uint64_t>* starts,
                            std::vector<std::string>* fields, size_t max_fields,
                            bool* fields_complete) const {
  starts->clear();
  std::set<std::string_view> seen;
  bool complete = true;
  std::string_view last_key;
  const uint64_t n = size();
  constexpr uint64_t kReleaseEvery = 1 << 16;
  for (uint64_t i = 0; i < n; ++i) {
    Record r;
    UFSPACK_RETURN_IF_ERROR(GetRecord(i, &r));
    std::string_view key, field;
    SplitSampleName(r.name, &key, &field);
    // Names stay valid while the Reader lives (the index is mapped).
    if (i == 0 || key != last_key) starts->push_back(i);
    last_key = key;
    if (fields != nullptr && complete && seen.count(field) == 0) {
      if (seen.size() < max_fields) {
        seen.insert(field);
      } else {
        complete = false;
      }
    }
    // The index pages behind us leave the resident set (a released page
    // maps back if read again, so last_key stays valid).
    if ((i + 1) % kReleaseEvery == 0) {
      ReleaseRecords(i + 1 - kReleaseEvery, kReleaseEvery);
    }
  }
  starts->push_back(n);
  if (fields != nullptr) fields->assign(seen.begin(), seen.end());
  if (fields_complete != nullptr) *fields_complete = complete;
  return Status::OK();
}

namespace {

// out = `in` (whose k-th record is record order[k] of the range) with
// every record back at its position in the range.
void Unpermute(const Batch& in, const std::vector<uint64_t>& order,
               Batch* out) {
  const size_t count = order.size();
  std::vector<size_t> at(count);  // at[position in range] = position in in
  for (size_t k = 0; k < count; ++k) at[order[k]] = k;
  out->offsets.assign(count + 1, 0);
  for (size_t j = 0; j < count; ++j) {
    out->offsets[j + 1] = out->offsets[j] + in.get(at[j]).size();
  }
  out->data.resize(static_cast<size_t>(out->offsets[count]));
  for (size_t j = 0; j < count; ++j) {
    const std::string_view v = in.get(at[j]);
    if (!v.empty())
      std::memcpy(out->data.data() + out->offsets[j], v.data(), v.size());
  }
}

}  // namespace

Status Reader::ReadRange(uint64_t first, uint64_t count, Batch* out) const {
  out->data.clear();
  out->offsets.clear();
  if (first > size() || count > size() - first) {
    return Status::OutOfRange(
        "records [" + std::to_string(first) + ", " + std::to_string(first) +
        " + " + std::to_string(count) + ") out of range (pack has " +
        std::to_string(size()) + " records)");
  }
  std::vector<Record> records(count);
  uint64_t claimed = 0;
  const uint64_t limit = static_cast<uint64_t>(out->data.max_size());
  for (uint64_t k = 0; k < count; ++k) {
    UFSPACK_RETURN_IF_ERROR(GetRecord(first + k, &records[k]));
    if (records[k].original_length > limit - claimed) {
      return Status::InvalidArgument(
          "records [" + std::to_string(first) + ", +" + std::to_string(count) +
          ") exceed " + std::to_string(limit) + " bytes at record '" +
          EscapeBytes(records[k].name) + "'");
    }
    claimed += records[k].original_length;
  }
  if (count == 0) {
    out->offsets.push_back(0);
    return Status::OK();
  }
  // Records stored in another order than the index's (an archive build
  // stores 000123.jpg before 000123.cls, as the archive held them) are
  // read in data-file order, so that back-to-back bytes still make one
  // request, then put back in index order.
  std::vector<uint64_t> order(count);
  for (uint64_t k = 0; k < count; ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&](uint64_t a, uint64_t b) {
    return records[a].offset < records[b].offset;
  });
  bool in_order = true;
  for (uint64_t k = 0; k < count; ++k) in_order &= order[k] == k;
  Status s;
  if (in_order) {
    s = source_->ReadBatchMany(records, out, 1);
  } else {
    std::vector<Record> by_offset(count);
    for (uint64_t k = 0; k < count; ++k) by_offset[k] = records[order[k]];
    Batch stored;
    s = source_->ReadBatchMany(by_offset, &stored, 1);
    if (s.ok()) Unpermute(stored, order, out);
  }
  if (!s.ok()) {
    out->data.clear();
    out->offsets.clear();
  }
  return s;
}

}  // namespace ufspack
