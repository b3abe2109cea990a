// Steps 20 and 22's Rust kernels in CUDA C++, compiled at run time by
// NVRTC so the benchmark can time each next to its twin in one process:
// wgmma_bf16_persistent_128x256x64_s4 (kernels-gpu's
// k20_wgmma_persistent.rs, which runs step 19's main loop and epilogue,
// k19_wgmma_16bit.rs, in step 13's pipeline, k13_wgmma_ws.rs) and
// wgmma_bf16_tma_store_128x256x64_s4 (k22_wgmma_tma_store.rs: the same
// block with C written by TMA), the Rust kernels' generic code
// instantiated for BF16 A and B, an f32 C and 4 stages (pt_block<TMA_C>
// here, block::<.., TMA_C> there). Same algorithm, launch shape and
// instructions:
//
// - A persistent grid: block b computes the tiles b, b + gridDim.x, ...
//   of the 128 x 256 tiles of C, in the grouped order of `tile_origin`
//   (bands of 8 rows of tiles, each walked down its rows, then right);
//   the host launches min(tiles, SMs) blocks of one row.
// - 384 threads: warps 0-7 (two warpgroups) compute, warps 8-11 (a third
//   warpgroup) produce; `setmaxnreg` gives the producer 40 registers and
//   the consumers 232.
// - 4 stages in launch-sized (extern) shared memory, from its first
//   1024-byte boundary (the 128-byte swizzle's alignment), computed from
//   the region's address as the Rust kernel does, set up once per block;
//   stage s holds A's box [128][64] (TMA, 128-byte swizzle, 16 KB), then
//   B's 4 boxes [64 rows of K][64 columns] (128-byte swizzle, 8 KB each).
//   After the stages, 4 `full` mbarriers (1 arrival: the producer's
//   arrive.expect_tx of the stage's 49,152 bytes) and 4 `empty` ones (8
//   arrivals: one per consumer warp when it is done with the stage).
// - One producer thread (thread 256) walks the block's tiles of C; for
//   each K tile it waits on `empty` for the release of the stage's
//   previous K tile (from the pipeline's fifth K tile on), announces the
//   bytes and issues 5 TMA copies (A's box, B's 4 boxes), from the two
//   tensor maps the host made (A's, then B's 128 bytes later). The
//   pipeline's counter `it` (which stage, which phase) runs on from one
//   tile of C to the next, so the producer fills the stages with the next
//   tile's first K tiles while the consumers finish and store the current
//   one.
// - The consumers walk the same tiles in the same order. Per K tile:
//   wait on `full`, make the descriptors (A K-major: this warpgroup's 64
//   rows, 32 bytes on per k-step; B MN-major: 16 rows of K, 2 KB, on per
//   k-step, its boxes 8 KB apart as the leading offset), fence, four
//   `wgmma` m64n256k16 BF16 with both operands in shared memory
//   (imm-trans-a 0, imm-trans-b 1), commit, wait until one group is in
//   flight, then lane 0 of each warp releases the previous K tile's
//   stage. After the last K tile: wait for all, release its stage.
// - Step 19's epilogue (store_tile): acc[4j + 2h + e] is C[row0 + 64wg +
//   16w + g + 8h][col0 + 8j + 2t + e]; pairs of columns stored as 64-bit
//   accesses in interior tiles when C is 8-byte aligned and ldc even;
//   else each warp stages its 16 rows, 32 columns at a time, in its own
//   tile of shared memory after the stages' barriers (16 x 40 words,
//   64-bit writes) and stores them a row at a time (lane l, column l),
//   each value guarded; C = alpha * acc + beta * C, C not read when beta
//   is 0 (Gemm::store_c / store_c2, gemm_store here).
// - Step 22 only (TMA_C), where beta is 0 and C starts and its rows lie
//   on 16 bytes (launch::c_by_tma): store_tile_tma. Each consumer warp
//   writes its 16 rows 32 columns at a time into one of its two boxes of
//   16 x 128 bytes (after the stages' barriers, from the next 1024-byte
//   boundary), 64-bit writes at the places TMA's 128-byte swizzle gives;
//   lane 0 waits (`cp.async.bulk.wait_group.read 1`) before a box is
//   reused, and after the warp's fence.proxy.async and meeting issues the
//   box's `cp.async.bulk.tensor` store from C's map (the third) and
//   commits it as one bulk group; lane 0 of each warp waits for all its
//   groups before the block exits. Otherwise step 20's store_tile, with
//   its staging tiles at the boxes' place.
//
// Every asm statement is the Rust device helper's template, with the same
// operands; those the Rust side writes without `nomem` (every one but
// cvta.to.shared, which is `pure, nomem`) are `asm volatile` with a
// "memory" clobber, that one plain `asm`. Index arithmetic is 64-bit
// where the Rust kernel's is usize (`usize` below).
//
// What is necessarily different:
// - The 128 accumulators are named in the asm operand lists as "+f"
//   operands %0-%127 of a float[128] (the fence's descriptors %128-%135;
//   the wgmma's descriptors %128 and %129, its transpose bits "n"
//   operands %130 and %131; the wait's count an "n" operand, %128), where
//   the Rust helpers name them `{0}`-`{127}` as `inout(reg32)` (which
//   LLVM prints as %r registers, nvcc as %f) and the constants as `const`.
// - The register cap at entry comes from __launch_bounds__(384, 1), which
//   also writes `.minnctapersm 1`; the Rust entry gets `.maxntid 384, 1, 1`
//   from the host (host::with_launch_bounds). Both cap ptxas at 168.
// - The shared region is `extern __shared__ float hopper_smem[]` (the Rust
//   kernel's is `gpu_launch_sized_workgroup_mem`); both are launched with
//   the Rust SPEC's shared_bytes (step 20: 1024 + 4 x 49,152 + 64 +
//   20,480 = 218,176; step 22: 1024 + 4 x 49,152 + 1024 + 32,768 =
//   231,424).
// - A and B are `const unsigned short*` (BF16 bit patterns, as the Rust
//   `Bf16(u16)`); neither kernel reads them through the pointers, only
//   through the tensor maps, and PTX pointer parameters are untyped.
//
// What the host must do: compile with NVRTC for `compute_90a` (not
// compute_90: wgmma, setmaxnreg and the arch-specific features need the
// `a` target), with no -D options (the constants below are the Rust
// kernels'). Launch as the Rust kernel (runner::launch_config, from the
// Rust SPEC): block (384, 1, 1), grid (min(ceil(M / 128) * ceil(N / 256),
// SMs), 1, 1) (Launch::persistent_grid), SPEC.launch.shared_bytes of
// dynamic shared memory (opted into above 48 KB), parameters (A, B, C,
// GemmParams, maps) with the same tensor maps (host/src/tma.rs, for
// these buffers and this shape: BF16, A's box 128 x 64, B's 64 x 64,
// both with the 128-byte swizzle; for step 22, when c_by_tma holds, C's
// f32 box 16 x 32 with the 128-byte swizzle). A test checks the constants
// below against the Rust kernels' specs (tests/tests/twins.rs).

