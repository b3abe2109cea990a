//! What the host needs to know to launch a kernel, stated once, by the
//! kernel itself: block shape, the tile of C each block owns, shared
//! memory, the PTX module (and so the GPUs) it is built for, and the
//! element types it stores and computes in.

use crate::elem::Elems;
use crate::gemm::{Gemm, GemmParams};
use crate::modules::PtxModule;

/// How a kernel is launched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Launch {
    /// Threads per block, `(x, y)`.
    pub block_threads: (u32, u32),
    /// Rows of C (BM) and columns of C (BN) each block computes.
    pub block_tile: (usize, usize),
    /// Bytes of launch-sized shared memory per block.
    pub shared_bytes: usize,
    /// The entry is compiled with launch bounds (`.maxntid`, the host
    /// adds it: `host::with_launch_bounds`), which caps its registers at
    /// what a block of its size can have: needed by `setmaxnreg` (step
    /// 13). The others go without, because the bound changes ptxas's
    /// register choices (the best FP32 kernel went from 167 to 189).
    pub register_cap: bool,
    /// A persistent grid: one block per SM, at most one per tile of C
    /// ([`Launch::persistent_grid`]), each walking the tiles
    /// `blockIdx.x, blockIdx.x + gridDim.x, ...` in the kernel's own order.
    /// Otherwise one block per tile ([`Launch::grid`]).
    pub persistent: bool,
}

impl Launch {
    /// Threads in one block.
    pub const fn threads(&self) -> u32 {
        self.block_threads.0 * self.block_threads.1
    }

    /// Blocks `(x, y)` that cover an `m x n` C: x walks columns, y rows.
    pub const fn grid(&self, m: usize, n: usize) -> (usize, usize) {
        (n.div_ceil(self.block_tile.1), m.div_ceil(self.block_tile.0))
    }

    /// The blocks a launch on a GPU of `sms` SMs runs: [`Self::grid`], or
    /// for a persistent kernel `(min(tiles, sms), 1)`.
    pub const fn persistent_grid(&self, m: usize, n: usize, sms: usize) -> (usize, usize) {
        let (x, y) = self.grid(m, n);
        if !self.persistent {
            return (x, y);
        }
        let tiles = x * y;
        (if tiles < sms { tiles } else { sms }, 1)
    }
}

/// What runs a kernel's body besides the GPU.
#[derive(Clone, Copy, Debug)]
pub enum Body {
    /// The body the PTX entry runs; the CPU emulator (`emu::run_gemm`)
    /// runs it too. Never called through this pointer on the GPU.
    Emulated(fn(Gemm)),
    /// The GPU alone runs it; why the emulator cannot (one line).
    GpuOnly(&'static str),
}

/// A spec's `body` for a kernel the emulator runs: `Body::Emulated(body)`
/// with the `emulator` feature (the default). Without it, a program that
/// only launches the kernels (the library built for a program outside
/// this repository) does not compile the bodies' host instances, which
/// are most of this crate's host build time; the body is named, so that
/// it counts as used, but never turned into a function pointer, and the
/// spec says the emulator was left out.
#[cfg(feature = "emulator")]
macro_rules! emulated {
    ($body:expr) => {
        $crate::launch::Body::Emulated($body)
    };
}
#[cfg(not(feature = "emulator"))]
macro_rules! emulated {
    ($body:expr) => {{
        let _ = $body;
        $crate::launch::Body::GpuOnly(
            "this build left the emulator out (the `emulator` feature of rust-gemm, or of kernels-gpu)",
        )
    }};
}
pub(crate) use emulated;

/// How a kernel receives A and B.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operands {
    /// As pointers: the entry takes `(A, B, C, m, n, k)`.
    Pointers,
    /// As pointers and through TMA tensor maps the host makes for each
    /// launch's buffers: the entry takes `(A, B, C, m, n, k, maps)`,
    /// `maps` pointing at A's map and then B's in device memory.
    TensorMaps(TmaBoxes),
}

/// How a kernel reads one operand: as it is stored, row-major (`N`), or
/// transposed (`T`: the buffer holds the operand's transpose, row-major;
/// for A that is K x M with rows `lda` apart).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    N,
    T,
}

/// The layouts of A and B a kernel entry reads: a compile-time choice,
/// one entry per layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ops {
    pub a: Op,
    pub b: Op,
}

