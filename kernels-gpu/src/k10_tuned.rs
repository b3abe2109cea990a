//! Step 10: tuning. Step 09's design (warp tiles, lanes 4 x 8, pieces of
//! TM x TN = 4x4, two shared stages, fragments double-buffered in
//! registers, the kk loop fully unrolled) as one const-generic body,
//! instantiated at several parameter sets, each exported as its own PTX
//! entry `tuned_{BM}x{BN}x{BK}_w{WM}x{WN}` so a search on the GPU can pick
//! the best per shape. Besides the parameters, three details differ from
//! step 09:
//! - A's transposed tile has rows of BM + 4 floats: the transposed stores
//!   of A are conflict-free at BK = 8 and 2-way at BK = 16 (instead of
//!   2-way and 4-way); the 128-bit fragment reads stay one wavefront.
//! - Shared memory may exceed 48 KB (the host raises the limit from
//!   `shared_bytes`).
//! - The next tile's global loads are issued one tile earlier, just
//!   before the barrier, and stored to shared memory a whole tile later.
//!   Issued at the top of the tile (step 09), ptxas at 255 registers sinks
//!   the four loads of the w64x64 shapes to just ahead of their shared
//!   stores, right before the barrier, so every tile waits out their whole
//!   latency; it does not move them across a barrier. Same registers (the
//!   loaded tile is live for one tile either way), same two stages: tile
//!   t + 1 is stored into the stage tile t - 1 used, after the barrier
//!   that ended tile t - 1. Placing them before the barrier measured
//!   faster (docs/measurements.md, "step 09/10 tuning").
//!
//! Parameters: BM x BN block tile, BK step along K, WM x WN warp tile
//! (WM = 16 * WM_ITERS, WN = 32 * WN_ITERS); threads = 32 * (BM/WM) *
//! (BN/WN); outputs per thread = 16 * WM_ITERS * WN_ITERS; shared memory
//! = 2 stages * ((BM + 4) + BN) * BK * 4 bytes.
//!
//! Why, per instance (prediction before measuring, H200, n = 4096):
//! - `128x128x8_w64x64`, `256x64x8_w64x64`, `128x64x8_w64x64`: 128
//!   outputs per thread (the highest reuse per shared load) in small
//!   blocks of 4 (or 2) warps, ~255 registers, so 2 (or 4) blocks per SM:
//!   8 warps like the 256-thread w64x64 shapes, but a block waiting at
//!   its barrier leaves the SM's other block issuing. 44-48 TFLOP/s.
//! - `128x256x8_w64x64`, `256x128x8_w64x64`: the same warps in one
//!   8-warp block per SM (the previous ladder's best, 42.8 TFLOP/s):
//!   every barrier idles the whole SM. 43-46 TFLOP/s.
//! - `128x128x16_w64x64`, `256x128x16_w64x64`: half the barriers and
//!   global-load rounds per FMA, twice the unrolled code (2048 FMAs per
//!   tile) and twice the staging registers. +0-4% over BK = 8, or a loss.
//! - `64x128x8_w32x64`, `128x128x8_w32x64`, `128x128x16_w32x64`: 64
//!   outputs per thread; 2-4 blocks per SM only if ptxas stays near 128
//!   registers, which it does not (it hoists fragment loads several rows
//!   ahead: 167-168). For small n and as a control.
//! - `64x64x16_w32x32`, `32x64x16_w16x32`, `32x32x16_w16x32`: 32 or 16
//!   outputs per thread, 2-4 warps per block. Slower than the rest at
//!   full occupancy (a shared load per 4-8 FMAs), but a 256 x 256 C is 64
//!   of the smallest tiles instead of 8 of `64x128`: for small C, where
//!   SMs idle, not FMAs, set the pace.
//!
//! Measured: the README's bench table and docs/bench.json (`cargo xtask
//! bench`, every instance at every size); past runs and the search's
//! experiments in docs/measurements.md. Registers, spills and stack per
//! instance: `cargo test -p tests --test ptx -- --nocapture`, which fails
//! on any spill or stack frame.
//!
//! `128x256x8_w64x64` was dropped: at 255 registers ptxas spilled 24
//! bytes, and the fast path must not spill.
//!
//! Which instance wins is fragile: the same source with the instance
//! bodies out of line (`#[inline(never)]`) put `256x128x16_w64x64` well
//! ahead of `128x128x8_w64x64`, because ptxas schedules the loads
//! differently (docs/measurements.md, "Numbers formerly quoted in the
//! kernel headers"); inlined, as here, has no stack frame. In SASS the
//! main loop of `128x128x8_w64x64` issues each row's LDS.128 among the
//! previous row's FFMAs, and the LDG.128s just before the BAR.
//!
//! Edges: as step 06. The vector loads need the block inside C, K % BK
//! == 0 and 16-byte aligned rows (`Gemm::vec4`); other blocks take the
//! guarded path (zeros staged outside A and B). A block inside C whose
//! rows start on 16 bytes (`Gemm::vec4_c`) stores 128 bits at a time,
//! guarded or not; others store one value at a time, inside C only. With
//! B stored transposed the vector loads ask only A's and B's rows on 16
//! bytes (`Gemm::rows16`), and C's alignment decides the stores alone:
//! B's rows then run along K, and a C of odd n (a vocabulary of 50257)
//! leaves A and B aligned, where it sent every block down the guarded
//! path, scalar loads included (a language model's vocabulary projection
//! ran far below cuBLAS: docs/random-suite). For the other layouts an odd `ldc` mostly
//! comes with an odd `ldb`, and the scalar stores in the unguarded body
//! slowed the guarded body of the 255-register tiles (measured:
//! docs/measurements.md, thirty-sixth session); their entries are as
//! before. Block-uniform; both paths reach the same barriers. With
//! `beta != 0` each row of pieces reads all its old values of C before
//! it stores any (`Gemm::old_c`): read and stored in pairs, each pair
//! waited out a trip to memory (docs/measurements.md, forty-third
//! session).
//!
//! Layouts (for the library's transposed calls): `TA` and `TB` read A or
//! B stored transposed. An operand whose stored rows run along K (A as it
//! is, B transposed) is loaded in float4s along K and stored transposed
//! into its `[BK][..]` tile; one whose rows run along M or N (B as it is,
//! A transposed) in float4s along its rows, stored as they are. The
//! compute loop is the same for all four layouts: both tiles are always
//! K-major in shared memory. B's tile, when B is stored transposed, has
//! rows of BN + 4 floats as A's has ([`B_PAD`]): its transposed stores are
//! then conflict-free at BK = 8 and 2-way at BK = 16, where unpadded (BN
//! a multiple of 32 banks) the four lanes that share a row of B^T wrote
//! one bank, 4-way at BK = 16. Prediction: `_nt` and `_tt` move up to
//! `_nn` and `_tn`, most on the small tiles, whose stores weigh most per
//! FMA (measured: docs/measurements.md, thirty-sixth session).
//! `tuned_128x128x16_w32x64_{tn,nt,tt}`, `tuned_64x128x8_w32x64_{tn,nt,tt}`
//! and the three small tiles' `_{tn,nt,tt}` are the instances (module
//! `tuned_t`); measured in the library's suites (README,
//! docs/random-suite/).

