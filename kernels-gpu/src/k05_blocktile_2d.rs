//! Step 05: 2-D register blocking. Each of 256 threads computes a TM x TN
//! = 8x8 square of C; a block owns a 128x128 tile and walks K in steps of
//! BK = 8. Per step of `dot` a thread loads TM values of A and TN values
//! of B into registers and does their outer product: TM * TN FMAs.
//!
//! Why it should be faster: step 04 needs 9 shared loads per 8 FMAs; an
//! 8x8 outer product needs 16 per 64, a 4.5x better ratio, so the FMA pipe
//! rather than shared memory becomes the limit. The block tile doubles in
//! each direction, so each staged element feeds 128 multiply-adds (traffic
//! model: reuse 128 both ways). What is still poor: the loads are scalar
//! and the reads of B are 4-way bank conflicted (16 distinct `t_col`s per
//! warp, 8 words apart). Prediction: about 1.8x over step 04, 22-28
//! TFLOP/s on an H200.
//!
//! Measured: the README's bench table and docs/bench.json (`cargo xtask
//! bench`); past runs, with the prediction next to the outcome, in
//! docs/measurements.md. Registers per entry: `cargo test -p tests --test
//! ptx -- --nocapture`.
//!
//! Edges: a block entirely inside C with K % BK == 0 takes the unguarded
//! path; any other block stages zeros outside A and B and stores only
//! inside C. The choice is block-uniform and both paths reach the same
//! barriers.

use crate::device::{SharedTile, block_idx_x, block_idx_y, fma, sync_threads, thread_idx_x};
use crate::gemm::Gemm;
use crate::elem::Elems;
use crate::launch::{KernelSpec, Launch, Operands, Ops, emulated};
use crate::modules;
use crate::unroll::unroll;


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
/// Elements of each tile every thread stages per phase.
const A_LOADS: usize = BM * BK / THREADS;
const B_LOADS: usize = BK * BN / THREADS;
/// Rows between one thread's successive staged elements.
const A_ROW_STRIDE: usize = THREADS / BK;
const B_ROW_STRIDE: usize = THREADS / BN;

const _: () = assert!(THREADS.is_multiple_of(BK) && THREADS.is_multiple_of(BN));
const _: () = assert!(A_LOADS * THREADS == BM * BK && B_LOADS * THREADS == BK * BN);

/// `As[128][8]`: this phase's tile of A.
const A_SHARED: SharedTile<BM, BK> = SharedTile::at(0);
/// `Bs[8][128]`: this phase's tile of B.
const B_SHARED: SharedTile<BK, BN> = SharedTile::at(A_SHARED.end());
/// Shared memory per block: both tiles (8 KB).
pub const SHARED_BYTES: usize = B_SHARED.end() * 4;

pub const SPEC: KernelSpec = KernelSpec {
    name: "blocktile_2d",
    step: 5,
    module: &modules::LADDER,
    elems: Elems::FP32,
    summary: "128x128 block tile, each thread an 8x8 square (outer products in registers)",
    launch: Launch {
        block_threads: (THREADS as u32, 1),
        block_tile: (BM, BN),
        shared_bytes: SHARED_BYTES,
        register_cap: false,
        persistent: false,
    },
    model_reuse: (BM, BN),
    body: emulated!(blocktile_2d),
    operands: Operands::Pointers,
    ops: Ops::NN,
    batches: true,
};

