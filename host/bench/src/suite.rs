//! `bench --suite`: the library (`rust_gemm::blas`) on a suite of real
//! shapes, next to cuBLAS SGEMM in the same process. For each call:
//! `Auto`, every registered kernel (and split) that could compute it, and
//! cuBLAS, each verified against the f64 reference on the same inputs,
//! then all that passed timed together in interleaved rounds
//! (`runner::time_rounds`, the bench's own timing: CUDA events, L2
//! flushed before each launch, median). The
//! table gives Auto / cuBLAS per call and its geometric mean, and Auto
//! against the fastest registered choice (the 5 % rule of issue 11).
//! Also the library's host-side cost per call.

use std::time::Instant;

use anyhow::{Context, Result, bail};
use comfy_table::{Table, presets::ASCII_MARKDOWN};
use cudarc::driver::CudaSlice;
use harness::baselines::Cublas;
use harness::reference::check_gemm;
use harness::runner::{self, L2Flush, TimingOptions};
use kernels_gpu::elem::{Elem, Elems, Math};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rust_gemm::blas::{self, Algorithm, AutoEntry, Choice, Compute, GemmConfig, Op, Sgemm};
use rust_gemm::gpu::Gpu;
use serde::{Deserialize, Serialize};

/// One call of the suite.
pub struct Case {
    pub name: String,
    pub cfg: GemmConfig,
}

/// The suite of issue 11: squares, the ladder's awkward shapes, skinny
/// and deep ones, transposes, a strided batch and padded leading
/// dimensions. All row-major.
pub fn cases() -> Vec<Case> {
    let case = |name: &str, cfg: GemmConfig| Case {
        name: name.into(),
        cfg,
    };
    let mut out: Vec<Case> = [256, 512, 1000, 1024, 2048, 4096, 8192, 4097]
        .into_iter()
        .map(|n| case(&n.to_string(), GemmConfig::new(n, n, n)))
        .collect();
    for (m, n, k) in [
        (4096, 1000, 2048),
        (3000, 5000, 700),
        (512, 512, 16384),
        (8192, 8192, 64),
        (1, 4096, 4096),
        (4096, 1, 4096),
    ] {
        out.push(case(&format!("{m}x{n}x{k}"), GemmConfig::new(m, n, k)));
    }
    out.push(case(
        "4096, A^T",
        GemmConfig::new(4096, 4096, 4096).op_a(Op::T),
    ));
    out.push(case(
        "4096, B^T",
        GemmConfig::new(4096, 4096, 4096).op_b(Op::T),
    ));
    let p = 128 * 128;
    out.push(case(
        "256 x 128^3 (batch)",
        GemmConfig::new(128, 128, 128).batched(256, p, p, p),
    ));
    out.push(case(
        "4000, ld 4096",
        GemmConfig::new(4000, 4000, 4000).lds(4096, 4096, 4096),
    ));
    out
}

/// A call named on the command line (`--shapes`): m x n x k, row-major,
/// A and B as `ops` says.
#[derive(Clone, Debug)]
pub struct Call {
    pub text: String,
    pub dims: (usize, usize, usize),
    pub ops: (Op, Op),
}

impl Call {
    /// The suite's call: named as written, alpha 1, beta 0.
    pub fn case(&self) -> Case {
        let (m, n, k) = self.dims;
        Case {
            name: self.text.clone(),
            cfg: GemmConfig::new(m, n, k).op_a(self.ops.0).op_b(self.ops.1),
        }
    }
}

/// Parses `MxNxK` or `MxNxK:OPS` (OPS one of NN, NT, TN, TT) into a
/// [`Call`]; the error names what is wrong and the form expected.
pub fn parse_call(s: &str) -> Result<Call, String> {
    let form = "expected MxNxK or MxNxK:OPS with OPS one of NN, NT, TN, TT (e.g. 21x4096x14336:NT)";
    let (dims, ops) = s.split_once(':').unwrap_or((s, "NN"));
    let dims: Vec<usize> = dims
        .split('x')
        .map(|d| d.trim().parse::<usize>())
        .collect::<Result<_, _>>()
        .map_err(|_| format!("call '{s}': the sizes are not numbers; {form}"))?;
    let [m, n, k] = dims[..] else {
        return Err(format!("call '{s}': three sizes needed; {form}"));
    };
    if m == 0 || n == 0 || k == 0 {
        return Err(format!("call '{s}': a size is 0; {form}"));
    }
    let op = |c: char| match c {
        'N' | 'n' => Ok(Op::N),
        'T' | 't' => Ok(Op::T),
        _ => Err(format!("call '{s}': '{ops}' is not an op pair; {form}")),
    };
    let mut chars = ops.chars();
    let (Some(a), Some(b), None) = (chars.next(), chars.next(), chars.next()) else {
        return Err(format!("call '{s}': '{ops}' is not an op pair; {form}"));
    };
    Ok(Call {
        text: s.to_string(),
        dims: (m, n, k),
        ops: (op(a)?, op(b)?),
    })
}

/// Most FLOPs of one random call of [`random_cases`] (`2 m n k batch`):
/// a 4096^3 product is 1.4e11. The families' calls may go beyond it.
pub const RANDOM_FLOPS: f64 = 1.5e11;

/// Most elements of A, B and C together in one random call (480 MB of
/// f32): the host draws them and the reference reads them.
pub const RANDOM_ELEMS: f64 = 1.2e8;

