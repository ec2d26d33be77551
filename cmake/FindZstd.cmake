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
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(PC_ZSTD QUIET libzstd)
endif()
find_path(Zstd_INCLUDE_DIR zstd.h HINTS ${PC_ZSTD_INCLUDE_DIRS})
find_library(Zstd_LIBRARY NAMES zstd HINTS ${PC_ZSTD_LIBRARY_DIRS})
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Zstd REQUIRED_VARS Zstd_LIBRARY Zstd_INCLUDE_DIR)
if(Zstd_FOUND)
  add_library(Zstd::Zstd UNKNOWN IMPORTED)
  set_target_properties(Zstd::Zstd PROPERTIES
    IMPORTED_LOCATION "${Zstd_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${Zstd_INCLUDE_DIR}")
endif()
mark_as_advanced(Zstd_INCLUDE_DIR Zstd_LIBRARY)
