//! Step 20: a persistent grid. Step 19 launches one block per 128 x 256
//! tile of C; a block's SM holds only it (192 KB of stages), so while its
//! consumers store their accumulators and the next block starts, loads its
//! first stages and waits for them, the SM's tensor cores do nothing. At
//! n = 4096 that is 512 tiles in four waves over 132 SMs, each tile 64
//! K steps of `wgmma`s followed by an epilogue that writes 128 KB of C.
//!
//! What changes from step 19:
//! - **One block per SM**, each walking the tiles `blockIdx.x, blockIdx.x
//!   + gridDim.x, ...` (`Launch::persistent`: the host launches
//!   `min(tiles, SMs)` blocks). The stages and barriers are set up once.
//! - **The producer runs ahead across tiles**: the pipeline's tile counter
//!   does not restart with a new tile of C ([`Stages::produce_ab`] from
//!   `it0`), so while the consumers store tile t, the producer already
//!   fills the stages with tile t + 1's first K tiles, and the consumers
//!   start it on landed data.
//! - **Grouped tile order**: tile ids run down a band of [`GROUP`] rows of
//!   tiles before moving right, so the blocks in flight at once share A's
//!   row panels and B's column panels in L2.
//!
//! Everything inside a tile (stages, `wgmma`s, epilogue) is step 19's.
//!
//! **Every layout** (the library's transposed calls; instances `_tn`,
//! `_nt`, `_tt` in modules of their own). 16-bit `wgmma` reads either
//! operand MN-major, so each is read as it is stored, with no copy: A^T
//! (K x M) arrives as BM / 64 TMA boxes of `BK x 64` (one per consumer
//! warpgroup, read M-major: `imm-trans-a` 1); B^T (N x K) as one box of
//! `BN x BK`, read K-major like A (`imm-trans-b` 0). Only the boxes, the
//! descriptors and the two transpose bits differ ([`load_a`], [`load_b`],
//! [`mainloop`]'s `A_MN` and `B_MN`); the prediction: the speed of A and
//! B as they are. The measurement lives in docs/measurements.md (tenth
//! session).
//!
//! Prediction (H200, n = 4096): the next tile's fill (the first stages'
//! latency, a few percent of a tile's time at the tensor peak) hidden
//! behind the epilogue: 3-5 % over step 19, to about cuBLAS BF16. The epilogue itself stays exposed (the consumers
//! store while the tensor cores wait); hiding it needs either consumers
//! that alternate tiles or a store through shared memory and TMA. The
//! measurement lives in docs/bench.json and the README's bench table
//! (`cargo xtask bench`). GPU only, like steps 12-19.

#[cfg(target_arch = "nvptx64")]
use crate::device::tma::{TensorMaps, bulk_wait};
#[cfg(target_arch = "nvptx64")]
use crate::device::wgmma::{WgmmaAb, release_registers, take_registers};
#[cfg(target_arch = "nvptx64")]
use crate::device::{block_idx_x, grid_dim_x, thread_idx_x};
use crate::elem::{Bf16, Element, F16, Math};
#[cfg(target_arch = "nvptx64")]
use crate::gemm::{Gemm, Output, ScaleParams};
#[cfg(target_arch = "nvptx64")]
use crate::k13_wgmma_ws::{
    CONSUMER_REGISTERS, CONSUMERS, PRODUCER_REGISTERS, StageExtra, Stages,
};
#[cfg(target_arch = "nvptx64")]
use crate::k19_wgmma_16bit::{BK, BN, load_a, load_b, mainloop, store_tile};
use crate::k19_wgmma_16bit::{BM, Params};
#[cfg(target_arch = "nvptx64")]
use crate::k22_wgmma_tma_store::store_tile_tma;
#[cfg(target_arch = "nvptx64")]
use crate::launch::{Op, c_by_tma};
use crate::launch::{KernelSpec, Ops};
#[cfg_attr(not(target_arch = "nvptx64"), allow(unused_imports))] // GPU-only body
use crate::unroll::inline_always;

