//! What the Rust kernels are measured against, in the same process:
//! their CUDA C++ twins (compiled at run time by NVRTC) and cuBLAS SGEMM.
//!
//! Both load their libraries at run time. When a library is missing the
//! loader says so with a one-line reason and the bench goes on without it.

use std::sync::Arc;

use cudarc::cublas::sys::{cublasMath_t, cublasOperation_t};
use cudarc::cublas::{CudaBlas, Gemm, GemmConfig, StridedBatchedConfig};
use cudarc::driver::CudaSlice;
use cudarc::nvrtc::CompileOptions;
use kernels_gpu::elem::{Elem, Elems, Math, Scaling};
use kernels_gpu::launch::KernelSpec;
use kernels_gpu::registry;

use crate::runner::{Buffers, Enqueue, fused_name};
use rust_gemm::HostError;
use rust_gemm::blas::Activation;
use rust_gemm::gpu::Gpu;
use rust_gemm::gpu::device_address;
use rust_gemm::launch::Kernel;

/// The baselines' names in reports.
pub const CUBLAS_FP32: &str = "cuBLAS SGEMM";
pub const CUBLAS_TF32: &str = "cuBLAS TF32";
pub const CUBLAS_BF16: &str = "cuBLAS BF16";
pub const CUBLAS_FP16: &str = "cuBLAS FP16";
pub const CUBLASLT_FP8: &str = "cuBLASLt FP8";
/// The fused baselines' names begin so: `cuBLASLt BF16 (bf16 C) + bias +
/// gelu-tanh` ([`Cublas::load_fused`]).
pub const CUBLASLT: &str = "cuBLASLt";

/// cuBLAS's name for a stored type (`cublasGemmEx`'s `cudaDataType`).
fn cuda_data_type(elem: Elem) -> cudarc::cublas::sys::cudaDataType {
    use cudarc::cublas::sys::cudaDataType::*;
    match elem {
        Elem::F32 => CUDA_R_32F,
        Elem::Bf16 => CUDA_R_16BF,
        Elem::F16 => CUDA_R_16F,
        Elem::E4m3 => CUDA_R_8F_E4M3,
        Elem::E5m2 => CUDA_R_8F_E5M2,
    }
}

/// A CUDA C++ file of twins: kernels with the same algorithm, tiles,
/// launch shape and edge guards as the Rust kernels of the same names,
/// compiled by NVRTC (one module per file) so that the bench's
/// "Rust / C++" column compares compilers, not algorithms.
pub struct TwinSource {
    /// Its path in the repository, for messages.
    pub path: &'static str,
    pub source: &'static str,
    /// The Rust kernels twinned here; each twin's entry has its name.
    pub kernels: &'static [&'static str],
    /// Whether the twins take their tiles from launch-sized shared memory
    /// (`extern __shared__`, the spec's `shared_bytes`) rather than
    /// declaring them `__shared__`.
    pub launch_sized_shared: bool,
    /// NVRTC options beyond the architecture (constants of the Rust kernels).
    pub options: fn() -> Vec<String>,
}

/// The headers the twins include, each as the line that includes it and
/// its text: the kernel ABI's C++ side (`GemmParams` and the epilogue),
/// which every twin includes, and the device helpers of the Hopper twins.
pub const HEADERS: &[(&str, &str)] = &[
    (
        "#include \"gemm_params.cuh\"",
        include_str!("../cuda/gemm_params.cuh"),
    ),
    (
        "#include \"hopper.cuh\"",
        include_str!("../cuda/hopper.cuh"),
    ),
];

impl TwinSource {
    /// The source as NVRTC compiles it: each include of one of
    /// [`HEADERS`] replaced by the header itself (NVRTC has no file
    /// system to find them in; nvcc finds them with `-I host/cuda`).
    pub fn source_for_nvrtc(&self) -> String {
        HEADERS
            .iter()
            .fold(self.source.to_string(), |src, (include, header)| {
                src.replacen(include, header, 1)
            })
    }
}

/// Every twin, one registry: the bench, the tests and the docs read it.
pub const TWINS: &[TwinSource] = &[
    TwinSource {
        path: "host/cuda/lesson.cu",
        source: include_str!("../cuda/lesson.cu"),
        kernels: &["naive", "tiled16"],
        launch_sized_shared: false,
        options: || vec![format!("-DTILE={}", kernels_gpu::k02_tiled16::T)],
    },
    TwinSource {
        path: "host/cuda/tuned.cu",
        source: include_str!("../cuda/tuned.cu"),
        kernels: &["tuned_128x128x16_w32x64", "tuned_128x128x8_w64x64"],
        launch_sized_shared: true,
        options: Vec::new,
    },
    TwinSource {
        path: "host/cuda/wgmma_ws.cu",
        source: include_str!("../cuda/wgmma_ws.cu"),
        kernels: &["wgmma_ws_256x128x32_s4"],
        launch_sized_shared: true,
        options: Vec::new,
    },
    TwinSource {
        path: "host/cuda/wgmma_bf16_persistent.cu",
        source: include_str!("../cuda/wgmma_bf16_persistent.cu"),
        kernels: &[
            "wgmma_bf16_persistent_128x256x64_s4",
            "wgmma_bf16_tma_store_128x256x64_s4",
        ],
        launch_sized_shared: true,
        options: Vec::new,
    },
];

