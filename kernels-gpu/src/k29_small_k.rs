//! Step 29: small K, `C = A B` with K of a few to about a hundred. A
//! call with K = 4 or 20 does almost no arithmetic per element of C (8
//! or 40 flops): its time is C's bytes leaving for DRAM. The tiled
//! kernels of steps 04-10 were built for the opposite case: a pipeline
//! over K that fills before it pays, a BK of 8 or 16 that a K of 13
//! pads, and each thread's stores of C issued one after another at the
//! end of a long block. On the recorded random suites (docs/random-suite)
//! the calls with K below 100 were among the furthest below cuBLAS SGEMM,
//! writing C at a fraction of its speed (the figures are in
//! docs/measurements.md, thirty-second session).
//!
//! What changes from step 06 (a block tile staged in shared memory, A
//! transposed there, 128-bit fragment reads):
//! - **One pass over K.** The block stages its K [`KC`] = 8 at a time
//!   (one pass for K <= 8, a few up to K of about a hundred) with no
//!   pipeline: the loads of a pass are in flight together, then one
//!   barrier, the FMAs, and the stores. Nothing waits to fill. (Deeper
//!   passes held more registers than a kernel bound by its stores can
//!   spare: fewer blocks per SM; ptxas's counts per depth are in
//!   docs/measurements.md.)
//! - **A wide tile whose stores are whole lines.** A warp holds 8 rows
//!   of 128 columns of C (`BM x BN` = 64 x 128 per block of 8 warps).
//!   Where C's rows start on 16 bytes, lane `l` holds the float4 at
//!   columns `4 l ..= 4 l + 3` of each: each of a thread's 8 stores is
//!   one `st.global.v4.f32`, and a warp's store writes 512 contiguous
//!   bytes of a row, four full 128-byte lines. Elsewhere (an odd `ldc`:
//!   most calls of the random suites) lane `l` holds columns `l + 32 j`,
//!   and each of a warp's four scalar stores per row is one whole
//!   128-byte line ([`columns`]); the first version stored the float4
//!   role's values one by one there, a quarter of each sector per store.
//! - **Any layout, any K, no alignment asked of A and B.** Staging reads
//!   single floats in the order A or B is stored (consecutive threads at
//!   consecutive addresses, whichever dimension runs along the stored
//!   rows), guarded by the shape, so a K of 13 or a leading dimension of
//!   13 costs nothing extra; A and B are small next to C here. Layouts
//!   are compile-time (`_tn`, `_nt`, `_tt` instances), as in step 10.
//!
//! Edges: a block over C's edge stores only inside C, float4 by float4
//! where the four columns are inside C and C's rows are on 16 bytes
//! ([`Gemm::vec4_c`]), one float at a time otherwise. Batches and split-K
//! come from the entry (`gemm_kernel!`); the fused epilogue is the block's
//! pass over its tile ([`Gemm::fuse_block`]). With `beta != 0` a thread
//! reads the old values of C of half its rows before it stores any of
//! them ([`Gemm::old_c`]): read and stored in pairs, each pair waited out
//! a trip to memory (docs/measurements.md, forty-third session).
//!
//! Prediction (H200): with K <= 32, C written at 3-4 TB/s, 1.2-1.6x
//! cuBLAS SGEMM on the random suite's batched small-K calls (1701 x 1461
//! x 4 in 44 products: 437 MB of C in 0.11-0.15 ms); with K of 64-128,
//! bound by FMAs again, 0.8-1.0x.
//! Measured: `bench --suite --random N` (docs/random-suite/,
//! docs/measurements.md, thirty-third session); among `Auto`'s candidates.

use crate::device::{SharedTile, block_idx_x, block_idx_y, fma, sync_threads, thread_idx_x};
use crate::elem::Elems;
use crate::gemm::{Gemm, offset32};
use crate::launch::{KernelSpec, Launch, Op, Operands, Ops, emulated};
use crate::modules;
use crate::unroll::unroll;

/// Threads per block: 8 warps.
pub const THREADS: usize = 256;
/// Rows of C per thread (and per warp).
pub const TM: usize = 8;
/// Columns of C per block: a float4 per lane of a warp.
pub const BN: usize = 128;
/// Rows of C per block: a warp's [`TM`] rows, for each of the 8 warps.
pub const BM: usize = THREADS / 32 * TM;
/// K staged per pass.
pub const KC: usize = 8;
/// Padding of each row of the staged tiles, in floats: a multiple of 4
/// (128-bit fragment reads stay aligned), and with [`KC`] = 8 rows the
/// staging stores of an operand stored with K along its rows (a warp:
/// 8 values of K for 4 consecutive rows of M or N) fall on 32 different
/// banks, `(4 k + r) % 32`, instead of 4.
const PAD: usize = 4;

