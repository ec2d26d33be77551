// Copyright 2026 The ufspack Authors.
//
// ufspack._core.Cache and SampleTable: the node-local cache
// (ufspack/cache.h).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "buffers.h"
#include "errors.h"
#include "module_parts.h"
#include "ufspack/cache.h"

namespace ufspack {

using namespace pybind11::literals;  // NOLINT: "name"_a
namespace {

py::dict TierStatsToDict(const CacheTierStats& s) {
  return py::dict("dir"_a = py::bytes(s.dir), "limit"_a = s.limit,
                  "charged_bytes"_a = s.charged_bytes,
                  "disk_bytes"_a = s.disk_bytes, "entries"_a = s.entries,
                  "tables"_a = s.tables, "hits"_a = s.hits,
                  "misses"_a = s.misses, "inserts"_a = s.inserts,
                  "refused"_a = s.refused, "dropped"_a = s.dropped,
                  "errors"_a = s.errors, "evicted_tables"_a = s.evicted_tables);
}

std::shared_ptr<Cache> OpenCache(const py::bytes& dir, uint64_t limit,
                                 const py::bytes& ram_dir, uint64_t ram_limit) {
  CacheOptions o;
  o.dir = dir;
  o.limit = limit;
  o.ram_dir = ram_dir;
  o.ram_limit = ram_limit;
  std::shared_ptr<Cache> cache;
  Status s;
  {
    py::gil_scoped_release nogil;
    s = Cache::Open(o, &cache);
  }
  Check(s);
  return cache;
}

py::object TableGet(SampleTable& t, uint64_t slot) {
  std::string bytes;
  bool hit;
  {
    py::gil_scoped_release nogil;
    hit = t.Get(slot, &bytes);
  }
  if (!hit) return py::none();
  return py::bytes(bytes);
}

bool TablePut(SampleTable& t, uint64_t slot, const py::buffer& data) {
  py::buffer_info b = data.request();
  if (!IsContiguous(b)) {
    throw py::value_error("put: the data must be contiguous");
  }
  py::gil_scoped_release nogil;
  return t.Put(slot, static_cast<const char*>(b.ptr), ByteSize(b));
}

py::list Stats(const Cache& c) {
  std::vector<CacheTierStats> tiers;
  {
    py::gil_scoped_release nogil;
    tiers = c.Stats();
  }
  py::list out;
  for (const CacheTierStats& t : tiers) out.append(TierStatsToDict(t));
  return out;
}

std::shared_ptr<SampleTable> OpenSampleTable(Cache& c, const py::bytes& name,
                                             uint64_t slot_count) {
  const std::string n = name;
  std::unique_ptr<SampleTable> t;
  Status s;
  {
    py::gil_scoped_release nogil;
    s = c.OpenSampleTable(n, slot_count, &t);
  }
  Check(s);
  return std::shared_ptr<SampleTable>(std::move(t));
}

py::dict Stat(const py::bytes& dir) {
  const std::string d = dir;
  CacheTierStats st;
  Status s;
  {
    py::gil_scoped_release nogil;
    s = Cache::Stat(d, &st);
  }
  Check(s);
  return TierStatsToDict(st);
}

uint64_t Clear(const py::bytes& dir) {
  const std::string d = dir;
  uint64_t kept = 0;
  Status s;
  {
    py::gil_scoped_release nogil;
    s = Cache::Clear(d, &kept);
  }
  Check(s);
  return kept;
}

}  // namespace

void AddCache(py::module_& m) {
  py::class_<SampleTable, std::shared_ptr<SampleTable>>(m, "SampleTable")
      .def_property_readonly("slot_count", &SampleTable::slot_count)
      .def("get", &TableGet, py::arg("slot"))
      .def("put", &TablePut, py::arg("slot"), py::arg("data"));

  py::class_<Cache, std::shared_ptr<Cache>>(m, "Cache")
      .def(py::init(&OpenCache), py::arg("dir"), py::arg("limit") = 0,
           py::arg("ram_dir") = py::bytes(""), py::arg("ram_limit") = 0)
      .def("flush_stats", &Cache::FlushStats)
      .def("stats", &Stats)
      .def("open_sample_table", &OpenSampleTable, py::arg("name"),
           py::arg("slot_count"),
           py::keep_alive<0, 1>())  // its tables point into the Cache
      .def_static("stat", &Stat, py::arg("dir"))
      .def_static("clear", &Clear, py::arg("dir"));
}

}  // namespace ufspack
