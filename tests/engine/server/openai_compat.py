#!/usr/bin/env python3
"""The official `openai` Python client (pinned, scripts/fetch-openai-client.sh) against
`ember serve` on a real model: models, chat and completions, streamed and not, the API key,
errors, and `usage` checked against independent counts:
  - prompt_tokens: `ember tokenize` of the prompt as the model sees it (for chat, the ChatML
    text SmolLM2's own template renders for these messages, written out here by hand);
  - completion_tokens: one logprobs entry per generated token, and with ignore_eos exactly
    max_tokens.
Run by ctest as test_server_openai; exits non-zero on the first failed check."""
import argparse
import os
import subprocess
import sys
import tempfile

import openai

from ember_serve import EmberServe, check, count_tokens

KEY = "sk-ember-test-key"
SYSTEM = "You are a helpful assistant."
USER = "What is the capital of France?"
# SmolLM2-135M-Instruct's chat template for a system and a user message, with the generation prompt.
RENDERED = f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{USER}<|im_end|>\n<|im_start|>assistant\n"
COMPLETION_PROMPT = "The three primary colors are"


def test_models(client, model_id):
    models = client.models.list().data
    check([m.id for m in models] == [model_id], f"models.list() is [{model_id}]")


def test_chat(client, model_id, prompt_tokens):
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]
    r = client.chat.completions.create(model=model_id, messages=messages, max_tokens=12, temperature=0,
                                       logprobs=True, top_logprobs=2)
    c = r.choices[0]
    check(r.object == "chat.completion" and c.message.role == "assistant", "chat: a chat.completion from the assistant")
    check(isinstance(c.message.content, str) and c.message.content != "", f"chat: text {c.message.content!r}")
    check(c.finish_reason in ("stop", "length"), f"chat: finish_reason {c.finish_reason}")
    check(r.usage.prompt_tokens == prompt_tokens,
          f"chat: usage.prompt_tokens {r.usage.prompt_tokens} == ember tokenize of the rendered prompt {prompt_tokens}")
    # usage counts the end-of-generation token too (no stop strings here: "stop" means it came);
    # it has no text, so no logprobs entry.
    eog = 1 if c.finish_reason == "stop" else 0
    check(len(c.logprobs.content) + eog == r.usage.completion_tokens and 0 < r.usage.completion_tokens <= 12,
          f"chat: usage.completion_tokens {r.usage.completion_tokens} == logprobs entries {len(c.logprobs.content)}"
          f" + {eog} end-of-generation token")
    check("".join(t.token for t in c.logprobs.content) == c.message.content, "chat: the logprobs tokens spell the text")
    check(all(len(t.top_logprobs) == 2 for t in c.logprobs.content), "chat: two top_logprobs per token")
    check(r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens, "chat: total_tokens adds up")

    stream = client.chat.completions.create(model=model_id, messages=messages, max_tokens=12, temperature=0,
                                            stream=True, stream_options={"include_usage": True})
    text, usage, finish, roles = "", None, None, []
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for ch in chunk.choices:
            if ch.delta.role:
                roles.append(ch.delta.role)
            text += ch.delta.content or ""
            finish = ch.finish_reason or finish
    check(roles == ["assistant"], "chat stream: one role delta")
    check(text == c.message.content, f"chat stream: same greedy text as unstreamed ({text!r})")
    check(finish == c.finish_reason, f"chat stream: finish_reason {finish}")
    check(usage is not None and usage.prompt_tokens == prompt_tokens
          and usage.completion_tokens == r.usage.completion_tokens, "chat stream: include_usage gives the same usage")


def test_completions(client, model_id, prompt_tokens):
    r = client.completions.create(model=model_id, prompt=COMPLETION_PROMPT, max_tokens=10, temperature=0,
                                  logprobs=1, extra_body={"ignore_eos": True})
    c = r.choices[0]
    check(r.object == "text_completion" and c.text != "", f"completions: text {c.text!r}")
    check(c.finish_reason == "length" and r.usage.completion_tokens == 10,
          f"completions: ignore_eos runs to max_tokens (10 = {r.usage.completion_tokens}, {c.finish_reason})")
    check(r.usage.prompt_tokens == prompt_tokens,
          f"completions: usage.prompt_tokens {r.usage.prompt_tokens} == ember tokenize {prompt_tokens}")
    check(len(c.logprobs.tokens) == 10 and len(c.logprobs.top_logprobs) == 10, "completions: 10 logprobs entries")
    text = ""
    for chunk in client.completions.create(model=model_id, prompt=COMPLETION_PROMPT, max_tokens=10, temperature=0,
                                           stream=True, extra_body={"ignore_eos": True}):
        text += "".join(ch.text for ch in chunk.choices)
    check(text == c.text, f"completions stream: same greedy text ({text!r})")


