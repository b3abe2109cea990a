//! The arguments every GEMM kernel takes, and the macro that turns a kernel
//! body into a PTX entry point.

use crate::device::{GlobalIn, GlobalOut};
use crate::elem::Element;
pub use crate::epilogue::{Epilogue, EpilogueParams, Output, store_mma_tiles};

/// The kernel ABI: every GEMM entry takes `(A, B, C, params)` (and TMA
/// kernels one more pointer, their tensor maps; FP8 kernels then their
/// scales, [`ScaleParams`]), then the epilogue's arguments
/// ([`EpilogueParams`]), `params` and the others by value. The
/// CUDA C++ twins declare the same struct (`host/cuda/gemm_params.h`), and
/// the host fills it (`host::runner`); a test checks the layout.
///
/// It describes `C = alpha * A * B + beta * C` on row-major matrices with
/// leading dimensions (elements between rows; at least the row length),
/// for a batch of products: block `z` of the grid computes product `z`,
/// whose matrices start `z * stride_*` elements after the first ones.
/// A split-K launch (step 14) is such a batch: product `z` is slice `z` of
/// K (`k_slice` deep, the last one what is left), A and B advance by a
/// slice, and each slice's C is its own partial sum in a workspace.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemmParams {
    /// Rows of A and C.
    pub m: u32,
    /// Columns of B and C.
    pub n: u32,
    /// Columns of A, rows of B.
    pub k: u32,
    /// Elements between rows of A (at least k).
    pub lda: u32,
    /// Elements between rows of B (at least n).
    pub ldb: u32,
    /// Elements between rows of C (at least n).
    pub ldc: u32,
    pub alpha: f32,
    /// 0 means C is written without being read (NaN in C does not leak).
    pub beta: f32,
    /// Split-K: the depth of one slice (product `z` computes K from
    /// `z * k_slice`, at most `k_slice` deep); 0: no split.
    pub k_slice: u32,
    /// Split-K's reduction (`k14_split_k::reduce_slices`): how many partial
    /// sums to add; the GEMM kernels do not read it.
    pub slices: u32,
    /// Elements between the A of one product of a batch and the next.
    pub stride_a: u64,
    pub stride_b: u64,
    pub stride_c: u64,
}

// The layout the PTX entries declare (`.param .align 8 .b8 p[64]`) and
// the C++ twins' struct has (host/cuda/gemm_params.cuh asserts the same).
const _: () = assert!(core::mem::size_of::<GemmParams>() == 64);
const _: () = assert!(core::mem::align_of::<GemmParams>() == 8);

/// The per-tensor scales of an FP8 product, the last parameter of the
/// entries whose A and B are FP8 (`gemm_kernel!(name, scaled, ..)`): the
/// device addresses of one f32 each, as cuBLASLt takes them
/// (`CUBLASLT_MATMUL_DESC_A_SCALE_POINTER`, `_B_`, `_D_`), so that a
/// caller can compute them on the GPU without a synchronization; 0 for a
/// scale of 1. The kernel computes
///
/// `D = scale_d * (alpha * scale_a * scale_b * A * B + beta * C)`
///
/// with A and B the stored FP8 values: `scale_a * A` is the matrix they
/// stand for (what the quantizer divided by `scale_a`), and `scale_d`
/// maps the result into the range of D's type.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScaleParams {
    pub a: u64,
    pub b: u64,
    pub d: u64,
}

const _: () = assert!(core::mem::size_of::<ScaleParams>() == 24);

impl GemmParams {
    /// The depth of product `z`: `k`, or with split-K what is left of it
    /// from slice `z` on, at most `k_slice` (`z * k_slice < k`).
    #[inline(always)]
    pub const fn depth(&self, z: u32) -> u32 {
        if self.k_slice == 0 {
            self.k
        } else {
            let left = self.k - z * self.k_slice;
            if left < self.k_slice {
                left
            } else {
                self.k_slice
            }
        }
    }

    /// One dense product, `C = A * B`: leading dimensions equal to the row
    /// lengths, alpha 1, beta 0.
    pub const fn dense(m: u32, n: u32, k: u32) -> Self {
        Self {
            m,
            n,
            k,
            lda: k,
            ldb: n,
            ldc: n,
            alpha: 1.0,
            beta: 0.0,
            k_slice: 0,
            slices: 0,
            stride_a: 0,
            stride_b: 0,
            stride_c: 0,
        }
    }