/// Rows of tiles in a band of the tile order.
pub const GROUP: usize = 8;

/// `wgmma`'s transpose bit for A in layout `op`: 1 (M-major) for A^T.
#[cfg(target_arch = "nvptx64")]
const fn a_mn(op: Op) -> u32 {
    matches!(op, Op::T) as u32
}

/// `wgmma`'s transpose bit for B in layout `op`: 1 (N-major) for B as it
/// is, 0 (K-major) for B^T.
#[cfg(target_arch = "nvptx64")]
const fn b_mn(op: Op) -> u32 {
    matches!(op, Op::N) as u32
}

/// One instance: `$spec` for the host; for the GPU the body `$name` on
/// A and B of type `$t` in layout `$ops` and C of type `$c`, and its PTX
/// entry, in the module `$cfg` (the layout's).
macro_rules! instance {
    ($cfg:literal, $name:ident, $spec:ident, $t:ident, $c:ident, $ops:ident, $math:expr, $stages:literal) => {
        pub const $spec: KernelSpec = Params::new($stages).spec_of(
            stringify!($name),
            (<$t as Element>::ELEM, <$t as Element>::ELEM, <$c as Element>::ELEM),
            $math,
            20,
            "step 19 on a persistent grid: one block per SM walks tiles in grouped order, the producer a tile ahead",
            (true, Ops::$ops, false),
        );
        /// The body of the PTX entry of the same name (inlined into it).
        #[cfg(target_arch = "nvptx64")]
        #[inline(always)]
        pub fn $name(g: Gemm<$t, $t, $c>, maps: TensorMaps) {
            block::<$t, $c, $stages, { Params::new($stages).stage_words() }, BK, { a_mn(Ops::$ops.a) }, { b_mn(Ops::$ops.b) }, false>(g, maps, None)
        }
        // The entry goes into its layout's module's PTX only.
        #[cfg(any(not(target_arch = "nvptx64"), gemm_module = $cfg))]
        mod $name {
            #[cfg(target_arch = "nvptx64")]
            use super::$name;
            crate::gemm_kernel!($name, tensor_maps, elems($t, $t, $c));
        }
    };
}

// C in f32, and C in the input type (`_c16`: rounded to nearest in the
// epilogue, half the bytes written); A and B as they are, then each
// transposed layout (the library's transposed calls), both read as stored
// (`wgmma`'s transpose bits), with no copy.
#[rustfmt::skip]
mod instances {
    use super::*;
    instance!("wgmma", wgmma_bf16_persistent_128x256x64_s4, SPEC_BF16_128X256X64_S4, Bf16, f32, NN, Math::Bf16, 4);
    instance!("wgmma", wgmma_f16_persistent_128x256x64_s4, SPEC_F16_128X256X64_S4, F16, f32, NN, Math::F16, 4);
    instance!("wgmma", wgmma_bf16_persistent_128x256x64_s4_c16, SPEC_BF16_128X256X64_S4_C16, Bf16, Bf16, NN, Math::Bf16, 4);
    instance!("wgmma", wgmma_f16_persistent_128x256x64_s4_c16, SPEC_F16_128X256X64_S4_C16, F16, F16, NN, Math::F16, 4);
    instance!("wgmma_tn", wgmma_bf16_persistent_128x256x64_s4_tn, SPEC_BF16_128X256X64_S4_TN, Bf16, f32, TN, Math::Bf16, 4);
    instance!("wgmma_tn", wgmma_f16_persistent_128x256x64_s4_tn, SPEC_F16_128X256X64_S4_TN, F16, f32, TN, Math::F16, 4);
    instance!("wgmma_tn", wgmma_bf16_persistent_128x256x64_s4_tn_c16, SPEC_BF16_128X256X64_S4_TN_C16, Bf16, Bf16, TN, Math::Bf16, 4);
    instance!("wgmma_tn", wgmma_f16_persistent_128x256x64_s4_tn_c16, SPEC_F16_128X256X64_S4_TN_C16, F16, F16, TN, Math::F16, 4);
    instance!("wgmma_nt", wgmma_bf16_persistent_128x256x64_s4_nt, SPEC_BF16_128X256X64_S4_NT, Bf16, f32, NT, Math::Bf16, 4);
    instance!("wgmma_nt", wgmma_f16_persistent_128x256x64_s4_nt, SPEC_F16_128X256X64_S4_NT, F16, f32, NT, Math::F16, 4);
    instance!("wgmma_nt", wgmma_bf16_persistent_128x256x64_s4_nt_c16, SPEC_BF16_128X256X64_S4_NT_C16, Bf16, Bf16, NT, Math::Bf16, 4);
    instance!("wgmma_nt", wgmma_f16_persistent_128x256x64_s4_nt_c16, SPEC_F16_128X256X64_S4_NT_C16, F16, F16, NT, Math::F16, 4);
    instance!("wgmma_tt", wgmma_bf16_persistent_128x256x64_s4_tt, SPEC_BF16_128X256X64_S4_TT, Bf16, f32, TT, Math::Bf16, 4);
    instance!("wgmma_tt", wgmma_f16_persistent_128x256x64_s4_tt, SPEC_F16_128X256X64_S4_TT, F16, f32, TT, Math::F16, 4);
    instance!("wgmma_tt", wgmma_bf16_persistent_128x256x64_s4_tt_c16, SPEC_BF16_128X256X64_S4_TT_C16, Bf16, Bf16, TT, Math::Bf16, 4);
    instance!("wgmma_tt", wgmma_f16_persistent_128x256x64_s4_tt_c16, SPEC_F16_128X256X64_S4_TT_C16, F16, F16, TT, Math::F16, 4);
}
pub use instances::*;

