//! One launch of a GEMM entry: a loaded kernel ([`Kernel`]), the call it
//! makes ([`GemmCall`]: addresses, [`GemmParams`], batch, scales), its
//! grid from the kernel's spec, and for a TMA kernel the padded copies and
//! tensor maps it needs (`crate::tma`). The library's calls and the
//! harness's (the `host` and `bench` programs) all launch through
//! [`Kernel::launch`].

use std::collections::HashMap;
use std::sync::Mutex;

use cudarc::driver::{CudaFunction, CudaSlice, DeviceRepr, LaunchConfig, PushKernelArg};
use kernels_gpu::gemm::{EpilogueParams, GemmParams, ScaleParams};
use kernels_gpu::launch::{KernelSpec, Operands, c_by_tma};
use kernels_gpu::split::SplitParams;

use crate::HostError;
use crate::call::GemmCall;
use crate::gpu::Gpu;
use crate::tma::{DeviceMaps, Operand, Padded};

/// A kernel loaded on the GPU: one of `kernels-gpu`'s, or its CUDA C++
/// twin (the harness's `baselines`), which launches with the Rust kernel's spec.
pub struct Kernel {
    pub spec: &'static KernelSpec,
    /// Its name in reports: the spec's, or `NAME (CUDA C++)` for a twin.
    label: String,
    func: CudaFunction,
    /// Its split entry (`kernels_gpu::split`), for a kernel that has one.
    split_func: Option<CudaFunction>,
    /// Launch-sized shared memory: the spec's, or 0 for a twin that
    /// declares its tiles `__shared__`.
    shared_bytes: usize,
    /// Elements one matrix may have: the Rust kernels' 32-bit offsets
    /// allow `u32::MAX`, the twins' `int` offsets `i32::MAX`.
    max_elems: usize,
    /// A TMA kernel's tensor maps and padded copies, per stream.
    tma: Mutex<TmaStreams>,
}

/// A TMA kernel's [`TmaScratch`] of each stream it launched on (by the
/// stream's handle: the scratch's buffers hold the stream alive, so the
/// handle is not reused while they exist).
#[derive(Default)]
struct TmaStreams {
    /// Counts lookups: when each stream's scratch was last used.
    tick: u64,
    by_stream: HashMap<usize, (u64, TmaScratch)>,
}

/// Streams whose scratch a kernel keeps unless a capture used it: a
/// program that makes a stream per request does not grow without bound
/// (the least recently used one's buffers are freed, on its own stream,
/// after its launches).
const STREAMS_KEPT: usize = 8;

impl TmaStreams {
    /// `stream`'s scratch, made empty if it has none.
    fn for_stream(&mut self, stream: usize) -> &mut TmaScratch {
        self.tick += 1;
        let kept = |(_, scratch): &(u64, TmaScratch)| !scratch.captured();
        if !self.by_stream.contains_key(&stream)
            && self.by_stream.values().filter(|e| kept(e)).count() >= STREAMS_KEPT
            && let Some(oldest) = (self.by_stream.iter())
                .filter(|(_, e)| kept(e))
                .min_by_key(|(_, (used, _))| *used)
                .map(|(s, _)| *s)
        {
            self.by_stream.remove(&oldest);
        }
        let (used, scratch) = self.by_stream.entry(stream).or_default();
        *used = self.tick;
        scratch
    }
}

/// What a TMA kernel keeps between its launches on one stream: the
/// tensor maps it made (each for the operands it describes) and its
/// padded copies of A and B. Per stream, so that one stream's launches
/// never wait for another's, and what a stream's launches read is
/// allocated and freed on that stream, after them.
///
/// CUDA graphs: a launch captured into a graph reads these buffers each
/// time the graph is replayed, so nothing a capture used is ever freed:
/// such maps stay in the cache for good, and padded copies that a later
/// problem replaces are kept (`retired`). A capture allocates nothing
/// (`HostError::AllocatingInCapture` instead).
#[derive(Default)]
struct TmaScratch {
    /// Least recently used first; those a capture used (`true`) are
    /// never dropped.
    maps: Vec<(DeviceMaps, bool)>,
    padded: Option<Padded>,
    /// Whether a capture used `padded`.
    padded_captured: bool,
    /// Padded copies a capture used, replaced since.
    retired: Vec<Padded>,
}

