// Copyright 2026 The ufspack Authors.
//
// UFSPACK_XXH3_UPDATE: XXH3_64bits_update, or its runtime-dispatched
// (AVX2/AVX-512) version where the build found libxxhash's dispatcher.
// Internal to the packer.
#ifndef UFSPACK_PACKER_SRC_XXH3_H_
#define UFSPACK_PACKER_SRC_XXH3_H_

#include <xxhash.h>
#ifdef UFSPACK_HAVE_XXH_DISPATCH
#include <xxh_x86dispatch.h>
#define UFSPACK_XXH3_UPDATE XXH3_64bits_update_dispatch
#else
#define UFSPACK_XXH3_UPDATE XXH3_64bits_update
#endif

#endif  // UFSPACK_PACKER_SRC_XXH3_H_
