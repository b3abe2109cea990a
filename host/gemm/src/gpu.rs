//! The GPU: driver checks, device attributes, the kernels' module.
//!
//! Everything here returns a [`HostError`] with a one-line message; nothing
//! panics when the driver, the GPU or the module is missing. cudarc's
//! buffers, module and context free themselves on drop, so every error
//! path leaves the GPU clean.

use kernels_gpu::elem::Math;
use std::sync::{Arc, Mutex};

use cudarc::driver::sys::{CUdevice_attribute, CUdeviceptr, CUfunction_attribute};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, DevicePtrMut,
    DriverError,
};
use cudarc::nvrtc::Ptx;
use kernels_gpu::launch::KernelSpec;
use kernels_gpu::modules::{MODULES, PtxModule};
use serde::{Deserialize, Serialize};

use crate::HostError;

/// What the host reports about the GPU, read from the device itself.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    pub compute_capability: (i32, i32),
    pub sms: i32,
    /// Boost clock the driver reports, MHz (None where the driver does not say).
    pub clock_mhz: Option<f64>,
    pub memory_clock_mhz: Option<f64>,
    pub memory_bus_bits: Option<i32>,
    pub l2_bytes: i32,
    pub total_memory: usize,
    /// e.g. 13000 for CUDA 13.0.
    pub driver_cuda_version: i32,
}

impl DeviceInfo {
    /// FP32 lanes per SM, by architecture (CUDA programming guide,
    /// "arithmetic instructions" throughput table).
    pub fn fp32_lanes_per_sm(&self) -> i32 {
        match self.compute_capability {
            (7, _) | (8, 0) => 64,
            _ => 128,
        }
    }

    /// FP32 peak: SMs x lanes x 2 FLOP per FMA x clock.
    pub fn peak_fp32_gflops(&self) -> Option<f64> {
        self.peak_gflops(Math::Fp32)
    }

    /// Dense TF32 tensor-core FLOP per clock per SM, by architecture: the
    /// datasheets' dense TF32 rate divided by SMs and boost clock (A100:
    /// 156 TFLOP/s, 108 SMs, 1410 MHz -> 1024; GA102 and AD102: 256; H100
    /// SXM: 495 TFLOP/s, 132 SMs, 1830 MHz -> 2048). None where unknown
    /// or where there are no TF32 tensor cores (before sm_80).
    pub fn tf32_flops_per_clock_per_sm(&self) -> Option<i32> {
        match self.compute_capability {
            (8, 0) => Some(1024),
            (8, 6) | (8, 9) => Some(256),
            (9, 0) => Some(2048),
            _ => None,
        }
    }

    /// Dense TF32 tensor-core peak: SMs x the rate above x clock.
    pub fn peak_tf32_gflops(&self) -> Option<f64> {
        self.peak_gflops(Math::Tf32)
    }

    /// Dense BF16 and FP16 tensor-core FLOP per clock per SM (f32
    /// accumulation), by architecture: the datasheets' dense rate divided
    /// by SMs and boost clock (A100: 312 TFLOP/s -> 2048; H100/H200 SXM:
    /// 989 TFLOP/s, 132 SMs, 1830 MHz -> 4096). None where unknown (the
    /// GeForce parts halve the rate with f32 accumulation) or before sm_80.
    pub fn half_flops_per_clock_per_sm(&self) -> Option<i32> {
        match self.compute_capability {
            (8, 0) => Some(2048),
            (9, 0) => Some(4096),
            _ => None,
        }
    }

    /// Dense FP8 (E4M3, E5M2) tensor-core FLOP per clock per SM: twice
    /// the 16-bit rate on Hopper (the datasheets' 1,979 TFLOP/s for an
    /// H100/H200 SXM over 132 SMs at 1.83 GHz); None where unknown or
    /// absent (Ampere has no FP8 tensor cores).
    pub fn fp8_flops_per_clock_per_sm(&self) -> Option<i32> {
        match self.compute_capability {
            (9, 0) => Some(8192),
            _ => None,
        }
    }

    /// The peak of `math` on this GPU, GFLOP/s: the FP32 pipe, or the
    /// dense tensor-core rate of that math ([`Self::flops_per_clock_per_sm`]).
    pub fn peak_gflops(&self, math: Math) -> Option<f64> {
        let per_sm = self.flops_per_clock_per_sm(math)?;
        self.clock_mhz
            .map(|mhz| self.sms as f64 * per_sm as f64 * mhz / 1e3)
    }