/// Tensor maps a stream's scratch keeps for operands not captured (a
/// call that alternates among this many problems makes no new ones).
const MAPS_KEPT: usize = 16;

impl TmaScratch {
    /// Whether a capture used any of it (then none of it is ever freed).
    fn captured(&self) -> bool {
        self.padded_captured || !self.retired.is_empty() || self.maps.iter().any(|(_, c)| *c)
    }
}

impl Kernel {
    /// Its name in reports and errors.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The Rust kernel `spec`, from the PTX modules.
    pub fn load(gpu: &Gpu, spec: &'static KernelSpec) -> Result<Self, HostError> {
        Ok(Self {
            spec,
            label: spec.name.into(),
            func: gpu.function(spec)?,
            split_func: (kernels_gpu::registry::split_entry(spec))
                .map(|entry| gpu.entry(spec, entry))
                .transpose()?,
            shared_bytes: spec.launch.shared_bytes,
            max_elems: kernels_gpu::gemm::MAX_ELEMS,
            tma: Mutex::new(TmaStreams::default()),
        })
    }

    /// The CUDA C++ twin `func` of the Rust kernel `spec`, launched with
    /// `shared_bytes` of launch-sized shared memory (0 or the spec's).
    pub fn cuda_twin(spec: &'static KernelSpec, func: CudaFunction, shared_bytes: usize) -> Self {
        Self {
            spec,
            label: format!("{} (CUDA C++)", spec.name),
            func,
            split_func: None,
            shared_bytes,
            max_elems: i32::MAX as usize,
            tma: Mutex::new(TmaStreams::default()),
        }
    }

    /// How many of its blocks one SM runs at once (the driver's occupancy
    /// calculator, with its block size and shared memory).
    pub fn blocks_per_sm(&self) -> Result<usize, HostError> {
        self.func
            .occupancy_max_active_blocks_per_multiprocessor(
                self.spec.launch.threads(),
                self.shared_bytes,
                None,
            )
            .map(|b| b as usize)
            .map_err(HostError::cuda(format!(
                "reading {}'s occupancy",
                self.label
            )))
    }

    /// Why this kernel cannot take `batch` products as `p` describes them,
    /// if it cannot: what its spec refuses, and for a twin (`int` offsets)
    /// any matrix that spans 2^31 elements or more.
    pub fn unsupported(&self, p: &GemmParams, batch: usize) -> Option<String> {
        let largest = (self.spec.stored(p, p.k).iter())
            .map(|&(rows, cols, ld)| kernels_gpu::gemm::span(rows, cols, ld))
            .max()
            .unwrap_or(0);
        if largest > self.max_elems as u64 {
            return Some(format!(
                "a matrix spans {largest} elements, more than its offsets allow ({})",
                self.max_elems
            ));
        }
        self.spec.unsupported(p, batch)
    }

