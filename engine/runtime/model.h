// A loaded model, ready to generate: the GGUF file (mapped), the backend it runs on, the
// transformer weights, the tokenizer, the chat template and the KV cache. This is what the
// CLI, the app's engine thread and (later) the server each hold one of.
#pragma once
#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "engine/gguf/gguf.h"
#include "engine/grammar/token_matcher.h"
#include "engine/kv/kv_cache.h"
#include "engine/models/model_info.h"
#include "engine/models/transformer.h"
#include "engine/telemetry/telemetry.h"  // DeviceMemory
#include "engine/template/chat_template.h"
#include "engine/tokenizer/tokenizer.h"
#include "kernels/backend.h"
#include "kernels/backend_loader.h"

namespace ember {

// The largest context (tokens per sequence) a model is loaded with: positions are int32.
constexpr int64_t kMaxContext = int64_t{1} << 30;

constexpr int kAutoGpuLayers = -2;  // LoadOptions::n_gpu_layers: let the fit planner choose

struct LoadOptions {
    std::string path;
    // Auto: the GPU when the CUDA module finds one, else the CPU; Cuda: the GPU or an error
    // saying why there is none; Cpu: the CPU.
    BackendPreference device = BackendPreference::Auto;
    int n_threads = 0;  // CPU threads (0 = one per core)
    // On a GPU: layers placed on it (-1 = all); the rest run on the CPU. kAutoGpuLayers: as
    // many as the fit planner (engine/fit) finds room for, or the CPU when none fit.
    int n_gpu_layers = -1;
    // Mixture of experts on a GPU: of the layers there, how many keep their experts (and
    // router) on it (-1 = all); the others' experts stay in RAM and run on the CPU. With
    // kAutoGpuLayers the fit planner chooses this too.
    int n_gpu_expert_layers = -1;
    int64_t n_ctx = 0;   // context per sequence; 0 = min(trained context, 4096); at most kMaxContext
    int32_t n_seqs = 1;  // sequences the KV cache holds at once
    DType kv_type = DType::F16;
    int32_t n_batch = 512;                      // prompt tokens per forward pass
    std::function<void(float)> on_progress;     // 0..1, called from the loading thread
    const std::atomic<bool>* cancel = nullptr;  // set to abort loading (throws ember::Error)
    // Jinja source used instead of the file's tokenizer.chat_template (`--chat-template-file`);
    // an error in it fails the load.
    std::optional<std::string> chat_template;
};

class Model {
public:
    // Throws ember::Error with a clear message (file, tensor, sizes) on any failure.
    static std::unique_ptr<Model> load(const LoadOptions& opts);
    ~Model();

    const ModelInfo& info() const { return info_; }
    const GgufFile& file() const { return *file_; }
    const ModelConfig& config() const { return transformer_->config(); }
    Transformer& transformer() { return *transformer_; }
    const Tokenizer& tokenizer() const { return *tokenizer_; }
    // The vocabulary as grammars see it (engine/sampling/constrained.h), built on first use.
    const std::shared_ptr<const grammar::TokenVocab>& grammar_vocab() const;
    // Resolved on first use (a raw completion never needs it, nor its fallback warning).
    const ResolvedTemplate& chat_template() const;
    KvCache& kv() { return *kv_; }
    // Gives the KV cache a disk tier under `root` (disk_prefix_store.h) of at most
    // `budget_bytes`, in the folder of this model file, KV shape and backend layout (blocks of
    // another model or layout are never read). Before the first request. A damaged folder is
    // set aside and replaced; throws ember::Error when no folder can be made (the caller then
    // runs without the disk tier). Models with linear-attention layers also get a store of
    // their recurrent-state snapshots (KvCache::set_disk_state_store) in a sibling folder, with
    // a budget of its own as large.
    void open_disk_prefix_cache(const std::filesystem::path& root, uint64_t budget_bytes);
    Backend& backend() { return *backend_; }
    const Backend& backend() const { return *backend_; }
    const std::string& device() const { return device_; }                // "cpu", "cuda:0"
    const std::string& device_reason() const { return device_reason_; }  // why that device
    int64_t n_ctx() const { return n_ctx_; }
    int32_t n_batch() const { return n_batch_; }
    // The bytes each backend holds now, by kind, with the layers placed on it. Engine thread
    // only (a backend's accounting is not synchronised): publish it with Telemetry::set_memory.
    std::vector<DeviceMemory> memory_use() const;

private:
    Model() = default;
    void choose_device(const LoadOptions& opts);
    // Where the layers go on a GPU: the first `layers` (-1 = all) and, of those, the first
    // `expert_layers` with their experts (-1 = all).
    struct GpuPlacement {
        int layers = -1, expert_layers = -1;
    };
    GpuPlacement gpu_placement(const LoadOptions& opts);
    std::shared_ptr<const GgufFile> file_;
    ModelInfo info_;
    std::unique_ptr<Backend> backend_;
    std::unique_ptr<Backend> cpu_backend_;  // partial offload: the layers that did not fit the GPU
    std::string device_, device_reason_;
    std::unique_ptr<Transformer> transformer_;
    std::unique_ptr<Tokenizer> tokenizer_;
    mutable std::once_flag template_once_, vocab_once_;
    mutable std::shared_ptr<const grammar::TokenVocab> grammar_vocab_;
    mutable ResolvedTemplate template_;
    std::optional<ChatTemplate> template_override_;
    std::unique_ptr<KvCache> kv_;
    int64_t n_ctx_ = 0;
    int32_t n_batch_ = 512;
};

}  // namespace ember
