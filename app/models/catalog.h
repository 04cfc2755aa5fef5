// The curated catalog of the model manager (resources/catalog.json, compiled in as
// :/catalog/catalog.json): well-known chat models and the GGUF repositories to get them from.
// The file ships with the app, but it is parsed as strictly as anything read from disk: a
// broken catalog is an ember::Error saying which entry and field, never a half-filled page.
#pragma once
#include <QByteArray>
#include <QString>
#include <QVariantMap>
#include <vector>

namespace ember::app {

struct CatalogEntry {
    QString name;          // "Llama 3.2 3B Instruct"
    QString repo;          // "bartowski/Llama-3.2-3B-Instruct-GGUF"
    QString parameters;    // "3.2B"
    QString active;        // mixture of experts: parameters read per token, "3.3B"; else empty
    QString architecture;  // a GGUF architecture the engine runs: "llama", "qwen3moe", ...
    QString licence;       // "apache-2.0", "llama3.2", ...
    QString description;   // one line
    // The row of the Discover list: the fields above plus sizeText ("30.5B · 3.3B active").
    QVariantMap to_row() const;
};

// Parses the catalog's JSON. Throws ember::Error naming `source` and what is wrong.
std::vector<CatalogEntry> parse_catalog(const QByteArray& json, const QString& source);
// The catalog compiled into the app.
std::vector<CatalogEntry> builtin_catalog();

inline constexpr const char* kCatalogResource = ":/catalog/catalog.json";

}  // namespace ember::app
