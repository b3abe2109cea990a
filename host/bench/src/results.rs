//! The bench's results: one row per (size, variant), written as JSON and
//! CSV, and read back by `--from` to re-render tables, plot and README.

use serde::{Deserialize, Serialize};

use kernels_gpu::elem::Math;
use rust_gemm::gpu::DeviceInfo;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A kernel of kernels-gpu.
    Rust,
    /// A CUDA C++ twin compiled by NVRTC.
    Cuda,
    Cublas,
}

/// What Nsight Compute measured for one kernel at one size.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct NcuMetrics {
    pub dram_read_bytes: f64,
    pub l2_bytes: f64,
    pub shared_store_bank_conflicts: f64,
    pub shared_load_bank_conflicts: f64,
    /// Percent of active cycles the tensor pipe (HMMA) was busy.
    #[serde(default)]
    pub tensor_pipe_percent: f64,
    /// Achieved occupancy: active warps over the SM's maximum, percent.
    #[serde(default)]
    pub achieved_occupancy_percent: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Row {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub variant: String,
    pub kind: Kind,
    /// The math: "FP32", "TF32", "BF16" or "FP16" (`kernels_gpu::elem::Math`;
    /// rows written before TF32 kernels existed are FP32).
    #[serde(default = "fp32")]
    pub precision: String,
    /// A, B and C as stored, `f32 x f32 -> f32` (`kernels_gpu::elem::Storage`;
    /// rows written before 16-bit types existed are f32).
    #[serde(default = "f32_storage")]
    pub elems: String,
    /// The Rust kernel's ladder step; for a CUDA twin, its Rust twin's.
    pub step: Option<u32>,
    /// For a CUDA twin, the Rust kernel it mirrors (and vice versa).
    pub twin: Option<String>,
    pub verified: bool,
    pub max_error: f64,
    pub reps: usize,
    pub median_ms: Option<f64>,
    pub p20_ms: Option<f64>,
    pub p80_ms: Option<f64>,
    pub min_ms: Option<f64>,
    pub gflops: Option<f64>,
    /// Percent of the peak of the row's math (FP32 pipe, or the tensor cores').
    pub percent_of_peak: Option<f64>,
    /// Percent of cuBLAS SGEMM (FP32), same size, same run.
    pub percent_of_cublas: Option<f64>,
    /// Tensor-core rows: percent of cuBLAS of the same element types (math
    /// and storage: cuBLAS TF32 for the TF32 kernels), same size, same run.
    #[serde(default, alias = "percent_of_cublas_tf32")]
    pub percent_of_cublas_math: Option<f64>,
    /// Tensor-core rows: this row's max error over that cuBLAS's on the
    /// same inputs.
    #[serde(default, alias = "error_over_cublas_tf32")]
    pub error_over_cublas_math: Option<f64>,
    /// Rust GFLOP/s over its CUDA C++ twin's, same size, same run.
    pub rust_over_cuda: Option<f64>,
    pub model_bytes: Option<f64>,
    pub model_intensity: Option<f64>,
    pub model_ceiling_gflops: Option<f64>,
    pub ncu: Option<NcuMetrics>,
}

fn fp32() -> String {
    "FP32".into()
}

pub fn f32_storage() -> String {
    kernels_gpu::elem::Storage::F32.to_string()
}

/// A tensor-core kernel whose error exceeds this many times cuBLAS's (of
/// its element types) on the same inputs fails the bench.
pub const MAX_ERROR_OVER_CUBLAS: f64 = 2.0;

impl Row {
    /// The row's math (FP32 for a name this build does not know).
    pub fn math(&self) -> Math {
        Math::from_name(&self.precision).unwrap_or(Math::Fp32)
    }

    /// The stored types of `kernel` and the math its claims are measured
    /// against (`Math::yardstick`: its own, or FP32 for 3xTF32): the row
    /// a kernel's "% cuBLAS, same types" and error ratio compare with.
    pub fn is_yardstick_of(&self, kernel: &Row) -> bool {
        self.math() == kernel.math().yardstick() && self.elems == kernel.elems
    }

    /// Verified, and (tensor cores) no less accurate than the bench demands.
    pub fn passed(&self) -> bool {
        self.verified
            && self
                .error_over_cublas_math
                .is_none_or(|e| e <= MAX_ERROR_OVER_CUBLAS)
    }

    pub fn size_label(&self) -> String {
        if self.m == self.n && self.n == self.k {
            self.n.to_string()
        } else {
            format!("{}x{}x{}", self.m, self.n, self.k)
        }
    }

