//! `bench`: every Rust kernel next to its CUDA C++ twin and cuBLAS (SGEMM,
//! and TF32 for the tensor-core kernels), in one process, at a sweep of sizes. Each variant is verified against
//! the same f64 reference before it is timed. Writes JSON, CSV, an SVG plot
//! and a Markdown table into a results folder; `--update-readme` puts the
//! table and plot into README.md. Run it as `cargo xtask bench`.

mod accuracy;
mod devices;
mod ncu;
mod plot;
mod render;
mod results;
mod suite;
mod targets;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Parser;
use harness::baselines::{self, Cublas};
use harness::model;
use harness::reference::Verification;
use harness::runner::{self, Buffers, Enqueue, TimingOptions};
use harness::shape::Shape;
use harness::timing::Timing;
use indicatif::{ProgressBar, ProgressStyle};
use kernels_gpu::elem::{Elem, Elems, Math, Scaling, Storage};
use kernels_gpu::epilogue::Activation;
use kernels_gpu::launch::KernelSpec;
use kernels_gpu::launch::Ops;
use kernels_gpu::registry::{EXPERIMENTS, KERNELS, TRANSPOSED};
use rust_gemm::blas::Compute;
use rust_gemm::gpu::Gpu;
use rust_gemm::launch::Kernel;

use results::{Kind, Meta, Results, Row, Settings};

const DEFAULT_SIZES: &str = "256,512,1000,1024,2048,4096,4097,8192";
const QUICK_SIZES: &str = "1000,4096";
const README_BEGIN: &str = "<!-- bench:begin (written by `cargo xtask bench --update-readme`) -->";
const README_END: &str = "<!-- bench:end -->";
const README_PLOT: &str = "docs/bench.svg";
const SUITE_BEGIN: &str =
    "<!-- suite:begin (written by `cargo xtask bench --suite --update-readme`) -->";
const SUITE_END: &str = "<!-- suite:end -->";
const ACCURACY_BEGIN: &str =
    "<!-- accuracy:begin (written by `cargo xtask bench --accuracy --update-readme`) -->";
const ACCURACY_END: &str = "<!-- accuracy:end -->";

/// Benchmark every kernel against cuBLAS and the CUDA C++ twins.
#[derive(Parser, Debug)]
#[command(
    about = "Every Rust kernel next to its CUDA C++ twin and cuBLAS SGEMM, verified, then timed"
)]
struct Args {
    /// Sizes: n for square problems, MxNxK for others (comma-separated).
    #[arg(long, value_delimiter = ',')]
    sizes: Option<Vec<String>>,
    /// Only these kernels (Rust names; their CUDA twins follow them), plus
    /// "cublas" (SGEMM, FP32), "cublas_tf32" (TF32 tensor cores allowed),
    /// "cublas_bf16" and "cublas_fp16" (cublasGemmEx, f32 accumulation and C),
    /// "cublas_bf16_c16" and "cublas_fp16_c16" (C in the input type), and
    /// with --epilogue cuBLASLt with it fused: "cublaslt_fused" (FP32),
    /// "cublaslt_fused_tf32", "cublaslt_fused_bf16", "cublaslt_fused_fp16",
    /// "cublaslt_fused_bf16_c16", "cublaslt_fused_fp16_c16".
    #[arg(long, value_delimiter = ',')]
    kernels: Option<Vec<String>>,
    /// Also run each Rust kernel with this activation and a bias per
    /// column of C fused into its epilogue, on the same inputs, next to its
    /// plain row (and cuBLASLt's fused epilogue of the same types, where it
    /// has that activation): none (the bias alone), relu, gelu-tanh,
    /// gelu-erf, silu.
    #[arg(long, value_name = "ACTIVATION", value_parser = parse_activation)]
    epilogue: Option<Activation>,
    /// A short run: sizes 1000 and 4096, a smaller time budget.
    #[arg(long)]
    quick: bool,
    /// Folder for the results (a dated subfolder is made inside).
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Untimed launches per variant and size, after the verified one.
    #[arg(long, default_value_t = 2)]
    warmup: usize,
    /// Least number of timed launches.
    #[arg(long, default_value_t = 5)]
    min_reps: usize,
    /// Timed launches add up to about this many milliseconds per variant and size.
    #[arg(long, default_value_t = 300.0)]
    budget_ms: f64,
    /// Do not flush L2 before each timed launch.
    #[arg(long)]
    no_flush: bool,
    /// Run the library's suite of real shapes instead (`rust_gemm::blas`
    /// with Auto, every registered kernel and split, and cuBLAS SGEMM);
    /// with --from, a suite.json.
    #[arg(long)]
    suite: bool,
    /// With --suite: write Auto's measured table for this GPU (the
    /// fastest registered choice per call) to this file
    /// (host/gemm/data/auto-<gpu>.json is the one the library reads).
    #[arg(long, value_name = "JSON", requires = "suite")]
    write_auto: Option<PathBuf>,
    /// With --suite: the random-shape suite drawn from this seed instead
    /// of the fixed one (`suite::random_cases`: --random-calls random
    /// calls, then the decode, LM-head, long-K and small-K families),
    /// judged on issue 23's targets; the run fails where a seed the model
    /// was not fitted on (any but 1-4) misses one.
    #[arg(long, value_name = "SEED", requires = "suite")]
    random: Option<u64>,
    /// With --random: how many random calls before the families.
    #[arg(long, default_value_t = 24, requires = "random")]
    random_calls: usize,
    /// With --suite: these calls instead of the fixed suite, each
    /// MxNxK:OPS (row-major; OPS is NN, NT, TN or TT, NN if left out),
    /// e.g. 21x4096x14336:NT.
    #[arg(long, value_delimiter = ',', value_parser = suite::parse_call, requires = "suite", conflicts_with = "random")]
    shapes: Option<Vec<suite::Call>>,
    /// With --suite: only the calls of these names (as in the table).
    #[arg(long, value_delimiter = ',', requires = "suite")]
    calls: Option<Vec<String>>,
    /// With --suite: what Auto may multiply the f32 calls in: fp32
    /// (next to cuBLAS SGEMM), tf32 (the TF32 kernels too, next to cuBLAS
    /// in TF32 math) or 3xtf32 (the 3xTF32 kernels too, next to SGEMM).
    #[arg(long, default_value = "fp32", value_parser = parse_compute, requires = "suite")]
    compute: Compute,
    /// Measure the 3xTF32 kernels' error instead, next to cuBLAS SGEMM's
    /// and TF32's, at m = n = 2048 and K = 1024, 4096, 16384, on uniform
    /// inputs and on inputs spread over 16 binades (--kernels narrows the
    /// 3xTF32 kernels); with --from, an accuracy.json.
    #[arg(long, conflicts_with = "suite")]
    accuracy: bool,
    /// Also profile each Rust kernel once under Nsight Compute (if installed).
    #[arg(long)]
    ncu: bool,
    /// Size at which --ncu profiles.
    #[arg(long, default_value_t = 4096)]
    ncu_size: usize,
    /// Rewrite README.md's results section and docs/bench.svg from this run.
    #[arg(long)]
    update_readme: bool,
    /// Do not run: re-render tables, plot (and README) from a bench.json.
    #[arg(long, value_name = "BENCH_JSON")]
    from: Option<PathBuf>,
    /// The README to update.
    #[arg(long, default_value = "README.md")]
    readme: PathBuf,
    /// Size shown in the README's first table.
    #[arg(long, default_value_t = 4096)]
    headline: usize,
    /// GPU to use.
    #[arg(long, default_value_t = 0)]
    device: usize,
    /// Run the library's multi-device calls instead (`rust_gemm::multi`:
    /// a column split, a K split reduced through NCCL, an all-gather of A
    /// with the product) over GPUs 0 to N - 1, in FP32 and BF16, each
    /// verified, then timed next to GPU 0 alone, with the scaling
    /// efficiency; --sizes (default 16384; --quick 8192); with --from, a
    /// devices.json.
    #[arg(long, value_name = "N", conflicts_with_all = ["suite", "accuracy"])]
    devices: Option<usize>,
}

