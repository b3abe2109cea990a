//! The harness: everything the `host` and `bench` programs and the tests
//! need around the library (`rust_gemm`) to show a kernel is right and how
//! fast it is: device buffers of random inputs, an independent CPU
//! reference and its error bounds, launches verified then timed with CUDA
//! events, the lesson's traffic model, reports, and the CUDA C++ twins and
//! cuBLAS baselines of the bench.
//!
//! Layers, bottom up: `rust_gemm` (device, modules, launch) -> [`runner`]
//! (one kernel: buffers, launch, verify, time) -> the `host` binary (flags
//! and printing). [`reference`], [`model`] and [`timing`] are plain Rust
//! with no GPU, so the tests exercise them anywhere.

pub mod baselines;
pub mod cli;
pub mod inputs;
pub mod matrix;
pub mod model;
pub mod reference;
pub mod report;
pub mod runner;
pub mod shape;
pub mod timing;

/// The commit this binary was built from (`unknown` outside a git checkout).
pub const GIT_COMMIT: &str = env!("GEMM_GIT_COMMIT");
