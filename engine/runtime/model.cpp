#include "engine/runtime/model.h"

#include <algorithm>

#include "kernels/common/error.h"
#include "engine/core/log.h"

namespace ember {
namespace {

void check_cancel(const LoadOptions& o) {
    if (o.cancel && o.cancel->load()) throw Error("loading cancelled");
}

void progress(const LoadOptions& o, float p) {
    if (o.on_progress) o.on_progress(p);
}

}  // namespace

std::unique_ptr<Model> Model::load(const LoadOptions& opts) {
    std::unique_ptr<Model> m(new Model());
    progress(opts, 0.0f);
    m->file_ = std::make_shared<const GgufFile>(GgufFile::open(opts.path, /*huge_pages=*/true));
    m->info_ = describe_model(*m->file_);
    check_cancel(opts);
    m->tokenizer_ = Tokenizer::from_gguf(*m->file_);
    progress(opts, 0.2f);
    check_cancel(opts);
    BackendRequest request;
    request.n_threads = opts.n_threads;
    if (opts.device == "cpu") request.preference = BackendPreference::Cpu;
    else if (opts.device == "cuda") request.preference = BackendPreference::Cuda;
    else if (opts.device != "auto") throw Error("unknown device '" + opts.device + "' (auto, cpu or cuda)");
    BackendChoice choice = choose_backend(request);
    m->backend_ = std::move(choice.backend);
    m->device_ = choice.device;
    m->device_reason_ = choice.reason;
    log_info("device: " + m->device_ + " (" + m->device_reason_ + ")");
    const int32_t n_layers = read_model_config(*m->file_).n_layers;  // also names an unsupported architecture
    if (m->device_ != "cpu" && opts.n_gpu_layers >= 0 && opts.n_gpu_layers < n_layers) {
        // Partial offload: the first n_gpu_layers on the GPU, the rest (and the output head) on the CPU.
        m->cpu_backend_ = make_cpu_backend(opts.n_threads);
        m->transformer_ = std::make_unique<Transformer>(m->file_, *m->backend_, *m->cpu_backend_, opts.n_gpu_layers);
        m->device_reason_ += "; " + std::to_string(opts.n_gpu_layers) + " of " + std::to_string(n_layers) +
                             " layers on the GPU, the rest on the CPU";
    } else {
        m->transformer_ = std::make_unique<Transformer>(m->file_, *m->backend_);
    }
    progress(opts, 0.7f);
    check_cancel(opts);

    const ModelConfig& c = m->transformer_->config();
    m->n_ctx_ = opts.n_ctx > 0 ? opts.n_ctx : std::min<int64_t>(c.n_ctx_train, 4096);
    m->n_batch_ = std::max(1, opts.n_batch);
    m->kv_ = std::make_unique<KvCache>(m->transformer_->layer_backends(),
                                       m->transformer_->kv_config(m->n_ctx_, opts.n_seqs, opts.kv_type));

    log_info("loaded " + m->info_.name + " (" + c.arch + ", " + format_param_count(m->info_.n_params) + ", " +
             m->info_.file_type + ") on " + m->backend_->name() + ", context " + std::to_string(m->n_ctx_) +
             ", KV cache " + format_bytes(m->kv_->config().total_bytes()));
    progress(opts, 1.0f);
    return m;
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

const ResolvedTemplate& Model::chat_template() const {
    std::call_once(template_once_, [this] {
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
