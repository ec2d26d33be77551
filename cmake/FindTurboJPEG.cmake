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

include(${CMAKE_CURRENT_LIST_DIR}/UfspackFindFallback.cmake)
ufspack_find_fallback(TurboJPEG libturbojpeg turbojpeg.h turbojpeg)