/// The random-shape suite of issue 23, drawn from `seed` (reproducible):
/// `count` calls with m, n and k log-uniform from 1 to 16384 (the largest
/// shrunk until the call is within [`RANDOM_FLOPS`] and
/// [`RANDOM_ELEMS`]), each with a random
/// layout, ops, leading-dimension padding (half the calls), batch (a
/// quarter, up to 64 products) and scalars; then the families that are
/// weak today, as fixed groups drawn from the same seed: decode (m 1..64
/// against 4096, 11008 or 14336 square-ish weights), LM heads (m 1..512,
/// n 32000..152064, k 4096), long K (m, n 1..256, k up to 100,000) and
/// small K (k 1..128). `Auto`'s model is fitted on seeds 1 to 4 and
/// judged on seeds 5 and 6 (`fit_auto_model`).
pub fn random_cases(seed: u64, count: usize) -> Vec<Case> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let log_uniform = |rng: &mut SmallRng, lo: usize, hi: usize| -> usize {
        let x = rng.random_range((lo as f64).ln()..((hi + 1) as f64).ln());
        (x.exp() as usize).clamp(lo, hi)
    };
    let mut out = Vec::new();
    for i in 0..count {
        let mut dims = [0; 3].map(|_| log_uniform(&mut rng, 1, 16384));
        let batch = if rng.random_bool(0.25) {
            log_uniform(&mut rng, 2, 64)
        } else {
            1
        };
        let too_big = |[m, n, k]: [usize; 3]| {
            let (m, n, k, b) = (m as f64, n as f64, k as f64, batch as f64);
            2.0 * m * n * k * b > RANDOM_FLOPS || (m * k + k * n + m * n) * b > RANDOM_ELEMS
        };
        while too_big(dims) {
            let largest = (0..3).max_by_key(|&j| dims[j]).expect("three dims");
            dims[largest] = dims[largest] * 3 / 4;
        }
        let [m, n, k] = dims;
        let layout = if rng.random_bool(0.5) {
            blas::Layout::RowMajor
        } else {
            blas::Layout::ColMajor
        };
        let op = |rng: &mut SmallRng| if rng.random_bool(0.5) { Op::N } else { Op::T };
        let (op_a, op_b) = (op(&mut rng), op(&mut rng));
        let (alpha, beta) = match rng.random_range(0..4) {
            0 => (1.0, 0.0),
            1 => (rng.random_range(-2.0f32..2.0), 0.0),
            2 => (1.0, 1.0),
            _ => (
                rng.random_range(-2.0f32..2.0),
                rng.random_range(-2.0f32..2.0),
            ),
        };
        let mut cfg = GemmConfig::new(m, n, k)
            .layout(layout)
            .op_a(op_a)
            .op_b(op_b)
            .scalars(alpha, beta);
        let padded = rng.random_bool(0.5);
        if padded {
            let mut pad = || rng.random_range(1..=64);
            cfg = cfg
                .clone()
                .lds(cfg.lda + pad(), cfg.ldb + pad(), cfg.ldc + pad());
        }
        if batch > 1 {
            // Each product's matrices one after another, a few elements apart.
            let (sa, sb, sc) = cfg.buffer_lens();
            let mut gap = || rng.random_range(0..=16);
            cfg = cfg.batched(batch, sa + gap(), sb + gap(), sc + gap());
        }
        let ops = format!("{op_a:?}{op_b:?}");
        let layout = match layout {
            blas::Layout::RowMajor => "row",
            blas::Layout::ColMajor => "col",
        };
        let mut name = format!("r{i} {m}x{n}x{k} {layout} {ops}");
        if padded {
            name += " ld+";
        }
        if batch > 1 {
            name += &format!(" x{batch}");
        }
        if (alpha, beta) != (1.0, 0.0) {
            name += &format!(" a{alpha:.2} b{beta:.2}");
        }
        out.push(Case { name, cfg });
    }
    let weights = [4096, 11008, 14336];
    for i in 0..4 {
        let m = log_uniform(&mut rng, 1, 64);
        let n = weights[rng.random_range(0..3)];
        let k = weights[rng.random_range(0..3)];
        out.push(Case {
            name: format!("decode{i} {m}x{n}x{k}"),
            cfg: GemmConfig::new(m, n, k).op_b(Op::T),
        });
    }
    for i in 0..3 {
        let m = log_uniform(&mut rng, 1, 512);
        let n = rng.random_range(32000..=152064);
        out.push(Case {
            name: format!("lmhead{i} {m}x{n}x4096"),
            cfg: GemmConfig::new(m, n, 4096).op_b(Op::T),
        });
    }
    for i in 0..3 {
        let (m, n) = (log_uniform(&mut rng, 1, 256), log_uniform(&mut rng, 1, 256));
        let k = log_uniform(&mut rng, 16384, 100_000);
        out.push(Case {
            name: format!("longk{i} {m}x{n}x{k}"),
            cfg: GemmConfig::new(m, n, k),
        });
    }
    for i in 0..3 {
        let (m, n) = (
            log_uniform(&mut rng, 256, 16384),
            log_uniform(&mut rng, 256, 16384),
        );
        let k = log_uniform(&mut rng, 1, 128);
        out.push(Case {
            name: format!("smallk{i} {m}x{n}x{k}"),
            cfg: GemmConfig::new(m, n, k),
        });
    }
    out
}

/// One variant of one call, measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Measured {
    /// `Auto`, a kernel (with ` split-K s`), or `cuBLAS SGEMM`.
    pub variant: String,
    pub passed: bool,
    pub max_error: f64,
    pub median_ms: Option<f64>,
    pub gflops: Option<f64>,
}

/// One call: what Auto chose and every variant's numbers.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CaseResult {
    pub name: String,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub batch: usize,
    /// Layouts of the row-major problem (`Ops::suffix`: `nn`, `tn`, ...).
    #[serde(default)]
    pub ops: String,
    /// The rest of the call as given (absent in runs before the random
    /// suite).
    #[serde(default)]
    pub call: Option<CallDetail>,
    pub auto_choice: String,
    pub auto: Measured,
    pub cublas: Measured,
    /// The registered kernels (and splits) that can compute the call.
    pub registered: Vec<Measured>,
}

/// What a call gave besides its shape: layout, ops as given, leading
/// dimensions, strides and scalars.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CallDetail {
    pub layout: String,
    pub op_a: String,
    pub op_b: String,
    pub lds: (usize, usize, usize),
    pub strides: (usize, usize, usize),
    pub alpha: f32,
    pub beta: f32,
}

impl CallDetail {
    fn of(cfg: &GemmConfig) -> Self {
        Self {
            layout: format!("{:?}", cfg.layout),
            op_a: format!("{:?}", cfg.op_a),
            op_b: format!("{:?}", cfg.op_b),
            lds: (cfg.lda, cfg.ldb, cfg.ldc),
            strides: (cfg.stride_a, cfg.stride_b, cfg.stride_c),
            alpha: cfg.alpha,
            beta: cfg.beta,
        }
    }
}

impl CaseResult {
    pub fn auto_over_cublas(&self) -> Option<f64> {
        Some(self.cublas.median_ms? / self.auto.median_ms?)
    }