    /// FLOP per clock per SM of `math`, keyed by architecture: FP32 lanes
    /// x 2, or the tensor cores' dense rate.
    pub fn flops_per_clock_per_sm(&self, math: Math) -> Option<i32> {
        match math {
            Math::Fp32 => Some(self.fp32_lanes_per_sm() * 2),
            Math::Tf32 => self.tf32_flops_per_clock_per_sm(),
            // 3xTF32: three TF32 products per product (FLOP counted as 2mnk).
            Math::Tf32x3 => self.tf32_flops_per_clock_per_sm().map(|f| f / 3),
            Math::Bf16 | Math::F16 => self.half_flops_per_clock_per_sm(),
            // FP8 at twice the 16-bit rate where the tensor cores have it
            // (Ada and Hopper: 8192 per clock per SM dense on an H100/H200).
            Math::Fp8 => self.fp8_flops_per_clock_per_sm(),
        }
    }

    /// DRAM peak: two transfers per memory clock over the bus.
    pub fn peak_dram_gbs(&self) -> Option<f64> {
        match (self.memory_clock_mhz, self.memory_bus_bits) {
            (Some(mhz), Some(bits)) => Some(2.0 * mhz * 1e6 * (bits as f64 / 8.0) / 1e9),
            _ => None,
        }
    }
}

/// An open GPU with the kernels' PTX modules it can run loaded.
pub struct Gpu {
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    /// Shared by the [`Gpu::on_stream`] views of one GPU: a module loads
    /// once for all of them.
    ptx: Arc<Modules>,
    pub info: DeviceInfo,
    /// Most launch-sized shared memory a block may opt into, bytes.
    max_shared_bytes: usize,
}

/// Where the kernels' entries come from.
enum Modules {
    /// The built-in modules, each loaded the first time one of its entries
    /// is asked for: its shipped SASS where there is one for this GPU
    /// (`crate::sass`, milliseconds), else its PTX, which the driver
    /// compiles when it is loaded (seconds for the large ones the first
    /// time on a machine: a program pays only for the modules it uses).
    /// Only those this GPU can run; each with what it was loaded from.
    BuiltIn(Mutex<Vec<(&'static str, Arc<CudaModule>, Loaded)>>),
    /// One PTX file given by the user, for every kernel (`--ptx`).
    File(Arc<CudaModule>),
}

/// What a built-in module was loaded from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loaded {
    /// Shipped SASS for this architecture: no JIT compilation.
    Sass(&'static str),
    /// PTX, compiled by the driver's JIT (or taken from its cache).
    Ptx,
}

/// Set to `1` to load every module from its PTX even where SASS is
/// shipped (to compare, or to work around a driver that refuses the SASS,
/// which the library also does by itself).
pub const NO_SASS: &str = "RUST_GEMM_NO_SASS";

/// Whether the NVIDIA driver library can be loaded (no panic when it cannot).
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen libcuda under its known names.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// Number of GPUs the driver sees.
pub fn device_count() -> Result<usize, HostError> {
    if !driver_present() {
        return Err(HostError::NoDriver);
    }
    match cudarc::driver::result::init() {
        Ok(()) => {}
        // cuInit itself says "no device" when none is visible.
        Err(e) if e.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_NO_DEVICE => return Ok(0),
        Err(e) => return Err(HostError::cuda("initialising the driver (cuInit)")(e)),
    }
    let count = CudaContext::device_count().map_err(HostError::cuda("counting GPUs"))?;
    Ok(count.max(0) as usize)
}

impl Gpu {
    /// Opens GPU `ordinal` and loads the built-in PTX modules it can run.
    pub fn open(ordinal: usize) -> Result<Self, HostError> {
        Self::open_device(ordinal)
    }

    /// Opens GPU `ordinal` and loads every kernel from `ptx` (PTX source text).
    pub fn open_with_ptx(ordinal: usize, ptx: &str) -> Result<Self, HostError> {
        if ptx.contains('\0') {
            return Err(HostError::NotPtx("it contains a NUL byte".into()));
        }
        let mut gpu = Self::open_device(ordinal)?;
        gpu.ptx = Arc::new(Modules::File(gpu.load(ptx)?));
        Ok(gpu)
    }

    /// The GPU of a caller's `stream` (the library's way in: launches
    /// go on that stream, and cudarc's event tracking stays as the caller
    /// set it); the built-in PTX modules are loaded into the stream's
    /// context as they are needed.
    pub fn for_stream(stream: Arc<CudaStream>) -> Result<Self, HostError> {
        let ctx = stream.context().clone();
        Self::with_context(ctx, stream)
    }

    /// The built-in `module`, loaded now if it was not yet.
    fn built_in(&self, module: &PtxModule) -> Result<Arc<CudaModule>, HostError> {
        let Modules::BuiltIn(loaded) = &*self.ptx else {
            unreachable!("only called for built-in modules");
        };
        let mut loaded = loaded.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, m, _)) = loaded.iter().find(|(name, _, _)| *name == module.name) {
            return Ok(m.clone());
        }
        let sass = self.sass_for(module);
        // A driver older than the ptxas that made the SASS may refuse it:
        // the PTX then, as for a GPU without SASS.
        let from_sass = sass.and_then(|(arch, cubin)| {
            let m = self
                .ctx
                .load_module(Ptx::from_binary(cubin.to_vec()))
                .ok()?;
            Some((m, Loaded::Sass(arch)))
        });
        let (m, how) = match from_sass {
            Some(found) => found,
            None => (self.load(crate::ptx(module))?, Loaded::Ptx),
        };
        loaded.push((module.name, m.clone(), how));
        Ok(m)
    }