impl Ops {
    /// A and B as they are: every ladder step's layout.
    pub const NN: Ops = Ops { a: Op::N, b: Op::N };
    pub const TN: Ops = Ops { a: Op::T, b: Op::N };
    pub const NT: Ops = Ops { a: Op::N, b: Op::T };
    pub const TT: Ops = Ops { a: Op::T, b: Op::T };

    /// `nn`, `tn`, `nt` or `tt` (A's letter first), as in entry names.
    pub const fn suffix(self) -> &'static str {
        match (self.a, self.b) {
            (Op::N, Op::N) => "nn",
            (Op::T, Op::N) => "tn",
            (Op::N, Op::T) => "nt",
            (Op::T, Op::T) => "tt",
        }
    }
}

/// Bytes of one tensor map (`CUtensorMap`); the maps of A, B (and C, for
/// a kernel that stores by TMA) follow each other in device memory.
pub const TENSOR_MAP_BYTES: usize = 128;

/// The boxes a TMA kernel copies, which its tensor maps must describe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TmaBoxes {
    /// A's box: (rows, columns) of A (M x K).
    pub a: (u32, u32),
    /// B's box: (rows, columns) of B (K x N), or of B's transpose (N x K)
    /// where `copy` says the kernel reads B^T.
    pub b: (u32, u32),
    /// A's box is stored with the 128-byte swizzle (its rows must then be
    /// 128 bytes: 32 f32 or 64 16-bit values).
    pub a_swizzle_128: bool,
    /// B's box (of B, or of B^T) likewise.
    pub b_swizzle_128: bool,
    /// What the host copies A and B into before every launch, if
    /// anything: what the kernel's tensor maps describe.
    pub copy: TmaCopy,
    /// The kernel stores C by TMA, in boxes of (rows, columns) with the
    /// 128-byte swizzle (a row of 128 bytes), where [`c_by_tma`] allows:
    /// the host then makes C's map too. `None`: C is stored by the threads.
    pub c: Option<(u32, u32)>,
    /// It takes split-K's slices over the grid's z (`GemmParams::k_slice`:
    /// slice z reads K from `z * k_slice` in the same maps, which describe
    /// the whole of A and B, and writes its partial sums to plane z of the
    /// workspace; `reduce_slices` adds them): [`KernelSpec::splits_k`].
    /// Its maps have a third dimension, the products of a batch (`Gemm::
    /// product`; one for a single product), so the same entry takes a
    /// batch where [`KernelSpec::batches`] says so. Kernels without it
    /// read two-dimensional maps.
    pub slices: bool,
}

/// What a TMA kernel reads in place of the caller's A and B, which the
/// host's launch writes before the kernel (`host/gemm/src/tma.rs`, `Padded`;
/// the copies are part of what is timed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TmaCopy {
    /// A and B as stored; only an operand whose rows TMA cannot describe
    /// is copied, into rows padded with zeros ([`KernelSpec::padded`]).
    AsStored,
    /// TF32 `wgmma` reads only K-major tiles (step 17): each operand
    /// marked here is stored the other way (B as K x N, A^T as K x M) and
    /// copied transposed (K-major: B^T N x K, A M x K) and rounded to TF32,
    /// at every shape (`kernels_gpu::pad::transpose_tf32`); an operand
    /// not marked is read as [`TmaCopy::AsStored`] (row-major A, B^T).
    Transposed { a: bool, b: bool },
    /// 3xTF32's operands (step 24): A (M x K) and B^T (N x K), each value
    /// split into two TF32 parts, `big = tf32(x)` and `small = tf32(x -
    /// big)`, both rounded to nearest; each row holds K's 32-value
    /// chunks as `big[32], small[32]` pairs (rows of `2 * K` rounded up
    /// to 64 values, zeros past K), so that one tensor map serves both
    /// parts and a box of 32 values at column `2 * k0` or `2 * k0 + 32`
    /// is chunk `k0 / 32`'s big or small part (`kernels_gpu::pad::split_tf32`
    /// and `transpose_split_tf32`).
    SplitTf32,
}

impl TmaCopy {
    /// Whether the launch copies B transposed (B^T: N x K).
    pub const fn b_transposed(self) -> bool {
        matches!(
            self,
            TmaCopy::Transposed { b: true, .. } | TmaCopy::SplitTf32
        )
    }
    /// Whether the launch copies A^T (stored K x M) transposed (A: M x K).
    pub const fn a_transposed(self) -> bool {
        matches!(self, TmaCopy::Transposed { a: true, .. })
    }
}

