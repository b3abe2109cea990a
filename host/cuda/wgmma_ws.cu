// Step 13's Rust kernel in CUDA C++, compiled at run time by NVRTC so the
// benchmark can time both in one process: the twin of
// wgmma_ws_256x128x32_s4 (kernels-gpu's k13_wgmma_ws.rs, on step 12's
// k12_wgmma.rs). Same algorithm, launch shape and instructions:
//
// - 384 threads: warps 0-7 (two warpgroups) compute, warps 8-11 (a third
//   warpgroup) produce; `setmaxnreg` gives the producer 40 registers and
//   the consumers 232. The block computes the 256 x 128 tile of C at
//   (256 blockIdx.y, 128 blockIdx.x), the grid being the Rust kernel's.
// - 4 stages in launch-sized (extern) shared memory, from its first
//   1024-byte boundary (the 128-byte swizzle's alignment), computed from
//   the region's address as the Rust kernel does; stage s holds A's box
//   [256][32] (TMA, 128-byte swizzle), then B's 16 boxes [32][8]. After
//   the stages, 4 `full` mbarriers (1 arrival: the producer's
//   arrive.expect_tx of the stage's 49,152 bytes) and 4 `empty` ones (8
//   arrivals: one per consumer warp when it is done with the stage).
// - One producer thread (thread 256) waits on `empty`, announces the bytes
//   and issues 17 TMA copies per tile (A's box, B's 16 boxes), from the
//   two tensor maps the host made (A's, then B's 128 bytes later).
// - The consumers compute C^T = B^T A^T: `wgmma` m64n256k8 TF32 with its
//   A operand (B's tile, transposed) in registers, loaded by each thread
//   (4 words per k-step) and rounded with cvt.rna, and its B operand (A's
//   tile) read by the tensor cores through a shared-memory descriptor
//   (K-major, 128-byte swizzle, stride 1024 bytes). Per tile: wait on
//   `full`, load the 16 fragment words, fence, 4 wgmmas, commit, wait for
//   all, then lane 0 of each warp arrives on `empty`.
// - Step 12's epilogue (store_tile): guarded stores only in edge tiles,
//   one running index advanced 8 rows at a time.
//
// Every asm statement is the Rust device helper's template, with the same
// operands; those the Rust side writes without `nomem` (every one but
// cvt.rna and cvta.to.shared, which are `pure, nomem`) are `asm volatile`
// with a "memory" clobber, those two plain `asm`. Index arithmetic is
// 64-bit where the Rust kernel's is usize (`usize` below).
//
// What is necessarily different:
// - The 128 accumulators are named in the asm operand lists as "+f"
//   operands %0-%127 of a float[128] (the wgmma's A fragments %128-%131,
//   its descriptor %132; the fence's fragments %128-%143, descriptors
//   %144-%147; the wait's fragments %128-%143, its count an "n" operand,
//   %144), where the Rust helpers name them `{0}`-`{127}` as
//   `inout(reg32)` (which LLVM prints as %r registers, nvcc as %f).
// - The register cap at entry comes from __launch_bounds__(384, 1), which
//   also writes `.minnctapersm 1`; the Rust entry gets `.maxntid 384, 1, 1`
//   from the host (host::with_launch_bounds). Both cap ptxas at 168.
// - The shared region is `extern __shared__ float hopper_smem[]` (the Rust
//   kernel's is `gpu_launch_sized_workgroup_mem`); both are launched with
//   the Rust SPEC's shared_bytes (1024 + 4 x 49,152 + 64 = 197,696).
//
// What the host must do: compile with NVRTC for `compute_90a` (not
// compute_90: wgmma, setmaxnreg and the arch-specific features need the
// `a` target), with no -D options (the constants below are the Rust
// kernel's). Launch as
// the Rust kernel: block (384, 1, 1), grid (ceil(N / 128), ceil(M / 256)),
// SPEC.launch.shared_bytes of dynamic shared memory (opted into above
// 48 KB), parameters (A, B, C, GemmParams, maps) with the same tensor maps
// (host/src/tma.rs, for these buffers and this shape).

