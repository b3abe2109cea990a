//! `host`: build the Rust kernels (build.rs), launch, verify and time them.
//!
//! cargo run --release -p host -- --n 4096

mod emulate;

use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Parser;
use harness::reference::Reference;
use harness::report::{KernelReport, RunReport};
use harness::runner::{self, Buffers, TimingOptions};
use harness::shape::Shape;
use kernels_gpu::elem::{Math, Storage};
use kernels_gpu::launch::{KernelSpec, Operands, Ops};
use kernels_gpu::registry::{self, EXPERIMENTS, KERNELS, TRANSPOSED};
use rust_gemm::HostError;
use rust_gemm::blas::GemmError;
use rust_gemm::gpu::Gpu;
use rust_gemm::launch::Kernel;

/// Launch the Rust SGEMM kernels on a GPU: verify each against a CPU
/// reference, then time it.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Size of a square problem (m = n = k), unless --m or --k say otherwise.
    #[arg(long, default_value_t = 1024, allow_negative_numbers = true, value_parser = dimension)]
    n: usize,
    /// Rows of A and C (default: --n).
    #[arg(long, allow_negative_numbers = true, value_parser = dimension)]
    m: Option<usize>,
    /// Columns of A, rows of B (default: --n).
    #[arg(long, allow_negative_numbers = true, value_parser = dimension)]
    k: Option<usize>,
    /// Kernels to run, comma-separated, or "all" (see --list-kernels).
    #[arg(long, default_value = "all", value_delimiter = ',')]
    kernel: Vec<String>,
    /// Untimed launches before timing (at most 10,000).
    #[arg(long, default_value_t = 3, value_parser = launches)]
    warmup: usize,
    /// Timed launches, median reported (at most 10,000); 0 verifies without timing.
    #[arg(long, default_value_t = 10, value_parser = launches)]
    reps: usize,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 42, allow_negative_numbers = true, value_parser = seed)]
    seed: u64,
    /// Do not flush the L2 cache before each timed launch.
    #[arg(long)]
    no_flush: bool,
    /// Load the kernels from this PTX file instead of the built-in PTX
    /// (GPU runs only: the emulator runs the kernels' Rust code).
    #[arg(long, value_name = "FILE", conflicts_with = "emulate")]
    ptx: Option<std::path::PathBuf>,
    /// GPU to use.
    #[arg(long, default_value_t = 0)]
    device: usize,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// List the kernels and exit (with --json: one JSON array).
    #[arg(long)]
    list_kernels: bool,
    /// Run on the CPU emulator instead of a GPU: same kernel code, checked
    /// for races, barrier misuse and bad accesses, with bank-conflict counts
    /// (no timing; small sizes only).
    #[arg(long)]
    emulate: bool,
}

/// A matrix dimension: a whole number from 1 to the harness's limit
/// (`harness::shape::MAX_DIM`); the problem's own checks are the
/// library's (`Shape::new`).
fn dimension(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=harness::shape::MAX_DIM).contains(&n) => Ok(n),
        _ => Err(format!(
            "sizes are whole numbers from 1 to {}",
            harness::shape::MAX_DIM
        )),
    }
}

fn seed(s: &str) -> Result<u64, String> {
    s.trim()
        .parse::<u64>()
        .map_err(|_| format!("a seed is a whole number from 0 to {}", u64::MAX))
}

fn launches(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if n <= 10_000 => Ok(n),
        _ => Err("a number of launches from 0 to 10,000".into()),
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
            let hint = (e.downcast_ref::<HostError>().map(harness::cli::hint))
                .or_else(|| e.downcast_ref::<GemmError>().map(harness::cli::gemm_hint));
            eprintln!("error: {e}{}", hint.unwrap_or_default());
            ExitCode::FAILURE
        }
    }
}

/// Whether any of `kernels` reads A or B transposed (and so needs A^T
/// and B^T: `Buffers::new`).
fn transposed(kernels: &[&KernelSpec]) -> bool {
    kernels.iter().any(|k| k.ops != Ops::NN)
}

/// The kernels named on the command line, in ladder order ("all": every one).
fn select(names: &[String]) -> Result<Vec<&'static KernelSpec>, HostError> {
    if asks_for_all(names) {
        return Ok(KERNELS.iter().collect());
    }
    names
        .iter()
        .map(|name| {
            let name = name.trim();
            match registry::find(name) {
                // The ladder's, and (named only) those that read A or B
                // transposed, run on A^T and B^T of the same product, and
                // the instances kept for a measurement.
                Some(k)
                    if KERNELS
                        .iter()
                        .chain(TRANSPOSED)
                        .chain(EXPERIMENTS)
                        .any(|l| l.name == k.name) =>
                {
                    Ok(k)
                }
                Some(_) => Err(HostError::BadShape(format!(
                    "{name} is split-K's reduction, not a GEMM kernel: the library launches it \
                     (rust_gemm::blas)"
                ))),
                None => Err(HostError::UnknownKernel {
                    name: name.to_string(),
                    available: KERNELS
                        .iter()
                        .map(|k| k.name)
                        .collect::<Vec<_>>()
                        .join(", "),
                }),
            }
        })
        .collect()
}

