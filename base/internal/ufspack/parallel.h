// Copyright 2026 The ufspack Authors.
//
// ParallelFor: runs a loop body over [0, n) on a process-wide pool of worker
// threads that outlives the call.  Batch reads and decodes use it: starting
// threads for every batch of 32 records costs more than reading the batch
// from the page cache, while on a network file system the point is to keep
// several reads in flight.
//
// Thread safety: ParallelFor may be called from any number of threads at
// once; each call returns only when all its iterations are done.  The pool
// grows to the largest `threads` asked for (capped at kMaxPoolThreads) and
// its threads live until the process exits.
//
// fork(): a child process does not inherit the parent's worker threads; the
// pool notices (pthread_atfork) and the child's first ParallelFor starts a
// pool of its own.  Safe for DataLoader workers forked while a batch runs in
// another thread of the parent.
#ifndef UFSPACK_PARALLEL_H_
#define UFSPACK_PARALLEL_H_

#include <cstddef>
#include <functional>

#include "ufspack/export.h"
#include "ufspack/status.h"

namespace ufspack {

inline constexpr int kMaxPoolThreads = 64;

// Calls body(k) once for every k in [0, n), on up to `threads` threads (the
// calling thread is one of them; threads <= 1 or n <= 1 runs inline), in no
// particular order.  `body` must not throw.  To stop early, have the body
// check a flag of its own.
UFSPACK_EXPORT void ParallelFor(size_t n, int threads,
                                const std::function<void(size_t)>& body);

// ParallelFor over a body that can fail: returns the first error reported
// (in time, not in k order); once one is reported, bodies not yet started
// are skipped.  Runs inline, stopping at the first error, when threads <= 1
// or n <= 1.
UFSPACK_EXPORT Status ParallelForStatus(
    size_t n, int threads, const std::function<Status(size_t)>& body);

}  // namespace ufspack

#endif  // UFSPACK_PARALLEL_H_
