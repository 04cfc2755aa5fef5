#include "engine/runtime/model.h"

#include "engine/sampling/constrained.h"

#include <unistd.h>

#include <algorithm>

#include "kernels/common/error.h"
#include "engine/core/checksum.h"
#include "engine/core/log.h"
#include "engine/fit/measured_budget.h"

namespace ember {
namespace {

void check_cancel(const LoadOptions& o) {
    if (o.cancel && o.cancel->load()) throw Error("loading cancelled");
}

void progress(const LoadOptions& o, float p) {
    if (o.on_progress) o.on_progress(p);
}

void check_options(const LoadOptions& o) {
    if (o.n_ctx < 0 || o.n_ctx > kMaxContext)
        throw Error("context size " + std::to_string(o.n_ctx) + " is out of range (0 = the model's own, up to " +
                    std::to_string(kMaxContext) + ")");
    if (o.n_seqs < 1 || o.n_ctx * o.n_seqs > kMaxContext)
        throw Error(std::to_string(o.n_seqs) + " sequences of " + std::to_string(o.n_ctx) + " tokens are out of range");
    if (o.n_threads < 0) throw Error("thread count " + std::to_string(o.n_threads) + " is negative");
    if (o.n_batch < 1) throw Error("batch size " + std::to_string(o.n_batch) + " must be at least 1");
    if (o.n_gpu_layers < -1 && o.n_gpu_layers != kAutoGpuLayers)
        throw Error("GPU layer count " + std::to_string(o.n_gpu_layers) + " must be -1 (all), auto or 0 or more");
    if (o.n_gpu_expert_layers < -1)
        throw Error("GPU expert layer count " + std::to_string(o.n_gpu_expert_layers) +
                    " must be -1 (all) or 0 or more");
}

// A Q8_0 cache stores each head's values in whole 32-value blocks (kernels/cpu/kv_layout.h).
void check_cache_type(const KvCacheConfig& kv, const std::string& path) {
    if (kv.type != DType::Q8_0) return;
    for (int32_t i = 0; i < kv.n_layers; ++i)
        if (kv.shape(i).head_dim % 32 != 0)
            throw Error(path + ": a Q8_0 KV cache needs attention heads of a multiple of 32 values; this model's are " +
                        std::to_string(kv.shape(i).head_dim) + " (use the F16 cache: --cache-type f16)");
}

// A KV cache on the CPU larger than the machine's memory would be allocated lazily and the
// process killed when it fills; say so up front instead.
void check_host_memory(const KvCacheConfig& kv, int64_t n_ctx, int32_t n_seqs) {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) return;
    const uint64_t ram = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
    if (kv.total_bytes() > ram)
        throw Error("a KV cache for " + std::to_string(n_seqs) + " x " + std::to_string(n_ctx) + " tokens needs " +
                    format_bytes(kv.total_bytes()) + ", more than this machine's " + format_bytes(ram) +
                    " of memory (use a smaller context)");
}

}  // namespace

