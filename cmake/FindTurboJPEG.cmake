# FindTurboJPEG: libjpeg-turbo's TurboJPEG API.  Defines the imported target
# TurboJPEG::TurboJPEG.  Uses libjpeg-turbo's own CMake package where it is
# installed (Debian 12's libturbojpeg0-dev ships one:
# libjpeg-turbo::turbojpeg), else pkg-config, else a plain search.
if(TARGET TurboJPEG::TurboJPEG)
  set(TurboJPEG_FOUND TRUE)
  return()
endif()

find_package(libjpeg-turbo CONFIG QUIET)
if(TARGET libjpeg-turbo::turbojpeg)
  add_library(TurboJPEG::TurboJPEG INTERFACE IMPORTED)
  set_target_properties(TurboJPEG::TurboJPEG PROPERTIES
    INTERFACE_LINK_LIBRARIES libjpeg-turbo::turbojpeg)
  set(TurboJPEG_FOUND TRUE)
  if(NOT TurboJPEG_FIND_QUIETLY)
    message(STATUS "Found TurboJPEG: libjpeg-turbo ${libjpeg-turbo_VERSION} (CMake package)")
  endif()
  return()
endif()

find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(PC_TURBOJPEG QUIET libturbojpeg)
endif()
find_path(TurboJPEG_INCLUDE_DIR turbojpeg.h HINTS ${PC_TURBOJPEG_INCLUDE_DIRS})
find_library(TurboJPEG_LIBRARY NAMES turbojpeg HINTS ${PC_TURBOJPEG_LIBRARY_DIRS})
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(TurboJPEG REQUIRED_VARS TurboJPEG_LIBRARY TurboJPEG_INCLUDE_DIR)
if(TurboJPEG_FOUND)
  add_library(TurboJPEG::TurboJPEG UNKNOWN IMPORTED)
  set_target_properties(TurboJPEG::TurboJPEG PROPERTIES
    IMPORTED_LOCATION "${TurboJPEG_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${TurboJPEG_INCLUDE_DIR}")
endif()
mark_as_advanced(TurboJPEG_INCLUDE_DIR TurboJPEG_LIBRARY)