    /// Enqueues `call` on the GPU's stream and returns without waiting.
    /// A TMA kernel first enqueues the padded copies of A and B where TMA
    /// cannot read them as they are (`Operands::padded`), and makes (or
    /// reuses) the tensor maps for the operands it reads.
    ///
    /// # Safety
    /// `call`'s addresses hold, for each of its `batch` products, A, B and
    /// C as `call.params` describes them; no C overlaps an A, a B or
    /// another product's C; the buffers stay allocated until the launch
    /// has run.
    pub unsafe fn launch(&self, gpu: &Gpu, call: &GemmCall) -> Result<(), HostError> {
        let p = &call.params;
        if let Some(why) = self.unsupported(p, call.batch) {
            return Err(HostError::BadShape(format!(
                "kernel {} cannot take m={} n={} k={}: {why}; choose another kernel",
                self.label, p.m, p.n, p.k
            )));
        }
        let cfg = launch_config(self.spec, call, self.shared_bytes, gpu.info.sms as usize)?;
        if call.split.is_some() {
            let Some(func) = &self.split_func else {
                return Err(HostError::BadShape(format!(
                    "kernel {} has no entry that splits K inside one launch; split it in two \
                     launches (a step of `reduce_slices`)",
                    self.label
                )));
            };
            // SAFETY: a split entry takes (A, B, C, GemmParams,
            // EpilogueParams, SplitParams) (`gemm_kernel!(name, split ..)`,
            // f32 pointer kernels: no maps, no scales); grid and block from
            // the kernel's spec, `batch` slices; the buffers, the
            // workspace's planes and the counters are as this function's
            // contract says.
            return unsafe { launch_gemm(gpu, func, cfg, call, None, None, &self.label) };
        }
        // An FP8 kernel's entry takes the scales last
        // (gemm_kernel!(name, scaled)).
        let scales = self.spec.elems.storage().scaled().then_some(call.scales);
        let Operands::TensorMaps(boxes) = self.spec.operands else {
            // SAFETY: gemm_kernel! entries and their twins take (A, B, C,
            // GemmParams), an FP8 entry its scales after; grid and block come from the kernel's own spec,
            // shared memory from it too (or none for a twin with static
            // tiles); offsets fit the kernel's index type (checked above);
            // the buffers are as this function's contract says.
            return unsafe { launch_gemm(gpu, &self.func, cfg, call, None, scales, &self.label) };
        };
        let aligned16 = (call.a.is_multiple_of(16), call.b.is_multiple_of(16));
        // A batch (not split-K's slices) whose A or B does not start on 16
        // bytes, which TMA cannot address (its rows and strides were
        // checked above): one product per launch, each through its padded
        // copies.
        let products = if p.k_slice == 0 { call.batch } else { 1 };
        if products > 1 && self.spec.padded(p, aligned16).is_some() {
            let bytes = |e: kernels_gpu::elem::Elem, stride: u64| stride * e.bytes() as u64;
            let elems = self.spec.elems;
            for z in 0..products as u64 {
                let one = GemmCall {
                    a: call.a + z * bytes(elems.a, p.stride_a),
                    b: call.b + z * bytes(elems.b, p.stride_b),
                    c: call.c + z * bytes(elems.c, p.stride_c),
                    batch: 1,
                    ..*call
                };
                // SAFETY: product z of this function's contract.
                unsafe { self.launch(gpu, &one)? };
            }
            return Ok(());
        }
        // A and B as stored in the kernel's layout (A^T is k x m, B^T n x k),
        // with the products of a batch.
        let [(a_rows, a_cols, lda), (b_rows, b_cols, ldb), _] = self.spec.stored(p, p.k);
        let operand = |ptr, elem, rows: u32, cols: u32, ld: u32, stride: u64| Operand {
            ptr,
            elem,
            rows: rows as usize,
            cols: cols as usize,
            ld: ld as usize,
            products,
            stride: stride as usize,
        };
        let a = operand(call.a, self.spec.elems.a, a_rows, a_cols, lda, p.stride_a);
        let b = operand(call.b, self.spec.elems.b, b_rows, b_cols, ldb, p.stride_b);
        // This stream's maps and copies; a capture allocates none.
        let capturing = gpu.capturing()?;
        let mut tma = self.tma.lock().unwrap_or_else(|e| e.into_inner());
        let scratch = tma.for_stream(gpu.stream.cu_stream() as usize);
        // Where the tensor maps point: the caller's A and B, or padded
        // copies of them when TMA cannot describe them.
        let (a_op, b_op, call) = match self.spec.padded(p, aligned16) {
            None => (a, b, *call),
            Some(padding) => {
                let stored = [(a.rows, a.cols), (b.rows, b.cols)];
                let storage = self.spec.elems.storage();
                let reused = (scratch.padded.as_ref())
                    .is_some_and(|pad| pad.serves(stored, padding, boxes.copy, storage));
                if !reused {
                    if capturing {
                        return Err(HostError::AllocatingInCapture {
                            what: format!("padded copies of A and B for kernel {}", self.label),
                        });
                    }
                    if std::mem::take(&mut scratch.padded_captured) {
                        scratch.retired.extend(scratch.padded.take());
                    }
                }
                let mut pad = Padded::for_problem(
                    scratch.padded.take(),
                    gpu,
                    stored,
                    padding,
                    boxes.copy,
                    storage,
                )?;
                scratch.padded_captured |= capturing;
                let copied = pad.copy_in(gpu, call, (a, b));
                scratch.padded = Some(pad);
                copied?
            }
        };
        // C's map, for a kernel that stores C by TMA where the call allows
        // it (the kernel asks `c_by_tma` the same question).
        let c_bytes = self.spec.elems.c.bytes();
        let c_op = (boxes.c.is_some()
            && c_by_tma(p.beta, call.c.is_multiple_of(16), p.ldc as usize, c_bytes))
        .then(|| operand(call.c, self.spec.elems.c, p.m, p.n, p.ldc, p.stride_c));
        let operands = (a_op, b_op, c_op);
        // The maps for these operands, moved to the back (most recent).
        let maps = match scratch.maps.iter().position(|(m, _)| m.describe(&operands)) {
            Some(i) => {
                let (maps, captured) = scratch.maps.remove(i);
                scratch.maps.push((maps, captured || capturing));
                &scratch.maps.last().expect("just pushed").0
            }
            None if capturing => {
                return Err(HostError::AllocatingInCapture {
                    what: format!("tensor maps for these buffers for kernel {}", self.label),
                });
            }
            None => {
                let fresh = DeviceMaps::for_operands(gpu, &boxes, operands)?;
                if scratch
                    .maps
                    .iter()
                    .filter(|(_, captured)| !captured)
                    .count()
                    >= MAPS_KEPT
                    && let Some(oldest) = scratch.maps.iter().position(|(_, captured)| !captured)
                {
                    scratch.maps.remove(oldest);
                }
                scratch.maps.push((fresh, false));
                &scratch.maps.last().expect("just pushed").0
            }
        };
        // SAFETY: gemm_kernel!(name, tensor_maps) entries and their twins
        // take (A, B, C, GemmParams, maps); the maps were made for these
        // operands (or their padded copies, whose extra K columns and rows
        // are zero, with the params' k the K they describe), with the
        // kernel's own boxes; C is the caller's; geometry from the spec.
        unsafe {
            launch_gemm(
                gpu,
                &self.func,
                cfg,
                &call,
                Some(&maps.maps),
                scales,
                &self.label,
            )
        }
    }
}

