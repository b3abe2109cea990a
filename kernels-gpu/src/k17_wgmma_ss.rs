//! Step 17: both `wgmma` operands in shared memory, so the tensor cores
//! never wait for the threads. In step 13 each consumer warpgroup loaded
//! its `wgmma` "A" (B's tile, transposed) from shared memory into
//! registers: TF32 `wgmma` reads only K-major tiles from shared memory,
//! and B (K x N, row-major) is N-major. A `wgmma` that reads registers
//! cannot stay in flight while the next tile's registers are loaded
//! (ptxas serialises them, C7513), so every tile ended with a full drain
//! of the warpgroup's `wgmma`s: the largest share of the consumers' stalls
//! (docs/measurements.md, "Where step 13's warps wait").
//!
//! What changes from step 13:
//! - **B is transposed before the kernel**, by the host's launch: a copy
//!   kernel (`kernels_gpu::pad::transpose_tf32`) writes B^T (N x K, so
//!   K-major like A) rounded to TF32 (`cvt.rna`), and the producer copies
//!   a 128 x 32 box of it per stage with TMA and the 128-byte swizzle, as
//!   it copies A's: two copies per stage instead of 17. (Transposing in
//!   the kernel, by the producer warpgroup through shared memory, was
//!   tried first and lost to its own bank conflicts: docs/measurements.md,
//!   "Three more tries at step 13's gap".)
//! - **Consumers issue `wgmma`s with both operands from shared memory**
//!   and keep one group in flight: tile kt's `wgmma`s are issued before
//!   tile kt - 1's are waited for, and tile kt - 1's stage is handed back
//!   then. No fragments, no `cvt` in the loop, no drain per tile.
//!
//! Transposed calls run the same body: only the copies change, since
//! the kernel reads whatever is K-major. With B transposed (`_nt`, `_tt`)
//! B as stored (N x K) is already B^T and is read as it is, with no copy
//! (its low 13 bits truncated, like A's); with A transposed (`_tn`,
//! `_tt`) A^T (K x M) is copied transposed into A (M x K) by the same copy
//! kernel, rounded to TF32 (`TmaCopy::Transposed`). So `_nt` skips the
//! copy `_nn` pays, `_tn` pays for two and `_tt` for one.
//!
//! **Split-K** (steps 17 and 18, `TmaBoxes::slices`): at 512-1024 the
//! 256 x 128 tile makes 8 to 32 blocks for 132 SMs, and a few tiles over
//! a long K (512 x 512 x 16384) 8. The host then launches the kernel over
//! slices of K (grid z), each block starting its copies at its slice's K
//! (`Gemm::k0`: the maps describe all of A and B) and storing its partial
//! sums into plane z of the workspace, which step 14's `reduce_slices`
//! adds into C. Prediction: `Auto` in TF32 mode from about 0.6x to about
//! 0.9x cuBLAS TF32 at 512-1024 (the reduction's traffic and launch cost
//! what the idle SMs did), and from 0.28x (FP32 kernels) to above 1x at
//! 512 x 512 x 16384.
//!
//! **Batches** (steps 17 and 18 where no operand is copied: step 18 and
//! `_nt`): the maps have a third dimension, the products of a batch
//! (`stride_a`, `stride_b` apart), and a batch's block z copies its boxes
//! from product z (`Gemm::product`) and stores into C moved by z
//! products, as split-K's slice z stores into plane z. A batch whose rows
//! or products are not 16-byte multiples, or whose products overlap (one
//! B for all of them included), is refused (no padded copy per product);
//! one whose A or B starts off 16 bytes runs one product per launch.
//! Prediction: a batch of 256 products of 128^3 in TF32 mode from 0.65x
//! cuBLAS TF32 (step 10's FP32 tiles) to about 1x: 256 blocks of the 128
//! x 128 tile, one wave and a half.
//!
//! **128 x 128 tiles** (steps 17 and 18, `Tf32Ss`'s `m64n128k8`): the
//! same body with D of 64 columns by 128 rows per warpgroup (64
//! accumulators per thread) and six stages of 32 KB: 64 blocks at n =
//! 1024 where the 256 x 128 tile makes 32, without split-K's second
//! launch and DRAM round trip. Step 18's instance serves A and B as they
//! are, step 17's the transposed layouts. Prediction: `Auto` in TF32
//! mode from about 0.6x to about 0.8x cuBLAS TF32 at 512-1024 (each SM
//! still runs one block of two warpgroups, each `wgmma` half as wide:
//! the same tensor rate, twice the `wgmma`s issued and shared-memory
//! bytes read per FLOP of B's tile), and a little below the 256-row
//! tile's rate at n = 4096, where `Auto` keeps that one.
//!
//! The price: B's bytes travel twice more (read and written by the copy),
//! 128 MB at n = 4096, about 40 us against about 0.4 ms of tensor work,
//! and counted in the kernel's time (the copy is enqueued by every
//! launch). A is read as the tensor cores find it: its low 13 bits are
//! ignored (truncated), as in steps 12-13.
//!
//! Prediction (H200, n = 4096): the tensor pipe busy 85-90 % of the time
//! (well above step 13's, profiled in docs/measurements.md), minus the
//! copy: 0.9x cuBLAS TF32. The measurement
//! lives in docs/bench.json and the README's bench table (`cargo xtask
//! bench`). GPU only, like steps 12-13.

