#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora (called by scripts/fuzz.sh).

  jinja:     every upstream chat template (tests/engine/template/upstream_templates.h, the
             R"JINJA(...)JINJA" literals) and every template of jinja_cases.json;
  tokenizer: the llama.cpp vocab test texts (tokenizer/ggml-vocab-*.gguf.inp), each prefixed
             with the byte that picks the vocabulary (and flags) in fuzz_tokenizer.cpp;
  grammar:   JSON schemas (string patterns, bounded numbers, objects) and GBNF grammars, in
             fuzz_grammar.cpp's form: a kind byte, the text, a NUL, bytes for the matcher.

Usage: make_seeds.py SOURCE_DIR TESTDATA_DIR OUT_DIR  (writes OUT_DIR/jinja, OUT_DIR/tokenizer,
OUT_DIR/grammar)
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


# Patterns of the regex subset engine/grammar/json_pattern.h translates, and some it refuses.
PATTERNS = [r"^[A-Z]{2}-[0-9]{3}$", r"^\d{3}-\d{4}$", r"^(foo|bar)+baz?$", r"^[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,4}$",
            r"^#[0-9a-fA-F]{6}$", r"^\w+\s\w+$", r"^(\+\d{1,3} )?\(\d{3}\) \d{3}-\d{4}$", r"abc", r"^a.c$",
            r"^(?:ab|cd){2,3}$", r'^[\\"/]+$', r"^(?<y>\d{4})-\d\d$", r"^[^a-y]{2,}?$", r"^\u00e9\x41\t$",
            r"^(?=a)", r"(a)\1", r"\bx", r"a{1001}", r"[z-a]", r"((a)"]
SCHEMAS = [{"type": "number", "minimum": -2.5, "exclusiveMaximum": 100.25},
           {"type": "number", "exclusiveMinimum": 0.1, "maximum": 1e-3},
           {"type": "number", "minimum": 0},
           {"type": "object", "properties": {"id": {"type": "string", "pattern": "^[a-f0-9]{8}$"},
                                             "n": {"type": "number", "maximum": 7.5}}, "required": ["id"]}]
GBNF = ['root ::= "{" ws "\\"a\\"" ws ":" ws [0-9]+ "}"\nws ::= [ \\t]*',
        'root ::= ( [a-z] | "-" ){2,5} ( "." [^"\\\\]* )?']


def grammar_seeds(out: pathlib.Path) -> int:
    n = 0
    for p in PATTERNS:
        write(out / "grammar", b"\x01" + json.dumps({"type": "string", "pattern": p}).encode() + b'\0"AB-123"')
        n += 1
    for s in SCHEMAS:
        write(out / "grammar", b"\x01" + json.dumps(s).encode() + b"\0" + b'{"id": "0a1b2c3d", "n": -4.25}')
        n += 1
    for g in GBNF:
        write(out / "grammar", b"\x00" + g.encode() + b'\0{"a":12}')
        n += 1
    return n


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
    n_grammar = grammar_seeds(out)
    if n_jinja < 20 or n_tok < 50:
        print(f"make_seeds.py: too few seeds ({n_jinja} templates, {n_tok} texts)", file=sys.stderr)
        return 1
    print(f"make_seeds.py: {n_jinja} templates, {n_tok} tokenizer texts, {n_grammar} grammars")
    return 0


if __name__ == "__main__":
    sys.exit(main())
