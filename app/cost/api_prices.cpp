#include "app/cost/api_prices.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <cmath>

#include "kernels/common/error.h"

namespace ember::app {
namespace {

double price_field(const QJsonObject& o, const char* key, int index) {
    const QJsonValue v = o.value(QLatin1String(key));
    if (!v.isDouble() || !std::isfinite(v.toDouble()) || v.toDouble() < 0)
        throw ember::Error("API price " + std::to_string(index + 1) + ": \"" + key +
                           "\" must be a number of at least 0 (price per 1M tokens)");
    return v.toDouble();
}

}  // namespace

ApiPriceList parse_api_prices(const QByteArray& json) {
    QJsonParseError err{};
    const QJsonDocument doc = QJsonDocument::fromJson(json, &err);
    if (err.error != QJsonParseError::NoError)
        throw ember::Error("API prices are not valid JSON: " + err.errorString().toStdString() + " at byte " +
                           std::to_string(err.offset));
    const QJsonObject root = doc.object();
    if (!doc.isObject() || !root.value(QLatin1String("prices")).isArray())
        throw ember::Error("API prices have no \"prices\" list");
    ApiPriceList list;
    list.retrieved = root.value(QLatin1String("retrieved")).toString();
    list.currency = root.value(QLatin1String("currency")).toString(QStringLiteral("USD"));
    const QJsonArray prices = root.value(QLatin1String("prices")).toArray();
    for (int i = 0; i < prices.size(); ++i) {
        const QJsonObject o = prices.at(i).toObject();
        ApiPrice p;
        p.vendor = o.value(QLatin1String("vendor")).toString();
        p.model = o.value(QLatin1String("model")).toString();
        if (p.model.isEmpty()) throw ember::Error("API price " + std::to_string(i + 1) + " has no \"model\"");
        p.input_per_1m = price_field(o, "input_per_1m", i);
        p.output_per_1m = price_field(o, "output_per_1m", i);
        p.as_of = o.value(QLatin1String("as_of")).toString();
        p.source = o.value(QLatin1String("source")).toString();
        list.prices.push_back(std::move(p));
    }
    return list;
}

QByteArray to_json(const ApiPriceList& list) {
    QJsonArray prices;
    for (const ApiPrice& p : list.prices)
        prices.append(QJsonObject{{"vendor", p.vendor},
                                  {"model", p.model},
                                  {"input_per_1m", p.input_per_1m},
                                  {"output_per_1m", p.output_per_1m},
                                  {"as_of", p.as_of},
                                  {"source", p.source}});
    const QJsonObject root{{"retrieved", list.retrieved}, {"currency", list.currency}, {"prices", prices}};
    return QJsonDocument(root).toJson(QJsonDocument::Compact);
}

ApiPriceList default_api_prices() {
    QFile f(QStringLiteral(":/ember/api_prices.json"));
    if (!f.open(QIODevice::ReadOnly))
        throw ember::Error("the built-in API price list (:/ember/api_prices.json) is missing from this build");
    return parse_api_prices(f.readAll());
}

}  // namespace ember::app
