// Copyright 2026 The ufspack Authors.
//
// ufspack._core: a thin pybind11 layer over the C++ reader, loader, packer
// and decoder.  All dataset behaviour lives in python/ufspack/*.py; batch
// reads and decodes in loader/src (SampleLoader).  This file holds the
// module and its Reader; the other parts are listed in module_parts.h.
//
// Conventions:
//   * arguments are converted while holding the GIL; every pread, decode and
//     build runs inside a gil_scoped_release touching no Python object;
//   * paths and record names cross as bytes (os.fsencode / os.fsdecode are
//     the Python side's business), so non-UTF-8 names survive;
//   * decoded images become numpy arrays that own the decoder's buffer (no
//     copy); record bytes are read straight into a new bytes object;
//   * Status codes map to Python exceptions as errors.h says.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "block_bindings.h"
#include "buffers.h"
#include "errors.h"
#include "module_parts.h"
#include "pil_image.h"
#include "sample_loader.h"
#include "ufspack/cache.h"
#include "ufspack/decode.h"
#include "ufspack/reader.h"
#include "ufspack/remote.h"  // registers s3://, http://, https://
#include "ufspack/version.h"

namespace ufspack {

using namespace pybind11::literals;  // NOLINT: "name"_a
namespace {

// A new bytes object of `size` bytes (copied from `data` unless null) as
// item k of `list`; returns its buffer.
char* SetNewBytes(const py::list& list, size_t k, const char* data,
                  uint64_t size) {
  PyObject* b = PyBytes_FromStringAndSize(data, static_cast<py::ssize_t>(size));
  if (b == nullptr) throw py::error_already_set();
  PyList_SET_ITEM(list.ptr(), static_cast<py::ssize_t>(k), b);  // steals
  return PyBytes_AS_STRING(b);
}

// (array, None) from the fast path, or (None, bytes) for PIL.
py::tuple DecodedToPython(DecodedSample* d) {
  if (!d->status.ok()) Raise(d->status);
  if (d->image.pixels) return py::make_tuple(ToArray(&d->image), py::none());
  return py::make_tuple(py::none(), py::bytes(d->fallback));
}

// The samples as Python objects (sharing them); raises the first read
// error, in order.
std::vector<std::shared_ptr<PreparedSample>> PreparedToPython(
    std::vector<PreparedSample>* samples) {
  std::vector<std::shared_ptr<PreparedSample>> out;
  out.reserve(samples->size());
  for (PreparedSample& p : *samples) {
    out.push_back(std::make_shared<PreparedSample>(std::move(p)));
  }
  for (const auto& p : out) Check(p->status);
  return out;
}

class PyReader {
 public:
  // `cache`: the node-local cache to read through (None: none).
  // `block_bytes` > 0: block reads (ReaderOptions::block_bytes), keeping
  // up to `block_cache_bytes` of blocks.
  PyReader(const py::bytes& path, bool verify_checksums,
           std::shared_ptr<Cache> cache, uint64_t block_bytes,
           uint64_t block_cache_bytes) {
    const std::string p = path;
    ReaderOptions o;
    o.verify_checksums = verify_checksums;
    o.cache = std::move(cache);
    o.block_bytes = block_bytes;
    if (block_cache_bytes > 0) o.block_cache_bytes = block_cache_bytes;
    std::unique_ptr<Reader> r;
    Status s;
    {
      py::gil_scoped_release nogil;
      s = Reader::Open(p, o, &r);
    }
    Check(s);
    reader_ = std::move(r);
  }

  uint64_t size() const { return reader_->size(); }
  bool offline() const { return reader_->offline(); }
  const Reader& reader() const { return *reader_; }

  // Record i; IndexError unless i < size() (errors.h: IndexError comes
  // from this check alone).
  Record GetRecord(uint64_t i) const {
    CheckInRange(i, reader_->size(), "record");
    Record r;
    Check(reader_->GetRecord(i, &r));
    return r;
  }

  py::bytes Name(uint64_t i) const {
    Record r = GetRecord(i);
    return py::bytes(r.name.data(), r.name.size());
  }

  int64_t Label(uint64_t i) const { return LabelOf(GetRecord(i)); }

  py::dict RecordInfo(uint64_t i) const {
    Record r = GetRecord(i);
    return py::dict("index"_a = r.index,
                    "name"_a = py::bytes(r.name.data(), r.name.size()),
                    "label"_a = LabelOf(r), "size"_a = r.original_length,
                    "stored_size"_a = r.stored_length, "offset"_a = r.offset,
                    "codec"_a = CodecName(r.codec), "checksum"_a = r.checksum);
  }

