#include "app/core/engine_worker.h"

#include <QElapsedTimer>
#include <QFileInfo>
#include <chrono>
#include <utility>

#include "app/core/energy_ledger.h"
#include "app/core/prompt_fit.h"
#include "app/core/sequence_pool.h"
#include "app/core/text_batcher.h"
#include "engine/core/log.h"
#include "engine/runtime/model.h"
#include "engine/runtime/sequence.h"
#include "engine/telemetry/energy.h"

namespace ember::app {
namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

LoadedModelInfo describe(const ember::Model& m, const QString& path, double load_ms, int n_seqs) {
    LoadedModelInfo i;
    const ember::ModelInfo& mi = m.info();
    i.path = path;
    // The file name says what people chose (model, size, quantization);
    // general.name is often a training-run label ("Smollm2 135M 8k Lc100K Mix1 Ep2").
    i.name = QFileInfo(path).completeBaseName();
    i.metadata_name = q(mi.name);
    i.architecture = q(mi.architecture);
    i.params = q(ember::format_param_count(mi.n_params));
    i.file_type = q(mi.file_type);
    i.file_size = q(ember::format_bytes(mi.file_size));
    i.n_ctx = m.n_ctx();
    i.n_seqs = n_seqs;
    i.kv_size = q(ember::format_bytes(const_cast<ember::Model&>(m).kv().config().total_bytes()));
    // The device and why it was chosen ("cuda:0 ...", or the CPU with the reason CUDA was not used).
    i.backend = q(m.backend().name()) + QStringLiteral(" — ") + q(m.device_reason());
    i.chat_template = q(m.chat_template().source_desc);
    if (m.chat_template().warning) i.template_warning = q(*m.chat_template().warning);
    i.load_ms = load_ms;
    return i;
}

// The context the user asked for, but no longer than the model was trained for (beyond
// that, positions are out of distribution and the answers degrade into noise).
int64_t capped_context(const std::string& path, int64_t wanted) {
    if (wanted <= 0) return 0;  // the engine's default: min(trained, 4096)
    try {
        const auto trained = ember::describe_model(ember::GgufFile::open(path)).context_length;
        if (trained && *trained > 0)
            return static_cast<int64_t>(std::min<uint64_t>(static_cast<uint64_t>(wanted), *trained));
    } catch (const std::exception&) {
        // Model::load reports the problem with the file in full.
    }
    return wanted;
}

std::string env_or(const char* name, const char* fallback) {
    const QByteArray v = qgetenv(name);
    return v.isEmpty() ? std::string(fallback) : v.toStdString();
}

// The answer's share of what the meters read (EnergyLedger: an even split where answers overlap).
void fill_energy(GenerationResult& r, const EnergyShare& share, const ember::EnergyMeter& meter) {
    r.prefill_s = share.prefill_s;
    r.decode_s = share.decode_s;
    r.prefill_j = share.prefill_j;
    r.decode_j = share.decode_j;
    r.cpu_energy_measured = share.cpu_measured;
    r.gpu_energy_measured = share.gpu_measured;
    r.energy_shared = share.shared;
    r.cpu_energy_note = q(meter.cpu_reason());
    r.gpu_energy_note = q(meter.gpu_reason());
}

}  // namespace

EngineWorker::EngineWorker() {
    qRegisterMetaType<ember::app::LoadRequest>();
    qRegisterMetaType<ember::app::GenerationRequest>();
    qRegisterMetaType<ember::app::GenerationResult>();
    qRegisterMetaType<ember::app::LoadedModelInfo>();
}

// The pool's sequences hold blocks of the model's KV cache: they go first.
EngineWorker::~EngineWorker() {
    pool_.reset();
    model_.reset();
}

void EngineWorker::cancel(quint64 request_id) {
    {
        std::lock_guard lock(cancelled_mutex_);
        cancelled_.insert(request_id);
    }
    if (current_load_.load() == request_id) cancel_load_ = true;
    if (current_generate_.load() == request_id) cancel_generate_ = true;
}

void EngineWorker::cancelUpTo(quint64 last_request_id) {
    quint64 prev = cancel_up_to_.load();
    while (prev < last_request_id && !cancel_up_to_.compare_exchange_weak(prev, last_request_id)) {}
    const quint64 load = current_load_.load(), gen = current_generate_.load();
    if (load != 0 && load <= last_request_id) cancel_load_ = true;
    if (gen != 0 && gen <= last_request_id) cancel_generate_ = true;
}

bool EngineWorker::begin(std::atomic<quint64>& current, std::atomic<bool>& flag, quint64 id) {
    current = id;
    flag = false;
    std::lock_guard lock(cancelled_mutex_);
    const bool cancelled = id <= cancel_up_to_.load() || cancelled_.contains(id);
    if (cancelled) flag = true;
    return cancelled;
}

void EngineWorker::end(std::atomic<quint64>& current, quint64 id) {
    current = 0;
    std::lock_guard lock(cancelled_mutex_);
    cancelled_.remove(id);
}