/// Whether a kernel whose spec has [`TmaBoxes::c`] stores C by TMA: beta
/// is 0 (a TMA store writes, it cannot blend with C's old values), C
/// starts on 16 bytes (`c_aligned16`) and its rows are 16-byte multiples
/// apart (`ldc` elements of `c_bytes` each). The host makes C's map
/// exactly when this holds, and the kernel asks the same question, so the
/// two never disagree; otherwise the kernel's threads store C.
#[inline(always)]
pub fn c_by_tma(beta: f32, c_aligned16: bool, ldc: usize, c_bytes: usize) -> bool {
    beta == 0.0 && c_aligned16 && (ldc * c_bytes).is_multiple_of(TMA_ROW_ALIGN_BYTES)
}

/// TMA's rule for a tensor's rows: their stride (and the start) must be
/// multiples of 16 bytes.
pub const TMA_ROW_ALIGN_BYTES: usize = 16;

/// The rows of the padded copies the host makes for TMA kernels are
/// multiples of this many bytes (one 128-byte swizzled box row): TMA reads
/// rows that start 16 but not 128 bytes apart more slowly (step 20 at
/// n = 4097, measured both ways: docs/measurements.md, tenth session).
pub const COPY_ROW_ALIGN_BYTES: usize = 128;

impl KernelSpec {
    /// Elements of A's and B's stored types in [`TMA_ROW_ALIGN_BYTES`]
    /// (4 for f32, 8 for the 16-bit types): what leading dimensions must
    /// be multiples of for TMA to read A and B as they are, and what K and
    /// N are rounded up to in their padded copies.
    pub const fn tma_row_align(&self) -> usize {
        let (a, b) = (self.elems.a.bytes(), self.elems.b.bytes());
        TMA_ROW_ALIGN_BYTES / if a < b { a } else { b }
    }

    /// Elements of A's and B's stored types in [`COPY_ROW_ALIGN_BYTES`]
    /// (32 for f32, 64 for the 16-bit types): what the rows of the padded
    /// copies ([`Self::padded`]) are rounded up to.
    pub const fn copy_row_align(&self) -> usize {
        let (a, b) = (self.elems.a.bytes(), self.elems.b.bytes());
        COPY_ROW_ALIGN_BYTES / if a < b { a } else { b }
    }

    /// For a TMA kernel, the operands TMA cannot describe as they are in
    /// `p`'s layout ([`Self::stored`]), which the host copies into
    /// buffers with rows padded to 128-byte multiples ([`Padding`], zeros
    /// in the padding) before each launch. TMA needs row strides that are
    /// multiples of 16 bytes and 16-byte aligned starts (`aligned16`: A's
    /// and B's). A kernel whose launch transposes an operand
    /// (`TmaCopy::Transposed`) has it copied at every shape (B^T, n x k
    /// rounded up; A, m x k rounded up), and a 3xTF32 kernel
    /// (`TmaCopy::SplitTf32`) both,
    /// each row `2 * k` rounded up to twice the alignment. The copies'
    /// rows are rounded up to [`Self::copy_row_align`]. `None` when the
    /// kernel reads the caller's A and B as they are.
    pub fn padded(&self, p: &GemmParams, aligned16: (bool, bool)) -> Option<Padding> {
        let Operands::TensorMaps(boxes) = self.operands else {
            return None;
        };
        let align = self.tma_row_align();
        let [(_, a_cols, lda), (_, b_cols, ldb), _] = self.stored(p, p.k);
        let copy = |aligned: bool, ld: u32, cols: u32| {
            (!(aligned && (ld as usize).is_multiple_of(align)))
                .then_some((cols as usize).next_multiple_of(self.copy_row_align()))
        };
        let k_rows = (p.k as usize).next_multiple_of(self.copy_row_align());
        let (a, b) = match boxes.copy {
            TmaCopy::AsStored => (
                copy(aligned16.0, lda, a_cols),
                copy(aligned16.1, ldb, b_cols),
            ),
            TmaCopy::Transposed { a, b } => (
                if a {
                    Some(k_rows)
                } else {
                    copy(aligned16.0, lda, a_cols)
                },
                if b {
                    Some(k_rows)
                } else {
                    copy(aligned16.1, ldb, b_cols)
                },
            ),
            TmaCopy::SplitTf32 => (Some(2 * k_rows), Some(2 * k_rows)),
        };
        (a.is_some() || b.is_some()).then_some(Padding { a, b })
    }