use crate::device::{SharedTile, block_idx_x, block_idx_y, fma, sync_threads, thread_idx_x};
use crate::gemm::Gemm;
use crate::unroll::unroll;
use crate::elem::Elems;
use crate::launch::{KernelSpec, Launch, Op, Operands, Ops, emulated};
use crate::modules::{self, PtxModule};

/// A warp's 32 lanes as a LANE_ROWS x LANE_COLS grid.
const LANE_ROWS: usize = 4;
const LANE_COLS: usize = 8;
/// Rows and columns of one piece of a lane's outputs.
const TM: usize = 4;
const TN: usize = 4;
/// One sweep of a warp's lanes covers SUB_M x SUB_N outputs.
const SUB_M: usize = LANE_ROWS * TM;
const SUB_N: usize = LANE_COLS * TN;
/// Capacity of the in-flight float4 arrays (A's and B's per thread).
const MAX_VECS: usize = 4;
/// Padding of each row of A's transposed tile, in floats: rows `r` and
/// `r + 4` of the tile start 16 banks apart.
const A_PAD: usize = 4;
/// The same padding of B's tile where B is stored transposed (its tile is
/// then stored transposed too, as A's); none otherwise, where B's float4s
/// are stored as they are.
const B_PAD: usize = 4;
/// Shared memory an SM can give one block (H100 / H200: 227 KB).
const MAX_SHARED_BYTES: usize = 227 * 1024;

const _: () = assert!(LANE_ROWS * LANE_COLS == 32 && TM.is_multiple_of(4) && TN.is_multiple_of(4));

/// One parameter set, and what follows from it.
#[derive(Clone, Copy)]
struct Params {
    bm: usize,
    bn: usize,
    bk: usize,
    wm_iters: usize,
    wn_iters: usize,
    /// B is stored transposed (`Ops`): its tile is stored transposed and
    /// padded ([`B_PAD`]).
    tb: bool,
}