    /// A context and stream on GPU `ordinal`, no module loaded yet.
    fn open_device(ordinal: usize) -> Result<Self, HostError> {
        let count = device_count()?;
        if count == 0 {
            return Err(HostError::NoGpu);
        }
        if ordinal >= count {
            return Err(HostError::NoSuchDevice { ordinal, count });
        }
        let ctx = CudaContext::new(ordinal).map_err(HostError::cuda("creating a context"))?;
        // One stream, used in order: cudarc's per-buffer event tracking is
        // not needed, and would add event records to every timed launch.
        // SAFETY: this program uses the context from one stream only.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.default_stream();
        Self::with_context(ctx, stream)
    }

    /// This GPU with launches on `stream` (of the same context): the
    /// modules loaded so far, and those loaded later through either, are
    /// shared.
    pub fn on_stream(&self, stream: Arc<CudaStream>) -> Result<Self, HostError> {
        if **stream.context() != *self.ctx {
            return Err(HostError::OtherContext);
        }
        Ok(Self {
            ctx: self.ctx.clone(),
            stream,
            ptx: self.ptx.clone(),
            info: self.info.clone(),
            max_shared_bytes: self.max_shared_bytes,
        })
    }

    /// Whether work enqueued on the stream now goes into a CUDA graph
    /// (`cuStreamIsCapturing`): such a call must allocate nothing, as
    /// what a graph reads must outlive it.
    pub fn capturing(&self) -> Result<bool, HostError> {
        use cudarc::driver::sys::CUstreamCaptureStatus as S;
        match self.stream.capture_status() {
            Ok(S::CU_STREAM_CAPTURE_STATUS_NONE) => Ok(false),
            Ok(_) => Ok(true),
            Err(e) => Err(HostError::cuda("asking whether the stream is capturing")(e)),
        }
    }

    /// `ctx` and `stream` with the device's attributes read, no module
    /// loaded yet.
    fn with_context(ctx: Arc<CudaContext>, stream: Arc<CudaStream>) -> Result<Self, HostError> {
        let ordinal = ctx.ordinal();
        let info = device_info(&ctx, ordinal)?;
        let (major, minor) = info.compute_capability;
        if major < 7 {
            return Err(HostError::GpuTooOld { major, minor });
        }
        let max_shared_bytes = ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
            .map_err(HostError::cuda("reading the shared-memory limit"))?
            .max(0) as usize;
        Ok(Self {
            ctx,
            stream,
            ptx: Arc::new(Modules::BuiltIn(Mutex::new(Vec::new()))),
            info,
            max_shared_bytes,
        })
    }

