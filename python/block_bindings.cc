// Copyright 2026 The ufspack Authors.

#include "block_bindings.h"

#include <vector>

#include "buffers.h"
#include "errors.h"

namespace ufspack {

using namespace pybind11::literals;  // NOLINT: "name"_a

namespace {

py::array_t<int64_t> ToArray(std::vector<uint64_t>* v) {
  // Moved into a capsule so the array views the vector's storage.
  auto* owned = new std::vector<uint64_t>(std::move(*v));
  py::capsule free(
      owned, [](void* p) { delete static_cast<std::vector<uint64_t>*>(p); });
  return py::array_t<int64_t>(
      {static_cast<py::ssize_t>(owned->size())}, {sizeof(int64_t)},
      reinterpret_cast<const int64_t*>(owned->data()), free);
}

}  // namespace

py::tuple BlockMembers(const Reader& reader, uint64_t block_bytes) {
  std::vector<uint64_t> first;
  // Not zeroed: BlockMembers' threads write every entry (8 bytes per
  // record, 800 MB at 100M records, which one memset would cost ~0.2 s).
  py::array_t<int64_t> members = NewInt64Array(reader.size());
  uint64_t* out = reinterpret_cast<uint64_t*>(members.mutable_data());
  Status s;
  {
    py::gil_scoped_release nogil;
    s = reader.BlockMembers(block_bytes, &first, out);
  }
  Check(s);
  return py::make_tuple(ToArray(&first), members);
}

void PrefetchBlocks(const Reader& reader, const py::array_t<int64_t>& indices) {
  auto in = indices.unchecked<1>();
  std::vector<uint64_t> idx(static_cast<size_t>(in.shape(0)));
  for (size_t k = 0; k < idx.size(); ++k) {
    if (in(k) < 0) {
      Check(Status::InvalidArgument("record index " + std::to_string(in(k)) +
                                    " is negative"));
    }
    idx[k] = static_cast<uint64_t>(in(k));
  }
  CheckAllInRange(idx, reader.size(), "record");
  Status s;
  {
    py::gil_scoped_release nogil;
    s = reader.PrefetchBlocks(idx.data(), idx.size());
  }
  Check(s);
}

py::dict BlockStats(const Reader& reader) {
  const BlockReadStats s = reader.block_stats();
  return py::dict("block_fetches"_a = s.block_fetches,
                  "bytes_fetched"_a = s.bytes_fetched,
                  "reads_from_blocks"_a = s.reads_from_blocks,
                  "reads_bypassed"_a = s.reads_bypassed);
}

}  // namespace ufspack