#include "gemm_params.cuh"
#include "hopper.cuh"

#define PT_BM 128
#define PT_BN 256
#define PT_BK 64
#define PT_B_BOX_COLS 64
#define PT_STAGES 4
#define PT_GROUP 8
#define PT_ALIGN 1024
#define PT_CONSUMERS 256
#define PT_THREADS (PT_CONSUMERS + 128)
#define PT_PRODUCER_REGISTERS 40
#define PT_CONSUMER_REGISTERS 232
#define PT_TENSOR_MAP_BYTES 128
#define PT_ELEM_BYTES 2
// m64n256k16 steps per stage.
#define PT_K_STEPS (PT_BK / 16)
// Words of one 128-byte row of a swizzled tile (A's rows, B's rows).
#define PT_ROW_WORDS 32
// Words of one of B's boxes in a stage.
#define PT_BOX_WORDS (PT_BK * PT_B_BOX_COLS * PT_ELEM_BYTES / 4)
// Words of one stage (A's tile [BM][BK], then B's boxes [BN / 64][BK][64],
// 16-bit elements two to a word) and the bytes TMA brings.
#define PT_STAGE_WORDS ((PT_BM * PT_BK + PT_BK * PT_BN) * PT_ELEM_BYTES / 4)
#define PT_STAGE_BYTES (PT_STAGE_WORDS * 4)
// What the launch gives (the Rust SPEC's shared_bytes): alignment room,
// the stages, two 8-byte barriers per stage.
// The epilogue's staging tile of each consumer warp: 16 rows of C by
// PT_STAGING_COLS, in rows of PT_STAGING_PITCH words (8 more than the
// columns: the 64-bit writes of a half-warp hit 32 distinct banks), after
// the stages and their barriers.
#define PT_STAGING_COLS 32
#define PT_STAGING_PITCH 40
#define PT_STAGING_WORDS (8 * 16 * PT_STAGING_PITCH)
#define PT_SHARED_BYTES (PT_ALIGN + PT_STAGES * PT_STAGE_BYTES + 16 * PT_STAGES + PT_STAGING_WORDS * 4)
// Step 22's boxes of C (k22_wgmma_tma_store: BOX_WORDS, STAGING_WORDS):
// 16 rows of 128 bytes (32 f32), two per consumer warp, from the first
// 1024-byte boundary after the stages' barriers (Stages::end_aligned).
#define PT_C_BOX_ROWS 16
#define PT_C_BOX_COLS 32
#define PT_C_BOX_WORDS (PT_C_BOX_ROWS * PT_C_BOX_COLS)
#define PT_C_STAGING_WORDS (8 * 2 * PT_C_BOX_WORDS)
#define PT_TMA_SHARED_BYTES (PT_ALIGN + PT_STAGES * PT_STAGE_BYTES + PT_ALIGN + PT_C_STAGING_WORDS * 4)

