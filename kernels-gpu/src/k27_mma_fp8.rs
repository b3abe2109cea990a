//! Step 27: FP8 on any GPU with FP8 tensor cores (Ada's sm_89 and
//! Hopper), and the FP8 kernel the CPU emulator runs. Step 21's block
//! (warp tiles of `mma.sync`, a `cp.async` pipeline, swizzled tiles read
//! by `ldmatrix`) on FP8 A and B^T, with step 26's promotion and block
//! scales. Steps 25 and 26 need Hopper's `wgmma`; this one runs wherever
//! `mma.sync.m16n8k32` of E4M3 and E5M2 does, so that scales, promotion
//! and the edges are tested on the CPU.
//!
//! What changes from step 21:
//! - **The math**: `mma.sync.m16n8k32` of E4M3 or E5M2 (A and B may
//!   differ), 8,192 FLOP per instruction, twice the 16-bit `m16n8k16`.
//!   Each register holds four neighbours along K; in 32-bit words the
//!   fragments are the 16-bit ones ([`crate::device::mma`], third table),
//!   so step 21's `ldmatrix` of a swizzled K-major tile serves unchanged,
//!   with twice the K per 16-byte row ([`load_x4`]).
//! - **K-major operands only** (`Ops::NT`: A as it is, B as B^T, the
//!   layout steps 25-26 and cuBLASLt's FP8 path take): `ldmatrix` has no
//!   `.trans` for 8-bit values.
//! - **BK = 128**: one 128-byte row of FP8 per stage, one scale block of
//!   K ([`SCALE_BLOCK`]), four `m16n8k32` steps.
//! - **Promotion** (step 26's): each K block's products are summed from
//!   zero in `part`, then added into the f32 accumulators, times the
//!   block's scales with [`Scaling::Blocks`] (A's per row, B's per 128 x
//!   128: one per tile, BN = 128). With per-tensor scales the sums are
//!   promoted unscaled and the scales fold into alpha and beta
//!   ([`Gemm::scaled_by`]).
//! - **A 64 x 128 tile**, one B scale block wide, eight warps of 32 x 32:
//!   32 promoted sums and 32 partial ones per thread. (A 128 x 128 tile
//!   of 64 x 32 warps, 64 of each, spilled on Hopper, where ptxas needs
//!   registers for unpacking FP8 to FP16: see the prediction.)
//! - **Three stages** of 24 KB: 72 KB, inside the 99 KB an Ada SM gives
//!   one block.
//!
//! Prediction (H200, n = 4096): step 21 ran at about 0.45x cuBLAS BF16
//! through `mma.sync`; twice its FLOP per instruction and half its bytes
//! per FLOP, less the promotion's 64 adds per thread per K block, give
//! some 450-550 TFLOP/s, under half of step 26 (`wgmma` issues from four
//! warps at once and reads shared memory without registers): on Hopper
//! the library keeps steps 25-26; this step is Ada's FP8 kernel and the
//! emulator's. Where the prediction went wrong: Hopper has no FP8 path
//! for `mma.sync`. ptxas (sm_90) turns each `m16n8k32` into two FP16
//! `HMMA.16816` after `F2FP` unpacks the FP8 values to FP16, where for
//! sm_89 it emits one `QMMA.16832` (`cuobjdump -sass`), so on the H200
//! this step runs below step 21. The measurements live in docs/fp8-step27/
//! (`cargo xtask bench --sizes 4096,8192 --kernels ...`;
//! docs/measurements.md, seventeenth session); registers per instance:
//! `cargo test -p tests --test ptx -- --nocapture`.

use crate::device::async_copy::{commit_group, wait_group};
use crate::device::mma::mma_m16n8k32;
use crate::device::{block_idx_x, block_idx_y, fma, sync_threads, thread_idx_x};
use crate::elem::{Bf16, E4m3, E5m2, Element, Elems, F16, Fp8, Math, SCALE_BLOCK, Scaling};
#[cfg(not(target_arch = "nvptx64"))]
use crate::gemm::Gemm as EmulatedGemm;
use crate::gemm::{Gemm, Output, Scales, store_mma_tiles};
use crate::k21_mma_16bit::{Window, copy_tile, load_x4};
use crate::launch::{KernelSpec, Launch, Operands, Ops, emulated};
use crate::modules;
use crate::unroll::{inline_always, unroll};

