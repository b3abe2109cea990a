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
    CudaFunction, CudaSlice, DevicePtr, DevicePtrMut, DeviceRepr, DriverError, LaunchConfig,
    PushKernelArg,
};
use kernels_gpu::elem::{Elems, Scaling, Storage};
use kernels_gpu::gemm::{GemmParams, ScaleParams};
use kernels_gpu::launch::{KernelSpec, Op, Operands, Ops, c_by_tma};
use serde::Serialize;

use crate::HostError;
use crate::gpu::Gpu;
use crate::inputs::BlockScales;
use crate::matrix::DeviceMatrix;
use crate::reference::{Reference, Verification};
use crate::shape::Shape;
use crate::timing::Timing;
use crate::tma::{DeviceMaps, Operand, Padded};

/// A, B and C on the device, in the stored types of the kernels that
/// run on them; with `transposed`, A^T and B^T too, for the kernels that
/// read A or B transposed (the same product: [`Buffers::call`]).
pub struct Buffers {
    pub shape: Shape,
    pub storage: Storage,
    pub a: DeviceMatrix,
    pub b: DeviceMatrix,
    pub c: DeviceMatrix,
    /// A^T (k x m) and B^T (n x k), dense, when asked for, and their
    /// addresses.
    transposed: Option<[(DeviceMatrix, CUdeviceptr); 2]>,
    /// FP8 A or B ([`Storage::scaled`]): the scales of A, B and D on the
    /// device ([`Scales`]: one f32 each, or A's and B's per block).
    pub scales: Option<Scales>,
    /// Written between timed launches to evict A, B and C from L2.
    flush: L2Flush,
    /// A's, B's and C's device addresses, read once here, so that
    /// launches do not ask cudarc again inside a timed region.
    addresses: (CUdeviceptr, CUdeviceptr, CUdeviceptr),
}

impl Buffers {
    /// Bytes of device memory [`Buffers::new`] will allocate.
    pub fn device_bytes(gpu: &Gpu, shape: &Shape, storage: Storage, transposed: bool) -> usize {
        let (a, b, _) = shape.elems();
        let copies = if transposed {
            a * storage.a.bytes() + b * storage.b.bytes()
        } else {
            0
        };
        shape.bytes(storage) + copies + L2Flush::bytes(gpu)
    }

    /// Uploads A and B (values of `storage`'s types: `inputs::random_inputs`),
    /// and A^T and B^T with `transposed`, and allocates C, after checking
    /// they fit; FP8 buffers get [`Scales::TEST`]. Block-scaled ones need
    /// their blocks: [`problem`] makes them.
    pub fn new(
        gpu: &Gpu,
        shape: Shape,
        storage: Storage,
        (a, b): (&[f32], &[f32]),
        transposed: bool,
    ) -> Result<Self, HostError> {
        if storage.scaling == Scaling::Blocks {
            return Err(HostError::BadShape(format!(
                "buffers of {storage} need their block scales: make them with runner::problem"
            )));
        }
        Self::with_blocks(gpu, shape, storage, (a, b), transposed, None)
    }