static_assert(PT_BK * PT_ELEM_BYTES == 128, "a row of A's box is one 128-byte swizzled row");
static_assert(PT_B_BOX_COLS * PT_ELEM_BYTES == 128 && PT_BN % PT_B_BOX_COLS == 0, "B's boxes");
static_assert(PT_STAGES >= 2 && PT_STAGES <= 8, "stages");
static_assert(PT_STAGE_BYTES % PT_ALIGN == 0, "stages keep the 1024-byte alignment");
static_assert(PT_BM * PT_ROW_WORDS * 4 % PT_ALIGN == 0, "B's part of a stage is 1024-byte aligned");
static_assert(PT_SHARED_BYTES <= 227 * 1024, "shared memory per block");
static_assert(PT_STAGING_PITCH == PT_STAGING_COLS + 8, "the staging tile's pitch");
static_assert(16 * PT_STAGES <= PT_ALIGN, "the barriers fit before the boxes of C");
static_assert(PT_STAGING_WORDS <= PT_C_STAGING_WORDS, "step 20's staging tiles fit in step 22's boxes");
static_assert(PT_TMA_SHARED_BYTES <= 227 * 1024, "shared memory per block with the boxes of C");
static_assert(PT_C_BOX_COLS * 4 == 128, "a row of a box of C is one 128-byte swizzled row");

// device::wgmma::descriptor_mn_major_sw128: an MN-major tile with 128-byte
// swizzle at `word`, the next 64 columns `lbo_bytes` on (leading offset),
// the next 8 rows of K 1024 bytes on (stride).
static __device__ __forceinline__ unsigned long long pt_descriptor_mn_major_sw128(usize word,
                                                                              unsigned lbo_bytes) {
    unsigned long long address = (unsigned long long)hopper_address(word);
    return ((address & 0x3FFFFull) >> 4) | (((unsigned long long)lbo_bytes >> 4) << 16) |
           ((1024ull >> 4) << 32) | (1ull << 62);
}