#include "gemm_params.cuh"
#include "hopper.cuh"

// device::mma::to_tf32.
static __device__ __forceinline__ unsigned ws_to_tf32(float x) {
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}

#define WS_BM 256
#define WS_BN 128
#define WS_BK 32
#define WS_STAGES 4
#define WS_B_BOX_COLS 8
#define WS_ALIGN 1024
#define WS_CONSUMERS 256
#define WS_THREADS (WS_CONSUMERS + 128)
#define WS_PRODUCER_REGISTERS 40
#define WS_CONSUMER_REGISTERS 232
#define WS_TENSOR_MAP_BYTES 128
// Words of one stage (A's box, then B's boxes) and the bytes TMA brings.
#define WS_STAGE_WORDS (WS_BM * WS_BK + WS_BK * WS_BN)
#define WS_STAGE_BYTES (WS_STAGE_WORDS * 4)
// What the launch gives (the Rust SPEC's shared_bytes): alignment room,
// the stages, two 8-byte barriers per stage.
#define WS_SHARED_BYTES (WS_ALIGN + WS_STAGES * WS_STAGE_BYTES + 16 * WS_STAGES)

static_assert(WS_STAGES >= 2 && WS_STAGES <= 8, "stages");
static_assert(WS_STAGE_BYTES % WS_ALIGN == 0, "stages keep the 1024-byte alignment");
static_assert(WS_SHARED_BYTES <= 227 * 1024, "shared memory per block");

// The 16 fragment words of a group (A's registers of its 4 wgmmas).
#define WS_A_OPERANDS(a) \
    "+r"(a[0][0]), "+r"(a[0][1]), "+r"(a[0][2]), "+r"(a[0][3]), \
    "+r"(a[1][0]), "+r"(a[1][1]), "+r"(a[1][2]), "+r"(a[1][3]), \
    "+r"(a[2][0]), "+r"(a[2][1]), "+r"(a[2][2]), "+r"(a[2][3]), \
    "+r"(a[3][0]), "+r"(a[3][1]), "+r"(a[3][2]), "+r"(a[3][3])

// wgmma::fence_128: the fence, with D, the fragments and the descriptors
// of the coming group as operands (named in a comment), so that the
// compiler computes none of them between it and the wgmmas.
static __device__ __forceinline__ void ws_fence_128(float (&d)[128], unsigned (&a)[4][4],
                                                    unsigned long long (&b)[4]) {
    asm volatile("wgmma.fence.sync.aligned; // " HOPPER_D_LIST
                 " %128 %129 %130 %131 %132 %133 %134 %135 %136 %137 %138 %139 %140 %141 %142 %143"
                 " %144 %145 %146 %147"
                 : HOPPER_D_OPERANDS(d), WS_A_OPERANDS(a),
                   "+l"(b[0]), "+l"(b[1]), "+l"(b[2]), "+l"(b[3])
                 :
                 : "memory");
}

// wgmma::mma_m64n256k8_tf32: d += a * B, a this thread's part of the
// 64 x 8 A (TF32 bits), B the 8 x 256 K-major tile `b` describes.
static __device__ __forceinline__ void ws_mma_m64n256k8_tf32(float (&d)[128], const unsigned (&a)[4],
                                                             unsigned long long b) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 {" HOPPER_D_LIST "}, "
                 "{%128, %129, %130, %131}, %132, 1, 1, 1;"
                 : HOPPER_D_OPERANDS(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b)
                 : "memory");
}

// wgmma::wait_group_128::<0>: with D and the group's fragments as
// operands, so that neither is touched while the wgmmas may run.
static __device__ __forceinline__ void ws_wait_group_128_0(float (&d)[128], unsigned (&a)[4][4]) {
    asm volatile("wgmma.wait_group.sync.aligned %144; // " HOPPER_D_LIST
                 " %128 %129 %130 %131 %132 %133 %134 %135 %136 %137 %138 %139 %140 %141 %142 %143"
                 : HOPPER_D_OPERANDS(d), WS_A_OPERANDS(a)
                 : "n"(0)
                 : "memory");
}