#[cfg(target_arch = "nvptx64")]
use crate::device::tma::TensorMaps;
#[cfg(target_arch = "nvptx64")]
use crate::device::wgmma::{Tf32, Tf32Ss, commit_group, descriptor_k_major_sw128};
#[cfg(target_arch = "nvptx64")]
use crate::gemm::Gemm;
#[cfg(target_arch = "nvptx64")]
use crate::k12_wgmma::store_tile;
use crate::k12_wgmma::{BK, BN};
#[cfg(target_arch = "nvptx64")]
use crate::k13_wgmma_ws::{Stages, warp_specialized};
use crate::k13_wgmma_ws::{Params, wgmma_instance};
use crate::launch::{KernelSpec, Op, Ops, TmaCopy};
#[cfg(target_arch = "nvptx64")]
use crate::unroll::{inline_always, unroll};

/// One parameter set: step 13's (`BM`, stages; the same stage and
/// barrier layout, B's tile `[BN][BK]` in place of its boxes), for the
/// layouts `ops`: the operands stored N-major (B, A^T) are copied
/// transposed before the kernel.
const fn spec_ops(p: Params, name: &'static str, ops: Ops) -> KernelSpec {
    let copy = TmaCopy::Transposed {
        a: matches!(ops.a, Op::T),
        b: matches!(ops.b, Op::N),
    };
    let spec = p.spec(
        name,
        17,
        "step 13 with B transposed before the kernel: wgmma from shared memory only, one group in flight",
        (BN, BK),
        true,
        match copy {
            TmaCopy::Transposed { a: false, b: false } => TmaCopy::AsStored,
            copy => copy,
        },
    );
    // Split-K's slices: each starts its K in the maps (`ss`).
    KernelSpec { ops, ..spec }.with_slices()
}
const fn spec(p: Params, name: &'static str) -> KernelSpec {
    spec_ops(p, name, Ops::NN)
}
const fn spec_tn(p: Params, name: &'static str) -> KernelSpec {
    spec_ops(p, name, Ops::TN)
}
const fn spec_nt(p: Params, name: &'static str) -> KernelSpec {
    spec_ops(p, name, Ops::NT)
}
const fn spec_tt(p: Params, name: &'static str) -> KernelSpec {
    spec_ops(p, name, Ops::TT)
}

#[rustfmt::skip]
mod instances {
    use super::*;
    wgmma_instance!(wgmma_ss_256x128x32_s4, SPEC_256X128X32_S4, spec, ss, 256, 4, sliced);
    wgmma_instance!(wgmma_ss_256x128x32_s4_tn, SPEC_256X128X32_S4_TN, spec_tn, ss, 256, 4, sliced);
    wgmma_instance!(wgmma_ss_256x128x32_s4_nt, SPEC_256X128X32_S4_NT, spec_nt, ss, 256, 4, sliced);
    wgmma_instance!(wgmma_ss_256x128x32_s4_tt, SPEC_256X128X32_S4_TT, spec_tt, ss, 256, 4, sliced);
    // 128 x 128 tiles (m64n128k8) for the transposed layouts: twice the
    // blocks at 256-1024 (step 18's has A and B as they are).
    wgmma_instance!(wgmma_ss_128x128x32_s6_tn, SPEC_128X128X32_S6_TN, spec_tn, ss, 128, 6, sliced);
    wgmma_instance!(wgmma_ss_128x128x32_s6_nt, SPEC_128X128X32_S6_NT, spec_nt, ss, 128, 6, sliced);
    wgmma_instance!(wgmma_ss_128x128x32_s6_tt, SPEC_128X128X32_S6_TT, spec_tt, ss, 128, 6, sliced);
}
pub use instances::*;

/// Every instance with A and B as they are.
pub const SPECS: &[KernelSpec] = &[SPEC_256X128X32_S4];
/// The instances for transposed calls (the same body, other copies).
pub const TRANSPOSED: &[KernelSpec] = &[
    SPEC_256X128X32_S4_TN,
    SPEC_256X128X32_S4_NT,
    SPEC_256X128X32_S4_TT,
    SPEC_128X128X32_S6_TN,
    SPEC_128X128X32_S6_NT,
    SPEC_128X128X32_S6_TT,
];

