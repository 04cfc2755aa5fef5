// The one interface every client of an inference engine uses: the desktop app's chats, the
// local HTTP server (engine/server), the CLI. The local Scheduler (engine/scheduler) is one
// implementation; RemoteEngine (engine/remote: vLLM, llama-server, another Ember behind an
// OpenAI-compatible API) is the other, behind the same calls. That is why a prompt travels as messages or
// text, and token ids stay the local engine's business (prompt_tokens is a fast path).
//
// Threads: submit(), cancel(), forget() and status() are safe from any thread and never wait
// for a forward pass. Events are delivered on the engine's own thread, in order per request;
// a sink must not block (hand the event to a queue or a queued signal and return).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/grammar/grammar.h"
#include "engine/runtime/prompt_fit.h"
#include "engine/runtime/stop_reason.h"
#include "engine/sampling/sampler.h"
#include "engine/telemetry/telemetry.h"
#include "engine/template/chat_template.h"
#include "engine/template/tool_calls.h"
#include "kernels/common/error.h"

namespace ember {

struct EngineRequest {
    std::string model;  // the model asked for ("" = the loaded one); an unknown name is an error
    // The prompt: exactly one of the three is set.
    std::vector<ChatMessage> messages;   // rendered with the model's own chat template
    std::string prompt;                  // raw text, tokenized as the model wants (BOS etc.)
    std::vector<int32_t> prompt_tokens;  // already tokenized for this model
    // prompt only: special tokens written in the text ("<|im_start|>") are those tokens, not
    // their characters (Ollama's raw mode, whose prompts are already templated).
    bool prompt_parse_special = false;
    // messages only: what a conversation that does not fit the context does. Stop: submit()
    // throws ContextOverflow (engine/runtime/prompt_fit.h) saying how far over it is. Truncate:
    // the oldest exchanges are left out (the system prompt and the newest message stay; the room
    // kept for the answer is answer_room()) and RequestStats::dropped_turns says how many.
    // Roll: the same turns left out, and where the conversation's KV is cached (its
    // cache_key's sequence, or the prefix cache) the turns after them are moved down in it
    // instead of computed again (RequestStats::rolled_tokens); submit() throws for a model
    // whose cache cannot be rolled (Transformer::roll_refusal), saying why.
    OverflowPolicy context_overflow = OverflowPolicy::Stop;
    // messages only: the template variables beyond the conversation (tools_json,
    // enable_thinking, reasoning_effort, extra_vars); the engine sets add_generation_prompt and
    // the model's bos/eos tokens itself. With tools_json set, the detokenizer also writes the
    // model's tool-call marker tokens (EngineStatus::tool_call_format) for a ToolCallParser;
    // the engine itself does not parse calls.
    ChatRenderOptions template_options;

    SamplingParams sampling;
    int32_t max_tokens = 256;       // < 0: until end of generation or context; 0: prefill only
    std::vector<std::string> stop;  // stop strings (never part of the text)
    bool ignore_eog = false;        // benchmarks: keep going past end-of-generation tokens
    int32_t top_logprobs = -1;      // -1: no logprobs; 0..20: each token's and this many others'
    // KV reuse across requests: requests with the same non-empty key continue one cached
    // sequence (a chat's turns); it is kept after the request ends and evicted least recently
    // used first. Empty: a fresh sequence, freed when the request ends.
    std::string cache_key;
    // Start from KV blocks that earlier requests computed for the same leading tokens, and
    // leave this request's blocks for later ones (the engine's prefix cache). False: prefill
    // the whole prompt and keep nothing (benchmarks of prefill).
    bool reuse_prefix = true;

    // Thinking tokens allowed before the engine closes the thinking in the model's place and
    // lets it answer (llama-server's reasoning_budget_tokens); -1: no limit.
    int32_t reasoning_budget = -1;

    // Speculative decoding by prompt lookup (engine/scheduler/prompt_lookup.h): each pass also
    // checks a guessed continuation found earlier in the prompt or the text so far, and keeps
    // the guessed tokens the model agrees with. Greedy requests only (temperature 0, no grammar,
    // logprobs or reasoning budget; and not on models with recurrent layers): their output is
    // token for token the same, only sooner. Others decode one token a pass as before.
    bool lookup = false;
    // Speculative decoding by the engine's draft model, where it has one and proposes only for
    // requests that ask (SchedulerOptions::draft_every_request false: the app's chats set to
    // "Draft model"). The same requests as lookup can; the same output, only sooner.
    bool draft = false;

