#include "engine/quant/logits_file.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "kernels/common/error.h"

namespace ember {

namespace {

constexpr float kLogRange = 16.0f;  // nats below the best token that a record keeps

struct Softmax {
    float max;
    int32_t argmax;
    float log_sum_exp;  // log sum exp(l - max)
};

Softmax softmax_of(std::span<const float> l) {
    Softmax s{l[0], 0, 0};
    for (size_t i = 1; i < l.size(); ++i) {
        if (l[i] > s.max) s.max = l[i], s.argmax = static_cast<int32_t>(i);
    }
    double sum = 0;  // double: 262144 terms of float would lose the small ones
    for (float v : l) sum += std::exp(v - s.max);
    s.log_sum_exp = static_cast<float>(std::log(sum));
    return s;
}

}  // namespace

double token_nll(std::span<const float> l, int32_t token) {
    const Softmax s = softmax_of(l);
    return double{s.max} + s.log_sum_exp - l[static_cast<size_t>(token)];
}

double encode_log_probs(std::span<const float> l, int32_t token, uint16_t* record) {
    const Softmax s = softmax_of(l);
    float lo = *std::min_element(l.begin(), l.end());
    lo = std::max(lo, s.max - kLogRange);
    const float min_log_prob = lo - s.max - s.log_sum_exp;
    const float scale = (s.max - lo) / 65535.0f;
    std::memcpy(record, &scale, 4);
    std::memcpy(record + 2, &min_log_prob, 4);
    uint16_t* q = record + 4;
    if (scale > 0) {
        const float inv = 1.0f / scale;
        for (size_t i = 0; i < l.size(); ++i)
            q[i] = l[i] > lo ? static_cast<uint16_t>(std::lrintf(std::min(65535.0f, inv * (l[i] - lo)))) : 0;
    } else {
        std::memset(q, 0, l.size() * 2);
    }
    if (l.size() % 2) q[l.size()] = 0;  // the pad
    return double{s.max} + s.log_sum_exp - l[static_cast<size_t>(token)];
}

void score_against_base(std::span<const float> l, int32_t token, const uint16_t* record, KlSums& k) {
    const Softmax s = softmax_of(l);
    float scale, min_log_prob;
    std::memcpy(&scale, record, 4);
    std::memcpy(&min_log_prob, record + 2, 4);
    const uint16_t* q = record + 4;
    const double nll = double{s.max} + s.log_sum_exp - l[static_cast<size_t>(token)];
    const double nll_base = -(double{scale} * q[token] + min_log_prob);
    k.nll += nll, k.nll2 += nll * nll;
    k.nll_base += nll_base, k.nll_base2 += nll_base * nll_base;
    k.nll_nll_base += nll * nll_base;
    const float log_norm = s.max + s.log_sum_exp;  // log p[i] = l[i] - log_norm
    double kld = 0;
    int32_t top_base = 0;
    float best_base = -INFINITY;
    for (size_t i = 0; i < l.size(); ++i) {
        const float lp_base = scale * q[i] + min_log_prob;
        if (lp_base > best_base) best_base = lp_base, top_base = static_cast<int32_t>(i);
        // Below the record's 16-nat range the base probability is < 1e-7 and was not kept.
        if (lp_base > -kLogRange) kld += std::exp(lp_base) * (lp_base - (l[i] - log_norm));
    }
    k.kld += kld, k.kld2 += kld * kld;
    k.same_top += s.argmax == top_base;
    ++k.count;
    const double p_diff = std::exp(-nll) - std::exp(-nll_base);
    k.p_diff += p_diff, k.p_diff2 += p_diff * p_diff, k.p_diff4 += p_diff * p_diff * p_diff * p_diff;
    k.max_p_diff = std::max(k.max_p_diff, static_cast<float>(std::fabs(p_diff)));
    k.kld_values.push_back(static_cast<float>(kld));
    k.p_diff_values.push_back(static_cast<float>(p_diff));
}

void KlSums::add(const KlSums& o) {
    nll += o.nll, nll2 += o.nll2, nll_base += o.nll_base, nll_base2 += o.nll_base2;
    nll_nll_base += o.nll_nll_base, kld += o.kld, kld2 += o.kld2;
    p_diff += o.p_diff, p_diff2 += o.p_diff2, p_diff4 += o.p_diff4;
    max_p_diff = std::max(max_p_diff, o.max_p_diff);
    same_top += o.same_top, count += o.count;
    kld_values.insert(kld_values.end(), o.kld_values.begin(), o.kld_values.end());
    p_diff_values.insert(p_diff_values.end(), o.p_diff_values.begin(), o.p_diff_values.end());
}

// ---------------------------------------------------------------------------------------

LogitsFileWriter::LogitsFileWriter(const std::string& path, int32_t n_ctx, int32_t n_vocab, int32_t n_chunk,
                                   std::span<const int32_t> tokens)
    : path_(path), tmp_(path + ".tmp") {
    f_ = std::fopen(tmp_.c_str(), "wb");
    if (!f_) throw Error(tmp_ + ": cannot create: " + std::strerror(errno));
    const int32_t head[3] = {n_ctx, n_vocab, n_chunk};
    const size_t n_tok = static_cast<size_t>(n_chunk) * static_cast<size_t>(n_ctx);
    if (std::fwrite("_logits_", 1, 8, f_) != 8 || std::fwrite(head, 4, 3, f_) != 3 ||
        std::fwrite(tokens.data(), 4, n_tok, f_) != n_tok) {
        std::fclose(f_);
        f_ = nullptr;
        std::remove(tmp_.c_str());
        throw Error(tmp_ + ": write failed (disk full?)");
    }
}

LogitsFileWriter::~LogitsFileWriter() {
    if (!f_) return;
    std::fclose(f_);
    std::remove(tmp_.c_str());
}

void LogitsFileWriter::write_records(const std::vector<uint16_t>& r) {
    if (std::fwrite(r.data(), 2, r.size(), f_) != r.size()) throw Error(tmp_ + ": write failed (disk full?)");
}

void LogitsFileWriter::finish() {
    const bool ok = std::fflush(f_) == 0;
    std::fclose(f_);
    f_ = nullptr;
    std::error_code ec;
    if (ok) std::filesystem::rename(tmp_, path_, ec);
    if (!ok || ec) {
        std::remove(tmp_.c_str());
        throw Error(path_ + ": cannot write the logits file" + (ec ? ": " + ec.message() : std::string()));
    }
}

// ---------------------------------------------------------------------------------------

LogitsFileReader::LogitsFileReader(const std::string& path) : path_(path) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) throw Error(path + ": cannot open the base logits file: " + ec.message());
    f_ = std::fopen(path.c_str(), "rb");
    if (!f_) throw Error(path + ": cannot open the base logits file: " + std::strerror(errno));
    try {
        read_header(size);
    } catch (...) {
        std::fclose(f_);
        f_ = nullptr;
        throw;
    }
}