impl Params {
    const fn new(bm: usize, bn: usize, bk: usize, wm_iters: usize, wn_iters: usize) -> Self {
        Self {
            bm,
            bn,
            bk,
            wm_iters,
            wn_iters,
            tb: false,
        }
    }
    /// The same parameters for B stored transposed when `tb`.
    const fn b_transposed(self, tb: bool) -> Self {
        Self { tb, ..self }
    }
    const fn wm(self) -> usize {
        self.wm_iters * SUB_M
    }
    const fn wn(self) -> usize {
        self.wn_iters * SUB_N
    }
    const fn threads(self) -> usize {
        (self.bm / self.wm()) * (self.bn / self.wn()) * 32
    }
    /// Floats per row of A's transposed tile (`As[BK][BM + A_PAD]`).
    const fn a_ld(self) -> usize {
        self.bm + A_PAD
    }
    /// Floats per row of B's tile (`Bs[BK][BN + B_PAD]` where B is stored
    /// transposed, `Bs[BK][BN]` otherwise).
    const fn b_ld(self) -> usize {
        if self.tb { self.bn + B_PAD } else { self.bn }
    }
    /// float4s of A's tile each thread stages per tile of K.
    const fn a_vecs(self) -> usize {
        self.bm * self.bk / 4 / self.threads()
    }
    /// float4s of B's tile each thread stages per tile of K.
    const fn b_vecs(self) -> usize {
        self.bk * self.bn / 4 / self.threads()
    }
    /// Words of one stage: A's tile then B's.
    const fn stage_words(self) -> usize {
        (self.a_ld() + self.b_ld()) * self.bk
    }
    const fn shared_bytes(self) -> usize {
        2 * self.stage_words() * 4
    }
    /// Panics (at compile time, where it is called in a `const`) unless the
    /// tiles divide evenly and the staging covers them exactly.
    const fn check(self, a_ld: usize, b_ld: usize) {
        assert!(a_ld == self.a_ld() && b_ld == self.b_ld());
        assert!(
            self.bk.is_multiple_of(4) && self.bm.is_multiple_of(4) && self.bn.is_multiple_of(4)
        );
        assert!(self.bk <= 16);
        assert!(self.bm.is_multiple_of(self.wm()) && self.bn.is_multiple_of(self.wn()));
        let t = self.threads();
        assert!(t.is_multiple_of(self.bk / 4) && t.is_multiple_of(self.bn / 4));
        // Transposed staging (A along M, B along K) covers the tiles too.
        assert!(t.is_multiple_of(self.bm / 4));
        assert!(self.a_vecs() * t * 4 == self.bm * self.bk);
        assert!(self.b_vecs() * t * 4 == self.bk * self.bn);
        assert!(self.a_vecs() >= 1 && self.a_vecs() <= MAX_VECS);
        assert!(self.b_vecs() >= 1 && self.b_vecs() <= MAX_VECS);
        assert!(self.wm_iters <= 4 && self.wn_iters <= 4);
        // 16-byte alignment of every float4 access: tiles start at
        // multiples of 4 words and rows are multiples of 4 words long.
        assert!(self.a_ld().is_multiple_of(4) && self.b_ld().is_multiple_of(4));
        assert!(self.stage_words().is_multiple_of(4));
        assert!(self.shared_bytes() <= MAX_SHARED_BYTES);
    }
    const fn spec(
        self,
        name: &'static str,
        module: &'static PtxModule,
        body: fn(Gemm),
        ops: Ops,
    ) -> KernelSpec {
        let p = self.b_transposed(matches!(ops.b, Op::T));
        p.check(p.a_ld(), p.b_ld());
        KernelSpec {
            name,
            step: 10,
            module,
            elems: Elems::FP32,
            summary: "step 09's design, const-generic: one entry per parameter set",
            launch: Launch {
                block_threads: (p.threads() as u32, 1),
                block_tile: (p.bm, p.bn),
                shared_bytes: p.shared_bytes(),
                register_cap: false,
                persistent: false,
            },
            model_reuse: (p.bm, p.bn),
            body: emulated!(body),
            operands: Operands::Pointers,
            ops,
            batches: true,
        }
    }
}

/// Picks the vector body for interior blocks of aligned shapes. `TA`,
/// `TB`: A and B are stored transposed (`Ops`).
#[inline(always)]
fn tuned<
    const BM: usize,
    const BN: usize,
    const BK: usize,
    const WM_ITERS: usize,
    const WN_ITERS: usize,
    const A_LD: usize,
    const B_LD: usize,
    const TA: bool,
    const TB: bool,
