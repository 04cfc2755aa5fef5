#!/usr/bin/env python3
"""The emulator's build step (kernels/cuda/emu/README.md): a CUDA source as plain C++.

  rewrite_cu.py SRC.cu OUT.cpp
      Writes a copy of SRC.cu that includes kernels/cuda/emu/prelude.h first and keeps
      SRC's file name and line numbers (#line), with
        k<<<grid, block[, smem[, stream]]>>>(args)  ->  ::ember::emu::launcher("k", (k), grid, ...)(args)
        extern __shared__ T name[];                 ->  T* const name = ::ember::emu::dynamic_shared<T>();
        __shared__ T name[N];                       ->  static T name[N]; ::ember::emu::static_shared(...);
      and an #error naming the line for what the emulator cannot run (inline PTX, textures,
      surfaces).
  rewrite_cu.py --kernels OUT.inc SRC.cu...
      Lists every __global__ function of the sources as {"name", "file"}, lines of a C++
      initializer (the tests fail when one of them was never launched).
"""
import os
import re
import sys

LAUNCH = re.compile(
    r"(?P<k>[A-Za-z_][\w:]*(?:\s*<[^<>;()]*(?:<[^<>;()]*>[^<>;()]*)*>)?)\s*<<<(?P<cfg>.*?)>>>\s*\(", re.S)
EXTERN_SHARED = re.compile(r"extern\s+__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s*)?(?P<t>[^;\[\]]+?)\s+(?P<n>\w+)\s*\[\s*\]\s*;")
STATIC_SHARED = re.compile(r"__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s*)?(?P<t>[^;=\[\]]+?)\s+(?P<n>\w+)\s*(?P<dims>(?:\[[^\]]+\]\s*)*);")
UNSUPPORTED = [
    (re.compile(r"\basm\s*(?:volatile\s*)?\(|\b__asm__\b|\b__asm\b"), "inline PTX (asm)"),
    (re.compile(r"\btexture\s*<|\btex[123]D\w*\s*\(|\bcudaTextureObject_t\b"), "textures"),
    (re.compile(r"\bsurf[123]D\w*\s*\(|\bcudaSurfaceObject_t\b"), "surfaces"),
    (re.compile(r"#\s*include\s*[<\"]cooperative_groups"), "cooperative groups"),
    (re.compile(r"\b__constant__\b"), "__constant__ memory"),
]
GLOBAL = re.compile(r"__global__\s+(?:void\s+)?(?:__launch_bounds__\s*\([^)]*\)\s*)?(?P<n>\w+)\s*\(")


def strip_comments(text):
    """Comments replaced by spaces (newlines kept), so that line numbers stay right."""
    def blank(m):
        return re.sub(r"[^\n]", " ", m.group(0))
    return re.sub(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"", lambda m: blank(m) if not m.group(0).startswith('"') else m.group(0), text, flags=re.S)


def keep_lines(old, new):
    """`new` padded with the newlines of `old` it lacks (line numbers after it stay right)."""
    return new + "\n" * (old.count("\n") - new.count("\n"))


def base_name(k):
    return re.sub(r"\s*<.*", "", k, flags=re.S).split("::")[-1]


def rewrite(src, text):
    code = strip_comments(text)
    errors = []
    for rx, what in UNSUPPORTED:
        for m in rx.finditer(code):
            line = code.count("\n", 0, m.start()) + 1
            errors.append(f'#error "{src}:{line}: the ember CUDA emulator does not support {what}"')

    def launch(m):
        k = m.group("k").strip()
        new = f'::ember::emu::launcher("{base_name(k)}", ({k}), {" ".join(m.group("cfg").split())})('
        return keep_lines(m.group(0), new)

    def extern_shared(m):
        t, n = m.group("t").strip(), m.group("n")
        return keep_lines(m.group(0), f"{t}* const {n} = ::ember::emu::dynamic_shared<{t}>();")

    def static_shared(m):
        t, n, dims = m.group("t").strip(), m.group("n"), m.group("dims").strip()
        addr = n if dims else "&" + n
        return keep_lines(m.group(0), f"static {t} {n}{dims}; ::ember::emu::static_shared({addr}, sizeof {n});")

    out = LAUNCH.sub(launch, text)
    out = EXTERN_SHARED.sub(extern_shared, out)
    out = STATIC_SHARED.sub(static_shared, out)
    head = ['#include "kernels/cuda/emu/prelude.h"'] + errors + [f'#line 1 "{src}"']
    return "\n".join(head) + "\n" + out


def kernels(sources):
    seen = {}
    for src in sources:
        with open(src, encoding="utf-8") as f:
            code = strip_comments(f.read())
        for m in GLOBAL.finditer(code):
            seen.setdefault(m.group("n"), os.path.basename(src))
    return "".join(f'{{"{n}", "{f}"}},\n' for n, f in sorted(seen.items()))


def write_if_changed(path, text):
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return
    except OSError:
        pass
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def main(argv):
    if len(argv) >= 3 and argv[1] == "--kernels":
        write_if_changed(argv[2], kernels(argv[3:]))
        return 0
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    src = os.path.abspath(argv[1])
    with open(src, encoding="utf-8") as f:
        text = f.read()
    write_if_changed(argv[2], rewrite(src, text))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
