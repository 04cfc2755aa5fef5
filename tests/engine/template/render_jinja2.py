#!/usr/bin/env python3
"""Renders the models' real chat templates with Python's jinja2, as transformers does.

    render_jinja2.py TEMPLATE_DIR > cases.json

TEMPLATE_DIR is llama.cpp's models/templates (from the llama-cpp-python source package:
scripts/llama-cpp-tools.sh --src). The templates are the models' own (Gemma terms, Apache-2.0):
they are read from there, never copied into this repository. For every template, conversation
and option set below it prints one case: the inputs (messages in the form Ember's chat stack
passes them, tools, options) and jinja2's output or error. test_template_jinja2.cpp renders
the same inputs through ChatTemplate::render and compares the bytes.

Message dicts carry exactly the keys Ember's renderer builds (chat_template.cpp): role,
content, then only when set: reasoning_content and thinking (the same text: Qwen and Gemma read
the first, gpt-oss the second), tool_calls [{id?, type, function: {name, arguments}}],
tool_call_id, name. Tools are passed as given; `tools` is None without tools, as transformers
passes it.
"""
import json
import os
import sys

import jinja2

from hf_jinja import NOW, render

TEMPLATES = {
    # file: (bos_token, eos_token) as the models' GGUF files name them
    "google-gemma-4-31B-it.jinja": ("<bos>", "<eos>"),
    "google-gemma-4-31B-it-interleaved.jinja": ("<bos>", "<eos>"),
    "Qwen-Qwen3-0.6B.jinja": ("", "<|im_end|>"),
    "Qwen3.5-4B.jinja": ("", "<|im_end|>"),
    "openai-gpt-oss-120b.jinja": ("<|startoftext|>", "<|return|>"),
    "Qwen3-Coder.jinja": ("", "<|im_end|>"),
}

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. \"Paris\"."},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Unit."},
                "days": {"type": "integer", "description": "Forecast days.", "default": 1},
                "tags": {"type": "array", "items": {"type": "string"}},
                "where": {"type": "object", "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
                          "required": ["lat"]},
                "exact": {"type": "boolean", "nullable": True},
            },
            "required": ["city"],
        },
    },
}
SEARCH = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Searches the web; returns titles.",
        "parameters": {"type": "object", "properties": {"q": {"type": "string", "description": "Query."}},
                       "required": ["q"]},
    },
}
TOOLS = [WEATHER, SEARCH]


def msg(role, content, reasoning=None, tool_calls=None, tool_call_id=None, name=None):
    m = {"role": role, "content": content}
    if reasoning:
        m["reasoning_content"] = reasoning
        m["thinking"] = reasoning
    if tool_calls:
        m["tool_calls"] = tool_calls
    if tool_call_id:
        m["tool_call_id"] = tool_call_id
    if name:
        m["name"] = name
    return m


def call(id_, name, arguments):
    c = {"id": id_} if id_ else {}
    c.update({"type": "function", "function": {"name": name, "arguments": arguments}})
    return c


SYS = msg("system", "You are a helpful assistant. Answer briefly.")
CHAT = [
    msg("user", "Hello! Who are you?"),
    msg("assistant", "I am an assistant.\nHow can I help?"),
    msg("user", "  Grüße, 世界! 🙂 \"quotes\" \\ back\tslash  "),
]
REASONING = [
    msg("user", "What is 17 * 3?"),
    msg("assistant", "51.", reasoning="17 * 3 = 51.\nDouble-check: 50 + 1."),
    msg("user", "And 17 * 4?"),
]
WEATHER_CALL = call("call_1", "get_weather", {"city": "Paris", "unit": "celsius", "tags": ["a", "b"],
                                              "where": {"lat": 48.85, "lon": 2.35}, "exact": True, "days": 3})
TOOL_TURNS = [
    msg("user", "Weather in Paris?"),
    msg("assistant", "", reasoning="I should call get_weather.", tool_calls=[WEATHER_CALL]),
    msg("tool", "{\"temp\": 18, \"sky\": \"sunny\"}", tool_call_id="call_1", name="get_weather"),
]
TOOL_DONE = TOOL_TURNS + [msg("assistant", "It is 18 °C and sunny in Paris."), msg("user", "Thanks! And tomorrow?")]
TWO_CALLS = [
    msg("user", "Weather in Paris and news about it?"),
    msg("assistant", "Let me look both up.", tool_calls=[
        call("call_a", "get_weather", {"city": "Paris"}),
        call("call_b", "search", {"q": "Paris news"})]),
    msg("tool", "18C", tool_call_id="call_a", name="get_weather"),
    msg("tool", "Nothing new.", tool_call_id="call_b", name="search"),
]
NO_ID_CALL = [
    msg("user", "Search for cats."),
    msg("assistant", "", tool_calls=[call(None, "search", {"q": "cats"})]),
    msg("tool", "Cats are mammals.", name="search"),
]
THINK_IN_CONTENT = [
    msg("user", "Hi"),
    msg("assistant", "<think>\nGreeting.\n</think>\n\nHello!"),
    msg("user", "Bye"),
]
LAST_ASSISTANT = [msg("user", "Say hi."), msg("assistant", "Hi!", reasoning="Short answer.")]

CONVERSATIONS = {
    # name: (messages, tools)
    "chat_sys": ([SYS] + CHAT, None),
    "chat": (CHAT, None),
    "reasoning": ([SYS] + REASONING, None),
    "think_in_content": (THINK_IN_CONTENT, None),
    "last_assistant": (LAST_ASSISTANT, None),
    "tools_defined": ([SYS] + CHAT, TOOLS),
    "tool_pending": ([SYS] + TOOL_TURNS, TOOLS),
    "tool_done": (TOOL_DONE, TOOLS),
    "two_calls": (TWO_CALLS, TOOLS),
    "no_id_call": (NO_ID_CALL, [SEARCH]),
    "one_user": ([msg("user", "Hi")], None),
}

OPTIONS = {
    # name: extra template variables (beside add_generation_prompt)
    "default": {},
    "no_thinking": {"enable_thinking": False},
    "thinking": {"enable_thinking": True},
    "effort_low": {"reasoning_effort": "low"},
    "effort_high": {"reasoning_effort": "high"},
}


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: render_jinja2.py TEMPLATE_DIR")
    cases = []
    for file, (bos, eos) in TEMPLATES.items():
        path = os.path.join(sys.argv[1], file)
        with open(path, encoding="utf-8") as f:
            source = f.read()
        for conv_name, (messages, tools) in CONVERSATIONS.items():
            for opt_name, extra in OPTIONS.items():
                for agp in (True, False):
                    var = {"messages": messages, "tools": tools, "documents": None, "add_generation_prompt": agp,
                           "bos_token": bos, "eos_token": eos, **extra}
                    cases.append({"name": f"{file}/{conv_name}/{opt_name}/agp={agp}", "template": file,
                                  "messages": messages, "tools": tools, "add_generation_prompt": agp,
                                  "bos_token": bos, "eos_token": eos, "extra": extra, **render(source, var)})
    json.dump({"generator": "render_jinja2.py with jinja2 " + jinja2.__version__, "now": NOW, "cases": cases},
              sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