    /// The fastest verified registered variant.
    pub fn fastest(&self) -> Option<&Measured> {
        self.registered
            .iter()
            .filter(|r| r.passed && r.median_ms.is_some())
            .min_by(|a, b| a.median_ms.partial_cmp(&b.median_ms).expect("finite times"))
    }

    pub fn auto_over_fastest(&self) -> Option<f64> {
        Some(self.fastest()?.median_ms? / self.auto.median_ms?)
    }
}

/// The whole run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SuiteResults {
    pub gpu: String,
    pub git_commit: String,
    pub date: String,
    pub cases: Vec<CaseResult>,
    /// Host time of one `Sgemm::gemm` call (checks, choice, launch), µs,
    /// median over batches of calls on a 64 x 64 x 64 problem (the same
    /// call repeated: since the handle keeps `Auto`'s choices, one it
    /// has seen).
    pub call_overhead_us: f64,
    /// `Sgemm::choose` alone (checks, plan, choice), µs: since the handle
    /// keeps its choices, on calls it has not seen (64 x 64 products of
    /// ever new m).
    pub plan_and_choose_us: f64,
    /// The variants of a call were timed together in interleaved rounds
    /// (`runner::time_rounds`); runs before that timed each variant's
    /// launches in one stretch (absent in their JSON: false).
    #[serde(default)]
    pub interleaved: bool,
    /// What `Auto`'s model read on this GPU: its SMs, its DRAM bandwidth
    /// (GB/s) and each FP32 candidate's blocks per SM (absent in runs
    /// before the twenty-fourth session), so that the model can be
    /// replayed on the recorded calls without a GPU.
    #[serde(default)]
    pub model_inputs: Option<ModelInputs>,
    /// The mode `Auto` was allowed ([`compute_name`]: "FP32", "TF32",
    /// "3xTF32"), and the math cuBLAS ran in: TF32 next to TF32, SGEMM
    /// otherwise (absent in runs before the twenty-fifth session: FP32).
    #[serde(default)]
    pub compute: Option<String>,
    /// The seed of a run of the whole random suite (`None` for the fixed
    /// suite, `--shapes`, a subset by `--calls`, and runs before the
    /// forty-eighth session, whose seed is in their file's name).
    #[serde(default)]
    pub random_seed: Option<u64>,
}

/// The name a suite run records for a compute mode.
pub fn compute_name(compute: Compute) -> &'static str {
    match compute {
        Compute::Fp32 => "FP32",
        Compute::Tf32x3 => "3xTF32",
        Compute::Tf32 => "TF32",
    }
}

/// The mode a run recorded ([`compute_name`]; runs before the
/// twenty-fifth session record none: FP32).
#[cfg(test)]
pub fn compute_of(name: Option<&str>) -> Result<Compute> {
    match name {
        None | Some("FP32") => Ok(Compute::Fp32),
        Some("TF32") => Ok(Compute::Tf32),
        Some("3xTF32") => Ok(Compute::Tf32x3),
        Some(other) => bail!("the run's compute mode {other:?} is none of FP32, TF32, 3xTF32"),
    }
}

/// The math cuBLAS runs in next to `Auto` in mode `compute`: TF32 next
/// to TF32, SGEMM's FP32 otherwise (3xTF32 claims FP32's accuracy).
fn cublas_math(compute: Compute) -> Math {
    match compute {
        Compute::Tf32 => Math::Tf32,
        Compute::Fp32 | Compute::Tf32x3 => Math::Fp32,
    }
}

/// The cuBLAS column's name for a run in mode `compute`.
fn cublas_name(compute: Compute) -> &'static str {
    match cublas_math(compute) {
        Math::Tf32 => "cuBLAS TF32",
        _ => "cuBLAS SGEMM",
    }
}

/// The GPU's side of `Auto`'s model (`blas::choose`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ModelInputs {
    pub sms: usize,
    pub dram_gbs: f64,
    pub blocks_per_sm: Vec<(String, usize)>,
}

impl SuiteResults {
    /// Geometric mean of Auto / cuBLAS over the calls measured.
    pub fn geomean(&self) -> Option<f64> {
        let ratios: Vec<f64> = self
            .cases
            .iter()
            .filter_map(CaseResult::auto_over_cublas)
            .collect();
        (!ratios.is_empty())
            .then(|| (ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64).exp())
    }

    pub fn all_verified(&self) -> bool {
        self.cases
            .iter()
            .all(|c| c.auto.passed && c.cublas.passed && c.registered.iter().all(|r| r.passed))
    }
}

/// The measured table `Auto` reads (`rust_gemm::blas::table_for`): per
/// call, the fastest verified registered kernel and split.
pub fn auto_table(results: &SuiteResults) -> Vec<AutoEntry> {
    results
        .cases
        .iter()
        .filter_map(|c| {
            let fastest = c.fastest()?;
            let (kernel, split_k) = match fastest.variant.split_once(" split-K ") {
                Some((k, s)) => (k.to_string(), s.parse().ok()?),
                None => (fastest.variant.clone(), 1),
            };
            let ops = if !c.ops.is_empty() {
                c.ops.clone()
            } else if c.name.contains("A^T") {
                "tn".into()
            } else if c.name.contains("B^T") {
                "nt".into()
            } else {
                "nn".into()
            };
            Some(AutoEntry {
                m: c.m,
                n: c.n,
                k: c.k,
                batch: c.batch,
                ops,
                kernel,
                split_k,
            })
        })
        .collect()
}

/// How long to time each variant.
pub struct Budget {
    pub warmup: usize,
    pub min_reps: usize,
    pub ms: f64,
    pub seed: u64,
}

/// The splits worth timing for `kernel` on `cfg`: 1, and when its tiles
/// leave SMs idle on one product with K long enough, 2 to 64 (slices of
/// at least 64), and 128 and 256 where the slices still make at most
/// four waves of blocks (a few tiles over a long K: whether more slices
/// than SMs pay is what the fit of `Model::max_split` asks).
fn splits(cfg: &GemmConfig, choice_tile: (usize, usize), sms: usize) -> Vec<usize> {
    let (m, n) = match cfg.layout {
        blas::Layout::RowMajor => (cfg.m, cfg.n),
        blas::Layout::ColMajor => (cfg.n, cfg.m),
    };
    let tiles = m.div_ceil(choice_tile.0) * n.div_ceil(choice_tile.1);
    if cfg.batch == 1 && tiles < sms && cfg.k >= 512 {
        let many = [128, 256].into_iter().filter(|s| tiles * s <= 4 * sms);
        [1, 2, 4, 8, 16, 32, 64]
            .into_iter()
            .chain(many)
            .filter(|s| s * 64 <= cfg.k)
            .collect()
    } else {
        vec![1]
    }
}

