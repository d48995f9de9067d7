#!/usr/bin/env python3
"""gguf-py (PyPI `gguf`) as a second dequantization oracle for tests/tests/integration/gguf_py.rs.

    python3 scripts/gguf_py_dequant.py --setup
        Creates a venv under the cache ($MINIQUANT_CACHE or ~/.cache/miniquant, in gguf-py-venv),
        installs the pinned gguf (and its numpy) into it and prints the venv's python.

    <venv python> scripts/gguf_py_dequant.py TYPE IN OUT [TYPE IN OUT ...]
        Dequantizes the raw blocks in file IN as ggml type TYPE (a name such as Q4_K) with
        gguf.quants.dequantize and writes the values to OUT as little-endian f32. A type gguf-py
        cannot dequantize gets a one-line OUT.unsupported file with the reason instead.
"""

import os
import subprocess
import sys
from pathlib import Path

GGUF_VERSION = "0.19.0"


def cache_dir() -> Path:
    cache = os.environ.get("MINIQUANT_CACHE")
    return Path(cache) if cache else Path.home() / ".cache" / "miniquant"


def setup() -> None:
    venv = cache_dir() / "gguf-py-venv"
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", f"gguf=={GGUF_VERSION}"], check=True
    )
    print(python)


def dequantize_jobs(args: list[str]) -> None:
    import numpy as np
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    if len(args) % 3 != 0:
        sys.exit("expected TYPE IN OUT triples")
    for type_name, src, dst in zip(args[0::3], args[1::3], args[2::3]):
        unsupported = Path(dst + ".unsupported")
        unsupported.unlink(missing_ok=True)
        try:
            qtype = GGMLQuantizationType[type_name]
        except KeyError:
            unsupported.write_text(f"gguf {GGUF_VERSION} has no type {type_name}\n")
            continue
        data = np.fromfile(src, dtype=np.uint8)
        try:
            values = dequantize(data, qtype)
        except NotImplementedError as e:
            unsupported.write_text(f"{e}\n")
            continue
        np.asarray(values, dtype="<f4").reshape(-1).tofile(dst)


if __name__ == "__main__":
    if sys.argv[1:] == ["--setup"]:
        setup()
    else:
        dequantize_jobs(sys.argv[1:])