/// The twin of the Rust kernel `name`, if it has one.
pub fn twin_of(name: &str) -> Option<&'static TwinSource> {
    TWINS.iter().find(|t| t.kernels.contains(&name))
}

/// Compiles, for this GPU, the twins of the kernels `wanted` accepts and
/// loads them. A file that cannot be used (NVRTC missing, a GPU too old
/// for its Rust kernels, a compile error) is skipped with a one-line reason.
pub fn load_cuda_twins(gpu: &Gpu, wanted: impl Fn(&str) -> bool) -> (Vec<Kernel>, Vec<String>) {
    let mut twins = Vec::new();
    let mut skipped = Vec::new();
    for src in TWINS {
        let names: Vec<&str> = src.kernels.iter().copied().filter(|k| wanted(k)).collect();
        if names.is_empty() {
            continue;
        }
        match load_source(gpu, src, &names) {
            Ok(mut loaded) => twins.append(&mut loaded),
            Err(why) => skipped.push(format!("the CUDA C++ twins in {}: {why}", src.path)),
        }
    }
    (twins, skipped)
}

fn load_source(gpu: &Gpu, src: &TwinSource, names: &[&str]) -> Result<Vec<Kernel>, String> {
    // SAFETY: only tries to dlopen libnvrtc under its known names.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(
            "NVRTC (libnvrtc.so) not found: add the CUDA toolkit's lib64 folder \
                    (e.g. /usr/local/cuda/lib64) to LD_LIBRARY_PATH"
                .into(),
        );
    }
    let specs: Vec<&'static KernelSpec> = names
        .iter()
        .map(|n| {
            registry::find(n).expect("every CUDA twin has a Rust kernel (tests/tests/twins.rs)")
        })
        .collect();
    // The twins need what their Rust kernels need.
    for spec in &specs {
        gpu.check_runs(spec).map_err(|e| e.to_string())?;
    }
    // Architecture-specific PTX (sm_90a) for twins of sm_90a kernels;
    // otherwise this GPU's own architecture.
    let arch = if specs.iter().any(|s| s.module.arch.exact) {
        let (major, minor) = specs[0].module.arch.capability;
        format!("compute_{major}{minor}a")
    } else {
        let (major, minor) = gpu.info.compute_capability;
        format!("compute_{major}{minor}")
    };
    // NVRTC wants a 'static arch name; one leak per file per process is fine.
    let arch: &'static str = Box::leak(arch.into_boxed_str());
    let opts = CompileOptions {
        arch: Some(arch),
        options: (src.options)(),
        ..Default::default()
    };
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(src.source_for_nvrtc(), opts).map_err(|e| {
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
        format!("NVRTC could not compile it: {first}")
    })?;
    let module = gpu.ctx.load_module(ptx).map_err(|e| {
        format!(
            "the driver rejected NVRTC's PTX: {}",
            rust_gemm::error::cuda_error_name(&e)
        )
    })?;
    specs
        .into_iter()
        .map(|spec| {
            let func = module
                .load_function(spec.name)
                .map_err(|e| format!("{} missing from NVRTC's module: {e}", spec.name))?;
            let shared = if src.launch_sized_shared {
                spec.launch.shared_bytes
            } else {
                0
            };
            gpu.allow_shared(&func, spec.name, shared)
                .map_err(|e| e.to_string())?;
            Ok(Kernel::cuda_twin(spec, func, shared))
        })
        .collect()
}

/// cuBLAS for one set of element types: SGEMM in plain FP32 (TF32 tensor
/// cores off) or with TF32 tensor cores allowed (the baseline of the TF32
/// kernels), or `cublasGemmEx` on BF16 or FP16 A and B with f32
/// accumulation (compute 32F), C in f32 or in the input type.
pub struct Cublas {
    backend: Backend,
    elems: Elems,
    /// Its name in reports: `cuBLAS BF16`, and the C type where it is not
    /// f32 (`cuBLAS BF16 (bf16 C)`).
    name: String,
}

impl Cublas {
    /// f32 A, B and C, computed in `math` (FP32 or TF32).
    pub fn load(gpu: &Gpu, math: Math) -> Result<Self, String> {
        Self::load_elems(gpu, Elems::new(Elem::F32, Elem::F32, Elem::F32, math))
    }

