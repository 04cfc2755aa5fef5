// Ollama's request bodies (/api/chat, /api/generate) -> OllamaRequest: an EngineRequest and how
// to answer it, every field checked. A pure function like parse_request (request_parser.h),
// unit-tested and fuzzed (tests/fuzz/fuzz_server_request) without a server.
//
// What it honours and what it refuses:
//   - stream: true unless the body says false (Ollama's default, unlike OpenAI's).
//   - messages (role system, user, assistant, tool; content; an earlier answer's thinking), the
//     generate prompt with `system` rendered through the model's own chat template, or with
//     raw: true sent as it is (its special tokens written as text, "<|im_start|>", are those
//     tokens, as in Ollama). No messages / an empty prompt: Ollama's "load the model" call,
//     answered at once (load_only).
//   - options: temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n,
//     presence_penalty, frequency_penalty, seed (< 0: a fresh one), num_predict (< 0: up to the
//     server's max_tokens), stop onto SamplingParams and the limits. Left out: the engine's
//     defaults, as on the OpenAI routes (Ollama's own defaults differ: top_p 0.9, min_p 0,
//     repeat_penalty 1.1). mirostat != 0 and typical_p != 1 would change the answer and are
//     refused; num_ctx (the server's context is fixed by `ember serve --ctx`), load-time options
//     (num_gpu, num_thread, …) and unknown keys are ignored, as Ollama does, and listed in
//     `ignored` for the server's log.
//   - think: true/false (the template's enable_thinking) or "low"/"medium"/"high" (its
//     reasoning_effort); the thinking comes back apart (message.thinking / thinking).
//   - keep_alive: a duration ("5m", "1h30m", "300ms"), seconds as a number or a numeric string,
//     negative for ever; checked and reported, but `ember serve` keeps its one model loaded for
//     its whole life whatever it says.
//   - logprobs, top_logprobs (0..20).
//   - tools (/api/chat; OpenAI's shape; Ollama has no tool_choice, so "auto", but Ember also
//     takes OpenAI's tool_choice there to force a call, decoded under its grammar), assistant
//     tool_calls (arguments as an object) and role "tool" results (tool_name, else the name of
//     the call they answer in order); the answer's calls are message.tool_calls.
//   - format: "json" (any JSON object) or a JSON schema: grammar-constrained sampling
//     (EngineRequest::grammar); a schema keyword the compiler does not know is a 400 naming it.
//   Refused with a 400 naming the field: images, template (Ember renders the model's own),
//   context (send the conversation as /api/chat messages), suffix, image generation
//   (width/height/steps), system with raw.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "engine/server/api_types.h"

namespace ember::server {

enum class OllamaEndpoint { Chat, Generate };  // /api/chat, /api/generate

struct OllamaRequest {
    OllamaEndpoint endpoint = OllamaEndpoint::Chat;
    std::string model;  // as the client named it: every answer repeats it
    EngineRequest engine;
    bool stream = true;
    bool load_only = false;  // no messages / empty prompt: answer done_reason "load", generate nothing
    bool seed_given = false;
    bool logprobs = false;               // then engine.top_logprobs >= 0
    std::optional<double> keep_alive_s;  // seconds; negative: for ever
    std::vector<std::string> ignored;    // what was accepted without effect, for the log
    ToolRequest tools;                   // chat: the tools offered (choice: Auto unless tool_choice)
};

// Never throws: a body that is not a valid request gives the error to send (400, 413).
std::variant<OllamaRequest, ApiError> parse_ollama_request(OllamaEndpoint endpoint, std::string_view body,
                                                           const ServerLimits& limits);

// /api/show's body: the model's name ("model", or "name" as older clients send it).
std::variant<std::string, ApiError> parse_show_request(std::string_view body, const ServerLimits& limits);

// A keep_alive value: seconds (negative: for ever), or nullopt when it is not one.
std::optional<double> parse_keep_alive(const std::string& text);

}  // namespace ember::server
