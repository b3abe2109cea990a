//! `rust_gemm`: GEMMs on NVIDIA GPUs with kernels written in Rust
//! (`kernels-gpu`, compiled to PTX by rustc's NVPTX backend), called on the
//! caller's cudarc buffers and stream with BLAS semantics.
//!
//! The API is [`blas`] (re-exported here): [`Sgemm`], the handle;
//! [`GemmConfig`], one call; [`Epilogue`], what a call fuses after the
//! product (bias, scales, activation); [`GemmError`], every way a call
//! can be refused. Below it, bottom up: [`gpu`] (the device, the PTX modules it
//! can run, [`HostError`]), [`tma`] (tensor maps and padded copies for the
//! Hopper kernels), [`launch`] (one kernel's launch, the path every call
//! takes) and [`quant`] (the FP8 quantizer's launches). Above it,
//! [`multi`]: a product cut over several devices, a handle per device. The harness that
//! verifies and times the kernels (the `host` and `bench` programs) is a
//! user of this crate, in the `host` package.

pub mod blas;
pub mod call;
pub mod error;
pub mod gpu;
pub mod launch;
pub mod multi;
pub mod quant;
pub mod tma;

pub use blas::{
    Activation, Algorithm, Compute, Epilogue, GemmConfig, GemmElement, GemmError, Layout, Op, Per,
    QuantConfig, Quantize, Scales, Sgemm,
};
/// The cudarc this library is built with: a program can take its
/// `CudaContext`, streams and buffers from here and be sure the versions
/// match.
pub use cudarc;
pub use error::HostError;

use kernels_gpu::modules::PtxModule;

// `PTX_MODULES` and `SASS_MODULES`: every module's PTX and its shipped
// SASS, LZMA-compressed (`build.rs`).
include!(concat!(env!("OUT_DIR"), "/ptx_modules.rs"));

/// Embedded data decompressed once, on first use, and kept for the
/// program's life (each module's PTX or cubin, at most some MB, once).
fn inflated(packed: &'static [u8], what: &dyn Fn() -> String) -> &'static [u8] {
    use std::collections::HashMap;
    use std::io::Read as _;
    use std::sync::{Mutex, OnceLock};
    static DONE: OnceLock<Mutex<HashMap<usize, &'static [u8]>>> = OnceLock::new();
    let done = DONE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut done = done.lock().unwrap_or_else(|e| e.into_inner());
    done.entry(packed.as_ptr() as usize).or_insert_with(|| {
        let mut bytes = Vec::new();
        lzma_rust2::LzmaReader::new_mem_limit(packed, u32::MAX, None)
            .and_then(|mut lzma| lzma.read_to_end(&mut bytes))
            // An invariant of the build, not an input: build.rs embeds the
            // shipped files (checked by the tests and cargo's checksums) or
            // what it compressed itself; `every_embedded_module_inflates`.
            .unwrap_or_else(|e| panic!("the embedded {} does not decompress: {e}", what()));
        Box::leak(bytes.into_boxed_slice())
    })
}

/// The PTX text of `module` (built in, compressed; decompressed the first
/// time it is asked for). `build.rs` embeds every module of
/// `kernels_gpu::modules::MODULES`.
pub fn ptx(module: &PtxModule) -> &'static str {
    let packed = PTX_MODULES
        .iter()
        .find(|(name, _)| *name == module.name)
        .map(|(_, packed)| *packed)
        .expect("build.rs embeds every module in kernels_gpu::modules::MODULES");
    let text = inflated(packed, &|| format!("PTX of module {}", module.name));
    std::str::from_utf8(text).expect("the PTX build writes text")
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
        .map(|(_, arch, packed)| {
            let what = || format!("SASS of module {} for {arch}", module.name);
            (*arch, inflated(packed, &what))
        })
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

#[cfg(test)]
mod tests {
    /// Every embedded module, PTX and SASS, decompresses: PTX text with
    /// entries, cubins as ELF files.
    #[test]
    fn every_embedded_module_inflates() {
        for module in kernels_gpu::modules::MODULES {
            assert!(super::ptx(module).contains(".entry"), "{}", module.name);
        }
        for (name, arch, _) in super::SASS_MODULES {
            let module = kernels_gpu::modules::MODULES
                .iter()
                .find(|m| m.name == *name)
                .expect("a module of the list");
            let (_, cubin) = super::sass(module, cubin_capability(arch)).expect("shipped");
            assert_eq!(&cubin[..4], b"\x7fELF", "{name} {arch}");
        }
    }

    /// A compute capability that runs SASS for `arch` (`sm_90a`: 9.0).
    fn cubin_capability(arch: &str) -> (u32, u32) {
        let digits = arch.trim_start_matches("sm_").trim_end_matches('a');
        let n: u32 = digits.parse().expect("sm_NN");
        (n / 10, n % 10)
    }
}