    /// [`Self::dense`] for a kernel of layout `ops`: the same product with
    /// A or B stored transposed and dense (A^T's rows `m` apart, B^T's
    /// `k`).
    pub const fn dense_in(m: u32, n: u32, k: u32, ops: crate::launch::Ops) -> Self {
        use crate::launch::Op;
        Self {
            lda: if matches!(ops.a, Op::N) { k } else { m },
            ldb: if matches!(ops.b, Op::N) { n } else { k },
            ..Self::dense(m, n, k)
        }
    }
}

/// What a kernel body receives: one product of the batch, its operands as
/// views of global memory holding the stored types `A`, `B` and `C`
/// ([`crate::elem`]; f32 unless a kernel says otherwise), and the shape,
/// strides and scalars of [`GemmParams`] (as `usize`, so the ladder files
/// index with them). Addressing is the same for every type; the vector
/// loads and the epilogue below are those of the f32 kernels.
#[derive(Clone, Copy, Debug)]
pub struct Gemm<A: Element = f32, B: Element = f32, C: Element = f32> {
    pub a: GlobalIn<A>,
    pub b: GlobalIn<B>,
    pub c: GlobalOut<C>,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// Where this product's K starts in A and B as a TMA kernel addresses
    /// them (by coordinates, in its tensor maps): `z * k_slice` for
    /// split-K's slice `z`, else 0. A pointer kernel's views already
    /// start there, and its bodies never read this.
    pub k0: usize,
    /// Which product of a batch this is as a TMA kernel addresses it (the
    /// third coordinate of its maps: steps 17-18): `z` for a batch, 0 for
    /// one product or a split-K slice. Pointer kernels' views already
    /// start at their product.
    pub product: usize,
    pub lda: usize,
    pub ldb: usize,
    pub ldc: usize,
    pub alpha: f32,
    pub beta: f32,
    /// Split-K's reduction only: partial sums to add ([`GemmParams::slices`]).
    pub slices: usize,
    /// What the stores apply ([`crate::epilogue`]).
    pub ep: Epilogue,
}

/// An FP8 kernel's scales as its body reads them: A's, B's and D's f32s
/// in global memory, `None` for a scale of 1. Per tensor each holds one
/// value; with block scales (`elem::Scaling::Blocks`) A's and B's hold
/// [`Scaling::a_scales`](crate::elem::Scaling::a_scales) and
/// [`Scaling::b_scales`](crate::elem::Scaling::b_scales) values. On the
/// GPU they come from the entry's [`ScaleParams`]; on the emulator from
/// the launch's (`emu::run_scaled`).
#[derive(Clone, Copy, Debug)]
pub struct Scales {
    pub a: Option<GlobalIn<f32>>,
    pub b: Option<GlobalIn<f32>>,
    pub d: Option<GlobalIn<f32>>,
}

impl Scales {
    /// The views of an entry's scales (0: none).
    ///
    /// # Safety
    /// Each non-zero address of `s` holds the f32s the kernel reads there
    /// (per tensor one, per block the block scales) for the whole launch.
    #[cfg(target_arch = "nvptx64")]
    #[inline(always)]
    pub unsafe fn from_params(s: ScaleParams) -> Self {
        let view = |address: u64| {
            // SAFETY: live f32s (this function's contract), read only.
            (address != 0).then(|| unsafe { GlobalIn::from_raw(address as *const f32) })
        };
        Self {
            a: view(s.a),
            b: view(s.b),
            d: view(s.d),
        }
    }

    /// The scales of the emulated launch this thread belongs to (those
    /// given to `emu::run_scaled`; none for `emu::run`).
    #[cfg(not(target_arch = "nvptx64"))]
    pub fn emulated() -> Self {
        crate::emu::backend::scales()
    }

    /// Value `index` of `scale`, 1 where there is none.
    ///
    /// # Safety
    /// `index` is inside the buffer (0 for a per-tensor scale).
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn read(scale: Option<GlobalIn<f32>>, index: usize) -> f32 {
        match scale {
            // SAFETY: in bounds (this function's contract), read only.
            Some(s) => unsafe { s.read(index) },
            None => 1.0,
        }
    }
}

impl<A: Element, B: Element, C: Element> Gemm<A, B, C> {
    /// This product with the per-tensor scales `s` folded into its
    /// scalars: `alpha * scale_a * scale_b * scale_d` and `beta * scale_d`
    /// (0 stays 0, so C stays unread where it was), each scale read from
    /// global memory once per thread (the three words are shared by every
    /// thread: cached after the first reads). Call it after any decision
    /// taken on the caller's `beta` (`launch::c_by_tma`), which the host
    /// took too. A kernel with block scales passes D's alone.
    ///
    /// # Safety
    /// Each scale of `s` holds at least one f32.
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn scaled_by(self, s: Scales) -> Self {
        // SAFETY: one value each (this function's contract).
        let (a, b, d) = unsafe {
            (
                Scales::read(s.a, 0),
                Scales::read(s.b, 0),
                Scales::read(s.d, 0),
            )
        };
        Self {
            alpha: self.alpha * a * b * d,
            beta: if self.beta == 0.0 { 0.0 } else { self.beta * d },
            ..self
        }
    }

