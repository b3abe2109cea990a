//! The library: `C = alpha * op(A) * op(B) + beta * C` in f32, BF16 or
//! FP16 on the caller's device buffers, on the caller's stream, with BLAS semantics.
//!
//! ```no_run
//! use std::sync::Arc;
//! use cudarc::driver::CudaContext;
//! use rust_gemm::blas::{GemmConfig, Op, Sgemm};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let stream = CudaContext::new(0)?.default_stream();
//! let sgemm = Sgemm::new(stream.clone())?;
//! let (m, n, k) = (300, 200, 100);
//! let a = stream.clone_htod(&vec![1.0f32; m * k])?;
//! let b = stream.clone_htod(&vec![2.0f32; n * k])?;
//! let mut c = stream.alloc_zeros::<f32>(m * n)?;
//! // C = A * B^T: B is stored n x k.
//! let cfg = GemmConfig::new(m, n, k).op_b(Op::T);
//! sgemm.gemm(&cfg, &a, &b, &mut c)?;
//! assert!(stream.clone_dtoh(&c)?.iter().all(|&x| x == 200.0));
//! # Ok(())
//! # }
//! ```
//!
//! What it does, in order, on every call ([`Sgemm::gemm`]):
//!
//! 1. [`plan`] checks the arguments against the buffers' lengths (typed
//!    [`GemmError`]s, each naming the argument; nothing reaches the GPU
//!    before they pass) and reduces the call to a row-major problem: a
//!    column-major call is the row-major `C^T = op(B)^T op(A)^T`, which is
//!    the same memory with A and B swapped.
//! 2. The algorithm: [`Algorithm::Auto`] ([`choose`], the rule is in its
//!    docs and the README) or a kernel the caller names, with K split or
//!    not (split-K: `kernels_gpu::k14_split_k`). `Auto`'s choice is kept
//!    per call description (shape, leading dimensions, strides, scalars,
//!    layouts, types, compute mode: [`Plan`]), so a call seen before
//!    skips the model (which weighs every candidate kernel and split).
//! 3. One launch through `launch::Kernel::launch`, the launch path the
//!    `host` and `bench` programs use too (two launches with split-K, the
//!    second the reduction). Nothing waits: the call returns when the work
//!    is enqueued on the stream.
//!
//! Memory: nothing is allocated per call, except the handle's workspace
//! (split-K's `slices x m x n` floats of partial sums, a per-tensor
//! quantization's tile amaxes), allocated the first time a call needs
//! more than the handle holds and kept for later calls, and a TMA
//! kernel's tensor maps (384 bytes, made the first time it meets a set of
//! buffers; 16 kept per stream, and every one a graph capture used) and
//! its padded copies of A and B where TMA cannot read them as they are
//! (both kept for the 8 streams it last ran on, and for every stream a
//! capture used them on).
//! Calls can be captured into CUDA graphs ([`Sgemm`] says how).
//!
//! Element types ([`GemmElement`]): A, B and C are `f32`, or A and B are
//! both `half::bf16` or both `half::f16` (cudarc's `f16` feature) with C
//! in f32 or in their type (rounded to nearest once, in the epilogue);
//! alpha and beta are f32, and so is the accumulation. FP8 A and B
//! (`float8::F8E4M3`, `F8E5M2`) go through [`Sgemm::gemm_scaled`] with
//! their scales ([`Sgemm::quantize`] makes both), into the C types its
//! docs list. Any other mix is a typed error naming the types
//! ([`GemmError::Types`]). The types come from the buffers: the same
//! [`Sgemm::gemm`] takes all the others.
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use cudarc::driver::CudaContext;
//! # use rust_gemm::blas::{GemmConfig, Sgemm};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let stream = CudaContext::new(0)?.default_stream();
//! # let sgemm = Sgemm::new(stream.clone())?;
//! use half::bf16;
//! let (m, n, k) = (300, 200, 100);
//! let a = stream.clone_htod(&vec![bf16::from_f32(1.0); m * k])?;
//! let b = stream.clone_htod(&vec![bf16::from_f32(0.5); k * n])?;
//! let mut c = stream.alloc_zeros::<f32>(m * n)?;
//! sgemm.gemm(&GemmConfig::new(m, n, k), &a, &b, &mut c)?;
//! assert!(stream.clone_dtoh(&c)?.iter().all(|&x| x == 50.0));
//! # Ok(())
//! # }
//! ```
//!
//! Precision: by default every f32 call the library runs multiplies in
//! f32 (FMA), as cuBLAS SGEMM does by default; a call may allow `Auto`
//! the 3xTF32 kernels (FP32's accuracy on the tensor cores) or TF32 ones
//! too ([`Compute`], cuBLAS's math mode), and any kernel can be named
//! explicitly. A 16-bit call multiplies on the tensor cores (products
//! exact, sums in f32), as cuBLAS's `cublasGemmEx` with compute 32F does.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use kernels_gpu::elem::Scaling;
use kernels_gpu::elem::{Elem, Math, Storage};
pub use kernels_gpu::emu::{EmuEpilogue, EmuScales};
pub use kernels_gpu::epilogue::{Activation, Per};
use kernels_gpu::gemm::{EpilogueParams, GemmParams, ScaleParams};
use kernels_gpu::k14_split_k::REDUCE;
use kernels_gpu::launch::{KernelSpec, Operands, Ops, TmaBoxes, TmaCopy};
use kernels_gpu::quant::QuantStep;
pub use kernels_gpu::quant::Quantize;
use kernels_gpu::registry;
use kernels_gpu::split::SplitParams;

pub use kernels_gpu::launch::Op;

use crate::HostError;
use crate::call::GemmCall;
use crate::gpu::Gpu;
use crate::launch::Kernel;

/// How a matrix is stored: rows contiguous (C's convention, and this
/// project's) or columns contiguous (Fortran's, and BLAS's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    RowMajor,
    ColMajor,
}

/// A Rust element type the library multiplies in device buffers: `f32`,
/// `half::bf16` or `half::f16`. Which mixes a call may take: the module's
/// docs ("Element types").
pub trait GemmElement: cudarc::driver::DeviceRepr + Copy + 'static {
    /// How the kernels store it.
    const ELEM: Elem;
}

impl GemmElement for f32 {
    const ELEM: Elem = Elem::F32;
}

impl GemmElement for half::bf16 {
    const ELEM: Elem = Elem::Bf16;
}

impl GemmElement for half::f16 {
    const ELEM: Elem = Elem::F16;
}

impl GemmElement for float8::F8E4M3 {
    const ELEM: Elem = Elem::E4m3;
}

impl GemmElement for float8::F8E5M2 {
    const ELEM: Elem = Elem::E5m2;
}

/// A type [`Sgemm::quantize`] reads: `f32`, `half::bf16`, `half::f16`.
pub trait QuantSource: GemmElement {}
impl QuantSource for f32 {}
impl QuantSource for half::bf16 {}
impl QuantSource for half::f16 {}

/// An FP8 type: `float8::F8E4M3` (OCP E4M3: largest 448, no infinity)
/// or `float8::F8E5M2` (E5M2: largest 57344), what [`Sgemm::quantize`]
/// writes and [`Sgemm::gemm_scaled`] multiplies.
pub trait Fp8Element: GemmElement {}
impl Fp8Element for float8::F8E4M3 {}
impl Fp8Element for float8::F8E5M2 {}

/// The stored types of a call on buffers of `A`, `B` and `C`.
pub fn storage_of<A: GemmElement, B: GemmElement, C: GemmElement>() -> Storage {
    Storage::new(A::ELEM, B::ELEM, C::ELEM)
}

/// Which kernel computes a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// The library chooses ([`choose`]).
    Auto,
    /// The kernel registered as `name` (`host --list-kernels`), with K cut
    /// into `split_k` slices (1: no split; only the FP32 pointer kernels
    /// and the TF32 kernels of steps 17-18 split:
    /// `KernelSpec::splits_k`).
    Kernel { name: String, split_k: usize },
}

/// What an f32 call may multiply in (cuBLAS's math mode): which kernels
/// `Auto` may choose. A named kernel computes in its own math whatever
/// this says. 16-bit calls multiply on the tensor cores in every mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Compute {
    /// FP32 multiply-adds on the CUDA cores, as cuBLAS SGEMM's default
    /// math: the FP32 kernels of steps 10, 15 and 16.
    #[default]
    Fp32,
    /// FP32 accuracy from the tensor cores allowed: also the 3xTF32
    /// kernels (steps 23-24: each factor split into two TF32 parts, three
    /// products), where the model says they are faster. Their error was
    /// at most cuBLAS SGEMM's on the accuracy table's inputs (K of 1024
    /// and more), above it at small K (README, "3xTF32");
    /// unlike FP32 math, an infinite factor can give NaN where SGEMM gives
    /// an infinity (its big part times the other's small one, which may
    /// be 0), and a finite value above `(2 - 2^-11) 2^127` becomes
    /// infinite (its big part rounds up).
    Tf32x3,
    /// TF32 allowed (cuBLAS's `CUBLAS_TF32_TENSOR_OP_MATH`, torch's
    /// `allow_tf32`): factors rounded to 10 mantissa bits, some 100x
    /// SGEMM's error; also the 3xTF32 kernels.
    Tf32,
}

impl Compute {
    /// Whether a kernel multiplying in `math` may compute a call in this
    /// mode.
    pub fn allows(self, math: Math) -> bool {
        match math {
            Math::Fp32 | Math::Bf16 | Math::F16 | Math::Fp8 => true,
            Math::Tf32x3 => self != Compute::Fp32,
            Math::Tf32 => self == Compute::Tf32,
        }
    }
}

/// One call: `C = alpha * op(A) * op(B) + beta * C`, where `op(A)` is
/// m x k, `op(B)` k x n and C m x n, for `batch` products whose matrices
/// start `stride_*` elements apart.
#[derive(Clone, Debug, PartialEq)]
pub struct GemmConfig {
    pub layout: Layout,
    pub op_a: Op,
    pub op_b: Op,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub alpha: f32,
    /// 0: C is written without being read (NaN in C does not leak).
    pub beta: f32,
    /// Elements between successive rows (row-major) or columns
    /// (column-major) of A as stored; at least their length.
    pub lda: usize,
    pub ldb: usize,
    pub ldc: usize,
    /// Products in the call (at least 1).
    pub batch: usize,
    /// Elements from one product's A to the next one's (0: all share one).
    pub stride_a: usize,
    pub stride_b: usize,
    /// At least C's span when `batch > 1`: products never share C.
    pub stride_c: usize,
    pub algorithm: Algorithm,
    /// What `Auto` may multiply an f32 call in ([`Compute::Fp32`] unless
    /// set).
    pub compute: Compute,
    /// FP8 calls: let `Auto` choose kernels that keep the tensor cores'
    /// partial sums for the whole of K (step 25, faster; Hopper's FP8
    /// tensor cores add with about 13 fraction bits, so its error grows
    /// with K), as cuBLASLt's `CUBLASLT_MATMUL_DESC_FAST_ACCUM`. False by
    /// default: sums promoted to f32 every 128 of K (steps 26 and 27).
    pub fast_accumulation: bool,
}

impl GemmConfig {
    /// `C = A * B`, row-major, leading dimensions equal to the row
    /// lengths, one product, `Auto`.
    pub fn new(m: usize, n: usize, k: usize) -> Self {
        Self {
            layout: Layout::RowMajor,
            op_a: Op::N,
            op_b: Op::N,
            m,
            n,
            k,
            alpha: 1.0,
            beta: 0.0,
            lda: k,
            ldb: n,
            ldc: n,
            batch: 1,
            stride_a: 0,
            stride_b: 0,
            stride_c: 0,
            algorithm: Algorithm::Auto,
            compute: Compute::Fp32,
            fast_accumulation: false,
        }
    }

    /// The same call with A's operation `op`, its leading dimension reset
    /// to the stored rows' length.
    pub fn op_a(mut self, op: Op) -> Self {
        self.op_a = op;
        self.lda = self.dense_ld(Operand::A);
        self
    }

    /// The same call with B's operation `op`, its leading dimension reset.
    pub fn op_b(mut self, op: Op) -> Self {
        self.op_b = op;
        self.ldb = self.dense_ld(Operand::B);
        self
    }

    /// The same call in `layout`, leading dimensions reset.
    pub fn layout(mut self, layout: Layout) -> Self {
        self.layout = layout;
        self.lda = self.dense_ld(Operand::A);
        self.ldb = self.dense_ld(Operand::B);
        self.ldc = self.dense_ld(Operand::C);
        self
    }

    /// The same call with these scalars.
    pub fn scalars(mut self, alpha: f32, beta: f32) -> Self {
        (self.alpha, self.beta) = (alpha, beta);
        self
    }

    /// The same call with these leading dimensions.
    pub fn lds(mut self, lda: usize, ldb: usize, ldc: usize) -> Self {
        (self.lda, self.ldb, self.ldc) = (lda, ldb, ldc);
        self
    }

    /// The same call as a strided batch of `count` products.
    pub fn batched(
        mut self,
        count: usize,
        stride_a: usize,
        stride_b: usize,
        stride_c: usize,
    ) -> Self {
        self.batch = count;
        (self.stride_a, self.stride_b, self.stride_c) = (stride_a, stride_b, stride_c);
        self
    }

    /// The same call computed by `algorithm`.
    pub fn algorithm(mut self, algorithm: Algorithm) -> Self {
        self.algorithm = algorithm;
        self
    }

    /// The same call with `Auto` allowed the kernels of `compute`.
    pub fn compute(mut self, compute: Compute) -> Self {
        self.compute = compute;
        self
    }

    /// The same FP8 call with `Auto` allowed fast accumulation or not
    /// ([`GemmConfig::fast_accumulation`]).
    pub fn fast_accumulation(mut self, fast: bool) -> Self {
        self.fast_accumulation = fast;
        self
    }

    /// Floats the buffers of A, B and C need for this call (every matrix
    /// of the batch at its leading dimension; saturating at `usize::MAX`
    /// for a call too large to address): what [`plan`] checks the
    /// buffers' lengths against.
    pub fn buffer_lens(&self) -> (usize, usize, usize) {
        let need = |which| self.extent(which).1.unwrap_or(usize::MAX);
        (need(Operand::A), need(Operand::B), need(Operand::C))
    }

    /// The elements one matrix `which` spans at its leading dimension,
    /// and those its buffer needs for the whole batch (`None` beyond the
    /// address space).
    fn extent(&self, which: Operand) -> (usize, Option<usize>) {
        let (ld, stride) = match which {
            Operand::A => (self.lda, self.stride_a),
            Operand::B => (self.ldb, self.stride_b),
            Operand::C => (self.ldc, self.stride_c),
        };
        let (lines, line) = self.stored(which);
        if lines == 0 || line == 0 || self.batch == 0 {
            return (0, Some(0));
        }
        let Some(one) = (lines - 1)
            .checked_mul(ld)
            .and_then(|x| x.checked_add(line))
        else {
            return (usize::MAX, None);
        };
        (
            one,
            stride
                .checked_mul(self.batch - 1)
                .and_then(|x| x.checked_add(one)),
        )
    }

    /// The stored shape of `which` as (lines, line length): rows of a
    /// row-major matrix, columns of a column-major one.
    fn stored(&self, which: Operand) -> (usize, usize) {
        let (rows, cols) = match which {
            Operand::A if self.op_a == Op::N => (self.m, self.k),
            Operand::A => (self.k, self.m),
            Operand::B if self.op_b == Op::N => (self.k, self.n),
            Operand::B => (self.n, self.k),
            Operand::C => (self.m, self.n),
        };
        match self.layout {
            Layout::RowMajor => (rows, cols),
            Layout::ColMajor => (cols, rows),
        }
    }

    /// The leading dimension of `which` stored packed: its line length.
    pub(crate) fn dense_ld(&self, which: Operand) -> usize {
        self.stored(which).1
    }
}

/// One of a call's matrices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Operand {
    A,
    B,
    C,
}

impl Operand {
    fn names(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Operand::A => ("a", "lda", "stride_a"),
            Operand::B => ("b", "ldb", "stride_b"),
            Operand::C => ("c", "ldc", "stride_c"),
        }
    }
}