    /// What a launch copies before the kernel runs (and its time
    /// includes), or `None` when it reads A and B as they are; for the
    /// dense problem of `p` ([`Self::padded`]).
    #[cfg(not(target_arch = "nvptx64"))]
    pub fn copies(&self, p: &GemmParams) -> Option<Copies> {
        let padding = self.padded(p, (true, true))?;
        Some(match self.operands {
            Operands::TensorMaps(boxes) if boxes.copy == TmaCopy::SplitTf32 => Copies::SplitTf32,
            Operands::TensorMaps(TmaBoxes {
                copy: TmaCopy::Transposed { a, b },
                ..
            }) => Copies::Transposed {
                a,
                b,
                // The other operand's copy, if TMA cannot read it: its
                // rows run along K too (A row-major, B^T).
                padded_k: if a { padding.b } else { padding.a }.filter(|_| a != b),
            },
            _ => {
                // The dimension along each stored operand's rows.
                let (a_dim, b_dim) = (
                    if self.ops.a == Op::N { "k" } else { "m" },
                    if self.ops.b == Op::N { "n" } else { "k" },
                );
                Copies::Padded {
                    align: self.tma_row_align(),
                    a: padding.a.map(|ld| (a_dim, ld)),
                    b: padding.b.map(|ld| (b_dim, ld)),
                }
            }
        })
    }
}

/// The copies a TMA kernel's launch makes of A and B ([`KernelSpec::padded`]):
/// for each operand copied, the leading dimension of its copy (its rows as
/// stored, rounded up to 16 bytes of its type); `None` for one TMA reads
/// as it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Padding {
    pub a: Option<usize>,
    pub b: Option<usize>,
}

/// What a TMA kernel's launch copies before the kernel ([`KernelSpec::copies`]).
#[cfg(not(target_arch = "nvptx64"))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Copies {
    /// A, B or both, because TMA needs their rows to be multiples of
    /// `align` elements (16 bytes of the stored type), into buffers whose
    /// rows are padded (to [`KernelSpec::copy_row_align`]): for each
    /// operand copied, the dimension along its stored rows (`k`, `m` or
    /// `n`) and the padded length.
    Padded {
        align: usize,
        a: Option<(&'static str, usize)>,
        b: Option<(&'static str, usize)>,
    },
    /// A, B or both transposed and rounded to TF32 ([`TmaCopy::Transposed`];
    /// the other operand too, into rows padded to `padded_k` elements,
    /// when TMA cannot read it as it is).
    Transposed {
        a: bool,
        b: bool,
        padded_k: Option<usize>,
    },
    /// A and B^T split into their two TF32 parts ([`TmaCopy::SplitTf32`]).
    SplitTf32,
}

#[cfg(not(target_arch = "nvptx64"))]
impl Copies {
    /// The sizes in the text depend on the problem (a report names it).
    pub fn depends_on_shape(&self) -> bool {
        !matches!(
            self,
            Copies::Transposed { padded_k: None, .. } | Copies::SplitTf32
        )
    }
}

#[cfg(not(target_arch = "nvptx64"))]
impl core::fmt::Display for Copies {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Copies::Padded { align, a, b } => {
                let copied: Vec<(&str, &str, usize)> = [("A", *a), ("B", *b)]
                    .into_iter()
                    .filter_map(|(which, c)| c.map(|(dim, ld)| (which, dim, ld)))
                    .collect();
                let mut dims: Vec<&str> = copied.iter().map(|c| c.1).collect();
                dims.dedup();
                let rule = match dims.as_slice() {
                    [one] => format!("{one} a multiple of {align}"),
                    many => format!("{} multiples of {align}", many.join(" and ")),
                };
                let which: Vec<&str> = copied.iter().map(|c| c.0).collect();
                let mut sizes: Vec<String> = copied
                    .iter()
                    .map(|c| format!("{} = {}", c.1, c.2))
                    .collect();
                sizes.dedup();
                let (buffers, copies) = if copied.len() == 1 {
                    ("a buffer", "copy")
                } else {
                    ("buffers", "copies")
                };
                write!(
                    f,
                    "TMA needs rows of 16-byte multiples ({rule}); each launch first copies {} \
                     into {buffers} padded to {} (zeros), and the times include the {copies}",
                    which.join(" and "),
                    sizes.join(", ")
                )
            }
            Copies::Transposed { a, b, padded_k } => {
                let which = match (a, b) {
                    (true, true) => "A and B",
                    (true, false) => "A",
                    _ => "B",
                };
                write!(
                    f,
                    "each launch first writes {which} transposed and rounded to TF32 (the tensor \
                     cores read only K-major tiles from shared memory)"
                )?;
                if let Some(k4) = padded_k {
                    let other = if *a { "B's" } else { "A's" };
                    write!(
                        f,
                        "; its rows, and a copy of {other}, padded to k = {k4} with zeros"
                    )?;
                }
                write!(f, ", and the times include the copy")
            }
            Copies::SplitTf32 => write!(
                f,
                "each launch first splits A and B into two TF32 parts each (big = tf32(x), \
                 small = tf32(x - big), rounded to nearest), B transposed (the tensor cores \
                 read only K-major tiles from shared memory), and the times include the copies"
            ),
        }
    }
}

