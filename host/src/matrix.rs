//! Matrices on the device in their stored element type
//! (`kernels_gpu::elem::Elem`): what the host uploads, poisons and reads
//! back, whatever a kernel's types.
//!
//! On the host every matrix is a `Vec<f32>` of values the stored type
//! holds exactly ([`round_to`]: f32 holds every BF16, FP16 and FP8
//! value), so that the reference multiplies exactly what the GPU reads;
//! the device copy is of the stored type itself (`half::bf16`,
//! `half::f16`, FP8 as its bytes: `kernels_gpu::elem::Fp8Format`).

use cudarc::driver::CudaSlice;
use cudarc::driver::sys::CUdeviceptr;
use half::{bf16, f16};
use kernels_gpu::elem::{Elem, Fp8Format};

use rust_gemm::HostError;
use rust_gemm::gpu::Gpu;

/// Rounds `values` to nearest values of `elem` in place (nothing for f32).
pub fn round_to(elem: Elem, values: &mut [f32]) {
    match elem {
        Elem::F32 => {}
        Elem::Bf16 => values
            .iter_mut()
            .for_each(|x| *x = bf16::from_f32(*x).to_f32()),
        Elem::F16 => values
            .iter_mut()
            .for_each(|x| *x = f16::from_f32(*x).to_f32()),
        Elem::E4m3 | Elem::E5m2 => {
            let f = fp8_format(elem);
            values
                .iter_mut()
                .for_each(|x| *x = f.to_f32(f.from_f32(*x)));
        }
    }
}

/// The FP8 format of `elem` (E4M3 for anything but E5M2).
fn fp8_format(elem: Elem) -> Fp8Format {
    if elem == Elem::E5m2 {
        Fp8Format::E5M2
    } else {
        Fp8Format::E4M3
    }
}

/// One matrix's elements on the device, of its stored type.
pub enum DeviceMatrix {
    F32(CudaSlice<f32>),
    Bf16(CudaSlice<bf16>),
    F16(CudaSlice<f16>),
    /// FP8 (E4M3 or E5M2) as bytes.
    Fp8(Fp8Format, CudaSlice<u8>),
}

impl DeviceMatrix {
    /// `values` as `elem`s (rounded to nearest) in a new device buffer.
    pub fn upload(gpu: &Gpu, elem: Elem, values: &[f32]) -> Result<Self, HostError> {
        let copy = HostError::cuda("copying to the GPU");
        Ok(match elem {
            Elem::F32 => DeviceMatrix::F32(gpu.stream.clone_htod(values).map_err(copy)?),
            Elem::Bf16 => {
                let v: Vec<bf16> = values.iter().map(|&x| bf16::from_f32(x)).collect();
                DeviceMatrix::Bf16(gpu.stream.clone_htod(&v).map_err(copy)?)
            }
            Elem::F16 => {
                let v: Vec<f16> = values.iter().map(|&x| f16::from_f32(x)).collect();
                DeviceMatrix::F16(gpu.stream.clone_htod(&v).map_err(copy)?)
            }
            Elem::E4m3 | Elem::E5m2 => {
                let f = fp8_format(elem);
                let v: Vec<u8> = values.iter().map(|&x| f.from_f32(x)).collect();
                DeviceMatrix::Fp8(f, gpu.stream.clone_htod(&v).map_err(copy)?)
            }
        })
    }

    /// A buffer of `len` `elem`s, its contents undefined until written.
    ///
    /// # Safety
    /// Nothing reads it before something writes it (a kernel, or
    /// [`Self::poison`]).
    pub unsafe fn alloc(gpu: &Gpu, elem: Elem, len: usize) -> Result<Self, HostError> {
        let alloc = HostError::cuda(format!("allocating {len} {} elements", elem.name()));
        // SAFETY: forwarded from this function's contract.
        unsafe {
            Ok(match elem {
                Elem::F32 => DeviceMatrix::F32(gpu.stream.alloc(len).map_err(alloc)?),
                Elem::Bf16 => DeviceMatrix::Bf16(gpu.stream.alloc(len).map_err(alloc)?),
                Elem::F16 => DeviceMatrix::F16(gpu.stream.alloc(len).map_err(alloc)?),
                Elem::E4m3 | Elem::E5m2 => {
                    DeviceMatrix::Fp8(fp8_format(elem), gpu.stream.alloc(len).map_err(alloc)?)
                }
            })
        }
    }

