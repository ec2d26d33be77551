# ufspack_add_library(<component> [STATIC] [INTERNAL]
#                     SOURCES <file>...
#                     INCLUDE_DIRS <dir>...
#                     LINK <target_link_libraries arguments>...)
#
# Adds the library of one component: the target ufspack_<component> (the
# file name libufspack_<component>), its alias ufspack::<component> and its
# export name <component> (ufspack::<component> once installed), compiled
# with the project's warnings (UFSPACK_WARNINGS) and linked with LINK as
# given (PUBLIC/PRIVATE keywords included).
#
# INCLUDE_DIRS: the directories of its headers, in order, public in the build
# tree only (relative ones are below the project's source directory); the
# installed target has the install tree's include directory instead.
# STATIC: a static library whatever BUILD_SHARED_LIBS says.  A shared library
# is compiled with UFSPACK_SHARED_LIBRARY (public; ufspack/export.h).
# INTERNAL: never installed: no install-tree include directory.
#
# What differs between components (compile definitions, per-source options)
# is said beside the call.
function(ufspack_add_library component)
  cmake_parse_arguments(ARG "STATIC;INTERNAL" "" "SOURCES;INCLUDE_DIRS;LINK" ${ARGN})
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "ufspack_add_library(${component}): unknown arguments ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  set(target ufspack_${component})
  if(ARG_STATIC)
    add_library(${target} STATIC ${ARG_SOURCES})
  else()
    add_library(${target} ${ARG_SOURCES})
  endif()
  add_library(ufspack::${component} ALIAS ${target})
  set_target_properties(${target} PROPERTIES OUTPUT_NAME ${target} EXPORT_NAME ${component})
  set(includes "")
  foreach(dir IN LISTS ARG_INCLUDE_DIRS)
    get_filename_component(dir "${dir}" ABSOLUTE BASE_DIR "${PROJECT_SOURCE_DIR}")
    list(APPEND includes "$<BUILD_INTERFACE:${dir}>")
  endforeach()
  if(NOT ARG_INTERNAL)
    list(APPEND includes "$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>")
  endif()
  target_include_directories(${target} PUBLIC ${includes})
  target_link_libraries(${target} ${ARG_LINK})
  target_compile_options(${target} PRIVATE ${UFSPACK_WARNINGS})
  if(BUILD_SHARED_LIBS AND NOT ARG_STATIC)
    target_compile_definitions(${target} PUBLIC UFSPACK_SHARED_LIBRARY)
  endif()
endfunction()
