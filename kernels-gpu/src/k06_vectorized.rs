//! Step 06: vectorized memory access. Step 05's kernel (128x128 block
//! tile, BK = 8, an 8x8 square of C per thread, 256 threads) with every
//! hot access made 128 bits wide:
//!
//! - global loads of A and B are `ld.global.v4.f32` (`GlobalIn::read4`):
//!   one per thread per tile instead of four scalar loads each;
//! - A is stored transposed in shared memory (`As[BK][BM]`), so the TM
//!   values of A a thread needs for one `dot` are consecutive words, like
//!   B's; the inner loop reads each fragment with two `ld.shared.v4.f32`
//!   (`SharedTile::load4`) instead of eight scalar loads;
//! - the interior epilogue writes C with `st.global.v4.f32`.
//!
//! Why it should be faster: step 05 issues 16 scalar shared loads per 64
//! FMAs, 4 of every 20 instructions of the inner loop; here it is 4 vector
//! loads per 64 FMAs, and global loads drop from 8 to 2 instructions per
//! thread per tile. The price is the transposing store of A (4 scalar
//! `st.shared`, 2-way bank conflicted). Prediction: 1.1-1.3x over step 05,
//! 28-34 TFLOP/s on an H200.
//!
//! Measured: the README's bench table and docs/bench.json (`cargo xtask
//! bench`); past runs, with the prediction next to the outcome, in
//! docs/measurements.md. Registers per entry: `cargo test -p tests --test
//! ptx -- --nocapture`.
//!
//! Edges: the vector path needs the block inside C, K % BK == 0 and
//! 16-byte aligned rows of A, B and C (`Gemm::vec4`: aligned starts,
//! leading dimensions multiples of 4). Otherwise the block takes the guarded path: the same shared
//! layout, filled by scalar loads that stage zeros outside A and B, and
//! scalar stores only inside C. The choice is block-uniform; both paths
//! reach the same barriers.

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

/// `As[8][128]`: this phase's tile of A, transposed (`As[kk][m]`).
const A_SHARED: SharedTile<BK, BM> = SharedTile::at(0);
/// `Bs[8][128]`: this phase's tile of B. Starts at a multiple of 4 words.
const B_SHARED: SharedTile<BK, BN> = SharedTile::at(A_SHARED.end());
/// Shared memory per block: both tiles (8 KB).
pub const SHARED_BYTES: usize = B_SHARED.end() * 4;

const _: () =
    assert!(A_SHARED.end().is_multiple_of(4) && BM.is_multiple_of(4) && BN.is_multiple_of(4));

pub const SPEC: KernelSpec = KernelSpec {
    name: "vectorized",
    step: 6,
    module: &modules::LADDER,
    elems: Elems::FP32,
    summary: "step 05 with 128-bit global and shared loads (A transposed in shared memory)",
    launch: Launch {
        block_threads: (THREADS as u32, 1),
        block_tile: (BM, BN),
        shared_bytes: SHARED_BYTES,
        register_cap: false,
        persistent: false,
    },
    model_reuse: (BM, BN),
    body: emulated!(vectorized),
    operands: Operands::Pointers,
    ops: Ops::NN,
    batches: true,
};

/// Picks the vector body for interior blocks of aligned shapes.
#[inline(always)]
pub fn vectorized(g: Gemm) {
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

    let mut a_idx = (row0 + a_r) * g.lda + a_c;
    let mut b_idx = b_r * g.ldb + col0 + b_c;
    let a_stride = A_ROW_STRIDE * g.lda;
    let b_stride = B_ROW_STRIDE * g.ldb;
    let b_step = BK * g.ldb;

    let mut k0 = 0;
    while k0 < g.k {
        // All global loads first, then the shared stores: the loads are in
        // flight together, and B's float4 is not turned into a 16-byte
        // memcpy (a load feeding a store directly became two 64-bit pairs).
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
        unroll!(A_VECS; 1, |i| {
            let r = a_r + i * A_ROW_STRIDE;
            unroll!(4; 4, |j| {
                // SAFETY: a_c + j < BK and r < BM (a_r < A_ROW_STRIDE,
                // i < A_VECS); one owner per word; the previous phase's
                // closing barrier ordered this write after its reads.
                unsafe { A_SHARED.store(a_c + j, r, a_vecs[i][j]) };
            });
        });
        unroll!(B_VECS; 1, |i| {
            let r = b_r + i * B_ROW_STRIDE;
            // SAFETY: r < BK, b_c + 4 <= BN; word B_SHARED.offset + r * BN +
            // b_c is a multiple of 4; one owner per word; ordered as above.
            unsafe { B_SHARED.store4(r, b_c, b_vecs[i]) };
        });
        sync_threads();

        // Rolled on purpose (see step 05); indices inside are literals.
        for dot in 0..BK {
            unroll!(TM / 4; 2, |q| {
                // SAFETY: dot < BK, t_row * TM + 4 * q + 4 <= BM, and the
                // word index dot * BM + t_row * TM + 4 * q is a multiple of
                // 4; no writes before the next barrier.
                let v = unsafe { A_SHARED.load4(dot, t_row * TM + 4 * q) };
                unroll!(4; 4, |e| { a_frag[4 * q + e] = v[e] });
            });
            unroll!(TN / 4; 2, |q| {
                // SAFETY: dot < BK, t_col * TN + 4 * q + 4 <= BN, the word
                // index is a multiple of 4 (B_SHARED starts at one); as above.
                let v = unsafe { B_SHARED.load4(dot, t_col * TN + 4 * q) };
                unroll!(4; 4, |e| { b_frag[4 * q + e] = v[e] });
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

crate::gemm_kernel!(vectorized);
