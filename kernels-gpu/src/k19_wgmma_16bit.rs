//! Step 19: 16-bit inputs. The tensor cores multiply BF16 and FP16 at
//! twice TF32's rate (4096 against 2048 FLOP per clock per SM on an
//! H100/H200), and A and B move half the bytes. This step is step 17's
//! block (a TMA producer warpgroup, two consumer warpgroups, `mbarrier`
//! stages, both `wgmma` operands in shared memory, one group in flight)
//! with A and B stored in 16 bits, generic over the type ([`Wgmma16`]:
//! one instance for BF16, one for FP16); C is f32, accumulated in f32.
//!
//! What changes from step 17:
//! - **No copy of B.** 16-bit `wgmma` reads an operand from shared memory
//!   K-major or, with its `imm-trans` bit, MN-major. B (K x N, row-major)
//!   is N-major: its TMA boxes of 64 columns (128 bytes) by BK rows, with
//!   the 128-byte swizzle, are read as they land
//!   ([`descriptor_mn_major_sw128`]: the next box 8 KB on along N, the
//!   next 8 rows 1 KB on along K). Step 17 paid for a transposing copy of
//!   B in every launch; here both operands are read as the caller stores
//!   them.
//! - **The tile is C's, not C's transpose.** The `wgmma` M (64 rows) is a
//!   warpgroup's share of the block's 128 rows of C and N is the block's
//!   256 columns, so D is C itself: each thread stores pairs of adjacent
//!   columns (64-bit stores) in the epilogue. Where C's rows do not allow
//!   pairs (`ldc` odd) and in edge tiles, each warp stages its rows
//!   through shared memory and stores them whole ([`store_tile`]).
//! - **BK = 64**: a 128-byte row of 16-bit A holds 64 values, and each
//!   stage holds four `m64n256k16` steps per warpgroup.
//!
//! Tile: BM = 128 rows of C (two consumer warpgroups of 64), BN = 256
//! columns, BK = 64, four stages of 48 KB (A's 16 KB, B's four boxes of
//! 8 KB), and 20 KB for the epilogue's staging tiles. Registers: 128 f32 accumulators per consumer thread, as in
//! steps 13-18 (`setmaxnreg`: 40 for the producer, 232 for them).
//!
//! Prediction (H200, n = 4096): the tensor pipe as busy as step 17's
//! (profiled in docs/measurements.md) at twice the rate, with no copy
//! kernel: about 0.85x cuBLAS BF16. What stands
//! between that and cuBLAS is what steps 13-18 did not try: a persistent
//! grid with a tile order that keeps B's panels in L2, clusters with TMA
//! multicast, and an epilogue that overlaps the next tile's main loop.
//! The measurement lives in docs/bench.json and the README's bench table
//! (`cargo xtask bench`). GPU only, like steps 12-18: the emulator has no
//! model of TMA, `mbarrier` or `wgmma`.

#[cfg(target_arch = "nvptx64")]
use crate::device::mbarrier::MBarrier;
#[cfg(target_arch = "nvptx64")]
use crate::device::tma::TensorMaps;
#[cfg(target_arch = "nvptx64")]
use crate::device::wgmma::{
    Wgmma16, WgmmaAb, commit_group, descriptor_k_major_sw128, descriptor_mn_major_sw128,
    fence_ss_128, wait_ss_128,
};
use crate::elem::{Bf16, Elem, Element, Elems, F16, Math};
#[cfg(target_arch = "nvptx64")]
use crate::gemm::{Gemm, Output};
use crate::k12_wgmma::{ALIGN, GPU_ONLY};
#[cfg(target_arch = "nvptx64")]
use crate::k13_wgmma_ws::{Stages, warp_specialized};
use crate::k13_wgmma_ws::THREADS;
use crate::launch::{Body, KernelSpec, Launch, Op, Operands, Ops, TmaBoxes, TmaCopy};
use crate::modules;
#[cfg(target_arch = "nvptx64")]
use crate::device::barrier::sync_warp;
#[cfg(target_arch = "nvptx64")]
use crate::unroll::{inline_always, unroll};

