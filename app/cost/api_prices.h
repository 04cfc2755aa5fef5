// API list prices per 1M tokens, side by side with the local cost. The defaults ship in
// resources/api_prices.json (compiled in as :/ember/api_prices.json, dated, each with its
// source); the user's edits are kept in the settings as the same JSON.
#pragma once
#include <QByteArray>
#include <QString>
#include <vector>

namespace ember::app {

struct ApiPrice {
    QString vendor, model;
    double input_per_1m = 0, output_per_1m = 0;
    QString as_of, source;
};

struct ApiPriceList {
    QString retrieved;  // when the defaults were looked up
    QString currency;   // "USD"
    std::vector<ApiPrice> prices;
};

// Throws ember::Error naming what is wrong (not JSON, no "prices", a price that is not a
// non-negative number, ...).
ApiPriceList parse_api_prices(const QByteArray& json);
QByteArray to_json(const ApiPriceList& list);
// The shipped defaults (the compiled-in resource).
ApiPriceList default_api_prices();

}  // namespace ember::app
