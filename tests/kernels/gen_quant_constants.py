#!/usr/bin/env python3
"""Regenerates the expected dequantization constants in test_quant.cpp.

Uses the python `gguf` package (an implementation independent of ours) as the reference:
  * real tensors: the first rows of tensors in the real test models;
  * synthetic blocks: bytes from the same 64-bit LCG the C++ test uses, with the half-float
    scale fields overwritten by well-behaved values.
For each case it prints the FNV-1a 64 hash of the float32 bit patterns of every dequantized
element (so a match is bit-exact) and a few sample values.
Usage: python3 tests/kernels/gen_quant_constants.py [models_dir]
"""
import os
import sys

import numpy as np
from gguf import GGUFReader, GGMLQuantizationType as T
from gguf.quants import dequantize
from gguf.constants import GGML_QUANT_SIZES


def fnv1a(values):
    h = 0xcbf29ce484222325
    for b in np.asarray(values, dtype=np.float32).view(np.uint8).tobytes():
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def lcg_bytes(seed, n):
    x = seed
    out = bytearray(n)
    for i in range(n):
        x = (x * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
        out[i] = x >> 56
    return out


def sane_half(lo, hi):
    # keep sign and 12 low bits, force a moderate exponent (|d| in [2^-7, 2^-3))
    v = lo | (hi << 8)
    return (v & 0x8FFF) | 0x2000


# byte offsets of half-float fields inside each block (to be made sane)
HALF_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}


def synthetic(qtype, nblocks, seed):
    bs, ts = GGML_QUANT_SIZES[qtype][0], GGML_QUANT_SIZES[qtype][1]
    raw = lcg_bytes(seed, nblocks * ts)
    if qtype in (T.F16, T.BF16):
        for i in range(0, len(raw), 2):
            v = raw[i] | (raw[i + 1] << 8)
            v = (v & 0x8FFF) | (0x2000 if qtype == T.F16 else 0x3C00)
            raw[i], raw[i + 1] = v & 0xFF, v >> 8
    else:
        for b in range(nblocks):
            for off in HALF_FIELDS[qtype]:
                p = b * ts + off
                v = sane_half(raw[p], raw[p + 1])
                raw[p], raw[p + 1] = v & 0xFF, v >> 8
    data = np.frombuffer(bytes(raw), dtype=np.uint8)
    return dequantize(data, qtype).reshape(-1)


def emit(name, vals, extra=""):
    idx = [0, 1, 17, len(vals) // 2 + 3, len(vals) - 1]
    samples = ", ".join(f"{{{i}, {float(vals[i])!r}f}}" for i in idx)
    print(f'    {{"{name}"{extra}, {len(vals)}, 0x{fnv1a(vals):016x}ull, {{{samples}}}}},')


def main():
    models = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser("~/.cache/ember/test-models")
    print("// synthetic: {type, seed, n_elements, hash, samples}")
    for qt, nb in [(T.F16, 512), (T.BF16, 512), (T.Q4_0, 24), (T.Q4_1, 24), (T.Q5_0, 24),
                   (T.Q5_1, 24), (T.Q8_0, 24), (T.Q2_K, 3), (T.Q3_K, 3), (T.Q4_K, 3),
                   (T.Q5_K, 3), (T.Q6_K, 3)]:
        seed = 1000 + int(qt)
        bs = GGML_QUANT_SIZES[qt][0]
        vals = synthetic(qt, nb if bs > 1 else nb, seed)
        emit(qt.name, vals, f", {seed}")
    print("// real tensors: {file, tensor, type, file offset, rows, ...}")
    picks = {
        "gemma-3-270m-q4_k_m.gguf": ["blk.0.attn_output.weight", "blk.0.ffn_down.weight",
                                     "blk.0.attn_q.weight", "blk.0.attn_v.weight"],
        "SmolLM2-135M-Instruct.Q4_1.gguf": ["blk.0.ffn_down.weight", "token_embd.weight"],
    }
    for fname, tensors in picks.items():
        r = GGUFReader(os.path.join(models, fname))
        by_name = {t.name: t for t in r.tensors}
        for tn in tensors:
            t = by_name[tn]
            cols = int(t.shape[0])
            rows = 2
            bs, ts = GGML_QUANT_SIZES[t.tensor_type]
            nbytes = rows * cols // bs * ts
            raw = np.asarray(t.data).reshape(-1).view(np.uint8)[:nbytes]
            vals = dequantize(raw, t.tensor_type).reshape(-1)
            emit(f"{fname}:{tn}", vals, f", {t.tensor_type.name}, {t.data_offset}ull, {cols}")


main()
