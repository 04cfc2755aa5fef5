#include "app/cost/cost_controller.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include "app/core/app_settings.h"
#include "app/core/engine_worker.h"
#include "app/core/remote_endpoints.h"
#include "app/storage/conversation_store.h"

namespace ember::app {
namespace {

double or_none(const std::optional<double>& v) { return v ? *v : -1; }  // QML: < 0 is "not measured yet"

QVariantMap totals_map(const TokenTotals& t) {
    return {{"input", static_cast<qlonglong>(t.new_prompt_tokens())},
            {"reused", static_cast<qlonglong>(t.reused_tokens)},
            {"output", static_cast<qlonglong>(t.generated_tokens)},
            {"answers", static_cast<qlonglong>(t.answers)},
            {"energyJ", t.energy_j},
            {"measured", static_cast<qlonglong>(t.measured_answers)}};
}

// Why the CPU's energy counter could not be read, in plain words (engine/telemetry/energy.cpp).
QString cpu_meter_words(const QString& why) {
    if (why.contains(QLatin1String("root-only"))) return QStringLiteral("reading the energy counter needs root");
    return QStringLiteral("no energy counter Ember can read on this machine");
}

// Why no GPU energy is counted, in plain words (engine/telemetry/nvml.cpp, energy.cpp).
QString gpu_meter_words(const QString& why) {
    if (why.startsWith(QLatin1String("NVML not available"))) return QStringLiteral("no NVIDIA driver found");
    if (why.contains(QLatin1String("NVML not used"))) return QStringLiteral("no GPU meter in use");
    if (why.contains(QLatin1String("no GPU")) || why.contains(QLatin1String("NVML found no")))
        return QStringLiteral("no NVIDIA GPU found");
    return QStringLiteral("the GPU's energy could not be read");
}

QString describe_source(const GenerationResult& r, double cpu_watts) {
    QString cpu = r.cpu_energy_measured ? QStringLiteral("CPU energy measured (RAPL)")
                                        : QStringLiteral("CPU energy estimated from the %1 W setting: %2")
                                              .arg(cpu_watts)
                                              .arg(cpu_meter_words(r.cpu_energy_note));
    QString gpu = r.gpu_energy_measured ? QStringLiteral("GPU energy measured (NVML)")
                                        : QStringLiteral("no GPU energy: %1").arg(gpu_meter_words(r.gpu_energy_note));
    return cpu + QStringLiteral("\n") + gpu;
}

// The meters' own words behind describe_source, for a Details line.
QString describe_source_detail(const GenerationResult& r) {
    QStringList lines;
    if (!r.cpu_energy_measured) lines << QStringLiteral("CPU: ") + r.cpu_energy_note;
    if (!r.gpu_energy_measured) lines << QStringLiteral("GPU: ") + r.gpu_energy_note;
    return lines.join('\n');
}

}  // namespace

CostController::CostController(ConversationStore& store, AppSettings& settings, EngineWorker* worker, QObject* parent)
    : QObject(parent), store_(store), settings_(settings) {
    load_api_prices();
    // Queued after ChatController's own connection (made when it was constructed, before this
    // one), so the answer is in the store by the time refresh() reads it.
    if (worker)
        connect(worker, &EngineWorker::generationFinished, this,
                [this](quint64, const GenerationResult& r) { addAnswer(r); });
    connect(&settings_, &AppSettings::changed, this, &CostController::costChanged);
    connect(this, &CostController::costChanged, this, &CostController::totalsChanged);
    refresh();
}

CostInputs CostController::inputs() const {
    return CostInputs{settings_.electricityPrice(), settings_.hardwarePrice(), settings_.hardwareYears(),
                      settings_.hoursPerDay()};
}

double CostController::inputJoulesPerToken() const { return or_none(local().input_j_per_token); }
double CostController::outputJoulesPerToken() const { return or_none(local().output_j_per_token); }
double CostController::localInputPer1M() const { return or_none(local().input_per_1m()); }
double CostController::localOutputPer1M() const { return or_none(local().output_per_1m()); }
double CostController::hardwareInputPer1M() const { return or_none(local().input_hardware_per_1m); }
double CostController::hardwareOutputPer1M() const { return or_none(local().output_hardware_per_1m); }

void CostController::addAnswer(const GenerationResult& r) {
    const int64_t input = r.prompt_tokens - r.reused_tokens;
    if (input <= 0 && r.generated_tokens <= 0) return;  // cancelled before it started
    if (!r.endpoint.isEmpty()) {
        add_remote_answer(r);
        return;
    }
    // Watts are the setting at the time of the answer: the estimate is of that answer.
    EnergyUse u = answer_use(input, r.generated_tokens, r.prefill_s, r.decode_s, r.prefill_j, r.decode_j,
                             r.cpu_energy_measured, settings_.cpuWatts());
    u.shared_answers = r.energy_shared ? 1 : 0;
    use_.add(u);
    source_ = describe_source(r, settings_.cpuWatts());
    source_detail_ = describe_source_detail(r);
    if (use_.shared_answers > 0)
        source_ += QStringLiteral(
                       "\n%1 of these answers ran at the same time as others: the energy of the time "
                       "they shared is split evenly between them (the total is measured, each "
                       "answer's part is an estimate).")
                       .arg(use_.shared_answers);
    emit costChanged();
    refresh();
}

void CostController::refresh() {
    QVariantList conversations, days;
    for (const ConversationTotals& c : totals_by_conversation(store_)) {
        QVariantMap m = totals_map(c.totals);
        m[QStringLiteral("title")] = c.title;
        conversations.append(m);
    }
    for (const DayTotals& d : totals_by_day(store_)) {
        QVariantMap m = totals_map(d.totals);
        m[QStringLiteral("day")] = d.day;
        days.append(m);
    }
    points_.clear();
    for (const UsagePoint& p : usage_over_time(store_))
        points_.push_back({p.at_ms, p.new_prompt_tokens, p.generated_tokens});
    conversations_ = conversations;
    days_ = days;
    emit totalsChanged();
}

QVariantList CostController::cumulative() const {
    const LocalCost local = this->local();
    const double in = local.input_per_1m().value_or(0), out = local.output_per_1m().value_or(0);
    const bool have_api = selected_api_ >= 0 && selected_api_ < static_cast<int>(prices_.prices.size());
    const ApiPrice api = have_api ? prices_.prices[static_cast<size_t>(selected_api_)] : ApiPrice{};
    QVariantList out_points;
    qint64 input = 0, output = 0;
    for (const Point& p : points_) {
        input += p.input;
        output += p.output;
        out_points.append(QVariantMap{{"t", p.t},
                                      {"tokens", input + output},
                                      {"localCost", cost_of(input, output, in, out)},
                                      {"apiCost", cost_of(input, output, api.input_per_1m, api.output_per_1m)}});
    }
    return out_points;
}

// A remote answer costs what its endpoint charges for the tokens its server counted.
void CostController::add_remote_answer(const GenerationResult& r) {
    Spend& s = remote_[r.endpoint];
    for (const RemoteEndpoint& e : remote_endpoints_from_json(settings_.remoteEndpointsJson()))
        if (e.name == r.endpoint) s.input_per_1m = e.input_per_1m, s.output_per_1m = e.output_per_1m;
    ++s.answers;
    s.input += r.prompt_tokens;
    s.output += r.generated_tokens;
    s.cost += cost_of(r.prompt_tokens, r.generated_tokens, s.input_per_1m, s.output_per_1m);
    emit costChanged();
    refresh();
}

QVariantList CostController::remoteSpend() const {
    QVariantList out;
    for (const auto& [name, s] : remote_)
        out.append(QVariantMap{{"endpoint", name},
                               {"answers", s.answers},
                               {"input", s.input},
                               {"output", s.output},
                               {"inputPer1M", s.input_per_1m},
                               {"outputPer1M", s.output_per_1m},
                               {"cost", s.cost}});
    return out;
}

double CostController::remoteCost() const {
    double total = 0;
    for (const auto& [name, s] : remote_) total += s.cost;
    return total;
}

QVariantList CostController::apiPrices() const {
    // The list as its JSON says it, so the view's names are the file's.
    return QJsonDocument::fromJson(to_json(prices_)).object().value(QLatin1String("prices")).toArray().toVariantList();
}

void CostController::setSelectedApi(int i) {
    if (i == selected_api_ || i < 0 || i >= static_cast<int>(prices_.prices.size())) return;
    selected_api_ = i;
    emit apiPricesChanged();
    emit totalsChanged();
}

void CostController::setApiPrice(int index, double input_per_1m, double output_per_1m) {
    if (index < 0 || index >= static_cast<int>(prices_.prices.size())) return;
    if (!(input_per_1m >= 0) || !(output_per_1m >= 0)) {  // also NaN
        set_error(QStringLiteral("An API price must be a number of at least 0 (per 1M tokens)."));
        return;
    }
    ApiPrice& p = prices_.prices[static_cast<size_t>(index)];
    p.input_per_1m = input_per_1m;
    p.output_per_1m = output_per_1m;
    p.as_of = QStringLiteral("edited");
    save_api_prices();
    set_error({});
    emit apiPricesChanged();
    emit totalsChanged();
}

void CostController::resetApiPrices() {
    settings_.setApiPricesJson({});
    load_api_prices();
    emit apiPricesChanged();
    emit totalsChanged();
}

void CostController::load_api_prices() {
    try {
        prices_ = default_api_prices();
    } catch (const std::exception& e) {
        set_error(QString::fromUtf8(e.what()));
        return;
    }
    const QString saved = settings_.apiPricesJson();
    if (saved.isEmpty()) return;
    try {
        prices_ = parse_api_prices(saved.toUtf8());
    } catch (const std::exception& e) {
        // The user's list is left in the settings file untouched until they edit a price.
        set_error(QStringLiteral("Your saved API prices could not be read (%1); showing the built-in ones.")
                      .arg(QString::fromUtf8(e.what())));
    }
}

void CostController::save_api_prices() { settings_.setApiPricesJson(QString::fromUtf8(to_json(prices_))); }

void CostController::set_error(const QString& e) {
    if (e == error_) return;
    error_ = e;
    emit errorChanged();
}

}  // namespace ember::app
