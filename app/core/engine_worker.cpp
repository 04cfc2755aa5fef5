#include "app/core/engine_worker.h"

#include <QElapsedTimer>
#include <QFileInfo>
#include <chrono>
#include <utility>

#include "app/core/text_batcher.h"
#include "engine/core/log.h"
#include "engine/fit/context_choice.h"
#include "engine/fit/measured_budget.h"
#include "engine/fit/planner.h"
#include "engine/runtime/chat.h"
#include "engine/runtime/prompt_fit.h"
#include "engine/runtime/model.h"
#include "engine/telemetry/energy.h"
#include "kernels/common/error.h"

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
    const ember::KvCacheConfig& kv = const_cast<ember::Model&>(m).kv().config();
    i.kv_size = q(ember::format_bytes(kv.total_bytes()));
    i.kv_type = q(std::string(ember::dtype_name(kv.type)));
    i.kv_per_token = q(ember::format_bytes(kv.bytes_per_block() / static_cast<uint64_t>(kv.block_tokens)));
    // The device and why it was chosen ("cuda:0 ...", or the CPU with the reason CUDA was not used).
    i.backend = q(m.backend().name()) + QStringLiteral(" — ") + q(m.device_reason());
    i.chat_template = q(m.chat_template().source_desc);
    i.reasoning_format = q(std::string(ember::reasoning_format_name(ember::reasoning_format(m))));
    const ember::ReasoningControls rc = ember::reasoning_controls(m);
    i.reads_enable_thinking = rc.enable_thinking;
    i.reads_reasoning_effort = rc.reasoning_effort;
    if (m.chat_template().warning) i.template_warning = q(*m.chat_template().warning);
    i.load_ms = load_ms;
    return i;
}

// The context to load with: the user's choice, but no longer than the model was trained for
// (beyond that, positions are out of distribution and the answers degrade into noise); or,
// when they chose none, the longest the fit planner finds room for on this machine.
struct ContextPick {
    int64_t n_ctx = 0;
    int64_t trained = 0;
    int64_t fits_up_to = 0;
    std::string reason;
};
ContextPick pick_context(const std::string& path, int64_t wanted, int n_seqs, ember::DType kv_type) {
    ContextPick p;
    try {
        const ember::fit::FitModel m = ember::fit::fit_model(ember::GgufFile::open(path));
        ember::fit::ContextOptions o;
        o.n_seqs = n_seqs;
        o.kv_type = kv_type;
        const ember::fit::ContextChoice c = ember::fit::choose_context(m, ember::fit::measured_budget(), o);
        p.trained = c.trained;
        p.fits_up_to = c.fits_up_to;
        if (wanted <= 0) {
            p.n_ctx = c.n_ctx;
            p.reason = "chosen for this machine: " + c.reason;
        } else {
            p.n_ctx = std::min<int64_t>(wanted, c.trained);
            p.reason = p.n_ctx < wanted ? "cut to the " + std::to_string(c.trained) + " tokens the model was made for"
                                        : std::string();
        }
    } catch (const std::exception&) {
        p.n_ctx = std::max<int64_t>(wanted, 0);  // Model::load reports the problem with the file in full
    }
    return p;
}

