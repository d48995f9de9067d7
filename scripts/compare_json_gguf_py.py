#!/usr/bin/env python3
"""Checks `miniquant inspect --json FILE` against gguf-py's GGUFReader (an independent reader).

    <gguf-py venv python> scripts/compare_json_gguf_py.py FILE JSON

Compares every metadata key (order, GGUF value type, value: floats by their bits at the stored
width, arrays in full), every tensor (order, ggml type name, row-major shape, offset relative to the
data section, byte size) and the header fields. Prints a summary; exits 1 on the first mismatch.
"""

import json
import math
import struct
import sys

import numpy as np
from gguf import GGUFReader, GGUFValueType

TYPE_NAMES = {
    GGUFValueType.UINT8: "u8", GGUFValueType.INT8: "i8", GGUFValueType.UINT16: "u16",
    GGUFValueType.INT16: "i16", GGUFValueType.UINT32: "u32", GGUFValueType.INT32: "i32",
    GGUFValueType.FLOAT32: "f32", GGUFValueType.BOOL: "bool", GGUFValueType.STRING: "string",
    GGUFValueType.ARRAY: "array", GGUFValueType.UINT64: "u64", GGUFValueType.INT64: "i64",
    GGUFValueType.FLOAT64: "f64",
}


def fail(msg):
    print(f"MISMATCH: {msg}")
    sys.exit(1)


def float_bits(value, width):
    """The bits of a JSON float (or "NaN"/"inf"/"-inf") stored at `width` (f32 or f64)."""
    if isinstance(value, str):
        value = {"NaN": math.nan, "inf": math.inf, "-inf": -math.inf}[value]
    fmt = "<f" if width == "f32" else "<d"
    return struct.pack(fmt, value)


def same_scalar(kind, ours, theirs):
    if kind in ("f32", "f64"):
        theirs_bits = np.array([theirs], dtype=np.float32 if kind == "f32" else np.float64).tobytes()
        if math.isnan(float(theirs)):
            return isinstance(ours, str) and ours == "NaN"
        return float_bits(ours, kind) == theirs_bits
    if kind == "bool":
        return ours is bool(theirs)
    if kind == "string":
        return ours == theirs
    return ours == int(theirs)


def main():
    path, json_path = sys.argv[1], sys.argv[2]
    ours = json.load(open(json_path, encoding="utf-8"))
    reader = GGUFReader(path)
    fields = [f for f in reader.fields.values() if not f.name.startswith("GGUF.")]
    if len(fields) != len(ours["metadata"]):
        fail(f"{len(ours['metadata'])} metadata entries, gguf-py has {len(fields)}")
    elements = 0
    for field, entry in zip(fields, ours["metadata"]):
        if field.name != entry["key"]:
            fail(f"key {entry['key']!r} where gguf-py has {field.name!r}")
        kind = TYPE_NAMES[field.types[0]]
        if entry["type"] != kind:
            fail(f"{field.name}: type {entry['type']} vs {kind}")
        if kind == "array":
            element = TYPE_NAMES[field.types[1]]
            if entry["element_type"] != element:
                fail(f"{field.name}: element type {entry['element_type']} vs {element}")
            values = field.contents()
            if entry["len"] != len(values) or len(entry["value"]) != len(values):
                fail(f"{field.name}: {entry['len']} elements vs {len(values)}")
            if element == "array":
                fail(f"{field.name}: nested arrays are not compared by this script")
            for i, (a, b) in enumerate(zip(entry["value"], values)):
                if not same_scalar(element, a, b):
                    fail(f"{field.name}[{i}]: {a!r} vs {b!r}")
            elements += len(values)
        elif not same_scalar(kind, entry["value"], field.contents()):
            fail(f"{field.name}: {entry['value']!r} vs {field.contents()!r}")
    if len(reader.tensors) != len(ours["tensors"]):
        fail(f"{len(ours['tensors'])} tensors vs {len(reader.tensors)}")
    data_offset = reader.data_offset
    if ours["data_offset"] != data_offset:
        fail(f"data offset {ours['data_offset']} vs {data_offset}")
    for t, entry in zip(reader.tensors, ours["tensors"]):
        shape = [int(d) for d in reversed(t.shape.tolist())]
        checks = [
            ("name", entry["name"], t.name),
            ("type", entry["type"], t.tensor_type.name),
            ("shape", entry["shape"], shape),
            ("offset", entry["offset"], int(t.data_offset) - data_offset),
            ("bytes", entry["bytes"], int(t.n_bytes)),
        ]
        for what, a, b in checks:
            if a != b:
                fail(f"tensor {t.name}: {what} {a!r} vs {b!r}")
    print(
        f"{path}: {len(fields)} keys ({elements} array elements), {len(reader.tensors)} tensors, "
        f"data offset {data_offset}: identical to gguf-py {reader.__module__}"
    )


if __name__ == "__main__":
    main()
