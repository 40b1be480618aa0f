# attn — the entry point for a new user.
#
#   make run        install what is missing, build, run the main job
#   make test       install what is missing, build, run every test
#   make serve      the shipped English-French translator at http://127.0.0.1:5000
#
# More: make build | docs | install | test-subproject | asan | test-asan | portable
#       | test-portable | fuzz | bench | clean | help
# The build itself lives in CMakePresets.json (presets release, portable, debug, asan).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

JOBS ?= $(shell nproc 2>/dev/null || echo 2)
ATTN_NUM_THREADS ?= 2
BENCH_ARGS ?=
FUZZ_SECONDS ?= 60
RELEASE_DIR := build/release
ASAN_DIR := build/asan
PORTABLE_DIR := build/portable
PREFIX ?= /usr/local
SERVE_HOST ?= 127.0.0.1
SERVE_PORT ?= 5000
ATTN := ./$(RELEASE_DIR)/attn

.PHONY: all help deps configure build test docs install test-subproject asan test-asan portable \
        test-portable fuzz bench run serve clean

all: build

help:
	@echo "make run        install deps, build (release), train d2l's Transformer on fra-eng into out/d2l"
	@echo "make test       install deps, build (release), run every test (ctest --preset release)"
	@echo "make serve      install deps, build, serve models/en-fr at http://$(SERVE_HOST):$(SERVE_PORT) (attn serve)"
	@echo "make build      configure and build the release preset into $(RELEASE_DIR)"
	@echo "make docs       the API reference (Doxygen, warnings are errors) into $(RELEASE_DIR)/docs/api/html"
	@echo "make install    build, then install into PREFIX=$(PREFIX) (cmake --install)"
	@echo "make test-subproject  examples/consumer built with add_subdirectory and FetchContent"
	@echo "make portable   build for any x86-64 (-DATTN_NATIVE=OFF) into $(PORTABLE_DIR)"
	@echo "make test-portable  the portable build's tests, with the attention kernels this CPU"
	@echo "                picks, then forced to AVX2 and to portable vectors (ATTN_ISA)"
	@echo "make asan       build the ASan+UBSan preset into $(ASAN_DIR)"
	@echo "make test-asan  build for any x86-64 with ASan+UBSan, run every test, then the"
	@echo "                instruction-set passes of test-portable, all under the sanitizers"
	@echo "make fuzz       build the libFuzzer targets (clang) into build/fuzz, run each for FUZZ_SECONDS=$(FUZZ_SECONDS)"
	@echo "make bench      build, then run every benchmark (ATTN_NUM_THREADS=$(ATTN_NUM_THREADS), BENCH_ARGS=...)"
	@echo "make deps       install the Debian packages (scripts/install-deps.sh)"
	@echo "make clean      remove build/"

deps:
	@bash scripts/install-deps.sh

# Configure once; afterwards Ninja re-runs CMake by itself when a CMakeLists changes.
$(RELEASE_DIR)/build.ninja: CMakePresets.json | deps
	cmake --preset release

$(ASAN_DIR)/build.ninja: CMakePresets.json | deps
	cmake --preset asan

$(PORTABLE_DIR)/build.ninja: CMakePresets.json | deps
	cmake --preset portable

configure: $(RELEASE_DIR)/build.ninja

build: deps $(RELEASE_DIR)/build.ninja
	cmake --build --preset release --parallel $(JOBS)

test: build
	ctest --preset release

# The API reference from the public headers' comments; a Doxygen warning fails it.
docs: deps $(RELEASE_DIR)/build.ninja
	cmake --build --preset release --target docs
	@echo "API reference: $(RELEASE_DIR)/docs/api/html/index.html"

install: build
	cmake --install $(RELEASE_DIR) --prefix $(PREFIX)

# attn as a subproject of examples/consumer: add_subdirectory, then FetchContent
# (of this repository's HEAD). (make test already checks the installed attn.)
test-subproject: deps
	JOBS=$(JOBS) bash examples/consumer/subproject.sh build/subproject