fn asks_for_all(names: &[String]) -> bool {
    names.iter().any(|n| n == "all")
}

/// The selected kernels this GPU can run. Asked for by name, a kernel it
/// cannot run is an error; under "all", a visible line says it is skipped.
fn runnable(
    gpu: &Gpu,
    kernels: Vec<&'static KernelSpec>,
    all: bool,
) -> Result<Vec<&'static KernelSpec>, HostError> {
    let mut out = Vec::new();
    for spec in kernels {
        match gpu.check_runs(spec) {
            Ok(()) => out.push(spec),
            Err(why) if all => eprintln!("skipping {}: {why}", spec.name),
            Err(why) => return Err(why),
        }
    }
    Ok(out)
}

/// The selected kernels the CPU emulator can run, and a line for each it
/// cannot. Asked for by name, a GPU-only kernel is an error; under "all",
/// it is skipped (the run prints the line once it starts).
fn emulated(
    kernels: Vec<&'static KernelSpec>,
    all: bool,
) -> Result<(Vec<&'static KernelSpec>, Vec<String>), HostError> {
    let (mut out, mut skipped) = (Vec::new(), Vec::new());
    for spec in kernels {
        match spec.emulated() {
            Ok(_) => out.push(spec),
            Err(why) if all => {
                skipped.push(format!("skipping {} on the emulator: {why}", spec.name))
            }
            Err(why) => {
                return Err(HostError::NotEmulated {
                    kernel: spec.name.into(),
                    why: why.into(),
                });
            }
        }
    }
    Ok((out, skipped))
}

/// The selected kernels that can take `shape`: one asked for by name that
/// cannot (a matrix beyond its 32-bit offsets) is an error, and under
/// "all" a kernel that cannot is skipped with a line, and it is an error
/// when none is left. A TMA kernel at rows TMA cannot describe runs on
/// padded copies of A and B, and a line says so.
fn for_shape(
    kernels: Vec<&'static KernelSpec>,
    shape: &Shape,
    all: bool,
) -> Result<Vec<&'static KernelSpec>> {
    let mut out: Vec<&'static KernelSpec> = Vec::new();
    let mut last_why = None;
    for spec in kernels {
        // The library's checks of a call that names the kernel.
        if let Err(e) = shape.choose(spec) {
            let why = match e {
                GemmError::KernelUnsupported { why, .. } => why,
                other => return Err(other.into()),
            };
            if !all {
                bail!(
                    "kernel {} cannot take {shape}: {why}; choose smaller sizes",
                    spec.name
                );
            }
            eprintln!("skipping {} at {shape}: {why}", spec.name);
            last_why = Some(why);
            continue;
        }
        if let Some(copies) = spec.copies(&shape.params_for(spec.ops)) {
            eprintln!("{}: {copies}", spec.name);
        }
        out.push(spec);
    }
    if out.is_empty()
        && let Some(why) = last_why
    {
        bail!("no kernel can take {shape} ({why}); choose smaller sizes");
    }
    Ok(out)
}

fn list_kernels(json: bool) -> Result<()> {
    if json {
        let list: Vec<serde_json::Value> = KERNELS
            .iter()
            .chain(TRANSPOSED)
            .chain(EXPERIMENTS)
            .map(|k| {
                let arch = &k.module.arch;
                serde_json::json!({
                    "name": k.name,
                    "step": k.step,
                    "summary": k.summary,
                    "precision": k.elems.math.name(),
                    "elems": k.elems.storage().to_string(),
                    "ops": k.ops.suffix(),
                    "module": k.module.name,
                    "target": arch.target_cpu,
                    "min_capability": format!("{}.{}", arch.capability.0, arch.capability.1),
                    "exact_capability": arch.exact,
                    "block_threads": [k.launch.block_threads.0, k.launch.block_threads.1],
                    "block_tile": [k.launch.block_tile.0, k.launch.block_tile.1],
                    "shared_bytes": k.launch.shared_bytes,
                    "tma": matches!(k.operands, Operands::TensorMaps(_)),
                    "emulated": k.emulated().is_ok(),
                    "experiment": EXPERIMENTS.iter().any(|e| e.name == k.name),
                })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&list)?);
        return Ok(());
    }
    // The ladder's kernels, then those that read A or B transposed, then
    // the instances kept for a measurement (named only).
    for k in KERNELS.iter().chain(TRANSPOSED).chain(EXPERIMENTS) {
        let (bm, bn) = k.launch.block_tile;
        let (tx, ty) = k.launch.block_threads;
        let layout = if k.ops == Ops::NN {
            String::new()
        } else {
            format!(", {} (A or B transposed)", k.ops.suffix())
        };
        println!(
            "{:02} {:<26} {}  [{}{layout}, {} module ({}), block {tx}x{ty} threads, tile {bm}x{bn} of C, {} B shared]",
            k.step,
            k.name,
            k.summary,
            k.elems.label(),
            k.module.name,
            k.module.arch.target_cpu,
            k.launch.shared_bytes
        );
    }
    Ok(())
}

