// A rolled context: the oldest turns of a cached sequence dropped and the turns after them
// moved down in place of computing them again (the context overflow policy roll,
// engine/runtime/prompt_fit.h). A key cached at position p was rotated by RoPE's angle for p;
// every angle is linear in the position, so turning it back by d positions (rope with
// RopeParams::reverse) gives the key at p - d. Values carry no position and are copied.
// Through F32 (Backend::load_kv, then store_kv): F16 keys take one more rounding, Q8_0 keys
// are quantized again; moved values keep their bytes.
#include <algorithm>
#include <string>
#include <vector>

#include "engine/models/transformer.h"
#include "kernels/common/error.h"
#include "kernels/common/rope_yarn.h"

namespace ember {

std::string Transformer::roll_refusal() const {
    for (const Layer& l : layers_) {
        if (l.state_layer >= 0)
            return "layer " + std::to_string(l.index) +
                   " is linear attention, whose recurrent state has read every token and cannot drop some";
        if (!l.stores_kv)
            return "layer " + std::to_string(l.index) +
                   " attends over an earlier layer's keys and values (shared KV), which rolling is not "
                   "implemented for";
        if (l.attention.window > 0)
            return "layer " + std::to_string(l.index) + " attends over a sliding window of " +
                   std::to_string(l.attention.window) +
                   " tokens, whose cached view is not that of a shorter conversation once turns are dropped from it";
    }
    return {};
}

void Transformer::roll_kv(KvCache& kv, int32_t seq, int32_t at, int32_t by, int32_t end) {
    if (const std::string why = roll_refusal(); !why.empty())
        throw Error("the context of this model cannot be rolled: " + why);
    if (at < 0 || by <= 0 || end <= at + by || end > kv.length(seq))
        throw Error("roll_kv: positions [" + std::to_string(at) + ", " + std::to_string(at + by) +
                    ") dropped and up to " + std::to_string(end) + " kept do not fit a sequence of " +
                    std::to_string(kv.length(seq)) + " tokens");
    const int32_t B = kv.config().block_tokens;
    const std::vector<int32_t> table = kv.block_table(seq);  // the slots before anything moves
    const auto slot = [&](int32_t p) { return table[static_cast<size_t>(p / B)] * B + p % B; };
    // Blocks from `at` on are let go (all of the one holding `at` when another sequence shares
    // it: then [kept, at) moves too, to its own place). Their bytes stay until a pass writes
    // them, and every row is read (load_kv) before any is written (store_kv).
    const int32_t kept = kv.truncate(seq, at);
    std::vector<int32_t> src, back;
    for (int32_t p = kept; p < end - by; ++p) {
        src.push_back(slot(p < at ? p : p + by));
        back.push_back(p < at ? 0 : by);
    }
    const std::vector<int32_t> dst = kv.append(seq, end - by - kept);
    move_kv(kv, src, dst, back);
}

void Transformer::move_kv(KvCache& kv, std::span<const int32_t> src, std::span<const int32_t> dst,
                          std::span<const int32_t> back) {
    const auto n = static_cast<int64_t>(src.size());
    if (n == 0) return;
    const std::vector<int32_t> zeros(src.size(), 0);
    BatchInfo from;  // load_kv reads kv_slot; rope (reverse) turns each row back by positions
    from.tokens = from.seq_of = zeros;
    from.positions = back;
    from.kv_slot = src;
    from.n_seqs = 1;
    BatchInfo to = from;
    to.kv_slot = dst;
    for (const Layer& l : layers_) {
        if (!l.stores_kv) continue;
        Backend& be = *l.device->backend;
        KvLayer& layer = kv.layer(l.kv_layer);
        struct Rows {  // the layer's rows in F32, given back however the layer ends
            Backend& be;
            Tensor k, v;
            ~Rows() {
                try {
                    be.synchronize();  // the ops that use them are done (a failure was thrown already)
                } catch (...) {}
                for (Tensor* t : {&k, &v})
                    if (t->data) be.free(*t);
            }
        } rows{be, {}, {}};
        rows.k = be.alloc(MemoryKind::Activations, DType::F32, layer.k.cols, n, "roll k");
        rows.v = be.alloc(MemoryKind::Activations, DType::F32, layer.k.cols, n, "roll v");
        Tensor &k = rows.k, &v = rows.v;
        be.set_batch(from);
        be.load_kv(layer, k, v);
        RopeParams p = l.rope_k;
        p.reverse = true;
        // A pure rotation: YaRN's gain (attn_factor and its own) is in the cached key already.
        p.attn_factor = static_cast<float>(p.attn_factor / rope_magnitude(p));
        Tensor k_heads = k.reshape(layer.head_dim);
        be.rope(k_heads, p);
        be.set_batch(to);
        be.store_kv(layer, k, v);
        be.synchronize();  // an error here is this roll's
    }
}

}  // namespace ember