// k12_wgmma::store_tile: thread tid of the consumers stores its
// accumulators; acc[4j + 2h + e] is C[row0 + 8j + 2t + e][col0 + 64wg +
// 16w + g + 8h]. Bounds as offsets from the thread's first row and column.
static __device__ __forceinline__ void ws_store_tile(float* C, const GemmParams& p,
                                                     const float (&acc)[128], usize row0,
                                                     usize col0, usize tid) {
    usize m = p.m, n = p.n, ldc = p.ldc;
    usize wg = tid / 128, warp = tid % 128 / 32, lane = tid % 32;
    usize row = row0 + 2 * (lane % 4), col = col0 + 64 * wg + 16 * warp + lane / 4;
    bool interior = row0 + WS_BM <= m && col0 + WS_BN <= n;
    usize rows_left = m > row ? m - row : 0, cols_left = n > col ? n - col : 0;
    usize index = row * ldc + col;
    if (interior) {
#pragma unroll
        for (int j = 0; j < WS_BM / 8; ++j) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    gemm_store(p, C, index + e * ldc + 8 * h, acc[4 * j + 2 * h + e]);
                }
            }
            index += 8 * ldc;
        }
    } else {
#pragma unroll
        for (int j = 0; j < WS_BM / 8; ++j) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    if ((usize)(8 * j + e) < rows_left && (usize)(8 * h) < cols_left) {
                        gemm_store(p, C, index + e * ldc + 8 * h, acc[4 * j + 2 * h + e]);
                    }
                }
            }
            index += 8 * ldc;
        }
    }
}

