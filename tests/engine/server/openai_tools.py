#!/usr/bin/env python3
"""Tool calling through the official `openai` client (pinned, scripts/fetch-openai-client.sh)
against `ember serve` on a real model (SmolLM2-135M-Instruct, Gemma 3 270M: templates with no
tools support, so Ember's generic fallback prompt shows the tools and the model answers in the
<tool_call> form; engine/template/tool_calls.h), or with --template a chat template that shows
tools itself (Qwen2.5's: the Hermes form, several calls by default). Checked:

agent loop     step 1 with tool_choice "required" (one call at a time): a call to get_weather whose arguments are
               JSON matching the schema (a string "city"), finish_reason "tool_calls", content
               null; the call and its result sent back (assistant tool_calls + a tool message,
               both in the prompt); step 2 (tool_choice "none") answers in text. Whole and streamed (deltas: a head with index, id, type,
               name; then argument fragments by index), the streamed call equal to the whole one.
forced         tool_choice "required" on 5 seeds at temperature 1: always a valid call; a
               named function among two: that one; parallel_tool_calls false: one call.
none           tool_choice "none": text, no tool_calls.
hostile        400s for an unknown tool in tool_choice, bad tool types, names and schemas, too
               many tools, a schema the grammar refuses; 200 with clean text for malformed
               arguments in an earlier call; /health answers after each.

Run by ctest as test_server_openai_tools (once per model); exits non-zero on the first failed
check."""
import argparse
import json
import os
import sys
import urllib.request

import openai

from ember_serve import EmberServe

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                       "additionalProperties": False},
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Get the current time in a time zone",
        "parameters": {"type": "object", "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]}},
                       "required": ["zone"]},
    },
}
QUESTION = [{"role": "user", "content": "What is the weather in Paris?"}]


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print(f"ok: {what}")


def valid_weather_call(call):
    args = json.loads(call.function.arguments)
    return (call.type == "function" and call.function.name == "get_weather" and call.id.startswith("call_")
            and isinstance(args, dict) and set(args) == {"city"} and isinstance(args["city"], str))


def ask(client, model_id, **kw):
    kw.setdefault("messages", QUESTION)
    kw.setdefault("tools", [WEATHER])
    kw.setdefault("max_tokens", 64)
    kw.setdefault("temperature", 0)
    kw.setdefault("seed", 7)
    return client.chat.completions.create(model=model_id, **kw)


def collect_stream(stream):
    """The streamed answer: text, the calls rebuilt from their deltas, finish_reason."""
    text, calls, finish, heads = "", {}, None, 0
    for chunk in stream:
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        delta = choice.delta
        text += delta.content or ""
        for d in delta.tool_calls or []:
            if d.id is not None:
                heads += 1
                check(d.type == "function" and d.function.name and d.function.arguments == "",
                      f"stream: a call's first delta has id, type, name, empty arguments ({d.function.name})")
                calls[d.index] = {"id": d.id, "name": d.function.name, "arguments": ""}
            else:
                check(d.index in calls and d.function.name is None, "stream: a later delta carries the index only")
                calls[d.index]["arguments"] += d.function.arguments or ""
        finish = choice.finish_reason or finish
    check(heads == len(calls), "stream: one head per call")
    return text, [calls[i] for i in sorted(calls)], finish


def agent_loop(client, model_id, stream, whole_call=None):
    how = "streamed" if stream else "whole"
    if stream:
        _, calls, finish = collect_stream(ask(client, model_id, tool_choice="required", parallel_tool_calls=False,
                                              stream=True))
        check(finish == "tool_calls" and len(calls) >= 1, f"{how} step 1: finish_reason tool_calls, {len(calls)} call(s)")
        call = calls[0]
        check(call["name"] == "get_weather" and set(json.loads(call["arguments"])) == {"city"},
              f"{how} step 1: a valid call {call}")
        check(whole_call is None or json.loads(call["arguments"]) == json.loads(whole_call["function"]["arguments"]),
              f"{how} step 1: the same arguments as the whole answer's (streamed as written, whole re-serialised)")
        assistant = {"role": "assistant", "content": None, "tool_calls": [
            {"id": call["id"], "type": "function", "function": {"name": call["name"], "arguments": call["arguments"]}}]}
        call_id = call["id"]
    else:
        r = ask(client, model_id, tool_choice="required", parallel_tool_calls=False)
        m = r.choices[0].message
        check(r.choices[0].finish_reason == "tool_calls", f"{how} step 1: finish_reason tool_calls")
        check(m.content is None and m.tool_calls and valid_weather_call(m.tool_calls[0]),
              f"{how} step 1: a valid call {m.tool_calls[0].function if m.tool_calls else None}")
        assistant = m.model_dump(exclude_none=True)
        call_id = m.tool_calls[0].id
    # Step 2 answers from the result: tool_choice "none" (tools still shown), since models this
    # small, left to choose, often call again.
    messages = QUESTION + [assistant, {"role": "tool", "tool_call_id": call_id, "content": "18 C and sunny"}]
    if stream:
        text, calls, finish = collect_stream(ask(client, model_id, messages=messages, tool_choice="none", stream=True))
    else:
        r = ask(client, model_id, messages=messages, tool_choice="none")
        text, calls, finish = r.choices[0].message.content, r.choices[0].message.tool_calls, r.choices[0].finish_reason
    check(not calls and finish in ("stop", "length") and isinstance(text, str) and text.strip(),
          f"{how} step 2: a text answer {text!r}")
    # the call and its result reached the prompt
    r1 = ask(client, model_id, tool_choice="none", max_tokens=1)
    r2 = ask(client, model_id, messages=messages, tool_choice="none", max_tokens=1)
    check(r2.usage.prompt_tokens > r1.usage.prompt_tokens + 20,
          f"{how} step 2: the call and the result are in the prompt ({r1.usage.prompt_tokens} -> {r2.usage.prompt_tokens} tokens)")
    return assistant


