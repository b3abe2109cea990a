// The CUDA C++ twin of step 10 (kernels-gpu/src/k10_tuned.rs), compiled at
// run time by NVRTC so the benchmark can time both in one process. Same
// algorithm, written as a CUDA C++ programmer would: one template body
// with the same parameters (BM x BN block tile, BK, warp tile of
// WM_ITERS x WN_ITERS sweeps of 16 x 32, pieces of TM x TN = 4 x 4 per
// lane), the same two shared stages in launch-sized shared memory (A's tile
// transposed with rows of BM + 4 floats, then B's), the same register
// staging one tile ahead, the same double-buffered fragments and fully
// unrolled kk loop, the same vector path for interior blocks of aligned
// shapes and guarded path elsewhere, the same epilogue. Offsets are `int`,
// as CUDA C++ writes them: the host runs the twins only on matrices of
// fewer than 2^31 elements.
//
// The instances twinned are the Rust entries of the same names; their
// parameters are written out below, and a test checks them against the
// Rust kernels' specs (tests/tests/twins.rs).

#include "gemm_params.cuh"

#define LANE_ROWS 4
#define LANE_COLS 8
#define TM 4
#define TN 4
#define SUB_M (LANE_ROWS * TM)
#define SUB_N (LANE_COLS * TN)
#define A_PAD 4

// A[row][col..col + 4] at idx == row * lda + col: one 128-bit load, or
// (GUARD) four scalar loads with zeros outside A.
template <bool GUARD>
__device__ __forceinline__ float4 read4(const float* p, int row, int rows, int col, int cols,
                                        int idx) {
    if (!GUARD) return *reinterpret_cast<const float4*>(p + idx);
    float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int j = 0; j < 4; ++j)
        if (row < rows && col + j < cols) v[j] = p[idx + j];
    return make_float4(v[0], v[1], v[2], v[3]);
}

template <int BM, int BN, int BK, int WM_ITERS, int WN_ITERS, bool GUARD>
__device__ __forceinline__ void tuned_body(const float* A, const float* B, float* C,
                                           const GemmParams& p, int row0, int col0) {
    const int M = p.m, N = p.n, K = p.k, lda = p.lda, ldb = p.ldb, ldc = p.ldc;
    constexpr int WM = WM_ITERS * SUB_M, WN = WN_ITERS * SUB_N;
    constexpr int THREADS = (BM / WM) * (BN / WN) * 32;
    constexpr int A_LD = BM + A_PAD;
    constexpr int A_VECS = BM * BK / 4 / THREADS, B_VECS = BK * BN / 4 / THREADS;
    constexpr int A_ROW_STRIDE = THREADS / (BK / 4), B_ROW_STRIDE = THREADS / (BN / 4);
    constexpr int WARPS_N = BN / WN;
    // Stage s: A's transposed tile As[BK][A_LD], then B's Bs[BK][BN].
    constexpr int STAGE = (A_LD + BN) * BK;
    extern __shared__ float4 shared4[];
    float* shared = reinterpret_cast<float*>(shared4);

    const int t = threadIdx.x;
    const int a_r = t / (BK / 4), a_c = t % (BK / 4) * 4;
    const int b_r = t / (BN / 4), b_c = t % (BN / 4) * 4;
    const int warp = t / 32, lane = t % 32;
    const int m_base = warp / WARPS_N * WM + lane / LANE_COLS * TM;
    const int n_base = warp % WARPS_N * WN + lane % LANE_COLS * TN;

    float acc[WM_ITERS][WN_ITERS][TM][TN];
#pragma unroll
    for (int mi = 0; mi < WM_ITERS; ++mi)
#pragma unroll
        for (int ni = 0; ni < WN_ITERS; ++ni)
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[mi][ni][i][j] = 0.0f;

    int a_idx = (row0 + a_r) * lda + a_c;
    int b_idx = b_r * ldb + col0 + b_c;
    const int a_stride = A_ROW_STRIDE * lda, b_stride = B_ROW_STRIDE * ldb, b_step = BK * ldb;

    float4 next_a[A_VECS], next_b[B_VECS];
    // Global loads of the tile at k0 into registers.
    auto fetch = [&](int k0) {
#pragma unroll
        for (int i = 0; i < A_VECS; ++i)
            next_a[i] = read4<GUARD>(A, row0 + a_r + i * A_ROW_STRIDE, M, k0 + a_c, K,
                                     a_idx + i * a_stride);
#pragma unroll
        for (int i = 0; i < B_VECS; ++i)
            next_b[i] = read4<GUARD>(B, k0 + b_r + i * B_ROW_STRIDE, K, col0 + b_c, N,
                                     b_idx + i * b_stride);
    };
    // Registers to stage s (A transposed).
    auto stash = [&](int s) {
        float* as = shared + s * STAGE;
        float* bs = as + BK * A_LD;
#pragma unroll
        for (int i = 0; i < A_VECS; ++i) {
            const int r = a_r + i * A_ROW_STRIDE;
            as[(a_c + 0) * A_LD + r] = next_a[i].x;
            as[(a_c + 1) * A_LD + r] = next_a[i].y;
            as[(a_c + 2) * A_LD + r] = next_a[i].z;
            as[(a_c + 3) * A_LD + r] = next_a[i].w;
        }
#pragma unroll
        for (int i = 0; i < B_VECS; ++i)
            *reinterpret_cast<float4*>(bs + (b_r + i * B_ROW_STRIDE) * BN + b_c) = next_b[i];
    };
    // This lane's fragments of row kk of stage s.
    float4 frag_a[2][WM_ITERS], frag_b[2][WN_ITERS];
    auto frags = [&](int buf, int s, int kk) {
        const float* as = shared + s * STAGE;
        const float* bs = as + BK * A_LD;
#pragma unroll
        for (int mi = 0; mi < WM_ITERS; ++mi)
            frag_a[buf][mi] =
                *reinterpret_cast<const float4*>(as + kk * A_LD + m_base + mi * SUB_M);
#pragma unroll
        for (int ni = 0; ni < WN_ITERS; ++ni)
            frag_b[buf][ni] =
                *reinterpret_cast<const float4*>(bs + kk * BN + n_base + ni * SUB_N);
    };

    const int tiles = (K + BK - 1) / BK;
    // Prologue: tile 0 into stage 0, tile 1's loads in flight across the
    // barrier, row 0 of tile 0's fragments.
    fetch(0);
    stash(0);
    if (tiles > 1) {
        a_idx += BK;
        b_idx += b_step;
        fetch(BK);
    }
    __syncthreads();
    frags(0, 0, 0);

    int k0 = 0, cur = 0;
    for (int tile = 0; tile < tiles; ++tile) {
        const bool has_next = tile + 1 < tiles;
        const bool has_next2 = tile + 2 < tiles;
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            if (kk + 1 < BK) {
                frags((kk + 1) % 2, cur, kk + 1);
            } else {
                if (has_next) stash(1 - cur);
                if (has_next2) {
                    a_idx += BK;
                    b_idx += b_step;
                    fetch(k0 + 2 * BK);
                }
                __syncthreads();  // the one barrier per tile
                cur = 1 - cur;
                if (has_next) frags((kk + 1) % 2, cur, 0);
            }
            const float4* fa = frag_a[kk % 2];
            const float4* fb = frag_b[kk % 2];
#pragma unroll
            for (int mi = 0; mi < WM_ITERS; ++mi)
#pragma unroll
                for (int ni = 0; ni < WN_ITERS; ++ni) {
                    const float a[4] = {fa[mi].x, fa[mi].y, fa[mi].z, fa[mi].w};
                    const float b[4] = {fb[ni].x, fb[ni].y, fb[ni].z, fb[ni].w};
#pragma unroll
                    for (int i = 0; i < TM; ++i)
#pragma unroll
                        for (int j = 0; j < TN; ++j)
                            acc[mi][ni][i][j] = fmaf(a[i], b[j], acc[mi][ni][i][j]);
                }
        }
        k0 += BK;
    }