// A remote server gets the chat's template switches only where the user set them: the
// endpoint's reasoning effort (or none), and enable_thinking only when thinking is turned off
// (its default, on, is the server's own; a server that knows neither may reject them).
void remote_template_options(ember::ChatRenderOptions& o, const SamplingSettings& s, const QString& effort) {
    o.reasoning_effort = effort.toStdString();
    if (s.thinking) o.enable_thinking.reset();
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

void fill_stats(GenerationResult& r, const ember::RequestStats& s) {
    r.prompt_tokens = s.prompt_tokens;
    r.reused_tokens = s.reused_tokens;
    r.generated_tokens = s.generated_tokens;
    r.reasoning_tokens = s.reasoning_tokens;
    r.dropped_turns = s.dropped_turns;
    r.ttft_ms = s.ttft_ms;  // from the request's submission: what the user waited
    const double prefill_ms = s.ttft_ms - s.queue_wait_ms;
    if (prefill_ms > 0) r.prefill_tok_s = (s.prompt_tokens - s.reused_tokens) * 1000.0 / prefill_ms;
    if (s.decode_ms > 0) r.decode_tok_s = (s.generated_tokens - 1) * 1000.0 / s.decode_ms;
    r.stop_reason = s.stop_reason;
}

ember::EngineRequest to_engine_request(const GenerationRequest& req, uint64_t fresh_seed) {
    ember::EngineRequest e;
    e.messages.reserve(static_cast<size_t>(req.turns.size()));
    for (const ChatTurn& t : req.turns)
        e.messages.push_back({t.role.toStdString(), t.content.toStdString(), t.reasoning.toStdString()});
    e.template_options = req.sampling.template_options();
    e.context_overflow = req.context_overflow;  // truncate, roll: the answer says how many turns made way
    e.sampling = req.sampling.to_params(fresh_seed);
    e.max_tokens = req.sampling.max_tokens;
    e.lookup = req.sampling.speculation == QLatin1String("lookup");
    e.draft = req.sampling.speculation == QLatin1String("draft");  // where the model has a draft loaded
    e.cache_key = conversation_cache_key(req.conversation_id);
    return e;
}

}  // namespace

std::string conversation_cache_key(qint64 conversation_id) { return "chat:" + std::to_string(conversation_id); }

// One answer in the engine. The flags are guarded by EngineWorker::mutex_; the rest belongs
// to the scheduler's thread (its sink), after submit().
struct EngineWorker::Answer {
    quint64 id = 0;
    QString model_name;
    QString endpoint;        // remote: the endpoint's name
    uint64_t engine_id = 0;  // the slot's id once submitted
    bool cancel_requested = false;
    std::atomic<bool> ended{false};
    TextBatcher batch;
    bool started = false;  // admitted into the running batch
    bool got_text = false;
    // How long it thought: from its first thinking text to its first answer text.
    std::chrono::steady_clock::time_point thinking_from{}, thinking_to{};
};

EngineWorker::EngineWorker() {
    qRegisterMetaType<ember::app::LoadRequest>();
    qRegisterMetaType<ember::app::RemoteLoad>();
    qRegisterMetaType<ember::app::GenerationRequest>();
    qRegisterMetaType<ember::app::GenerationResult>();
    qRegisterMetaType<ember::app::LoadedModelInfo>();
}

// The scheduler goes first: its running answers end (Cancelled) through sinks that use the
// energy meter and emit this object's signals.
EngineWorker::~EngineWorker() { engine_.clear(); }

bool EngineWorker::cancelled(quint64 id) const { return id <= cancel_up_to_.load() || cancelled_.contains(id); }

void EngineWorker::cancel_answer(Answer& a) {
    a.cancel_requested = true;
    if (a.engine_id != 0) engine_.cancel(a.engine_id);
}

void EngineWorker::cancel(quint64 request_id) {
    std::lock_guard lock(mutex_);
    cancelled_.insert(request_id);
    if (current_load_.load() == request_id) cancel_load_ = true;
    if (const auto a = answers_.value(request_id)) cancel_answer(*a);
}

void EngineWorker::cancelUpTo(quint64 last_request_id) {
    std::lock_guard lock(mutex_);
    quint64 prev = cancel_up_to_.load();
    while (prev < last_request_id && !cancel_up_to_.compare_exchange_weak(prev, last_request_id)) {}
    const quint64 load = current_load_.load();
    if (load != 0 && load <= last_request_id) cancel_load_ = true;
    for (const auto& a : std::as_const(answers_))
        if (a->id <= last_request_id && !a->ended) cancel_answer(*a);
}

bool EngineWorker::begin_load(quint64 id) {
    current_load_ = id;
    cancel_load_ = false;
    std::lock_guard lock(mutex_);
    const bool was_cancelled = cancelled(id);
    if (was_cancelled) cancel_load_ = true;
    return was_cancelled;
}

void EngineWorker::end_load(quint64 id) {
    current_load_ = 0;
    std::lock_guard lock(mutex_);
    cancelled_.remove(id);
}