def forced(client, model_id):
    for seed in range(5):
        r = ask(client, model_id, tool_choice="required", temperature=1.0, seed=seed)
        calls = r.choices[0].message.tool_calls
        check(calls and all(valid_weather_call(c) for c in calls),
              f"required, seed {seed}: {[c.function.arguments for c in calls or []]}")
    for seed in range(3):
        r = ask(client, model_id, tools=[WEATHER, TIME], temperature=1.0, seed=seed,
                tool_choice={"type": "function", "function": {"name": "get_time"}})
        calls = r.choices[0].message.tool_calls
        check(calls and all(c.function.name == "get_time" and json.loads(c.function.arguments)["zone"] in ("UTC", "CET")
                            for c in calls), f"named get_time, seed {seed}: {calls[0].function if calls else None}")
    r = ask(client, model_id, tools=[WEATHER, TIME], tool_choice="required", parallel_tool_calls=False,
            temperature=1.0, seed=3)
    check(len(r.choices[0].message.tool_calls or []) == 1, "parallel_tool_calls false: one call")
    ids = {c.id for s in range(2) for c in ask(client, model_id, tool_choice="required", seed=s).choices[0].message.tool_calls}
    check(len(ids) == 2, f"call ids differ between answers {ids}")


def none_choice(client, model_id):
    r = ask(client, model_id, tool_choice="none")
    m = r.choices[0].message
    check(not m.tool_calls and r.choices[0].finish_reason in ("stop", "length") and isinstance(m.content, str),
          f"tool_choice none: text {m.content!r}")


def healthy(url):
    with urllib.request.urlopen(url + "/health", timeout=10) as r:
        return r.status == 200


def hostile(server, assistant):
    url = server.url
    base = {"messages": QUESTION, "max_tokens": 16}
    deep = {"type": "object", "properties": {"x": {"type": "array"}}}  # 40 schemas deep, 45 JSON levels
    node = deep["properties"]["x"]
    for _ in range(40):
        node["items"] = {"type": "array"}
        node = node["items"]
    cases = [
        ("unknown tool in tool_choice", {"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "rm"}}}),
        ("required without tools", {"tool_choice": "required"}),
        ("a tool of another type", {"tools": [{"type": "code_interpreter"}]}),
        ("a name with spaces", {"tools": [{"type": "function", "function": {"name": "rm -rf /"}}]}),
        ("parameters not an object", {"tools": [{"type": "function", "function": {"name": "f", "parameters": [1]}}]}),
        ("129 tools", {"tools": [{"type": "function", "function": {"name": f"f{i}"}} for i in range(129)]}),
        ("a 100 KB description", {"tools": [{"type": "function", "function": {"name": "f", "description": "x" * 100000}}]}),
        ("a schema nested 40 deep, forced", {"tools": [{"type": "function", "function": {"name": "f", "parameters": deep}}],
                                             "tool_choice": "required"}),
        ("an unsupported schema keyword, forced",
         {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "not": {}}}}],
          "tool_choice": "required"}),
        ("tool_calls arguments of the wrong type",
         {"messages": QUESTION + [{"role": "assistant", "tool_calls": [
             {"id": "c", "type": "function", "function": {"name": "f", "arguments": 5}}]}]}),
    ]
    for what, extra in cases:
        status, body = server.post_json("/v1/chat/completions", {**base, **extra})
        check(status in (400, 413) and "message" in body.get("error", {}),
              f"hostile: {what} -> {status} {body.get('error', {}).get('message', '')[:100]!r}")
        check(healthy(url), "hostile: /health answers")
    # malformed arguments in an earlier call are the conversation's text, never an error
    bad = dict(assistant)
    bad["tool_calls"] = [dict(bad["tool_calls"][0], function={"name": "get_weather", "arguments": "{{{not json"})]
    status, body = server.post_json("/v1/chat/completions", {**base, "tools": [WEATHER], "messages": QUESTION + [
        bad, {"role": "tool", "tool_call_id": bad["tool_calls"][0]["id"], "content": "\u0000\ud7ff"}]})
    check(status == 200 and isinstance(body["choices"][0]["message"].get("content"), str),
          f"hostile: malformed arguments in history -> {status}")
    check(healthy(url), "hostile: /health answers")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ember", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--template", help="a chat template file to serve the model with (--chat-template-file)")
    args = ap.parse_args()
    print(f"openai {openai.__version__}")
    model_id = os.path.basename(args.model)[: -len(".gguf")]
    extra = ["--chat-template-file", args.template] if args.template else []
    server = EmberServe(args.ember, args.model, "--ctx", "2048", "--device", "cpu", *extra)
    try:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=120)
        assistant = agent_loop(client, model_id, stream=False)
        agent_loop(client, model_id, stream=True, whole_call=assistant["tool_calls"][0])
        forced(client, model_id)
        none_choice(client, model_id)
        hostile(server, assistant)
    finally:
        status = server.stop()
    check(status == 0, "ember serve exits 0 on SIGTERM")
    print("openai tools: all checks passed")


if __name__ == "__main__":
    sys.exit(main())
