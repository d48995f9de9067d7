#!/usr/bin/env bash
# Fetches ggml's C sources (the reference quantizers) from the llama-cpp-python sdist into a cache
# outside git, checks the sdist's sha256, and prints the ggml directory. Nothing of it is committed.
#   MINIQUANT_CACHE  cache directory (default: ~/.cache/miniquant)
#
# The sdist comes through pip (its configured index), not a hard-coded URL. pip prepares an sdist's
# metadata before it keeps the file; with scikit-build-core and the cmake wheel already in a small
# venv, `--no-build-isolation` makes that a few seconds instead of a build environment per run.
set -euo pipefail
cache="${MINIQUANT_CACHE:-$HOME/.cache/miniquant}"
version=0.3.36
sha=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
dir="$cache/llama_cpp_python-$version"
ggml="$dir/vendor/llama.cpp/ggml"
if [ ! -f "$ggml/src/ggml-quants.c" ]; then
  mkdir -p "$cache/pip"
  venv="$cache/sdist-venv"
  if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet scikit-build-core cmake >&2
  fi
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
  tar -xzf "$tarball" -C "$cache" \
    "llama_cpp_python-$version/vendor/llama.cpp/ggml/include" \
    "llama_cpp_python-$version/vendor/llama.cpp/ggml/src"
  rm -f "$tarball"
fi
echo "$ggml"
