#!/usr/bin/env python3
"""Reference outputs for Ember's engine tests, from an independent implementation.

Runs llama.cpp (through llama-cpp-python, CPU only) on the real test models and writes
JSON fixtures to tests/fixtures/reference/:

  <model>.json           per prompt: the prompt token ids, the first N greedy tokens, and the
                         top-5 (id, logit) of the last-position logits after the prompt and
                         after each greedy step.
  <model>.tokenize.json  token ids for varied texts (llm.tokenize(text, add_bos=False,
                         special=...)), with special-token parsing on and off.

This is a test tool: llama.cpp is never part of the product. Usage (see
tests/fixtures/reference/README.md):

  python3 tests/reference/make_reference.py [--models-dir DIR] [--out-dir DIR] [--model NAME]

Greedy decoding is done by hand (eval + argmax over the raw logits), so there is no sampler,
no temperature and no repetition penalty in the way. Decoding does not stop at end-of-
generation tokens: the fixture is a forward-pass reference, and `eog_ids` says which ids end
a generation.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import shlex
import sys
from pathlib import Path

import numpy as np

import llama_cpp

REPO = Path(__file__).resolve().parents[2]
N_CTX = 512
N_THREADS = 2
N_BATCH = 512
SEED = 1234
N_GPU_LAYERS = 0
N_GREEDY = 32
TOP_K = 5

CHAT_QUESTION = "What is the capital of France?"

# Plain-text prompts shared by both models (tokenized with the model's add_bos setting and
# parse_special=False).
TEXT_PROMPTS = [
    ("capital", "The capital of France is"),
    ("story", "Once upon a time"),
    ("code", "def fibonacci(n):"),
    ("french", "Il était une fois, dans un château près de la forêt,"),
    ("chinese", "中国的首都是"),
    # Sequences both models continue decisively (top-1 leads top-2 by about 1 or more at every
    # one of the 32 greedy steps): where no step is a near-tie, an engine of the same
    # architecture must reproduce the free-running greedy tokens exactly.
    ("count", "1, 2, 3, 4, 5, 6, 7, 8,"),
    ("tens", "10, 20, 30, 40, 50,"),
    ("evens", "2, 4, 6, 8, 10, 12,"),
    ("numbers", "0 1 2 3 4 5 6 7 8 9 10 11 12"),
]

MODELS = {
    "smollm2": {
        "file": "SmolLM2-135M-Instruct.Q4_1.gguf",
        "sha256": "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        # The GGUF's own tokenizer.chat_template (ChatML) for one user turn, with its default
        # system prompt and add_generation_prompt=True. Checked against a Jinja rendering of
        # the template in the file (see check_chat_prompt).
        "chat_prompt": (
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
            "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
            "<|im_start|>assistant\n"
        ),
        "chat_template_source": "the GGUF's tokenizer.chat_template (ChatML, default system prompt)",
        "special_texts": ["<|im_start|>user\nHi<|im_end|>\n", "<|endoftext|>Hello<|im_end|>"],
    },
    "gemma3": {
        "file": "gemma-3-270m-q4_k_m.gguf",
        "sha256": "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        # This GGUF (google/gemma-3-270m, the base model) has NO tokenizer.chat_template, so
        # this is Gemma's published turn format (llama.cpp's named template "gemma"), with the
        # BOS written as text: tokenized with add_bos=False, parse_special=True -> one BOS.
        "chat_prompt": (
            "<bos><start_of_turn>user\nWhat is the capital of France?<end_of_turn>\n"
            "<start_of_turn>model\n"
        ),
        "chat_template_source": "none in the GGUF; Gemma's standard turn format (llama.cpp named template 'gemma')",
        "special_texts": ["<start_of_turn>user\nHi<end_of_turn>\n", "<bos>Hello<eos>"],
    },
}

# Texts for the tokenizer fixtures (parse_special=False unless listed in special_texts, which
# are done both ways).
TOKENIZE_TEXTS = [
    "Hello world",
    " Hello world",
    "Héllo wörld, café naïve façade Ångström",
    "日本語のテキストと中文测试，한국어도。",
    "emoji 🙂🚀 family 👩‍👩‍👧 flag 🇫🇷",
    "def f(x):\n    return x**2  # square\n\tprint(f'{x!r}')\n",
    "a  b   c\t\td\n\n\ne    \n \n  end   ",
    "3.14159 1234567890 1,000,000 2024-01-31",
    "I'm sure we'll see they've done it, don't you?",
    "Ember’s “smart quotes” — and an ellipsis… ¿Qué?",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "",
]


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def die(msg: str) -> None:
    print(f"make_reference: ERROR: {msg}", file=sys.stderr)
    sys.exit(1)


def topk(logits: np.ndarray, k: int = TOP_K) -> list[list]:
    # Stable ordering: by logit descending, then id ascending (ties are resolved like argmax).
    idx = np.lexsort((np.arange(logits.shape[0]), -logits))[:k]
    return [[int(i), round(float(logits[i]), 5)] for i in idx]


def last_logits(llm: llama_cpp.Llama) -> np.ndarray:
    # Straight from llama.cpp's output buffer: llama-cpp-python 0.3.x only fills llm.scores
    # when logits_all=True (and then keeps n_ctx x n_vocab floats).
    ptr = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
    logits = np.ctypeslib.as_array(ptr, shape=(llm.n_vocab(),)).astype(np.float32, copy=True)
    if not np.all(np.isfinite(logits)) or float(np.std(logits)) < 1e-3:
        die(f"implausible logits (std {float(np.std(logits))}, finite {bool(np.all(np.isfinite(logits)))})")
    return logits


def greedy(llm: llama_cpp.Llama, prompt_ids: list[int]) -> dict:
    llm.reset()
    llm.eval(prompt_ids)
    ids: list[int] = []
    steps: list[list] = []
    for _ in range(N_GREEDY):
        logits = last_logits(llm)
        steps.append(topk(logits))
        nxt = int(np.argmax(logits))  # first maximum = lowest id on ties
        ids.append(nxt)
        llm.eval([nxt])
    steps.append(topk(last_logits(llm)))
    text = llm.detokenize(ids).decode("utf-8", errors="replace")
    # top1 - top2 logit per step: where this is small, an engine with slightly different
    # rounding may legitimately pick the other token (compare greedy ids only up to there).
    margins = [round(s[0][1] - s[1][1], 5) for s in steps]
    return {"greedy_ids": ids, "greedy_text": text, "top5": steps, "margins": margins}


def check_chat_prompt(name: str, llm: llama_cpp.Llama, cfg: dict) -> str | None:
    """Render the GGUF's own template with Jinja and require it to equal our string."""
    tmpl = llm.metadata.get("tokenizer.chat_template")
    if tmpl is None:
        if name == "smollm2":
            die("SmolLM2 GGUF has no tokenizer.chat_template (expected ChatML)")
        return None
    import jinja2

    env = jinja2.Environment(loader=jinja2.BaseLoader())
    bos = llm.detokenize([llm.token_bos()], special=True).decode("utf-8", errors="replace")
    eos = llm.detokenize([llm.token_eos()], special=True).decode("utf-8", errors="replace")
    rendered = env.from_string(tmpl).render(
        messages=[{"role": "user", "content": CHAT_QUESTION}],
        add_generation_prompt=True, bos_token=bos, eos_token=eos)
    if rendered != cfg["chat_prompt"]:
        die(f"{name}: the hand-written chat prompt differs from the GGUF template's rendering:\n"
            f"  ours:     {cfg['chat_prompt']!r}\n  template: {rendered!r}")
    return tmpl


