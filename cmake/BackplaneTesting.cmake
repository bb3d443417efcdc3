# Test helpers of the build: the test plugins' folder and backplane_add_test(),
# which every gtest program uses (Note [Tests beside their layer] in
# CONTRIBUTING.md).

# Test plugins (dispatcher/runtime/tests/plugins/) land here, not in the
# default plugin directory, so that loadAll() in normal programs never sees them.
set(BACKPLANE_TEST_PLUGIN_DIR ${PROJECT_BINARY_DIR}/test_plugins)
set(BACKPLANE_TEST_PLUGIN_DEP_DIR ${PROJECT_BINARY_DIR}/test_plugin_deps_not_on_any_path)

# Note [Test costs]
# ctest runs its tests two at a time (CI's two cores) in decreasing order of
# cost: the times of the last run (Testing/Temporary/CTestCostData.txt), or,
# in a fresh build such as CI's, the COST property. Without it the longest
# tests (gpusim_conformance: 120 s under ASan+UBSan; the vendor plugin's
# out-of-tree builds; python_tests) started wherever they were defined and
# one of them could run alone at the end with the other core idle. The
# few tests of more than 20 s say COST: their seconds in the slower of the
# two runs that have them (the ASan+UBSan one, or the normal one for
# python_tests and vendor_plugin_conformance).

# The compile options of a test program's own code (and of the precompiled
# headers it reuses, which must be built with the same options).
function(backplane_test_compile_options target)
  # Note [Sanitized tests]: in the ASan+UBSan build a test program's own code
  # is compiled with ASan alone. UBSan's checks doubled its compile time
  # (ops' elementwise_test.cc: 40 s of CPU with both, 19.5 s with ASan, 10.5 s
  # with neither) and the tests are most of that build; the code they test
  # (the libraries, the plugins, the tool) keeps both sanitizers, and the
  # programs link both runtimes.
  #
  # In every sanitizer build a test program's own code is compiled at -O0:
  # what it checks is the code under test, which keeps the build's -O1, and
  # its own code is gtest's macros and reference loops over a few elements.
  # -O0 compiled ops' elementwise_test.cc under ASan in 10.2 s against
  # 15.3 s at -O1.
  if(BACKPLANE_SANITIZE MATCHES "undefined" AND BACKPLANE_SANITIZE MATCHES "address")
    target_compile_options(${target} PRIVATE -fno-sanitize=undefined)
  endif()
  if(BACKPLANE_SANITIZE AND NOT BACKPLANE_FUZZ AND CMAKE_BUILD_TYPE STREQUAL "RelWithDebInfo")
    target_compile_options(${target} PRIVATE -O0)
  endif()
endfunction()