// wgmma::fence_ss_128: the fence, with D and the descriptors of the
// coming group's A and B as operands (named in a comment), so that the
// compiler computes none of them between it and the wgmmas.
static __device__ __forceinline__ void pt_fence_ss_128(float (&d)[128], unsigned long long (&a)[4],
                                                       unsigned long long (&b)[4]) {
    asm volatile("wgmma.fence.sync.aligned; // " HOPPER_D_LIST
                 " %128 %129 %130 %131 %132 %133 %134 %135"
                 : HOPPER_D_OPERANDS(d), "+l"(a[0]), "+l"(a[1]), "+l"(a[2]), "+l"(a[3]),
                   "+l"(b[0]), "+l"(b[1]), "+l"(b[2]), "+l"(b[3])
                 :
                 : "memory");
}

// wgmma::mma_m64n256k16_bf16_ss::<TRANS_A, TRANS_B> (Wgmma16 for Bf16):
// d += A * B, A the 64 x 16 tile `a` describes, B the 16 x 256 tile `b`
// describes, each K-major (0) or MN-major (1).
template <unsigned TRANS_A, unsigned TRANS_B>
static __device__ __forceinline__ void pt_mma_m64n256k16_bf16_ss(float (&d)[128],
                                                                 unsigned long long a,
                                                                 unsigned long long b) {
    asm volatile("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {" HOPPER_D_LIST "}, "
                 "%128, %129, 1, 1, 1, %130, %131;"
                 : HOPPER_D_OPERANDS(d)
                 : "l"(a), "l"(b), "n"(TRANS_A), "n"(TRANS_B)
                 : "memory");
}

// wgmma::wait_ss_128::<PENDING>: with D as operands, so that it is not
// touched while the wgmmas may run.
template <unsigned PENDING>
static __device__ __forceinline__ void pt_wait_ss_128(float (&d)[128]) {
    asm volatile("wgmma.wait_group.sync.aligned %128; // " HOPPER_D_LIST
                 : HOPPER_D_OPERANDS(d)
                 : "n"(PENDING)
                 : "memory");
}

// k13_wgmma_ws::Stages with BM = 128, STAGES = 4, BK = 64: stage s at
// base + s * STAGE_WORDS (A's tile, then B's part BM rows of 32 words on),
// full(s) at barriers + 2s, empty(s) at barriers + 2(STAGES + s).
static __device__ __forceinline__ usize pt_a_tile(usize base, usize s) {
    return base + s * PT_STAGE_WORDS;
}

static __device__ __forceinline__ usize pt_b_tile(usize base, usize s) {
    return pt_a_tile(base, s) + PT_BM * PT_ROW_WORDS;
}

static __device__ __forceinline__ unsigned pt_full(usize base, usize s) {
    return hopper_address(base + PT_STAGES * PT_STAGE_WORDS + 2 * s);
}

static __device__ __forceinline__ unsigned pt_empty(usize base, usize s) {
    return hopper_address(base + PT_STAGES * PT_STAGE_WORDS + 2 * (PT_STAGES + s));
}

static __device__ __forceinline__ usize pt_max1(usize x) { return x == 0 ? 1 : x; }

// k20_wgmma_persistent::tile_origin: where tile t of an m x n C lies, in
// bands of GROUP rows of tiles (the last band may be shorter), each walked
// down its rows, then right. The divisors are kept at least 1, as in Rust.
static __device__ __forceinline__ void pt_tile_origin(usize t, usize m, usize n, usize& row0,
                                                      usize& col0) {
    usize tiles_m = (m + PT_BM - 1) / PT_BM, tiles_n = (n + PT_BN - 1) / PT_BN;
    usize band_tiles = pt_max1(PT_GROUP * tiles_n);
    usize first = t / band_tiles * PT_GROUP;
    usize left = tiles_m > first ? tiles_m - first : 0;
    usize rows = pt_max1(left < PT_GROUP ? left : PT_GROUP);
    usize within = t % band_tiles;
    row0 = (first + within % rows) * PT_BM;
    col0 = (within / rows) * PT_BN;
}

