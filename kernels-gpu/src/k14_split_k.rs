//! Step 14: split-K. Every step so far gives each block one tile of C and
//! walks all of K: C has `ceil(m / BM) * ceil(n / BN)` tiles, so a small C
//! over a long K (512 x 512 x 16,384: 16 tiles of 128 x 128 for 132 SMs)
//! leaves most of the GPU idle however fast one block is.
//!
//! What changes: K is cut into `slices` pieces of `k_slice` (a multiple of
//! the kernel's BK), and the grid's z runs over them. Block `(x, y, z)`
//! computes tile `(x, y)` over slice `z` only and writes its partial sum
//! to its own plane of a workspace (`slices x m x n`, dense). No kernel
//! changes for it: a split launch is a batch (`GemmParams`: A advances by
//! `k_slice` columns, B by `k_slice` rows, C by a plane per product, and
//! `Gemm::from_raw` clips the last slice's depth), so any FP32 kernel of
//! the ladder can run split. A second launch, `reduce_slices` below, adds
//! the planes and applies the epilogue: `C = alpha * sum + beta * C`.
//!
//! The sum is deterministic: each element of C is added up in one fixed
//! order (no atomics; the reduction's warps each add every eighth slice
//! in turn, then their eight sums are added in warp order), so the same
//! inputs give the same bits every time; they differ from the unsplit
//! kernel's bits in rounding only (another summation order).
//!
//! Cost: the partial sums travel through memory, `2 * slices * m * n`
//! floats written and read. The library (`host`'s `blas`) splits only when
//! C's tiles do not fill the GPU and K is long enough to pay for it.
//!
//! Prediction (H200, 512 x 512 x 16,384): from 16 busy SMs to about 128,
//! a 5-8x speed-up over the unsplit kernel. Measured: the suite table of
//! `cargo xtask bench --suite` (README) and docs/measurements.md.

use crate::device::{SharedTile, block_idx_x, block_idx_y, sync_threads, thread_idx_x};
use crate::gemm::Gemm;
use crate::elem::Elems;
use crate::launch::{KernelSpec, Launch, Operands, Ops, emulated};
use crate::modules;
use crate::unroll::unroll;

/// Threads per block: [`WARPS`] warps over one strip of C.
pub const THREADS: usize = 256;
/// Warps per block: warp `w` adds slices `w`, `w + WARPS`, ... of the
/// strip.
pub const WARPS: usize = THREADS / 32;
/// Rows of C per block (so that the grid stays within 65,535 rows for
/// every m the host accepts).
pub const ROWS: usize = 32;
/// Columns of C per block: a warp's lanes.
pub const COLS: usize = 32;
/// A strip of at most this many rows of C takes its slices
/// [`FEW_SLICES`] at a time.
const FEW_ROWS: usize = 8;
/// Slices a warp loads per trip over a strip of [`FEW_ROWS`] rows.
const FEW_SLICES: usize = 4;
/// Rows of the strip each thread finishes (adds the warps' sums, stores).
const PER_THREAD: usize = ROWS / WARPS;
/// The warps' sums of the strip, `[WARPS * ROWS][COLS]`: warp `w`'s row
/// `r` at row `w * ROWS + r`.
const SUMS: SharedTile<{ WARPS * ROWS }, COLS> = SharedTile::at(0);
/// Shared memory per block: the warps' sums (32 KB).
pub const SHARED_BYTES: usize = SUMS.end() * 4;

const _: () = assert!(ROWS.is_multiple_of(WARPS) && COLS == 32);

/// The reduction, launched like a GEMM kernel with the workspace as A (B
/// is not read): `C[r][c] = alpha * sum_{s < slices} W[s][r][c] + beta *
/// C[r][c]`, where `W` is `slices` dense `m x n` planes. With `slices = 0`
/// it is `C = beta * C` (what the library enqueues when `alpha = 0`, which
/// must not read A or B), one product per grid z.
pub const REDUCE: KernelSpec = KernelSpec {
    name: "reduce_slices",
    step: 14,
    module: &modules::LADDER,
    elems: Elems::FP32,
    summary: "split-K's reduction: C = alpha * (sum of the slices' partial sums) + beta * C",
    launch: Launch {
        block_threads: (THREADS as u32, 1),
        block_tile: (ROWS, COLS),
        shared_bytes: SHARED_BYTES,
        register_cap: false,
        persistent: false,
    },
    model_reuse: (1, 1),
    body: emulated!(reduce_slices),
    operands: Operands::Pointers,
    ops: Ops::NN,
    batches: true,
};

