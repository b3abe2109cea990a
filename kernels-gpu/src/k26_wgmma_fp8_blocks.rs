//! Step 26: FP8 with its partial sums promoted to f32, and block scales.
//! Step 25 leaves every sum in the tensor cores' accumulators for the
//! whole of K. Hopper's FP8 tensor cores add each k-step's products
//! keeping about 13 fraction bits, so that error grows with K: at K =
//! 16384 step 25's is several times cuBLASLt's (docs/measurements.md,
//! fourteenth session). DeepSeek-V3 (and its DeepGEMM) fixes both that
//! and the range of one scale per tensor the same way: each K block of
//! 128 is summed by the tensor cores alone, from zero, then added into
//! f32 registers by the CUDA cores, multiplied there by the block's
//! scales.
//!
//! What changes from step 25:
//! - **Two sets of accumulators per thread**: the K block's partial sum
//!   (`wgmma`'s D, started afresh by the block's first k-step with
//!   `scale-d` false) and the promoted sums. Both for a 64 x 256 tile
//!   per warpgroup would be 256 registers, past the 232 a consumer has,
//!   so the tile is 128 x 128 (`wgmma ... m64n128k32`, 64 + 64 f32 per
//!   thread), one B block wide.
//! - **Each stage is waited for and promoted**: the consumers retire
//!   a stage's four `wgmma`s (`wait_group 0`), release it and add the
//!   partial sum into the promoted one (64 FMAs per thread), while the
//!   other consumer warpgroup's `wgmma`s keep the tensor cores busy.
//! - **Block scales** (`_blocks`, [`Scaling::Blocks`]): A's per row per
//!   128 of K, B's per 128 x 128 block ([`Scaling::a_scales`],
//!   [`Scaling::b_scales`]: the layouts cuBLASLt's `VEC128_32F` and
//!   `BLK128x128_32F` take), read from global memory while the stage's
//!   `wgmma`s run (read before `wgmma.fence`, a pending load held the
//!   fence back: docs/measurements.md, fifteenth session): each thread's two rows'
//!   A scales times the tile's one B scale multiply the promotion. D's
//!   scale and alpha/beta stay in the epilogue. The `_promoted`
//!   instances take step 25's per-tensor scales and promote unscaled.
//! - **Six stages** of 32 KB (A's 128 rows and B^T's 128 of 128 bytes).
//!
//! Everything else (the persistent grid and its tile order, the TMA
//! producer, the epilogue by TMA) is step 22's, through step 20's
//! [`persistent`] block.
//!
//! Prediction (H200): the error at K = 16384 that of f32 accumulation
//! over the K blocks (the 13-bit sums now span 128 of K), at or below
//! cuBLASLt's. Speed: the 128-wide tile loads a third more bytes per
//! FLOP from L2 than step 25's, and each warpgroup's tensor work now
//! stops at every stage for its promotion, which the other warpgroup
//! covers only if its own `wgmma`s are ready: some 0.85-0.95x step 25,
//! about 0.9x cuBLASLt FP8 with per-tensor scales. The measurement lives in
//! docs/bench.json and the README's bench table (`cargo xtask bench`).
//! GPU only, like steps 12-25.

#[cfg(target_arch = "nvptx64")]
use crate::device::GlobalIn;
#[cfg(target_arch = "nvptx64")]
use crate::device::math::fma;
#[cfg(target_arch = "nvptx64")]
use crate::device::tma::TensorMaps;
#[cfg(target_arch = "nvptx64")]
use crate::device::wgmma::{
    Fp8Pair, WgmmaFp8, commit_group, descriptor_k_major_sw128, fence_ss_64, wait_ss_64x2,
};
use crate::elem::{Bf16, E4m3, Element, Math, SCALE_BLOCK, Scaling};
#[cfg(target_arch = "nvptx64")]
use crate::gemm::{Gemm, Output, ScaleParams};
#[cfg(target_arch = "nvptx64")]
use crate::k13_wgmma_ws::{A_ROW_WORDS, Stages};
#[cfg(target_arch = "nvptx64")]
use crate::k19_wgmma_16bit::BM;
use crate::k19_wgmma_16bit::Params;
#[cfg(target_arch = "nvptx64")]
use crate::k20_wgmma_persistent::persistent;
use crate::launch::{KernelSpec, Ops};
#[cfg(target_arch = "nvptx64")]
use crate::unroll::unroll;

