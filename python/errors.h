// Copyright 2026 The ufspack Authors.
//
// Status -> Python exception: NotFound -> FileNotFoundError,
// InvalidArgument/NotSupported -> ValueError, OutOfRange -> IndexError,
// Corruption -> CorruptPackError (an OSError), IOError -> OSError (its
// errno's subclass when the Status carries an errno), Aborted ->
// KeyboardInterrupt.
//
// Thread safety: REQUIRES the GIL held.
#ifndef UFSPACK_PYTHON_ERRORS_H_
#define UFSPACK_PYTHON_ERRORS_H_

#include <pybind11/pybind11.h>

#include "ufspack/status.h"

namespace py = pybind11;

namespace ufspack {

// Adds CorruptPackError to `m`; call once, before any Raise.
void AddErrors(py::module_& m);

// Raises the Python exception for a failed Status.
[[noreturn]] void Raise(const Status& s);

// Raises for a failed Status; nothing for OK.
inline void Check(const Status& s) {
  if (!s.ok()) Raise(s);
}

}  // namespace ufspack

#endif  // UFSPACK_PYTHON_ERRORS_H_