    /// [`Self::scaled_by`] the scales of an entry's parameters.
    ///
    /// # Safety
    /// Each non-zero address of `s` holds an f32 for the whole launch.
    #[cfg(target_arch = "nvptx64")]
    #[inline(always)]
    pub unsafe fn scaled(self, s: ScaleParams) -> Self {
        // SAFETY: forwarded from this function's contract.
        unsafe { self.scaled_by(Scales::from_params(s)) }
    }
}

impl Gemm {
    /// A, B and C start on 16-byte boundaries and their leading
    /// dimensions are multiples of 4: a row's float4 at a column that is a
    /// multiple of 4 is one aligned 128-bit access. The kernels' vector
    /// paths need it; without it they take their guarded paths.
    ///
    /// A method, not a field computed at entry: where a kernel asks only
    /// in its epilogue ([`Self::vec2_c`]), a flag computed at entry from
    /// the pointers stays live across the main loop, and that register
    /// made step 11's largest tiles spill.
    #[inline(always)]
    pub fn vec4(self) -> bool {
        self.a.aligned(16)
            && self.b.aligned(16)
            && self.c.aligned(16)
            && (self.lda | self.ldb | self.ldc).is_multiple_of(4)
    }
}

impl<A: Element, B: Element> Gemm<A, B, f32> {
    /// C starts on an 8-byte boundary and `ldc` is even (64-bit stores).
    #[inline(always)]
    pub fn vec2_c(self) -> bool {
        self.c.aligned(8) && self.ldc.is_multiple_of(2)
    }

    /// C starts on a 16-byte boundary and `ldc` is a multiple of 4
    /// (128-bit stores), whatever A and B (step 10's guarded blocks that
    /// lie inside C: K not a multiple of BK, or A or B unaligned).
    #[inline(always)]
    pub fn vec4_c(self) -> bool {
        self.c.aligned(16) && self.ldc.is_multiple_of(4)
    }
}

#[cfg(target_arch = "nvptx64")]
impl<A: Element, B: Element, C: Element> Gemm<A, B, C> {
    /// Builds the arguments from a kernel's raw parameters, for a launch
    /// of one product (`gridDim.z == 1`): A, B and C are the parameters
    /// themselves (PTX entries only; on the host the emulator builds
    /// `Gemm` from checked buffers).
    ///
    /// # Safety
    /// `a`, `b` and `c` address live device buffers that hold an `m x k`,
    /// `k x n` and `m x n` matrix with the leading dimensions of `p` for
    /// the whole launch (with split-K, `k` the slice's depth, and
    /// `k_slice < k` unless it is 0); C overlaps neither input; `ep`'s
    /// vectors are as [`Epilogue::from_params`] requires.
    #[inline(always)]
    pub unsafe fn from_raw(
        a: *const A,
        b: *const B,
        c: *mut C,
        p: GemmParams,
        ep: EpilogueParams,
    ) -> Self {
        // SAFETY: forwarded from this function's contract.
        unsafe {
            Self::new(
                GlobalIn::from_raw(a),
                GlobalIn::from_raw(b),
                GlobalOut::from_raw(c),
                p,
                0,
                Epilogue::from_params(ep),
            )
        }
    }

    /// [`Self::from_raw`] for product `blockIdx.z` of a batch (a split-K
    /// slice included): A, B and C move by `z * stride_*` elements.
    ///
    /// Why two constructors (`gemm_kernel!` picks one by `gridDim.z`): a
    /// pointer moved by a run-time offset is a computed value the whole
    /// kernel keeps in registers, where a parameter is reloaded from the
    /// constant bank when needed; the best FP32 kernels lost 3-5 % to it
    /// at n = 4096, so one-product launches (most) keep the parameters.
    ///
    /// # Safety
    /// As [`Self::from_raw`] for every `z < gridDim.z` with the pointers
    /// moved by `z * stride_*`; no product's C overlaps an input or
    /// another product's C.
    #[inline(always)]
    pub unsafe fn from_raw_batched(
        a: *const A,
        b: *const B,
        c: *mut C,
        p: GemmParams,
        ep: EpilogueParams,
    ) -> Self {
        let z = crate::device::block_idx_z() as u64;
        let (a, b, c) = (
            a.wrapping_add((z * p.stride_a) as usize),
            b.wrapping_add((z * p.stride_b) as usize),
            c.wrapping_add((z * p.stride_c) as usize),
        );
        // SAFETY: forwarded from this function's contract.
        unsafe {
            Self::new(
                GlobalIn::from_raw(a),
                GlobalIn::from_raw(b),
                GlobalOut::from_raw(c),
                p,
                z as u32,
                Epilogue::from_params(ep),
            )
        }
    }
}

