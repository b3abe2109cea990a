//! `bench --accuracy`: the 3xTF32 kernels' error next to cuBLAS SGEMM's
//! and cuBLAS TF32's on the same inputs, at K = 1024, 4096 and 16384, on
//! inputs uniform in [-1, 1) and on inputs spread over 16 binades
//! (`harness::inputs::Inputs`), where a split into two TF32 parts loses
//! the most. Errors only (each variant verified against the f64
//! reference, as the bench does): the speed lives in the bench's tables.
//! `--update-readme` writes the table into README.md; the library's rule
//! for 3xTF32 rests on it.

use anyhow::Result;
use comfy_table::{Table, presets::ASCII_MARKDOWN};
use harness::baselines::{self, Cublas};
use harness::inputs::{Inputs, random_inputs_of};
use harness::reference::Reference;
use harness::runner::{self, Buffers, Enqueue};
use harness::shape::Shape;
use kernels_gpu::elem::{Elems, Math, Storage};
use kernels_gpu::registry::{EXPERIMENTS, KERNELS};
use rust_gemm::gpu::Gpu;
use serde::{Deserialize, Serialize};

/// Rows and columns of C.
pub const MN: usize = 2048;
/// The depths measured.
pub const KS: [usize; 3] = [1024, 4096, 16384];

/// One run: where, when, and every variant's error per case.
#[derive(Serialize, Deserialize)]
pub struct AccuracyResults {
    pub gpu: String,
    pub date: String,
    pub git_commit: String,
    pub m: usize,
    pub n: usize,
    pub seed: u64,
    pub rows: Vec<AccuracyRow>,
}

/// One variant on one case.
#[derive(Serialize, Deserialize)]
pub struct AccuracyRow {
    /// `Inputs::name`.
    pub inputs: String,
    pub k: usize,
    pub variant: String,
    /// `Math::name`: FP32, TF32 or 3xTF32.
    pub precision: String,
    /// Largest `|c - ref| / sum |a * b|` (the bench's error).
    pub max_error: f64,
    /// Within the tolerance of the variant's types (3xTF32: FP32's).
    pub verified: bool,
}

/// Measures every case: the registered 3xTF32 kernels this GPU runs
/// (`wanted` filters them by name; `named` adds `registry::EXPERIMENTS`
/// of those named), cuBLAS SGEMM and cuBLAS TF32.
pub fn run(
    gpu: &Gpu,
    seed: u64,
    wanted: impl Fn(&str) -> bool,
    named: impl Fn(&str) -> bool,
) -> Result<AccuracyResults> {
    let experiments = EXPERIMENTS.iter().filter(|k| named(k.name));
    let specs: Vec<_> = KERNELS
        .iter()
        .filter(|k| wanted(k.name))
        .chain(experiments)
        .filter(|k| k.elems.math == Math::Tf32x3)
        .filter(|k| match gpu.check_runs(k) {
            Ok(()) => true,
            Err(why) => {
                eprintln!("skipping {}: {why}", k.name);
                false
            }
        })
        .collect();
    let rust = baselines::load_rust_kernels(gpu, &specs)?;
    let mut cublas = Vec::new();
    for elems in [Elems::FP32, Elems::TF32] {
        cublas.push(Cublas::load_elems(gpu, elems).map_err(anyhow::Error::msg)?);
    }
    let variants: Vec<&dyn Enqueue> = (cublas.iter().map(|c| c as &dyn Enqueue))
        .chain(rust.iter().map(|k| k as &dyn Enqueue))
        .collect();
    let mut rows = Vec::new();
    for inputs in Inputs::ALL {
        for k in KS {
            let shape = Shape::new(MN, MN, k)?;
            eprintln!("accuracy: {shape}, inputs {}", inputs.name());
            let (a, b) = random_inputs_of(inputs, &shape, Storage::F32, seed)?;
            let reference = Reference::new(shape, &a, &b, seed);
            let mut bufs = Buffers::new(gpu, shape, Storage::F32, (&a, &b), false)?;
            for v in &variants {
                let check = runner::verify(gpu, &mut bufs, &reference, *v)?;
                rows.push(AccuracyRow {
                    inputs: inputs.name().into(),
                    k,
                    variant: v.name().into(),
                    precision: v.elems().math.name().into(),
                    max_error: check.max_error,
                    verified: check.passed,
                });
            }
        }
    }
    Ok(AccuracyResults {
        gpu: gpu.info.name.clone(),
        date: crate::utc_now(),
        git_commit: harness::GIT_COMMIT.into(),
        m: MN,
        n: MN,
        seed,
        rows,
    })
}