def make_model(name: str, models_dir: Path, out_dir: Path, command: str) -> None:
    cfg = MODELS[name]
    path = models_dir / cfg["file"]
    if not path.is_file():
        die(f"{path} not found; run scripts/fetch-test-models.sh first")
    sha = sha256_file(path)
    if sha != cfg["sha256"]:
        die(f"{path}: sha256 {sha}, expected {cfg['sha256']}")

    llm = llama_cpp.Llama(
        model_path=str(path), n_ctx=N_CTX, n_batch=N_BATCH, n_threads=N_THREADS,
        n_threads_batch=N_THREADS, n_gpu_layers=N_GPU_LAYERS, seed=SEED,
        logits_all=False, verbose=False)
    md = llm.metadata
    add_bos = md.get("tokenizer.ggml.add_bos_token", "true" if md.get("tokenizer.ggml.model") == "llama" else "false")
    add_bos = str(add_bos).lower() == "true"

    eog = sorted({i for i in range(llm.n_vocab())
                  if llama_cpp.llama_vocab_is_eog(llama_cpp.llama_model_get_vocab(llm.model), i)})
    tmpl = check_chat_prompt(name, llm, cfg)

    header = {
        "generator": {
            "tool": "llama-cpp-python",
            "version": llama_cpp.__version__,
            "system_info": llama_cpp.llama_print_system_info().decode().strip(),
            "python": platform.python_version(),
            "machine": platform.machine(),
            "command": command,
            "script": "tests/reference/make_reference.py",
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
        "model": {
            "file": cfg["file"],
            "sha256": sha,
            "architecture": md.get("general.architecture"),
            "n_vocab": llm.n_vocab(),
            "bos_id": llm.token_bos(),
            "eos_id": llm.token_eos(),
            "eog_ids": eog,
            "add_bos": add_bos,
            "tokenizer_model": md.get("tokenizer.ggml.model"),
            "tokenizer_pre": md.get("tokenizer.ggml.pre"),
            "chat_template_in_gguf": tmpl is not None,
        },
        "params": {
            "n_ctx": N_CTX, "n_batch": N_BATCH, "n_threads": N_THREADS, "seed": SEED,
            "n_gpu_layers": N_GPU_LAYERS, "n_greedy": N_GREEDY, "top_k": TOP_K,
            "decoding": "greedy: argmax of raw logits (no temperature, no penalties); lowest id on ties",
        },
        "layout": (
            "prompts[i].top5[s] = top-5 [id, logit] of the last-position logits after evaluating "
            "prompt_ids + greedy_ids[:s], for s = 0..n_greedy (so greedy_ids[s] == top5[s][0][0] "
            "for s < n_greedy); margins[s] = top5[s][0][1] - top5[s][1][1]. Decoding does not stop at eog_ids."
        ),
    }

    prompts = []
    for pid, text in TEXT_PROMPTS:
        ids = llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=False)
        prompts.append({"id": pid, "text": text, "add_bos": add_bos, "parse_special": False,
                        "prompt_ids": ids})
    chat = cfg["chat_prompt"]
    chat_add_bos = add_bos and not chat.startswith("<bos>")
    ids = llm.tokenize(chat.encode("utf-8"), add_bos=chat_add_bos, special=True)
    if add_bos and ids.count(llm.token_bos()) != 1:
        die(f"{name}: chat prompt has {ids.count(llm.token_bos())} BOS tokens, expected 1")
    prompts.append({"id": "chat", "text": chat, "add_bos": chat_add_bos, "parse_special": True,
                    "template": cfg["chat_template_source"], "prompt_ids": ids})

    for p in prompts:
        if len(p["prompt_ids"]) + N_GREEDY + 1 > N_CTX:
            die(f"{name}/{p['id']}: prompt too long for n_ctx={N_CTX}")
        p.update(greedy(llm, p["prompt_ids"]))
        print(f"  {name}/{p['id']}: {len(p['prompt_ids'])} prompt tokens -> {p['greedy_text']!r}",
              file=sys.stderr)

    out = {**header, "prompts": prompts}
    write_json(out_dir / f"{name}.json", out)

    # Tokenizer fixtures.
    cases = []
    for text in TOKENIZE_TEXTS:
        cases.append(tok_case(llm, text, special=False))
    for text in cfg["special_texts"]:
        cases.append(tok_case(llm, text, special=False))
        cases.append(tok_case(llm, text, special=True))
    tok = {
        "generator": header["generator"],
        "model": {k: header["model"][k] for k in ("file", "sha256", "bos_id", "eos_id",
                                                   "add_bos", "tokenizer_model", "tokenizer_pre")},
        "layout": ("cases[i].ids = llm.tokenize(text.encode('utf-8'), add_bos=False, "
                   "special=parse_special); detokenized = llm.detokenize(ids, special=True) "
                   "decoded as UTF-8."),
        "cases": cases,
    }
    write_json(out_dir / f"{name}.tokenize.json", tok)


