// Copyright 2026 The ufspack Authors.
//
// SampleLoader: reads a batch of records and works on each one in parallel,
// the one pipeline behind the Python module's batch reads (read_batch,
// read_decode_batch, read_prepare_batch, read_decode_pil_batch):
//
//   SampleLoader loader(reader, /*threads=*/8);
//   std::vector<DecodedSample> out = loader.LoadDecoded({3, 1, 4});
//   // out[k].status: reading record 3, 1, 4; out[k].image or .fallback
//
// Reading: from a pack that prefers_batches() (remote), a batch of more
// than one record is fetched up front with one Reader::ReadBatch, and a
// failure of that batch is every sample's status; otherwise each worker
// reads its record with Reader::Read (one pread).  Each sample's own work
// (decode, probe) then runs on the worker that read it.
//
// Errors are per sample: a record that cannot be read sets its sample's
// status and the others carry on.  An image the fast decoders do not handle
// is not an error: its bytes are kept for PIL (which decides what happens
// to them).
//
// Thread safety: the const methods may be called concurrently.  They touch
// no Python object (call them with the GIL released).  Lifetimes: the
// loader holds `reader` by reference; it must outlive the loader.
#ifndef UFSPACK_LOADER_SAMPLE_LOADER_H_
#define UFSPACK_LOADER_SAMPLE_LOADER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "prepared_sample.h"
#include "rgbx_sample.h"
#include "ufspack/decode.h"
#include "ufspack/reader.h"
#include "ufspack/status.h"

namespace ufspack {

// One record's bytes.
struct RawSample {
  Status status;  // reading the record
  std::string bytes;
};

// One record read and decoded to RGB.
struct DecodedSample {
  Status status;         // reading the record
  RgbImage image;        // set when a fast decoder handled it
  std::string fallback;  // else the encoded bytes, for PIL to decode
};

class SampleLoader {
 public:
  // `threads`: as ParallelFor's (<= 1: the calling thread only).
  SampleLoader(const Reader& reader, int threads)
      : reader_(reader), threads_(threads) {}

  // Each record's bytes, as Reader::Read gives them.
  std::vector<RawSample> LoadRaw(const std::vector<uint64_t>& indices) const;

  // Each record decoded with DecodeRgb, or its bytes where that fails.
  std::vector<DecodedSample> LoadDecoded(
      const std::vector<uint64_t>& indices) const;

  // Each record prepared for TransformPrepared (prepared_sample.h).
  std::vector<PreparedSample> LoadPrepared(
      const std::vector<uint64_t>& indices) const;

  // Each record read and RgbxDecoder::Prepare'd: step 1 of decoding into
  // caller rows (rgbx_sample.h).
  std::vector<RgbxSample> LoadRgbx(const std::vector<uint64_t>& indices) const;

  // Raw records[k] straight into dsts[k] (room for its original_length),
  // and zstd records (dsts[k] == nullptr) into (*grown)[k], grown as their
  // frames produce bytes; *grown has records.size() entries.  One
  // Reader::ReadMany for the raw records, then the zstd ones in parallel.
  // Not per sample: returns the raw records' error, else the first zstd
  // record's error in order (the buffers then hold unspecified bytes).
  Status ReadInto(const std::vector<Record>& records, char* const* dsts,
                  std::vector<std::string>* grown) const;

 private:
  // The pipeline: reads record indices[k] for every k, in parallel, and
  // calls work(k, status, &bytes) on the thread that read it.  `bytes` is
  // the thread's scratch buffer (empty on error); `work` may move from it.
  void ForEach(const std::vector<uint64_t>& indices,
               const std::function<void(size_t, const Status&, std::string*)>&
                   work) const;

  const Reader& reader_;
  const int threads_;
};

}  // namespace ufspack

#endif  // UFSPACK_LOADER_SAMPLE_LOADER_H_