// k13_wgmma_ws::Stages::produce with k19_wgmma_16bit::load_b: the
// producer thread's copies of the pipeline's tiles it0..it0 + k_tiles
// (one tile of C, rows from row0, columns from col0).
static __device__ __forceinline__ void pt_produce(const unsigned char* map_a,
                                                  const unsigned char* map_b, usize base,
                                                  usize it0, usize k_tiles, usize row0,
                                                  usize col0) {
    for (usize kt = 0; kt < k_tiles; ++kt) {
        usize it = it0 + kt;
        usize s = it % PT_STAGES;
        unsigned k0 = (unsigned)(kt * PT_BK);
        // The stage's previous tile, it - STAGES, was released in phase
        // it / STAGES - 1 of empty(s).
        if (it >= PT_STAGES) {
            hopper_mbar_wait(pt_empty(base, s), (unsigned)((it / PT_STAGES + 1) % 2));
        }
        hopper_mbar_arrive_expect_tx(pt_full(base, s), PT_STAGE_BYTES);
        hopper_load_2d(map_a, pt_a_tile(base, s), k0, (unsigned)row0, pt_full(base, s));
        // load_b: B's BN / 64 boxes of BK x 64, BOX_WORDS apart.
        usize word = pt_b_tile(base, s);
        unsigned full = pt_full(base, s);
#pragma unroll
        for (int j = 0; j < PT_BN / PT_B_BOX_COLS; ++j) {
            hopper_load_2d(map_b, word + j * PT_BOX_WORDS, (unsigned)(col0 + j * PT_B_BOX_COLS), k0,
                       full);
        }
    }
}

// k19_wgmma_16bit::mainloop: one tile of C for consumer thread tid, the
// pipeline's tiles it0..it0 + k_tiles of K, one group in flight across
// them; the last stage released once its group is retired. acc ends as
// the tile's accumulators.
static __device__ __forceinline__ void pt_mainloop(float (&acc)[128], usize base, usize it0,
                                                   usize k_tiles, usize tid) {
    usize wg = tid / 128, lane = tid % 32;
#pragma unroll
    for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
    for (usize kt = 0; kt < k_tiles; ++kt) {
        usize it = it0 + kt;
        usize s = it % PT_STAGES;
        // Stages::wait_full(it): phase it / STAGES of full(s).
        hopper_mbar_wait(pt_full(base, s), (unsigned)(it / PT_STAGES % 2));
        // A: this warpgroup's 64 rows, 16 values (32 bytes) on per step.
        // B: 16 rows (2 KB) on per step, its boxes BOX_WORDS apart.
        unsigned long long a_desc[PT_K_STEPS] = {}, b_desc[PT_K_STEPS] = {};
#pragma unroll
        for (int step = 0; step < PT_K_STEPS; ++step) {
            a_desc[step] = hopper_descriptor_k_major_sw128(pt_a_tile(base, s) +
                                                       64 * wg * PT_ROW_WORDS + 8 * step);
            b_desc[step] = pt_descriptor_mn_major_sw128(pt_b_tile(base, s) +
                                                            16 * step * PT_ROW_WORDS,
                                                        PT_BOX_WORDS * 4);
        }
        pt_fence_ss_128(acc, a_desc, b_desc);
#pragma unroll
        for (int step = 0; step < PT_K_STEPS; ++step) {
            pt_mma_m64n256k16_bf16_ss<0, 1>(acc, a_desc[step], b_desc[step]);
        }
        hopper_commit_group();
        // Tile it - 1's group is retired; tile it's stays in flight.
        pt_wait_ss_128<1>(acc);
        if (kt >= 1 && lane == 0) {
            hopper_mbar_arrive(pt_empty(base, (it - 1) % PT_STAGES));
        }
    }
    pt_wait_ss_128<0>(acc);
    if (k_tiles >= 1 && lane == 0) {
        hopper_mbar_arrive(pt_empty(base, (it0 + k_tiles - 1) % PT_STAGES));
    }
}

