// Copyright 2026 The ufspack Authors.
//
// ufspack._core.SampleWriter (ufspack/sample_writer.h), the engine of
// ufspack.Writer, and encode_manifest (ufspack/manifest.h), with which
// ufspack.write joins the parts it wrote in ImageFolder order
// (python/ufspack/writer.py).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "buffers.h"
#include "errors.h"
#include "module_parts.h"
#include "ufspack/manifest.h"
#include "ufspack/merge.h"
#include "ufspack/reader.h"
#include "ufspack/sample_writer.h"
#include "ufspack/text.h"

namespace ufspack {

using namespace pybind11::literals;  // NOLINT: "name"_a

namespace {

// A SampleWriter whose calls may come from several Python threads: the GIL
// is released around each, so `mu` serializes them (SampleWriter is not
// thread-safe).  `bytes_in` sums the sizes of the samples added.
class PySampleWriter {
 public:
  // `compress`: store a sample as zstd (at `level`) when that makes it
  // smaller.
  PySampleWriter(const py::bytes& out_dir, bool compress, int level, bool flat,
                 const std::optional<std::vector<py::bytes>>& classes,
                 bool allow_empty) {
    SampleWriterOptions o;
    o.writer.compress = compress;
    o.writer.zstd_level = level;
    o.writer.flat = flat;
    if (classes) o.classes.assign(classes->begin(), classes->end());
    o.allow_empty = allow_empty;
    const std::string dir = out_dir;
    Status s;
    {
      py::gil_scoped_release nogil;
      s = SampleWriter::Create(dir, o, &writer_);
    }
    Check(s);
  }

  // `label`: -1 for none.  A buffer that is not C-contiguous (a strided
  // numpy view) is copied into bytes first; any other is read in place.
  void Add(const py::bytes& name_in, const py::object& data, int64_t label) {
    const std::string name = name_in;
    if (label < -1 || label >= static_cast<int64_t>(kNoLabel)) {
      Raise(Status::InvalidArgument(
          EscapeBytes(name) + ": label " + std::to_string(label) +
          " is out of range (a class index, or None for the class's)"));
    }
    py::object held = data;
    py::buffer_info b = py::reinterpret_borrow<py::buffer>(held).request();
    if (!IsContiguous(b)) {
      held = py::reinterpret_steal<py::object>(PyBytes_FromObject(data.ptr()));
      if (!held) throw py::error_already_set();
      b = py::reinterpret_borrow<py::buffer>(held).request();
    }
    const std::string_view bytes(static_cast<const char*>(b.ptr), ByteSize(b));
    const uint32_t l = label < 0 ? kNoLabel : static_cast<uint32_t>(label);
    Status s;
    {
      py::gil_scoped_release nogil;
      std::lock_guard<std::mutex> lock(mu_);
      s = writer_->Add(name, bytes, l);
      if (s.ok()) bytes_in_ += bytes.size();
    }
    Check(s);
  }

  void SetMetadata(const py::bytes& key, const py::bytes& value) {
    std::lock_guard<std::mutex> lock(mu_);
    Check(writer_->SetMetadata(std::string(key), std::string(value)));
  }

  // Publishes the pack; returns its id in hex.  A Ctrl-C pending on entry
  // abandons the pack and raises KeyboardInterrupt.
  std::string Finish() {
    if (PyErr_CheckSignals() != 0) {
      Abandon();
      throw py::error_already_set();
    }
    PackId id;
    Status s;
    {
      py::gil_scoped_release nogil;
      std::lock_guard<std::mutex> lock(mu_);
      s = writer_->Finish(&id);
    }
    Check(s);
    return id.ToHex();
  }

  void Abandon() {
    py::gil_scoped_release nogil;
    std::lock_guard<std::mutex> lock(mu_);
    writer_->Abandon();
  }

  uint64_t sample_count() {
    std::lock_guard<std::mutex> lock(mu_);
    return writer_->sample_count();
  }
  uint64_t compressed_count() {
    std::lock_guard<std::mutex> lock(mu_);
    return writer_->compressed_count();
  }
  uint64_t data_bytes() {
    std::lock_guard<std::mutex> lock(mu_);
    return writer_->data_bytes();
  }
  uint64_t bytes_in() {
    std::lock_guard<std::mutex> lock(mu_);
    return bytes_in_;
  }
  py::list classes() {
    std::lock_guard<std::mutex> lock(mu_);
    py::list out;
    for (const std::string& c : writer_->classes()) out.append(py::bytes(c));
    return out;
  }

