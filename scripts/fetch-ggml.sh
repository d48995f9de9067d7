#!/usr/bin/env bash
# Fetches ggml's C sources (the reference quantizers) from the llama-cpp-python sdist on PyPI into a
# cache outside git, checks the sdist's sha256, and prints the ggml directory. Nothing of it is committed.
#   MINIQUANT_CACHE  cache directory (default: ~/.cache/miniquant)
set -euo pipefail
cache="${MINIQUANT_CACHE:-$HOME/.cache/miniquant}"
version=0.3.36
sha=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
dir="$cache/llama_cpp_python-$version"
ggml="$dir/vendor/llama.cpp/ggml"
if [ ! -f "$ggml/src/ggml-quants.c" ]; then
  mkdir -p "$cache"
  tarball="$cache/llama_cpp_python-$version.tar.gz"
  python3 - "$tarball" "$version" "$sha" <<'PY'
import hashlib, json, sys, urllib.parse, urllib.request
out, version, sha = sys.argv[1:]
api = "https://pypi.org/pypi/llama-cpp-python/json"
meta = json.load(urllib.request.urlopen(api))
url = next(f["url"] for f in meta["releases"][version] if f["packagetype"] == "sdist")
data = urllib.request.urlopen(urllib.parse.urljoin(api, url)).read()
got = hashlib.sha256(data).hexdigest()
if got != sha:
    sys.exit(f"sha256 mismatch for llama-cpp-python {version} sdist: {got}")
open(out, "wb").write(data)
PY
  tar -xzf "$tarball" -C "$cache" \
    "llama_cpp_python-$version/vendor/llama.cpp/ggml/include" \
    "llama_cpp_python-$version/vendor/llama.cpp/ggml/src"
  rm -f "$tarball"
fi
echo "$ggml"
