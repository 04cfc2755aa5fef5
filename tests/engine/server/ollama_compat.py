#!/usr/bin/env python3
"""The official `ollama` Python client (pinned, scripts/fetch-ollama-client.sh) against
`ember serve` on a real model (SmolLM2, or Gemma 3 with --family gemma3), pointed at it the way
users do (OLLAMA_HOST, OLLAMA_API_KEY):
/api/chat and /api/generate streamed and not, options honoured (greedy with a seed gives the
same text as the OpenAI route for the same prompt; num_predict; stop), format ("json" and a
JSON schema, the output checked), tools (a two-step agent loop), the counts checked
against `ember tokenize`, list/show/ps/version, the "Ollama is running" probe, errors as Ollama
sends them, a client that hangs up mid-stream, and thinking (SmolLM2 made to think by tests/fixtures/think-chatml.jinja).
Run by ctest as test_server_ollama; exits non-zero on the first failed check."""
import argparse
import json
import os
import sys
import time
import urllib.request

import ollama

from ember_serve import EmberServe, check, count_tokens

KEY = "sk-ember-test-key"
SYSTEM = "You are a helpful assistant."
USER = "What is the capital of France?"
MESSAGES = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]
# Per model: its chat template's text for a system and a user message with the generation prompt
# (Gemma 3's folds the system prompt into the user turn; its BOS is the tokenizer's to add), and
# what /api/tags and /api/show say of the file.
FAMILIES = {
    "smollm2": {"rendered": f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{USER}<|im_end|>\n"
                            "<|im_start|>assistant\n",
                "family": "llama", "quant": "Q4_1", "ctx_key": "llama.context_length", "ctx": 8192,
                "template_mark": "<|im_start|>"},
    "gemma3": {"rendered": f"<start_of_turn>user\n{SYSTEM}\n\n{USER}<end_of_turn>\n<start_of_turn>model\n",
               "family": "gemma3", "quant": "Q4_K_M", "ctx_key": "gemma3.context_length", "ctx": 32768,
               # the test file has none: /api/show gives the built-in one Ember falls back to
               "template_mark": "<start_of_turn>"},
}
FAMILY = FAMILIES["smollm2"]
GREEDY = {"temperature": 0, "seed": 7, "num_predict": 16}


def openai_route(url, body):
    """The same question through /v1/chat/completions (standard library: no second client)."""
    req = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json", "Authorization": "Bearer " + KEY})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())["choices"][0]["message"]["content"]


def expect_error(status, what, call):
    try:
        call()
    except ollama.ResponseError as e:
        check(e.status_code == status, f"{what}: ResponseError {e.status_code} ({e.error})")
        return e
    raise AssertionError(f"{what}: accepted")


def test_models(client, name):
    check(client.list().models[0].model == name, f"list(): {name}")
    details = client.list().models[0].details
    check(details.format == "gguf" and details.family == FAMILY["family"]
          and details.quantization_level == FAMILY["quant"], f"list(): details {details}")
    show = client.show(name)
    check(show.modelinfo["general.architecture"] == FAMILY["family"]
          and show.modelinfo[FAMILY["ctx_key"]] == FAMILY["ctx"], "show(): model_info from the GGUF")
    check(FAMILY["template_mark"] in show.template and "temperature 0.8" in show.parameters,
          "show(): template, parameters")
    check(show.capabilities == ["completion", "tools"], f"show(): capabilities {show.capabilities}")
    ps = client.ps().models
    check(len(ps) == 1 and ps[0].model == name and ps[0].size > 0 and ps[0].size_vram == 0,
          f"ps(): loaded on the CPU, {ps[0].size} bytes")
    check(client._client.get("/api/version").json()["version"], "/api/version")


def test_chat(client, url, name, prompt_tokens):
    r = client.chat(model=name, messages=MESSAGES, options=GREEDY, stream=False)
    text = r.message.content
    check(r.message.role == "assistant" and text != "", f"chat: {text!r}")
    check(r.done and r.done_reason in ("stop", "length"), f"chat: done, done_reason {r.done_reason}")
    check(r.prompt_eval_count == prompt_tokens, f"chat: prompt_eval_count {r.prompt_eval_count} == {prompt_tokens}")
    check(0 < r.eval_count <= 16 and r.total_duration >= r.eval_duration > 0, f"chat: eval_count {r.eval_count}")
    same = openai_route(url, {"model": name, "messages": MESSAGES, "temperature": 0, "seed": 7, "max_tokens": 16})
    check(same == text, "chat: the same greedy text as /v1/chat/completions")
    parts = list(client.chat(model=name, messages=MESSAGES, options=GREEDY, stream=True))
    check(all(not p.done for p in parts[:-1]) and parts[-1].done, f"chat stream: {len(parts)} parts, the last done")
    check("".join(p.message.content for p in parts) == text, "chat stream: the same text")
    check(parts[-1].eval_count == r.eval_count and parts[-1].done_reason == r.done_reason,
          "chat stream: the same counts and done_reason")
    return text


