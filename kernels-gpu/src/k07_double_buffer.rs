//! Step 07: double buffering. Step 06's kernel with two shared-memory
//! stages: while the block computes on the tile of K in one stage, each
//! thread's loads of the next tile are already in flight from global
//! memory into registers, and land in the other stage when the compute is
//! done. One barrier per step of K instead of two.
//!
//! Why it should be faster: in step 06 a warp waits for its global loads
//! (hundreds of cycles) right before a barrier, so the SM keeps the FMA
//! pipe busy only with the other block's warps (2 blocks per SM). Here the
//! loads are issued before 512 FMAs per thread that do not depend on them,
//! and the second barrier per tile disappears because the stage being
//! written is never the one being read. The cost: 8 more registers for
//! the in-flight float4s and twice the shared memory (16 KB).
//! Prediction: 1.05-1.15x over step 06, 32-38 TFLOP/s on an H200.
//!
//! Measured: the README's bench table and docs/bench.json (`cargo xtask
//! bench`); past runs, with the prediction next to the outcome, in
//! docs/measurements.md. Registers per entry: `cargo test -p tests --test
//! ptx -- --nocapture`.
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
/// Rows of C per thread.
pub const TM: usize = 8;
/// Columns of C per thread.
pub const TN: usize = 8;
/// Threads per block: one per TM x TN square.
pub const THREADS: usize = (BM / TM) * (BN / TN);
/// float4s of each tile every thread stages per phase.
const A_VECS: usize = BM * BK / 4 / THREADS;
const B_VECS: usize = BK * BN / 4 / THREADS;
/// Rows between one thread's successive staged float4s.
const A_ROW_STRIDE: usize = THREADS / (BK / 4);
const B_ROW_STRIDE: usize = THREADS / (BN / 4);

const _: () = assert!(BK.is_multiple_of(4) && TM.is_multiple_of(4) && TN.is_multiple_of(4));
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
    name: "double_buffer",
    step: 7,
    module: &modules::LADDER,
    elems: Elems::FP32,
    summary: "step 06 with two shared stages: next tile loaded to registers during compute",
    launch: Launch {
        block_threads: (THREADS as u32, 1),
        block_tile: (BM, BN),
        shared_bytes: SHARED_BYTES,
        register_cap: false,
        persistent: false,
    },
    model_reuse: (BM, BN),
    body: emulated!(double_buffer),
    operands: Operands::Pointers,
    ops: Ops::NN,
    batches: true,
};

/// Picks the vector body for interior blocks of aligned shapes.
#[inline(always)]
pub fn double_buffer(g: Gemm) {
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

/// The block at `(row0, col0)` of C. With `GUARD = false` the caller
/// guarantees the block lies inside C, `K % BK == 0` and `g.vec4()`.
#[inline(always)]
fn body<const GUARD: bool>(g: Gemm, row0: usize, col0: usize) {
    let t = thread_idx_x();
    // Staging roles: A's float4 at (a_r + i * A_ROW_STRIDE, a_c..a_c + 4)
    // of its tile, B's at (b_r + i * B_ROW_STRIDE, b_c..b_c + 4).
    let (a_r, a_c) = (t / (BK / 4), t % (BK / 4) * 4);
    let (b_r, b_c) = (t / (BN / 4), t % (BN / 4) * 4);
    // Compute role: the TM x TN square at (t_row * TM, t_col * TN).
    let (t_row, t_col) = (t / (BN / TN), t % (BN / TN));

    let mut acc = [[0.0f32; TN]; TM];
    let mut a_frag = [0.0f32; TM];
    let mut b_frag = [0.0f32; TN];

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

    let tiles = g.k.div_ceil(BK);
    // Prologue: tile 0 into stage 0. Nothing reads shared memory yet.
    let (a_vecs, b_vecs) = fetch(0, a_idx, b_idx);
    stash(0, a_vecs, b_vecs);
    sync_threads();

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

        let (a_tile, b_tile) = stage(cur);
        // Rolled on purpose (see step 05); indices inside are literals.
        for dot in 0..BK {
            unroll!(TM / 4; 2, |q| {
                // SAFETY: dot < BK, t_row * TM + 4 * q + 4 <= BM, the word
                // index is a multiple of 4; stage `cur` is written only
                // before the barrier that ended the previous iteration
                // (or the prologue's) and next after this iteration's.
                let v = unsafe { a_tile.load4(dot, t_row * TM + 4 * q) };
                unroll!(4; 4, |e| { a_frag[4 * q + e] = v[e] });
            });
            unroll!(TN / 4; 2, |q| {
                // SAFETY: dot < BK, t_col * TN + 4 * q + 4 <= BN, the word
                // index is a multiple of 4; as above.
                let v = unsafe { b_tile.load4(dot, t_col * TN + 4 * q) };
                unroll!(4; 4, |e| { b_frag[4 * q + e] = v[e] });
            });
            unroll!(TM; 8, |i| {
                unroll!(TN; 8, |j| {
                    acc[i][j] = fma(a_frag[i], b_frag[j], acc[i][j]);
                });
            });
        }

        if has_next {
            // Stage 1 - cur was last read in the previous iteration, and
            // every thread passed the barrier that ended it before getting
            // here; it is read next after the barrier below.
            stash(1 - cur, next.0, next.1);
        }
        // The one barrier per step: the other stage is complete, and all
        // reads of this one are done before the next iteration's stash.
        sync_threads();
        cur = 1 - cur;
        k0 += BK;
    }

    unroll!(TM; 8, |i| {
        let row = row0 + t_row * TM + i;
        let col = col0 + t_col * TN;
        if GUARD {
            unroll!(TN; 8, |j| {
                if row < g.m && col + j < g.n {
                    // SAFETY: row < m and col + j < n; this thread alone
                    // owns C[row][col + j].
                    unsafe { g.store_c(row * g.ldc + col + j, acc[i][j]) };
                }
            });
        } else {
            unroll!(TN / 4; 2, |q| {
                let v = [acc[i][4 * q], acc[i][4 * q + 1], acc[i][4 * q + 2], acc[i][4 * q + 3]];
                // SAFETY: the block lies inside C, so row < m and
                // col + 4 * q + 4 <= n; ldc % 4 == 0 (vec4) and col % 4 == 0 keep the
                // index a multiple of 4; this thread alone owns these words.
                unsafe { g.store_c4(row * g.ldc + col + 4 * q, v) };
            });
        }
    });
}

crate::gemm_kernel!(double_buffer);