/// `--epilogue`'s value: an activation by its name (`Activation::name`);
/// the error names the valid ones (the first line of clap's error is the
/// one `cli::parse` prints).
fn parse_activation(name: &str) -> Result<Activation, String> {
    Activation::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = Activation::ALL.iter().map(|a| a.name()).collect();
        format!("choose from {}", names.join(", "))
    })
}

/// `--compute`'s values.
fn parse_compute(s: &str) -> Result<Compute, String> {
    match s.to_ascii_lowercase().as_str() {
        "fp32" => Ok(Compute::Fp32),
        "tf32" => Ok(Compute::Tf32),
        "3xtf32" => Ok(Compute::Tf32x3),
        other => Err(format!("unknown mode '{other}': fp32, tf32 or 3xtf32")),
    }
}

fn main() -> ExitCode {
    harness::cli::quiet_broken_pipe();
    let args = match harness::cli::parse::<Args>() {
        Ok(args) => args,
        Err(code) => return code,
    };
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<bool> {
    if args.suite {
        return run_suite(args);
    }
    if args.accuracy {
        return run_accuracy(args);
    }
    if let Some(n) = args.devices {
        return run_devices(args, n);
    }
    let results = match &args.from {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            serde_json::from_str::<Results>(&text)
                .with_context(|| format!("{} is not a bench.json", path.display()))?
        }
        None => measure_all(args)?,
    };
    for size in render::sizes(&results) {
        let (m, n, k) = size;
        println!("\nm={m} n={n} k={k}");
        println!("{}", render::size_table(&results, size));
    }
    if let Some(t) = render::ncu_table(&results) {
        println!("\nThe lesson's model next to Nsight Compute\n{t}");
    }
    if args.from.is_none() {
        let dir = write_results(args, &results)?;
        println!("\nResults: {}", dir.display());
    }
    if args.update_readme {
        update_readme(args, &results)?;
        println!(
            "README: {} and {README_PLOT} updated",
            args.readme.display()
        );
    }
    let ok = render::all_verified(&results);
    if !ok {
        eprintln!("error: a kernel failed verification (FAIL above)");
    }
    Ok(ok)
}

