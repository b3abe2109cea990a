//! The lesson's traffic model, and what the measured time says about it.
//!
//! The lesson charges every global load to DRAM: the naive kernel reads 2K
//! floats per element of C (549 GB at n = 4096), the 16x16 tiled kernel 16x
//! fewer. Bytes over time gives the DRAM bandwidth the kernel would need if
//! the model were right; when that exceeds the GPU's peak, the caches are
//! doing work the model does not count.

use kernels_gpu::elem::Math;
use kernels_gpu::launch::KernelSpec;
use serde::Serialize;

use crate::shape::Shape;
use rust_gemm::gpu::DeviceInfo;

#[derive(Clone, Copy, Debug, Serialize)]
pub struct ModelEstimate {
    /// Bytes the model says the kernel moves between DRAM and the SMs.
    pub bytes: f64,
    /// FLOP per model byte.
    pub intensity: f64,
    /// min(peak of the kernel's math, intensity x DRAM bandwidth),
    /// GFLOP/s: the model's roofline (the FP32 pipes' peak for FP32
    /// kernels, the tensor cores' of their math for the others; none when
    /// that peak is unknown).
    pub ceiling_gflops: Option<f64>,
}

/// What the model says for `kernel` on `shape`.
pub fn estimate(kernel: &KernelSpec, shape: &Shape, peaks: Option<Peaks>) -> ModelEstimate {
    let (reuse_m, reuse_n) = kernel.model_reuse;
    let (m, n, k) = (shape.m as f64, shape.n as f64, shape.k as f64);
    // Each element of A is loaded once per block column (reused across
    // `reuse_n` columns of C), each element of B once per block row.
    let a_loads = m * k * (n / reuse_n as f64).ceil();
    let b_loads = k * n * (m / reuse_m as f64).ceil();
    let e = kernel.elems;
    let bytes =
        a_loads * e.a.bytes() as f64 + b_loads * e.b.bytes() as f64 + m * n * e.c.bytes() as f64;
    let intensity = shape.flops() / bytes;
    let ceiling_gflops = peaks.and_then(|p| {
        p.compute_gflops(kernel.elems.math)
            .map(|c| (intensity * p.dram_gbs).min(c))
    });
    ModelEstimate {
        bytes,
        intensity,
        ceiling_gflops,
    }
}

/// The GPU's ceilings, computed from its own attributes.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Peaks {
    pub fp32_gflops: f64,
    /// Dense TF32 tensor-core peak; None where the rate is unknown or
    /// there are no TF32 tensor cores.
    pub tf32_gflops: Option<f64>,
    /// Dense BF16/FP16 tensor-core peak (f32 accumulation); None where unknown.
    pub half_gflops: Option<f64>,
    /// Dense FP8 tensor-core peak (f32 accumulation); None where unknown
    /// or absent.
    pub fp8_gflops: Option<f64>,
    pub dram_gbs: f64,
}

impl Peaks {
    /// The ceilings of the GPU `info` describes; None where its FP32 peak
    /// or DRAM bandwidth is unknown.
    pub fn of(info: &DeviceInfo) -> Option<Peaks> {
        Some(Peaks {
            fp32_gflops: info.peak_fp32_gflops()?,
            tf32_gflops: info.peak_tf32_gflops(),
            half_gflops: info.peak_gflops(Math::Bf16),
            fp8_gflops: info.peak_gflops(Math::Fp8),
            dram_gbs: info.peak_dram_gbs()?,
        })
    }

    /// The compute ceiling of `math`.
    pub fn compute_gflops(&self, math: Math) -> Option<f64> {
        match math {
            Math::Fp32 => Some(self.fp32_gflops),
            Math::Tf32 => self.tf32_gflops,
            // Three TF32 products per product.
            Math::Tf32x3 => self.tf32_gflops.map(|g| g / 3.0),
            Math::Bf16 | Math::F16 => self.half_gflops,
            Math::Fp8 => self.fp8_gflops,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lesson's own numbers at N = 4096: 549 GB naive, ~34 GB tiled,
    /// intensity 0.25 and 4 FLOP/byte.
    #[test]
    fn model_reproduces_the_lessons_numbers() {
        let shape = Shape::square(4096).unwrap();
        let naive = estimate(&kernels_gpu::k01_naive::SPEC, &shape, None);
        let tiled = estimate(&kernels_gpu::k02_tiled16::SPEC, &shape, None);
        assert!(
            (naive.bytes / 1e9 - 549.8).abs() < 0.1,
            "{}",
            naive.bytes / 1e9
        );
        assert!(
            (tiled.bytes / 1e9 - 34.4).abs() < 0.1,
            "{}",
            tiled.bytes / 1e9
        );
        assert!((naive.intensity - 0.25).abs() < 1e-3);
        assert!((tiled.intensity - 4.0).abs() < 1e-2);
        let peaks = Peaks {
            fp32_gflops: 67_000.0,
            tf32_gflops: Some(535_000.0),
            half_gflops: Some(1_070_000.0),
            fp8_gflops: Some(2_140_000.0),
            dram_gbs: 4_800.0,
        };
        let roof = estimate(&kernels_gpu::k02_tiled16::SPEC, &shape, Some(peaks));
        assert!((roof.ceiling_gflops.unwrap() - 4.0 * 4_800.0).abs() < 200.0);
    }

    /// A kernel's roofline stops at its own precision's peak: the FP32
    /// pipes for FP32 kernels, the tensor cores for TF32 ones (none when
    /// the GPU's TF32 rate is unknown).
    #[test]
    fn the_ceiling_is_the_peak_of_the_kernels_precision() {
        let shape = Shape::square(4096).unwrap();
        let peaks = Peaks {
            fp32_gflops: 67_000.0,
            tf32_gflops: Some(535_000.0),
            half_gflops: Some(1_070_000.0),
            fp8_gflops: Some(2_140_000.0),
            dram_gbs: 4_800.0,
        };
        let fp32 = &kernels_gpu::k10_tuned::SPECS[0];
        let tf32 = &kernels_gpu::k18_wgmma_tr::SPEC_256X128X32_S4;
        assert_eq!(fp32.elems.math, Math::Fp32);
        assert_eq!(tf32.elems.math, Math::Tf32);
        assert_eq!(
            estimate(fp32, &shape, Some(peaks)).ceiling_gflops,
            Some(67_000.0)
        );
        let t = estimate(tf32, &shape, Some(peaks));
        assert_eq!(t.ceiling_gflops, Some(t.intensity * 4_800.0));
        assert!(t.ceiling_gflops.unwrap() > 67_000.0);
        let unknown = Peaks {
            tf32_gflops: None,
            ..peaks
        };
        assert_eq!(estimate(tf32, &shape, Some(unknown)).ceiling_gflops, None);
    }
}