std::unique_ptr<Model> Model::load(const LoadOptions& opts) {
    check_options(opts);
    std::unique_ptr<Model> m(new Model());
    progress(opts, 0.0f);
    m->file_ = std::make_shared<const GgufFile>(GgufFile::open(opts.path, /*huge_pages=*/true));
    if (opts.chat_template) {
        try {
            m->template_override_ = ChatTemplate::compile(*opts.chat_template);
        } catch (const Error& e) {
            throw Error(std::string("the chat template given for ") + opts.path + " cannot be used: " + e.what());
        }
    }
    // Checked against the tensor table before anything is sized by it (also names an
    // unsupported architecture).
    const int32_t n_layers = read_model_config(*m->file_).n_layers;
    m->info_ = describe_model(*m->file_);
    check_cancel(opts);
    m->tokenizer_ = Tokenizer::from_gguf(*m->file_);
    progress(opts, 0.2f);
    check_cancel(opts);
    m->choose_device(opts);
    const GpuPlacement gpu = m->device_ == "cpu" ? GpuPlacement{} : m->gpu_placement(opts);
    const int gpu_layers = gpu.layers >= 0 && gpu.layers < n_layers ? gpu.layers : n_layers;
    const bool experts_apart = gpu.expert_layers >= 0 && gpu.expert_layers < gpu_layers;
    if (m->device_ != "cpu" && (gpu_layers < n_layers || experts_apart)) {
        // Partial offload: the first gpu_layers on the GPU, the rest (and the output head) on
        // the CPU; and of those on the GPU, the experts past the first expert_layers in RAM.
        m->cpu_backend_ = make_cpu_backend(opts.n_threads);
        m->transformer_ = std::make_unique<Transformer>(m->file_, *m->backend_, *m->cpu_backend_, gpu_layers,
                                                        experts_apart ? gpu.expert_layers : -1);
        if (gpu_layers < n_layers)
            m->device_reason_ += "; " + std::to_string(gpu_layers) + " of " + std::to_string(n_layers) +
                                 " layers on the GPU, the rest on the CPU";
        if (experts_apart && m->transformer_->config().moe())
            m->device_reason_ += "; the experts of " + std::to_string(gpu_layers - gpu.expert_layers) + " of " +
                                 std::to_string(n_layers) + " layers in RAM, on the CPU";
    } else {
        m->transformer_ = std::make_unique<Transformer>(m->file_, *m->backend_);
    }
    // The CPU streams the weights from the map: read them in now, not inside the first request
    // (MappedFile::populate; half of the available RAM at most, so a file that would crowd out
    // everything else is still read as the tokens need it).
    if (m->device_ == "cpu") m->file_->populate(fit::available_ram() / 2);
    m->file_->check_unchanged();  // loading read the weights
    progress(opts, 0.7f);
    check_cancel(opts);

    const ModelConfig& c = m->transformer_->config();
    m->n_ctx_ = opts.n_ctx > 0 ? opts.n_ctx : Transformer::default_context(c);
    m->n_batch_ = std::max(1, opts.n_batch);
    const KvCacheConfig kv = m->transformer_->kv_config(m->n_ctx_, opts.n_seqs, opts.kv_type);
    check_cache_type(kv, opts.path);
    if (m->device_ == "cpu") check_host_memory(kv, m->n_ctx_, opts.n_seqs);
    m->kv_ = std::make_unique<KvCache>(m->transformer_->kv_backends(), kv, m->transformer_->recurrent_backends());

    log_info("loaded " + m->info_.name + " (" + c.arch + ", " + format_param_count(m->info_.n_params) + ", " +
             m->info_.file_type + ") on " + m->backend_->name() + ", context " + std::to_string(m->n_ctx_) +
             ", KV cache " + format_bytes(m->kv_->config().total_bytes()) +
             (kv.n_recurrent_layers > 0 ? ", recurrent state " + format_bytes(kv.state_bytes()) : std::string()));
    progress(opts, 1.0f);
    return m;
}

// The backend, by opts.device: a CUDA request that cannot be met is an error, not a quiet
// run on the CPU; Auto falls back with the reason logged.
void Model::choose_device(const LoadOptions& opts) {
    BackendRequest request;
    request.n_threads = opts.n_threads;
    request.preference = opts.device;
    BackendChoice choice = choose_backend(request);
    if (opts.device == BackendPreference::Cuda && choice.device == "cpu")
        throw Error("device cuda was requested but no CUDA device can be used: " + choice.reason +
                    " (device auto falls back to the CPU)");
    backend_ = std::move(choice.backend);
    device_ = choice.device;
    device_reason_ = choice.reason;
    log_info("device: " + device_ + " (" + device_reason_ + ")");
}

// opts.n_gpu_layers and n_gpu_expert_layers, or with kAutoGpuLayers what the fit planner
// chooses for the GPU's free memory (measured now, with the context open) and the available RAM.
Model::GpuPlacement Model::gpu_placement(const LoadOptions& opts) {
    if (opts.n_gpu_layers != kAutoGpuLayers) return {opts.n_gpu_layers, opts.n_gpu_expert_layers};
    fit::FitOptions fo{opts.n_ctx, opts.n_seqs, std::max(1, opts.n_batch), opts.kv_type};
    const fit::Budget budget{backend_->memory().device_free, fit::available_ram(), true};
    const fit::FitPlan p = fit::plan(fit::fit_model(*file_), fo, budget);
    log_info("gpu layers auto: " + p.reason);
    switch (p.placement) {
        case fit::Placement::Gpu:
            return {};
        case fit::Placement::Split:
            return {p.gpu_layers, -1};
        case fit::Placement::ExpertsInRam:
            return {-1, p.gpu_expert_layers};
        case fit::Placement::Cpu:
            // Not one layer fits: the whole model on the CPU, no GPU scratch.
            backend_ = make_cpu_backend(opts.n_threads);
            device_ = "cpu";
            device_reason_ += "; " + p.reason;
            return {};
        case fit::Placement::TooLarge:
            break;
    }
    throw Error(opts.path + ": " + p.reason);
}