/// Runs the suite's `cases` (those named in `only`, if given).
pub fn run(
    gpu: &Gpu,
    budget: &Budget,
    cases: Vec<Case>,
    only: Option<&[String]>,
    compute: Compute,
    random_seed: Option<u64>,
) -> Result<SuiteResults> {
    let sgemm = Sgemm::new(gpu.stream.clone()).context("loading the library")?;
    let cublas = Cublas::load(gpu, cublas_math(compute)).map_err(anyhow::Error::msg)?;
    let mut flush = L2Flush::new(gpu)?;
    let sms = gpu.info.sms.max(1) as usize;
    let mut results = Vec::new();
    for case in cases {
        if only.is_some_and(|o| !o.iter().any(|n| n == &case.name)) {
            continue;
        }
        eprintln!("suite: {}", case.name);
        let case = Case {
            cfg: case.cfg.clone().compute(compute),
            ..case
        };
        results.push(run_case(
            gpu, &sgemm, &cublas, &case, budget, &mut flush, sms,
        )?);
    }
    let (call_overhead_us, plan_and_choose_us) = overhead(gpu, &sgemm)?;
    let model_inputs = ModelInputs {
        sms,
        dram_gbs: gpu.info.peak_dram_gbs().unwrap_or(1000.0),
        blocks_per_sm: (sgemm.candidates_in(compute)?.iter())
            .map(|c| (c.spec.name.to_string(), c.blocks_per_sm))
            .collect(),
    };
    Ok(SuiteResults {
        gpu: gpu.info.name.clone(),
        git_commit: harness::GIT_COMMIT.into(),
        date: crate::utc_now(),
        cases: results,
        call_overhead_us,
        plan_and_choose_us,
        interleaved: true,
        model_inputs: Some(model_inputs),
        compute: Some(compute_name(compute).into()),
        random_seed,
    })
}

/// Floats each buffer needs for `cfg`.
fn lens(cfg: &GemmConfig) -> (usize, usize, usize) {
    cfg.buffer_lens()
}

fn random(len: usize, rng: &mut SmallRng) -> Vec<f32> {
    (0..len).map(|_| rng.random_range(-1.0f32..1.0)).collect()
}

/// One way to compute a call.
enum Variant {
    Auto,
    Cublas,
    /// A registered kernel and split, named (`Algorithm::Kernel`).
    Named(GemmConfig),
}

fn run_case(
    gpu: &Gpu,
    sgemm: &Sgemm,
    cublas: &Cublas,
    case: &Case,
    budget: &Budget,
    flush: &mut L2Flush,
    sms: usize,
) -> Result<CaseResult> {
    let cfg = &case.cfg;
    let (la, lb, lc) = lens(cfg);
    let mut rng = SmallRng::seed_from_u64(budget.seed);
    let (a_host, b_host) = (random(la, &mut rng), random(lb, &mut rng));
    // With beta = 0 (every call of the fixed suite) C starts as NaN, which
    // must not reach the result (and the padding of ldc must keep its NaN
    // bits); otherwise random values, which the result depends on.
    let c_host = if cfg.beta == 0.0 {
        vec![f32::NAN; lc]
    } else {
        random(lc, &mut rng)
    };
    let stream = &gpu.stream;
    let a = stream.clone_htod(&a_host)?;
    let b = stream.clone_htod(&b_host)?;
    let mut c = stream.clone_htod(&c_host)?;
    let flops = 2.0 * (cfg.m * cfg.n * cfg.k * cfg.batch) as f64;

    let auto_choice = sgemm.choose(cfg, (la, lb, lc))?;
    // As the library plans it (a batch that shares B may fold into one product).
    let plan = blas::plan(cfg, (la, lb, lc))?.folded(false);
    // Each variant is verified in its own math (a TF32 kernel, and cuBLAS
    // in TF32, with TF32's tolerance).
    let f32_in = |math| Elems::new(Elem::F32, Elem::F32, Elem::F32, math);
    let mut variants = vec![
        ("Auto".to_string(), Variant::Auto, auto_choice.kernel.elems),
        (
            cublas_name(cfg.compute).to_string(),
            Variant::Cublas,
            f32_in(cublas_math(cfg.compute)),
        ),
    ];
    for cand in sgemm
        .candidates_in(cfg.compute)?
        .iter()
        // Those that can run this call: its layouts, and its batch (the
        // TF32 kernels of steps 11-13 take one product per launch).
        .filter(|c| plan.runs_on(c.spec))
    {
        // Those that split K (FP32 pointer kernels, steps 17-18).
        let splits = if cand.spec.splits_k() {
            splits(cfg, cand.spec.launch.block_tile, sms)
        } else {
            vec![1]
        };
        for split in splits {
            let choice = Choice {
                kernel: cand.spec,
                split_k: split,
            };
            let named = cfg.clone().algorithm(Algorithm::Kernel {
                name: cand.spec.name.into(),
                split_k: split,
            });
            variants.push((choice.to_string(), Variant::Named(named), cand.spec.elems));
        }
    }
    let call = |variant: &Variant, c: &mut CudaSlice<f32>| -> Result<()> {
        match variant {
            Variant::Auto => {
                sgemm.gemm(cfg, &a, &b, c)?;
            }
            Variant::Cublas => cublas.sgemm(cfg, &a, &b, c)?,
            Variant::Named(named) => {
                sgemm.gemm(named, &a, &b, c)?;
            }
        }
        Ok(())
    };

    // Every variant verified first (C reset to the inputs' C before each),
    // then those that passed timed together, in interleaved rounds.
    let mut measured = Vec::with_capacity(variants.len());
    for (name, variant, elems) in &variants {
        stream.memcpy_htod(&c_host, &mut c)?;
        call(variant, &mut c)?;
        let after = stream.clone_dtoh(&c)?;
        let v = check_gemm(
            cfg,
            (&a_host, &b_host),
            (&c_host, &after),
            *elems,
            2048,
            budget.seed,
        );
        if !v.passed {
            eprintln!("suite: {name} FAILED verification: {v:?}");
        }
        measured.push(Measured {
            variant: name.clone(),
            passed: v.passed,
            max_error: v.max_error,
            median_ms: None,
            gflops: None,
        });
    }
    let passed: Vec<usize> = (0..variants.len())
        .filter(|&i| measured[i].passed)
        .collect();
    let names: Vec<&str> = passed.iter().map(|&i| variants[i].0.as_str()).collect();
    let opts = TimingOptions {
        warmup: budget.warmup,
        reps: budget.min_reps,
        flush_l2: true,
        budget_ms: Some(budget.ms),
    };
    let timings = runner::time_rounds(
        gpu,
        &mut (&mut c, flush),
        &names,
        opts,
        |ctx| &mut *ctx.1,
        |ctx, i| call(&variants[passed[i]].1, &mut *ctx.0),
    )?;
    for (&i, t) in passed.iter().zip(timings) {
        measured[i].median_ms = Some(t.median_ms);
        measured[i].gflops = Some(t.gflops(flops));
    }
    let mut measured = measured.into_iter();
    let (auto, cublas_m) = (measured.next(), measured.next());
    Ok(CaseResult {
        name: case.name.clone(),
        m: cfg.m,
        n: cfg.n,
        k: cfg.k,
        batch: cfg.batch,
        ops: plan.ops.suffix().into(),
        call: Some(CallDetail::of(cfg)),
        auto_choice: auto_choice.to_string(),
        auto: auto.context("Auto is the first variant")?,
        cublas: cublas_m.context("cuBLAS is the second variant")?,
        registered: measured.collect(),
    })
}

