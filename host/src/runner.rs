//! One kernel on one problem: poison C, launch once, verify, and only then
//! time (warm-up launches, then timed launches between CUDA events, with
//! the L2 cache flushed before each so no launch finds the previous one's
//! data on chip).
//!
//! Anything that can enqueue a GEMM on the GPU's stream is an [`Enqueue`]:
//! the Rust kernels here, and the CUDA C++ and cuBLAS baselines of the bench.

use cudarc::driver::sys::{CUdeviceptr, CUevent_flags};
use std::sync::Mutex;

use cudarc::driver::{
    CudaFunction, CudaSlice, DevicePtr, DevicePtrMut, DriverError, LaunchConfig, PushKernelArg,
};
use kernels_gpu::launch::{KernelSpec, Operands, Precision};
use serde::Serialize;

use crate::HostError;
use crate::gpu::Gpu;
use crate::reference::{Reference, Verification};
use crate::shape::Shape;
use crate::timing::Timing;
use crate::tma::{DeviceMaps, Operand, Padded};

/// A, B and C on the device.
pub struct Buffers {
    pub shape: Shape,
    pub a: CudaSlice<f32>,
    pub b: CudaSlice<f32>,
    pub c: CudaSlice<f32>,
    /// Written between timed launches to evict A, B and C from L2.
    flush: CudaSlice<u8>,
    /// A's and B's device addresses, read once here, so that launches
    /// that need them (TMA kernels' tensor maps) do not ask cudarc again
    /// inside a timed region.
    addresses: (CUdeviceptr, CUdeviceptr),
}

impl Buffers {
    /// Bytes of device memory [`Buffers::new`] will allocate.
    pub fn device_bytes(gpu: &Gpu, shape: &Shape) -> usize {
        shape.bytes() + flush_bytes(gpu)
    }

    /// Uploads A and B and allocates C, after checking they fit.
    pub fn new(gpu: &Gpu, shape: Shape, a: &[f32], b: &[f32]) -> Result<Self, HostError> {
        gpu.check_fits(&shape.to_string(), Self::device_bytes(gpu, &shape))?;
        let c_len = shape.m * shape.n;
        // SAFETY: C is poisoned before every verified launch; the flush
        // buffer's contents are never read.
        let (c, flush) = unsafe {
            (
                gpu.stream
                    .alloc::<f32>(c_len)
                    .map_err(HostError::cuda("allocating C"))?,
                gpu.stream
                    .alloc::<u8>(flush_bytes(gpu))
                    .map_err(HostError::cuda("allocating the L2 flush buffer"))?,
            )
        };
        let (a, b) = (gpu.upload(a)?, gpu.upload(b)?);
        let addresses = (device_address(gpu, &a), device_address(gpu, &b));
        Ok(Self {
            shape,
            a,
            b,
            c,
            flush,
            addresses,
        })
    }

    /// A's and B's device addresses.
    pub fn addresses(&self) -> (CUdeviceptr, CUdeviceptr) {
        self.addresses
    }

    /// Fills C with NaN (all bytes 0xFF), so an element no thread writes fails verification.
    pub fn poison_c(&mut self, gpu: &Gpu) -> Result<(), HostError> {
        memset(gpu, &mut self.c, 0xFF).map_err(HostError::cuda("poisoning C"))
    }

    fn flush_l2(&mut self, gpu: &Gpu, round: u8) -> Result<(), HostError> {
        memset(gpu, &mut self.flush, round).map_err(HostError::cuda("flushing L2"))
    }
}

/// Twice the L2 size (at least 64 MB): writing it evicts whatever L2 held.
fn flush_bytes(gpu: &Gpu) -> usize {
    (2 * gpu.info.l2_bytes.max(0) as usize).max(64 << 20)
}

fn memset<T>(gpu: &Gpu, buf: &mut CudaSlice<T>, byte: u8) -> Result<(), DriverError> {
    let bytes = buf.num_bytes();
    let (ptr, _sync) = buf.device_ptr_mut(&gpu.stream);
    // SAFETY: writes exactly the buffer's own bytes, on the stream that owns it.
    unsafe { cudarc::driver::result::memset_d8_async(ptr, byte, bytes, gpu.stream.cu_stream()) }
}