/// `--suite`: measure (or read `--from`), print, write, update the README.
fn run_suite(args: &Args) -> Result<bool> {
    let results: suite::SuiteResults = read_or_measure(args, "suite.json", || {
        let gpu = Gpu::open(args.device)?;
        let budget = suite::Budget {
            warmup: args.warmup,
            min_reps: args.min_reps,
            ms: if args.quick { 30.0 } else { args.budget_ms },
            seed: args.seed,
        };
        let cases = match (&args.shapes, args.random) {
            (Some(calls), _) => calls.iter().map(suite::Call::case).collect(),
            (None, Some(seed)) => suite::random_cases(seed, args.random_calls),
            (None, None) => suite::cases(),
        };
        // The seed of a whole random suite (a subset by --calls is none).
        let seed = args.random.filter(|_| args.calls.is_none());
        suite::run(
            &gpu,
            &budget,
            cases,
            args.calls.as_deref(),
            args.compute,
            seed,
        )
    })?;
    let mut text = suite::markdown(&results);
    // A run of the whole random suite (not --calls): issue 23's targets,
    // and a held-out seed's misses fail the run (after it is written).
    let seed = (results.random_seed.or(args.random)).filter(|_| args.calls.is_none());
    let targets = seed.map(|seed| (seed, targets::targets(&results)));
    if let Some((seed, targets)) = &targets {
        text += &format!("\n{}", targets::markdown(*seed, targets));
    }
    println!("\n{text}");
    if let Some(path) = &args.write_auto {
        let table = suite::auto_table(&results);
        std::fs::write(path, serde_json::to_string_pretty(&table)? + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
        println!("Auto's table for {}: {}", results.gpu, path.display());
    }
    if args.from.is_none() {
        write_run(args, "suite", &results.date, &results, &text)?;
    }
    if args.update_readme {
        replace_section(&args.readme, (SUITE_BEGIN, SUITE_END), &text)?;
        println!("README: {} updated", args.readme.display());
    }
    let mut ok = results.all_verified();
    if !ok {
        eprintln!("error: a variant failed verification (FAIL above)");
    }
    if let Some(missed) = (targets.as_ref()).and_then(|(seed, t)| targets::missed(*seed, t)) {
        eprintln!("error: {missed}");
        ok = false;
    }
    Ok(ok)
}

/// `--accuracy`: measure (or read `--from`), print, write, update the
/// README.
fn run_accuracy(args: &Args) -> Result<bool> {
    let results: accuracy::AccuracyResults = read_or_measure(args, "accuracy.json", || {
        let gpu = Gpu::open(args.device)?;
        let named = |name: &str| args.kernels.is_some() && wanted(args, name);
        accuracy::run(&gpu, args.seed, |name| wanted(args, name), named)
    })?;
    let text = accuracy::markdown(&results);
    println!("\n{text}");
    println!(
        "The registered 3xTF32 kernels' error at most cuBLAS SGEMM's in every case: {}",
        if results.at_most_sgemm_everywhere() {
            "yes"
        } else {
            "no"
        }
    );
    if args.from.is_none() {
        write_run(args, "accuracy", &results.date, &results, &text)?;
    }
    if args.update_readme {
        replace_section(&args.readme, (ACCURACY_BEGIN, ACCURACY_END), &text)?;
        println!("README: {} updated", args.readme.display());
    }
    // The instances kept for a measurement (named) may fail: that is
    // what they show.
    let ok = results.registered_verified();
    if !ok {
        eprintln!("error: a variant failed verification (FAIL above)");
    }
    Ok(ok)
}

/// `--devices N`: measure (or read `--from`), print, write.
fn run_devices(args: &Args, n: usize) -> Result<bool> {
    let results: devices::DevicesResults = read_or_measure(args, "devices.json", || {
        let default = if args.quick { "8192" } else { "16384" };
        let sizes = match &args.sizes {
            Some(list) => list.clone(),
            None => vec![default.to_string()],
        };
        let shapes = (sizes.iter())
            .map(|s| parse_size(s).map(|s| (s.m, s.n, s.k)))
            .collect::<Result<Vec<_>>>()?;
        let budget = devices::Budget {
            warmup: args.warmup,
            min_reps: args.min_reps,
            ms: if args.quick { 100.0 } else { args.budget_ms },
            seed: args.seed,
        };
        devices::run(n, &shapes, &budget)
    })?;
    let text = devices::markdown(&results);
    println!("\n{text}");
    if args.from.is_none() {
        write_run(args, "devices", &results.date, &results, &text)?;
    }
    let ok = results.all_verified();
    if !ok {
        eprintln!("error: a multi-device call failed verification (FAIL above)");
    }
    Ok(ok)
}

/// `--from`'s results (a `what` file, such as `suite.json`), or `measure`'s.
fn read_or_measure<T: serde::de::DeserializeOwned>(
    args: &Args,
    what: &str,
    measure: impl FnOnce() -> Result<T>,
) -> Result<T> {
    let Some(path) = &args.from else {
        return measure();
    };
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not a {what}", path.display()))
}

/// Writes a run's results as `<kind>.json` and its table as `<kind>.md`
/// into `--out`'s folder `<kind>-<date's digits>`.
fn write_run(
    args: &Args,
    kind: &str,
    date: &str,
    results: &impl serde::Serialize,
    text: &str,
) -> Result<()> {
    let stamp: String = date.chars().filter(char::is_ascii_digit).collect();
    let dir = args.out.join(format!("{kind}-{stamp}"));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    std::fs::write(
        dir.join(format!("{kind}.json")),
        serde_json::to_string_pretty(results)?,
    )?;
    std::fs::write(dir.join(format!("{kind}.md")), text)?;
    println!("Results: {}", dir.display());
    Ok(())
}

/// Replaces what lies between the lines `begin` and `end` of `readme`.
fn replace_section(readme: &Path, (begin, end): (&str, &str), text: &str) -> Result<()> {
    let old = std::fs::read_to_string(readme)
        .with_context(|| format!("cannot read {}", readme.display()))?;
    let (Some(b), Some(e)) = (old.find(begin), old.find(end)) else {
        bail!(
            "{} has no such section: add the lines `{begin}` and `{end}`",
            readme.display()
        );
    };
    let new = format!("{}{begin}\n{text}{}", &old[..b], &old[e..]);
    std::fs::write(readme, new).with_context(|| format!("cannot write {}", readme.display()))
}

/// Parses "4096" or "4096x1000x2048".
fn parse_size(s: &str) -> Result<Shape> {
    let dims: Vec<usize> = s
        .split('x')
        .map(|d| d.trim().parse::<usize>())
        .collect::<Result<_, _>>()
        .with_context(|| format!("size '{s}' is not n or MxNxK (e.g. 4096 or 4096x1000x2048)"))?;
    Ok(match dims[..] {
        [n] => Shape::square(n)?,
        [m, n, k] => Shape::new(m, n, k)?,
        _ => bail!("size '{s}' is not n or MxNxK (e.g. 4096 or 4096x1000x2048)"),
    })
}

/// The variants that run at every size, in table order.
struct Variants {
    rust: Vec<Kernel>,
    /// The CUDA C++ twins (`baselines::TWINS`) of the kernels that run.
    cuda: Vec<Kernel>,
    /// The cuBLAS baselines ([`CUBLAS_BASELINES`]) that run, where loaded.
    cublas: Vec<Cublas>,
}

/// `--kernels` name of cuBLAS SGEMM, the FP32 baseline every run has.
const CUBLAS: &str = "cublas";
const CUBLAS_TF32: &str = "cublas_tf32";

/// The cuBLAS baselines, by `--kernels` name and element types, in table
/// order: SGEMM (FP32), TF32 tensor cores, and `cublasGemmEx` on BF16 and
/// FP16 with f32 accumulation (compute 32F), C in f32 or (`_c16`) in the
/// input type, and cuBLASLt on FP8 with per-tensor scales (C in BF16,
/// FP16 or f32) and with block scales (C in BF16 or f32). Each runs where
/// a kernel of its element types does (or where named).
const CUBLAS_BASELINES: [(&str, Elems); 13] = [
    (CUBLAS, Elems::FP32),
    (CUBLAS_TF32, Elems::TF32),
    (
        "cublas_bf16",
        Elems::new(Elem::Bf16, Elem::Bf16, Elem::F32, Math::Bf16),
    ),
    (
        "cublas_fp16",
        Elems::new(Elem::F16, Elem::F16, Elem::F32, Math::F16),
    ),
    (
        "cublas_bf16_c16",
        Elems::new(Elem::Bf16, Elem::Bf16, Elem::Bf16, Math::Bf16),
    ),
    (
        "cublas_fp16_c16",
        Elems::new(Elem::F16, Elem::F16, Elem::F16, Math::F16),
    ),
    (
        "cublaslt_e4m3",
        Elems::new(Elem::E4m3, Elem::E4m3, Elem::Bf16, Math::Fp8),
    ),
    (
        "cublaslt_e4m3_f16",
        Elems::new(Elem::E4m3, Elem::E4m3, Elem::F16, Math::Fp8),
    ),
    (
        "cublaslt_e4m3_f32",
        Elems::new(Elem::E4m3, Elem::E4m3, Elem::F32, Math::Fp8),
    ),
    (
        "cublaslt_e5m2_e4m3",
        Elems::new(Elem::E5m2, Elem::E4m3, Elem::Bf16, Math::Fp8),
    ),
    (
        "cublaslt_e4m3_e5m2",
        Elems::new(Elem::E4m3, Elem::E5m2, Elem::Bf16, Math::Fp8),
    ),
    (
        "cublaslt_e4m3_blocks",
        Elems::new(Elem::E4m3, Elem::E4m3, Elem::Bf16, Math::Fp8).with_scaling(Scaling::Blocks),
    ),
    (
        "cublaslt_e4m3_blocks_f32",
        Elems::new(Elem::E4m3, Elem::E4m3, Elem::F32, Math::Fp8).with_scaling(Scaling::Blocks),
    ),
];

/// cuBLASLt with the `--epilogue` fused (`Cublas::load_fused`), by
/// `--kernels` name and element types, in table order: one for each plain
/// cuBLAS baseline but FP8's. Each runs, with `--epilogue`, where a kernel
/// of its element types does (and "cublas" is wanted), or where named.
const CUBLASLT_FUSED_BASELINES: [(&str, Elems); 6] = [
    ("cublaslt_fused", Elems::FP32),
    ("cublaslt_fused_tf32", Elems::TF32),
    (
        "cublaslt_fused_bf16",
        Elems::new(Elem::Bf16, Elem::Bf16, Elem::F32, Math::Bf16),
    ),
    (
        "cublaslt_fused_fp16",
        Elems::new(Elem::F16, Elem::F16, Elem::F32, Math::F16),
    ),
    (
        "cublaslt_fused_bf16_c16",
        Elems::new(Elem::Bf16, Elem::Bf16, Elem::Bf16, Math::Bf16),
    ),
    (
        "cublaslt_fused_fp16_c16",
        Elems::new(Elem::F16, Elem::F16, Elem::F16, Math::F16),
    ),
];

fn wanted(args: &Args, name: &str) -> bool {
    args.kernels
        .as_ref()
        .is_none_or(|ks| ks.iter().any(|k| k == name))
}

fn measure_all(args: &Args) -> Result<Results> {
    let size_list = args.sizes.clone().unwrap_or_else(|| {
        let s = if args.quick {
            QUICK_SIZES
        } else {
            DEFAULT_SIZES
        };
        s.split(',').map(String::from).collect()
    });
    let shapes: Vec<Shape> = size_list
        .iter()
        .map(|s| parse_size(s))
        .collect::<Result<_>>()?;
    if let Some(ks) = &args.kernels {
        for k in ks {
            let baseline = CUBLAS_BASELINES.iter().any(|(name, _)| name == k);
            let fused = CUBLASLT_FUSED_BASELINES.iter().any(|(name, _)| name == k);
            let registered =
                (KERNELS.iter().chain(TRANSPOSED).chain(EXPERIMENTS)).any(|s| s.name == k);
            if !baseline && !fused && !registered {
                bail!(
                    "unknown kernel '{k}': choose from {}, {}, {}",
                    KERNELS
                        .iter()
                        .map(|k| k.name)
                        .collect::<Vec<_>>()
                        .join(", "),
                    CUBLAS_BASELINES.map(|(name, _)| name).join(", "),
                    CUBLASLT_FUSED_BASELINES.map(|(name, _)| name).join(", ")
                );
            }
            if fused && args.epilogue.is_none() {
                bail!(
                    "{k} is cuBLASLt with a fused epilogue: name the epilogue with \
                     --epilogue (e.g. --epilogue gelu-tanh)"
                );
            }
        }
    }
    let budget_ms = if args.quick {
        args.budget_ms.min(100.0)
    } else {
        args.budget_ms
    };
    let opts = TimingOptions {
        warmup: args.warmup,
        reps: args.min_reps.max(1),
        flush_l2: !args.no_flush,
        budget_ms: Some(budget_ms),
    };

    let gpu = Gpu::open(args.device)?;
    let mut skipped = Vec::new();
    let mut notes = Vec::new();
    let mut specs: Vec<&'static KernelSpec> = Vec::new();
    // Every kernel, or those named; a kernel that reads A or B transposed
    // (the library's transposed layouts) only when named, on A^T and B^T
    // of the same product, and the instances kept for a measurement
    // (`registry::EXPERIMENTS`) only when named.
    let named = |k: &&KernelSpec| args.kernels.is_some() && wanted(args, k.name);
    let listed = KERNELS.iter().filter(|k| wanted(args, k.name));
    let only_named = TRANSPOSED.iter().chain(EXPERIMENTS).filter(named);
    for spec in listed.chain(only_named) {
        match gpu.check_runs(spec) {
            Ok(()) => specs.push(spec),
            Err(why) => {
                eprintln!("skipping {}: {why}", spec.name);
                skipped.push(format!("{}: {why}", spec.name));
            }
        }
    }
    let (cuda, twins_skipped) =
        baselines::load_cuda_twins(&gpu, |name| specs.iter().any(|s| s.name == name));
    for why in twins_skipped {
        eprintln!("skipping {why}");
        skipped.push(why);
    }
    // cuBLAS SGEMM runs unless the list leaves it out; each other baseline
    // where a kernel of its element types runs (and SGEMM is wanted), or
    // where asked for by name.
    let mut cublas = Vec::new();
    for (name, elems) in CUBLAS_BASELINES {
        let named = args
            .kernels
            .as_ref()
            .is_some_and(|ks| ks.iter().any(|k| k == name));
        let want = if elems == Elems::FP32 {
            wanted(args, CUBLAS)
        } else {
            named || (specs.iter().any(|s| s.elems.same_types(elems)) && wanted(args, CUBLAS))
        };
        if !want {
            continue;
        }
        match Cublas::load_elems(&gpu, elems) {
            Ok(c) => cublas.push(c),
            Err(why) => {
                eprintln!("skipping {name}: {why}");
                skipped.push(format!("{name}: {why}"));
            }
        }
    }
    // With --epilogue, cuBLASLt with it fused, as the plain baselines are
    // chosen (a missing one, such as an activation cuBLASLt does not have,
    // is a line in the report's skipped list, not a row).
    if let Some(activation) = args.epilogue {
        for (name, elems) in CUBLASLT_FUSED_BASELINES {
            let named = args
                .kernels
                .as_ref()
                .is_some_and(|ks| ks.iter().any(|k| k == name));
            let want =
                named || (specs.iter().any(|s| s.elems.same_types(elems)) && wanted(args, CUBLAS));
            if !want {
                continue;
            }
            match Cublas::load_fused(&gpu, elems, activation) {
                Ok(c) => cublas.push(c),
                Err(why) => {
                    eprintln!("skipping {name}: {why}");
                    skipped.push(format!("{name}: {why}"));
                }
            }
        }
    }
    let variants = Variants {
        rust: baselines::load_rust_kernels(&gpu, &specs)?,
        cuda,
        cublas,
    };
    // With --epilogue, each Rust kernel again with it fused, on the same
    // buffers (`runner::Fused`), its row next to the plain one.
    let fused: Vec<runner::Fused> = match args.epilogue {
        Some(activation) => (variants.rust.iter())
            .map(|k| runner::Fused::new(k, activation))
            .collect::<Result<_, _>>()?,
        None => Vec::new(),
    };
    let per_size = variants.rust.len() + fused.len() + variants.cuda.len() + variants.cublas.len();

    let bar = ProgressBar::new((shapes.len() * per_size) as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} {elapsed_precise} {msg}")
            .expect("valid progress template"),
    );
    let mut rows = Vec::new();
    let mut clocks = Vec::new();
    for shape in &shapes {
        // The largest set of stored types any variant needs (f32's), with
        // A^T and B^T when a named kernel reads them.
        let any_transposed = specs.iter().any(|s| s.ops != Ops::NN);
        let need = Buffers::device_bytes(&gpu, shape, Storage::F32, any_transposed);
        if let Err(e) = gpu.check_fits(&shape.to_string(), need) {
            bar.println(format!("skipping {shape}: {e}"));
            skipped.push(format!("{shape}: {e}"));
            bar.inc(per_size as u64);
            continue;
        }
        // Every variant that takes this shape, in table order.
        let mut entries: Vec<Entry> = Vec::new();
        for (i, k) in variants.rust.iter().chain(&variants.cuda).enumerate() {
            // The kernel's fused launch, for a Rust kernel with --epilogue.
            let fused_k = fused.get(i);
            if let Some(why) = k.unsupported(&shape.params_for(k.spec.ops), 1) {
                // Visible, and recorded: the table has no row for it.
                bar.println(format!("skipping {} at {shape}: {why}", k.name()));
                skipped.push(format!("{} at {shape}: {why}", k.name()));
                bar.inc(1 + u64::from(fused_k.is_some()));
                continue;
            }
            if let Some(copies) = k.spec.copies(&shape.params_for(k.spec.ops)) {
                // Once per kernel where the copy does not depend on the shape.
                let note = if copies.depends_on_shape() {
                    format!("{} at {shape}: {copies}", k.name())
                } else {
                    format!("{}: {copies}", k.name())
                };
                if !notes.contains(&note) {
                    notes.push(note);
                }
            }
            let (kind, twin) = if k.name() == k.spec.name {
                (Kind::Rust, None)
            } else {
                (Kind::Cuda, Some(k.spec.name))
            };
            entries.push(Entry {
                v: k,
                kind,
                spec: Some(k.spec),
                twin,
            });
            if let Some(f) = fused_k {
                entries.push(Entry {
                    v: f,
                    kind,
                    spec: Some(k.spec),
                    twin: None,
                });
            }
        }
        for c in &variants.cublas {
            if let Some(why) = c.unsupported(shape) {
                bar.println(format!("skipping {} at {shape}: {why}", c.name()));
                skipped.push(format!("{} at {shape}: {why}", c.name()));
                bar.inc(1);
                continue;
            }
            entries.push(Entry {
                v: c,
                kind: Kind::Cublas,
                spec: None,
                twin: None,
            });
        }
        // The variants by the stored types of A, B and C: each set gets its
        // own inputs (the same draws, rounded to its types), reference and
        // buffers; its variants are verified one by one, then the ones that
        // passed timed together in interleaved rounds
        // (`runner::time_interleaved`: the GPU's clock state is shared out
        // evenly, so the ratios compare kernels).
        let mut storages: Vec<Storage> = Vec::new();
        for e in &entries {
            if !storages.contains(&e.v.elems().storage()) {
                storages.push(e.v.elems().storage());
            }
        }
        for storage in storages {
            let group: Vec<&Entry> = entries
                .iter()
                .filter(|e| e.v.elems().storage() == storage)
                .collect();
            bar.set_message(format!("{shape}: inputs and reference ({storage})"));
            // A transposed layout, or FP8 (cuBLASLt's too: K-major operands
            // only, B^T), needs the transposed copies.
            let transposed = group
                .iter()
                .any(|e| e.spec.is_some_and(|s| s.ops != Ops::NN) || e.v.elems().a.bytes() == 1);
            let (mut bufs, reference) =
                runner::problem(&gpu, *shape, storage, args.seed, transposed)?;
            if let Some(activation) = args.epilogue {
                // The fused launches' bias, from the same seed.
                bufs.set_epilogue(&gpu, activation, args.seed)?;
            }
            let mut checks = Vec::with_capacity(group.len());
            for e in &group {
                bar.set_message(format!("{shape}: verifying {}", e.v.name()));
                checks.push(runner::verify(&gpu, &mut bufs, &reference, e.v)?);
                bar.inc(1);
            }
            let passed: Vec<&dyn Enqueue> = group
                .iter()
                .zip(&checks)
                .filter(|(_, c)| c.passed)
                .map(|(e, _)| e.v)
                .collect();
            bar.set_message(format!(
                "{shape}: timing {} kernels in rounds",
                passed.len()
            ));
            let mut timings = runner::time_interleaved(&gpu, &mut bufs, &passed, opts)?.into_iter();
            for (e, check) in group.into_iter().zip(checks) {
                let timing = if check.passed { timings.next() } else { None };
                let epilogue = args.epilogue.filter(|_| e.v.fused());
                rows.push(row(&gpu, shape, e, check, timing, epilogue));
            }
        }
        if let Some(mhz) = sm_clock_mhz(args.device) {
            clocks.push(mhz);
        }
    }
    bar.finish_and_clear();
    // Which type cuBLASLt read the bias in, where not f32 (the run's log
    // only: `notes` lists the kernels' copies).
    for note in variants.cublas.iter().filter_map(Cublas::bias_note) {
        eprintln!("note: {note}");
    }

    let info = gpu.info.clone();
    let ptx = gpu.ptx_description();
    let mut results = Results {
        meta: Meta {
            peak_fp32_gflops: info.peak_fp32_gflops(),
            peak_tf32_gflops: info.peak_tf32_gflops(),
            tf32_flops_per_clock_per_sm: info.tf32_flops_per_clock_per_sm(),
            peak_dram_gbs: info.peak_dram_gbs(),
            cuda_driver: format!(
                "{}.{}",
                info.driver_cuda_version / 1000,
                info.driver_cuda_version % 1000 / 10
            ),
            gpu: info,
            sm_clocks_seen_mhz: clocks,
            git_commit: harness::GIT_COMMIT.into(),
            date: utc_now(),
            ptx,
            settings: Settings {
                sizes: size_list,
                seed: args.seed,
                warmup: args.warmup,
                min_reps: opts.reps,
                budget_ms,
                l2: if opts.flush_l2 {
                    "flush".into()
                } else {
                    "none".into()
                },
                interleaved: true,
            },
            skipped,
            notes,
        },
        rows,
    };
    results.link_rows();
    if args.ncu {
        drop(gpu);
        ncu::profile(&mut results, args.ncu_size)?;
    }
    Ok(results)
}

