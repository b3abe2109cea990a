//! Tensor maps for the TMA kernels (step 12): what the copy engine needs to
//! know about A and B, made by the driver (`cuTensorMapEncodeTiled`) on the
//! host and copied to device memory, where the kernel reads them by
//! address (rustc cannot pass them by value; see `kernels_gpu::device::tma`).
//!
//! A map is made for one buffer and one shape, so a kernel's maps are made
//! again whenever it is launched on other buffers or another shape
//! ([`DeviceMaps`]); within one verified and timed run they are made once,
//! before the first (untimed) launch.

use cudarc::driver::CudaSlice;
use cudarc::driver::sys::{
    self, CUdeviceptr, CUtensorMap, CUtensorMapDataType, CUtensorMapFloatOOBfill,
    CUtensorMapInterleave, CUtensorMapL2promotion, CUtensorMapSwizzle,
};
use kernels_gpu::launch::{TENSOR_MAP_BYTES, TmaBoxes};

use crate::HostError;
use crate::gpu::Gpu;
use crate::shape::Shape;

/// The bytes of A's map followed by B's, as the kernel expects them.
pub fn encode(
    boxes: &TmaBoxes,
    a: CUdeviceptr,
    b: CUdeviceptr,
    shape: &Shape,
) -> Result<Vec<u8>, HostError> {
    let (m, n, k) = (shape.m as u64, shape.n as u64, shape.k as u64);
    let a_map = encode_2d(
        "A",
        a,
        (m, k),
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
        (k, n),
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

/// The map of a row-major `rows x cols` f32 matrix at `ptr`, copied in
/// boxes of `box_.0` rows by `box_.1` columns; zeros outside the matrix.
fn encode_2d(
    which: &str,
    ptr: CUdeviceptr,
    (rows, cols): (u64, u64),
    box_: (u32, u32),
    swizzle: CUtensorMapSwizzle,
) -> Result<CUtensorMap, HostError> {
    // Innermost dimension first: columns, then rows.
    let dims = [cols, rows];
    // Byte stride of every dimension but the first.
    let strides = [cols * 4];
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
    made_for: (CUdeviceptr, CUdeviceptr, Shape),
    pub maps: CudaSlice<u8>,
}

impl DeviceMaps {
    /// Maps for A at `a` and B at `b` in `shape`: `cached` if it was made
    /// for them, else new ones, copied to the GPU on its stream (ordered
    /// before any launch enqueued after this call).
    pub fn for_buffers(
        cached: Option<DeviceMaps>,
        gpu: &Gpu,
        boxes: &TmaBoxes,
        (a, b): (CUdeviceptr, CUdeviceptr),
        shape: &Shape,
    ) -> Result<DeviceMaps, HostError> {
        if let Some(cached) = cached
            && cached.made_for == (a, b, *shape)
        {
            return Ok(cached);
        }
        let bytes = encode(boxes, a, b, shape)?;
        let maps = gpu
            .stream
            .clone_htod(&bytes)
            .map_err(HostError::cuda("copying tensor maps to the GPU"))?;
        Ok(DeviceMaps {
            made_for: (a, b, *shape),
            maps,
        })
    }
}