/// Why a call was refused. Every variant names the argument at fault.
#[derive(Debug, thiserror::Error)]
pub enum GemmError {
    #[error("{arg} is 0: every dimension must be at least 1")]
    ZeroDimension { arg: &'static str },
    #[error("batch is 0: a call computes at least one product")]
    EmptyBatch,
    #[error(
        "{arg} = {ld} is less than {min}, the length of {matrix}'s {lines} as stored: \
         a leading dimension is at least that"
    )]
    LeadingDimension {
        arg: &'static str,
        ld: usize,
        min: usize,
        matrix: &'static str,
        lines: &'static str,
    },
    #[error(
        "{arg} holds {len} elements, but the call reads or writes {needs}: pass a larger buffer"
    )]
    BufferTooSmall {
        arg: &'static str,
        len: usize,
        needs: usize,
    },
    #[error("{arg} = {value} is too large: {why}")]
    TooLarge {
        arg: &'static str,
        value: usize,
        why: &'static str,
    },
    #[error(
        "stride_c = {stride} is less than C's span of {span} elements: the products of the batch \
         would write over each other"
    )]
    OverlappingBatch { stride: usize, span: usize },
    #[error(
        "no kernel multiplies {storage} (A x B -> C): A and B must be of one type (f32, BF16 or \
         FP16) with C f32 or their type, or FP8 (E4M3 x E4M3 to BF16, FP16 or f32; E5M2 x E4M3 \
         or E4M3 x E5M2 to BF16); convert the buffers that differ"
    )]
    Types { storage: Storage },
    #[error(
        "A and B are FP8 ({storage}): an FP8 call needs their scales; call gemm_scaled \
         (Sgemm::quantize makes FP8 matrices and their scales)"
    )]
    MissingScales { storage: Storage },
    #[error("scales are for FP8 operands, and this call multiplies {storage}: call gemm")]
    UnexpectedScales { storage: Storage },
    #[error(
        "Scales::scaling is None: an FP8 call's scales are per tensor or per block \
         (Scales::tensor, Scales::blocks)"
    )]
    ScalingNone,
    #[error(
        "{arg} holds {len} f32s, but {what} needs {needs}: pass a larger buffer \
         (Quantize::scales gives the count)"
    )]
    ScalesTooSmall {
        arg: &'static str,
        len: usize,
        needs: usize,
        what: String,
    },
    #[error(
        "FP8 kernels read A and B with K contiguous (FP8 wgmma reads K-major tiles only), and \
         this call has {layout:?} with op_a = {op_a:?}, op_b = {op_b:?}: call row-major with \
         op_a = N and op_b = T (B stored n x k), or column-major with op_a = T and op_b = N \
         (cuBLASLt's FP8 layout)"
    )]
    Fp8Layout { layout: Layout, op_a: Op, op_b: Op },
    #[error(
        "{arg} starts at address {address:#x}, and block scales are copied in rows of 16 \
         bytes: pass a buffer that starts on 16 bytes (cudaMalloc's do; a view that skips \
         a multiple of 4 f32s keeps it)"
    )]
    ScalesMisaligned { arg: &'static str, address: u64 },
    #[error(
        "block scales follow a row-major call (A's per row per 128 of K, B's per 128 x 128 of \
         B stored n x k), and this call is column-major: call row-major with op_b = T"
    )]
    BlockScalesLayout,
    #[error(
        "the epilogue's {what} holds {len} f32s, but C has {needs} {lines}s and it runs along \
         them: pass one f32 per {lines} of C (as the caller sees C, before any transpose)"
    )]
    EpilogueTooSmall {
        what: &'static str,
        lines: &'static str,
        len: usize,
        needs: usize,
    },
    #[error("split_k = {split_k}: {why}")]
    BadSplit { split_k: usize, why: String },
    #[error("no kernel is called {name}: name one of `kernels_gpu::registry::all()`")]
    UnknownKernel { name: String },
    #[error("kernel {kernel} cannot compute this call: {why}")]
    KernelUnsupported { kernel: String, why: String },
    /// A call split over devices (`multi`) with none to split it over.
    #[error("no devices: a split call needs at least one stream (one per device)")]
    NoDevices,
    #[error(
        "a batch of {batch} products cannot be split over devices: split one product at a \
         time, or give each device its own products"
    )]
    SplitBatch { batch: usize },
    #[error("{given} {what} buffers for {devices} devices: give one per device, in device order")]
    ShardCount {
        what: &'static str,
        given: usize,
        devices: usize,
    },
    #[error(
        "{arg} is on GPU {on}, and this device is GPU {expected}: pass a buffer allocated on \
         that device's stream"
    )]
    WrongDevice {
        arg: &'static str,
        on: usize,
        expected: usize,
    },
    #[error("root = {root}, and there are {devices} devices: give a device index below {devices}")]
    NoSuchRoot { root: usize, devices: usize },
    #[error(
        "a grid of {rows} x {cols} panels is not {devices} devices: give rows x cols equal to \
         the device count"
    )]
    GridShape {
        rows: usize,
        cols: usize,
        devices: usize,
    },
    #[error(
        "the product needs {needs} bytes on a device however it is cut over {devices} \
         devices, which have {memory}: use more devices, or a smaller call"
    )]
    TooLargeForDevices {
        needs: usize,
        memory: usize,
        devices: usize,
    },
    /// A K split's parts are partial sums of the whole of C, not shards
    /// to place (`multi::Part::place`).
    #[error("a K split's parts are partial sums of all of C: add them with multi::sum_partials")]
    PartialNotPlaced,
    #[error(
        "partial {device} holds {len} elements, partial 0 {first}: give every device's partial C \
         of the same call"
    )]
    PartialLengths {
        device: usize,
        len: usize,
        first: usize,
    },
    #[error(
        "an all-gather of A sends op(A)'s rows, which must be A's rows as stored, and this call \
         has {layout:?} with op_a = {op_a:?}: call row-major with op_a = N, or column-major \
         with op_a = T"
    )]
    GatherLayout { layout: Layout, op_a: Op },
    /// A multi-device call that moves data between devices on a handle
    /// made without communicators.
    #[error(
        "this MultiGemm has no NCCL communicators, which {what} needs: make it with \
         MultiGemm::with_nccl"
    )]
    NoNccl { what: &'static str },
    #[error(
        "the NCCL library (libnccl.so.2) was not found: install NCCL (the CUDA toolkit's, or \
         pip's nvidia-nccl-cu12) and add its folder to LD_LIBRARY_PATH"
    )]
    NcclMissing,
    #[error(
        "streams {first} and {second} are both on GPU {ordinal}, and NCCL takes one rank per \
         GPU: give with_nccl one stream per GPU (MultiGemm::new takes two streams of a GPU)"
    )]
    SameGpu {
        first: usize,
        second: usize,
        ordinal: usize,
    },
    #[error(
        "an earlier NCCL call of this MultiGemm failed inside a group, which may leave the other \
         devices waiting: synchronize nothing more on its streams and make a new MultiGemm"
    )]
    NcclBroken,
    #[error("NCCL failed {doing}: {error}")]
    Nccl { doing: String, error: String },
    /// One device's part of a split call failed; `source` says how.
    #[error("device {device}: {source}")]
    OnDevice {
        device: usize,
        #[source]
        source: Box<GemmError>,
    },
    /// The GPU, the driver or a launch failed.
    #[error(transparent)]
    Gpu(#[from] HostError),
}

impl GemmError {
    /// This error, as device `device`'s part of a split call.
    pub fn on_device(self, device: usize) -> Self {
        Self::OnDevice {
            device,
            source: Box::new(self),
        }
    }
}

/// A call reduced to what the kernels take: one row-major problem (with
/// A and B swapped for a column-major call), after every check.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Plan {
    /// Row-major shape, leading dimensions, scalars and batch strides.
    pub params: GemmParams,
    /// How the kernel reads A and B (of the row-major problem).
    pub ops: Ops,
    pub batch: usize,
    /// A column-major call: the kernel's A is the caller's B and its B
    /// the caller's A.
    pub swapped: bool,
    /// A, B and C as the kernel reads them (of the row-major problem: a
    /// column-major call's A and B types swapped with the buffers).
    pub storage: Storage,
    /// The math `Auto` may choose kernels of.
    pub compute: Compute,
    /// FP8: `Auto` may choose kernels without promotion
    /// ([`GemmConfig::fast_accumulation`]).
    pub fast_accumulation: bool,
}

impl Plan {
    /// This plan as one product when that reads and writes the same
    /// memory: a batch whose products share B (`stride_b = 0`), with A
    /// read as stored (`op_a` N) and each product's A and C the rows right
    /// after the previous product's (`stride_a = m * lda`, `stride_c = m *
    /// ldc`), is one product of `batch * m` rows: a linear layer over a
    /// batch of sequences, which then runs on the tiles (and TMA kernels)
    /// of one large product instead of a batch of small ones. (A
    /// column-major call folds when its A is shared and its B's and C's
    /// products are consecutive columns: the swap made those the plan's B,
    /// A and C.) Not folded: an epilogue vector along C's rows
    /// (`rows_vector`: each product reads it from its first row), FP8
    /// block scales (A's scales are per row of one product), and a fold
    /// whose A or C would span more elements than the kernels index.
    pub fn folded(self, rows_vector: bool) -> Plan {
        let p = &self.params;
        let m = p.m as u64;
        let rows = m * self.batch as u64;
        let folds = self.batch > 1
            && p.stride_b == 0
            && self.ops.a == Op::N
            && p.stride_a == m * p.lda as u64
            && p.stride_c == m * p.ldc as u64
            && !rows_vector
            && self.storage.scaling != Scaling::Blocks
            && rows <= u32::MAX as u64
            && kernels_gpu::gemm::span(rows as u32, p.k, p.lda)
                <= kernels_gpu::gemm::MAX_ELEMS as u64
            && kernels_gpu::gemm::span(rows as u32, p.n, p.ldc)
                <= kernels_gpu::gemm::MAX_ELEMS as u64;
        if !folds {
            return self;
        }
        Plan {
            params: GemmParams {
                m: rows as u32,
                stride_a: 0,
                stride_c: 0,
                ..self.params
            },
            batch: 1,
            ..self
        }
    }

    /// This plan as a kernel that reads A and B as `spec.ops` says
    /// would take it, when that reads the same memory: itself for a
    /// kernel of the plan's layout; for an f32 pointer kernel, a vector
    /// operand stored transposed read as it is. A one-column B stored
    /// transposed (`op_b` T, `n == 1`) is a column of K consecutive
    /// values, which is B as it is with `ldb = 1`; a one-row A stored
    /// transposed is A as it is when its values are consecutive (`lda
    /// == 1`). So a matrix-vector call that arrives as `n == 1` with B
    /// transposed (a column-major `1 x n` call with A transposed, after
    /// the swap) is the GEMV of step 16, which reads B down a column.
    /// Only these directions: the kernels for one row or one column of C
    /// (steps 15, 16 and 28) read A as it is and B as it is or (step 28)
    /// transposed, and the tiles that read a vector transposed gained
    /// nothing in the recorded suites.
    pub fn read_as(&self, spec: &KernelSpec) -> Option<Plan> {
        if spec.ops == self.ops {
            return Some(*self);
        }
        let mut p = self.params;
        let readable = self.storage == Storage::F32 && spec.operands == Operands::Pointers;
        let a = match (self.ops.a, spec.ops.a) {
            (from, to) if from == to => true,
            (Op::T, Op::N) if p.m == 1 && p.lda == 1 => {
                p.lda = p.k;
                true
            }
            _ => false,
        };
        let b = match (self.ops.b, spec.ops.b) {
            (from, to) if from == to => true,
            (Op::T, Op::N) if p.n == 1 => {
                p.ldb = 1;
                true
            }
            _ => false,
        };
        (readable && a && b).then_some(Plan {
            params: p,
            ops: spec.ops,
            ..*self
        })
    }

    /// Whether `spec` can run this plan: read as its layout takes it
    /// ([`Plan::read_as`]), with nothing its spec refuses (the batch, the
    /// alignment its copies need).
    pub fn runs_on(&self, spec: &KernelSpec) -> bool {
        self.read_as(spec)
            .is_some_and(|read| spec.unsupported(&read.params, self.batch).is_none())
    }

    /// The layouts [`Plan::read_as`] may turn this plan into, its own
    /// first.
    pub fn layouts(&self) -> impl Iterator<Item = Ops> {
        let p = &self.params;
        let f32 = self.storage == Storage::F32;
        let a_flips = f32 && p.m == 1 && self.ops.a == Op::T && p.lda == 1;
        let b_flips = f32 && p.n == 1 && self.ops.b == Op::T;
        let Ops { a, b } = self.ops;
        [
            Some(self.ops),
            a_flips.then_some(Ops { a: Op::N, b }),
            b_flips.then_some(Ops { a, b: Op::N }),
            (a_flips && b_flips).then_some(Ops::NN),
        ]
        .into_iter()
        .flatten()
    }
}

/// [`plan_for`] of an f32 call.
pub fn plan(cfg: &GemmConfig, lens: (usize, usize, usize)) -> Result<Plan, GemmError> {
    plan_for(cfg, lens, Storage::F32)
}

/// Whether some kernel multiplies `storage`: all f32, A and B of one
/// 16-bit type with C f32 or that type, or FP8 A and B with a C some FP8
/// kernel writes (scales aside: [`Sgemm::gemm_scaled`] checks those).
pub fn check_types(storage: Storage) -> Result<(), GemmError> {
    let ok = match (storage.a, storage.b, storage.c) {
        (Elem::F32, Elem::F32, Elem::F32) => true,
        (a, b, _) if a.bytes() == 1 || b.bytes() == 1 => registry::all().any(|k| {
            let e = k.elems;
            (e.a, e.b, e.c) == (storage.a, storage.b, storage.c)
        }),
        (a, b, c) => a == b && a.bytes() == 2 && (c == Elem::F32 || c == a),
    };
    if ok {
        Ok(())
    } else {
        Err(GemmError::Types { storage })
    }
}

/// Checks `cfg` against buffers of `lens` (elements of A, B and C) that
/// store `storage`, and reduces it to a row-major [`Plan`]. No GPU needed.
pub fn plan_for(
    cfg: &GemmConfig,
    lens: (usize, usize, usize),
    storage: Storage,
) -> Result<Plan, GemmError> {
    check_types(storage)?;
    for (arg, v) in [("m", cfg.m), ("n", cfg.n), ("k", cfg.k)] {
        if v == 0 {
            return Err(GemmError::ZeroDimension { arg });
        }
        if v > u32::MAX as usize {
            return Err(GemmError::TooLarge {
                arg,
                value: v,
                why: "the kernels take sizes of up to 2^32 - 1",
            });
        }
    }
    if cfg.batch == 0 {
        return Err(GemmError::EmptyBatch);
    }
    let mut spans = [0usize; 3];
    for (i, (which, len, ld)) in [
        (Operand::A, lens.0, cfg.lda),
        (Operand::B, lens.1, cfg.ldb),
        (Operand::C, lens.2, cfg.ldc),
    ]
    .into_iter()
    .enumerate()
    {
        let (buf, ld_arg, stride_arg) = which.names();
        let line = cfg.stored(which).1;
        if ld < line {
            let matrix = ["A", "B", "C"][i];
            let lines = match cfg.layout {
                Layout::RowMajor => "rows",
                Layout::ColMajor => "columns",
            };
            return Err(GemmError::LeadingDimension {
                arg: ld_arg,
                ld,
                min: line,
                matrix,
                lines,
            });
        }
        if ld > u32::MAX as usize {
            return Err(GemmError::TooLarge {
                arg: ld_arg,
                value: ld,
                why: "the kernels take leading dimensions of up to 2^32 - 1",
            });
        }
        let (one, needs) = cfg.extent(which);
        let needs = needs.ok_or(GemmError::TooLarge {
            arg: stride_arg,
            value: [cfg.stride_a, cfg.stride_b, cfg.stride_c][i],
            why: "the batch's last matrix lies beyond the address space",
        })?;
        if len < needs {
            return Err(GemmError::BufferTooSmall {
                arg: buf,
                len,
                needs,
            });
        }
        spans[i] = one;
    }
    if cfg.batch > 1 && cfg.stride_c < spans[2] {
        return Err(GemmError::OverlappingBatch {
            stride: cfg.stride_c,
            span: spans[2],
        });
    }
    // FP8 `wgmma` reads K-major tiles only: A as stored (m x k) and B
    // stored n x k, row-major (the same memory column-major with the ops
    // the other way round).
    let k_major = match cfg.layout {
        Layout::RowMajor => (cfg.op_a, cfg.op_b) == (Op::N, Op::T),
        Layout::ColMajor => (cfg.op_a, cfg.op_b) == (Op::T, Op::N),
    };
    if storage.scaled() && !k_major {
        return Err(GemmError::Fp8Layout {
            layout: cfg.layout,
            op_a: cfg.op_a,
            op_b: cfg.op_b,
        });
    }
    // Row-major from here: a column-major C (m x n) is the row-major C^T
    // (n x m) = op(B)^T op(A)^T, and a column-major operand stored with op
    // N is, read row-major, its transpose: so swap A and B and keep ops.
    let swapped = cfg.layout == Layout::ColMajor;
    let (m, n) = if swapped {
        (cfg.n, cfg.m)
    } else {
        (cfg.m, cfg.n)
    };
    let ((lda, op_a, sa), (ldb, op_b, sb)) = {
        let a = (cfg.lda, cfg.op_a, cfg.stride_a);
        let b = (cfg.ldb, cfg.op_b, cfg.stride_b);
        if swapped { (b, a) } else { (a, b) }
    };
    // The kernel's A and B are the caller's B and A: their types too
    // (FP8 A and B may differ).
    let storage = if swapped {
        Storage {
            a: storage.b,
            b: storage.a,
            ..storage
        }
    } else {
        storage
    };
    Ok(Plan {
        params: GemmParams {
            m: m as u32,
            n: n as u32,
            k: cfg.k as u32,
            lda: lda as u32,
            ldb: ldb as u32,
            ldc: cfg.ldc as u32,
            alpha: cfg.alpha,
            beta: cfg.beta,
            k_slice: 0,
            slices: 0,
            stride_a: sa as u64,
            stride_b: sb as u64,
            stride_c: cfg.stride_c as u64,
        },
        ops: Ops { a: op_a, b: op_b },
        batch: cfg.batch,
        swapped,
        storage,
        compute: cfg.compute,
        fast_accumulation: cfg.fast_accumulation,
    })
}