/// Host time of one library call, and of its checks and choice alone
/// (µs): the median of 20 rounds of 200 calls, of a 64 x 64 x 64 product
/// (the handle keeps the choice after the first) and of `m x 64 x 64`
/// products with an m the handle has not seen (a choice each).
fn overhead(gpu: &Gpu, sgemm: &Sgemm) -> Result<(f64, f64)> {
    let cfg = GemmConfig::new(64, 64, 64);
    let stream = &gpu.stream;
    let a = stream.clone_htod(&vec![1.0f32; 64 * 64])?;
    let b = stream.clone_htod(&vec![1.0f32; 64 * 64])?;
    let mut c = stream.alloc_zeros::<f32>(64 * 64)?;
    sgemm.gemm(&cfg, &a, &b, &mut c)?;
    stream.synchronize()?;
    let median = |mut xs: Vec<f64>| {
        xs.sort_by(f64::total_cmp);
        xs[xs.len() / 2]
    };
    let (mut call, mut choose) = (Vec::new(), Vec::new());
    for round in 0..20 {
        let t = Instant::now();
        for _ in 0..200 {
            sgemm.gemm(&cfg, &a, &b, &mut c)?;
        }
        call.push(t.elapsed().as_secs_f64() * 1e6 / 200.0);
        stream.synchronize()?;
        let t = Instant::now();
        for i in 0..200 {
            let m = 65 + 200 * round + i;
            let new = GemmConfig::new(m, 64, 64);
            let lens = (m * 64, 64 * 64, m * 64);
            std::hint::black_box(sgemm.choose(std::hint::black_box(&new), lens)?);
        }
        choose.push(t.elapsed().as_secs_f64() * 1e6 / 200.0);
    }
    if stream.synchronize().is_err() {
        bail!("the overhead calls failed on the GPU");
    }
    Ok((median(call), median(choose)))
}

fn fmt(x: Option<f64>, f: impl Fn(f64) -> String) -> String {
    x.map_or_else(|| "-".into(), f)
}

/// The suite table (Markdown).
pub fn table(results: &SuiteResults) -> Table {
    let mut t = Table::new();
    t.load_preset(ASCII_MARKDOWN);
    t.set_header([
        "call",
        "Auto runs",
        "Auto ms",
        "Auto GFLOP/s",
        "cuBLAS GFLOP/s",
        "Auto / cuBLAS",
        "fastest registered",
        "Auto / fastest",
    ]);
    for c in &results.cases {
        let status = |m: &Measured| if m.passed { "" } else { " FAIL" };
        t.add_row([
            c.name.clone(),
            format!("{}{}", c.auto_choice, status(&c.auto)),
            fmt(c.auto.median_ms, |x| format!("{x:.3}")),
            fmt(c.auto.gflops, |x| format!("{x:.0}")),
            format!(
                "{}{}",
                fmt(c.cublas.gflops, |x| format!("{x:.0}")),
                status(&c.cublas)
            ),
            fmt(c.auto_over_cublas(), |x| format!("{x:.2}")),
            c.fastest().map_or("-".into(), |f| f.variant.clone()),
            fmt(c.auto_over_fastest(), |x| format!("{x:.2}")),
        ]);
    }
    t
}

/// The README block: the table, the geometric mean, the overhead.
pub fn markdown(results: &SuiteResults) -> String {
    let worst = results
        .cases
        .iter()
        .filter_map(|c| Some((c.auto_over_cublas()?, c.name.as_str())))
        .min_by(|a, b| a.0.total_cmp(&b.0));
    let behind = results
        .cases
        .iter()
        .filter(|c| c.auto_over_fastest().is_some_and(|r| r < 0.95))
        .map(|c| c.name.as_str())
        .collect::<Vec<_>>();
    let mut s = format!(
        "{} (commit {}, {}): `rust_gemm::blas` with `Algorithm::Auto`{} next to {} \
         on the same inputs, in one process; every variant verified against the f64 reference, \
         then timed (median, L2 flushed before each launch{}). \"Fastest registered\" is the \
         quickest of every kernel (and split) the library can run for the call.\n\n{}\n\n",
        results.gpu,
        results.git_commit,
        results.date,
        match results.compute.as_deref() {
            None | Some("FP32") => String::new(),
            Some(mode) => format!(" in {mode} mode"),
        },
        if results.compute.as_deref() == Some("TF32") {
            "cuBLAS TF32"
        } else {
            "cuBLAS SGEMM"
        },
        if results.interleaved {
            "; a call's variants timed together in interleaved rounds, so that they share the \
             GPU's clock states"
        } else {
            ""
        },
        table(results)
    );
    s += &format!(
        "Geometric mean of Auto / cuBLAS: **{}**; lowest: {}. Auto within 5 % of the fastest \
         registered choice: {}. Host cost of one call (checks, choice, launch): {:.1} µs; \
         checks and choice alone: {:.2} µs.\n",
        fmt(results.geomean(), |x| format!("{x:.2}")),
        worst.map_or("-".into(), |(r, n)| format!("{r:.2} ({n})")),
        if behind.is_empty() {
            "every call".to_string()
        } else {
            format!("not at {}", behind.join(", "))
        },
        results.call_overhead_us,
        results.plan_and_choose_us
    );
    s
}

