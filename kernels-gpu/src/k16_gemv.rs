//! Step 16: a column of C (`m x 1 x k`: a matrix times a vector). Every
//! element of C is a dot product of a row of A with B, and A, read once,
//! is the whole cost: the time to beat is A's bytes at DRAM speed. The
//! tiled kernels give each block at least 64 columns of C, 63 of them
//! empty here; step 15 keeps one thread per element of C, so a thread
//! would walk a whole row of A alone, each load 4 bytes of a 128-byte
//! line its neighbours do not share.
//!
//! What changes: a warp per row (two rows, in fact, which share each load
//! of B). Its 32 lanes read the row in 128-bit loads side by side, 512
//! bytes per warp per load, four loads per row per round, the next
//! round's in flight during this one's multiplies; each lane keeps a partial sum of every 32nd float4, and the
//! warp adds the 32 partial sums in registers with a butterfly of
//! `shfl.sync` ([`crate::device::warp::warp_sum`]): no shared memory and
//! no barrier. Lane 0 writes the element. The sum is deterministic (the
//! butterfly's order is fixed).
//!
//! Any shape runs: column `x` of the grid is column `x` of C (B read down
//! that column), `ceil(m / 8)` rows of blocks. A warp's rows past m read
//! the last row again and are not stored, so that its loads stay
//! unconditional (a single row of C takes the vector loop too). K not a
//! multiple of the vector step, misaligned rows or a B column that is not
//! contiguous (`ldb != 1`) take the scalar loop, which keeps eight floats
//! of each row per lane in flight as the vector loop does its float4s (a
//! loop of one float per trip waited out a round trip per 32 floats: on a
//! long K that was most of the time). It is fast for few columns only:
//! every column re-reads A.
//!
//! A long K (a small C 10,000 to 100,000 deep) gives too few blocks to
//! read A at DRAM speed: the library splits K. This kernel has a second
//! entry, `gemv_warp_8x1_split`, that does it in one launch
//! ([`crate::split`]): block `z` reads slice `z` of its 8 rows, and the
//! last block of those rows to finish adds the slices; step 14's second
//! launch goes.
//!
//! Prediction (H200, 4096 x 1 x 4096): A's 64 MB at 3.5-4 TB/s, 17-19
//! us, against step 10 with split-K and cuBLAS's own GEMV in the suite.
//! Measured: the suite table of `cargo xtask bench --suite` (README) and
//! docs/measurements.md.

use crate::device::warp::{WARP, lane, warp_idx, warp_sum};
use crate::device::{block_idx_x, block_idx_y, fma};
use crate::gemm::Gemm;
use crate::elem::Elems;
use crate::launch::{KernelSpec, Launch, Operands, Ops, emulated};
use crate::modules;
use crate::unroll::{pipelined, unroll};

/// Warps per block.
pub const WARPS: usize = 4;
/// Rows of C per warp, computed together (each load of B serves them all).
pub const WARP_ROWS: usize = 2;
/// Rows of C per block.
pub const ROWS: usize = WARPS * WARP_ROWS;
/// float4s of each row a lane has in flight before the first multiply.
pub const UNROLL: usize = 4;
/// Elements of K one round of the vector loop covers.
const STEP: usize = WARP * 4 * UNROLL;
/// Floats of each row a lane has in flight on the scalar path (rows or
/// B not on 16 bytes, and what the vector loop leaves of K).
pub const SCALAR_UNROLL: usize = 8;
/// Elements of K one round of the scalar loop covers.
const SCALAR_STEP: usize = WARP * SCALAR_UNROLL;

pub const SPEC: KernelSpec = KernelSpec {
    name: "gemv_warp_8x1",
    step: 16,
    module: &modules::LADDER,
    elems: Elems::FP32,
    summary: "a warp per row of C: 128-bit loads along the row, a shuffle sum across lanes",
    launch: Launch {
        block_threads: ((WARPS * WARP) as u32, 1),
        block_tile: (ROWS, 1),
        shared_bytes: 0,
        register_cap: false,
        persistent: false,
    },
    model_reuse: (1, 1),
    body: emulated!(gemv_warp_8x1),
    operands: Operands::Pointers,
    ops: Ops::NN,
    batches: true,
};

