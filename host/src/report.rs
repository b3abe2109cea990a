//! What a run found, as text for people and as one JSON object for programs.

use kernels_gpu::launch::KernelSpec;
use serde::Serialize;

use crate::model::{self, ModelEstimate};
use crate::reference::Mode;
use crate::runner::{Measurement, TimingOptions};
use crate::shape::Shape;
use rust_gemm::gpu::DeviceInfo;

/// One kernel's result, with the derived rates.
#[derive(Clone, Debug, Serialize)]
pub struct KernelReport {
    pub kernel: String,
    pub summary: String,
    /// The math ("FP32", "TF32", "BF16", "FP16"): which peak the rate is
    /// compared with.
    pub precision: &'static str,
    /// A, B and C as stored (`f32 x f32 -> f32`): with the math, what the
    /// result was verified as.
    pub elems: String,
    #[serde(flatten)]
    pub measurement: Measurement,
    pub gflops: Option<f64>,
    /// Percent of the peak of the kernel's math (FP32 pipe or the tensor
    /// cores), from the device's own clock and SM count.
    pub percent_of_peak: Option<f64>,
    pub model: ModelEstimate,
    /// Model bytes / median time: the DRAM bandwidth the model implies, GB/s.
    pub model_gbs: Option<f64>,
}

impl KernelReport {
    pub fn new(
        spec: &KernelSpec,
        shape: &Shape,
        info: &DeviceInfo,
        measurement: Measurement,
    ) -> Self {
        let model = model::estimate(spec, shape, model::Peaks::of(info));
        let median_s = measurement.timing.as_ref().map(|t| t.median_ms * 1e-3);
        let gflops = median_s.map(|s| shape.flops() / s / 1e9);
        let peak = info.peak_gflops(spec.elems.math);
        Self {
            kernel: spec.name.into(),
            summary: spec.summary.into(),
            precision: spec.elems.math.name(),
            elems: spec.elems.storage().to_string(),
            percent_of_peak: gflops.zip(peak).map(|(g, p)| 100.0 * g / p),
            model_gbs: median_s.map(|s| model.bytes / s / 1e9),
            measurement,
            gflops,
            model,
        }
    }

    pub fn passed(&self) -> bool {
        self.measurement.verification.passed
    }
}

/// A whole run of the `host` program.
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    pub gpu: DeviceInfo,
    pub peak_fp32_gflops: Option<f64>,
    pub peak_tf32_gflops: Option<f64>,
    /// Dense BF16/FP16 tensor peak, where known.
    pub peak_bf16_gflops: Option<f64>,
    pub peak_dram_gbs: Option<f64>,
    /// The stored types the kernels ran on (`f32`, or each set of A, B
    /// and C types, `bf16 x bf16 -> f32`), for the header.
    pub storage: String,
    /// The PTX modules loaded, and their architectures.
    pub ptx: String,
    pub shape: Shape,
    pub seed: u64,
    pub timing: TimingOptions,
    pub reference: Mode,
    pub kernels: Vec<KernelReport>,
}

/// `1234567.8` -> `"1,234,568"`.
pub fn thousands(x: f64) -> String {
    let s = format!("{:.0}", x.abs());
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    if x < 0.0 { format!("-{out}") } else { out }
}

