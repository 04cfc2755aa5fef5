#include "engine/tokenizer/tokenizer.h"

#include <algorithm>
#include <charconv>

#include "kernels/common/error.h"
#include "engine/core/log.h"
#include "engine/gguf/gguf.h"
#include "engine/tokenizer/bpe.h"
#include "engine/tokenizer/pretokenizer.h"
#include "engine/tokenizer/special_tokens.h"
#include "engine/tokenizer/spm.h"
#include "engine/tokenizer/unicode.h"
#include "engine/tokenizer/vocab.h"

namespace ember {

namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// Texts of the end-of-turn tokens of common chat models: the first one a vocab has (as a
// control or user-defined token) is its eot() when the metadata names none.
constexpr std::string_view kEndOfTurnTexts[] = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<EOT>",
    "_<EOT>",
    "<\xEF\xBD\x9C"
    "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",  // DeepSeek
};
// Further texts that also end generation.
constexpr std::string_view kEndOfGenerationTexts[] = {
    "<|eom_id|>", "<|end_of_text|>", "<|return|>", "<|call|>", "</s>",
};

std::optional<int32_t> opt_id(const GgufFile& f, std::string_view key) {
    const GgufValue* v = f.find(key);
    if (!v) return std::nullopt;
    if (!v->is_int()) throw Error(f.path() + ": " + std::string(key) + " is not an integer");
    // -1 and 0xFFFFFFFF mean "none"; any other value that is no id is ignored too, but said
    // (as an id past the vocab is, in init_special_ids), whichever id it is.
    const auto none = [&](auto x) -> std::optional<int32_t> {
        if (x != decltype(x)(-1) && x != decltype(x)(UINT32_MAX))
            log_warn("tokenizer: ignoring " + std::string(key) + " = " + std::to_string(x) + ", not a token id");
        return std::nullopt;
    };
    if (const auto* u = std::get_if<uint64_t>(&v->v)) return *u <= INT32_MAX ? std::optional(int32_t(*u)) : none(*u);
    const int64_t x = v->as_i64();
    return x >= 0 && x <= INT32_MAX ? std::optional(int32_t(x)) : none(x);
}

// "<0xAB>" -> 0xAB, or -1.
int parse_byte_token(std::string_view s) {
    if (s.size() != 6 || s.substr(0, 3) != "<0x" || s[5] != '>') return -1;
    int v = 0;
    auto [p, ec] = std::from_chars(s.data() + 3, s.data() + 5, v, 16);
    return ec == std::errc() && p == s.data() + 5 ? v : -1;
}

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
    std::string out;
    out.reserve(s.size());
    for (size_t pos = 0;;) {
        const size_t hit = s.find(from, pos);
        out.append(s.substr(pos, hit == s.npos ? s.npos : hit - pos));
        if (hit == s.npos) return out;
        out.append(to);
        pos = hit + from.size();
    }
}

}  // namespace

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;

TokenizerData read_tokenizer_data(const GgufFile& f) {
    TokenizerData d;
    d.model = f.get_string("tokenizer.ggml.model");
    d.pre = f.opt_string("tokenizer.ggml.pre").value_or("default");
    d.tokens = f.get_string_array("tokenizer.ggml.tokens");
    if (f.has("tokenizer.ggml.scores"))
        for (double s : f.get_number_array("tokenizer.ggml.scores")) d.scores.push_back(float(s));
    if (f.has("tokenizer.ggml.token_type"))
        for (double t : f.get_number_array("tokenizer.ggml.token_type"))
            d.token_types.push_back(t >= 0 && t <= 255 ? int32_t(t) : 0);  // 0: undefined
    if (f.has("tokenizer.ggml.merges")) d.merges = f.get_string_array("tokenizer.ggml.merges");
    d.bos = opt_id(f, "tokenizer.ggml.bos_token_id");
    d.eos = opt_id(f, "tokenizer.ggml.eos_token_id");
    d.unk = opt_id(f, "tokenizer.ggml.unknown_token_id");
    d.pad = opt_id(f, "tokenizer.ggml.padding_token_id");
    d.eot = opt_id(f, "tokenizer.ggml.eot_token_id");
    d.eom = opt_id(f, "tokenizer.ggml.eom_token_id");
    d.add_bos = f.opt_bool("tokenizer.ggml.add_bos_token");
    d.add_eos = f.opt_bool("tokenizer.ggml.add_eos_token");
    d.add_space_prefix = f.opt_bool("tokenizer.ggml.add_space_prefix");
    return d;
}

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GgufFile& f) {
    TokenizerData d = read_tokenizer_data(f);
    try {
        return from_data(std::move(d));
    } catch (const Error& e) {
        throw Error(f.path() + ": " + e.what());
    }
}