namespace {

// What a KV block's bytes depend on besides its tokens: the model (every metadata value in
// short form, the tensor directory, each tensor's first and last 4 KiB: a re-quantized or
// fine-tuned file with the same shapes differs there), the cache's shape and type, and which
// backend layout each layer's blocks have.
uint64_t kv_identity(const GgufFile& f, const KvCacheConfig& c, const std::vector<Backend*>& layers) {
    uint64_t h = checksum64("ember-kv-1", 10);
    const auto add = [&h](const void* p, size_t n) { h = checksum64(p, n, h); };
    const auto add_string = [&add](const std::string& s) { add(s.data(), s.size() + 1); };
    const auto add_u64 = [&add](uint64_t x) { add(&x, sizeof x); };
    add_u64(f.file_size());
    for (const std::string& key : f.metadata_order()) {
        add_string(key);
        add_string(f.get(key).to_display(8));
    }
    constexpr uint64_t kSample = 4096;
    for (const GgufTensor& t : f.tensors()) {
        add_string(t.name);
        for (const uint64_t x : {static_cast<uint64_t>(t.type), t.offset, t.n_bytes}) add_u64(x);
        for (const uint64_t d : t.dims) add_u64(d);
        if (!t.data) continue;
        const uint64_t n = std::min(kSample, t.n_bytes);
        add(t.data, n);
        add(t.data + (t.n_bytes - n), n);
    }
    for (const int64_t x : {int64_t{c.n_layers}, int64_t{c.n_kv_heads}, int64_t{c.head_dim}, int64_t{c.block_tokens},
                            static_cast<int64_t>(c.type)})
        add_u64(static_cast<uint64_t>(x));
    for (const KvLayerShape& s : c.shapes) add_u64((uint64_t{static_cast<uint32_t>(s.n_kv_heads)} << 32) | s.head_dim);
    for (const Backend* b : layers) add_string(b->kv_layout());
    return h;
}

}  // namespace

void Model::open_disk_prefix_cache(const std::filesystem::path& root, uint64_t budget_bytes) {
    const KvCacheConfig& c = kv_->config();
    const uint64_t id = kv_identity(*file_, c, transformer_->kv_backends());
    kv_->set_disk_cache(std::make_unique<DiskPrefixStore>(root, id, static_cast<uint32_t>(c.block_tokens),
                                                          c.bytes_per_block(), budget_bytes));
    const DiskPrefixStore& d = *kv_->disk_cache();
    log_info("KV disk cache: " + d.folder().string() + " (" + std::to_string(d.size()) + " blocks, " +
             format_bytes(d.bytes()) + " of " + format_bytes(budget_bytes) + ")");
    if (!kv_->has_recurrent()) return;
    // The recurrent-state snapshots beside it: a store of their own (their size is not a block's),
    // in a sibling folder, with a budget of its own as large.
    constexpr uint64_t kStateSalt = 0x5354415445534e50ull;  // "STATESNP"
    kv_->set_disk_state_store(std::make_unique<DiskPrefixStore>(
        root, id ^ kStateSalt, static_cast<uint32_t>(c.block_tokens), kv_->state_bytes_per_snapshot(), budget_bytes));
    const DiskPrefixStore& st = *kv_->disk_state_store();
    log_info("state snapshot disk cache: " + st.folder().string() + " (" + std::to_string(st.size()) + " snapshots, " +
             format_bytes(st.bytes()) + ")");
}

std::vector<DeviceMemory> Model::memory_use() const {
    const std::vector<Backend*> per_layer = transformer_->layer_backends();
    auto layers_on = [&](const Backend* b) {
        return static_cast<int32_t>(std::count(per_layer.begin(), per_layer.end(), b));
    };
    std::vector<DeviceMemory> out{device_memory(*backend_, device_, layers_on(backend_.get()))};
    if (cpu_backend_) out.push_back(device_memory(*cpu_backend_, "cpu", layers_on(cpu_backend_.get())));
    return out;
}

const std::shared_ptr<const grammar::TokenVocab>& Model::grammar_vocab() const {
    std::call_once(vocab_once_, [&] { grammar_vocab_ = ember::grammar_vocab(*tokenizer_); });
    return grammar_vocab_;
}

const ResolvedTemplate& Model::chat_template() const {
    std::call_once(template_once_, [this] {
        if (template_override_) {
            template_ = {*template_override_, "the chat template given at load (--chat-template-file)", std::nullopt};
            return;
        }
        std::vector<std::string> specials;
        for (const char* t : {"<|im_start|>", "<start_of_turn>", "<|start_header_id|>", "[INST]", "<|user|>"})
            if (tokenizer_->find_token(t)) specials.emplace_back(t);
        template_ = resolve_chat_template(file_->opt_string("tokenizer.chat_template"), config().arch, specials);
        if (template_.warning) log_warn(*template_.warning);
    });
    return template_;
}

Model::~Model() {
    kv_.reset();  // cache and weights go back to the backend before it is destroyed
    transformer_.reset();
}

}  // namespace ember