/// Rows of C per block: two consumer warpgroups of 64 (the `wgmma` M).
pub const BM: usize = 128;
/// Columns of C per block (the `wgmma` N).
pub const BN: usize = 256;
/// K per stage: one 128-byte row of 16-bit A.
pub const BK: usize = 64;
/// Columns of each of B's boxes (and of A^T's, for A transposed): 128
/// bytes, one swizzled row.
pub const BOX_COLS: usize = 64;
/// The epilogue's staging tile of each consumer warp ([`store_tile`]): 16
/// rows of C by [`STAGING_COLS`], in rows of [`STAGING_PITCH`] words.
#[cfg(target_arch = "nvptx64")]
type Staging = crate::device::SharedTile<16, STAGING_PITCH>;
/// Columns of C a warp stages at a time.
const STAGING_COLS: usize = 32;
/// Words per staged row: 8 more than its columns, so that the 64-bit
/// writes of a half-warp (rows `g`, columns `2t`) hit 32 distinct banks.
const STAGING_PITCH: usize = STAGING_COLS + 8;
/// Words of the staging tiles of the eight consumer warps.
const STAGING_WORDS: usize = 8 * 16 * STAGING_PITCH;
/// `wgmma` steps per stage: a 128-byte row of K is four steps of 32
/// bytes (`m64n256k16` for 16-bit types; `m64n256k32` for FP8, step 25).
#[cfg(target_arch = "nvptx64")]
const K_STEPS: usize = ROW_BYTES / 32;
/// Bytes of one row of a stage's tiles, of K (A, B^T) or of MN (B, A^T).
const ROW_BYTES: usize = 128;

/// One parameter set: the stages and the tile's columns `bn` ([`BN`] for
/// steps 19-25; step 26's FP8 tile is 128 wide); BM and the 128-byte rows
/// of K are fixed above.
#[derive(Clone, Copy)]
pub(crate) struct Params {
    pub(crate) stages: usize,
    pub(crate) bn: usize,
}

