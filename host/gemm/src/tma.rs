//! Tensor maps for the TMA kernels (step 12): what the copy engine needs to
//! know about A and B, made by the driver (`cuTensorMapEncodeTiled`) on the
//! host and copied to device memory, where the kernel reads them by
//! address (rustc cannot pass them by value; see `kernels_gpu::device::tma`).
//!
//! A map is made for one buffer and one shape, so a kernel's maps are made
//! again whenever it is launched on other buffers or another shape
//! ([`DeviceMaps`]); within one verified and timed run they are made once,
//! before the first (untimed) launch.

use cudarc::driver::sys::{
    self, CUdeviceptr, CUtensorMap, CUtensorMapDataType, CUtensorMapFloatOOBfill,
    CUtensorMapInterleave, CUtensorMapL2promotion, CUtensorMapSwizzle,
};
use cudarc::driver::{CudaFunction, CudaSlice, LaunchConfig, PushKernelArg};
use kernels_gpu::elem::Elem;
use kernels_gpu::launch::{Padding, TENSOR_MAP_BYTES, TmaBoxes, TmaCopy};

use crate::HostError;
use crate::call::GemmCall;
use crate::gpu::Gpu;
use kernels_gpu::gemm::GemmParams;

/// A row-major matrix in device memory, as a tensor map describes it (an
/// operand as the kernel's layout stores it: A^T is k x m).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Operand {
    pub ptr: CUdeviceptr,
    /// The stored type of its elements.
    pub elem: Elem,
    pub rows: usize,
    pub cols: usize,
    /// Elements between rows (a multiple of 16 bytes' worth: TMA's strides).
    pub ld: usize,
    /// The products of a batch, `stride` elements apart (a multiple of 16
    /// bytes' worth), for a kernel whose maps have them as a third
    /// dimension (`TmaBoxes::slices`); 1 and any stride for one product.
    pub products: usize,
    pub stride: usize,
}

/// TMA's name for a stored type.
pub fn tma_data_type(elem: Elem) -> CUtensorMapDataType {
    match elem {
        Elem::F32 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
        Elem::Bf16 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        Elem::F16 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        // FP8 as bytes (TMA has no FP8 type; it moves bits).
        Elem::E4m3 | Elem::E5m2 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_UINT8,
    }
}

/// The bytes of A's map followed by B's (and C's, when the kernel stores
/// C by TMA: `c`, which the caller gives only where `boxes.c` is set and
/// `kernels_gpu::launch::c_by_tma` holds), as the kernel expects them: A's
/// and B's with the products of a batch as a third dimension where the
/// kernel reads them so (`boxes.slices`: steps 17-18).
pub fn encode(
    boxes: &TmaBoxes,
    a: Operand,
    b: Operand,
    c: Option<Operand>,
) -> Result<Vec<u8>, HostError> {
    let a_map = encode_map(
        "A",
        a,
        boxes.slices,
        boxes.a,
        if boxes.a_swizzle_128 {
            CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B
        } else {
            CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE
        },
    )?;
    let b_map = encode_map(
        if boxes.copy.b_transposed() {
            "B^T"
        } else {
            "B"
        },
        b,
        boxes.slices,
        boxes.b,
        if boxes.b_swizzle_128 {
            CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B
        } else {
            CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE
        },
    )?;
    // C's boxes: the rows of one warp, 128 bytes of each, swizzled as the
    // kernel stages them (`kernels_gpu::k22_wgmma_tma_store`).
    let c_map = match (c, boxes.c) {
        (Some(c), Some(box_)) => Some(encode_map(
            "C",
            c,
            false,
            box_,
            CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
        )?),
        _ => None,
    };
    let maps = [Some(a_map), Some(b_map), c_map];
    let mut bytes = Vec::with_capacity(3 * TENSOR_MAP_BYTES);
    for map in maps.iter().flatten() {
        bytes.extend(map.opaque.iter().flat_map(|word| word.to_le_bytes()));
    }
    debug_assert_eq!(bytes.len() % TENSOR_MAP_BYTES, 0);
    Ok(bytes)
}

