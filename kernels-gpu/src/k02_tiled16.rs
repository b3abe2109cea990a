//! Step 02: the lesson's kernel. Each 16x16 block stages a 16x16 tile of A
//! and one of B in shared memory per phase of K, so every element loaded
//! from global memory feeds 16 multiply-adds instead of one.
//!
//! Why it should be faster: in the lesson's model each block loads
//! 2 * 16 * 16 floats per phase instead of 2 * 256 * 16, a 16x cut in DRAM
//! traffic (549 GB -> 34 GB at n = 4096) and a 16x higher roofline.
//! What the H200 says instead is in the README: its L1 and L2 already
//! absorb most of the naive kernel's re-reads.
//!
//! Tiles are `[16][17]` as in the lesson: the pad was meant to keep the
//! column reads of B conflict-free. In this kernel a warp reads B along a
//! row (`B_s[kk][tx]`, consecutive words) and A as a broadcast, so the pad
//! buys nothing and makes the two half-warps' stores of a tile land on
//! the same banks (2-way conflicts); the README shows the measurement
//! (`tiled16_nopad` is this kernel without the pad).
//!
//! Measured: the README's bench table and docs/bench.json (`cargo xtask
//! bench`; the Rust / CUDA C++ column compares it with its CUDA C++ twin);
//! past runs in docs/measurements.md. Registers per entry: `cargo test
//! -p tests --test ptx -- --nocapture`.
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
pub const T: usize = 16;
/// The lesson's padding: one extra column per tile row.
pub const PAD: usize = 1;

/// `As[16][COLS]`: this phase's tile of A, in shared memory, and
/// `Bs[16][COLS]`: this phase's tile of B, right after A's. The kernel's
/// are `[16][17]` (`COLS = T + PAD`); [`tiled16_nopad`]'s are `[16][16]`.
const fn tiles<const COLS: usize>() -> (SharedTile<T, COLS>, SharedTile<T, COLS>) {
    let a_shared = SharedTile::at(0);
    (a_shared, SharedTile::at(a_shared.end()))
}
/// Shared memory per block: both tiles.
pub const SHARED_BYTES: usize = tiles::<{ T + PAD }>().1.end() * 4;

pub const SPEC: KernelSpec = KernelSpec {
    name: "tiled16",
    step: 2,
    module: &modules::LADDER,
    elems: Elems::FP32,
    summary: "the lesson: 16x16 tiles of A and B in shared memory ([16][17])",
    launch: Launch {
        block_threads: (T as u32, T as u32),
        block_tile: (T, T),
        shared_bytes: SHARED_BYTES,
        register_cap: false,
        persistent: false,
    },
    model_reuse: (T, T),
    body: emulated!(tiled16),
    operands: Operands::Pointers,
    ops: Ops::NN,
    batches: true,
};

/// The lesson's `matmul_tiled`, with edge guards.
pub fn tiled16(g: Gemm) {
    tiled16_with::<NONE, { T + PAD }>(g)
}

/// What [`tiled16_with`] breaks: nothing for the kernel; the others are
/// the `mutants` feature's test-only variants (constants, so the kernel's
/// PTX has no trace of them).
const NONE: u8 = 0;
const NO_FIRST_BARRIER: u8 = 1;
const NO_SECOND_BARRIER: u8 = 2;
const EDGE_RETURN: u8 = 3;

/// The kernel's body, with `MUTATION` applied and `[16][COLS]` tiles.
#[inline(always)]
fn tiled16_with<const MUTATION: u8, const COLS: usize>(g: Gemm) {
    let (a_shared, b_shared) = const { tiles::<COLS>() };
    let (tx, ty) = (thread_idx_x(), thread_idx_y());
    let row = block_idx_y() * T + ty; // this thread's element of C
    let col = block_idx_x() * T + tx;
    if MUTATION == EDGE_RETURN && (row >= g.m || col >= g.n) {
        // The naive kernel's guard: edge threads skip every barrier.
        return;
    }
    let mut acc = 0.0f32;

    // Loop over K in phases of T.
    let mut k0 = 0;
    while k0 < g.k {
        // Each thread loads ONE element of each tile (coalesced along tx).
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
            a_shared.store(ty, tx, a);
            b_shared.store(ty, tx, b);
        }
        // Barrier 1: no thread reads the tiles until all 256 have staged theirs.
        if MUTATION != NO_FIRST_BARRIER {
            sync_threads();
        }

        // 16 multiply-adds per thread, all served from shared memory.
        for kk in 0..T {
            // SAFETY: ty, kk, tx < T: inside both tiles; nobody writes the
            // tiles between barrier 1 and barrier 2.
            let (a, b) = unsafe { (a_shared.load(ty, kk), b_shared.load(kk, tx)) };
            acc = fma(a, b, acc);
        }

        // Barrier 2: every thread is done reading before the next phase
        // overwrites the tiles (the one the lesson says is easy to forget).
        if MUTATION != NO_SECOND_BARRIER {
            sync_threads();
        }
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

crate::gemm_kernel!(tiled16);

/// Broken variants of [`tiled16`], for the CPU emulator's tests only
/// (feature `mutants`; never in the PTX). Same body, one thing changed.
#[cfg(all(feature = "mutants", not(target_arch = "nvptx64")))]
pub mod mutants {
    use super::*;

    /// Barrier 1 removed: threads read tiles others are still writing.
    pub fn no_first_barrier(g: Gemm) {
        tiled16_with::<NO_FIRST_BARRIER, { T + PAD }>(g)
    }

    /// Barrier 2 removed: fast threads overwrite tiles slow ones still read.
    pub fn no_second_barrier(g: Gemm) {
        tiled16_with::<NO_SECOND_BARRIER, { T + PAD }>(g)
    }

    /// Edge threads (outside C) return before the loop, skipping barriers.
    pub fn edge_return(g: Gemm) {
        tiled16_with::<EDGE_RETURN, { T + PAD }>(g)
    }
}

/// The lesson's kernel with its pad removed: `[16][16]` tiles. Not a
/// ladder step but the lesson's own experiment, run on the GPU: the pad
/// was meant to prevent bank conflicts, and in this kernel it causes them
/// (the README shows both kernels' times and Nsight Compute's counts).
pub fn tiled16_nopad(g: Gemm) {
    tiled16_with::<NONE, T>(g)
}

pub const SPEC_NOPAD: KernelSpec = KernelSpec {
    name: "tiled16_nopad",
    step: 2,
    module: &modules::LADDER,
    elems: Elems::FP32,
    summary: "the lesson's kernel with unpadded [16][16] tiles",
    launch: Launch {
        block_threads: (T as u32, T as u32),
        block_tile: (T, T),
        shared_bytes: tiles::<T>().1.end() * 4,
        register_cap: false,
        persistent: false,
    },
    model_reuse: (T, T),
    body: emulated!(tiled16_nopad),
    operands: Operands::Pointers,
    ops: Ops::NN,
    batches: true,
};

/// `gemm_kernel!` makes one `entry` module per Rust module: this one gets its own.
mod nopad {
    #[cfg(target_arch = "nvptx64")]
    use super::tiled16_nopad;
    crate::gemm_kernel!(tiled16_nopad);
}
