#!/usr/bin/python3
"""Write the small committed seed corpora under fuzz/corpus/<target>/ (run from the repo root).
Seeds are valid files of each format plus a few near-misses; libFuzzer mutates from them."""
import io, json, os, struct
import numpy as np

def put(target, name, data):
    d = os.path.join("fuzz", "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)

def safetensors(tensors, meta=None):
    hdr, buf = {}, b""
    for name, (dtype, shape, raw) in tensors.items():
        hdr[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(buf), len(buf) + len(raw)]}
        buf += raw
    if meta is not None:
        hdr["__metadata__"] = meta
    h = json.dumps(hdr).encode()
    return struct.pack("<Q", len(h)) + h + buf

rng = np.random.default_rng(0)
a = rng.standard_normal((2, 3)).astype(np.float32)
put("safetensors", "f32", safetensors({"w": ("F32", [2, 3], a.tobytes())}, {"format": "pt"}))
put("safetensors", "mixed", safetensors({
    "a.weight": ("F16", [4], rng.standard_normal(4).astype(np.float16).tobytes()),
    "b.bias": ("F64", [2, 1], rng.standard_normal(2).tobytes()),
    "c": ("BF16", [3], (rng.standard_normal(3).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16).tobytes()),
    "empty": ("F32", [0, 5], b""),
    "scalar": ("F32", [], np.float32(1.5).tobytes())}))
put("safetensors", "ints", safetensors({
    "i": ("I64", [2], np.arange(2, dtype=np.int64).tobytes()),
    "u": ("U8", [3], b"\x01\x02\x03"), "t": ("BOOL", [1], b"\x01"),
    "x": ("F32", [1], np.float32(np.nan).tobytes())}))
put("safetensors", "special", safetensors({"h.0.attn\"q\\\u00e9": ("F32", [1, 1, 1], np.float32(np.inf).tobytes())}, {}))

def npy(arr):
    b = io.BytesIO()
    np.save(b, arr)
    return b.getvalue()

put("npy", "f4", npy(rng.standard_normal((2, 3)).astype(np.float32)))
put("npy", "f2", npy(rng.standard_normal((5,)).astype(np.float16)))
put("npy", "f8", npy(np.array([1.0, np.nan, np.inf, -0.0, 1e300])))
put("npy", "i4", npy(np.arange(6, dtype=np.int32).reshape(1, 2, 3)))
put("npy", "i8", npy(np.array([[-(2**62), 7]], dtype=np.int64)))
put("npy", "scalar", npy(np.float32(3.0)))
put("npy", "empty", npy(np.zeros((0, 4), np.float32)))
put("npy", "v2", b"\x93NUMPY\x02\x00" + npy(np.ones(2, np.float32))[8:10] + b"\x00\x00" + npy(np.ones(2, np.float32))[10:])
put("npy", "fortran", npy(np.asfortranarray(np.ones((2, 2), np.float32))))
put("npy", "bigendian", npy(np.ones(2, ">f4")))
