//! `cargo xtask sanitize`: every kernel under compute-sanitizer's four
//! tools, at small sizes that are and are not multiples of the tiles, with
//! every result verified (`host --reps 0`).
//!
//! To keep GPU time short, each (tool, size) first runs all the kernels in
//! one process; only when that run fails is each kernel run alone, so the
//! summary names the kernel at fault.
//!
//! A whole run (no `--kernel`, or `--example`) also runs the library's
//! examples (`host/gemm/examples/sgemm.rs` and `fp8.rs`) under each tool: the
//! entries `host` does not launch by name (the transposed instances of
//! step 10, split-K's `reduce_slices`, the FP8 quantizer) run there,
//! through the library.

use std::fmt::Write as _;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::cuda::{self, Driver};
use crate::locate;

/// Exit code compute-sanitizer is told to use when its tool reports an
/// error; anything else non-zero comes from the host program itself.
const SANITIZER_EXIT: i32 = 86;

const TOOLS: [&str; 4] = ["memcheck", "racecheck", "synccheck", "initcheck"];

/// Sizes (m, n, k): a multiple of the small tiles, then sizes that are not
/// multiples of any tile, the smallest problem, one just past 128/256, and
/// one with edges everywhere that the TMA kernels take as it is (n and k
/// multiples of 4; at the others they run on padded copies of A and B).
const SIZES: [(usize, usize, usize); 5] = [
    (64, 64, 64),
    (33, 17, 100),
    (1, 1, 1),
    (129, 257, 65),
    (37, 52, 28),
];

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The host program to run (default: build it with cargo, or use the
    /// `host` next to this executable when there is no cargo).
    #[arg(long, value_name = "PATH")]
    host_bin: Option<PathBuf>,
    /// Kernels to check, comma-separated (default: every kernel in `host --list-kernels` that reads A and B as they are; name a transposed one to check it).
    #[arg(long, value_delimiter = ',')]
    kernel: Vec<String>,
    /// Tools to run, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = TOOLS.map(String::from))]
    tool: Vec<String>,
    /// Seconds one sanitizer run may take before it counts as a hang.
    #[arg(long, default_value_t = 300)]
    timeout: u64,
    /// Folder for the full output of every run.
    #[arg(long, default_value = "results/sanitize")]
    log_dir: PathBuf,
    /// Also sanitize the library's examples `sgemm` and `fp8` with
    /// `--kernel` (a whole run always does).
    #[arg(long)]
    example: bool,
    /// The library's examples to run, comma-separated (default: build
    /// `sgemm` and `fp8` with cargo, or use those next to this executable
    /// when there is no cargo).
    #[arg(long, value_name = "PATH", value_delimiter = ',')]
    example_bin: Vec<PathBuf>,
}

/// One kernel as `host --list-kernels` prints it.
struct Kernel {
    name: String,
    /// Rows and columns of C per block.
    tile: (usize, usize),
    /// It reads A or B transposed, or it is kept for a measurement
    /// (`"experiment"`): sanitized only when named.
    named_only: bool,
}

/// One sanitizer run and what came of it.
struct Run {
    tool: String,
    /// `m x n x k`, or what else ran (the library's example).
    size: String,
    /// The kernels, or "all (N)".
    kernels: String,
    outcome: Outcome,
    log: PathBuf,
}

enum Outcome {
    Clean,
    /// The tool reported errors (or racecheck hazards): first report line.
    Reported(String),
    /// The host failed by itself: its `error: ...` line (verification, launch).
    HostFailed(String),
    TimedOut(u64),
}

impl Outcome {
    fn passed(&self) -> bool {
        matches!(self, Outcome::Clean)
    }
    fn text(&self) -> String {
        match self {
            Outcome::Clean => "ok".into(),
            Outcome::Reported(s) => format!("FAIL (sanitizer) {s}"),
            Outcome::HostFailed(s) => format!("FAIL (host) {s}"),
            Outcome::TimedOut(s) => format!("FAIL timed out after {s} s (a hang?)"),
        }
    }
}

