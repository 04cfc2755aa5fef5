// The engine thread's object. It owns the ember::Model and one KV-cache sequence per
// conversation (SequencePool) and lives on its own QThread; the GUI talks to it only by
// queued signals in and queued signals out, so nothing on the GUI thread ever waits for it.
//
// Loading and generating run inside a slot, which keeps this thread's event loop busy, so
// cancellation cannot be a queued call: cancel() and cancelUpTo() are plain thread-safe
// methods that set atomics the engine polls (model loading between stages, generation
// before every token). Requests queue up behind the running one, in order.
#pragma once
#include <QObject>
#include <QSet>
#include <atomic>
#include <memory>
#include <mutex>

#include "app/core/energy_ledger.h"
#include "app/core/engine_types.h"
#include "engine/telemetry/telemetry.h"

namespace ember {
class Model;
class EnergyMeter;
}  // namespace ember

namespace ember::app {

class SequencePool;

struct LoadRequest {
    quint64 id = 0;  // set by EngineHost
    QString path;
    qint64 n_ctx = 0;   // 0: the model's own, capped at 4096
    int n_seqs = 4;     // conversations whose KV cache is kept at once
    int n_threads = 0;  // 0: one per core
};

class EngineWorker : public QObject {
    Q_OBJECT
public:
    EngineWorker();
    ~EngineWorker() override;

    // Thread-safe, callable from any thread; they take effect within one engine step (a
    // load stage or one token). Work queued behind the running request is skipped when
    // its turn comes. Request ids (loads and generations) come from one increasing counter.
    void cancel(quint64 request_id);
    void cancelUpTo(quint64 last_request_id);  // everything issued so far
    // Live numbers of every request and of the loaded model's memory, recorded on the engine
    // thread without locks on the token path; snapshot() is safe from any thread, any rate.
    const ember::Telemetry& telemetry() const { return telemetry_; }
    ember::TelemetrySnapshot telemetrySnapshot() const { return telemetry_.snapshot(); }

public slots:
    void loadModel(const ember::app::LoadRequest& req);
    void unloadModel();
    void generate(const ember::app::GenerationRequest& req);
    void forgetConversation(qint64 conversation_id);  // deleted: free its KV cache

signals:
    void loadProgress(float fraction);
    void modelLoaded(const ember::app::LoadedModelInfo& info);
    void modelLoadFailed(const QString& path, const QString& error, bool cancelled);
    void modelUnloaded();
    void generationStarted(quint64 request_id);
    // Text batched at <= ~60 Hz; `pieces` counts the engine callbacks it came from.
    void textReady(quint64 request_id, const QString& text, int pieces);
    void generationFinished(quint64 request_id, const ember::app::GenerationResult& result);
    void generationFailed(quint64 request_id, const QString& error);

private:
    // Marks `id` as running, then reports whether it was cancelled before it started. In
    // that order: cancel() records the id first and then looks at what is running, so one
    // of the two always sees the other (no lost cancel).
    bool begin(std::atomic<quint64>& current, std::atomic<bool>& flag, quint64 id);
    void end(std::atomic<quint64>& current, quint64 id);

    std::unique_ptr<ember::Model> model_;
    std::unique_ptr<SequencePool> pool_;
    QString model_path_;
    std::atomic<bool> cancel_load_{false};      // polled by Model::load
    std::atomic<bool> cancel_generate_{false};  // polled by Sequence::generate every token
    std::atomic<quint64> current_load_{0};
    std::atomic<quint64> current_generate_{0};
    std::atomic<quint64> cancel_up_to_{0};
    std::mutex cancelled_mutex_;
    QSet<quint64> cancelled_;  // ids cancelled one by one
    uint64_t seed_counter_ = 0;
    ember::Telemetry telemetry_;  // outlives every model this worker loads
    // Opened on the engine thread at the first answer (NVML's start-up can take a while).
    // $EMBER_POWERCAP_ROOT and $EMBER_NVML_LIBRARY point it elsewhere (tests, odd systems).
    std::unique_ptr<ember::EnergyMeter> energy_;
    EnergyLedger ledger_;  // each answer's share of what energy_ reads
};

}  // namespace ember::app

Q_DECLARE_METATYPE(ember::app::LoadRequest)
