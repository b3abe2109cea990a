//! The host side: load the kernels' PTX (built from `kernels-gpu` by
//! `build.rs`), launch them through cudarc, verify every result against an
//! independent CPU reference, then time them with CUDA events.
//!
//! Layers, bottom up: [`gpu`] (device, module, errors) -> [`runner`] (one
//! kernel: buffers, launch, verify, time) -> the `host` binary (flags and
//! printing). [`reference`], [`model`] and [`timing`] are plain Rust with
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

/// The kernels' PTX, built by `build.rs` from `kernels-gpu`.
pub const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/kernels.ptx"));
/// The `.target` the PTX was built for; the driver JIT-compiles it for newer GPUs.
pub const PTX_ARCH: &str = env!("KERNELS_PTX_ARCH");
/// The commit this binary was built from (`unknown` outside a git checkout).
pub const GIT_COMMIT: &str = env!("GEMM_GIT_COMMIT");
