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
//!   thread), one B block wide, or 128 x 192 (`m64n192k32`, 96 + 96: the
//!   `_128x192` instances), which reads a sixth fewer bytes per FLOP from
//!   L2, the resource the 128 x 128 tile runs short of (ncu in
//!   docs/measurements.md, thirty-first session).
//! - **Each stage is waited for and promoted**: the consumers retire
//!   a stage's four `wgmma`s (`wait_group 0`), release it and add the
//!   partial sum into the promoted one (64 FMAs per thread), while the
//!   other consumer warpgroup's `wgmma`s keep the tensor cores busy.
//! - **Block scales** (`_blocks`, [`Scaling::Blocks`]): A's per row per
//!   128 of K, B's per 128 x 128 block ([`Scaling::a_scales`],
//!   [`Scaling::b_scales`]: the layouts cuBLASLt's `VEC128_32F` and
//!   `BLK128x128_32F` take), brought into each stage with its tiles: the
//!   producer copies the K block's 128 A scales of the tile's rows and
//!   the 16 bytes holding its B scale, two such for a wide tile, which
//!   meets two B blocks (`cp.async.bulk`, on the stage's barrier) into a
//!   ring of [`scale_words`] per stage after the epilogue's staging
//!   boxes, so a consumer reads them from shared memory while the
//!   stage's `wgmma`s run. (Read by each thread from
//!   global memory instead, the loads' latency showed: a load still
//!   pending at `wgmma.fence` holds the fence, and one issued after the
//!   `wgmma`s held the promotion; docs/measurements.md, fifteenth and
//!   eighteenth sessions.) Each thread's two rows' A scales times the
//!   B scale of each column's block multiply the promotion. D's scale and alpha/beta
//!   stay in the epilogue. The `_promoted` instances take step 25's
//!   per-tensor scales and promote unscaled.
//! - **Stages** of 32 KB (A's 128 rows and B^T's 128 of 128 bytes): six
//!   per tensor, five with block scales (their scale ring and six stages
//!   would pass the 227 KB a block may have); four of 40 KB for the wide
//!   tile.
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
//! about 0.9x cuBLASLt FP8 with per-tensor scales. The wide tile, if L2
//! is what holds the 128 x 128 one: up to 1.2x it, less its ragged last
//! tile column (8192 is not a multiple of 192). The measurement lives in
//! docs/bench.json and the README's bench table (`cargo xtask bench`).
//! GPU only, like steps 12-25.

#[cfg(target_arch = "nvptx64")]
use crate::device::barrier::sync_warp;
#[cfg(target_arch = "nvptx64")]
use crate::device::math::fma;
#[cfg(target_arch = "nvptx64")]
use crate::device::mbarrier::MBarrier;
#[cfg(target_arch = "nvptx64")]
use crate::device::SharedTile;
#[cfg(target_arch = "nvptx64")]
use crate::device::tma::{TensorMaps, bulk_load};
#[cfg(target_arch = "nvptx64")]
use crate::device::wgmma::{
    Fp8Pair, WgmmaFp8, commit_group, descriptor_k_major_sw128,
};
use crate::elem::{Bf16, E4m3, Element, Math, SCALE_BLOCK, Scaling};
#[cfg(target_arch = "nvptx64")]
use crate::gemm::{Gemm, Output, ScaleParams};
#[cfg(target_arch = "nvptx64")]
use crate::k13_wgmma_ws::{A_ROW_WORDS, StageExtra, Stages};
use crate::k19_wgmma_16bit::{BM, Params};
#[cfg(target_arch = "nvptx64")]
use crate::k20_wgmma_persistent::persistent;
#[cfg(target_arch = "nvptx64")]
use crate::k22_wgmma_tma_store::STAGING_WORDS;
use crate::launch::{KernelSpec, Ops};
#[cfg(target_arch = "nvptx64")]
use crate::unroll::{inline_always, unroll};

