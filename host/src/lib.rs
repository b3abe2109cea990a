//! The host side: load the kernels' PTX (built from `kernels-gpu` by
//! `build.rs`), launch them through cudarc, verify every result against an
//! independent CPU reference, then time them with CUDA events.
//!
//! Layers, bottom up: [`gpu`] (device, the PTX modules it can run,
//! errors) -> [`runner`] (one kernel: buffers, launch, verify, time) -> the
//! `host` binary (flags and printing). [`reference`], [`model`] and [`timing`] are plain Rust with
//! no GPU, so the tests exercise them anywhere.

pub mod baselines;
pub mod error;
pub mod gpu;
pub mod inputs;
pub mod model;
pub mod reference;
pub mod report;
pub mod runner;
pub mod shape;
pub mod timing;

pub use error::HostError;

use kernels_gpu::modules::PtxModule;

// `PTX_MODULES`: every module's PTX, built by `build.rs` from `kernels-gpu`.
include!(concat!(env!("OUT_DIR"), "/ptx_modules.rs"));

/// The PTX text of `module` (built in; `build.rs` builds every module of
/// `kernels_gpu::modules::MODULES`).
pub fn ptx(module: &PtxModule) -> &'static str {
    PTX_MODULES
        .iter()
        .find(|(name, _)| *name == module.name)
        .map(|(_, ptx)| *ptx)
        .expect("build.rs builds every module in kernels_gpu::modules::MODULES")
}

/// The commit this binary was built from (`unknown` outside a git checkout).
pub const GIT_COMMIT: &str = env!("GEMM_GIT_COMMIT");