pub fn run(args: &Args) -> Result<bool> {
    for t in &args.tool {
        if !TOOLS.contains(&t.as_str()) {
            bail!("unknown tool '{t}': choose from {}", TOOLS.join(", "));
        }
    }
    // Both checks come before any build: without them sanitize cannot do its job.
    let Some(sanitizer) = locate::find_program("compute-sanitizer", &locate::cuda_bin_dirs())
    else {
        bail!(
            "compute-sanitizer not found on PATH or in /usr/local/cuda/bin: \
             install the CUDA toolkit (it needs a GPU machine)"
        );
    };
    match cuda::probe_driver() {
        Driver::Ready { gpus, .. } if !gpus.is_empty() => {}
        Driver::Ready { .. } => {
            bail!("the NVIDIA driver sees no GPU: compute-sanitizer needs one")
        }
        Driver::Absent => bail!("no NVIDIA driver (libcuda.so.1) here: run it on a GPU machine"),
        Driver::Failed { doing, error } => bail!("the NVIDIA driver failed {doing}: {error}"),
    }

    let host = host_binary(args)?;
    let examples = if !(args.kernel.is_empty() || args.example) {
        Vec::new()
    } else if args.example_bin.is_empty() {
        vec![
            locate::release_example("sgemm")?,
            locate::release_example("fp8")?,
        ]
    } else {
        for path in &args.example_bin {
            if !locate::is_executable(path) {
                bail!("--example-bin {} is not an executable file", path.display());
            }
        }
        args.example_bin.clone()
    };
    let kernels = list_kernels(&host)?;
    let selected: Vec<&Kernel> = if args.kernel.is_empty() {
        kernels.iter().filter(|k| !k.named_only).collect()
    } else {
        args.kernel
            .iter()
            .map(|name| {
                kernels.iter().find(|k| &k.name == name).with_context(|| {
                    let names: Vec<&str> = kernels.iter().map(|k| k.name.as_str()).collect();
                    format!("unknown kernel '{name}': choose from {}", names.join(", "))
                })
            })
            .collect::<Result<_>>()?
    };
    let sizes = sizes(&selected);
    fs::create_dir_all(&args.log_dir)
        .with_context(|| format!("cannot create the log folder {}", args.log_dir.display()))?;
    println!(
        "sanitize: {} kernel(s) x {} size(s) x {} tool(s), with {} and {}\n",
        selected.len(),
        sizes.len(),
        args.tool.len(),
        sanitizer.display(),
        host.display()
    );

    let mut runs = Vec::new();
    for tool in &args.tool {
        for &size in &sizes {
            let all: Vec<&str> = selected.iter().map(|k| k.name.as_str()).collect();
            let group = sanitize_one(&sanitizer, &host, tool, size, &all, args)?;
            print_progress(&group);
            if group.outcome.passed() || selected.len() == 1 {
                runs.push(group);
                continue;
            }
            // Name the kernel at fault: run each alone.
            for kernel in &all {
                let one = sanitize_one(&sanitizer, &host, tool, size, &[kernel], args)?;
                print_progress(&one);
                runs.push(one);
            }
        }
        for example in &examples {
            let name = example
                .file_name()
                .map_or("example".into(), |n| n.to_string_lossy().into_owned());
            let log = args.log_dir.join(format!("{tool}-example-{name}.log"));
            let outcome = run_under(&sanitizer, tool, example, &[], &log, args)?;
            let run = Run {
                tool: tool.to_string(),
                size: "example".into(),
                kernels: format!("{name} (library)"),
                outcome,
                log,
            };
            print_progress(&run);
            runs.push(run);
        }
    }

    let failed: Vec<&Run> = runs.iter().filter(|r| !r.outcome.passed()).collect();
    println!("\n{}", table(&runs));
    if failed.is_empty() {
        println!(
            "sanitize: all {} runs clean; logs in {}",
            runs.len(),
            args.log_dir.display()
        );
        Ok(true)
    } else {
        let names: Vec<String> = failed
            .iter()
            .map(|r| format!("{} {} {}", r.tool, r.kernels, r.size))
            .collect();
        println!(
            "sanitize: {} of {} runs FAILED: {}",
            failed.len(),
            runs.len(),
            names.join("; ")
        );
        Ok(false)
    }
}

/// `--host-bin`, else a fresh release build of `host`, else the one next
/// to this executable.
fn host_binary(args: &Args) -> Result<PathBuf> {
    if let Some(path) = &args.host_bin {
        if !locate::is_executable(path) {
            bail!("--host-bin {} is not an executable file", path.display());
        }
        return Ok(path.clone());
    }
    locate::release_binary("host")
}

