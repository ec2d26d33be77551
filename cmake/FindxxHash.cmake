# FindxxHash: the xxHash library (XXH3).  Defines the imported target
# xxHash::xxHash.  Debian ships no CMake package for it, so this uses
# pkg-config or a plain search.
if(TARGET xxHash::xxHash)
  set(xxHash_FOUND TRUE)
  return()
endif()
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(PC_XXHASH QUIET libxxhash)
endif()
find_path(xxHash_INCLUDE_DIR xxhash.h HINTS ${PC_XXHASH_INCLUDE_DIRS})
find_library(xxHash_LIBRARY NAMES xxhash HINTS ${PC_XXHASH_LIBRARY_DIRS})
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(xxHash REQUIRED_VARS xxHash_LIBRARY xxHash_INCLUDE_DIR)
if(xxHash_FOUND)
  add_library(xxHash::xxHash UNKNOWN IMPORTED)
  set_target_properties(xxHash::xxHash PROPERTIES
    IMPORTED_LOCATION "${xxHash_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${xxHash_INCLUDE_DIR}")
endif()
mark_as_advanced(xxHash_INCLUDE_DIR xxHash_LIBRARY)