def test_generate(client, name, chat_text):
    r = client.generate(model=name, system=SYSTEM, prompt=USER, options=GREEDY)
    check(r.response == chat_text, f"generate: system + prompt through the template = chat's text {r.response!r}")
    streamed = "".join(p.response for p in client.generate(model=name, system=SYSTEM, prompt=USER, options=GREEDY,
                                                           stream=True))
    check(streamed == chat_text, "generate stream: the same text")
    raw = client.generate(model=name, prompt=FAMILY["rendered"], raw=True, options=GREEDY)
    check(raw.response == chat_text, "generate raw: the rendered prompt as it is gives the same text")
    short = client.generate(model=name, prompt="Write a long story about a dragon.",
                            options={"num_predict": 3, "temperature": 0})
    check(short.eval_count == 3 and short.done_reason == "length", "options.num_predict 3: three tokens, length")
    stop = chat_text.split()[1]
    cut = client.generate(model=name, system=SYSTEM, prompt=USER, options={**GREEDY, "stop": [stop]})
    check(cut.response == chat_text[:chat_text.index(stop)] and cut.done_reason == "stop",
          f"options.stop {stop!r}: the text ends before it ({cut.response!r})")
    sampled = [client.generate(model=name, prompt="Tell me a story.", options={"temperature": 1.0, "seed": 5,
                                                                               "num_predict": 12}).response
               for _ in range(2)]
    check(sampled[0] == sampled[1], "options.seed: the same sampled text twice")
    load = client.generate(model=name, prompt="", keep_alive="5m")
    check(load.done and load.done_reason == "load", "generate with no prompt: the load answer")


def test_format(client, name):
    """format: "json" and a JSON schema constrain the output (grammar-constrained sampling)."""
    r = client.chat(model=name, messages=[{"role": "user", "content": "Describe Paris as JSON."}], format="json",
                    options={"temperature": 0, "num_predict": 64})
    # Any JSON object: a model may keep adding keys until num_predict cuts it (Gemma 3 does).
    if r.done_reason == "length":
        check(r.message.content.startswith("{"), f"format json, cut at num_predict: an object {r.message.content!r}")
    else:
        check(isinstance(json.loads(r.message.content), dict), f"format json: a JSON object {r.message.content!r}")
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "population": {"type": "integer"},
                                               "capital": {"type": "boolean"}},
              "required": ["city", "population", "capital"], "additionalProperties": False}
    for seed in (1, 2, 3):
        parts = list(client.generate(model=name, prompt="Give facts about Paris.", format=schema, stream=True,
                                     options={"temperature": 0.8, "seed": seed, "num_predict": 96}))
        text = "".join(p.response for p in parts)
        obj = json.loads(text)
        check(set(obj) == {"city", "population", "capital"} and isinstance(obj["city"], str)
              and isinstance(obj["population"], int) and isinstance(obj["capital"], bool)
              and parts[-1].done_reason == "stop", f"format schema, seed {seed}, streamed: {text!r}")
    expect_error(400, "a schema keyword the compiler does not know",
                 lambda: client.chat(model=name, messages=MESSAGES, format={"type": "object", "$ref": "#/x"}))


WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
QUESTION = [{"role": "user", "content": "What is the weather in Paris?"}]


def get_weather(city: str) -> str:
    """
    Get the current weather in a city

    Args:
      city: The city

    Returns:
      str: The weather
    """
    return f"18 degrees and sunny in {city}"


def post_ndjson(url, path, body):
    """Ollama's answer lines, over plain HTTP (for Ember's tool_choice, which the client cannot send)."""
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json", "Authorization": "Bearer " + KEY})
    with urllib.request.urlopen(req, timeout=120) as r:
        return [json.loads(line) for line in r.read().decode().splitlines() if line]


def test_tools(client, url, name, result_tokens):
    """A two-step agent loop: the model calls get_weather (forced with Ember's tool_choice, since
    SmolLM2 answers text when free to), gets its result, answers; streamed and not."""
    base = {"model": name, "messages": QUESTION, "tools": [WEATHER], "tool_choice": "required",
            "options": {"temperature": 0, "num_predict": 64}}
    whole = post_ndjson(url, "/api/chat", {**base, "stream": False})[0]
    calls = whole["message"].get("tool_calls") or []
    check(len(calls) == 1 and calls[0]["function"]["name"] == "get_weather"
          and isinstance(calls[0]["function"]["arguments"].get("city"), str),
          f"tools step 1: one call with an object of arguments {calls}")
    lines = post_ndjson(url, "/api/chat", {**base, "stream": True})
    streamed = [c for line in lines for c in line["message"].get("tool_calls") or []]
    fns = [c["function"] for c in streamed]  # ids are fresh per answer
    check(fns == [calls[0]["function"]] and lines[-1]["done"], "tools step 1 streamed: the same call, whole")
    call = calls[0]["function"]
    result = get_weather(**call["arguments"])
    history = QUESTION + [{"role": "assistant", "content": "", "tool_calls": [{"function": call}]},
                          {"role": "tool", "content": result, "tool_name": "get_weather"}]
    r = client.chat(model=name, messages=history, tools=[WEATHER], options=GREEDY)
    check(r.message.content and not r.message.tool_calls, f"tools step 2 (client): an answer {r.message.content!r}")
    check(r.prompt_eval_count > whole["prompt_eval_count"] + result_tokens,
          f"tools step 2: the call and its result are in the prompt ({whole['prompt_eval_count']} -> "
          f"{r.prompt_eval_count} tokens)")
    parts = list(client.chat(model=name, messages=history, tools=[WEATHER], options=GREEDY, stream=True))
    check("".join(p.message.content for p in parts) == r.message.content, "tools step 2 streamed: the same answer")
    free = client.chat(model=name, messages=QUESTION, tools=[get_weather], options=GREEDY)
    check(free.done and (free.message.content or free.message.tool_calls),
          "tools offered as a Python function, no tool_choice: answered")