namespace {
// Without its disk tier the model still answers (every prompt computed): the failure is logged.
void open_disk_cache(ember::Model& model, const LoadRequest& req) {
    if (req.kv_disk_folder.isEmpty() || req.kv_disk_bytes == 0) return;
    try {
        model.open_disk_prefix_cache(req.kv_disk_folder.toStdString(), req.kv_disk_bytes);
    } catch (const std::exception& e) {
        ember::log_warn(std::string("KV disk cache off: ") + e.what());
    }
}
}  // namespace

namespace {
// Whether `draft` fits beside `target` as the fit planner counts them (the draft in what the
// target leaves of `budget`, with the target's context and sequences): "" and `summary` set
// when it does, else why not.
std::string draft_fit_refusal(const std::string& target, const std::string& draft, const ember::LoadOptions& o,
                              const ember::fit::Budget& budget, std::string& summary) {
    ember::fit::FitOptions fo;
    fo.n_ctx = o.n_ctx;
    fo.n_seqs = o.n_seqs;
    fo.n_batch = o.n_batch;
    fo.kv_type = o.kv_type;
    const ember::fit::DraftFitPlan p =
        ember::fit::plan_with_draft(ember::fit::fit_model(ember::GgufFile::open(target)),
                                    ember::fit::fit_model(ember::GgufFile::open(draft)), fo, budget);
    if (!ember::fit::fits(p)) {
        const ember::fit::FitPlan& short_side =
            p.target.placement == ember::fit::Placement::TooLarge ? p.target : p.draft;
        return "model and draft do not fit together on this machine: " + short_side.reason;
    }
    summary = "model + draft: " + ember::format_bytes(p.cpu_total()) + " in RAM";
    if (p.gpu_total() > 0) summary += ", " + ember::format_bytes(p.gpu_total()) + " on the GPU";
    return {};
}

// The chats' draft model (LoadRequest::draft_path) beside the loaded `target`, when it fits and
// speaks its vocabulary; else none, with the reason in `info`.
ember::LoadedDraft load_chat_draft(const LoadRequest& req, const ember::LoadOptions& o, const ember::Model& target,
                                   const ember::fit::Budget& budget, LoadedModelInfo& info) {
    if (req.draft_path.isEmpty()) return {};
    const std::string path = req.draft_path.toStdString();
    info.draft_path = req.draft_path;
    const QString name = QFileInfo(req.draft_path).completeBaseName();
    try {
        std::string summary;
        const std::string refusal = draft_fit_refusal(o.path, path, o, budget, summary);
        if (!refusal.empty()) throw ember::Error(refusal);
        ember::LoadedDraft d = ember::load_draft_model(path, o, target);
        info.draft_name = name;
        info.draft_fit = q(summary);
        return d;
    } catch (const std::exception& e) {
        if (o.cancel && o.cancel->load()) throw;  // the whole load was cancelled
        info.draft_error = QStringLiteral("Draft model %1 not used: %2").arg(name, QString::fromUtf8(e.what()));
        ember::log_warn(info.draft_error.toStdString());
        return {};
    }
}
}  // namespace

void EngineWorker::loadModel(const LoadRequest& req) {
    // A cancelled load still unloads the previous model: the user asked to replace it.
    begin_load(req.id);
    engine_.clear();  // answers still running end as cancelled
    model_name_.clear();
    remote_endpoint_.clear();
    remote_effort_.clear();
    QElapsedTimer t;
    t.start();
    ember::LoadOptions o;
    o.path = req.path.toStdString();
    o.n_seqs = std::max(1, req.n_seqs);
    o.kv_type = req.kv_type;
    const ContextPick ctx = pick_context(o.path, req.n_ctx, o.n_seqs, o.kv_type);
    o.n_ctx = ctx.n_ctx;
    o.n_threads = req.n_threads;
    o.cancel = &cancel_load_;
    o.on_progress = [this](float p) { emit loadProgress(p); };
    // Measured before the model takes its share: the planner counts model and draft together.
    const ember::fit::Budget budget =
        req.draft_path.isEmpty() ? ember::fit::Budget{} : req.fit_budget.value_or(ember::fit::measured_budget());
    try {
        std::unique_ptr<ember::Model> model = ember::Model::load(o);
        open_disk_cache(*model, req);
        LoadedModelInfo info = describe(*model, req.path, static_cast<double>(t.elapsed()), o.n_seqs);
        info.trained_ctx = ctx.trained;
        info.ctx_fits_up_to = ctx.fits_up_to;
        info.ctx_automatic = req.n_ctx <= 0;
        info.ctx_reason = q(ctx.reason);
        ember::LoadedDraft draft = load_chat_draft(req, o, *model, budget, info);
        SlotOptions so;
        so.model_name = info.name.toStdString();
        so.max_batch = o.n_seqs;   // as many answers at once as chats the cache holds in full
        so.max_cached = o.n_seqs;  // idle chats whose KV cache is kept for their next turn
        engine_.install(std::move(model), so, std::move(draft));
        model_name_ = info.name;
        emit modelLoaded(info);
    } catch (const std::exception& e) {
        const bool was_cancelled = cancel_load_.load();
        ember::log(was_cancelled ? ember::LogLevel::Info : ember::LogLevel::Error,
                   std::string(was_cancelled ? "model load cancelled: " : "model load failed: ") + e.what());
        emit modelLoadFailed(req.path, QString::fromUtf8(e.what()), was_cancelled);
    }
    end_load(req.id);
}

