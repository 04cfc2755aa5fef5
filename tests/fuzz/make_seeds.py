#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora (called by scripts/fuzz.sh).

  jinja:     every upstream chat template (tests/engine/template/upstream_templates.h, the
             R"JINJA(...)JINJA" literals) and every template of jinja_cases.json;
  tokenizer: the llama.cpp vocab test texts (tokenizer/ggml-vocab-*.gguf.inp), each prefixed
             with the byte that picks the vocabulary (and flags) in fuzz_tokenizer.cpp.

Usage: make_seeds.py SOURCE_DIR TESTDATA_DIR OUT_DIR  (writes OUT_DIR/jinja, OUT_DIR/tokenizer)
"""
import hashlib
import json
import pathlib
import re
import sys

# The order of kVocabs in fuzz_tokenizer.cpp: the low 4 bits of the first input byte pick one.
VOCABS = ["llama-spm", "phi-3", "gpt-2", "qwen2", "deepseek-coder", "refact", "starcoder"]


def write(folder: pathlib.Path, data: bytes) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / hashlib.sha1(data).hexdigest()).write_bytes(data)


def main() -> int:
    src, testdata, out = (pathlib.Path(a) for a in sys.argv[1:4])
    tmpl_dir = src / "tests/engine/template"
    n_jinja = 0
    header = (tmpl_dir / "upstream_templates.h").read_text(encoding="utf-8")
    for body in re.findall(r'R"JINJA\((.*?)\)JINJA"', header, flags=re.S):
        write(out / "jinja", body.encode())
        n_jinja += 1
    for case in json.loads((tmpl_dir / "jinja_cases.json").read_text(encoding="utf-8"))["cases"]:
        write(out / "jinja", case["template"].encode())
        n_jinja += 1
    n_tok = 0
    for i, name in enumerate(VOCABS):
        inp = testdata / "tokenizer" / f"ggml-vocab-{name}.gguf.inp"
        texts = inp.read_bytes().split(b"\n__ggml_vocab_test__\n")
        for j, text in enumerate(texts):
            flags = (j % 4) << 4  # parse_special, skip_special
            write(out / "tokenizer", bytes([i | flags]) + text)
            n_tok += 1
    if n_jinja < 20 or n_tok < 50:
        print(f"make_seeds.py: too few seeds ({n_jinja} templates, {n_tok} texts)", file=sys.stderr)
        return 1
    print(f"make_seeds.py: {n_jinja} templates, {n_tok} tokenizer texts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
