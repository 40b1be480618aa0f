# Tests that run the attn executable many times from a GoogleTest program:
# each gets the executable's path as its first argument. Included from
# tests/CMakeLists.txt (they need ATTN_TEST_ENV).
function(attn_app_test name source)
  cmake_parse_arguments(A "" "TIMEOUT" "ARGS" ${ARGN})
  add_executable(${name} ${CMAKE_CURRENT_LIST_DIR}/${source})
  target_include_directories(${name} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${name} PRIVATE attn_lib OpenMP::OpenMP_CXX GTest::gtest)
  target_compile_definitions(${name} PRIVATE ATTN_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  add_dependencies(${name} attn)
  add_test(NAME ${name} COMMAND ${name} $<TARGET_FILE:attn> ${A_ARGS})
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "${ATTN_TEST_ENV}" TIMEOUT ${A_TIMEOUT})
endfunction()

# Sanitizer builds run everything several times slower: fewer runs, same checks.
if(CMAKE_CXX_FLAGS MATCHES "sanitize")
  set(ATTN_RESUME_KILLS 10)
  set(ATTN_INTERRUPT_RUNS 8)
else()
  set(ATTN_RESUME_KILLS 24)
  set(ATTN_INTERRUPT_RUNS 32)
endif()

# The crash test of training checkpoints (resume_kill.cpp): `attn train`
# killed with SIGKILL at random moments (also while it writes a checkpoint),
# stopped with SIGINT and SIGTERM, given damaged checkpoints; every run
# resumed to its end must equal, bit for bit, one that never stopped.
attn_app_test(apps_resume_kill resume_kill.cpp ARGS --kills=${ATTN_RESUME_KILLS} TIMEOUT 900)

# The interrupt test (interrupt.cpp): SIGINT and SIGTERM at random moments of
# training at the shapes where a handler inside oneDNN corrupted the heap, at
# 1 and 2 threads; every run exits 130/143 and resumes bit-identically.
attn_app_test(apps_interrupt interrupt.cpp ARGS --runs=${ATTN_INTERRUPT_RUNS} TIMEOUT 1200)

# Model directories as one unit (model_dir_cli.cpp): SIGKILL inside save_model
# over a trained model, locked directories, resuming from elsewhere, a signal
# while a corpus FIFO is waited on.
attn_app_test(apps_model_dir model_dir_cli.cpp TIMEOUT 900)

# Data-parallel training (mpi_train.cpp): mpirun -np 2 attn train against one
# process (the same losses to 1e-5, the same translations); N = 2 and 3
# processes against one with --accum-steps N (the same bits); two hosts over
# TCP in two network namespaces (the same bits; a link taken down ends the
# run within 30 s and --resume finishes it); and a run whose second process
# is killed (the first ends within 30 s; --resume with 1 and 2 processes
# finishes). Skipped with a message without mpirun or MPI (the two-host case
# also without root and iproute2).
# Under the sanitizers it is not run (skipped with that reason): the
# processes would run inside Open MPI's uninstrumented runtime, which keeps
# its memory and hooks the allocator; the data-parallel code of the library
# runs there through optim_data_parallel_test.
find_program(ATTN_MPIRUN NAMES mpirun mpiexec)
if(CMAKE_CXX_FLAGS MATCHES "sanitize")
  set(attn_mpirun_arg "sanitizers")
elseif(ATTN_MPIRUN)
  set(attn_mpirun_arg "${ATTN_MPIRUN}")
else()
  set(attn_mpirun_arg "-")
endif()
attn_app_test(apps_mpi_train mpi_train.cpp ARGS "${attn_mpirun_arg}" TIMEOUT 900)

# bf16 mixed precision through the CLI (precision_cli.cpp): the d2l preset in
# bf16 against f32 (loss curve by blocks of 20 epochs, translations), and the
# fallback to f32 where the CPU lacks AVX-512 BF16 (forced by ATTN_NO_BF16).
attn_app_test(apps_precision precision_cli.cpp TIMEOUT 900)

# int8 weights through the CLI (quantize_cli.cpp): the d2l preset's model
# translated and evaluated with --quantize int8 against f32 (BLEU on its 600
# pairs), with --precision bf16 too, on AVX2's kernel where the CPU has
# VNNI (forced by ATTN_NO_VNNI), and the fallback to f32 without an int8
# kernel (forced by ATTN_ISA=portable).
attn_app_test(apps_quantize quantize_cli.cpp TIMEOUT 300)