namespace {
LoadedModelInfo describe_remote(const RemoteLoad& req) {
    LoadedModelInfo i;
    i.path = remote_model_path(req.endpoint, req.model);
    i.name = req.model + QStringLiteral(" · ") + req.endpoint;  // marked as remote wherever a name shows
    i.architecture = QStringLiteral("remote");
    i.backend = QStringLiteral("remote — ") + req.url;
    i.n_ctx = req.context;
    i.trained_ctx = req.context;
    i.ctx_automatic = true;
    i.ctx_reason = req.context > 0 ? QStringLiteral("as the server says") : QStringLiteral("the server does not say");
    i.n_seqs = 1;
    i.chat_template = QStringLiteral("the server's");
    i.reads_reasoning_effort = false;  // the endpoint's setting decides (Settings › Remote endpoints)
    i.remote_endpoint = req.endpoint;
    i.remote_url = req.url;
    return i;
}
}  // namespace

QString remote_model_path(const QString& endpoint, const QString& model) {
    return QStringLiteral("remote:") + endpoint + QLatin1Char('/') + model;
}

void EngineWorker::loadRemote(const RemoteLoad& req) {
    begin_load(req.id);
    engine_.clear();
    model_name_.clear();
    remote_endpoint_.clear();
    remote_effort_.clear();
    const LoadedModelInfo info = describe_remote(req);
    try {
        engine_.install_engine(req.make());
        model_name_ = info.name;
        remote_endpoint_ = req.endpoint;
        remote_effort_ = req.reasoning_effort;
        emit modelLoaded(info);
    } catch (const std::exception& e) {
        ember::log_warn(std::string("remote model not used: ") + e.what());
        emit modelLoadFailed(info.path, QString::fromUtf8(e.what()), false);
    }
    end_load(req.id);
}

void EngineWorker::unloadModel() {
    engine_.clear();
    model_name_.clear();
    remote_endpoint_.clear();
    remote_effort_.clear();
    emit modelUnloaded();
}

void EngineWorker::forgetConversation(qint64 conversation_id) {
    engine_.forget(conversation_cache_key(conversation_id));
}

