// Copyright 2026 The ufspack Authors.
//
// The parts of ufspack._core, each adding its classes and functions to the
// module (bindings.cc calls them in this order, which is the order the
// module's names are defined in).  REQUIRES: the GIL held; AddErrors
// (errors.h) called first.
#ifndef UFSPACK_PYTHON_MODULE_PARTS_H_
#define UFSPACK_PYTHON_MODULE_PARTS_H_

#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace ufspack {

// SampleTable, Cache (cache_bindings.cc).
void AddCache(py::module_& m);
// Prepared, TransformSpec, transform_batch, decode_rgb, sniff_format
// (transform_bindings.cc).
void AddTransforms(py::module_& m);
// upload_pack, remote_stats (remote_bindings.cc).
void AddRemote(py::module_& m);
// build, append, merge (packer_bindings.cc).
void AddPacker(py::module_& m);
// SampleWriter, encode_manifest (writer_bindings.cc).
void AddWriter(py::module_& m);

}  // namespace ufspack

#endif  // UFSPACK_PYTHON_MODULE_PARTS_H_
