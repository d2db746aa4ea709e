# Runs one fuzzer for a bounded time over a scratch copy of its seed corpus (ctest driver).
#   cmake -DFUZZER=<bin> -DCORPUS=<dir>|<dir>... -DWORK_DIR=<dir> -DSECONDS=<n> [-DDICT=<file>]
#         [-DMATCH=<regex>] -P run_fuzzer.cmake
# Only seed files whose name matches MATCH are copied (all files when it is empty).
# The copy keeps the seed folders in the source tree untouched while libFuzzer adds to the corpus.
# A crash leaves its input in WORK_DIR/artifacts/ and fails the test.
if(DEFINED ENV{TRAINLET_FUZZ_SECONDS} AND NOT "$ENV{TRAINLET_FUZZ_SECONDS}" STREQUAL "")
  set(SECONDS $ENV{TRAINLET_FUZZ_SECONDS})
endif()
if(NOT SECONDS MATCHES "^[0-9]+$")
  message(FATAL_ERROR "fuzzing time '${SECONDS}' is not a number of seconds")
endif()

file(REMOVE_RECURSE ${WORK_DIR}/corpus)
file(MAKE_DIRECTORY ${WORK_DIR}/corpus ${WORK_DIR}/artifacts)
string(REPLACE "|" ";" corpus_dirs "${CORPUS}")
set(seeds 0)
foreach(dir IN LISTS corpus_dirs)
  if(NOT IS_DIRECTORY ${dir})
    message(STATUS "no seed folder ${dir}; skipped")
    continue()
  endif()
  # Prefix each seed with its folder's name: runtimes/ and examples/ may hold the same file name.
  get_filename_component(tag ${dir} NAME)
  file(GLOB files LIST_DIRECTORIES false ${dir}/*)
  foreach(f IN LISTS files)
    get_filename_component(base ${f} NAME)
    if(MATCH AND NOT base MATCHES "${MATCH}")
      continue()
    endif()
    file(COPY_FILE ${f} ${WORK_DIR}/corpus/${tag}-${base})
    math(EXPR seeds "${seeds} + 1")
  endforeach()
endforeach()
message(STATUS "${FUZZER}: ${seeds} seeds, ${SECONDS} s")

set(args -max_total_time=${SECONDS} -rss_limit_mb=2048 -timeout=30 -print_final_stats=1
         -artifact_prefix=${WORK_DIR}/artifacts/)
if(DICT AND EXISTS ${DICT})
  list(APPEND args -dict=${DICT})
endif()
execute_process(COMMAND ${FUZZER} ${args} ${WORK_DIR}/corpus RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${FUZZER} failed (${rc}); the crashing input is in ${WORK_DIR}/artifacts/")
endif()