    /// Loads PTX text as a module, naming the driver's reason when it refuses.
    fn load(&self, ptx: &str) -> Result<Arc<CudaModule>, HostError> {
        let (major, minor) = self.info.compute_capability;
        self.ctx
            .load_module(Ptx::from_src(crate::with_launch_bounds(ptx)))
            .map_err(|source| match ptx_target(ptx) {
                Some(target) if sm_number(target).is_some_and(|t| t > major * 10 + minor) => {
                    HostError::PtxTooNew {
                        target: target.to_string(),
                        gpu: format!("sm_{major}{minor}"),
                        source,
                    }
                }
                _ => HostError::PtxRejected { source },
            })
    }

    /// The shipped SASS this GPU loads for `module`, unless [`NO_SASS`] is
    /// set.
    fn sass_for(&self, module: &PtxModule) -> Option<(&'static str, &'static [u8])> {
        let no_sass = std::env::var(NO_SASS).is_ok_and(|v| v == "1");
        crate::sass(module, self.capability()).filter(|_| !no_sass)
    }

    /// The GPU's compute capability, as the modules' architectures state theirs.
    fn capability(&self) -> (u32, u32) {
        let (major, minor) = self.info.compute_capability;
        (major.max(0) as u32, minor.max(0) as u32)
    }

    fn runs_module(&self, module: &PtxModule) -> bool {
        module.arch.runs_on(self.capability())
    }

    /// Whether this GPU can run `spec` (with `--ptx`, whether the file has it
    /// is only known when its function is looked up).
    pub fn runs(&self, spec: &KernelSpec) -> bool {
        match *self.ptx {
            Modules::File(_) => true,
            Modules::BuiltIn(_) => self.runs_module(spec.module),
        }
    }

    /// Fails with a one-line reason unless this GPU can run `spec`.
    pub fn check_runs(&self, spec: &KernelSpec) -> Result<(), HostError> {
        if self.runs(spec) {
            return Ok(());
        }
        Err(HostError::needs_newer_gpu(
            spec,
            &self.info.name,
            self.info.compute_capability,
        ))
    }

    /// The modules this GPU runs (each loaded when first used), for reports:
    /// `ladder (sm_70), ..., mma (sm_80)`,
    /// or the PTX file's `.target`.
    pub fn ptx_description(&self) -> String {
        match &*self.ptx {
            Modules::File(_) => "a PTX file (--ptx)".into(),
            Modules::BuiltIn(loaded) => {
                let loaded = loaded.lock().unwrap_or_else(|e| e.into_inner());
                let mut parts: Vec<String> = Vec::new();
                for module in MODULES.iter().filter(|m| self.runs_module(m)) {
                    let how = match loaded.iter().find(|(name, _, _)| *name == module.name) {
                        Some((_, _, Loaded::Sass(arch))) => format!(", SASS {arch}"),
                        Some((_, _, Loaded::Ptx)) => ", PTX JIT".into(),
                        // Not loaded yet: what it will be loaded from.
                        None => match self.sass_for(module) {
                            Some((arch, _)) => format!(", SASS {arch}"),
                            None => ", PTX JIT".into(),
                        },
                    };
                    parts.push(format!("{} ({}{how})", module.name, module.arch.target_cpu));
                }
                parts.join(", ")
            }
        }
    }

    /// The kernel's entry point, ready to launch with its launch's shared memory.
    pub fn function(&self, spec: &KernelSpec) -> Result<CudaFunction, HostError> {
        self.entry(spec, spec.name)
    }

    /// The entry `name` of `spec`'s module, launched with `spec`'s shared
    /// memory: the kernel's own, or its split entry
    /// (`registry::SPLIT_IN_LAUNCH`).
    pub fn entry(&self, spec: &KernelSpec, name: &str) -> Result<CudaFunction, HostError> {
        self.check_runs(spec)?;
        let module = match &*self.ptx {
            Modules::File(module) => module.clone(),
            Modules::BuiltIn(_) => self.built_in(spec.module)?,
        };
        let f = module
            .load_function(name)
            .map_err(HostError::cuda(format!("finding kernel {name} in the PTX")))?;
        self.allow_shared(&f, name, spec.launch.shared_bytes)?;
        Ok(f)
    }

