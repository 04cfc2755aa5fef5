#include "engine/tokenizer/vocab_match.h"

namespace ember {
namespace {

std::string special_mismatch(const char* name, int32_t target, int32_t draft) {
    if (target == draft) return "";
    return std::string(name) + " token differs (target " + std::to_string(target) + ", draft " + std::to_string(draft) +
           ")";
}

}  // namespace

std::string draft_vocab_mismatch(const Tokenizer& target, const Tokenizer& draft) {
    if (target.kind() != draft.kind())
        return "tokenizer kind differs (target " + std::string(target.kind()) + ", draft " + std::string(draft.kind()) +
               ")";
    if (target.n_vocab() != draft.n_vocab())
        return "vocabulary size differs (target " + std::to_string(target.n_vocab()) + ", draft " +
               std::to_string(draft.n_vocab()) + ")";
    for (int32_t id = 0; id < target.n_vocab(); ++id)
        if (target.token_text(id) != draft.token_text(id))
            return "token " + std::to_string(id) + " differs (target '" + target.token_text(id) + "', draft '" +
                   draft.token_text(id) + "')";
    for (const std::string& why :
         {special_mismatch("BOS", target.bos(), draft.bos()), special_mismatch("EOS", target.eos(), draft.eos()),
          special_mismatch("EOT", target.eot(), draft.eot())})
        if (!why.empty()) return why;
    if (target.eog_ids() != draft.eog_ids()) return "end-of-generation tokens differ";
    if (target.add_bos() != draft.add_bos()) return "add_bos differs";
    return "";
}

}  // namespace ember