namespace {

void validate(const TokenizerData& d) {
    if (!is_supported_tokenizer_model(d.model)) {
        std::string known;
        for (const auto& [name, what] : supported_tokenizer_models())
            known += (known.empty() ? "" : ", ") + std::string(name) + " = " + std::string(what);
        throw Error("unsupported tokenizer model '" + d.model + "' (tokenizer.ggml.model; supported: " + known + ")");
    }
    const size_t n = d.tokens.size();
    if (n == 0 || n > size_t(INT32_MAX)) throw Error("tokenizer.ggml.tokens is empty or too large");
    if (!d.scores.empty() && d.scores.size() != n)
        throw Error("tokenizer.ggml.scores has " + std::to_string(d.scores.size()) + " entries for " +
                    std::to_string(n) + " tokens");
    if (!d.token_types.empty() && d.token_types.size() != n)
        throw Error("tokenizer.ggml.token_type has " + std::to_string(d.token_types.size()) + " entries for " +
                    std::to_string(n) + " tokens");
    if (d.model != "llama" && d.merges.empty()) throw Error("BPE vocab without tokenizer.ggml.merges");
}

std::unique_ptr<Vocab> build_vocab(TokenizerData& d) {
    const size_t n = d.tokens.size();
    auto v = std::make_unique<Vocab>();
    v->text = std::move(d.tokens);
    v->score = d.scores.empty() ? std::vector<float>(n, 0.0f) : std::move(d.scores);
    v->type.resize(n, TokenType::Normal);
    for (size_t i = 0; i < d.token_types.size(); ++i) {
        const int32_t ty = d.token_types[i];
        v->type[i] = ty >= 1 && ty <= 6 ? TokenType(ty) : TokenType::Normal;
    }
    v->ids.reserve(n);
    for (size_t i = 0; i < n; ++i) v->ids.emplace(v->text[i], int32_t(i));  // keeps the lowest id
    return v;
}

}  // namespace

const std::vector<std::pair<std::string_view, std::string_view>>& supported_tokenizer_models() {
    static const std::vector<std::pair<std::string_view, std::string_view>> models = {
        {"llama", "SentencePiece"}, {"gpt2", "byte-level BPE"}, {"gemma4", "SentencePiece-style BPE"}};
    return models;
}

bool is_supported_tokenizer_model(std::string_view model) {
    for (const auto& [name, what] : supported_tokenizer_models())
        if (name == model) return true;
    return false;
}

std::unique_ptr<Tokenizer> Tokenizer::from_data(TokenizerData d) {
    validate(d);
    const bool spm = d.model == "llama";
    std::unique_ptr<Tokenizer> t(new Tokenizer());
    t->vocab_ = build_vocab(d);
    // Gemma 4's BPE always splits on newlines only, whatever tokenizer.ggml.pre says (llama.cpp
    // sets the same), and marks spaces with U+2581 as SentencePiece does.
    t->space_marks_ = d.model == "gemma4";
    if (t->space_marks_) d.pre = "gemma4";
    if (!spm) t->pre_ = std::make_unique<PreTokenizer>(d.pre);
    t->kind_ = spm ? "spm" : "bpe/" + t->pre_->name();
    t->init_special_ids(d, spm);

    // Text a vocab cannot spell becomes the unknown token, unless that token would end
    // generation (StarCoder's unknown token is <|endoftext|>): then it is dropped.
    const int32_t unk = t->unk_ >= 0 && !t->is_eog(t->unk_) ? t->unk_ : -1;
    if (spm) t->spm_ = std::make_unique<SpmModel>(*t->vocab_, unk);
    else
        t->bpe_ =
            std::make_unique<BpeModel>(*t->vocab_, d.merges, t->pre_->ignore_merges(), unk,
                                       t->space_marks_ ? BpeModel::Alphabet::Utf8 : BpeModel::Alphabet::ByteLevel);
    t->specials_ = std::make_unique<SpecialTokenMatcher>(*t->vocab_, t->eog_);
    return t;
}