/// A block per ROWS x COLS strip of C, in two phases.
///
/// 1. Warp `w` adds slices `w`, `w + WARPS`, ... of the strip, lane `l`
///    column `l`, its ROWS sums at once: a slice's ROWS loads are
///    independent and unconditional (rows past C's last read the last row
///    again, and are not stored), so they are in flight together, and
///    the warps' loads with them. A thread per column walking every slice
///    (the first form) waited out one round trip per slice, one after
///    another: 32 slices over a C of 9 columns kept 36 threads busy for
///    32 trips (docs/measurements.md, twenty-ninth and thirty-second
///    sessions); here each warp makes an eighth of them. A strip of at
///    most [`FEW_ROWS`] rows spends the same loads on [`FEW_SLICES`]
///    slices per trip instead (the ROWS loads of a trip would be the
///    last row again), a quarter of the trips again.
/// 2. After a barrier, thread `(w, l)` adds the warps' sums of rows
///    `PER_THREAD * w ..` of column `l`, warp 0's first, and stores them
///    through the epilogue.
///
/// The order is fixed, so the result is the same on every run.
#[inline(always)]
pub fn reduce_slices(g: Gemm) {
    let t = thread_idx_x();
    let (warp, lane) = (t / 32, t % 32);
    let col = block_idx_x() * COLS + lane;
    let row0 = block_idx_y() * ROWS;
    let plane = g.m * g.n;
    let mut sums = [0.0f32; ROWS];
    // Lanes past C's last column add nothing (and reach the barrier).
    if col < g.n {
        let mut s = warp;
        if g.m - row0 <= FEW_ROWS {
            // A strip of few rows (a small C over a long K): the same
            // loads per trip spread over FEW_SLICES of the warp's slices
            // instead of the rows, so that it makes a FEW_SLICES-th of
            // the trips. Each sum still adds slices s, s + WARPS, ... in
            // that order, as the loop below does.
            while s + (FEW_SLICES - 1) * WARPS < g.slices {
                let mut v = [[0.0f32; FEW_ROWS]; FEW_SLICES];
                unroll!(FEW_SLICES; 4, |j| {
                    unroll!(FEW_ROWS; 8, |r| {
                        let row = (row0 + r).min(g.m - 1);
                        // SAFETY: s + j * WARPS < slices, row < m, col < n:
                        // inside the workspace (as below).
                        v[j][r] = unsafe { g.a.read((s + j * WARPS) * plane + row * g.n + col) };
                    });
                });
                unroll!(FEW_SLICES; 4, |j| {
                    unroll!(FEW_ROWS; 8, |r| { sums[r] += v[j][r] });
                });
                s += FEW_SLICES * WARPS;
            }
        }
        while s < g.slices {
            unroll!(ROWS; 32, |r| {
                // The block exists, so row0 < m.
                let row = (row0 + r).min(g.m - 1);
                // SAFETY: s < slices, row < m, col < n: inside the workspace
                // of `slices` dense m x n planes (the host's contract).
                sums[r] += unsafe { g.a.read(s * plane + row * g.n + col) };
            });
            s += WARPS;
        }
    }
    unroll!(ROWS; 32, |r| {
        // SAFETY: warp * ROWS + r < WARPS * ROWS and lane < COLS; each
        // word has one writer, read only after the barrier below.
        unsafe { SUMS.store(warp * ROWS + r, lane, sums[r]) };
    });
    sync_threads();
    if col >= g.n {
        return;
    }
    let first = row0 + PER_THREAD * warp;
    unroll!(PER_THREAD; 4, |i| {
        let row = first + i;
        if row < g.m {
            let mut sum = 0.0f32;
            unroll!(WARPS; 8, |w| {
                // SAFETY: inside the tile; written before the barrier.
                sum += unsafe { SUMS.load(w * ROWS + PER_THREAD * warp + i, lane) };
            });
            // SAFETY: row < m, col < n; this thread alone owns C[row][col].
            unsafe { g.store_c(row * g.ldc + col, sum) };
        }
    });
    if g.ep.flags != 0 {
        // SAFETY: this thread's own elements of the strip, stored above.
        unsafe { g.fuse_region((first, col), (PER_THREAD, 1), 0, 1) };
    }
}

crate::gemm_kernel!(reduce_slices);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emu;
    use crate::gemm::GemmParams;

    #[test]
    fn the_entry_is_registered() {
        assert!(crate::registry::HELPERS.iter().any(|k| k.name == REDUCE.name));
    }

    #[test]
    fn adds_the_planes_and_applies_the_epilogue() {
        // Strips of few rows too: 3 x 1 over 64 slices (whole groups of
        // FEW_SLICES per warp), 5 x 40 over 37 (groups, then single
        // slices), 40 x 3 over 33 (a full strip, then one of 8 rows).
        for (m, n, slices) in [
            (33, 300, 3),
            (110, 9, 19),
            (1, 1, 1),
            (70, 33, 8),
            (3, 1, 64),
            (5, 40, 37),
            (40, 3, 33),
        ] {
            adds_the_planes(m, n, slices);
        }
    }

    /// Integer planes, so that every order of the sum gives the exact sum.
    fn adds_the_planes(m: usize, n: usize, slices: usize) {
        let ws: Vec<f32> = (0..slices * m * n).map(|i| (i % 7) as f32 - 3.0).collect();
        let ldc = n + 5;
        let c: Vec<f32> = (0..m * ldc).map(|i| (i % 5) as f32).collect();
        let p = GemmParams {
            alpha: 2.0,
            beta: -1.0,
            ldc: ldc as u32,
            slices: slices as u32,
            ..GemmParams::dense(m as u32, n as u32, 1)
        };
        let r = emu::run(&REDUCE, reduce_slices, &p, 1, &ws, &ws, &c);
        assert!(r.is_clean(), "{r}");
        for row in 0..m {
            for col in 0..ldc {
                let got = r.c[row * ldc + col];
                let want = if col < n {
                    let sum: f32 = (0..slices).map(|s| ws[s * m * n + row * n + col]).sum();
                    2.0 * sum - c[row * ldc + col]
                } else {
                    c[row * ldc + col]
                };
                assert_eq!(got, want, "{m}x{n}, {slices} slices: row {row} col {col}");
            }
        }
    }

    #[test]
    fn no_slices_and_beta_zero_writes_zeros_without_reading_c() {
        let (m, n) = (5, 7);
        let p = GemmParams {
            alpha: 0.0,
            beta: 0.0,
            ..GemmParams::dense(m, n, 1)
        };
        let c = vec![f32::NAN; (m * n) as usize];
        // No slices: the workspace (A) is not read either (NaN would show).
        let ws = vec![f32::NAN; (m * n) as usize];
        let r = emu::run(&REDUCE, reduce_slices, &p, 1, &ws, &ws, &c);
        assert!(r.is_clean(), "{r}");
        assert!(r.c.iter().all(|&x| x == 0.0), "{:?}", r.c);
    }
}
