#include "engine/library/drafts.h"

#include <algorithm>
#include <filesystem>

#include "engine/gguf/gguf.h"
#include "engine/models/model_info.h"
#include "engine/tokenizer/vocab_match.h"

namespace ember::library {

std::vector<LibraryModel> compatible_drafts(const Library& lib, const std::string& target_path) {
    const GgufFile target_file = GgufFile::open(target_path);
    const ModelInfo target = describe_model(target_file);
    const auto target_vocab = Tokenizer::from_gguf(target_file);
    std::vector<LibraryModel> out;
    std::error_code ec;
    for (LibraryModel& m : lib.list()) {
        // Smaller: fewer parameters, or the same weights in a smaller file (a 4-bit copy of an
        // 8-bit target).
        const bool smaller =
            m.parameters < target.n_params || (m.parameters == target.n_params && m.size < target.file_size);
        if (!m.present || !smaller) continue;
        if (std::filesystem::equivalent(m.path, target_path, ec)) continue;
        try {
            const GgufFile f = GgufFile::open(m.path);
            if (draft_vocab_mismatch(*target_vocab, *Tokenizer::from_gguf(f)).empty()) out.push_back(std::move(m));
        } catch (const std::exception&) {  // unreadable or without a vocabulary: not a draft
        }
    }
    std::sort(out.begin(), out.end(), [](const LibraryModel& a, const LibraryModel& b) {
        return a.parameters != b.parameters ? a.parameters < b.parameters : a.size < b.size;
    });
    return out;
}

}  // namespace ember::library