/// Rows of C per block (64: two sets of accumulators, the promoted sums
/// and the K block's, fit in registers with room for Hopper's FP8
/// unpacking; see the prediction).
pub const BM: usize = 64;
/// Columns of C per block: one B scale block.
pub const BN: usize = SCALE_BLOCK;
/// K values per stage: one 128-byte row of FP8, one scale block.
pub const BK: usize = SCALE_BLOCK;
/// A warp's tile of C.
pub const WM: usize = 32;
pub const WN: usize = 32;
/// Stages in shared memory.
pub const STAGES: usize = 3;
const THREADS: usize = (BM / WM) * (BN / WN) * 32;
/// The warp's m16 and n8 tiles.
const MI: usize = WM / 16;
const NI: usize = WN / 8;
/// Words of A's and of B^T's part of a stage (one byte per value).
const A_WORDS: usize = BM * BK / 4;
const STAGE_WORDS: usize = (BM + BN) * BK / 4;
/// Shared memory one block of an Ada GPU may have (sm_89: 99 KB).
const MAX_SHARED_BYTES: usize = 99 * 1024;

const _: () = assert!(STAGES * STAGE_WORDS * 4 <= MAX_SHARED_BYTES);

/// The spec of an instance of A, B^T and C of types `a`, `b`, `c` with
/// the scales `scaling` (each K block's sums promoted to f32 either way).
#[cfg(not(target_arch = "nvptx64"))]
const fn spec(
    name: &'static str,
    (a, b, c): (crate::elem::Elem, crate::elem::Elem, crate::elem::Elem),
    scaling: Scaling,
    body: fn(EmulatedGemm),
) -> KernelSpec {
    assert!(a.bytes() == 1 && b.bytes() == 1 && !matches!(scaling, Scaling::None));
    KernelSpec {
        name,
        step: 27,
        module: &modules::MMA_FP8,
        elems: Elems::new(a, b, c, Math::Fp8).promoted(BK as u32).with_scaling(scaling),
        summary: match scaling {
            Scaling::Blocks => "FP8 on Ada and Hopper (mma.sync m16n8k32) with block scales (A 1 x 128, B 128 x 128) applied as each K block's sums are promoted to f32",
            _ => "FP8 on Ada and Hopper (mma.sync m16n8k32), per-tensor scales, each K block's sums promoted to f32",
        },
        launch: Launch {
            block_threads: (THREADS as u32, 1),
            block_tile: (BM, BN),
            shared_bytes: STAGES * STAGE_WORDS * 4,
            register_cap: false,
            persistent: false,
        },
        model_reuse: (BM, BN),
        body: emulated!(body),
        operands: Operands::Pointers,
        ops: Ops::NT,
        batches: false,
    }
}

/// One instance: `$spec` for the host, the body `$name` (on the host on
/// the emulator's buffers and scales), and its PTX entry in the
/// `mma_fp8` module, A of type `$a`, B^T of type `$b`, C of type `$c`.
macro_rules! instance {
    ($name:ident, $spec:ident, $a:ident, $b:ident, $c:ident, $scaling:ident) => {
        #[cfg(not(target_arch = "nvptx64"))]
        pub const $spec: KernelSpec = spec(
            stringify!($name),
            (<$a as Element>::ELEM, <$b as Element>::ELEM, <$c as Element>::ELEM),
            Scaling::$scaling,
            $name,
        );
        /// The body of the PTX entry of the same name (inlined into it).
        #[cfg(target_arch = "nvptx64")]
        #[inline(always)]
        pub fn $name(g: Gemm<$a, $b, $c>, scales: Scales) {
            block::<$a, $b, $c, { matches!(Scaling::$scaling, Scaling::Blocks) }>(g, scales)
        }
        /// The body of the PTX entry of the same name, on the emulator's
        /// buffers viewed as its stored types, with the launch's scales.
        #[cfg(not(target_arch = "nvptx64"))]
        pub fn $name(g: EmulatedGemm) {
            block::<$a, $b, $c, { matches!(Scaling::$scaling, Scaling::Blocks) }>(g.retyped(), Scales::emulated())
        }
        #[cfg(any(not(target_arch = "nvptx64"), gemm_module = "mma_fp8"))]
        mod $name {
            #[cfg(target_arch = "nvptx64")]
            use super::$name;
            crate::gemm_kernel!($name, scaled_pointers, elems($a, $b, $c));
        }
    };
}

