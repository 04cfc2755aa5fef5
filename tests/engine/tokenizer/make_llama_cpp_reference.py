#!/usr/bin/env python3
"""Regenerate tests/engine/tokenizer/data/llama_cpp_reference.tsv: token ids that llama.cpp
(through llama-cpp-python) gives for a fixed set of texts, used by test_tokenizer as an
independent reference.

  - every pre-tokenizer Ember implements, run on the GPT-2 vocab with tokenizer.ggml.pre
    replaced (so only the pre-tokenization differs), add_special = parse_special = false;
  - SmolLM2-135M-Instruct and Gemma 3 270M, with (false, false) and (true, true).

Run with the Python that has llama_cpp, e.g.
  ~/.cache/ember/venv-llama-cpp/bin/python tests/engine/tokenizer/make_llama_cpp_reference.py \\
      ../shared/testdata ~/.cache/ember/test-models
Output columns: model, pre (or "-"), add_special, parse_special, text as hex, ids.
"""
import os
import random
import struct
import sys
import tempfile

import llama_cpp

PRE_VARIANTS = ["default", "gpt-2", "llama-bpe", "dbrx", "qwen2", "smollm", "falcon", "deepseek-llm",
                "deepseek-coder", "deepseek-v3", "poro-chat", "mpt"]

HANDPICKED = [
    "Hello world", " Hello world", "Hello World!", "  x", "x  ", "\n\n\n", " \n \n", "a\r\nb", "\t\tx",
    "3.14159 1,000,000 12345678", "I'M SURE YOU'LL LOVE IT, don't you'd've", "ied 4 \u00bd months",
    "F\u00fchrer", "\u4f60\u597d\uff0c\u4e16\u754c\u3002\u3053\u3093\u306b\u3061\u306f \ud55c\uad6d\uc5b4",
    "\U0001F999 emoji \U0001F468\u200D\U0001F469\u200D\U0001F467 \u2705", "x+=1; y-=2; z<<=3 `code`",
    "\u0627\u0644\u0639\u0631\u0628\u064a\u0629 \u0661\u0662\u0663", "caf\u00e9 cafe\u0301",
    "\u00a0nbsp\u3000ideographic\u2028sep", "<|im_start|>user\nHi<|im_end|>\n",
    "<start_of_turn>model\nOK<end_of_turn>", "<s> hi </s>", "\u212a\u2126 \u1f7d", "----=====....!!!!",
]

POOL = (list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") * 3 + list("0123456789") * 2 +
        [" "] * 20 + ["  ", "\n", "\n\n", "\r\n", "\t", " \n"] + list("'''\"!?.,;:-_()[]{}<>/\\|@#$%^&*+=~`") +
        list("\u00e9\u00e8\u00fc\u00f6\u00df\u00e7\u00f1\u00c5\u00d8\u00e6") +
        ["\u0301", "\u0308", "\u200d", "\u200b", "\u00a0", "\u3000", "\u2028", "\u0085", "\u00ad"] +
        list("\u6c49\u5b57\u4e2d\u6587\u65e5\u672c\u8a9e\ud55c\uad6d\uc5b4\u3072\u3089\u30ab\u30bf") +
        list("\u00bd\u00b2\u2460\u2167\u0663") +
        ["\U0001F999", "\U0001F600", "\u20ac", "\u2026", "\u2014", "\u201c", "\u2019", "\uff0c", "\u3002",
         "\uff21", "\uff11", "\u01c5", "\u02b0", "\u01bb", "\u017f", "\u212a", "\u0130", "\ufb01", "\U0001d400"] +
        list("\u041f\u0440\u0438\u0432\u0435\u0442 \u0395\u03bb\u03bb\u03ac\u03b4\u03b1 \u0939\u093f\u0928") +
        ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL", "n't", "<|im_start|>", "<|im_end|>",
         "<start_of_turn>", "<end_of_turn>", "<|endoftext|>"])


def texts():
    rng = random.Random(20250101)
    out = list(HANDPICKED)
    for _ in range(50):
        out.append("".join(rng.choice(POOL) for _ in range(rng.randint(1, 40))))
    return out


def with_pre(src, pre, dst):
    """Copy a vocab-only GGUF, replacing the tokenizer.ggml.pre string."""
    data = open(src, "rb").read()
    key = b"tokenizer.ggml.pre"
    at = data.index(struct.pack("<Q", len(key)) + key) + 8 + len(key)
    assert struct.unpack_from("<I", data, at)[0] == 8  # a string value
    old_len = struct.unpack_from("<Q", data, at + 4)[0]
    value = pre.encode()
    patched = data[:at + 4] + struct.pack("<Q", len(value)) + value + data[at + 12 + old_len:]
    open(dst, "wb").write(patched)


def tokenize_all(path, rows, name, pre, modes, samples):
    model = llama_cpp.Llama(path, vocab_only=True, verbose=False)
    for text in samples:
        for add_special, parse_special in modes:
            ids = model.tokenize(text.encode(), add_bos=add_special, special=parse_special)
            rows.append(f"{name}\t{pre}\t{int(add_special)}\t{int(parse_special)}\t{text.encode().hex()}\t"
                        + " ".join(map(str, ids)))


def main():
    testdata, models = sys.argv[1], sys.argv[2]
    samples = texts()
    rows = []
    gpt2 = os.path.join(testdata, "tokenizer", "ggml-vocab-gpt-2.gguf")
    with tempfile.TemporaryDirectory() as tmp:
        for pre in PRE_VARIANTS:
            path = os.path.join(tmp, f"vocab-{pre}.gguf")
            with_pre(gpt2, pre, path)
            tokenize_all(path, rows, "gpt-2", pre, [(False, False)], samples)
    for name, file in (("smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"), ("gemma3", "gemma-3-270m-q4_k_m.gguf")):
        tokenize_all(os.path.join(models, file), rows, name, "-", [(False, False), (True, True)], samples)
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "llama_cpp_reference.tsv")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        f.write(f"# llama-cpp-python {llama_cpp.__version__}; regenerate with {os.path.basename(__file__)}\n")
        f.write("\n".join(rows) + "\n")
    print(f"wrote {len(rows)} rows to {out}")


if __name__ == "__main__":
    main()