/// The map of `op`, copied in boxes of `box_.0` rows by `box_.1` columns;
/// zeros outside the matrix. With `batched`, a third dimension: `op`'s
/// products, each box in one of them.
fn encode_map(
    which: &str,
    op: Operand,
    batched: bool,
    box_: (u32, u32),
    swizzle: CUtensorMapSwizzle,
) -> Result<CUtensorMap, HostError> {
    let (ptr, rows, cols) = (op.ptr, op.rows as u64, op.cols as u64);
    let bytes = op.elem.bytes() as u64;
    // Innermost dimension first: columns, rows, products.
    let dims = [cols, rows, op.products.max(1) as u64];
    // Byte stride of every dimension but the first; one product's stride
    // is never stepped, so any multiple of 16 bytes will do.
    let stride = if op.products > 1 {
        op.stride as u64 * bytes
    } else {
        (rows * op.ld as u64 * bytes).next_multiple_of(16)
    };
    let strides = [op.ld as u64 * bytes, stride];
    let box_dims = [box_.1, box_.0, 1];
    let element_strides = [1u32, 1, 1];
    let rank = if batched { 3 } else { 2 };
    let mut map = CUtensorMap { opaque: [0; 16] };
    // SAFETY: every pointer argument points at an array of at least the
    // rank (3 at most) or rank - 1 entries the driver reads; `map` is
    // written by it.
    unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut map,
            tma_data_type(op.elem),
            rank,
            ptr as *mut std::ffi::c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            box_dims.as_ptr(),
            element_strides.as_ptr(),
            CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            swizzle,
            CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    }
    .result()
    .map_err(HostError::cuda(&format!(
        "making {which}'s tensor map ({}{rows} x {cols} {}, boxes of {} x {})",
        if batched && op.products > 1 {
            format!("{} products of ", op.products)
        } else {
            String::new()
        },
        op.elem.name(),
        box_.0,
        box_.1
    )))?;
    Ok(map)
}

/// A kernel's tensor maps in device memory, and what they were made for.
pub struct DeviceMaps {
    made_for: (Operand, Operand, Option<Operand>),
    pub maps: CudaSlice<u8>,
}

impl DeviceMaps {
    /// Maps for A and B (and C, for a kernel that stores C by TMA, as
    /// [`encode`] says), copied to the GPU on its stream (ordered before
    /// any launch enqueued after this call).
    pub fn for_operands(
        gpu: &Gpu,
        boxes: &TmaBoxes,
        (a, b, c): (Operand, Operand, Option<Operand>),
    ) -> Result<DeviceMaps, HostError> {
        let bytes = encode(boxes, a, b, c)?;
        let maps = gpu
            .stream
            .clone_htod(&bytes)
            .map_err(HostError::cuda("copying tensor maps to the GPU"))?;
        Ok(DeviceMaps {
            made_for: (a, b, c),
            maps,
        })
    }

    /// Whether these maps describe `operands`.
    pub fn describe(&self, operands: &(Operand, Operand, Option<Operand>)) -> bool {
        self.made_for == *operands
    }
}

/// Copies of A and B with their stored rows padded to 128-byte multiples
/// (`KernelSpec::copy_row_align` elements: 32 for f32, 64 for BF16 and
/// FP16), for a TMA kernel at a problem whose rows TMA cannot describe
/// (`KernelSpec::padded`: not 16-byte multiples, or a start that is not
/// 16-byte aligned): only the operands that need it, each
/// as stored in the kernel's layout (A^T is k x m). Allocated once per
/// problem; every launch copies A and B into them, zeros in the padding
/// (`kernels_gpu::pad`, on the stream before the kernel, so the copies
/// are part of what is timed). The workspace is each copy's rows times
/// its padded leading dimension, in elements of the stored type.
///
/// For a kernel that reads an operand transposed (`TmaCopy::Transposed`,
/// step 17), B's copy is B^T (n x k rounded up, rounded to TF32) and
/// A's, of A^T, is A (m x k rounded up), at every shape; for a 3xTF32
/// kernel (`TmaCopy::SplitTf32`, step 24), A's and
/// B^T's copies hold both TF32 parts of every value (rows of 2 k rounded
/// up), at every shape.
pub struct Padded {
    /// A's and B's stored shapes `(rows, cols)` and the copies it was
    /// made for.
    made_for: ([(usize, usize); 2], Padding, TmaCopy),
    /// A's and B's stored type.
    elem: Elem,
    /// A's copy, if A is copied.
    a: Option<Copy>,
    /// B's copy (or B^T's), if B is copied.
    b: Option<Copy>,
    /// `kernels_gpu::pad`'s padding entries for the stored type's size
    /// (one copy, and, for 16-bit types, A's and B's in one launch), and
    /// how many elements each of their threads writes.
    pad: CudaFunction,
    pad_pair: Option<CudaFunction>,
    per_thread: usize,
    /// `kernels_gpu::pad::transpose_tf32` (or `transpose_split_tf32`),
    /// for a kernel that reads B^T (`transpose_b`), or A from A^T
    /// (`transpose_a`).
    transpose: Option<CudaFunction>,
    transpose_a: bool,
    transpose_b: bool,
    /// `kernels_gpu::pad::split_rows_tf32`, for a 3xTF32 kernel's A.
    split: Option<CudaFunction>,
}