// E4M3 per tensor into each C type, the mixed pairs into BF16, E4M3
// with block scales into BF16 and f32: the FP8 calls the library takes.
#[rustfmt::skip]
mod instances {
    use super::*;
    instance!(mma_e4m3_64x128x128_w32x32_s3, SPEC_E4M3_64X128X128_W32X32_S3, E4m3, E4m3, Bf16, Tensor);
    instance!(mma_e4m3_64x128x128_w32x32_s3_f16, SPEC_E4M3_64X128X128_W32X32_S3_F16, E4m3, E4m3, F16, Tensor);
    instance!(mma_e4m3_64x128x128_w32x32_s3_f32, SPEC_E4M3_64X128X128_W32X32_S3_F32, E4m3, E4m3, f32, Tensor);
    instance!(mma_e5m2_e4m3_64x128x128_w32x32_s3, SPEC_E5M2_E4M3_64X128X128_W32X32_S3, E5m2, E4m3, Bf16, Tensor);
    instance!(mma_e4m3_e5m2_64x128x128_w32x32_s3, SPEC_E4M3_E5M2_64X128X128_W32X32_S3, E4m3, E5m2, Bf16, Tensor);
    instance!(mma_e4m3_blocks_64x128x128_w32x32_s3, SPEC_E4M3_BLOCKS_64X128X128_W32X32_S3, E4m3, E4m3, Bf16, Blocks);
    instance!(mma_e4m3_blocks_64x128x128_w32x32_s3_f32, SPEC_E4M3_BLOCKS_64X128X128_W32X32_S3_F32, E4m3, E4m3, f32, Blocks);
}
pub use instances::*;

/// Every instance.
#[cfg(not(target_arch = "nvptx64"))]
pub const SPECS: &[KernelSpec] = &[
    SPEC_E4M3_64X128X128_W32X32_S3,
    SPEC_E4M3_64X128X128_W32X32_S3_F16,
    SPEC_E4M3_64X128X128_W32X32_S3_F32,
    SPEC_E5M2_E4M3_64X128X128_W32X32_S3,
    SPEC_E4M3_E5M2_64X128X128_W32X32_S3,
    SPEC_E4M3_BLOCKS_64X128X128_W32X32_S3,
    SPEC_E4M3_BLOCKS_64X128X128_W32X32_S3_F32,
];

/// Picks the body for the block, as step 21 does: 16-byte copies where
/// every row of A and of B^T starts 16-byte aligned (uniform over the
/// grid), no checks in a block inside C when K is a multiple of BK
/// (uniform over the block).
#[inline(always)]
fn block<A: Fp8, B: Fp8, C: Output, const BLOCKS: bool>(g: Gemm<A, B, C>, scales: Scales) {
    let (row0, col0) = (block_idx_y() * BM, block_idx_x() * BN);
    if g.rows16() {
        if row0 + BM <= g.m && col0 + BN <= g.n && g.k.is_multiple_of(BK) {
            body::<A, B, C, BLOCKS, true, false>(g, scales, row0, col0)
        } else {
            body::<A, B, C, BLOCKS, true, true>(g, scales, row0, col0)
        }
    } else {
        body::<A, B, C, BLOCKS, false, true>(g, scales, row0, col0)
    }
    // SAFETY: every thread gets here, after storing its part of the
    // block's tile (the fused epilogue's pass, nothing when plain).
    unsafe { g.fuse_block((row0, col0), (BM, BN), THREADS) };
}

