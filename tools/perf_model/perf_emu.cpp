// ember-perf-emu: the emulator side of the offline performance model (README.md). For each
// model shape it writes a random-weight GGUF with 1 and with 2 layers (real widths, a 512-token
// vocabulary), runs one decode step at position --ctx (or, with --tokens N, a prefill chunk of N
// tokens from that position) through the CUDA backend under the
// counting emulator (kernels/cuda/emu/traffic.h) and prints every launch's traffic as JSON.
// perf_model.py subtracts the 1-layer step from the 2-layer one: what is left is one decode
// layer at the real shape (embedding and output head cancel; every layer of these shapes has
// the same launches and bytes, gemma3's sliding layers aside, whose windows exceed --ctx).
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/kv/kv_batch.h"
#include "engine/kv/kv_cache.h"
#include "engine/models/synthetic.h"
#include "engine/models/transformer.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/emu/traffic.h"

using namespace ember;

namespace {

struct ModelCase {
    SyntheticShape shape;
    std::string scheme;  // the file type people run at this size
};

// Shapes of issue #36: Llama-3.2-1B (Q4_0), Llama-3-8B (Q4_K_M), Qwen2.5-7B (q/k/v biases,
// 28:4 heads), Gemma 3 1B (head_dim 256, one KV head, QK norms, post-norms).
std::vector<ModelCase> model_cases() {
    SyntheticShape qwen{"qwen2.5-7b", 3584, 28, 28, 4, 18944, 152064, 32768, false, "qwen2"};
    SyntheticShape gemma{"gemma3-1b", 1152, 26, 4, 1, 6912, 262144, 32768, true, "gemma3", 256, 512};
    return {{synthetic_shape("llama-3.2-1b"), "Q4_0"},
            {synthetic_shape("llama-3-8b"), "Q4_K_M"},
            {qwen, "Q4_K_M"},
            {gemma, "Q4_K_M"}};
}

void print_launch(FILE* out, const emu::LaunchTraffic& l, bool last) {
    std::string sites;
    for (uintptr_t pc : l.weight_sites) sites += (sites.empty() ? "" : ", ") + std::to_string(pc);
    std::fprintf(out,
                 "      {\"kernel\": \"%s\", \"offset\": %zu, \"object\": \"%s\", \"grid\": [%u, %u, %u], "
                 "\"block\": [%u, %u, %u], \"smem\": %zu, \"requests\": %llu, \"bytes_requested\": %llu, "
                 "\"sectors\": %llu, \"ideal_sectors\": %llu, \"dram_bytes\": %llu, \"floor_bytes\": %llu, "
                 "\"uploaded_bytes\": %llu, \"written_bytes\": %llu, \"weight_sites\": [%s]}%s\n",
                 l.kernel.c_str(), static_cast<size_t>(l.kernel_offset), l.kernel_object.c_str(), l.grid.x, l.grid.y,
                 l.grid.z, l.block.x, l.block.y, l.block.z, l.smem, static_cast<unsigned long long>(l.requests),
                 static_cast<unsigned long long>(l.bytes_requested), static_cast<unsigned long long>(l.sectors),
                 static_cast<unsigned long long>(l.ideal_sectors), static_cast<unsigned long long>(l.dram_bytes),
                 static_cast<unsigned long long>(l.floor_bytes), static_cast<unsigned long long>(l.uploaded_bytes),
                 static_cast<unsigned long long>(l.written_bytes), sites.c_str(), last ? "" : ",");
}

// One step of `n_tokens` from position `ctx` (1: a decode step; the KV positions before it
// reserved but not computed: attention reads them whatever they hold), every launch counted.
std::vector<emu::LaunchTraffic> counted_step(const std::string& path, int32_t ctx, int32_t n_tokens) {
    emu::set_traffic_counting(false);  // hooks on before any allocation, nothing recorded yet
    auto file = std::make_shared<const GgufFile>(GgufFile::open(path));
    auto backend = cuda::make_cuda_backend(0);
    backend->set_graphs(false);  // the same launches; graphs would only defer them
    Transformer tr(file, *backend);
    KvCache kv(*backend, tr.kv_config(ctx + n_tokens + 16, 1));
    const int32_t seq = kv.new_sequence();
    kv.append(seq, ctx);
    const std::vector<int32_t> slots = kv.append(seq, n_tokens);
    std::vector<int32_t> tokens;
    for (int32_t i = 0; i < n_tokens; ++i) tokens.push_back(3 + (i * 37) % 500);
    KvBatch batch;
    batch.add(seq, tokens, slots, ctx, 1);
    const BatchInfo b = batch.info(kv);
    std::vector<float> logits;
    emu::take_traffic();
    emu::set_traffic_counting(true);
    tr.forward(b, kv, logits);
    backend->synchronize();
    emu::set_traffic_counting(false);
    return emu::take_traffic();
}

// All tensors' bytes: the difference of two files is one layer's weights, whatever types a
// mix gives the layers of each file (Q4_K_M chooses by layer index and count).
uint64_t weight_bytes(const std::string& path) {
    const GgufFile file = GgufFile::open(path);
    uint64_t bytes = 0;
    for (const GgufTensor& t : file.tensors()) bytes += t.n_bytes;
    return bytes;
}

void run_case(FILE* out, const ModelCase& mc, int32_t ctx, int32_t n_tokens, const std::string& dir, bool last) {
    SyntheticShape s = mc.shape;
    const int32_t head_dim = s.head_dim ? s.head_dim : s.n_embd / s.n_heads;
    std::fprintf(out,
                 "  {\"model\": \"%s\", \"arch\": \"%s\", \"scheme\": \"%s\", \"n_embd\": %d, \"n_layers\": %d, "
                 "\"n_heads\": %d, \"n_kv_heads\": %d, \"head_dim\": %d, \"n_ff\": %d, \"n_vocab\": %d, "
                 "\"sliding_window\": %d, \"ctx\": %d, \"tokens\": %d,\n",
                 s.name.c_str(), s.arch.c_str(), mc.scheme.c_str(), s.n_embd, s.n_layers, s.n_heads, s.n_kv_heads,
                 head_dim, s.n_ff, s.n_vocab, s.sliding_window, ctx, n_tokens);
    s.n_vocab = 512;  // embedding and output head cancel in the difference
    for (int layers = 1; layers <= 2; ++layers) {
        s.n_layers = layers;
        const std::string path = dir + "/perf-" + s.name + "-" + std::to_string(layers) + ".gguf";
        write_synthetic_model(path, s, mc.scheme, 5);
        std::fprintf(out, "   \"weight_bytes_%d\": %llu,\n", layers,
                     static_cast<unsigned long long>(weight_bytes(path)));
        const std::vector<emu::LaunchTraffic> launches = counted_step(path, ctx, n_tokens);
        std::filesystem::remove(path);
        std::fprintf(out, "   \"layers_%d\": [\n", layers);
        for (size_t i = 0; i < launches.size(); ++i) print_launch(out, launches[i], i + 1 == launches.size());
        std::fprintf(out, "   ]%s\n", layers == 2 ? "" : ",");
    }
    std::fprintf(out, "  }%s\n", last ? "" : ",");
}

int usage() {
    std::fprintf(stderr,
                 "usage: ember-perf-emu [--models NAME,...] [--ctx N] [--tokens N] [--out FILE]\n"
                 "  counts the global-memory traffic of one decode step per model under the CUDA emulator\n"
                 "  models: llama-3.2-1b, llama-3-8b, qwen2.5-7b, gemma3-1b (default: all)\n");
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    std::string models, out_path;
    int32_t ctx = 1024, n_tokens = 1;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--models" && i + 1 < argc) models = argv[++i];
        else if (a == "--ctx" && i + 1 < argc) ctx = std::stoi(argv[++i]);
        else if (a == "--tokens" && i + 1 < argc) n_tokens = std::stoi(argv[++i]);
        else if (a == "--out" && i + 1 < argc) out_path = argv[++i];
        else return usage();
    }
    if (ctx < 0 || n_tokens < 1) return usage();
    std::vector<ModelCase> cases;
    for (const ModelCase& mc : model_cases())
        if (models.empty() || ("," + models + ",").find("," + mc.shape.name + ",") != std::string::npos)
            cases.push_back(mc);
    if (cases.empty()) {
        std::fprintf(stderr, "ember-perf-emu: no model named in --models %s\n", models.c_str());
        return usage();
    }
    FILE* out = out_path.empty() ? stdout : std::fopen(out_path.c_str(), "w");
    if (!out) {
        std::fprintf(stderr, "ember-perf-emu: cannot write %s\n", out_path.c_str());
        return 1;
    }
    const std::string dir = std::filesystem::temp_directory_path().string();
    try {
        std::fprintf(out, "[\n");
        for (size_t i = 0; i < cases.size(); ++i) run_case(out, cases[i], ctx, n_tokens, dir, i + 1 == cases.size());
        std::fprintf(out, "]\n");
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ember-perf-emu: %s\n", e.what());
        return 1;
    }
    if (out != stdout) std::fclose(out);
    return 0;
}