/// Every instance that reads A and B as they are.
pub const SPECS: &[KernelSpec] = &[
    SPEC_BF16_128X256X64_S4,
    SPEC_F16_128X256X64_S4,
    SPEC_BF16_128X256X64_S4_C16,
    SPEC_F16_128X256X64_S4_C16,
];

/// Every instance that reads A or B transposed (`registry::TRANSPOSED`).
pub const TRANSPOSED: &[KernelSpec] = &[
    SPEC_BF16_128X256X64_S4_TN,
    SPEC_F16_128X256X64_S4_TN,
    SPEC_BF16_128X256X64_S4_TN_C16,
    SPEC_F16_128X256X64_S4_TN_C16,
    SPEC_BF16_128X256X64_S4_NT,
    SPEC_F16_128X256X64_S4_NT,
    SPEC_BF16_128X256X64_S4_NT_C16,
    SPEC_F16_128X256X64_S4_NT_C16,
    SPEC_BF16_128X256X64_S4_TT,
    SPEC_F16_128X256X64_S4_TT,
    SPEC_BF16_128X256X64_S4_TT_C16,
    SPEC_F16_128X256X64_S4_TT_C16,
];

/// Where tile `t` of an `m x n` C in tiles of BM x `TILE_N` lies, `(row0,
/// col0)`, in the grouped order: bands of [`GROUP`] rows of tiles (the
/// last band may be shorter), each walked down its rows, then right
/// (`TILE_N` is [`BN`] here, 128 in step 26).
///
/// For `t` below the tile count (the kernel's loops); the divisors are
/// kept at least 1 so that no other `t` can reach a division by zero (a
/// panic path, `trap`, in the PTX).
#[inline(always)]
pub const fn tile_origin<const TILE_N: usize>(t: usize, m: usize, n: usize) -> (usize, usize) {
    let (tiles_m, tiles_n) = (m.div_ceil(BM), n.div_ceil(TILE_N));
    let band_tiles = max1(GROUP * tiles_n);
    let first = t / band_tiles * GROUP;
    let left = tiles_m.saturating_sub(first);
    let rows = max1(if left < GROUP { left } else { GROUP });
    let within = t % band_tiles;
    ((first + within % rows) * BM, (within / rows) * TILE_N)
}

const fn max1(x: usize) -> usize {
    if x == 0 { 1 } else { x }
}