/// `C[row][col] = sum_k A[row][k] * B[k][col]` for the warp's rows and the
/// block's column. Inlined into both paths of its entry (one product, a
/// batch): with the fused epilogue's pass LLVM would otherwise make it a
/// called function, whose arguments go through parameter space.
#[inline(always)]
pub fn gemv_warp_8x1(g: Gemm) {
    let (m, _, k) = g.dims32();
    let col = block_idx_x() as u32;
    let row0 = ((block_idx_y() * WARPS + warp_idx()) * WARP_ROWS) as u32;
    let lane = lane() as u32;
    let mut acc = [0.0f32; WARP_ROWS];
    if row0 >= m {
        // No row of C for this warp (the last row of blocks).
        return;
    }
    // The rows this warp reads: past C's last row, the last row again
    // (read, summed, never stored), so that every load is unconditional.
    let mut arow = [0u32; WARP_ROWS];
    unroll!(WARP_ROWS; 2, |r| { arow[r] = (row0 + r as u32).min(m - 1) });
    let mut kk = 0u32;
    let vector = g.a.aligned(16) && g.lda.is_multiple_of(4) && g.ldb == 1 && g.b.aligned(16);
    if vector {
        // B's column is contiguous (ldb = 1 means n = 1, so col = 0) and
        // starts 16-byte aligned, as does every row of A.
        type Round = ([[[f32; 4]; UNROLL]; WARP_ROWS], [[f32; 4]; UNROLL]);
        let load = |kk: u32| -> Round {
            let mut a = [[[0.0f32; 4]; UNROLL]; WARP_ROWS];
            let mut b = [[0.0f32; 4]; UNROLL];
            unroll!(UNROLL; 4, |u| {
                let c = kk + (u as u32 * WARP as u32 + lane) * 4;
                // SAFETY: c + 4 <= kk + STEP <= k rows of B's one column,
                // contiguous (ldb = 1); c % 4 == 0 and B is 16-byte aligned.
                b[u] = unsafe { g.b.read4(g.b_index(c, 0)) };
                unroll!(WARP_ROWS; 2, |r| {
                    // SAFETY: arow[r] < m and c + 4 <= k; lda % 4 == 0,
                    // c % 4 == 0 and A is 16-byte aligned.
                    a[r][u] = unsafe { g.a.read4(g.a_index(arow[r], c)) };
                });
            });
            (a, b)
        };
        let rounds = k / STEP as u32;
        // Round r + 1's loads in flight during round r's FMAs
        // (`pipelined`: in one straight line, ptxas interleaves three
        // loads with their FMAs, and a warp has a few loads in flight
        // instead of twelve).
        pipelined(
            rounds,
            |r| load(r * STEP as u32),
            |(a, b): &Round| {
                unroll!(UNROLL; 4, |u| {
                    unroll!(WARP_ROWS; 2, |r| {
                        unroll!(4; 4, |j| {
                            acc[r] = fma(a[r][u][j], b[u][j], acc[r]);
                        });
                    });
                });
            },
        );
        kk = rounds * STEP as u32;
    }
    // What is left of K (all of it where the rows or B are not on 16
    // bytes), a float per lane per load: rounds of SCALAR_UNROLL floats
    // of each row, pipelined as above, so that a lane has that many loads
    // in flight rather than one round trip per float; then one at a time.
    type Scalars = ([[f32; SCALAR_UNROLL]; WARP_ROWS], [f32; SCALAR_UNROLL]);
    let load = |c0: u32| -> Scalars {
        let mut a = [[0.0f32; SCALAR_UNROLL]; WARP_ROWS];
        let mut b = [0.0f32; SCALAR_UNROLL];
        unroll!(SCALAR_UNROLL; 8, |u| {
            let c = c0 + u as u32 * WARP as u32;
            // SAFETY: c0 is a full round's start plus the lane, so c is
            // inside that round, below k; col < n (n columns of blocks).
            b[u] = unsafe { g.b.read(g.b_index(c, col)) };
            unroll!(WARP_ROWS; 2, |r| {
                // SAFETY: arow[r] < m and c < k.
                a[r][u] = unsafe { g.a.read(g.a_index(arow[r], c)) };
            });
        });
        (a, b)
    };
    let rounds = (k - kk) / SCALAR_STEP as u32;
    pipelined(
        rounds,
        |r| load(kk + r * SCALAR_STEP as u32 + lane),
        |(a, b): &Scalars| {
            unroll!(SCALAR_UNROLL; 8, |u| {
                unroll!(WARP_ROWS; 2, |r| {
                    acc[r] = fma(a[r][u], b[u], acc[r]);
                });
            });
        },
    );
    let mut c = kk + rounds * SCALAR_STEP as u32 + lane;
    while c < k {
        // SAFETY: c < k and col < n.
        let b = unsafe { g.b.read(g.b_index(c, col)) };
        unroll!(WARP_ROWS; 2, |r| {
            // SAFETY: arow[r] < m and c < k.
            acc[r] = fma(unsafe { g.a.read(g.a_index(arow[r], c)) }, b, acc[r]);
        });
        c += WARP as u32;
    }
    unroll!(WARP_ROWS; 2, |r| {
        // Every lane of the warp is here (each has left the loops above).
        let total = warp_sum(acc[r]);
        let row = row0 + r as u32;
        if lane == 0 && row < m {
            // SAFETY: row < m and col < n; lane 0 of this warp alone
            // writes C[row][col].
            unsafe { g.store_c(g.c_index(row, col), total) };
            if g.ep.flags != 0 {
                // SAFETY: the element this lane just stored.
                unsafe { g.fuse_region((row as usize, col as usize), (1, 1), 0, 1) };
            }
        }
    });
}

/// The entry that splits K inside one launch ([`crate::split`]): each
/// block's slice of its 8 rows, then the last block of the rows adds
/// the slices.
pub const SPLIT_ENTRY: &str = "gemv_warp_8x1_split";

crate::gemm_kernel!(gemv_warp_8x1, split gemv_warp_8x1_split, SPEC);