/// `Auto`'s choices replayed on a recorded run of the random suite
/// (`seed`'s): what [`replay`] found. (The tests' tool: the bench itself
/// runs the GPU.)
#[cfg(test)]
pub struct Replay {
    /// Geometric mean over the calls of cuBLAS's time over the chosen
    /// variant's recorded time.
    pub geomean: f64,
    /// Calls whose choice the run did not time by name (with `nearest`).
    pub untimed: usize,
    /// Per call: its name, the choice, cuBLAS's time over the choice's,
    /// and over the fastest timed variant's.
    pub calls: Vec<(String, String, f64, f64)>,
}

/// What `blas::choose_with_model` with `model` chooses for each call of
/// the recorded run `run` of the random suite of seed `seed`, in the
/// run's compute mode, from the run's SMs, DRAM bandwidth and occupancy
/// (its candidates: the kernels it recorded occupancy for) and the GPU's
/// table.
#[cfg(test)]
pub fn replayed_choices(
    run: &SuiteResults,
    seed: u64,
    model: &blas::Model,
) -> Result<Vec<blas::Choice>> {
    let compute = compute_of(run.compute.as_deref()).with_context(|| format!("seed {seed}"))?;
    let inputs = (run.model_inputs.as_ref())
        .with_context(|| format!("seed {seed}: the run has no model inputs; rerun it"))?;
    let mut candidates = Vec::new();
    for (name, per_sm) in &inputs.blocks_per_sm {
        let spec = kernels_gpu::registry::find(name)
            .with_context(|| format!("{name} is no longer registered"))?;
        candidates.push(blas::Candidate {
            spec,
            blocks_per_sm: *per_sm,
        });
    }
    let table = blas::table_for(&run.gpu);
    let cases = random_cases(seed, 24);
    if cases.len() != run.cases.len() {
        bail!(
            "seed {seed}: the run has {} calls, the suite {}",
            run.cases.len(),
            cases.len()
        );
    }
    let choose = |case: &Case| -> Result<blas::Choice> {
        let cfg = &case.cfg.clone().compute(compute);
        let plan = blas::plan(cfg, cfg.buffer_lens())?.folded(false);
        blas::choose_with_model(
            model,
            &plan,
            &candidates,
            inputs.sms,
            inputs.dram_gbs,
            table.as_deref(),
        )
        .with_context(|| format!("{}: no candidate", case.name))
    };
    cases.iter().map(choose).collect()
}

