//! Step 03: the lesson's "bigger tiles" rung. The same kernel as step 02
//! with 32x32 tiles and 32x32 = 1024 threads per block.
//!
//! Why it should be faster: each element staged in shared memory now
//! feeds 32 multiply-adds instead of 16, so in the lesson's model global
//! traffic halves again (34 GB -> 17 GB at n = 4096) and there are half as
//! many barriers per multiply-add. What it does not change is the inner
//! loop's diet: two shared-memory loads (one broadcast of A, one row of B)
//! per FMA, which caps this design at about 1/8 of the FP32 peak (shared
//! memory delivers 32 words per clock per SM, the FMA pipe 128 lanes).
//! Prediction: 1.1-1.25x over step 02, about 7-8 TFLOP/s on an H200.
//!
//! No padding: with 32-wide tiles a warp is exactly one tile row, so its
//! stores and its reads of B hit 32 consecutive words (conflict-free) and
//! its reads of A are one broadcast address. Two 32x32 tiles are the
//! lesson's "8 KB of shared memory per stage".
//!
//! Measured: the README's bench table and docs/bench.json (`cargo xtask
//! bench`); past runs, with the prediction next to the outcome, in
//! docs/measurements.md. Registers per entry: `cargo test -p tests --test
//! ptx -- --nocapture`.
//!
//! Any M, N, K >= 1: tile elements outside A or B are staged as zero,
//! threads outside C store nothing, and every thread reaches every barrier.

use crate::device::{
    SharedTile, block_idx_x, block_idx_y, fma, sync_threads, thread_idx_x, thread_idx_y,
};
use crate::gemm::Gemm;
use crate::elem::Elems;
use crate::launch::{KernelSpec, Launch, Operands, Ops, emulated};
use crate::modules;

/// Tile edge: blocks are T x T threads, tiles T x T floats, K steps by T.
pub const T: usize = 32;

type Tile = SharedTile<T, T>;
/// `As[32][32]`: this phase's tile of A.
const A_SHARED: Tile = Tile::at(0);
/// `Bs[32][32]`: this phase's tile of B, right after A's.
const B_SHARED: Tile = Tile::at(A_SHARED.end());
/// Shared memory per block: both tiles.
pub const SHARED_BYTES: usize = B_SHARED.end() * 4;

pub const SPEC: KernelSpec = KernelSpec {
    name: "tiled32",
    step: 3,
    module: &modules::LADDER,
    elems: Elems::FP32,
    summary: "the lesson's kernel with 32x32 tiles (1024 threads per block)",
    launch: Launch {
        block_threads: (T as u32, T as u32),
        block_tile: (T, T),
        shared_bytes: SHARED_BYTES,
        register_cap: false,
        persistent: false,
    },
    model_reuse: (T, T),
    body: emulated!(tiled32),
    operands: Operands::Pointers,
    ops: Ops::NN,
    batches: true,
};

/// Step 02's body with `T = 32`.
pub fn tiled32(g: Gemm) {
    let (tx, ty) = (thread_idx_x(), thread_idx_y());
    let row = block_idx_y() * T + ty; // this thread's element of C
    let col = block_idx_x() * T + tx;
    let mut acc = 0.0f32;

    let mut k0 = 0;
    while k0 < g.k {
        let a_col = k0 + tx;
        let b_row = k0 + ty;
        let a = if row < g.m && a_col < g.k {
            // SAFETY: row < m and a_col < k: inside A.
            unsafe { g.a.read(row * g.lda + a_col) }
        } else {
            0.0
        };
        let b = if b_row < g.k && col < g.n {
            // SAFETY: b_row < k and col < n: inside B.
            unsafe { g.b.read(b_row * g.ldb + col) }
        } else {
            0.0
        };
        // SAFETY: ty, tx < T (block is T x T): inside both tiles; each
        // (ty, tx) has one owner thread, and the barrier that ended the
        // previous phase ordered these writes after all reads of it.
        unsafe {
            A_SHARED.store(ty, tx, a);
            B_SHARED.store(ty, tx, b);
        }
        // Barrier 1: the tiles are fully staged.
        sync_threads();

        for kk in 0..T {
            // SAFETY: ty, kk, tx < T: inside both tiles; nobody writes the
            // tiles between barrier 1 and barrier 2.
            let (a, b) = unsafe { (A_SHARED.load(ty, kk), B_SHARED.load(kk, tx)) };
            acc = fma(a, b, acc);
        }

        // Barrier 2: all reads done before the next phase overwrites the tiles.
        sync_threads();
        k0 += T;
    }
    if row < g.m && col < g.n {
        // SAFETY: row < m and col < n; this thread alone owns C[row][col].
        unsafe { g.store_c(row * g.ldc + col, acc) };
        if g.ep.flags != 0 {
            // SAFETY: this thread's own element, stored just above.
            unsafe { g.fuse_region((row, col), (1, 1), 0, 1) };
        }
    }
}

crate::gemm_kernel!(tiled32);
