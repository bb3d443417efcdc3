# Warnings, sanitizers and device-toolchain detection shared by every target.

add_library(backplane_warnings INTERFACE)
target_compile_options(backplane_warnings INTERFACE -Wall -Wextra -Wno-unused-parameter)
# Clang checks the lock annotations (ABSL_GUARDED_BY, ...) as it compiles:
# the fuzz build (clang, -Werror) checks libbackplane's sources this way, and
# scripts/check_thread_safety.sh parses the other host sources (GCC, which
# the other builds use, has no such analysis).
target_compile_options(backplane_warnings INTERFACE $<$<CXX_COMPILER_ID:Clang>:-Wthread-safety>)
if(BACKPLANE_WERROR)
  target_compile_options(backplane_warnings INTERFACE -Werror)
endif()

# Note [Line tables]
# RelWithDebInfo's -g writes full debug information (types, variables), which
# made a test file compile 1.7x slower than with line tables alone (-g1:
# ops' elementwise_test.cc, 21.6 s against 12.5 s of CPU) and most of the
# tree is template-heavy. Line tables are what backtraces, sanitizer
# reports and perf need, so scripts/build.sh and CI use them; a plain CMake
# configure keeps CMake's meaning of RelWithDebInfo (full), and
# `scripts/build.sh --debug-info=full` asks for it when a debugger needs
# variables. The CUDA sources keep nvcc's own flags.
set(BACKPLANE_DEBUG_INFO "full" CACHE STRING
    "Debug information of RelWithDebInfo builds: full (-g) or lines (-g1, Note [Line tables])")
set_property(CACHE BACKPLANE_DEBUG_INFO PROPERTY STRINGS full lines)
if(NOT BACKPLANE_DEBUG_INFO MATCHES "^(full|lines)$")
  message(FATAL_ERROR "BACKPLANE_DEBUG_INFO must be full or lines (got '${BACKPLANE_DEBUG_INFO}')")
endif()
if(BACKPLANE_DEBUG_INFO STREQUAL "lines" AND CMAKE_BUILD_TYPE STREQUAL "RelWithDebInfo")
  add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-g1>)
endif()

