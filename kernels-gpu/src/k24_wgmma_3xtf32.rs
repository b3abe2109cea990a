//! Step 24: 3xTF32 on Hopper's `wgmma`, FP32 accuracy at tensor-core
//! speed. Step 23 split each factor on `mma.sync` and matched SGEMM's
//! error at half its speed; steps 17-18 run TF32 `wgmma` at several times
//! SGEMM's rate, with TF32's error. This step runs step 23's arithmetic
//! on step 17's pipeline.
//!
//! What changes from step 17:
//! - **Both operands are split before the kernel**, by the copy that
//!   already wrote B^T for step 17 ([`crate::pad::transpose_split_tf32`])
//!   and one for A ([`crate::pad::split_rows_tf32`]): each value becomes
//!   `big = tf32(x)` and `small = tf32(x - big)`, both rounded to nearest
//!   (`cvt.rna`), stored exactly as TF32 values, so the tensor cores,
//!   which truncate what they read from shared memory, read them as they
//!   are. Each row keeps K's 32-value chunks as `big, small` pairs
//!   ([`crate::launch::TmaCopy::SplitTf32`]): one tensor map per operand,
//!   and A's and B^T's parts land as four 128-byte swizzled boxes per
//!   stage. `wgmma` reads both operands from shared memory (it cannot
//!   take B, our A, from registers), so the split cannot happen on a
//!   fragment as in step 23; the copies read A and B once and write
//!   twice their bytes, memory-bound work counted in every launch's time.
//! - **Three `wgmma`s per k-step**: `small(B^T) * big(A)`, then
//!   `big(B^T) * small(A)`, then `big * big`, the two small terms first;
//!   `small * small` (about 2^-22 of a product) is dropped.
//! - **How they accumulate is the instance's `ACC`**: [`ONE`] accumulator
//!   for all three (CUTLASS's 3xTF32); [`TWO`], big * big apart from the
//!   small terms, added at the end (does it buy accuracy?); and
//!   [`PROMOTED`], step 23's remedy: each tile of K (32 deep, 12 `wgmma`s)
//!   goes into a fresh partial sum (`scale-d` = 0 on its first `wgmma`),
//!   which the FMA pipe adds into f32 accumulators once the tile retires.
//!   The tensor cores' additions truncate, so a running sum fed to them
//!   loses low bits at every `wgmma` (step 23's first version, without
//!   the promotion, was many times less accurate than SGEMM). The add
//!   waits for the tile's group (`wait_group 0`): with two partials
//!   alternating, so that one group stayed in flight during the add,
//!   ptxas serialised every `wgmma` (C7514); the other consumer
//!   warpgroup's `wgmma`s fill the gap. ([`PROMOTED_2`], a partial per
//!   two tiles, halves the waits; it was slower, docs/measurements.md.)
//! - **The tile is 128 x 128** (m64n128k8 per consumer warpgroup): the
//!   promoted form holds two sets of accumulators (the sum and the
//!   partial), 64 registers each; at step 17's m64n256 they would take
//!   all 256. A stage is four 16 KB boxes; three stages fill 192 KB.
//!
//! Prediction (H200, n = 4096): three times step 17's tensor work on the
//! same tile loop, with a third of its traffic per flop, so at best a
//! third of step 17's tensor rate, minus the copies (A and B read once,
//! written twice: about 0.4 GB, some 0.1 ms against about 1.2 ms of
//! tensor work): about 2.1x cuBLAS SGEMM, with its error or better for
//! `PROMOTED`, and worse for `ONE` and `TWO`, whose running sums the
//! tensor cores truncate. The measurement lives in docs/bench.json and
//! the README's bench table (`cargo xtask bench`), the errors at three
//! depths in docs/accuracy.json (`cargo xtask bench --accuracy`), the
//! alternatives' runs in docs/measurements.md. GPU only, like steps
//! 12-13.

