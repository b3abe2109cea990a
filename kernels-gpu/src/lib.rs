//! SGEMM kernels in pure Rust, for `nvptx64-nvidia-cuda`.
//!
//! Every kernel computes `C = A * B` for row-major `A` (M x K), `B` (K x N)
//! and `C` (M x N), for any M, N, K >= 1. One file per step of the ladder:
//!
//! | step | file | what it changes |
//! |---|---|---|
//! | 01 | [`k01_naive`] | one thread per element of C, straight from global memory |
//! | 02 | [`k02_tiled16`] | the lesson: 16x16 tiles of A and B staged in shared memory |
//!
//! The same crate builds for the host, where it exports the kernels'
//! constants ([`registry`]) so that launch shapes are never retyped.
//! Only [`device`] touches `core::arch::nvptx` and shared memory.
#![cfg_attr(target_arch = "nvptx64", no_std)]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(
        abi_ptx,
        stdarch_nvptx,
        core_intrinsics,
        gpu_intrinsics,
        gpu_launch_sized_workgroup_mem
    )
)]
#![cfg_attr(target_arch = "nvptx64", allow(internal_features))]

pub mod device;
pub mod gemm;
pub mod launch;

pub mod k01_naive;
pub mod k02_tiled16;

#[cfg(not(target_arch = "nvptx64"))]
pub mod registry;

/// A kernel that panics (an index out of bounds the optimiser could not
/// remove) stops its thread with `trap`, which the host sees as a launch
/// error (`CUDA_ERROR_LAUNCH_FAILED`), never as a wrong number.
#[cfg(target_arch = "nvptx64")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: `trap` takes no operands and aborts the kernel; it is always sound.
    unsafe { core::arch::nvptx::trap() }
}
