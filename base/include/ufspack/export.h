// Copyright 2026 The ufspack Authors.
//
// UFSPACK_EXPORT marks the public API of the ufspack libraries.  The
// libraries are built with hidden visibility; only marked symbols are
// exported from shared builds.
#ifndef UFSPACK_EXPORT_H_
#define UFSPACK_EXPORT_H_

#if defined(UFSPACK_SHARED_LIBRARY) && defined(__GNUC__)
#define UFSPACK_EXPORT __attribute__((visibility("default")))
#else
#define UFSPACK_EXPORT
#endif

#endif  // UFSPACK_EXPORT_H_
