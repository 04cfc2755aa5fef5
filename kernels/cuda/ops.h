// Launchers of the CUDA kernels, one family per .cu file. Plain C++17 host declarations
// (no backend.h, so nvcc compiles the kernels as C++17 while the backend class is C++20).
// Every launcher enqueues on `stream` and checks the launch; none synchronizes.
//
// Conventions: activations are F32, row-major, contiguous (row stride = cols). Weights keep
// their GGUF block layout, `row_bytes` apart. `type` is the GGUF type id (QType in
// quant_blocks.cuh / ember::DType).
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

namespace ember::cuda {

// ---- matvec.cu: decode matrix-vector products (few tokens, memory-bound) ---------------------
constexpr int kMatvecMaxTokens = 8;  // above this, matmul takes the GEMM path
bool is_block_type(int type);        // Q4_0 ... Q6_K (32-element chunks)
bool is_float_type(int type);        // F32, F16, BF16
// x (n x cols, cols % 32 == 0) -> 8-bit chunks: xq (n x cols int8), ds (n x cols/32: d, d*sum).
void quantize_q8(const float* x, int64_t n, int64_t cols, int8_t* xq, float2* ds, cudaStream_t stream);
// y[t][r] = sum_c W[r][c] x[t][c] (+ bias[r]) for t < n (any n; groups of <= 8 tokens).
void matvec_quant(int type, const void* w, size_t row_bytes, int64_t rows, int64_t cols, const int8_t* xq,
                  const float2* ds, int64_t n, float* y, const float* bias, cudaStream_t stream);
// matvec_kquant.cu: the same for repacked Q4_K/Q6_K rows (type kQ4_KR / kQ6_KR), n <= 8.
void matvec_kquant_r(int type, const void* w, size_t row_bytes, int64_t rows, int64_t cols, const int8_t* xq,
                     const float2* ds, int64_t n, float* y, const float* bias, cudaStream_t stream);
void matvec_float(int type, const void* w, size_t row_bytes, int64_t rows, int64_t cols, const float* x, int64_t n,
                  float* y, const float* bias, cudaStream_t stream);

// ---- gemm.cu: conversions feeding the prefill GEMM (cuBLAS, called by the backend) ----------
// Rows [0, rows) of a weight matrix as FP16, rows x cols contiguous (row tiles: w is a tile's
// first row).
void dequant_f16(int type, const void* w, size_t row_bytes, int64_t rows, int64_t cols, __half* out,
                 cudaStream_t stream);
void f32_to_f16(const float* x, int64_t n, __half* out, cudaStream_t stream);
// y[t][r] += bias[r]
void add_bias(float* y, int64_t n, int64_t cols, const float* bias, cudaStream_t stream);

// ---- norm.cu ---------------------------------------------------------------------------------
// xq, ds: null, or also y as quantize_q8(y) writes it (cols % 32 == 0), in the same launch.
void rms_norm(const float* x, const float* w, int64_t rows, int64_t cols, float eps, float* y, int8_t* xq, float2* ds,
              cudaStream_t stream);
// x += r, then rms_norm(x) into y: bitwise add() and rms_norm(), one launch; xq, ds as rms_norm's.
void add_rms_norm(float* x, const float* r, const float* w, int64_t rows, int64_t cols, float eps, float* y, int8_t* xq,
                  float2* ds, cudaStream_t stream);
// rms_norm(y, wy) in place, then add_rms_norm(x, y, w) into out: their bits, one launch.
void norm_add_rms_norm(float* x, float* y, const float* wy, const float* w, int64_t rows, int64_t cols, float eps,
                       float* out, int8_t* xq, float2* ds, cudaStream_t stream);

// ---- rope.cu ---------------------------------------------------------------------------------
// x: n_tokens * n_heads rows of head_dim; positions: [n_tokens]; freq: [n_rot / 2] doubles,
// freq[i] = rope_pair_freq (kernels/common/rope_yarn.h); cos and sin are multiplied by mscale.
void rope(float* x, int64_t n_tokens, int n_heads, int head_dim, int n_rot, bool neox, const int32_t* positions,
          const double* freq, double mscale, cudaStream_t stream);

// ---- elementwise.cu ----------------------------------------------------------------------------
// act: GluAct's value (0 SiLU, 1 GELU-tanh, 2 gpt-oss's clamped SwiGLU).
// xq, ds: null, or also out as quantize_q8(out) writes it (n % 32 == 0), in the same launch.
void glu(const float* gate, const float* up, float* out, int64_t n, int act, int8_t* xq, float2* ds,
         cudaStream_t stream);
// x[t] *= sigmoid(s[t]) over rows x cols (Backend::sigmoid_scale_rows).
void sigmoid_scale_rows(float* x, const float* s, int64_t rows, int64_t cols, cudaStream_t stream);
// dst (rows x cols, contiguous) = the rows of src, src_ld floats apart (Backend::copy).
void copy_rows(const float* src, int64_t src_ld, float* dst, int64_t dst_ld, int64_t rows, int64_t cols,
               cudaStream_t stream);
// glu() of row views: row r of gate at gate + r * gate_ld (floats), of up likewise; out contiguous.
void glu_rows(const float* gate, int64_t gate_ld, const float* up, int64_t up_ld, float* out, int64_t rows,
              int64_t cols, int act, cudaStream_t stream);
void add(float* x, const float* y, int64_t n, cudaStream_t stream);
void scale(float* x, float s, int64_t n, cudaStream_t stream);
// x = cap * tanh(x / cap)
void softcap(float* x, float cap, int64_t n, cudaStream_t stream);
// out[i] = x[rows[i]] (rows of `cols` floats)
void gather_rows(const float* x, int64_t cols, const int32_t* rows, int64_t n, float* out, cudaStream_t stream);
// out[t] = dequant(table[ids[t]]) * scale (rows: the table's, which row tiles need)
void embed(int type, const void* table, size_t row_bytes, int64_t rows, int64_t cols, const int32_t* ids, int64_t n,
           float scale, float* out, cudaStream_t stream);

// ---- kv.cu -------------------------------------------------------------------------------------
// Row t of k and v (kv_dim floats each) into cache slot slots[t]; kv_type F16 or Q8_0.
void store_kv(int kv_type, void* k_cache, void* v_cache, size_t row_bytes, int64_t kv_dim, const float* k,
              const float* v, const int32_t* slots, int64_t n, cudaStream_t stream);
// rope() of q (n_tokens x n_q_heads heads) and k (n_tokens x n_k_heads heads), both head_dim
// wide with n_rot rotated, in place, then store_kv() of k and v (n_k_heads * head_dim values a
// token): one launch, block per token, the bits of the three separate launches.
struct RopeStoreArgs {
    float* q;
    float* k;
    const float* v;
    void* k_cache;
    void* v_cache;
    size_t row_bytes;
    const int32_t* positions;  // [n_tokens]
    const int32_t* slots;      // [n_tokens]
    const double* freq;        // [n_rot / 2], as rope()'s
    double mscale;
    int64_t n_tokens;
    int n_q_heads, n_k_heads, head_dim, n_rot;
    int kv_type;  // F16 or Q8_0 (Q8_0: n_k_heads * head_dim % 32 == 0)
    int neox;
};
static_assert(sizeof(RopeStoreArgs) == 11 * 8 + 6 * 4, "RopeStoreArgs must have no padding");
void rope_store_kv(const RopeStoreArgs& a, cudaStream_t stream);
// The inverse: cache slot slots[t] into rows t of k and v (exact: F16 and Q8_0 values are floats).
void load_kv(int kv_type, const void* k_cache, const void* v_cache, size_t row_bytes, int64_t kv_dim, float* k,
             float* v, const int32_t* slots, int64_t n, cudaStream_t stream);

// ---- moe.cu: mixture of experts (Backend::moe_*; kernels/common/moe_route.h) ------------------
// One thread per token: ids and weights (n_tokens x k) of n_expert logits per token;
// expert_scale: null or n_expert per-expert factors on the weights.
void moe_route(const float* logits, int64_t n_tokens, int n_expert, int k, int gating, bool normalize, float scale,
               const float* expert_scale, int32_t* ids, float* weights, cudaStream_t stream);
// y[s] (rows floats) = expert ids[s]'s rows (rows x cols, the experts one after another)
// times x row s / x_div (+ bias[ids[s] * rows ...]), for s < n_slots. Quantized: x as
// quantize_q8 rows; float: F32 rows.
void moe_matvec_quant(int type, const void* w, size_t row_bytes, int64_t rows, int64_t n_expert, int64_t cols,
                      const int8_t* xq, const float2* ds, int x_div, const int32_t* ids, int64_t n_slots, float* y,
                      const float* bias, cudaStream_t stream);
void moe_matvec_float(int type, const void* w, size_t row_bytes, int64_t rows, int64_t n_expert, int64_t cols,
                      const float* x, int x_div, const int32_t* ids, int64_t n_slots, float* y, const float* bias,
                      cudaStream_t stream);
// The same products grouped by expert (prefill; moe.cu's top comment): the slots sorted by
// expert on the device into `groups` (moe_group_bytes(n_slots, n_expert) bytes of device
// scratch), then each expert's weights read once per 16 of its slots. Bit-identical to the
// per-slot launchers. n_expert <= kMoeGroupMaxExperts (shared-memory counters).
constexpr int64_t kMoeGroupMaxExperts = 4096;
size_t moe_group_bytes(int64_t n_slots, int64_t n_expert);
void moe_grouped_quant(int type, const void* w, size_t row_bytes, int64_t rows, int64_t n_expert, int64_t cols,
                       const int8_t* xq, const float2* ds, int x_div, const int32_t* ids, int64_t n_slots, float* y,
                       const float* bias, void* groups, cudaStream_t stream);
void moe_grouped_float(int type, const void* w, size_t row_bytes, int64_t rows, int64_t n_expert, int64_t cols,
                       const float* x, int x_div, const int32_t* ids, int64_t n_slots, float* y, const float* bias,
                       void* groups, cudaStream_t stream);
// Grouped on tensor cores (FP16 x FP16 -> FP32, the prefill GEMM's arithmetic; x as F32
// rows): when moe_grouped_tensor_cores() says so, i.e. the tiles are full on average
// (n_slots >= 16 * n_expert) and the weights are not F32 (true FP32 there, as the dense
// GEMM). Below that, moe_grouped_quant / _float (8-bit dp4a / FP32 FMA, bandwidth-bound).
bool moe_grouped_tensor_cores(int type, int64_t cols, int64_t n_slots, int64_t n_expert);
void moe_grouped_tc(int type, const void* w, size_t row_bytes, int64_t rows, int64_t n_expert, int64_t cols,
                    const float* x, int x_div, const int32_t* ids, int64_t n_slots, float* y, const float* bias,
                    void* groups, cudaStream_t stream);
// out[t] = sum_j weights[t*k + j] y[t*k + j] (cols floats per row).
void moe_combine(const float* y, const float* weights, int64_t n_tokens, int k, int64_t cols, float* out,
                 cudaStream_t stream);

// ---- attention.cu ------------------------------------------------------------------------------
// Query tiles: runs of at most kAttnTileTokens consecutive batch tokens of one sequence
// (built once per batch, see build_attention_tiles).
constexpr int kAttnTileTokens = 32;

// ---- linear attention (qwen35; linear_attn.cu) ----------------------------------------------
// Laid out without padding, like AttentionArgs below.
struct ConvArgs {                          // Backend::ssm_conv
    const float* x = nullptr;              // n_tokens x channels
    const float* w = nullptr;              // channels x kernel
    float* state = nullptr;                // per slot (kernel - 1) x channels
    float* out = nullptr;                  // n_tokens x channels
    const int32_t* seq_of = nullptr;       // [n_tokens]
    const int32_t* slot_of_seq = nullptr;  // [n_seqs]
    int64_t n_tokens = 0, channels = 0;
    int kernel = 0, n_seqs = 0;
};
static_assert(sizeof(ConvArgs) == 8 * 8 + 2 * 4, "ConvArgs must have no padding");
void ssm_conv(ConvArgs a, cudaStream_t stream);

struct DeltaArgs {                                         // Backend::gated_delta_rule
    const float *q = nullptr, *k = nullptr, *v = nullptr;  // rows q_ld / k_ld / v_ld floats apart
    const float *alpha = nullptr, *beta = nullptr;         // n_tokens x n_v_heads
    const float *dt_bias = nullptr, *a = nullptr;          // [n_v_heads]
    float* state = nullptr;                                // per slot n_v_heads x head_dim x head_dim
    float* out = nullptr;                                  // n_tokens x n_v_heads*head_dim
    const int32_t *seq_of = nullptr, *slot_of_seq = nullptr;
    int64_t q_ld = 0, k_ld = 0, v_ld = 0, n_tokens = 0;
    float l2_eps = 0.0f;
    int n_k_heads = 0, n_v_heads = 0, head_dim = 0, n_seqs = 0;
    int grouped_heads = 0;  // key head of value head h: h / (n_v/n_k), else h % n_k
};
static_assert(sizeof(DeltaArgs) == 15 * 8 + 6 * 4, "DeltaArgs must have no padding");
void gated_delta_rule(DeltaArgs a, cudaStream_t stream);

// Laid out without padding (8-byte members, then 4-byte ones): the CUDA graph runner
// (graphs.h) compares launch arguments as bytes.
struct AttentionArgs {
    const uint8_t* k = nullptr;  // cache pools of the layer
    const uint8_t* v = nullptr;
    size_t kv_row_bytes = 0;
    const float* q = nullptr;  // n_tokens x n_heads*head_dim
    float* out = nullptr;      // same shape
    float* partial = nullptr;  // scratch, attention_partial_floats() floats
    const int32_t* positions = nullptr;
    const int32_t* seq_of = nullptr;
    const int32_t* block_table = nullptr;
    const int2* tiles = nullptr;    // (first token, count)
    const float* sinks = nullptr;   // [n_heads] sink logits (AttentionParams::sinks), or null
    size_t smem_optin = 48 * 1024;  // largest dynamic shared memory a block may use
    int kv_type = 1;                // F16 or Q8_0
    int block_tokens = 16;
    int max_blocks = 0;  // row stride of block_table
    int n_tiles = 0;
    int n_tokens = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
    float scale = 1.0f, softcap = 0.0f;
    int window = 0;
    int sm_count = 1;  // multiprocessors (chooses the split of long key ranges)
};
static_assert(sizeof(AttentionArgs) == 12 * 8 + 12 * 4, "AttentionArgs must have no padding");

// The split-K factor for these arguments, given the largest position in the batch (the
// kernels split each query tile's own key range, read from device memory); the scratch size.
int attention_splits(const AttentionArgs& a, int max_pos);
size_t attention_partial_floats(const AttentionArgs& a, int n_splits);
// Throws ember::Error for unsupported shapes (head_dim > 512, Q8_0 with head_dim % 32 != 0,
// not enough shared memory); attention() checks the same before launching.
void attention_validate(const AttentionArgs& a);
// Prefill batches (>= 16 tokens, >= 8 per query tile on average) of head dims 64/80/96/128/256
// run on tensor cores (FP16 operands, FP32 accumulators) when the device's shared memory
// allows; the rest, and everything with EMBER_CUDA_ATTN_TC=0, in FP32 (attention.cu).
void attention(const AttentionArgs& a, int n_splits, cudaStream_t stream);

}  // namespace ember::cuda
