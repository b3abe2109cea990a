//! The lesson's traffic model, and what the measured time says about it.
//!
//! The lesson charges every global load to DRAM: the naive kernel reads 2K
//! floats per element of C (549 GB at n = 4096), the 16x16 tiled kernel 16x
//! fewer. Bytes over time gives the DRAM bandwidth the kernel would need if
//! the model were right; when that exceeds the GPU's peak, the caches are
//! doing work the model does not count.

use kernels_gpu::launch::KernelSpec;
use serde::Serialize;

use crate::shape::Shape;

#[derive(Clone, Copy, Debug, Serialize)]
pub struct ModelEstimate {
    /// Bytes the model says the kernel moves between DRAM and the SMs.
    pub bytes: f64,
    /// FLOP per model byte.
    pub intensity: f64,
    /// min(FP32 peak, intensity x DRAM bandwidth), GFLOP/s: the model's roofline.
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
    let bytes = 4.0 * (a_loads + b_loads + m * n);
    let intensity = shape.flops() / bytes;
    let ceiling_gflops = peaks.map(|p| (intensity * p.dram_gbs).min(p.fp32_gflops));
    ModelEstimate {
        bytes,
        intensity,
        ceiling_gflops,
    }
}

/// The GPU's two ceilings, computed from its own attributes.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Peaks {
    pub fp32_gflops: f64,
    pub dram_gbs: f64,
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
        let roof = estimate(
            &kernels_gpu::k02_tiled16::SPEC,
            &shape,
            Some(Peaks {
                fp32_gflops: 67_000.0,
                dram_gbs: 4_800.0,
            }),
        );
        assert!((roof.ceiling_gflops.unwrap() - 4.0 * 4_800.0).abs() < 200.0);
    }
}