    /// cuBLAS for `elems`: f32 storage with FP32 or TF32 math, or A and B
    /// both BF16 (math BF16) or both FP16 (math FP16) with C in f32 or in
    /// their type.
    pub fn load_elems(gpu: &Gpu, elems: Elems) -> Result<Self, String> {
        if elems.math == Math::Fp8 {
            return Self::load_lt(gpu, elems);
        }
        if !Self::serves(elems) {
            return Err(format!("no cuBLAS baseline for {}", elems.describe()));
        }
        let precision = elems.math;
        // SAFETY: only tries to dlopen libcublas under its known names.
        if !unsafe { cudarc::cublas::sys::is_culib_present() } {
            return Err(
                "cuBLAS (libcublas.so) not found: add the CUDA toolkit's lib64 folder \
                        (e.g. /usr/local/cuda/lib64) to LD_LIBRARY_PATH"
                    .into(),
            );
        }
        if precision == Math::Fp32 && std::env::var("NVIDIA_TF32_OVERRIDE").is_ok_and(|v| v != "0")
        {
            return Err("NVIDIA_TF32_OVERRIDE is set: cuBLAS would use TF32; unset it".into());
        }
        let blas = CudaBlas::new(Arc::clone(&gpu.stream)).map_err(|e| format!("cuBLAS: {e:?}"))?;
        // Default math: SGEMM never uses TF32 tensor cores unless asked;
        // TF32 tensor-op math lets it round A and B to TF32.
        let mode = match precision {
            Math::Fp32 | Math::Bf16 | Math::F16 => cublasMath_t::CUBLAS_DEFAULT_MATH,
            Math::Tf32 => cublasMath_t::CUBLAS_TF32_TENSOR_OP_MATH,
            Math::Tf32x3 | Math::Fp8 => unreachable!("not served (above)"),
        };
        // SAFETY: the handle is live; the mode is a valid enum value.
        let status = unsafe { cudarc::cublas::sys::cublasSetMathMode(*blas.handle(), mode) };
        if status != cudarc::cublas::sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
            return Err(format!(
                "cuBLAS could not set {} math mode: {status:?}",
                precision.name()
            ));
        }
        let base = match elems.math {
            Math::Fp32 => CUBLAS_FP32,
            Math::Tf32 => CUBLAS_TF32,
            Math::Bf16 => CUBLAS_BF16,
            Math::F16 => CUBLAS_FP16,
            Math::Tf32x3 | Math::Fp8 => unreachable!("not served (above)"),
        };
        let name = if elems.c == Elem::F32 {
            base.to_string()
        } else {
            format!("{base} ({} C)", elems.c.name())
        };
        Ok(Self {
            backend: Backend::Blas(blas),
            elems,
            name,
        })
    }

    /// Whether cuBLAS serves `elems` through SGEMM or `cublasGemmEx` (and
    /// cuBLASLt with an epilogue, [`Self::load_fused`]): f32 storage with
    /// FP32 or TF32 math, or A and B both BF16 (math BF16) or both FP16
    /// (math FP16) with C in f32 or in their type.
    fn serves(elems: Elems) -> bool {
        match elems.math {
            Math::Fp32 | Math::Tf32 => elems.storage() == kernels_gpu::elem::Storage::F32,
            // 3xTF32 kernels are measured against SGEMM (Math::yardstick);
            // FP8 against cuBLASLt (`load_lt`).
            Math::Tf32x3 | Math::Fp8 => false,
            Math::Bf16 | Math::F16 => {
                let input = if elems.math == Math::Bf16 {
                    Elem::Bf16
                } else {
                    Elem::F16
                };
                elems.a == input && elems.b == input && (elems.c == Elem::F32 || elems.c == input)
            }
        }
    }

    /// cuBLASLt with a fused epilogue: the baseline of the Rust kernels'
    /// fused launches (`runner::Fused`), on the same buffers and bias
    /// (`Buffers::set_epilogue`: one f32 per column of row-major C, which
    /// is one per row of the column-major D cuBLASLt computes, `C^T = B^T
    /// A^T`: its bias vector, whose length is D's rows). `elems` as
    /// [`Self::load_elems`] serves them; `activation` as cuBLASLt's
    /// `CUBLASLT_EPILOGUE_BIAS`, `RELU_BIAS` or `GELU_BIAS` (GELU's tanh
    /// form). cuBLASLt has no epilogue of GELU's erf form or of SiLU: an
    /// error for those, so no row stands in for them. The bias is read as
    /// f32 (`CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE`) where cuBLASLt takes
    /// that, else as a copy in C's type (the same values: the bias is of
    /// that type); [`Self::bias_note`] says which.
    pub fn load_fused(gpu: &Gpu, elems: Elems, activation: Activation) -> Result<Self, String> {
        if !Self::serves(elems) {
            return Err(format!(
                "no cuBLASLt baseline with an epilogue for {}",
                elems.describe()
            ));
        }
        if lt_epilogue(activation).is_none() {
            return Err(format!(
                "cuBLASLt has no {} epilogue (its GELU is the tanh form, and it has no SiLU): \
                 no cuBLASLt row for it",
                activation.name()
            ));
        }
        if elems.math == Math::Fp32 && std::env::var("NVIDIA_TF32_OVERRIDE").is_ok_and(|v| v != "0")
        {
            return Err("NVIDIA_TF32_OVERRIDE is set: cuBLASLt would use TF32; unset it".into());
        }
        let lt = Lt::new(gpu, elems, Some(activation))?;
        let base = if elems.c == Elem::F32 {
            format!("{CUBLASLT} {}", elems.math.name())
        } else {
            format!("{CUBLASLT} {} ({} C)", elems.math.name(), elems.c.name())
        };
        Ok(Self {
            backend: Backend::Lt(Box::new(lt)),
            elems,
            name: fused_name(&base, activation),
        })
    }

    /// For a fused cuBLASLt baseline that has run: the type it read the
    /// bias in, where that is not f32 (C's: it refused an f32 bias), as a
    /// line for the report's notes.
    pub fn bias_note(&self) -> Option<String> {
        let Backend::Lt(lt) = &self.backend else {
            return None;
        };
        let plan = lt.plan.lock().unwrap_or_else(|e| e.into_inner());
        let bias = plan.as_ref()?.bias_type?;
        (bias != Elem::F32).then(|| {
            format!(
                "{}: bias read as {} (cuBLASLt refused an f32 bias with a {} D; the values are the same)",
                self.name,
                bias.name(),
                self.elems.c.name()
            )
        })
    }

    /// Why this baseline cannot compute a product of `shape`, if it
    /// cannot: cuBLASLt's FP8 kernels need m, n and k multiples of 16
    /// (16-byte rows and pointers; its heuristic answers
    /// `CUBLAS_STATUS_NOT_SUPPORTED` otherwise, seen at 4097).
    pub fn unsupported(&self, shape: &crate::shape::Shape) -> Option<String> {
        let dims = [shape.m, shape.n, shape.k];
        (self.elems.math == Math::Fp8 && dims.iter().any(|d| d % 16 != 0))
            .then(|| "cuBLASLt's FP8 path takes m, n and k multiples of 16 only".to_string())
    }

    /// The cuBLAS handle of a cuBLAS (not cuBLASLt) baseline.
    fn blas(&self) -> Result<&CudaBlas, HostError> {
        match &self.backend {
            Backend::Blas(blas) => Ok(blas),
            Backend::Lt(_) => Err(HostError::BadShape(format!(
                "{} has no cuBLAS handle: it runs through cuBLASLt",
                self.name
            ))),
        }
    }
}