/// The scales of an FP8 call ([`Sgemm::gemm_scaled`]): f32s in device
/// memory (so a program can compute them on the GPU without a sync),
/// each the factor that dequantizes its operand (`value = stored *
/// scale`), as cuBLASLt's scale pointers and DeepGEMM's scale tensors;
/// [`Sgemm::quantize`] makes them.
pub struct Scales<'a, S> {
    /// [`Scaling::Tensor`]: one f32 each for A and B.
    /// [`Scaling::Blocks`]: A's per row per 128 of K
    /// ([`Quantize::Rows`], `Scaling::a_scales(m, k)` of them) and B's per
    /// 128 x 128 of B stored n x k ([`Quantize::Tiles`],
    /// `Scaling::b_scales(k, n)`), the layouts of cuBLASLt's
    /// `VEC128_32F` and `BLK128x128_32F`.
    pub scaling: Scaling,
    pub a: &'a S,
    pub b: &'a S,
    /// D's scale (one f32), or `None` for 1.
    pub d: Option<&'a S>,
}

impl<S> Clone for Scales<'_, S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S> Copy for Scales<'_, S> {}

impl<'a, S> Scales<'a, S> {
    /// One scale each for A and B.
    pub fn tensor(a: &'a S, b: &'a S) -> Self {
        Self {
            scaling: Scaling::Tensor,
            a,
            b,
            d: None,
        }
    }

    /// Block scales of A and B.
    pub fn blocks(a: &'a S, b: &'a S) -> Self {
        Self {
            scaling: Scaling::Blocks,
            a,
            b,
            d: None,
        }
    }

    /// These scales with D's.
    pub fn with_d(self, d: &'a S) -> Self {
        Self { d: Some(d), ..self }
    }
}

/// A fused epilogue ([`Sgemm::gemm_fused`]):
///
/// `D = act(s * (alpha * op(A) op(B) + beta * C) + bias)`
///
/// with `s` an optional f32 per row or per column of C (1 without), the
/// bias an optional f32 per row or per column (0 without), and `act` an
/// [`Activation`], all computed in f32 and stored in C's type. The
/// kernels store `alpha * op(A) op(B) + beta * C` first and apply the
/// rest in a pass over the tile they stored, so a 16-bit C is rounded
/// twice (once before the activation).
/// Rows and columns are those of C as the caller lays it out (a
/// column-major call's bias per row stays per row). Every product of a
/// batch uses the same vectors. For FP8 calls `alpha` and `beta` include
/// the scales (`scale_d` multiplies the sum, not the bias).
pub struct Epilogue<'a, S> {
    pub activation: Activation,
    pub bias: Option<(&'a S, Per)>,
    pub scale: Option<(&'a S, Per)>,
}

impl<S> Clone for Epilogue<'_, S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S> Copy for Epilogue<'_, S> {}

impl<'a, S> Epilogue<'a, S> {
    /// No bias, no scales, no activation: a plain GEMM.
    pub fn none() -> Self {
        Self {
            activation: Activation::None,
            bias: None,
            scale: None,
        }
    }

    /// `activation` alone.
    pub fn activation(activation: Activation) -> Self {
        Self {
            activation,
            ..Self::none()
        }
    }

    /// This epilogue with a bias along `per`.
    pub fn with_bias(self, bias: &'a S, per: Per) -> Self {
        Self {
            bias: Some((bias, per)),
            ..self
        }
    }

    /// This epilogue with scales along `per`.
    pub fn with_scale(self, scale: &'a S, per: Per) -> Self {
        Self {
            scale: Some((scale, per)),
            ..self
        }
    }
}

/// An epilogue vector's length and the dimension of C it runs along, if
/// there is that vector.
pub type VectorLen = Option<(usize, Per)>;

/// Checks an epilogue's vectors, of lengths `(bias, scale)`, against the
/// call `cfg` (typed errors naming the vector). No GPU needed.
pub fn check_epilogue(
    cfg: &GemmConfig,
    (bias, scale): (VectorLen, VectorLen),
) -> Result<(), GemmError> {
    for (what, v) in [("bias", bias), ("scale", scale)] {
        if let Some((len, per)) = v {
            let needs = per.len(cfg.m, cfg.n);
            if len < needs {
                let lines = if per == Per::Row { "row" } else { "column" };
                return Err(GemmError::EpilogueTooSmall {
                    what,
                    lines,
                    len,
                    needs,
                });
            }
        }
    }
    Ok(())
}

/// Checks an FP8 call's scales: their kind, and the lengths `(a, b, d)`
/// of their buffers against the call `cfg` (typed errors naming the
/// buffer). No GPU needed.
pub fn check_scales(
    cfg: &GemmConfig,
    scaling: Scaling,
    (a, b, d): (usize, usize, Option<usize>),
) -> Result<(), GemmError> {
    let too_small = |arg, len, needs, what: String| GemmError::ScalesTooSmall {
        arg,
        len,
        needs,
        what,
    };
    let (a_needs, b_needs, what) = match scaling {
        Scaling::None => return Err(GemmError::ScalingNone),
        Scaling::Tensor => (1, 1, "a per-tensor scale".to_string()),
        Scaling::Blocks => {
            if cfg.layout == Layout::ColMajor {
                return Err(GemmError::BlockScalesLayout);
            }
            (
                Scaling::a_scales(cfg.m, cfg.k),
                Scaling::b_scales(cfg.k, cfg.n),
                format!(
                    "block scaling at m = {}, n = {}, k = {}",
                    cfg.m, cfg.n, cfg.k
                ),
            )
        }
    };
    if a < a_needs {
        return Err(too_small("scales.a", a, a_needs, what));
    }
    if b < b_needs {
        return Err(too_small("scales.b", b, b_needs, what));
    }
    if let Some(d) = d
        && d < 1
    {
        return Err(too_small("scales.d", d, 1, "D's scale".into()));
    }
    Ok(())
}

/// Checks that block scales start on 16 bytes (step 26 copies them
/// into shared memory with `cp.async.bulk`, cuBLASLt asks the same):
/// `a` and `b` are their device addresses, as the kernel takes them.
pub fn check_scale_alignment(scaling: Scaling, a: u64, b: u64) -> Result<(), GemmError> {
    if scaling != Scaling::Blocks {
        return Ok(());
    }
    for (arg, address) in [("scales.a", a), ("scales.b", b)] {
        if !address.is_multiple_of(16) {
            return Err(GemmError::ScalesMisaligned { arg, address });
        }
    }
    Ok(())
}

/// One quantization ([`Sgemm::quantize`]): a `rows x cols` source with
/// rows `ld` elements apart, to a dense FP8 `rows x cols`, scaled as
/// `how` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuantConfig {
    pub rows: usize,
    pub cols: usize,
    pub ld: usize,
    pub how: Quantize,
}

impl QuantConfig {
    /// A dense source (`ld = cols`).
    pub fn new(rows: usize, cols: usize, how: Quantize) -> Self {
        Self {
            rows,
            cols,
            ld: cols,
            how,
        }
    }

    /// The same with the source's rows `ld` apart.
    pub fn ld(self, ld: usize) -> Self {
        Self { ld, ..self }
    }

    /// The elements the source, the FP8 output and the scales need.
    pub fn lens(&self) -> (usize, usize, usize) {
        let src = match self.rows {
            0 => 0,
            r => (r - 1).saturating_mul(self.ld).saturating_add(self.cols),
        };
        (
            src,
            self.rows.saturating_mul(self.cols),
            self.how.scales(self.rows, self.cols),
        )
    }

    /// Checks the call against buffers of `(src, dst, scales)` elements.
    /// No GPU needed.
    pub fn check(&self, (src, dst, scales): (usize, usize, usize)) -> Result<(), GemmError> {
        for (arg, v) in [("rows", self.rows), ("cols", self.cols)] {
            if v == 0 {
                return Err(GemmError::ZeroDimension { arg });
            }
        }
        if self.ld < self.cols {
            return Err(GemmError::LeadingDimension {
                arg: "ld",
                ld: self.ld,
                min: self.cols,
                matrix: "the source",
                lines: "rows",
            });
        }
        for (arg, v) in [("cols", self.cols), ("ld", self.ld)] {
            if v > u32::MAX as usize {
                return Err(GemmError::TooLarge {
                    arg,
                    value: v,
                    why: "the quantizer takes sizes of up to 2^32 - 1",
                });
            }
        }
        let steps = self.how.steps();
        let grid_rows = steps.iter().map(|s| s.grid(self.rows, self.cols).1).max();
        if self.rows > u32::MAX as usize || grid_rows.unwrap_or(0) > crate::quant::MAX_GRID_Y {
            return Err(GemmError::TooLarge {
                arg: "rows",
                value: self.rows,
                why: "the quantizer's grid has at most 65535 blocks of rows (8 rows each for \
                      Quantize::Rows, 128 for the others)",
            });
        }
        let (src_needs, dst_needs, scales_needs) = self.lens();
        for (arg, len, needs) in [
            ("src", src, src_needs),
            ("dst", dst, dst_needs),
            ("scales", scales, scales_needs),
        ] {
            if len < needs {
                return Err(GemmError::BufferTooSmall { arg, len, needs });
            }
        }
        Ok(())
    }
}

/// What computes a call: a kernel, and how many slices of K.
#[derive(Clone, Copy, Debug)]
pub struct Choice {
    pub kernel: &'static KernelSpec,
    /// 1: no split; more: split-K, then `reduce_slices`.
    pub split_k: usize,
}

impl PartialEq for Choice {
    fn eq(&self, other: &Self) -> bool {
        self.kernel.name == other.kernel.name && self.split_k == other.split_k
    }
}

impl std::fmt::Display for Choice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.split_k {
            1 => write!(f, "{}", self.kernel.name),
            s => write!(f, "{} split-K {s}", self.kernel.name),
        }
    }
}

/// What `Auto` knows of one candidate: its spec, and how many of its
/// blocks an SM holds at once (the driver's occupancy calculator).
#[derive(Clone, Copy, Debug)]
pub struct Candidate {
    pub spec: &'static KernelSpec,
    pub blocks_per_sm: usize,
}

/// Measured throughput of each candidate on an H200 at n = 4096
/// (GFLOP/s, from README runs' docs/bench.json: the FP32 rows from the
/// run they were fitted to, the 16-bit NN ones from commit b4e3313's; the
/// transposed 16-bit ones from runs of their own; docs/measurements.md
/// has them all): how fast a kernel is
/// once the GPU is full. A kernel missing here (another GPU's favourite,
/// a new instance) counts as the slowest listed of its stored types.
const FULL_RATE: &[(&str, f64)] = &[
    ("tuned_128x128x16_w64x64", 48_297.0),
    ("tuned_128x128x8_w64x64", 46_889.0),
    ("tuned_256x64x8_w64x64", 46_546.0),
    ("tuned_256x128x16_w64x64", 46_088.0),
    ("tuned_128x128x16_w32x64", 45_701.0),
    ("tuned_128x64x8_w64x64", 44_629.0),
    ("tuned_64x128x8_w32x64", 43_163.0),
    ("tuned_256x128x8_w64x64", 42_702.0),
    ("tuned_128x128x8_w32x64", 38_256.0),
    // The small tiles, from the README run of docs/bench.json (4096^3):
    // unlisted, they counted as the slowest rate above, which sent large
    // calls to them (docs/measurements.md, twenty-fourth session).
    ("tuned_64x64x16_w32x32", 42_978.0),
    ("tuned_32x64x16_w16x32", 31_091.0),
    ("tuned_32x32x16_w16x32", 28_339.0),
    // Steps 15 and 16 (one row, one column of C per tile), from the same
    // run: unlisted, they counted as the slowest tile above, 30 times
    // step 16's real rate, which sent long-K calls of a few columns to it
    // (docs/measurements.md, twenty-fifth session).
    ("skinny_1x512", 6_313.0),
    ("skinny_1x256", 5_422.0),
    ("gemv_warp_8x1", 953.0),
    // Step 29 (small K): its H100 rate at 4096 (K staged 8 at a time
    // with no pipeline) times step 10's H200 / H100 ratio
    // (docs/measurements.md, thirty-third session).
    ("small_k_64x128", 30_457.0),
    // The transposed instances of step 10's tiles and of step 29: the
    // rate of the tile with A and B as they are times the instance's
    // ratio to it on an H100 at 4096 (`bench --sizes 4096 --kernels
    // ...`, one run; docs/measurements.md, thirty-sixth session for step
    // 10's, whose B-transposed tiles are padded since, thirty-fifth for
    // step 29's). Until the thirty-fifth session they took their
    // untransposed tile's rate, and step 29's the slowest of the call's
    // candidates' (B transposed slows step 10's small tiles; step 29
    // reads every layout alike).
    ("tuned_128x128x16_w32x64_tn", 46_817.0),
    ("tuned_128x128x16_w32x64_nt", 45_706.0),
    ("tuned_128x128x16_w32x64_tt", 46_471.0),
    ("tuned_64x128x8_w32x64_tn", 44_520.0),
    ("tuned_64x128x8_w32x64_nt", 40_874.0),
    ("tuned_64x128x8_w32x64_tt", 41_810.0),
    ("tuned_64x64x16_w32x32_tn", 44_085.0),
    ("tuned_64x64x16_w32x32_nt", 40_506.0),
    ("tuned_64x64x16_w32x32_tt", 42_674.0),
    ("tuned_32x64x16_w16x32_tn", 33_013.0),
    ("tuned_32x64x16_w16x32_nt", 28_066.0),
    ("tuned_32x64x16_w16x32_tt", 29_350.0),
    ("tuned_32x32x16_w16x32_tn", 30_982.0),
    ("tuned_32x32x16_w16x32_nt", 25_772.0),
    ("tuned_32x32x16_w16x32_tt", 28_334.0),
    ("small_k_64x128_tn", 30_464.0),
    ("small_k_64x128_nt", 30_341.0),
    ("small_k_64x128_tt", 30_509.0),
    // Other transposed instances of step 10, if any are registered, take
    // their untransposed instance's rate (`full_rate`).
    // 16-bit: steps 19-20 and 22 (Hopper, A and B as they are), step 21
    // (any GPU since Ampere, every layout).
    // Step 22 (step 20 with C stored by TMA): step 20's rate times step
    // 22 / step 20 in one run (`bench --sizes 2048,4096,8192,...`,
    // docs/measurements.md, eleventh session): 1.014 with an f32 C, 1.070
    // with a 16-bit one; FP16 as BF16.
    ("wgmma_bf16_tma_store_128x256x64_s4", 717_065.0),
    ("wgmma_bf16_tma_store_128x256x64_s4_c16", 745_376.0),
    ("wgmma_f16_tma_store_128x256x64_s4", 692_385.0),
    ("wgmma_f16_tma_store_128x256x64_s4_c16", 714_048.0),
    ("wgmma_bf16_persistent_128x256x64_s4", 707_165.0),
    ("wgmma_bf16_persistent_128x256x64_s4_c16", 696_613.0),
    ("wgmma_bf16_128x256x64_s4", 684_621.0),
    ("wgmma_f16_persistent_128x256x64_s4", 682_825.0),
    ("wgmma_f16_persistent_128x256x64_s4_c16", 667_335.0),
    ("wgmma_f16_128x256x64_s4", 662_293.0),
    ("mma16_bf16_128x256x64_w64x64_s3", 340_061.0),
    ("mma16_f16_128x256x64_w64x64_s3", 333_370.0),
    ("mma16_bf16_128x128x64_w64x64_s4", 279_903.0),
    ("mma16_f16_128x128x64_w64x64_s4", 274_019.0),
    ("mma16_bf16_128x128x64_w64x64_s4_c16", 288_243.0),
    ("mma16_f16_128x128x64_w64x64_s4_c16", 268_084.0),
    // The transposed layouts of steps 20 and 21 (`bench --sizes 4096
    // --kernels ...` on each, docs/measurements.md, tenth session).
    ("wgmma_bf16_persistent_128x256x64_s4_tn", 700_419.0),
    ("wgmma_bf16_persistent_128x256x64_s4_nt", 699_449.0),
    ("wgmma_bf16_persistent_128x256x64_s4_tt", 699_848.0),
    ("wgmma_f16_persistent_128x256x64_s4_tn", 680_553.0),
    ("wgmma_f16_persistent_128x256x64_s4_nt", 677_653.0),
    ("wgmma_f16_persistent_128x256x64_s4_tt", 677_867.0),
    ("wgmma_bf16_persistent_128x256x64_s4_tn_c16", 693_408.0),
    ("wgmma_bf16_persistent_128x256x64_s4_nt_c16", 693_184.0),
    ("wgmma_bf16_persistent_128x256x64_s4_tt_c16", 695_429.0),
    ("wgmma_f16_persistent_128x256x64_s4_tn_c16", 663_828.0),
    ("wgmma_f16_persistent_128x256x64_s4_nt_c16", 670_251.0),
    ("wgmma_f16_persistent_128x256x64_s4_tt_c16", 669_363.0),
    ("mma16_bf16_128x128x64_w64x32_s4_tn", 278_677.0),
    ("mma16_bf16_128x128x64_w64x32_s4_nt", 287_202.0),
    ("mma16_bf16_128x128x64_w64x32_s4_tt", 278_939.0),
    ("mma16_f16_128x128x64_w64x32_s4_tn", 272_290.0),
    ("mma16_f16_128x128x64_w64x32_s4_nt", 282_750.0),
    ("mma16_f16_128x128x64_w64x32_s4_tt", 272_515.0),
    ("mma16_bf16_128x128x64_w64x32_s4_tn_c16", 289_204.0),
    ("mma16_bf16_128x128x64_w64x32_s4_nt_c16", 297_549.0),
    ("mma16_bf16_128x128x64_w64x32_s4_tt_c16", 288_961.0),
    ("mma16_f16_128x128x64_w64x32_s4_tn_c16", 278_668.0),
    ("mma16_f16_128x128x64_w64x32_s4_nt_c16", 286_780.0),
    ("mma16_f16_128x128x64_w64x32_s4_tt_c16", 278_731.0),
    // 3xTF32 (`Compute::Tf32x3`) and TF32 (`Compute::Tf32`): the README
    // run of 4ef1b77 (docs/bench.json). A kernel whose launch copies A or
    // B first (steps 17 and 24, `TmaCopy`) is listed at the rate of the
    // kernel alone: the bench's time less the model's copies
    // (`copies_s`, 92 us for step 24 and 32 us for step 17 at 4096),
    // which the model adds back per call.
    ("wgmma_3xtf32_128x128x32_s3", 130_584.0),
    ("mma_3xtf32_64x64x32_w32x32_s2", 25_510.0),
    ("wgmma_tr_256x128x32_s4", 344_950.0),
    ("wgmma_ss_256x128x32_s4", 352_170.0),
    // Its transposed instances: the same body, other copies (which the
    // model adds per call).
    ("wgmma_ss_256x128x32_s4_tn", 352_170.0),
    ("wgmma_ss_256x128x32_s4_nt", 352_170.0),
    ("wgmma_ss_256x128x32_s4_tt", 352_170.0),
    // The 128 x 128 tiles of steps 17-18 (m64n128k8): the 256-row
    // instance's rate above times the ratio of their times at 4096 in
    // one run, copies included (H100, `bench --suite --quick --compute
    // tf32`; step 18's the mean of two runs; docs/measurements.md,
    // forty-sixth session): 0.62 for step 18 (its transposition costs
    // twice as much per FLOP), 0.77-0.80 for step 17's layouts.
    ("wgmma_tr_128x128x32_s6", 212_500.0),
    ("wgmma_ss_128x128x32_s6_tn", 282_100.0),
    ("wgmma_ss_128x128x32_s6_nt", 281_000.0),
    ("wgmma_ss_128x128x32_s6_tt", 271_500.0),
    ("mma_128x128x32_w64x64_s2", 152_131.0),
    ("mma_256x128x32_w64x64_s3", 141_363.0),
    ("mma_128x64x32_w64x32_s2", 133_800.0),
    ("mma_64x128x32_w32x64_s2", 131_200.0),
    // FP8 (steps 25-26): the fifteenth session's runs at 4096
    // (docs/fp8-step26/table.md; the block-scaled ones from
    // table-loads-after-issue.md, the committed body).
    ("wgmma_e4m3_128x256x128_s4", 1_384_134.0),
    ("wgmma_e4m3_128x256x128_s4_f32", 1_275_417.0),
    // Step 25's other instances: the README run of 92e6300
    // (docs/bench.json), listed since step 27 made them other than the
    // only FP8 kernels of their types.
    ("wgmma_e4m3_128x256x128_s4_f16", 1_390_632.0),
    ("wgmma_e5m2_e4m3_128x256x128_s4", 1_429_036.0),
    ("wgmma_e4m3_e5m2_128x256x128_s4", 1_435_004.0),
    ("wgmma_e4m3_promoted_128x128x128_s6", 1_116_156.0),
    ("wgmma_e4m3_promoted_128x128x128_s6_f32", 1_043_608.0),
    // Step 26's block scales through shared memory (five stages): the
    // eighteenth session's bench at 4096 (docs/fp8-step26/bench-scales-in-smem.txt).
    ("wgmma_e4m3_blocks_128x128x128_s5", 945_091.0),
    ("wgmma_e4m3_blocks_128x128x128_s5_f32", 927_238.0),
    // Their 128 x 192 tile: the 128 x 128 tile's rate times the ratio of
    // the two at 4096 in the thirty-first session's run on the H200
    // (1.096 with a BF16 C, 0.983 with f32; 1.09-1.12 and 0.98 on an
    // H100: docs/measurements.md).
    ("wgmma_e4m3_blocks_128x192x128_s4", 1_035_820.0),
    ("wgmma_e4m3_blocks_128x192x128_s4_f32", 911_475.0),
    // Step 27 (FP8 mma.sync, Ada's FP8 kernel): its 64 x 128 tile in the
    // eighteenth session's bench at 4096 where it was timed
    // (docs/measurements.md), the seventeenth's runs of its first tile,
    // 128 x 128, for the rest (docs/fp8-step27/tile-128x128/; the same
    // speed within 3 %). On Hopper ptxas turns each m16n8k32 into two
    // FP16 HMMAs after unpacking the FP8 values: this rate is not Ada's.
    ("mma_e4m3_64x128x128_w32x32_s3", 247_549.0),
    ("mma_e4m3_64x128x128_w32x32_s3_f16", 250_370.0),
    ("mma_e4m3_64x128x128_w32x32_s3_f32", 255_851.0),
    ("mma_e5m2_e4m3_64x128x128_w32x32_s3", 252_408.0),
    ("mma_e4m3_e5m2_64x128x128_w32x32_s3", 250_122.0),
    ("mma_e4m3_blocks_64x128x128_w32x32_s3", 229_973.0),
    ("mma_e4m3_blocks_64x128x128_w32x32_s3_f32", 229_530.0),
];

