#include "app/monitor/monitor_controller.h"

#include <QXYSeries>
#include <algorithm>

#include "kernels/common/format.h"

namespace ember::app {
namespace {

QString bytes_text(uint64_t n) { return QString::fromStdString(ember::format_bytes(n)); }

// "1 thread", "4 threads": the count with its noun in the right number.
QString count_text(qint64 n, const char* one, const char* many) {
    return QStringLiteral("%1 %2").arg(n).arg(QLatin1String(n == 1 ? one : many));
}

// Why GPU sensors are hidden, in plain words, from NVML's loader's reason (nvml.cpp).
QString nvml_words(const QString& why) {
    if (why.startsWith(QLatin1String("NVML not available"))) return QStringLiteral("no NVIDIA driver found");
    if (why.startsWith(QLatin1String("NVML found no"))) return QStringLiteral("no NVIDIA GPU found");
    if (why.startsWith(QLatin1String("NVML did not start"))) return QStringLiteral("the NVIDIA driver did not answer");
    if (why.contains(QLatin1String("not a usable NVML")))
        return QStringLiteral("the NVIDIA driver's monitoring library cannot be used");
    return why;
}

// The monitor's speculation row, once some request speculated (prompt lookup, a draft model).
QString speculation_text(const ember::SpeculationTotals& s) {
    if (s.passes == 0) return {};
    return QStringLiteral("Speculation: %1 % accepted, %2 tokens/pass")
        .arg(s.acceptance_rate() * 100, 0, 'f', 0)
        .arg(s.tokens_per_pass(), 0, 'f', 1);
}

QString ms_text(double ms) { return ms >= 100 ? QString::number(ms, 'f', 0) : QString::number(ms, 'f', 1); }

QVariantMap latency_row(const QString& name, const ember::WindowStats& w) {
    return {{"name", name},
            {"count", static_cast<qlonglong>(w.count)},
            {"p50", w.p50},
            {"p95", w.p95},
            {"p99", w.p99},
            {"p50Text", w.count ? ms_text(w.p50) : QStringLiteral("—")},
            {"p95Text", w.count ? ms_text(w.p95) : QStringLiteral("—")},
            {"p99Text", w.count ? ms_text(w.p99) : QStringLiteral("—")}};
}

// One coloured part of a device's memory bar: its share of what the bar stands for.
QVariantMap memory_part(const QString& name, uint64_t bytes, uint64_t whole) {
    return {{"name", name},
            {"bytes", static_cast<qulonglong>(bytes)},
            {"text", bytes_text(bytes)},
            {"fraction", whole ? static_cast<double>(bytes) / static_cast<double>(whole) : 0.0}};
}

QVariantMap device_entry(const ember::DeviceMemory& d) {
    // Against the device total where the backend knows it; else the bar is what Ember holds.
    const uint64_t whole = d.device_total ? std::max(d.device_total, d.held()) : d.held();
    QVariantList parts{memory_part(QStringLiteral("Weights"), d.weights, whole),
                       memory_part(QStringLiteral("Mapped weights"), d.mapped_weights, whole),
                       memory_part(QStringLiteral("KV cache"), d.kv_cache, whole),
                       memory_part(QStringLiteral("Scratch"), d.scratch, whole)};
    // Models with linear-attention layers: their recurrent state, right after the KV cache.
    if (d.state > 0) parts.insert(3, memory_part(QStringLiteral("State"), d.state, whole));
    QString summary = QStringLiteral("%1 held by Ember").arg(bytes_text(d.held()));
    if (d.device_total)
        summary += QStringLiteral(" of %1 (%2 free)").arg(bytes_text(d.device_total), bytes_text(d.device_free));
    else summary += QStringLiteral(" (device total unknown)");
    return {{"device", QString::fromStdString(d.device)},
            {"layers", d.layers},
            {"layersText", count_text(d.layers, "layer", "layers")},
            {"held", static_cast<qulonglong>(d.held())},
            {"total", static_cast<qulonglong>(d.device_total)},
            {"parts", parts},
            {"summary", summary}};
}

QVariantMap sensor_entry(const QString& name, const ember::Sensor& s, const QString& value) {
    return {{"name", name},
            {"ok", s.ok},
            {"text", s.ok ? value : QStringLiteral("not shown: %1").arg(QString::fromStdString(s.reason))}};
}

}  // namespace

MonitorController::MonitorController(TelemetrySource telemetry, QString nvml_library, QObject* parent)
    : QObject(parent), telemetry_(std::move(telemetry)), nvml_library_(std::move(nvml_library)) {
    if (nvml_library_.isEmpty()) nvml_library_ = qEnvironmentVariable("EMBER_NVML_LIBRARY");
    if (nvml_library_.isEmpty()) nvml_library_ = QString::fromLatin1(ember::Nvml::kLibrary);
    clock_.start();
    timer_.setInterval(kIntervalMs);
    connect(&timer_, &QTimer::timeout, this, &MonitorController::poll);
    gpu_reason_ = QStringLiteral("GPU sensors are read while the monitor is open.");
    setPlacementReason({}, {});
}

MonitorController::~MonitorController() = default;

void MonitorController::setActive(bool on) {
    if (on == active()) return;
    if (on) {
        timer_.start();
        poll();  // the panel shows numbers at once, not a quarter second later
    } else {
        timer_.stop();
    }
    emit activeChanged();
}

void MonitorController::useNvmlLibrary(const QString& library) {
    nvml_library_ = library;
    nvml_.reset();
    nvml_tried_ = false;
}

void MonitorController::setPlacementReason(const QString& reason, const QString& detail) {
    placement_reason_ = reason;
    placement_detail_ = detail;
    if (polls_ > 0) read_memory(telemetry_());
    else {
        device_badge_ = QStringLiteral("No model");
        device_reason_ = QStringLiteral("Load a model to see where it runs.");
        device_detail_.clear();
    }
    emit updated();
}

void MonitorController::poll() {
    const ember::TelemetrySnapshot s = telemetry_();
    read_telemetry(s);
    read_memory(s);
    read_gpu();
    read_process();
    ++polls_;
    emit updated();
}

void MonitorController::read_telemetry(const ember::TelemetrySnapshot& s) {
    MonitorPoint p;
    p.t_s = static_cast<double>(clock_.elapsed()) / 1000.0;
    p.decode_tok_s = s.decode_tok_s_now;
    p.inter_token_ms = s.decode_tok_s_now > 0 ? 1000.0 / s.decode_tok_s_now : 0;
    last_ = p;
    history_.push_back(p);
    while (!history_.empty() && history_.front().t_s < p.t_s - kHistorySeconds) history_.pop_front();

    latency_rows_ = {latency_row(QStringLiteral("Time to first token (ms)"), s.ttft_ms),
                     latency_row(QStringLiteral("Inter-token latency (ms)"), s.inter_token_ms)};
    totals_text_ = QStringLiteral("%1 · %2 (%3 reused) · %4 generated · cache hit %5%")
                       .arg(count_text(static_cast<qint64>(s.requests), "request", "requests"))
                       .arg(count_text(static_cast<qint64>(s.prompt_tokens), "prompt token", "prompt tokens"))
                       .arg(s.reused_tokens)
                       .arg(s.generated_tokens)
                       .arg(s.cache_hit_rate * 100, 0, 'f', 0);
    speculation_text_ = speculation_text(s.speculation);
}

// The badge says where the layers are: all on a GPU, split, or all on the CPU.
void MonitorController::read_memory(const ember::TelemetrySnapshot& s) {
    memory_devices_.clear();
    int cpu_layers = 0, gpu_layers = 0;
    for (const ember::DeviceMemory& d : s.memory) {
        memory_devices_.push_back(device_entry(d));
        (d.device == "cpu" ? cpu_layers : gpu_layers) += d.layers;
    }
    if (s.memory.empty()) {
        device_badge_ = QStringLiteral("No model");
        device_reason_ = QStringLiteral("Load a model to see where it runs.");
        device_detail_.clear();
        return;
    }
    if (gpu_layers > 0 && cpu_layers == 0) device_badge_ = QStringLiteral("GPU");
    else if (gpu_layers > 0)
        device_badge_ = QStringLiteral("partly on CPU: %1 of %2 layers").arg(cpu_layers).arg(cpu_layers + gpu_layers);
    else device_badge_ = QStringLiteral("CPU");
    device_reason_ = placement_reason_;
    device_detail_ = placement_detail_;
}

void MonitorController::read_gpu() {
    if (!nvml_tried_) {
        nvml_tried_ = true;
        std::string why;
        nvml_ = ember::Nvml::open(why, nvml_library_.toStdString());
        if (nvml_ && nvml_->device_count() == 0) why = "NVML found no NVIDIA GPU";
        if (!nvml_ || nvml_->device_count() == 0) {
            nvml_.reset();
            gpu_detail_ = QString::fromStdString(why);
            gpu_reason_ = nvml_words(gpu_detail_);
        }
    }
    gpu_sensors_.clear();
    gpu_ok_ = nvml_ != nullptr;
    if (!gpu_ok_) return;
    const ember::GpuSensors g = nvml_->read(0);
    gpu_name_ = QString::fromStdString(g.name);
    gpu_reason_.clear();
    gpu_detail_.clear();
    gpu_sensors_ = {
        sensor_entry(QStringLiteral("Power"), g.power_w, QStringLiteral("%1 W").arg(g.power_w.value, 0, 'f', 0)),
        sensor_entry(QStringLiteral("Temperature"), g.temperature_c,
                     QStringLiteral("%1 °C").arg(g.temperature_c.value, 0, 'f', 0)),
        sensor_entry(QStringLiteral("GPU busy"), g.utilization_pct,
                     QStringLiteral("%1%").arg(g.utilization_pct.value, 0, 'f', 0)),
        sensor_entry(QStringLiteral("GPU memory"), g.memory_used_bytes,
                     QStringLiteral("%1 of %2")
                         .arg(bytes_text(static_cast<uint64_t>(g.memory_used_bytes.value)),
                              bytes_text(static_cast<uint64_t>(g.memory_total_bytes.value))))};
}

void MonitorController::read_process() {
    const std::optional<ember::ProcessStats> p = process_.sample();
    if (!p) {
        process_text_ = QStringLiteral("Process numbers not shown: /proc/self is not readable.");
        return;
    }
    process_text_ = QStringLiteral("Ember process: %1 resident · CPU %2% · %3")
                        .arg(bytes_text(p->rss_bytes))
                        .arg(p->cpu_percent, 0, 'f', 0)
                        .arg(count_text(p->threads, "thread", "threads"));
}

double MonitorController::chartMaxTokS() const {
    double m = 0;
    for (const MonitorPoint& p : history_) m = std::max(m, p.decode_tok_s);
    return m > 0 ? m * 1.15 : 10;  // headroom above the peak; an idle chart still has a scale
}

double MonitorController::chartMaxLatencyMs() const {
    double m = 0;
    for (const MonitorPoint& p : history_) m = std::max(m, p.inter_token_ms);
    return m > 0 ? m * 1.15 : 10;
}

void MonitorController::fillSeries(QObject* decode_tok_s, QObject* inter_token_ms) const {
    const double now = history_.empty() ? 0 : history_.back().t_s;
    QList<QPointF> speed, latency;
    for (const MonitorPoint& p : history_) {
        speed.append(QPointF(p.t_s - now, p.decode_tok_s));
        // Idle polls have no latency: leaving them out keeps the line at real values.
        if (p.inter_token_ms > 0) latency.append(QPointF(p.t_s - now, p.inter_token_ms));
    }
    if (auto* s = qobject_cast<QXYSeries*>(decode_tok_s)) s->replace(speed);
    if (auto* s = qobject_cast<QXYSeries*>(inter_token_ms)) s->replace(latency);
}

}  // namespace ember::app
