// Per-conversation generation settings, stored as JSON in conversations.sampling_json so
// new fields can be added without a schema migration (missing keys take the defaults).
#pragma once
#include <QJsonObject>
#include <QString>
#include <QVariantMap>

#include "engine/sampling/sampler.h"
#include "engine/template/chat_template.h"

namespace ember::app {

struct SamplingSettings {
    double temperature = 0.7;
    int top_k = 40;
    double top_p = 0.95;
    double min_p = 0.05;
    double repeat_penalty = 1.1;
    int max_tokens = 1024;  // < 0: until the model stops or the context is full
    qint64 seed = -1;       // < 0: a new seed for every answer
    // Reasoning models, given to templates that read them (engine/template/reasoning.h):
    // `enable_thinking` (Qwen3, Gemma 4) and `reasoning_effort` (gpt-oss: low, medium, high).
    bool thinking = true;
    QString reasoning_effort = QStringLiteral("medium");
    // This chat's own context overflow policy ("truncate", "roll", "stop"); empty: the one in
    // Settings (AppSettings::contextOverflow).
    QString context_overflow;
    // Speculative decoding for this chat's answers: "off", "lookup" (prompt lookup,
    // EngineRequest::lookup) or "draft" (a draft model, where the engine offers one).
    QString speculation = QStringLiteral("off");

    static SamplingSettings from_json(const QString& json);
    static SamplingSettings from_variant(const QVariantMap& map);  // from QML
    QString to_json() const;
    QVariantMap to_variant() const;
    // `fresh_seed` is used when seed < 0.
    ember::SamplingParams to_params(uint64_t fresh_seed) const;
    // The template variables for EngineRequest::template_options.
    ember::ChatRenderOptions template_options() const;
    bool operator==(const SamplingSettings&) const = default;
};

}  // namespace ember::app