/// [`GemmParams`] as cudarc passes a kernel parameter: its bytes, by value.
#[repr(transparent)]
#[derive(Clone, Copy)]
struct Params(GemmParams);

// SAFETY: GemmParams is #[repr(C)] plain data (u32, f32, u64 fields, no
// pointers to host memory): the struct the entries declare, byte for byte.
unsafe impl DeviceRepr for Params {}

/// [`ScaleParams`] as cudarc passes a kernel parameter: by value.
#[repr(transparent)]
#[derive(Clone, Copy)]
struct ScaleArg(ScaleParams);

// SAFETY: ScaleParams is #[repr(C)] plain data (three u64 device
// addresses): the struct the FP8 entries declare, byte for byte.
unsafe impl DeviceRepr for ScaleArg {}

/// [`EpilogueParams`] as cudarc passes a kernel parameter: by value.
#[repr(transparent)]
#[derive(Clone, Copy)]
struct EpilogueArg(EpilogueParams);

// SAFETY: EpilogueParams is #[repr(C)] plain data (two u64 device
// addresses and two u32s): the struct every Rust entry declares last.
unsafe impl DeviceRepr for EpilogueArg {}

/// A kernel's launch configuration for `call`, from its spec, with
/// `shared_bytes` of launch-sized shared memory, on a GPU of `sms` SMs
/// (a persistent kernel's grid: `Launch::persistent_grid`).
pub fn launch_config(
    spec: &KernelSpec,
    call: &GemmCall,
    shared_bytes: usize,
    sms: usize,
) -> Result<LaunchConfig, HostError> {
    let p = &call.params;
    let (mut gx, mut gy, gz) = grid(spec, p.m as usize, p.n as usize, call.batch)?;
    if spec.launch.persistent {
        let (x, y) = spec
            .launch
            .persistent_grid(p.m as usize, p.n as usize, sms.max(1));
        (gx, gy) = (x as u32, y as u32);
    }
    let (bx, by) = spec.launch.block_threads;
    Ok(LaunchConfig {
        grid_dim: (gx, gy, gz),
        block_dim: (bx, by, 1),
        shared_mem_bytes: shared_bytes as u32,
    })
}