/// One measured call: the fastest registered kernel and split for it (a
/// row of `bench --suite`'s table, written by `bench --suite
/// --write-auto`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AutoEntry {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub batch: usize,
    /// `nn`, `tn`, `nt` or `tt` (row-major, as `Ops::suffix`).
    pub ops: String,
    pub kernel: String,
    pub split_k: usize,
}

/// Measured choices per GPU model (by the name the driver gives), kept
/// in the repository (`host/gemm/data/`). A GPU without a table uses the
/// model alone.
const TABLES: &[(&str, &str)] = &[("NVIDIA H200", include_str!("../data/auto-nvidia-h200.json"))];

/// The measured table for the GPU called `name`, if the repository has
/// one (and it parses).
pub fn table_for(name: &str) -> Option<Vec<AutoEntry>> {
    let (_, json) = TABLES.iter().find(|(gpu, _)| *gpu == name)?;
    serde_json::from_str(json).ok()
}

/// How far a measured call may be from the asked one for its choice to
/// be taken: the sum over m, n, k and the batch of `|log2(asked /
/// measured)|`. 1.0 is one dimension twice as large, or two of them
/// 1.41 times.
pub const TABLE_REACH: f64 = 1.0;

/// The kernels `Auto` chooses from for `ops` on buffers of `storage` in
/// mode `compute`: for f32, the FP32 pointer kernels of step 10 (A and B
/// as they are, or the transposed instances), step 15's skinny kernel (C
/// of one row), step 16's matrix-vector kernel (C of one column), step
/// 28's decode kernel (B transposed, few rows of A) and step 30's (the
/// same with a `cp.async` ring); with
/// [`Compute::Tf32x3`] also the 3xTF32 kernels (steps 23 and 24, A and B
/// as they are), and with [`Compute::Tf32`] the TF32 tensor-core kernels
/// too (steps 11, 17 and 18); for BF16 and FP16, steps 19, 20 and 22
/// (Hopper's `wgmma`; steps 19 and 22 with A and B as they are, step 20
/// in every layout) and step 21 (`mma.sync`, every layout) of those
/// types; for FP8, steps 25-27 of the call's types and scales (the
/// model keeps step 25's, whose sums are not promoted, for calls that
/// allow fast accumulation; step 27, `mma.sync`, is what an Ada GPU
/// loads). (The caller keeps those its GPU can load.)
pub fn auto_candidates(
    ops: Ops,
    storage: Storage,
    compute: Compute,
) -> impl Iterator<Item = &'static KernelSpec> {
    registry::all().filter(move |k| {
        let steps = if storage == Storage::F32 {
            match k.elems.math {
                Math::Fp32 => {
                    matches!(k.step, 10 | 15 | 16 | 28 | 29 | 30)
                        && k.operands == Operands::Pointers
                }
                Math::Tf32x3 => matches!(k.step, 23 | 24),
                Math::Tf32 => matches!(k.step, 11 | 17 | 18),
                Math::Bf16 | Math::F16 | Math::Fp8 => false,
            }
        } else if storage.scaled() {
            matches!(k.step, 25..=27)
        } else {
            matches!(k.step, 19..=22)
        };
        steps
            && compute.allows(k.elems.math)
            && k.ops == ops
            && k.elems.storage() == storage
            && !registry::EXPERIMENTS.iter().any(|e| e.name == k.name)
    })
}

/// `Auto`'s rule, in two parts.
///
/// 1. **Measured.** When the GPU has a table (`table`, from `bench
///    --suite` on that model: [`table_for`]) with a call of the same
///    layouts, one product or many like this one, within [`TABLE_REACH`]
///    of it, the nearest such call's fastest kernel and split (the split
///    capped so that every slice has work).
/// 2. **Modelled** otherwise: the candidate and split that minimise a
///    model of the time on `sms` SMs, each candidate running
///    `blocks_per_sm` blocks per SM at its measured full-GPU rate
///    ([`FULL_RATE`]):
///    - one wave runs `sms * blocks_per_sm` blocks; a block's work takes
///      `2 * BM * BN * depth` flops at an SM's share of the rate
///      (`rate / sms`), where `depth` is K, or a slice of it with split-K;
///      the time is that of the busiest SM: `blocks_per_sm` blocks per
///      full wave, and `ceil(rest / sms)` for a last, partial wave, which
///      runs slower than a full one ([`Model::partial_wave`]); plus, per
///      wave, [`Model::wave_latency_s`], what a wave's blocks wait for
///      before and after their arithmetic, and [`Model::store_s_per_value`]
///      for each value of C a thread of a pointer kernel stores (both
///      favour the fewer waves of smaller, more resident tiles when K is
///      short), [`Model::scalar_store`] times that for a kernel that
///      stores one value at a time across rows (steps 15, 16 and 28, and
///      step 10 where C's rows do not start on 16 bytes);
///    - split-K (kernels that split K, `KernelSpec::splits_k`: the FP32
///      pointer kernels and steps 17-18; one product only, tiles that leave
///      SMs idle, K at least 512 and two slices) cuts K into 2, 4, ..
///      [`Model::max_split`] slices of at least [`Model::min_slice`] and
///      adds the reduction: its launch ([`Model::reduce_launch_s`]; none
///      for a kernel that splits inside its launch, [`in_launch`]), a
///      memory round trip per slice ([`Model::slice_s`]: for a small C
///      the pass lasts as long as its round trips) and its traffic, `slices * m * n` floats moved twice
///      at the GPU's DRAM bandwidth (`dram_gbs`; [`TMA_PLANES`] times that
///      for steps 17-18);
///    - no kernel runs faster than its DRAM traffic: A read once per
///      column of tiles, B once per row of tiles, C once (no reuse in L2
///      assumed; each element its stored type's bytes). This is what
///      rules step 16's one-column tiles out for a C of many columns and
///      in for a matrix-vector product; of two kernels the traffic bounds
///      alike, the one with the faster arithmetic wins;
///    - a call of one row of C (one column) where step 15 (16) can run
///      it: that kernel streams its operand at [`VECTOR_SM_GBS`] per SM
///      with [`VECTOR_BLOCKS_PER_SM`] blocks (at most the DRAM bandwidth), in the part of its
///      tile's width (height) the call fills, whatever its listed rate
///      (measured at 4096^3, where it rereads its operand); the TMA
///      kernels, whose tiles compute 128 or 256 rows (columns), do not
///      run it;
///    - a kernel whose grid CUDA cannot launch for the call, or that does
///      not take batches when the call is one, is skipped;
///    - a call with B transposed, at most [`DECODE_ROWS`] rows of A and K
///      of at least [`DECODE_MIN_K`] ([`DECODE_BATCH_MIN_K`] for a batch)
///      runs a decode kernel where it can (step 30's 8- or 16-row
///      instance for one product of at most [`STAGED_DECODE_ROWS`] rows,
///      step 28 otherwise): its traffic is the weight
///      once, while the bound above charges A once per column of tiles as
///      if A did not stay in L2; a single product's split is the least
///      power of two that gives every SM a block, within the split cap.
///      No other call runs it.
///
/// The measured table holds f32 calls: a 16-bit call is modelled.
///
/// So the shapes the suite measures get what was fastest there, and
/// others what the model predicts: the fastest kernel at full occupancy
/// for large problems, smaller tiles or a split when tiles would leave SMs
/// idle, a split only when the idle SMs cost more than the partial sums'
/// trips.
pub fn choose_with(
    plan: &Plan,
    candidates: &[Candidate],
    sms: usize,
    dram_gbs: f64,
    table: Option<&[AutoEntry]>,
) -> Option<Choice> {
    choose_with_model(&MODEL, plan, candidates, sms, dram_gbs, table)
}

/// [`choose_with`] with the model's constants `model` instead of
/// [`MODEL`]: what the bench's fit of them replays.
pub fn choose_with_model(
    model: &Model,
    plan: &Plan,
    candidates: &[Candidate],
    sms: usize,
    dram_gbs: f64,
    table: Option<&[AutoEntry]>,
) -> Option<Choice> {
    let p = &plan.params;
    let distance = |e: &AutoEntry| {
        let d = |a: usize, b: usize| ((a.max(1) as f64) / (b.max(1) as f64)).log2().abs();
        d(p.m as usize, e.m) + d(p.n as usize, e.n) + d(p.k as usize, e.k) + d(plan.batch, e.batch)
    };
    // The table was measured among the FP32 kernels: it answers FP32
    // calls only.
    let table = table.filter(|_| plan.compute == Compute::Fp32);
    let measured = table.into_iter().flatten().filter(|e| {
        e.ops == plan.ops.suffix()
            && (e.batch > 1) == (plan.batch > 1)
            && distance(e) <= TABLE_REACH
    });
    if let Some(e) = measured.min_by(|a, b| distance(a).total_cmp(&distance(b)))
        && let Some(c) = candidates.iter().find(|c| c.spec.name == e.kernel)
    {
        let most = if plan.batch == 1 {
            (p.k as usize / SLICE_ALIGN).max(1)
        } else {
            1
        };
        return Some(Choice {
            kernel: c.spec,
            split_k: e.split_k.clamp(1, most),
        });
    }
    choose_by(model, plan, candidates, sms, dram_gbs)
}

/// Part 2 of [`choose_with`]'s rule alone: the model, with [`MODEL`].
pub fn choose(plan: &Plan, candidates: &[Candidate], sms: usize, dram_gbs: f64) -> Option<Choice> {
    choose_by(&MODEL, plan, candidates, sms, dram_gbs)
}

