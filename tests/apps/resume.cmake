# The crash test of training checkpoints (resume_kill.cpp): `attn train`
# killed with SIGKILL at random moments (also while it writes a checkpoint),
# stopped with SIGINT and SIGTERM, given damaged checkpoints; every run
# resumed to its end must equal, bit for bit, one that never stopped.
# Included from tests/CMakeLists.txt (it needs ATTN_TEST_ENV).
add_executable(apps_resume_kill ${CMAKE_CURRENT_LIST_DIR}/resume_kill.cpp)
target_include_directories(apps_resume_kill PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}
                                                    ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(apps_resume_kill PRIVATE attn_lib GTest::gtest)
target_compile_definitions(apps_resume_kill PRIVATE ATTN_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
add_dependencies(apps_resume_kill attn)

# Sanitizer builds run everything several times slower: fewer kills, same checks.
if(CMAKE_CXX_FLAGS MATCHES "sanitize")
  set(ATTN_RESUME_KILLS 10)
else()
  set(ATTN_RESUME_KILLS 24)
endif()
add_test(NAME apps_resume_kill
         COMMAND apps_resume_kill $<TARGET_FILE:attn> --kills=${ATTN_RESUME_KILLS})
set_tests_properties(apps_resume_kill PROPERTIES ENVIRONMENT "${ATTN_TEST_ENV}" TIMEOUT 900)