    /// [`Self::new`], with `blocks` the block scales of block-scaled
    /// `storage`.
    fn with_blocks(
        gpu: &Gpu,
        shape: Shape,
        storage: Storage,
        (a, b): (&[f32], &[f32]),
        transposed: bool,
        blocks: Option<&BlockScales>,
    ) -> Result<Self, HostError> {
        let bytes = Self::device_bytes(gpu, &shape, storage, transposed);
        gpu.check_fits(&shape.to_string(), bytes)?;
        // SAFETY: C is poisoned before every verified launch.
        let c = unsafe { DeviceMatrix::alloc(gpu, storage.c, shape.m * shape.n) }?;
        let flush = L2Flush::new(gpu)?;
        let transposed = if transposed {
            let (m, n, k) = (shape.m, shape.n, shape.k);
            let upload = |elem, t: Vec<f32>| -> Result<_, HostError> {
                let d = DeviceMatrix::upload(gpu, elem, &t)?;
                let address = d.address(gpu);
                Ok((d, address))
            };
            Some([
                upload(storage.a, kernels_gpu::emu::transpose(a, m, k))?,
                upload(storage.b, kernels_gpu::emu::transpose(b, k, n))?,
            ])
        } else {
            None
        };
        let a = DeviceMatrix::upload(gpu, storage.a, a)?;
        let b = DeviceMatrix::upload(gpu, storage.b, b)?;
        let addresses = (a.address(gpu), b.address(gpu), c.address(gpu));
        let scales = match (storage.scaling, blocks) {
            (Scaling::None, _) => None,
            (Scaling::Tensor, _) => Some(Scales::upload(gpu, Scales::TEST, None)?),
            (Scaling::Blocks, Some(blocks)) => Some(Scales::upload(
                gpu,
                [1.0, 1.0, Scales::TEST[2]],
                Some(blocks),
            )?),
            (Scaling::Blocks, None) => unreachable!("Buffers::new refuses block scales"),
        };
        Ok(Self {
            shape,
            storage,
            a,
            b,
            c,
            transposed,
            scales,
            flush,
            addresses,
        })
    }

    /// The dense product `C = A * B` on these buffers for a kernel of
    /// layout `ops`: A and B as they are, or A^T and B^T (their rows m
    /// and k apart) where `ops` reads them transposed. An error if those
    /// were not uploaded.
    pub fn call(&self, ops: Ops) -> Result<GemmCall, HostError> {
        let (mut a, mut b, c) = self.addresses;
        if ops != Ops::NN {
            let Some([(_, a_t), (_, b_t)]) = &self.transposed else {
                return Err(HostError::BadShape(format!(
                    "a kernel of layout {} needs A^T and B^T, which these buffers do not \
                     hold: make them with Buffers::new(.., transposed: true)",
                    ops.suffix()
                )));
            };
            if ops.a == Op::T {
                a = *a_t;
            }
            if ops.b == Op::T {
                b = *b_t;
            }
        }
        Ok(GemmCall {
            a,
            b,
            c,
            params: self.shape.params_for(ops),
            batch: 1,
            scales: self.scales.as_ref().map(|s| s.params).unwrap_or_default(),
        })
    }

    /// What the scales multiply the product by (`scale_a * scale_b *
    /// scale_d`; 1 without scales; D's alone with block scales, which the
    /// reference's inputs carry already): the factor between the
    /// reference's `A * B` and the C the kernels compute.
    pub fn scale(&self) -> f64 {
        self.scales.as_ref().map_or(1.0, |s| s.product())
    }

    /// Fills C with NaN (all bytes 0xFF), so an element no thread writes fails verification.
    pub fn poison_c(&mut self, gpu: &Gpu) -> Result<(), HostError> {
        self.c.poison(gpu)
    }

    /// The error for a kernel whose stored types are not these buffers'.
    pub fn check_storage(&self, name: &str, elems: Elems) -> Result<(), HostError> {
        if elems.storage() == self.storage {
            return Ok(());
        }
        Err(HostError::BadShape(format!(
            "{name} takes {} but the buffers hold {}: run it on buffers of its own types",
            elems.storage(),
            self.storage
        )))
    }
}

/// One problem of `storage`'s types, drawn from `seed`
/// (`inputs::random_inputs`; block scales from the same seed where
/// `storage` has them, `BlockScales::random`), on the device
/// ([`Buffers::new`], with A^T and B^T for `transposed`), and its
/// reference (on the dequantized values where there are block scales).
pub fn problem(
    gpu: &Gpu,
    shape: Shape,
    storage: Storage,
    seed: u64,
    transposed: bool,
) -> Result<(Buffers, Reference), HostError> {
    let (a, b) = crate::inputs::random_inputs(&shape, storage, seed)?;
    let blocks = (storage.scaling == Scaling::Blocks).then(|| BlockScales::random(&shape, seed));
    let reference = match &blocks {
        Some(blocks) => {
            let (a, b) = blocks.dequantize(&shape, &a, &b);
            Reference::new(shape, &a, &b, seed)
        }
        None => Reference::new(shape, &a, &b, seed),
    };
    let bufs = Buffers::with_blocks(gpu, shape, storage, (&a, &b), transposed, blocks.as_ref())?;
    Ok((bufs, reference))
}