/// The model with the constants `model`.
pub fn choose_by(
    model: &Model,
    plan: &Plan,
    candidates: &[Candidate],
    sms: usize,
    dram_gbs: f64,
) -> Option<Choice> {
    // A GPU reported with no SMs (or a caller's 0) counts as one.
    let sms = sms.max(1);
    let p = &plan.params;
    let (m, n, k) = (p.m as f64, p.n as f64, p.k as f64);
    let of_the_call = |c: &&Candidate| {
        plan.runs_on(c.spec)
            && c.spec.elems.storage() == plan.storage
            && (!plan.storage.scaled() || plan.fast_accumulation || c.spec.elems.promote_every > 0)
            && plan.compute.allows(c.spec.elems.math)
            && crate::launch::grid(c.spec, p.m as usize, p.n as usize, 1).is_ok()
    };
    let listed = |c: &&Candidate| full_rate(c.spec);
    let slowest = (candidates.iter().filter(of_the_call))
        .filter_map(|c| listed(&c))
        .fold(f64::INFINITY, f64::min);
    let slowest = if slowest.is_finite() {
        slowest
    } else {
        FULL_RATE.iter().map(|r| r.1).fold(f64::INFINITY, f64::min)
    };
    let bytes = |e: Elem| e.bytes() as f64;
    let (a_bytes, b_bytes, c_bytes) = (
        bytes(plan.storage.a),
        bytes(plan.storage.b),
        bytes(plan.storage.c),
    );
    // A decode call (B transposed, at most DECODE_ROWS rows of A, K deep
    // enough for its vector loop, deeper for a batch) goes to a decode
    // kernel where the call may run one: its DRAM traffic is the weight,
    // once, and A stays in L2, which the traffic below (A once per column
    // of tiles) does not see. Its split gives every SM a block (the bound
    // below assumes all SMs pull from DRAM, so it would keep too few
    // blocks for a narrow C). Other calls never get one: their rate is not
    // modelled, and on a short K step 28 lost to step 10. Which decode
    // kernel: a single product of at most STAGED_DECODE_ROWS rows runs
    // step 30's instance of the fewest rows that hold them (8 or 16),
    // others step 28 (step 30's 32-row instance and its rows of blocks
    // ran slower: docs/measurements.md, thirty-eighth session).
    let staged_rows = (p.m as usize).next_power_of_two().max(8);
    let staged = |c: &Candidate| {
        c.spec.step == 30
            && plan.batch == 1
            && (p.m as usize) <= STAGED_DECODE_ROWS
            && c.spec.launch.block_tile.0 == staged_rows
    };
    let has_staged = candidates.iter().filter(of_the_call).any(staged);
    let decode_kernel = |c: &Candidate| {
        if has_staged {
            staged(c)
        } else {
            c.spec.step == 28
        }
    };
    let decode = plan.ops == Ops::NT
        && (p.m as usize) <= DECODE_ROWS
        && (p.k as usize)
            >= if plan.batch == 1 {
                DECODE_MIN_K
            } else {
                DECODE_BATCH_MIN_K
            }
        && candidates.iter().filter(of_the_call).any(decode_kernel);
    // C's rows start on 16 bytes (each product's, in a batch): step 10
    // stores 128 bits at a time (`stores_single_values`).
    let per_16_bytes = (16 / plan.storage.c.bytes().max(1)) as u64;
    let rows_16 = u64::from(p.ldc).is_multiple_of(per_16_bytes)
        && (plan.batch == 1 || p.stride_c.is_multiple_of(per_16_bytes));
    // A call of one row (one column) of C, which step 15's row kernel
    // (step 16's one-column tiles) may run: it streams B (A) once, each
    // SM with a block at [`VECTOR_SM_GBS`], not at its listed rate (measured at 4096^3, where it rereads its
    // operand for every row). The TMA kernels do not run it: their tiles
    // of 128 or 256 rows (columns) computed the vector slower than steps
    // 15 and 16 (docs/measurements.md, forty-seventh session).
    let streams =
        |c: &Candidate| (c.spec.step == 15 && p.m == 1) || (c.spec.step == 16 && p.n == 1);
    let vector = candidates.iter().filter(of_the_call).any(streams);
    let mut best: Option<((f64, f64), Choice)> = None;
    for c in candidates.iter().filter(of_the_call).filter(|c| {
        if decode {
            decode_kernel(c)
        } else if vector {
            !matches!(c.spec.step, 28 | 30) && c.spec.operands == Operands::Pointers
        } else {
            !matches!(c.spec.step, 28 | 30)
        }
    }) {
        let (bm, bn) = c.spec.launch.block_tile;
        let rate = listed(&c).unwrap_or(slowest) * 1e9;
        let per_sm = c.blocks_per_sm.max(1) as f64;
        let (tiles_m, tiles_n) = ((p.m as usize).div_ceil(bm), (p.n as usize).div_ceil(bn));
        let tiles = tiles_m * tiles_n * plan.batch;
        // A 3xTF32 kernel reads two parts of each value.
        let parts = match c.spec.operands {
            Operands::TensorMaps(TmaBoxes {
                copy: TmaCopy::SplitTf32,
                ..
            }) => 2.0,
            _ => 1.0,
        };
        let traffic = plan.batch as f64
            * (parts * (a_bytes * m * k * tiles_n as f64 + b_bytes * k * n * tiles_m as f64)
                + c_bytes * m * n);
        let memory_s = traffic / (dram_gbs * 1e9);
        // The copies its launch makes first, once whatever the split.
        let copies = copies_s(c.spec, plan, dram_gbs);
        // Split-K: kernels that split K (`KernelSpec::splits_k`), one
        // product, tiles that leave SMs idle, K at least 512 and two
        // slices; powers of two (what the bench times, so that the model's
        // choices can be replayed on its runs), each slice at least
        // `min_slice` deep.
        let splits = c.spec.splits_k()
            && plan.batch == 1
            && tiles < sms
            && p.k >= 512
            && p.k as usize >= 2 * model.min_slice.max(1);
        // A power of two (the loop below visits no other), so that the
        // decode split, capped by it, is one the loop visits.
        let max_split = if splits {
            let most = (p.k as usize / model.min_slice.max(1)).clamp(1, model.max_split.max(1));
            1 << most.ilog2()
        } else {
            1
        };
        let decode_split = sms
            .div_ceil(tiles.max(1))
            .next_power_of_two()
            .min(max_split);
        for split in (0..).map(|e| 1usize << e).take_while(|&s| s <= max_split) {
            if decode && split != decode_split {
                continue;
            }
            let depth = (k / split as f64).ceil();
            // One block's work at an SM's share of the full-GPU rate;
            // full waves put `per_sm` blocks on every SM, the last one
            // `ceil(rest / sms)` on the busiest, which with fewer blocks
            // than it holds runs slower: at `(resident / per_sm) ^
            // partial_wave` of its full rate.
            let block_s = 2.0 * (bm * bn) as f64 * depth / (rate / sms as f64);
            let (blocks, slots) = (tiles * split, sms * per_sm as usize);
            let last = (blocks % slots).div_ceil(sms) as f64;
            let last_wave = if last > 0.0 {
                last / (last / per_sm).powf(model.partial_wave)
            } else {
                0.0
            };
            let on_busiest = (blocks / slots) as f64 * per_sm + last_wave;
            // A kernel that splits inside its launch (`in_launch`) adds
            // the planes' traffic, not the reduction's launch.
            let reduce_launch_s = if in_launch(c.spec, *p) {
                0.0
            } else {
                model.reduce_launch_s
            };
            // A TMA kernel's threads store its partial sums one value at
            // a time across rows (step 12's epilogue): its planes cost
            // `TMA_PLANES` times their traffic.
            let planes = match c.spec.operands {
                Operands::Pointers => 1.0,
                Operands::TensorMaps(_) => TMA_PLANES,
            };
            let reduce_s = if split > 1 {
                planes * 2.0 * 4.0 * split as f64 * m * n / (dram_gbs * 1e9)
                    + reduce_launch_s
                    + split as f64 * model.slice_s
            } else {
                0.0
            };
            let waves = blocks.div_ceil(slots) as f64;
            // Fitted on the FP32 kernels, whose threads store C; the TMA
            // kernels' copy engine stores it as their next tile runs.
            let per_thread = if c.spec.operands == Operands::Pointers {
                let scattered = if stores_single_values(c.spec, rows_16) {
                    model.scalar_store
                } else {
                    1.0
                };
                scattered * (bm * bn) as f64 / c.spec.launch.threads() as f64
            } else {
                0.0
            };
            let compute_s = if streams(c) {
                // Each SM with VECTOR_BLOCKS_PER_SM blocks streams at
                // VECTOR_SM_GBS (fewer blocks, their part of it), in the
                // part of the tile's width (height) the call fills.
                let busy = (blocks as f64 / VECTOR_BLOCKS_PER_SM).min(sms as f64);
                let filled = if p.m == 1 {
                    n / (tiles_n * bn) as f64
                } else {
                    m / (tiles_m * bm) as f64
                };
                let gbs = (busy * VECTOR_SM_GBS).min(dram_gbs);
                // Its one row (column) of C is stored as it goes.
                traffic / (gbs * 1e9 * filled) + waves * model.wave_latency_s
            } else {
                on_busiest * block_s
                    + waves * (model.wave_latency_s + per_thread * model.store_s_per_value)
            };
            // Ties (both bound by DRAM in the model) go to the faster
            // arithmetic.
            let t = (compute_s.max(memory_s) + reduce_s + copies, compute_s);
            if best.is_none_or(|(bt, _)| t < bt) {
                best = Some((
                    t,
                    Choice {
                        kernel: c.spec,
                        split_k: split,
                    },
                ));
            }
        }
    }
    best.map(|(_, c)| c)
}

/// Whether a pointer kernel stores C one value at a time across rows
/// for a call whose C rows start on 16 bytes or not (`rows_16`): steps
/// 15, 16, 28 and 30 always; step 10's tiles where the rows are off 16 bytes
/// (elsewhere 128 bits at a time: `Gemm::vec4_c`). Step 29 stores whole
/// 128-byte lines of a row either way, steps 11, 21 and 27 pairs.
fn stores_single_values(spec: &KernelSpec, rows_16: bool) -> bool {
    match spec.step {
        10 => !rows_16,
        15 | 16 | 28 | 30 => true,
        _ => false,
    }
}

/// A kernel's rate in [`FULL_RATE`]; a transposed instance of step 10
/// not listed there takes the rate of the same tile with A and B as they
/// are.
fn full_rate(spec: &KernelSpec) -> Option<f64> {
    let rate = |name: &str| FULL_RATE.iter().find(|r| r.0 == name).map(|r| r.1);
    rate(spec.name).or_else(|| {
        let untransposed = ["_tn", "_nt", "_tt"]
            .iter()
            .find_map(|suffix| spec.name.strip_suffix(suffix))?;
        (spec.step == 10).then(|| rate(untransposed)).flatten()
    })
}

/// The constants of `Auto`'s model ([`choose_by`]), fitted by replaying
/// the model on recorded runs of the random suite: the best of the grid
/// in the bench's test `fit_auto_model` on seeds 1 to 4, judged on seeds
/// 5 and 6, held out (docs/random-suite/; docs/measurements.md,
/// thirty-fifth session). Where the fit ties, the launch is
/// [`COPY_LAUNCH_S`] and the rest the grid's first. (The twenty-fifth
/// session's four constants gave 0.756x cuBLAS on seed 1 and 0.762x on
/// seed 2, held out, on that session's kernels.)
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Model {
    /// What the model adds per wave of blocks: the latency a wave waits
    /// out around its arithmetic (first loads, last stores), in seconds.
    pub wave_latency_s: f64,
    /// The most slices it cuts K into (a power of two).
    pub max_split: usize,
    /// How a last wave that leaves an SM part-filled runs: `r` of the
    /// `per_sm` blocks an SM holds run at `(r / per_sm) ^ partial_wave`
    /// of the SM's full rate. 0: at the full rate, as if one block could
    /// keep an SM busy; 1: each block at its share of a full SM.
    pub partial_wave: f64,
    /// What each wave adds per value of C a thread stores (`BM * BN /
    /// threads`), in seconds: a thread's stores go out one after another
    /// at the end of its block, so a tile with more values per thread
    /// takes longer to leave, whatever K (what ranks the tiles when K is
    /// short). Kernels whose C leaves by TMA (`Operands::TensorMaps`) do
    /// not pay it.
    pub store_s_per_value: f64,
    /// What a split adds besides the partial sums' traffic, once: the
    /// reduction's own launch, which waits for the last slice, in seconds.
    pub reduce_launch_s: f64,
    /// What a split adds per slice, in seconds: the reduction
    /// (`reduce_slices`) adds the slices in memory round trips, so for a
    /// small C the pass lasts as long as its trips, not its traffic; and
    /// each slice's blocks store their partial tile before the reduction
    /// can start. Fitted at 0.8 us on runs whose reduction made one trip
    /// per slice; at 0 on runs since its 8 warps each make one per eighth
    /// slice (docs/measurements.md, thirty-third session).
    pub slice_s: f64,
    /// The least depth of K a slice gets: split-K needs K of at least two
    /// of them (and at least 512, below which a split has not paid). 256
    /// left a few tiles over K of 1000 to 4000 with too few slices to
    /// fill the SMs (the random suite's seed 1, r5 and r10, fastest at
    /// slices of 128 to 225).
    pub min_slice: usize,
    /// How many times [`Model::store_s_per_value`] a value of C costs a
    /// kernel that stores one value at a time across rows
    /// ([`stores_single_values`]: steps 15, 16 and 28, and step 10 where
    /// C's rows do not start on 16 bytes, `ldc` times the stored type's
    /// bytes, or a batch's stride of C, not a multiple of 16): each warp's
    /// store touches a few bytes of many rows, where a 128-bit store
    /// writes 16 bytes of each. Step 29, whose warps store whole 128-byte
    /// lines of a row either way, does not pay it.
    pub scalar_store: f64,
}

/// The model `Auto` uses.
pub const MODEL: Model = Model {
    wave_latency_s: 1e-6,
    max_split: 64,
    partial_wave: 0.75,
    store_s_per_value: 150e-9,
    reduce_launch_s: COPY_LAUNCH_S,
    slice_s: 0.0,
    min_slice: 64,
    scalar_store: 2.0,
};

/// The most rows of A for which `Auto`'s model sends a call with B
/// transposed to step 28 (`decode_nt_8x16`, three rows of its blocks,
/// which read the weight's slices together from L2): up to 24 rows it
/// ran faster than step 10's best, at 32 rows step 10's 32 x 64 tile
/// with a split won (measured on an H100: docs/measurements.md,
/// thirty-sixth session).
pub const DECODE_ROWS: usize = 24;

/// The most rows of A for which a single decode call runs step 30 (the
/// weight through a `cp.async` ring) instead of step 28: on an H100 up
/// to 16 rows ran faster on it than on step 28 and cuBLAS SGEMM, and at
/// 21 and 24 rows step 28 was the faster (docs/measurements.md,
/// thirty-eighth session).
pub const STAGED_DECODE_ROWS: usize = 16;

/// The least K for which it does: one round of step 28's vector loop
/// (128 of K). Below, it runs its scalar loop alone, which lost to step 10
/// on the random suite's 2 x 7812 x 72 (batch 7) and tied on 3 x 2019 x 8
/// (docs/measurements.md, twenty-third session).
pub const DECODE_MIN_K: usize = 128;

/// The least K for which a batch of such calls runs step 28 (no split
/// fills the SMs, the batch does): in the random suites, batches with K
/// of 174 (seed 1, 12 products) and 281 (seed 6, 2) ran faster on step
/// 10, one with K of 376 (seed 3, 2 products) 13 % faster on step 28, and
/// 28 products of 14 x 97 x 8283 (seed 6) 3.6x faster (docs/measurements.md,
/// thirty-fifth session).
pub const DECODE_BATCH_MIN_K: usize = 320;

/// How many times their DRAM traffic the partial sums of a TMA kernel
/// that splits K (steps 17-18) cost in `Auto`'s model: on an H100 at
/// 1024^3 their splits in 2 and 4 cost 4-5 and 9 µs more than the
/// model's launch and traffic (5 and 10 µs), about the traffic again
/// (docs/measurements.md, forty-sixth session). Their threads store the
/// planes one value at a time across rows, not 128 bits along one.
pub const TMA_PLANES: f64 = 2.0;

/// How fast one SM with a block of step 15's row kernel (step 16's
/// one-column tiles) streams a call of one row (column) of C in `Auto`'s
/// model, in GB/s, the GPU's DRAM bandwidth at most: about 2.4 TB/s on
/// 132 SMs, what they reached on the H200 (4.8 TB/s: `skinny_1x512`
/// 2.2 TB/s at 1 x 4096 x 4096, `gemv_warp_8x1` 2.5 at 4096 x 1 x 4096,
/// docs/suite.json) and on the H100 (3.35 TB/s: `skinny_1x512` 2.5 at 1 x
/// 7766 x 12120, docs/random-suite/seed5.json). Their blocks' loads in
/// flight, not DRAM, bound them.
pub const VECTOR_SM_GBS: f64 = 18.0;

/// How many blocks of those kernels an SM needs for [`VECTOR_SM_GBS`]:
/// the fastest splits of the recorded vector calls gave 512 to 544
/// blocks to 132 SMs (`skinny_1x512` split 64 at 1 x 4096 x 4096 and
/// split 32 at 1 x 7766 x 12120, `gemv_warp_8x1` unsplit at 4096 x 1 x
/// 4096 and split 8 at 537 x 1 x 4508); with half to a quarter of them
/// their splits ran 3-40 % slower.
pub const VECTOR_BLOCKS_PER_SM: f64 = 4.0;

/// What `Auto`'s model adds for each copy a launch makes before its
/// kernel: about a launch's latency.
pub const COPY_LAUNCH_S: f64 = 4e-6;

/// The model's time for the copies a kernel's launch makes of A and B at
/// every shape (`TmaCopy`; the padding copies of odd shapes are left
/// out): step 17's B^T (and A from A^T), read and written once; 3xTF32's split A and B^T,
/// read once and written twice (two TF32 parts of each value); at the
/// GPU's DRAM bandwidth, plus [`COPY_LAUNCH_S`] per copy.
fn copies_s(spec: &KernelSpec, plan: &Plan, dram_gbs: f64) -> f64 {
    let Operands::TensorMaps(TmaBoxes { copy, .. }) = spec.operands else {
        return 0.0;
    };
    let p = &plan.params;
    let (a, b) = (p.m as f64 * p.k as f64, p.k as f64 * p.n as f64);
    let bytes = |v: f64| 4.0 * v * plan.batch as f64;
    let (moved, launches) = match copy {
        TmaCopy::AsStored => (0.0, 0.0),
        TmaCopy::Transposed { a: ta, b: tb } => {
            let (ta, tb) = (f64::from(u8::from(ta)), f64::from(u8::from(tb)));
            (bytes(2.0 * (ta * a + tb * b)), ta + tb)
        }
        TmaCopy::SplitTf32 => (bytes(3.0 * (a + b)), 2.0),
    };
    moved / (dram_gbs * 1e9) + launches * COPY_LAUNCH_S
}