// Special ids, flags and the end-of-generation set.
void Tokenizer::init_special_ids(const TokenizerData& d, bool spm) {
    const Vocab& v = *vocab_;
    auto valid = [&](std::optional<int32_t> id, const char* what) -> int32_t {
        if (!id) return -1;
        if (*id >= v.size()) {
            log_warn("tokenizer: ignoring " + std::string(what) + " id " + std::to_string(*id) +
                     " outside the vocab of " + std::to_string(v.size()));
            return -1;
        }
        return *id;
    };
    // SentencePiece's conventional ids when the file does not say.
    bos_ = valid(spm && !d.bos ? std::optional<int32_t>(1) : d.bos, "bos");
    eos_ = valid(spm && !d.eos ? std::optional<int32_t>(2) : d.eos, "eos");
    unk_ = valid(spm && !d.unk ? std::optional<int32_t>(0) : d.unk, "unknown");
    pad_ = valid(d.pad, "padding");
    eot_ = valid(d.eot, "eot");
    const int32_t eom = valid(d.eom, "eom");

    // llama.cpp's defaults: SPM adds BOS and a space prefix; Llama 3 style BPE adds BOS.
    // Gemma 4 files that say add_bos = false are wrong about it: llama.cpp adds BOS regardless.
    add_bos_ = (d.add_bos.value_or(spm || (pre_ && pre_->variant() == "llama3")) || space_marks_) && bos_ >= 0;
    add_eos_ = d.add_eos.value_or(false) && eos_ >= 0;
    add_space_prefix_ = spm && d.add_space_prefix.value_or(true);

    // End of generation: the named ids plus control/user tokens with end-of-turn texts.
    for (int32_t id : {eos_, eot_, eom})
        if (id >= 0) eog_.push_back(id);
    auto special_text = [&](std::string_view s) -> std::optional<int32_t> {
        auto id = v.find(s);
        if (id && (v.type[*id] == TokenType::Control || v.type[*id] == TokenType::UserDefined)) return id;
        return std::nullopt;
    };
    for (std::string_view s : kEndOfTurnTexts)
        if (auto id = special_text(s)) {
            if (eot_ < 0) eot_ = *id;
            eog_.push_back(*id);
        }
    for (std::string_view s : kEndOfGenerationTexts)
        if (auto id = special_text(s)) eog_.push_back(*id);
    // gpt-oss (harmony): <|end|> closes one message (the thinking on the analysis channel), not
    // the answer, which ends with <|return|> (or <|call|>); llama.cpp drops it from EOG likewise.
    const auto end = special_text("<|end|>"), ret = special_text("<|return|>");
    if (end && ret && special_text("<|call|>")) {
        if (eot_ == *end) eot_ = *ret;
        if (eos_ != *end) eog_.erase(std::remove(eog_.begin(), eog_.end(), *end), eog_.end());
    }
    std::sort(eog_.begin(), eog_.end());
    eog_.erase(std::unique(eog_.begin(), eog_.end()), eog_.end());
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 4);
    if (add_special && add_bos_) out.push_back(bos_);
    bool after_special = true;  // SPM's space prefix goes at the start and after special tokens
    for (const auto& frag : specials_->split(text, parse_special)) {
        if (frag.token >= 0) {
            out.push_back(frag.token);
            after_special = true;
        } else {
            encode_text(frag.text, after_special && add_space_prefix_, out);
            after_special = false;
        }
    }
    if (add_special && add_eos_) out.push_back(eos_);
    return out;
}

