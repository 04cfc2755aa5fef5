// Context overflow roll on a real model (SmolLM2, a small context): the cached keys of the
// turns after the dropped ones are moved down (Transformer::roll_kv) instead of computed again.
//  - roll_kv itself: layer 0's keys and values depend on the token and its position only, so
//    after a roll they must equal a fresh pass's over the shorter sequence within the cache
//    type's rounding; deeper layers saw the dropped turns and differ, as a roll means;
//  - what is exact in every layer: the prefix untouched, values moved bit for bit, keys turned
//    back by exactly the dropped positions (against a float64 rotation); and on SmolLM2 cut to
//    its first layer, the greedy answer after a roll is a fresh run's up to ties within rounding;
//  - the scheduler: the turns dropped are truncate's, the kept turns come from the chat's
//    cache (rolled_tokens), a second overflow rolls again, moved blocks are never published;
//  - models whose cache cannot be rolled are refused with the reason (gemma3: sliding window;
//    qwen35: linear attention).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <future>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_writer.h"
#include "engine/kv/kv_batch.h"
#include "engine/models/synthetic.h"
#include "engine/runtime/chat.h"
#include "engine/runtime/model.h"
#include "engine/runtime/prompt_fit.h"
#include "engine/scheduler/scheduler.h"
#include "kernels/common/error.h"
#include "long_chat.h"
#include "test_data.h"

using namespace ember;
using ember::test::long_chat;

namespace {

std::unique_ptr<Model> load(const std::string& path, int64_t n_ctx, int32_t n_seqs, DType kv_type = DType::F16) {
    EMBER_REQUIRE_FILE(path);
    LoadOptions o;
    o.path = path, o.device = BackendPreference::Cpu, o.n_threads = 2, o.n_ctx = n_ctx, o.n_seqs = n_seqs;
    o.kv_type = kv_type;
    return Model::load(o);
}

// `tokens` into a new sequence of `m`'s cache, in one pass.
int32_t prefill(Model& m, std::span<const int32_t> tokens) {
    const int32_t seq = m.kv().new_sequence();
    const std::vector<int32_t> slots = m.kv().append(seq, static_cast<int32_t>(tokens.size()));
    KvBatch pass;
    pass.add(seq, tokens, slots, 0, true);
    std::vector<float> logits;
    m.transformer().forward(pass.info(m.kv()), m.kv(), logits);
    return seq;
}

// Cache layer `layer`'s K (or V) rows of a sequence's first n tokens, as F32.
std::vector<float> cached_rows(Model& m, int32_t seq, int32_t layer, bool keys, int32_t n) {
    KvCache& kv = m.kv();
    const int32_t B = kv.config().block_tokens;
    const std::vector<int32_t>& table = kv.block_table(seq);
    std::vector<int32_t> slots, zeros(static_cast<size_t>(n), 0), pos(static_cast<size_t>(n), 0);
    for (int32_t p = 0; p < n; ++p) slots.push_back(table[static_cast<size_t>(p / B)] * B + p % B);
    BatchInfo b;
    b.tokens = b.seq_of = zeros;
    b.positions = pos;
    b.kv_slot = slots;
    b.n_seqs = 1;
    Backend& be = m.backend();
    be.set_batch(b);
    const KvLayer& l = kv.layer(layer);
    Tensor k = be.alloc(MemoryKind::Activations, DType::F32, l.k.cols, n, "k");
    Tensor v = be.alloc(MemoryKind::Activations, DType::F32, l.k.cols, n, "v");
    be.load_kv(l, k, v);
    std::vector<float> out(static_cast<size_t>(l.k.cols * n));
    be.download(keys ? k : v, out.data(), out.size() * sizeof(float));
    be.free(k);
    be.free(v);
    return out;
}

// The largest |a - b| over the largest |b|.
double relative_gap(const std::vector<float>& a, const std::vector<float>& b) {
    double gap = 0, scale = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        gap = std::max(gap, std::fabs(double(a[i]) - b[i]));
        scale = std::max(scale, std::fabs(double(b[i])));
    }
    return gap / scale;
}