/// A variant that runs at one size, as its row will name it.
struct Entry<'a> {
    v: &'a dyn Enqueue,
    kind: Kind,
    spec: Option<&'static KernelSpec>,
    twin: Option<&'static str>,
}

/// One variant's row: its check (a failure is a FAIL row, not an abort)
/// and, if it passed, its timing; `epilogue`, the activation fused into
/// its launches (with a bias per column), if any.
fn row(
    gpu: &Gpu,
    shape: &Shape,
    e: &Entry,
    verification: Verification,
    timing: Option<Timing>,
    epilogue: Option<Activation>,
) -> Row {
    let (shape, v, kind, spec, twin) = (*shape, e.v, e.kind, e.spec, e.twin);
    let model = spec.map(|s| model::estimate(s, &shape, model::Peaks::of(&gpu.info)));
    let t = timing.as_ref();
    let gflops = t.map(|t| t.gflops(shape.flops()));
    let peak = gpu.info.peak_gflops(v.elems().math);
    Row {
        m: shape.m,
        n: shape.n,
        k: shape.k,
        variant: v.name().to_string(),
        kind,
        precision: v.elems().math.name().into(),
        elems: v.elems().storage().to_string(),
        step: spec.map(|s| s.step),
        twin: twin.map(String::from),
        verified: verification.passed,
        max_error: verification.max_error,
        reps: t.map_or(0, |t| t.reps),
        median_ms: t.map(|t| t.median_ms),
        p20_ms: t.map(|t| t.p20_ms),
        p80_ms: t.map(|t| t.p80_ms),
        min_ms: t.map(|t| t.min_ms),
        gflops,
        percent_of_peak: gflops.zip(peak).map(|(g, p)| 100.0 * g / p),
        percent_of_cublas: None,
        percent_of_cublas_math: None,
        error_over_cublas_math: None,
        rust_over_cuda: None,
        model_bytes: model.map(|m| m.bytes),
        model_intensity: model.map(|m| m.intensity),
        model_ceiling_gflops: model.and_then(|m| m.ceiling_gflops),
        ncu: None,
        epilogue: epilogue.map(|a| a.name().to_string()),
        fused_over_plain: None,
        over_cublaslt_fused: None,
    }
}