#[cfg(target_arch = "nvptx64")]
use crate::device::tma::TensorMaps;
#[cfg(target_arch = "nvptx64")]
use crate::device::wgmma::{
    commit_group, descriptor_k_major_sw128, fence_ss_64x2, mma_m64n128k8_tf32_ss, wait_ss_64x2,
};
use crate::elem::Elems;
#[cfg(target_arch = "nvptx64")]
use crate::gemm::Gemm;
#[cfg(target_arch = "nvptx64")]
use crate::k12_wgmma::store_tile;
use crate::k12_wgmma::{ALIGN, BK, BN, GPU_ONLY};
use crate::k13_wgmma_ws::THREADS;
#[cfg(target_arch = "nvptx64")]
use crate::k13_wgmma_ws::{Stages, warp_specialized_ab};
use crate::launch::{Body, KernelSpec, Launch, Operands, Ops, TmaBoxes, TmaCopy};
use crate::modules;
#[cfg(target_arch = "nvptx64")]
use crate::unroll::{inline_always, unroll};

/// `ACC`: all three products of each k-step into one accumulator.
pub const ONE: u8 = 0;
/// `ACC`: `big * big` into one accumulator, the two small terms into a
/// second; the two are added once, after the last tile.
pub const TWO: u8 = 1;
/// `ACC`: each tile of K's products into a fresh partial sum, added into
/// the f32 accumulators by the FMA pipe.
pub const PROMOTED: u8 = 2;
/// `ACC`: [`PROMOTED`] with a partial sum per two tiles of K (64 deep):
/// half the waits.
pub const PROMOTED_2: u8 = 3;

/// Rows of C per block (and N of each warpgroup's `wgmma`: D is C^T, as in
/// steps 12-18).
const BM: usize = 128;
/// Words of one stage: A's big and small boxes `[BM][BK]` each, then
/// B^T's `[BN][BK]` each.
const STAGE_WORDS: usize = 2 * BM * BK + 2 * BN * BK;

/// One instance's spec: `stages` stages, accumulation `acc`.
const fn spec(name: &'static str, acc: u8, stages: usize) -> KernelSpec {
    let shared_bytes = ALIGN + stages * STAGE_WORDS * 4 + 16 * stages;
    assert!(shared_bytes <= 227 * 1024);
    KernelSpec {
        name,
        step: 24,
        module: &modules::WGMMA,
        elems: Elems::TF32X3,
        summary: match acc {
            ONE => "3xTF32 on step 17's pipeline, A and B^T split by the copies; one accumulator (measured against the promoted form)",
            TWO => "3xTF32 on step 17's pipeline, A and B^T split by the copies; big*big and the small terms in two accumulators (measured against the promoted form)",
            PROMOTED_2 => "3xTF32 on step 17's pipeline, A and B^T split by the copies; each pair of K tiles' sum promoted to f32 (measured against one tile)",
            _ => "3xTF32 on step 17's pipeline: A and B^T split into TF32 parts by the copies, 3 wgmma per k-step, each K tile's sum promoted to f32",
        },
        launch: Launch {
            block_threads: (THREADS as u32, 1),
            block_tile: (BM, BN),
            shared_bytes,
            register_cap: true,
            persistent: false,
        },
        model_reuse: (BM, BN),
        body: Body::GpuOnly(GPU_ONLY),
        operands: Operands::TensorMaps(TmaBoxes {
            a: (BM as u32, BK as u32),
            b: (BN as u32, BK as u32),
            a_swizzle_128: true,
            b_swizzle_128: true,
            copy: TmaCopy::SplitTf32,
            c: None,
            slices: false,
        }),
        ops: Ops::NN,
        batches: false,
    }
}

/// One instance: `$spec` for the host; the body `$name` and its PTX entry
/// (in the `wgmma` module) for the GPU.
macro_rules! instance {
    ($name:ident, $spec:ident, $acc:ident, $s:literal) => {
        pub const $spec: KernelSpec = spec(stringify!($name), $acc, $s);
        /// The body of the PTX entry of the same name (inlined into it).
        #[cfg(target_arch = "nvptx64")]
        #[inline(always)]
        pub fn $name(g: Gemm, maps: TensorMaps) {
            block::<$acc, $s>(g, maps)
        }
        #[cfg(any(not(target_arch = "nvptx64"), gemm_module = "wgmma"))]
        mod $name {
            #[cfg(target_arch = "nvptx64")]
            use super::$name;
            crate::gemm_kernel!($name, tensor_maps);
        }
    };
}

#[rustfmt::skip]
mod instances {
    use super::*;
    instance!(wgmma_3xtf32_128x128x32_s3, SPEC_128X128X32_S3, PROMOTED, 3);
    instance!(wgmma_3xtf32_one_128x128x32_s3, SPEC_ONE_128X128X32_S3, ONE, 3);
    instance!(wgmma_3xtf32_two_128x128x32_s3, SPEC_TWO_128X128X32_S3, TWO, 3);
    instance!(wgmma_3xtf32_p2_128x128x32_s3, SPEC_P2_128X128X32_S3, PROMOTED_2, 3);
}
pub use instances::*;

