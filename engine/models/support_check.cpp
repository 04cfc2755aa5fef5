#include "engine/models/support_check.h"

#include <algorithm>
#include <map>

#include "engine/models/model_config.h"
#include "engine/tokenizer/pretokenizer.h"
#include "engine/tokenizer/tokenizer.h"
#include "kernels/common/error.h"
#include "kernels/cpu/matmul.h"

namespace ember {

namespace {

std::string joined(const std::vector<std::string>& items, size_t max_items) {
    std::string s;
    for (size_t i = 0; i < items.size() && i < max_items; ++i) s += (i ? ", " : "") + items[i];
    if (items.size() > max_items) s += " and " + std::to_string(items.size() - max_items) + " more";
    return s;
}

void check_architecture(const GgufFile& f, std::vector<MissingSupport>& out) {
    const std::string arch = f.architecture();
    const auto& archs = supported_architectures();
    if (std::find(archs.begin(), archs.end(), arch) != archs.end()) return;
    out.push_back({arch.empty() ? "an architecture (general.architecture is missing)" : "architecture '" + arch + "'",
                   "Ember runs " + joined(archs, archs.size())});
}

void check_tensor_types(const GgufFile& f, std::vector<MissingSupport>& out) {
    std::map<std::string, std::vector<std::string>> users;  // unsupported type -> its tensors
    for (const GgufTensor& t : f.tensors())
        if (!cpu::matmul_supports(t.type)) users[std::string(dtype_name(t.type))].push_back(t.name);
    for (const auto& [type, names] : users)
        out.push_back({"tensor type " + type, std::to_string(names.size()) + (names.size() == 1 ? " tensor: " : " tensors: ") +
                                                  joined(names, 4)});
}

void check_tokenizer(const GgufFile& f, std::vector<MissingSupport>& out) {
    const auto model = f.opt_string("tokenizer.ggml.model");
    if (!model) {
        out.push_back({"a tokenizer", "tokenizer.ggml.model is missing"});
        return;
    }
    if (!is_supported_tokenizer_model(*model)) {
        std::vector<std::string> known;
        for (const auto& [name, what] : supported_tokenizer_models())
            known.push_back(std::string(name) + " (" + std::string(what) + ")");
        out.push_back({"tokenizer model '" + *model + "'", "tokenizer.ggml.model; Ember has " + joined(known, known.size())});
        return;
    }
    if (*model != "gpt2") return;  // SentencePiece has no pre-tokenizer; gemma4 fixes its own
    const std::string pre = f.opt_string("tokenizer.ggml.pre").value_or("default");
    try {
        PreTokenizer p(pre);
    } catch (const Error&) {
        out.push_back({"pre-tokenizer '" + pre + "'", "tokenizer.ggml.pre; Ember has " +
                                                           joined(PreTokenizer::known_names(), 1000)});
    }
}

}  // namespace

std::vector<MissingSupport> missing_support(const GgufFile& f) {
    std::vector<MissingSupport> out;
    check_architecture(f, out);
    check_tensor_types(f, out);
    check_tokenizer(f, out);
    return out;
}

}  // namespace ember