// Plain RoPE's rotation (adjacent pairs, no scaling) by -d positions of every head in `rows`,
// in double: an independent reference for the keys roll_kv turns back.
std::vector<float> turned_back(const std::vector<float>& rows, const ModelConfig& c, int32_t d) {
    std::vector<float> out(rows);
    const auto dim = static_cast<size_t>(c.head_dim);
    for (size_t h = 0; h < rows.size(); h += dim)
        for (int32_t i = 0; 2 * i < c.n_rot; ++i) {
            const double angle = -double(d) * std::pow(double(c.rope_base), -2.0 * i / c.n_rot);
            const double x = rows[h + 2 * i], y = rows[h + 2 * i + 1];
            out[h + 2 * i] = static_cast<float>(x * std::cos(angle) - y * std::sin(angle));
            out[h + 2 * i + 1] = static_cast<float>(x * std::sin(angle) + y * std::cos(angle));
        }
    return out;
}

// Rows [from, to) of per-token rows of `cols` values.
std::vector<float> rows_of(const std::vector<float>& all, size_t cols, int32_t from, int32_t to) {
    return {all.begin() + static_cast<std::ptrdiff_t>(from * cols),
            all.begin() + static_cast<std::ptrdiff_t>(to * cols)};
}

// SmolLM2 cut to its first layer (the real embedding, layer 0, final norm and output): a model
// whose every cached key and value depends on its token and position only.
std::string first_layer_only(const test::TempDir& dir) {
    const std::string src = test::test_model(test::kSmolLM2);
    EMBER_REQUIRE_FILE(src);
    const GgufFile f = GgufFile::open(src);
    GgufWriter w;
    for (const std::string& k : f.metadata_order()) w.set(k, f.metadata().at(k));
    w.set("llama.block_count", GgufValue::u32(1));
    for (const GgufTensor& t : f.tensors())
        if (!t.name.starts_with("blk.") || t.name.starts_with("blk.0."))
            w.add_tensor(t.name, t.type, t.dims, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
    const std::string path = dir.file("smollm2-layer0.gguf");
    w.write_file(path);
    return path;
}

RequestStats answer(Scheduler& s, const EngineRequest& r, std::string* text = nullptr,
                    std::vector<TokenLogprob>* tokens = nullptr) {
    std::promise<RequestStats> done;
    std::string out;
    s.submit(r, [&](EngineEvent&& e) {
        out += e.text;
        if (tokens) tokens->insert(tokens->end(), e.tokens.begin(), e.tokens.end());
        if (e.kind == EngineEvent::Kind::Finished) done.set_value(e.stats);
        if (e.kind == EngineEvent::Kind::Failed) done.set_exception(std::make_exception_ptr(Error(e.error)));
    });
    RequestStats st = done.get_future().get();
    if (text) *text = out;
    return st;
}

}  // namespace

TEST_CASE("roll_kv: layer 0's keys and values equal a fresh pass's at the new positions") {
    for (const DType type : {DType::F16, DType::Q8_0}) {
        CAPTURE(std::string(dtype_name(type)));
        auto model = load(test::test_model(test::kSmolLM2), 512, 2, type);
        const std::vector<ChatMessage> chat = long_chat(6);
        const std::vector<int32_t> full = chat_prompt_tokens(*model, chat);
        std::vector<ChatMessage> kept{chat[0]};
        kept.insert(kept.end(), chat.begin() + 5, chat.end());  // two exchanges dropped
        const std::vector<int32_t> fitted = chat_prompt_tokens(*model, kept);
        const std::optional<DroppedSpan> d = dropped_span(full, fitted);
        REQUIRE(d);  // ChatML renders each turn on its own
        const auto at = d->at, by = static_cast<int32_t>(d->dropped.size()), n = static_cast<int32_t>(fitted.size());
        REQUIRE(at > 16);
        REQUIRE(by > 16);
        const int32_t rolled = prefill(*model, full);
        model->transformer().roll_kv(model->kv(), rolled, at, by, static_cast<int32_t>(full.size()));
        REQUIRE(model->kv().length(rolled) == n);
        const int32_t fresh = prefill(*model, fitted);
        // Each side rounds its rows to the cache type (F16: 2^-11 of a value; Q8_0: half a step,
        // 1/254 of its block's largest); the moved keys are turned back in float (a few u) and
        // rounded again. Two roundings on one side, one on the other: 3 of them.
        const double bound = type == DType::F16 ? 3 * 0x1p-11 : 3.0 / 254;
        const std::vector<float> k_rolled = cached_rows(*model, rolled, 0, true, n);
        const std::vector<float> k_fresh = cached_rows(*model, fresh, 0, true, n);
        CHECK(relative_gap(k_rolled, k_fresh) < bound);
        CHECK(relative_gap(cached_rows(*model, rolled, 0, false, n), cached_rows(*model, fresh, 0, false, n)) < bound);
        // Not turned back, the moved keys would be far off: the check above sees positions.
        const int32_t unmoved = prefill(*model, full);
        std::vector<float> k_full = cached_rows(*model, unmoved, 0, true, static_cast<int32_t>(full.size()));
        const auto cols = static_cast<std::ptrdiff_t>(k_full.size() / full.size());
        k_full.erase(k_full.begin() + at * cols, k_full.begin() + (at + by) * cols);
        CHECK(relative_gap(k_full, k_fresh) > 0.1);
        // A deeper layer saw the dropped turns: its moved rows differ from the fresh pass's.
        const int32_t last = model->kv().config().n_layers - 1;
        CHECK(relative_gap(cached_rows(*model, rolled, last, false, n), cached_rows(*model, fresh, last, false, n)) >
              bound);
        for (const int32_t s : {rolled, fresh, unmoved}) model->kv().free_sequence(s);
    }
}