/// `As[KC][BM + PAD]`: A's pass, transposed (`As[k][row]`).
const A_SHARED: SharedTile<KC, { BM + PAD }> = SharedTile::at(0);
/// `Bs[KC][BN + PAD]`: B's pass (`Bs[k][col]`). Starts at a multiple of 4.
const B_SHARED: SharedTile<KC, { BN + PAD }> = SharedTile::at(A_SHARED.end());
/// Shared memory per block: both tiles (6.4 KB).
pub const SHARED_BYTES: usize = B_SHARED.end() * 4;

/// Elements of each pass every thread stages.
const A_PER_THREAD: usize = BM * KC / THREADS;
const B_PER_THREAD: usize = KC * BN / THREADS;

const _: () = assert!(BN == 32 * 4 && A_PER_THREAD * THREADS == BM * KC && B_PER_THREAD * THREADS == KC * BN);
// Room for several blocks per SM (and within the 48 KB a launch gets
// without opting in).
const _: () = assert!(SHARED_BYTES <= 48 * 1024);
const _: () = assert!(A_SHARED.end().is_multiple_of(4) && (BM + PAD).is_multiple_of(4) && TM.is_multiple_of(4));

/// Where element `e` of a pass's staging of A lies in the tile, `(row,
/// k)`: numbered along A's stored rows (along M for A transposed, `K x
/// M`; along K as it is), so consecutive threads read consecutive
/// addresses.
const fn a_at(transposed: bool, e: usize) -> (usize, usize) {
    if transposed { (e % BM, e / BM) } else { (e / KC, e % KC) }
}

/// Where element `e` of a pass's staging of B lies, `(k, col)`: along B's
/// stored rows, as [`a_at`] (along K for B transposed, `N x K`).
const fn b_at(transposed: bool, e: usize) -> (usize, usize) {
    if transposed { (e % KC, e / KC) } else { (e / BN, e % BN) }
}

/// The spec of the instance `name` reading A and B as `ops` says.
const fn spec(name: &'static str, body: fn(Gemm), ops: Ops) -> KernelSpec {
    KernelSpec {
        name,
        step: 29,
        module: &modules::LADDER,
        elems: Elems::FP32,
        summary: "small K: K staged 8 at a time with no pipeline, a 64 x 128 tile whose warps store whole 512-byte rows of C",
        launch: Launch {
            block_threads: (THREADS as u32, 1),
            block_tile: (BM, BN),
            shared_bytes: SHARED_BYTES,
            register_cap: false,
            persistent: false,
        },
        model_reuse: (BM, BN),
        body: emulated!(body),
        operands: Operands::Pointers,
        ops,
        batches: true,
    }
}

