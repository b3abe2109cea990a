//! Step 15: skinny products. When C has one row (`1 x n x k`: a vector
//! times a matrix), every tiled step wastes its tile: step 10's 64 x 128
//! block computes one useful row in 64, and the naive kernel's 16 x 16
//! block one in 16. The product is a stream over B, each element used
//! once: the time to beat is reading B from DRAM.
//!
//! What changes from step 01: the block is one row of 256 threads, so
//! every thread of a block owns a column of the same rows of C (16 of
//! them, one after another: C's first row is the only one when m = 1); the read
//! of A is one broadcast address per warp, the reads of B are coalesced
//! rows, and nothing waits on shared memory or barriers. The grid is
//! `ceil(n / 256) x ceil(m / 16)`, so for `1 x 4096 x 4096` only 16 blocks: split-K
//! (step 14) supplies the rest, K cut into slices over the grid's z.
//!
//! Prediction (H200, 1 x 4096 x 4096 with 16 slices): B's 64 MB read at
//! 3-4 TB/s, 20-25 us, against 66 us for step 10 split 8. Measured: the
//! suite table of `cargo xtask bench --suite` (README) and
//! docs/measurements.md.

use crate::device::{block_idx_x, block_idx_y, fma, thread_idx_x};
use crate::gemm::Gemm;
use crate::launch::{Body, KernelSpec, Launch, Operands, Ops, Precision};
use crate::modules;

/// Threads per block: consecutive columns of C.
pub const THREADS: usize = 256;
/// Rows of C per block, one after another (so that the grid stays within
/// CUDA's 65,535 rows of blocks for every m the host accepts; a C of one
/// row runs one of them).
pub const ROWS: usize = 16;

pub const SPEC: KernelSpec = KernelSpec {
    name: "skinny_1x256",
    step: 15,
    module: &modules::LADDER,
    precision: Precision::Fp32,
    summary: "one row of 256 threads per block: a row of C over a stream of B (with split-K)",
    launch: Launch {
        block_threads: (THREADS as u32, 1),
        block_tile: (ROWS, THREADS),
        shared_bytes: 0,
        register_cap: false,
    },
    model_reuse: (1, 1),
    body: Body::Emulated(skinny_1x256),
    operands: Operands::Pointers,
    ops: Ops::NN,
    batches: true,
};

/// `C[row][col] = sum_k A[row][k] * B[k][col]` for the block's rows, one
/// after another, one column per thread.
pub fn skinny_1x256(g: Gemm) {
    let (m, n, k) = g.dims32();
    let row0 = (block_idx_y() * ROWS) as u32;
    let col = (block_idx_x() * THREADS + thread_idx_x()) as u32;
    // No barrier in this kernel, so edge threads may simply leave.
    if col >= n {
        return;
    }
    let mut row = row0;
    while row < m && row < row0 + ROWS as u32 {
        let mut acc = 0.0f32;
        for kk in 0..k {
            // SAFETY: row < m and kk < k: inside A; kk < k and col < n: inside B.
            let (a, b) = unsafe { (g.a.read(g.a_index(row, kk)), g.b.read(g.b_index(kk, col))) };
            acc = fma(a, b, acc);
        }
        // SAFETY: row < m and col < n; this thread alone owns C[row][col].
        unsafe { g.store_c(g.c_index(row, col), acc) };
        row += 1;
    }
}

crate::gemm_kernel!(skinny_1x256);
