//! Step 09: register double-buffered fragments. Step 08's kernel
//! (128x128 block tile, BK = 8, two shared stages, warp tiles of 32x64,
//! lanes 2x2 pieces of 4x4) with the `dot` loop fully unrolled and two
//! register sets for the fragments: while the FMAs of row kk run, the
//! 128-bit shared loads of row kk + 1 are already in flight. Row 0 of the
//! next tile is loaded right after the tile's barrier, which moves from
//! after the last row's FMAs to before them, so those loads too overlap
//! 64 FMAs. This is the "prefetch the next fragment" of maxas and
//! CUTLASS's SIMT SGEMMs.
//!
//! Why it should be faster: in step 08 each row of the (rolled) `dot`
//! loop starts with its 4 `ld.shared.v4` and then 64 FMAs that consume
//! them at once, so every row exposes the ~30-cycle shared-load latency
//! plus the loop's own counter, compare and branch; Nsight Compute saw
//! ~3 instructions per cycle per SM out of 4 with 8-16 warps. With the
//! next row's loads issued a row ahead, the FMAs never wait on shared
//! memory, and unrolling removes the loop's counter and branch. The price is 16 more registers
//! for the second fragment set (64 accumulators + 2 x 16 fragments +
//! staging), still low enough for 2 blocks (16 warps) per SM.
//! Prediction: 1.05-1.12x over step 08, 42-47 TFLOP/s on an H200 at
//! n = 4096, if ptxas stays at or under 128 registers.
//!
//! Outcome: slower than step 08, not faster (docs/measurements.md, "step
//! 09/10 tuning"). The prediction's condition failed: ptxas, free to
//! schedule the unrolled code, issues fragment loads up to 3 rows ahead
//! and needs 129 registers, one over the 128 that lets 2 blocks of 256
//! threads share an SM, so occupancy halves (16 warps to 8). The idea
//! pays off with 128 outputs per thread, where occupancy is register-bound
//! anyway (step 10's w64x64 shapes); a `.maxnreg 128` (launch bounds) on
//! this entry would be the fix here, and rustc has no attribute for it.
//! In SASS the main loop does what was meant: row kk + 1's LDS.128 sit
//! among row kk's FFMAs, and a tile has one BAR.
//!
//! Measured: the README's bench table and docs/bench.json (`cargo xtask
//! bench`); past runs in docs/measurements.md. Registers per entry:
//! `cargo test -p tests --test ptx -- --nocapture`.
//!
//! Edges: as step 06. The vector path needs the block inside C,
//! K % BK == 0 and aligned rows (`Gemm::vec4`); other blocks take the guarded path (zeros
//! staged outside A and B, scalar stores only inside C). Block-uniform;
//! both paths reach the same barriers.

use crate::device::{SharedTile, block_idx_x, block_idx_y, fma, sync_threads, thread_idx_x};
use crate::gemm::Gemm;
use crate::unroll::unroll;
use crate::elem::Elems;
use crate::launch::{KernelSpec, Launch, Operands, Ops, emulated};
use crate::modules;

/// Rows of C per block.
pub const BM: usize = 128;
/// Columns of C per block.
pub const BN: usize = 128;
/// Step along K.
pub const BK: usize = 8;
/// Rows and columns of C per warp.
pub const WM: usize = 32;
pub const WN: usize = 64;
/// A warp's 32 lanes as a LANE_ROWS x LANE_COLS grid.
const LANE_ROWS: usize = 4;
const LANE_COLS: usize = 8;
/// Rows and columns of one piece of a lane's outputs.
pub const TM: usize = 4;
pub const TN: usize = 4;
/// One sweep of the warp's lanes covers SUB_M x SUB_N outputs; a lane's
/// pieces repeat WM_ITERS times down and WN_ITERS times across the warp tile.
const SUB_M: usize = LANE_ROWS * TM;
const SUB_N: usize = LANE_COLS * TN;
pub const WM_ITERS: usize = WM / SUB_M;
pub const WN_ITERS: usize = WN / SUB_N;
/// Warps across the block tile (along N).
const WARPS_N: usize = BN / WN;
/// Threads per block: 32 per warp tile.
pub const THREADS: usize = (BM / WM) * WARPS_N * 32;