impl<A: Element, B: Element, C: Element> Gemm<A, B, C> {
    /// Product `z`'s arguments on the views `a`, `b`, `c` (already at
    /// that product): with split-K its depth is what is left of K from
    /// slice `z` on, at most `k_slice`. Every product of a batch has the
    /// same epilogue `ep` (one bias and one set of scales).
    #[inline(always)]
    pub(crate) fn new(
        a: GlobalIn<A>,
        b: GlobalIn<B>,
        c: GlobalOut<C>,
        p: GemmParams,
        z: u32,
        ep: Epilogue,
    ) -> Self {
        let k = p.depth(z);
        Self {
            a,
            b,
            c,
            m: p.m as usize,
            n: p.n as usize,
            k: k as usize,
            k0: (z * p.k_slice) as usize,
            product: z as usize * (p.k_slice == 0) as usize,
            lda: p.lda as usize,
            ldb: p.ldb as usize,
            ldc: p.ldc as usize,
            alpha: p.alpha,
            beta: p.beta,
            slices: p.slices as usize,
            ep,
        }
    }
}

/// The most elements one matrix may span (`(rows - 1) * ld + cols`, the
/// offset of its last element plus one): the kernels compute element
/// offsets within a matrix in 32 bits (see [`Gemm::a_index`]); the host
/// refuses larger matrices.
pub const MAX_ELEMS: usize = u32::MAX as usize;

/// The `(row, column)` of the tile of C this block computes, numbering the
/// blocks down the grid's columns: the grid has a column of blocks per
/// tile of C's columns and a row per tile of its rows (`Launch::grid`),
/// and the block numbered `b` in launch order (`blockIdx.x` first) takes
/// the tile numbered `b` down the columns, so the blocks of one column,
/// which read the same rows of B, run together (steps 28 and 30: the
/// first to ask for a line of the weight takes it from DRAM and the
/// others from L2).
#[inline(always)]
pub fn tile_down_columns() -> (usize, usize) {
    use crate::device::{block_idx_x, block_idx_y, grid_dim_x, grid_dim_y};
    let (bx, by) = (block_idx_x(), block_idx_y());
    let rows = grid_dim_y();
    let b = by * grid_dim_x() + bx;
    (b % rows, b / rows)
}

/// The elements a `rows x cols` matrix with rows `ld` apart spans: the
/// offset of its last element plus one (`(rows - 1) * ld + cols`), 0 for
/// an empty matrix.
pub const fn span(rows: u32, cols: u32, ld: u32) -> u64 {
    if rows == 0 || cols == 0 {
        return 0;
    }
    (rows as u64 - 1) * ld as u64 + cols as u64
}

impl<A: Element, B: Element, C: Element> Gemm<A, B, C> {
    /// `(m, n, k)` as `u32`, the type of the offset helpers' coordinates
    /// (the parameters are `u32`, so nothing is lost).
    #[inline(always)]
    pub fn dims32(self) -> (u32, u32, u32) {
        (self.m as u32, self.n as u32, self.k as u32)
    }

    /// The index of `A[row][col]` in A's buffer, `row * lda + col`.
    ///
    /// Computed in 32 bits with a promise of no wrap-around
    /// (`unchecked_mul`, `unchecked_add`), which is what lets LLVM turn a
    /// loop's offsets into pointer steps with 32-bit strides (one `IMAD.WIDE`
    /// per step in SASS) and keep loads in flight; `usize` arithmetic gives
    /// 64-bit strides (two instructions per step), wrapping `u32`
    /// arithmetic gives neither. docs/rust-vs-cuda.md has the measurements.
    ///
    /// # Safety
    /// `row < m` and `col < k`, and A spans at most [`MAX_ELEMS`] elements
    /// (`(m - 1) * lda + k`: the host guarantees it), so the offset fits
    /// in a `u32`.
    #[inline(always)]
    pub unsafe fn a_index(self, row: u32, col: u32) -> usize {
        // SAFETY: row * lda + col < (m - 1) * lda + k <= MAX_ELEMS.
        unsafe { offset32(row, self.lda as u32, col) }
    }