impl Cublas {
    /// Enqueues the library call `cfg` through cuBLAS SGEMM (strided
    /// batched when `cfg.batch > 1`), on buffers laid out as `cfg` says:
    /// the bench's yardstick for `rust_gemm::blas`. cuBLAS is
    /// column-major, so a row-major call goes in as the column-major
    /// `C^T = op(B)^T op(A)^T`: A and B swapped, their operations kept.
    pub fn sgemm(
        &self,
        cfg: &rust_gemm::blas::GemmConfig,
        a: &CudaSlice<f32>,
        b: &CudaSlice<f32>,
        c: &mut CudaSlice<f32>,
    ) -> Result<(), HostError> {
        use rust_gemm::blas::{Layout, Op};
        let op = |o: Op| match o {
            Op::N => cublasOperation_t::CUBLAS_OP_N,
            Op::T => cublasOperation_t::CUBLAS_OP_T,
        };
        let int = |x: usize, what: &str| {
            i32::try_from(x)
                .map_err(|_| HostError::BadShape(format!("cuBLAS takes {what} up to 2^31 - 1")))
        };
        let row = cfg.layout == Layout::RowMajor;
        let ((x, op_x, ldx, sx), (y, op_y, ldy, sy), m, n) = if row {
            (
                (b, cfg.op_b, cfg.ldb, cfg.stride_b),
                (a, cfg.op_a, cfg.lda, cfg.stride_a),
                cfg.n,
                cfg.m,
            )
        } else {
            (
                (a, cfg.op_a, cfg.lda, cfg.stride_a),
                (b, cfg.op_b, cfg.ldb, cfg.stride_b),
                cfg.m,
                cfg.n,
            )
        };
        let gemm = GemmConfig {
            transa: op(op_x),
            transb: op(op_y),
            m: int(m, "sizes")?,
            n: int(n, "sizes")?,
            k: int(cfg.k, "sizes")?,
            alpha: cfg.alpha,
            lda: int(ldx, "leading dimensions")?,
            ldb: int(ldy, "leading dimensions")?,
            beta: cfg.beta,
            ldc: int(cfg.ldc, "leading dimensions")?,
        };
        let failed = |e| HostError::BadShape(format!("{} failed: {e:?}", self.name()));
        if cfg.batch == 1 {
            // SAFETY: the sizes, leading dimensions and operations describe
            // the buffers as `cfg` does (the bench allocates them from it).
            return unsafe { self.blas()?.gemm(gemm, x, y, c) }.map_err(failed);
        }
        let batched = StridedBatchedConfig {
            gemm,
            batch_size: int(cfg.batch, "batch counts")?,
            stride_a: sx as i64,
            stride_b: sy as i64,
            stride_c: cfg.stride_c as i64,
        };
        // SAFETY: as above, for every product of the batch.
        unsafe { self.blas()?.gemm_strided_batched(batched, x, y, c) }.map_err(failed)
    }
}

impl Enqueue for Cublas {
    fn name(&self) -> &str {
        &self.name
    }

    fn elems(&self) -> Elems {
        self.elems
    }

    fn fused(&self) -> bool {
        matches!(&self.backend, Backend::Lt(lt) if lt.fused.is_some())
    }

    fn enqueue(&self, gpu: &Gpu, bufs: &mut Buffers) -> Result<(), HostError> {
        bufs.check_storage(self.name(), self.elems)?;
        if let Backend::Lt(lt) = &self.backend {
            return lt.enqueue(gpu, bufs, &self.name);
        }
        if !matches!(self.elems.math, Math::Fp32 | Math::Tf32) {
            return self.gemm_ex(gpu, bufs);
        }
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
        let failed =
            |e| HostError::BadShape(format!("{} failed on {}: {e:?}", self.name(), bufs.shape));
        let (Some(a), Some(b)) = (bufs.a.as_f32(), bufs.b.as_f32()) else {
            unreachable!("check_storage: f32 buffers");
        };
        let c = bufs.c.as_f32_mut().expect("check_storage: f32 buffers");
        // SAFETY: dimensions and leading dimensions describe exactly the
        // buffers' m*k, k*n and m*n floats.
        unsafe { self.blas()?.gemm(cfg, b, a, c) }.map_err(failed)
    }
}

