//! Step 28: decode, `C = A B^T` with few rows of A. A model's linear
//! layer during token-by-token generation multiplies a handful of
//! activation rows (`m` of 1 to 16: the batch of sequences) by a weight
//! matrix stored as `n x k` rows, B transposed: every element of C is a
//! dot product of a row of A with a row of B, both contiguous. The weight
//! is read once and the time to beat is its bytes at DRAM speed. The
//! tiled kernels give each block a 128 x 128 tile of C, 127 of its 128
//! rows empty (docs/random-suite: decode runs at 0.2-0.3x cuBLAS SGEMM
//! there), and step 16 serves only one column (B's column contiguous).
//!
//! What changes from step 16: a warp per [`NB`] rows of B (columns of
//! C) and all of the block's [`MR`] rows of A, so each weight float4 a
//! lane loads feeds up to `MR` multiplies, while A's rows (small, read by
//! every warp) come from L1 and L2. Lanes read side by side along K in
//! 128-bit loads, the next round's in flight during this one's FMAs
//! ([`pipelined`]); each of the warp's `MR x NB` sums is added across
//! lanes with step 16's butterfly ([`warp_sum`]), deterministic, and lane
//! 0 stores. Rows of A past `m` are neither read nor summed (a uniform
//! test), so `m = 1` costs what step 16 costs per weight byte.
//!
//! Any shape runs: rows of A beyond `MR` take more rows of blocks, a
//! short or misaligned K takes the scalar loop. Split-K and batches come
//! from the entry (`gemm_kernel!`).
//!
//! The blocks that share the weight's rows run together: the kernel
//! numbers its blocks down the grid's columns first ([`tile_down_columns`]), so
//! the `ceil(m / MR)` blocks of one slice of B are adjacent in launch
//! order. The first to ask for a line of B takes it from DRAM and the
//! others from L2, so 17 to 64 rows of A read the weight from DRAM once,
//! not once per `MR` rows as in the grid's own order, where a row of
//! blocks sweeps all of B (larger than L2 in a model's layers) before the
//! next begins. Prediction: 21 x 4096 x 14336 (three rows of blocks) from
//! three passes over the weight at DRAM speed to one, 2-3x faster.
//! Measured far less (docs/measurements.md, thirty-sixth session): L2
//! then sets the pace, as each warp also reads its block's `MR` rows of A
//! from it, a float4 of each per round beside its `NB` rows of B; staging
//! A in shared memory once per block is the next step.
//!
//! Prediction (H200, 1 x 4096 x 11008, f32): the 180 MB weight at 3.5-4
//! TB/s, 45-52 us, against cuBLAS SGEMM's 57 us. Measured: `bench
//! --suite --random 2 --calls ...`, in docs/measurements.md (the recorded
//! runs in docs/random-suite predate this step).

use crate::device::warp::{WARP, lane, warp_idx, warp_sum};
use crate::device::fma;
use crate::elem::Elems;
use crate::gemm::{Gemm, tile_down_columns};
use crate::launch::{KernelSpec, Launch, Operands, Ops, emulated};
use crate::modules;
use crate::unroll::{pipelined, unroll};

/// Warps per block.
pub const WARPS: usize = 4;
/// Rows of B (columns of C) per warp.
pub const NB: usize = 4;
/// Rows of A (and of C) per block.
pub const MR: usize = 8;
/// Elements of K one round of the vector loop covers: a float4 per lane.
const STEP: usize = WARP * 4;
/// Rounds of the scalar loop (a float per lane each) whose loads are in
/// flight together.
const SCALAR_ROUNDS: usize = 4;

pub const SPEC: KernelSpec = KernelSpec {
    name: "decode_nt_8x16",
    step: 28,
    module: &modules::LADDER,
    elems: Elems::FP32,
    summary: "a warp per 4 stored rows of B (columns of C) and the block's 8 rows of A: 128-bit loads along K, a shuffle sum per element",
    launch: Launch {
        block_threads: ((WARPS * WARP) as u32, 1),
        block_tile: (MR, WARPS * NB),
        shared_bytes: 0,
        register_cap: false,
        persistent: false,
    },
    model_reuse: (1, 1),
    body: emulated!(decode_nt_8x16),
    operands: Operands::Pointers,
    ops: Ops::NT,
    batches: true,
};

