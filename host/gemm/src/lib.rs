//! `rust_gemm`: GEMMs on NVIDIA GPUs with kernels written in Rust
//! (`kernels-gpu`, compiled to PTX by rustc's NVPTX backend), called on the
//! caller's cudarc buffers and stream with BLAS semantics.
//!
//! The API is [`blas`] (re-exported here): [`Sgemm`], the handle;
//! [`GemmConfig`], one call; [`GemmError`], every way a call can be
//! refused. Below it, bottom up: [`gpu`] (the device, the PTX modules it
//! can run, [`HostError`]), [`tma`] (tensor maps and padded copies for the
//! Hopper kernels), [`launch`] (one kernel's launch, the path every call
//! takes) and [`quant`] (the FP8 quantizer's launches). The harness that
//! verifies and times the kernels (the `host` and `bench` programs) is a
//! user of this crate, in the `host` package.

pub mod blas;
pub mod call;
pub mod error;
pub mod gpu;
pub mod launch;
pub mod quant;
pub mod tma;

pub use blas::{
    Algorithm, Compute, GemmConfig, GemmElement, GemmError, Layout, Op, QuantConfig, Quantize,
    Scales, Sgemm,
};
/// The cudarc this library is built with: a program can take its
/// `CudaContext`, streams and buffers from here and be sure the versions
/// match.
pub use cudarc;
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

/// The SASS shipped for `module` that a GPU of compute capability
/// `(major, minor)` runs, if any: `(architecture, cubin)`, assembled by
/// `ptxas` from [`with_launch_bounds`] of its PTX (`tests/tests/ptx.rs`
/// checks they match). A module without one for the GPU is JIT-compiled
/// from its PTX by the driver.
pub fn sass(module: &PtxModule, capability: (u32, u32)) -> Option<(&'static str, &'static [u8])> {
    SASS_MODULES
        .iter()
        .filter(|(name, arch, _)| {
            *name == module.name && kernels_gpu::modules::Arch::sass_runs_on(arch, capability)
        })
        .map(|(_, arch, cubin)| (*arch, *cubin))
        .next()
}

/// `ptx` with launch bounds, `.maxntid X, Y, 1` (the block's threads, from
/// the `KernelSpec`), after the parameter list of every entry whose spec
/// asks for a register cap (`Launch::register_cap`) and whose PTX is not
/// bounded already. The CUDA C++ `__launch_bounds__(threads)`: ptxas then
/// keeps registers x threads within what an SM holds, and `setmaxnreg`
/// (step 13) has the register cap at entry it needs. rustc has no
/// attribute for it, so the host adds it to the text it loads (and the
/// PTX tests to the text they assemble).
pub fn with_launch_bounds(ptx: &str) -> String {
    let mut out = String::with_capacity(ptx.len() + 1024);
    let mut pending: Option<(u32, u32)> = None;
    for line in ptx.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.split(".entry ").nth(1) {
            let name = rest.split('(').next().unwrap_or("").trim();
            pending = kernels_gpu::registry::find(name)
                .filter(|k| k.launch.register_cap)
                .map(|k| k.launch.block_threads);
        } else if trimmed.starts_with(".maxntid") || trimmed.starts_with(".reqntid") {
            pending = None;
        } else if trimmed.starts_with('{')
            && let Some((x, y)) = pending.take()
        {
            out.push_str(&format!(".maxntid {x}, {y}, 1\n"));
        }
        out.push_str(line);
    }
    out
}
