#!/usr/bin/env python3
"""Bytes a decode step must read, from a GGUF file's tensor table (no dependencies).

    python3 tests/bench/gguf_sizes.py MODEL.gguf [--ctx 512] [--kv-bytes 2]

Prints JSON:
  file_bytes             size of the file
  tensor_bytes           sum of all tensor data
  decode_weight_bytes    bytes of weights one decode token streams: every tensor of every layer
                         (blk.*), the final norm, and the output matrix. The token embedding table
                         is NOT counted (a token reads one row of it) unless the output matrix is
                         tied to it (no output.weight), in which case it is counted once, as the
                         output matrix. One embedding row is added either way.
  kv_bytes_per_pos       K + V bytes per position over all layers (n_layers x n_kv_heads x
                         (key_length + value_length) x kv-bytes; 2 = f16)
  kv_cache_bytes         kv_bytes_per_pos x ctx
and the shape (layers, heads, kv heads, key/value length, vocab) and tensor bytes per type.

Block sizes are the documented ggml block layouts (ggml.h / gguf spec).
"""
import argparse
import json
import os
import struct
import sys

# ggml type id -> (name, elements per block, bytes per block)
GGML_TYPES = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 36),
    10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210), 15: ("Q8_K", 256, 292),
    24: ("I8", 1, 1), 25: ("I16", 1, 2), 26: ("I32", 1, 4), 27: ("I64", 1, 8),
    28: ("F64", 1, 8), 30: ("BF16", 1, 2),
}

# gguf metadata value types
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


class _Reader:
    def __init__(self, f):
        self.f = f

    def read(self, fmt):
        size = struct.calcsize(fmt)
        data = self.f.read(size)
        if len(data) != size:
            raise ValueError("truncated GGUF file")
        return struct.unpack(fmt, data)[0]

    def string(self):
        n = self.read("<Q")
        return self.f.read(n).decode("utf-8", errors="replace")

    def value(self, vtype):
        if vtype in _SCALARS:
            return self.read(_SCALARS[vtype])
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            etype, n = self.read("<I"), self.read("<Q")
            if etype in _SCALARS and n > 64:  # big arrays (vocab scores, types): skip, keep the length
                self.f.seek(n * struct.calcsize(_SCALARS[etype]), os.SEEK_CUR)
                return {"array_len": n}
            if etype == _STRING and n > 64:
                for _ in range(n):
                    self.f.seek(self.read("<Q"), os.SEEK_CUR)
                return {"array_len": n}
            return [self.value(etype) for _ in range(n)]
        raise ValueError(f"unknown GGUF value type {vtype}")


def read_gguf(path):
    """Returns (metadata dict, list of (name, type_name, n_elements, n_bytes))."""
    with open(path, "rb") as f:
        r = _Reader(f)
        if f.read(4) != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file")
        version = r.read("<I")
        if version not in (2, 3):
            raise ValueError(f"{path}: unsupported GGUF version {version}")
        n_tensors, n_kv = r.read("<Q"), r.read("<Q")
        meta = {}
        for _ in range(n_kv):
            key = r.string()
            meta[key] = r.value(r.read("<I"))
        tensors = []
        for _ in range(n_tensors):
            name = r.string()
            dims = [r.read("<Q") for _ in range(r.read("<I"))]
            ttype = r.read("<I")
            r.read("<Q")  # offset
            if ttype not in GGML_TYPES:
                raise ValueError(f"{name}: unknown ggml type {ttype}")
            tname, blk, bsize = GGML_TYPES[ttype]
            n = 1
            for d in dims:
                n *= d
            tensors.append((name, tname, n, n // blk * bsize, dims))
    return meta, tensors


def describe(path, ctx=512, kv_bytes=2.0):
    meta, tensors = read_gguf(path)
    arch = meta.get("general.architecture", "llama")
    g = lambda k, d=None: meta.get(f"{arch}.{k}", d)
    n_layers = int(g("block_count", 0))
    n_embd = int(g("embedding_length", 0))
    n_head = int(g("attention.head_count", 0))
    n_head_kv = int(g("attention.head_count_kv", n_head))
    head_dim = n_embd // n_head if n_head else 0
    k_len = int(g("attention.key_length", head_dim))
    v_len = int(g("attention.value_length", head_dim))

    by_name = {t[0]: t for t in tensors}
    layer_bytes = sum(t[3] for t in tensors if t[0].startswith("blk."))
    other = sum(t[3] for t in tensors if not t[0].startswith("blk.") and t[0] not in ("token_embd.weight", "output.weight"))
    embd = by_name.get("token_embd.weight")
    out = by_name.get("output.weight")
    tied = out is None
    output_bytes = (out or embd)[3] if (out or embd) else 0
    vocab = embd[4][1] if embd and len(embd[4]) > 1 else 0
    embd_row = embd[3] // vocab if embd and vocab else 0
    decode_weight_bytes = layer_bytes + other + output_bytes + embd_row

    kv_per_pos = int(n_layers * n_head_kv * (k_len + v_len) * kv_bytes)
    types = {}
    for t in tensors:
        types[t[1]] = types.get(t[1], 0) + t[3]
    return {
        "path": os.path.abspath(path),
        "file_bytes": os.path.getsize(path),
        "architecture": arch,
        "n_layers": n_layers, "n_embd": n_embd, "n_head": n_head, "n_head_kv": n_head_kv,
        "key_length": k_len, "value_length": v_len, "n_vocab": vocab,
        "tied_embeddings": tied,
        "token_embd_type": embd[1] if embd else None,
        "output_type": (out or embd)[1] if (out or embd) else None,
        "tensor_bytes": sum(t[3] for t in tensors),
        "layer_bytes": layer_bytes,
        "output_bytes": output_bytes,
        "decode_weight_bytes": decode_weight_bytes,
        "kv_bytes_per_pos": kv_per_pos,
        "kv_type_bytes": kv_bytes,
        "ctx": ctx,
        "kv_cache_bytes": int(kv_per_pos * ctx),
        "bytes_by_type": types,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--kv-bytes", type=float, default=2.0, help="bytes per K/V element (2 = f16, 34/32 = q8_0)")
    a = ap.parse_args()
    print(json.dumps(describe(a.model, a.ctx, a.kv_bytes), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