    // Grammar-constrained output (engine/grammar: a JSON schema or GBNF compiled by the
    // caller): only tokens the grammar allows are sampled, end of generation only where it
    // can end, and the request ends as soon as the grammar is complete.
    std::shared_ptr<const grammar::Grammar> grammar;  // constrain sampling; null = free text
};

// One of the most likely tokens at a position (TokenLogprob::top).
struct TopLogprob {
    int32_t id = 0;
    std::string piece;  // its text, as TokenLogprob::piece
    float logprob = 0;
};

struct TokenLogprob {
    int32_t id = 0;
    std::string piece;  // the token's text (may be part of a UTF-8 character)
    // Natural log of its probability under the model's own distribution for that position:
    // log-softmax of the raw logits, before penalties, logit bias, temperature and top-k/p
    // truncation (the same for every sampling setting; `top` likewise).
    float logprob = 0;
    std::vector<TopLogprob> top;  // the most likely tokens, best first
};

// How a request went, filled in the Finished event.
struct RequestStats {
    int32_t prompt_tokens = 0;  // the prompt as the model saw it
    int32_t reused_tokens = 0;  // of which were already in the KV cache
    int32_t generated_tokens = 0;
    int32_t reasoning_tokens = 0;  // of those, written while thinking
    int32_t dropped_turns = 0;     // context_overflow truncate or roll: oldest turns (messages) left out
    int32_t rolled_tokens = 0;     // roll: of reused_tokens, those moved down in the cache (not computed)
    int32_t preemptions = 0;       // times its KV blocks were taken back and recomputed
    int32_t drafted_tokens = 0;    // speculation (EngineRequest::lookup): guessed tokens checked
    int32_t accepted_tokens = 0;   // of which the model agreed with (each one a pass saved)
    int32_t passes = 0;            // forward passes that gave it tokens (1 per token without speculation)
    // Speculation's yield: accepted / drafted, and generated tokens per pass (1 without it).
    double acceptance_rate() const { return drafted_tokens > 0 ? double(accepted_tokens) / drafted_tokens : 0; }
    double tokens_per_pass() const { return passes > 0 ? double(generated_tokens) / passes : 0; }
    double queue_wait_ms = 0;  // submitted -> first scheduled
    double ttft_ms = 0;        // submitted -> first token
    double prefill_ms = 0;     // first scheduled -> prompt processed (its first token sampled)
    double decode_ms = 0;      // first token -> last
    // A grammar (EngineRequest::grammar): full masks walked, and taken from those kept; its time.
    int32_t masks_walked = 0, masks_kept = 0;
    double grammar_ms = 0;
    StopReason stop_reason = StopReason::None;
};

struct EngineEvent {
    enum class Kind {
        Started,   // admitted into the running batch (after the queue)
        Text,      // new text (valid UTF-8, stop strings removed) and the tokens behind it;
                   // a model that thinks first: its thinking in `reasoning`, the answer in `text`
        Finished,  // the last event of a request that ran: stats (stop_reason says why)
        Failed,    // the last event of a request that could not run: error says why. A remote
                   // engine's answer cut off mid-stream (the server died, sent garbage) ends
                   // with Failed after its Text events: the text so far stands, stats hold
                   // what was counted, and error says that the answer is partial.
    };
    Kind kind = Kind::Text;
    uint64_t request_id = 0;
    std::string text;       // Text: the answer (never a thinking marker)
    std::string reasoning;  // Text: thinking (engine/template/reasoning.h)
    // Text: tool calls a remote engine's server parsed itself (engine/remote), whole, in one
    // event before Finished. The local engine leaves it empty (its text carries the markers).
    std::vector<ChatToolCall> tool_calls;
    std::vector<TokenLogprob> tokens;  // Text, when top_logprobs >= 0: one per token
    RequestStats stats;                // Finished (and a remote engine's Failed: as far as it got)
    // Finished: every token the request generated, in order (the local engine's ids; a remote
    // engine may leave it empty).
    std::vector<int32_t> output_ids;
    std::string error;  // Failed
};
using EventSink = std::function<void(EngineEvent&&)>;

// One request as status() sees it.
struct RequestStatus {
    uint64_t id = 0;
    std::string state;  // "queued", "prefill", "decode"
    int32_t prompt_tokens = 0;
    int32_t generated_tokens = 0;
    double age_ms = 0;  // since submit
    // Speculation so far (RequestStats' fields of the same names).
    int32_t drafted_tokens = 0, accepted_tokens = 0, passes = 0;
};

struct EngineStatus {
    std::string model;  // the name clients use (the file name without .gguf)
    std::string model_path;
    std::string device, device_reason;  // "cpu" / "cuda:0", and why
    // How the model writes tool calls (its chat template's form; Generic: Ember's fallback).
    ToolCallFormat tool_call_format = ToolCallFormat::None;
    // The chat template the engine renders with (Jinja): the file's own, or the built-in one
    // it falls back to when the file has none it can use ("" where unknown: a remote engine).
    std::string chat_template;
    int64_t n_ctx = 0;      // tokens per sequence
    int32_t max_batch = 0;  // sequences in one pass at most
    int32_t kv_blocks_total = 0, kv_blocks_used = 0;
    int32_t kv_blocks_cached = 0;         // of the unused ones, published prefix blocks kept for reuse
    uint64_t kv_host_cache_bytes = 0;     // evicted prefix blocks kept in host RAM (KvCache::set_host_cache)
    uint64_t kv_disk_cache_bytes = 0;     // prefix blocks written to disk (KvCache::set_disk_cache)
    std::vector<DeviceMemory> memory;     // per backend, by kind
    std::vector<RequestStatus> requests;  // running first, then queued
    SpeculationTotals speculation;        // over every request since the engine started
};

// What submit() throws when the engine is busy rather than the request wrong (its queue is
// full): the same request may succeed later. The HTTP server answers it with 503.
class EngineBusy : public Error {
public:
    using Error::Error;
};

class InferenceEngine {
public:
    virtual ~InferenceEngine() = default;
    // Validates and tokenizes the request on the caller's thread and queues it; returns its
    // id. Throws ember::Error for a request that can never run (no prompt, an unknown model,
    // a prompt longer than the context), EngineBusy for a full queue: nothing is queued then.
    virtual uint64_t submit(EngineRequest request, EventSink sink) = 0;
    // Stops a request within one engine step; its Finished event (stop_reason Cancelled)
    // follows unless it had already ended. Unknown or finished ids are ignored.
    virtual void cancel(uint64_t request_id) = 0;
    // Frees the KV sequence kept for `cache_key` (a deleted conversation).
    virtual void forget(const std::string& cache_key) = 0;
    virtual EngineStatus status() const = 0;
    // Latency, throughput, queue wait and batch size, recorded off the hot path.
    virtual const Telemetry& telemetry() const = 0;
};

}  // namespace ember
