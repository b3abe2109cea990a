// The Rust kernels' twins in CUDA C++, compiled at run time by NVRTC so the
// benchmark can time both in one process. Same algorithm, launch shape and
// edge guards as kernels-gpu's k01_naive.rs and k02_tiled16.rs; tiled16 is
// the lesson's code with those guards added. The tile edge comes from the
// Rust kernel's constant (-DTILE=16: a macro named T would break NVRTC's
// built-in headers, which use T as a template parameter). nvcc and NVRTC
// contract `acc += a * b` into an FMA by default, as the Rust kernels do
// explicitly.
#include "gemm_params.cuh"
#define T TILE

// One thread per element of C; consecutive threads take consecutive columns.
static __device__ __forceinline__ void naive_body(const float* A, const float* B, float* C,
                                                  const GemmParams& p) {
    int M = p.m, N = p.n, K = p.k, lda = p.lda, ldb = p.ldb, ldc = p.ldc;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k)
        acc += A[row * lda + k] * B[k * ldb + col];
    gemm_store(p, C, row * ldc + col, acc);
}

extern "C" __global__ void naive(const float* A, const float* B, float* C, GemmParams p) {
    GEMM_DISPATCH(naive_body, A, B, C, p);
}

// The lesson's matmul_tiled, for any M, N, K.
static __device__ __forceinline__ void tiled16_body(const float* A, const float* B, float* C,
                                                    const GemmParams& p) {
    int M = p.m, N = p.n, K = p.k, lda = p.lda, ldb = p.ldb, ldc = p.ldc;
    __shared__ float As[T][T + 1];
    __shared__ float Bs[T][T + 1];

    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * T + ty;
    int col = blockIdx.x * T + tx;
    float acc = 0.0f;

    for (int k0 = 0; k0 < K; k0 += T) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[row * lda + (k0 + tx)] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * ldb + col] : 0.0f;
        __syncthreads();  // tiles fully staged

        for (int k = 0; k < T; ++k)
            acc += As[ty][k] * Bs[k][tx];

        __syncthreads();  // done reading before next phase overwrites
    }
    if (row < M && col < N) gemm_store(p, C, row * ldc + col, acc);
}

extern "C" __global__ void tiled16(const float* A, const float* B, float* C, GemmParams p) {
    GEMM_DISPATCH(tiled16_body, A, B, C, p);
}
