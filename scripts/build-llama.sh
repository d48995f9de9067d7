#!/usr/bin/env bash
# Builds llama.cpp's own tools from the llama-cpp-python sdist (the same one whose ggml sources are
# the kernel oracle) into a cache outside git, and prints the directory holding the binaries:
# llama-tokenize, llama-perplexity, llama-bench, test-backend-ops and libllama (for small drivers).
# Nothing of it is committed.
#   MINIQUANT_CACHE  cache directory (default: ~/.cache/miniquant)
#   LLAMA_JOBS       parallel compile jobs (default: nproc)
#   LLAMA_AMX=1      on a CPU with AMX only: a second build, of ggml's libraries alone, with its AMX
#                    kernels (the AMX buffer type), in its own directory; prints its binary directory
#   LLAMA_AMX=unfused  the same, a third build, in which ggml's C++ kernels (its AMX ones among them)
#                    take each fused multiply-add as a product and then a sum, as vec_dot's scalar
#                    steps do: what ggml's AMX kernels cost with the float steps our bits need
#
# Built with -march=native but without AMX: on a CPU with AMX, llama.cpp built natively crashed in
# ggml_backend_amx_mul_mat when loading a model (issue 26; the cause is GCC 12's _tile_loadconfig,
# below), and the tools are our oracle, whose checks (greedy continuations, logit bounds,
# perplexity) were set up against its kernels without AMX, so the AMX tile extensions stay off in
# the tools. The LLAMA_AMX build is for scripts/ggml-repack-gemm.sh, which puts one weight matrix
# in the AMX buffer type and checks that ggml's AMX kernels support the case before it runs one.
set -euo pipefail
cache="${MINIQUANT_CACHE:-$HOME/.cache/miniquant}"
version=0.3.36
sha=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
src="$cache/llama-src-$version"
amx="${LLAMA_AMX:-}"
if [ -n "$amx" ]; then
  if ! grep -qw amx_int8 /proc/cpuinfo 2>/dev/null; then
    echo "LLAMA_AMX: this CPU has no AMX int8" >&2
    exit 1
  fi
  build="$cache/llama-build-amx-$version"
  if [ "$amx" = unfused ]; then
    build="$cache/llama-build-amx-unfused-$version"
  fi
  targets=(ggml ggml-base ggml-cpu)
  built() { [ -e "$build/bin/libggml-cpu.so" ]; }
else
  build="$cache/llama-build-$version"
  targets=(llama-tokenize llama-perplexity llama-bench test-backend-ops llama)
  built() {
    [ -x "$build/bin/llama-tokenize" ] && [ -x "$build/bin/llama-perplexity" ] \
      && [ -x "$build/bin/llama-bench" ] && [ -x "$build/bin/test-backend-ops" ]
  }
fi
bin="$build/bin"
if built; then
  echo "$bin"
  exit 0
fi
mkdir -p "$cache/pip"
venv="$cache/sdist-venv"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet scikit-build-core cmake >&2
fi
if [ ! -f "$src/CMakeLists.txt" ]; then
  tarball="$cache/pip/llama_cpp_python-$version.tar.gz"
  if [ ! -f "$tarball" ]; then
    "$venv/bin/python" -m pip download --quiet --no-deps --no-binary :all: --no-build-isolation \
      --dest "$cache/pip" "llama-cpp-python==$version" >&2
  fi
  if ! echo "$sha  $tarball" | sha256sum -c --status; then
    echo "sha256 mismatch for $tarball" >&2
    rm -f "$tarball"
    exit 1
  fi
  tmp="$(mktemp -d "$cache/llama-src.XXXXXX")"
  tar -xzf "$tarball" -C "$tmp" "llama_cpp_python-$version/vendor/llama.cpp"
  rm -rf "$src"
  mv "$tmp/llama_cpp_python-$version/vendor/llama.cpp" "$src"
  rm -rf "$tmp"
fi
cmake="$venv/bin/cmake"
native_flags=""
if [ -z "$amx" ] && grep -qw amx_tile /proc/cpuinfo 2>/dev/null; then
  native_flags="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
fi
if [ -n "$amx" ]; then
  # GCC 12's _tile_loadconfig declares a read of only the config's first 8 bytes, so the stores
  # of the tile shapes after them are dead to the optimizer: ggml's ldtilecfg then loads palette 1
  # with every tile empty and the first tileloadd faults (SIGILL, the crash of issue 26). Dead
  # stores are kept in this build.
  native_flags="-fno-tree-dse -fno-dse"
fi
cxx_flags="$native_flags"
if [ "$amx" = unfused ]; then
  # Every _mm512_fmadd_ps of ggml's C++ sources (its AMX kernels' float step is one per block) as
  # a product rounded and then a sum, and no contraction of them back into one.
  mkdir -p "$build"
  cat >"$build/unfused-fmadd.h" <<'HEADER'
#include <immintrin.h>
#define _mm512_fmadd_ps(a, b, c) _mm512_add_ps(_mm512_mul_ps((a), (b)), (c))
HEADER
  cxx_flags="$native_flags -ffp-contract=off -include $build/unfused-fmadd.h"
fi
"$cmake" -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
  -DLLAMA_BUILD_TESTS=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
  -DBUILD_SHARED_LIBS=ON -DCMAKE_C_FLAGS="$native_flags" -DCMAKE_CXX_FLAGS="$cxx_flags" >&2
"$cmake" --build "$build" -j "${LLAMA_JOBS:-$(nproc)}" --target "${targets[@]}" >&2
echo "$bin"