/// Columns of C per block: one B block (the `wgmma` N).
pub const BN: usize = SCALE_BLOCK;
/// K values per stage: one 128-byte row of FP8, one K block.
pub const BK: usize = SCALE_BLOCK;
/// Stages of 32 KB in flight.
pub const STAGES: usize = 6;
/// This step's parameters: [`STAGES`] of BM x [`BN`].
const PARAMS: Params = Params { stages: STAGES, bn: BN };
/// Words of one stage.
#[cfg(target_arch = "nvptx64")]
const STAGE_WORDS: usize = PARAMS.stage_words();
/// Promoted accumulators per consumer thread: its share of a 64 x 128 tile.
#[cfg(target_arch = "nvptx64")]
const ACC: usize = BN / 2;

/// One instance: `$spec` for the host; for the GPU the body `$name` on A
/// of type `$a`, B^T of type `$b`, C of type `$c` with the scales
/// `$scaling` (`Tensor`: step 25's, applied in the epilogue; `Blocks`:
/// per block, applied at each promotion), and its PTX entry in the FP8
/// module.
macro_rules! instance {
    ($name:ident, $spec:ident, $a:ident, $b:ident, $c:ident, $scaling:ident, $summary:literal) => {
        pub const $spec: KernelSpec = {
            let spec = PARAMS.spec_of(
                stringify!($name),
                (<$a as Element>::ELEM, <$b as Element>::ELEM, <$c as Element>::ELEM),
                Math::Fp8,
                26,
                $summary,
                (true, Ops::NT, true),
            );
            KernelSpec {
                elems: spec.elems.promoted(BK as u32).with_scaling(Scaling::$scaling),
                ..spec
            }
        };
        /// The body of the PTX entry of the same name (inlined into it).
        #[cfg(target_arch = "nvptx64")]
        #[inline(always)]
        pub fn $name(g: Gemm<$a, $b, $c>, maps: TensorMaps, scales: ScaleParams) {
            block::<Fp8Pair<$a, $b>, $c, { matches!(Scaling::$scaling, Scaling::Blocks) }>(g, maps, scales)
        }
        #[cfg(any(not(target_arch = "nvptx64"), gemm_module = "wgmma_fp8"))]
        mod $name {
            #[cfg(target_arch = "nvptx64")]
            use super::$name;
            crate::gemm_kernel!($name, scaled, elems($a, $b, $c));
        }
    };
}

// E4M3 with block scales, then with step 25's per-tensor scales, each
// into BF16 and f32.
#[rustfmt::skip]
mod instances {
    use super::*;
    instance!(wgmma_e4m3_blocks_128x128x128_s6, SPEC_E4M3_BLOCKS_128X128X128_S6, E4m3, E4m3, Bf16, Blocks,
        "FP8 with block scales (A 1 x 128, B 128 x 128): each K block's wgmma sum promoted to f32 registers, scaled there; 128 x 128 tile");
    instance!(wgmma_e4m3_blocks_128x128x128_s6_f32, SPEC_E4M3_BLOCKS_128X128X128_S6_F32, E4m3, E4m3, f32, Blocks,
        "FP8 with block scales (A 1 x 128, B 128 x 128): each K block's wgmma sum promoted to f32 registers, scaled there; 128 x 128 tile");
    instance!(wgmma_e4m3_promoted_128x128x128_s6, SPEC_E4M3_PROMOTED_128X128X128_S6, E4m3, E4m3, Bf16, Tensor,
        "FP8 with per-tensor scales, each K block's wgmma sum promoted to f32 registers; 128 x 128 tile");
    instance!(wgmma_e4m3_promoted_128x128x128_s6_f32, SPEC_E4M3_PROMOTED_128X128X128_S6_F32, E4m3, E4m3, f32, Tensor,
        "FP8 with per-tensor scales, each K block's wgmma sum promoted to f32 registers; 128 x 128 tile");
}
pub use instances::*;

