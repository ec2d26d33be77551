# FindxxHash: the xxHash library (XXH3).  Defines the imported target
# xxHash::xxHash.  Debian ships no CMake package for it, so this uses
# pkg-config or a plain search.
if(TARGET xxHash::xxHash)
  set(xxHash_FOUND TRUE)
  return()
endif()
include(${CMAKE_CURRENT_LIST_DIR}/UfspackFindFallback.cmake)
ufspack_find_fallback(xxHash libxxhash xxhash.h xxhash)