/// Columns of C per block: one B block (the `wgmma` N).
pub const BN: usize = SCALE_BLOCK;
/// Columns of C per block of the wide instances: a B block and a half,
/// so every tile meets two of B's column blocks.
pub const BN_WIDE: usize = 192;
/// K values per stage: one 128-byte row of FP8, one K block.
pub const BK: usize = SCALE_BLOCK;
/// Stages of 32 KB in flight with per-tensor scales.
pub const STAGES: usize = 6;
/// Stages with block scales (room for the scale ring).
pub const STAGES_BLOCKS: usize = 5;
/// Stages of 40 KB with block scales, [`BN_WIDE`] columns.
pub const STAGES_WIDE: usize = 4;

/// B's column blocks a tile `bn` wide meets (at a multiple of `bn`): one
/// for [`BN`], two for [`BN_WIDE`].
pub const fn column_blocks(bn: usize) -> usize {
    if bn > SCALE_BLOCK { 2 } else { 1 }
}

/// Words of the scale ring per stage (block scales) for a tile `bn` wide:
/// the K block's A scales of the tile's BM rows, then for each of B's
/// column blocks it meets the 16-byte-aligned four B scales that hold
/// the tile's.
pub const fn scale_words(bn: usize) -> usize {
    BM + 4 * column_blocks(bn)
}