/// Slices of K start on multiples of this many elements: a multiple of
/// every kernel's BK (8, 16 or 32), so that every slice but the last is
/// whole K tiles and keeps A's rows 16-byte aligned.
pub const SLICE_ALIGN: usize = 32;

/// The depth of one slice when K is cut into `split` slices (a multiple
/// of [`SLICE_ALIGN`]), and the number of slices that really take work.
pub fn slices(k: u32, split: usize) -> (u32, usize) {
    let k_slice = (k as usize)
        .div_ceil(split.max(1))
        .next_multiple_of(SLICE_ALIGN);
    (k_slice as u32, (k as usize).div_ceil(k_slice))
}

/// A loaded kernel and its occupancy.
struct Loaded {
    kernel: Kernel,
    blocks_per_sm: usize,
}

/// The kernel the caller named (`Algorithm::Kernel`), checked against
/// the call: known, reading the call's layouts, taking the stored types
/// of the call's buffers (a kernel of other types is refused with both
/// named), and the split asked for. No GPU needed.
pub fn choose_named(plan: &Plan, name: &str, split_k: usize) -> Result<Choice, GemmError> {
    let spec = registry::find(name)
        .filter(|s| s.name != REDUCE.name)
        .ok_or_else(|| GemmError::UnknownKernel {
            name: name.to_string(),
        })?;
    let unsupported = |why: String| GemmError::KernelUnsupported {
        kernel: name.to_string(),
        why,
    };
    if spec.elems.storage() != plan.storage {
        return Err(unsupported(format!(
            "it takes {} and the call's buffers hold {}; name a kernel of the call's types",
            spec.elems.storage(),
            plan.storage
        )));
    }
    if plan.read_as(spec).is_none() {
        return Err(unsupported(format!(
            "it reads A {:?} and B {:?}, the call (row-major) has A {:?} and B {:?}",
            spec.ops.a, spec.ops.b, plan.ops.a, plan.ops.b
        )));
    }
    if split_k == 0 {
        return Err(GemmError::BadSplit {
            split_k: 0,
            why: "at least 1 slice (1: no split)".into(),
        });
    }
    if split_k > 1 {
        if plan.batch > 1 {
            return Err(GemmError::BadSplit {
                split_k,
                why: "split-K takes one product per call (batch = 1)".into(),
            });
        }
        if !spec.splits_k() {
            return Err(GemmError::BadSplit {
                split_k,
                why: format!(
                    "{} does not split K (the FP32 pointer kernels and the TF32 kernels of \
                     steps 17-18 do)",
                    spec.name
                ),
            });
        }
        if split_k > plan.params.k as usize {
            return Err(GemmError::BadSplit {
                split_k,
                why: format!("more slices than k = {}", plan.params.k),
            });
        }
    }
    if let Some(why) = spec.unsupported(&plan.params, plan.batch) {
        return Err(unsupported(why));
    }
    // CUDA's grid limits (split-K's slices are the grid's z).
    let (m, n) = (plan.params.m as usize, plan.params.n as usize);
    crate::launch::grid(spec, m, n, plan.batch.max(split_k))?;
    Ok(Choice {
        kernel: spec,
        split_k,
    })
}

/// `Auto`'s candidates for one stored type and layout, shared.
type Candidates = Arc<Vec<Candidate>>;

/// A handle on one GPU stream: its kernels, loaded once, and split-K's
/// workspace. Calls through one handle run in order on its stream; the
/// handle may be shared between threads (`Sync`), and
/// [`Sgemm::on_stream`] gives a handle on another stream that shares
/// what this one loaded.
///
/// # CUDA graphs
///
/// A call can be captured into a CUDA graph (`CudaStream::begin_capture`
/// on the handle's stream) and replayed: inside a capture the handle
/// allocates nothing and synchronizes nothing, so what a captured call
/// needs must exist before the capture:
///
/// - make each call once outside the capture, on the buffers it will be
///   captured with (this loads its kernel and, for a TMA kernel, makes
///   its tensor maps and any padded copies of A and B);
/// - or, for split-K's workspace alone, [`Sgemm::reserve_workspace`] with
///   [`Sgemm::workspace_for`] of the call.
///
/// A call that would allocate inside a capture fails with
/// `HostError::AllocatingInCapture`, having enqueued no GEMM (at most
/// the copies into the handle's padded buffers, never a write to the
/// caller's): end the capture and discard its graph. Buffers a
/// capture used are never freed while the handle lives (a later, larger
/// workspace or padded copy is new memory), so a graph may be replayed
/// as long as the handle and the call's own buffers live. A graph's
/// launches use the handle's workspace: replay it on the handle's
/// stream, in order with the handle's other calls. With cudarc's event
/// tracking on, cudarc makes the capture wait on events recorded outside
/// it; capture on a context with event tracking off
/// (`CudaContext::disable_event_tracking`), as cudarc's graph tests do.
pub struct Sgemm {
    gpu: Gpu,
    /// What every handle made from this one by [`Sgemm::on_stream`]
    /// shares.
    loaded: Arc<LoadedKernels>,
    /// Split-K's partial sums and the quantizer's tile amaxes: per
    /// handle, so per stream.
    workspace: Mutex<Workspace>,
}

/// The kernels a handle and its [`Sgemm::on_stream`] handles loaded.
struct LoadedKernels {
    kernels: Mutex<HashMap<&'static str, Arc<Loaded>>>,
    /// The quantizer's entries, found on first use.
    quantizers: Mutex<HashMap<&'static str, CudaFunction>>,
    /// `Auto`'s candidates with their occupancy, per stored types, layout
    /// and compute mode, loaded by the first call of each (loading a
    /// kernel loads its module: SASS, or PTX the driver compiles).
    candidates: Mutex<HashMap<(Storage, Ops, Compute), Candidates>>,
    /// `Auto`'s measured choices for this GPU model, if the repository
    /// has them.
    table: Option<Vec<AutoEntry>>,
    /// `Auto`'s choices of the calls seen so far (at most
    /// [`CHOICES_KEPT`]; all forgotten when full).
    choices: Mutex<HashMap<PlanKey, Choice>>,
}

/// How many of `Auto`'s choices a handle keeps: a program's calls come in
/// a few shapes, repeated (a model's layers, step after step); one that
/// draws shapes at random starts over after this many.
const CHOICES_KEPT: usize = 4096;

/// Everything of a [`Plan`] that `Auto`'s choice depends on, hashable
/// (the scalars as their bits).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct PlanKey {
    dims: [u32; 10],
    strides: [u64; 3],
    ops: Ops,
    batch: usize,
    swapped: bool,
    storage: Storage,
    compute: Compute,
    fast_accumulation: bool,
}

impl PlanKey {
    fn of(plan: &Plan) -> Self {
        let p = &plan.params;
        Self {
            dims: [
                p.m,
                p.n,
                p.k,
                p.lda,
                p.ldb,
                p.ldc,
                p.alpha.to_bits(),
                p.beta.to_bits(),
                p.k_slice,
                p.slices,
            ],
            strides: [p.stride_a, p.stride_b, p.stride_c],
            ops: plan.ops,
            batch: plan.batch,
            swapped: plan.swapped,
            storage: plan.storage,
            compute: plan.compute,
            fast_accumulation: plan.fast_accumulation,
        }
    }
}

/// A handle's workspace.
#[derive(Default)]
struct Workspace {
    buffer: Option<CudaSlice<f32>>,
    /// The tile counters of split-K inside one launch
    /// (`kernels_gpu::split::MAX_TILES` of them, zeroed once: every launch
    /// leaves them at zero), made with the first workspace and kept.
    counters: Option<CudaSlice<u32>>,
    /// Whether a CUDA graph capture used `buffer` (then it is never
    /// freed: a larger one is new memory, and this one is kept).
    captured: bool,
    retired: Vec<CudaSlice<f32>>,
}

impl Sgemm {
    /// A handle that enqueues on `stream`. Loads no kernel: the first call
    /// of a kind (stored types, layout, compute mode) loads the kernels
    /// `Auto` chooses among for it, and a kernel named in a call loads its
    /// module then. A module loads its shipped SASS where the GPU has one
    /// (milliseconds), else its PTX, which the driver compiles (seconds
    /// the first time on a machine, then from the driver's cache).
    pub fn new(stream: Arc<CudaStream>) -> Result<Self, GemmError> {
        let gpu = Gpu::for_stream(stream)?;
        let table = table_for(&gpu.info.name);
        // Nothing is loaded here: each call loads the kernels it may choose
        // among the first time one of its kind comes.
        Ok(Self {
            gpu,
            loaded: Arc::new(LoadedKernels {
                kernels: Mutex::new(HashMap::new()),
                quantizers: Mutex::new(HashMap::new()),
                candidates: Mutex::new(HashMap::new()),
                table,
                choices: Mutex::new(HashMap::new()),
            }),
            workspace: Mutex::new(Workspace::default()),
        })
    }

    /// A handle that enqueues on `stream`, another stream of this
    /// handle's context, sharing the kernels this handle loaded and will
    /// load (nothing is loaded twice), with its own workspace. Cheap:
    /// make one per stream, and share each between threads. Calls on
    /// different streams run concurrently; a TMA kernel keeps its tensor
    /// maps and padded copies per stream, so they never race.
    pub fn on_stream(&self, stream: Arc<CudaStream>) -> Result<Self, GemmError> {
        Ok(Self {
            gpu: self.gpu.on_stream(stream)?,
            loaded: self.loaded.clone(),
            workspace: Mutex::new(Workspace::default()),
        })
    }

    /// `Auto`'s candidates for `storage` in layouts `ops` and mode
    /// `compute` that this GPU can run, loaded.
    fn load_candidates(
        &self,
        storage: Storage,
        ops: Ops,
        compute: Compute,
    ) -> Result<Vec<Candidate>, GemmError> {
        auto_candidates(ops, storage, compute)
            .filter(|k| self.gpu.runs(k))
            .map(|spec| {
                Ok(Candidate {
                    spec,
                    blocks_per_sm: self.loaded(spec)?.blocks_per_sm,
                })
            })
            .collect()
    }

    /// `Auto`'s candidates for a call of `storage` (a checked mix) and
    /// layouts `ops` in mode `compute`.
    fn candidates_for(
        &self,
        storage: Storage,
        ops: Ops,
        compute: Compute,
    ) -> Result<Candidates, GemmError> {
        // The mode chooses among f32 kernels only.
        let compute = if storage == Storage::F32 {
            compute
        } else {
            Compute::Fp32
        };
        let mut candidates = self
            .loaded
            .candidates
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(c) = candidates.get(&(storage, ops, compute)) {
            return Ok(c.clone());
        }
        let loaded = Arc::new(self.load_candidates(storage, ops, compute)?);
        candidates.insert((storage, ops, compute), loaded.clone());
        Ok(loaded)
    }