/// Picks the unguarded body for interior blocks of aligned shapes.
#[inline(always)]
pub fn blocktile_2d(g: Gemm) {
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
/// guarantees the block lies inside C and `K % BK == 0`.
#[inline(always)]
fn body<const GUARD: bool>(g: Gemm, row0: usize, col0: usize) {
    let t = thread_idx_x();
    // Staging roles: column a_c of A's tile at rows a_r + i * A_ROW_STRIDE,
    // column b_c of B's tile at rows b_r + i * B_ROW_STRIDE.
    let (a_r, a_c) = (t / BK, t % BK);
    let (b_r, b_c) = (t / BN, t % BN);
    // Compute role: the TM x TN square at (t_row * TM, t_col * TN).
    let (t_row, t_col) = (t / (BN / TN), t % (BN / TN));

    let mut acc = [[0.0f32; TN]; TM];
    let mut a_frag = [0.0f32; TM];
    let mut b_frag = [0.0f32; TN];

    let mut a_idx = (row0 + a_r) * g.lda + a_c;
    let mut b_idx = b_r * g.ldb + col0 + b_c;
    let a_stride = A_ROW_STRIDE * g.lda;
    let b_stride = B_ROW_STRIDE * g.ldb;
    let b_step = BK * g.ldb;

    let mut k0 = 0;
    while k0 < g.k {
        for i in 0..A_LOADS {
            let r = a_r + i * A_ROW_STRIDE;
            let v = if !GUARD || (row0 + r < g.m && k0 + a_c < g.k) {
                // SAFETY: row0 + r < m and k0 + a_c < k (checked, or the
                // interior contract); the index is (row0 + r) * k + k0 + a_c.
                unsafe { g.a.read(a_idx + i * a_stride) }
            } else {
                0.0
            };
            // SAFETY: r < BM (a_r < THREADS / BK = A_ROW_STRIDE, i < A_LOADS),
            // a_c < BK; one owner per word; the previous phase's closing
            // barrier ordered this write after its reads.
            unsafe { A_SHARED.store(r, a_c, v) };
        }
        for i in 0..B_LOADS {
            let r = b_r + i * B_ROW_STRIDE;
            let v = if !GUARD || (k0 + r < g.k && col0 + b_c < g.n) {
                // SAFETY: k0 + r < k and col0 + b_c < n (checked, or the
                // interior contract); the index is (k0 + r) * n + col0 + b_c.
                unsafe { g.b.read(b_idx + i * b_stride) }
            } else {
                0.0
            };
            // SAFETY: r < BK, b_c < BN; one owner per word; ordered as above.
            unsafe { B_SHARED.store(r, b_c, v) };
        }
        sync_threads();

        // The `dot` loop stays a loop: fully unrolled, LLVM hoists all 128
        // shared loads of the phase ahead of the FMAs and ptxas needs 168
        // registers (one block per SM); rolled it needs 122. Inside one
        // iteration every register array index is a literal.
        for dot in 0..BK {
            unroll!(TM; 8, |i| {
                // SAFETY: t_row * TM + i < BM, dot < BK; no writes before
                // the next barrier.
                a_frag[i] = unsafe { A_SHARED.load(t_row * TM + i, dot) };
            });
            unroll!(TN; 8, |j| {
                // SAFETY: dot < BK, t_col * TN + j < BN; as above.
                b_frag[j] = unsafe { B_SHARED.load(dot, t_col * TN + j) };
            });
            unroll!(TM; 8, |i| {
                unroll!(TN; 8, |j| {
                    acc[i][j] = fma(a_frag[i], b_frag[j], acc[i][j]);
                });
            });
        }
        sync_threads();

        k0 += BK;
        a_idx += BK;
        b_idx += b_step;
    }

    unroll!(TM; 8, |i| {
        let row = row0 + t_row * TM + i;
        unroll!(TN; 8, |j| {
            let col = col0 + t_col * TN + j;
            if !GUARD || (row < g.m && col < g.n) {
                // SAFETY: row < m and col < n (checked, or the block lies
                // inside C); this thread alone owns C[row][col].
                unsafe { g.store_c(row * g.ldc + col, acc[i][j]) };
            }
        });
    });
    if g.ep.flags != 0 {
        // SAFETY: this thread's own TM x TN square, stored above.
        unsafe { g.fuse_region((row0 + t_row * TM, col0 + t_col * TN), (TM, TN), 0, 1) };
    }
}

crate::gemm_kernel!(blocktile_2d);