/// Step 13's block ([`warp_specialized`]); B's part of a stage is B^T's
/// tile, one box. STAGE_WORDS = BM * BK + BN * BK. A split-K slice
/// starts `g.k0` into K (the maps hold all of it; `g.k` is the slice's
/// depth, and every slice but the last is whole K tiles: the host's
/// slices are multiples of 32).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn ss<const BM: usize, const STAGES: usize, const STAGE_WORDS: usize, const ACC: usize>(g: Gemm, maps: TensorMaps)
where
    Tf32: Tf32Ss<ACC>,
{
    // SAFETY: B's part is one BN x BK box of B^T with the 128-byte swizzle
    // (SPEC's), 1024-aligned, the rest of stage_bytes().
    unsafe {
        warp_specialized::<BM, BN, BK, STAGES, STAGE_WORDS>(
            g.k0 as u32,
            g.k,
            Some(g.product as u32),
            maps,
            // SAFETY: as warp_specialized's contract, above.
            inline_always!(|word, k0, full, col0| unsafe { maps.b().load_3d(word, k0, col0 as u32, g.product as u32, full) }),
            inline_always!(|stages, row0, col0, tid, k_tiles| consume_ss::<BM, STAGES, STAGE_WORDS, ACC>(stages, g, row0, col0, tid, k_tiles, |_| {})),
        );
    }
}

/// The consumer warpgroups' loop of steps 17 and 18: for each tile, wait
/// for its stage, run `prepare(kt)` (step 18 makes B's part K-major there;
/// step 17 has nothing to do), issue its `wgmma`s with both operands in
/// shared memory, then retire the previous tile's group and release its
/// stage, so that one group stays in flight across tiles; then the
/// epilogue. B's part of each stage must hold B^T's `BN x BK` tile,
/// K-major with the 128-byte swizzle, once `prepare` returns in every
/// thread of the warpgroup (and, if the threads wrote it, fenced for the
/// async proxy: `wgmma`'s rule 3).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub(crate) fn consume_ss<const BM: usize, const STAGES: usize, const STAGE_WORDS: usize, const ACC: usize>(
    stages: Stages<BM, STAGES, STAGE_WORDS>,
    g: Gemm,
    row0: usize,
    col0: usize,
    tid: usize,
    k_tiles: usize,
    prepare: impl Fn(usize),
) where
    Tf32: Tf32Ss<ACC>,
{
    // D is this warpgroup's 64 columns of C by the tile's BM rows.
    const { assert!(2 * ACC == BM) };
    let (wg, lane) = (tid / 128, tid % 32);
    // SAFETY: all-zero bits are 0.0 (see step 12).
    let mut acc: [f32; ACC] = unsafe { core::mem::zeroed() };
    for kt in 0..k_tiles {
        let s = kt % STAGES;
        stages.wait_full(kt);
        prepare(kt);
        // The wgmma's "A" is this warpgroup's 64 rows of B^T's tile (64
        // columns of C), its "B" A's tile (BM rows of C), as in steps
        // 12-13: D is the tile of C transposed.
        let (mut a_desc, mut b_desc) = ([0u64; BK / 8], [0u64; BK / 8]);
        unroll!(BK / 8; 4, |step| {
            a_desc[step] = descriptor_k_major_sw128(stages.b_tile(s) + 64 * wg * BK + 8 * step);
            b_desc[step] = descriptor_k_major_sw128(stages.a_tile(s) + 8 * step);
        });
        // SAFETY: both warpgroups run every call; D and the descriptors
        // go through the fence, D through the wait; both tiles are
        // complete (wait and prepare above) and stay until this warp
        // releases the stage, after the wait that retires these.
        unsafe {
            Tf32::fence(&mut acc, &mut a_desc, &mut b_desc);
            unroll!(BK / 8; 4, |step| {
                Tf32::mma(&mut acc, a_desc[step], b_desc[step]);
            });
            commit_group();
            // Tile kt - 1's group is retired; tile kt's stays in flight.
            Tf32::wait::<1>(&mut acc);
        }
        if kt >= 1 && lane == 0 {
            // SAFETY: once per tile, in order, after the wait that retired
            // tile kt - 1's wgmmas.
            unsafe { stages.release(kt - 1) };
        }
    }
    // SAFETY: both warpgroups get here.
    unsafe { Tf32::wait::<0>(&mut acc) };
    store_tile::<BM, _>(g, &acc, row0, col0, tid);
}