/// A zeroed device buffer, its address and its rows' length.
struct Copy {
    _buffer: CudaSlice<u8>,
    ptr: CUdeviceptr,
    ld: usize,
}

/// A zeroed device buffer of `rows` rows of `ld` elements of `elem`.
fn zeros(gpu: &Gpu, elem: Elem, (rows, ld): (usize, usize), what: &str) -> Result<Copy, HostError> {
    let len = rows * ld;
    let buffer = gpu
        .stream
        .alloc_zeros::<u8>(len * elem.bytes())
        .map_err(HostError::cuda(format!(
            "allocating the padded copy of {what} ({len} {} elements) for TMA",
            elem.name()
        )))?;
    let ptr = crate::gpu::device_address(gpu, &buffer);
    Ok(Copy {
        _buffer: buffer,
        ptr,
        ld,
    })
}

impl Padded {
    /// Whether these copies serve A and B stored `stored` with `padding`
    /// and `copy` for `storage` (what [`Self::for_problem`] would reuse).
    pub fn serves(
        &self,
        stored: [(usize, usize); 2],
        padding: Padding,
        copy: TmaCopy,
        storage: kernels_gpu::elem::Storage,
    ) -> bool {
        self.made_for == (stored, padding, copy) && self.elem == storage.a
    }

    /// `cached` if it was made for the same stored shapes of A and B
    /// (`(rows, cols)` each) and the same copies, else new zeroed buffers.
    pub fn for_problem(
        cached: Option<Padded>,
        gpu: &Gpu,
        stored: [(usize, usize); 2],
        padding: Padding,
        copy: TmaCopy,
        storage: kernels_gpu::elem::Storage,
    ) -> Result<Padded, HostError> {
        let elem = storage.a;
        let (transpose_a, transpose_b) = (copy.a_transposed(), copy.b_transposed());
        // One copy kernel per element size, for A and B of one size
        // (bits are bits: FP8's E4M3 and E5M2 alike); step 17's
        // transposing copy is f32's.
        let entry = kernels_gpu::pad::pad_entry(elem.bytes()).filter(|_| {
            storage.b.bytes() == elem.bytes()
                && (!(transpose_a || transpose_b) || elem == Elem::F32)
        });
        let Some((entry, pair_entry, per_thread)) = entry else {
            return Err(HostError::BadShape(format!(
                "TMA cannot read A and B ({storage}) as they are (rows must be 16-byte \
                 multiples), and no padded copy is built for them: give lda and ldb as \
                 multiples of {} elements",
                16 / elem.bytes().max(1)
            )));
        };
        if let Some(cached) = cached
            && cached.serves(stored, padding, copy, storage)
        {
            return Ok(cached);
        }
        // The padding copies live in the module of the kernels that need
        // them (1-byte ones in the FP8 module); the others in `wgmma`.
        let module = kernels_gpu::modules::holding(entry).ok_or_else(|| {
            HostError::BadShape(format!("no PTX module holds the padding copy {entry}"))
        })?;
        let wgmma = &kernels_gpu::modules::WGMMA;
        let pad = gpu.utility(module, entry)?;
        let pad_pair = match pair_entry {
            Some(entry) => Some(gpu.utility(module, entry)?),
            None => None,
        };
        let split = copy == TmaCopy::SplitTf32;
        let transpose = match copy {
            TmaCopy::AsStored => None,
            TmaCopy::Transposed { .. } => {
                Some(gpu.utility(wgmma, kernels_gpu::pad::TRANSPOSE_ENTRY)?)
            }
            TmaCopy::SplitTf32 => {
                Some(gpu.utility(wgmma, kernels_gpu::pad::TRANSPOSE_SPLIT_ENTRY)?)
            }
        };
        let split_a = if split {
            Some(gpu.utility(wgmma, kernels_gpu::pad::SPLIT_ENTRY)?)
        } else {
            None
        };
        let [(a_rows, a_cols), (b_rows, b_cols)] = stored;
        let a = match padding.a {
            // A from A^T: m rows (A^T's columns) of k rounded up.
            Some(ld) if transpose_a => Some(zeros(gpu, elem, (a_cols, ld), "A (transposed)")?),
            Some(ld) => Some(zeros(gpu, elem, (a_rows, ld), "A")?),
            None => None,
        };
        let b = match padding.b {
            // B^T: n rows (B's columns) of k rounded up.
            Some(ld) if transpose_b => Some(zeros(gpu, elem, (b_cols, ld), "B (transposed)")?),
            Some(ld) => Some(zeros(gpu, elem, (b_rows, ld), "B")?),
            None => None,
        };
        Ok(Padded {
            made_for: (stored, padding, copy),
            elem,
            a,
            b,
            pad,
            pad_pair,
            per_thread,
            transpose,
            transpose_a,
            transpose_b,
            split: split_a,
        })
    }