>(
    g: Gemm,
) {
    let row0 = block_idx_y() * BM;
    let col0 = block_idx_x() * BN;
    // Block-uniform: depends on the block index and the shape only. With
    // B stored transposed, C's alignment decides how the block stores
    // (`body`), not how it loads (see the header: "Edges").
    let aligned = if TB { g.rows16() } else { g.vec4() };
    if row0 + BM <= g.m && col0 + BN <= g.n && g.k.is_multiple_of(BK) && aligned {
        body::<BM, BN, BK, WM_ITERS, WN_ITERS, A_LD, B_LD, TA, TB, false>(g, row0, col0);
    } else {
        body::<BM, BN, BK, WM_ITERS, WN_ITERS, A_LD, B_LD, TA, TB, true>(g, row0, col0);
    }
    let threads = Params::new(BM, BN, BK, WM_ITERS, WN_ITERS).threads();
    // SAFETY: every thread gets here, after storing its part of the
    // block's tile (the fused epilogue's pass, nothing when plain).
    unsafe { g.fuse_block((row0, col0), (BM, BN), threads) };
}

/// One instance: `SPEC` for the host, the body `name` for the emulator,
/// and the PTX entry `name`.
macro_rules! instance {
    ($module:ident = $cfg:literal, $name:ident, $spec:ident, $bm:literal, $bn:literal, $bk:literal, $wmi:literal, $wni:literal) => {
        instance!($module = $cfg, $name, $spec, $bm, $bn, $bk, $wmi, $wni, NN);
    };
    ($module:ident = $cfg:literal, $name:ident, $spec:ident, $bm:literal, $bn:literal, $bk:literal, $wmi:literal, $wni:literal, $ops:ident) => {
        pub const $spec: KernelSpec = Params::new($bm, $bn, $bk, $wmi, $wni)
            .spec(stringify!($name), &modules::$module, $name, Ops::$ops);
        /// The body of the PTX entry of the same name (inlined into it: an
        /// out-of-line call costs a stack frame for its ABI).
        #[inline(always)]
        pub fn $name(g: Gemm) {
            const TA: bool = matches!(Ops::$ops.a, Op::T);
            const TB: bool = matches!(Ops::$ops.b, Op::T);
            const B_LD: usize = if TB { $bn + B_PAD } else { $bn };
            tuned::<$bm, $bn, $bk, $wmi, $wni, { $bm + A_PAD }, B_LD, TA, TB>(g)
        }
        // The entry goes into its own module's PTX only.
        #[cfg(any(not(target_arch = "nvptx64"), gemm_module = $cfg))]
        mod $name {
            #[cfg(target_arch = "nvptx64")]
            use super::$name;
            crate::gemm_kernel!($name);
        }
    };
}