if(BACKPLANE_SANITIZE)
  string(REPLACE "," ";" _bp_sanitizers "${BACKPLANE_SANITIZE}")
  foreach(_s IN LISTS _bp_sanitizers)
    if(NOT _s MATCHES "^(address|undefined|thread|leak|fuzzer)$")
      message(FATAL_ERROR "BACKPLANE_SANITIZE: unknown sanitizer '${_s}'; use address, undefined, leak, thread or fuzzer")
    endif()
  endforeach()
  if("thread" IN_LIST _bp_sanitizers AND "address" IN_LIST _bp_sanitizers)
    message(FATAL_ERROR "BACKPLANE_SANITIZE: thread and address cannot be combined; run them as two builds")
  endif()
  # fuzzer: the fuzz build (Note [Fuzzing] in docs/design.md). Every target gets
  # libFuzzer's coverage instrumentation (fuzzer-no-link); the fuzz targets
  # alone link libFuzzer's main (cmake/BackplaneFuzz.cmake). Clang only.
  set(BACKPLANE_FUZZ OFF)
  if("fuzzer" IN_LIST _bp_sanitizers)
    if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
      message(FATAL_ERROR "BACKPLANE_SANITIZE=fuzzer needs clang (libFuzzer); configure with CXX=clang++ "
                          "or use scripts/build.sh --sanitize=fuzzer, which does")
    endif()
    set(BACKPLANE_FUZZ ON)
    set(BACKPLANE_PLUGIN_NO_UNDEFINED OFF)  # plugin_sdk/cmake/BackplanePlugin.cmake
    list(TRANSFORM _bp_sanitizers REPLACE "^fuzzer$" "fuzzer-no-link")
  endif()
  list(JOIN _bp_sanitizers "," _bp_san_list)
  set(_bp_san_flags -fsanitize=${_bp_san_list} -fno-omit-frame-pointer)
  if("undefined" IN_LIST _bp_sanitizers)
    list(APPEND _bp_san_flags -fno-sanitize-recover=undefined)
    # Note [UBSan's pointer checks]
    # With AddressSanitizer beside it, UBSan leaves out three checks that
    # instrument every memory access: null (a null dereference faults, and
    # ASan reports it with its stack), alignment (x86-64 loads unaligned
    # words) and pointer-overflow. They were a third of the compile time of
    # the CPU plugin's dtype loops (reduction.cc under ASan+UBSan: 159 s
    # with them, 107 s without), and the sanitizer build is most of CI's
    # time. The others stay (signed overflow, shifts, division by zero,
    # bool and enum loads, array bounds, vptr, object size, nonnull
    # arguments, unreachable code); the fuzz build (clang) keeps every check.
    if("address" IN_LIST _bp_sanitizers AND NOT BACKPLANE_FUZZ)
      list(APPEND _bp_san_flags -fno-sanitize=null,alignment,pointer-overflow)
    endif()
  endif()
  add_compile_options(${_bp_san_flags})
  add_link_options(${_bp_san_flags})
  # -O1 and line tables only, after the build type's flags so they win: the
  # optimisation level the sanitizers' authors recommend, and reports still
  # name file and line. -O2 -g made a test file under ASan+UBSan compile 2.8x
  # slower (reduction_test.cc: 73 s against 26 s), and the sanitizer build is
  # most of CI's time.
  if(CMAKE_BUILD_TYPE STREQUAL "RelWithDebInfo")
    add_compile_options(-O1 -g1)
  endif()
  # GCC's -Wmaybe-uninitialized misfires under the sanitizers' instrumentation
  # (std::regex's NFA at -O1, in libstdc++'s own headers); the normal build
  # keeps the warning.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options(-Wno-maybe-uninitialized)
  endif()
  # Clang at -O1 with the sanitizers' instrumentation cannot vectorize the
  # CPU plugin's BP_ELEMENTWISE_SIMD loops and says so (-Wpass-failed),
  # which -Werror turned into a failed fuzz build; the normal build keeps it.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    add_compile_options(-Wno-pass-failed)
  endif()
endif()

# Note [Precompiled headers]
# Much of a source's compile time in this tree is its headers: the standard
# library's, GoogleTest's, Backplane's own. A target of many sources that
# include the same headers precompiles them once (GCC's .gch, clang's .pch)
# and CMake puts the result in front of each source (-include). The test
# programs share two (Note [Test precompiled headers] in
# cmake/BackplaneTesting.cmake); the larger libraries have their own
# (conformance's and the ops layer's: 1 to 2 s of CPU less a source, paired
# on seven, e.g. conformance/src/onnx_ops_math.cc 5.9 s against 3.8 s).
# Each source still includes what it uses (a precompiled header only adds
# declarations in front), so BACKPLANE_PCH=OFF builds the same program, and
# scripts/check_thread_safety.sh, which parses with clang, leaves GCC's out.
option(BACKPLANE_PCH "Precompile the headers the sources of the larger targets share (Note [Precompiled headers])" ON)
# backplane_precompile_headers(<target> <header>...): <header> as written
# in an #include, <...> form; only headers the target's own layer may include.
function(backplane_precompile_headers target)
  if(BACKPLANE_PCH)
    target_precompile_headers(${target} PRIVATE ${ARGN})
    backplane_pch_warnings(${target})
  endif()
endfunction()
# GCC 12 with a precompiled libstdc++ reports -Warray-bounds,
# -Wstringop-overflow and -Wstringop-overread on std::string's own inline
# code (char_traits::copy "forming offset [32, 56] is out of the bounds
# [0, 32]", "writing 18 bytes into a region of size 16", inside operator+ of
# a string and a literal), the false positives of GCC bugs 105329 and
# 105651, which the same sources compiled without the header do not show:
# the three warnings are off where a target uses a precompiled header with
# GCC before 13. The sanitizer builds check bounds at run time.
function(backplane_pch_warnings target)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wno-array-bounds;-Wno-stringop-overflow;-Wno-stringop-overread>)
  endif()
