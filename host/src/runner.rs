//! One kernel on one problem: poison C, launch once, verify, and only then
//! time (warm-up launches, then timed launches between CUDA events, with
//! the L2 cache flushed before each so no launch finds the previous one's
//! data on chip).
//!
//! Anything that can enqueue a GEMM on the GPU's stream is an [`Enqueue`]:
//! the library's kernels (`rust_gemm::launch::Kernel`, the Rust ones and
//! their CUDA C++ twins), and the cuBLAS baselines of the bench.

use cudarc::driver::sys::{CUdeviceptr, CUevent_flags};

use cudarc::driver::CudaSlice;
use kernels_gpu::elem::{Elems, Scaling, Storage};
use kernels_gpu::gemm::{EpilogueParams, ScaleParams};
use kernels_gpu::launch::{Op, Ops};
use rust_gemm::HostError;
use rust_gemm::blas::{Activation, EmuEpilogue, Per};
use rust_gemm::call::GemmCall;
use rust_gemm::gpu::Gpu;
use rust_gemm::gpu::{device_address, memset};
use rust_gemm::launch::Kernel;
use serde::Serialize;

use crate::inputs::BlockScales;
use crate::matrix::DeviceMatrix;
use crate::reference::{Reference, Verification};
use crate::shape::Shape;
use crate::timing::Timing;

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
    /// The epilogue of fused launches, when asked for
    /// ([`Self::set_epilogue`]): plain launches ([`Self::call`]) never
    /// apply it, so that a kernel runs plain and fused on the same inputs.
    epilogue: Option<DeviceEpilogue>,
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
            epilogue: None,
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
            epilogue: EpilogueParams::NONE,
            split: None,
        })
    }

    /// [`Self::call`] with the buffers' epilogue ([`Self::set_epilogue`]:
    /// its activation and its bias, one f32 per column of C): what a
    /// fused launch ([`Fused`]) is given. An error if there is none.
    pub fn fused_call(&self, ops: Ops) -> Result<GemmCall, HostError> {
        let Some(epilogue) = &self.epilogue else {
            return Err(HostError::BadShape(
                "a fused launch needs the buffers' epilogue, which they do not hold: \
                 add one with Buffers::set_epilogue"
                    .into(),
            ));
        };
        Ok(GemmCall {
            epilogue: epilogue.params(),
            ..self.call(ops)?
        })
    }

    /// Gives these buffers an epilogue for fused launches: `activation`,
    /// and a bias per column of C drawn from `seed`
    /// (`inputs::random_bias`: values of C's type, spread like the
    /// product's), uploaded as f32 (what the Rust kernels read) and as C's
    /// type (what cuBLASLt reads where it takes no f32 bias). Replaces an
    /// earlier one.
    pub fn set_epilogue(
        &mut self,
        gpu: &Gpu,
        activation: Activation,
        seed: u64,
    ) -> Result<(), HostError> {
        let bias = crate::inputs::random_bias(&self.shape, self.storage.c, seed)?;
        let f32_copy = DeviceMatrix::upload(gpu, kernels_gpu::elem::Elem::F32, &bias)?;
        let c_copy = DeviceMatrix::upload(gpu, self.storage.c, &bias)?;
        self.epilogue = Some(DeviceEpilogue {
            addresses: (f32_copy.address(gpu), c_copy.address(gpu)),
            host: EmuEpilogue {
                activation,
                bias: Some((bias, Per::Column)),
                scale: None,
            },
            _bias: [f32_copy, c_copy],
        });
        Ok(())
    }

    /// The epilogue of fused launches, if [`Self::set_epilogue`] gave one.
    pub fn epilogue(&self) -> Option<&DeviceEpilogue> {
        self.epilogue.as_ref()
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

/// The epilogue of the fused launches on a set of [`Buffers`]
/// ([`Buffers::set_epilogue`]): an activation and a bias per column of C,
/// on the device and on the host (for the reference).
pub struct DeviceEpilogue {
    /// The epilogue as the reference applies it (`Reference::check_fused`):
    /// the activation, and the bias's values, per column.
    pub host: EmuEpilogue,
    /// The bias's device addresses: as f32, and in C's stored type (the
    /// same values: they are of that type).
    pub addresses: (CUdeviceptr, CUdeviceptr),
    /// The two copies, kept alive with the buffers.
    _bias: [DeviceMatrix; 2],
}

impl DeviceEpilogue {
    /// Its activation.
    pub fn activation(&self) -> Activation {
        self.host.activation
    }

    /// What a Rust kernel's entry takes: the activation, and the f32 bias
    /// per column of (row-major) C.
    pub fn params(&self) -> EpilogueParams {
        EpilogueParams::new(
            self.host.activation,
            Some((self.addresses.0, Per::Column)),
            None,
        )
    }
}

/// The report name of `base` (a kernel or a baseline) run with a bias per
/// column of C and `activation`: `base + bias + gelu-tanh`, or `base +
/// bias` with no activation. The bench finds a fused row's plain row by it.
pub fn fused_name(base: &str, activation: Activation) -> String {
    match activation {
        Activation::None => format!("{base} + bias"),
        a => format!("{base} + bias + {}", a.name()),
    }
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

/// Something that enqueues `C = A * B` on the GPU's stream.
pub trait Enqueue {
    /// Name in reports.
    fn name(&self) -> &str;
    /// Its element types: what buffers it runs on, and what its result
    /// is verified against.
    fn elems(&self) -> Elems;
    /// Enqueues one product into `bufs.c`; returns without waiting.
    fn enqueue(&self, gpu: &Gpu, bufs: &mut Buffers) -> Result<(), HostError>;
    /// Whether its C is the buffers' epilogue applied to the product
    /// ([`Buffers::set_epilogue`]): what [`verify`] checks it against.
    fn fused(&self) -> bool {
        false
    }
}

impl Enqueue for Kernel {
    fn name(&self) -> &str {
        self.label()
    }

    fn elems(&self) -> Elems {
        self.spec.elems
    }

    fn enqueue(&self, gpu: &Gpu, bufs: &mut Buffers) -> Result<(), HostError> {
        bufs.check_storage(self.label(), self.spec.elems)?;
        let call = bufs.call(self.spec.ops)?;
        // SAFETY: the buffers hold a dense m x k A, k x n B (or A^T, B^T
        // where the call points at them: Buffers::call) and m x n C
        // (Buffers::new), C apart from all; they outlive the launch
        // (`measure` waits for it before returning them).
        unsafe { self.launch(gpu, &call) }
    }
}

/// A Rust kernel launched with the buffers' epilogue
/// ([`Buffers::fused_call`]), for the bench's fused rows: the same kernel
/// and inputs as its plain launches, so that the two times compare the
/// epilogue alone. CUDA C++ twins declare no epilogue parameter (they
/// would ignore it and fail verification): [`Fused::new`] refuses them.
pub struct Fused<'a> {
    kernel: &'a Kernel,
    name: String,
}

impl<'a> Fused<'a> {
    /// `kernel` with the buffers' epilogue, named [`fused_name`] of it and
    /// `activation` (the buffers' own, [`Buffers::set_epilogue`]). An
    /// error for a CUDA C++ twin.
    pub fn new(kernel: &'a Kernel, activation: Activation) -> Result<Self, HostError> {
        if kernel.label() != kernel.spec.name {
            return Err(HostError::BadShape(format!(
                "{} is a CUDA C++ twin, which takes no epilogue: fuse its Rust kernel {}",
                kernel.label(),
                kernel.spec.name
            )));
        }
        Ok(Self {
            kernel,
            name: fused_name(kernel.label(), activation),
        })
    }
}

impl Enqueue for Fused<'_> {
    fn name(&self) -> &str {
        &self.name
    }

    fn elems(&self) -> Elems {
        self.kernel.spec.elems
    }

    fn fused(&self) -> bool {
        true
    }

    fn enqueue(&self, gpu: &Gpu, bufs: &mut Buffers) -> Result<(), HostError> {
        bufs.check_storage(&self.name, self.kernel.spec.elems)?;
        let call = bufs.fused_call(self.kernel.spec.ops)?;
        // SAFETY: as for the plain launch (`Enqueue for Kernel`); the
        // epilogue's bias holds n f32s (Buffers::set_epilogue), one per
        // column of C, alive as long as the buffers.
        unsafe { self.kernel.launch(gpu, &call) }
    }
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

/// One launch of `kernel` on a poisoned C, checked against `reference`
/// (with the buffers' epilogue applied where the kernel applies it,
/// [`Enqueue::fused`]).
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
    let c = bufs.c.download(gpu)?;
    let plain = EmuEpilogue::default();
    let epilogue = match (kernel.fused(), &bufs.epilogue) {
        (false, _) => &plain,
        (true, Some(epilogue)) => &epilogue.host,
        (true, None) => {
            return Err(HostError::BadShape(format!(
                "{name} applies the buffers' epilogue, which they do not hold: \
                 add one with Buffers::set_epilogue"
            )));
        }
    };
    Ok(reference.check_fused(&c, kernel.elems(), bufs.scale(), epilogue))
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
