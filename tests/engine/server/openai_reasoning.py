#!/usr/bin/env python3
"""Reasoning through the official `openai` client (pinned, scripts/fetch-openai-client.sh)
against `ember serve` on a real model made to think honestly: SmolLM2-135M-Instruct served
with --chat-template-file tests/fixtures/think-chatml.jinja, a ChatML template whose
generation prompt opens <think> (as Qwen3.5's does). What the model writes is then its
thinking, until the thinking budget (llama-server's `reasoning_budget_tokens`) makes the engine
write </think> in its place; reading that, the model answers. Checked: `reasoning_content` on
the message and on the deltas, never in `content`; the same split streamed and not;
usage.completion_tokens_details.reasoning_tokens; chat_template_kwargs {"enable_thinking":
false}; reasoning_effort accepted and checked; an earlier answer's reasoning_content reaching
the template. Run by ctest as test_server_openai_reasoning; exits non-zero on the first
failed check."""
import argparse
import os
import sys

import openai

from ember_serve import EmberServe

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
BUDGET = 5
MARKERS = ("<think>", "</think>")


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print(f"ok: {what}")


def extra(obj, name):
    """A field the OpenAI schema does not name (reasoning_content), as the client keeps it."""
    return (obj.model_extra or {}).get(name)


def ask(client, model_id, **kw):
    return client.chat.completions.create(model=model_id, messages=kw.pop("messages", QUESTION), max_tokens=48,
                                          temperature=0, seed=7, **kw)


def test_whole(client, model_id):
    r = ask(client, model_id, extra_body={"reasoning_budget_tokens": BUDGET})
    m = r.choices[0].message
    thought = extra(m, "reasoning_content")
    check(isinstance(thought, str) and thought != "", f"whole: reasoning_content {thought!r}")
    check(isinstance(m.content, str) and m.content != "", f"whole: content {m.content!r}")
    check(not any(x in m.content or x in thought for x in MARKERS), "whole: no <think> marker in either")
    details = r.usage.completion_tokens_details
    check(details is not None and BUDGET <= details.reasoning_tokens < r.usage.completion_tokens,
          f"whole: usage reasoning_tokens {details and details.reasoning_tokens} of {r.usage.completion_tokens}")
    return thought, m.content


def test_stream(client, model_id, whole):
    stream = ask(client, model_id, stream=True, extra_body={"reasoning_budget_tokens": BUDGET})
    thought, content, order = "", "", []
    for chunk in stream:
        if not chunk.choices:
            continue
        d = chunk.choices[0].delta
        r = extra(d, "reasoning_content")
        if r:
            thought += r
            order.append("r")
        if d.content:
            content += d.content
            order.append("c")
    check(thought == whole[0] and content == whole[1], "stream: the same thinking and answer as unstreamed")
    first_content = order.index("c") if "c" in order else -1
    check(order[:1] == ["r"] and first_content > 0 and "r" not in order[first_content:],
          f"stream: reasoning deltas first, then content ({''.join(order)})")


def test_thinking_off(client, model_id):
    r = ask(client, model_id, extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    m = r.choices[0].message
    check(extra(m, "reasoning_content") is None and m.content, f"enable_thinking=false: only an answer {m.content!r}")


def test_effort(client, model_id):
    r = ask(client, model_id, reasoning_effort="low", max_completion_tokens=4)
    check(r.choices[0].message is not None, "reasoning_effort='low' is accepted")
    try:
        ask(client, model_id, extra_body={"reasoning_effort": "extreme"})
        check(False, "reasoning_effort='extreme' is refused")
    except openai.BadRequestError as e:
        check("reasoning_effort" in str(e), f"reasoning_effort='extreme' is a 400 naming the field: {e}")


def test_earlier_reasoning(client, model_id):
    turn = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}, QUESTION[0]]
    plain = ask(client, model_id, messages=turn, max_completion_tokens=1)
    turn[1] = dict(turn[1], reasoning_content="The user says hi; I greet them back politely.")
    with_thought = ask(client, model_id, messages=turn, max_completion_tokens=1)
    check(with_thought.usage.prompt_tokens > plain.usage.prompt_tokens + 8,
          f"an earlier answer's reasoning_content reaches the template ({plain.usage.prompt_tokens} -> "
          f"{with_thought.usage.prompt_tokens} prompt tokens)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ember", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--template", required=True)
    args = ap.parse_args()
    print(f"openai {openai.__version__}")
    model_id = os.path.basename(args.model)[: -len(".gguf")]
    server = EmberServe(args.ember, args.model, "--chat-template-file", args.template, "--ctx", "512", "--device",
                        "cpu")
    try:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=120)
        whole = test_whole(client, model_id)
        test_stream(client, model_id, whole)
        test_thinking_off(client, model_id)
        test_effort(client, model_id)
        test_earlier_reasoning(client, model_id)
    finally:
        status = server.stop()
    check(status == 0, "ember serve exits 0 on SIGTERM")
    print("openai reasoning: all checks passed")


if __name__ == "__main__":
    sys.exit(main())