# backplane_add_test(<name>
#   SOURCES <file>...           the test program's sources
#   [LIBS <target>...]          what it links besides backplane_testing (default: backplane)
#   [INCLUDES <dir>...]         private include folders
#   [DEFINITIONS <def>...]      private compile definitions
#   [PLUGINS <plugin>...]       plugins it loads: cpu, spconv, gpusim, gpu (CUDA and HIP where
#                               built), test (the test plugins), cli (the backplane tool); each
#                               defines BACKPLANE_<NAME>_PLUGIN_PATH (test: BACKPLANE_TEST_PLUGIN_DIR,
#                               cli: BACKPLANE_CLI_PATH) and is built before the test
#   [LABELS <label>...]         ctest labels; tsan also puts it in backplane_tsan_tests
#   [ENVIRONMENT <var=value>...]
#   [WHOLE_PROGRAM]             one ctest for the whole program (its output is read as a whole)
#   [SHARDS <n>]                n ctests <name>.shard<i>of<n>, each running a GoogleTest shard
#                               (GTEST_TOTAL_SHARDS/GTEST_SHARD_INDEX): for a program of hundreds
#                               of cheap cases whose start (plugins loaded; under ASan, the leak
#                               check at exit) costs more than a case
#   [NO_CTEST]                  no ctest: the caller adds the program's ctests (a filter each, a script)
#   [NO_MAIN]                   the program has its own main()
#   [NO_PCH])                   no precompiled headers (Note [Test precompiled headers]): for a
#                               program whose options change what the headers declare (-fopenmp)
# A gtest program linking GTest's main (unless NO_MAIN), gmock, the shared test
# helpers (testing/) and the warnings; each of its tests is a ctest.
function(backplane_add_test name)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "WHOLE_PROGRAM;NO_CTEST;NO_MAIN;NO_PCH" "SHARDS"
                        "SOURCES;LIBS;INCLUDES;DEFINITIONS;PLUGINS;LABELS;ENVIRONMENT")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "backplane_add_test(${name}): unknown arguments ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT ARG_LIBS)
    set(ARG_LIBS backplane)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} backplane_testing GTest::gmock backplane_warnings)
  backplane_test_compile_options(${name})
  # Note [Test precompiled headers]: a test program's sources are compiled
  # with the precompiled GoogleTest, standard and (for a program that links
  # the host library) Backplane headers that testing/ builds once. Those
  # headers cost each of the 170 test sources 2 to 3 s of CPU (paired on
  # five: dispatcher/runtime/tests/device_api_test.cc 6.8 s against 3.9 s
  # at -O2), and the test programs were a third of the build's CPU time. A
  # program of a lower layer gets GoogleTest's alone, so the layer rule
  # (a layer includes nothing above it) holds in the tests too. GCC checks
  # that the header was built with compatible options and macros; one it
  # cannot use is a warning naming the option (-Winvalid-pch), an error with
  # CI's -Werror. A program compiled with other options (-fopenmp, which
  # defines _OPENMP) says NO_PCH and reads the headers as text.
  if(ARG_NO_PCH OR NOT BACKPLANE_PCH)
  elseif("backplane" IN_LIST ARG_LIBS)
    target_precompile_headers(${name} REUSE_FROM backplane_test_pch_backplane)
    backplane_pch_warnings(${name})
  else()
    target_precompile_headers(${name} REUSE_FROM backplane_test_pch_gtest)
    backplane_pch_warnings(${name})
  endif()
  if(NOT ARG_NO_MAIN)
    target_link_libraries(${name} PRIVATE GTest::gtest_main)
  endif()
  target_include_directories(${name} PRIVATE ${ARG_INCLUDES})
  target_compile_definitions(${name} PRIVATE ${ARG_DEFINITIONS})
  foreach(plugin IN LISTS ARG_PLUGINS)
    if(plugin STREQUAL "test")
      target_compile_definitions(${name} PRIVATE BACKPLANE_TEST_PLUGIN_DIR="${BACKPLANE_TEST_PLUGIN_DIR}")
      add_dependencies(${name} backplane_test_plugins)
    elseif(plugin STREQUAL "cli")
      target_compile_definitions(${name} PRIVATE BACKPLANE_CLI_PATH="$<TARGET_FILE:backplane_cli>")
      add_dependencies(${name} backplane_cli)
    elseif(plugin STREQUAL "gpu")
      foreach(kind IN ITEMS cuda hip)
        string(TOUPPER ${kind} KIND)
        if(BACKPLANE_${KIND}_ENABLED)
          target_compile_definitions(${name} PRIVATE BACKPLANE_${KIND}_PLUGIN_PATH="$<TARGET_FILE:backplane_${kind}>")
          add_dependencies(${name} backplane_${kind})
        endif()
      endforeach()
    elseif(plugin MATCHES "^(cpu|spconv|gpusim|mpi)$")
      string(TOUPPER ${plugin} PLUGIN)
      target_compile_definitions(${name} PRIVATE BACKPLANE_${PLUGIN}_PLUGIN_PATH="$<TARGET_FILE:backplane_${plugin}>")
      add_dependencies(${name} backplane_${plugin})
    else()
      message(FATAL_ERROR "backplane_add_test(${name}): unknown plugin '${plugin}' "
                          "(cpu, spconv, gpusim, mpi, gpu, test or cli)")
    endif()
  endforeach()
  set(props)
  if(ARG_LABELS)
    list(APPEND props LABELS "${ARG_LABELS}")
  endif()
  if(ARG_ENVIRONMENT)
    list(APPEND props ENVIRONMENT "${ARG_ENVIRONMENT}")
  endif()
  if(ARG_NO_CTEST)
    # The caller adds the ctests.
  elseif(ARG_SHARDS)
    if(NOT ARG_SHARDS MATCHES "^[1-9][0-9]*$")
      message(FATAL_ERROR "backplane_add_test(${name}): SHARDS takes a positive number (got '${ARG_SHARDS}')")
    endif()
    math(EXPR last "${ARG_SHARDS} - 1")
    foreach(i RANGE ${last})
      set(test ${name}.shard${i}of${ARG_SHARDS})
      add_test(NAME ${test} COMMAND ${name})
      set(env GTEST_TOTAL_SHARDS=${ARG_SHARDS} GTEST_SHARD_INDEX=${i} ${ARG_ENVIRONMENT})
      set_tests_properties(${test} PROPERTIES ENVIRONMENT "${env}")
      if(ARG_LABELS)
        set_tests_properties(${test} PROPERTIES LABELS "${ARG_LABELS}")
      endif()
    endforeach()
  elseif(ARG_WHOLE_PROGRAM)
    add_test(NAME ${name} COMMAND ${name})
    if(props)
      set_tests_properties(${name} PROPERTIES ${props})
    endif()
  else()
    if(props)
      set(props PROPERTIES ${props})
    endif()
    gtest_discover_tests(${name} DISCOVERY_TIMEOUT 120 ${props})
  endif()
  if("tsan" IN_LIST ARG_LABELS)
    add_dependencies(backplane_tsan_tests ${name})
  endif()
endfunction()