# A binary for any x86-64: the attention kernels still choose AVX-512 or AVX2
# at run time. Its tests run three times: with the kernels this CPU picks,
# then forced to AVX2 and to portable vectors (ATTN_ISA; oneDNN capped alike
# with DNNL_MAX_CPU_ISA), as on CPUs that have no more. Every run leaves
# out the long tests whose subject is not the instruction set (signals and
# crashes, MPI, installing, subprojects, the PyTorch import, the viewer,
# model directories, output paths, a full disk, a swapped manifest, the
# server's HTTP behaviour and its page, the Python module's GIL, memory and
# Ctrl-C): `make test` runs them, and every kernel is checked against its
# reference by the unit tests in each run. (serve_same_as_cli stays: a
# server's answer equal to the CLI's is a matter of the kernels.)
portable: deps $(PORTABLE_DIR)/build.ninja
	cmake --build --preset portable --parallel $(JOBS)

NOT_ISA_TESTS := ^(apps_interrupt|apps_resume_kill|apps_mpi_train|apps_model_dir|apps_cli_attention_viewer|apps_cli_output_paths|apps_cli_overwrite_disk_full|apps_cli_manifest_swap|consumer_install|consumer_subproject_configure|interop_d2l_import|serve_hostile|serve_limits|serve_slow|serve_disconnect|serve_connections|serve_signals|serve_load|serve_page|apps_cli_translate_coprocess|python_interrupt|python_install|python_gil|python_leaks)$$

# The passes forced to other instruction sets, for a build compiled for any
# x86-64 ($(1): its ctest preset; $(2): ctest's arguments that choose the
# tests). On a CPU without AVX-512 the first pass already ran the AVX2
# kernels, and forcing AVX2 would repeat it as it was.
define isa_passes
	if grep -qw avx512f /proc/cpuinfo; then \
	  ATTN_ISA=avx2 DNNL_MAX_CPU_ISA=AVX2 ctest --preset $(1) $(2); \
	else \
	  echo "$(1): no AVX-512 on this CPU: the first pass ran its AVX2 kernels"; \
	fi
	ATTN_ISA=portable DNNL_MAX_CPU_ISA=SSE41 ctest --preset $(1) $(2)
endef

test-portable: portable
	ctest --preset portable -E '$(NOT_ISA_TESTS)'
	$(call isa_passes,portable,-E '$(NOT_ISA_TESTS)')

asan: deps $(ASAN_DIR)/build.ninja
	cmake --build --preset asan --parallel $(JOBS)

# The sanitizer build is compiled for any x86-64 too: every test as the CPU
# chooses, then the instruction-set passes of the unit tests (the layers
# whose code the instruction set changes: core, kernels, autograd, ops, nn,
# optim, seq2seq; not the ONNX export), all under ASan + UBSan.
ISA_UNIT_TESTS := ^(core|kernels|autograd|ops|nn|optim|seq2seq)_
test-asan: asan
	ctest --preset asan
	$(call isa_passes,asan,-R '$(ISA_UNIT_TESTS)' -E '^seq2seq_onnx_export_test$$')

# The fuzz targets (fuzz/): safetensors, config.json, corpus; each runs for
# FUZZ_SECONDS and the run fails on a finding (scripts/fuzz.sh).
fuzz: deps
	bash scripts/fuzz.sh $(FUZZ_SECONDS)

bench: build
	@shopt -s nullglob; benches=($(RELEASE_DIR)/bench/*_bench); \
	if [[ $${#benches[@]} -eq 0 ]]; then echo "no benchmarks built in $(RELEASE_DIR)/bench"; fi; \
	for b in "$${benches[@]}"; do \
	  echo "==== $$b (ATTN_NUM_THREADS=$(ATTN_NUM_THREADS)) ===="; \
	  ATTN_NUM_THREADS=$(ATTN_NUM_THREADS) "$$b" $(BENCH_ARGS); \
	done

# The main job: d2l's Transformer (10.7) trained on the bundled English-French
# corpus; prints the loss, d2l's four test translations with BLEU, and writes
# the model and its pictures into out/d2l — its own directory, replaced on
# purpose each time (--overwrite), so that the job can be run again.
run: build
	$(ATTN) train --overwrite --out out/d2l
	@echo
	@echo "Try: $(ATTN) translate --model out/d2l \"i'm home .\" \"he's calm .\""
	@echo "     $(ATTN) attention --model out/d2l \"i lost .\" --out out/lost"
	@echo "     $(ATTN) demo --help   (the chapter's sections, with pictures)"

# The shipped translator (models/en-fr, int8 weights; models/en-fr/README.md
# says how it was made) behind LibreTranslate's API and the web page, until
# Ctrl-C (docs/serve.md).
serve: build
	$(ATTN) serve --model models/en-fr --host $(SERVE_HOST) --port $(SERVE_PORT)

clean:
	rm -rf build
