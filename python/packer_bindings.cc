// Copyright 2026 The ufspack Authors.
//
// ufspack._core.build, append and merge (ufspack/builder.h, merge.h).  A
// Python error raised while building (Ctrl-C, or from the progress
// callback) cancels the build and is re-raised afterwards.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "errors.h"
#include "module_parts.h"
#include "ufspack/builder.h"
#include "ufspack/merge.h"

namespace ufspack {

using namespace pybind11::literals;  // NOLINT: "name"_a

namespace {

py::list Warnings(const std::vector<std::string>& warnings) {
  py::list out;
  for (const auto& w : warnings) out.append(py::bytes(w));
  return out;
}

py::dict BuildSummaryToDict(const BuildSummary& summary, uint32_t part,
                            uint32_t parts) {
  py::dict d(
      "files"_a = summary.files, "classes"_a = summary.classes,
      "skipped"_a = summary.skipped, "not_matching"_a = summary.not_matching,
      "compressed"_a = summary.compressed, "bytes_in"_a = summary.bytes_in,
      "bytes_out"_a = summary.bytes_out, "index_bytes"_a = summary.index_bytes,
      "seconds"_a = summary.seconds, "pack_id"_a = summary.pack_id.ToHex());
  if (parts > 1) {
    d["part"] = part;
    d["parts"] = parts;
    d["part_first"] = summary.part_first;
    d["part_samples"] = summary.part_samples;
    d["split_samples"] = summary.split_samples;
  }
  d["warnings"] = Warnings(summary.warnings);
  return d;
}

py::dict Build(
    const std::vector<py::bytes>& srcs, const py::bytes& dst, int threads,
    const std::string& compress, int level, const std::string& layout,
    const std::optional<std::vector<std::string>>& extensions, bool all_files,
    bool flat, bool allow_empty, bool skip_unreadable,
    const std::function<void(uint64_t, uint64_t, uint64_t, uint64_t)>& progress,
    uint32_t part, uint32_t parts, const std::string& label_field) {
  BuildOptions o;
  o.label_field = label_field;
  o.threads = threads;
  o.part = part;
  o.parts = parts;
  if (compress == "zstd") {
    o.writer.compress = true;
    o.writer.zstd_level = level;
  } else if (compress != "none") {
    Raise(Status::InvalidArgument("compress must be 'none' or 'zstd', not '" +
                                  compress + "'"));
  }
  Check(ParseDataLayout(layout, &o.layout));
  if (extensions) o.scan.extensions = *extensions;
  o.scan.all_files = all_files;
  o.scan.flat = flat;
  o.scan.allow_empty = allow_empty;
  o.skip_unreadable = skip_unreadable;
  std::atomic<bool> cancel{false};
  o.cancel = &cancel;
  // A Python error raised while building (Ctrl-C, or from the progress
  // callback) cancels the build and is re-raised afterwards.
  std::shared_ptr<py::error_already_set> saved_error;
  o.progress = [&](const BuildProgress& p) {
    py::gil_scoped_acquire gil;
    try {
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
      // (Not while a part build sizes the whole tree: files_total would
      // count the tree's files, then the part's.)
      if (progress && !p.splitting)
        progress(p.files_done, p.files_total, p.bytes_in, p.bytes_out);
    } catch (py::error_already_set& e) {
      saved_error = std::make_shared<py::error_already_set>(std::move(e));
      cancel = true;
    }
  };
  BuildSummary summary;
  Status s;
  const std::vector<std::string> src_s(srcs.begin(), srcs.end());
  const std::string dst_s = dst;
  if (src_s.empty()) Raise(Status::InvalidArgument("nothing to pack"));
  {
    py::gil_scoped_release nogil;
    s = src_s.size() == 1 ? BuildPack(src_s[0], dst_s, o, &summary)
                          : BuildPackFromArchives(src_s, dst_s, o, &summary);
  }
  if (saved_error) {
    saved_error->restore();
    throw py::error_already_set();
  }
  Check(s);
  return BuildSummaryToDict(summary, part, parts);
}

py::dict Merge(const std::vector<py::bytes>& parts_in, const py::bytes& out) {
  std::vector<std::string> parts(parts_in.begin(), parts_in.end());
  const std::string out_s = out;
  MergeSummary summary;
  Status s;
  {
    py::gil_scoped_release nogil;
    s = MergePacks(parts, out_s, &summary);
  }
  Check(s);
  return py::dict("manifest"_a = py::bytes(summary.manifest_path),
                  "pack_id"_a = summary.pack_id.ToHex(),
                  "parts"_a = summary.parts, "split"_a = summary.split,
                  "records"_a = summary.records, "classes"_a = summary.classes,
                  "data_bytes"_a = summary.data_bytes,
                  "manifest_bytes"_a = summary.manifest_bytes,
                  "seconds"_a = summary.seconds);
}

py::dict Append(const py::bytes& pack, const py::bytes& dir, bool relabel,
                int threads, bool skip_unreadable,
                std::optional<std::vector<py::bytes>> files,
                const std::optional<std::string>& layout) {
  AppendOptions o;
  if (layout) {
    o.layout.emplace();
    Check(ParseDataLayout(*layout, &*o.layout));
  }
  o.relabel = relabel;
  if (files) {
    o.files.emplace();
    o.files->reserve(files->size());
    for (const py::bytes& f : *files) o.files->emplace_back(f);
  }
  o.build.threads = threads;
  o.build.skip_unreadable = skip_unreadable;
  std::atomic<bool> cancel{false};
  o.build.cancel = &cancel;
  bool interrupted = false;
  o.build.progress = [&](const BuildProgress&) {
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) {
      interrupted = true;
      cancel = true;
    }
  };
  const std::string pack_s = pack, dir_s = dir;
  AppendSummary summary;
  Status s;
  {
    py::gil_scoped_release nogil;
    s = AppendPack(pack_s, dir_s, o, &summary);
  }
  if (interrupted) throw py::error_already_set();
  Check(s);
  return py::dict(
      "manifest"_a = py::bytes(summary.manifest_path),
      "part"_a = py::bytes(summary.part_dir),
      "pack_id"_a = summary.pack_id.ToHex(), "appended"_a = summary.appended,
      "records"_a = summary.records, "new_classes"_a = summary.new_classes,
      "relabeled_classes"_a = summary.relabeled_classes,
      "kept"_a = summary.kept, "already_packed"_a = summary.already_packed,
      "parts"_a = summary.parts, "segments"_a = summary.segments,
      "seconds"_a = summary.seconds, "warnings"_a = Warnings(summary.warnings));
}

// UploadPack with Ctrl-C (or an error from `progress`) cancelling it,
}  // namespace

void AddPacker(py::module_& m) {
  m.def("build", &Build, py::arg("srcs"), py::arg("dst"),
        py::arg("threads") = 32, py::arg("compress") = "none",
        py::arg("level") = 3, py::arg("layout") = "sorted",
        py::arg("extensions") = py::none(), py::arg("all_files") = false,
        py::arg("flat") = false, py::arg("allow_empty") = false,
        py::arg("skip_unreadable") = false, py::arg("progress") = nullptr,
        py::arg("part") = 0, py::arg("parts") = 1, py::arg("label_field") = "");
  m.def("append", &Append, py::arg("pack"), py::arg("dir"),
        py::arg("relabel") = false, py::arg("threads") = 32,
        py::arg("skip_unreadable") = false, py::arg("files") = py::none(),
        py::arg("layout") = py::none(),
        "AppendPack: add the files of `dir` that `pack` lacks (or the listed "
        "`files`, relative to `dir`).");
  m.def("merge", &Merge, py::arg("parts"), py::arg("out"),
        "MergePacks: one pack over `parts` (manifest.ufs in `out`).");
}

}  // namespace ufspack