  // Labels of all records as int64 (-1 in a flat pack), computed in C++.
  py::array_t<int64_t> Labels() const {
    const uint64_t n = reader_->size();
    py::array_t<int64_t> out = NewInt64Array(n);
    int64_t* p = out.mutable_data();
    Status s;
    {
      py::gil_scoped_release nogil;
      for (uint64_t i = 0; i < n && s.ok(); ++i) {
        Record r;
        s = reader_->GetRecord(i, &r);
        p[i] = LabelOf(r);
      }
    }
    Check(s);
    return out;
  }

  std::vector<py::bytes> ClassNames() const {
    std::vector<py::bytes> out;
    for (uint64_t c = 0; c < reader_->class_count(); ++c) {
      ClassInfo ci;
      Check(reader_->GetClass(c, &ci));
      out.emplace_back(ci.name.data(), ci.name.size());
    }
    return out;
  }

  uint64_t Find(const py::bytes& name) const {
    const std::string n = name;
    uint64_t i = 0;
    Check(reader_->Find(n, &i));
    return i;
  }

  py::bytes Read(uint64_t i) const {
    Record r = GetRecord(i);
    if (r.codec == Codec::kZstd) return ReadGrown(r);
    py::bytes out = py::reinterpret_steal<py::bytes>(PyBytes_FromStringAndSize(
        nullptr, static_cast<py::ssize_t>(r.original_length)));
    if (!out) throw py::error_already_set();
    char* dst = PyBytes_AS_STRING(out.ptr());
    Status s;
    {
      py::gil_scoped_release nogil;
      s = reader_->Read(r, dst, r.original_length);
    }
    Check(s);
    return out;
  }

  // A zstd record: decoded into a string grown as its frame produces bytes
  // (original_length sizes nothing), then copied into the bytes object.
  py::bytes ReadGrown(const Record& r) const {
    std::string bytes;
    Status s;
    {
      py::gil_scoped_release nogil;
      s = reader_->Read(r, &bytes);
    }
    Check(s);
    return py::bytes(bytes);
  }

  // Reads the records `indices` on up to `threads` threads (one pread each,
  // several in flight: what hides a network file system's round trips),
  // with one GIL release: raw records straight into the returned bytes
  // objects, zstd records into strings grown as their frames produce bytes
  // (original_length sizes nothing), copied into bytes objects afterwards.
  // Records [first, first + count) as bytes, each back-to-back run of them
  // read with one request (Reader::ReadRange): a multi-file sample.
  py::list ReadRange(uint64_t first, uint64_t count) const {
    const uint64_t n = reader_->size();
    if (first > n || count > n - first) {
      CheckInRange(std::max(first, n), n, "record");  // raises
    }
    Batch b;
    Status s;
    {
      py::gil_scoped_release nogil;
      s = reader_->ReadRange(first, count, &b);
    }
    Check(s);
    py::list out(count);
    for (uint64_t k = 0; k < count; ++k) {
      SetNewBytes(out, k, b.data.data() + b.offsets[k],
                  b.offsets[k + 1] - b.offsets[k]);
    }
    return out;
  }

  // (starts, fields, fields_complete) of Reader::SampleStarts: starts as
  // an int64 array of samples + 1 entries, fields as bytes.
  py::tuple SampleStarts() const {
    std::vector<uint64_t> starts;
    std::vector<std::string> fields;
    bool complete = true;
    Status s;
    {
      py::gil_scoped_release nogil;
      s = reader_->SampleStarts(&starts, &fields, 256, &complete);
    }
    Check(s);
    py::array_t<int64_t> a = NewInt64Array(starts.size());
    int64_t* p = a.mutable_data();
    for (size_t k = 0; k < starts.size(); ++k) {
      p[k] = static_cast<int64_t>(starts[k]);
    }
    py::list f;
    for (const std::string& x : fields) f.append(py::bytes(x));
    return py::make_tuple(a, f, complete);
  }

  py::list ReadBatch(const std::vector<uint64_t>& indices, int threads) const {
    const size_t n = indices.size();
    std::vector<Record> recs(n);
    std::vector<char*> dst(n, nullptr);
    std::vector<std::string> grown(n);
    py::list out(n);
    for (size_t k = 0; k < n; ++k) {
      recs[k] = GetRecord(indices[k]);
      if (recs[k].codec == Codec::kZstd) continue;  // filled in below
      dst[k] = SetNewBytes(out, k, nullptr, recs[k].original_length);
    }
    Status s;
    {
      py::gil_scoped_release nogil;
      s = SampleLoader(*reader_, threads).ReadInto(recs, dst.data(), &grown);
    }
    Check(s);
    for (size_t k = 0; k < n; ++k) {
      if (dst[k] != nullptr) continue;
      SetNewBytes(out, k, grown[k].data(), grown[k].size());
      std::string().swap(grown[k]);
    }
    return out;
  }