def tok_case(llm: llama_cpp.Llama, text: str, special: bool) -> dict:
    ids = llm.tokenize(text.encode("utf-8"), add_bos=False, special=special)
    back = llm.detokenize(ids, special=True).decode("utf-8", errors="replace")
    return {"text": text, "parse_special": special, "ids": ids, "detokenized": back}


def to_json(obj, indent: int = 0) -> str:
    """JSON with one item per line, except that lists holding no dicts (ids, [id, logit]
    pairs, top-5 rows) stay on one line: readable diffs, small files."""
    pad, inner = " " * indent, " " * (indent + 1)
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        items = [f"{inner}{json.dumps(k, ensure_ascii=False)}: {to_json(v, indent + 1)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list):
        if not any(isinstance(x, dict) for x in obj):
            if obj and isinstance(obj[0], list):  # a list of rows: one row per line
                return "[\n" + ",\n".join(inner + json.dumps(x, ensure_ascii=False) for x in obj) + "\n" + pad + "]"
            return json.dumps(obj, ensure_ascii=False)
        return "[\n" + ",\n".join(inner + to_json(x, indent + 1) for x in obj) + "\n" + pad + "]"
    return json.dumps(obj, ensure_ascii=False)


def write_json(path: Path, obj: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    text = to_json(obj)
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text + "\n")
    os.replace(tmp, path)
    print(f"wrote {path.relative_to(REPO) if path.is_relative_to(REPO) else path}", file=sys.stderr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models-dir", type=Path,
                    default=Path(os.environ.get("EMBER_TEST_MODELS_DIR",
                                                Path.home() / ".cache/ember/test-models")))
    ap.add_argument("--out-dir", type=Path, default=REPO / "tests/fixtures/reference")
    ap.add_argument("--model", choices=sorted(MODELS), action="append",
                    help="only this model (repeatable; default: all)")
    args = ap.parse_args()
    command = shlex.join([sys.executable, *sys.argv])
    for name in args.model or sorted(MODELS):
        print(f"{name}:", file=sys.stderr)
        make_model(name, args.models_dir, args.out_dir, command)


if __name__ == "__main__":
    main()