    /// Enqueues the copies of `call`'s A and B that the kernel reads
    /// (`a` and `b`: the caller's operands as stored), and returns A and B
    /// as the tensor maps describe them, with `call` moved onto them (its
    /// leading dimensions the copies').
    pub fn copy_in(
        &mut self,
        gpu: &Gpu,
        call: &GemmCall,
        (a, b): (Operand, Operand),
    ) -> Result<(Operand, Operand, GemmCall), HostError> {
        // A's and B's padded copies in one launch when both are made and
        // the type has a pair entry.
        let paired = self.a.is_some()
            && self.b.is_some()
            && self.transpose.is_none()
            && self.pad_pair.is_some();
        if let (true, Some(ca), Some(cb), Some(func)) = (paired, &self.a, &self.b, &self.pad_pair) {
            self.pad_pair(gpu, func, [(a, ca), (b, cb)])?;
        }
        let a_op = match (&self.a, &self.split, &self.transpose) {
            (Some(copy), None, Some(transpose)) if self.transpose_a => {
                let what = "transpose_tf32 (A transposed for TMA)";
                self.transpose(gpu, transpose, (a.ptr, copy), (a.rows, a.cols, a.ld), what)?;
                // A: m x k.
                Operand {
                    ptr: copy.ptr,
                    elem: a.elem,
                    rows: a.cols,
                    cols: a.rows,
                    ld: copy.ld,
                    products: 1,
                    stride: 0,
                }
            }
            (Some(copy), Some(split), _) => {
                self.split_a(gpu, split, (a.ptr, copy), (a.rows, a.cols, a.ld))?;
                // Both parts of each row: 2 k rounded up.
                Operand {
                    ptr: copy.ptr,
                    cols: copy.ld,
                    ld: copy.ld,
                    ..a
                }
            }
            (Some(copy), None, _) => {
                if !paired {
                    self.pad_rows(gpu, (a.ptr, copy.ptr), (a.rows, a.cols, a.ld), copy.ld, "A")?;
                }
                Operand {
                    ptr: copy.ptr,
                    ld: copy.ld,
                    ..a
                }
            }
            (None, _, _) => a,
        };
        let b_op = match (&self.b, &self.transpose) {
            (Some(copy), Some(transpose)) if self.transpose_b => {
                let what = if self.split.is_some() {
                    "transpose_split_tf32 (B^T's two TF32 parts for 3xTF32)"
                } else {
                    "transpose_tf32 (B transposed for TMA)"
                };
                self.transpose(gpu, transpose, (b.ptr, copy), (b.rows, b.cols, b.ld), what)?;
                // B^T: n x k (3xTF32: n x both parts of each row, 2 k
                // rounded up).
                Operand {
                    ptr: copy.ptr,
                    elem: b.elem,
                    rows: b.cols,
                    cols: if self.split.is_some() {
                        copy.ld
                    } else {
                        b.rows
                    },
                    ld: copy.ld,
                    products: 1,
                    stride: 0,
                }
            }
            (Some(copy), _) => {
                if !paired {
                    self.pad_rows(gpu, (b.ptr, copy.ptr), (b.rows, b.cols, b.ld), copy.ld, "B")?;
                }
                Operand {
                    ptr: copy.ptr,
                    ld: copy.ld,
                    ..b
                }
            }
            (None, _) => b,
        };
        let inner = GemmCall {
            a: a_op.ptr,
            b: b_op.ptr,
            params: GemmParams {
                lda: a_op.ld as u32,
                ldb: b_op.ld as u32,
                ..call.params
            },
            ..*call
        };
        Ok((a_op, b_op, inner))
    }