// What a roll keeps exact in every layer, against the same pass over the whole conversation:
//  - the rows before the dropped turns are not touched, and equal a fresh pass's over the
//    shorter conversation bit for bit (causal attention; batch-invariant kernels);
//  - a moved value carries no position: its bytes are the ones it had (F16 through F32 is
//    exact; Q8_0 quantized again from its own dequantized block gives back the same scale,
//    127 * d / 127, and the same integers);
//  - a moved key is the key that pass computed, turned back by exactly the dropped positions:
//    equal to a float64 rotation of it within one rounding to the cache type (F16: 2^-11 of
//    its value; Q8_0: half a step, 1/254 of its block's largest), with 1 % for float's cos/sin.
// What is not exact: in layers past 0 the moved rows were computed with the dropped turns in
// view, so they differ from a fresh pass over the shorter conversation (the case above), and
// so may the answer after a roll.
TEST_CASE("roll_kv, every layer: the prefix kept, values moved bit for bit, keys turned back by the drop") {
    for (const DType type : {DType::F16, DType::Q8_0}) {
        CAPTURE(std::string(dtype_name(type)));
        auto model = load(test::test_model(test::kSmolLM2), 512, 3, type);
        const ModelConfig& c = model->config();
        REQUIRE_FALSE(c.rope_neox);  // the reference rotation is plain RoPE's, as SmolLM2 has
        REQUIRE(c.rope_scale == 1.0f);
        REQUIRE(c.rope_ext_factor == 0.0f);
        const std::vector<ChatMessage> chat = long_chat(6);
        const std::vector<int32_t> full = chat_prompt_tokens(*model, chat);
        std::vector<ChatMessage> kept{chat[0]};
        kept.insert(kept.end(), chat.begin() + 5, chat.end());
        const std::vector<int32_t> fitted = chat_prompt_tokens(*model, kept);
        const std::optional<DroppedSpan> d = dropped_span(full, fitted);
        REQUIRE(d);
        const auto at = d->at, by = static_cast<int32_t>(d->dropped.size()), n = static_cast<int32_t>(fitted.size());
        const auto total = static_cast<int32_t>(full.size());
        const int32_t whole = prefill(*model, full);
        const int32_t rolled = prefill(*model, full);
        model->transformer().roll_kv(model->kv(), rolled, at, by, total);
        const int32_t fresh = prefill(*model, fitted);
        const size_t cols = static_cast<size_t>(c.kv_dim());
        const double bound = (type == DType::F16 ? 0x1p-11 : 1.0 / 254) * 1.01;
        for (int32_t layer = 0; layer < c.n_layers; ++layer) {
            CAPTURE(layer);
            for (const bool keys : {true, false}) {
                CAPTURE(keys);
                const std::vector<float> before = cached_rows(*model, whole, layer, keys, total),
                                         after = cached_rows(*model, rolled, layer, keys, n),
                                         shorter = cached_rows(*model, fresh, layer, keys, n);
                CHECK(rows_of(after, cols, 0, at) == rows_of(before, cols, 0, at));
                CHECK(rows_of(after, cols, 0, at) == rows_of(shorter, cols, 0, at));
                const std::vector<float> moved = rows_of(after, cols, at, n),
                                         was = rows_of(before, cols, at + by, total);
                if (keys) {
                    CHECK(relative_gap(moved, turned_back(was, c, by)) < bound);
                    CHECK(relative_gap(moved, turned_back(was, c, by + 1)) > 10 * bound);  // it sees one position
                } else {
                    CHECK(moved == was);
                }
            }
        }
        for (const int32_t s : {whole, rolled, fresh}) model->kv().free_sequence(s);
    }
}

