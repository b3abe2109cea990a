//! [`GemmCall`]: what one launch of a GEMM entry is given, the plain data
//! between planning a call (`crate::blas`), the padded copies and tensor
//! maps of the Hopper kernels (`crate::tma`) and the launch
//! (`crate::launch`).

use cudarc::driver::sys::CUdeviceptr;
use kernels_gpu::gemm::{EpilogueParams, GemmParams, ScaleParams};
use kernels_gpu::split::SplitParams;

/// One call of a GEMM entry: where A, B and C are, what to compute, and
/// how many products of a batch (block `z` of the grid computes product
/// `z`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemmCall {
    pub a: CUdeviceptr,
    pub b: CUdeviceptr,
    pub c: CUdeviceptr,
    pub params: GemmParams,
    pub batch: usize,
    /// An FP8 kernel's scales (its entry's parameter after the maps);
    /// ignored by the others.
    pub scales: ScaleParams,
    /// The epilogue's arguments, every Rust entry's last parameter (the
    /// CUDA C++ twins declare none: the driver passes what an entry
    /// declares).
    pub epilogue: EpilogueParams,
    /// Split-K inside this launch (`kernels_gpu::split`): the workspace
    /// and tile counters the kernel's split entry takes last, `batch`
    /// being the slices. `None`: the kernel's own entry.
    pub split: Option<SplitParams>,
}