  // Reads record i into a writable buffer; returns the byte count.
  size_t ReadInto(uint64_t i, py::buffer buffer) const {
    py::buffer_info b = buffer.request(true);
    if (b.ndim != 1 || b.itemsize != 1 || b.strides[0] != 1) {
      Raise(
          Status::InvalidArgument("read_into needs a contiguous byte buffer"));
    }
    Record r = GetRecord(i);
    Status s;
    {
      py::gil_scoped_release nogil;
      s = reader_->Read(r, static_cast<char*>(b.ptr),
                        static_cast<size_t>(b.size));
    }
    Check(s);
    return r.original_length;
  }

  py::tuple ReadDecode(uint64_t i) const {
    py::list one = ReadDecodeBatch({i}, 1);
    return one[0].cast<py::tuple>();
  }

  // Reads and decodes many records on up to `threads` threads, releasing
  // the GIL once for the whole batch.
  py::list ReadDecodeBatch(const std::vector<uint64_t>& indices,
                           int threads) const {
    CheckAllInRange(indices, reader_->size(), "record");
    std::vector<DecodedSample> results;
    {
      py::gil_scoped_release nogil;
      results = SampleLoader(*reader_, threads).LoadDecoded(indices);
    }
    py::list out;
    for (DecodedSample& d : results) out.append(DecodedToPython(&d));
    return out;
  }

  std::shared_ptr<PreparedSample> ReadPrepare(uint64_t i) const {
    return ReadPrepareBatch({i}, 1)[0];
  }

  std::vector<std::shared_ptr<PreparedSample>> ReadPrepareBatch(
      const std::vector<uint64_t>& indices, int threads) const {
    CheckAllInRange(indices, reader_->size(), "record");
    std::vector<PreparedSample> samples;
    {
      py::gil_scoped_release nogil;
      samples = SampleLoader(*reader_, threads).LoadPrepared(indices);
    }
    return PreparedToPython(&samples);
  }

  py::dict Info() const {
    const PackInfo& i = reader_->info();
    return py::dict("index_path"_a = py::bytes(i.index_path),
                    "data_path"_a = py::bytes(i.data_path),
                    "version"_a = i.version, "pack_id"_a = i.pack_id.ToHex(),
                    "records"_a = i.record_count, "classes"_a = i.class_count,
                    "data_size"_a = i.data_size, "index_size"_a = i.index_size,
                    "flat"_a = i.flat, "parts"_a = i.part_count);
  }

  py::object Metadata(const py::bytes& key) const {
    const std::string k = key;
    std::string_view v;
    Status s = reader_->GetMetadata(k, &v);
    if (s.IsNotFound()) return py::none();
    Check(s);
    return py::bytes(v.data(), v.size());
  }

  void CheckIndex() const {
    Status s;
    {
      py::gil_scoped_release nogil;
      s = reader_->CheckIndex();
    }
    Check(s);
  }

 private:
  static int64_t LabelOf(const Record& r) {
    return r.label == kNoLabel ? -1 : static_cast<int64_t>(r.label);
  }

