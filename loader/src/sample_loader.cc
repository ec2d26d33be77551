// Copyright 2026 The ufspack Authors.
#include "sample_loader.h"

#include <atomic>
#include <cstddef>
#include <string_view>
#include <utility>

#include "ufspack/parallel.h"

namespace ufspack {
namespace {

// The bytes of a batch's records.  From a pack that prefers batches
// (remote) they are fetched up front with one Reader::ReadBatch (every
// request in flight at once, neighbours merged); from a local one each
// worker reads its record with one pread.
class RecordSource {
 public:
  RecordSource(const Reader& reader, const std::vector<uint64_t>& indices,
               int threads)
      : reader_(reader), indices_(indices) {
    if (reader.prefers_batches() && indices.size() > 1) {
      batched_ = true;
      status_ =
          reader.ReadBatch(indices.data(), indices.size(), &batch_, threads);
    }
  }

  // Record indices_[k]'s bytes into *out.
  Status Get(size_t k, std::string* out) const {
    if (!batched_) return reader_.Read(indices_[k], out);
    if (!status_.ok()) return status_;
    const std::string_view b = batch_.get(k);
    out->assign(b.data(), b.size());
    return Status::OK();
  }

 private:
  const Reader& reader_;
  const std::vector<uint64_t>& indices_;
  bool batched_ = false;
  Status status_;  // the batch's
  Batch batch_;
};

}  // namespace

void SampleLoader::ForEach(
    const std::vector<uint64_t>& indices,
    const std::function<void(size_t, const Status&, std::string*)>& work)
    const {
  const RecordSource source(reader_, indices, threads_);
  ParallelFor(indices.size(), threads_, [&](size_t k) {
    thread_local std::string scratch;
    const Status s = source.Get(k, &scratch);
    work(k, s, &scratch);
  });
}

std::vector<RawSample> SampleLoader::LoadRaw(
    const std::vector<uint64_t>& indices) const {
  std::vector<RawSample> out(indices.size());
  ForEach(indices, [&](size_t k, const Status& s, std::string* bytes) {
    out[k].status = s;
    if (s.ok()) out[k].bytes = std::move(*bytes);
  });
  return out;
}

std::vector<DecodedSample> SampleLoader::LoadDecoded(
    const std::vector<uint64_t>& indices) const {
  std::vector<DecodedSample> out(indices.size());
  ForEach(indices, [&](size_t k, const Status& s, std::string* bytes) {
    DecodedSample& d = out[k];
    d.status = s;
    if (!s.ok()) return;
    // NotSupported (PIL's pixels need PIL) or a decode error: either way
    // PIL decodes the bytes, and raises what ImageFolder would raise.  The
    // bytes are copied, so the scratch buffer keeps its capacity.
    if (!DecodeRgb(bytes->data(), bytes->size(), &d.image).ok()) {
      d.fallback = *bytes;
    }
  });
  return out;
}

std::vector<PreparedSample> SampleLoader::LoadPrepared(
    const std::vector<uint64_t>& indices) const {
  std::vector<PreparedSample> out(indices.size());
  ForEach(indices, [&](size_t k, const Status& s, std::string* bytes) {
    out[k].status = s;
    if (s.ok()) out[k].Prepare(std::move(*bytes));
  });
  return out;
}

std::vector<RgbxSample> SampleLoader::LoadRgbx(
    const std::vector<uint64_t>& indices) const {
  std::vector<RgbxSample> out(indices.size());
  ForEach(indices, [&](size_t k, const Status& s, std::string* bytes) {
    RgbxSample& d = out[k];
    d.status = s;
    if (!s.ok()) return;
    d.bytes = std::move(*bytes);
    d.prepared = d.decoder.Prepare(d.bytes.data(), d.bytes.size());
  });
  return out;
}

Status SampleLoader::ReadInto(const std::vector<Record>& records,
                              char* const* dsts,
                              std::vector<std::string>* grown) const {
  std::vector<Record> raw;
  std::vector<char*> raw_dsts;
  std::vector<size_t> zstd;
  for (size_t k = 0; k < records.size(); ++k) {
    if (dsts[k] != nullptr) {
      raw.push_back(records[k]);
      raw_dsts.push_back(dsts[k]);
    } else {
      zstd.push_back(k);
    }
  }
  UFSPACK_RETURN_IF_ERROR(
      reader_.ReadMany(raw.data(), raw_dsts.data(), raw.size(), threads_));
  std::vector<Status> status(zstd.size());
  std::atomic<bool> failed{false};
  ParallelFor(zstd.size(), threads_, [&](size_t j) {
    if (failed.load(std::memory_order_relaxed)) return;
    status[j] = reader_.Read(records[zstd[j]], &(*grown)[zstd[j]]);
    if (!status[j].ok()) failed = true;
  });
  for (const Status& s : status) UFSPACK_RETURN_IF_ERROR(s);
  return Status::OK();
}

}  // namespace ufspack
