//! What the Rust kernels are measured against, in the same process:
//! their CUDA C++ twins (compiled at run time by NVRTC) and cuBLAS SGEMM.
//!
//! Both load their libraries at run time. When a library is missing the
//! loader says so with a one-line reason and the bench goes on without it.

use std::sync::Arc;

use cudarc::cublas::sys::{cublasMath_t, cublasOperation_t};
use cudarc::cublas::{CudaBlas, Gemm, GemmConfig};
use cudarc::driver::CudaFunction;
use cudarc::nvrtc::CompileOptions;
use kernels_gpu::launch::{KernelSpec, Precision};
use kernels_gpu::registry;

use crate::HostError;
use crate::gpu::Gpu;
use crate::runner::{self, Buffers, Enqueue, RustKernel};

/// The baselines' names in reports.
pub const CUBLAS_FP32: &str = "cuBLAS SGEMM";
pub const CUBLAS_TF32: &str = "cuBLAS TF32";

/// The CUDA C++ twins' source.
pub const LESSON_CU: &str = include_str!("../cuda/lesson.cu");

/// A CUDA C++ kernel with the same launch shape as its Rust twin.
pub struct CudaTwin {
    /// `naive (CUDA C++)`.
    label: String,
    /// The Rust kernel this one mirrors; its spec gives the launch shape.
    pub twin: &'static KernelSpec,
    func: CudaFunction,
}

/// Compiles the twins with NVRTC for this GPU and loads them.
pub fn load_cuda_twins(gpu: &Gpu) -> Result<Vec<CudaTwin>, String> {
    // SAFETY: only tries to dlopen libnvrtc under its known names.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(
            "NVRTC (libnvrtc.so) not found: add the CUDA toolkit's lib64 folder \
                    (e.g. /usr/local/cuda/lib64) to LD_LIBRARY_PATH"
                .into(),
        );
    }
    let (major, minor) = gpu.info.compute_capability;
    // NVRTC wants a 'static arch name; one leak per process is fine.
    let arch: &'static str = Box::leak(format!("compute_{major}{minor}").into_boxed_str());
    let opts = CompileOptions {
        arch: Some(arch),
        options: vec![format!("-DTILE={}", kernels_gpu::k02_tiled16::T)],
        ..Default::default()
    };
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(LESSON_CU, opts).map_err(|e| {
        // The first error is the one that matters; the log can run to pages.
        let log = match &e {
            cudarc::nvrtc::CompileError::CompileError { log, .. } => {
                log.to_string_lossy().into_owned()
            }
            other => format!("{other:?}"),
        };
        let first = log
            .lines()
            .find(|l| l.contains("error"))
            .unwrap_or(log.as_str())
            .trim()
            .to_string();
        format!("NVRTC could not compile host/cuda/lesson.cu: {first}")
    })?;
    let module = gpu.ctx.load_module(ptx).map_err(|e| {
        format!(
            "the driver rejected NVRTC's PTX: {}",
            crate::error::cuda_error_name(&e)
        )
    })?;
    ["naive", "tiled16"]
        .into_iter()
        .map(|name| {
            let twin = registry::find(name).expect("every CUDA twin has a Rust kernel");
            let func = module
                .load_function(name)
                .map_err(|e| format!("{name} missing from NVRTC's module: {e}"))?;
            Ok(CudaTwin {
                label: format!("{name} (CUDA C++)"),
                twin,
                func,
            })
        })
        .collect()
}

impl Enqueue for CudaTwin {
    fn name(&self) -> &str {
        &self.label
    }

    fn precision(&self) -> Precision {
        self.twin.precision
    }

    fn enqueue(&self, gpu: &Gpu, bufs: &mut Buffers) -> Result<(), HostError> {
        // The twins declare their tiles statically (__shared__): no
        // launch-sized shared memory; the grid is the Rust twin's.
        let cfg = runner::launch_config(self.twin, &bufs.shape, 0)?;
        // SAFETY: lesson.cu's kernels take (A, B, C, M, N, K) (ints: the
        // u32 sizes are at most 2^20, so the bits agree) and guard their
        // edges like the Rust twins whose grid they are launched with.
        unsafe { runner::launch_gemm(gpu, &self.func, cfg, bufs, None, &self.label) }
    }
}

