#include "app/core/sampling_settings.h"

#include <QJsonDocument>
#include <algorithm>

namespace ember::app {
namespace {

// One table drives JSON, QML maps and clamping, so the three can't drift apart.
struct Field {
    const char* key;
    double SamplingSettings::*real;
    int SamplingSettings::*integer;
    double lo, hi;
};

constexpr Field kFields[] = {
    {"temperature", &SamplingSettings::temperature, nullptr, 0.0, 5.0},
    {"top_k", nullptr, &SamplingSettings::top_k, 0, 1000},
    {"top_p", &SamplingSettings::top_p, nullptr, 0.0, 1.0},
    {"min_p", &SamplingSettings::min_p, nullptr, 0.0, 1.0},
    {"repeat_penalty", &SamplingSettings::repeat_penalty, nullptr, 0.5, 2.0},
    {"max_tokens", nullptr, &SamplingSettings::max_tokens, -1, 1 << 20},
};

SamplingSettings from_map(const QVariantMap& m) {
    SamplingSettings s;
    for (const Field& f : kFields) {
        const QVariant v = m.value(QLatin1String(f.key));
        bool ok = false;
        const double d = v.toDouble(&ok);
        if (!v.isValid() || !ok) continue;
        const double c = std::clamp(d, f.lo, f.hi);
        if (f.real) s.*f.real = c;
        else s.*f.integer = static_cast<int>(c);
    }
    bool ok = false;
    const qint64 seed = m.value(QStringLiteral("seed")).toLongLong(&ok);
    if (ok) s.seed = seed;
    if (const QVariant t = m.value(QStringLiteral("thinking")); t.isValid()) s.thinking = t.toBool();
    const QString effort = m.value(QStringLiteral("reasoning_effort")).toString();
    if (effort == QLatin1String("low") || effort == QLatin1String("medium") || effort == QLatin1String("high"))
        s.reasoning_effort = effort;
    const QString overflow = m.value(QStringLiteral("context_overflow")).toString();
    if (overflow == QLatin1String("truncate") || overflow == QLatin1String("roll") || overflow == QLatin1String("stop"))
        s.context_overflow = overflow;
    const QString spec = m.value(QStringLiteral("speculation")).toString();
    if (spec == QLatin1String("off") || spec == QLatin1String("lookup") || spec == QLatin1String("draft"))
        s.speculation = spec;
    return s;
}

}  // namespace

SamplingSettings SamplingSettings::from_json(const QString& json) {
    return from_map(QJsonDocument::fromJson(json.toUtf8()).object().toVariantMap());
}

SamplingSettings SamplingSettings::from_variant(const QVariantMap& map) { return from_map(map); }

QVariantMap SamplingSettings::to_variant() const {
    QVariantMap m;
    for (const Field& f : kFields)
        m.insert(QLatin1String(f.key), f.real ? QVariant(this->*f.real) : QVariant(this->*f.integer));
    m.insert(QStringLiteral("seed"), seed);
    m.insert(QStringLiteral("thinking"), thinking);
    m.insert(QStringLiteral("reasoning_effort"), reasoning_effort);
    m.insert(QStringLiteral("context_overflow"), context_overflow);
    m.insert(QStringLiteral("speculation"), speculation);
    return m;
}

QString SamplingSettings::to_json() const {
    return QString::fromUtf8(QJsonDocument(QJsonObject::fromVariantMap(to_variant())).toJson(QJsonDocument::Compact));
}

ember::SamplingParams SamplingSettings::to_params(uint64_t fresh_seed) const {
    ember::SamplingParams p;
    p.temperature = static_cast<float>(temperature);
    p.top_k = top_k;
    p.top_p = static_cast<float>(top_p);
    p.min_p = static_cast<float>(min_p);
    p.repeat_penalty = static_cast<float>(repeat_penalty);
    p.seed = seed >= 0 ? static_cast<uint64_t>(seed) : fresh_seed;
    return p;
}

// Both always: a template that does not read a variable ignores it.
ember::ChatRenderOptions SamplingSettings::template_options() const {
    ember::ChatRenderOptions o;
    o.enable_thinking = thinking;
    o.reasoning_effort = reasoning_effort.toStdString();
    return o;
}

}  // namespace ember::app