/// The SM clock nvidia-smi reports now, if nvidia-smi is there.
fn sm_clock_mhz(device: usize) -> Option<u32> {
    let out = std::process::Command::new("nvidia-smi")
        .args([
            "--query-gpu=clocks.sm",
            "--format=csv,noheader,nounits",
            "-i",
            &device.to_string(),
        ])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

/// Now, UTC, as `YYYY-MM-DDTHH:MM:SSZ`.
pub(crate) fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn write_results(args: &Args, results: &Results) -> Result<PathBuf> {
    let stamp: String = results
        .meta
        .date
        .chars()
        .filter(char::is_ascii_digit)
        .collect();
    let dir = args.out.join(format!("bench-{stamp}"));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let write = |name: &str, text: String| {
        let p = dir.join(name);
        std::fs::write(&p, text).with_context(|| format!("cannot write {}", p.display()))
    };
    write("bench.json", serde_json::to_string_pretty(results)?)?;
    write("bench.csv", results.csv())?;
    write(
        "table.md",
        render::readme_markdown(results, args.headline, "bench.svg"),
    )?;
    if let Err(e) = plot::write_svg(results, &dir.join("bench.svg")) {
        eprintln!("no plot: {e:#}");
    }
    Ok(dir)
}

fn update_readme(args: &Args, results: &Results) -> Result<()> {
    let readme = std::fs::read_to_string(&args.readme)
        .with_context(|| format!("cannot read {}", args.readme.display()))?;
    let (Some(begin), Some(end)) = (readme.find(README_BEGIN), readme.find(README_END)) else {
        bail!(
            "{} has no results section: add the lines `{README_BEGIN}` and `{README_END}`",
            args.readme.display()
        );
    };
    let plot_path = args
        .readme
        .parent()
        .unwrap_or(Path::new("."))
        .join(README_PLOT);
    if let Some(dir) = plot_path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    plot::write_svg(results, &plot_path)?;
    let table = render::readme_markdown(results, args.headline, README_PLOT);
    let new = format!(
        "{}{README_BEGIN}\n{table}{}",
        &readme[..begin],
        &readme[end..]
    );
    std::fs::write(&args.readme, new)
        .with_context(|| format!("cannot write {}", args.readme.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--epilogue` takes the activations' names; a bad one is a clap
    /// error whose first line (the one `cli::parse` prints) names them all.
    #[test]
    fn epilogue_flag_takes_activation_names() {
        let parse = |v: &str| Args::try_parse_from(["bench", "--epilogue", v]);
        for a in Activation::ALL {
            assert_eq!(parse(a.name()).unwrap().epilogue, Some(a));
        }
        assert_eq!(Args::try_parse_from(["bench"]).unwrap().epilogue, None);
        let e = parse("gelu").unwrap_err().render().to_string();
        let first = e.lines().next().unwrap();
        assert!(
            first.contains("'gelu'")
                && first.contains("choose from none, relu, gelu-tanh, gelu-erf, silu"),
            "{first}"
        );
    }

    /// `--compute` takes the suite's modes, FP32 unless given, and only
    /// with `--suite`; a bad one names the three.
    #[test]
    fn compute_flag_takes_the_suite_modes() {
        let parse = |v: &str| Args::try_parse_from(["bench", "--suite", "--compute", v]);
        assert_eq!(parse("tf32").unwrap().compute, Compute::Tf32);
        assert_eq!(parse("3xTF32").unwrap().compute, Compute::Tf32x3);
        assert_eq!(parse("fp32").unwrap().compute, Compute::Fp32);
        assert_eq!(
            Args::try_parse_from(["bench", "--suite"]).unwrap().compute,
            Compute::Fp32
        );
        let e = parse("bf16").unwrap_err().render().to_string();
        assert!(
            e.lines().next().unwrap().contains("fp32, tf32 or 3xtf32"),
            "{e}"
        );
        assert!(Args::try_parse_from(["bench", "--compute", "tf32"]).is_err());
    }

    /// `--devices` takes a count, not beside --suite or --accuracy; 0
    /// devices and more devices than the machine has are refused with
    /// one line each, before any GPU work (this machine may have none).
    #[test]
    fn devices_flag_is_checked() {
        let parse = |v: &[&str]| Args::try_parse_from([&["bench"], v].concat());
        assert_eq!(parse(&["--devices", "2"]).unwrap().devices, Some(2));
        assert!(parse(&["--devices", "2", "--suite"]).is_err());
        assert!(parse(&["--devices", "2", "--accuracy"]).is_err());
        assert!(parse(&["--devices", "two"]).is_err());
        let budget = devices::Budget {
            warmup: 0,
            min_reps: 1,
            ms: 0.0,
            seed: 1,
        };
        let e = devices::run(0, &[(128, 128, 128)], &budget).unwrap_err();
        assert_eq!(e.to_string(), "--devices 0: give at least 1");
        let many = devices::run(1000, &[(128, 128, 128)], &budget).unwrap_err();
        let line = format!("{many:#}");
        assert!(!line.contains('\n'), "{line}");
        assert!(line.contains("1000") || line.contains("driver"), "{line}");
    }

    /// Every fused baseline has a plain one of the same types, and no name
    /// is taken twice.
    #[test]
    fn fused_baselines_mirror_the_plain_ones() {
        for (name, elems) in CUBLASLT_FUSED_BASELINES {
            assert!(
                CUBLAS_BASELINES.iter().any(|(_, e)| *e == elems),
                "{name} has no plain baseline"
            );
        }
        let mut names: Vec<&str> = (CUBLAS_BASELINES.iter())
            .chain(&CUBLASLT_FUSED_BASELINES)
            .map(|(n, _)| *n)
            .collect();
        let len = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), len);
    }
}
