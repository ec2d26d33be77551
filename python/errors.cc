// Copyright 2026 The ufspack Authors.
#include "errors.h"

#include <stdexcept>
#include <string>

namespace ufspack {
namespace {

PyObject* g_corrupt_pack_error = nullptr;

// Raises OSError(errno, msg), which Python makes the errno's subclass
// (ENOENT: FileNotFoundError, EISDIR: IsADirectoryError, ...): raised as
// that type, the exception pybind11 and Python see is the one made.
[[noreturn]] void RaiseErrno(int errno_value, const std::string& msg) {
  py::object err = py::reinterpret_steal<py::object>(
      PyObject_CallFunction(PyExc_OSError, "is", errno_value, msg.c_str()));
  if (!err) throw py::error_already_set();
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(err.ptr())), err.ptr());
  throw py::error_already_set();
}

}  // namespace

void AddErrors(py::module_& m) {
  static py::exception<std::runtime_error> corrupt(m, "CorruptPackError",
                                                   PyExc_OSError);
  g_corrupt_pack_error = corrupt.ptr();
}

void Raise(const Status& s) {
  const std::string msg(s.message());
  PyObject* type = PyExc_RuntimeError;
  switch (s.code()) {
    case Status::Code::kNotFound:
      type = PyExc_FileNotFoundError;
      break;
    case Status::Code::kInvalidArgument:
    case Status::Code::kNotSupported:
      type = PyExc_ValueError;
      break;
    case Status::Code::kOutOfRange:  // from below: see errors.h
      type = PyExc_OSError;
      break;
    case Status::Code::kCorruption:
      type = g_corrupt_pack_error;
      break;
    case Status::Code::kIOError:
      if (s.errno_value() != 0) RaiseErrno(s.errno_value(), msg);
      type = PyExc_OSError;
      break;
    case Status::Code::kAborted:
      type = PyExc_KeyboardInterrupt;
      break;
    case Status::Code::kOk:
      break;  // not an error; reported as RuntimeError below
  }
  PyErr_SetString(type, msg.c_str());
  throw py::error_already_set();
}

void CheckInRange(uint64_t i, uint64_t n, const char* what) {
  if (i < n) return;
  const std::string msg = std::string(what) + " index " + std::to_string(i) +
                          " out of range (pack has " + std::to_string(n) + " " +
                          what + "s)";
  PyErr_SetString(PyExc_IndexError, msg.c_str());
  throw py::error_already_set();
}

void CheckAllInRange(const std::vector<uint64_t>& indices, uint64_t n,
                     const char* what) {
  for (const uint64_t i : indices) CheckInRange(i, n, what);
}

}  // namespace ufspack