    /// The stream calls are enqueued on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.gpu.stream
    }

    /// What the GPU is (name, SMs, peaks), as the library read it.
    pub fn device(&self) -> &crate::gpu::DeviceInfo {
        &self.gpu.info
    }

    /// `Auto`'s f32 candidates (FP32 mode, every layout) and their
    /// occupancy on this GPU, loaded now if no call has loaded them.
    pub fn candidates(&self) -> Result<Vec<Candidate>, GemmError> {
        self.candidates_in(Compute::Fp32)
    }

    /// [`Sgemm::candidates`] in mode `compute`: what `Auto` chooses among
    /// for an f32 call that allows it (the TF32 kernels too in
    /// [`Compute::Tf32`]).
    pub fn candidates_in(&self, compute: Compute) -> Result<Vec<Candidate>, GemmError> {
        let mut all = Vec::new();
        for ops in [Ops::NN, Ops::TN, Ops::NT, Ops::TT] {
            all.extend(self.candidates_for(Storage::F32, ops, compute)?.iter());
        }
        Ok(all)
    }

    /// Whether `Auto` has measured choices for this GPU model.
    pub fn has_table(&self) -> bool {
        self.loaded.table.is_some()
    }

    /// Enqueues `C = alpha * op(A) * op(B) + beta * C` as `cfg` says, on
    /// the handle's stream, and returns what computed it. The element
    /// types are the buffers' ([`GemmElement`]: f32, or BF16 / FP16 A
    /// and B with C f32 or of their type). Nothing waits for the GPU; the
    /// buffers must stay alive until the stream has run the call
    /// (cudarc's buffers record the stream's use of them).
    pub fn gemm<TA, TB, TC, A, B, C>(
        &self,
        cfg: &GemmConfig,
        a: &A,
        b: &B,
        c: &mut C,
    ) -> Result<Choice, GemmError>
    where
        TA: GemmElement,
        TB: GemmElement,
        TC: GemmElement,
        A: DevicePtr<TA>,
        B: DevicePtr<TB>,
        C: DevicePtrMut<TC>,
    {
        self.gemm_fused(cfg, a, b, c, &Epilogue::<CudaSlice<f32>>::none())
    }

    /// [`Sgemm::gemm`] with a fused epilogue: `D = act(s * (alpha * op(A)
    /// op(B) + beta * C) + bias)` ([`Epilogue`]: a bias and scales per row
    /// or per column of C, f32, and an [`Activation`]), in the same
    /// launch as the product (with split-K, in the reduction, once).
    pub fn gemm_fused<TA, TB, TC, A, B, C, S>(
        &self,
        cfg: &GemmConfig,
        a: &A,
        b: &B,
        c: &mut C,
        epilogue: &Epilogue<'_, S>,
    ) -> Result<Choice, GemmError>
    where
        TA: GemmElement,
        TB: GemmElement,
        TC: GemmElement,
        A: DevicePtr<TA>,
        B: DevicePtr<TB>,
        C: DevicePtrMut<TC>,
        S: DevicePtr<f32>,
    {
        let storage = storage_of::<TA, TB, TC>();
        if storage.scaled() {
            check_types(storage)?;
            return Err(GemmError::MissingScales { storage });
        }
        let plan = plan_for(cfg, (a.len(), b.len(), c.len()), storage)?;
        check_epilogue(cfg, epilogue_lens(epilogue))?;
        let stream = &self.gpu.stream;
        let bias = epilogue.bias.map(|(v, per)| (v.device_ptr(stream), per));
        let scale = epilogue.scale.map(|(v, per)| (v.device_ptr(stream), per));
        let ep = epilogue_params(&plan, epilogue.activation, &bias, &scale);
        let plan = plan.folded(rows_vector(&ep));
        let choice = self.choice(&plan, &cfg.algorithm)?;
        // SAFETY: `plan` checked the buffers against the call,
        // `check_epilogue` the epilogue's vectors.
        unsafe { self.enqueue_on(&plan, choice, (a, b, c), ScaleParams::default(), ep) }?;
        Ok(choice)
    }

    /// [`Sgemm::gemm`] for FP8 A and B ([`Fp8Element`]) with their
    /// scales: `D = scale_d (alpha (scale_a A) (scale_b B) + beta C)`,
    /// cuBLASLt's FP8 matmul. A is stored m x k and B n x k, K contiguous
    /// in both (row-major with `op_b = Op::T`, or column-major with
    /// `op_a = Op::T`: FP8 `wgmma` reads K-major tiles only, any other
    /// layout is [`GemmError::Fp8Layout`]). [`Scales`] says what the
    /// scales are; block scales take row-major calls. `Auto` chooses a
    /// kernel that promotes its sums to f32 every 128 of K (on Hopper
    /// step 26: E4M3 A and B, C in BF16 or f32, per-tensor or block
    /// scales; step 27, `mma.sync`, for an FP16 C and the mixed pairs
    /// with per-tensor scales, and for all of these on Ada) unless the
    /// call allows fast accumulation, which adds step 25 on Hopper
    /// (per-tensor scales:
    /// E4M3 into BF16, FP16 or f32, E5M2 x E4M3 and E4M3 x E5M2 into
    /// BF16); a mix no kernel takes is a typed error.
    pub fn gemm_scaled<TA, TB, TC, A, B, C, S>(
        &self,
        cfg: &GemmConfig,
        a: &A,
        b: &B,
        c: &mut C,
        scales: &Scales<'_, S>,
    ) -> Result<Choice, GemmError>
    where
        TA: GemmElement,
        TB: GemmElement,
        TC: GemmElement,
        A: DevicePtr<TA>,
        B: DevicePtr<TB>,
        C: DevicePtrMut<TC>,
        S: DevicePtr<f32>,
    {
        self.gemm_scaled_fused(cfg, a, b, c, scales, &Epilogue::<S>::none())
    }

    /// [`Sgemm::gemm_scaled`] with a fused [`Epilogue`] (as
    /// [`Sgemm::gemm_fused`]; `alpha` and `beta` include the scales).
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_scaled_fused<TA, TB, TC, A, B, C, S, V>(
        &self,
        cfg: &GemmConfig,
        a: &A,
        b: &B,
        c: &mut C,
        scales: &Scales<'_, S>,
        epilogue: &Epilogue<'_, V>,
    ) -> Result<Choice, GemmError>
    where
        TA: GemmElement,
        TB: GemmElement,
        TC: GemmElement,
        A: DevicePtr<TA>,
        B: DevicePtr<TB>,
        C: DevicePtrMut<TC>,
        S: DevicePtr<f32>,
        V: DevicePtr<f32>,
    {
        let storage = storage_of::<TA, TB, TC>();
        if !storage.scaled() {
            return Err(GemmError::UnexpectedScales { storage });
        }
        if scales.scaling == Scaling::None {
            return Err(GemmError::ScalingNone);
        }
        let storage = storage.with_scaling(scales.scaling);
        let plan = plan_for(cfg, (a.len(), b.len(), c.len()), storage)?;
        let lens = (scales.a.len(), scales.b.len(), scales.d.map(|d| d.len()));
        check_scales(cfg, scales.scaling, lens)?;
        check_epilogue(cfg, epilogue_lens(epilogue))?;
        let stream = &self.gpu.stream;
        let bias = epilogue.bias.map(|(v, per)| (v.device_ptr(stream), per));
        let scale = epilogue.scale.map(|(v, per)| (v.device_ptr(stream), per));
        let ep = epilogue_params(&plan, epilogue.activation, &bias, &scale);
        let plan = plan.folded(rows_vector(&ep));
        let choice = self.choice(&plan, &cfg.algorithm)?;
        let (sa, _sa_sync) = scales.a.device_ptr(stream);
        let (sb, _sb_sync) = scales.b.device_ptr(stream);
        let d = scales.d.map(|d| d.device_ptr(stream));
        // A column-major call swaps A and B (per-tensor scales only:
        // `check_scales`).
        let (sa, sb) = if plan.swapped { (sb, sa) } else { (sa, sb) };
        check_scale_alignment(scales.scaling, sa, sb)?;
        let params = ScaleParams {
            a: sa,
            b: sb,
            d: d.as_ref().map_or(0, |(ptr, _)| *ptr),
        };
        // SAFETY: `plan` checked the buffers against the call,
        // `check_scales` the scales' buffers against the call's scaling,
        // `check_epilogue` the epilogue's vectors.
        unsafe { self.enqueue_on(&plan, choice, (a, b, c), params, ep) }?;
        Ok(choice)
    }

    /// Enqueues `plan` as `choice` on the caller's buffers (A and B
    /// swapped for a column-major call).
    ///
    /// # Safety
    /// `plan` was made for these buffers by [`plan_for`], each non-zero
    /// address of `scales` holds the scales the choice reads, and the
    /// vectors `epilogue` names hold `m` or `n` f32s of the plan.
    unsafe fn enqueue_on<TA, TB, TC, A, B, C>(
        &self,
        plan: &Plan,
        choice: Choice,
        (a, b, c): (&A, &B, &mut C),
        scales: ScaleParams,
        epilogue: EpilogueParams,
    ) -> Result<(), GemmError>
    where
        TA: GemmElement,
        TB: GemmElement,
        TC: GemmElement,
        A: DevicePtr<TA>,
        B: DevicePtr<TB>,
        C: DevicePtrMut<TC>,
    {
        let stream = &self.gpu.stream;
        let (a_ptr, _a_sync) = a.device_ptr(stream);
        let (b_ptr, _b_sync) = b.device_ptr(stream);
        let (c_ptr, _c_sync) = c.device_ptr_mut(stream);
        let (a_ptr, b_ptr) = if plan.swapped {
            (b_ptr, a_ptr)
        } else {
            (a_ptr, b_ptr)
        };
        // SAFETY: `plan` checked that each buffer holds every matrix of
        // the batch at the leading dimensions and strides of the call,
        // and that the products' Cs do not overlap; A and B are shared
        // borrows and C an exclusive one, so C overlaps neither; the
        // guards above keep cudarc's stream ordering until the launches
        // are enqueued; the scales and the epilogue are the caller's word.
        unsafe { self.enqueue(plan, choice, (a_ptr, b_ptr, c_ptr), scales, epilogue) }
    }

    /// Enqueues the quantization of a `cfg.rows x cfg.cols` matrix `src`
    /// (f32, BF16 or FP16, rows `cfg.ld` apart) to FP8 (`dst`, dense:
    /// rows `cols` apart) with its scales (`scales`:
    /// [`Quantize::scales`] f32s, each `amax / MAX` of its block, 1 for a
    /// block of zeros), on the handle's stream: what
    /// [`Sgemm::gemm_scaled`] takes. Deterministic. A per-tensor
    /// quantization takes three launches and the handle's workspace (one
    /// f32 per 128 x 128 tile); block scales one launch.
    /// [`Quantize::Rows`] makes A's block scales (`rows = m`, `cols = k`),
    /// [`Quantize::Tiles`] B's (B stored n x k: `rows = n`, `cols = k`).
    /// An infinity or NaN in a block makes its scale non-finite, and the
    /// products it enters NaN.
    pub fn quantize<T, Q, S, D, O>(
        &self,
        cfg: &QuantConfig,
        src: &S,
        dst: &mut D,
        scales: &mut O,
    ) -> Result<(), GemmError>
    where
        T: QuantSource,
        Q: Fp8Element,
        S: DevicePtr<T>,
        D: DevicePtrMut<Q>,
        O: DevicePtrMut<f32>,
    {
        cfg.check((src.len(), dst.len(), scales.len()))?;
        let gpu = &self.gpu;
        let partials = match cfg.how {
            Quantize::Tensor => QuantStep::partials(cfg.rows, cfg.cols),
            _ => 0,
        };
        let mut workspace = self.workspace(partials)?;
        let (w, _w_sync) = match workspace.buffer.as_mut() {
            Some(ws) if partials > 0 => {
                let (ptr, sync) = ws.device_ptr_mut(&gpu.stream);
                (ptr, Some(sync))
            }
            _ => (0, None),
        };
        let (src_ptr, _s_sync) = src.device_ptr(&gpu.stream);
        let (dst_ptr, _d_sync) = dst.device_ptr_mut(&gpu.stream);
        let (scales_ptr, _o_sync) = scales.device_ptr_mut(&gpu.stream);
        let call = crate::quant::QuantCall {
            src: (src_ptr, T::ELEM),
            dst: (dst_ptr, Q::ELEM),
            scales: scales_ptr,
            workspace: w,
            rows: cfg.rows,
            cols: cfg.cols,
            ld: cfg.ld,
            how: cfg.how,
        };
        let mut found = self
            .loaded
            .quantizers
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let function = |name: &'static str| match found.get(name) {
            Some(f) => Ok(f.clone()),
            None => {
                let f = crate::quant::function(gpu, name)?;
                found.insert(name, f.clone());
                Ok(f)
            }
        };
        // SAFETY: `cfg.check` checked the buffers' lengths against the
        // call; `dst` and `scales` are exclusive borrows, the workspace
        // the handle's, sized above.
        unsafe { crate::quant::enqueue(gpu, &call, function) }?;
        Ok(())
    }

    /// The handle's workspace, at least `floats` long, locked: allocated
    /// or grown here and kept for later calls; inside a CUDA graph
    /// capture it must already be that long (nothing is allocated there).
    fn workspace(&self, floats: usize) -> Result<std::sync::MutexGuard<'_, Workspace>, GemmError> {
        let mut ws = self.workspace.lock().unwrap_or_else(|e| e.into_inner());
        if floats == 0 {
            return Ok(ws);
        }
        let capturing = self.gpu.capturing()?;
        if ws.counters.is_none() {
            if capturing {
                return Err(HostError::AllocatingInCapture {
                    what: "split-K's tile counters (reserve the workspace before the capture)"
                        .into(),
                }
                .into());
            }
            let zeros = (self.gpu.stream)
                .alloc_zeros::<u32>(kernels_gpu::split::MAX_TILES)
                .map_err(HostError::cuda("allocating split-K's tile counters"))?;
            ws.counters = Some(zeros);
        }
        if ws.buffer.as_ref().is_none_or(|w| w.len() < floats) {
            if capturing {
                return Err(HostError::AllocatingInCapture {
                    what: format!(
                        "a workspace of {floats} floats (split-K's partial sums, or a \
                         quantization's amaxes)"
                    ),
                }
                .into());
            }
            // A graph may still read the old one: keep it.
            let ws = &mut *ws;
            if std::mem::take(&mut ws.captured) {
                ws.retired.extend(ws.buffer.take());
            }
            ws.buffer = None;
            // SAFETY: every launch that reads the workspace reads only
            // what a launch before it on the stream wrote.
            let fresh = unsafe { self.gpu.stream.alloc::<f32>(floats) }
                .map_err(HostError::cuda("allocating the handle's workspace"))?;
            ws.buffer = Some(fresh);
        }
        ws.captured |= capturing;
        Ok(ws)
    }

    /// Makes the handle's workspace at least `floats` long now (see
    /// [`Sgemm::workspace_for`]), so that calls that need up to that much
    /// allocate nothing: what a CUDA graph capture of a split-K call
    /// needs. The workspace is kept for later calls, and only grows.
    pub fn reserve_workspace(&self, floats: usize) -> Result<(), GemmError> {
        self.workspace(floats).map(|_| ())
    }

    /// The workspace (floats) a call of `cfg` on buffers of `lens`
    /// elements that store `storage` needs, as `Auto` or the named
    /// kernel would compute it on this GPU: split-K's partial sums, 0 for
    /// a call that does not split K. Loads the call's candidates (or
    /// kernel) if no call has.
    pub fn workspace_for(
        &self,
        cfg: &GemmConfig,
        lens: (usize, usize, usize),
        storage: Storage,
    ) -> Result<usize, GemmError> {
        let (plan, choice) = self.planned(cfg, lens, storage)?;
        Ok(steps(&plan, choice).workspace)
    }

    /// What would compute a call of `cfg` on f32 buffers of `lens`
    /// elements.
    pub fn choose(
        &self,
        cfg: &GemmConfig,
        lens: (usize, usize, usize),
    ) -> Result<Choice, GemmError> {
        self.choose_for(cfg, lens, Storage::F32)
    }

    /// What would compute a call of `cfg` on buffers of `lens` elements
    /// that store `storage`.
    pub fn choose_for(
        &self,
        cfg: &GemmConfig,
        lens: (usize, usize, usize),
        storage: Storage,
    ) -> Result<Choice, GemmError> {
        self.planned(cfg, lens, storage).map(|(_, choice)| choice)
    }

    /// The plan of a call of `cfg` on buffers of `lens` elements that
    /// store `storage`, and what would compute it.
    fn planned(
        &self,
        cfg: &GemmConfig,
        lens: (usize, usize, usize),
        storage: Storage,
    ) -> Result<(Plan, Choice), GemmError> {
        let plan = plan_for(cfg, lens, storage)?.folded(false);
        let choice = self.choice(&plan, &cfg.algorithm)?;
        Ok((plan, choice))
    }

    fn choice(&self, plan: &Plan, algorithm: &Algorithm) -> Result<Choice, GemmError> {
        match algorithm {
            Algorithm::Auto => {
                let key = PlanKey::of(plan);
                let choices = || (self.loaded.choices.lock()).unwrap_or_else(|e| e.into_inner());
                if let Some(&choice) = choices().get(&key) {
                    return Ok(choice);
                }
                let choice = self.choose_auto(plan)?;
                let mut kept = choices();
                if kept.len() >= CHOICES_KEPT {
                    kept.clear();
                }
                kept.insert(key, choice);
                Ok(choice)
            }
            Algorithm::Kernel { name, split_k } => choose_named(plan, name, *split_k),
        }
    }

    /// `Auto`'s choice for `plan`, from the model (and the measured
    /// table, for f32 calls).
    fn choose_auto(&self, plan: &Plan) -> Result<Choice, GemmError> {
        let dram = self.gpu.info.peak_dram_gbs().unwrap_or(1000.0);
        let sms = self.gpu.info.sms.max(1) as usize;
        // A vector of A or B may be read the other way round
        // (`Plan::read_as`): the candidates of every such layout.
        let own = self.candidates_for(plan.storage, plan.ops, plan.compute)?;
        let mut all;
        let candidates: &[Candidate] = if plan.layouts().nth(1).is_none() {
            &own
        } else {
            all = own.to_vec();
            for ops in plan.layouts().skip(1) {
                all.extend(self.candidates_for(plan.storage, ops, plan.compute)?.iter());
            }
            &all
        };
        // The measured table holds f32 calls only.
        let table = (self.loaded.table)
            .as_deref()
            .filter(|_| plan.storage == Storage::F32);
        choose_with(plan, candidates, sms, dram, table).ok_or_else(|| {
            let hint = if plan.storage.scaled() && !plan.fast_accumulation {
                " that promotes its sums (GemmConfig::fast_accumulation(true) allows \
                 step 25's, which do not)"
            } else {
                ""
            };
            GemmError::KernelUnsupported {
                kernel: "Auto".into(),
                why: format!(
                    "no kernel of {} for A {:?} and B {:?}{hint} loaded on this GPU",
                    plan.storage, plan.ops.a, plan.ops.b
                ),
            }
        })
    }

    /// The kernel `spec`, loaded on first use.
    fn loaded(&self, spec: &'static KernelSpec) -> Result<Arc<Loaded>, GemmError> {
        let mut kernels = self
            .loaded
            .kernels
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(k) = kernels.get(spec.name) {
            return Ok(k.clone());
        }
        let kernel = Kernel::load(&self.gpu, spec)?;
        let blocks_per_sm = kernel.blocks_per_sm()?;
        let loaded = Arc::new(Loaded {
            kernel,
            blocks_per_sm,
        });
        kernels.insert(spec.name, loaded.clone());
        Ok(loaded)
    }

    /// Enqueues `plan` as `choice` on the addresses `(a, b, c)` of the
    /// row-major problem.
    ///
    /// # Safety
    /// The addresses hold the matrices `plan` was checked against, C
    /// overlapping neither A nor B, alive until the stream has run the
    /// launches; `epilogue`'s vectors hold `m` or `n` f32s of the plan.
    unsafe fn enqueue(
        &self,
        plan: &Plan,
        choice: Choice,
        (a, b, c): (u64, u64, u64),
        scales: ScaleParams,
        epilogue: EpilogueParams,
    ) -> Result<(), GemmError> {
        let gpu = &self.gpu;
        let steps = steps(plan, choice);
        // Every plane split-K's reduction reads is written first by the
        // partial launch (each slice's C is its whole m x n plane).
        let mut workspace = self.workspace(steps.workspace)?;
        let workspace = &mut *workspace;
        let (w, _w_sync) = match workspace.buffer.as_mut() {
            Some(ws) if steps.workspace > 0 => {
                let (ptr, sync) = ws.device_ptr_mut(&gpu.stream);
                (ptr, Some(sync))
            }
            _ => (0, None),
        };
        // The tile counters of a split inside one launch: zeroed when
        // allocated, left at zero by every launch.
        let (counters, _c_sync) = match workspace.counters.as_mut() {
            Some(t) if steps.workspace > 0 => {
                let (ptr, sync) = t.device_ptr_mut(&gpu.stream);
                (ptr, Some(sync))
            }
            _ => (0, None),
        };
        let address = |buf: Buf| match buf {
            Buf::A => a,
            Buf::B => b,
            Buf::C => c,
            Buf::Workspace => w,
        };
        for step in steps.list() {
            let call = GemmCall {
                a: address(step.a),
                b: address(step.b),
                c: address(step.c),
                params: step.params,
                batch: step.batch,
                scales,
                epilogue: if step.fused {
                    epilogue
                } else {
                    EpilogueParams::NONE
                },
                split: step.in_launch.then_some(SplitParams {
                    workspace: w,
                    counters,
                }),
            };
            // SAFETY: `steps` keeps every launch inside the buffers the
            // plan checked and the workspace it sized (see `Step`); the
            // caller vouches for A, B and C.
            unsafe { self.loaded(step.spec)?.kernel.launch(gpu, &call)? };
        }
        Ok(())
    }
}

/// `C = alpha * (W[0] + W[1] + ... + W[slices - 1]) + beta * C` over a
/// row-major `rows x cols` C whose rows are `ldc` apart, W being `slices`
/// dense `rows x cols` planes: split-K's reduction (`reduce_slices`) on
/// planes the caller filled. Each element of C is added up in one fixed
/// order (plane order for up to 8 planes, `k14_split_k::reduce_slices`),
/// so the same planes give the same bits on every run.
/// [`crate::multi`] reduces a K split over devices with it: a column-major
/// C is the row-major C^T, rows and columns swapped.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlaneSum {
    pub rows: usize,
    pub cols: usize,
    pub ldc: usize,
    pub alpha: f32,
    pub beta: f32,
    pub slices: usize,
}

impl PlaneSum {
    /// The elements of W it reads and of C it reads or writes.
    pub fn lens(&self) -> (usize, usize) {
        let c = match self.rows {
            0 => 0,
            rows => (rows - 1) * self.ldc + self.cols,
        };
        (self.slices * self.rows * self.cols, c)
    }

