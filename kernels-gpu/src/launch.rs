//! What the host needs to know to launch a kernel, stated once, by the
//! kernel itself: block shape, the tile of C each block owns, shared
//! memory, the PTX module (and so the GPUs) it is built for, and the
//! precision it computes in.

use crate::gemm::Gemm;
use crate::modules::PtxModule;

/// The arithmetic a kernel does. Inputs and outputs are `f32` for all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precision {
    /// f32 multiply-adds (the FMA pipe).
    Fp32,
    /// A and B rounded to TF32 (10 explicit mantissa bits, round to
    /// nearest) and multiplied on the tensor cores, accumulated in f32.
    Tf32,
}

impl Precision {
    /// `FP32` or `TF32`.
    pub const fn name(self) -> &'static str {
        match self {
            Precision::Fp32 => "FP32",
            Precision::Tf32 => "TF32",
        }
    }
}

/// How a kernel is launched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Launch {
    /// Threads per block, `(x, y)`.
    pub block_threads: (u32, u32),
    /// Rows of C (BM) and columns of C (BN) each block computes.
    pub block_tile: (usize, usize),
    /// Bytes of launch-sized shared memory per block.
    pub shared_bytes: usize,
}

impl Launch {
    /// Threads in one block.
    pub const fn threads(&self) -> u32 {
        self.block_threads.0 * self.block_threads.1
    }

    /// Blocks `(x, y)` that cover an `m x n` C: x walks columns, y rows.
    pub const fn grid(&self, m: usize, n: usize) -> (usize, usize) {
        (n.div_ceil(self.block_tile.1), m.div_ceil(self.block_tile.0))
    }
}

/// A kernel as the host sees it.
#[derive(Clone, Copy, Debug)]
pub struct KernelSpec {
    /// Name on the command line, and the PTX entry's name.
    pub name: &'static str,
    /// Step on the ladder (01, 02, ...).
    pub step: u32,
    /// The PTX module the entry is built into: its architecture says
    /// which GPUs can run the kernel.
    pub module: &'static PtxModule,
    pub precision: Precision,
    /// One line: what this step changes.
    pub summary: &'static str,
    pub launch: Launch,
    /// The lesson's traffic model counts every global load as DRAM
    /// traffic. A kernel that reuses each loaded element of A across
    /// `reuse.1` columns of C and each element of B across `reuse.0` rows
    /// moves `4 * (M*N*K/reuse.1 + M*N*K/reuse.0 + M*N)` bytes in that
    /// model: `(1, 1)` for the naive kernel, `(16, 16)` for the lesson's.
    pub model_reuse: (usize, usize),
    /// The kernel's body: what the PTX entry `name` runs, and what the CPU
    /// emulator runs (`emu::run_gemm`). Never called through this pointer
    /// on the GPU.
    pub body: fn(Gemm),
}
