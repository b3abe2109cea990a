//! The launches of one FP8 quantization (`kernels_gpu::quant`), for the
//! library's `Sgemm::quantize` and the tests: each step's entry from the
//! `fp8` module, its grid, its arguments, on the caller's stream.

use cudarc::driver::{CudaFunction, DeviceRepr, LaunchConfig, PushKernelArg};
use kernels_gpu::elem::Elem;
use kernels_gpu::quant::{self, QuantParams, QuantStep, Quantize};

use crate::HostError;
use crate::gpu::Gpu;

/// CUDA's limit on a grid's y (the quantizer's blocks of rows).
pub const MAX_GRID_Y: usize = 65_535;

/// [`QuantParams`] as cudarc passes a kernel parameter: by value.
#[repr(transparent)]
#[derive(Clone, Copy)]
struct Params(QuantParams);

// SAFETY: QuantParams is #[repr(C)] plain data (six u32s): the struct
// the quantizer's entries declare, byte for byte.
unsafe impl DeviceRepr for Params {}

/// One quantization, as device addresses: the source and its stored
/// type, the FP8 output and its type, the scales, and the workspace a
/// per-tensor one needs (`QuantStep::partials` floats; 0 otherwise).
#[derive(Clone, Copy, Debug)]
pub struct QuantCall {
    pub src: (u64, Elem),
    pub dst: (u64, Elem),
    pub scales: u64,
    pub workspace: u64,
    pub rows: usize,
    pub cols: usize,
    pub ld: usize,
    pub how: Quantize,
}

/// The quantizer entry `name` of the `fp8` module (a caller that
/// enqueues often caches it: `Sgemm` does).
pub fn function(gpu: &Gpu, name: &str) -> Result<CudaFunction, HostError> {
    gpu.utility(&kernels_gpu::modules::FP8, name)
}

/// Enqueues `call`'s launches on `gpu`'s stream, each entry from
/// `function` (by name: [`function`], or a cache of it).
///
/// # Safety
/// The addresses hold what `call` says: the source `rows x cols` at
/// `ld`, the output `rows * cols` elements, `how.scales(rows, cols)`
/// f32s of scales, the workspace; none overlapping; sizes checked
/// (`blas::QuantConfig::check`).
pub unsafe fn enqueue(
    gpu: &Gpu,
    call: &QuantCall,
    mut function: impl FnMut(&'static str) -> Result<CudaFunction, HostError>,
) -> Result<(), HostError> {
    let (rows, cols) = (call.rows, call.cols);
    let (row_stride, col_stride) = call.how.strides(rows, cols);
    let whole = QuantParams {
        rows: rows as u32,
        cols: cols as u32,
        ld: call.ld as u32,
        ld_out: cols as u32,
        row_stride: row_stride as u32,
        col_stride: col_stride as u32,
    };
    for &step in call.how.steps() {
        let entry = quant::entry(step, call.src.1, call.dst.1).ok_or_else(|| {
            HostError::BadShape(format!(
                "no quantizer entry takes {:?} to {:?}",
                call.src.1, call.dst.1
            ))
        })?;
        let (gx, gy) = step.grid(rows, cols);
        // (src, dst, scales, params) of each step (`quant`'s entries).
        let (src, dst, scales, params) = match step {
            QuantStep::Rows | QuantStep::Tiles | QuantStep::Tensor => {
                (call.src.0, call.dst.0, call.scales, whole)
            }
            // Each tile's amax at (tile row, tile column), `gx` per row.
            QuantStep::Amax => (
                call.src.0,
                0,
                call.workspace,
                QuantParams {
                    row_stride: gx as u32,
                    col_stride: 1,
                    ..whole
                },
            ),
            QuantStep::Scale => (
                call.workspace,
                0,
                call.scales,
                QuantParams {
                    rows: QuantStep::partials(rows, cols) as u32,
                    ..QuantParams::default()
                },
            ),
        };
        let func = function(entry.name)?;
        let cfg = LaunchConfig {
            grid_dim: (gx as u32, gy as u32, 1),
            block_dim: (quant::THREADS as u32, 1, 1),
            shared_mem_bytes: quant::SHARED_BYTES as u32,
        };
        let params = Params(params);
        let mut launch = gpu.stream.launch_builder(&func);
        launch.arg(&src).arg(&dst).arg(&scales).arg(&params);
        // SAFETY: the entry's contract (`kernels_gpu::quant`'s entries):
        // the buffers are the caller's word, the grid the step's.
        unsafe { launch.launch(cfg) }.map_err(|source| HostError::LaunchFailed {
            kernel: entry.name.into(),
            source,
        })?;
    }
    Ok(())
}
