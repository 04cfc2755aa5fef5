// Deliberately broken kernels (broken_kernels.cu) that the emulator must catch: each
// launcher runs one kernel over device buffers and waits.
#pragma once

namespace ember::test::broken {

// Block sum of x[0..128) into *out, 128 threads; missing_barrier drops the __syncthreads
// between the shared-memory writes and thread 0's reads.
void block_sum(const float* x, float* out, bool missing_barrier);
// __syncthreads inside `if (threadIdx.x < 64)`: the other half exits.
void divergent_barrier();
// __syncthreads at two different lines for the two halves of the block.
void split_barrier();
// A full-mask __shfl_xor_sync under `if (lane < 16)`.
void shuffle_under_branch(float* out);
// __shfl_sync(0x0000ffff, v, 20): reads a lane outside the mask.
void shuffle_outside_mask(float* out);
// out[i] = x[i + 1] for i < n: reads one element past the end of x.
void out_of_bounds(const float* x, float* out, int n);
// A plain copy, launched with a pointer the caller chose (a host pointer must be refused).
void copy(const float* x, float* out, int n);
// Asks for 64 KiB of dynamic shared memory without raising the kernel's limit.
void too_much_shared_memory(float* out);

}  // namespace ember::test::broken