def test_errors(client, url, model_id):
    try:
        client.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "hi"}])
        raise AssertionError("an unknown model was accepted")
    except openai.NotFoundError as e:
        check(e.status_code == 404 and e.code == "model_not_found", "unknown model: NotFoundError, model_not_found")
    try:
        client.chat.completions.create(model=model_id, messages=[{"role": "user", "content": "hi"}], n=2)
        raise AssertionError("n=2 was accepted")
    except openai.BadRequestError as e:
        check(e.status_code == 400 and e.param == "n", "n=2: BadRequestError naming 'n'")
    wrong = openai.OpenAI(base_url=url + "/v1", api_key="sk-wrong", max_retries=0)
    try:
        wrong.models.list()
        raise AssertionError("a wrong API key was accepted")
    except openai.AuthenticationError as e:
        check(e.status_code == 401, "wrong API key: AuthenticationError")


def test_ps(ember, url, model_id):
    port = url.rsplit(":", 1)[1]
    out = subprocess.run([ember, "ps", "--port", port, "--api-key", KEY], check=True, capture_output=True,
                         text=True).stdout
    check(f"model     {model_id}" in out and "device    cpu" in out and "0 running, 0 queued" in out,
          f"ember ps shows the model, the device and no requests:\n{out}")
    denied = subprocess.run([ember, "ps", "--port", port], capture_output=True, text=True)
    check(denied.returncode == 1 and "401" in denied.stderr, f"ember ps without the key: {denied.stderr.strip()}")


def test_disk_cache_restart(ember, model, model_id):
    """`--cache-disk`: a prompt's full KV blocks outlive the server; the next one reads them back
    (usage.prompt_tokens_details.cached_tokens) and answers the same."""
    messages = [{"role": "system", "content": SYSTEM},
                {"role": "user", "content": "Write one sentence about each of these rivers: the Danube, the Rhine, "
                                            "the Loire, the Elbe and the Vistula, and say which sea each one ends in."}]
    answers = []
    with tempfile.TemporaryDirectory() as cache_dir:
        for run in range(2):
            server = EmberServe(ember, model, "--ctx", "512", "--device", "cpu", "--cache-disk", "64MiB",
                                "--cache-dir", cache_dir)
            try:
                client = openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=120)
                r = client.chat.completions.create(model=model_id, messages=messages, max_tokens=8, temperature=0)
                answers.append((r.usage.prompt_tokens, r.usage.prompt_tokens_details.cached_tokens,
                                r.choices[0].message.content))
                disk = server.wait_idle()["kv_disk_cache_bytes"]
            finally:
                check(server.stop() == 0, f"disk cache, run {run + 1}: ember serve exits 0 ({disk} bytes on disk)")
    (p0, cached0, text0), (p1, cached1, text1) = answers
    check(p0 == p1 and p0 > 48 and cached0 == 0, f"disk cache: the first run computes all {p0} prompt tokens")
    check(cached1 == (p1 - 1) // 16 * 16, f"disk cache: after a restart {cached1} of {p1} prompt tokens come from disk")
    check(text1 == text0, f"disk cache: the same answer {text1!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ember", required=True)
    ap.add_argument("--model", required=True)
    args = ap.parse_args()
    print(f"openai {openai.__version__}")
    model_id = os.path.basename(args.model)[: -len(".gguf")]
    server = EmberServe(args.ember, args.model, "--api-key", KEY, "--ctx", "512", "--parallel", "2", "--device", "cpu")
    try:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key=KEY, max_retries=0, timeout=120)
        test_models(client, model_id)
        test_chat(client, model_id, count_tokens(args.ember, args.model, RENDERED))
        test_completions(client, model_id, count_tokens(args.ember, args.model, COMPLETION_PROMPT))
        test_errors(client, server.url, model_id)
        test_ps(args.ember, server.url, model_id)
    finally:
        status = server.stop()
    check(status == 0, "ember serve exits 0 on SIGTERM")
    test_disk_cache_restart(args.ember, args.model, model_id)
    print("openai compatibility: all checks passed")


if __name__ == "__main__":
    sys.exit(main())
