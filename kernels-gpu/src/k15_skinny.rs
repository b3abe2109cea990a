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
//!
//! A second instance, `skinny_1x512`, is what the first one's measurement
//! called for (about half of DRAM speed, docs/measurements.md): a
//! thread's one 4-byte load per step of K, its FMA waiting on it, keeps
//! too few bytes in flight. Each of its 128 threads owns four columns,
//! read as one 128-bit load of B, and issues the loads of eight steps of
//! K a round before their FMAs (registers double-buffered,
//! `unroll::pipelined`): up to 320 bytes in flight per thread instead of
//! 4. Rows of B that are not 16-byte aligned, and the last columns of C,
//! take the scalar loads. Prediction: 20 us.

use crate::device::{block_idx_x, block_idx_y, fma, thread_idx_x};
use crate::gemm::Gemm;
use crate::elem::Elems;
use crate::launch::{KernelSpec, Launch, Operands, Ops, emulated};
use crate::modules;
use crate::unroll::{pipelined, unroll};

/// Rows of C per block, one after another (so that the grid stays within
/// CUDA's 65,535 rows of blocks for every m the host accepts; a C of one
/// row runs one of them).
pub const ROWS: usize = 16;

/// A block of `threads` threads, each owning `vec` consecutive columns.
const fn spec(name: &'static str, threads: usize, vec: usize, body: fn(Gemm)) -> KernelSpec {
    KernelSpec {
        name,
        step: 15,
        module: &modules::LADDER,
        elems: Elems::FP32,
        summary: "one row of threads per block: a row of C over a stream of B (with split-K)",
        launch: Launch {
            block_threads: (threads as u32, 1),
            block_tile: (ROWS, threads * vec),
            shared_bytes: 0,
            register_cap: false,
            persistent: false,
        },
        model_reuse: (1, 1),
        body: emulated!(body),
        operands: Operands::Pointers,
        ops: Ops::NN,
        batches: true,
    }
}

/// 256 threads, a column each.
pub const SPEC: KernelSpec = spec("skinny_1x256", 256, 1, skinny_1x256);
/// 128 threads, four columns each (128-bit loads of B), four steps of K
/// in flight.
pub const SPEC_1X512: KernelSpec = spec("skinny_1x512", 128, 4, skinny_1x512);

/// `C[row][col] = sum_k A[row][k] * B[k][col]` for the block's rows, one
/// after another, one column per thread.
pub fn skinny_1x256(g: Gemm) {
    let (m, n, k) = g.dims32();
    let row0 = (block_idx_y() * ROWS) as u32;
    let col = (block_idx_x() * 256 + thread_idx_x()) as u32;
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
        if g.ep.flags != 0 {
            // SAFETY: the element this thread just stored.
            unsafe { g.fuse_region((row as usize, col as usize), (1, 1), 0, 1) };
        }
        row += 1;
    }
}

/// Steps of K per round of `skinny_1x512`'s loads.
const UNROLL: usize = 8;

/// As [`skinny_1x256`], four columns per thread.
#[inline(always)]
pub fn skinny_1x512(g: Gemm) {
    let (m, n, k) = g.dims32();
    let row0 = (block_idx_y() * ROWS) as u32;
    let col = ((block_idx_x() * 128 + thread_idx_x()) * 4) as u32;
    if col >= n {
        return;
    }
    // Per thread: its four columns inside C, B's rows 16-byte aligned.
    let vector = col + 4 <= n && g.b.aligned(16) && g.ldb.is_multiple_of(4);
    let mut row = row0;
    while row < m && row < row0 + ROWS as u32 {
        let mut acc = [0.0f32; 4];
        let mut kk = 0u32;
        if vector {
            type Round = ([f32; UNROLL], [[f32; 4]; UNROLL]);
            let load = |kk: u32| -> Round {
                let mut a = [0.0f32; UNROLL];
                let mut b = [[0.0f32; 4]; UNROLL];
                unroll!(UNROLL; 8, |u| {
                    let r = kk + u as u32;
                    // SAFETY: row < m and r < k: inside A; r < k and
                    // col + 4 <= n: inside B, and the index is a multiple
                    // of 4 (ldb and col are) in a 16-byte aligned B.
                    unsafe {
                        a[u] = g.a.read(g.a_index(row, r));
                        b[u] = g.b.read4(g.b_index(r, col));
                    }
                });
                (a, b)
            };
            let rounds = k / UNROLL as u32;
            // The next round's loads in flight during this round's FMAs.
            pipelined(
                rounds,
                |r| load(r * UNROLL as u32),
                |(a, b): &Round| {
                    unroll!(UNROLL; 8, |u| {
                        unroll!(4; 4, |j| { acc[j] = fma(a[u], b[u][j], acc[j]) });
                    });
                },
            );
            kk = rounds * UNROLL as u32;
        }
        // The rest of K (all of it off the vector path), column by column.
        while kk < k {
            // SAFETY: row < m and kk < k.
            let a = unsafe { g.a.read(g.a_index(row, kk)) };
            unroll!(4; 4, |j| {
                if col + (j as u32) < n {
                    // SAFETY: kk < k and col + j < n.
                    let b = unsafe { g.b.read(g.b_index(kk, col + j as u32)) };
                    acc[j] = fma(a, b, acc[j]);
                }
            });
            kk += 1;
        }
        unroll!(4; 4, |j| {
            if col + (j as u32) < n {
                // SAFETY: row < m and col + j < n; this thread alone owns
                // C[row][col + j].
                unsafe { g.store_c(g.c_index(row, col + j as u32), acc[j]) };
            }
        });
        if g.ep.flags != 0 {
            // SAFETY: the (up to) four elements this thread just stored.
            unsafe { g.fuse_region((row as usize, col as usize), (1, 4), 0, 1) };
        }
        row += 1;
    }
}

crate::gemm_kernel!(skinny_1x256);
/// `gemm_kernel!` makes one `entry` module per Rust module: this one gets its own.
mod wide {
    #[cfg(target_arch = "nvptx64")]
    use super::skinny_1x512;
    crate::gemm_kernel!(skinny_1x512);
}