/// Parses `host --list-kernels`: `01 naive  summary  [block 16x16 threads, tile 16x16 of C, ...]`.
fn list_kernels(host: &Path) -> Result<Vec<Kernel>> {
    let out = Command::new(host)
        .args(["--list-kernels", "--json"])
        .output()
        .with_context(|| format!("cannot run {}", host.display()))?;
    if !out.status.success() {
        bail!(
            "`{} --list-kernels --json` failed: {}",
            host.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    parse_kernel_list(&String::from_utf8_lossy(&out.stdout)).with_context(|| {
        format!(
            "`{} --list-kernels --json` printed no kernel list",
            host.display()
        )
    })
}

/// Reads `host --list-kernels --json`: names and tiles of C per block.
fn parse_kernel_list(json: &str) -> Result<Vec<Kernel>> {
    let list: Vec<serde_json::Value> = serde_json::from_str(json)?;
    let kernels = list
        .iter()
        .map(|k| {
            let name = k["name"].as_str().context("a kernel without a name")?;
            let tile = &k["block_tile"];
            let dim = |i: usize| tile[i].as_u64().map(|v| v as usize);
            let tile = dim(0)
                .zip(dim(1))
                .context("a kernel without a block_tile")?;
            Ok(Kernel {
                name: name.to_string(),
                tile,
                named_only: k["ops"].as_str().is_some_and(|ops| ops != "nn")
                    || k["experiment"].as_bool() == Some(true),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    if kernels.is_empty() {
        bail!("the list is empty");
    }
    Ok(kernels)
}

/// The fixed sizes, plus one that is a whole number of every kernel's
/// tile in both m and n (so the full-tile path runs with no edge blocks).
fn sizes(kernels: &[&Kernel]) -> Vec<(usize, usize, usize)> {
    fn lcm(a: usize, b: usize) -> usize {
        fn gcd(a: usize, b: usize) -> usize {
            if b == 0 { a } else { gcd(b, a % b) }
        }
        a / gcd(a, b) * b
    }
    let m = kernels.iter().fold(1, |acc, k| lcm(acc, k.tile.0));
    let n = kernels.iter().fold(1, |acc, k| lcm(acc, k.tile.1));
    let mut sizes = SIZES.to_vec();
    // A K that is a multiple of any K tile up to 64, and a little deeper.
    let whole = (m, n, 128);
    if m <= 1024 && n <= 1024 && !sizes.contains(&whole) {
        sizes.insert(1, whole);
    }
    sizes
}

fn size_text((m, n, k): (usize, usize, usize)) -> String {
    format!("{m}x{n}x{k}")
}

/// One compute-sanitizer run of `host` on `kernels`, its output in a log file.
fn sanitize_one(
    sanitizer: &Path,
    host: &Path,
    tool: &str,
    size: (usize, usize, usize),
    kernels: &[&str],
    args: &Args,
) -> Result<Run> {
    let (m, n, k) = size;
    let label = if kernels.len() == 1 {
        kernels[0].to_string()
    } else {
        format!("all ({})", kernels.len())
    };
    let file_kernels = if kernels.len() == 1 {
        kernels[0]
    } else {
        "all"
    };
    let log = args
        .log_dir
        .join(format!("{tool}-{}-{file_kernels}.log", size_text(size)));
    let host_args = [
        "--m".to_string(),
        m.to_string(),
        "--n".into(),
        n.to_string(),
        "--k".into(),
        k.to_string(),
        "--kernel".into(),
        kernels.join(","),
        "--reps".into(),
        "0".into(),
        "--warmup".into(),
        "0".into(),
    ];
    let outcome = run_under(sanitizer, tool, host, &host_args, &log, args)?;
    Ok(Run {
        tool: tool.to_string(),
        size: size_text(size),
        kernels: label,
        outcome,
        log,
    })
}

/// Runs `program args` under compute-sanitizer's `tool`, its output in
/// `log`, and says what came of it.
fn run_under(
    sanitizer: &Path,
    tool: &str,
    program: &Path,
    program_args: &[String],
    log: &Path,
    args: &Args,
) -> Result<Outcome> {
    let out = File::create(log).with_context(|| format!("cannot write {}", log.display()))?;
    let err = out.try_clone().context("cannot share the log file")?;

    let mut cmd = Command::new(sanitizer);
    cmd.arg("--tool").arg(tool);
    cmd.arg("--error-exitcode").arg(SANITIZER_EXIT.to_string());
    match tool {
        // Device memory still allocated when the context goes is a leak.
        "memcheck" => cmd.args(["--leak-check", "full"]),
        // Warnings too (the default reports them, but be explicit).
        "racecheck" => cmd.args(["--racecheck-report", "all"]),
        _ => &mut cmd,
    };
    cmd.arg(program)
        .args(program_args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot start {}", sanitizer.display()))?;

    // Output goes to the file, so waiting cannot block on a full pipe.
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().context("waiting for compute-sanitizer")? {
            break Some(status);
        }
        if start.elapsed() > Duration::from_secs(args.timeout) {
            // The child is ours (spawned above); kill it by its handle.
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = fs::read_to_string(log).unwrap_or_default();
    Ok(match status {
        None => Outcome::TimedOut(args.timeout),
        Some(status) => classify(status.code(), &text),
    })
}

/// Decides what a run's exit code and output mean.
fn classify(code: Option<i32>, text: &str) -> Outcome {
    let errors = summary_count(text, "ERROR SUMMARY:");
    let hazards = summary_count(text, "RACECHECK SUMMARY:");
    let first_report = || {
        text.lines()
            .filter_map(|l| l.strip_prefix("========="))
            .map(str::trim)
            .find(|l| {
                !l.is_empty()
                    && !l.starts_with("COMPUTE-SANITIZER")
                    && !l.contains("SUMMARY")
                    && !l.starts_with("at ")
            })
            .unwrap_or("")
            .to_string()
    };
    if code == Some(SANITIZER_EXIT) || errors > 0 || hazards > 0 {
        let mut s = String::new();
        if errors > 0 {
            let _ = write!(s, "{errors} error(s)");
        }
        if hazards > 0 {
            let _ = write!(
                s,
                "{}{hazards} hazard(s)",
                if s.is_empty() { "" } else { ", " }
            );
        }
        let first = first_report();
        if !first.is_empty() {
            let _ = write!(s, "{}{first}", if s.is_empty() { "" } else { ": " });
        }
        return Outcome::Reported(s);
    }
    if code == Some(0) {
        return Outcome::Clean;
    }
    let line = text
        .lines()
        .find(|l| l.starts_with("error: "))
        .map(|l| l.trim_start_matches("error: ").to_string())
        .unwrap_or_else(|| match code {
            Some(c) => format!("exit code {c} (see the log)"),
            None => "killed by a signal (see the log)".into(),
        });
    Outcome::HostFailed(line)
}

/// The number after `marker` (`ERROR SUMMARY: 3 errors`), 0 when absent.
fn summary_count(text: &str, marker: &str) -> usize {
    text.lines()
        .filter_map(|l| l.split_once(marker))
        .filter_map(|(_, rest)| rest.split_whitespace().next()?.parse::<usize>().ok())
        .sum()
}

fn print_progress(run: &Run) {
    println!(
        "  {:<10} {:<12} {:<16} {}",
        run.tool,
        run.size,
        run.kernels,
        run.outcome.text()
    );
}

fn table(runs: &[Run]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<10} {:<12} {:<16} {:<6} log",
        "tool", "m x n x k", "kernels", "result"
    );
    let _ = writeln!(s, "{}", "-".repeat(78));
    for r in runs {
        let result = if r.outcome.passed() { "ok" } else { "FAIL" };
        let _ = writeln!(
            s,
            "{:<10} {:<12} {:<16} {:<6} {}",
            r.tool,
            r.size,
            r.kernels,
            result,
            r.log.display()
        );
        if !r.outcome.passed() {
            let _ = writeln!(s, "{:>41} {}", "", r.outcome.text());
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_run() {
        let log = "========= COMPUTE-SANITIZER\nok\n========= ERROR SUMMARY: 0 errors\n";
        assert!(classify(Some(0), log).passed());
    }

    #[test]
    fn memcheck_error_is_named() {
        let log = "========= COMPUTE-SANITIZER\n\
                   ========= Invalid __global__ read of size 4 bytes\n\
                   =========     at naive+0x1c0\n\
                   ========= ERROR SUMMARY: 2 errors\n";
        match classify(Some(SANITIZER_EXIT), log) {
            Outcome::Reported(s) => {
                assert_eq!(s, "2 error(s): Invalid __global__ read of size 4 bytes")
            }
            _ => panic!("not reported"),
        }
    }

    #[test]
    fn racecheck_warnings_fail() {
        let log = "========= RACECHECK SUMMARY: 1 hazard displayed (0 errors, 1 warning)\n\
                   ========= ERROR SUMMARY: 0 errors\n";
        assert!(matches!(classify(Some(0), log), Outcome::Reported(_)));
    }

    #[test]
    fn host_failure_keeps_its_line() {
        let log = "FAIL\nerror: verification failed (see FAIL above)\n========= ERROR SUMMARY: 0 errors\n";
        match classify(Some(1), log) {
            Outcome::HostFailed(s) => assert_eq!(s, "verification failed (see FAIL above)"),
            _ => panic!("not a host failure"),
        }
    }

    #[test]
    fn reads_the_json_kernel_list() {
        let json = r#"[{"name": "naive", "block_tile": [16, 16]}, {"name": "mma", "block_tile": [128, 256]}]"#;
        let k = parse_kernel_list(json).unwrap();
        assert_eq!((k[1].name.as_str(), k[1].tile), ("mma", (128, 256)));
        assert!(parse_kernel_list("[]").is_err());
        assert!(parse_kernel_list("naive 16x16").is_err());
        assert!(parse_kernel_list(r#"[{"name": "x"}]"#).is_err());
    }

    #[test]
    fn sizes_add_a_whole_tile_size() {
        let a = Kernel {
            name: "a".into(),
            tile: (16, 16),
            named_only: false,
        };
        let b = Kernel {
            name: "b".into(),
            tile: (128, 64),
            named_only: true,
        };
        let s = sizes(&[&a, &b]);
        assert_eq!(s[1], (128, 64, 128));
        assert_eq!(s.len(), SIZES.len() + 1);
    }
}