void Tokenizer::encode_text(std::string_view text, bool space_prefix, std::vector<int32_t>& out) const {
    if (spm_) {
        std::string escaped = space_prefix ? std::string(kSpaceMark) : std::string();
        escaped += replace_all(text, " ", kSpaceMark);
        spm_->encode(escaped, out);
        return;
    }
    std::string marked;
    if (space_marks_) {
        marked = replace_all(text, " ", kSpaceMark);
        text = marked;
    }
    // Repeated words are common in real text; remember each short word's ids for this call.
    StringMap<std::vector<int32_t>> cache;
    for (std::string_view piece : pre_->split(text)) {
        // Gemma 4: a run of newlines that is a token is that token (no merges needed).
        if (space_marks_ && piece.front() == '\n')
            if (auto id = vocab_->find(piece)) {
                out.push_back(*id);
                continue;
            }
        if (piece.size() > 64) {
            bpe_->encode_piece(piece, out);
            continue;
        }
        auto it = cache.find(piece);
        if (it == cache.end()) {
            std::vector<int32_t> ids;
            bpe_->encode_piece(piece, ids);
            it = cache.emplace(std::string(piece), std::move(ids)).first;
        }
        out.insert(out.end(), it->second.begin(), it->second.end());
    }
}

void Tokenizer::append_piece(int32_t id, bool skip_special, bool& at_text_start, std::string& out) const {
    check_id(id);
    const std::string& text = vocab_->text[id];
    switch (vocab_->type[id]) {
        case TokenType::Control:
            if (!skip_special) out += text;
            at_text_start = true;
            return;
        case TokenType::Unknown:
        case TokenType::Unused:
            if (!skip_special) out += text;
            return;
        case TokenType::UserDefined:                        // stored as plain text in both vocab kinds
            if (!skip_special || !is_eog(id)) out += text;  // an end-of-generation one is control-like
            at_text_start = true;
            return;
        case TokenType::Byte:
            if (int b = parse_byte_token(text); b >= 0) {
                out += char(b);
                at_text_start = false;
                return;
            }
            break;
        default:
            break;
    }
    if (spm_ || space_marks_) {
        std::string piece = replace_all(text, kSpaceMark, " ");
        const bool strip = add_space_prefix_ && at_text_start && !piece.empty() && piece[0] == ' ';
        out.append(piece, strip ? 1 : 0);
    } else {
        // Map the byte-level alphabet back to bytes; anything outside it is kept as is.
        for (size_t pos = 0; pos < text.size();) {
            const auto st = unicode::decode_utf8(text, pos);
            const int b = st.status == unicode::Utf8Step::Ok ? unicode::cp_to_byte(st.cp) : -1;
            const size_t len = st.status == unicode::Utf8Step::Ok ? st.len : 1;
            if (b >= 0) out += char(b);
            else out.append(text, pos, len);
            pos += len;
        }
    }
    at_text_start = false;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
    std::string out;
    bool at_text_start = true;
    for (int32_t id : ids) append_piece(id, skip_special, at_text_start, out);
    return out;
}

std::string Tokenizer::token_to_piece(int32_t id) const {
    std::string out;
    bool at_text_start = false;
    append_piece(id, false, at_text_start, out);
    return out;
}

void Tokenizer::check_id(int32_t id) const {
    if (id < 0 || id >= n_vocab())
        throw Error("token id " + std::to_string(id) + " is outside the vocab of " + std::to_string(n_vocab()));
}

const std::string& Tokenizer::token_text(int32_t id) const {
    check_id(id);
    return vocab_->text[id];
}

TokenType Tokenizer::token_type(int32_t id) const {
    check_id(id);
    return vocab_->type[id];
}

std::string_view Tokenizer::pre_tokenizer_variant() const { return pre_ ? pre_->variant() : ""; }

int32_t Tokenizer::n_vocab() const { return vocab_->size(); }

bool Tokenizer::is_eog(int32_t id) const { return std::binary_search(eog_.begin(), eog_.end(), id); }

bool Tokenizer::is_control(int32_t id) const {
    return id >= 0 && id < n_vocab() && vocab_->type[id] == TokenType::Control;
}

std::optional<int32_t> Tokenizer::find_token(std::string_view text) const { return vocab_->find(text); }

}  // namespace ember