// k13_wgmma_ws::consume: step 12's loop, stages released through `empty`.
static __device__ __forceinline__ void ws_consume(float* C, const GemmParams& p, usize row0,
                                                  usize col0, usize base, usize tid,
                                                  usize k_tiles) {
    usize barriers = base + WS_STAGES * WS_STAGE_WORDS;

    usize wg = tid / 128, warp = tid % 128 / 32, lane = tid % 32;
    usize group = lane / 4, quad = lane % 4;
    usize box0 = (64 * wg + 16 * warp) / WS_B_BOX_COLS;

    float acc[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
    unsigned frag[WS_BK / 8][4] = {};
    for (usize kt = 0; kt < k_tiles; ++kt) {
        usize s = kt % WS_STAGES;
        usize a_tile = base + s * WS_STAGE_WORDS;
        hopper_mbar_wait(hopper_address(barriers + 2 * s), (unsigned)(kt / WS_STAGES % 2));

        // B's boxes [BN / 8][BK][8] of stage s: rows box * BK + k.
        usize b_tile = a_tile + WS_BM * WS_BK;
#pragma unroll
        for (int step = 0; step < WS_BK / 8; ++step) {
            usize k = 8 * step + quad;
            usize r0 = box0 * WS_BK + k, r1 = (box0 + 1) * WS_BK + k;
            frag[step][0] = ws_to_tf32(hopper_smem[b_tile + r0 * WS_B_BOX_COLS + group]);
            frag[step][1] = ws_to_tf32(hopper_smem[b_tile + r1 * WS_B_BOX_COLS + group]);
            frag[step][2] = ws_to_tf32(hopper_smem[b_tile + (r0 + 4) * WS_B_BOX_COLS + group]);
            frag[step][3] = ws_to_tf32(hopper_smem[b_tile + (r1 + 4) * WS_B_BOX_COLS + group]);
        }
        unsigned long long desc[WS_BK / 8] = {};
#pragma unroll
        for (int step = 0; step < WS_BK / 8; ++step) {
            desc[step] = hopper_descriptor_k_major_sw128(a_tile + 8 * step);
        }
        ws_fence_128(acc, frag, desc);
#pragma unroll
        for (int step = 0; step < WS_BK / 8; ++step) {
            ws_mma_m64n256k8_tf32(acc, frag[step], desc[step]);
        }
        hopper_commit_group();
        ws_wait_group_128_0(acc, frag);
        // This warp is done with stage s: release it.
        if (lane == 0) {
            hopper_mbar_arrive(hopper_address(barriers + 2 * (WS_STAGES + s)));
        }
    }

    ws_store_tile(C, p, acc, row0, col0, tid);
}

// The launch bounds go on a declaration, so that the definition reads
// `extern "C" __global__ void NAME(` as the twins test looks for
// (tests/tests/twins.rs); nvcc and NVRTC apply them to the entry (its PTX
// has `.maxntid 384, 1, 1`, as with the attribute on the definition).
extern "C" __global__ void __launch_bounds__(WS_THREADS, 1)
wgmma_ws_256x128x32_s4(const float* A, const float* B, float* C, GemmParams p,
                       const unsigned char* maps);

extern "C" __global__ void wgmma_ws_256x128x32_s4(const float* A, const float* B, float* C,
                                                  GemmParams p, const unsigned char* maps) {
    // One product per launch, as the Rust kernel (KernelSpec::batches).
    (void)A;
    (void)B;
    usize k = p.k;
    usize tid = threadIdx.x;
    usize row0 = (usize)blockIdx.y * WS_BM, col0 = (usize)blockIdx.x * WS_BN;
    const unsigned char* map_a = maps;
    const unsigned char* map_b = maps + WS_TENSOR_MAP_BYTES;

    // Stages from the first 1024-byte boundary of the region, in words;
    // then full(s) at barriers + 2s, empty(s) at barriers + 2(STAGES + s).
    usize base = (WS_ALIGN - (usize)hopper_address(0) % WS_ALIGN) % WS_ALIGN / 4;
    usize barriers = base + WS_STAGES * WS_STAGE_WORDS;
    usize k_tiles = (k + WS_BK - 1) / WS_BK;

    if (tid == 0) {
        hopper_prefetch_map(map_a);
        hopper_prefetch_map(map_b);
#pragma unroll
        for (int s = 0; s < WS_STAGES; ++s) {
            hopper_mbar_init(hopper_address(barriers + 2 * s), 1);
            hopper_mbar_init(hopper_address(barriers + 2 * (WS_STAGES + s)), WS_CONSUMERS / 32);
        }
        hopper_fence_init();
    }
    __syncthreads();

    if (tid >= WS_CONSUMERS) {
        // The producer warpgroup; one thread issues everything.
        hopper_release_registers<WS_PRODUCER_REGISTERS>();
        if (tid == WS_CONSUMERS) {
            for (usize kt = 0; kt < k_tiles; ++kt) {
                usize s = kt % WS_STAGES;
                unsigned k0 = (unsigned)(kt * WS_BK);
                usize a_tile = base + s * WS_STAGE_WORDS;
                unsigned full = hopper_address(barriers + 2 * s);
                if (kt >= WS_STAGES) {
                    hopper_mbar_wait(hopper_address(barriers + 2 * (WS_STAGES + s)),
                                 (unsigned)((kt / WS_STAGES + 1) % 2));
                }
                hopper_mbar_arrive_expect_tx(full, WS_STAGE_BYTES);
                hopper_load_2d(map_a, a_tile, k0, (unsigned)row0, full);
#pragma unroll
                for (int j = 0; j < WS_BN / WS_B_BOX_COLS; ++j) {
                    usize word = a_tile + WS_BM * WS_BK + j * WS_BK * WS_B_BOX_COLS;
                    hopper_load_2d(map_b, word, (unsigned)(col0 + j * WS_B_BOX_COLS), k0, full);
                }
            }
        }
    } else {
        hopper_take_registers<WS_CONSUMER_REGISTERS>();
        ws_consume(C, p, row0, col0, base, tid, k_tiles);
    }
}