/// The device address of `buf` (read once, outside any timed region:
/// cudarc's `device_ptr` may enqueue event waits).
pub fn device_address<T>(gpu: &Gpu, buf: &CudaSlice<T>) -> CUdeviceptr {
    buf.device_ptr(&gpu.stream).0
}

/// Something that enqueues `C = A * B` on the GPU's stream.
pub trait Enqueue {
    /// Name in reports.
    fn name(&self) -> &str;
    /// The arithmetic it does (what its result is verified against).
    fn precision(&self) -> Precision;
    /// Enqueues one product into `bufs.c`; returns without waiting.
    fn enqueue(&self, gpu: &Gpu, bufs: &mut Buffers) -> Result<(), HostError>;
}

/// A kernel loaded on the GPU: one of `kernels-gpu`'s, or its CUDA C++
/// twin (`crate::baselines`), which launches with the Rust kernel's spec.
pub struct Kernel {
    pub spec: &'static KernelSpec,
    /// Its name in reports: the spec's, or `NAME (CUDA C++)` for a twin.
    label: String,
    func: CudaFunction,
    /// Launch-sized shared memory: the spec's, or 0 for a twin that
    /// declares its tiles `__shared__`.
    shared_bytes: usize,
    /// Elements one matrix may have: the Rust kernels' 32-bit offsets
    /// allow `u32::MAX`, the twins' `int` offsets `i32::MAX`.
    max_elems: usize,
    /// A TMA kernel's tensor maps, made for the buffers it last ran on.
    maps: Mutex<Option<DeviceMaps>>,
    /// A TMA kernel's padded copies of A and B, for the last shape that
    /// needed them (`Operands::padded`).
    padded: Mutex<Option<Padded>>,
}

impl Kernel {
    /// The Rust kernel `spec`, from the PTX modules.
    pub fn load(gpu: &Gpu, spec: &'static KernelSpec) -> Result<Self, HostError> {
        Ok(Self {
            spec,
            label: spec.name.into(),
            func: gpu.function(spec)?,
            shared_bytes: spec.launch.shared_bytes,
            max_elems: kernels_gpu::gemm::MAX_ELEMS,
            maps: Mutex::new(None),
            padded: Mutex::new(None),
        })
    }

    /// The CUDA C++ twin `func` of the Rust kernel `spec`, launched with
    /// `shared_bytes` of launch-sized shared memory (0 or the spec's).
    pub fn cuda_twin(spec: &'static KernelSpec, func: CudaFunction, shared_bytes: usize) -> Self {
        Self {
            spec,
            label: format!("{} (CUDA C++)", spec.name),
            func,
            shared_bytes,
            max_elems: i32::MAX as usize,
            maps: Mutex::new(None),
            padded: Mutex::new(None),
        }
    }

    /// The launch configuration, from the kernel's own constants.
    pub fn config(&self, shape: &Shape) -> Result<LaunchConfig, HostError> {
        launch_config(self.spec, shape, self.shared_bytes)
    }

    /// Why this kernel cannot take `shape`, if it cannot: what its spec
    /// refuses, and for a twin (`int` offsets) any matrix of 2^31 elements
    /// or more.
    pub fn unsupported(&self, shape: &Shape) -> Option<String> {
        let (a, b, c) = shape.elems();
        let largest = a.max(b).max(c);
        if largest > self.max_elems {
            return Some(format!(
                "a matrix of {largest} elements is more than its offsets allow ({})",
                self.max_elems
            ));
        }
        self.spec.unsupported(shape.m, shape.n, shape.k)
    }
}

/// A kernel's launch configuration for `shape`, from its spec, with
/// `shared_bytes` of launch-sized shared memory.
pub fn launch_config(
    spec: &KernelSpec,
    shape: &Shape,
    shared_bytes: usize,
) -> Result<LaunchConfig, HostError> {
    let (gx, gy) = check_grid(spec, shape)?;
    let (bx, by) = spec.launch.block_threads;
    Ok(LaunchConfig {
        grid_dim: (gx as u32, gy as u32, 1),
        block_dim: (bx, by, 1),
        shared_mem_bytes: shared_bytes as u32,
    })
}