/// One instance: `SPEC` for the host, the body `name` for the emulator,
/// and the PTX entry `name`.
macro_rules! instance {
    ($name:ident, $spec:ident, $ops:ident) => {
        pub const $spec: KernelSpec = spec(stringify!($name), $name, Ops::$ops);
        /// The body of the PTX entry of the same name.
        #[inline(always)]
        pub fn $name(g: Gemm) {
            small_k::<{ matches!(Ops::$ops.a, Op::T) }, { matches!(Ops::$ops.b, Op::T) }>(g)
        }
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
    instance!(small_k_64x128, SPEC, NN);
    instance!(small_k_64x128_tn, SPEC_TN, TN);
    instance!(small_k_64x128_nt, SPEC_NT, NT);
    instance!(small_k_64x128_tt, SPEC_TT, TT);
}
pub use instances::*;

/// The instances with A or B transposed (`registry::TRANSPOSED`).
pub const TRANSPOSED: &[KernelSpec] = &[SPEC_TN, SPEC_NT, SPEC_TT];

/// The block at `(block_idx_y() * BM, block_idx_x() * BN)` of C. `TA`,
/// `TB`: A (`K x M`) or B (`N x K`) is stored transposed (`Ops`). C's
/// rows on 16 bytes ([`Gemm::vec4_c`]) take the float4 columns; others
/// the strided ones, whose warp stores are whole lines at any alignment
/// ([`columns`]).
#[inline(always)]
fn small_k<const TA: bool, const TB: bool>(g: Gemm) {
    if g.vec4_c() {
        small_k_tile::<TA, TB, true>(g)
    } else {
        small_k_tile::<TA, TB, false>(g)
    }
}

/// The 4 columns of the tile lane `lane` computes and stores: with `VEC`,
/// the float4 at `4 lane ..` (one `st.global.v4.f32` per row, a warp's
/// store 512 contiguous bytes, which needs C's rows on 16 bytes);
/// without, `lane + 32 j` (four `st.global.f32` per row, each a warp's
/// 128 contiguous bytes wherever the row starts). Scalar stores at
/// `4 lane + j` would write 4 bytes of every 16 per warp instruction, a
/// quarter of each sector per store.
const fn columns<const VEC: bool>(lane: usize) -> [usize; 4] {
    if VEC {
        [4 * lane, 4 * lane + 1, 4 * lane + 2, 4 * lane + 3]
    } else {
        [lane, lane + 32, lane + 64, lane + 96]
    }
}

/// [`small_k`] with the column role `VEC` ([`columns`]).
#[inline(always)]
fn small_k_tile<const TA: bool, const TB: bool, const VEC: bool>(g: Gemm) {
    // Indices in u32 (`offset32`): 64-bit ones held twice the registers
    // through the passes.
    let (m, n, k) = g.dims32();
    let (lda, ldb, ldc) = (g.lda as u32, g.ldb as u32, g.ldc as u32);
    let (row0, col0) = ((block_idx_y() * BM) as u32, (block_idx_x() * BN) as u32);
    let t = thread_idx_x();
    // Compute role: rows `r0 .. r0 + TM` of the tile, columns `cols`.
    let (r0, cols) = (t / 32 * TM, columns::<VEC>(t % 32));
    let mut acc = [[0.0f32; 4]; TM];

    let mut k0 = 0u32;
    while k0 < k {
        // Uniform: the pass's depth, KC but for the last.
        let depth = (k - k0).min(KC as u32) as usize;
        // Staging: element `t + THREADS * i` of the pass ([`a_at`],
        // [`b_at`]); zeros outside A and B, nothing past the depth (never
        // read).
        let mut a = [0.0f32; A_PER_THREAD];
        let mut b = [0.0f32; B_PER_THREAD];
        unroll!(A_PER_THREAD; 8, |i| {
            let (r, kk) = a_at(TA, t + THREADS * i);
            let row = row0 + r as u32;
            if kk < depth && row < m {
                let kk = k0 + kk as u32;
                // SAFETY: row < m and kk < k0 + depth <= K: inside A as
                // stored, whose span fits in 32 bits (MAX_ELEMS).
                a[i] = unsafe { g.a.read(if TA { offset32(kk, lda, row) } else { offset32(row, lda, kk) }) };
            }
        });
        unroll!(B_PER_THREAD; 16, |i| {
            let (kk, c) = b_at(TB, t + THREADS * i);
            let col = col0 + c as u32;
            if kk < depth && col < n {
                let kk = k0 + kk as u32;
                // SAFETY: kk < K and col < n: inside B as stored, as above.
                b[i] = unsafe { g.b.read(if TB { offset32(col, ldb, kk) } else { offset32(kk, ldb, col) }) };
            }
        });
        unroll!(A_PER_THREAD; 8, |i| {
            let (r, kk) = a_at(TA, t + THREADS * i);
            if kk < depth {
                // SAFETY: kk < KC, r < BM; one owner per word; the previous
                // pass's closing barrier ordered this write after its reads.
                unsafe { A_SHARED.store(kk, r, a[i]) };
            }
        });
        unroll!(B_PER_THREAD; 16, |i| {
            let (kk, c) = b_at(TB, t + THREADS * i);
            if kk < depth {
                // SAFETY: kk < KC, c < BN; as above.
                unsafe { B_SHARED.store(kk, c, b[i]) };
            }
        });
        sync_threads();

        // Rolled: a trip per k of the pass (its depth is the call's).
        for kk in 0..depth {
            // SAFETY: kk < depth <= KC, r0 + TM <= BM and every column < BN,
            // the 128-bit loads' word indices multiples of 4 (row lengths, r0,
            // cols[0] with VEC, and B's start are); written before the barrier,
            // no writes until the next.
            let (a_lo, a_hi, bv) = unsafe {
                let bv = if VEC {
                    B_SHARED.load4(kk, cols[0])
                } else {
                    [B_SHARED.load(kk, cols[0]), B_SHARED.load(kk, cols[1]), B_SHARED.load(kk, cols[2]), B_SHARED.load(kk, cols[3])]
                };
                (A_SHARED.load4(kk, r0), A_SHARED.load4(kk, r0 + 4), bv)
            };
            unroll!(TM; 8, |i| {
                let av = if i < 4 { a_lo[i % 4] } else { a_hi[i % 4] };
                unroll!(4; 4, |j| { acc[i][j] = fma(av, bv[j], acc[i][j]) });
            });
        }
        sync_threads();
        k0 += KC as u32;
    }

    // Where C is blended (`beta != 0`), the thread reads the old values
    // of C of half its rows before it stores any of them
    // (`Gemm::old_c`); half, so that they take no more registers than
    // the block had without them (all eight rows' cost a block per SM:
    // docs/measurements.md, forty-third session).
    unroll!(2; 2, |half| {
        let mut old = [[0.0f32; 4]; TM / 2];
        if g.beta != 0.0 {
            unroll!(TM / 2; 4, |h| {
                let i = half * (TM / 2) + h;
                let row = row0 + (r0 + i) as u32;
                if row < m {
                    let col = col0 + cols[0] as u32;
                    if VEC && col + 4 <= n {
                        // SAFETY: as for the 128-bit store below.
                        old[h] = unsafe { g.old_c4(offset32(row, ldc, col)) };
                    } else {
                        unroll!(4; 4, |j| {
                            let col = col0 + cols[j] as u32;
                            if col < n {
                                // SAFETY: row < m and col < n.
                                old[h][j] = unsafe { g.old_c(offset32(row, ldc, col)) };
                            }
                        });
                    }
                }
            });
        }
        unroll!(TM / 2; 4, |h| {
            let i = half * (TM / 2) + h;
            let row = row0 + (r0 + i) as u32;
            if row < m {
                let col = col0 + cols[0] as u32;
                if VEC && col + 4 <= n {
                    // SAFETY: row < m and col + 4 <= n; col and ldc are
                    // multiples of 4 and C is 16-byte aligned (vec4_c,
                    // which chose VEC); this thread alone owns these four
                    // elements.
                    unsafe { g.store_c4_over(offset32(row, ldc, col), acc[i], old[h]) };
                } else {
                    unroll!(4; 4, |j| {
                        let col = col0 + cols[j] as u32;
                        if col < n {
                            // SAFETY: row < m and col < n; this thread's own.
                            unsafe { g.store_c_over(offset32(row, ldc, col), acc[i][j], old[h][j]) };
                        }
                    });
                }
            }
        });
    });
    // SAFETY: every thread gets here, after storing its part of the
    // block's tile (the fused epilogue's pass, nothing when plain).
    unsafe { g.fuse_block((row0 as usize, col0 as usize), (BM, BN), THREADS) };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each staging role covers every element of a pass exactly once, in
    /// either stored order, and a warp's first staged elements are
    /// consecutive along the stored rows.
    #[test]
    fn staging_covers_every_element_of_a_pass_once() {
        for transposed in [false, true] {
            let mut seen_a = vec![false; BM * KC];
            for e in 0..BM * KC {
                let (r, kk) = a_at(transposed, e);
                assert!(r < BM && kk < KC);
                assert!(!std::mem::replace(&mut seen_a[r * KC + kk], true));
            }
            let mut seen_b = vec![false; KC * BN];
            for e in 0..KC * BN {
                let (kk, c) = b_at(transposed, e);
                assert!(kk < KC && c < BN);
                assert!(!std::mem::replace(&mut seen_b[kk * BN + c], true));
            }
        }
        // A as stored (K along its rows): lanes 0 and 1 read k and k + 1.
        assert_eq!((a_at(false, 0), a_at(false, 1)), ((0, 0), (0, 1)));
        // B transposed (K along its rows) likewise; B as it is along N.
        assert_eq!((b_at(true, 1), b_at(false, 1)), ((1, 0), (0, 1)));
    }

    /// Each instance's spec launches the tile the body computes, one
    /// entry per layout, named after it.
    #[test]
    fn every_layout_has_an_entry_with_the_tile() {
        for (spec, ops) in [(SPEC, Ops::NN), (SPEC_TN, Ops::TN), (SPEC_NT, Ops::NT), (SPEC_TT, Ops::TT)] {
            assert_eq!(spec.launch.block_tile, (BM, BN), "{}", spec.name);
            assert_eq!(spec.ops, ops, "{}", spec.name);
            assert!(spec.name.starts_with("small_k_64x128"), "{}", spec.name);
            assert!(ops == Ops::NN || spec.name.ends_with(ops.suffix()), "{}", spec.name);
        }
    }
}