/// Every instance: the promoted form (the step), then the two it is
/// measured against.
pub const SPECS: &[KernelSpec] = &[
    SPEC_128X128X32_S3,
    SPEC_ONE_128X128X32_S3,
    SPEC_TWO_128X128X32_S3,
    SPEC_P2_128X128X32_S3,
];

/// Step 13's block ([`warp_specialized_ab`]) with four boxes per stage:
/// A's big and small parts (columns `2 * k0` and `2 * k0 + 32` of A's
/// split copy), then B^T's.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn block<const ACC: u8, const STAGES: usize>(g: Gemm, maps: TensorMaps) {
    let part = BK as u32;
    // SAFETY: each stage is four BM x BK (BN x BK) boxes with the 128-byte
    // swizzle (SPEC's), 16 KB each, so 1024-aligned: A's two at the
    // stage's first word, B^T's two at B's part; 4 * 16 KB = STAGE_WORDS
    // words, the stage's bytes.
    unsafe {
        warp_specialized_ab::<BM, { 2 * BM }, BN, BK, STAGES, STAGE_WORDS>(
            0,
            g.k,
            maps,
            inline_always!(|word, k0, full, row0| {
                // SAFETY: as the contract above.
                unsafe {
                    maps.a().load_2d(word, 2 * k0, row0 as u32, full);
                    maps.a().load_2d(word + BM * BK, 2 * k0 + part, row0 as u32, full);
                }
            }),
            inline_always!(|word, k0, full, col0| {
                // SAFETY: as the contract above.
                unsafe {
                    maps.b().load_2d(word, 2 * k0, col0 as u32, full);
                    maps.b().load_2d(word + BN * BK, 2 * k0 + part, col0 as u32, full);
                }
            }),
            inline_always!(|stages, row0, col0, tid, k_tiles| consume::<ACC, STAGES>(stages, g, row0, col0, tid, k_tiles)),
        );
    }
}