/// Replays `blas::choose_with_model` with `model` on the recorded run
/// `run` of the random suite of seed `seed`, in the run's compute mode
/// (its candidates: the kernels it recorded occupancy for), without a
/// GPU: each call's
/// choice, from the run's SMs, DRAM bandwidth and occupancy (and the
/// GPU's table), timed as the run timed that kernel and split, or, where
/// the run's `Auto` chose the same, as `Auto`. A choice the run did not
/// time is an error, or, with `nearest`, takes the time of its kernel's
/// nearest timed split (for a fit, which tries models the run was not
/// made for).
#[cfg(test)]
pub fn replay(run: &SuiteResults, seed: u64, model: &blas::Model, nearest: bool) -> Result<Replay> {
    let (mut logs, mut untimed, mut calls) = (0.0, 0, Vec::new());
    let cases = random_cases(seed, 24);
    let choices = replayed_choices(run, seed, model)?;
    for ((case, result), choice) in cases.iter().zip(&run.cases).zip(choices) {
        let name = choice.to_string();
        let timed = (result.registered.iter())
            .find(|r| r.variant == name)
            .and_then(|r| r.median_ms)
            .or(result.auto.median_ms.filter(|_| result.auto_choice == name));
        let ms = match timed {
            Some(ms) => ms,
            None if nearest => {
                untimed += 1;
                let split_of = |variant: &str| -> Option<usize> {
                    match variant.split_once(" split-K ") {
                        Some((kernel, s)) if kernel == choice.kernel.name => s.parse().ok(),
                        None if variant == choice.kernel.name => Some(1),
                        _ => None,
                    }
                };
                let distance = |s: usize| ((s as f64) / (choice.split_k as f64)).ln().abs();
                (result.registered.iter())
                    .filter_map(|r| Some((distance(split_of(&r.variant)?), r.median_ms?)))
                    .min_by(|a, b| a.0.total_cmp(&b.0))
                    .map(|(_, ms)| ms)
                    .with_context(|| format!("seed {seed}, {}: {name} never timed", case.name))?
            }
            None => bail!(
                "seed {seed}, {}: Auto now takes {name}, which the recorded run did not time; \
                 rerun `bench --suite --random {seed}` and record it",
                case.name
            ),
        };
        let cublas = result.cublas.median_ms.context("cuBLAS not timed")?;
        logs += (cublas / ms).ln();
        let fastest = (result.registered.iter())
            .filter_map(|r| r.median_ms)
            .fold(f64::INFINITY, f64::min);
        calls.push((case.name.clone(), name, cublas / ms, cublas / fastest));
    }
    Ok(Replay {
        geomean: (logs / run.cases.len() as f64).exp(),
        untimed,
        calls,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::targets::{self, FIT_SEEDS};

    /// The random suite is the same for a seed, different for another,
    /// within its FLOP budget, and every call is one the library plans.
    #[test]
    fn random_suite_is_reproducible_and_valid() {
        let names =
            |seed| -> Vec<String> { random_cases(seed, 24).into_iter().map(|c| c.name).collect() };
        assert_eq!(names(1), names(1));
        assert_ne!(names(1), names(2));
        for seed in [1, 2] {
            let cases = random_cases(seed, 24);
            assert_eq!(cases.len(), 24 + 4 + 3 + 3 + 3);
            for case in &cases {
                let cfg = &case.cfg;
                let flops = 2.0 * (cfg.m * cfg.n * cfg.k * cfg.batch) as f64;
                let (la, lb, lc) = cfg.buffer_lens();
                if case.name.starts_with('r') {
                    assert!(flops <= RANDOM_FLOPS, "{}: {flops:e}", case.name);
                    assert!(
                        (la + lb + lc) as f64 <= 1.05 * RANDOM_ELEMS,
                        "{}",
                        case.name
                    );
                }
                blas::plan(cfg, cfg.buffer_lens()).unwrap_or_else(|e| panic!("{}: {e}", case.name));
                eprintln!("seed {seed}: {}", case.name);
            }
        }
    }

    /// `--shapes` reads sizes and ops, and says what is wrong otherwise.
    #[test]
    fn calls_parse_or_say_why_not() {
        let call = parse_call("21x4096x14336:NT").expect("a call");
        assert_eq!(call.dims, (21, 4096, 14336));
        assert!(matches!(call.ops, (Op::N, Op::T)));
        let case = call.case();
        assert_eq!((case.cfg.m, case.cfg.n, case.cfg.k), (21, 4096, 14336));
        assert!(matches!(
            parse_call("8x8x8").expect("a call").ops,
            (Op::N, Op::N)
        ));
        for (bad, why) in [
            ("8x8", "three sizes"),
            ("8x0x8", "a size is 0"),
            ("8xax8", "not numbers"),
            ("8x8x8:NX", "not an op pair"),
            ("8x8x8:NNT", "not an op pair"),
        ] {
            let err = parse_call(bad).expect_err(bad);
            assert!(
                err.contains(why) && err.contains("MxNxK:OPS"),
                "{bad}: {err}"
            );
        }
    }

    /// The recorded runs of the random suite (`docs/random-suite/`, what
    /// `Auto` is to be fitted on and judged on without a GPU) read back,
    /// are the calls the generator draws for their seeds, and verified.
    #[test]
    fn recorded_random_suites_are_the_generators() {
        for seed in RECORDED_SEEDS {
            let recorded = recorded(seed);
            let names: Vec<String> = recorded.cases.iter().map(|c| c.name.clone()).collect();
            let drawn: Vec<String> = random_cases(seed, 24).into_iter().map(|c| c.name).collect();
            assert_eq!(names, drawn, "seed {seed}");
            assert!(recorded.all_verified(), "seed {seed}");
            assert!(recorded.geomean().is_some_and(|g| g > 0.0));
        }
    }

    /// The seeds of the random suite with a recorded run
    /// (`docs/random-suite/seed<N>.json`).
    const RECORDED_SEEDS: [u64; 6] = [1, 2, 3, 4, 5, 6];

    /// A recorded run of the random suite (`docs/random-suite/`).
    fn recorded(seed: u64) -> SuiteResults {
        recorded_file(&format!("seed{seed}.json"))
    }

    fn recorded_file(name: &str) -> SuiteResults {
        let path = format!(
            "{}/../../docs/random-suite/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).expect("the recorded run");
        serde_json::from_str(&text).expect("it parses")
    }

    /// `Auto`'s rule replayed without a GPU on the recorded random suites:
    /// for each call, the choice `blas::choose_with` makes from the GPU's
    /// recorded SMs, DRAM bandwidth and occupancy (and the H200 table),
    /// timed as the recorded run timed that kernel and split. A change to
    /// the rule that makes a worse choice lowers the geometric mean and
    /// fails here; one that picks a variant the run did not time says so
    /// (Auto's own time stands for its choice).
    /// The floors are the replays of `blas::MODEL` less 0.005: 0.994,
    /// 0.923, 0.922 and 0.995 on seeds 1 to 4, fitted on; 0.872 and 0.913
    /// on seeds 5 and 6, held out (H100 runs of the thirty-sixth session;
    /// seed 5's 0.863 became 0.872 with the vector calls' model of the
    /// forty-seventh session).
    #[test]
    fn auto_replayed_on_the_recorded_suites_keeps_its_geometric_mean() {
        for (seed, floor) in [
            (1u64, 0.989),
            (2, 0.918),
            (3, 0.917),
            (4, 0.990),
            (5, 0.867),
            (6, 0.908),
        ] {
            let replay = replay(&recorded(seed), seed, &blas::MODEL, false)
                .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            eprintln!("seed {seed}: Auto replayed {:.3}x cuBLAS", replay.geomean);
            assert!(
                replay.geomean >= floor,
                "seed {seed}: {:.3} < {floor}",
                replay.geomean
            );
        }
    }

    /// Issue 23's targets judge a held-out seed and only report a fitted
    /// one: seed 5 (held out) misses the FP32 geometric mean (0.86 <
    /// 0.95) and more, and says which; seed 1 (fitted on) reports the
    /// same targets and fails nothing. A TF32 run is judged on its
    /// geometric mean alone.
    #[test]
    fn the_targets_fail_a_held_out_seed_that_misses_them() {
        let held = recorded(5);
        let t = targets::targets(&held);
        assert_eq!(t.len(), 7);
        let geomean = &t[0];
        assert!(!geomean.met() && geomean.value.is_some_and(|g| (0.8..0.95).contains(&g)));
        let missed = targets::missed(5, &t).expect("seed 5 misses");
        assert!(
            missed.starts_with("Auto misses")
                && missed.contains("held-out seed 5")
                && missed.contains("geometric mean of Auto / cuBLAS SGEMM 0.8"),
            "{missed}"
        );
        let table = targets::markdown(5, &t);
        assert!(
            table.contains("held out") && table.contains("**missed**"),
            "{table}"
        );
        let fitted = targets::targets(&recorded(1));
        assert_eq!(targets::missed(1, &fitted), None);
        assert!(targets::markdown(1, &fitted).contains("fitted on"));
        // Every family of the suite has its calls in the run.
        assert!(t.iter().all(|t| t.value.is_some()), "{t:?}");
        let mut tf32 = held.clone();
        tf32.compute = Some("TF32".into());
        let t = targets::targets(&tf32);
        assert_eq!(t.len(), 1);
        assert!(t[0].what.contains("TF32"));
    }

    /// The replay runs in the recorded run's compute mode: a run in TF32
    /// mode plans its calls in TF32 (the TMA kernels' FP32 stand-ins are
    /// no candidates of an FP32 plan, so a TF32 kernel in the run's
    /// occupancy is chosen only in TF32 mode), and a mode it does not
    /// know is an error that names it.
    #[test]
    fn replay_takes_the_runs_compute_mode() {
        assert_eq!(compute_of(None).unwrap(), Compute::Fp32);
        for c in [Compute::Fp32, Compute::Tf32, Compute::Tf32x3] {
            assert_eq!(compute_of(Some(compute_name(c))).unwrap(), c);
        }
        let e = compute_of(Some("FP64")).unwrap_err().to_string();
        assert!(e.contains("\"FP64\"") && e.contains("TF32"), "{e}");
        // Seed 1's FP32 run, with a TF32 kernel added to its occupancy:
        // replayed as FP32 it never takes it; relabelled TF32, where the
        // model prefers the tensor cores on the large calls, it does.
        let mut run = recorded(1);
        let inputs = run.model_inputs.as_mut().expect("model inputs");
        inputs
            .blocks_per_sm
            .push(("wgmma_tr_128x128x32_s6".into(), 1));
        let tf32_chosen = |run: &SuiteResults| match replayed_choices(run, 1, &blas::MODEL) {
            Ok(choices) => choices.iter().filter(|c| c.kernel.step == 18).count(),
            Err(e) => panic!("{e}"),
        };
        assert_eq!(tf32_chosen(&run), 0);
        run.compute = Some("TF32".into());
        assert!(tf32_chosen(&run) > 0);
        run.compute = Some("FP16".into());
        let e = replay(&run, 1, &blas::MODEL, true).err().expect("refused");
        assert!(
            format!("{e:#}").contains("seed 1: the run's compute mode \"FP16\""),
            "{e:#}"
        );
    }

    /// `blas::MODEL` is the best of the grid of models below on the
    /// recorded runs of the random suite's seeds in [`FIT_SEEDS`], 1 to 4
    /// (the geometric mean over their calls; a variant a run did not time
    /// stands in at its kernel's nearest timed split); the other recorded
    /// seeds, 5 and 6, are held out and only reported. `FIT_CALLS=1
    /// cargo test --release -p bench --bin bench fit_auto_model --
    /// --nocapture` prints the grid's best few with both halves, and each
    /// call's choice by `MODEL` next to the grid's best
    /// (docs/measurements.md, thirty-fifth session).
    #[test]
    fn fit_auto_model() {
        let fit: Vec<(u64, SuiteResults)> = FIT_SEEDS.iter().map(|&s| (s, recorded(s))).collect();
        let held: Vec<(u64, SuiteResults)> = RECORDED_SEEDS
            .iter()
            .filter(|s| !FIT_SEEDS.contains(s))
            .map(|&s| (s, recorded(s)))
            .collect();
        // The geometric mean over every call of the runs.
        let score = |runs: &[(u64, SuiteResults)], model: &blas::Model| {
            let logs: f64 = runs
                .iter()
                .map(|(seed, run)| {
                    let r = replay(run, *seed, model, true).expect("a replay");
                    r.geomean.ln() * r.calls.len() as f64
                })
                .sum();
            let calls: usize = runs.iter().map(|(_, run)| run.cases.len()).sum();
            (logs / calls as f64).exp()
        };
        let mut grid = Vec::new();
        for wave_latency_s in [0.0, 0.5e-6, 1e-6, 2e-6, 3e-6] {
            for max_split in [16, 32, 64] {
                for partial_wave in [0.0, 0.25, 0.5, 0.75, 1.0] {
                    for store_s_per_value in [0.0, 25e-9, 50e-9, 100e-9, 150e-9, 200e-9, 300e-9] {
                        for reduce_launch_s in [0.0, 4e-6] {
                            for slice_s in [0.0, 0.4e-6, 0.8e-6, 1.6e-6] {
                                for min_slice in [64, 128, 256] {
                                    for scalar_store in [1.0, 2.0, 4.0, 8.0] {
                                        let model = blas::Model {
                                            scalar_store,
                                            wave_latency_s,
                                            max_split,
                                            partial_wave,
                                            store_s_per_value,
                                            reduce_launch_s,
                                            slice_s,
                                            min_slice,
                                        };
                                        grid.push((score(&fit, &model), model));
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        grid.sort_by(|a, b| b.0.total_cmp(&a.0));
        for (fitted, model) in grid.iter().take(20) {
            let untimed: usize = (fit.iter().chain(&held))
                .map(|(seed, run)| replay(run, *seed, model, true).expect("a replay").untimed)
                .sum();
            eprintln!(
                "fitted {fitted:.3}  held out {:.3}  ({untimed} calls at a nearest split)  {model:?}",
                score(&held, model)
            );
        }
        if std::env::var_os("FIT_CALLS").is_some() {
            for (seed, run) in fit.iter().chain(&held) {
                let best = replay(run, *seed, &grid[0].1, true).expect("a replay");
                let ours = replay(run, *seed, &blas::MODEL, true).expect("a replay");
                for ((name, choice, ratio, fastest), (_, grid_choice, grid_ratio, _)) in
                    ours.calls.into_iter().zip(best.calls)
                {
                    let mark = if (ratio / grid_ratio - 1.0).abs() > 0.03 {
                        "*"
                    } else {
                        " "
                    };
                    eprintln!(
                        "{seed}{mark} MODEL {ratio:.2} grid {grid_ratio:.2} fastest {fastest:.2} \
                         {name:<36} {choice:<36} | {grid_choice}"
                    );
                }
            }
        }
        let ours = score(&fit, &blas::MODEL);
        eprintln!(
            "MODEL: fitted {ours:.3}  held out {:.3}",
            score(&held, &blas::MODEL)
        );
        assert!(
            ours >= grid[0].0 - 1e-9,
            "the grid's best does better on the fitted seeds: {:?}",
            grid[0]
        );
    }
}