impl Params {
    /// `stages` stages of the BM x [`BN`] tile (steps 19-25).
    pub(crate) const fn new(stages: usize) -> Self {
        Self { stages, bn: BN }
    }
    /// Words of one stage: A's tile `[BM][BK]`, then B's boxes
    /// `[bn / 64][BK][64]`, 16-bit elements two to a word (FP8, steps 25
    /// and 26: A's `[BM][128]` and B^T's `[bn][128]`, as many bytes).
    pub(crate) const fn stage_words(self) -> usize {
        (BM + self.bn) * ROW_BYTES / 4
    }
    /// The stages, two barriers per stage (8 bytes each), room to align
    /// the stages to 1024 bytes, and the epilogue's staging tiles; with
    /// `tma_c` (step 22), the barriers padded to 1024 bytes and step 22's
    /// larger staging boxes (`k22_wgmma_tma_store::STAGING_WORDS`), which
    /// [`store_tile`]'s tiles share when C is not stored by TMA.
    const fn shared_bytes(self, tma_c: bool) -> usize {
        let stages = ALIGN + self.stages * self.stage_words() * 4;
        if tma_c {
            assert!(16 * self.stages <= ALIGN && STAGING_WORDS <= crate::k22_wgmma_tma_store::STAGING_WORDS);
            stages + ALIGN + crate::k22_wgmma_tma_store::STAGING_WORDS * 4
        } else {
            stages + 16 * self.stages + STAGING_WORDS * 4
        }
    }
    const fn spec(self, name: &'static str, ab: Elem, math: Math) -> KernelSpec {
        self.spec_of(
            name,
            (ab, ab, Elem::F32),
            math,
            19,
            "16-bit A and B: wgmma m64n256k16 from shared memory, B read N-major as stored, no copy",
            (false, Ops::NN, false),
        )
    }
    /// The spec of an instance of steps 19, 20, 22 and 25, which differ
    /// in what they say, in their grid (step 20's, 22's and 25's are
    /// persistent) and in how C is stored (`tma_c`: step 22's TMA
    /// stores): A of type `a` and B of type `b` in layout `ops`, C of type
    /// `c`. A 128-byte row of K is `BK` values: 64 of a 16-bit type, 128
    /// of FP8 (step 25, whose `wgmma` reads only K-major tiles: `ops` NT,
    /// and the FP8 module).
    pub(crate) const fn spec_of(
        self,
        name: &'static str,
        (a, b, c): (Elem, Elem, Elem),
        math: Math,
        step: u32,
        summary: &'static str,
        (persistent, ops, tma_c): (bool, Ops, bool),
    ) -> KernelSpec {
        let fp8 = a.bytes() == 1;
        assert!(a.bytes() == b.bytes() && (a.bytes() == 2 || fp8 && matches!(ops, Ops::NT)));
        let bk = ROW_BYTES / a.bytes();
        assert!(BK * 2 == ROW_BYTES && BOX_COLS * 2 == ROW_BYTES && self.bn.is_multiple_of(BOX_COLS));
        // Only the FP8 kernels (B^T, one box) have tiles other than BN wide.
        assert!(self.bn == BN || fp8);
        assert!(self.stages >= 2 && self.shared_bytes(tma_c) <= 227 * 1024);
        KernelSpec {
            name,
            step,
            module: match (ops.a, ops.b) {
                _ if fp8 => &modules::WGMMA_FP8,
                (Op::N, Op::N) => &modules::WGMMA,
                (Op::T, Op::N) => &modules::WGMMA_TN,
                (Op::N, Op::T) => &modules::WGMMA_NT,
                (Op::T, Op::T) => &modules::WGMMA_TT,
            },
            elems: Elems::new(a, b, c, math),
            summary,
            launch: Launch {
                block_threads: (THREADS as u32, 1),
                block_tile: (BM, self.bn),
                shared_bytes: self.shared_bytes(tma_c),
                register_cap: true,
                persistent,
            },
            model_reuse: (BM, self.bn),
            body: Body::GpuOnly(GPU_ONLY),
            // A's box: BM rows of 64 K values (A as it is; 128 of FP8),
            // or, of A^T (K x M), BK rows of 64 values of M (two per
            // stage); B's: BK rows of 64 values of N (four per stage), or,
            // of B^T (N x K), BN rows of 64 K values (128 of FP8). Every
            // row 128 bytes, swizzled.
            operands: Operands::TensorMaps(TmaBoxes {
                a: match ops.a {
                    Op::N => (BM as u32, bk as u32),
                    Op::T => (BK as u32, BOX_COLS as u32),
                },
                b: match ops.b {
                    Op::N => (BK as u32, BOX_COLS as u32),
                    Op::T => (self.bn as u32, bk as u32),
                },
                a_swizzle_128: true,
                b_swizzle_128: true,
                copy: TmaCopy::AsStored,
                // Step 22: each consumer warp's 16 rows, 128 bytes of them.
                c: if tma_c { Some((16, (128 / c.bytes()) as u32)) } else { None },
                slices: false,
            }),
            ops,
            batches: false,
        }
    }
}

/// One instance: `$spec` for the host; for the GPU the body `$name` on
/// A and B of type `$t` and its PTX entry.
macro_rules! instance {
    ($name:ident, $spec:ident, $t:ident, $math:expr, $stages:literal) => {
        pub const $spec: KernelSpec =
            Params::new($stages).spec(stringify!($name), <$t as Element>::ELEM, $math);
        /// The body of the PTX entry of the same name (inlined into it).
        #[cfg(target_arch = "nvptx64")]
        #[inline(always)]
        pub fn $name(g: Gemm<$t, $t, f32>, maps: TensorMaps) {
            block::<$t, f32, $stages, { Params::new($stages).stage_words() }>(g, maps)
        }
        // The entry goes into the `wgmma` module's PTX only.
        #[cfg(any(not(target_arch = "nvptx64"), gemm_module = "wgmma"))]
        mod $name {
            #[cfg(target_arch = "nvptx64")]
            use super::$name;
            crate::gemm_kernel!($name, tensor_maps, elems($t, $t, f32));
        }
    };
}

#[rustfmt::skip]
mod instances {
    use super::*;
    instance!(wgmma_bf16_128x256x64_s4, SPEC_BF16_128X256X64_S4, Bf16, Math::Bf16, 4);
    instance!(wgmma_f16_128x256x64_s4, SPEC_F16_128X256X64_S4, F16, Math::F16, 4);
}
pub use instances::*;

/// Every instance.
pub const SPECS: &[KernelSpec] = &[SPEC_BF16_128X256X64_S4, SPEC_F16_128X256X64_S4];

