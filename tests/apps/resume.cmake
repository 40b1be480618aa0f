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

# The interrupt test (interrupt.cpp): SIGINT and SIGTERM at random moments of
# training at the shapes where a handler inside oneDNN corrupted the heap, at
# 1 and 2 threads; every run exits 130/143 and resumes bit-identically.
add_executable(apps_interrupt ${CMAKE_CURRENT_LIST_DIR}/interrupt.cpp)
target_include_directories(apps_interrupt PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}
                                                  ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(apps_interrupt PRIVATE attn_lib GTest::gtest)
target_compile_definitions(apps_interrupt PRIVATE ATTN_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
add_dependencies(apps_interrupt attn)
if(CMAKE_CXX_FLAGS MATCHES "sanitize")
  set(ATTN_INTERRUPT_RUNS 8)
else()
  set(ATTN_INTERRUPT_RUNS 32)
endif()
add_test(NAME apps_interrupt
         COMMAND apps_interrupt $<TARGET_FILE:attn> --runs=${ATTN_INTERRUPT_RUNS})
set_tests_properties(apps_interrupt PROPERTIES ENVIRONMENT "${ATTN_TEST_ENV}" TIMEOUT 1200)

# Model directories as one unit (model_dir_cli.cpp): SIGKILL inside save_model
# over a trained model, locked directories, resuming from elsewhere.
add_executable(apps_model_dir ${CMAKE_CURRENT_LIST_DIR}/model_dir_cli.cpp)
target_include_directories(apps_model_dir PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}
                                                  ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(apps_model_dir PRIVATE attn_lib GTest::gtest)
target_compile_definitions(apps_model_dir PRIVATE ATTN_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
add_dependencies(apps_model_dir attn)
add_test(NAME apps_model_dir COMMAND apps_model_dir $<TARGET_FILE:attn>)
set_tests_properties(apps_model_dir PROPERTIES ENVIRONMENT "${ATTN_TEST_ENV}" TIMEOUT 900)