// Gemm::store_c2 (Output::store2 for f32): C[idx..idx + 2] = alpha * acc
// + beta * C[idx..idx + 2] as 64-bit accesses, C not read when beta == 0.
static __device__ __forceinline__ void pt_store2(const GemmParams& p, float* C, usize idx,
                                                 float acc0, float acc1) {
    float2* c = reinterpret_cast<float2*>(C + idx);
    if (p.beta == 0.0f) {
        *c = make_float2(p.alpha * acc0, p.alpha * acc1);
    } else {
        const float2 old = *c;
        *c = make_float2(fmaf(p.beta, old.x, p.alpha * acc0), fmaf(p.beta, old.y, p.alpha * acc1));
    }
}

// device::barrier::sync_warp: `bar.warp.sync 0xffffffff`.
static __device__ __forceinline__ void pt_sync_warp() {
    asm volatile("bar.warp.sync 0xffffffff;" ::: "memory");
}

// k19_wgmma_16bit::store_tile for an f32 C: thread tid of the consumers
// stores its accumulators of the BM x BN tile at (row0, col0); pairs in
// an interior tile with ldc even, else each warp's 16 rows staged 32
// columns at a time in its tile of shared memory at word `staging`
// (SharedTile::store2: 64-bit writes) and stored row by row, lane l
// column l, each value guarded.
static __device__ __forceinline__ void pt_store_tile(float* C, const GemmParams& p,
                                                     const float (&acc)[128], usize row0,
                                                     usize col0, usize tid, usize staging) {
    usize m = p.m, n = p.n, ldc = p.ldc;
    usize wg = tid / 128, warp = tid % 128 / 32, lane = tid % 32;
    usize row = row0 + 64 * wg + 16 * warp + lane / 4, col = col0 + 2 * (lane % 4);
    bool interior = row0 + PT_BM <= m && col0 + PT_BN <= n;
    // Output::pairs for f32 (Gemm::vec2_c): C 8-byte aligned, ldc even.
    bool pairs = (unsigned long long)C % 8 == 0 && ldc % 2 == 0;
    if (interior && pairs) {
        usize index = row * ldc + col;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
#pragma unroll
            for (int j = 0; j < PT_BN / 8; ++j) {
                pt_store2(p, C, index + 8 * h * ldc + 8 * j, acc[4 * j + 2 * h],
                          acc[4 * j + 2 * h + 1]);
            }
        }
    } else {
        // This warp's 16 rows, and how many of them and of the tile's
        // columns lie inside C.
        usize first_row = row0 + 64 * wg + 16 * warp;
        usize rows_in = m > first_row ? m - first_row : 0, cols_in = n > col0 ? n - col0 : 0;
        usize tile = staging + (tid / 32) * (16 * PT_STAGING_PITCH);
        usize group = lane / 4, pair = 2 * (lane % 4);
#pragma unroll
        for (int c = 0; c < PT_BN / PT_STAGING_COLS; ++c) {
#pragma unroll
            for (int jj = 0; jj < PT_STAGING_COLS / 8; ++jj) {
                int j = c * (PT_STAGING_COLS / 8) + jj;
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    *reinterpret_cast<float2*>(hopper_smem + tile +
                                               (group + 8 * h) * PT_STAGING_PITCH + 8 * jj +
                                               pair) =
                        make_float2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
                }
            }
            pt_sync_warp();
            usize c_col = c * PT_STAGING_COLS + lane;
#pragma unroll
            for (int r = 0; r < 16; ++r) {
                if ((usize)r < rows_in && c_col < cols_in) {
                    gemm_store(p, C, (first_row + r) * ldc + col0 + c_col,
                               hopper_smem[tile + r * PT_STAGING_PITCH + lane]);
                }
            }
            pt_sync_warp();
        }
    }
}

