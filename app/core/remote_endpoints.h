// The remote engines the user has set up (issue #41): each a named OpenAI-compatible server
// (vLLM, TGI, SGLang, llama-server, Ollama, another Ember) with its prices for the cost view.
// Kept in the settings file as JSON (AppSettings::remoteEndpointsJson). The API key is NOT
// here: it lives in the system keyring (app/remote/key_store.h), never in this file.
#pragma once
#include <QList>
#include <QString>
#include <QVariantMap>

namespace ember::app {

struct RemoteEndpoint {
    QString name;                                // shown in the model picker beside the model; unique
    QString base_url;                            // "http://gpu-box:8000/v1" (the "/v1" may be left out)
    QString ca_file;                             // PEM bundle of a private CA; "": the system's
    double input_per_1m = 0, output_per_1m = 0;  // price per 1M input / output tokens (currency of the cost view)
    // Sent only when the user set one for this endpoint: a server whose model has no such
    // control may reject the field. "", "low", "medium" or "high".
    QString reasoning_effort;
    // Also send top_k, min_p and repeat_penalty (llama.cpp, vLLM, SGLang, Ember know them;
    // OpenAI itself rejects them).
    bool send_extras = false;
    bool operator==(const RemoteEndpoint&) const = default;
};

// QML's map of one endpoint: name, baseUrl, caFile, inputPer1M, outputPer1M, reasoningEffort,
// sendExtras.
QVariantMap to_variant(const RemoteEndpoint& e);
RemoteEndpoint remote_endpoint_from(const QVariantMap& m);

QString remote_endpoints_to_json(const QList<RemoteEndpoint>& list);
// Entries without a name or URL are left out (a hand-edited file must not stop the app).
QList<RemoteEndpoint> remote_endpoints_from_json(const QString& json);

// Why `e` cannot be saved ("" when it can): a name, an http(s) URL, prices >= 0, a known effort.
QString remote_endpoint_problem(const RemoteEndpoint& e);

}  // namespace ember::app
