#!/usr/bin/env bash
# Builds llama.cpp's own tools from the llama-cpp-python sdist (the same one whose ggml sources are
# the kernel oracle) into a cache outside git, and prints the directory holding the binaries:
# llama-tokenize, llama-perplexity, llama-bench, test-backend-ops and libllama (for small drivers).
# Nothing of it is committed.
#   MINIQUANT_CACHE  cache directory (default: ~/.cache/miniquant)
#   LLAMA_JOBS       parallel compile jobs (default: nproc)
#
# Built with -march=native but without AMX: on a CPU with AMX, llama.cpp built natively crashed in
# ggml_backend_amx_mul_mat when loading a model (issue 26), so the AMX tile extensions stay off.
set -euo pipefail
cache="${MINIQUANT_CACHE:-$HOME/.cache/miniquant}"
version=0.3.36
sha=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
src="$cache/llama-src-$version"
build="$cache/llama-build-$version"
bin="$build/bin"
targets=(llama-tokenize llama-perplexity llama-bench test-backend-ops llama)
if [ -x "$bin/llama-tokenize" ] && [ -x "$bin/llama-perplexity" ] && [ -x "$bin/llama-bench" ] \
  && [ -x "$bin/test-backend-ops" ]; then
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
if grep -qw amx_tile /proc/cpuinfo 2>/dev/null; then
  native_flags="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
fi
"$cmake" -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
  -DLLAMA_BUILD_TESTS=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
  -DBUILD_SHARED_LIBS=ON -DCMAKE_C_FLAGS="$native_flags" -DCMAKE_CXX_FLAGS="$native_flags" >&2
"$cmake" --build "$build" -j "${LLAMA_JOBS:-$(nproc)}" --target "${targets[@]}" >&2
echo "$bin"