// Where a roll is exact for the whole model (one layer, whose keys and values depend on their
// token and position only), the answer after a roll is a fresh run's on the kept turns up to
// the cache type's rounding: the moved rows differ from the fresh pass's by one rounding (the
// case above), which moves a log-probability here by 0.003 (F16) to 0.006 (Q8_0) nats on the
// first token, measured, and more on later ones, which attend over more moved rows (up to
// 0.033 in the -O1 sanitizer build, whose sums round differently). So the greedy tokens are
// the same until a tie closer than kTie, where
// the rolled answer's pick must be the fresh run's runner-up. The first layer alone answers
// newlines (p ~ 0.98); those are banned so that the answer has words, and ties, to compare.
TEST_CASE("roll on a one-layer model: the greedy answer is a fresh run's up to ties within rounding") {
    constexpr double kTie = 0.05;  // nats
    test::TempDir dir;
    const std::string path = first_layer_only(dir);
    for (const DType type : {DType::F16, DType::Q8_0}) {
        CAPTURE(std::string(dtype_name(type)));
        auto model = load(path, 256, 2, type);
        REQUIRE(model->config().n_layers == 1);
        Scheduler s(*model, {});
        EngineRequest r;
        r.sampling = SamplingParams::greedy();
        r.sampling.logit_bias[198] = -INFINITY;  // "\n"
        r.max_tokens = 24;
        r.ignore_eog = true;
        r.top_logprobs = 2;
        r.cache_key = "chat";
        r.context_overflow = OverflowPolicy::Roll;
        r.messages = long_chat(4);
        answer(s, r);
        r.messages = long_chat(8);
        EngineRequest fresh = r;
        fresh.cache_key.clear();
        fresh.reuse_prefix = false;  // every token computed on the kept turns
        fresh.context_overflow = OverflowPolicy::Truncate;
        std::vector<TokenLogprob> a, b;
        const RequestStats rolled = answer(s, r, nullptr, &a), cut = answer(s, fresh, nullptr, &b);
        REQUIRE(rolled.dropped_turns > 0);
        CHECK(rolled.dropped_turns == cut.dropped_turns);
        CHECK(rolled.rolled_tokens > 16);  // kept turns the first answer cached (not its answer: the
        CHECK(cut.reused_tokens == 0);     // history carries another), moved
        REQUIRE(a.size() == 24);
        REQUIRE(b.size() == 24);
        size_t same = 0;
        for (; same < a.size() && a[same].id == b[same].id; ++same)
            CHECK(std::fabs(a[same].logprob - b[same].logprob) < kTie);
        MESSAGE(dtype_name(type), ": the first ", same, " of 24 greedy tokens the same");
        CHECK(same >= 1);
        if (same < a.size()) {  // a tie: the rolled pick is the fresh run's runner-up, as likely
            const std::vector<TopLogprob>& top = b[same].top;
            const auto it =
                std::find_if(top.begin(), top.end(), [&](const TopLogprob& t) { return t.id == a[same].id; });
            REQUIRE(it != top.end());
            CHECK(b[same].logprob - it->logprob < kTie);
        }
    }
}