    /// The launch's parameters, the sum checked as a call of its C's
    /// shape would be (dimensions, `ldc`, the sizes the kernel indexes
    /// in 32 bits).
    fn params(&self) -> Result<GemmParams, GemmError> {
        let cfg = GemmConfig::new(self.rows, self.cols, 1)
            .lds(1, self.cols, self.ldc)
            .scalars(self.alpha, self.beta);
        let planes = self
            .slices
            .saturating_mul(self.rows)
            .saturating_mul(self.cols);
        if planes > u32::MAX as usize {
            return Err(GemmError::TooLarge {
                arg: "slices",
                value: self.slices,
                why: "the planes span more than 2^32 elements, which the reduction indexes in 32 bits",
            });
        }
        let plan = plan(&cfg, cfg.buffer_lens())?;
        Ok(reduce_params(plan.params, self.slices))
    }

    /// Checks `w` and `c` (elements) against the sum.
    pub(crate) fn check(&self, (w, c): (usize, usize)) -> Result<GemmParams, GemmError> {
        let params = self.params()?;
        let (need_w, need_c) = self.lens();
        for (arg, len, needs) in [("w", w, need_w), ("c", c, need_c)] {
            if len < needs {
                return Err(GemmError::BufferTooSmall { arg, len, needs });
            }
        }
        Ok(params)
    }
}

/// The multi-device reductions' use of a handle (NCCL's K split).
#[cfg(feature = "nccl")]
impl Sgemm {
    /// Loads the kernel of [`Sgemm::sum_planes`] if no call has.
    pub(crate) fn load_sums(&self) -> Result<(), GemmError> {
        self.loaded(&REDUCE).map(|_| ())
    }

    /// Enqueues `sum` on the handle's stream: planes `w` into `c`.
    pub(crate) fn sum_planes<W, C>(&self, sum: &PlaneSum, w: &W, c: &mut C) -> Result<(), GemmError>
    where
        W: DevicePtr<f32>,
        C: DevicePtrMut<f32>,
    {
        let params = sum.check((w.len(), c.len()))?;
        let stream = &self.gpu.stream;
        let (w_ptr, _w_sync) = w.device_ptr(stream);
        let (c_ptr, _c_sync) = c.device_ptr_mut(stream);
        let call = GemmCall {
            a: w_ptr,
            b: w_ptr,
            c: c_ptr,
            params,
            batch: 1,
            scales: ScaleParams::default(),
            epilogue: EpilogueParams::NONE,
            split: None,
        };
        // SAFETY: `check` held W to `slices` dense planes and C to the
        // sum's rows at `ldc`; W is a shared borrow and C an exclusive
        // one, so they do not overlap; the guards keep cudarc's stream
        // ordering until the launch is enqueued.
        unsafe { self.loaded(&REDUCE)?.kernel.launch(&self.gpu, &call)? };
        Ok(())
    }
}

/// [`PlaneSum`] on the CPU emulator: C after the sum, or what the
/// emulator's checks found, as text.
pub fn emulate_sum(
    sum: &PlaneSum,
    w: &[f32],
    c: &[f32],
) -> Result<Result<Vec<f32>, String>, GemmError> {
    let params = sum.check((w.len(), c.len()))?;
    let body = REDUCE
        .emulated()
        .map_err(|why| GemmError::KernelUnsupported {
            kernel: REDUCE.name.into(),
            why: format!("the emulator cannot run it: {why}"),
        })?;
    let report = kernels_gpu::emu::run_fused(
        &REDUCE,
        body,
        &params,
        1,
        (w, w, c),
        &EmuScales::default(),
        &EmuEpilogue::default(),
    );
    Ok(if report.is_clean() {
        Ok(report.c)
    } else {
        Err(report.to_string())
    })
}

/// A buffer a launch of a call reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Buf {
    A,
    B,
    C,
    /// Split-K's partial sums, `slices` dense m x n planes.
    Workspace,
}

/// One launch of a call: the kernel, what it computes, on which buffers.
#[derive(Clone, Copy, Debug)]
pub struct Step {
    pub spec: &'static KernelSpec,
    pub params: GemmParams,
    pub batch: usize,
    pub a: Buf,
    pub b: Buf,
    pub c: Buf,
    /// Whether this launch applies the call's epilogue (all but split-K's
    /// partial sums).
    pub fused: bool,
    /// Split-K inside this launch (`kernels_gpu::split`): the kernel's
    /// split entry, `batch` slices of `params.k_slice` whose partial sums
    /// go to the workspace, added into C (`params`' ldc, alpha, beta) by
    /// the last block of each tile, with the epilogue.
    pub in_launch: bool,
}

/// The launches of a call, and the workspace they need (floats).
#[derive(Clone, Copy, Debug)]
pub struct Steps {
    steps: [Option<Step>; 2],
    pub workspace: usize,
}

impl Steps {
    pub fn list(&self) -> impl Iterator<Item = Step> + '_ {
        self.steps.iter().flatten().copied()
    }
}

/// The launches that compute `plan` as `choice`, in order. The GPU
/// enqueues them ([`Sgemm::gemm`]); [`emulate`] runs them on the CPU.
///
/// - `alpha = 0`: one launch of `reduce_slices` with no slices (`C =
///   beta C`), which reads neither A nor B. Not for FP8: D's scale is on
///   the device, so the FP8 kernel runs as for any alpha, and A and B are
///   read (a NaN in them reaches C).
/// - No split: the kernel, once, on A, B and C.
/// - Split-K: the kernel with `k_slice` set, product z being slice z of
///   K written to plane z of the workspace (alpha 1, beta 0, no
///   epilogue), then `reduce_slices` from the workspace into C with the
///   call's scalars and epilogue; or, for a kernel with a split entry
///   ([`in_launch`]), that entry once: the planes and their sum in one
///   launch.
pub fn steps(plan: &Plan, choice: Choice) -> Steps {
    // The plan as the chosen kernel reads A and B (a vector of A or B
    // may be read the other way round: `Plan::read_as`).
    let plan = &plan.read_as(choice.kernel).unwrap_or(*plan);
    let p = plan.params;
    let one = |step| Steps {
        steps: [Some(step), None],
        workspace: 0,
    };
    if p.alpha == 0.0 && !plan.storage.scaled() {
        if plan.storage.c == Elem::F32 {
            return one(Step {
                spec: &REDUCE,
                params: reduce_params(p, 0),
                batch: plan.batch,
                a: Buf::C,
                b: Buf::C,
                c: Buf::C,
                fused: true,
                in_launch: false,
            });
        }
        // A 16-bit C: a step-21 kernel of the call's types with K = 0,
        // whose epilogue alone runs (`C = 0 * 0 + beta * C`, A and B
        // unread).
        return one(Step {
            spec: scale_16(plan.storage),
            params: GemmParams {
                k: 0,
                lda: 1,
                ldb: p.n,
                stride_a: 0,
                stride_b: 0,
                ..p
            },
            batch: plan.batch,
            a: Buf::C,
            b: Buf::C,
            c: Buf::C,
            fused: true,
            in_launch: false,
        });
    }
    if choice.split_k <= 1 {
        return one(Step {
            spec: choice.kernel,
            params: p,
            batch: plan.batch,
            a: Buf::A,
            b: Buf::B,
            c: Buf::C,
            fused: true,
            in_launch: false,
        });
    }
    let (k_slice, slices) = slices(p.k, choice.split_k);
    let plane = p.m as u64 * p.n as u64;
    let slice_strides = GemmParams {
        k_slice,
        stride_a: match plan.ops.a {
            Op::N => k_slice as u64,
            Op::T => k_slice as u64 * p.lda as u64,
        },
        stride_b: match plan.ops.b {
            Op::N => k_slice as u64 * p.ldb as u64,
            Op::T => k_slice as u64,
        },
        ..p
    };
    if in_launch(choice.kernel, p) {
        return Steps {
            steps: [
                Some(Step {
                    spec: choice.kernel,
                    params: slice_strides,
                    batch: slices,
                    a: Buf::A,
                    b: Buf::B,
                    c: Buf::C,
                    fused: true,
                    in_launch: true,
                }),
                None,
            ],
            workspace: slices * plane as usize,
        };
    }
    let partial = Step {
        spec: choice.kernel,
        params: GemmParams {
            ldc: p.n,
            alpha: 1.0,
            beta: 0.0,
            stride_c: plane,
            ..slice_strides
        },
        batch: slices,
        a: Buf::A,
        b: Buf::B,
        c: Buf::Workspace,
        fused: false,
        in_launch: false,
    };
    let sum = Step {
        spec: &REDUCE,
        params: reduce_params(p, slices),
        batch: 1,
        a: Buf::Workspace,
        b: Buf::Workspace,
        c: Buf::C,
        fused: true,
        in_launch: false,
    };
    Steps {
        steps: [Some(partial), Some(sum)],
        workspace: slices * plane as usize,
    }
}

/// Whether `spec` splits K for a call of `p` inside one launch: it has a
/// split entry (`registry::SPLIT_IN_LAUNCH`) and its grid has at most
/// `split::MAX_TILES` tiles (the counters the handle keeps); else the
/// partial sums and the reduction are two launches.
pub fn in_launch(spec: &KernelSpec, p: GemmParams) -> bool {
    let (gx, gy) = spec.launch.grid(p.m as usize, p.n as usize);
    registry::split_entry(spec).is_some() && gx * gy <= kernels_gpu::split::MAX_TILES
}

/// The lengths of an epilogue's vectors, with their dimensions.
fn epilogue_lens<S: DevicePtr<f32>>(ep: &Epilogue<'_, S>) -> (VectorLen, VectorLen) {
    (
        ep.bias.map(|(v, per)| (v.len(), per)),
        ep.scale.map(|(v, per)| (v.len(), per)),
    )
}

/// Whether the epilogue `ep` (of a plan: after the swap) reads a vector
/// along C's rows, one value per row of each product.
fn rows_vector(ep: &EpilogueParams) -> bool {
    let f = ep.flags;
    (f & EpilogueParams::HAS_BIAS != 0 && f & EpilogueParams::BIAS_PER_COLUMN == 0)
        || (f & EpilogueParams::HAS_SCALE != 0 && f & EpilogueParams::SCALE_PER_COLUMN == 0)
}

/// The entries' epilogue for a call planned as `plan`, from the caller's
/// activation and the device addresses of its vectors (with the guards
/// that keep cudarc's stream ordering): rows and columns swap where the
/// call runs as its transpose (column-major).
fn epilogue_params<G>(
    plan: &Plan,
    activation: Activation,
    bias: &Option<((u64, G), Per)>,
    scale: &Option<((u64, G), Per)>,
) -> EpilogueParams {
    let address = |v: &Option<((u64, G), Per)>| v.as_ref().map(|((ptr, _), per)| (*ptr, *per));
    let ep = EpilogueParams::new(activation, address(bias), address(scale));
    if plan.swapped { ep.transposed() } else { ep }
}

/// The step-21 kernel that computes `C = beta * C` for a 16-bit C
/// (`storage` a checked mix) when alpha is 0: one reading A and B as
/// they are, C of the call's type.
fn scale_16(storage: Storage) -> &'static KernelSpec {
    registry::all()
        .find(|k| k.step == 21 && k.ops == Ops::NN && k.elems.storage() == storage)
        .expect("step 21 has an instance of every 16-bit type and C")
}

/// The reduction's parameters for `slices` partial sums into the C of
/// `p`: C's shape, leading dimension, scalars and batch stride; its A is
/// the workspace, dense m x n planes (`k = 1, lda = n` describe one row of
/// them for the launch's checks; B is not read).
fn reduce_params(p: GemmParams, slices: usize) -> GemmParams {
    GemmParams {
        k: 1,
        lda: p.n,
        ldb: p.n,
        k_slice: 0,
        slices: slices as u32,
        stride_a: 0,
        stride_b: 0,
        ..p
    }
}

/// Runs a call on the CPU emulator (`kernels_gpu::emu`): the same plan,
/// choice and launches as [`Sgemm::gemm`], each launch emulated with its
/// checks. The buffers are of the choice's stored types, their values
/// held as f32 (a 16-bit kernel reads each rounded to its type, and
/// writes a 16-bit C's values rounded). Returns C after the call, and the first launch whose checks
/// found something (races, bad accesses, ...), as text. For tests and
/// small sizes: the emulator runs every GPU thread as an OS thread. Built
/// without the `emulator` feature, every kernel is refused
/// ([`GemmError::KernelUnsupported`], saying so).
pub fn emulate(
    cfg: &GemmConfig,
    choice: Choice,
    a: &[f32],
    b: &[f32],
    c: &[f32],
) -> Result<Result<Vec<f32>, String>, GemmError> {
    emulate_fused(cfg, choice, (a, b, c), &EmuEpilogue::default())
}

/// [`emulate`] with a fused epilogue, as [`Sgemm::gemm_fused`] runs it:
/// `epilogue`'s vectors run along C as the caller lays it out.
pub fn emulate_fused(
    cfg: &GemmConfig,
    choice: Choice,
    (a, b, c): (&[f32], &[f32], &[f32]),
    epilogue: &EmuEpilogue,
) -> Result<Result<Vec<f32>, String>, GemmError> {
    let plan = plan_for(
        cfg,
        (a.len(), b.len(), c.len()),
        choice.kernel.elems.storage(),
    )?;
    let lens = |v: &Option<(Vec<f32>, Per)>| v.as_ref().map(|(v, per)| (v.len(), *per));
    check_epilogue(cfg, (lens(&epilogue.bias), lens(&epilogue.scale)))?;
    let (a, b) = if plan.swapped { (b, a) } else { (a, b) };
    // The kernels compute C^T for a column-major call: rows and columns
    // of the caller's C swap.
    let transposed = |v: &Option<(Vec<f32>, Per)>| {
        v.as_ref().map(|(v, per)| {
            let per = if plan.swapped { per.transposed() } else { *per };
            (v.clone(), per)
        })
    };
    let fused = EmuEpilogue {
        activation: epilogue.activation,
        bias: transposed(&epilogue.bias),
        scale: transposed(&epilogue.scale),
    };
    let along_rows = |v: &Option<(Vec<f32>, Per)>| v.as_ref().is_some_and(|(_, p)| *p == Per::Row);
    let plan = plan.folded(along_rows(&fused.bias) || along_rows(&fused.scale));
    let none = EmuEpilogue::default();
    let steps = steps(&plan, choice);
    let mut c = c.to_vec();
    let mut w = vec![f32::NAN; steps.workspace.max(1)];
    for step in steps.list() {
        let body = step
            .spec
            .emulated()
            .map_err(|why| GemmError::KernelUnsupported {
                kernel: step.spec.name.into(),
                why: format!("the emulator cannot run it: {why}"),
            })?;
        let buf = |which: Buf| -> Vec<f32> {
            match which {
                Buf::A => a.to_vec(),
                Buf::B => b.to_vec(),
                Buf::C => c.clone(),
                Buf::Workspace => w.clone(),
            }
        };
        let report = if step.in_launch {
            let (report, counters) = kernels_gpu::emu::run_split(
                step.spec,
                body,
                &step.params,
                step.batch,
                (&buf(step.a), &buf(step.b), &buf(step.c)),
                &fused,
            );
            if let Some(left) = counters.iter().position(|&x| x != 0) {
                return Ok(Err(format!(
                    "{}'s split entry left tile counter {left} at {} (the last block of a \
                     tile puts it back to 0)",
                    step.spec.name, counters[left]
                )));
            }
            report
        } else {
            kernels_gpu::emu::run_fused(
                step.spec,
                body,
                &step.params,
                step.batch,
                (&buf(step.a), &buf(step.b), &buf(step.c)),
                &EmuScales::default(),
                if step.fused { &fused } else { &none },
            )
        };
        if !report.is_clean() {
            return Ok(Err(report.to_string()));
        }
        match step.c {
            Buf::C => c = report.c,
            Buf::Workspace => w = report.c,
            Buf::A | Buf::B => unreachable!("no launch writes A or B"),
        }
    }
    Ok(Ok(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_start_on_tiles_and_cover_k() {
        assert_eq!(slices(16_384, 8), (2048, 8));
        assert_eq!(slices(1000, 3), (352, 3));
        // 100 in 8 slices of 32: 4 slices take work.
        assert_eq!(slices(100, 8), (32, 4));
    }

    #[test]
    fn a_kept_choice_serves_only_the_same_call() {
        let key = |cfg: GemmConfig| {
            let lens = (1 << 20, 1 << 20, 1 << 20);
            PlanKey::of(&plan(&cfg, lens).expect("a valid call"))
        };
        let base = GemmConfig::new(96, 80, 64);
        assert!(key(base.clone()) == key(GemmConfig::new(96, 80, 64)));
        let others = [
            GemmConfig::new(97, 80, 64),
            GemmConfig::new(96, 81, 64),
            GemmConfig::new(96, 80, 65),
            base.clone().lds(68, 80, 80),
            base.clone().lds(64, 84, 80),
            base.clone().lds(64, 80, 88),
            base.clone().scalars(1.0, 1.0),
            base.clone().scalars(0.0, 0.0),
            base.clone().op_a(Op::T),
            base.clone().op_b(Op::T),
            base.clone().layout(Layout::ColMajor),
            base.clone().compute(Compute::Tf32),
        ];
        for other in others {
            assert!(key(base.clone()) != key(other.clone()), "{other:?}");
        }
    }
}