const _: () = assert!(LANE_ROWS * LANE_COLS == 32);
const _: () = assert!(
    BM.is_multiple_of(WM)
        && BN.is_multiple_of(WN)
        && WM.is_multiple_of(SUB_M)
        && WN.is_multiple_of(SUB_N)
);
/// float4s of each tile every thread stages per phase.
const A_VECS: usize = BM * BK / 4 / THREADS;
const B_VECS: usize = BK * BN / 4 / THREADS;
/// Rows between one thread's successive staged float4s.
const A_ROW_STRIDE: usize = THREADS / (BK / 4);
const B_ROW_STRIDE: usize = THREADS / (BN / 4);

const _: () = assert!(BK.is_multiple_of(4) && TM == 4 && TN == 4 && BK <= 16);
const _: () = assert!(THREADS.is_multiple_of(BK / 4) && THREADS.is_multiple_of(BN / 4));
const _: () = assert!(A_VECS * THREADS * 4 == BM * BK && B_VECS * THREADS * 4 == BK * BN);

type ATile = SharedTile<BK, BM>;
type BTile = SharedTile<BK, BN>;
/// Words of one stage: a transposed tile of A (`As[BK][BM]`) then a tile
/// of B (`Bs[BK][BN]`).
const STAGE_WORDS: usize = ATile::WORDS + BTile::WORDS;
/// Shared memory per block: two stages (16 KB).
pub const SHARED_BYTES: usize = 2 * STAGE_WORDS * 4;

// Every tile starts at a multiple of 4 words, so float4 accesses at
// columns that are multiples of 4 are 16-byte aligned.
const _: () = assert!(
    ATile::WORDS.is_multiple_of(4)
        && STAGE_WORDS.is_multiple_of(4)
        && BM.is_multiple_of(4)
        && BN.is_multiple_of(4)
);

/// Stage `s` (0 or 1): its tile of A (transposed) and its tile of B.
#[inline(always)]
fn stage(s: usize) -> (ATile, BTile) {
    let base = s * STAGE_WORDS;
    (ATile::at(base), BTile::at(base + ATile::WORDS))
}

pub const SPEC: KernelSpec = KernelSpec {
    name: "prefetch",
    step: 9,
    module: &modules::LADDER,
    elems: Elems::FP32,
    summary: "step 08 with register double-buffered fragments: row kk+1 loads during row kk's FMAs",
    launch: Launch {
        block_threads: (THREADS as u32, 1),
        block_tile: (BM, BN),
        shared_bytes: SHARED_BYTES,
        register_cap: false,
        persistent: false,
    },
    model_reuse: (BM, BN),
    body: emulated!(prefetch),
    operands: Operands::Pointers,
    ops: Ops::NN,
    batches: true,
};

/// Picks the vector body for interior blocks of aligned shapes.
#[inline(always)]
pub fn prefetch(g: Gemm) {
    let row0 = block_idx_y() * BM;
    let col0 = block_idx_x() * BN;
    // Block-uniform: depends on the block index and the shape only.
    if row0 + BM <= g.m && col0 + BN <= g.n && g.k.is_multiple_of(BK) && g.vec4() {
        body::<false>(g, row0, col0);
    } else {
        body::<true>(g, row0, col0);
    }
    // SAFETY: every thread gets here, after storing its part of the
    // block's tile (the fused epilogue's pass, nothing when plain).
    unsafe { g.fuse_block((row0, col0), (BM, BN), THREADS) };
}

/// One lane's fragments of one row of a stage: WM_ITERS float4s of A's
/// column, WN_ITERS float4s of B's row.
type Frags = ([[f32; TM]; WM_ITERS], [[f32; TN]; WN_ITERS]);

