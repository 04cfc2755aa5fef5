#include "app/core/remote_endpoints.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QUrl>

namespace ember::app {

QVariantMap to_variant(const RemoteEndpoint& e) {
    return {{"name", e.name},
            {"baseUrl", e.base_url},
            {"caFile", e.ca_file},
            {"inputPer1M", e.input_per_1m},
            {"outputPer1M", e.output_per_1m},
            {"reasoningEffort", e.reasoning_effort},
            {"sendExtras", e.send_extras}};
}

RemoteEndpoint remote_endpoint_from(const QVariantMap& m) {
    RemoteEndpoint e;
    e.name = m.value(QStringLiteral("name")).toString().trimmed();
    e.base_url = m.value(QStringLiteral("baseUrl")).toString().trimmed();
    e.ca_file = m.value(QStringLiteral("caFile")).toString().trimmed();
    e.input_per_1m = m.value(QStringLiteral("inputPer1M")).toDouble();
    e.output_per_1m = m.value(QStringLiteral("outputPer1M")).toDouble();
    e.reasoning_effort = m.value(QStringLiteral("reasoningEffort")).toString();
    e.send_extras = m.value(QStringLiteral("sendExtras")).toBool();
    return e;
}

QString remote_endpoints_to_json(const QList<RemoteEndpoint>& list) {
    QJsonArray a;
    for (const RemoteEndpoint& e : list) a.append(QJsonObject::fromVariantMap(to_variant(e)));
    return QString::fromUtf8(QJsonDocument(a).toJson(QJsonDocument::Compact));
}

QList<RemoteEndpoint> remote_endpoints_from_json(const QString& json) {
    QList<RemoteEndpoint> out;
    for (const QJsonValue& v : QJsonDocument::fromJson(json.toUtf8()).array()) {
        RemoteEndpoint e = remote_endpoint_from(v.toObject().toVariantMap());
        if (!e.name.isEmpty() && !e.base_url.isEmpty()) out.append(e);
    }
    return out;
}

QString remote_endpoint_problem(const RemoteEndpoint& e) {
    if (e.name.isEmpty()) return QStringLiteral("Give the endpoint a name.");
    const QUrl url(e.base_url, QUrl::StrictMode);
    if (!url.isValid() || url.host().isEmpty() ||
        (url.scheme() != QLatin1String("http") && url.scheme() != QLatin1String("https")))
        return QStringLiteral(
            "The URL must start with http:// or https:// and name a host, e.g. "
            "http://gpu-box:8000/v1.");
    if (!url.userInfo().isEmpty())
        return QStringLiteral("Put the API key in its own field, not in the URL (the URL is saved in plain text).");
    if (!(e.input_per_1m >= 0) || !(e.output_per_1m >= 0))
        return QStringLiteral("A price must be a number of at least 0 (per 1M tokens).");
    if (!e.reasoning_effort.isEmpty() && e.reasoning_effort != QLatin1String("low") &&
        e.reasoning_effort != QLatin1String("medium") && e.reasoning_effort != QLatin1String("high"))
        return QStringLiteral("Reasoning effort must be low, medium, high or not sent.");
    return {};
}

}  // namespace ember::app