    /// Its device address (read once, outside any timed region).
    pub fn address(&self, gpu: &Gpu) -> CUdeviceptr {
        use rust_gemm::gpu::device_address;
        match self {
            DeviceMatrix::F32(s) => device_address(gpu, s),
            DeviceMatrix::Bf16(s) => device_address(gpu, s),
            DeviceMatrix::F16(s) => device_address(gpu, s),
            DeviceMatrix::Fp8(_, s) => device_address(gpu, s),
        }
    }

    /// Its values, as f32 (exact).
    pub fn download(&self, gpu: &Gpu) -> Result<Vec<f32>, HostError> {
        let copy = HostError::cuda("copying from the GPU");
        Ok(match self {
            DeviceMatrix::F32(s) => gpu.stream.clone_dtoh(s).map_err(copy)?,
            DeviceMatrix::Bf16(s) => (gpu.stream.clone_dtoh(s).map_err(copy)?)
                .into_iter()
                .map(bf16::to_f32)
                .collect(),
            DeviceMatrix::F16(s) => (gpu.stream.clone_dtoh(s).map_err(copy)?)
                .into_iter()
                .map(f16::to_f32)
                .collect(),
            DeviceMatrix::Fp8(f, s) => (gpu.stream.clone_dtoh(s).map_err(copy)?)
                .into_iter()
                .map(|b| f.to_f32(b))
                .collect(),
        })
    }

    /// Fills it with NaN (all bytes 0xFF: a NaN in every stored type), so
    /// an element no thread writes fails verification.
    pub fn poison(&mut self, gpu: &Gpu) -> Result<(), HostError> {
        let poisoned = match self {
            DeviceMatrix::F32(s) => rust_gemm::gpu::memset(gpu, s, 0xFF),
            DeviceMatrix::Bf16(s) => rust_gemm::gpu::memset(gpu, s, 0xFF),
            DeviceMatrix::F16(s) => rust_gemm::gpu::memset(gpu, s, 0xFF),
            DeviceMatrix::Fp8(_, s) => rust_gemm::gpu::memset(gpu, s, 0xFF),
        };
        poisoned.map_err(HostError::cuda("poisoning C"))
    }

    /// The f32 buffer, for what takes one (cuBLAS SGEMM); None for another type.
    pub fn as_f32(&self) -> Option<&CudaSlice<f32>> {
        match self {
            DeviceMatrix::F32(s) => Some(s),
            _ => None,
        }
    }

    /// [`Self::as_f32`], mutably.
    pub fn as_f32_mut(&mut self) -> Option<&mut CudaSlice<f32>> {
        match self {
            DeviceMatrix::F32(s) => Some(s),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_keeps_values_the_type_holds_and_moves_the_others() {
        let mut v = [1.0f32, 1.0 + 1.0 / 512.0, 3.0e-8, -0.1];
        round_to(Elem::F32, &mut v);
        assert_eq!(v, [1.0, 1.0 + 1.0 / 512.0, 3.0e-8, -0.1]);
        // 1 + 2^-9 is below half of BF16's spacing at 1 (2^-7): 1.
        round_to(Elem::Bf16, &mut v);
        assert_eq!(v[0..2], [1.0, 1.0]);
        assert_eq!(v[3], bf16::from_f32(-0.1).to_f32());
        let mut w = [1.0f32 + 1.0 / 4096.0, 70_000.0];
        round_to(Elem::F16, &mut w);
        assert_eq!(w, [1.0, f32::INFINITY]);
        // FP8 saturates: 500 is past E4M3's 448; 0.3 lands on a neighbour.
        let mut x = [500.0f32, 0.3, 70_000.0];
        round_to(Elem::E4m3, &mut x);
        assert_eq!(x[..2], [448.0, 0.3125]);
        round_to(Elem::E5m2, &mut x);
        assert_eq!(x, [448.0, 0.3125, 448.0]);
        let mut y = [70_000.0f32, 0.3];
        round_to(Elem::E5m2, &mut y);
        assert_eq!(y, [57_344.0, 0.3125]);
    }
}
