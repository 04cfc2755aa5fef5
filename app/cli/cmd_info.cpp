// `ember info MODEL.gguf [--metadata]`: what a model file is, and what it needs that Ember
// lacks, without loading weights.
#include <algorithm>
#include <cstdio>
#include <string>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "kernels/common/error.h"
#include "engine/gguf/gguf.h"
#include "engine/models/model_config.h"
#include "engine/models/model_info.h"
#include "engine/models/support_check.h"
#include "engine/tokenizer/tokenizer.h"
#include "kernels/backend_loader.h"

namespace ember::cli {
namespace {

std::string opt(const std::optional<uint64_t>& v) { return v ? std::to_string(*v) : "-"; }

void print_info(const GgufFile& f, const ModelInfo& m) {
    std::printf("file:            %s\n", f.path().c_str());
    std::printf("file size:       %s (%llu bytes)\n", format_bytes(m.file_size).c_str(),
                static_cast<unsigned long long>(m.file_size));
    std::printf("gguf version:    %u\n", f.version());
    std::printf("name:            %s\n", m.name.c_str());
    std::printf("architecture:    %s\n", m.architecture.empty() ? "(none)" : m.architecture.c_str());
    std::printf("parameters:      %s (%llu)\n", format_param_count(m.n_params).c_str(),
                static_cast<unsigned long long>(m.n_params));
    std::printf("context length:  %s\n", opt(m.context_length).c_str());
    std::printf("embedding:       %s\n", opt(m.embedding_length).c_str());
    std::printf("feed forward:    %s\n", opt(m.ffn_length).c_str());
    std::printf("layers:          %s\n", opt(m.n_layers).c_str());
    std::printf("heads:           %s (kv heads %s, head dim %s)\n", opt(m.n_heads).c_str(), opt(m.n_kv_heads).c_str(),
                opt(m.head_dim).c_str());
    std::printf("vocab size:      %llu\n", static_cast<unsigned long long>(m.vocab_size));
    std::string kind;
    for (const auto& [name, what] : supported_tokenizer_models())
        if (name == m.tokenizer_model) kind = " (" + std::string(what) + ")";
    std::printf("tokenizer:       %s%s%s\n", m.tokenizer_model.empty() ? "(none)" : m.tokenizer_model.c_str(),
                kind.c_str(), m.tokenizer_pre.empty() ? "" : (", pre-tokenizer " + m.tokenizer_pre).c_str());
    std::printf("chat template:   %s\n", m.has_chat_template ? "present" : "absent");
    std::printf("weights type:    %s\n", m.file_type.c_str());
    std::printf("tensors:         %zu\n", f.tensors().size());
    for (const auto& [type, count] : m.tensor_types)
        std::printf("  %-8s %5llu tensors  %s\n", type.c_str(), static_cast<unsigned long long>(count),
                    format_bytes(m.tensor_type_bytes.at(type)).c_str());
}

// `ember info --devices`: what Ember can run on here, and why a GPU is not used if it isn't.
int print_devices() {
    std::string cuda_status;
    for (const auto& d : list_devices({}, &cuda_status)) {
        std::printf("%-8s %s", d.id.c_str(), d.name.c_str());
        if (d.total_memory)
            std::printf("  (%s total, %s free", format_bytes(d.total_memory).c_str(),
                        format_bytes(d.free_memory).c_str());
        if (d.cc_major) std::printf(", compute %d.%d, %d SMs", d.cc_major, d.cc_minor, d.multiprocessors);
        if (d.total_memory) std::printf(")");
        std::printf("\n");
    }
    if (!cuda_status.empty()) std::printf("no CUDA device: %s\n", cuda_status.c_str());
    const BackendChoice choice = choose_backend({});
    std::printf("default:  %s (%s)\n", choice.device.c_str(), choice.reason.c_str());
    return 0;
}

}  // namespace

int cmd_info(int argc, char** argv) {
    Args args(argc, argv, 0, {}, {"--metadata", "--tensors", "--devices"});
    if (args.flag("--devices") && args.positional().empty()) return print_devices();
    if (args.positional().size() != 1)
        throw Error("usage: ember info MODEL.gguf [--metadata] [--tensors] | ember info --devices");
    const GgufFile f = GgufFile::open(args.positional()[0]);
    print_info(f, describe_model(f));
    // What the file needs that Ember lacks, all of it in one block; then the same checks
    // loading makes (hyperparameters against the tensor table). Lacking support is no error.
    const std::vector<MissingSupport> missing = missing_support(f);
    if (!missing.empty()) {
        std::printf("runs here:       no, Ember lacks:\n");
        for (const MissingSupport& m : missing) std::printf("  - %s (%s)\n", m.what.c_str(), m.detail.c_str());
    } else {
        read_model_config(f);  // throws ember::Error naming the problem: exit status 1
        std::printf("runs here:       yes (configuration matches the tensors)\n");
    }
    if (args.flag("--metadata")) {
        std::printf("metadata:\n");
        for (const auto& key : f.metadata_order())
            std::printf("  %-40s %s\n", key.c_str(), f.metadata().at(key).to_display().c_str());
    }
    if (args.flag("--tensors")) {
        for (const auto& t : f.tensors()) {
            std::string shape;
            for (auto d : t.dims) shape += (shape.empty() ? "" : " x ") + std::to_string(d);
            std::printf("  %-40s %-6s [%s]\n", t.name.c_str(), std::string(dtype_name(t.type)).c_str(), shape.c_str());
        }
    }
    return 0;
}

}  // namespace ember::cli