// k22_wgmma_tma_store::swizzled: the byte of a 1024-byte-aligned box of
// 128-byte rows at which byte `byte` of row `row` lies (TMA's 128-byte
// swizzle: the 16-byte chunk's index XOR the row's index mod 8).
static __device__ __forceinline__ usize pt_swizzled(usize row, usize byte) {
    return row * 128 + (((byte / 16) ^ (row % 8)) * 16) + byte % 16;
}

// k22_wgmma_tma_store::store_tile_tma for an f32 C (beta 0, C's map
// made by the host): each warp writes its 16 rows, 32 columns (one box)
// at a time, into one of its two boxes at `staging`, alternately, with
// 64-bit writes at the swizzled places; lane 0 first waits until the copy
// engine has read that box's previous contents (wait_group.read 1), and
// after the warp's writes, fences and meeting issues the box's store,
// one bulk group each. The stores are waited for by later calls and the
// block's last bulk_wait.
static __device__ __forceinline__ void pt_store_tile_tma(const GemmParams& p,
                                                         const float (&acc)[128], usize row0,
                                                         usize col0, usize tid, usize staging,
                                                         const unsigned char* map_c) {
    usize wg = tid / 128, warp = tid % 128 / 32, lane = tid % 32;
    usize first_row = row0 + 64 * wg + 16 * warp;
    usize group = lane / 4, pair = 2 * (lane % 4);
    usize boxes_base = staging + (tid / 32) * 2 * PT_C_BOX_WORDS;
#pragma unroll
    for (int b = 0; b < PT_BN / PT_C_BOX_COLS; ++b) {
        usize box_word = boxes_base + (b % 2) * PT_C_BOX_WORDS;
        if (lane == 0) hopper_bulk_wait_read<1>();
        pt_sync_warp();
#pragma unroll
        for (int jj = 0; jj < PT_C_BOX_COLS / 8; ++jj) {
            int j = b * (PT_C_BOX_COLS / 8) + jj;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                usize row = group + 8 * h;
                usize col = pt_swizzled(row, (8 * jj + pair) * 4) % 128 / 4;
                *reinterpret_cast<float2*>(hopper_smem + box_word + row * PT_C_BOX_COLS + col) =
                    make_float2(p.alpha * acc[4 * j + 2 * h], p.alpha * acc[4 * j + 2 * h + 1]);
            }
        }
        hopper_fence_proxy_async();
        pt_sync_warp();
        if (lane == 0) {
            hopper_store_2d(map_c, box_word, (unsigned)(col0 + b * PT_C_BOX_COLS),
                            (unsigned)first_row);
            hopper_bulk_commit();
        }
    }
}