/// The scales of an FP8 product on the device (what [`ScaleParams`]
/// points at), kept alive with the buffers: A's, B's and D's per tensor,
/// one f32 each, or (`Scaling::Blocks`) A's and B's per block and D's per
/// tensor.
pub struct Scales {
    /// The per-tensor scales of A, B and D (A's and B's 1 with blocks).
    pub values: [f32; 3],
    /// A's and B's block scales, where they have them.
    pub blocks: Option<BlockScales>,
    pub params: ScaleParams,
    _bufs: Vec<CudaSlice<f32>>,
}

impl Scales {
    /// The scales the harness runs FP8 kernels with: none 1 and no two
    /// alike, so that a kernel that skips one, applies one twice or takes
    /// one for another is off by a factor of 3 or more, an error of
    /// `(3 - 1) |c| / sum |a b|` or more, above the FP8 tolerance at the
    /// tests' sizes (|c| / sum |a b| reaches about 0.08 at K = 4096 on
    /// uniform inputs, the tolerance is 0.02), and of the size real ones have
    /// (A's and B's bring values of about 1 back to their range; D's
    /// maps a product into its type's).
    pub const TEST: [f32; 3] = [20.0, 0.0625, 3.0];

    /// Each scale on a 16-byte boundary of its own, as cuBLASLt wants its
    /// FP8 operands' pointers, so that the baseline reads the very words
    /// the kernels do. (With the scales 4 bytes apart and only the
    /// heuristic's first algorithm tried, its matmul answered
    /// `CUBLAS_STATUS_NOT_SUPPORTED` here; with both changed it runs. Which
    /// of the two it needed was not isolated.) With `blocks`, A's and B's
    /// pointers are their block scales' instead.
    pub fn upload(
        gpu: &Gpu,
        values: [f32; 3],
        blocks: Option<&BlockScales>,
    ) -> Result<Self, HostError> {
        let mut words = [0.0f32; 12];
        for (i, v) in values.into_iter().enumerate() {
            words[4 * i] = v;
        }
        let copy = |values: &[f32]| {
            gpu.stream
                .clone_htod(values)
                .map_err(HostError::cuda("copying the FP8 scales to the GPU"))
        };
        let buf = copy(&words)?;
        let base = device_address(gpu, &buf);
        let mut params = ScaleParams {
            a: base,
            b: base + 16,
            d: base + 32,
        };
        let mut bufs = vec![buf];
        if let Some(blocks) = blocks {
            for (values, address) in [(&blocks.a, &mut params.a), (&blocks.b, &mut params.b)] {
                let buf = copy(values)?;
                *address = device_address(gpu, &buf);
                bufs.push(buf);
            }
        }
        Ok(Self {
            values,
            blocks: blocks.cloned(),
            params,
            _bufs: bufs,
        })
    }

    /// `scale_a * scale_b * scale_d`.
    pub fn product(&self) -> f64 {
        self.values.iter().map(|&v| v as f64).product()
    }
}

/// A buffer of twice the L2's size (at least 64 MB): writing it before a
/// timed launch evicts whatever L2 held, so no launch finds the previous
/// one's data on chip.
pub struct L2Flush(CudaSlice<u8>);

impl L2Flush {
    /// Bytes of device memory [`L2Flush::new`] allocates.
    pub fn bytes(gpu: &Gpu) -> usize {
        (2 * gpu.info.l2_bytes.max(0) as usize).max(64 << 20)
    }