def test_hang_up(client, server, name):
    """A client that stops reading a stream: its request is cancelled, not run to num_predict."""
    parts = client.generate(model=name, prompt="Write a long story about a dragon.", stream=True,
                            options={"num_predict": 400, "temperature": 0})
    first = [next(parts) for _ in range(2)]
    parts.close()  # the client closes the connection
    t0 = time.monotonic()
    server.wait_idle(timeout=5, key=KEY)
    check(len(first) == 2, f"hang-up: the request ended {time.monotonic() - t0:.2f} s after the client left "
                           "(400 tokens would take far longer)")


def test_errors(client, url, name):
    expect_error(404, "unknown model", lambda: client.chat(model="llama3.2", messages=MESSAGES))
    expect_error(400, "images", lambda: client.chat(model=name, messages=[{"role": "user", "content": "?",
                                                                           "images": ["aGVsbG8="]}]))
    expect_error(400, "context", lambda: client.generate(model=name, prompt="hi", context=[1, 2, 3]))
    expect_error(400, "mirostat", lambda: client.generate(model=name, prompt="hi", options={"mirostat": 1}))
    expect_error(400, "num_predict over the server's limit",
                 lambda: client.generate(model=name, prompt="hi", options={"num_predict": 100000}))
    e = expect_error(404, "show an unknown model", lambda: client.show("llama3.2"))
    check("not found" in e.error, "show: Ollama's error text")
    wrong = ollama.Client(host=url, headers={"Authorization": "Bearer sk-wrong"})
    expect_error(401, "a wrong API key", lambda: wrong.list())
    with urllib.request.urlopen(url + "/", timeout=30) as r:  # clients probe it, with no key
        check(r.read() == b"Ollama is running", "GET /: Ollama is running")


def test_thinking(ember, model, name):
    here = os.path.dirname(os.path.abspath(__file__))
    template = os.path.join(here, "..", "..", "fixtures", "think-chatml.jinja")
    server = EmberServe(ember, model, "--ctx", "512", "--device", "cpu", "--chat-template-file", template)
    try:
        client = ollama.Client(host=server.url)
        q = [{"role": "user", "content": USER}]
        r = client.chat(model=name, messages=q, think=True, options=GREEDY)
        t = r.message.thinking
        check(t and "<think>" not in t and "</think>" not in (r.message.content or ""), f"think: thinking {t!r}")
        parts = list(client.chat(model=name, messages=q, think=True, options=GREEDY, stream=True))
        check("".join(p.message.thinking or "" for p in parts) == t, "think stream: the same thinking")
        off = client.chat(model=name, messages=q, think=False, options=GREEDY)
        check(not off.message.thinking and off.message.content, f"think=False: only an answer {off.message.content!r}")
    finally:
        check(server.stop() == 0, "thinking server exits 0")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ember", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--family", choices=sorted(FAMILIES), default="smollm2")
    args = ap.parse_args()
    global FAMILY
    FAMILY = FAMILIES[args.family]
    name = os.path.basename(args.model)[: -len(".gguf")] + ":latest"
    server = EmberServe(args.ember, args.model, "--api-key", KEY, "--ctx", "512", "--parallel", "2", "--device", "cpu")
    try:
        # How users point an Ollama client at Ember: OLLAMA_HOST (and OLLAMA_API_KEY for --api-key).
        os.environ["OLLAMA_HOST"] = server.url
        os.environ["OLLAMA_API_KEY"] = KEY
        client = ollama.Client()
        test_models(client, name)
        text = test_chat(client, server.url, name, count_tokens(args.ember, args.model, FAMILY["rendered"]))
        test_generate(client, name, text)
        test_format(client, name)
        test_tools(client, server.url, name, count_tokens(args.ember, args.model, get_weather("Paris")))
        test_hang_up(client, server, name)
        test_errors(client, server.url, name)
        del os.environ["OLLAMA_API_KEY"]
    finally:
        status = server.stop()
    check(status == 0, "ember serve exits 0 on SIGTERM")
    if args.family == "smollm2":  # the think-chatml fixture is SmolLM2's template made to think
        test_thinking(args.ember, args.model, name)
    print("ollama compatibility: all checks passed")


if __name__ == "__main__":
    sys.exit(main())
