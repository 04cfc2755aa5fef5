// The cost view's controller (ui/CostView.qml takes one as its `controller`): local cost per
// 1M input and output tokens from the energy this session's answers drew, API list prices
// beside it, token totals per conversation and per day from the conversation store, and the
// cumulative tokens and cost for the plot.
//
// Energy comes from each GenerationResult (measured on the engine thread, three meter reads
// per answer). Where the CPU's meter is unreadable, its part is the cpuWatts setting times the
// answer's time, and everything derived from it is flagged `estimated`. Answers that ran at
// the same time share what the meters read evenly (GenerationResult::energy_shared), which
// is flagged `estimated` too: the total is measured, each answer's part is not.
#pragma once
#include <QObject>
#include <QVariantList>
#include <map>

#include "app/core/app_settings.h"
#include "app/core/engine_types.h"
#include "app/cost/api_prices.h"
#include "app/cost/cost_model.h"

namespace ember::app {

class ConversationStore;
class EngineWorker;

class CostController : public QObject {
    Q_OBJECT
    // The settings it uses (electricityPrice, currency, cpuWatts, hardwarePrice, hardwareYears,
    // hoursPerDay): the view edits them there.
    Q_PROPERTY(ember::app::AppSettings* settings READ settings CONSTANT)
    // Measurements of this session's answers (-1: none yet).
    Q_PROPERTY(int measuredAnswers READ measuredAnswers NOTIFY costChanged)
    // True when any part is an estimate: watts x time for an unreadable CPU meter, or the
    // even split of energy between answers that ran at the same time (sharedAnswers).
    Q_PROPERTY(bool estimated READ estimated NOTIFY costChanged)
    Q_PROPERTY(int sharedAnswers READ sharedAnswers NOTIFY costChanged)
    // Where the energy figures come from, in plain words; the meters' own reasons (why a
    // counter or NVML could not be read) are energySourceDetail.
    Q_PROPERTY(QString energySource READ energySource NOTIFY costChanged)
    Q_PROPERTY(QString energySourceDetail READ energySourceDetail NOTIFY costChanged)
    Q_PROPERTY(double inputJoulesPerToken READ inputJoulesPerToken NOTIFY costChanged)
    Q_PROPERTY(double outputJoulesPerToken READ outputJoulesPerToken NOTIFY costChanged)
    Q_PROPERTY(double localInputPer1M READ localInputPer1M NOTIFY costChanged)
    Q_PROPERTY(double localOutputPer1M READ localOutputPer1M NOTIFY costChanged)
    Q_PROPERTY(double hardwareInputPer1M READ hardwareInputPer1M NOTIFY costChanged)
    Q_PROPERTY(double hardwareOutputPer1M READ hardwareOutputPer1M NOTIFY costChanged)
    // API prices: [{vendor, model, input_per_1m, output_per_1m, as_of, source}], editable.
    Q_PROPERTY(QVariantList apiPrices READ apiPrices NOTIFY apiPricesChanged)
    Q_PROPERTY(QString apiPricesRetrieved READ apiPricesRetrieved NOTIFY apiPricesChanged)
    Q_PROPERTY(int selectedApi READ selectedApi WRITE setSelectedApi NOTIFY apiPricesChanged)
    Q_PROPERTY(QString error READ error NOTIFY errorChanged)
    // From the store: [{title, input, reused, output, answers, energyJ, measured}] and
    // [{day, ...the same}]; the plot's points [{t, tokens, localCost, apiCost}].
    Q_PROPERTY(QVariantList conversations READ conversations NOTIFY totalsChanged)
    Q_PROPERTY(QVariantList days READ days NOTIFY totalsChanged)
    Q_PROPERTY(QVariantList cumulative READ cumulative NOTIFY totalsChanged)
    // Remote answers of this session (issue #41), per endpoint: [{endpoint, answers, input,
    // output, inputPer1M, outputPer1M, cost}]: the tokens the server's `usage` counted, at the
    // endpoint's prices (Settings › Remote endpoints) when each answer finished. They drew no
    // energy here, so they are not in the local cost above.
    Q_PROPERTY(QVariantList remoteSpend READ remoteSpend NOTIFY costChanged)
    Q_PROPERTY(double remoteCost READ remoteCost NOTIFY costChanged)

public:
    // worker: the engine's (its generationFinished carries the energy); may be null in tests
    // that feed addAnswer themselves. The store and settings outlive the controller.
    CostController(ConversationStore& store, AppSettings& settings, EngineWorker* worker, QObject* parent = nullptr);

    AppSettings* settings() const { return &settings_; }

    int measuredAnswers() const { return use_.answers; }
    bool estimated() const { return use_.estimated_answers > 0 || use_.shared_answers > 0; }
    int sharedAnswers() const { return use_.shared_answers; }
    QString energySource() const { return source_; }
    QString energySourceDetail() const { return source_detail_; }
    double inputJoulesPerToken() const;
    double outputJoulesPerToken() const;
    double localInputPer1M() const;
    double localOutputPer1M() const;
    double hardwareInputPer1M() const;
    double hardwareOutputPer1M() const;

    QVariantList apiPrices() const;
    QString apiPricesRetrieved() const { return prices_.retrieved; }
    int selectedApi() const { return selected_api_; }
    void setSelectedApi(int i);
    QString error() const { return error_; }
    Q_INVOKABLE void setApiPrice(int index, double input_per_1m, double output_per_1m);
    Q_INVOKABLE void resetApiPrices();

    QVariantList remoteSpend() const;
    double remoteCost() const;
    QVariantList conversations() const { return conversations_; }
    QVariantList days() const { return days_; }
    QVariantList cumulative() const;

    // Re-reads the totals from the store (done after every stored answer).
    Q_INVOKABLE void refresh();
    // One finished answer's energy and tokens (connected to the worker).
    void addAnswer(const GenerationResult& r);
    const EnergyUse& use() const { return use_; }
    CostInputs inputs() const;
    LocalCost local() const { return local_cost(use_, inputs()); }

signals:
    void costChanged();
    void apiPricesChanged();
    void totalsChanged();
    void errorChanged();

private:
    void load_api_prices();
    void save_api_prices();
    void set_error(const QString& e);
    void add_remote_answer(const GenerationResult& r);

    ConversationStore& store_;
    AppSettings& settings_;
    EnergyUse use_;
    QString source_, source_detail_;
    ApiPriceList prices_;
    int selected_api_ = 0;
    QString error_;
    QVariantList conversations_, days_;
    struct Spend {
        qint64 answers = 0, input = 0, output = 0;
        double input_per_1m = 0, output_per_1m = 0;  // the latest answer's prices
        double cost = 0;
    };
    std::map<QString, Spend> remote_;  // by endpoint name
    struct Point {
        qint64 t;
        qint64 input, output;
    };
    std::vector<Point> points_;
};

}  // namespace ember::app