    pub fn is_square(&self) -> bool {
        self.m == self.n && self.n == self.k
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Settings {
    pub sizes: Vec<String>,
    pub seed: u64,
    pub warmup: usize,
    pub min_reps: usize,
    pub budget_ms: f64,
    /// How L2 is kept from helping: "flush" (a 2 x L2 write before each
    /// timed launch) or "none".
    pub l2: String,
    /// The kernels of a size were timed in interleaved rounds
    /// (`runner::time_interleaved`); runs before that timed each kernel's
    /// launches back to back.
    #[serde(default)]
    pub interleaved: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Meta {
    pub gpu: DeviceInfo,
    pub peak_fp32_gflops: Option<f64>,
    /// Dense TF32 tensor peak, and the per-SM rate it was computed from.
    #[serde(default)]
    pub peak_tf32_gflops: Option<f64>,
    #[serde(default)]
    pub tf32_flops_per_clock_per_sm: Option<i32>,
    pub peak_dram_gbs: Option<f64>,
    /// Driver's CUDA version, e.g. "13.0".
    pub cuda_driver: String,
    /// SM clocks nvidia-smi reported after each size, MHz (empty where unavailable).
    pub sm_clocks_seen_mhz: Vec<u32>,
    pub git_commit: String,
    /// UTC, ISO 8601.
    pub date: String,
    /// The PTX modules loaded, with their architectures (older runs: one `.target`).
    #[serde(alias = "ptx_arch")]
    pub ptx: String,
    pub settings: Settings,
    /// Why a baseline is missing, if one is.
    pub skipped: Vec<String>,
    /// Rows measured differently from the others: TMA kernels that ran
    /// on padded copies of A and B (the copies timed with them).
    #[serde(default)]
    pub notes: Vec<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Results {
    pub meta: Meta,
    pub rows: Vec<Row>,
}

impl Results {
    /// Fills the ratios that compare rows of the same size.
    pub fn link_rows(&mut self) {
        let rows = self.rows.clone();
        let find_row = |r: &Row, pred: &dyn Fn(&Row) -> bool| {
            rows.iter()
                .find(|o| o.m == r.m && o.n == r.n && o.k == r.k && pred(o))
                .cloned()
        };
        let find = |r: &Row, pred: &dyn Fn(&Row) -> bool| find_row(r, pred).and_then(|o| o.gflops);
        let sgemm = |o: &Row| o.kind == Kind::Cublas && o.math() == Math::Fp32;
        for r in &mut self.rows {
            let cublas = find(r, &sgemm);
            r.percent_of_cublas = r.gflops.zip(cublas).map(|(g, c)| 100.0 * g / c);
            if r.math().tensor_cores() && r.kind != Kind::Cublas {
                // cuBLAS of the same types, or of the math the kernel's
                // claims are measured against (3xTF32: SGEMM).
                let same = find_row(r, &|o| o.kind == Kind::Cublas && o.is_yardstick_of(r));
                let same_gflops = same.as_ref().and_then(|o| o.gflops);
                r.percent_of_cublas_math = r.gflops.zip(same_gflops).map(|(g, c)| 100.0 * g / c);
                r.error_over_cublas_math = same
                    .filter(|o| o.verified && r.verified)
                    .map(|o| r.max_error / o.max_error.max(f64::MIN_POSITIVE));
            }
            if r.kind == Kind::Rust {
                let twin = find(r, &|o| {
                    o.kind == Kind::Cuda && o.twin.as_deref() == Some(&r.variant)
                });
                r.rust_over_cuda = r.gflops.zip(twin).map(|(g, c)| g / c);
            }
        }
    }

    pub fn csv(&self) -> String {
        let mut s = String::from(
            "m,n,k,variant,kind,precision,elems,step,verified,max_error,reps,median_ms,p20_ms,p80_ms,min_ms,\
             gflops,percent_of_peak,percent_of_cublas,percent_of_cublas_math,error_over_cublas_math,\
             rust_over_cuda,model_bytes,model_intensity,model_ceiling_gflops,ncu_dram_read_bytes,\
             ncu_l2_bytes,ncu_shared_store_conflicts,ncu_shared_load_conflicts,ncu_tensor_pipe_percent,\
             ncu_achieved_occupancy_percent\n",
        );
        let opt = |x: Option<f64>| x.map_or(String::new(), |v| format!("{v}"));
        for r in &self.rows {
            let ncu = r.ncu.as_ref();
            s += &[
                r.m.to_string(),
                r.n.to_string(),
                r.k.to_string(),
                format!("\"{}\"", r.variant),
                format!("{:?}", r.kind).to_lowercase(),
                r.precision.clone(),
                format!("\"{}\"", r.elems),
                r.step.map_or(String::new(), |s| s.to_string()),
                r.verified.to_string(),
                format!("{:e}", r.max_error),
                r.reps.to_string(),
                opt(r.median_ms),
                opt(r.p20_ms),
                opt(r.p80_ms),
                opt(r.min_ms),
                opt(r.gflops),
                opt(r.percent_of_peak),
                opt(r.percent_of_cublas),
                opt(r.percent_of_cublas_math),
                opt(r.error_over_cublas_math),
                opt(r.rust_over_cuda),
                opt(r.model_bytes),
                opt(r.model_intensity),
                opt(r.model_ceiling_gflops),
                opt(ncu.map(|n| n.dram_read_bytes)),
                opt(ncu.map(|n| n.l2_bytes)),
                opt(ncu.map(|n| n.shared_store_bank_conflicts)),
                opt(ncu.map(|n| n.shared_load_bank_conflicts)),
                opt(ncu.map(|n| n.tensor_pipe_percent)),
                opt(ncu.map(|n| n.achieved_occupancy_percent)),
            ]
            .join(",");
            s.push('\n');
        }
        s
    }
}