  std::shared_ptr<const Reader> reader_;
};

// --- Decoding straight into PIL images: read_decode_pil(_batch) -------------
//
// PIL holds an "RGB" image as rows of 4 bytes per pixel (R, G, B, X = 255).
// Decoding into a new image's rows (rgbx_sample.h) saves the HxWx3 array
// and Image.fromarray's copy of it, which unpacks RGB to RGBX.  Between the
// loader's two steps, with the GIL: new_image(width, height) makes each PIL
// image, and PilRgbRows finds its rows.  `images` holds them until the
// results are built, so none is freed while the decoder writes into it.

// Step 2: images[k] and its rows for each sample that prepared (None and
// no rows where the image's layout was not the expected one).
void MakePilImages(const py::function& new_image,
                   std::vector<RgbxSample>* items,
                   std::vector<py::object>* images) {
  for (size_t k = 0; k < items->size(); ++k) {
    RgbxSample& d = (*items)[k];
    if (!d.prepared_ok()) continue;
    const int w = d.decoder.width(), h = d.decoder.height();
    (*images)[k] = new_image(w, h);
    if (!PilRgbRows((*images)[k], w, h, &d.rows)) {
      (*images)[k] = py::object();
      d.rows.clear();
    }
  }
}

// Reads and decodes `indices` into PIL images made by new_image(width,
// height): a list of (image, None); (array, None) where the image's layout
// was not the expected one; (None, bytes) where PIL must decode (as
// read_decode_batch).  Raises the first read error, in order.
py::list ReadDecodePilBatch(const PyReader& self,
                            const std::vector<uint64_t>& indices,
                            const py::function& new_image, int threads) {
  CheckAllInRange(indices, self.size(), "record");
  std::vector<RgbxSample> items;
  {
    py::gil_scoped_release nogil;
    items = SampleLoader(self.reader(), threads).LoadRgbx(indices);
  }
  std::vector<py::object> images(items.size());
  MakePilImages(new_image, &items, &images);
  {
    py::gil_scoped_release nogil;
    DecodeRgbxBatch(&items, threads);
  }
  py::list out(items.size());
  for (size_t k = 0; k < items.size(); ++k) {
    RgbxSample& d = items[k];
    if (!d.status.ok()) Raise(d.status);
    py::tuple t;
    if (d.decoded_ok()) {
      t = d.rows.empty() ? py::make_tuple(ToArray(&d.array), py::none())
                         : py::make_tuple(images[k], py::none());
    } else {  // NotSupported, or an error PIL reports its own way
      t = py::make_tuple(py::none(), py::bytes(d.bytes));
    }
    PyList_SET_ITEM(out.ptr(), static_cast<py::ssize_t>(k), t.release().ptr());
  }
  return out;
}

py::tuple ReadDecodePil(const PyReader& self, uint64_t i,
                        const py::function& new_image) {
  py::list one = ReadDecodePilBatch(self, {i}, new_image, 1);
  return one[0].cast<py::tuple>();
}

void AddReader(py::module_& m) {
  py::class_<PyReader>(m, "Reader")
      .def(py::init<const py::bytes&, bool, std::shared_ptr<Cache>, uint64_t,
                    uint64_t>(),
           py::arg("path"), py::arg("verify_checksums") = true,
           py::arg("cache") = py::none(), py::arg("block_bytes") = 0,
           py::arg("block_cache_bytes") = 0)
      .def(
          "block_members",
          [](const PyReader& r, uint64_t block_bytes) {
            return BlockMembers(r.reader(), block_bytes);
          },
          py::arg("block_bytes"))
      .def(
          "prefetch_blocks",
          [](const PyReader& r, const py::array_t<int64_t>& indices) {
            PrefetchBlocks(r.reader(), indices);
          },
          py::arg("indices"))
      .def("block_stats",
           [](const PyReader& r) { return BlockStats(r.reader()); })
      .def_property_readonly("offline", &PyReader::offline)
      .def("__len__", &PyReader::size)
      .def("name", &PyReader::Name, py::arg("i"))
      .def("label", &PyReader::Label, py::arg("i"))
      .def("record", &PyReader::RecordInfo, py::arg("i"))
      .def("labels", &PyReader::Labels)
      .def("class_names", &PyReader::ClassNames)
      .def("find", &PyReader::Find, py::arg("name"))
      .def("read", &PyReader::Read, py::arg("i"))
      .def("read_into", &PyReader::ReadInto, py::arg("i"), py::arg("buffer"))
      .def("read_batch", &PyReader::ReadBatch, py::arg("indices"),
           py::arg("threads") = 4)
      .def("read_range", &PyReader::ReadRange, py::arg("first"),
           py::arg("count"))
      .def("sample_starts", &PyReader::SampleStarts)
      .def("read_decode", &PyReader::ReadDecode, py::arg("i"))
      .def("read_decode_batch", &PyReader::ReadDecodeBatch, py::arg("indices"),
           py::arg("threads") = 4)
      .def("read_prepare", &PyReader::ReadPrepare, py::arg("i"))
      .def("read_prepare_batch", &PyReader::ReadPrepareBatch,
           py::arg("indices"), py::arg("threads") = 4)
      .def("read_decode_pil", &ReadDecodePil, py::arg("i"),
           py::arg("new_image"))
      .def("read_decode_pil_batch", &ReadDecodePilBatch, py::arg("indices"),
           py::arg("new_image"), py::arg("threads") = 4)
      .def("info", &PyReader::Info)
      .def("metadata", &PyReader::Metadata, py::arg("key"))
      .def("check_index", &PyReader::CheckIndex);
}

}  // namespace
}  // namespace ufspack

PYBIND11_MODULE(_core, m) {
  using namespace ufspack;
  m.doc() =
      "ufspack C++ core: pack reader, builder and image decoder (private; use "
      "ufspack)";
  AddErrors(m);
  m.attr("__version__") = UFSPACK_VERSION_STRING;
  m.attr("NO_LABEL") = -1;
  AddCache(m);
  AddReader(m);
  AddTransforms(m);
  AddRemote(m);
  AddPacker(m);
  AddWriter(m);
}