void LogitsFileReader::read_header(uint64_t size) {
    const std::string& path = path_;
    char magic[8];
    int32_t head[3];
    if (std::fread(magic, 1, 8, f_) != 8 || std::memcmp(magic, "_logits_", 8) != 0 || std::fread(head, 4, 3, f_) != 3)
        throw Error(path + ": not a saved logits file (made with --save-logits or --kl-divergence-base)");
    n_ctx_ = head[0], n_vocab_ = head[1], n_chunk_ = head[2];
    if (n_ctx_ < 4 || n_vocab_ < 1 || n_chunk_ < 1 || n_ctx_ > (1 << 24) || n_vocab_ > (1 << 24) ||
        n_chunk_ > (1 << 24))
        throw Error(path + ": implausible header (n_ctx " + std::to_string(n_ctx_) + ", n_vocab " +
                    std::to_string(n_vocab_) + ", chunks " + std::to_string(n_chunk_) + ")");
    const uint64_t n_tok = uint64_t(n_ctx_) * uint64_t(n_chunk_);
    const uint64_t per_chunk = uint64_t(n_ctx_ - 1 - n_ctx_ / 2) * uint64_t(logits_record_u16(n_vocab_)) * 2;
    const uint64_t want = 20 + n_tok * 4 + per_chunk * uint64_t(n_chunk_);
    if (size != want)
        throw Error(path + ": " + std::to_string(size) + " bytes, but its header (n_ctx " + std::to_string(n_ctx_) +
                    ", n_vocab " + std::to_string(n_vocab_) + ", " + std::to_string(n_chunk_) + " chunks) needs " +
                    std::to_string(want) + " (truncated or not a logits file)");
    tokens_.resize(n_tok);
    if (std::fread(tokens_.data(), 4, n_tok, f_) != n_tok) throw Error(path + ": cannot read its tokens");
    for (int32_t t : tokens_)
        if (t < 0 || t >= n_vocab_)
            throw Error(path + ": token id " + std::to_string(t) + " outside its vocabulary of " +
                        std::to_string(n_vocab_));
}

LogitsFileReader::~LogitsFileReader() {
    if (f_) std::fclose(f_);
}

void LogitsFileReader::read_chunk(std::vector<uint16_t>& r) {
    r.resize(static_cast<size_t>(n_ctx_ - 1 - n_ctx_ / 2) * static_cast<size_t>(logits_record_u16(n_vocab_)));
    if (std::fread(r.data(), 2, r.size(), f_) != r.size()) throw Error(path_ + ": cannot read a chunk of log-probs");
}

}  // namespace ember
