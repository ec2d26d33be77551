# ufspack_find_fallback(<Name> <pkg-config module> <header> <library>):
# the last resort of the Find<Name> modules beside this file, for systems
# whose package ships no CMake files: pkg-config's hints, else a plain
# search for <header> and <library>.  Sets <Name>_FOUND and, when found,
# defines the imported target <Name>::<Name>.
include(FindPackageHandleStandardArgs)

macro(ufspack_find_fallback name pc_module header library)
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(PC_${name} QUIET ${pc_module})
  endif()
  find_path(${name}_INCLUDE_DIR ${header} HINTS ${PC_${name}_INCLUDE_DIRS})
  find_library(${name}_LIBRARY NAMES ${library} HINTS ${PC_${name}_LIBRARY_DIRS})
  find_package_handle_standard_args(${name} REQUIRED_VARS ${name}_LIBRARY ${name}_INCLUDE_DIR)
  if(${name}_FOUND)
    add_library(${name}::${name} UNKNOWN IMPORTED)
    set_target_properties(${name}::${name} PROPERTIES
      IMPORTED_LOCATION "${${name}_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${${name}_INCLUDE_DIR}")
  endif()
  mark_as_advanced(${name}_INCLUDE_DIR ${name}_LIBRARY)
endmacro()
