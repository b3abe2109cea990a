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
    /// The epilogue fused into this row's launches (`--epilogue`): its
    /// activation's name (`Activation::name`), always with a bias per
    /// column of C. Absent for plain rows (and in files written before
    /// fused rows existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epilogue: Option<String>,
    /// Fused rows: median time over that of the plain row of the same
    /// kernel (for cuBLASLt's, of plain cuBLAS of the same types), same
    /// size, same run: what the epilogue costs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fused_over_plain: Option<f64>,
    /// Fused kernel rows: GFLOP/s over cuBLASLt's with the same epilogue
    /// and element types, same size, same run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub over_cublaslt_fused: Option<f64>,
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

    /// Whether this is the plain row of `fused`, a row with the epilogue
    /// of `activation`: the same kernel (named [`harness::runner::fused_name`]
    /// of this one) or, for cuBLASLt's fused row, plain cuBLAS of the same
    /// types.
    pub fn is_plain_of(&self, fused: &Row, activation: &str) -> bool {
        if self.epilogue.is_some() || self.kind != fused.kind {
            return false;
        }
        if fused.kind == Kind::Cublas {
            return self.precision == fused.precision && self.elems == fused.elems;
        }
        kernels_gpu::epilogue::Activation::from_name(activation)
            .is_some_and(|a| harness::runner::fused_name(&self.variant, a) == fused.variant)
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
        // The plain baselines: a fused cuBLASLt row is none of them.
        let sgemm =
            |o: &Row| o.kind == Kind::Cublas && o.math() == Math::Fp32 && o.epilogue.is_none();
        for r in &mut self.rows {
            let cublas = find(r, &sgemm);
            r.percent_of_cublas = r.gflops.zip(cublas).map(|(g, c)| 100.0 * g / c);
            if r.math().tensor_cores() && r.kind != Kind::Cublas {
                // cuBLAS of the same types, or of the math the kernel's
                // claims are measured against (3xTF32: SGEMM): plain for
                // the speed, fused rows too (`over_cublaslt_fused` is
                // theirs); for the error of a fused row, cuBLASLt with
                // the same epilogue where it ran (its D, too, carries the
                // epilogue's error), else plain cuBLAS (the error is
                // measured on the same scale, `reference::with_epilogue`).
                let yardstick = |r: &Row, epilogue: Option<&str>| {
                    find_row(r, &|o| {
                        o.kind == Kind::Cublas
                            && o.epilogue.as_deref() == epilogue
                            && o.is_yardstick_of(r)
                    })
                };
                let same = yardstick(r, None);
                let same_error = match r.epilogue.as_deref() {
                    Some(e) => yardstick(r, Some(e)).or_else(|| same.clone()),
                    None => same.clone(),
                };
                let same_gflops = same.as_ref().and_then(|o| o.gflops);
                r.percent_of_cublas_math = r.gflops.zip(same_gflops).map(|(g, c)| 100.0 * g / c);
                r.error_over_cublas_math = same_error
                    .filter(|o| o.verified && r.verified)
                    .map(|o| r.max_error / o.max_error.max(f64::MIN_POSITIVE));
            }
            if r.kind == Kind::Rust {
                let twin = find(r, &|o| {
                    o.kind == Kind::Cuda && o.twin.as_deref() == Some(&r.variant)
                });
                r.rust_over_cuda = r.gflops.zip(twin).map(|(g, c)| g / c);
            }
            if let Some(activation) = r.epilogue.as_deref() {
                r.fused_over_plain = find_row(r, &|o| o.is_plain_of(r, activation))
                    .and_then(|o| o.median_ms)
                    .zip(r.median_ms)
                    .map(|(plain, fused)| fused / plain);
                if r.kind != Kind::Cublas {
                    let lt = find(r, &|o| {
                        o.kind == Kind::Cublas
                            && o.epilogue.as_deref() == Some(activation)
                            && o.is_yardstick_of(r)
                    });
                    r.over_cublaslt_fused = r.gflops.zip(lt).map(|(g, c)| g / c);
                }
            }
        }
    }

    pub fn csv(&self) -> String {
        let mut s = String::from(
            "m,n,k,variant,kind,precision,elems,step,verified,max_error,reps,median_ms,p20_ms,p80_ms,min_ms,\
             gflops,percent_of_peak,percent_of_cublas,percent_of_cublas_math,error_over_cublas_math,\
             rust_over_cuda,model_bytes,model_intensity,model_ceiling_gflops,ncu_dram_read_bytes,\
             ncu_l2_bytes,ncu_shared_store_conflicts,ncu_shared_load_conflicts,ncu_tensor_pipe_percent,\
             ncu_achieved_occupancy_percent,epilogue,fused_over_plain,over_cublaslt_fused\n",
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
                r.epilogue.clone().unwrap_or_default(),
                opt(r.fused_over_plain),
                opt(r.over_cublaslt_fused),
            ]
            .join(",");
            s.push('\n');
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row as an older bench.json holds it (no epilogue fields).
    fn row(variant: &str, kind: &str, precision: &str, elems: &str, ms: f64) -> Row {
        serde_json::from_value(serde_json::json!({
            "m": 4096, "n": 4096, "k": 4096, "variant": variant, "kind": kind,
            "precision": precision, "elems": elems, "step": null, "twin": null,
            "verified": true, "max_error": 1e-3, "reps": 10, "median_ms": ms,
            "p20_ms": ms, "p80_ms": ms, "min_ms": ms, "gflops": 1000.0 / ms,
            "percent_of_peak": null, "percent_of_cublas": null,
            "rust_over_cuda": null, "model_bytes": null, "model_intensity": null,
            "model_ceiling_gflops": null, "ncu": null
        }))
        .expect("an old row reads")
    }

    /// Fused rows get their time over their plain row's and their GFLOP/s
    /// over cuBLASLt's fused row; a fused cuBLASLt row is neither SGEMM
    /// nor the plain baseline of its types; plain rows are written as
    /// before (no epilogue fields).
    #[test]
    fn fused_rows_link_to_their_plain_row_and_to_cublaslt() {
        let bf16 = "bf16 x bf16 -> bf16";
        let fused = |mut r: Row| {
            r.epilogue = Some("gelu-tanh".into());
            r.max_error = 2e-3;
            r
        };
        let mut results = Results {
            meta: serde_json::from_str(include_str!("../../../docs/bench.json"))
                .map(|r: Results| r.meta)
                .expect("docs/bench.json reads"),
            rows: vec![
                row("k", "rust", "BF16", bf16, 1.0),
                fused(row("k + bias + gelu-tanh", "rust", "BF16", bf16, 1.02)),
                row("cuBLAS BF16 (bf16 C)", "cublas", "BF16", bf16, 1.1),
                fused(row(
                    "cuBLASLt BF16 (bf16 C) + bias + gelu-tanh",
                    "cublas",
                    "BF16",
                    bf16,
                    1.2,
                )),
            ],
        };
        results.link_rows();
        let close = |a: f64, b: f64| assert!((a / b - 1.0).abs() < 1e-12, "{a} vs {b}");
        let [plain, k, cublas, lt] = &results.rows[..] else {
            unreachable!()
        };
        close(k.fused_over_plain.unwrap(), 1.02);
        close(k.over_cublaslt_fused.unwrap(), 1.2 / 1.02);
        close(lt.fused_over_plain.unwrap(), 1.2 / 1.1);
        // "% of cuBLAS of its types" is plain cuBLAS's, fused rows too.
        close(k.percent_of_cublas_math.unwrap(), 110.0 / 1.02);
        assert_eq!(plain.percent_of_cublas_math.map(|p| p.round()), Some(110.0));
        // Its error is measured against cuBLASLt's fused row (whose D
        // carries the epilogue's error too): 2e-3 over 2e-3, where plain
        // cuBLAS's 1e-3 would give 2.
        close(k.error_over_cublas_math.unwrap(), 1.0);
        close(plain.error_over_cublas_math.unwrap(), 1.0);
        assert!(plain.fused_over_plain.is_none() && plain.over_cublaslt_fused.is_none());
        assert!(cublas.fused_over_plain.is_none() && lt.over_cublaslt_fused.is_none());
        let json = serde_json::to_value(plain).unwrap();
        assert!(json.get("epilogue").is_none() && json.get("fused_over_plain").is_none());
        let json = serde_json::to_value(k).unwrap();
        assert_eq!(json["epilogue"], "gelu-tanh");
        let csv = results.csv();
        assert!(csv.lines().nth(2).unwrap().contains(",gelu-tanh,"));
    }
}