/// The block at `(row0, col0)` of C. With `GUARD = false` the caller
/// guarantees the block lies inside C, `K % BK == 0` and `g.vec4()`.
#[inline(always)]
fn body<const GUARD: bool>(g: Gemm, row0: usize, col0: usize) {
    let t = thread_idx_x();
    // Staging roles: A's float4 at (a_r + i * A_ROW_STRIDE, a_c..a_c + 4)
    // of its tile, B's at (b_r + i * B_ROW_STRIDE, b_c..b_c + 4).
    let (a_r, a_c) = (t / (BK / 4), t % (BK / 4) * 4);
    let (b_r, b_c) = (t / (BN / 4), t % (BN / 4) * 4);
    // Compute role: piece (mi, ni) of this lane is the TM x TN square at
    // rows m_base + mi * SUB_M, columns n_base + ni * SUB_N of the block tile.
    let (warp, lane) = (t / 32, t % 32);
    let (lane_row, lane_col) = (lane / LANE_COLS, lane % LANE_COLS);
    let m_base = warp / WARPS_N * WM + lane_row * TM;
    let n_base = warp % WARPS_N * WN + lane_col * TN;

    let mut acc = [[[[0.0f32; TN]; TM]; WN_ITERS]; WM_ITERS];

    // Index in A / B of this thread's first staged element of the current tile.
    let mut a_idx = (row0 + a_r) * g.lda + a_c;
    let mut b_idx = b_r * g.ldb + col0 + b_c;
    let a_stride = A_ROW_STRIDE * g.lda;
    let b_stride = B_ROW_STRIDE * g.ldb;
    let b_step = BK * g.ldb;

    // Tile `tile` of K covers k0 = tile * BK .. + BK. Global loads of one
    // tile into registers, indexed from the tile's k0.
    let fetch = |k0: usize, a_idx: usize, b_idx: usize| {
        let mut a_vecs = [[0.0f32; 4]; A_VECS];
        let mut b_vecs = [[0.0f32; 4]; B_VECS];
        unroll!(A_VECS; 1, |i| {
            let r = a_r + i * A_ROW_STRIDE;
            // SAFETY: unguarded only for interior blocks of aligned shapes
            // (see `body`): row inside A, 4 columns inside K, index % 4 == 0.
            a_vecs[i] = unsafe { g.read_a4::<GUARD>(row0 + r, k0 + a_c, a_idx + i * a_stride) };
        });
        unroll!(B_VECS; 1, |i| {
            let r = b_r + i * B_ROW_STRIDE;
            // SAFETY: as for A: row inside K, 4 columns inside N, index % 4 == 0.
            b_vecs[i] = unsafe { g.read_b4::<GUARD>(k0 + r, col0 + b_c, b_idx + i * b_stride) };
        });
        (a_vecs, b_vecs)
    };
    // Registers to one stage. Callers guarantee no thread reads that stage
    // between the barriers enclosing the call.
    let stash = |s: usize, a_vecs: [[f32; 4]; A_VECS], b_vecs: [[f32; 4]; B_VECS]| {
        let (a_tile, b_tile) = stage(s);
        unroll!(A_VECS; 1, |i| {
            let r = a_r + i * A_ROW_STRIDE;
            unroll!(4; 4, |j| {
                // SAFETY: a_c + j < BK and r < BM (a_r < A_ROW_STRIDE,
                // i < A_VECS); one owner per word; no reader (caller).
                unsafe { a_tile.store(a_c + j, r, a_vecs[i][j]) };
            });
        });
        unroll!(B_VECS; 1, |i| {
            let r = b_r + i * B_ROW_STRIDE;
            // SAFETY: r < BK, b_c + 4 <= BN; the word index is a multiple
            // of 4 (tile start and b_c are); one owner per word; no reader.
            unsafe { b_tile.store4(r, b_c, b_vecs[i]) };
        });
    };
    // Row `kk` of stage `s` into registers. Callers guarantee no thread
    // writes stage `s` between the barriers enclosing the call.
    let frags = |s: usize, kk: usize| -> Frags {
        let (a_tile, b_tile) = stage(s);
        let mut a = [[0.0f32; TM]; WM_ITERS];
        let mut b = [[0.0f32; TN]; WN_ITERS];
        unroll!(WM_ITERS; 2, |mi| {
            // SAFETY: kk < BK; m_base + mi * SUB_M + 4 <= BM (m_base + TM
            // <= the warp's rows, mi < WM_ITERS); the word index is a
            // multiple of 4; no writer (caller).
            a[mi] = unsafe { a_tile.load4(kk, m_base + mi * SUB_M) };
        });
        unroll!(WN_ITERS; 2, |ni| {
            // SAFETY: kk < BK; n_base + ni * SUB_N + 4 <= BN; the word
            // index is a multiple of 4; no writer (caller).
            b[ni] = unsafe { b_tile.load4(kk, n_base + ni * SUB_N) };
        });
        (a, b)
    };

    let tiles = g.k.div_ceil(BK);
    // Prologue: tile 0 into stage 0, then its row 0 into registers.
    // Nothing reads shared memory before the barrier; nothing writes
    // stage 0 until the barrier inside the first iteration.
    let (a_vecs, b_vecs) = fetch(0, a_idx, b_idx);
    stash(0, a_vecs, b_vecs);
    sync_threads();
    // Two register sets: row kk of the current stage lives in `frag[kk % 2]`.
    let mut frag = [frags(0, 0); 2];

    let mut k0 = 0;
    let mut cur = 0;
    for tile in 0..tiles {
        // Same value in every thread: the branches below are uniform.
        let has_next = tile + 1 < tiles;
        // Issue the next tile's global loads now; they complete while the
        // FMAs below run.
        let mut next = ([[0.0f32; 4]; A_VECS], [[0.0f32; 4]; B_VECS]);
        if has_next {
            a_idx += BK;
            b_idx += b_step;
            next = fetch(k0 + BK, a_idx, b_idx);
        }

        // Fully unrolled, so `kk` is a literal in each copy and
        // `frag[kk % 2]` are fixed registers. Each row first issues the
        // shared loads of the next row, then its own FMAs, which do not
        // depend on them.
        unroll!(BK; 8, |kk| {
            if kk + 1 < BK {
                // Stage `cur` is written only before the barrier that
                // made it current and next after this tile's barrier.
                frag[(kk + 1) % 2] = frags(cur, kk + 1);
            } else {
                if has_next {
                    // Stage 1 - cur was last read before the previous
                    // tile's barrier (row 0 of stage `cur` was the only
                    // read after it), which every thread has passed.
                    stash(1 - cur, next.0, next.1);
                }
                // The one barrier per tile: the other stage is complete,
                // and every read of this one is done (the last row's FMAs
                // below use registers only).
                sync_threads();
                cur = 1 - cur;
                if has_next {
                    // Row 0 of the next tile, in flight during the FMAs of
                    // this tile's last row.
                    frag[(kk + 1) % 2] = frags(cur, 0);
                }
            }
            let (a_frag, b_frag) = frag[kk % 2];
            unroll!(WM_ITERS; 2, |mi| {
                unroll!(WN_ITERS; 2, |ni| {
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

    unroll!(WM_ITERS; 2, |mi| {
        unroll!(TM; 4, |i| {
            let row = row0 + m_base + mi * SUB_M + i;
            unroll!(WN_ITERS; 2, |ni| {
                let col = col0 + n_base + ni * SUB_N;
                let out = acc[mi][ni][i];
                if GUARD {
                    unroll!(TN; 4, |j| {
                        if row < g.m && col + j < g.n {
                            // SAFETY: row < m and col + j < n; this thread
                            // alone owns C[row][col + j].
                            unsafe { g.store_c(row * g.ldc + col + j, out[j]) };
                        }
                    });
                } else {
                    // SAFETY: the block lies inside C, so row < m and
                    // col + 4 <= n; ldc % 4 == 0 (vec4) and col % 4 == 0 keep the
                    // index a multiple of 4; one owner thread.
                    unsafe { g.store_c4(row * g.ldc + col, out) };
                }
            });
        });
    });
}

crate::gemm_kernel!(prefetch);