// k20_wgmma_persistent::block, for BF16 A and B as they are and an f32 C;
// TMA_C (step 22) stores C by TMA where launch::c_by_tma allows (beta 0,
// C on 16 bytes, rows 16-byte multiples apart), else by the threads.
template <bool TMA_C>
static __device__ __forceinline__ void pt_block(float* C, GemmParams p,
                                                const unsigned char* maps) {
    // One product per launch, as the Rust kernel (Gemm::from_raw: K is
    // GemmParams::depth(0)).
    usize m = p.m, n = p.n;
    usize k = p.k_slice == 0 || p.k < p.k_slice ? p.k : p.k_slice;
    usize tid = threadIdx.x;
    const unsigned char* map_a = maps;
    const unsigned char* map_b = maps + PT_TENSOR_MAP_BYTES;
    const unsigned char* map_c = maps + 2 * PT_TENSOR_MAP_BYTES;

    // Stages::init: stages from the first 1024-byte boundary of the
    // region, in words; thread 0 prefetches the maps and initialises the
    // barriers, then the block meets.
    usize base = (PT_ALIGN - (usize)hopper_address(0) % PT_ALIGN) % PT_ALIGN / 4;
    if (tid == 0) {
        hopper_prefetch_map(map_a);
        hopper_prefetch_map(map_b);
#pragma unroll
        for (int s = 0; s < PT_STAGES; ++s) {
            hopper_mbar_init(pt_full(base, s), 1);
            hopper_mbar_init(pt_empty(base, s), PT_CONSUMERS / 32);
        }
        hopper_fence_init();
    }
    __syncthreads();

    usize k_tiles = (k + PT_BK - 1) / PT_BK;
    usize tiles = ((m + PT_BM - 1) / PT_BM) * ((n + PT_BN - 1) / PT_BN);
    usize first = blockIdx.x, stride = gridDim.x;
    if (tid >= PT_CONSUMERS) {
        // The producer warpgroup; one thread issues everything.
        hopper_release_registers<PT_PRODUCER_REGISTERS>();
        if (tid == PT_CONSUMERS) {
            usize t = first, it = 0;
            while (t < tiles) {
                usize row0, col0;
                pt_tile_origin(t, m, n, row0, col0);
                pt_produce(map_a, map_b, base, it, k_tiles, row0, col0);
                t += stride;
                it += k_tiles;
            }
        }
    } else {
        hopper_take_registers<PT_CONSUMER_REGISTERS>();
        // The same tiles, in the same order, as the producer: every
        // consumer thread runs the same trips (the wgmmas stay converged).
        usize t = first, it = 0;
        bool by_tma = TMA_C && p.beta == 0.0f && (unsigned long long)C % 16 == 0 &&
                      (usize)p.ldc * 4 % 16 == 0;
        // Stages::end (the staging tiles follow the stages' barriers) or,
        // with TMA_C, Stages::end_aligned (the boxes of C, 1024-byte
        // aligned after them).
        usize staging = TMA_C ? base + PT_STAGES * PT_STAGE_WORDS + PT_ALIGN / 4
                              : base + PT_STAGES * PT_STAGE_WORDS + 4 * PT_STAGES;
        while (t < tiles) {
            usize row0, col0;
            pt_tile_origin(t, m, n, row0, col0);
            float acc[128];
            pt_mainloop(acc, base, it, k_tiles, tid);
            if (by_tma) {
                pt_store_tile_tma(p, acc, row0, col0, tid, staging, map_c);
            } else {
                pt_store_tile(C, p, acc, row0, col0, tid, staging);
            }
            t += stride;
            it += k_tiles;
        }
        // The block's last stores complete before it exits.
        if (by_tma && tid % 32 == 0) hopper_bulk_wait();
    }
}

// The launch bounds go on declarations, so that each definition reads
// `extern "C" __global__ void NAME(` as the twins test looks for
// (tests/tests/twins.rs); nvcc and NVRTC apply them to the entry (its PTX
// has `.maxntid 384, 1, 1`, as with the attribute on the definition).
extern "C" __global__ void __launch_bounds__(PT_THREADS, 1)
wgmma_bf16_persistent_128x256x64_s4(const unsigned short* A, const unsigned short* B, float* C,
                                    GemmParams p, const unsigned char* maps);
extern "C" __global__ void __launch_bounds__(PT_THREADS, 1)
wgmma_bf16_tma_store_128x256x64_s4(const unsigned short* A, const unsigned short* B, float* C,
                                   GemmParams p, const unsigned char* maps);

// A and B are read only through the tensor maps (see the top).
extern "C" __global__ void wgmma_bf16_persistent_128x256x64_s4(const unsigned short* A,
                                                               const unsigned short* B, float* C,
                                                               GemmParams p,
                                                               const unsigned char* maps) {
    (void)A;
    (void)B;
    pt_block<false>(C, p, maps);
}

extern "C" __global__ void wgmma_bf16_tma_store_128x256x64_s4(const unsigned short* A,
                                                              const unsigned short* B, float* C,
                                                              GemmParams p,
                                                              const unsigned char* maps) {
    (void)A;
    (void)B;
    pt_block<true>(C, p, maps);
}