/// Step 13's block ([`warp_specialized`]) with this step's tile; B's part
/// of a stage is its four boxes of `BK x 64`, as TMA lands them
/// ([`load_b`]).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn block<T: Wgmma16, C: Output, const STAGES: usize, const STAGE_WORDS: usize>(
    g: Gemm<T, T, C>,
    maps: TensorMaps,
) {
    // SAFETY: load_b brings B's part of the stage, as its contract says.
    unsafe {
        warp_specialized::<BM, BN, BK, STAGES, STAGE_WORDS>(
            0,
            g.k,
            None,
            maps,
            inline_always!(|word, k0, full, col0| load_b::<1>(maps, word, k0, full, col0)),
            inline_always!(|stages, row0, col0, tid, k_tiles| {
                let acc = mainloop::<T, STAGES, STAGE_WORDS, BK, 0, 1>(stages, 0, k_tiles, tid);
                // SAFETY: the staging tiles follow the stages (SPEC's
                // shared_bytes counts them); only the epilogue uses them.
                unsafe { store_tile(g, &acc, row0, col0, tid, stages.end()) };
            }),
        );
    }
}

/// Words of one of B's (or A^T's) boxes of `BK x 64` in a stage.
#[cfg(target_arch = "nvptx64")]
const BOX_WORDS: usize = BK * ROW_BYTES / 4;
/// Words of one 128-byte row of a swizzled tile.
#[cfg(target_arch = "nvptx64")]
const ROW_WORDS: usize = 32;

/// The producer's copies of B's part of a stage at `word`, completing on
/// `full`: with `B_MN = 1` (B as it is, N-major), BN / 64 boxes of `BK x
/// 64` (rows from `k0`, columns from `col0`); with `B_MN = 0` (B^T, N x
/// K, K-major), one box of `BN x BK` of B^T (rows from `col0`, columns
/// from `k0`).
///
/// # Safety
/// B's map has the SPEC's box for `B_MN` (128-byte swizzle); `word` is
/// B's part of a stage of `Stages` (1024-aligned, 32 KB).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub(crate) unsafe fn load_b<const B_MN: u32>(maps: TensorMaps, word: usize, k0: u32, full: MBarrier, col0: usize) {
    if B_MN == 1 {
        unroll!(BN / BOX_COLS; 4, |j| {
            // SAFETY: box j lies at word + j * BOX_WORDS, 1024-aligned,
            // inside the stage (this function's contract).
            unsafe { maps.b().load_2d(word + j * BOX_WORDS, (col0 + j * BOX_COLS) as u32, k0, full) };
        });
    } else {
        // SAFETY: the one box fills B's part of the stage (contract).
        unsafe { maps.b().load_2d(word, k0, col0 as u32, full) };
    }
}

/// The producer's copies of A's part of a stage at `word`, completing on
/// `full`: with `A_MN = 0` (A as it is, K-major), one box of `BM x BK`
/// (rows from `row0`, columns from `k0`); with `A_MN = 1` (A^T, K x M,
/// M-major), BM / 64 boxes of `BK x 64` of A^T (rows from `k0`, columns
/// from `row0`), one per consumer warpgroup.
///
/// # Safety
/// A's map has the SPEC's box for `A_MN` (128-byte swizzle); `word` is
/// A's part of a stage of `Stages` (1024-aligned, 16 KB).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub(crate) unsafe fn load_a<const A_MN: u32>(maps: TensorMaps, word: usize, k0: u32, full: MBarrier, row0: usize) {
    if A_MN == 0 {
        // SAFETY: the one box fills A's part of the stage (contract).
        unsafe { maps.a().load_2d(word, k0, row0 as u32, full) };
    } else {
        unroll!(BM / BOX_COLS; 2, |j| {
            // SAFETY: box j lies at word + j * BOX_WORDS, 1024-aligned,
            // inside the stage (this function's contract).
            unsafe { maps.a().load_2d(word + j * BOX_WORDS, (row0 + j * BOX_COLS) as u32, k0, full) };
        });
    }
}

