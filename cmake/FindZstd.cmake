# FindZstd: the zstd library.  Defines the imported target Zstd::Zstd.
# Uses zstd's own CMake package when installed (Debian 12), otherwise
# pkg-config or a plain search (older distributions ship no CMake files).
if(TARGET Zstd::Zstd)
  set(Zstd_FOUND TRUE)
  return()
endif()
find_package(zstd CONFIG QUIET)
if(TARGET zstd::libzstd_shared)
  add_library(Zstd::Zstd INTERFACE IMPORTED)
  set_target_properties(Zstd::Zstd PROPERTIES INTERFACE_LINK_LIBRARIES zstd::libzstd_shared)
  set(Zstd_FOUND TRUE)
  return()
endif()
include(${CMAKE_CURRENT_LIST_DIR}/UfspackFindFallback.cmake)
ufspack_find_fallback(Zstd libzstd zstd.h zstd)