/// K block `kb`'s factors for this thread's rows of C (`rows[mi][h]`):
/// A's row scale times B's block scale for the tile's columns (`b0`: the
/// tile's first B scale), 0 for a row past A's last (whose values were
/// copied as zeros).
///
/// # Safety
/// The scales hold [`Scaling::a_scales`] and [`Scaling::b_scales`]
/// values for this product (or are absent: 1), `kb < ceil(k / 128)` and
/// `b0` is `col0 / 128 * b_scales_stride(k)` for a `col0 < n`.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
unsafe fn factors(s: Scales, m: usize, kb: usize, b0: usize, rows: [[usize; 2]; MI]) -> [[f32; 2]; MI] {
    // SAFETY: b0 + kb < b_scales(k, n) (the contract).
    let sb = unsafe { Scales::read(s.b, b0 + kb) };
    let stride = Scaling::a_scales_stride(m);
    let mut f = [[0.0; 2]; MI];
    unroll!(MI; 4, |mi| {
        unroll!(2; 2, |h| {
            let row = rows[mi][h];
            if row < m {
                // SAFETY: row < m and kb < ceil(k / 128): inside a_scales(m, k).
                f[mi][h] = unsafe { Scales::read(s.a, kb * stride + row) } * sb;
            }
        });
    });
    f
}