/// Every instance.
pub const SPECS: &[KernelSpec] = &[
    SPEC_E4M3_BLOCKS_128X128X128_S6,
    SPEC_E4M3_BLOCKS_128X128X128_S6_F32,
    SPEC_E4M3_PROMOTED_128X128X128_S6,
    SPEC_E4M3_PROMOTED_128X128X128_S6_F32,
];

/// The block: step 20's [`persistent`] block on 128 x 128 tiles, each
/// computed by [`mainloop`]. With `BLOCKS`, `scales.a` and `scales.b`
/// are the block scales' addresses ([`Scaling::a_scales`],
/// [`Scaling::b_scales`]) and only D's scale goes to the epilogue; else
/// all three are per tensor, step 25's.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn block<P: WgmmaFp8, C: Output, const BLOCKS: bool>(
    g: Gemm<P::A, P::B, C>,
    maps: TensorMaps,
    scales: ScaleParams,
) {
    let (m, k) = (g.m, g.k);
    let epilogue = if BLOCKS {
        ScaleParams {
            a: 0,
            b: 0,
            d: scales.d,
        }
    } else {
        scales
    };
    persistent::<P::A, P::B, C, BN, STAGES, STAGE_WORDS, BK, 0, 0, true, ACC>(
        g,
        maps,
        Some(epilogue),
        #[inline(always)]
        |stages, it, k_tiles, tid, row0, col0| {
            mainloop::<P, BLOCKS>(stages, it, k_tiles, tid, BlockScales::new(scales, m, k, row0, col0, tid))
        },
    )
}

/// Where one consumer thread reads its block scales: A's for its two
/// rows of the tile (`row`, `row + 8`), B's for the tile's 128 columns.
#[cfg(target_arch = "nvptx64")]
#[derive(Clone, Copy)]
struct BlockScales {
    a: GlobalIn<f32>,
    b: GlobalIn<f32>,
    /// A's rows.
    m: usize,
    /// Elements from one K block's A scales to the next's.
    a_stride: usize,
    /// This thread's first row of C.
    row: usize,
    /// The first of the tile's B scales (its column block's, K block 0).
    b0: usize,
}

#[cfg(target_arch = "nvptx64")]
impl BlockScales {
    #[inline(always)]
    fn new(s: ScaleParams, m: usize, k: usize, row0: usize, col0: usize, tid: usize) -> Self {
        let (wg, warp, lane) = (tid / 128, tid % 128 / 32, tid % 32);
        Self {
            // SAFETY: with block scales, the entry's contract (the host's
            // Scaling::Blocks buffers): a_scales(m, k) and b_scales(k, n)
            // live f32s at these addresses, read only.
            a: unsafe { GlobalIn::from_raw(s.a as *const f32) },
            // SAFETY: as above.
            b: unsafe { GlobalIn::from_raw(s.b as *const f32) },
            m,
            a_stride: Scaling::a_scales_stride(m),
            row: row0 + 64 * wg + 16 * warp + lane / 4,
            b0: col0 / SCALE_BLOCK * Scaling::b_scales_stride(k),
        }
    }

    /// K block `kb`'s factors for this thread's two rows: A's row scale
    /// times B's block scale (0 for a row past A's last, whose values
    /// TMA filled with zeros).
    #[inline(always)]
    fn at(self, kb: usize) -> [f32; 2] {
        // SAFETY: kb < ceil(k / 128) and col0 < n (the caller's tile), so
        // b0 + kb < b_scales(k, n) (b0 is col0 / 128 b_scales_stride(k));
        // each row is checked against m.
        let sb = unsafe { self.b.read(self.b0 + kb) };
        let mut f = [0.0; 2];
        unroll!(2; 2, |h| {
            let row = self.row + 8 * h;
            if row < self.m {
                // SAFETY: row < m and kb < ceil(k / 128): inside a_scales(m, k).
                f[h] = unsafe { self.a.read(kb * self.a_stride + row) } * sb;
            }
        });
        f
    }
}