/// cuBLAS SGEMM: in plain FP32 (TF32 tensor cores off), or with TF32
/// tensor cores allowed (the baseline of the TF32 kernels).
pub struct Cublas {
    blas: CudaBlas,
    precision: Precision,
}

impl Cublas {
    pub fn load(gpu: &Gpu, precision: Precision) -> Result<Self, String> {
        // SAFETY: only tries to dlopen libcublas under its known names.
        if !unsafe { cudarc::cublas::sys::is_culib_present() } {
            return Err(
                "cuBLAS (libcublas.so) not found: add the CUDA toolkit's lib64 folder \
                        (e.g. /usr/local/cuda/lib64) to LD_LIBRARY_PATH"
                    .into(),
            );
        }
        if precision == Precision::Fp32
            && std::env::var("NVIDIA_TF32_OVERRIDE").is_ok_and(|v| v != "0")
        {
            return Err("NVIDIA_TF32_OVERRIDE is set: cuBLAS would use TF32; unset it".into());
        }
        let blas = CudaBlas::new(Arc::clone(&gpu.stream)).map_err(|e| format!("cuBLAS: {e:?}"))?;
        // Default math: SGEMM never uses TF32 tensor cores unless asked;
        // TF32 tensor-op math lets it round A and B to TF32.
        let mode = match precision {
            Precision::Fp32 => cublasMath_t::CUBLAS_DEFAULT_MATH,
            Precision::Tf32 => cublasMath_t::CUBLAS_TF32_TENSOR_OP_MATH,
        };
        // SAFETY: the handle is live; the mode is a valid enum value.
        let status = unsafe { cudarc::cublas::sys::cublasSetMathMode(*blas.handle(), mode) };
        if status != cudarc::cublas::sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
            return Err(format!(
                "cuBLAS could not set {} math mode: {status:?}",
                precision.name()
            ));
        }
        Ok(Self { blas, precision })
    }
}

impl Enqueue for Cublas {
    fn name(&self) -> &str {
        match self.precision {
            Precision::Fp32 => CUBLAS_FP32,
            Precision::Tf32 => CUBLAS_TF32,
        }
    }

    fn precision(&self) -> Precision {
        self.precision
    }

    fn enqueue(&self, _gpu: &Gpu, bufs: &mut Buffers) -> Result<(), HostError> {
        let (m, n, k) = (
            bufs.shape.m as i32,
            bufs.shape.n as i32,
            bufs.shape.k as i32,
        );
        // cuBLAS is column-major: row-major C = A B is column-major
        // C^T = B^T A^T, i.e. an (n x m) result from B (n x k) and A (k x m).
        let cfg = GemmConfig {
            transa: cublasOperation_t::CUBLAS_OP_N,
            transb: cublasOperation_t::CUBLAS_OP_N,
            m: n,
            n: m,
            k,
            alpha: 1.0f32,
            lda: n,
            ldb: k,
            beta: 0.0f32,
            ldc: n,
        };
        // SAFETY: dimensions and leading dimensions describe exactly the
        // buffers' m*k, k*n and m*n floats.
        unsafe { self.blas.gemm(cfg, &bufs.b, &bufs.a, &mut bufs.c) }.map_err(|e| {
            HostError::BadShape(format!("{} failed on {}: {e:?}", self.name(), bufs.shape))
        })
    }
}

/// Every Rust kernel, loaded.
pub fn load_rust_kernels(
    gpu: &Gpu,
    specs: &[&'static KernelSpec],
) -> Result<Vec<RustKernel>, HostError> {
    specs.iter().map(|s| RustKernel::load(gpu, s)).collect()
}