/// `C[row][col] = sum_k A[row][k] * B[col][k]` (B stored `n x k`, row
/// `col` at `col * ldb`) for the block's rows and the warp's columns.
#[inline(always)]
pub fn decode_nt_8x16(g: Gemm) {
    let (m, n, k) = g.dims32();
    let (tile_row, tile_col) = tile_down_columns();
    let row0 = (tile_row * MR) as u32;
    let col0 = ((tile_col * WARPS + warp_idx()) * NB) as u32;
    let lane = lane() as u32;
    // Warp-uniform: every lane takes the same branches and loops, so all
    // of them reach the butterflies below.
    let row_in = |i: usize| row0 + (i as u32) < m;
    let col_in = |j: usize| col0 + (j as u32) < n;
    let mut acc = [[0.0f32; NB]; MR];
    let mut kk = 0u32;
    let vector = col_in(NB - 1) && g.rows16();
    if vector {
        // Every row of A and of B starts 16-byte aligned (rows16), and the
        // warp's NB rows of B lie inside it.
        type Round = ([[f32; 4]; MR], [[f32; 4]; NB]);
        let load = |kk: u32| -> Round {
            let c = kk + lane * 4;
            let mut a = [[0.0f32; 4]; MR];
            let mut b = [[0.0f32; 4]; NB];
            unroll!(NB; 4, |j| {
                // SAFETY: col0 + j < n (vector) and c + 4 <= k: B's row
                // col0 + j, elements c..c + 4, 16-byte aligned (rows16).
                b[j] = unsafe { g.b.read4(g.b_index(col0 + j as u32, c)) };
            });
            unroll!(MR; 8, |i| {
                if row_in(i) {
                    // SAFETY: row0 + i < m and c + 4 <= k, aligned (rows16).
                    a[i] = unsafe { g.a.read4(g.a_index(row0 + i as u32, c)) };
                }
            });
            (a, b)
        };
        let rounds = k / STEP as u32;
        pipelined(
            rounds,
            |r| load(r * STEP as u32),
            |(a, b): &Round| {
                unroll!(MR; 8, |i| {
                    if row_in(i) {
                        unroll!(NB; 4, |j| {
                            unroll!(4; 4, |e| {
                                acc[i][j] = fma(a[i][e], b[j][e], acc[i][j]);
                            });
                        });
                    }
                });
            },
        );
        kk = rounds * STEP as u32;
    }
    // What is left of K (all of it on the scalar path: a short K, or rows
    // not on 16 bytes), a float per lane per round, SCALAR_ROUNDS rounds'
    // loads in flight together (one round trip per round waited each
    // out in turn); each lane still adds its values in order of K.
    let mut c = kk + lane;
    while c < k {
        let mut a = [[0.0f32; SCALAR_ROUNDS]; MR];
        let mut b = [[0.0f32; SCALAR_ROUNDS]; NB];
        unroll!(SCALAR_ROUNDS; 4, |q| {
            let cq = c + (q * WARP) as u32;
            if cq < k {
                unroll!(NB; 4, |j| {
                    if col_in(j) {
                        // SAFETY: col0 + j < n and cq < k: B's row col0 + j.
                        b[j][q] = unsafe { g.b.read(g.b_index(col0 + j as u32, cq)) };
                    }
                });
                unroll!(MR; 8, |i| {
                    if row_in(i) {
                        // SAFETY: row0 + i < m and cq < k.
                        a[i][q] = unsafe { g.a.read(g.a_index(row0 + i as u32, cq)) };
                    }
                });
            }
        });
        // Past K the values are zeros: their product changes no sum.
        unroll!(SCALAR_ROUNDS; 4, |q| {
            unroll!(MR; 8, |i| {
                if row_in(i) {
                    unroll!(NB; 4, |j| { acc[i][j] = fma(a[i][q], b[j][q], acc[i][j]) });
                }
            });
        });
        c += (SCALAR_ROUNDS * WARP) as u32;
    }
    unroll!(MR; 8, |i| {
        unroll!(NB; 4, |j| {
            if row_in(i) && col_in(j) {
                // Every lane of the warp is here: the tests are uniform.
                let total = warp_sum(acc[i][j]);
                let (row, col) = (row0 + i as u32, col0 + j as u32);
                if lane == 0 {
                    // SAFETY: row < m and col < n; lane 0 of this warp
                    // alone writes C[row][col].
                    unsafe { g.store_c(g.c_index(row, col), total) };
                    if g.ep.flags != 0 {
                        // SAFETY: the element this lane just stored.
                        unsafe { g.fuse_region((row as usize, col as usize), (1, 1), 0, 1) };
                    }
                }
            }
        });
    });
}

crate::gemm_kernel!(decode_nt_8x16);