/// One instance: `$spec` for the host; for the GPU the body `$name` on A
/// of type `$a`, B^T of type `$b`, C of type `$c` with the scales
/// `$scaling` (`Tensor`: step 25's, applied in the epilogue; `Blocks`:
/// per block, applied at each promotion), and its PTX entry in the FP8
/// module.
macro_rules! instance {
    ($name:ident, $spec:ident, $a:ident, $b:ident, $c:ident, $scaling:ident, $bn:ident, $stages:ident, $summary:literal) => {
        pub const $spec: KernelSpec = {
            let spec = Params { stages: $stages, bn: $bn }.spec_of(
                stringify!($name),
                (<$a as Element>::ELEM, <$b as Element>::ELEM, <$c as Element>::ELEM),
                Math::Fp8,
                26,
                $summary,
                (true, Ops::NT, true),
            );
            let ring = match Scaling::$scaling {
                Scaling::Blocks => $stages * scale_words($bn) * 4,
                _ => 0,
            };
            KernelSpec {
                elems: spec.elems.promoted(BK as u32).with_scaling(Scaling::$scaling),
                launch: crate::launch::Launch { shared_bytes: spec.launch.shared_bytes + ring, ..spec.launch },
                ..spec
            }
        };
        /// The body of the PTX entry of the same name (inlined into it).
        #[cfg(target_arch = "nvptx64")]
        #[inline(always)]
        pub fn $name(g: Gemm<$a, $b, $c>, maps: TensorMaps, scales: ScaleParams) {
            const SW: usize = Params { stages: $stages, bn: $bn }.stage_words();
            // The wide tile's epilogue spilled 36 bytes with a 16-bit C's
            // column operands read a slice ahead: it reads them where it
            // uses them (`store_tile_tma`'s `AHEAD`).
            const AHEAD: bool = $bn != BN_WIDE;
            block::<Fp8Pair<$a, $b>, $c, { matches!(Scaling::$scaling, Scaling::Blocks) }, $stages, $bn, { $bn / 2 }, SW, AHEAD>(
                g, maps, scales,
            )
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
    instance!(wgmma_e4m3_blocks_128x128x128_s5, SPEC_E4M3_BLOCKS_128X128X128_S5, E4m3, E4m3, Bf16, Blocks, BN, STAGES_BLOCKS,
        "FP8 with block scales (A 1 x 128, B 128 x 128): each K block's wgmma sum promoted to f32 registers, scaled there; 128 x 128 tile");
    instance!(wgmma_e4m3_blocks_128x128x128_s5_f32, SPEC_E4M3_BLOCKS_128X128X128_S5_F32, E4m3, E4m3, f32, Blocks, BN, STAGES_BLOCKS,
        "FP8 with block scales (A 1 x 128, B 128 x 128): each K block's wgmma sum promoted to f32 registers, scaled there; 128 x 128 tile");
    instance!(wgmma_e4m3_blocks_128x192x128_s4, SPEC_E4M3_BLOCKS_128X192X128_S4, E4m3, E4m3, Bf16, Blocks, BN_WIDE, STAGES_WIDE,
        "FP8 with block scales (A 1 x 128, B 128 x 128): each K block's wgmma sum promoted to f32 registers, scaled there; 128 x 192 tile over two B blocks");
    instance!(wgmma_e4m3_blocks_128x192x128_s4_f32, SPEC_E4M3_BLOCKS_128X192X128_S4_F32, E4m3, E4m3, f32, Blocks, BN_WIDE, STAGES_WIDE,
        "FP8 with block scales (A 1 x 128, B 128 x 128): each K block's wgmma sum promoted to f32 registers, scaled there; 128 x 192 tile over two B blocks");
    instance!(wgmma_e4m3_promoted_128x128x128_s6, SPEC_E4M3_PROMOTED_128X128X128_S6, E4m3, E4m3, Bf16, Tensor, BN, STAGES,
        "FP8 with per-tensor scales, each K block's wgmma sum promoted to f32 registers; 128 x 128 tile");
    instance!(wgmma_e4m3_promoted_128x128x128_s6_f32, SPEC_E4M3_PROMOTED_128X128X128_S6_F32, E4m3, E4m3, f32, Tensor, BN, STAGES,
        "FP8 with per-tensor scales, each K block's wgmma sum promoted to f32 registers; 128 x 128 tile");
}
pub use instances::*;

/// Every instance.
pub const SPECS: &[KernelSpec] = &[
    SPEC_E4M3_BLOCKS_128X128X128_S5,
    SPEC_E4M3_BLOCKS_128X128X128_S5_F32,
    SPEC_E4M3_BLOCKS_128X192X128_S4,
    SPEC_E4M3_BLOCKS_128X192X128_S4_F32,
    SPEC_E4M3_PROMOTED_128X128X128_S6,
    SPEC_E4M3_PROMOTED_128X128X128_S6_F32,
];

/// The block: step 20's [`persistent`] block on 128 x `BN` tiles (`BN`
/// = 2 `ACC`, stages of `SW` words), each computed by [`mainloop`]. With `BLOCKS`,
/// `scales.a` and `scales.b` are the block scales' addresses
/// ([`Scaling::a_scales`], [`Scaling::b_scales`]), copied into each
/// stage's scale ring by the producer ([`ScaleCopies`]), and only D's
/// scale goes to the epilogue; else all three are per tensor, step 25's.
/// `AHEAD`: the epilogue reads a 16-bit C's column operands a slice
/// ahead ([`store_tile_tma`](crate::k22_wgmma_tma_store::store_tile_tma)).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn block<
    P: WgmmaFp8<ACC>,
    C: Output,
    const BLOCKS: bool,
    const ST: usize,
    const BN: usize,
    const ACC: usize,
    const SW: usize,
    const AHEAD: bool,
>(
    g: Gemm<P::A, P::B, C>,
    maps: TensorMaps,
    scales: ScaleParams,
) {
    let (m, n, k) = (g.m, g.n, g.k);
    let epilogue = if BLOCKS {
        ScaleParams {
            a: 0,
            b: 0,
            d: scales.d,
        }
    } else {
        scales
    };
    const { assert!(BN == 2 * ACC) };
    persistent::<P::A, P::B, C, BN, ST, SW, BK, 0, 0, true, ACC, AHEAD, _>(
        g,
        maps,
        Some(epilogue),
        inline_always!(|stages, row0, col0| {
            ScaleCopies::<BLOCKS, ACC>::new(scales, m, n, k, row0, col0, ring(stages))
        }),
        inline_always!(|stages, it, k_tiles, tid, row0, col0| {
            let scales = BlockScales::<ACC>::new(m, row0, col0, tid, ring(stages));
            mainloop::<P, BLOCKS, ST, ACC, SW>(stages, it, k_tiles, tid, scales)
        }),
    )
}

/// The first word of the scale ring: after the epilogue's staging boxes
/// (the spec's `shared_bytes` counts `ST * scale_words(bn)` more words
/// with block scales).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn ring<const ST: usize, const SW: usize>(stages: Stages<BM, ST, SW, BK>) -> usize {
    stages.end_aligned() + STAGING_WORDS
}

/// The producer's copies of one tile's block scales into each stage's
/// [`scale_words`] of the ring (`ON`; nothing for per-tensor scales):
/// K block `kt`'s A scales of the tile's rows (at most BM, as far as A's
/// scale rows go: [`Scaling::a_scales_stride`], a multiple of 4) and, for
/// each of B's column blocks the 2 `ACC` columns meet, the 16 bytes of
/// its scales that hold K block `kt`'s (each column block's padded to a
/// multiple of 4: [`Scaling::b_scales_stride`]).
#[cfg(target_arch = "nvptx64")]
#[derive(Clone, Copy)]
struct ScaleCopies<const ON: bool, const ACC: usize> {
    /// The block scales' addresses (A's, B's): live for every tile
    /// anyway, so the per-tile parts below are 32-bit offsets (the
    /// producer has 40 registers).
    s: ScaleParams,
    /// A's rows (live for every tile anyway: A's scale stride and how
    /// many of the tile's rows it has follow from it).
    m: u32,
    /// Bytes from A's scales to the tile's first row's in K block 0.
    a_off: u32,
    /// Bytes from B's scales to the tile's first column block's (K
    /// block 0).
    b_off: u32,
    /// Bytes from there to its second column block's (a wide tile's),
    /// or 0 where B has no second (the tile's columns past B's last,
    /// whose values TMA filled with zeros).
    b_next: u32,
    /// The ring's first word.
    ring: u32,
}

#[cfg(target_arch = "nvptx64")]
impl<const ON: bool, const ACC: usize> ScaleCopies<ON, ACC> {
    #[inline(always)]
    fn new(s: ScaleParams, m: usize, n: usize, k: usize, row0: usize, col0: usize, ring: usize) -> Self {
        let (block, stride) = (col0 / SCALE_BLOCK, Scaling::b_scales_stride(k));
        let next = column_blocks(2 * ACC) == 2 && (block + 1) * SCALE_BLOCK < n;
        Self {
            s,
            m: m as u32,
            a_off: 4 * row0 as u32,
            b_off: 4 * (block * stride) as u32,
            b_next: if next { 4 * stride as u32 } else { 0 },
            ring: ring as u32,
        }
    }

    /// Bytes from one K block's A scales to the next's.
    #[inline(always)]
    fn a_step(self) -> u32 {
        4 * Scaling::a_scales_stride(self.m as usize) as u32
    }

    /// Bytes of A scales per stage: the tile's rows, as far as A's
    /// scale rows go (row0 < m <= the stride, both multiples of 4).
    #[inline(always)]
    fn a_bytes(self) -> u32 {
        (self.a_step() - self.a_off).min(4 * BM as u32)
    }
}

#[cfg(target_arch = "nvptx64")]
impl<const ON: bool, const ACC: usize> StageExtra for ScaleCopies<ON, ACC> {
    #[inline(always)]
    fn bytes(self) -> u32 {
        if ON { self.a_bytes() + 16 * column_blocks(2 * ACC) as u32 } else { 0 }
    }

    #[inline(always)]
    unsafe fn load(self, s: usize, kt: usize, full: MBarrier) {
        if ON {
            let word = self.ring as usize + s * scale_words(2 * ACC);
            let a = self.s.a + self.a_off as u64 + kt as u64 * self.a_step() as u64;
            let b = self.s.b + self.b_off as u64 + 4 * (kt & !3) as u64;
            // SAFETY: the entry's contract (the host's Scaling::Blocks
            // buffers, 16-byte aligned: blas::check_scale_alignment): rows
            // row0 .. row0 + a_bytes / 4 of K block kt lie inside
            // a_scales(m, k), and the four B scales from kt rounded down
            // to 4 inside the padded stride of b_scales(k, n) of the
            // tile's column block (and of the next, where b_next is not
            // 0: B has it); addresses and sizes are multiples of 16, as is
            // the ring's slot (1024-aligned ring, scale_words * 4 = 528 or
            // 544 bytes). The stage's consumers read the slot only between
            // its full phase and their release (mainloop), as for the
            // tiles.
            unsafe {
                bulk_load(word, a, self.a_bytes(), full);
                bulk_load(word + BM, b, 16, full);
                if column_blocks(2 * ACC) == 2 {
                    bulk_load(word + BM + 4, b + self.b_next as u64, 16, full);
                }
            }
        }
    }
}

/// Where one consumer thread reads its block scales in the ring: A's for
/// its two rows of the tile (`local`, `local + 8`), B's at word BM + kt %
/// 4 of the slot (and BM + 4 + kt % 4, a wide tile's second column
/// block's).
#[cfg(target_arch = "nvptx64")]
#[derive(Clone, Copy)]
struct BlockScales<const ACC: usize> {
    /// A's rows.
    m: usize,
    /// This thread's first row of C.
    row: usize,
    /// Its row within the tile.
    local: usize,
    /// The tile's first column in B's second column block (from the
    /// tile's first): where the second B scale takes over.
    split: usize,
    /// The ring's first word.
    ring: usize,
}

#[cfg(target_arch = "nvptx64")]
impl<const ACC: usize> BlockScales<ACC> {
    #[inline(always)]
    fn new(m: usize, row0: usize, col0: usize, tid: usize, ring: usize) -> Self {
        let (wg, warp, lane) = (tid / 128, tid % 128 / 32, tid % 32);
        let local = 64 * wg + 16 * warp + lane / 4;
        let split = SCALE_BLOCK - col0 % SCALE_BLOCK;
        Self { m, row: row0 + local, local, split, ring }
    }

    /// K block `kt`'s factors for this thread's two rows, from stage
    /// `s`'s slot: A's row scale times B's block scale, for the columns
    /// in the tile's first column block of B and in its second (0 for a
    /// row past A's last, whose values TMA filled with zeros).
    ///
    /// # Safety
    /// Between the stage's full phase for K block `kt` and this warp's
    /// release of it.
    #[inline(always)]
    unsafe fn at(self, s: usize, kt: usize) -> [[f32; 2]; 2] {
        let slot = SharedTile::<1, { BM + 8 }>::at(self.ring + s * scale_words(2 * ACC));
        let mut sb = [0.0; 2];
        unroll!(column_blocks(2 * ACC); 2, |c| {
            // SAFETY: inside the ring (the spec's shared_bytes), landed
            // (the caller's full phase) and not yet overwritten (not
            // released).
            sb[c] = unsafe { slot.load(0, BM + 4 * c + kt % 4) };
        });
        let mut f = [[0.0; 2]; 2];
        unroll!(2; 2, |h| {
            if self.row + 8 * h < self.m {
                // SAFETY: as above; local + 8 h < BM, and a row below m
                // is among the a_bytes the producer copied.
                let sa = unsafe { slot.load(0, self.local + 8 * h) };
                unroll!(2; 2, |c| { f[c][h] = sa * sb[c.min(column_blocks(2 * ACC) - 1)] });
            }
        });
        f
    }

    /// Whether the thread's column octet `j` of the tile (columns 8 j ..
    /// 8 j + 8) lies in B's second column block: never for a tile one
    /// block wide, whose columns start one.
    #[inline(always)]
    fn second(self, j: usize) -> bool {
        column_blocks(2 * ACC) == 2 && 8 * j >= self.split
    }
}

/// One tile of C's main loop for consumer thread `tid`: the pipeline's
/// tiles `it0..it0 + k_tiles` of K, each one K block of 128. For each:
/// wait for its stage, issue its four `m64n(2 ACC)k32` into the partial
/// sum (the first from zero), read the block's scales from the stage's
/// slot of the ring (`BLOCKS`: under the `wgmma`s), retire them, release
/// the stage, and add the partial sum into the promoted accumulators,
/// times the scales. Returns the promoted accumulators (`acc[4j + 2h +
/// e]` in `wgmma`'s D layout, step 19's epilogue's).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn mainloop<P: WgmmaFp8<ACC>, const BLOCKS: bool, const ST: usize, const ACC: usize, const SW: usize>(
    stages: Stages<BM, ST, SW, BK>,
    it0: usize,
    k_tiles: usize,
    tid: usize,
    scales: BlockScales<ACC>,
) -> [f32; ACC] {
    let (wg, lane) = (tid / 128, tid % 32);
    // SAFETY: all-zero bits are 0.0 (see step 12).
    let mut acc: [f32; ACC] = unsafe { core::mem::zeroed() };
    // SAFETY: as above; every k-step group's first wgmma overwrites it.
    let mut part: [f32; ACC] = unsafe { core::mem::zeroed() };
    for kt in 0..k_tiles {
        let it = it0 + kt;
        let s = it % ST;
        stages.wait_full(it);
        // A: this warpgroup's 64 rows; B^T: the tile's 2 ACC rows; 32
        // bytes (32 values of K) on per step, both K-major.
        let mut desc = [0u64; 8];
        unroll!(4; 4, |step| {
            desc[step] = descriptor_k_major_sw128(stages.a_tile(s) + 64 * wg * A_ROW_WORDS + 8 * step);
            desc[4 + step] = descriptor_k_major_sw128(stages.b_tile(s) + 8 * step);
        });
        // SAFETY: both warpgroups run every call; the partial sum and the
        // descriptors go through the fence; both tiles landed (wait_full)
        // and stay until this warp releases the stage, after the wait
        // that retires these.
        unsafe {
            P::fence(&mut part, &mut desc);
            P::mma_k32_ss::<0>(&mut part, desc[0], desc[4]);
            unroll!(3; 4, |step| {
                P::mma_k32_ss::<1>(&mut part, desc[1 + step], desc[5 + step]);
            });
            commit_group();
        }
        // SAFETY: after the stage's full phase, before this warp's release.
        let f = if BLOCKS { unsafe { scales.at(s, kt) } } else { [[1.0; 2]; 2] };
        // SAFETY: both warpgroups run every call (rule 1); both sums
        // through the wait.
        unsafe { P::wait::<0>(&mut part, &mut acc) };
        if BLOCKS {
            // Every lane's scale reads before lane 0's release.
            sync_warp();
        }
        if lane == 0 {
            // SAFETY: once per tile, in order, after the wait that retired
            // its wgmmas and this warp's reads of its scales (the arrive
            // releases them).
            unsafe { stages.release(it) };
        }
        unroll!(ACC / 4; 32, |j| {
            let fj = if scales.second(j) { f[1] } else { f[0] };
            unroll!(2; 2, |h| {
                unroll!(2; 2, |e| {
                    let i = 4 * j + 2 * h + e;
                    acc[i] = if BLOCKS { fma(part[i], fj[h], acc[i]) } else { part[i] + acc[i] };
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

    /// The boxes are one K block of A's 128 rows and of B^T's tile
    /// width (128, one B block, or 192, the wide instances, whose tiles
    /// meet two); C's boxes are step 22's; the elements say how the sums
    /// are promoted and scaled.
    #[test]
    fn the_tile_is_one_block_of_a_and_of_b() {
        for spec in SPECS {
            let Operands::TensorMaps(boxes) = spec.operands else { panic!("{}", spec.name) };
            let bn = if spec.name.contains("x192x") { BN_WIDE } else { BN };
            assert_eq!((boxes.a, boxes.b), ((128, BK as u32), (bn as u32, BK as u32)), "{}", spec.name);
            let (rows, cols) = boxes.c.expect(spec.name);
            assert_eq!((rows, cols as usize * spec.elems.c.bytes()), (16, 128), "{}", spec.name);
            assert_eq!(spec.launch.block_tile, (128, bn));
            assert_eq!((spec.ops, spec.module.name), (Ops::NT, "wgmma_fp8"));
            assert_eq!(spec.elems.promote_every, 128);
            let blocks = spec.name.contains("_blocks_");
            assert_eq!(spec.elems.scaling == Scaling::Blocks, blocks, "{}", spec.name);
            assert_eq!(spec.elems.storage().scaling, spec.elems.scaling);
            assert!(spec.launch.shared_bytes <= 227 * 1024);
        }
        // A wide tile at a multiple of 192 starts at column 0 or 64 of a
        // B block and ends inside the next one.
        for col0 in (0..8192).step_by(BN_WIDE) {
            assert_eq!((col0 + BN_WIDE - 1) / SCALE_BLOCK, col0 / SCALE_BLOCK + 1, "{col0}");
        }
        assert_eq!((column_blocks(BN), column_blocks(BN_WIDE)), (1, 2));
        assert_eq!((scale_words(BN) * 4, scale_words(BN_WIDE) * 4), (528, 544));
    }
}
