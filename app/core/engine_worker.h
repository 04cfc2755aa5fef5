// The engine thread's object. It loads and unloads models on its own QThread and, once a
// model is loaded, runs it through a Scheduler (engine/scheduler: continuous batching) kept
// in an EngineSlot, the app's one InferenceEngine that the local API server shares. The GUI
// talks to it only by queued calls in and queued signals out, so nothing on the GUI thread
// ever waits for it.
//
// A chat's answer is a submit() to the scheduler (cache_key = its conversation, so the next
// turn reuses its KV cache). Several answers run at once, one per conversation; their events
// arrive on the scheduler's thread, where each answer's sink batches its text (<= ~60 Hz per
// answer) and emits the signals below (queued to the GUI).
//
// Loading runs inside a slot, which keeps this thread's event loop busy, so cancellation
// cannot be a queued call: cancel() and cancelUpTo() are plain thread-safe methods. A load
// polls an atomic between stages; an answer is cancelled in the scheduler (within one step).
// Work queued behind a running load is skipped when its turn comes if it was cancelled.
//
// No lost cancel for an answer, under one mutex: generate() registers the answer, submits,
// then records the engine's id and cancels at once if a cancel arrived meanwhile; cancel()
// records the id (and the answer's flag), then cancels in the engine if the id is known. So
// a cancel before the queued generate() runs skips it, one during submit() is applied right
// after, and one later goes straight to the scheduler. The sinks never take that mutex.
#pragma once
#include <QHash>
#include <QObject>
#include <QSet>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "app/core/energy_ledger.h"
#include "app/core/engine_slot.h"
#include "app/core/engine_types.h"
#include "engine/fit/planner.h"
#include "kernels/common/dtype.h"

namespace ember {
class EnergyMeter;
}  // namespace ember

namespace ember::app {

struct LoadRequest {
    quint64 id = 0;  // set by EngineHost
    QString path;
    qint64 n_ctx = 0;                          // 0: chosen by the fit planner (engine/fit/context_choice.h)
    int n_seqs = 4;                            // chats whose KV cache is kept, and answers that run at once
    int n_threads = 0;                         // 0: one per core
    ember::DType kv_type = ember::DType::F16;  // the KV cache's element type (F16 or Q8_0)
    // The prefix cache's disk tier (engine/kv/disk_prefix_store.h): chats' KV blocks kept on
    // disk, so a chat continued after a restart is not computed again. Empty folder or 0: off.
    QString kv_disk_folder;
    quint64 kv_disk_bytes = 0;
    // A draft model for the chats set to "Draft model" (engine/scheduler/draft_load.h), loaded
    // after the model when the fit planner finds room for both (fit::plan_with_draft) and its
    // vocabulary is the model's; else the model loads alone and LoadedModelInfo::draft_error
    // says why. Empty: none.
    QString draft_path;
    // The budget the draft is planned in; unset: this machine's, measured before the load
    // (a test states one to see a draft refused).
    std::optional<ember::fit::Budget> fit_budget;
};

// A remote model to put behind the engine slot (issue #41; app/remote builds it): `make`
// runs on the engine thread once the model before it is gone, and returns the engine (a
// RemoteEngine); it may throw (a bad URL), which fails the load with that message.
struct RemoteLoad {
    quint64 id = 0;           // set by EngineHost
    QString endpoint, model;  // the endpoint's name, the model's id on the server
    QString url;              // the endpoint's URL as it may be shown (remote::printable_url)
    qint64 context = 0;       // tokens, as the server's /v1/models says (0: not said)
    // The endpoint's reasoning effort: sent only when set ("": the field is left out).
    QString reasoning_effort;
    std::function<std::unique_ptr<ember::InferenceEngine>()> make;
};

// The scheduler's cache_key of a conversation: its turns continue one kept KV sequence.
std::string conversation_cache_key(qint64 conversation_id);
// LoadedModelInfo::path of a remote model: "remote:ENDPOINT/MODEL" (no file has such a path).
QString remote_model_path(const QString& endpoint, const QString& model);

class EngineWorker : public QObject {
    Q_OBJECT
public:
    EngineWorker();
    ~EngineWorker() override;

