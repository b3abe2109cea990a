//! Step 04: 1-D register blocking. Each thread computes a column of TM = 8
//! outputs of C instead of one; a block of 512 threads owns a 64x64 tile
//! of C and walks K in steps of BK = 8.
//!
//! Why it should be faster: step 03 is bound by shared-memory loads, two
//! per FMA. Here a thread loads one value of B per step of `dot` into a
//! register and reuses it for TM = 8 FMAs; the TM values of A it reads are
//! one broadcast address per warp (all 32 threads of a warp share
//! `t_row`). That is 9 shared loads per 8 FMAs instead of 16, and each
//! element staged in shared memory now feeds 64 multiply-adds per block
//! (traffic model: reuse 64 both ways). Prediction: about 2x over step 03,
//! 12-16 TFLOP/s on an H200.
//!
//! Measured: the README's bench table and docs/bench.json (`cargo xtask
//! bench`); past runs, with the prediction next to the outcome, in
//! docs/measurements.md. Registers per entry: `cargo test -p tests --test
//! ptx -- --nocapture`.
//!
//! Edges: a block entirely inside C with K % BK == 0 takes the unguarded
//! path; any other block stages zeros outside A and B and stores only
//! inside C. The choice depends only on the block index and the shape, so
//! it is uniform across the block, and both paths reach the same barriers.

use crate::device::{SharedTile, block_idx_x, block_idx_y, fma, sync_threads, thread_idx_x};
use crate::gemm::Gemm;
use crate::elem::Elems;
use crate::launch::{KernelSpec, Launch, Operands, Ops, emulated};
use crate::modules;

/// Rows of C per block.
pub const BM: usize = 64;
/// Columns of C per block.
pub const BN: usize = 64;
/// Step along K: A's tile is BM x BK, B's BK x BN.
pub const BK: usize = 8;
/// Outputs (rows of C) per thread.
pub const TM: usize = 8;
/// Threads per block: one per TM x 1 column piece of the block's tile.
pub const THREADS: usize = BM * BN / TM;

// Every thread stages exactly one element of each tile.
const _: () = assert!(THREADS == BM * BK && THREADS == BK * BN);

/// `As[64][8]`: this phase's tile of A.
const A_SHARED: SharedTile<BM, BK> = SharedTile::at(0);
/// `Bs[8][64]`: this phase's tile of B.
const B_SHARED: SharedTile<BK, BN> = SharedTile::at(A_SHARED.end());
/// Shared memory per block: both tiles (4 KB).
pub const SHARED_BYTES: usize = B_SHARED.end() * 4;

pub const SPEC: KernelSpec = KernelSpec {
    name: "blocktile_1d",
    step: 4,
    module: &modules::LADDER,
    elems: Elems::FP32,
    summary: "64x64 block tile, BK = 8, each thread computes 8 outputs in a column",
    launch: Launch {
        block_threads: (THREADS as u32, 1),
        block_tile: (BM, BN),
        shared_bytes: SHARED_BYTES,
        register_cap: false,
        persistent: false,
    },
    model_reuse: (BM, BN),
    body: emulated!(blocktile_1d),
    operands: Operands::Pointers,
    ops: Ops::NN,
    batches: true,
};

/// Picks the unguarded body for interior blocks of aligned shapes.
#[inline(always)]
pub fn blocktile_1d(g: Gemm) {
    let row0 = block_idx_y() * BM;
    let col0 = block_idx_x() * BN;
    // Block-uniform: depends on the block index and the shape only.
    if row0 + BM <= g.m && col0 + BN <= g.n && g.k.is_multiple_of(BK) {
        body::<false>(g, row0, col0);
    } else {
        body::<true>(g, row0, col0);
    }
}

/// The block at `(row0, col0)` of C. With `GUARD = false` the caller
/// guarantees the block lies inside C and `K % BK == 0`, so every access
/// below is in bounds without a check.
#[inline(always)]
fn body<const GUARD: bool>(g: Gemm, row0: usize, col0: usize) {
    let t = thread_idx_x();
    // Staging roles: one element of A's tile and one of B's per thread.
    let (a_r, a_c) = (t / BK, t % BK);
    let (b_r, b_c) = (t / BN, t % BN);
    // Compute role: rows t_row * TM .. + TM of the tile, column t_col.
    // A warp's 32 threads share t_row (BN = 64 > 32), so A reads broadcast.
    let (t_row, t_col) = (t / BN, t % BN);

    let mut acc = [0.0f32; TM];
    // Index in A / B of the element this thread stages at k0; advanced by
    // a constant (BK, BK * n) per phase instead of recomputed.
    let mut a_idx = (row0 + a_r) * g.lda + a_c;
    let mut b_idx = b_r * g.ldb + col0 + b_c;
    let b_step = BK * g.ldb;

    let mut k0 = 0;
    while k0 < g.k {
        let a = if !GUARD || (row0 + a_r < g.m && k0 + a_c < g.k) {
            // SAFETY: row0 + a_r < m and k0 + a_c < k (checked, or implied
            // by the interior contract), and a_idx == (row0 + a_r) * k + k0 + a_c.
            unsafe { g.a.read(a_idx) }
        } else {
            0.0
        };
        let b = if !GUARD || (k0 + b_r < g.k && col0 + b_c < g.n) {
            // SAFETY: k0 + b_r < k and col0 + b_c < n (checked, or implied
            // by the interior contract), and b_idx == (k0 + b_r) * n + col0 + b_c.
            unsafe { g.b.read(b_idx) }
        } else {
            0.0
        };
        // SAFETY: a_r < BM, a_c < BK, b_r < BK, b_c < BN (t < THREADS and
        // the assertion above); each word has one owner thread; the barrier
        // that ended the previous phase ordered these writes after its reads.
        unsafe {
            A_SHARED.store(a_r, a_c, a);
            B_SHARED.store(b_r, b_c, b);
        }
        sync_threads();

        for dot in 0..BK {
            // SAFETY: dot < BK, t_col < BN: inside Bs; no writes until the
            // next barrier.
            let b = unsafe { B_SHARED.load(dot, t_col) };
            for (i, acc) in acc.iter_mut().enumerate() {
                // SAFETY: t_row * TM + i < (THREADS / BN) * TM = BM, dot < BK.
                let a = unsafe { A_SHARED.load(t_row * TM + i, dot) };
                *acc = fma(a, b, *acc);
            }
        }
        sync_threads();

        k0 += BK;
        a_idx += BK;
        b_idx += b_step;
    }

    let col = col0 + t_col;
    for (i, &acc) in acc.iter().enumerate() {
        let row = row0 + t_row * TM + i;
        if !GUARD || (row < g.m && col < g.n) {
            // SAFETY: row < m and col < n (checked, or the block lies inside
            // C); this thread alone owns C[row][col].
            unsafe { g.store_c(row * g.ldc + col, acc) };
        }
    }
    if g.ep.flags != 0 {
        // SAFETY: this thread's own column of TM elements, stored above
        // (the pass clips it to C).
        unsafe { g.fuse_region((row0 + t_row * TM, col), (TM, 1), 0, 1) };
    }
}

crate::gemm_kernel!(blocktile_1d);
