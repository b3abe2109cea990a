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
use kernels_gpu::launch::{TENSOR_MAP_BYTES, TmaBoxes};

use crate::HostError;
use crate::gpu::Gpu;
use crate::runner::GemmCall;

/// A row-major f32 matrix in device memory, as a tensor map describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Operand {
    pub ptr: CUdeviceptr,
    pub rows: usize,
    pub cols: usize,
    /// Elements between rows (a multiple of 4: TMA's 16-byte strides).
    pub ld: usize,
}

/// The bytes of A's map followed by B's, as the kernel expects them.
pub fn encode(boxes: &TmaBoxes, a: Operand, b: Operand) -> Result<Vec<u8>, HostError> {
    let a_map = encode_2d(
        "A",
        a,
        boxes.a,
        if boxes.a_swizzle_128 {
            CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B
        } else {
            CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE
        },
    )?;
    let b_map = encode_2d(
        "B",
        b,
        boxes.b,
        CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE,
    )?;
    let mut bytes = Vec::with_capacity(2 * TENSOR_MAP_BYTES);
    for map in [a_map, b_map] {
        bytes.extend(map.opaque.iter().flat_map(|word| word.to_le_bytes()));
    }
    debug_assert_eq!(bytes.len(), 2 * TENSOR_MAP_BYTES);
    Ok(bytes)
}

/// The map of `op`, copied in boxes of `box_.0` rows by `box_.1` columns;
/// zeros outside the matrix.
fn encode_2d(
    which: &str,
    op: Operand,
    box_: (u32, u32),
    swizzle: CUtensorMapSwizzle,
) -> Result<CUtensorMap, HostError> {
    let (ptr, rows, cols) = (op.ptr, op.rows as u64, op.cols as u64);
    // Innermost dimension first: columns, then rows.
    let dims = [cols, rows];
    // Byte stride of every dimension but the first.
    let strides = [op.ld as u64 * 4];
    let box_dims = [box_.1, box_.0];
    let element_strides = [1u32, 1];
    let mut map = CUtensorMap { opaque: [0; 16] };
    // SAFETY: every pointer argument points at an array of the rank (2)
    // or rank - 1 entries the driver reads; `map` is written by it.
    unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut map,
            CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
            2,
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
        "making {which}'s tensor map ({rows} x {cols} floats, boxes of {} x {})",
        box_.0, box_.1
    )))?;
    Ok(map)
}

/// A kernel's tensor maps in device memory, and what they were made for.
pub struct DeviceMaps {
    made_for: (Operand, Operand),
    pub maps: CudaSlice<u8>,
}

impl DeviceMaps {
    /// Maps for A and B: `cached` if it was made for them, else new ones,
    /// copied to the GPU on its stream (ordered before any launch enqueued
    /// after this call).
    pub fn for_operands(
        cached: Option<DeviceMaps>,
        gpu: &Gpu,
        boxes: &TmaBoxes,
        a: Operand,
        b: Operand,
    ) -> Result<DeviceMaps, HostError> {
        if let Some(cached) = cached
            && cached.made_for == (a, b)
        {
            return Ok(cached);
        }
        let bytes = encode(boxes, a, b)?;
        let maps = gpu
            .stream
            .clone_htod(&bytes)
            .map_err(HostError::cuda("copying tensor maps to the GPU"))?;
        Ok(DeviceMaps {
            made_for: (a, b),
            maps,
        })
    }
}

