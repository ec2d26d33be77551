// Copyright 2026 The ufspack Authors.
//
// Status -> Python exception: NotFound -> FileNotFoundError,
// InvalidArgument/NotSupported -> ValueError, Corruption ->
// CorruptPackError (an OSError), IOError -> OSError (its errno's subclass
// when the Status carries an errno), OutOfRange -> OSError, Aborted ->
// KeyboardInterrupt.
//
// IndexError comes from CheckInRange alone: a binding checks an index
// argument against the size itself, before the call, and only that check
// raises IndexError.  A Status is what a layer below answered; an
// OutOfRange there (an HTTP 416 on a ranged read, a merged pack's part
// shorter than its manifest says) is a failure of this call, not the
// caller's index being past the end.  Raised as IndexError, Python's
// iteration protocol would take it for the end of the sequence, and
// `for x in dataset` would end an epoch early without an error.
//
// Thread safety: REQUIRES the GIL held.
#ifndef UFSPACK_PYTHON_ERRORS_H_
#define UFSPACK_PYTHON_ERRORS_H_

#include <pybind11/pybind11.h>

#include <cstdint>
#include <vector>

#include "ufspack/status.h"

namespace py = pybind11;

namespace ufspack {

// Adds CorruptPackError to `m`; call once, before any Raise.
void AddErrors(py::module_& m);

// Raises the Python exception for a failed Status (never IndexError).
[[noreturn]] void Raise(const Status& s);

// Raises for a failed Status; nothing for OK.
inline void Check(const Status& s) {
  if (!s.ok()) Raise(s);
}

// IndexError "<what> index <i> out of range (pack has <n> <what>s)" unless
// i < n.
void CheckInRange(uint64_t i, uint64_t n, const char* what);
// CheckInRange of each of `indices`, in order.
void CheckAllInRange(const std::vector<uint64_t>& indices, uint64_t n,
                     const char* what);

}  // namespace ufspack

#endif  // UFSPACK_PYTHON_ERRORS_H_