    /// Enqueues `split_rows_tf32(src, A's copy, m, k, lda, 2 k32)`.
    fn split_a(
        &self,
        gpu: &Gpu,
        func: &CudaFunction,
        (src, copy): (CUdeviceptr, &Copy),
        (rows, cols, src_ld): (usize, usize, usize),
    ) -> Result<(), HostError> {
        use kernels_gpu::pad::{MAX_GRID_ROWS, THREADS};
        let cfg = LaunchConfig {
            grid_dim: (
                (copy.ld / 2).div_ceil(THREADS) as u32,
                rows.min(MAX_GRID_ROWS) as u32,
                1,
            ),
            block_dim: (THREADS as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: `src` is the caller's m x k A, rows lda apart
        // (`copy_in`'s caller vouches for it), `dst` this workspace's
        // m x 2 k32 buffer (2 k32 a multiple of 64, k32 >= k); they do not
        // overlap; threads and grid are what split_rows_tf32's contract
        // asks for.
        unsafe {
            launch_copy(
                gpu,
                func,
                cfg,
                (src, copy.ptr),
                (rows, cols, src_ld, copy.ld),
                "split_rows_tf32 (A's two TF32 parts for 3xTF32)",
            )
        }
    }

    /// Enqueues `transpose_tf32(src, B's copy, k, n, ldb, k4)` (or
    /// `transpose_split_tf32` with rows of 2 k32 for 3xTF32), or
    /// `transpose_tf32(src, A's copy, k, m, lda, k4)`; `what` names it in
    /// an error (a fixed text: no allocation per launch).
    fn transpose(
        &self,
        gpu: &Gpu,
        func: &CudaFunction,
        (src, copy): (CUdeviceptr, &Copy),
        (rows, cols, src_ld): (usize, usize, usize),
        what: &str,
    ) -> Result<(), HostError> {
        use kernels_gpu::pad::{MAX_GRID_ROWS, TILE, TRANSPOSE_SHARED_BYTES, TRANSPOSE_THREADS};
        let ld = copy.ld;
        // The source rows the copy's rows hold: ld, or half of it split.
        let k_len = if self.split.is_some() { ld / 2 } else { ld };
        let cfg = LaunchConfig {
            grid_dim: (
                cols.div_ceil(TILE) as u32,
                k_len.div_ceil(TILE).min(MAX_GRID_ROWS) as u32,
                1,
            ),
            block_dim: (TRANSPOSE_THREADS as u32, 1, 1),
            shared_mem_bytes: TRANSPOSE_SHARED_BYTES as u32,
        };
        // SAFETY: `src` is the caller's k x n B (or k x m A^T), rows ldb
        // (lda) apart (`copy_in`'s caller vouches for it), `dst` this
        // workspace's n x k4 (m x k4) buffer; they do not overlap;
        // threads, shared memory and grid are what transpose_tf32's
        // contract asks for.
        unsafe {
            launch_copy(
                gpu,
                func,
                cfg,
                (src, copy.ptr),
                (rows, cols, src_ld, ld),
                what,
            )
        }
    }

    /// The grid of a padding copy (`copies` of them in z) into rows of `ld`
    /// elements, `rows` of them: what the entries' contracts ask for.
    fn pad_config(&self, ld: usize, rows: usize, copies: u32) -> LaunchConfig {
        use kernels_gpu::pad::{MAX_GRID_ROWS, THREADS};
        LaunchConfig {
            grid_dim: (
                ld.div_ceil(THREADS * self.per_thread) as u32,
                rows.min(MAX_GRID_ROWS) as u32,
                copies,
            ),
            block_dim: (THREADS as u32, 1, 1),
            shared_mem_bytes: 0,
        }
    }

    /// Enqueues the pair entry `func` for A's and B's copies (`(operand,
    /// its copy)` each): block z of the grid, which covers the larger of
    /// the two, makes copy z.
    fn pad_pair(
        &self,
        gpu: &Gpu,
        func: &CudaFunction,
        copies: [(Operand, &Copy); 2],
    ) -> Result<(), HostError> {
        let ld = copies.iter().map(|(_, c)| c.ld).max().unwrap_or(1);
        let rows = copies.iter().map(|(o, _)| o.rows).max().unwrap_or(1);
        let cfg = self.pad_config(ld, rows, 2);
        let u = |x: usize| x as u32;
        let mut launch = gpu.stream.launch_builder(func);
        let args = copies.map(|(o, c)| (o.ptr, c.ptr, [u(o.rows), u(o.cols), u(o.ld), u(c.ld)]));
        for (src, dst, dims) in &args {
            launch.arg(src).arg(dst);
            for d in dims {
                launch.arg(d);
            }
        }
        // SAFETY: each source is the caller's matrix as stored (rows x
        // cols, rows ld apart: `copy_in`'s caller vouches for it), each
        // destination this workspace's rows x ld buffer (ld a multiple of
        // the entry's elements per thread); none overlap; the grid covers
        // both copies with 2 blocks in z, as the pair entry's contract
        // asks.
        unsafe { launch.launch(cfg) }
            .map(|_| ())
            .map_err(|source| HostError::LaunchFailed {
                kernel: "pad_rows pair (the padded copies of A and B)".into(),
                source,
            })
    }

    /// Enqueues `pad_rows(src, dst, rows, cols, src_ld, ld)`.
    fn pad_rows(
        &self,
        gpu: &Gpu,
        (src, dst): (CUdeviceptr, CUdeviceptr),
        (rows, cols, src_ld): (usize, usize, usize),
        ld: usize,
        which: &str,
    ) -> Result<(), HostError> {
        let cfg = self.pad_config(ld, rows, 1);
        // SAFETY: `src` is the caller's rows x cols matrix (A or B), rows
        // src_ld apart (`copy_in`'s caller vouches for it), `dst` this
        // workspace's rows x ld buffer (ld a multiple of the entry's
        // elements per thread: 16 bytes' worth); they do not overlap; the
        // grid is what the entry's contract asks for.
        unsafe {
            launch_copy(
                gpu,
                &self.pad,
                cfg,
                (src, dst),
                (rows, cols, src_ld, ld),
                &format!("pad_rows (the padded copy of {which})"),
            )
        }
    }
}

/// Enqueues one of `kernels_gpu::pad`'s copies, which all take `(src,
/// dst, rows, cols, src_ld, ld)`.
///
/// # Safety
/// `func` is such an entry, and `src`, `dst`, the sizes and `cfg` are what
/// its contract asks for.
unsafe fn launch_copy(
    gpu: &Gpu,
    func: &CudaFunction,
    cfg: LaunchConfig,
    (src, dst): (CUdeviceptr, CUdeviceptr),
    (rows, cols, src_ld, ld): (usize, usize, usize, usize),
    what: &str,
) -> Result<(), HostError> {
    let (rows, cols, src_ld, ld) = (rows as u32, cols as u32, src_ld as u32, ld as u32);
    let mut launch = gpu.stream.launch_builder(func);
    launch
        .arg(&src)
        .arg(&dst)
        .arg(&rows)
        .arg(&cols)
        .arg(&src_ld)
        .arg(&ld);
    // SAFETY: forwarded from this function's contract.
    unsafe { launch.launch(cfg) }
        .map(|_| ())
        .map_err(|source| HostError::LaunchFailed {
            kernel: what.into(),
            source,
        })
}