void EngineWorker::generate(const GenerationRequest& req) {
    auto a = std::make_shared<Answer>();
    a->id = req.id;
    a->model_name = model_name_;
    a->endpoint = remote_endpoint_;
    {
        std::lock_guard lock(mutex_);
        // Answers that ended are forgotten here, where the list is touched anyway (a sink
        // never takes this lock: it must not block the scheduler's thread).
        for (auto it = answers_.begin(); it != answers_.end();) it = (*it)->ended ? answers_.erase(it) : std::next(it);
        const bool was_cancelled = cancelled(req.id);
        cancelled_.remove(req.id);
        if (was_cancelled) {
            GenerationResult r;
            r.stop_reason = StopReason::Cancelled;
            emit generationFinished(req.id, r);
            return;
        }
        answers_.insert(req.id, a);
    }
    if (!energy_)
        energy_ = std::make_unique<ember::EnergyMeter>(env_or("EMBER_POWERCAP_ROOT", ember::RaplMeter::kRoot),
                                                       env_or("EMBER_NVML_LIBRARY", ember::Nvml::kLibrary));
    const uint64_t seed = 0x9E3779B97F4A7C15ull * ++seed_counter_ ^
                          static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    ember::EngineRequest er = to_engine_request(req, seed);
    if (!remote_endpoint_.isEmpty()) remote_template_options(er.template_options, req.sampling, remote_effort_);
    uint64_t engine_id = 0;
    try {
        engine_id = engine_.submit(std::move(er), [this, a](ember::EngineEvent&& e) { on_event(*a, std::move(e)); });
    } catch (const ember::ContextOverflow& e) {
        a->ended = true;  // never queued: the newest message alone does not fit
        emit generationFailed(req.id, QString::fromUtf8(e.what()), e.needed());
        return;
    } catch (const std::exception& e) {
        // Never queued (no model, a full queue).
        a->ended = true;
        emit generationFailed(req.id, QString::fromUtf8(e.what()), 0);
        return;
    }
    // A cancel that came while submit() ran saw no engine id yet: it left its mark instead.
    std::lock_guard lock(mutex_);
    a->engine_id = engine_id;
    if (a->cancel_requested) engine_.cancel(engine_id);
}

void EngineWorker::flush_text(Answer& a) {
    if (a.batch.empty()) return;
    QString reasoning = a.batch.take_reasoning();
    auto [s, n] = a.batch.take();
    emit textReady(a.id, s, n, reasoning);
}

namespace {
void time_thinking(std::chrono::steady_clock::time_point& from, std::chrono::steady_clock::time_point& to,
                   const ember::EngineEvent& e) {
    using Clock = std::chrono::steady_clock;
    if (!e.reasoning.empty() && from == Clock::time_point{}) from = Clock::now();
    if (!e.text.empty() && from != Clock::time_point{} && to == Clock::time_point{}) to = Clock::now();
}
double thinking_ms(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) {
    using Clock = std::chrono::steady_clock;
    if (from == Clock::time_point{}) return 0;
    if (to == Clock::time_point{}) to = Clock::now();  // never answered: thought to the end
    return std::chrono::duration<double, std::milli>(to - from).count();
}
}  // namespace

void EngineWorker::on_event(Answer& a, ember::EngineEvent&& e) {
    using Kind = ember::EngineEvent::Kind;
    switch (e.kind) {
        case Kind::Started: {
            a.started = true;
            std::lock_guard lock(energy_mutex_);
            ledger_.start(a.id, energy_->sample());
            emit generationStarted(a.id);
            return;
        }
        case Kind::Text:
            // Three meter reads per answer, never per token. The first text stands for the
            // first token: a token that ends mid-character shows up with the next one.
            if (!std::exchange(a.got_text, true)) {
                std::lock_guard lock(energy_mutex_);
                ledger_.first_token(a.id, energy_->sample());
            }
            time_thinking(a.thinking_from, a.thinking_to, e);
            if (a.batch.add(e.text.data(), e.text.size(), e.reasoning)) flush_text(a);
            return;
        case Kind::Finished: {
            flush_text(a);
            GenerationResult r;
            r.stop_reason = e.stats.stop_reason;
            if (a.started) {  // else cancelled in the queue: it drew nothing, processed nothing
                std::lock_guard lock(energy_mutex_);
                const EnergyShare share = ledger_.finish(a.id, energy_->sample());
                // A remote answer drew its energy on the server: this machine's meters say nothing of it.
                if (a.endpoint.isEmpty()) fill_energy(r, share, *energy_);
                fill_stats(r, e.stats);
            }
            r.model_name = a.model_name;
            r.endpoint = a.endpoint;
            r.thinking_ms = thinking_ms(a.thinking_from, a.thinking_to);
            a.ended = true;
            emit generationFinished(a.id, r);
            return;
        }
        case Kind::Failed: {
            flush_text(a);  // what was written stays (saved as interrupted)
            {
                std::lock_guard lock(energy_mutex_);
                ledger_.finish(a.id, energy_->sample());
            }
            ember::log(ember::LogLevel::Error, "generation failed: " + e.error);
            a.ended = true;
            emit generationFailed(a.id, QString::fromStdString(e.error), 0);
            return;
        }
    }
}

}  // namespace ember::app