endfunction()

# BACKPLANE_WITH_<X>: AUTO builds the plugin when the toolchain is found, ON
# requires it, OFF skips it. The result is BACKPLANE_<X>_ENABLED.
function(backplane_detect_toolchain option program out_enabled out_status)
  set(_value "${${option}}")
  if(NOT _value MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "${option} must be AUTO, ON or OFF (got '${_value}')")
  endif()
  if(_value STREQUAL "OFF")
    set(${out_enabled} OFF PARENT_SCOPE)
    set(${out_status} "disabled (${option}=OFF)" PARENT_SCOPE)
    return()
  endif()
  # Sanitizer builds instrument host code; device compilers take no
  # -fsanitize, and the simulator build of the GPU sources (plugins/gpu) is
  # what the sanitizers check there.
  if(BACKPLANE_SANITIZE)
    if(_value STREQUAL "ON")
      message(FATAL_ERROR "${option}=ON cannot be combined with BACKPLANE_SANITIZE; use AUTO or OFF")
    endif()
    set(${out_enabled} OFF PARENT_SCOPE)
    set(${out_status} "skipped (sanitizer build)" PARENT_SCOPE)
    return()
  endif()
  find_program(_found NAMES ${program} PATHS /usr/local/cuda/bin /opt/rocm/bin NO_CACHE)
  if(_found)
    set(${out_enabled} ON PARENT_SCOPE)
    set(${out_status} "enabled (${_found})" PARENT_SCOPE)
  elseif(_value STREQUAL "ON")
    message(FATAL_ERROR "${option}=ON but '${program}' was not found; install it or use ${option}=AUTO")
  else()
    set(${out_enabled} OFF PARENT_SCOPE)
    set(${out_status} "skipped (${program} not found)" PARENT_SCOPE)
  endif()
endfunction()
backplane_detect_toolchain(BACKPLANE_WITH_CUDA nvcc BACKPLANE_CUDA_ENABLED BACKPLANE_CUDA_STATUS)
backplane_detect_toolchain(BACKPLANE_WITH_HIP hipcc BACKPLANE_HIP_ENABLED BACKPLANE_HIP_STATUS)

# The mpi plugin (plugins/mpi): Open MPI from Debian (libopenmpi-dev), the
# engine of the comm:: collectives for CPU tensors, and mpirun (openmpi-bin)
# for their multi-process tests. BACKPLANE_WITH_MPI: AUTO, ON or OFF.
if(NOT BACKPLANE_WITH_MPI MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "BACKPLANE_WITH_MPI must be AUTO, ON or OFF (got '${BACKPLANE_WITH_MPI}')")
endif()
set(BACKPLANE_MPI_ENABLED OFF)
if(BACKPLANE_WITH_MPI STREQUAL "OFF")
  set(BACKPLANE_MPI_STATUS "disabled (BACKPLANE_WITH_MPI=OFF)")
else()
  enable_language(C)  # FindMPI's C component (libmpi's C API, what the plugin calls) compiles a C probe
  find_package(MPI COMPONENTS C QUIET)
  if(MPI_C_FOUND)
    set(BACKPLANE_MPI_ENABLED ON)
    # mpi.h pulls in the MPI-2 C++ bindings (deprecated, a separate library)
    # when read as C++; Backplane's code calls the C API only.
    set(BACKPLANE_MPI_C_ONLY OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
    set(BACKPLANE_MPI_STATUS "enabled (MPI ${MPI_C_VERSION}, ${MPIEXEC_EXECUTABLE})")
  elseif(BACKPLANE_WITH_MPI STREQUAL "ON")
    message(FATAL_ERROR "BACKPLANE_WITH_MPI=ON but no MPI was found; install libopenmpi-dev and openmpi-bin "
                        "(scripts/setup.sh does) or use BACKPLANE_WITH_MPI=AUTO")
  else()
    set(BACKPLANE_MPI_STATUS "skipped (no MPI found: apt-get install libopenmpi-dev openmpi-bin)")
  endif()
endif()
