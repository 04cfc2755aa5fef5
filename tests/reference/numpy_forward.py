#!/usr/bin/env python3
"""Independent float64 reference forward pass (numpy) for llama / qwen2 / gemma3 GGUF files.

Written from the published architectures, not from Ember's code, to tell Ember's numerical
differences from llama.cpp's: Ember's logits are compared against this reference with the same
(dequantized) weights. Usage:
  numpy_forward.py MODEL.gguf TOKEN_ID [TOKEN_ID ...]   -> prints top-5 (id, logit) of the last position
  numpy_forward.py MODEL.gguf --fixture F.json OUT.json  -> for every prompt of a llama.cpp fixture
      (tests/fixtures/reference/*.json), the top-10 logits after the prompt and after the prompt
      plus the first 8 greedy tokens of llama.cpp (teacher forcing), written to OUT.json
Needs the `gguf` and `numpy` packages (dev only; never used by the product).
"""
import json
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


def load(path):
    r = GGUFReader(path)
    meta = {}
    for f in r.fields.values():
        if f.types and f.types[0].name == "STRING":
            meta[f.name] = bytes(f.parts[f.data[0]]).decode() if len(f.data) == 1 else None
        elif len(f.data) == 1:
            meta[f.name] = f.parts[f.data[0]][0].item()
    w = {}
    for t in r.tensors:
        a = dequantize(t.data, t.tensor_type).astype(np.float64)
        w[t.name] = a.reshape([int(d) for d in reversed(t.shape)] if a.ndim != len(t.shape) else a.shape)
    return meta, w


def rms(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def rope(x, pos, base, neox):
    # x: (T, H, D)
    d = x.shape[-1]
    inv = base ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    ang = pos[:, None] * inv[None, :]  # (T, D/2)
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    if neox:
        a, b = x[..., : d // 2], x[..., d // 2:]
        return np.concatenate([a * c - b * s, a * s + b * c], -1)
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = a * c - b * s
    out[..., 1::2] = a * s + b * c
    return out


def forward(meta, w, tokens):
    arch = meta["general.architecture"]
    p = arch + "."
    n_layers = meta[p + "block_count"]
    nh, nkv = meta[p + "attention.head_count"], meta.get(p + "attention.head_count_kv", meta[p + "attention.head_count"])
    d = meta[p + "embedding_length"]
    hd = meta.get(p + "attention.key_length", d // nh)
    eps = meta.get(p + "attention.layer_norm_rms_epsilon", 1e-5)
    base = meta.get(p + "rope.freq_base", 10000.0)
    gemma = arch == "gemma3"
    neox = arch in ("qwen2", "gemma3")
    window = meta.get(p + "attention.sliding_window", 0) if gemma else 0
    T = len(tokens)
    pos = np.arange(T, dtype=np.float64)
    emb = w["token_embd.weight"]
    x = emb[tokens] * (np.sqrt(d) if gemma else 1.0)
    mask = np.tril(np.ones((T, T), dtype=bool))
    for i in range(n_layers):
        b = f"blk.{i}."
        h = rms(x, w[b + "attn_norm.weight"], eps)
        q = h @ w[b + "attn_q.weight"].T + w.get(b + "attn_q.bias", 0)
        k = h @ w[b + "attn_k.weight"].T + w.get(b + "attn_k.bias", 0)
        v = h @ w[b + "attn_v.weight"].T + w.get(b + "attn_v.bias", 0)
        q, k, v = q.reshape(T, nh, hd), k.reshape(T, nkv, hd), v.reshape(T, nkv, hd)
        sliding = gemma and window > 0 and i % 6 != 5
        if gemma:
            q = rms(q, w[b + "attn_q_norm.weight"], eps)
            k = rms(k, w[b + "attn_k_norm.weight"], eps)
        lbase = 10000.0 if sliding else base
        q, k = rope(q, pos, lbase, neox), rope(k, pos, lbase, neox)
        m = mask.copy()
        if sliding:
            m &= (np.arange(T)[:, None] - np.arange(T)[None, :]) < window
        out = np.empty((T, nh, hd))
        for hh in range(nh):
            kv = hh // (nh // nkv)
            s = q[:, hh, :] @ k[:, kv, :].T / np.sqrt(hd)
            s = np.where(m, s, -np.inf)
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            out[:, hh, :] = s @ v[:, kv, :]
        o = out.reshape(T, nh * hd) @ w[b + "attn_output.weight"].T
        if gemma:
            o = rms(o, w[b + "post_attention_norm.weight"], eps)
        x = x + o
        h = rms(x, w[b + "ffn_norm.weight"], eps)
        g, u = h @ w[b + "ffn_gate.weight"].T, h @ w[b + "ffn_up.weight"].T
        if gemma:
            a = 0.5 * g * (1 + np.tanh(np.sqrt(2 / np.pi) * (g + 0.044715 * g ** 3)))
        else:
            a = g / (1 + np.exp(-g))
        f = (a * u) @ w[b + "ffn_down.weight"].T
        if gemma:
            f = rms(f, w[b + "post_ffw_norm.weight"], eps)
        x = x + f
    x = rms(x[-1:], w["output_norm.weight"], eps)
    out_w = w.get("output.weight", emb)
    return (x @ out_w.T)[0]


def top(logits, k):
    return [[int(i), round(float(logits[i]), 5)] for i in np.argsort(-logits)[:k]]


def from_fixture(model, fixture, out_path):
    import datetime
    meta, w = load(model)
    fx = json.load(open(fixture))
    out = {"generator": {"script": "tests/reference/numpy_forward.py", "precision": "float64, weights dequantized by gguf.quants",
                         "command": " ".join(["tests/reference/numpy_forward.py"] + sys.argv[1:]),
                         "date": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ")},
           "model": fx["model"], "steps": 8,
           "layout": "prompts[i].top10[s] = top-10 [id, logit] after prompt_ids + greedy_ids[:s] (greedy ids from the llama.cpp fixture)",
           "prompts": []}
    for p in fx["prompts"]:
        rows = [top(forward(meta, w, p["prompt_ids"] + p["greedy_ids"][:s]), 10) for s in range(9)]
        out["prompts"].append({"id": p["id"], "prompt_ids": p["prompt_ids"], "greedy_ids": p["greedy_ids"][:8], "top10": rows})
        print(p["id"], rows[0][:3], file=sys.stderr)
    json.dump(out, open(out_path, "w"), indent=1)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[2] == "--fixture":
        from_fixture(sys.argv[1], sys.argv[3], sys.argv[4])
    else:
        meta, w = load(sys.argv[1])
        print(json.dumps(top(forward(meta, w, [int(t) for t in sys.argv[2:]]), 5)))
