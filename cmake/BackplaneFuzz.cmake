# Fuzz targets (Note [Fuzzing] in docs/design.md).
#
#   backplane_add_fuzzer(<name>
#     SOURCES <file>...          the target: defines LLVMFuzzerTestOneInput
#     LIBS <target>...           what it links
#     CORPUS <dir>               its checked-in seed corpus, one input a file
#     [DICT <file>])             a libFuzzer dictionary (tokens of the format)
#
# In the fuzz build (scripts/build.sh --sanitize=fuzzer: clang with
# -fsanitize=fuzzer,address,undefined, in build-fuzz/) <name> is a libFuzzer
# binary in fuzz/bin/, part of the target backplane_fuzzers, and listed in
# fuzzers.txt for scripts/fuzz.sh. In every other build it is the same
# source linked with a replay driver (cmake/fuzz_replay_main.cc) and the
# ctest fuzz_replay.<name> runs it once on every input of the corpus: the
# corpus, crash regressions included, is a test of every normal build, with
# any compiler. (Sanitizer builds leave it out: the fuzz build, which CI
# runs, starts each target on its whole corpus under ASan and UBSan.)

set(BACKPLANE_FUZZ_REPLAY_MAIN ${CMAKE_CURRENT_LIST_DIR}/fuzz_replay_main.cc)
if(BACKPLANE_FUZZ)
  add_custom_target(backplane_fuzzers)
  file(WRITE ${PROJECT_BINARY_DIR}/fuzzers.txt
       "# name<TAB>binary<TAB>seed corpus<TAB>dictionary (-: none); written by cmake/BackplaneFuzz.cmake\n")
endif()

function(backplane_add_fuzzer name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "CORPUS;DICT" "SOURCES;LIBS")
  if(NOT arg_SOURCES OR NOT arg_CORPUS)
    message(FATAL_ERROR "backplane_add_fuzzer(${name}): SOURCES and CORPUS are required")
  endif()
  cmake_path(ABSOLUTE_PATH arg_CORPUS BASE_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR} NORMALIZE OUTPUT_VARIABLE corpus)
  if(NOT IS_DIRECTORY ${corpus})
    message(FATAL_ERROR "backplane_add_fuzzer(${name}): the seed corpus ${corpus} is not a folder; "
                        "check in at least one input")
  endif()
  set(dict -)
  if(arg_DICT)
    cmake_path(ABSOLUTE_PATH arg_DICT BASE_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR} NORMALIZE OUTPUT_VARIABLE dict)
  endif()
  if(BACKPLANE_FUZZ)
    add_executable(${name} ${arg_SOURCES})
    target_link_libraries(${name} PRIVATE ${arg_LIBS} backplane_warnings)
    target_link_options(${name} PRIVATE -fsanitize=fuzzer)
    set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/fuzz/bin)
    add_dependencies(backplane_fuzzers ${name})
    file(APPEND ${PROJECT_BINARY_DIR}/fuzzers.txt "${name}\t${PROJECT_BINARY_DIR}/fuzz/bin/${name}\t${corpus}\t${dict}\n")
  elseif(BACKPLANE_BUILD_TESTS AND NOT BACKPLANE_SANITIZE)
    # Not in the sanitizer builds: the fuzz build runs every corpus input
    # under ASan and UBSan already (libFuzzer runs its corpus first).
    add_executable(${name} ${arg_SOURCES} ${BACKPLANE_FUZZ_REPLAY_MAIN})
    target_link_libraries(${name} PRIVATE ${arg_LIBS} backplane_warnings)
    add_test(NAME fuzz_replay.${name} COMMAND ${name} ${corpus})
    set_tests_properties(fuzz_replay.${name} PROPERTIES LABELS fuzz)
  endif()
endfunction()