#[rustfmt::skip]
mod instances {
    use super::*;
    instance!(TUNED_A = "tuned_a", tuned_128x128x8_w64x64, SPEC_128X128X8_W64X64, 128, 128, 8, 4, 2);
    instance!(TUNED_B = "tuned_b", tuned_256x64x8_w64x64, SPEC_256X64X8_W64X64, 256, 64, 8, 4, 2);
    instance!(TUNED_A = "tuned_a", tuned_128x64x8_w64x64, SPEC_128X64X8_W64X64, 128, 64, 8, 4, 2);
    instance!(TUNED_B = "tuned_b", tuned_128x128x16_w64x64, SPEC_128X128X16_W64X64, 128, 128, 16, 4, 2);
    instance!(TUNED_A = "tuned_a", tuned_256x128x8_w64x64, SPEC_256X128X8_W64X64, 256, 128, 8, 4, 2);
    instance!(TUNED_B = "tuned_b", tuned_256x128x16_w64x64, SPEC_256X128X16_W64X64, 256, 128, 16, 4, 2);
    instance!(TUNED_A = "tuned_a", tuned_64x128x8_w32x64, SPEC_64X128X8_W32X64, 64, 128, 8, 2, 2);
    instance!(TUNED_B = "tuned_b", tuned_128x128x8_w32x64, SPEC_128X128X8_W32X64, 128, 128, 8, 2, 2);
    instance!(TUNED_A = "tuned_a", tuned_128x128x16_w32x64, SPEC_128X128X16_W32X64, 128, 128, 16, 2, 2);
    // Small tiles, for small C: more blocks to fill the SMs with.
    instance!(TUNED_A = "tuned_a", tuned_64x64x16_w32x32, SPEC_64X64X16_W32X32, 64, 64, 16, 2, 1);
    instance!(TUNED_B = "tuned_b", tuned_32x64x16_w16x32, SPEC_32X64X16_W16X32, 32, 64, 16, 1, 1);
    instance!(TUNED_B = "tuned_b", tuned_32x32x16_w16x32, SPEC_32X32X16_W16X32, 32, 32, 16, 1, 1);
    // The best instance with A, B or both transposed, for the library.
    instance!(TUNED_T = "tuned_t", tuned_128x128x16_w32x64_tn, SPEC_128X128X16_W32X64_TN, 128, 128, 16, 2, 2, TN);
    instance!(TUNED_T = "tuned_t", tuned_128x128x16_w32x64_nt, SPEC_128X128X16_W32X64_NT, 128, 128, 16, 2, 2, NT);
    instance!(TUNED_T = "tuned_t", tuned_128x128x16_w32x64_tt, SPEC_128X128X16_W32X64_TT, 128, 128, 16, 2, 2, TT);
    // The small tiles in every transposed layout: a transposed call with
    // a small C fills the SMs as an untransposed one does.
    instance!(TUNED_T = "tuned_t", tuned_64x64x16_w32x32_tn, SPEC_64X64X16_W32X32_TN, 64, 64, 16, 2, 1, TN);
    instance!(TUNED_T = "tuned_t", tuned_64x64x16_w32x32_nt, SPEC_64X64X16_W32X32_NT, 64, 64, 16, 2, 1, NT);
    instance!(TUNED_T = "tuned_t", tuned_64x64x16_w32x32_tt, SPEC_64X64X16_W32X32_TT, 64, 64, 16, 2, 1, TT);
    instance!(TUNED_T = "tuned_t", tuned_32x64x16_w16x32_tn, SPEC_32X64X16_W16X32_TN, 32, 64, 16, 1, 1, TN);
    instance!(TUNED_T = "tuned_t", tuned_32x64x16_w16x32_nt, SPEC_32X64X16_W16X32_NT, 32, 64, 16, 1, 1, NT);
    instance!(TUNED_T = "tuned_t", tuned_32x64x16_w16x32_tt, SPEC_32X64X16_W16X32_TT, 32, 64, 16, 1, 1, TT);
    instance!(TUNED_T = "tuned_t", tuned_32x32x16_w16x32_tn, SPEC_32X32X16_W16X32_TN, 32, 32, 16, 1, 1, TN);
    instance!(TUNED_T = "tuned_t", tuned_32x32x16_w16x32_nt, SPEC_32X32X16_W16X32_NT, 32, 32, 16, 1, 1, NT);
    instance!(TUNED_T = "tuned_t", tuned_32x32x16_w16x32_tt, SPEC_32X32X16_W16X32_TT, 32, 32, 16, 1, 1, TT);
    // A 64-row tile of 64 outputs per thread in every transposed layout:
    // a C of a few hundred rows by many columns (a language model's
    // vocabulary projection, B transposed) wastes at most 63 rows per
    // column of tiles instead of the 128 x 128 tile's 127.
    instance!(TUNED_T = "tuned_t", tuned_64x128x8_w32x64_tn, SPEC_64X128X8_W32X64_TN, 64, 128, 8, 2, 2, TN);
    instance!(TUNED_T = "tuned_t", tuned_64x128x8_w32x64_nt, SPEC_64X128X8_W32X64_NT, 64, 128, 8, 2, 2, NT);
    instance!(TUNED_T = "tuned_t", tuned_64x128x8_w32x64_tt, SPEC_64X128X8_W32X64_TT, 64, 128, 8, 2, 2, TT);
}
pub use instances::*;

/// The instances that read A or B transposed (not in [`SPECS`] or the
/// ladder's list: they take other inputs; `registry::TRANSPOSED`).
pub const TRANSPOSED: &[KernelSpec] = &[
    SPEC_128X128X16_W32X64_TN,
    SPEC_128X128X16_W32X64_NT,
    SPEC_128X128X16_W32X64_TT,
    SPEC_64X64X16_W32X32_TN,
    SPEC_64X64X16_W32X32_NT,
    SPEC_64X64X16_W32X32_TT,
    SPEC_32X64X16_W16X32_TN,
    SPEC_32X64X16_W16X32_NT,
    SPEC_32X64X16_W16X32_TT,
    SPEC_32X32X16_W16X32_TN,
    SPEC_32X32X16_W16X32_NT,
    SPEC_32X32X16_W16X32_TT,
    SPEC_64X128X8_W32X64_TN,
    SPEC_64X128X8_W32X64_NT,
    SPEC_64X128X8_W32X64_TT,
];

/// Every instance that reads A and B as they are, for the search.
pub const SPECS: &[KernelSpec] = &[
    SPEC_128X128X8_W64X64,
    SPEC_256X64X8_W64X64,
    SPEC_128X64X8_W64X64,
    SPEC_128X128X16_W64X64,
    SPEC_256X128X8_W64X64,
    SPEC_256X128X16_W64X64,
    SPEC_64X128X8_W32X64,
    SPEC_128X128X8_W32X64,
    SPEC_128X128X16_W32X64,
    SPEC_64X64X16_W32X32,
    SPEC_32X64X16_W16X32,
    SPEC_32X32X16_W16X32,
];

