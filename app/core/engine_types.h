// Values that cross the thread boundary between the GUI and the engine worker, by queued
// signal. Plain copyable Qt values only: nothing here points into the engine.
#pragma once
#include <QMetaType>
#include <QString>
#include <QVector>
#include <cstdint>

#include "app/core/sampling_settings.h"
#include "engine/runtime/prompt_fit.h"
#include "engine/runtime/stop_reason.h"

namespace ember::app {

struct ChatTurn {
    QString role;  // "system", "user", "assistant"
    QString content;
    QString reasoning;  // an earlier answer's thinking: the chat template decides whether the model reads it
};

struct GenerationRequest {
    quint64 id = 0;              // unique per request, chosen by the caller
    qint64 conversation_id = 0;  // its cache_key: the KV-cache sequence reused across turns
    QVector<ChatTurn> turns;     // the whole conversation so far, system prompt first
    SamplingSettings sampling;
    // When it does not fit the context (AppSettings::contextOverflow).
    ember::OverflowPolicy context_overflow = ember::OverflowPolicy::Truncate;
};

struct GenerationResult {
    int prompt_tokens = 0;
    int reused_tokens = 0;  // prompt tokens already in the KV cache
    int generated_tokens = 0;
    int dropped_turns = 0;     // oldest turns left out so the prompt fits the context
    int reasoning_tokens = 0;  // of the generated ones, thinking
    double thinking_ms = 0;    // from the first thinking text to the first answer text (or the end)
    double ttft_ms = 0;
    double prefill_tok_s = 0;
    double decode_tok_s = 0;
    StopReason stop_reason = StopReason::None;
    QString model_name;
    QString endpoint;  // a remote model's endpoint name (its prices make the cost); "" for a local one
    // What the answer drew, read from the energy meters (engine/telemetry/energy.h) at its
    // start, first token and finish: prefill = start -> first token, decode = the rest. The
    // joules are only what the readable meters measured; where the CPU meter is unreadable the
    // cost view adds an estimate (its watts setting x these seconds) and says so. Answers that
    // ran at the same time split the stretches they shared evenly (app/core/energy_ledger.h):
    // seconds and joules are then this answer's share, and energy_shared says so.
    double prefill_s = 0, decode_s = 0;
    double prefill_j = 0, decode_j = 0;
    bool cpu_energy_measured = false, gpu_energy_measured = false;
    bool energy_shared = false;
    QString cpu_energy_note, gpu_energy_note;  // why that meter was unreadable (empty: it read)
};

struct LoadedModelInfo {
    QString path;
    QString name;           // file name without .gguf
    QString metadata_name;  // general.name
    QString architecture;
    QString params;     // "135M"
    QString file_type;  // "Q4_1"
    QString file_size;  // "86.0 MiB"
    QString backend;
    qint64 n_ctx = 0;
    qint64 trained_ctx = 0;     // the longest context the model was made for
    qint64 ctx_fits_up_to = 0;  // the longest the planner finds room for (0: unknown)
    bool ctx_automatic = true;  // chosen by the planner, not set by the user
    QString ctx_reason;         // why this context, in plain words
    int n_seqs = 0;
    QString kv_size;           // "189.0 MiB"
    QString kv_type;           // "F16", "Q8_0"
    QString kv_per_token;      // "22.5 KiB": every layer's K and V for one token
    QString chat_template;     // which template is used and why
    QString reasoning_format;  // how it writes its thinking (engine/template/reasoning.h): "none", "think", …
    bool reads_enable_thinking = false;   // its template has a thinking switch
    bool reads_reasoning_effort = false;  // its template takes an effort (gpt-oss)
    QString template_warning;             // set when the model's own template is not used as is
    double load_ms = 0;
    // Its draft model (LoadRequest::draft_path): the file loaded, its name (file name without
    // .gguf) and what model + draft hold on each side as the planner counts them; or why the
    // one asked for was not loaded (then the model runs without one).
    QString draft_path, draft_name, draft_error;
    QString draft_fit;  // "model + draft: 1.2 MiB in RAM" (the fit planner's two sides together)
    // A remote model (issue #41): its endpoint's name and URL; empty for a model file.
    QString remote_endpoint, remote_url;
};

}  // namespace ember::app

Q_DECLARE_METATYPE(ember::app::GenerationRequest)
Q_DECLARE_METATYPE(ember::app::GenerationResult)
Q_DECLARE_METATYPE(ember::app::LoadedModelInfo)