/// Enqueues `func(A, B, C, m, n, k)`: the signature of every GEMM entry,
/// Rust (`gemm_kernel!`) or CUDA C++ (the twins); with `tma = Some((maps,
/// k))`, `func(A, B, C, m, n, k, maps)` (a TMA kernel,
/// `gemm_kernel!(name, tensor_maps)`), where `k` is the K its tensor maps
/// describe (the shape's, or rounded up to 4 for padded copies).
///
/// # Safety
/// `func` takes exactly these parameters, `cfg` launches it so that it
/// stays inside buffers of m*k, k*n and m*n floats, and `maps` holds the
/// tensor maps the kernel expects, made for these buffers (or padded
/// copies of them) and this shape.
pub unsafe fn launch_gemm(
    gpu: &Gpu,
    func: &CudaFunction,
    cfg: LaunchConfig,
    bufs: &mut Buffers,
    tma: Option<(&CudaSlice<u8>, u32)>,
    name: &str,
) -> Result<(), HostError> {
    let (m, n) = (bufs.shape.m as u32, bufs.shape.n as u32);
    let k = tma.map_or(bufs.shape.k as u32, |(_, k)| k);
    let mut launch = gpu.stream.launch_builder(func);
    launch
        .arg(&bufs.a)
        .arg(&bufs.b)
        .arg(&mut bufs.c)
        .arg(&m)
        .arg(&n)
        .arg(&k);
    if let Some((maps, _)) = tma {
        launch.arg(maps);
    }
    // SAFETY: forwarded from this function's contract; the buffers hold
    // m*k, k*n and m*n floats.
    unsafe { launch.launch(cfg) }
        .map(|_| ())
        .map_err(|source| HostError::LaunchFailed {
            kernel: name.into(),
            source,
        })
}

impl Enqueue for Kernel {
    fn name(&self) -> &str {
        &self.label
    }

    fn precision(&self) -> Precision {
        self.spec.precision
    }

    fn enqueue(&self, gpu: &Gpu, bufs: &mut Buffers) -> Result<(), HostError> {
        let cfg = self.config(&bufs.shape)?;
        if let Some(why) = self.unsupported(&bufs.shape) {
            return Err(HostError::BadShape(format!(
                "kernel {} cannot take {}: {why}; choose another kernel",
                self.label, bufs.shape
            )));
        }
        let Operands::TensorMaps(boxes) = self.spec.operands else {
            // SAFETY: gemm_kernel! entries and their twins take (A, B, C,
            // m, n, k); grid and block come from the kernel's own spec,
            // shared memory from it too (or none for a twin with static
            // tiles); offsets fit the kernel's index type (checked above).
            return unsafe { launch_gemm(gpu, &self.func, cfg, bufs, None, &self.label) };
        };
        let shape = bufs.shape;
        let (a, b) = bufs.addresses();
        // Where the tensor maps point: the caller's A and B, or padded
        // copies of them when TMA cannot describe their rows.
        let mut padded = self.padded.lock().unwrap_or_else(|e| e.into_inner());
        let (a_op, b_op, k) = match self.spec.operands.padded(shape.m, shape.n, shape.k) {
            None => (
                Operand {
                    ptr: a,
                    rows: shape.m,
                    cols: shape.k,
                },
                Operand {
                    ptr: b,
                    rows: shape.k,
                    cols: shape.n,
                },
                shape.k,
            ),
            Some(sizes) => {
                let pad = Padded::for_shape(padded.take(), gpu, &shape, sizes)?;
                pad.copy_in(gpu, a, b)?;
                let (a_op, b_op) = pad.operands();
                let k4 = pad.k4;
                *padded = Some(pad);
                (a_op, b_op, k4)
            }
        };
        let mut cache = self.maps.lock().unwrap_or_else(|e| e.into_inner());
        let maps = DeviceMaps::for_operands(cache.take(), gpu, &boxes, a_op, b_op)?;
        // SAFETY: gemm_kernel!(name, tensor_maps) entries and their twins
        // take (A, B, C, m, n, k, maps); the maps were made for these
        // buffers (or their padded copies, whose extra K columns and rows
        // are zero), with k the K they describe, and the kernel's own
        // boxes; C is the caller's m x n; geometry from the kernel's spec.
        let launched = unsafe {
            launch_gemm(
                gpu,
                &self.func,
                cfg,
                bufs,
                Some((&maps.maps, k as u32)),
                &self.label,
            )
        };
        *cache = Some(maps);
        launched
    }
}

