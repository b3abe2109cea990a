//! Every way the host can fail, each with a one-line message that names the
//! cause and what to do about it.

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
    #[error(
        "no NVIDIA driver found (libcuda.so.1 could not be loaded): install the NVIDIA driver, \
         or run the kernels on the CPU emulator with `host --n 64 --emulate`"
    )]
    NoDriver,
    #[error(
        "the NVIDIA driver found no GPU: check `nvidia-smi` and CUDA_VISIBLE_DEVICES, \
         or run the kernels on the CPU emulator with `host --n 64 --emulate`"
    )]
    NoGpu,
    #[error("GPU {ordinal} does not exist: this machine has {count} (choose --device 0..{})", count - 1)]
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
    #[error("kernel {kernel} needs {needs}, but {gpu}: choose another kernel (see --list-kernels)")]
    NeedsNewerGpu {
        kernel: String,
        needs: String,
        gpu: String,
    },
    #[error(
        "kernel {kernel} needs {} KB of shared memory per block, but this GPU allows {} KB: \
         choose a kernel with smaller tiles (see --list-kernels)",
        .need / 1024,
        .limit / 1024
    )]
    TooMuchShared {
        kernel: String,
        need: usize,
        limit: usize,
    },
    #[error("unknown kernel '{name}': choose one of {available} (see --list-kernels)")]
    UnknownKernel { name: String, available: String },
    #[error("{0}")]
    BadShape(String),
    #[error(
        "{shape} needs {need:.2} GB of GPU memory but only {free:.2} GB are free: choose smaller sizes"
    )]
    TooLarge { shape: String, need: f64, free: f64 },
    #[error("kernel {kernel} failed at launch: {}", cuda_error_name(.source))]
    LaunchFailed {
        kernel: String,
        #[source]
        source: DriverError,
    },
}

impl HostError {
    /// Wraps a driver error with what the host was doing.
    pub fn cuda(doing: impl Into<String>) -> impl FnOnce(DriverError) -> HostError {
        let doing = doing.into();
        move |source| HostError::Cuda { doing, source }
    }
}
