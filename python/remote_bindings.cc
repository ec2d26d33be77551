// Copyright 2026 The ufspack Authors.
//
// ufspack._core.upload_pack and remote_stats (ufspack/remote.h).
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "errors.h"
#include "module_parts.h"
#include "ufspack/remote.h"

namespace ufspack {

using namespace pybind11::literals;  // NOLINT: "name"_a
namespace {

// UploadPack with Ctrl-C (or an error from `progress` or `log`) cancelling
// it, re-raised afterwards.
void UploadPackPy(const py::bytes& local, const std::string& url,
                  const std::function<void(uint64_t, uint64_t)>& progress,
                  const std::function<void(const std::string&)>& log) {
  UploadOptions o;
  std::atomic<bool> cancel{false};
  o.cancel = &cancel;
  std::shared_ptr<py::error_already_set> saved_error;
  o.progress = [&](uint64_t done, uint64_t total) {
    py::gil_scoped_acquire gil;
    try {
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
      if (progress) progress(done, total);
    } catch (py::error_already_set& e) {
      if (!saved_error) {
        saved_error = std::make_shared<py::error_already_set>(std::move(e));
      }
      cancel = true;
    }
  };
  if (log) {
    o.log = [&](const std::string& line) {
      py::gil_scoped_acquire gil;
      try {
        log(line);
      } catch (py::error_already_set& e) {
        if (!saved_error) {
          saved_error = std::make_shared<py::error_already_set>(std::move(e));
        }
        cancel = true;
      }
    };
  }
  Status s;
  const std::string local_s = local;
  {
    py::gil_scoped_release nogil;
    s = UploadPack(local_s, url, o);
  }
  if (saved_error && !s.ok()) {
    saved_error->restore();
    throw py::error_already_set();
  }
  Check(s);
}

py::dict RemoteStatsPy() {
  const RemoteStats st = GetRemoteStats();
  return py::dict("requests"_a = st.requests, "bytes"_a = st.bytes,
                  "retries"_a = st.retries, "coalesced"_a = st.coalesced);
}

}  // namespace

void AddRemote(py::module_& m) {
  m.def("upload_pack", &UploadPackPy, py::arg("local"), py::arg("url"),
        py::arg("progress") = nullptr, py::arg("log") = nullptr,
        "Uploads the local pack directory `local` to the s3:// pack URL "
        "`url`: data.ufs first, index.ufs last; a merged pack's parts each "
        "under a key of its own, its manifest last (see docs/remote.md). "
        "`log(line)` gets a line for each part found already uploaded and "
        "each stale object deleted.");
  m.def("remote_stats", &RemoteStatsPy,
        "Process-wide counters of remote reads: requests sent (retries "
        "included), response body bytes, retries, and ranges served by a "
        "merged request.");
}

}  // namespace ufspack