/// `f32` when every set of stored types is f32's, else each set
/// (`f32, bf16 x bf16 -> f32`): the header's word for the inputs.
fn storage_label(storages: impl Iterator<Item = Storage>) -> String {
    let labels: Vec<String> = storages
        .map(|s| {
            if s == Storage::F32 {
                "f32".to_string()
            } else {
                s.to_string()
            }
        })
        .collect();
    if labels.is_empty() {
        "f32".into()
    } else {
        labels.join(", ")
    }
}

/// Runs everything; Ok(false) when a kernel failed verification.
fn run(args: &Args) -> Result<bool> {
    if args.list_kernels {
        list_kernels(args.json)?;
        return Ok(true);
    }
    // Every argument is checked before the GPU is touched.
    let shape = Shape::new(args.m.unwrap_or(args.n), args.n, args.k.unwrap_or(args.n))?;
    let kernels = select(&args.kernel)?;
    // CUDA's grid limits, before the GPU is touched (the rest of what the
    // library checks per kernel comes with `for_shape`, after the check
    // of the GPU's memory).
    for spec in &kernels {
        rust_gemm::launch::grid(spec, shape.m, shape.n, 1)?;
    }
    if args.emulate {
        let (kernels, skipped) = emulated(kernels, asks_for_all(&args.kernel))?;
        let kernels = for_shape(kernels, &shape, asks_for_all(&args.kernel))?;
        return emulate::run(&shape, &kernels, &skipped, args.seed, args.json);
    }
    let opts = TimingOptions {
        warmup: args.warmup,
        reps: args.reps,
        flush_l2: !args.no_flush,
        budget_ms: None,
    };

    let gpu = match &args.ptx {
        None => Gpu::open(args.device)?,
        Some(path) => {
            let ptx = std::fs::read_to_string(path).map_err(|e| {
                if e.kind() == std::io::ErrorKind::InvalidData {
                    anyhow::anyhow!(
                        "the PTX file {} is not PTX text: it is not UTF-8 (a binary?)",
                        path.display()
                    )
                } else {
                    anyhow::anyhow!("cannot read the PTX file {}: {e}", path.display())
                }
            })?;
            Gpu::open_with_ptx(args.device, &ptx)?
        }
    };
    let kernels = runnable(&gpu, kernels, asks_for_all(&args.kernel))?;
    // The kernels by the stored types of A, B and C: each set of types
    // gets its own inputs (the same draws, rounded to the types), reference
    // and buffers, one set at a time.
    let mut groups: Vec<(Storage, Vec<&'static KernelSpec>)> = Vec::new();
    for spec in &kernels {
        let storage = spec.elems.storage();
        match groups.iter_mut().find(|(s, _)| *s == storage) {
            Some((_, specs)) => specs.push(*spec),
            None => groups.push((storage, vec![*spec])),
        }
    }
    // Check the size against free memory before making inputs on the host
    // (first: a problem too large for the GPU is that, whatever the kernels).
    for (storage, _) in &groups {
        gpu.check_fits(
            &shape.to_string(),
            Buffers::device_bytes(&gpu, &shape, *storage, transposed(&kernels)),
        )?;
    }
    let kernels = for_shape(kernels, &shape, asks_for_all(&args.kernel))?;
    for (_, specs) in &mut groups {
        specs.retain(|s| kernels.iter().any(|k| k.name == s.name));
    }
    let mut report = RunReport {
        peak_fp32_gflops: gpu.info.peak_fp32_gflops(),
        peak_tf32_gflops: gpu.info.peak_tf32_gflops(),
        peak_bf16_gflops: gpu.info.peak_gflops(Math::Bf16),
        peak_dram_gbs: gpu.info.peak_dram_gbs(),
        storage: storage_label(groups.iter().map(|(s, _)| *s)),
        gpu: gpu.info.clone(),
        ptx: gpu.ptx_description(),
        shape,
        seed: args.seed,
        timing: opts,
        reference: Reference::mode_for(&shape),
        kernels: Vec::new(),
    };
    if !args.json {
        print!("{}", report.header());
    }
    for (storage, specs) in groups.into_iter().filter(|(_, specs)| !specs.is_empty()) {
        let (mut bufs, reference) =
            runner::problem(&gpu, shape, storage, args.seed, transposed(&specs))?;
        for spec in specs {
            let kernel = Kernel::load(&gpu, spec)?;
            let measurement = runner::measure(&gpu, &mut bufs, &reference, &kernel, opts)?;
            let r = KernelReport::new(spec, &shape, &gpu.info, measurement);
            if !args.json {
                print!("{}", report.kernel_text(&r));
            }
            report.kernels.push(r);
        }
    }
    let all_passed = report.kernels.iter().all(KernelReport::passed);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else if !all_passed {
        eprintln!("error: verification failed (see FAIL above)");
    }
    Ok(all_passed)
}