/// Enqueues `func(A, B, C, params, epilogue)`: the signature of every
/// Rust GEMM entry (`gemm_kernel!`); with `maps`, `func(A, B, C, params,
/// maps, epilogue)` (a TMA kernel, `gemm_kernel!(name, tensor_maps)`),
/// and with `scales` too, `func(A, B, C, params, maps, scales, epilogue)`
/// (an FP8 kernel, `gemm_kernel!(name, scaled)`); with `call.split`,
/// `func(A, B, C, params, epilogue, split)` (a split entry,
/// `gemm_kernel!(name, split ..)`, `call.batch` slices). The CUDA C++ twins
/// declare the same parameters but the epilogue, and the driver passes
/// an entry the parameters it declares: the same launch serves them.
///
/// # Safety
/// `func` takes these parameters (or all but the last), `cfg` launches
/// it so that it stays inside the buffers `call` describes, `maps` holds
/// the tensor maps the kernel expects, made for these buffers and this
/// problem, each non-zero address of `scales` holds an f32, and the
/// epilogue's bias and scales, where its flags name them, hold `m` or
/// `n` f32s (their dimension's); with `call.split`, its workspace holds
/// `batch` dense m x n planes of f32 and its counters at least the grid's
/// x times y, zero.
pub unsafe fn launch_gemm(
    gpu: &Gpu,
    func: &CudaFunction,
    cfg: LaunchConfig,
    call: &GemmCall,
    maps: Option<&CudaSlice<u8>>,
    scales: Option<ScaleParams>,
    name: &str,
) -> Result<(), HostError> {
    let params = Params(call.params);
    let scales = scales.map(ScaleArg);
    let epilogue = EpilogueArg(call.epilogue);
    let mut launch = gpu.stream.launch_builder(func);
    launch.arg(&call.a).arg(&call.b).arg(&call.c).arg(&params);
    if let Some(maps) = maps {
        launch.arg(maps);
    }
    if let Some(scales) = &scales {
        launch.arg(scales);
    }
    launch.arg(&epilogue);
    let split = call.split.map(SplitArg);
    if let Some(split) = &split {
        launch.arg(split);
    }
    // SAFETY: forwarded from this function's contract.
    unsafe { launch.launch(cfg) }
        .map(|_| ())
        .map_err(|source| HostError::LaunchFailed {
            kernel: name.into(),
            source,
        })
}

/// [`SplitParams`] as cudarc passes a kernel parameter: by value.
#[repr(transparent)]
#[derive(Clone, Copy)]
struct SplitArg(SplitParams);

// SAFETY: SplitParams is #[repr(C)] plain data (two u64 device
// addresses): the struct the split entries declare last.
unsafe impl DeviceRepr for SplitArg {}

/// The kernel's grid for `batch` products of `m x n`, or an error when
/// CUDA cannot launch it (at most 65,535 rows of blocks and 65,535
/// products). Cheap: call it before allocating.
pub fn grid(
    spec: &KernelSpec,
    m: usize,
    n: usize,
    batch: usize,
) -> Result<(u32, u32, u32), HostError> {
    let (gx, gy) = spec.launch.grid(m, n);
    if gy > 65_535 || gx > i32::MAX as usize {
        return Err(HostError::BadShape(format!(
            "m={m} n={n} needs a grid of {gx} x {gy} blocks for kernel {}, above CUDA's limit \
             of 65,535 rows of blocks: choose a smaller m",
            spec.name
        )));
    }
    if batch > 65_535 {
        return Err(HostError::BadShape(format!(
            "a batch of {batch} products is above CUDA's limit of 65,535 (the grid's z): \
             split it into several calls"
        )));
    }
    Ok((gx as u32, gy as u32, batch.max(1) as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kernel keeps the scratch of its 8 most recently used streams,
    /// and of every stream a capture used it on.
    #[test]
    fn scratch_is_kept_for_recent_and_captured_streams() {
        let mut tma = TmaStreams::default();
        tma.for_stream(100).padded_captured = true;
        for stream in 0..20 {
            tma.for_stream(stream);
        }
        assert_eq!(tma.by_stream.len(), STREAMS_KEPT + 1);
        assert!(tma.by_stream.contains_key(&100));
        assert!((12..20).all(|s| tma.by_stream.contains_key(&s)));
        // Using a stream again makes it recent.
        tma.for_stream(12);
        tma.for_stream(20);
        assert!(tma.by_stream.contains_key(&12));
        assert!(!tma.by_stream.contains_key(&13));
    }
}
