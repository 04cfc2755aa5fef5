#include "engine/kv/kv_batch.h"

#include <algorithm>

namespace ember {

void KvBatch::add(int32_t seq, std::span<const int32_t> tokens, std::span<const int32_t> slots, int32_t first_pos,
                  int32_t outputs) {
    const auto index = static_cast<int32_t>(seqs_.size());
    seqs_.push_back(seq);
    for (size_t i = 0; i < tokens.size(); ++i) {
        tokens_.push_back(tokens[i]);
        positions_.push_back(first_pos + static_cast<int32_t>(i));
        seq_of_.push_back(index);
    }
    slots_.insert(slots_.end(), slots.begin(), slots.end());
    for (int32_t i = std::min<int32_t>(outputs, static_cast<int32_t>(tokens.size())); i > 0; --i)
        rows_.push_back(static_cast<int32_t>(tokens_.size()) - i);
}

BatchInfo KvBatch::info(const KvCache& kv) {
    size_t max_blocks = 0;
    for (int32_t s : seqs_) max_blocks = std::max(max_blocks, kv.block_table(s).size());
    table_.assign(seqs_.size() * max_blocks, 0);  // each sequence's row padded to the widest
    for (size_t i = 0; i < seqs_.size(); ++i) {
        const std::vector<int32_t>& t = kv.block_table(seqs_[i]);
        std::copy(t.begin(), t.end(), table_.begin() + static_cast<std::ptrdiff_t>(i * max_blocks));
    }
    BatchInfo b;
    b.tokens = tokens_;
    b.positions = positions_;
    b.seq_of = seq_of_;
    b.kv_slot = slots_;
    b.block_table = table_;
    b.n_seqs = static_cast<int32_t>(seqs_.size());
    b.max_blocks = static_cast<int32_t>(max_blocks);
    b.output_rows = rows_;
    state_slots_.clear();
    if (kv.has_recurrent())
        for (int32_t s : seqs_) state_slots_.push_back(kv.state_slot(s));
    b.state_slot = state_slots_;
    return b;
}

}  // namespace ember