    /// The utility entry `entry` of `module` (not a GEMM kernel; see
    /// `PtxModule::utility_entries`), from the built-in PTX or the `--ptx`
    /// file.
    pub fn utility(&self, module: &PtxModule, entry: &str) -> Result<CudaFunction, HostError> {
        let loaded = match &*self.ptx {
            Modules::File(module) => Some(module.clone()),
            Modules::BuiltIn(_) if self.runs_module(module) => Some(self.built_in(module)?),
            Modules::BuiltIn(_) => None,
        };
        let Some(loaded) = loaded else {
            return Err(HostError::BadShape(format!(
                "the {} module ({}) is not loaded on this GPU: it needs {}",
                module.name,
                module.arch.target_cpu,
                module.arch.needs()
            )));
        };
        loaded
            .load_function(entry)
            .map_err(HostError::cuda(format!("finding {entry} in the PTX")))
    }

    /// Lets `f` (kernel `name`) launch with `bytes` of launch-sized shared
    /// memory: an error above the GPU's limit, an opt-in above 48 KB.
    pub fn allow_shared(
        &self,
        f: &CudaFunction,
        name: &str,
        bytes: usize,
    ) -> Result<(), HostError> {
        if bytes > self.max_shared_bytes {
            return Err(HostError::TooMuchShared {
                kernel: name.into(),
                need: bytes,
                limit: self.max_shared_bytes,
            });
        }
        // Above 48 KB a block's dynamic shared memory must be opted into.
        if bytes > 48 * 1024 {
            f.set_attribute(
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                bytes as i32,
            )
            .map_err(HostError::cuda(format!(
                "raising {name}'s shared-memory limit"
            )))?;
        }
        Ok(())
    }

    /// Free and total device memory, bytes.
    pub fn memory(&self) -> Result<(usize, usize), HostError> {
        self.ctx
            .mem_get_info()
            .map_err(HostError::cuda("reading free memory"))
    }

    /// Fails with a clear message when `bytes` would not fit in free memory
    /// (with a margin for the driver), before anything is allocated.
    pub fn check_fits(&self, what: &str, bytes: usize) -> Result<(), HostError> {
        let (free, _) = self.memory()?;
        let margin = 256 << 20;
        if bytes.saturating_add(margin) > free {
            return Err(HostError::TooLarge {
                shape: what.to_string(),
                need: bytes as f64 / 1e9,
                free: free as f64 / 1e9,
            });
        }
        Ok(())
    }

    /// Copies `data` to a new device buffer.
    pub fn upload(&self, data: &[f32]) -> Result<CudaSlice<f32>, HostError> {
        self.stream
            .clone_htod(data)
            .map_err(HostError::cuda("copying to the GPU"))
    }

    /// Copies a device buffer back.
    pub fn download(&self, buf: &CudaSlice<f32>) -> Result<Vec<f32>, HostError> {
        self.stream
            .clone_dtoh(buf)
            .map_err(HostError::cuda("copying from the GPU"))
    }

    /// Waits for the stream; a kernel fault surfaces here.
    pub fn sync(&self, doing: &str) -> Result<(), HostError> {
        self.stream
            .synchronize()
            .map_err(HostError::cuda(doing.to_string()))
    }
}

/// The architecture a PTX module names in its `.target` line (`sm_70`).
pub fn ptx_target(ptx: &str) -> Option<&str> {
    ptx.lines()
        .find_map(|l| l.trim().strip_prefix(".target "))
        .and_then(|t| t.split([',', ' ']).next())
}

/// `sm_90a` -> 90.
fn sm_number(target: &str) -> Option<i32> {
    target
        .strip_prefix("sm_")?
        .trim_end_matches(|c: char| c.is_ascii_alphabetic())
        .parse()
        .ok()
}

fn device_info(ctx: &Arc<CudaContext>, ordinal: usize) -> Result<DeviceInfo, HostError> {
    let attr = |a: CUdevice_attribute| ctx.attribute(a).ok().filter(|&v| v > 0);
    let name = ctx
        .name()
        .map_err(HostError::cuda("reading the GPU's name"))?;
    let compute_capability = ctx
        .compute_capability()
        .map_err(HostError::cuda("reading the compute capability"))?;
    let total_memory = ctx
        .total_mem()
        .map_err(HostError::cuda("reading total memory"))?;
    let mut driver = 0;
    // SAFETY: writes one int; the driver is loaded (a context exists).
    unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut driver) };
    Ok(DeviceInfo {
        ordinal,
        name,
        compute_capability,
        sms: attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT).unwrap_or(0),
        clock_mhz: attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)
            .map(|khz| khz as f64 / 1e3),
        memory_clock_mhz: attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)
            .map(|khz| khz as f64 / 1e3),
        memory_bus_bits: attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH),
        l2_bytes: attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE).unwrap_or(0),
        total_memory,
        driver_cuda_version: driver,
    })
}

