# backplane_add_plugin(NAME SOURCES src... [LINK_LIBRARIES libs...] [OUTPUT_DIRECTORY dir] [ABI 1.N])
#
# Builds a Backplane device plugin: a shared library that links the plugin
# SDK (headers only), hides every symbol except the entry points that
# BACKPLANE_PLUGIN(...) exports, and resolves all its own symbols at link
# time. In the Backplane tree the library lands in the default plugin
# directory; out of tree, where you put it.
#
# ABI 1.N: the plugin ABI minor the plugin's source was written for
# (BP_TARGET_ABI_MINOR=N; Note [The ABI a plugin's source targets] in
# plugin_api.h). The host then treats the plugin as one built against that
# minor's headers, whatever SDK it is built with: a newer SDK hands its
# kernels nothing they were not written for (no dtype added later).
#
# BACKPLANE_PLUGIN_NO_UNDEFINED (default ON): set it OFF to let the library
# leave symbols for the executable to define, which builds whose runtime
# lives in the executable need (clang's libFuzzer and sanitizer runtimes:
# Backplane's fuzz build sets it OFF).
function(backplane_add_plugin name)
  set(_BACKPLANE_PLUGIN_VERSION_SCRIPT "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/backplane_plugin.map")
  cmake_parse_arguments(ARG "" "OUTPUT_DIRECTORY;ABI" "SOURCES;LINK_LIBRARIES" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "backplane_add_plugin(${name}): SOURCES is required")
  endif()
  if(DEFINED ARG_ABI AND NOT ARG_ABI MATCHES "^1\\.(0|[1-9][0-9]*)$")
    message(FATAL_ERROR "backplane_add_plugin(${name}): ABI must be 1.N (the plugin ABI minor the source was "
                        "written for, e.g. ABI 1.2), got '${ARG_ABI}'")
  endif()
  add_library(${name} MODULE ${ARG_SOURCES})
  if(DEFINED ARG_ABI)
    # The header checks N against its own minor (#error when newer).
    string(REGEX REPLACE "^1\\." "" _backplane_target_minor "${ARG_ABI}")
    target_compile_definitions(${name} PRIVATE BP_TARGET_ABI_MINOR=${_backplane_target_minor})
  endif()
  target_link_libraries(${name} PRIVATE Backplane::plugin_sdk ${ARG_LINK_LIBRARIES})
  # plugin.hpp needs C++17; compilers whose default is older (clang++ 14
  # defaults to C++14) would fail on it. A higher CMAKE_CXX_STANDARD wins.
  target_compile_features(${name} PRIVATE cxx_std_17)
  set_target_properties(${name} PROPERTIES
    PREFIX ""
    CXX_VISIBILITY_PRESET hidden
    C_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    POSITION_INDEPENDENT_CODE ON)
  if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
    # Export only the entry points (the version script), resolve everything
    # at link time, and keep GCC's STB_GNU_UNIQUE symbols out: they would pin
    # the library in memory after dlclose.
    target_link_options(${name} PRIVATE "LINKER:--exclude-libs,ALL"
                        "LINKER:--version-script=${_BACKPLANE_PLUGIN_VERSION_SCRIPT}")
    if(NOT DEFINED BACKPLANE_PLUGIN_NO_UNDEFINED OR BACKPLANE_PLUGIN_NO_UNDEFINED)
      target_link_options(${name} PRIVATE "LINKER:--no-undefined")
    endif()
    set_property(TARGET ${name} APPEND PROPERTY LINK_DEPENDS ${_BACKPLANE_PLUGIN_VERSION_SCRIPT})
    target_compile_options(${name} PRIVATE $<$<COMPILE_LANG_AND_ID:CXX,GNU>:-fno-gnu-unique>)
  endif()
  if(ARG_OUTPUT_DIRECTORY)
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${ARG_OUTPUT_DIRECTORY})
  elseif(DEFINED BACKPLANE_PLUGIN_OUTPUT_DIR)
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${BACKPLANE_PLUGIN_OUTPUT_DIR})
  endif()
endfunction()