/// A kernel as the host sees it.
#[derive(Clone, Copy, Debug)]
pub struct KernelSpec {
    /// Name on the command line, and the PTX entry's name.
    pub name: &'static str,
    /// Step on the ladder (01, 02, ...).
    pub step: u32,
    /// The PTX module the entry is built into: its architecture says
    /// which GPUs can run the kernel.
    pub module: &'static PtxModule,
    /// A, B and C as stored, the accumulator, and the math
    /// ([`crate::elem`]): what the host uploads, verifies against and
    /// compares with.
    pub elems: Elems,
    /// One line: what this step changes.
    pub summary: &'static str,
    pub launch: Launch,
    /// The lesson's traffic model counts every global load as DRAM
    /// traffic. A kernel that reuses each loaded element of A across
    /// `reuse.1` columns of C and each element of B across `reuse.0` rows
    /// moves `4 * (M*N*K/reuse.1 + M*N*K/reuse.0 + M*N)` bytes (f32; each
    /// element counts its stored type's bytes) in that
    /// model: `(1, 1)` for the naive kernel, `(16, 16)` for the lesson's.
    pub model_reuse: (usize, usize),
    /// The kernel's body for the CPU emulator, or why there is none.
    pub body: Body,
    pub operands: Operands,
    /// The layouts of A and B it reads.
    pub ops: Ops,
    /// It computes batches (a grid z of several products, split-K's
    /// slices included). The tensor-core kernels do not, but step 21's
    /// and steps 17-18's that read A and B as stored (their maps have the
    /// products as a third dimension, [`TmaBoxes::slices`]): the other
    /// TMA kernels' maps describe one A and one B, and the batched copy
    /// of step 11's entries (`gemm_kernel!(name, one_product)`) spilled
    /// registers.
    pub batches: bool,
}

impl KernelSpec {
    /// Why this kernel cannot take the products `p` describes (`batch` of
    /// them), if it cannot: a matrix that spans more than
    /// [`MAX_ELEMS`](crate::gemm::MAX_ELEMS) elements (the kernels'
    /// offsets within a matrix are 32-bit), or more than one product for a
    /// kernel that does not take batches ([`KernelSpec::batches`]). Every kernel
    /// takes every other problem (TMA kernels through padded copies where
    /// needed: [`Operands::padded`]).
    #[cfg(not(target_arch = "nvptx64"))]
    pub fn unsupported(&self, p: &GemmParams, batch: usize) -> Option<String> {
        let limit = crate::gemm::MAX_ELEMS;
        for (name, (rows, cols, ld)) in ["A", "B", "C"].into_iter().zip(self.stored(p, p.k)) {
            let span = crate::gemm::span(rows, cols, ld);
            if span > limit as u64 {
                let what = if ld == cols {
                    format!("{rows} x {cols} = {span} elements")
                } else {
                    format!("{rows} rows of {ld} elements ({span} with the last row's {cols})")
                };
                return Some(format!(
                    "{name} spans {what}, more than {limit} \
                     (2^32 - 1: the kernels compute offsets within a matrix in 32 bits)"
                ));
            }
        }
        // Split-K's slices are a batch too (`k_slice` set).
        let slices = p.k_slice != 0 && self.splits_k();
        if batch > 1 && !self.batches && !slices {
            return Some(format!(
                "a batch of {batch} products (or split-K slices): {} takes one product per \
                 launch",
                self.name
            ));
        }
        // A TMA kernel's batch is one map per operand, products its third
        // dimension: rows and products TMA can step (16-byte multiples),
        // no padded copy, products that do not overlap (a stride of 0,
        // one A or B for every product, included: not what a map
        // describes).
        if batch > 1
            && !slices
            && let Operands::TensorMaps(_) = self.operands
        {
            let align = self.tma_row_align() as u64;
            let [a, b, _] = self.stored(p, p.k);
            let apart = |s: u64, (rows, _, ld): (u32, u32, u32)| {
                s.is_multiple_of(align) && s >= u64::from(rows) * u64::from(ld)
            };
            if self.padded(p, (true, true)).is_some()
                || !apart(p.stride_a, a)
                || !apart(p.stride_b, b)
            {
                return Some(format!(
                    "a batch of {batch} products: {} takes a batch only where lda, ldb and \
                     the strides between A's and B's products are multiples of {align} \
                     elements (TMA steps rows and products by 16 bytes) and products do not \
                     overlap; pad them, or choose another kernel",
                    self.name
                ));
            }
        }
        None
    }