/// The block: the stages once, then the producer warpgroup's first thread
/// produces every tile of C this block owns, in order, while the two
/// consumer warpgroups compute and store them, one after the other
/// (step 13's roles and registers, step 19's tile: [`persistent`] with
/// [`mainloop`]). `A_MN` and `B_MN` are the operands' layouts in shared
/// memory, as stored ([`load_a`], [`load_b`], [`mainloop`]). `TMA_C`
/// (step 22) stores C by TMA where [`c_by_tma`] allows. `P` is the
/// operands' types and their `wgmma`, `BK` the values of K in a 128-byte
/// row of A (64 of a 16-bit type, 128 of FP8); `scales`, an FP8
/// product's (step 25), are folded into the epilogue's scalars
/// ([`Gemm::scaled`]).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub(crate) fn block<
    P: WgmmaAb,
    C: Output,
    const STAGES: usize,
    const STAGE_WORDS: usize,
    const BK: usize,
    const A_MN: u32,
    const B_MN: u32,
    const TMA_C: bool,
>(
    g: Gemm<P::A, P::B, C>,
    maps: TensorMaps,
    scales: Option<ScaleParams>,
) {
    persistent::<P::A, P::B, C, BN, STAGES, STAGE_WORDS, BK, A_MN, B_MN, TMA_C, 128, true, _>(
        g,
        maps,
        scales,
        inline_always!(|_, _, _| ()),
        inline_always!(|stages, it, k_tiles, tid, _row0, _col0| mainloop::<P, STAGES, STAGE_WORDS, BK, A_MN, B_MN>(stages, it, k_tiles, tid)),
    )
}

/// The persistent block of steps 20, 22, 25 and 26, whatever a tile's
/// main loop: the stages once, then the producer warpgroup's first thread
/// produces every BM x `TILE_N` tile of C this block owns, in order,
/// (and, in each stage, what `extra(stages, row0, col0)` copies for the
/// tile at `(row0, col0)`: step 26's block scales), while the two
/// consumer warpgroups compute each with `tile(stages, it,
/// k_tiles, tid, row0, col0)` (the pipeline's tiles `it..it + k_tiles`,
/// for the tile at `(row0, col0)`: `ACC` accumulators per thread) and
/// store it ([`store_tile_tma`] with `TMA_C` where [`c_by_tma`] allows,
/// a 16-bit C's column operands read a slice ahead with `AHEAD`, else
/// [`store_tile`]). `scales` are folded into the epilogue's scalars
/// ([`Gemm::scaled`]) by the consumers alone.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub(crate) fn persistent<
    A: Element,
    B: Element,
    C: Output,
    const TILE_N: usize,
    const STAGES: usize,
    const STAGE_WORDS: usize,
    const BK: usize,
    const A_MN: u32,
    const B_MN: u32,
    const TMA_C: bool,
    const ACC: usize,
    const AHEAD: bool,
    X: StageExtra,