    pub fn new(gpu: &Gpu) -> Result<Self, HostError> {
        // SAFETY: the buffer's contents are never read.
        let buf = unsafe { gpu.stream.alloc::<u8>(Self::bytes(gpu)) }
            .map_err(HostError::cuda("allocating the L2 flush buffer"))?;
        Ok(Self(buf))
    }

    /// Writes the whole buffer (with a byte that changes from round to
    /// round), on the GPU's stream.
    pub fn run(&mut self, gpu: &Gpu, round: usize) -> Result<(), HostError> {
        memset(gpu, &mut self.0, round as u8).map_err(HostError::cuda("flushing L2"))
    }
}

pub(crate) fn memset<T>(gpu: &Gpu, buf: &mut CudaSlice<T>, byte: u8) -> Result<(), DriverError> {
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
    /// Its element types: what buffers it runs on, and what its result
    /// is verified against.
    fn elems(&self) -> Elems;
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
        // A and B as stored in the kernel's layout (A^T is k x m, B^T n x k).
        let [(a_rows, a_cols, lda), (b_rows, b_cols, ldb), _] = self.spec.stored(p, p.k);
        let operand = |ptr, elem, rows: u32, cols: u32, ld: u32| Operand {
            ptr,
            elem,
            rows: rows as usize,
            cols: cols as usize,
            ld: ld as usize,
        };
        let a = operand(call.a, self.spec.elems.a, a_rows, a_cols, lda);
        let b = operand(call.b, self.spec.elems.b, b_rows, b_cols, ldb);
        // Where the tensor maps point: the caller's A and B, or padded
        // copies of them when TMA cannot describe them.
        let mut padded = self.padded.lock().unwrap_or_else(|e| e.into_inner());
        let (a_op, b_op, call) = match self.spec.padded(p, aligned16) {
            None => (a, b, *call),
            Some(padding) => {
                let mut pad = Padded::for_problem(
                    padded.take(),
                    gpu,
                    [(a.rows, a.cols), (b.rows, b.cols)],
                    padding,
                    boxes.copy,
                    self.spec.elems.storage(),
                )?;
                let copied = pad.copy_in(gpu, call, (a, b));
                *padded = Some(pad);
                copied?
            }
        };
        // C's map, for a kernel that stores C by TMA where the call allows
        // it (the kernel asks `c_by_tma` the same question).
        let c_bytes = self.spec.elems.c.bytes();
        let c_op = (boxes.c.is_some()
            && c_by_tma(p.beta, call.c.is_multiple_of(16), p.ldc as usize, c_bytes))
        .then(|| operand(call.c, self.spec.elems.c, p.m, p.n, p.ldc));
        let mut cache = self.maps.lock().unwrap_or_else(|e| e.into_inner());
        let maps = DeviceMaps::for_operands(cache.take(), gpu, &boxes, (a_op, b_op, c_op))?;
        // SAFETY: gemm_kernel!(name, tensor_maps) entries and their twins
        // take (A, B, C, GemmParams, maps); the maps were made for these
        // operands (or their padded copies, whose extra K columns and rows
        // are zero, with the params' k the K they describe), with the
        // kernel's own boxes; C is the caller's; geometry from the spec.
        let launched = unsafe {
            launch_gemm(
                gpu,
                &self.func,
                cfg,
                &call,
                Some(&maps.maps),
                scales,
                &self.label,
            )
        };
        *cache = Some(maps);
        launched
    }
}

/// One call of a GEMM entry: where A, B and C are, what to compute, and
/// how many products of a batch (block `z` of the grid computes product
/// `z`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemmCall {
    pub a: CUdeviceptr,
    pub b: CUdeviceptr,
    pub c: CUdeviceptr,
    pub params: GemmParams,
    pub batch: usize,
    /// An FP8 kernel's scales (its entry's last parameter); ignored by
    /// the others.
    pub scales: ScaleParams,
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