    /// The index of `B[row][col]`, `row * ldb + col`; as [`Self::a_index`].
    ///
    /// # Safety
    /// `row < k` and `col < n`; B spans at most [`MAX_ELEMS`] elements.
    #[inline(always)]
    pub unsafe fn b_index(self, row: u32, col: u32) -> usize {
        // SAFETY: row * ldb + col < (k - 1) * ldb + n <= MAX_ELEMS.
        unsafe { offset32(row, self.ldb as u32, col) }
    }

    /// The index of `C[row][col]`, `row * ldc + col`; as [`Self::a_index`].
    ///
    /// # Safety
    /// `row < m` and `col < n`; C spans at most [`MAX_ELEMS`] elements.
    #[inline(always)]
    pub unsafe fn c_index(self, row: u32, col: u32) -> usize {
        // SAFETY: row * ldc + col < (m - 1) * ldc + n <= MAX_ELEMS.
        unsafe { offset32(row, self.ldc as u32, col) }
    }
}

impl<A: Element, B: Element, C: Element> Gemm<A, B, C> {
    /// A and B start on 16-byte boundaries and so does every row of them
    /// (`lda` and `ldb` in bytes are multiples of 16): a 16-byte chunk of
    /// a row at a column that is a multiple of `16 / size` is one aligned
    /// access, for any stored type (what [`Self::vec4`] says for f32).
    #[inline(always)]
    pub fn rows16(self) -> bool {
        self.a.aligned(16)
            && self.b.aligned(16)
            && (self.lda * core::mem::size_of::<A>()).is_multiple_of(16)
            && (self.ldb * core::mem::size_of::<B>()).is_multiple_of(16)
    }

    /// These emulator buffers viewed as other stored types (the
    /// emulator's launches are typed f32; a body of other types runs on
    /// `g.retyped()`, see [`GlobalIn::retyped`]).
    #[cfg(not(target_arch = "nvptx64"))]
    pub fn retyped<A2: Element, B2: Element, C2: Element>(self) -> Gemm<A2, B2, C2> {
        Gemm {
            a: self.a.retyped(),
            b: self.b.retyped(),
            c: self.c.retyped(),
            m: self.m,
            n: self.n,
            k: self.k,
            k0: self.k0,
            product: self.product,
            lda: self.lda,
            ldb: self.ldb,
            ldc: self.ldc,
            alpha: self.alpha,
            beta: self.beta,
            slices: self.slices,
            ep: self.ep,
        }
    }
}

/// `row * width + col` in `u32` arithmetic that must not wrap.
///
/// # Safety
/// The exact result is at most `u32::MAX`.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub(crate) unsafe fn offset32(row: u32, width: u32, col: u32) -> usize {
    // SAFETY: forwarded: the product and the sum fit in 32 bits (and so
    // do the factors, which are at most the result or zero).
    unsafe { row.unchecked_mul(width).unchecked_add(col) as usize }
}

impl Gemm {
    /// `M[row][col..col + 4]` of the matrix `m` (A or B as stored, `rows x
    /// cols`), where `idx` is that element's index. Guarded (`GUARD =
    /// true`): four scalar loads, elements outside the matrix read as zero,
    /// any indices allowed. Unguarded: one 128-bit load.
    ///
    /// # Safety
    /// Unguarded only: `row < rows`, `col + 4 <= cols`, `idx % 4 == 0`
    /// and the rows of `m` on 16 bytes ([`Gemm::rows16`] or [`Gemm::vec4`]).
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn read4<const GUARD: bool>(
        self,
        m: GlobalIn,
        (row, rows): (usize, usize),
        (col, cols): (usize, usize),
        idx: usize,
    ) -> [f32; 4] {
        if !GUARD {
            // SAFETY: in bounds and 16-byte aligned by this function's contract.
            return unsafe { m.read4(idx) };
        }
        let mut v = [0.0f32; 4];
        crate::unroll::unroll!(4; 4, |j| {
            if row < rows && col + j < cols {
                // SAFETY: inside the matrix.
                v[j] = unsafe { m.read(idx + j) };
            }
        });
        v
    }

    /// `A[row][col..col + 4]`, where `idx == row * lda + col`. Guarded
    /// (`GUARD = true`): four scalar loads, elements outside A read as
    /// zero, any indices allowed. Unguarded: one 128-bit load.
    ///
    /// # Safety
    /// Unguarded only: `row < m`, `col + 4 <= k`, `idx % 4 == 0` and
    /// [`Gemm::vec4`].
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn read_a4<const GUARD: bool>(self, row: usize, col: usize, idx: usize) -> [f32; 4] {
        if !GUARD {
            // SAFETY: in bounds and 16-byte aligned by this function's contract.
            return unsafe { self.a.read4(idx) };
        }
        let mut v = [0.0f32; 4];
        crate::unroll::unroll!(4; 4, |j| {
            if row < self.m && col + j < self.k {
                // SAFETY: row < m and col + j < k: inside A.
                v[j] = unsafe { self.a.read(idx + j) };
            }
        });
        v
    }

