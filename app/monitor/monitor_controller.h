// The monitor panel's source of numbers. It polls the engine's Telemetry at 4 Hz on a QTimer
// of the GUI thread, but only while the panel is visible (`active`): snapshot() copies what
// the engine recorded and never makes the engine wait, so the panel costs the decode loop
// nothing but the copy. It keeps the last minutes of decode speed and inter-token latency for
// the charts and turns the rest (memory by component, percentiles, device, GPU sensors,
// process RSS and CPU) into plain properties QML can show without any logic of its own.
//
// GPU sensors come from NVML, opened on the first poll; where it cannot be opened, or a
// sensor is missing, the panel shows the reason instead of a value (never a made-up one).
#pragma once
#include <QElapsedTimer>
#include <QObject>
#include <QPointF>
#include <QString>
#include <QTimer>
#include <QVariantList>
#include <deque>
#include <functional>
#include <memory>

#include "engine/telemetry/nvml.h"
#include "engine/telemetry/process_stats.h"
#include "engine/telemetry/telemetry.h"

namespace ember::app {

// One poll's worth of chart data, on the controller's clock.
struct MonitorPoint {
    double t_s = 0;             // seconds since the controller was made
    double decode_tok_s = 0;    // 0 while nothing decodes
    double inter_token_ms = 0;  // mean of the last 2 s; 0 while nothing decodes
};

class MonitorController : public QObject {
    Q_OBJECT
    Q_PROPERTY(bool active READ active WRITE setActive NOTIFY activeChanged)
    Q_PROPERTY(int intervalMs READ intervalMs CONSTANT)
    Q_PROPERTY(int historySeconds READ historySeconds CONSTANT)
    Q_PROPERTY(int polls READ polls NOTIFY updated)
    Q_PROPERTY(double decodeTokS READ decodeTokS NOTIFY updated)
    Q_PROPERTY(double interTokenMs READ interTokenMs NOTIFY updated)
    Q_PROPERTY(double chartMaxTokS READ chartMaxTokS NOTIFY updated)
    Q_PROPERTY(double chartMaxLatencyMs READ chartMaxLatencyMs NOTIFY updated)
    Q_PROPERTY(QVariantList latencyRows READ latencyRows NOTIFY updated)
    Q_PROPERTY(QVariantList memoryDevices READ memoryDevices NOTIFY updated)
    Q_PROPERTY(QString deviceBadge READ deviceBadge NOTIFY updated)
    // Why the model runs there, in plain words; the loader's own words are deviceDetail.
    Q_PROPERTY(QString deviceReason READ deviceReason NOTIFY updated)
    Q_PROPERTY(QString deviceDetail READ deviceDetail NOTIFY updated)
    Q_PROPERTY(bool gpuSensorsAvailable READ gpuSensorsAvailable NOTIFY updated)
    // Why the sensors are hidden, in plain words; NVML's loader's own words are gpuSensorsDetail.
    Q_PROPERTY(QString gpuSensorsReason READ gpuSensorsReason NOTIFY updated)
    Q_PROPERTY(QString gpuSensorsDetail READ gpuSensorsDetail NOTIFY updated)
    Q_PROPERTY(QString gpuName READ gpuName NOTIFY updated)
    Q_PROPERTY(QVariantList gpuSensors READ gpuSensors NOTIFY updated)
    Q_PROPERTY(QString processText READ processText NOTIFY updated)
    Q_PROPERTY(QString totalsText READ totalsText NOTIFY updated)
    // "Speculation: 62 % accepted, 2.4 tokens/pass" once a request speculated; "" before.
    Q_PROPERTY(QString speculationText READ speculationText NOTIFY updated)

public:
    static constexpr int kIntervalMs = 250;      // 4 Hz: smooth enough to read, cheap to draw
    static constexpr int kHistorySeconds = 300;  // what the charts show: the last 5 minutes

    // Where the numbers come from: the engine's current telemetry, any thread (the model
    // behind it changes with each load, EngineWorker::telemetrySnapshot).
    using TelemetrySource = std::function<ember::TelemetrySnapshot()>;
    // `nvml_library`: empty means $EMBER_NVML_LIBRARY, else the driver's libnvidia-ml.so.1.
    explicit MonitorController(TelemetrySource telemetry, QString nvml_library = {}, QObject* parent = nullptr);
    ~MonitorController() override;

    bool active() const { return timer_.isActive(); }
    void setActive(bool on);
    int intervalMs() const { return kIntervalMs; }
    int historySeconds() const { return kHistorySeconds; }
    int polls() const { return polls_; }
    double decodeTokS() const { return last_.decode_tok_s; }
    double interTokenMs() const { return last_.inter_token_ms; }
    double chartMaxTokS() const;
    double chartMaxLatencyMs() const;
    QVariantList latencyRows() const { return latency_rows_; }
    QVariantList memoryDevices() const { return memory_devices_; }
    QString deviceBadge() const { return device_badge_; }
    QString deviceReason() const { return device_reason_; }
    QString deviceDetail() const { return device_detail_; }
    bool gpuSensorsAvailable() const { return gpu_ok_; }
    QString gpuSensorsReason() const { return gpu_reason_; }
    QString gpuSensorsDetail() const { return gpu_detail_; }
    QString gpuName() const { return gpu_name_; }
    QVariantList gpuSensors() const { return gpu_sensors_; }
    QString processText() const { return process_text_; }
    QString totalsText() const { return totals_text_; }
    QString speculationText() const { return speculation_text_; }
    const std::deque<MonitorPoint>& history() const { return history_; }
    // Reads GPU sensors from this NVML library from the next poll on (tests: a stand-in).
    void useNvmlLibrary(const QString& library);

    // Replaces the points of two QtCharts XY series (LineSeries from QML) with the history,
    // x in seconds before now (-historySeconds..0). Either may be null.
    Q_INVOKABLE void fillSeries(QObject* decode_tok_s, QObject* inter_token_ms) const;

public slots:
    // Why the model runs where it does, in plain words and in the loader's own words
    // (app/core/device_words.h); both "" when no model is loaded.
    void setPlacementReason(const QString& reason, const QString& detail);
    void poll();  // one sample now (the timer calls it; tests may too)

signals:
    void activeChanged();
    void updated();

private:
    void read_telemetry(const ember::TelemetrySnapshot& s);
    void read_memory(const ember::TelemetrySnapshot& s);
    void read_gpu();
    void read_process();

    TelemetrySource telemetry_;
    QString nvml_library_;
    QTimer timer_;
    QElapsedTimer clock_;
    std::unique_ptr<ember::Nvml> nvml_;
    bool nvml_tried_ = false;
    ember::ProcessSampler process_;

    int polls_ = 0;
    MonitorPoint last_;
    std::deque<MonitorPoint> history_;
    QVariantList latency_rows_, memory_devices_, gpu_sensors_;
    QString placement_reason_, placement_detail_, device_badge_, device_reason_, device_detail_;
    bool gpu_ok_ = false;
    QString gpu_reason_, gpu_detail_, gpu_name_, process_text_, totals_text_;
    QString speculation_text_;
};

}  // namespace ember::app