>(
    g: Gemm<A, B, C>,
    maps: TensorMaps,
    scales: Option<ScaleParams>,
    extra: impl Fn(Stages<BM, STAGES, STAGE_WORDS, BK>, usize, usize) -> X,
    tile: impl Fn(Stages<BM, STAGES, STAGE_WORDS, BK>, usize, usize, usize, usize, usize) -> [f32; ACC],
) {
    // BK values of A's type fill one 128-byte row of a stage; a thread
    // holds half a row of the tile per warpgroup row pair.
    const { assert!(BK * A::ELEM.bytes() == 128 && 2 * ACC == TILE_N) };
    let tid = thread_idx_x();
    let stages = Stages::<BM, STAGES, STAGE_WORDS, BK>::init(maps, tid);
    let k_tiles = g.k.div_ceil(BK);
    let tiles = g.m.div_ceil(BM) * g.n.div_ceil(TILE_N);
    let (first, stride) = (block_idx_x(), grid_dim_x());
    if tid >= CONSUMERS {
        // SAFETY: the whole warpgroup runs this branch (rule 1); 40 is a
        // multiple of 8.
        unsafe { release_registers::<PRODUCER_REGISTERS>() };
        if tid == CONSUMERS {
            let (mut t, mut it) = (first, 0);
            while t < tiles {
                let (row0, col0) = tile_origin::<TILE_N>(t, g.m, g.n);
                // SAFETY: one thread, after init, it the tiles it produced
                // before; load_a and load_b bring A's and B's parts with
                // SPEC's boxes for this layout; extra's copies are the
                // caller's (their words, after the staging boxes, are
                // read by the consumers between full and release).
                unsafe {
                    stages.produce_ab_with(
                        it,
                        k_tiles,
                        extra(stages, row0, col0),
                        inline_always!(|word, k0, full| load_a::<A_MN>(maps, word, k0, full, row0)),
                        inline_always!(|word, k0, full| load_b::<B_MN>(maps, word, k0, full, col0)),
                    )
                };
                t += stride;
                it += k_tiles;
            }
        }
    } else {
        // SAFETY: both consumer warpgroups run this branch (rule 1).
        unsafe { take_registers::<CONSUMER_REGISTERS>() };
        // The same tiles, in the same order, as the producer: every
        // consumer thread runs the same trips (the wgmmas stay converged).
        let (mut t, mut it) = (first, 0);
        let by_tma = TMA_C && c_by_tma(g.beta, g.c.aligned(16), g.ldc, C::ELEM.bytes());
        let g = match scales {
            // SAFETY: the entry's contract (gemm_kernel!(name, scaled)).
            Some(s) => unsafe { g.scaled(s) },
            None => g,
        };
        while t < tiles {
            let (row0, col0) = tile_origin::<TILE_N>(t, g.m, g.n);
            let acc = tile(stages, it, k_tiles, tid, row0, col0);
            if by_tma {
                // SAFETY: the staging boxes follow the stages' barriers,
                // 1024-byte aligned (SPEC's shared_bytes counts them); only
                // the epilogue uses them. The host made C's map (c_by_tma).
                unsafe { store_tile_tma::<_, _, _, ACC, AHEAD>(g, &acc, row0, col0, tid, stages.end_aligned(), maps) };
            } else {
                // SAFETY: the staging tiles follow the stages (SPEC's
                // shared_bytes counts them); only the epilogue uses them.
                unsafe { store_tile(g, &acc, row0, col0, tid, if TMA_C { stages.end_aligned() } else { stages.end() }) };
            }
            t += stride;
            it += k_tiles;
        }
        if by_tma && tid % 32 == 0 {
            // The block's last stores complete before it exits (rule 5).
            bulk_wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k19_wgmma_16bit::BN;

    /// The grouped order visits every tile once, at any shape, and the
    /// first tiles of a band run down its rows.
    #[test]
    fn the_tile_order_covers_every_tile_once() {
        fn covers<const TILE_N: usize>(m: usize, n: usize) {
            let (tiles_m, tiles_n) = (m.div_ceil(BM), n.div_ceil(TILE_N));
            let mut seen = vec![false; tiles_m * tiles_n];
            for t in 0..tiles_m * tiles_n {
                let (row0, col0) = tile_origin::<TILE_N>(t, m, n);
                assert!(row0 < m && col0 < n, "{m}x{n} tile {t}");
                let i = row0 / BM * tiles_n + col0 / TILE_N;
                assert!(!seen[i], "{m}x{n}: tile {t} twice");
                seen[i] = true;
            }
            assert!(seen.iter().all(|&s| s));
        }
        for (m, n) in [(1usize, 1usize), (128, 256), (4096, 4096), (4097, 4097), (777, 3333), (3000, 300)] {
            covers::<BN>(m, n);
            covers::<128>(m, n);
        }
        assert_eq!(tile_origin::<BN>(1, 4096, 4096), (BM, 0));
        assert_eq!(tile_origin::<BN>(GROUP, 4096, 4096), (0, BN));
        assert_eq!(tile_origin::<128>(GROUP, 4096, 4096), (0, 128));
    }
}