/// Block `(blockIdx.y, blockIdx.x)` computes the BM x BN tile of C at
/// `(row0, col0)`, each K block's sums promoted (and with BLOCKS scaled)
/// into f32; ALIGNED: 16-byte copies (else one value at a time); GUARD:
/// check each copy against the matrices (without, an interior block and
/// K % BK == 0).
#[inline(always)]
fn body<A: Fp8, B: Fp8, C: Output, const BLOCKS: bool, const ALIGNED: bool, const GUARD: bool>(
    g: Gemm<A, B, C>,
    scales: Scales,
    row0: usize,
    col0: usize,
) {
    let tid = thread_idx_x();
    let (a_base, b_base) = (
        inline_always!(|s: usize| s * STAGE_WORDS),
        inline_always!(|s: usize| s * STAGE_WORDS + A_WORDS),
    );

    // Starts the copies of K block `kt` into stage `s`. The caller
    // guarantees no thread reads or writes stage `s` until the barrier
    // after the `wait_group` that retires them.
    let load_tile = inline_always!(|kt: usize, s: usize| {
        let k0 = kt * BK;
        let a = Window { base: a_base(s), row: row0, col: k0, height: g.m, width: g.k, ld: g.lda };
        // B^T: n x k, K contiguous.
        let b = Window { base: b_base(s), row: col0, col: k0, height: g.n, width: g.k, ld: g.ldb };
        // SAFETY: each window is its stage's tile (STAGE_WORDS apart, A's
        // then B^T's), untouched until the wait and barrier (caller); the
        // matrices are g's; ALIGNED only with rows16 (block), and the
        // windows' columns are multiples of BK.
        unsafe {
            copy_tile::<A, BM, BK, THREADS, ALIGNED, GUARD>(g.a, a);
            copy_tile::<B, BN, BK, THREADS, ALIGNED, GUARD>(g.b, b);
        }
    });

    let (warp, lane) = (tid / 32, tid % 32);
    let warp_row = warp / (BN / WN) * WM;
    let warp_col = warp % (BN / WN) * WN;
    // This thread's rows of C (the accumulators' `g` and `g + 8`).
    let mut rows = [[0; 2]; MI];
    unroll!(MI; 4, |mi| {
        rows[mi] = [0, 8].map(|h| row0 + warp_row + 16 * mi + lane / 4 + h);
    });
    let b0 = col0 / SCALE_BLOCK * Scaling::b_scales_stride(g.k);

    let mut acc = [[[0.0f32; 4]; NI]; MI];
    let k_tiles = g.k.div_ceil(BK);

    // Prologue: blocks 0 .. STAGES - 2 in flight, one group each (empty
    // groups past the end keep the count uniform); then block 0 landed
    // and visible.
    unroll!(STAGES - 1; 4, |s| {
        if s < k_tiles {
            load_tile(s, s);
        }
        commit_group();
    });
    wait_group::<{ STAGES as u32 - 2 }>();
    sync_threads();

    let mut read_stage = 0;
    let mut write_stage = STAGES - 1;
    for kt in 0..k_tiles {
        // Stage `write_stage` held block kt - 1, which every thread
        // finished reading before the barrier that ended it.
        if kt + STAGES - 1 < k_tiles {
            load_tile(kt + STAGES - 1, write_stage);
        }
        commit_group();
        write_stage = if write_stage + 1 == STAGES { 0 } else { write_stage + 1 };
        // The block's factors, loaded before its mma so that their
        // latency hides behind them.
        let f = if BLOCKS {
            // SAFETY: the entry's scales are this product's block scales
            // (the host's check), kt < ceil(k / 128), col0 < n.
            unsafe { factors(scales, g.m, kt, b0, rows) }
        } else {
            [[1.0; 2]; MI]
        };
        let mut part = [[[0.0f32; 4]; NI]; MI];
        unroll!(BK / 32; 4, |step| {
            let k = 32 * step;
            let mut a = [[0u32; 4]; MI];
            let mut b = [[0u32; 2]; NI];
            unroll!(MI; 4, |mi| {
                // SAFETY: every lane is here (no lane-dependent branch);
                // rows warp_row + 16 mi .. + 16 < BM and K k .. k + 32 <=
                // BK lie in A's tile, whose stage landed (wait and
                // barrier) and is not written before the next barrier.
                a[mi] = unsafe { load_x4::<A, BK, true, true>(a_base(read_stage), warp_row + 16 * mi, k, lane) };
            });
            unroll!(NI / 2; 2, |pair| {
                // SAFETY: as for A: rows of B^T warp_col + 16 pair .. + 16 < BN.
                let raw =
                    unsafe { load_x4::<B, BK, true, false>(b_base(read_stage), warp_col + 16 * pair, k, lane) };
                b[2 * pair] = [raw[0], raw[1]];
                b[2 * pair + 1] = [raw[2], raw[3]];
            });
            unroll!(MI; 4, |mi| {
                unroll!(NI; 4, |ni| {
                    mma_m16n8k32::<A, B>(&mut part[mi][ni], a[mi], b[ni]);
                });
            });
        });
        // Promotion: the block's sums into the f32 accumulators (times the
        // block's scales), on the CUDA cores.
        unroll!(MI; 4, |mi| {
            unroll!(NI; 4, |ni| {
                unroll!(4; 4, |e| {
                    let (x, sum) = (part[mi][ni][e], acc[mi][ni][e]);
                    acc[mi][ni][e] = if BLOCKS { fma(x, f[mi][e / 2], sum) } else { x + sum };
                });
            });
        });
        // Block kt + 1 is the oldest group but STAGES - 2: wait for it,
        // then one barrier makes every thread's copies visible and ends
        // all reads of block kt.
        wait_group::<{ STAGES as u32 - 2 }>();
        sync_threads();
        read_stage = if read_stage + 1 == STAGES { 0 } else { read_stage + 1 };
    }
    // Every group is retired before the kernel ends (the last ones are empty).
    wait_group::<0>();

    // Per tensor, A's, B's and D's scales fold into alpha and beta; with
    // block scales only D's is left.
    let folded = if BLOCKS { Scales { a: None, b: None, ..scales } } else { scales };
    // SAFETY: a per-tensor scale holds one f32 (the host's check); each
    // lane of each warp owns its elements of the block's tile of C
    // (blocks own their tiles); C's span is the host's check.
    unsafe { store_mma_tiles(g.scaled_by(folded), &acc, (row0 + warp_row, col0 + warp_col), lane) };
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::*;

    /// One B block per tile, one K block per stage; K-major operands only.
    #[test]
    fn a_tile_is_one_scale_block_wide_and_deep() {
        for spec in SPECS {
            assert_eq!(spec.launch.block_tile, (BM, SCALE_BLOCK), "{}", spec.name);
            assert_eq!(spec.elems.promote_every as usize, SCALE_BLOCK, "{}", spec.name);
            assert_eq!(spec.ops, Ops::NT);
            assert_eq!(spec.module.name, "mma_fp8");
            let blocks = spec.name.contains("_blocks_");
            assert_eq!(spec.elems.scaling == Scaling::Blocks, blocks, "{}", spec.name);
            assert!(spec.launch.shared_bytes <= MAX_SHARED_BYTES);
        }
    }
}
