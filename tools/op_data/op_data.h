// Inputs for checking and measuring backend ops: seeded random values shaped like real
// weights and activations, random weights of every matmul type, the block-layout facts that
// make random blocks valid, float tensors to and from a backend, and batches and sampler
// rows for the ops that take them. One library for ember-gpu-check, the benchmarks and the
// kernel tests (tests/kernels), so all of them check the same kinds of data. It lives in
// tools/ because tools/ is configured by every preset (release, gpu, fuzz) and tests/ is not;
// it depends on kernels/ only, and nothing in tools/ includes tests/.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/backend.h"
#include "kernels/common/dtype.h"

namespace ember::opdata {

// The seed stream of a run: next_seed() steps an LCG from the seed set last, so a whole run
// replays from the one seed it printed.
void set_seed(uint32_t seed);
uint32_t next_seed();

// Gaussian values whose scale changes every 32 elements over two decades, with an outlier
// every 97: like real weights and activations, never all zeros.
std::vector<float> random_floats_seeded(size_t n, uint32_t seed, float scale = 1.0f);
// The same from the run's seed stream.
std::vector<float> random_floats(size_t n, float scale = 1.0f);

size_t type_row_bytes(DType t, int64_t cols);
// Byte offsets of the half-float scale fields in one block of `t` (empty for float types):
// the fields to force to moderate values when a block is filled with random bytes.
std::vector<int> half_fields(DType t);
// `rows` x `cols` weights of `type` from the seed stream: quantized random floats, or for the
// types without a quantizer (Q2_K, Q3_K) random blocks with small positive scales.
std::vector<uint8_t> random_weights(DType type, int64_t rows, int64_t cols);
// Every row of quantized `data` as floats.
std::vector<float> dequantize_matrix(DType type, const uint8_t* data, int64_t rows, int64_t cols);

// F32 tensors: `v` uploaded as a new cols x rows tensor; a tensor's values downloaded.
Tensor put(Backend& b, const std::vector<float>& v, int64_t cols, int64_t rows,
           MemoryKind kind = MemoryKind::Activations);
std::vector<float> get(Backend& b, const Tensor& t);
// NaN everywhere: an element the op under test never writes fails its comparison.
void poison(Backend& b, Tensor& t);

// Owns the arrays a BatchInfo points into.
struct Batch {
    std::vector<int32_t> tokens, positions, seq_of, kv_slot, block_table, output_rows;
    int32_t n_seqs = 1, max_blocks = 1;
    BatchInfo info() const;
};
// n tokens (id 0) of one sequence at `positions` (default 0..n-1), KV slot i, one block.
Batch simple_batch(int64_t n, const std::vector<int32_t>& positions = {});

// rope inputs from the seed stream: n positions up to 2e5 (the first two 0 and 1) and n_rot / 2
// frequency factors in [1, 8).
struct RopeInputs {
    std::vector<int32_t> pos;
    std::vector<float> factors;
};
RopeInputs random_rope_inputs(int64_t n, int n_rot);
RopeParams rope_params(int n_heads, int head_dim, int n_rot, bool neox, float base, float scale, const float* factors);

// A paged KV cache shared by sequences with shuffled blocks (from the seed stream): sequence s
// owns blocks [first_block[s], first_block[s] + n_own[s]) of the shuffled ids.
class PagedSeqs {
public:
    PagedSeqs(int n_blocks, int max_blocks, int block_tokens, const std::vector<int>& first_block,
              const std::vector<int>& n_own);
    // A batch of `parts` (sequence, new tokens), appended to the sequences.
    Batch batch(const std::vector<std::pair<int, int>>& parts);

private:
    int max_blocks_, block_tokens_;
    std::vector<int32_t> table_, len_;
};
// K and V of n_blocks x block_tokens slots of `type` on `be`.
KvLayer alloc_kv_layer(Backend& be, DType type, int n_kv_heads, int head_dim, int block_tokens, int n_blocks);
AttentionParams attention_params(int n_heads, int n_kv_heads, int head_dim, int window, float softcap);
// A CPU backend K or V pool (bytes downloaded from `layer`) as plain slot rows, the CUDA
// backend's layout: the CPU groups each block's bytes by head (F16 keys transposed, values
// and Q8_0 keys as head rows; kernels/cpu/kv_layout.h). Compare caches of the two this way.
std::vector<uint8_t> cpu_cache_as_rows(const KvLayer& layer, const std::vector<uint8_t>& pool, bool keys);

// Sampler rows for Backend::top_k from the seed stream: n_rows (3) rows of `vocab` logits
// (row 0 with many ties; row 1 mostly -inf with a few NaN; row 2 mostly NaN), each with 64
// penalized tokens, 10 biased ones (some penalized too, some -inf) and one bias outside the row.
struct TopKCase {
    TopKCase() = default;
    TopKCase(TopKCase&&) = default;  // a move keeps the inner vectors' buffers: `rows` stays valid
    TopKCase(const TopKCase&) = delete;
    std::vector<float> logits;  // n_rows x vocab
    std::vector<std::vector<TokenCount>> pen;
    std::vector<std::vector<TokenBias>> bias;
    std::vector<TopKRow> rows;  // point into pen and bias
};
TopKCase make_top_k_case(int64_t vocab, int n_rows);

}  // namespace ember::opdata