    // Thread-safe, callable from any thread; they take effect within one engine step (a
    // load stage or one scheduler step). Request ids (loads and answers) come from one
    // increasing counter.
    void cancel(quint64 request_id);
    void cancelUpTo(quint64 last_request_id);  // everything issued so far
    // The app's engine (outlives every model; the local API server submits here).
    EngineSlot& engine() { return engine_; }
    // The loaded model's live numbers (empty with none), safe from any thread at any rate.
    ember::TelemetrySnapshot telemetrySnapshot() const { return engine_.telemetry_snapshot(); }

public slots:
    void loadModel(const ember::app::LoadRequest& req);
    void loadRemote(const ember::app::RemoteLoad& req);
    void unloadModel();
    void generate(const ember::app::GenerationRequest& req);
    void forgetConversation(qint64 conversation_id);  // deleted: free its KV cache

signals:
    void loadProgress(float fraction);
    void modelLoaded(const ember::app::LoadedModelInfo& info);
    void modelLoadFailed(const QString& path, const QString& error, bool cancelled);
    void modelUnloaded();
    // From the scheduler's thread (queued to the GUI): admitted into the running batch.
    void generationStarted(quint64 request_id);
    // Text batched at <= ~60 Hz per answer; `pieces` counts the engine events it came from;
    // `reasoning`: a reasoning model's thinking that came with it (never part of `text`).
    void textReady(quint64 request_id, const QString& text, int pieces, const QString& reasoning);
    void generationFinished(quint64 request_id, const ember::app::GenerationResult& result);
    // `needed_ctx`: the message alone did not fit the context; the context that would hold it
    // (0 for any other failure).
    void generationFailed(quint64 request_id, const QString& error, qint64 needed_ctx);

private:
    struct Answer;
    // Marks load `id` as running, then reports whether it was cancelled before it started. In
    // that order: cancel() records the id first and then looks at what is running, so one
    // of the two always sees the other (no lost cancel).
    bool begin_load(quint64 id);
    void end_load(quint64 id);
    bool cancelled(quint64 id) const;                  // under mutex_
    void cancel_answer(Answer& a);                     // under mutex_
    void on_event(Answer& a, ember::EngineEvent&& e);  // the scheduler's thread
    void flush_text(Answer& a);                        // sends what the batcher holds

    EngineSlot engine_;
    QString model_name_;  // the loaded model's file name without .gguf
    // With a remote model behind the slot: its endpoint's name (empty for a local model) and
    // reasoning effort ("": not sent).
    QString remote_endpoint_, remote_effort_;
    std::atomic<bool> cancel_load_{false};  // polled by Model::load
    std::atomic<quint64> current_load_{0};
    std::atomic<quint64> cancel_up_to_{0};
    mutable std::mutex mutex_;                         // guards the three below
    QSet<quint64> cancelled_;                          // ids cancelled one by one, not yet run
    QHash<quint64, std::shared_ptr<Answer>> answers_;  // submitted, maybe ended (pruned lazily)
    uint64_t seed_counter_ = 0;
    // Opened on the engine thread at the first answer (NVML's start-up can take a while),
    // read by the answers' sinks. $EMBER_POWERCAP_ROOT and $EMBER_NVML_LIBRARY point it
    // elsewhere (tests, odd systems).
    std::unique_ptr<ember::EnergyMeter> energy_;
    std::mutex energy_mutex_;  // energy_ and ledger_ from the sinks
    EnergyLedger ledger_;      // each answer's share of what energy_ reads
};

}  // namespace ember::app

Q_DECLARE_METATYPE(ember::app::LoadRequest)
Q_DECLARE_METATYPE(ember::app::RemoteLoad)