#pragma unroll
    for (int mi = 0; mi < WM_ITERS; ++mi)
#pragma unroll
        for (int i = 0; i < TM; ++i) {
            const int row = row0 + m_base + mi * SUB_M + i;
#pragma unroll
            for (int ni = 0; ni < WN_ITERS; ++ni) {
                const int col = col0 + n_base + ni * SUB_N;
                if (GUARD) {
#pragma unroll
                    for (int j = 0; j < TN; ++j)
                        if (row < M && col + j < N)
                            gemm_store(p, C, row * ldc + col + j, acc[mi][ni][i][j]);
                } else {
                    gemm_store4(p, C, row * ldc + col,
                                make_float4(acc[mi][ni][i][0], acc[mi][ni][i][1],
                                            acc[mi][ni][i][2], acc[mi][ni][i][3]));
                }
            }
        }
}

// The vector body for interior blocks of aligned shapes, else the guarded one.
template <int BM, int BN, int BK, int WM_ITERS, int WN_ITERS>
__device__ __forceinline__ void tuned(const float* A, const float* B, float* C,
                                      const GemmParams& p) {
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    if (row0 + BM <= (int)p.m && col0 + BN <= (int)p.n && p.k % BK == 0 && gemm_vec4(A, B, C, p))
        tuned_body<BM, BN, BK, WM_ITERS, WN_ITERS, false>(A, B, C, p, row0, col0);
    else
        tuned_body<BM, BN, BK, WM_ITERS, WN_ITERS, true>(A, B, C, p, row0, col0);
}

// tuned_{BM}x{BN}x{BK}_w{WM}x{WN}: WM = 16 * WM_ITERS, WN = 32 * WN_ITERS.
#define INSTANCE(BM, BN, BK, WMI, WNI, NAME)                                                 \
    extern "C" __global__ void NAME(const float* A, const float* B, float* C, GemmParams p) { \
        GEMM_DISPATCH((tuned<BM, BN, BK, WMI, WNI>), A, B, C, p);                              \
    }

INSTANCE(128, 128, 16, 2, 2, tuned_128x128x16_w32x64)
INSTANCE(128, 128, 8, 4, 2, tuned_128x128x8_w64x64)
