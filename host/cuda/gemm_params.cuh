// The kernel ABI the twins share with the Rust kernels: the parameter
// struct of kernels-gpu/src/gemm.rs (`GemmParams`, #[repr(C)]; a test
// checks the two agree) and what `Gemm::from_raw` and the epilogue
// (`Gemm::store_c`) do with it. Every twin's entry takes
// (A, B, C, GemmParams p); block z computes product z of a batch.
//
// The host pastes this file where a twin says `#include "gemm_params.cuh"`
// before NVRTC compiles it (host/src/baselines.rs); nvcc finds it with -I.
#pragma once

struct GemmParams {
    unsigned m, n, k;        // C is m x n, the depth k
    unsigned lda, ldb, ldc;  // elements between rows
    float alpha, beta;       // C = alpha * A * B + beta * C; beta 0: C not read
    unsigned k_slice;        // split-K: depth of one slice (product z: K from z * k_slice)
    unsigned slices;         // split-K's reduction: partial sums to add
    unsigned long long stride_a, stride_b, stride_c;  // between products of a batch
};
static_assert(sizeof(GemmParams) == 64 && alignof(GemmParams) == 8,
              "GemmParams must match kernels-gpu/src/gemm.rs");

// Moves A, B and C to product blockIdx.z of the batch (for split-K, slice
// z of K, whose depth p.k becomes).
static __device__ __forceinline__ void gemm_batch(const float*& A, const float*& B, float*& C,
                                                  GemmParams& p) {
    const unsigned long long z = blockIdx.z;
    if (p.k_slice != 0) p.k = min(p.k_slice, p.k - (unsigned)z * p.k_slice);
    A += z * p.stride_a;
    B += z * p.stride_b;
    C += z * p.stride_c;
}

// An entry's two paths, as the Rust entries (gemm_kernel!) have them: the
// body on the parameters themselves for one product, and on pointers moved
// to product blockIdx.z for a batch. Two copies of the body, so that a
// one-product launch keeps A, B and C as parameters (reloaded from the
// constant bank) instead of computed pointers held in registers.
#define GEMM_DISPATCH(BODY, A, B, C, P)   \
    do {                                  \
        if (gridDim.z == 1) {             \
            BODY(A, B, C, P);             \
        } else {                          \
            gemm_batch(A, B, C, P);       \
            BODY(A, B, C, P);             \
        }                                 \
    } while (0)

// A, B and C 16-byte aligned and leading dimensions multiples of 4: the
// vector paths' condition (Gemm::vec4).
static __device__ __forceinline__ bool gemm_vec4(const float* A, const float* B, const float* C,
                                                 const GemmParams& p) {
    return (((unsigned long long)A | (unsigned long long)B | (unsigned long long)C) % 16 == 0) &&
           ((p.lda | p.ldb | p.ldc) % 4 == 0);
}

// C[idx] = alpha * acc + beta * C[idx], C not read when beta == 0.
static __device__ __forceinline__ void gemm_store(const GemmParams& p, float* C, long long idx,
                                                  float acc) {
    C[idx] = p.beta == 0.0f ? p.alpha * acc : fmaf(p.beta, C[idx], p.alpha * acc);
}

// The same for C[idx..idx + 4] as 128-bit accesses (idx % 4 == 0, vec4).
static __device__ __forceinline__ void gemm_store4(const GemmParams& p, float* C, long long idx,
                                                   float4 acc) {
    float4* c = reinterpret_cast<float4*>(C + idx);
    if (p.beta == 0.0f) {
        *c = make_float4(p.alpha * acc.x, p.alpha * acc.y, p.alpha * acc.z, p.alpha * acc.w);
    } else {
        const float4 old = *c;
        *c = make_float4(fmaf(p.beta, old.x, p.alpha * acc.x), fmaf(p.beta, old.y, p.alpha * acc.y),
                         fmaf(p.beta, old.z, p.alpha * acc.z), fmaf(p.beta, old.w, p.alpha * acc.w));
    }
}