/// The kernel's grid for `shape`, or an error when CUDA cannot launch it
/// (at most 65,535 rows of blocks). Cheap: call it before allocating.
pub fn check_grid(spec: &KernelSpec, shape: &Shape) -> Result<(usize, usize), HostError> {
    let (gx, gy) = spec.launch.grid(shape.m, shape.n);
    if gy > 65_535 || gx > i32::MAX as usize {
        return Err(HostError::BadShape(format!(
            "{shape} needs a grid of {gx} x {gy} blocks for kernel {}, above CUDA's limit \
             of 65,535 rows of blocks: choose a smaller m",
            spec.name
        )));
    }
    Ok((gx, gy))
}

/// How many launches to run, and whether to flush L2 between them.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct TimingOptions {
    pub warmup: usize,
    /// Timed launches; 0 verifies without timing. With a budget, the least.
    pub reps: usize,
    pub flush_l2: bool,
    /// When set, run about this many milliseconds of timed launches
    /// (at least `reps`, at most [`MAX_REPS`]), judged from one launch.
    pub budget_ms: Option<f64>,
}

/// Most timed launches a time budget can ask for.
pub const MAX_REPS: usize = 200;

/// What one kernel did on one problem.
#[derive(Clone, Debug, Serialize)]
pub struct Measurement {
    pub verification: Verification,
    /// None when verification failed (a wrong kernel is never timed) or reps = 0.
    pub timing: Option<Timing>,
}

/// Verifies `kernel` against `reference`, then times it if it passed.
pub fn measure(
    gpu: &Gpu,
    bufs: &mut Buffers,
    reference: &Reference,
    kernel: &dyn Enqueue,
    opts: TimingOptions,
) -> Result<Measurement, HostError> {
    let name = kernel.name().to_string();
    bufs.poison_c(gpu)?;
    kernel.enqueue(gpu, bufs)?;
    gpu.sync(&format!("running {name}"))
        .map_err(|e| launch_error(&name, e))?;
    let verification = reference.check(&gpu.download(&bufs.c)?, kernel.precision());
    if !verification.passed || opts.reps == 0 {
        return Ok(Measurement {
            verification,
            timing: None,
        });
    }

    for _ in 0..opts.warmup {
        kernel.enqueue(gpu, bufs)?;
    }
    let reps = match opts.budget_ms {
        None => opts.reps,
        Some(budget) => {
            let start = record(gpu)?;
            kernel.enqueue(gpu, bufs)?;
            let end = record(gpu)?;
            let once = start
                .elapsed_ms(&end)
                .map_err(HostError::cuda("reading CUDA event times"))?;
            ((budget / f64::from(once).max(1e-3)) as usize).clamp(opts.reps, MAX_REPS)
        }
    };
    let mut events = Vec::with_capacity(reps);
    for rep in 0..reps {
        if opts.flush_l2 {
            bufs.flush_l2(gpu, rep as u8)?;
        }
        let start = record(gpu)?;
        kernel.enqueue(gpu, bufs)?;
        events.push((start, record(gpu)?));
    }
    gpu.sync(&format!("timing {name}"))
        .map_err(|e| launch_error(&name, e))?;
    let samples = events
        .iter()
        .map(|(s, e)| s.elapsed_ms(e).map(f64::from))
        .collect::<Result<Vec<_>, _>>()
        .map_err(HostError::cuda("reading CUDA event times"))?;
    Ok(Measurement {
        verification,
        timing: Some(Timing::from_samples(&samples)),
    })
}

fn record(gpu: &Gpu) -> Result<cudarc::driver::CudaEvent, HostError> {
    gpu.stream
        .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
        .map_err(HostError::cuda("recording a CUDA event"))
}

/// A fault found when waiting is the kernel's fault: name it.
fn launch_error(kernel: &str, e: HostError) -> HostError {
    match e {
        HostError::Cuda { source, .. } => HostError::LaunchFailed {
            kernel: kernel.into(),
            source,
        },
        other => other,
    }
}