/// One tile of C's main loop for consumer thread `tid`: the pipeline's
/// tiles `it0..it0 + k_tiles` of K, each `BK` values (128 bytes) of A's
/// rows. For each, wait for its stage, issue its four `m64n256k16` of
/// `P`'s 16-bit type (`m64n256k32` of FP8: step 25) (A K-major for `A_MN = 0`, as it is, or M-major
/// for `A_MN = 1`, A^T's boxes; B N-major for `B_MN = 1`, as it is, or
/// K-major for `B_MN = 0`, B^T's box), then retire the previous
/// tile's group and release its stage, so that one group stays in flight
/// across tiles (step 17's loop); the last stage is released once its
/// group is retired, so the producer can fill it with the next tile of C
/// (step 20). Returns the accumulators.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub(crate) fn mainloop<
    P: WgmmaAb,
    const STAGES: usize,
    const STAGE_WORDS: usize,
    const BK: usize,
    const A_MN: u32,
    const B_MN: u32,
>(
    stages: Stages<BM, STAGES, STAGE_WORDS, BK>,
    it0: usize,
    k_tiles: usize,
    tid: usize,
) -> [f32; 128] {
    let (wg, lane) = (tid / 128, tid % 32);
    // SAFETY: all-zero bits are 0.0 (see step 12).
    let mut acc: [f32; 128] = unsafe { core::mem::zeroed() };
    for kt in 0..k_tiles {
        let it = it0 + kt;
        let s = it % STAGES;
        stages.wait_full(it);
        // K-major (A, B^T): this warpgroup's 64 rows (all BN of B^T's),
        // 32 bytes (16 values; 32 of FP8) on per step. MN-major (B, A^T): 16 rows
        // (2 KB) on per step, B's boxes BOX_WORDS apart; A^T's box wg is
        // this warpgroup's 64 rows of C.
        let (mut a_desc, mut b_desc) = ([0u64; K_STEPS], [0u64; K_STEPS]);
        unroll!(K_STEPS; 4, |step| {
            a_desc[step] = if A_MN == 0 {
                descriptor_k_major_sw128(stages.a_tile(s) + 64 * wg * ROW_WORDS + 8 * step)
            } else {
                descriptor_mn_major_sw128(stages.a_tile(s) + wg * BOX_WORDS + 16 * step * ROW_WORDS, (BOX_WORDS * 4) as u32)
            };
            b_desc[step] = if B_MN == 1 {
                descriptor_mn_major_sw128(stages.b_tile(s) + 16 * step * ROW_WORDS, (BOX_WORDS * 4) as u32)
            } else {
                descriptor_k_major_sw128(stages.b_tile(s) + 8 * step)
            };
        });
        // SAFETY: both warpgroups run every call; D and the descriptors
        // go through the fence, D through the wait; both tiles landed
        // (wait_full) and stay until this warp releases the stage, after
        // the wait that retires these.
        unsafe {
            fence_ss_128(&mut acc, &mut a_desc, &mut b_desc);
            unroll!(K_STEPS; 4, |step| {
                P::mma_m64n256_ss::<A_MN, B_MN>(&mut acc, a_desc[step], b_desc[step]);
            });
            commit_group();
            // Tile it - 1's group is retired; tile it's stays in flight.
            wait_ss_128::<1>(&mut acc);
        }
        if kt >= 1 && lane == 0 {
            // SAFETY: once per tile, in order, after the wait that retired
            // tile it - 1's wgmmas.
            unsafe { stages.release(it - 1) };
        }
    }
    // SAFETY: both warpgroups get here.
    unsafe { wait_ss_128::<0>(&mut acc) };
    if k_tiles >= 1 && lane == 0 {
        // SAFETY: the last tile's group is retired (above), in order.
        unsafe { stages.release(it0 + k_tiles - 1) };
    }
    acc
}