impl Cublas {
    /// `cublasGemmEx` on the buffers' 16-bit A and B, f32 accumulation
    /// (`CUBLAS_COMPUTE_32F`), alpha 1 and beta 0 as f32, C of its type;
    /// row-major as column-major `C^T = B^T A^T`, as for SGEMM.
    fn gemm_ex(&self, gpu: &Gpu, bufs: &mut Buffers) -> Result<(), HostError> {
        use cudarc::cublas::sys::{cublasComputeType_t, cublasGemmAlgo_t};
        let (m, n, k) = (
            bufs.shape.m as i32,
            bufs.shape.n as i32,
            bufs.shape.k as i32,
        );
        let (alpha, beta) = (1.0f32, 0.0f32);
        let (a, b, c) = (
            bufs.a.address(gpu),
            bufs.b.address(gpu),
            bufs.c.address(gpu),
        );
        let s = bufs.storage;
        let handle = *self.blas()?.handle();
        // SAFETY: the handle is live and on the GPU's stream; the sizes and
        // leading dimensions describe exactly the buffers' m*k, k*n and m*n
        // elements of the types given; alpha and beta are f32, as compute
        // 32F takes them, and outlive the call (cuBLAS reads them before
        // returning, host pointer mode).
        unsafe {
            cudarc::cublas::result::gemm_ex(
                handle,
                cublasOperation_t::CUBLAS_OP_N,
                cublasOperation_t::CUBLAS_OP_N,
                n,
                m,
                k,
                (&alpha as *const f32).cast(),
                b as *const std::ffi::c_void,
                cuda_data_type(s.b),
                n,
                a as *const std::ffi::c_void,
                cuda_data_type(s.a),
                k,
                (&beta as *const f32).cast(),
                c as *mut std::ffi::c_void,
                cuda_data_type(s.c),
                n,
                cublasComputeType_t::CUBLAS_COMPUTE_32F,
                cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(|e| {
            HostError::BadShape(format!("{} failed on {}: {e:?}", self.name(), bufs.shape))
        })
    }
}

/// How a baseline reaches cuBLAS.
enum Backend {
    /// cuBLAS: SGEMM, TF32 math, `cublasGemmEx`.
    Blas(CudaBlas),
    /// cuBLASLt: FP8 with per-tensor or block scales, or a fused epilogue.
    Lt(Box<Lt>),
}

/// cuBLASLt's epilogue of a bias and `activation`, if it has one.
fn lt_epilogue(activation: Activation) -> Option<cudarc::cublaslt::sys::cublasLtEpilogue_t> {
    use cudarc::cublaslt::sys::cublasLtEpilogue_t as E;
    match activation {
        Activation::None => Some(E::CUBLASLT_EPILOGUE_BIAS),
        Activation::Relu => Some(E::CUBLASLT_EPILOGUE_RELU_BIAS),
        // `x / 2 (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))`.
        Activation::GeluTanh => Some(E::CUBLASLT_EPILOGUE_GELU_BIAS),
        Activation::GeluErf | Activation::Silu => None,
    }
}

/// Bytes of cuBLASLt's workspace (what torch gives it on Hopper).
const LT_WORKSPACE_BYTES: usize = 32 << 20;

/// A cuBLASLt baseline (FP8, or with a fused epilogue): its handle, its
/// workspace, its element types and epilogue, and the plan of the last
/// problem it ran (descriptors, layouts and the heuristic's algorithm),
/// made outside the timed launches that reuse it.
struct Lt {
    handle: cudarc::cublaslt::sys::cublasLtHandle_t,
    workspace: CudaSlice<u8>,
    elems: Elems,
    /// The activation of its epilogue, with the buffers' bias (`None`: a
    /// plain product).
    fused: Option<Activation>,
    plan: std::sync::Mutex<Option<LtPlan>>,
}

/// The problem a plan was made for: what its descriptor and layouts hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct LtKey {
    m: usize,
    n: usize,
    k: usize,
    /// FP8's scale addresses (zeros otherwise).
    scales: kernels_gpu::gemm::ScaleParams,
    /// A fused epilogue's bias: its addresses as f32 and in C's type.
    bias: Option<(u64, u64)>,
}

/// cuBLASLt's description of one problem.
struct LtPlan {
    key: LtKey,
    /// The type the bias is read in (`None`: no bias).
    bias_type: Option<Elem>,
    desc: cudarc::cublaslt::sys::cublasLtMatmulDesc_t,
    layouts: [cudarc::cublaslt::sys::cublasLtMatrixLayout_t; 3],
    /// The heuristic's algorithms, best first, and the first that ran
    /// (tried in order on the first call, which is never timed: the
    /// heuristic cannot see the buffers' addresses, which an algorithm
    /// may refuse, as cuBLASLt's samples say).
    algos: Vec<cudarc::cublaslt::sys::cublasLtMatmulAlgo_t>,
    chosen: Option<usize>,
}

/// Algorithms asked of cuBLASLt's heuristic.
const LT_ALGOS: usize = 8;

// SAFETY: the handles are cuBLASLt's opaque pointers, used only under the
// mutex (the plan) or read-only (the handle) on the GPU's one stream.
unsafe impl Send for Lt {}
unsafe impl Sync for Lt {}

impl Drop for LtPlan {
    fn drop(&mut self) {
        use cudarc::cublaslt::result;
        // SAFETY: made by LtPlan::new, destroyed once; errors at teardown
        // have no one to report to.
        unsafe {
            for layout in self.layouts {
                let _ = result::destroy_matrix_layout(layout);
            }
            let _ = result::destroy_matmul_desc(self.desc);
        }
    }
}

impl Drop for Lt {
    fn drop(&mut self) {
        self.plan
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        // SAFETY: the handle was made by create_handle and is destroyed
        // once, after its plan.
        let _ = unsafe { cudarc::cublaslt::result::destroy_handle(self.handle) };
    }
}

impl Lt {
    /// A cuBLASLt handle and workspace for `elems`, with `fused`'s
    /// epilogue; an error (one line) when cuBLASLt is missing.
    fn new(gpu: &Gpu, elems: Elems, fused: Option<Activation>) -> Result<Self, String> {
        // SAFETY: only tries to dlopen libcublasLt under its known names.
        if !unsafe { cudarc::cublaslt::sys::is_culib_present() } {
            return Err(
                "cuBLASLt (libcublasLt.so) not found: add the CUDA toolkit's lib64 \
                        folder (e.g. /usr/local/cuda/lib64) to LD_LIBRARY_PATH"
                    .into(),
            );
        }
        // SAFETY: a plain allocation; cuBLASLt only scribbles in it.
        let workspace = unsafe { gpu.stream.alloc::<u8>(LT_WORKSPACE_BYTES) }
            .map_err(|e| format!("cuBLASLt's workspace: {e:?}"))?;
        let handle =
            cudarc::cublaslt::result::create_handle().map_err(|e| format!("cuBLASLt: {e:?}"))?;
        Ok(Self {
            handle,
            workspace,
            elems,
            fused,
            plan: std::sync::Mutex::new(None),
        })
    }
}

impl Cublas {
    /// cuBLASLt for FP8 `elems`: A and B E4M3 or E5M2 (not both E5M2, which
    /// cuBLASLt refuses), C in BF16, FP16 or f32, f32 accumulation
    /// (`CUBLAS_COMPUTE_32F`), per-tensor scales from device memory (or,
    /// for `Scaling::Blocks`, cuBLASLt's `VEC128_32F` for A and
    /// `BLK128x128_32F` for B, cuBLAS 12.9 on), the default (promoting)
    /// accumulation, not `CUBLASLT_MATMUL_DESC_FAST_ACCUM`: what torch's
    /// `_scaled_mm` calls by default.
    fn load_lt(gpu: &Gpu, elems: Elems) -> Result<Self, String> {
        let fp8 = |e: Elem| matches!(e, Elem::E4m3 | Elem::E5m2);
        let served = fp8(elems.a)
            && fp8(elems.b)
            && !(elems.a == Elem::E5m2 && elems.b == Elem::E5m2)
            && matches!(elems.c, Elem::Bf16 | Elem::F16 | Elem::F32);
        if !served {
            return Err(format!("no cuBLASLt baseline for {}", elems.describe()));
        }
        Ok(Self {
            backend: Backend::Lt(Box::new(Lt::new(gpu, elems, None)?)),
            elems,
            name: format!("{CUBLASLT_FP8} ({})", elems.storage()),
        })
    }
}

impl Lt {
    /// Enqueues the product on the buffers. cuBLASLt is column-major:
    /// row-major C (m x n) is column-major C^T = B^T A^T, an n x m D, so its
    /// A is our B and its B our A.
    ///
    /// FP8: `C = scale_a * scale_b * A B`, then times D's scale, with A m x
    /// k and B^T n x k, K contiguous in both (FP8's one layout, `Ops::NT`;
    /// the buffers' B^T): its A is our B^T read transposed (`TRANSA = T`,
    /// k x n with ld k), its B our A (k x m, ld k), and its A scale our
    /// B's. D's scale multiplies alpha on the host: cuBLASLt applies
    /// `D_SCALE` only to an FP8 D.
    ///
    /// Otherwise (a fused epilogue): `C = act(A B + bias)` with A m x k and
    /// B k x n as they are (`Ops::NN`): its A is our B (n x k, ld n), its
    /// B our A (k x m, ld k), no transposes; the bias per column of our C
    /// is its bias per row of D.
    fn enqueue(&self, gpu: &Gpu, bufs: &mut Buffers, name: &str) -> Result<(), HostError> {
        let failed = |what: &str, e| {
            HostError::BadShape(format!("{name} failed on {} ({what}): {e:?}", bufs.shape))
        };
        let fp8 = self.elems.math == Math::Fp8;
        let (call, scales, alpha) = if fp8 {
            let Some(scales) = bufs.scales.as_ref() else {
                return Err(HostError::BadShape(format!(
                    "{name} needs the FP8 buffers' scales"
                )));
            };
            let call = bufs.call(kernels_gpu::launch::Ops::NT)?;
            (call, scales.params, scales.values[2])
        } else {
            let call = bufs.call(kernels_gpu::launch::Ops::NN)?;
            (call, Default::default(), 1.0f32)
        };
        let bias = match self.fused {
            None => None,
            Some(_) => match bufs.epilogue() {
                Some(epilogue) => Some(epilogue.addresses),
                None => {
                    return Err(HostError::BadShape(format!(
                        "{name} needs the buffers' bias: add it with Buffers::set_epilogue"
                    )));
                }
            },
        };
        let (m, n, k) = (bufs.shape.m, bufs.shape.n, bufs.shape.k);
        let key = LtKey {
            m,
            n,
            k,
            scales,
            bias,
        };
        let mut plan = self.plan.lock().unwrap_or_else(|e| e.into_inner());
        if plan.as_ref().is_none_or(|p| p.key != key) {
            *plan = None;
            *plan = Some(
                self.plan_for(key, bufs.storage)
                    .map_err(|e| failed("planning", e))?,
            );
        }
        let plan = plan.as_mut().expect("made above");
        let beta = 0.0f32;
        let workspace = device_address(gpu, &self.workspace);
        let run = |algo: &cudarc::cublaslt::sys::cublasLtMatmulAlgo_t| {
            // SAFETY: the plan describes exactly these buffers (FP8: B^T n x
            // k and A m x k; otherwise B k x n and A m x k; C m x n; each of
            // its stored type, dense) and the scale and bias addresses it was
            // made with (the key: the buffers' own, alive with them); alpha
            // and beta are f32 on the host, read before the call returns; the
            // workspace is LT_WORKSPACE_BYTES, the size the heuristic was told.
            unsafe {
                cudarc::cublaslt::result::matmul(
                    self.handle,
                    plan.desc,
                    (&alpha as *const f32).cast(),
                    (&beta as *const f32).cast(),
                    call.b as *const std::ffi::c_void,
                    plan.layouts[0],
                    call.a as *const std::ffi::c_void,
                    plan.layouts[1],
                    call.c as *const std::ffi::c_void,
                    plan.layouts[2],
                    call.c as *mut std::ffi::c_void,
                    plan.layouts[2],
                    algo,
                    workspace as *mut std::ffi::c_void,
                    LT_WORKSPACE_BYTES,
                    gpu.stream.cu_stream() as cudarc::cublaslt::sys::cudaStream_t,
                )
            }
        };
        if let Some(i) = plan.chosen {
            return run(&plan.algos[i]).map_err(|e| failed("cublasLtMatmul", e));
        }
        let mut last = None;
        for (i, algo) in plan.algos.iter().enumerate() {
            match run(algo) {
                Ok(()) => {
                    plan.chosen = Some(i);
                    return Ok(());
                }
                Err(e) => last = Some(e),
            }
        }
        Err(failed(
            &format!(
                "cublasLtMatmul, each of the heuristic's {} algorithms",
                plan.algos.len()
            ),
            last.expect("the heuristic returns at least one algorithm"),
        ))
    }