impl RunReport {
    /// The header lines: GPU, PTX, problem and how it is timed.
    pub fn header(&self) -> String {
        let g = &self.gpu;
        let (major, minor) = g.compute_capability;
        let clock = g
            .clock_mhz
            .map_or("clock unknown".into(), |c| format!("{c:.0} MHz"));
        let mut peak = self.peak_fp32_gflops.map_or(String::new(), |p| {
            format!(", FP32 peak {} GFLOP/s", thousands(p))
        });
        if let Some(p) = self.peak_tf32_gflops {
            peak += &format!(", TF32 tensor peak {} GFLOP/s", thousands(p));
        }
        if let Some(p) = self.peak_bf16_gflops.filter(|_| self.storage != "f32") {
            peak += &format!(", BF16/FP16 tensor peak {} GFLOP/s", thousands(p));
        }
        let dram = self
            .peak_dram_gbs
            .map_or(String::new(), |b| format!(", DRAM {} GB/s", thousands(b)));
        let Shape { m, n, k } = self.shape;
        let t = &self.timing;
        format!(
            "GPU      {} (sm_{major}{minor}, {} SMs at {clock}{peak}{dram}; driver CUDA {}.{})\n\
             Kernels  rustc nvptx64, modules {} (SASS: shipped for this GPU; PTX JIT: compiled by the driver)\n\
             Problem  C[{m}x{n}] = A[{m}x{k}] * B[{k}x{n}], {} row-major, inputs uniform in [-1, 1) from seed {}\n\
             Timing   {} warm-up + {} timed launches per kernel, CUDA events, median; L2 {}\n",
            g.name,
            g.sms,
            g.driver_cuda_version / 1000,
            g.driver_cuda_version % 1000 / 10,
            self.ptx,
            self.storage,
            self.seed,
            t.warmup,
            t.reps,
            if t.flush_l2 {
                "flushed before each timed launch"
            } else {
                "not flushed"
            },
        )
    }

    /// One kernel's block of text.
    pub fn kernel_text(&self, r: &KernelReport) -> String {
        let v = &r.measurement.verification;
        let mut s = format!("\n{}: {}\n", r.kernel, r.summary);
        let how = match v.mode {
            Mode::Full => format!("all {} elements against an f64 CPU product", v.checked),
            Mode::Sampled => format!(
                "{} sampled elements (random, corners, last row and column) against f64 dot products",
                v.checked
            ),
        };
        s += &format!(
            "  verify   {}  max error {:.2e} (tolerance {:.2e}; |c - ref| / sum|a*b|), {how}; {} non-finite\n",
            if v.passed { "PASS" } else { "FAIL" },
            v.max_error,
            v.tolerance,
            v.nonfinite,
        );
        if !v.passed {
            if let Some(w) = v.worst {
                s += &format!(
                    "           worst at C[{}][{}]: got {}, want {:.6}\n",
                    w.row, w.col, w.got, w.want
                );
            }
            s += "  time     not timed: a kernel that fails verification is never timed\n";
            return s;
        }
        let Some(t) = &r.measurement.timing else {
            return s + "  time     not timed (--reps 0)\n";
        };
        s += &format!(
            "  time     median {:.3} ms, min {:.3} ms, p20-p80 {:.3}-{:.3} ms\n",
            t.median_ms, t.min_ms, t.p20_ms, t.p80_ms
        );
        let gflops = r.gflops.unwrap_or(0.0);
        s += &format!(
            "  rate     {} GFLOP/s{}\n",
            thousands(gflops),
            r.percent_of_peak.map_or(String::new(), |p| format!(
                " = {p:.1}% of {} peak",
                r.precision
            ))
        );
        let m = &r.model;
        s += &format!(
            "  model    the lesson's model: {:.1} GB from DRAM, {:.2} FLOP/byte{}\n",
            m.bytes / 1e9,
            m.intensity,
            m.ceiling_gflops.map_or(String::new(), |c| format!(
                ", roofline ceiling {} GFLOP/s",
                thousands(c)
            )),
        );
        if let Some(gbs) = r.model_gbs {
            let vs_peak = self.peak_dram_gbs.map_or(String::new(), |p| {
                let ratio = gbs / p;
                if ratio > 1.0 {
                    format!(
                        " = {ratio:.1}x the DRAM peak: caches served what the model charges to DRAM"
                    )
                } else {
                    format!(" = {:.0}% of the DRAM peak", 100.0 * ratio)
                }
            });
            s += &format!(
                "           at the measured time that is {} GB/s{vs_peak}\n",
                thousands(gbs)
            );
        }
        s
    }

    pub fn text(&self) -> String {
        let mut s = self.header();
        for r in &self.kernels {
            s += &self.kernel_text(r);
        }
        s
    }
}