/// Sets every byte of `buf` to `byte`, enqueued on the GPU's stream.
pub fn memset<T>(gpu: &Gpu, buf: &mut CudaSlice<T>, byte: u8) -> Result<(), DriverError> {
    memset_on(&gpu.stream, buf, byte)
}

/// Sets every byte of `buf` (a buffer or a view of one) to `byte`,
/// enqueued on `stream`.
pub fn memset_on<T, B: DevicePtrMut<T>>(
    stream: &CudaStream,
    buf: &mut B,
    byte: u8,
) -> Result<(), DriverError> {
    let bytes = buf.num_bytes();
    let (ptr, _sync) = buf.device_ptr_mut(stream);
    // SAFETY: writes exactly the buffer's own bytes, ordered on `stream`
    // after its earlier work (the recorded use keeps it alive).
    unsafe { cudarc::driver::result::memset_d8_async(ptr, byte, bytes, stream.cu_stream()) }
}

/// Enqueues on `stream` a copy of `lines` lines of `line` bytes from
/// `src` (lines `src_pitch` bytes apart) to `dst` (lines `dst_pitch`
/// bytes apart), both device memory of the stream's context
/// (`cuMemcpy2DAsync`): a shard of a matrix packed, or put back.
///
/// # Safety
/// Both stretches lie in live allocations of the stream's device that
/// do not overlap, and the caller orders the copy with their other
/// users.
pub unsafe fn copy_lines(
    stream: &CudaStream,
    (src, src_pitch): (CUdeviceptr, usize),
    (dst, dst_pitch): (CUdeviceptr, usize),
    (lines, line): (usize, usize),
) -> Result<(), DriverError> {
    use cudarc::driver::sys::{CUDA_MEMCPY2D, CUmemorytype, cuMemcpy2DAsync_v2};
    if lines == 0 || line == 0 {
        return Ok(());
    }
    stream.context().bind_to_thread()?;
    let copy = CUDA_MEMCPY2D {
        srcXInBytes: 0,
        srcY: 0,
        srcMemoryType: CUmemorytype::CU_MEMORYTYPE_DEVICE,
        srcHost: std::ptr::null(),
        srcDevice: src,
        srcArray: std::ptr::null_mut(),
        srcPitch: src_pitch,
        dstXInBytes: 0,
        dstY: 0,
        dstMemoryType: CUmemorytype::CU_MEMORYTYPE_DEVICE,
        dstHost: std::ptr::null_mut(),
        dstDevice: dst,
        dstArray: std::ptr::null_mut(),
        dstPitch: dst_pitch,
        WidthInBytes: line,
        Height: lines,
    };
    // SAFETY: the caller vouches for both stretches; `copy` lives until
    // the call returns (the driver reads it when enqueuing).
    unsafe { cuMemcpy2DAsync_v2(&copy, stream.cu_stream()) }.result()
}

/// The device address of `buf` (read once, outside any timed region:
/// cudarc's `device_ptr` may enqueue event waits).
pub fn device_address<T>(gpu: &Gpu, buf: &CudaSlice<T>) -> CUdeviceptr {
    buf.device_ptr(&gpu.stream).0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ptx_target_and_architecture_number() {
        let ptx = "//\n.version 7.0\n.target sm_70\n.address_size 64\n";
        assert_eq!(ptx_target(ptx), Some("sm_70"));
        assert_eq!(ptx_target(".target sm_90a, debug\n"), Some("sm_90a"));
        assert_eq!(sm_number("sm_100a"), Some(100));
        assert_eq!(sm_number("sm_70"), Some(70));
        assert_eq!(sm_number("compute_70"), None);
        assert_eq!(ptx_target("no target"), None);
    }
}