TEST_CASE("roll: the turns truncate drops, the rest moved from the chat's cache, again on the next overflow") {
    auto model = load(test::test_model(test::kSmolLM2), 256, 2);
    Scheduler s(*model, {});
    EngineRequest r;
    r.sampling = SamplingParams::greedy();
    r.max_tokens = 12;
    r.cache_key = "chat";
    r.context_overflow = OverflowPolicy::Roll;
    r.messages = long_chat(4);  // fits: nothing dropped, nothing rolled
    RequestStats st = answer(s, r);
    CHECK(st.dropped_turns == 0);
    CHECK(st.rolled_tokens == 0);

    r.messages = long_chat(8);
    REQUIRE(static_cast<int64_t>(chat_prompt_tokens(*model, r.messages).size()) > 256);
    EngineRequest truncated = r;
    truncated.context_overflow = OverflowPolicy::Truncate;
    truncated.cache_key.clear();
    std::string rolled_text, truncated_text;
    st = answer(s, r, &rolled_text);
    const RequestStats cut = answer(s, truncated, &truncated_text);
    CHECK(st.dropped_turns == cut.dropped_turns);  // the same turns left out
    CHECK(st.prompt_tokens == cut.prompt_tokens);
    REQUIRE(st.dropped_turns > 0);
    // The kept turns that the first answer cached (exchanges 2 and 3 at least) were moved.
    CHECK(st.rolled_tokens > 32);
    CHECK(st.reused_tokens > st.rolled_tokens);  // and the system prompt before them kept
    MESSAGE("rolled: \"", rolled_text, "\"; truncated: \"", truncated_text, "\"");
    CHECK_FALSE(rolled_text.empty());

    // The moved blocks were not published: the truncate request (no key, the same prompt) found
    // only the whole blocks before the dropped turns, which the first answer published.
    std::vector<ChatMessage> kept{r.messages[0]};
    kept.insert(kept.end(), r.messages.begin() + 1 + cut.dropped_turns, r.messages.end());
    const std::vector<int32_t> first = chat_prompt_tokens(*model, long_chat(4)),
                               fitted = chat_prompt_tokens(*model, kept);
    const auto at = std::mismatch(first.begin(), first.end(), fitted.begin(), fitted.end()).first - first.begin();
    CHECK(cut.reused_tokens == at / 16 * 16);

    // The next overflow drops further turns of what the chat's sequence holds: rolled again.
    r.messages = long_chat(10);
    st = answer(s, r);
    CHECK(st.dropped_turns > cut.dropped_turns);
    CHECK(st.rolled_tokens > 32);
}

TEST_CASE("roll is refused for a model whose cache cannot be rolled, with the reason") {
    auto model = load(test::test_model(test::kGemma3), 256, 1);
    CHECK(model->transformer().roll_refusal().find("sliding window") != std::string::npos);
    Scheduler s(*model, {});
    EngineRequest r;
    r.messages = long_chat(1);
    r.context_overflow = OverflowPolicy::Roll;
    try {
        s.submit(r, nullptr);
        FAIL("no error");
    } catch (const Error& e) {
        const std::string what = e.what();
        CHECK(what.find("context overflow roll is not available for this model") != std::string::npos);
        CHECK(what.find("sliding window") != std::string::npos);
        CHECK(what.find("truncate") != std::string::npos);
    }
}

TEST_CASE("find_drop finds the run a chat dropped, and dropped_span where the turns went") {
    const std::vector<int32_t> cached{1, 2, 3, 4, 5, 6, 7, 8, 9};
    const CachedDrop d = find_drop(cached, std::vector<int32_t>{1, 2, 6, 7, 8, 10});
    CHECK(d.at == 2);
    CHECK(d.by == 3);
    CHECK(d.kept == 3);
    CHECK(find_drop(cached, std::vector<int32_t>{1, 2, 11}).kept == 0);
    const auto s = dropped_span(std::vector<int32_t>{1, 2, 3, 4, 5, 6}, std::vector<int32_t>{1, 2, 5, 6});
    REQUIRE(s);
    CHECK(s->at == 2);
    CHECK(s->dropped == std::vector<int32_t>{3, 4});
    CHECK(with_dropped(std::vector<int32_t>{1, 2, 5, 6}, *s) == std::vector<int32_t>{1, 2, 3, 4, 5, 6});
    CHECK_FALSE(dropped_span(std::vector<int32_t>{1, 2, 3, 4}, std::vector<int32_t>{1, 9, 4}));
}

// qwen35's linear-attention layers keep a recurrent state that has read every token: no
// turn can be taken out of it (a synthetic file: the refusal depends on the layout only).
TEST_CASE("roll is refused for a model with linear-attention layers") {
    test::TempDir dir;
    const std::string path = dir.file("qwen35.gguf");
    write_synthetic_model(path, synthetic_shape("tiny-qwen35"), "F32");
    auto model = load(path, 256, 1);
    CHECK(model->transformer().roll_refusal().find("linear attention") != std::string::npos);
}
