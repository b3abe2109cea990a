//! Every way the host can fail, each with a one-line message that names the
//! cause and what to do about it. The messages are the library's: they
//! name no command-line flag; the `host` program adds its own hints
//! (`harness::cli::hint`).

use cudarc::driver::DriverError;

/// The name CUDA gives an error (`CUDA_ERROR_LAUNCH_FAILED`), with its description.
pub fn cuda_error_name(e: &DriverError) -> String {
    let name = e.error_name().map(|s| s.to_string_lossy().into_owned());
    let text = e.error_string().map(|s| s.to_string_lossy().into_owned());
    match (name, text) {
        (Ok(name), Ok(text)) => format!("{name} ({text})"),
        (Ok(name), Err(_)) => name,
        _ => format!("CUDA error {}", e.0 as i32),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("no NVIDIA driver found (libcuda.so.1 could not be loaded): install the NVIDIA driver")]
    NoDriver,
    #[error("the NVIDIA driver found no GPU: check `nvidia-smi` and CUDA_VISIBLE_DEVICES")]
    NoGpu,
    #[error("GPU {ordinal} does not exist: this machine has {count}")]
    NoSuchDevice { ordinal: usize, count: usize },
    #[error("CUDA failed while {doing}: {}", cuda_error_name(.source))]
    Cuda {
        doing: String,
        #[source]
        source: DriverError,
    },
    #[error(
        "the driver rejected the kernels' PTX ({}): it targets {target} but the GPU is {gpu}; \
         build the PTX for {gpu} or older",
        cuda_error_name(.source)
    )]
    PtxTooNew {
        target: String,
        gpu: String,
        #[source]
        source: DriverError,
    },
    #[error(
        "the driver rejected the kernels' PTX ({}): its JIT compiler could not compile it; \
         check the PTX with `ptxas`, or update the NVIDIA driver if the PTX ISA version is newer than it knows",
        cuda_error_name(.source)
    )]
    PtxRejected {
        #[source]
        source: DriverError,
    },
    #[error("the PTX file is not PTX text: {0}")]
    NotPtx(String),
    #[error("GPU is compute capability {major}.{minor}; the kernels need 7.0 or newer")]
    GpuTooOld { major: i32, minor: i32 },
    #[error("kernel {kernel} needs {needs}, but {gpu}: choose another kernel")]
    NeedsNewerGpu {
        kernel: String,
        needs: String,
        gpu: String,
    },
    #[error(
        "kernel {kernel} needs {} KB of shared memory per block, but this GPU allows {} KB: \
         choose a kernel with smaller tiles",
        .need / 1024,
        .limit / 1024
    )]
    TooMuchShared {
        kernel: String,
        need: usize,
        limit: usize,
    },
    #[error(
        "kernel {kernel} cannot run on the CPU emulator ({why}): run it on a GPU, or emulate \
         another kernel"
    )]
    NotEmulated { kernel: String, why: String },
    #[error("unknown kernel '{name}': choose one of {available}")]
    UnknownKernel { name: String, available: String },
    #[error("{0}")]
    BadShape(String),
    #[error(
        "{shape} needs {need:.2} GB of GPU memory but only {free:.2} GB are free: choose smaller sizes"
    )]
    TooLarge { shape: String, need: f64, free: f64 },
    #[error(
        "this call needs {what}, which it would allocate, but the stream is capturing a CUDA \
         graph, inside which nothing is allocated: make the same call once before the capture \
         (and, for split-K, reserve its workspace with Sgemm::reserve_workspace)"
    )]
    AllocatingInCapture { what: String },
    #[error(
        "the stream belongs to another CUDA context than the handle's: make a handle for that \
         context (Sgemm::new on the stream)"
    )]
    OtherContext,
    #[error("kernel {kernel} failed at launch: {}", cuda_error_name(.source))]
    LaunchFailed {
        kernel: String,
        #[source]
        source: DriverError,
    },
}

impl HostError {
    /// `spec` cannot run on the GPU `gpu` of compute capability `(major, minor)`.
    pub fn needs_newer_gpu(
        spec: &kernels_gpu::launch::KernelSpec,
        gpu: &str,
        (major, minor): (i32, i32),
    ) -> Self {
        let arch = &spec.module.arch;
        HostError::NeedsNewerGpu {
            kernel: spec.name.into(),
            needs: format!("{} ({}, {})", arch.needs(), arch.target_cpu, arch.adds),
            gpu: format!("{gpu} is compute capability {major}.{minor}"),
        }
    }

    /// Wraps a driver error with what the host was doing.
    pub fn cuda(doing: impl Into<String>) -> impl FnOnce(DriverError) -> HostError {
        let doing = doing.into();
        move |source| HostError::Cuda { doing, source }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/faults.md rows 23 and 24: the messages, without the GPUs that
    /// produce them (a GPU older than sm_80; one with less shared memory).
    /// The `host` program prints them with ` (see --list-kernels)` after
    /// (`harness::cli::hint`).
    #[test]
    fn a_kernel_the_gpu_cannot_run_names_what_it_needs() {
        let spec = &kernels_gpu::k11_mma::SPEC_128X128X32_W64X64_S2;
        let e = HostError::needs_newer_gpu(spec, "NVIDIA T4", (7, 5));
        assert_eq!(
            e.to_string(),
            "kernel mma_128x128x32_w64x64_s2 needs compute capability 8.0 or newer \
             (sm_80, mma.sync tensor cores (TF32, BF16, FP16), cp.async), but NVIDIA T4 is compute \
             capability 7.5: choose another kernel"
        );
        let e = HostError::TooMuchShared {
            kernel: "mma_256x128x32_w64x64_s3".into(),
            need: 148_992,
            limit: 101_376,
        };
        assert_eq!(
            e.to_string(),
            "kernel mma_256x128x32_w64x64_s3 needs 145 KB of shared memory per block, \
             but this GPU allows 99 KB: choose a kernel with smaller tiles"
        );
    }

    /// A call that would allocate inside a CUDA graph capture says what,
    /// and the two ways to have it before the capture.
    #[test]
    fn allocating_in_a_capture_names_the_fix() {
        let e = HostError::AllocatingInCapture {
            what: "tensor maps for these buffers for kernel k".into(),
        };
        let line = e.to_string();
        assert!(!line.contains('\n'));
        assert!(line.starts_with("this call needs tensor maps for these buffers for kernel k,"));
        assert!(line.contains("make the same call once before the capture"));
        assert!(line.contains("Sgemm::reserve_workspace"));
    }
}