    /// This TMA kernel, taking split-K's slices and, where the host copies
    /// nothing at every shape ([`TmaCopy::AsStored`]), batches
    /// ([`TmaBoxes::slices`]; its entry `gemm_kernel!(name, tensor_maps,
    /// sliced)`).
    pub const fn with_slices(self) -> Self {
        let Operands::TensorMaps(boxes) = self.operands else {
            panic!("only a TMA kernel's maps start a slice at its K")
        };
        Self {
            operands: Operands::TensorMaps(TmaBoxes {
                slices: true,
                ..boxes
            }),
            batches: matches!(boxes.copy, TmaCopy::AsStored),
            ..self
        }
    }

    /// Whether it splits K (split-K's slices over the grid's z, then
    /// `reduce_slices`): the FP32 pointer kernels, whose slices are a
    /// batch with the slices' strides, and the TMA kernels whose maps start
    /// each slice at its K ([`TmaBoxes::slices`]: steps 17-18).
    pub fn splits_k(&self) -> bool {
        match self.operands {
            Operands::Pointers => self.batches && self.elems == Elems::FP32,
            Operands::TensorMaps(boxes) => boxes.slices,
        }
    }

    /// A, B and C as this kernel reads them for `p` with depth `k` (the
    /// call's, or a split-K slice's): `(rows, columns, leading dimension)`
    /// of each as stored, A and B transposed where [`KernelSpec::ops`]
    /// says so. What every span check (host, emulator) measures.
    pub fn stored(&self, p: &GemmParams, k: u32) -> [(u32, u32, u32); 3] {
        let a = match self.ops.a {
            Op::N => (p.m, k, p.lda),
            Op::T => (k, p.m, p.lda),
        };
        let b = match self.ops.b {
            Op::N => (k, p.n, p.ldb),
            Op::T => (p.n, k, p.ldb),
        };
        [a, b, (p.m, p.n, p.ldc)]
    }