/// Enqueues `func(A, B, C, params)`: the signature of every GEMM entry,
/// Rust (`gemm_kernel!`) or CUDA C++ (the twins); with `maps`, `func(A, B,
/// C, params, maps)` (a TMA kernel, `gemm_kernel!(name, tensor_maps)`),
/// and with `scales` too, `func(A, B, C, params, maps, scales)` (an FP8
/// kernel, `gemm_kernel!(name, scaled)`).
///
/// # Safety
/// `func` takes exactly these parameters, `cfg` launches it so that it
/// stays inside the buffers `call` describes, `maps` holds the tensor
/// maps the kernel expects, made for these buffers and this problem, and
/// each non-zero address of `scales` holds an f32.
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
    let mut launch = gpu.stream.launch_builder(func);
    launch.arg(&call.a).arg(&call.b).arg(&call.c).arg(&params);
    if let Some(maps) = maps {
        launch.arg(maps);
    }
    if let Some(scales) = &scales {
        launch.arg(scales);
    }
    // SAFETY: forwarded from this function's contract.
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

    fn elems(&self) -> Elems {
        self.spec.elems
    }

    fn enqueue(&self, gpu: &Gpu, bufs: &mut Buffers) -> Result<(), HostError> {
        bufs.check_storage(&self.label, self.spec.elems)?;
        let call = bufs.call(self.spec.ops)?;
        // SAFETY: the buffers hold a dense m x k A, k x n B (or A^T, B^T
        // where the call points at them: Buffers::call) and m x n C
        // (Buffers::new), C apart from all; they outlive the launch
        // (`measure` waits for it before returning them).
        unsafe { self.launch(gpu, &call) }
    }
}

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

/// [`grid`] for one product of `shape`.
pub fn check_grid(spec: &KernelSpec, shape: &Shape) -> Result<(usize, usize), HostError> {
    let (gx, gy, _) = grid(spec, shape.m, shape.n, 1)?;
    Ok((gx as usize, gy as usize))
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
    let verification = verify(gpu, bufs, reference, kernel)?;
    if !verification.passed || opts.reps == 0 {
        return Ok(Measurement {
            verification,
            timing: None,
        });
    }
    let timing = time_interleaved(gpu, bufs, &[kernel], opts)?.pop();
    Ok(Measurement {
        verification,
        timing,
    })
}

/// One launch of `kernel` on a poisoned C, checked against `reference`.
pub fn verify(
    gpu: &Gpu,
    bufs: &mut Buffers,
    reference: &Reference,
    kernel: &dyn Enqueue,
) -> Result<Verification, HostError> {
    let name = kernel.name().to_string();
    bufs.poison_c(gpu)?;
    kernel.enqueue(gpu, bufs)?;
    gpu.sync(&format!("running {name}"))
        .map_err(|e| launch_error(&name, e))?;
    Ok(reference.check_scaled(&bufs.c.download(gpu)?, kernel.elems(), bufs.scale()))
}

/// Times `kernels` (each verified already) on the same buffers, in
/// interleaved rounds ([`time_rounds`]).
pub fn time_interleaved(
    gpu: &Gpu,
    bufs: &mut Buffers,
    kernels: &[&dyn Enqueue],
    opts: TimingOptions,
) -> Result<Vec<Timing>, HostError> {
    let names: Vec<&str> = kernels.iter().map(|k| k.name()).collect();
    time_rounds(
        gpu,
        bufs,
        &names,
        opts,
        |bufs| &mut bufs.flush,
        |bufs, i| kernels[i].enqueue(gpu, bufs),
    )
}