/// The epilogue: thread `tid` of the two consumer warpgroups stores its
/// `ACC` accumulators of the BM x (2 `ACC`) tile of C at `(row0, col0)`
/// (BM x BN: 128 per thread; step 26's 128 x 128: 64), in C's type.
/// `acc[4j + 2h + e]` is D[16 w + g + 8 h][8 j + 2 t + e] of its
/// warpgroup's 64-row tile (device::wgmma's table), that is C[row0 + 64
/// wg + 16 w + g + 8 h][col0 + 8 j + 2 t + e].
///
/// - An interior tile whose rows allow pairs ([`Output::pairs`]: `ldc`
///   even) stores each pair of adjacent columns as one access (64 bits for
///   f32, 32 for a 16-bit C); for a warp, each f32 store writes 8 rows of
///   32 bytes: whole sectors.
/// - Otherwise (`ldc` odd, or an edge tile) pairs are unaligned, and one
///   value at a time in that layout would write 4-byte pieces of 8 rows
///   per instruction. Each warp instead stages its 16 rows 32 columns at a
///   time in its own tile of shared memory at `staging` (64-bit writes,
///   conflict-free: [`STAGING_PITCH`]) and stores them row by row: lane
///   `l` column `l`, 128 contiguous bytes of f32 per instruction, each
///   value guarded.
///
/// # Safety
/// `staging` is the first of [`STAGING_WORDS`] words of shared memory
/// (even) that only this function touches.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub(crate) unsafe fn store_tile<A: Element, B: Element, C: Output, const ACC: usize>(
    g: Gemm<A, B, C>,
    acc: &[f32; ACC],
    row0: usize,
    col0: usize,
    tid: usize,
    staging: usize,
) {
    // SAFETY: forwarded (the contract).
    unsafe { store_tile_plain(g, acc, row0, col0, tid, staging) };
    let (wg, warp, lane) = (tid / 128, tid % 128 / 32, tid % 32);
    // SAFETY: all 32 lanes get here; the warp's 16 rows of the tile are
    // its own (each lane stored its share above).
    unsafe { g.fuse_warp((row0 + 64 * wg + 16 * warp, col0), (16, 2 * ACC), lane) };
}

/// [`store_tile`]'s stores: `alpha * acc + beta * C` in C's type.
///
/// # Safety
/// As [`store_tile`].
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn store_tile_plain<A: Element, B: Element, C: Output, const ACC: usize>(
    g: Gemm<A, B, C>,
    acc: &[f32; ACC],
    row0: usize,
    col0: usize,
    tid: usize,
    staging: usize,
) {
    let (wg, warp, lane) = (tid / 128, tid % 128 / 32, tid % 32);
    let (row, col) = (row0 + 64 * wg + 16 * warp + lane / 4, col0 + 2 * (lane % 4));
    let interior = row0 + BM <= g.m && col0 + 2 * ACC <= g.n;
    if interior && C::pairs(g) {
        let index = row * g.ldc + col;
        unroll!(2; 2, |h| {
            unroll!(ACC / 4; 32, |j| {
                // SAFETY: index + 8 h ldc + 8 j is that of C[row + 8 h][col
                // + 8 j], inside C with the next column (an interior tile),
                // even (col and ldc are), owned by this thread alone.
                unsafe { C::store2(g, index + 8 * h * g.ldc + 8 * j, [acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]]) };
            });
        });
        return;
    }
    // This warp's 16 rows, and how many of them and of the tile's columns
    // lie inside C.
    let first_row = row0 + 64 * wg + 16 * warp;
    let (rows_left, cols_left) = (g.m.saturating_sub(first_row), g.n.saturating_sub(col0));
    let tile = Staging::at(staging + (tid / 32) * Staging::WORDS);
    let (group, pair) = (lane / 4, 2 * (lane % 4));
    unroll!(2 * ACC / STAGING_COLS; 8, |c| {
        // SAFETY: the tile is this warp's alone (the contract), in bounds
        // (rows g + 8 h < 16, columns below 32), 8-byte aligned (staging,
        // the tile's words and the column are even); the warp meets
        // before reading it back and before the next chunk's writes.
        unsafe {
            unroll!(STAGING_COLS / 8; 4, |jj| {
                let j = c * (STAGING_COLS / 8) + jj;
                unroll!(2; 2, |h| {
                    tile.store2(group + 8 * h, 8 * jj + pair, [acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]]);
                });
            });
        }
        sync_warp();
        let c_col = c * STAGING_COLS + lane;
        unroll!(16; 16, |r| {
            if r < rows_left && c_col < cols_left {
                // SAFETY: the tile's row r, column lane (written above);
                // C[first_row + r][col0 + c_col] lies inside C (checked)
                // and is this thread's alone.
                unsafe {
                    let value = tile.load(r, lane);
                    C::store(g, (first_row + r) * g.ldc + col0 + c_col, value);
                }
            }
        });
        sync_warp();
    });
}