/// One tile of C's main loop for consumer thread `tid`: the pipeline's
/// tiles `it0..it0 + k_tiles` of K, each one K block of 128. For each:
/// wait for its stage, issue its four `m64n128k32` into the partial sum
/// (the first from zero), read the block's scales (`BLOCKS`), retire them,
/// release the stage, and add the partial sum into the promoted
/// accumulators, times the scales. Returns the promoted accumulators
/// (`acc[4j + 2h + e]` in `wgmma`'s D layout, step 19's epilogue's).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn mainloop<P: WgmmaFp8, const BLOCKS: bool>(
    stages: Stages<BM, STAGES, STAGE_WORDS, BK>,
    it0: usize,
    k_tiles: usize,
    tid: usize,
    scales: BlockScales,
) -> [f32; ACC] {
    let (wg, lane) = (tid / 128, tid % 32);
    // SAFETY: all-zero bits are 0.0 (see step 12).
    let mut acc: [f32; ACC] = unsafe { core::mem::zeroed() };
    // SAFETY: as above; every k-step group's first wgmma overwrites it.
    let mut part: [f32; ACC] = unsafe { core::mem::zeroed() };
    for kt in 0..k_tiles {
        let it = it0 + kt;
        let s = it % STAGES;
        stages.wait_full(it);
        // A: this warpgroup's 64 rows; B^T: the tile's 128 rows; 32 bytes
        // (32 values of K) on per step, both K-major.
        let mut desc = [0u64; 8];
        unroll!(4; 4, |step| {
            desc[step] = descriptor_k_major_sw128(stages.a_tile(s) + 64 * wg * A_ROW_WORDS + 8 * step);
            desc[4 + step] = descriptor_k_major_sw128(stages.b_tile(s) + 8 * step);
        });
        // SAFETY: both warpgroups run every call; the partial sum and the
        // descriptors go through the fence, both sums through the wait;
        // both tiles landed (wait_full) and stay until this warp releases
        // the stage, after the wait that retires these.
        let mut f = [1.0; 2];
        unsafe {
            fence_ss_64(&mut part, &mut desc);
            P::mma_m64n128k32_ss::<0>(&mut part, desc[0], desc[4]);
            unroll!(3; 4, |step| {
                P::mma_m64n128k32_ss::<1>(&mut part, desc[1 + step], desc[5 + step]);
            });
            commit_group();
            // The K block's factors, read while its wgmmas run (before the
            // fence, a pending load would hold the fence back: `wgmma.fence`
            // waits for the registers it orders).
            if BLOCKS {
                f = scales.at(kt);
            }
            wait_ss_64x2::<0>(&mut part, &mut acc);
        }
        if lane == 0 {
            // SAFETY: once per tile, in order, after the wait that retired
            // its wgmmas.
            unsafe { stages.release(it) };
        }
        unroll!(ACC / 4; 16, |j| {
            unroll!(2; 2, |h| {
                unroll!(2; 2, |e| {
                    let i = 4 * j + 2 * h + e;
                    acc[i] = if BLOCKS { fma(part[i], f[h], acc[i]) } else { part[i] + acc[i] };
                });
            });
        });
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::Operands;

    /// The boxes are one K block of A's 128 rows and of B^T's 128; C's
    /// boxes are step 22's; the elements say how the sums are promoted and
    /// scaled.
    #[test]
    fn the_tile_is_one_block_of_a_and_of_b() {
        for spec in SPECS {
            let Operands::TensorMaps(boxes) = spec.operands else { panic!("{}", spec.name) };
            assert_eq!((boxes.a, boxes.b), ((128, BK as u32), (BN as u32, BK as u32)), "{}", spec.name);
            let (rows, cols) = boxes.c.expect(spec.name);
            assert_eq!((rows, cols as usize * spec.elems.c.bytes()), (16, 128), "{}", spec.name);
            assert_eq!(spec.launch.block_tile, (128, BN));
            assert_eq!((spec.ops, spec.module.name), (Ops::NT, "wgmma_fp8"));
            assert_eq!(spec.elems.promote_every, 128);
            let blocks = spec.name.contains("_blocks_");
            assert_eq!(spec.elems.scaling == Scaling::Blocks, blocks, "{}", spec.name);
            assert_eq!(spec.elems.storage().scaling, spec.elems.scaling);
            assert!(spec.launch.shared_bytes <= 227 * 1024);
        }
    }
}