 private:
  std::mutex mu_;
  std::unique_ptr<SampleWriter> writer_;
  uint64_t bytes_in_ = 0;
};

// A part of encode_manifest: its directory (read for its pack id, sizes
// and record count), its path relative to the manifest's directory, and
// its label map (empty: its labels are the global ones).
using PartArg = std::tuple<py::bytes, py::bytes, std::vector<uint32_t>>;
using SegmentArg = std::tuple<uint32_t, uint64_t, uint64_t>;
using ClassArg = std::tuple<py::bytes, uint64_t, uint64_t>;

// EncodeManifest of `parts` (each opened here for the facts the manifest
// records of it), `segments` (part, first, count), `classes` (name, first
// record, record count) and `meta`.  Returns (manifest bytes, pack id in
// hex); the caller publishes it.  Whether the segments and classes fit
// together is checked by the reader that opens the result (`ufspack
// verify` in full), not here.
py::tuple EncodeManifestOf(const std::vector<PartArg>& parts,
                           const std::vector<SegmentArg>& segments,
                           const std::vector<ClassArg>& classes,
                           const std::map<std::string, std::string>& meta,
                           bool flat) {
  ManifestContents c;
  c.flat = flat;
  std::vector<std::string> dirs;
  for (const auto& [dir, path, map] : parts) {
    ManifestContents::Part p;
    p.path = path;
    p.label_map = map;
    c.parts.push_back(std::move(p));
    dirs.emplace_back(dir);
  }
  for (const auto& [part, first, count] : segments) {
    SegmentEntry g;
    g.part = part;
    g.first = first;
    g.count = count;
    c.segments.push_back(g);
  }
  for (const auto& [name, first, count] : classes) {
    c.classes.push_back({std::string(name), first, count});
  }
  c.meta = meta;
  std::string bytes;
  PackId id;
  Status s;
  {
    py::gil_scoped_release nogil;
    for (size_t k = 0; k < dirs.size() && s.ok(); ++k) {
      std::unique_ptr<Reader> r;
      s = Reader::Open(dirs[k], {}, &r);
      if (!s.ok()) break;
      const PackInfo& info = r->info();
      if (info.part_count != 0 || info.flat != flat) {
        s = Status::InvalidArgument(dirs[k] + (info.part_count != 0
                                                   ? ": is a merged pack"
                                                   : ": flat and classed packs "
                                                     "cannot merge"));
        break;
      }
      ManifestContents::Part& p = c.parts[k];
      p.pack_id = info.pack_id;
      p.record_count = info.record_count;
      p.data_size = info.data_size;
      p.index_size = info.index_size;
    }
    if (s.ok()) EncodeManifest(c, &bytes, &id);
  }
  Check(s);
  return py::make_tuple(py::bytes(bytes), id.ToHex());
}

}  // namespace

void AddWriter(py::module_& m) {
  py::class_<PySampleWriter>(m, "SampleWriter")
      .def(py::init<const py::bytes&, bool, int, bool,
                    const std::optional<std::vector<py::bytes>>&, bool>(),
           py::arg("out_dir"), py::arg("compress") = false,
           py::arg("level") = 3, py::arg("flat") = false,
           py::arg("classes") = py::none(), py::arg("allow_empty") = false)
      .def("add", &PySampleWriter::Add, py::arg("name"), py::arg("data"),
           py::arg("label") = -1)
      .def("set_metadata", &PySampleWriter::SetMetadata, py::arg("key"),
           py::arg("value"))
      .def("finish", &PySampleWriter::Finish)
      .def("abandon", &PySampleWriter::Abandon)
      .def_property_readonly("sample_count", &PySampleWriter::sample_count)
      .def_property_readonly("compressed_count",
                             &PySampleWriter::compressed_count)
      .def_property_readonly("data_bytes", &PySampleWriter::data_bytes)
      .def_property_readonly("bytes_in", &PySampleWriter::bytes_in)
      .def_property_readonly("classes", &PySampleWriter::classes);
  m.def("encode_manifest", &EncodeManifestOf, py::arg("parts"),
        py::arg("segments"), py::arg("classes"), py::arg("meta"),
        py::arg("flat"),
        "EncodeManifest: (manifest bytes, pack id) of a merged pack over "
        "`parts` (dir, relative path, label map) in the order `segments`.");
  m.def(
      "publish_manifest",
      [](const py::bytes& dst, const py::bytes& manifest) {
        const std::string d = dst, bytes = manifest;
        Status s;
        {
          py::gil_scoped_release nogil;
          s = PublishMergedManifest(d, bytes);
        }
        Check(s);
      },
      py::arg("dst"), py::arg("manifest"),
      "PublishMergedManifest: `manifest` as dst/manifest.ufs, published as "
      "`ufspack merge` publishes (locked, synced, renamed).");
}

}  // namespace ufspack