    /// `B[row][col..col + 4]`, where `idx == row * ldb + col`; as
    /// [`Self::read_a4`] with `k` and `n` for the bounds.
    ///
    /// # Safety
    /// Unguarded only: `row < k`, `col + 4 <= n`, `idx % 4 == 0` and
    /// [`Gemm::vec4`].
    #[inline(always)]
    #[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
    pub unsafe fn read_b4<const GUARD: bool>(self, row: usize, col: usize, idx: usize) -> [f32; 4] {
        if !GUARD {
            // SAFETY: in bounds and 16-byte aligned by this function's contract.
            return unsafe { self.b.read4(idx) };
        }
        let mut v = [0.0f32; 4];
        crate::unroll::unroll!(4; 4, |j| {
            if row < self.k && col + j < self.n {
                // SAFETY: row < k and col + j < n: inside B.
                v[j] = unsafe { self.b.read(idx + j) };
            }
        });
        v
    }
}

/// Exports a kernel body `fn name(Gemm)` as the PTX entry `name` with the
/// parameters `(const A* A, const B* B, C* C, GemmParams p)`, which runs
/// the body on `Gemm::from_raw` for one product and on
/// `Gemm::from_raw_batched` for a batch; `gemm_kernel!(name, one_product)`
/// only the first (`KernelSpec::batches` false); `gemm_kernel!(name,
/// strided, elems(..))` the second for both (one copy of the body);
/// `gemm_kernel!(name, tensor_maps)` a body `fn name(Gemm, TensorMaps)`
/// with one more parameter, `const u8* maps`; `gemm_kernel!(name,
/// tensor_maps, sliced)` the same for split-K's slices over the grid's z
/// (C moved to slice z's plane, `Gemm::k0` its K origin).
///
/// The stored types are f32 in these forms; a kernel of other element
/// types names them after its kind, `gemm_kernel!(name, tensor_maps,
/// elems(Bf16, Bf16, f32))` (A, B, C: [`Element`] types, which must be its
/// spec's `elems`). Pointer parameters are untyped in PTX, so the types
/// change the body, never the ABI.
#[macro_export]
macro_rules! gemm_kernel {
    ($name:ident) => {
        $crate::gemm_kernel!($name, batched, elems(f32, f32, f32));
    };
    ($name:ident, one_product) => {
        $crate::gemm_kernel!($name, one_product, elems(f32, f32, f32));
    };
    ($name:ident, tensor_maps) => {
        $crate::gemm_kernel!($name, tensor_maps, elems(f32, f32, f32));
    };
    // An f32 TMA kernel that also takes split-K's slices (`TmaBoxes::
    // slices`): product `blockIdx.z` is slice z, whose partial sums go to
    // plane z of the workspace (C moved by `z * stride_c`) and whose K
    // starts at `Gemm::k0` in A's and B's maps (the maps describe the
    // whole operands; the pointers A and B, moved too, are not read).
    ($name:ident, tensor_maps, sliced) => {
        $crate::gemm_kernel!(@maps_entry $name, from_raw_batched, f32, f32, f32);
    };
    // An f32 kernel with a second entry, `$split`, that splits K inside
    // one launch (`crate::split`; `$spec` its tile and block): the
    // batched entry above, and `$split(A, B, C, params, epilogue, split)`.
    ($name:ident, split $split:ident, $spec:ident) => {
        $crate::gemm_kernel!($name);
        #[cfg(target_arch = "nvptx64")]
        mod split_entry {
            use $crate::gemm::{EpilogueParams, Gemm, GemmParams};
            use $crate::split::SplitParams;

            /// PTX entry point: the body of the same name in the parent
            /// module on slice `blockIdx.z` of K, then its tile's sum
            /// ([`crate::split::finish`]).
            ///
            /// # Safety
            /// Launched by the host with the geometry of the kernel's
            /// `SPEC` and `gridDim.z` slices of `p.k_slice`, A and B as
            /// `Gemm::from_raw_batched` requires (the slices' strides),
            /// C as `Gemm::from_raw` does, and `s` as
            /// [`SplitParams`] describes it.
            #[unsafe(no_mangle)]
            pub unsafe extern "ptx-kernel" fn $split(
                a: *const f32,
                b: *const f32,
                c: *mut f32,
                p: GemmParams,
                ep: EpilogueParams,
                s: SplitParams,
            ) {
                let ws = s.workspace as *mut f32;
                // Slice z's partial sums: plane z, dense, as they are.
                let part = GemmParams {
                    ldc: p.n,
                    alpha: 1.0,
                    beta: 0.0,
                    stride_c: p.m as u64 * p.n as u64,
                    ..p
                };
                let spec = &super::$spec;
                // SAFETY: the host upholds the launch contract above.
                unsafe {
                    $crate::split::in_launch(
                        super::$name,
                        Gemm::from_raw_batched(a, b, ws, part, EpilogueParams::NONE),
                        Gemm::from_raw(a, b, c, p, ep),
                        $crate::split::Split {
                            ws: $crate::device::GlobalOut::from_raw(ws),
                            counters: $crate::device::atomic::Counters::from_raw(
                                s.counters as *mut u32,
                            ),
                            slices: $crate::device::grid_dim_z(),
                            tile: spec.launch.block_tile,
                            threads: spec.launch.block_threads.0 as usize,
                        },
                    )
                }
            }
        }
    };
    ($name:ident, batched, elems($a:ty, $b:ty, $c:ty)) => {
        #[cfg(target_arch = "nvptx64")]
        mod entry {
            // The 16-bit types by name, for `elems(Bf16, ...)` (the types
            // are resolved in this module, not in the kernel's).
            #[allow(unused_imports)]
            use $crate::elem::{Bf16, F16};

            /// PTX entry point; see the body of the same name in the parent module.
            ///
            /// # Safety
            /// Launched by the host with the geometry of the kernel's `SPEC`
            /// and buffers as [`Gemm::from_raw`](crate::gemm::Gemm::from_raw) requires.
            #[unsafe(no_mangle)]
            pub unsafe extern "ptx-kernel" fn $name(
                a: *const $a,
                b: *const $b,
                c: *mut $c,
                p: $crate::gemm::GemmParams,
                ep: $crate::gemm::EpilogueParams,
            ) {
                // Uniform: one product, or a batch (split-K included).
                if $crate::device::grid_dim_z() == 1 {
                    // SAFETY: the host upholds the launch contract above.
                    super::$name(unsafe { $crate::gemm::Gemm::from_raw(a, b, c, p, ep) })
                } else {
                    // SAFETY: as above, for every product of the batch.
                    super::$name(unsafe { $crate::gemm::Gemm::from_raw_batched(a, b, c, p, ep) })
                }
            }
        }
    };
    // One body for one product and for a batch: `Gemm::from_raw_batched`
    // even at z = 0 (half the code of `batched`, whose one-product copy
    // keeps the parameters in the constant bank; for kernels that are not
    // the fastest of their kind, where the driver's compile time counts).
    ($name:ident, strided, elems($a:ty, $b:ty, $c:ty)) => {
        $crate::gemm_kernel!(@one_body $name, from_raw_batched, $a, $b, $c);
    };
    // A kernel that computes one product per launch (`KernelSpec::batches`
    // false; the host never launches it with gridDim.z > 1).
    ($name:ident, one_product, elems($a:ty, $b:ty, $c:ty)) => {
        $crate::gemm_kernel!(@one_body $name, from_raw, $a, $b, $c);
    };
    // The entry of the two forms above: the body once, on `Gemm::$make`.
    (@one_body $name:ident, $make:ident, $a:ty, $b:ty, $c:ty) => {
        #[cfg(target_arch = "nvptx64")]
        mod entry {
            // The 16-bit types by name, for `elems(Bf16, ...)` (the types
            // are resolved in this module, not in the kernel's).
            #[allow(unused_imports)]
            use $crate::elem::{Bf16, F16};

            /// PTX entry point; see the body of the same name in the parent module.
            ///
            /// # Safety
            /// Launched by the host with the geometry of the kernel's `SPEC`
            /// and buffers as `Gemm::from_raw` requires: one product for
            /// `one_product` kernels, every product of the batch (moved by
            /// `z * stride_*`) for `strided` ones.
            #[unsafe(no_mangle)]
            pub unsafe extern "ptx-kernel" fn $name(
                a: *const $a,
                b: *const $b,
                c: *mut $c,
                p: $crate::gemm::GemmParams,
                ep: $crate::gemm::EpilogueParams,
            ) {
                // SAFETY: the host upholds the launch contract above.
                super::$name(unsafe { $crate::gemm::Gemm::$make(a, b, c, p, ep) })
            }
        }
    };
    // A TMA kernel of FP8 A and B: the tensor maps, then the per-tensor
    // scales (`ScaleParams`, by value).
    ($name:ident, scaled, elems($a:ty, $b:ty, $c:ty)) => {
        #[cfg(target_arch = "nvptx64")]
        mod entry {
            // The stored types by name, for `elems(E4m3, ...)` (resolved
            // in this module, not in the kernel's).
            #[allow(unused_imports)]
            use $crate::elem::{Bf16, E4m3, E5m2, F16};

            /// PTX entry point; see the body of the same name in the parent module.
            ///
            /// # Safety
            /// As a `tensor_maps` entry, and each non-zero address of
            /// `scales` holds an f32 for the whole launch.
            #[unsafe(no_mangle)]
            pub unsafe extern "ptx-kernel" fn $name(
                a: *const $a,
                b: *const $b,
                c: *mut $c,
                p: $crate::gemm::GemmParams,
                maps: *const u8,
                scales: $crate::gemm::ScaleParams,
                ep: $crate::gemm::EpilogueParams,
            ) {
                // SAFETY: the host upholds the launch contract above.
                unsafe {
                    super::$name(
                        $crate::gemm::Gemm::from_raw(a, b, c, p, ep),
                        $crate::device::tma::TensorMaps::from_raw(maps),
                        scales,
                    )
                }
            }
        }
    };
    // A pointer kernel of FP8 A and B (step 27): the scales last
    // (`ScaleParams`, by value), handed to the body as `Scales`.
    ($name:ident, scaled_pointers, elems($a:ty, $b:ty, $c:ty)) => {
        #[cfg(target_arch = "nvptx64")]
        mod entry {
            // The stored types by name, for `elems(E4m3, ...)` (resolved
            // in this module, not in the kernel's).
            #[allow(unused_imports)]
            use $crate::elem::{Bf16, E4m3, E5m2, F16};

            /// PTX entry point; see the body of the same name in the parent module.
            ///
            /// # Safety
            /// Launched by the host with the geometry of the kernel's `SPEC`
            /// and buffers as `Gemm::from_raw` requires, one product; each
            /// non-zero address of `scales` holds the f32s the kernel reads
            /// there (`Scales::from_params`) for the whole launch.
            #[unsafe(no_mangle)]
            pub unsafe extern "ptx-kernel" fn $name(
                a: *const $a,
                b: *const $b,
                c: *mut $c,
                p: $crate::gemm::GemmParams,
                scales: $crate::gemm::ScaleParams,
                ep: $crate::gemm::EpilogueParams,
            ) {
                // SAFETY: the host upholds the launch contract above.
                unsafe {
                    super::$name(
                        $crate::gemm::Gemm::from_raw(a, b, c, p, ep),
                        $crate::gemm::Scales::from_params(scales),
                    )
                }
            }
        }
    };
    // A TMA kernel (`Operands::TensorMaps`): one more parameter, the
    // address of A's and B's tensor maps in device memory.
    ($name:ident, tensor_maps, elems($a:ty, $b:ty, $c:ty)) => {
        $crate::gemm_kernel!(@maps_entry $name, from_raw, $a, $b, $c);
    };
    // The entry of the two TMA forms above: the body on `Gemm::$make`
    // (`from_raw`: one product; `from_raw_batched`: split-K's slices).
    (@maps_entry $name:ident, $make:ident, $a:ty, $b:ty, $c:ty) => {
        #[cfg(target_arch = "nvptx64")]
        mod entry {
            // The 16-bit types by name, for `elems(Bf16, ...)` (the types
            // are resolved in this module, not in the kernel's).
            #[allow(unused_imports)]
            use $crate::elem::{Bf16, F16};

            /// PTX entry point; see the body of the same name in the parent module.
            ///
            /// # Safety
            /// Launched by the host with the geometry of the kernel's `SPEC`
            /// (and, for a `sliced` kernel, `gridDim.z` slices of
            /// `p.k_slice`), buffers as the body's `Gemm` constructor
            /// ([`Gemm::from_raw`](crate::gemm::Gemm::from_raw) or
            /// [`Gemm::from_raw_batched`](crate::gemm::Gemm::from_raw_batched))
            /// requires and `maps` as
            /// [`TensorMaps::from_raw`](crate::device::tma::TensorMaps::from_raw)
            /// requires (describing the whole of A and B).
            #[unsafe(no_mangle)]
            pub unsafe extern "ptx-kernel" fn $name(
                a: *const $a,
                b: *const $b,
                c: *mut $c,
                p: $crate::gemm::GemmParams,
                maps: *const u8,
                ep: $crate::gemm::EpilogueParams,
            ) {
                // SAFETY: the host upholds the launch contract above.
                unsafe {
                    super::$name(
                        $crate::gemm::Gemm::$make(a, b, c, p, ep),
                        $crate::device::tma::TensorMaps::from_raw(maps),
                    )
                }
            }
        }
    };
}