/// The block at `(row0, col0)` of C. With `GUARD = false` the caller
/// guarantees the block lies inside C, `K % BK == 0` and `g.rows16()`
/// (`g.vec4()` unless `TB`).
#[inline(always)]
fn body<
    const BM: usize,
    const BN: usize,
    const BK: usize,
    const WM_ITERS: usize,
    const WN_ITERS: usize,
    const A_LD: usize,
    const B_LD: usize,
    const TA: bool,
    const TB: bool,
    const GUARD: bool,
>(
    g: Gemm,
    row0: usize,
    col0: usize,
) {
    // Compile-time checks of the parameter set (see `Params::check`).
    const { Params::new(BM, BN, BK, WM_ITERS, WN_ITERS).b_transposed(TB).check(A_LD, B_LD) };
    let p = Params::new(BM, BN, BK, WM_ITERS, WN_ITERS);
    let (wm, wn, threads) = (p.wm(), p.wn(), p.threads());
    let warps_n = BN / wn;
    // Stage `s` (0 or 1): A's transposed tile `As[BK][A_LD]`, then B's
    // `Bs[BK][B_LD]` (B_LD = BN, or BN + B_PAD where B is stored transposed).
    let stage_words = SharedTile::<BK, A_LD>::WORDS + SharedTile::<BK, B_LD>::WORDS;
    let stage = |s: usize| {
        let base = s * stage_words;
        (
            SharedTile::<BK, A_LD>::at(base),
            SharedTile::<BK, B_LD>::at(base + SharedTile::<BK, A_LD>::WORDS),
        )
    };
    let t = thread_idx_x();
    // Staging roles. An operand stored with K along its rows (A as it is,
    // B transposed) is read in float4s along K, which are stored
    // transposed into its `[BK][..]` tile; one stored with K down its
    // columns (B as it is, A transposed) is read in float4s along M or N,
    // stored as they are. Thread t's float4 number i of A's tile is at row
    // a_r + i * a_row_stride, column a_c of the tile as stored (K x BM for
    // A transposed, BM x K as it is); B's likewise.
    let roles = |k_along_rows: bool, extent: usize| {
        let per_row = if k_along_rows { BK / 4 } else { extent / 4 };
        (t / per_row, t % per_row * 4, threads / per_row)
    };
    let (a_r, a_c, a_row_stride) = roles(!TA, BM);
    let (b_r, b_c, b_row_stride) = roles(TB, BN);
    // Compute role: piece (mi, ni) of this lane is the TM x TN square at
    // rows m_base + mi * SUB_M, columns n_base + ni * SUB_N of the block tile.
    let (warp, lane) = (t / 32, t % 32);
    let (lane_row, lane_col) = (lane / LANE_COLS, lane % LANE_COLS);
    let m_base = warp / warps_n * wm + lane_row * TM;
    let n_base = warp % warps_n * wn + lane_col * TN;

    let mut acc = [[[[0.0f32; TN]; TM]; WN_ITERS]; WM_ITERS];

    // Index in A / B of this thread's first staged element of the current
    // tile, the distance between its float4s, and the step to the next tile.
    let mut a_idx = if TA { a_r * g.lda + row0 + a_c } else { (row0 + a_r) * g.lda + a_c };
    let mut b_idx = if TB { (col0 + b_r) * g.ldb + b_c } else { b_r * g.ldb + col0 + b_c };
    let a_stride = a_row_stride * g.lda;
    let b_stride = b_row_stride * g.ldb;
    let a_step = if TA { BK * g.lda } else { BK };
    let b_step = if TB { BK } else { BK * g.ldb };

    // Tile `tile` of K covers k0 = tile * BK .. + BK. Global loads of one
    // tile into registers, indexed from the tile's k0.
    let fetch = |k0: usize, a_idx: usize, b_idx: usize| {
        let mut a_vecs = [[0.0f32; 4]; MAX_VECS];
        let mut b_vecs = [[0.0f32; 4]; MAX_VECS];
        unroll!(Params::new(BM, BN, BK, WM_ITERS, WN_ITERS).a_vecs(); 4, |i| {
            let r = a_r + i * a_row_stride;
            // The float4's first element in A as stored, and its bounds.
            let (row, rows, col, cols) =
                if TA { (k0 + r, g.k, row0 + a_c, g.m) } else { (row0 + r, g.m, k0 + a_c, g.k) };
            // SAFETY: unguarded only for interior blocks of aligned shapes
            // (see `tuned`): row and 4 columns inside A, index % 4 == 0.
            a_vecs[i] = unsafe { g.read4::<GUARD>(g.a, (row, rows), (col, cols), a_idx + i * a_stride) };
        });
        unroll!(Params::new(BM, BN, BK, WM_ITERS, WN_ITERS).b_vecs(); 4, |i| {
            let r = b_r + i * b_row_stride;
            let (row, rows, col, cols) =
                if TB { (col0 + r, g.n, k0 + b_c, g.k) } else { (k0 + r, g.k, col0 + b_c, g.n) };
            // SAFETY: as for A.
            b_vecs[i] = unsafe { g.read4::<GUARD>(g.b, (row, rows), (col, cols), b_idx + i * b_stride) };
        });
        (a_vecs, b_vecs)
    };
    // Registers to one stage. Callers guarantee no thread reads that stage
    // between the barriers enclosing the call.
    let stash = |s: usize, a_vecs: [[f32; 4]; MAX_VECS], b_vecs: [[f32; 4]; MAX_VECS]| {
        let (a_tile, b_tile) = stage(s);
        unroll!(Params::new(BM, BN, BK, WM_ITERS, WN_ITERS).a_vecs(); 4, |i| {
            let r = a_r + i * a_row_stride;
            if TA {
                // SAFETY: r < BK, a_c + 4 <= BM <= A_LD; the word index is
                // a multiple of 4 (tile start, A_LD and a_c are); one owner
                // per word; no reader (caller).
                unsafe { a_tile.store4(r, a_c, a_vecs[i]) };
            } else {
                unroll!(4; 4, |j| {
                    // SAFETY: a_c + j < BK and r < BM <= A_LD (a_r <
                    // a_row_stride, i < a_vecs); one owner per word; no reader.
                    unsafe { a_tile.store(a_c + j, r, a_vecs[i][j]) };
                });
            }
        });
        unroll!(Params::new(BM, BN, BK, WM_ITERS, WN_ITERS).b_vecs(); 4, |i| {
            let r = b_r + i * b_row_stride;
            if TB {
                unroll!(4; 4, |j| {
                    // SAFETY: b_c + j < BK and r < BN <= B_LD; one owner
                    // per word; no reader.
                    unsafe { b_tile.store(b_c + j, r, b_vecs[i][j]) };
                });
            } else {
                // SAFETY: r < BK, b_c + 4 <= BN = B_LD; the word index is a multiple
                // of 4 (tile start, BN and b_c are); one owner per word; no reader.
                unsafe { b_tile.store4(r, b_c, b_vecs[i]) };
            }
        });
    };
    // This lane's fragments of row `kk` of stage `s`: WM_ITERS float4s of
    // A's column kk, WN_ITERS float4s of B's row kk. Callers guarantee no
    // thread writes stage `s` between the barriers enclosing the call.
    let frags = |s: usize, kk: usize| {
        let (a_tile, b_tile) = stage(s);
        let mut a = [[0.0f32; TM]; WM_ITERS];
        let mut b = [[0.0f32; TN]; WN_ITERS];
        unroll!(WM_ITERS; 4, |mi| {
            // SAFETY: kk < BK; m_base + mi * SUB_M + 4 <= BM <= A_LD
            // (m_base + TM <= the warp's rows, mi < WM_ITERS); the word
            // index is a multiple of 4 (A_LD, m_base and SUB_M are); no
            // writer (caller).
            a[mi] = unsafe { a_tile.load4(kk, m_base + mi * SUB_M) };
        });
        unroll!(WN_ITERS; 4, |ni| {
            // SAFETY: kk < BK; n_base + ni * SUB_N + 4 <= BN <= B_LD;
            // the word index is a multiple of 4 (B_LD is); no writer (caller).
            b[ni] = unsafe { b_tile.load4(kk, n_base + ni * SUB_N) };
        });
        (a, b)
    };

    let tiles = g.k.div_ceil(BK);
    // Prologue: tile 0 into stage 0; tile 1's global loads in flight
    // across the barrier; row 0 of tile 0's fragments. Nothing reads
    // shared memory before the barrier; nothing writes stage 0 until the
    // barrier inside the first iteration.
    let (a_vecs, b_vecs) = fetch(0, a_idx, b_idx);
    stash(0, a_vecs, b_vecs);
    // `next` holds tile + 1 of K during iteration `tile` (when it exists).
    let mut next = ([[0.0f32; 4]; MAX_VECS], [[0.0f32; 4]; MAX_VECS]);
    if tiles > 1 {
        a_idx += a_step;
        b_idx += b_step;
        next = fetch(BK, a_idx, b_idx);
    }
    sync_threads();
    // Two register sets: row kk of the stage is in `frag[kk % 2]`.
    let mut frag = [frags(0, 0); 2];

    let mut k0 = 0;
    let mut cur = 0;
    for tile in 0..tiles {
        // Same values in every thread: the branches below are uniform.
        let has_next = tile + 1 < tiles;
        let has_next2 = tile + 2 < tiles;

        // Fully unrolled: `kk` is a literal in each copy, so `frag[kk % 2]`
        // are fixed registers. Each step first issues the shared loads of
        // the next row (kk + 1, or row 0 of the next tile), then the FMAs
        // of row kk, which do not depend on them.
        unroll!(BK; 16, |kk| {
            if kk + 1 < BK {
                // Stage `cur` is written only before the barrier that
                // made it current and next after the barrier below.
                frag[(kk + 1) % 2] = frags(cur, kk + 1);
            } else {
                if has_next {
                    // Stage 1 - cur was last read before the barrier of
                    // the previous iteration (its rows were all read by
                    // kk = BK - 2, row 0 of stage cur after that barrier),
                    // which every thread has passed. `next` was loaded a
                    // whole tile ago.
                    stash(1 - cur, next.0, next.1);
                }
                if has_next2 {
                    // The global loads of tile + 2, issued before the
                    // barrier so that ptxas cannot sink them to their
                    // stores (a tile later): they stay in flight during
                    // all of the next tile's FMAs.
                    a_idx += a_step;
                    b_idx += b_step;
                    next = fetch(k0 + 2 * BK, a_idx, b_idx);
                }
                // The one barrier per tile: the other stage is complete,
                // and all reads of this one are done (the FMAs of the last
                // row use registers only).
                sync_threads();
                cur = 1 - cur;
                if has_next {
                    // Row 0 of the next tile, in flight during the FMAs of
                    // this tile's last row.
                    frag[(kk + 1) % 2] = frags(cur, 0);
                }
            }
            let (a_frag, b_frag) = frag[kk % 2];
            unroll!(WM_ITERS; 4, |mi| {
                unroll!(WN_ITERS; 4, |ni| {
                    unroll!(TM; 4, |i| {
                        unroll!(TN; 4, |j| {
                            acc[mi][ni][i][j] =
                                fma(a_frag[mi][i], b_frag[ni][j], acc[mi][ni][i][j]);
                        });
                    });
                });
            });
        });
        k0 += BK;
    }

    // A block stores 128 bits at a time where it lies inside C and C's
    // rows start on 16 bytes, guarded or not (a guarded block inside an
    // aligned C: K not a multiple of BK, what a short K spends most of its
    // time on); one value at a time otherwise (C's rows off 16 bytes: with
    // B transposed, an unguarded block too, whose loads stay 128-bit).
    // Block-uniform.
    let scalar_stores =
        (GUARD || TB) && !(row0 + BM <= g.m && col0 + BN <= g.n && g.vec4_c());
    // Where C is blended (`beta != 0`), each row of pieces reads all its
    // old values of C before it stores any (`Gemm::old_c`).
    let blends = g.beta != 0.0;
    unroll!(WM_ITERS; 4, |mi| {
        let mut old = [[[0.0f32; TN]; WN_ITERS]; TM];
        if blends {
            unroll!(TM; 4, |i| {
                let row = row0 + m_base + mi * SUB_M + i;
                unroll!(WN_ITERS; 4, |ni| {
                    let col = col0 + n_base + ni * SUB_N;
                    if scalar_stores {
                        unroll!(TN; 4, |j| {
                            if row < g.m && col + j < g.n {
                                // SAFETY: row < m and col + j < n.
                                old[i][ni][j] = unsafe { g.old_c(row * g.ldc + col + j) };
                            }
                        });
                    } else {
                        // SAFETY: as for the 128-bit store below.
                        old[i][ni] = unsafe { g.old_c4(row * g.ldc + col) };
                    }
                });
            });
        }
        unroll!(TM; 4, |i| {
            let row = row0 + m_base + mi * SUB_M + i;
            unroll!(WN_ITERS; 4, |ni| {
                let col = col0 + n_base + ni * SUB_N;
                let out = acc[mi][ni][i];
                if scalar_stores {
                    unroll!(TN; 4, |j| {
                        if row < g.m && col + j < g.n {
                            // SAFETY: row < m and col + j < n; this thread
                            // alone owns C[row][col + j].
                            unsafe { g.store_c_over(row * g.ldc + col + j, out[j], old[i][ni][j]) };
                        }
                    });
                } else {
                    // SAFETY: the block lies inside C, so row < m and
                    // col + 4 <= n; ldc % 4 == 0 and C 16-byte aligned
                    // (vec4_c above) and col % 4 == 0 keep the index a
                    // multiple of 4; one owner thread.
                    unsafe { g.store_c4_over(row * g.ldc + col, out, old[i][ni]) };
                }
            });
        });
    });
}