impl AccuracyResults {
    /// Whether every registered 3xTF32 kernel's error (those of
    /// `registry::KERNELS`, not the instances kept for a measurement) is
    /// at most cuBLAS SGEMM's on every case: issue 24's condition for
    /// making 3xTF32 the default (README, "3xTF32").
    pub fn at_most_sgemm_everywhere(&self) -> bool {
        self.rows
            .iter()
            .filter(|r| r.precision == Math::Tf32x3.name())
            .filter(|r| KERNELS.iter().any(|k| k.name == r.variant))
            .all(|r| self.sgemm_error(r).is_some_and(|s| r.max_error <= s))
    }

    /// Every row within its tolerance but those of the instances kept
    /// for a measurement, which are expected to miss FP32's.
    pub fn registered_verified(&self) -> bool {
        self.rows
            .iter()
            .filter(|r| !EXPERIMENTS.iter().any(|k| k.name == r.variant))
            .all(|r| r.verified)
    }

    fn sgemm_error(&self, row: &AccuracyRow) -> Option<f64> {
        self.rows
            .iter()
            .find(|r| r.inputs == row.inputs && r.k == row.k && r.precision == Math::Fp32.name())
            .map(|r| r.max_error)
    }
}

/// The README's table: one line per case, cuBLAS SGEMM's and TF32's
/// errors, then each 3xTF32 kernel's with its ratio to SGEMM's.
pub fn markdown(results: &AccuracyResults) -> String {
    let mut variants: Vec<(&str, &str)> = Vec::new();
    for r in &results.rows {
        if !variants.iter().any(|(v, _)| *v == r.variant) {
            variants.push((&r.variant, &r.precision));
        }
    }
    let mut table = Table::new();
    table.load_preset(ASCII_MARKDOWN);
    let mut header = vec!["inputs".to_string(), "K".to_string()];
    header.extend(variants.iter().map(|(v, p)| format!("{v} ({p})")));
    table.set_header(header);
    let mut cases: Vec<(&str, usize)> = Vec::new();
    for r in &results.rows {
        if !cases.contains(&(r.inputs.as_str(), r.k)) {
            cases.push((&r.inputs, r.k));
        }
    }
    for (inputs, k) in cases {
        let mut line = vec![inputs.to_string(), k.to_string()];
        for (v, p) in &variants {
            let Some(r) = results
                .rows
                .iter()
                .find(|r| r.inputs == inputs && r.k == k && r.variant == *v)
            else {
                line.push("-".into());
                continue;
            };
            let fail = if r.verified { "" } else { " FAIL" };
            let cell = match results.sgemm_error(r) {
                Some(s) if *p == Math::Tf32x3.name() && s > 0.0 => {
                    format!("{:.1e} ({:.2}x){fail}", r.max_error, r.max_error / s)
                }
                _ => format!("{:.1e}{fail}", r.max_error),
            };
            line.push(cell);
        }
        table.add_row(line);
    }
    format!(
        "Max error `|c - ref| / sum |a b|` (x cuBLAS SGEMM's on the same inputs), m = n = {}, \
         {} at commit {} ({}):\n\n{table}\n",
        results.m,
        results.gpu,
        results.git_commit,
        results.date.get(..10).unwrap_or(&results.date),
    )
}