/// Times the launches `launch(ctx, i)`, one per name in `names`, in
/// interleaved rounds: round r launches every one that still has a launch
/// to time, starting from launch `r % len` so that none always follows
/// the same one. A GPU's clock moves with its power draw: it boosts after
/// idling and drops once a heavy load has run for some tens of
/// milliseconds (on the H200, 1.98 GHz idle and 1.5-1.7 GHz under TF32
/// GEMMs). Timed one after the other, a launch timed first after a pause
/// collects more boosted runs than one timed later, and the medians
/// compare clock states instead of kernels (docs/measurements.md); in
/// rounds every launch's runs spread over the same stretch of time.
///
/// Each gets `opts.warmup` untimed runs first, and as many timed ones as
/// its budget buys (judged from one run). With `opts.flush_l2`, the
/// buffer `flush(ctx)` is written before each timed run. `launch` may
/// only enqueue work on the GPU's stream (the events around it time
/// whatever it enqueued). The bench's kernels (through
/// [`time_interleaved`]) and its library suite are timed here.
pub fn time_rounds<C, E: From<HostError>>(
    gpu: &Gpu,
    ctx: &mut C,
    names: &[&str],
    opts: TimingOptions,
    flush: impl Fn(&mut C) -> &mut L2Flush,
    mut launch: impl FnMut(&mut C, usize) -> Result<(), E>,
) -> Result<Vec<Timing>, E> {
    let mut reps = Vec::with_capacity(names.len());
    for i in 0..names.len() {
        for _ in 0..opts.warmup {
            launch(ctx, i)?;
        }
        reps.push(
            match opts.budget_ms {
                None => opts.reps,
                Some(budget) => {
                    let start = record(gpu)?;
                    launch(ctx, i)?;
                    let end = record(gpu)?;
                    let once = start
                        .elapsed_ms(&end)
                        .map_err(HostError::cuda("reading CUDA event times"))?;
                    ((budget / f64::from(once).max(1e-3)) as usize).clamp(opts.reps, MAX_REPS)
                }
            }
            .max(1),
        );
    }
    let mut events: Vec<Vec<_>> = reps.iter().map(|&r| Vec::with_capacity(r)).collect();
    for (round, i) in rounds(&reps) {
        if opts.flush_l2 {
            flush(ctx).run(gpu, round)?;
        }
        let start = record(gpu)?;
        launch(ctx, i)?;
        events[i].push((start, record(gpu)?));
    }
    gpu.sync(&format!("timing {}", names.join(", ")))
        .map_err(|e| match names {
            [one] => launch_error(one, e),
            _ => e,
        })?;
    let timings = events.iter().map(|pairs| {
        let samples = pairs
            .iter()
            .map(|(s, e)| s.elapsed_ms(e).map(f64::from))
            .collect::<Result<Vec<_>, _>>()
            .map_err(HostError::cuda("reading CUDA event times"))?;
        Ok(Timing::from_samples(&samples))
    });
    Ok(timings.collect::<Result<_, HostError>>()?)
}

/// The timed launches of [`time_rounds`] in order, as `(round,
/// launch)`: launch `i` has `reps[i]` runs, one per round from round 0;
/// round `r` takes the launches still running from launch `r % len` on.
fn rounds(reps: &[usize]) -> impl Iterator<Item = (usize, usize)> + '_ {
    let len = reps.len();
    let rounds = reps.iter().copied().max().unwrap_or(0);
    (0..rounds).flat_map(move |round| {
        (0..len)
            .map(move |i| (round, (i + round) % len))
            .filter(|&(round, i)| round < reps[i])
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

#[cfg(test)]
mod tests {
    use super::rounds;

    #[test]
    fn interleaved_rounds_give_each_kernel_its_launches_and_rotate() {
        let order: Vec<_> = rounds(&[2, 3, 1]).collect();
        assert_eq!(
            order,
            [(0, 0), (0, 1), (0, 2), (1, 1), (1, 0), (2, 1)],
            "round 1 starts at kernel 1; kernels out of launches drop out"
        );
        for reps in [&[5usize][..], &[3, 3], &[200, 5, 0, 17]] {
            for (i, &want) in reps.iter().enumerate() {
                assert_eq!(rounds(reps).filter(|&(_, k)| k == i).count(), want);
            }
        }
        assert_eq!(rounds(&[]).count(), 0);
    }
}