    /// The descriptor, layouts and algorithm of `key`'s problem. A bias is
    /// read as f32 where cuBLASLt takes that with D's type; if its
    /// heuristic finds no algorithm for it, from the copy in C's type
    /// (cuBLASLt's default: a bias of D's type).
    fn plan_for(
        &self,
        key: LtKey,
        storage: kernels_gpu::elem::Storage,
    ) -> Result<LtPlan, cudarc::cublaslt::result::CublasError> {
        match (key.bias, self.plan_with(key, storage, Elem::F32)) {
            (Some(_), Err(_)) if storage.c != Elem::F32 => self.plan_with(key, storage, storage.c),
            (_, plan) => plan,
        }
    }

    /// [`Self::plan_for`] with the bias (if `key` has one) read as `bias_type`:
    /// f32, or C's type.
    fn plan_with(
        &self,
        key: LtKey,
        storage: kernels_gpu::elem::Storage,
        bias_type: Elem,
    ) -> Result<LtPlan, cudarc::cublaslt::result::CublasError> {
        use cudarc::cublaslt::result;
        use cudarc::cublaslt::sys::cublasLtMatmulDescAttributes_t as Attr;
        use cudarc::cublaslt::sys::{
            cublasComputeType_t, cublasLtMatmulPreferenceAttributes_t, cudaDataType,
        };
        let LtKey {
            m,
            n,
            k,
            scales,
            bias,
        } = key;
        let fp8 = self.elems.math == Math::Fp8;
        let lt_type = |e: Elem| match e {
            Elem::F32 => cudaDataType::CUDA_R_32F,
            Elem::Bf16 => cudaDataType::CUDA_R_16BF,
            Elem::F16 => cudaDataType::CUDA_R_16F,
            Elem::E4m3 => cudaDataType::CUDA_R_8F_E4M3,
            Elem::E5m2 => cudaDataType::CUDA_R_8F_E5M2,
        };
        // f32 accumulation throughout; TF32 products where that is the math.
        let compute = if self.elems.math == Math::Tf32 {
            cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32
        } else {
            cublasComputeType_t::CUBLAS_COMPUTE_32F
        };
        let desc = result::create_matmul_desc(compute, cudaDataType::CUDA_R_32F)?;
        let mut plan = LtPlan {
            key,
            bias_type: bias.map(|_| bias_type),
            desc,
            layouts: [std::ptr::null_mut(); 3],
            algos: Vec::new(),
            chosen: None,
        };
        /// Sets `attr` of the descriptor to `value`'s bytes.
        fn set<T>(
            desc: cudarc::cublaslt::sys::cublasLtMatmulDesc_t,
            attr: Attr,
            value: &T,
        ) -> Result<(), result::CublasError> {
            let (ptr, size) = ((value as *const T).cast(), std::mem::size_of::<T>());
            // SAFETY: the descriptor is live; `ptr` points at `size` bytes.
            unsafe { result::set_matmul_desc_attribute(desc, attr, ptr, size) }
        }
        // cublasOperation_t: 1 is T, 0 is N. FP8 reads our B^T transposed.
        set(desc, Attr::CUBLASLT_MATMUL_DESC_TRANSA, &i32::from(fp8))?;
        set(desc, Attr::CUBLASLT_MATMUL_DESC_TRANSB, &0i32)?;
        if let (Some(activation), Some((f32_bias, c_bias))) = (self.fused, bias) {
            let epilogue = lt_epilogue(activation).expect("load_fused refuses the others");
            // cublasLtEpilogue_t, as the uint32_t the attribute takes.
            set(
                desc,
                Attr::CUBLASLT_MATMUL_DESC_EPILOGUE,
                &(epilogue as u32),
            )?;
            let pointer = if bias_type == Elem::F32 {
                f32_bias
            } else {
                c_bias
            };
            set(desc, Attr::CUBLASLT_MATMUL_DESC_BIAS_POINTER, &pointer)?;
            if bias_type != storage.c {
                // Not D's type, cuBLASLt's default: say so (cudaDataType_t,
                // as the int32_t the attribute takes).
                let t = lt_type(bias_type) as i32;
                set(desc, Attr::CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &t)?;
            }
        }
        if fp8 {
            // Its A is our B: A's scale is ours of B, and B's ours of A.
            set(desc, Attr::CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scales.b)?;
            set(desc, Attr::CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scales.a)?;
        }
        if storage.scaling == Scaling::Blocks {
            // DeepSeek-V3's scales: its A (our B^T) per 128 x 128 block,
            // its B (our A) per row per 128 of K, laid out as the kernels
            // read them (`Scaling::b_scales`, `Scaling::a_scales`).
            use cudarc::cublaslt::sys::cublasLtMatmulMatrixScale_t as Mode;
            let (blk, vec) = (
                Mode::CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F as u32,
                Mode::CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F as u32,
            );
            set(desc, Attr::CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &blk)?;
            set(desc, Attr::CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &vec)?;
        }
        let (m, n, k) = (m as u64, n as u64, k as u64);
        plan.layouts[0] = if fp8 {
            result::create_matrix_layout(lt_type(storage.b), k, n, k as i64)?
        } else {
            result::create_matrix_layout(lt_type(storage.b), n, k, n as i64)?
        };
        plan.layouts[1] = result::create_matrix_layout(lt_type(storage.a), k, m, k as i64)?;
        plan.layouts[2] = result::create_matrix_layout(lt_type(storage.c), n, m, n as i64)?;
        let pref = result::create_matmul_pref()?;
        let bytes = LT_WORKSPACE_BYTES as u64;
        // SAFETY: the preference is live, the value a u64 as the attribute
        // takes; every layout and the descriptor are live; the preference is
        // destroyed once, after the query.
        // The results array holds LT_ALGOS entries, as its length says.
        let found = unsafe {
            let set = result::set_matmul_pref_attribute(
                pref,
                cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                (&bytes as *const u64).cast(),
                8,
            );
            let mut results: [cudarc::cublaslt::sys::cublasLtMatmulHeuristicResult_t; LT_ALGOS] =
                std::mem::zeroed();
            let mut count = 0;
            let heuristic = set.and_then(|()| {
                cudarc::cublaslt::sys::cublasLtMatmulAlgoGetHeuristic(
                    self.handle,
                    desc,
                    plan.layouts[0],
                    plan.layouts[1],
                    plan.layouts[2],
                    plan.layouts[2],
                    pref,
                    LT_ALGOS as i32,
                    results.as_mut_ptr(),
                    &mut count,
                )
                .result()
            });
            let _ = result::destroy_matmul_pref(pref);
            heuristic?;
            results
                .into_iter()
                .take(count.max(0) as usize)
                .filter(|r| r.state == cudarc::cublaslt::sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS)
                .map(|r| r.algo)
                .collect::<Vec<_>>()
        };
        if found.is_empty() {
            return Err(result::CublasError(
                cudarc::cublaslt::sys::cublasStatus_t::CUBLAS_STATUS_NOT_SUPPORTED,
            ));
        }
        plan.algos = found;
        Ok(plan)
    }
}

/// Every Rust kernel, loaded.
pub fn load_rust_kernels(
    gpu: &Gpu,
    specs: &[&'static KernelSpec],
) -> Result<Vec<Kernel>, HostError> {
    specs.iter().map(|s| Kernel::load(gpu, s)).collect()
}
