#!/usr/bin/env bash
# scripts/install-deps.sh — installs the Debian packages attn builds, tests and
# benchmarks with. Idempotent: when everything is present it only asks dpkg and
# prints nothing. Runs as root, or through sudo when that is available.
set -euo pipefail

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
  libcairo2-dev        # heatmaps and plots (SVG, PNG)
  fonts-dejavu-core    # a font for cairo's text
  libopenblas-dev      # a peer in the matmul benchmark
  clang                # the fuzz targets (make fuzz): libFuzzer needs clang
  libclang-rt-dev      # libFuzzer and clang's sanitizer runtimes (only recommended by clang)
  libomp-dev           # OpenMP for clang builds
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "installed" ]] || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

sudo=()
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
  else
    echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt_opts=(-qq -o DPkg::Lock::Timeout=300)
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" update
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" install -y \
  --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