/// The consumer warpgroups' loop: for each tile, wait for its stage, issue
/// its 12 `wgmma`s (the accumulation `ACC` says into which registers),
/// retire the previous tile's group and release its stage; then the
/// epilogue (step 12's, on 64 accumulators).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn consume<const ACC: u8, const STAGES: usize>(
    stages: Stages<{ 2 * BM }, STAGES, STAGE_WORDS>,
    g: Gemm,
    row0: usize,
    col0: usize,
    tid: usize,
    k_tiles: usize,
) {
    let (wg, lane) = (tid / 128, tid % 32);
    // Stage s's descriptors, per k-step: B^T's big and small parts (this
    // warpgroup's 64 rows: the wgmma's "A"), A's big and small (the
    // wgmma's "B", 128 rows).
    let descriptors = inline_always!(|s: usize| {
        let mut d = [0u64; 16];
        unroll!(BK / 8; 4, |step| {
            let bt = stages.b_tile(s) + 64 * wg * BK + 8 * step;
            let a = stages.a_tile(s) + 8 * step;
            d[4 * step] = descriptor_k_major_sw128(bt);
            d[4 * step + 1] = descriptor_k_major_sw128(bt + BN * BK);
            d[4 * step + 2] = descriptor_k_major_sw128(a);
            d[4 * step + 3] = descriptor_k_major_sw128(a + BM * BK);
        });
        d
    });
    // SAFETY (of the blocks below): both warpgroups run every call; the
    // accumulators and descriptors go through the fence, the
    // accumulators through the wait; the stage landed (wait_full) and
    // stays until this warp releases it, after the wait that retires
    // its wgmmas.
    let mut acc = [0.0f32; 64];
    if ACC == PROMOTED || ACC == PROMOTED_2 {
        // Each tile (PROMOTED_2: each pair of tiles) into `part`, fresh;
        // once its groups have retired, the FMA pipe adds it into `acc`.
        // The wait is for every group: ptxas serialises all wgmmas
        // (C7514) when registers of one group are read while another is
        // in flight, so here the other warpgroup's wgmmas keep the tensor
        // cores busy meanwhile.
        let every = if ACC == PROMOTED_2 { 2 } else { 1 };
        let mut part = [0.0f32; 64];
        let mut unused = [0.0f32; 64];
        let mut kt0 = 0;
        while kt0 < k_tiles {
            let tiles = every.min(k_tiles - kt0);
            unroll!(2; 2, |j| {
                if j < tiles {
                    let kt = kt0 + j;
                    stages.wait_full(kt);
                    let mut desc = descriptors(kt % STAGES);
                    // SAFETY: as above.
                    unsafe {
                        fence_ss_64x2(&mut part, &mut unused, &mut desc);
                        if j == 0 {
                            products::<PROMOTED>(&mut part, &mut unused, &desc);
                        } else {
                            products::<ONE>(&mut part, &mut unused, &desc);
                        }
                        commit_group();
                    }
                }
            });
            // SAFETY: as above.
            unsafe { wait_ss_64x2::<0>(&mut part, &mut unused) };
            if lane == 0 {
                unroll!(2; 2, |j| {
                    if j < tiles {
                        // SAFETY: once per tile, in order, after the wait
                        // that retired its wgmmas.
                        unsafe { stages.release(kt0 + j) };
                    }
                });
            }
            add_into(&mut acc, &part);
            kt0 += tiles;
        }
    } else {
        // The small terms' accumulator (TWO), or unused.
        let mut small = [0.0f32; 64];
        for kt in 0..k_tiles {
            stages.wait_full(kt);
            let mut desc = descriptors(kt % STAGES);
            // SAFETY: as above.
            unsafe {
                fence_ss_64x2(&mut acc, &mut small, &mut desc);
                products::<ACC>(&mut acc, &mut small, &desc);
                commit_group();
                // Tile kt - 1's group is retired; tile kt's stays in flight.
                wait_ss_64x2::<1>(&mut acc, &mut small);
            }
            if kt >= 1 && lane == 0 {
                // SAFETY: once per tile, in order, after the wait that
                // retired tile kt - 1's wgmmas.
                unsafe { stages.release(kt - 1) };
            }
        }
        // SAFETY: as above.
        unsafe { wait_ss_64x2::<0>(&mut acc, &mut small) };
        if ACC == TWO {
            add_into(&mut acc, &small);
        }
    }
    store_tile::<BM, 64>(g, &acc, row0, col0, tid);
}

/// `acc += part`, element by element, in registers (the FMA pipe's half
/// of the promotion; for TWO, the small terms' sum into big * big's).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn add_into(acc: &mut [f32; 64], part: &[f32; 64]) {
    unroll!(2; 2, |h| {
        unroll!(32; 32, |j| {
            acc[32 * h + j] += part[32 * h + j];
        });
    });
}

/// One tile's 12 `wgmma`s, per k-step `small(B^T) * big(A)`, `big(B^T) *
/// small(A)`, `big * big`, as `ACC` says: [`ONE`], all added to `d`;
/// [`TWO`], the small terms added to `e` and `big * big` to `d`;
/// [`PROMOTED`], all into `d` as a fresh sum (the first `wgmma` does not
/// read it). `e` is not touched but by [`TWO`].
///
/// # Safety
/// As [`mma_m64n128k8_tf32_ss`], after [`fence_ss_64x2`] named these
/// registers and descriptors.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn products<const ACC: u8>(d: &mut [f32; 64], e: &mut [f32; 64], desc: &[u64; 16]) {
    unroll!(BK / 8; 4, |step| {
        let [bt_big, bt_small, a_big, a_small] =
            [desc[4 * step], desc[4 * step + 1], desc[4 * step + 2], desc[4 * step + 3]];
        // SAFETY: the caller's contract.
        unsafe {
            if ACC == TWO {
                mma_m64n128k8_tf32_ss::<1>(e, bt_small, a_big);
                mma_m64n128k8_tf32_ss::<1>(e, bt_big, a_small);
            } else if ACC == PROMOTED && step == 0 {
                mma_m64n128k8_tf32_ss::<0>(d, bt_small, a_big);
                mma_m64n128k8_tf32_ss::<1>(d, bt_big, a_small);
            } else {
                mma_m64n128k8_tf32_ss::<1>(d, bt_small, a_big);
                mma_m64n128k8_tf32_ss::<1>(d, bt_big, a_small);
            }
            mma_m64n128k8_tf32_ss::<1>(d, bt_big, a_big);
        }
    });
}
