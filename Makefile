# attn — the entry point for a new user.
#
#   make run        install what is missing, build, run the main job
#   make test       install what is missing, build, run every test
#
# More: make build | asan | test-asan | fuzz | bench | clean | help
# The build itself lives in CMakePresets.json (presets release, debug, asan).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

JOBS ?= $(shell nproc 2>/dev/null || echo 2)
ATTN_NUM_THREADS ?= 2
BENCH_ARGS ?=
FUZZ_SECONDS ?= 60
RELEASE_DIR := build/release
ASAN_DIR := build/asan
ATTN := ./$(RELEASE_DIR)/attn

.PHONY: all help deps configure build test asan test-asan fuzz bench run clean

all: build

help:
	@echo "make run        install deps, build (release), train d2l's Transformer on fra-eng into out/model"
	@echo "make test       install deps, build (release), run every test (ctest --preset release)"
	@echo "make build      configure and build the release preset into $(RELEASE_DIR)"
	@echo "make asan       build the ASan+UBSan preset into $(ASAN_DIR)"
	@echo "make test-asan  build and run every test under ASan+UBSan"
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

configure: $(RELEASE_DIR)/build.ninja

build: deps $(RELEASE_DIR)/build.ninja
	cmake --build --preset release --parallel $(JOBS)

test: build
	ctest --preset release

asan: deps $(ASAN_DIR)/build.ninja
	cmake --build --preset asan --parallel $(JOBS)

test-asan: asan
	ctest --preset asan

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
# the model and its pictures into out/model.
run: build
	$(ATTN) train --out out/model
	@echo
	@echo "Try: $(ATTN) translate --model out/model \"i'm home .\" \"he's calm .\""
	@echo "     $(ATTN) attention --model out/model \"i lost .\" --out out/lost"
	@echo "     $(ATTN) demo --help   (the chapter's sections, with pictures)"

clean:
	rm -rf build
