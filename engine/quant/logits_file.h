// The saved base run of a KL-divergence measurement, in llama-perplexity's
// --kl-divergence-base format, so that either tool's base file works with either tool's
// --kl-divergence (and the peer test compares Ember's logits with llama.cpp's on one file):
//
//   "_logits_"                      8 bytes
//   n_ctx, n_vocab, n_chunk         int32 each
//   tokens[n_chunk * n_ctx]         int32 (the evaluated text, BOS not substituted)
//   per chunk, per scored position (n_ctx - 1 - n_ctx/2 of them), one record of
//   nv = 2 * ((n_vocab + 1) / 2) + 4 uint16:
//     float scale, float min_log_prob   (the first 4 uint16)
//     uint16 q[n_vocab] (+1 pad)       log p[i] ~= scale * q[i] + min_log_prob
//   The log-probabilities are kept over a 16-nat range below the largest (q = 0 below it).
// Little-endian, as written by x86/ARM hosts. The reader validates the header against the
// file size before trusting any count (it is untrusted input).
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace ember {

inline int64_t logits_record_u16(int32_t n_vocab) { return 2 * ((int64_t{n_vocab} + 1) / 2) + 4; }

// Encodes the log-softmax of one row of logits into a record; returns the negative
// log-likelihood of `token` (computed in the same way as when scoring without a base file).
double encode_log_probs(std::span<const float> logits, int32_t token, uint16_t* record);

// The negative log-likelihood of `token` under the softmax of one row of logits.
double token_nll(std::span<const float> logits, int32_t token);

// Running sums of a KL-divergence measurement (what llama-perplexity reports).
struct KlSums {
    double nll = 0, nll2 = 0, nll_base = 0, nll_base2 = 0, nll_nll_base = 0;
    double kld = 0, kld2 = 0, p_diff = 0, p_diff2 = 0, p_diff4 = 0;
    float max_p_diff = 0;
    int64_t same_top = 0, count = 0;
    std::vector<float> kld_values, p_diff_values;  // per position, for percentiles
    void add(const KlSums& o);
};

// Scores one row of logits against a base record: KL(base || this), top-1 agreement, Δp.
void score_against_base(std::span<const float> logits, int32_t token, const uint16_t* record, KlSums& sums);

class LogitsFileWriter {
public:
    // Creates `path` (as path.tmp until finish()) and writes the header and tokens.
    LogitsFileWriter(const std::string& path, int32_t n_ctx, int32_t n_vocab, int32_t n_chunk,
                     std::span<const int32_t> tokens);
    ~LogitsFileWriter();  // without finish(): removes the partial file
    void write_records(const std::vector<uint16_t>& records);
    void finish();

private:
    std::string path_, tmp_;
    std::FILE* f_ = nullptr;
};

class LogitsFileReader {
public:
    explicit LogitsFileReader(const std::string& path);  // throws ember::Error on a bad file
    ~LogitsFileReader();
    int32_t n_ctx() const { return n_ctx_; }
    int32_t n_vocab() const { return n_vocab_; }
    int32_t n_chunk() const { return n_chunk_; }
    const std::vector<int32_t>& tokens() const { return tokens_; }
    // The records of the next chunk ((n_ctx - 1 - n_ctx/2) * record size uint16).
    void read_chunk(std::vector<uint16_t>& records);

private:
    void read_header(uint64_t file_size);
    std::string path_;
    std::FILE* f_ = nullptr;
    int32_t n_ctx_ = 0, n_vocab_ = 0, n_chunk_ = 0;
    std::vector<int32_t> tokens_;
};

}  // namespace ember
