# fragscope_add_test(NAME SOURCES a.cpp b.cpp LIBS lib1 lib2)
# One GoogleTest executable per tested type, registered with CTest test by test.
find_package(GTest REQUIRED)
include(GoogleTest)

function(fragscope_add_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
    FRAGSCOPE_FIXTURES_DIR="${FRAGSCOPE_FIXTURES_DIR}"
    FRAGSCOPE_SOURCE_DIR="${CMAKE_SOURCE_DIR}"
    FRAGSCOPE_BINARY_DIR="${CMAKE_BINARY_DIR}")
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60
    PROPERTIES ENVIRONMENT "FRAGSCOPE_BIN=$<TARGET_FILE:fragscope>")
endfunction()
