//! Step 01: naive. One thread per element of C; each thread walks a row of
//! A and a column of B straight from global memory.
//!
//! Consecutive threads of a warp (`threadIdx.x`) take consecutive columns,
//! so the reads of B and the write of C are coalesced and the read of A is
//! one broadcast address per warp. The lesson's model charges every one of
//! the 2K loads per output to DRAM (549 GB at n = 4096): this is the
//! baseline the tiled kernel is measured against.
//!
//! It is also a control for Rust against CUDA C++: a CUDA C++ twin
//! (`host/cuda/lesson.cu`) runs the same algorithm with the same launch,
//! so a difference between the two is the compilers', not the kernel's.
//! For that reason its offsets come from `Gemm::a_index`, `b_index` and
//! `c_index` ([`crate::gemm`]): 32-bit arithmetic without wrap-around
//! (`unchecked_mul`, `unchecked_add`), like the twin's `int`. That lets
//! LLVM step the pointers through A and B with 32-bit strides (one
//! `IMAD.WIDE` per step in SASS) and ptxas keep loads in flight; with
//! 64-bit (`usize`) offsets this kernel fell well behind its twin. The
//! explanation and its measurements: docs/rust-vs-cuda.md.
//!
//! Measured: the README's bench table and docs/bench.json (`cargo xtask
//! bench`; the Rust / CUDA C++ column compares it with its twin); past
//! runs in docs/measurements.md. Registers per entry: `cargo test -p tests
//! --test ptx -- --nocapture`.

use crate::device::{block_idx_x, block_idx_y, fma, thread_idx_x, thread_idx_y};
use crate::gemm::Gemm;
use crate::elem::Elems;
use crate::launch::{KernelSpec, Launch, Operands, Ops, emulated};
use crate::modules;

/// Threads per block along x and y; each block covers a BLOCK x BLOCK tile of C.
pub const BLOCK: usize = 16;

pub const SPEC: KernelSpec = KernelSpec {
    name: "naive",
    step: 1,
    module: &modules::LADDER,
    elems: Elems::FP32,
    summary: "one thread per C element, A and B read from global memory",
    launch: Launch {
        block_threads: (BLOCK as u32, BLOCK as u32),
        block_tile: (BLOCK, BLOCK),
        shared_bytes: 0,
        register_cap: false,
        persistent: false,
    },
    model_reuse: (1, 1),
    body: emulated!(naive),
    operands: Operands::Pointers,
    ops: Ops::NN,
    batches: true,
};

/// `C[row][col] = sum_k A[row][k] * B[k][col]`, one thread per `(row, col)`.
pub fn naive(g: Gemm) {
    // Coordinates in u32, as CUDA C++ uses int: see `Gemm::a_index`.
    let (m, n, k) = g.dims32();
    let row = (block_idx_y() * BLOCK + thread_idx_y()) as u32;
    let col = (block_idx_x() * BLOCK + thread_idx_x()) as u32;
    // No barrier in this kernel, so edge threads may simply leave.
    if row >= m || col >= n {
        return;
    }
    let mut acc = 0.0f32;
    for kk in 0..k {
        // SAFETY: row < m and kk < k: inside A; kk < k and col < n: inside B.
        let (a, b) = unsafe { (g.a.read(g.a_index(row, kk)), g.b.read(g.b_index(kk, col))) };
        acc = fma(a, b, acc);
    }
    // SAFETY: row < m and col < n; this thread alone owns C[row][col].
    unsafe { g.store_c(g.c_index(row, col), acc) };
    if g.ep.flags != 0 {
        // SAFETY: this thread's own element, stored just above.
        unsafe { g.fuse_region((row as usize, col as usize), (1, 1), 0, 1) };
    }
}

crate::gemm_kernel!(naive);
