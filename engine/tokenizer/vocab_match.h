// Whether two tokenizers are the same vocabulary, token for token: what speculative decoding
// with a draft model needs (the draft proposes token ids the target checks), and what the model
// library offers drafts by (engine/library/drafts.h).
#pragma once
#include <string>

#include "engine/tokenizer/tokenizer.h"

namespace ember {

// "" when `draft` has `target`'s vocabulary: the same kind (SentencePiece or BPE and its
// pre-tokenizer), size, text of every token, BOS/EOS/EOT ids, end-of-generation tokens and
// add_bos. Otherwise the first difference, naming it ("vocabulary size differs (target 49152,
// draft 512)").
std::string draft_vocab_mismatch(const Tokenizer& target, const Tokenizer& draft);

}  // namespace ember