void EngineWorker::loadModel(const LoadRequest& req) {
    // A cancelled load still unloads the previous model: the user asked to replace it.
    begin(current_load_, cancel_load_, req.id);
    pool_.reset();
    model_.reset();
    model_path_.clear();
    telemetry_.set_memory({});
    QElapsedTimer t;
    t.start();
    ember::LoadOptions o;
    o.path = req.path.toStdString();
    o.n_ctx = capped_context(o.path, req.n_ctx);
    o.n_seqs = std::max(1, req.n_seqs);
    o.n_threads = req.n_threads;
    o.cancel = &cancel_load_;
    o.on_progress = [this](float p) { emit loadProgress(p); };
    try {
        model_ = ember::Model::load(o);
        pool_ = std::make_unique<SequencePool>(*model_, static_cast<size_t>(o.n_seqs));
        model_path_ = req.path;
        telemetry_.set_memory(model_->memory_use());
        emit modelLoaded(describe(*model_, req.path, static_cast<double>(t.elapsed()), o.n_seqs));
    } catch (const std::exception& e) {
        const bool cancelled = cancel_load_.load();
        ember::log(cancelled ? ember::LogLevel::Info : ember::LogLevel::Error,
                   std::string(cancelled ? "model load cancelled: " : "model load failed: ") + e.what());
        emit modelLoadFailed(req.path, QString::fromUtf8(e.what()), cancelled);
    }
    end(current_load_, req.id);
}

void EngineWorker::unloadModel() {
    pool_.reset();
    model_.reset();
    model_path_.clear();
    telemetry_.set_memory({});
    emit modelUnloaded();
}

void EngineWorker::forgetConversation(qint64 conversation_id) {
    if (pool_) pool_->drop(conversation_id);
}

void EngineWorker::generate(const GenerationRequest& req) {
    if (begin(current_generate_, cancel_generate_, req.id)) {
        end(current_generate_, req.id);
        GenerationResult r;
        r.stop_reason = StopReason::Cancelled;
        emit generationFinished(req.id, r);
        return;
    }
    if (!model_) {
        end(current_generate_, req.id);
        emit generationFailed(req.id, QStringLiteral("No model is loaded."));
        return;
    }
    emit generationStarted(req.id);
    try {
        std::vector<ember::ChatMessage> turns;
        turns.reserve(static_cast<size_t>(req.turns.size()));
        for (const ChatTurn& t : req.turns) turns.push_back({t.role.toStdString(), t.content.toStdString()});
        const FittedPrompt prompt =
            fit_prompt(*model_, std::move(turns), answer_room(model_->n_ctx(), req.sampling.max_tokens));

        ember::GenerateOptions go;
        go.sampling =
            req.sampling.to_params(0x9E3779B97F4A7C15ull * ++seed_counter_ ^
                                   static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
        go.max_tokens = req.sampling.max_tokens;
        go.telemetry = &telemetry_;
        go.request_id = req.id;
        if (req.submitted_ns > 0) {
            const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                std::chrono::steady_clock::now().time_since_epoch());
            go.queue_wait_ms = std::max(0.0, static_cast<double>(now.count() - req.submitted_ns) * 1e-6);
        }
        ember::Sequence& seq = pool_->acquire(req.conversation_id);

        if (!energy_)
            energy_ = std::make_unique<ember::EnergyMeter>(env_or("EMBER_POWERCAP_ROOT", ember::RaplMeter::kRoot),
                                                           env_or("EMBER_NVML_LIBRARY", ember::Nvml::kLibrary));
        // Three meter reads per answer, never per token. The first text stands for the first
        // token: a token that ends mid-character shows up with the next one, a token later.
        ledger_.start(req.id, energy_->sample());
        bool first = true;
        TextBatcher batch;
        auto on_text = [&](std::string_view text) {
            if (std::exchange(first, false)) ledger_.first_token(req.id, energy_->sample());
            if (batch.add(text.data(), text.size())) {
                auto [s, n] = batch.take();
                emit textReady(req.id, s, n);
            }
            return !cancel_generate_.load();
        };
        const ember::GenerateStats st = seq.generate(prompt.tokens, go, on_text, &cancel_generate_);
        const EnergyShare energy = ledger_.finish(req.id, energy_->sample());
        if (!batch.empty()) {
            auto [s, n] = batch.take();
            emit textReady(req.id, s, n);
        }
        GenerationResult r;
        fill_energy(r, energy, *energy_);
        r.prompt_tokens = st.prompt_tokens;
        r.reused_tokens = st.reused_tokens;
        r.generated_tokens = st.generated_tokens;
        r.dropped_turns = prompt.dropped_turns;
        r.ttft_ms = st.ttft_ms;
        r.prefill_tok_s = st.prefill_tok_s();
        r.decode_tok_s = st.decode_tok_s();
        r.stop_reason = st.stop_reason;
        r.model_name = QFileInfo(model_path_).completeBaseName();
        emit generationFinished(req.id, r);
    } catch (const std::exception& e) {
        ember::log(ember::LogLevel::Error, std::string("generation failed: ") + e.what());
        // A failure mid-forward leaves the sequence's cache consistent (the engine truncates),
        // but drop it anyway: the next turn re-processing its prompt is cheap insurance.
        pool_->drop(req.conversation_id);
        if (energy_) ledger_.finish(req.id, energy_->sample());
        emit generationFailed(req.id, QString::fromUtf8(e.what()));
    }
    end(current_generate_, req.id);
}

}  // namespace ember::app
