#!/usr/bin/env python3
"""Structured output, the acceptance test of issue #37: 50 JSON schemas of growing depth (1 to
10 levels, five shapes per depth, every supported keyword among them) sent through the official
`openai` client to `ember serve` as response_format json_schema, each with 5 seeds; every
answer must parse and validate with the `jsonschema` package (draft 2020-12, formats checked).
Then json_object mode, llama-server's `grammar` field, and the 400s for unsupported schemas.

Strings carry a maxLength and arrays a maxItems here so that every answer ends within
max_tokens on a 135M model (a schema without them is valid too; the model then decides when
to close a string). Run by ctest as test_structured_output; exits non-zero on a failure."""
import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor

import jsonschema
import openai

sys.path.insert(0, __import__("os").path.join(__import__("os").path.dirname(__file__), "..", "server"))
from ember_serve import EmberServe  # noqa: E402

LEAVES = [
    {"type": "string", "maxLength": 12},
    {"type": "integer", "minimum": -50, "maximum": 500},
    {"type": "boolean"},
    {"enum": ["red", "green", "blue"]},
    {"type": ["string", "null"], "maxLength": 8},
    {"type": "number", "minimum": -2.5, "exclusiveMaximum": 100.25},
    {"type": "string", "format": "date"},
    {"type": "string", "format": "email"},
    {"type": "string", "format": "uuid"},
    {"const": "fixed"},
    {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "maxItems": 3},
    {"anyOf": [{"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10},
               {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"}]},
    {"type": "string", "minLength": 2, "maxLength": 6},
    {"type": "array", "prefixItems": [{"type": "boolean"}, {"type": "integer", "minimum": 1, "maximum": 3}], "items": False},
]


def leaf(n):
    return dict(LEAVES[n % len(LEAVES)], description=f"field {n}")


def level(depth, shape, n):
    """An object `depth` levels deep; `shape` picks how the levels are joined."""
    if depth == 0:
        return leaf(n)
    inner = level(depth - 1, shape, n + 1)
    if shape == 1 and depth % 3 == 0:  # an array of the inner level
        inner = {"type": "array", "items": inner, "minItems": 1, "maxItems": 1}
    props = {"next": inner, f"v{depth}": leaf(n + depth)}
    required = ["next", f"v{depth}"]
    if shape == 2:  # an optional third field
        props["extra"] = leaf(n + 2 * depth)
    if shape == 3:  # nullable inner level
        props["next"] = {"anyOf": [inner, {"type": "null"}]}
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


def make_schema(i):
    depth, shape = 1 + i // 5, i % 5
    if shape == 4:  # the inner levels through $defs
        return {"type": "object", "properties": {"root": {"$ref": "#/$defs/inner"}}, "required": ["root"],
                "$defs": {"inner": level(depth - 1, 0, i)}, "$schema": "https://json-schema.org/draft/2020-12/schema"}
    return level(depth, shape, i)


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def one(client, model_id, i, seed):
    schema = make_schema(i)
    r = client.chat.completions.create(
        model=model_id, seed=seed, temperature=1.0, max_tokens=1500,
        messages=[{"role": "user", "content": "Fill in this form as JSON."}],
        response_format={"type": "json_schema", "json_schema": {"name": f"form{i}", "strict": True, "schema": schema}})
    text = r.choices[0].message.content
    try:
        check(r.choices[0].finish_reason == "stop", f"finish_reason {r.choices[0].finish_reason}")
        jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker()).validate(json.loads(text))
        return None
    except (AssertionError, ValueError, jsonschema.ValidationError) as e:
        return f"schema {i} (depth {1 + i // 5}) seed {seed}: {type(e).__name__}: {str(e)[:300]}\n  output: {text[:400]!r}"


def test_schemas(client, model_id, jobs, schemas):
    with ThreadPoolExecutor(jobs) as pool:
        futures = [pool.submit(one, client, model_id, i, seed) for i in schemas for seed in range(1, 6)]
        failures = [f.result() for f in futures]
    failures = [f for f in failures if f]
    for f in failures:
        print("FAIL:", f)
    n = 5 * len(schemas)
    print(f"json_schema: {n - len(failures)} of {n} answers ({len(schemas)} schemas x 5 seeds) validate")
    check(not failures, "every answer validates")


def test_modes(client, model_id):
    # json_object bounds nothing but whitespace and digits: the model decides when strings end.
    r = client.chat.completions.create(model=model_id, seed=3, max_tokens=1200,
                                       messages=[{"role": "user", "content": "Give a cat's name and age as JSON."}],
                                       response_format={"type": "json_object"})
    text = r.choices[0].message.content
    if r.choices[0].finish_reason == "stop":
        check(isinstance(json.loads(text), dict), "json_object: the answer is a JSON object")
    else:  # Gemma 3 270M adds keys until max_tokens: nothing in json_object mode bounds that
        check(text.lstrip().startswith("{"), f"json_object: cut at max_tokens, an object so far: {text[:80]!r}")
    r = client.chat.completions.create(model=model_id, max_tokens=20, temperature=0,
                                       messages=[{"role": "user", "content": "Is water wet?"}],
                                       extra_body={"grammar": 'root ::= "yes" | "no"'})
    check(r.choices[0].message.content in ("yes", "no"), f"grammar: {r.choices[0].message.content!r} is yes or no")
    print("ok: json_object and grammar modes")


def test_refusals(client, model_id):
    for schema, keyword in [({"type": "string", "pattern": "^(?=a)"}, "pattern"),
                            ({"type": "object", "patternProperties": {"a": {}}}, "patternProperties"),
                            ({"$ref": "#"}, "$ref")]:
        try:
            client.chat.completions.create(
                model=model_id, messages=[{"role": "user", "content": "x"}],
                response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema}})
            raise AssertionError(f"{keyword}: accepted")
        except openai.BadRequestError as e:
            check(e.status_code == 400 and keyword in str(e), f"{keyword}: a 400 naming it ({e})")
    print("ok: unsupported schemas are 400s naming the keyword")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ember", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--jobs", type=int, default=4, help="requests in flight at once")
    ap.add_argument("--schemas", default="0-49", help="which of the 50 schemas, e.g. 40-44 (all by default)")
    a = ap.parse_args()
    server = EmberServe(a.ember, a.model, "--parallel", str(a.jobs), "--ctx", "2048", "--max-tokens", "1500", start_timeout=120)
    try:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="none", timeout=600, max_retries=0)
        model_id = client.models.list().data[0].id
        test_refusals(client, model_id)
        test_modes(client, model_id)
        lo, _, hi = a.schemas.partition("-")
        test_schemas(client, model_id, a.jobs, list(range(int(lo), int(hi or lo) + 1)))
    finally:
        server.stop()
    print("structured output: all checks passed")


if __name__ == "__main__":
    main()
