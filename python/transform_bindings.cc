// Copyright 2026 The ufspack Authors.
//
// ufspack._core.Prepared, TransformSpec, transform_batch (the fused decode
// + transforms of loader/src/prepared_sample.h), decode_rgb and
// sniff_format.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "buffers.h"
#include "errors.h"
#include "module_parts.h"
#include "prepared_sample.h"
#include "ufspack/decode.h"
#include "ufspack/transform.h"

namespace ufspack {
namespace {

using PixelArray =
    py::array_t<uint8_t, py::array::c_style | py::array::forcecast>;

void SetPixels(PreparedSample& p, PixelArray a) {
  if (a.ndim() != 3 || a.shape(2) != 3 || a.shape(0) < 1 || a.shape(1) < 1) {
    throw py::value_error("set_pixels: expected HxWx3 uint8 RGB");
  }
  RgbImage img;
  img.width = static_cast<int>(a.shape(1));
  img.height = static_cast<int>(a.shape(0));
  img.pixels.reset(new uint8_t[img.size()]);
  std::memcpy(img.pixels.get(), a.data(), img.size());
  p.SetPixels(std::move(img));
}

const char* KindName(const PreparedSample& p) {
  switch (p.kind) {
    case PreparedSample::kJpeg:
      return "jpeg";
    case PreparedSample::kPixels:
      return "pixels";
    case PreparedSample::kNeedsPil:
      break;
  }
  return "pil";
}

// Output k's writable memory, checked against specs[k].
void* OutputBuffer(const py::handle& output, const TransformSpec& spec,
                   size_t k, std::vector<py::buffer_info>* keep) {
  py::buffer b = output.cast<py::buffer>();
  py::buffer_info info = b.request(/*writable=*/true);
  const size_t bytes = ByteSize(info);
  const bool contiguous = IsContiguous(info);
  if (!contiguous || bytes != spec.output_bytes()) {
    throw py::value_error(
        "transform_batch: output " + std::to_string(k) + " has " +
        std::to_string(bytes) + (contiguous ? "" : " non-contiguous") +
        " bytes, the spec writes " + std::to_string(spec.output_bytes()));
  }
  keep->push_back(std::move(info));
  return keep->back().ptr;
}

// transform_batch(images, specs, outputs, threads) -> [None | "pil"]
py::list TransformBatch(
    const std::vector<std::shared_ptr<PreparedSample>>& items,
    const std::vector<TransformSpec>& specs, const py::list& outputs,
    int threads) {
  const size_t n = items.size();
  if (specs.size() != n || static_cast<size_t>(py::len(outputs)) != n) {
    throw py::value_error("transform_batch: " + std::to_string(n) +
                          " images, " + std::to_string(specs.size()) +
                          " specs and " + std::to_string(py::len(outputs)) +
                          " outputs");
  }
  std::vector<const PreparedSample*> samples(n);
  std::vector<void*> outs(n);
  std::vector<py::buffer_info> bufs;
  bufs.reserve(n);
  for (size_t k = 0; k < n; ++k) {
    if (!items[k]) throw py::value_error("transform_batch: None image");
    Check(specs[k].Validate());
    samples[k] = items[k].get();
    outs[k] = OutputBuffer(outputs[k], specs[k], k, &bufs);
  }
  std::vector<Status> results;
  {
    py::gil_scoped_release nogil;
    results = TransformPreparedBatch(samples, specs, outs, threads);
  }
  py::list out;
  for (const Status& s : results) {
    if (s.ok()) {
      out.append(py::none());
    } else if (s.IsNotSupported()) {
      out.append(py::str("pil"));
    } else {
      Raise(s);
    }
  }
  return out;
}

void SetCrop(TransformSpec& s, std::array<int, 4> pad, std::array<int, 3> fill,
             std::array<int, 4> box) {
  s.has_crop = true;
  for (int i = 0; i < 4; ++i) s.pad[i] = pad[i];
  for (int i = 0; i < 3; ++i) {
    if (fill[i] < 0 || fill[i] > 255) {
      throw py::value_error("set_crop: fill outside 0..255");
    }
    s.fill[i] = static_cast<uint8_t>(fill[i]);
  }
  for (int i = 0; i < 4; ++i) s.box[i] = box[i];
}

void SetOutput(TransformSpec& s, const std::string& kind,
               std::array<float, 3> mean, std::array<float, 3> std) {
  if (kind == "rgb") {
    s.output = TransformOutput::kRgb;
  } else if (kind == "chw_u8") {
    s.output = TransformOutput::kChwU8;
  } else if (kind == "chw_f32") {
    s.output = TransformOutput::kChwF32;
  } else {
    throw py::value_error("set_output: unknown kind " + kind);
  }
  for (int i = 0; i < 3; ++i) {
    s.mean[i] = mean[i];
    s.std[i] = std[i];
  }
}

py::object DecodeRgbPy(const py::bytes& data) {
  const std::string bytes = data;
  RgbImage img;
  Status s;
  {
    py::gil_scoped_release nogil;
    s = DecodeRgb(bytes.data(), bytes.size(), &img);
  }
  if (!s.ok()) return py::none();
  return ToArray(&img);
}

void AddPrepared(py::module_& m) {
  py::class_<PreparedSample, std::shared_ptr<PreparedSample>>(m, "Prepared")
      .def(py::init<>())  // empty: set_pixels gives it an image
      .def_property_readonly("width",
                             [](const PreparedSample& p) { return p.width; })
      .def_property_readonly("height",
                             [](const PreparedSample& p) { return p.height; })
      .def_property_readonly("kind", &KindName)
      .def_property_readonly(
          "data", [](const PreparedSample& p) { return py::bytes(p.data); })
      .def("set_pixels", &SetPixels, py::arg("pixels"));
}

void AddTransformSpec(py::module_& m) {
  py::class_<TransformSpec>(m, "TransformSpec")
      .def(py::init<>())
      .def_readwrite("in_width", &TransformSpec::in_width)
      .def_readwrite("in_height", &TransformSpec::in_height)
      .def("set_resize_before",
           [](TransformSpec& s, int w, int h, int filter) {
             s.has_resize_before = true;
             s.resize_before = {w, h, static_cast<Resample>(filter)};
           })
      .def("set_crop", &SetCrop)
      .def("set_resize_after",
           [](TransformSpec& s, int w, int h, int filter) {
             s.has_resize_after = true;
             s.resize_after = {w, h, static_cast<Resample>(filter)};
           })
      .def_readwrite("hflip", &TransformSpec::hflip)
      .def_readwrite("dct_scaling", &TransformSpec::dct_scaling)
      .def("set_output", &SetOutput, py::arg("kind"),
           py::arg("mean") = std::array<float, 3>{0, 0, 0},
           py::arg("std") = std::array<float, 3>{1, 1, 1})
      .def_property_readonly("out_width", &TransformSpec::out_width)
      .def_property_readonly("out_height", &TransformSpec::out_height)
      .def("validate", [](const TransformSpec& s) { Check(s.Validate()); });
}

}  // namespace

void AddTransforms(py::module_& m) {
  AddPrepared(m);
  AddTransformSpec(m);
  m.def("transform_batch", &TransformBatch, py::arg("images"), py::arg("specs"),
        py::arg("outputs"), py::arg("threads") = 1,
        "Runs each spec on its prepared image into its output buffer, on "
        "`threads` threads with the GIL released; per image None (done) or "
        "'pil' (decode with PIL, set_pixels, and run again).");
  m.def("decode_rgb", &DecodeRgbPy, py::arg("data"),
        "Decodes to an HxWx3 uint8 RGB array with PIL's pixels, or None when "
        "PIL must decode it.");
  m.def(
      "sniff_format",
      [](const py::bytes& data) {
        const std::string bytes = data;
        return std::string(
            ImageFormatName(SniffImageFormat(bytes.data(), bytes.size())));
      },
      py::arg("data"));
}

}  // namespace ufspack