    /// The body the CPU emulator runs, or why it cannot run this kernel.
    pub fn emulated(&self) -> Result<fn(Gemm), &'static str> {
        match self.body {
            Body::Emulated(body) => Ok(body),
            Body::GpuOnly(why) => Err(why),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::registry::KERNELS;

    #[test]
    fn copy_notes_name_sizes_only_where_the_shape_sets_them() {
        use super::Copies;
        use crate::gemm::GemmParams;
        let ws = crate::k13_wgmma_ws::SPEC_256X128X32_S4;
        let ss = crate::k17_wgmma_ss::SPEC_256X128X32_S4;
        let (aligned, odd) = (GemmParams::dense(64, 64, 64), GemmParams::dense(33, 30, 17));
        assert_eq!(ws.copies(&aligned), None);
        let padded = ws.copies(&odd).unwrap();
        assert_eq!(
            padded,
            Copies::Padded {
                align: 4,
                a: Some(("k", 32)),
                b: Some(("n", 32)),
            }
        );
        assert!(padded.depends_on_shape());
        // The host's and the bench's line (tests/tests/faults.rs checks it whole).
        assert_eq!(
            padded.to_string(),
            "TMA needs rows of 16-byte multiples (k and n multiples of 4); each launch first \
             copies A and B into buffers padded to k = 32, n = 32 (zeros), and the times \
             include the copies"
        );
        // Step 17 copies B at every shape; the text names k only when A's
        // rows are padded too.
        let transposed = ss.copies(&aligned).unwrap();
        assert_eq!(
            transposed,
            Copies::Transposed {
                a: false,
                b: true,
                padded_k: None
            }
        );
        assert!(!transposed.depends_on_shape() && !transposed.to_string().contains("k ="));
        let both = ss.copies(&odd).unwrap();
        assert!(both.depends_on_shape() && both.to_string().contains("padded to k = 32"));
        // Only the operand TMA cannot read is copied (here B: n = 30).
        let b_only = ws.copies(&GemmParams::dense(33, 30, 16)).unwrap();
        assert_eq!(
            b_only.to_string(),
            "TMA needs rows of 16-byte multiples (n a multiple of 4); each launch first copies \
             B into a buffer padded to n = 32 (zeros), and the times include the copy"
        );
        // A transposed is stored k x m: its rows run along m (dense: lda
        // = m); B transposed is stored n x k (ldb = k).
        let tn = crate::k20_wgmma_persistent::SPEC_BF16_128X256X64_S4_TN;
        let p = GemmParams {
            lda: 33,
            ..GemmParams::dense(33, 30, 16)
        };
        assert_eq!(
            tn.copies(&p).unwrap().to_string(),
            "TMA needs rows of 16-byte multiples (m and n multiples of 8); each launch first \
             copies A and B into buffers padded to m = 64, n = 64 (zeros), and the times \
             include the copies"
        );
        let nt = crate::k20_wgmma_persistent::SPEC_BF16_128X256X64_S4_NT;
        let p = GemmParams {
            ldb: 17,
            ..GemmParams::dense(64, 64, 17)
        };
        assert_eq!(
            nt.copies(&p).unwrap().to_string(),
            "TMA needs rows of 16-byte multiples (k a multiple of 8); each launch first copies \
             A and B into buffers padded to k = 64 (zeros), and the times include the copies"
        );
        // Step 17's transposed instances copy only what is not K-major:
        // nothing with B transposed alone, A with A transposed, and B's
        // copy for TMA's sake names its padded k.
        let dense = |m: u32, n: u32, k: u32, lda: u32, ldb: u32| GemmParams {
            lda,
            ldb,
            ..GemmParams::dense(m, n, k)
        };
        let ss = |ops: &str| {
            crate::k17_wgmma_ss::TRANSPOSED
                .iter()
                .find(|s| s.ops.suffix() == ops)
                .unwrap()
        };
        assert_eq!(ss("nt").copies(&dense(64, 64, 64, 64, 64)), None);
        let tn = ss("tn").copies(&dense(64, 64, 64, 64, 64)).unwrap();
        assert_eq!(
            tn,
            Copies::Transposed {
                a: true,
                b: true,
                padded_k: None
            }
        );
        assert!(
            tn.to_string()
                .starts_with("each launch first writes A and B transposed")
        );
        let tt = ss("tt").copies(&dense(64, 64, 17, 64, 17)).unwrap();
        assert_eq!(
            tt,
            Copies::Transposed {
                a: true,
                b: false,
                padded_k: Some(32)
            }
        );
        assert_eq!(
            tt.to_string(),
            "each launch first writes A transposed and rounded to TF32 (the tensor cores read \
             only K-major tiles from shared memory); its rows, and a copy of B's, padded to \
             k = 32 with zeros, and the times include the copy"
        );
    }

    #[test]
    fn every_kernel_refuses_matrices_beyond_32_bit_offsets() {
        use crate::gemm::GemmParams;
        let dense = |m, n, k| GemmParams::dense(m, n, k);
        for k in KERNELS {
            // 65,535 x 65,537 = 2^32 - 1: the largest matrix allowed.
            assert_eq!(
                k.unsupported(&dense(65_535, 4, 65_537), 1),
                None,
                "{}",
                k.name
            );
            for (m, n, kk, name) in [
                (65_536, 4, 65_536, "A"),
                (4, 65_536, 65_536, "B"),
                (65_536, 65_536, 4, "C"),
            ] {
                let why = k.unsupported(&dense(m, n, kk), 1).expect("refused");
                assert!(why.starts_with(&format!("{name} spans ")), "{why}");
                assert!(why.contains("32 bits"), "{why}");
            }
            // A leading dimension counts: 2 rows of 2^32 - 1 elements span
            // more than a matrix may, however few elements are used.
            let p = GemmParams {
                lda: u32::MAX,
                ..dense(2, 4, 4)
            };
            let why = k.unsupported(&p, 1).expect("refused");
            assert!(why.starts_with("A spans 2 rows of 4294967295"), "{why}");
        }
    }

    /// Two dense 64^3 products, one after the other in each buffer.
    fn two_products() -> crate::gemm::GemmParams {
        crate::gemm::GemmParams {
            stride_a: 64 * 64,
            stride_b: 64 * 64,
            stride_c: 64 * 64,
            ..crate::gemm::GemmParams::dense(64, 64, 64)
        }
    }

    /// The tensor-core kernels and step 21's largest tiles take one
    /// product per launch; the FP32 kernels, step 21's other instances
    /// (the library's batched 16-bit calls) and steps 17-18's instances
    /// that read A and B as stored (step 18, `_nt`) take batches.
    #[test]
    fn tensor_core_kernels_refuse_batches_but_step_21s_smaller_tiles_and_steps_17_18() {
        use crate::launch::{Operands, TmaBoxes, TmaCopy};
        let all = KERNELS.iter().chain(crate::registry::TRANSPOSED);
        for k in all {
            let why = k.unsupported(&two_products(), 2);
            let as_stored = matches!(
                k.operands,
                Operands::TensorMaps(TmaBoxes {
                    copy: TmaCopy::AsStored,
                    ..
                })
            );
            let batched_tma = matches!(k.step, 17 | 18) && as_stored;
            if k.elems.math.tensor_cores()
                && !batched_tma
                && (k.step != 21 || k.launch.block_tile == (128, 256))
            {
                assert!(
                    !k.batches && why.unwrap().contains("one product"),
                    "{}",
                    k.name
                );
            } else {
                assert!(k.batches && why.is_none(), "{}", k.name);
            }
        }
    }

    /// Split-K: the FP32 pointer kernels and the TF32 kernels of steps
    /// 17-18 (their maps start each slice at its K) split; a TMA kernel
    /// takes a batch of slices (`k_slice` set), never of products.
    #[test]
    fn the_fp32_pointer_kernels_and_steps_17_18_split_k() {
        use crate::elem::Elems;
        use crate::gemm::GemmParams;
        use crate::launch::{Operands, TmaCopy};
        let all = KERNELS.iter().chain(crate::registry::TRANSPOSED);
        for k in all {
            let pointer_f32 = k.operands == Operands::Pointers && k.elems == Elems::FP32;
            assert_eq!(
                k.splits_k(),
                pointer_f32 || matches!(k.step, 17 | 18),
                "{}",
                k.name
            );
            let sliced = GemmParams {
                k_slice: 32,
                ..GemmParams::dense(64, 64, 64)
            };
            if k.splits_k() {
                assert_eq!(k.unsupported(&sliced, 2), None, "{}", k.name);
            }
            // A batch of products: the instances that copy A or B at
            // every shape (`_tn`, `_tt`) take one product per launch; the
            // others refuse a batch whose rows or products TMA cannot
            // step, by name.
            if matches!(k.step, 17 | 18) {
                let batch = two_products();
                let why = k.unsupported(&batch, 2);
                let Operands::TensorMaps(boxes) = k.operands else {
                    panic!("{}: a TMA kernel", k.name)
                };
                if boxes.copy == TmaCopy::AsStored {
                    assert_eq!(why, None, "{}", k.name);
                    for odd in [
                        GemmParams {
                            stride_a: 64 * 64 + 1,
                            ..batch
                        },
                        GemmParams {
                            stride_b: 64 * 64 + 2,
                            ..batch
                        },
                        GemmParams { lda: 66, ..batch },
                        GemmParams {
                            stride_b: 0,
                            ..batch
                        },
                        GemmParams {
                            stride_a: 64 * 60,
                            ..batch
                        },
                    ] {
                        let why = k.unsupported(&odd, 2).expect("refused");
                        assert!(why.contains("multiples of 4 elements"), "{}: {why}", k.name);
                    }
                } else {
                    assert!(why.is_some_and(|w| w.contains("one product")), "{}", k.name);
                }
            }
        }
    }

    #[test]
    fn transposed_operands_are_measured_as_stored() {
        use crate::gemm::GemmParams;
        use crate::launch::Op;
        // A read transposed is stored k x m: 2^31 rows of 2 (ld 2) span
        // 2^32 elements, although m x k with ld 2 would span only 2^31 + 2.
        let p = GemmParams {
            lda: 2,
            ..GemmParams::dense(2, 4, 1 << 31)
        };
        let tn = crate::registry::TRANSPOSED
            .iter()
            .find(|k| k.ops.a == Op::T)
            .expect("a kernel reading A transposed");
        assert_eq!(tn.stored(&p, p.k)[0], (1 << 31, 2, 2));
        let why = tn.unsupported(&p, 1).expect("refused");
        assert!(
            why.starts_with("A spans 2147483648 x 2 = 4294967296"),
            "{why}"
        );
    }
}
