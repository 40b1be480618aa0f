#!/usr/bin/env bash
# scripts/install-deps.sh — installs the Debian packages attn builds, tests and
# benchmarks with, and ONNX Runtime for Node.js (the ONNX export test),
# puppeteer-core (the server page's test in Chromium) and libretranslate-ts (a
# LibreTranslate client the server is tested with) from the npm registry
# into tools/node_modules. Idempotent: when everything is present it only
# asks dpkg and compares a lock file, and prints nothing. Runs as root, or
# through sudo when that is available.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

packages=(
  build-essential      # g++ 12, make
  cmake                # >= 3.25 (presets)
  ninja-build
  pkg-config           # finds cairo
  libdnnl-dev          # oneDNN: matrix products
  ocl-icd-opencl-dev   # oneDNN's CMake config requires OpenCL (only a Recommends)
  libgtest-dev         # GoogleTest
  libgmock-dev
  libbenchmark-dev     # Google Benchmark
  libcli11-dev         # the CLI's argument parser
  nlohmann-json3-dev   # JSON configs
  libfmt-dev
  zlib1g-dev
  libssl-dev           # SHA-256 (libcrypto) for model manifests and checkpoints
  libsentencepiece-dev # subword vocabularies (attn train --vocab spm)
  libcairo2-dev        # heatmaps and plots (SVG, PNG)
  libboost-dev         # attn serve: HTTP on Boost.Beast and Boost.Asio (header-only)
  libgumbo-dev         # attn serve: the text nodes of HTML (format=html)
  fonts-dejavu-core    # a font for cairo's text
  libopenblas-dev      # a peer in the matmul benchmark
  clang                # the fuzz targets (make fuzz): libFuzzer needs clang
  libclang-rt-dev      # libFuzzer and clang's sanitizer runtimes (only recommended by clang)
  libomp-dev           # OpenMP for clang builds
  python3-torch        # the d2l import test: trains a d2l model with PyTorch (/usr/bin/python3)
  python3-sentencepiece # the translator's PyTorch peer (bench/peers/tatoeba_transformer.py)
  pybind11-dev         # the Python module (python/): C++ side
  python3-pybind11     # the Python module: pybind11's CMake config for /usr/bin/python3
  python3-dev          # Python.h and libpython3.11 for the module
  python3-numpy        # the Python module's arrays (buffer protocol) and its tests
  python3-pytest       # the Python module's tests (ctest runs them)
  python3-setuptools   # pip install . (setup.py drives the CMake build)
  python3-pip          # pip install --no-build-isolation .
  doxygen              # the API reference (make docs)
  libopenmpi-dev       # data-parallel training: mpirun -np N attn train
  openmpi-bin          # mpirun (the MPI tests)
  iproute2             # ip netns: the two-host MPI test's network namespaces
  chromium             # headless browser: the attention viewer test (attn attention --html)
)

# Node.js and npm run ONNX Runtime for Node.js in the ONNX export test. A
# machine may already have them from elsewhere (NodeSource's nodejs bundles
# npm, and Debian's npm package conflicts with it), so Debian's are asked for
# only when the commands are missing.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  packages+=(nodejs npm)
fi

install_debian_packages() {
  local missing=() p status
  for p in "${packages[@]}"; do
    status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
    [[ "$status" == "installed" ]] || missing+=("$p")
  done
  [[ ${#missing[@]} -eq 0 ]] && return 0

  local sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then
      sudo=(sudo)
    else
      echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2
      exit 1
    fi
  fi

  echo "install-deps: installing ${missing[*]}"
  local apt_opts=(-qq -o DPkg::Lock::Timeout=300)
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" update
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" install -y \
    --no-install-recommends "${missing[@]}" >/dev/null
  echo "install-deps: done"
}

# onnxruntime-node, puppeteer-core and libretranslate-ts, pinned by
# tools/package-lock.json, into tools/node_modules (git-ignored).
# --ignore-scripts: onnxruntime-node's postinstall downloads GPU providers
# (the CPU runtime ships inside the package); puppeteer-core downloads
# nothing and drives Debian's Chromium.
# Without npm (and Node.js) the tests that need them say so and are skipped.
install_onnxruntime_node() {
  local tools="$root/tools" stamp="$root/tools/node_modules/.attn-installed-lock.json"
  [[ -f "$tools/package-lock.json" ]] || return 0
  if ! command -v npm >/dev/null 2>&1; then
    echo "install-deps: npm not found: onnxruntime-node, puppeteer-core and libretranslate-ts not installed (the ONNX Runtime, page and client tests will be skipped)" >&2
    return 0
  fi
  cmp -s "$tools/package-lock.json" "$stamp" && return 0
  echo "install-deps: installing onnxruntime-node, puppeteer-core and libretranslate-ts into tools/node_modules (npm ci --ignore-scripts)"
  (cd "$tools" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
  cp "$tools/package-lock.json" "$stamp"
  echo "install-deps: done"
}

install_debian_packages
install_onnxruntime_node