/// Copies of A (m x k4) and B (k4 x n4) with K and N rounded up to
/// multiples of 4, for a TMA kernel at a shape whose rows TMA cannot
/// describe (`Operands::padded`). Allocated once per shape; every launch
/// copies A and B into them, zeros in the padding (`kernels_gpu::pad`, on
/// the stream before the kernel, so the copies are part of what is
/// timed). The workspace is `4 (m k4 + k4 n4)` bytes.
pub struct Padded {
    /// `(m, n, k)` of the problem it was made for.
    dims: (usize, usize, usize),
    pub k4: usize,
    pub n4: usize,
    /// The allocations `a_ptr` and `b_ptr` point into, owned here.
    _a: CudaSlice<f32>,
    _b: CudaSlice<f32>,
    a_ptr: CUdeviceptr,
    b_ptr: CUdeviceptr,
    /// `kernels_gpu::pad::pad_rows`.
    pad: CudaFunction,
}

impl Padded {
    /// `cached` if it was made for `(m, n, k)`, else new zeroed buffers.
    pub fn for_problem(
        cached: Option<Padded>,
        gpu: &Gpu,
        dims: (usize, usize, usize),
        (k4, n4): (usize, usize),
    ) -> Result<Padded, HostError> {
        if let Some(cached) = cached
            && cached.dims == dims
        {
            return Ok(cached);
        }
        let zeros = |len: usize, what: &str| {
            gpu.stream
                .alloc_zeros::<f32>(len)
                .map_err(HostError::cuda(&format!(
                    "allocating the padded copy of {what} ({len} floats) for TMA"
                )))
        };
        let pad = gpu.utility(&kernels_gpu::modules::WGMMA, kernels_gpu::pad::ENTRY)?;
        let a = zeros(dims.0 * k4, "A")?;
        let b = zeros(k4 * n4, "B")?;
        let a_ptr = crate::runner::device_address(gpu, &a);
        let b_ptr = crate::runner::device_address(gpu, &b);
        Ok(Padded {
            dims,
            k4,
            n4,
            _a: a,
            _b: b,
            a_ptr,
            b_ptr,
            pad,
        })
    }

    /// The padded A and B, as the tensor maps describe them.
    pub fn operands(&self) -> (Operand, Operand) {
        (
            Operand {
                ptr: self.a_ptr,
                rows: self.dims.0,
                cols: self.k4,
                ld: self.k4,
            },
            Operand {
                ptr: self.b_ptr,
                rows: self.k4,
                cols: self.n4,
                ld: self.n4,
            },
        )
    }

    /// Enqueues the copies of `call`'s A and B into the padded buffers.
    pub fn copy_in(&self, gpu: &Gpu, call: &GemmCall) -> Result<(), HostError> {
        let (m, n, k) = self.dims;
        let p = &call.params;
        self.pad_rows(
            gpu,
            (call.a, self.a_ptr),
            (m, k, p.lda as usize),
            self.k4,
            "A",
        )?;
        self.pad_rows(
            gpu,
            (call.b, self.b_ptr),
            (k, n, p.ldb as usize),
            self.n4,
            "B",
        )
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
        use kernels_gpu::pad::{MAX_GRID_ROWS, THREADS};
        let cfg = LaunchConfig {
            grid_dim: (
                ld.div_ceil(THREADS) as u32,
                rows.min(MAX_GRID_ROWS) as u32,
                1,
            ),
            block_dim: (THREADS as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        let (rows, cols, src_ld, ld) = (rows as u32, cols as u32, src_ld as u32, ld as u32);
        let mut launch = gpu.stream.launch_builder(&self.pad);
        launch
            .arg(&src)
            .arg(&dst)
            .arg(&rows)
            .arg(&cols)
            .arg(&src_ld)
            .arg(&ld);
        // SAFETY: pad_rows takes (src, dst, rows, cols, src_ld, ld); `src`
        // is the caller's rows x cols matrix (A or B), rows src_ld apart
        // (`copy_in`'s caller vouches for it), `dst` this
        // workspace's rows x ld buffer; they do not overlap; the grid is
        // what the entry's contract asks for.
        unsafe { launch.launch(cfg) }
            .map(|_| ())
            .map_err(|source| HostError::LaunchFailed {
                kernel: format!("pad_rows (the padded copy of {which})"),
                source,
            })
    }
}
