//! `cargo xtask doctor`: one line per thing the project needs, saying
//! whether it is here and what to do when it is not.
//!
//! Exit code 1 only when something needed to BUILD the kernels is missing
//! (toolchain, rust-src, the PTX build). A machine with no GPU can build,
//! so it passes; a GPU machine with only the release binaries (no source
//! tree, no Rust) is checked for the `host` binary instead of the build.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Result;

use crate::cuda::{self, Driver};
use crate::locate;
use crate::modules::{self, MODULES};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Skip the PTX build (`cargo build -p rust-gemm`), which can take minutes
    /// on a fresh checkout.
    #[arg(long)]
    no_build: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Status {
    Ok,
    /// Needed; when `Check::blocks_build` is set, doctor fails.
    Missing,
    /// Useful, not needed.
    OptionalMissing,
}

impl Status {
    fn label(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Missing => "missing",
            Status::OptionalMissing => "optional-missing",
        }
    }
}

struct Check {
    status: Status,
    what: &'static str,
    /// A missing item that stops the kernels from building: exit code 1.
    blocks_build: bool,
}

/// Collects checks and prints each as soon as it is known (the PTX build
/// is slow; the lines before it should not wait for it).
#[derive(Default)]
struct Report {
    checks: Vec<Check>,
}

impl Report {
    fn ok(&mut self, what: &'static str, detail: impl Into<String>) {
        self.push(Status::Ok, what, detail.into(), false);
    }
    /// Missing, and the kernels cannot be built without it.
    fn build_missing(&mut self, what: &'static str, detail: impl Into<String>) {
        self.push(Status::Missing, what, detail.into(), true);
    }
    /// Missing, needed to run on a GPU, but not to build.
    fn run_missing(&mut self, what: &'static str, detail: impl Into<String>) {
        self.push(Status::Missing, what, detail.into(), false);
    }
    fn optional(&mut self, what: &'static str, detail: impl Into<String>) {
        self.push(Status::OptionalMissing, what, detail.into(), false);
    }
    fn push(&mut self, status: Status, what: &'static str, detail: String, blocks_build: bool) {
        println!("  {:<16}  {:<17}  {}", status.label(), what, detail);
        self.checks.push(Check {
            status,
            what,
            blocks_build,
        });
    }
}

pub fn run(args: &Args) -> Result<bool> {
    println!("cargo xtask doctor: can this machine build and run the kernels?\n");
    let mut r = Report::default();

    // The source tree and cargo: a development machine. Otherwise this is
    // a machine that runs the release binaries copied next to each other.
    let can_build = match (locate::workspace_root(), locate::cargo()) {
        (Some(root), Some(_)) => build_checks(&mut r, &root, args),
        _ => binary_checks(&mut r),
    };
    ptxas(&mut r);
    let gpus = driver_and_gpus(&mut r);
    library(
        &mut r,
        "NVRTC",
        "libnvrtc",
        cuda::nvrtc_version().map(|(a, b)| format!("{a}.{b}")),
    );
    library(
        &mut r,
        "cuBLAS",
        "libcublas",
        cuda::cublas_version().map(|(a, b, c)| format!("{a}.{b}.{c}")),
    );
    tool(
        &mut r,
        "ncu",
        "ncu",
        "Nsight Compute, for `ncu --clock-control none ./host ...` profiles",
    );
    tool(
        &mut r,
        "compute-sanitizer",
        "compute-sanitizer",
        "needed by `cargo xtask sanitize`",
    );

    let blocking: Vec<&str> = r
        .checks
        .iter()
        .filter(|c| c.blocks_build && c.status == Status::Missing)
        .map(|c| c.what)
        .collect();
    println!();
    if !blocking.is_empty() {
        println!(
            "doctor: FAILED: missing {}, without which the kernels cannot be built or run here (see above)",
            blocking.join(", ")
        );
        return Ok(false);
    }
    let build = if can_build {
        "can build the kernels"
    } else {
        "runs prebuilt binaries"
    };
    if gpus == 0 {
        println!(
            "doctor: {build}; no GPU here, so nothing can run (use a machine with an NVIDIA GPU)"
        );
    } else {
        println!("doctor: {build}; {gpus} GPU(s) ready");
    }
    Ok(true)
}

/// Toolchain, rust-src and the PTX build, in the source tree. Returns
/// whether the PTX was built (or the build was skipped with nothing missing).
fn build_checks(r: &mut Report, root: &Path, args: &Args) -> bool {
    let channel = pinned_channel(root);
    let channel_text = channel.as_deref().unwrap_or("the pinned nightly");
    let rustup = locate::find_program("rustup", &locate::home_cargo_bin());
    let install = format!(
        "`rustup toolchain install {channel_text} --component rust-src` (rustup: https://rustup.rs)"
    );
    let toolchain_ok = match (&rustup, &channel) {
        (None, _) => {
            r.build_missing(
                "toolchain",
                format!("rustup not found: install it, then {install}"),
            );
            false
        }
        (_, None) => {
            r.build_missing(
                "toolchain",
                "rust-toolchain.toml has no `channel = \"...\"` line",
            );
            false
        }
        (Some(rustup), Some(channel)) => {
            let listed = locate::output(Command::new(rustup).args(["toolchain", "list"]))
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            if listed.lines().any(|l| l.starts_with(channel.as_str())) {
                r.ok(
                    "toolchain",
                    format!("{channel} installed (pinned in rust-toolchain.toml)"),
                );
                true
            } else {
                r.build_missing(
                    "toolchain",
                    format!("{channel} is not installed: run {install}"),
                );
                false
            }
        }
    };

    // rustc run in the repository picks the pinned toolchain (rustup reads
    // rust-toolchain.toml), so its sysroot is the one the PTX build uses.
    let sysroot = locate::first_line(
        Command::new("rustc")
            .args(["--print", "sysroot"])
            .current_dir(root),
    );
    let core_src = sysroot
        .as_ref()
        .map(|s| PathBuf::from(s).join("lib/rustlib/src/rust/library/core"));
    match &core_src {
        Some(core) if core.join("Cargo.toml").is_file() => {
            r.ok("rust-src", core.display().to_string())
        }
        Some(core) => r.build_missing(
            "rust-src",
            format!(
                "{} is missing: run `rustup component add rust-src --toolchain {channel_text}`",
                core.display()
            ),
        ),
        None => r.build_missing(
            "rust-src",
            format!("cannot run `rustc --print sysroot`: run {install}"),
        ),
    }
    let src_ok = core_src.is_some_and(|c| c.join("Cargo.toml").is_file());

    if args.no_build {
        r.optional(
            "PTX build",
            "skipped (--no-build): run `cargo build -p rust-gemm` to build the PTX",
        );
        return toolchain_ok && src_ok;
    }
    if !(toolchain_ok && src_ok) {
        r.build_missing(
            "PTX build",
            "not tried: install the toolchain and rust-src first",
        );
        return false;
    }
    ptx_build(r, root)
}

/// `channel = "nightly-2026-05-20"` from rust-toolchain.toml.
fn pinned_channel(root: &Path) -> Option<String> {
    let text = fs::read_to_string(root.join("rust-toolchain.toml")).ok()?;
    text.lines().find_map(|line| {
        let value = line
            .trim()
            .strip_prefix("channel")?
            .trim_start()
            .strip_prefix('=')?;
        Some(value.trim().trim_matches('"').to_string())
    })
}

/// Builds the library (`rust-gemm`), whose build script compiles kernels-gpu to PTX,
/// and says where the PTX is.
fn ptx_build(r: &mut Report, root: &Path) -> bool {
    let Some(cargo) = locate::cargo() else {
        r.build_missing(
            "PTX build",
            "cargo not found: install Rust with rustup (https://rustup.rs)",
        );
        return false;
    };
    eprintln!(
        "  ...               building the PTX (`cargo build -p rust-gemm`); the first build takes minutes"
    );
    let out = locate::output(
        Command::new(cargo)
            .args(["build", "--quiet", "-p", "rust-gemm"])
            .current_dir(root),
    );
    let Some(out) = out else {
        r.build_missing("PTX build", "cannot start cargo");
        return false;
    };
    if !out.status.success() {
        // build.rs sums up its failure in one `error: ...` line; show the
        // last error line cargo printed, and how to see everything.
        let stderr = String::from_utf8_lossy(&out.stderr);
        let last = stderr
            .lines()
            .rfind(|l| l.trim_start().starts_with("error"))
            .unwrap_or("cargo failed")
            .trim();
        r.build_missing(
            "PTX build",
            format!("{last} (run `cargo build -p rust-gemm` for all of it)"),
        );
        return false;
    }
    let Some(out_dir) = newest_out_dir(&locate::target_dir(root).join("debug/build")) else {
        r.build_missing(
            "PTX build",
            "cargo succeeded but no rust-gemm-*/out/ptx_modules.rs was found",
        );
        return false;
    };
    let mut ok = true;
    for module in MODULES {
        let path = out_dir.join(format!("{}.ptx", module.name));
        let Ok(text) = fs::read_to_string(&path) else {
            r.build_missing(
                "PTX build",
                format!("module {} missing: {}", module.name, path.display()),
            );
            ok = false;
            continue;
        };
        let target = text
            .lines()
            .find_map(|l| l.trim().strip_prefix(".target "))
            .unwrap_or("?")
            .to_string();
        let entries = text.lines().filter(|l| l.contains(".entry ")).count();
        r.ok(
            "PTX build",
            format!(
                "module {} ({}): {} KB, .target {target}, {entries} kernels",
                module.name,
                module.files,
                text.len() / 1024
            ),
        );
    }
    ok
}

/// The `rust-gemm-*/out` folder of the most recent build of `rust-gemm` under
/// `build_dir`: where build.rs writes each module's PTX.
fn newest_out_dir(build_dir: &Path) -> Option<PathBuf> {
    fs::read_dir(build_dir)
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("rust-gemm-"))
        .map(|e| e.path().join("out"))
        .filter(|p| p.join("ptx_modules.rs").is_file())
        .max_by_key(|p| {
            p.join("ptx_modules.rs")
                .metadata()
                .and_then(|m| m.modified())
                .ok()
        })
}

/// On a machine with only the release binaries: the `host` next to us
/// carries the PTX, so nothing needs building.
fn binary_checks(r: &mut Report) -> bool {
    let missing: Vec<&str> = ["cargo", "rustup"]
        .into_iter()
        .filter(|p| locate::find_program(p, &locate::home_cargo_bin()).is_none())
        .collect();
    let why = if missing.is_empty() {
        "no source tree next to this xtask".to_string()
    } else {
        format!("{} not found", missing.join(" and "))
    };
    r.optional(
        "toolchain",
        format!(
            "{why}: fine for running the prebuilt `host` here; build on a machine with Rust \
             (`cargo xtask doctor` there)"
        ),
    );
    match locate::sibling("host") {
        Some(host) => match locate::output(Command::new(&host).arg("--list-kernels")) {
            Some(o) if o.status.success() => {
                let n = String::from_utf8_lossy(&o.stdout).lines().count();
                r.ok(
                    "host binary",
                    format!("{} ({n} kernels, PTX built in)", host.display()),
                );
            }
            _ => r.build_missing(
                "host binary",
                format!(
                    "{} does not run (`--list-kernels` failed): copy it again",
                    host.display()
                ),
            ),
        },
        None => r.build_missing(
            "host binary",
            "no `host` next to this xtask: copy target/release/host into the same folder",
        ),
    }
    false
}

/// ptxas checks PTX without a GPU (tests use it when present).
fn ptxas(r: &mut Report) {
    let mut dirs = locate::cuda_bin_dirs();
    dirs.extend(python_nvidia_bins());
    match locate::find_program("ptxas", &dirs) {
        Some(p) => {
            let version = locate::output(Command::new(&p).arg("--version"))
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .and_then(|s| {
                    s.lines()
                        .find(|l| l.contains("release"))
                        .map(str::to_string)
                })
                .unwrap_or_default();
            r.ok("ptxas", format!("{} {}", p.display(), version.trim()));
        }
        None => r.optional(
            "ptxas",
            "not found (checks the PTX without a GPU): `pip install nvidia-cuda-nvcc`, \
             or put the CUDA toolkit's bin on PATH",
        ),
    }
}

/// `site-packages/nvidia/cu13/bin` of every Python site folder
/// (`pip install nvidia-cuda-nvcc` puts ptxas there).
fn python_nvidia_bins() -> Vec<PathBuf> {
    let script = "import site, sys\n\
                  p = list(getattr(site, 'getsitepackages', lambda: [])())\n\
                  p.append(site.getusersitepackages())\n\
                  print('\\n'.join(p))";
    let Some(out) = locate::output(Command::new("python3").args(["-c", script])) else {
        return Vec::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .flat_map(|dir| {
            ["cu13", "cu12", "cuda_nvcc"]
                .map(|sub| PathBuf::from(dir).join("nvidia").join(sub).join("bin"))
        })
        .collect()
}

/// The driver, its CUDA version, and one line per GPU. Returns the number of GPUs.
fn driver_and_gpus(r: &mut Report) -> usize {
    match cuda::probe_driver() {
        Driver::Absent => {
            r.run_missing(
                "NVIDIA driver",
                "libcuda.so.1 cannot be loaded: no GPU driver here (fine for building); on a GPU \
                 machine install the NVIDIA driver or add libcuda's folder to LD_LIBRARY_PATH",
            );
            r.run_missing(
                "GPU",
                "none: the kernels can be built and tested on the CPU emulator only",
            );
            0
        }
        Driver::Failed { doing, error } => {
            r.run_missing(
                "NVIDIA driver",
                format!("loads, but failed {doing}: {error}; check `nvidia-smi`"),
            );
            0
        }
        Driver::Ready { cuda_version, gpus } => {
            // "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build ..."
            let release = fs::read_to_string("/proc/driver/nvidia/version")
                .ok()
                .and_then(|t| {
                    t.split_whitespace()
                        .find(|w| {
                            w.contains('.') && w.chars().all(|c| c.is_ascii_digit() || c == '.')
                        })
                        .map(|v| format!("driver {v}, "))
                })
                .unwrap_or_default();
            r.ok(
                "NVIDIA driver",
                format!("{release}CUDA {}", cuda::version_text(cuda_version)),
            );
            if gpus.is_empty() {
                r.run_missing(
                    "GPU",
                    "the driver sees none: check `nvidia-smi`, and CUDA_VISIBLE_DEVICES if it is set",
                );
            }
            for g in &gpus {
                let (major, minor) = g.compute_capability;
                let detail = format!(
                    "{}: {}, compute capability {major}.{minor}, {} SMs, {:.1} GiB",
                    g.ordinal,
                    g.name,
                    g.sms,
                    g.memory_bytes as f64 / (1u64 << 30) as f64
                );
                if major < 7 {
                    r.run_missing(
                        "GPU",
                        format!("{detail}: too old, the kernels need 7.0 or newer"),
                    );
                    continue;
                }
                r.ok("GPU", detail);
                let capability = (major.max(0) as u32, minor.max(0) as u32);
                let (runs, not): (Vec<_>, Vec<_>) =
                    MODULES.iter().partition(|m| m.arch.runs_on(capability));
                let names = |ms: &[&modules::PtxModule]| {
                    ms.iter()
                        .map(|m| format!("{} ({})", m.name, m.arch.target_cpu))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                let detail = if !not.is_empty() {
                    format!(
                        "GPU {} runs {}; not {}: their kernels are skipped",
                        g.ordinal,
                        names(&runs),
                        not.iter()
                            .map(|m| format!("{} (needs {})", m.name, m.arch.needs()))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                } else {
                    format!("GPU {} runs every module: {}", g.ordinal, names(&runs))
                };
                r.ok("PTX modules", detail);
            }
            gpus.iter().filter(|g| g.compute_capability.0 >= 7).count()
        }
    }
}

/// NVRTC or cuBLAS: the bench's baselines need them, the kernels do not.
fn library(r: &mut Report, what: &'static str, lib: &str, version: Option<String>) {
    match version {
        Some(v) => r.ok(what, format!("{lib} {v} loads")),
        None => {
            let cuda_lib = Path::new("/usr/local/cuda/lib64");
            let there = fs::read_dir(cuda_lib)
                .map(|d| {
                    d.filter_map(|e| e.ok())
                        .any(|e| e.file_name().to_string_lossy().starts_with(lib))
                })
                .unwrap_or(false);
            let hint = if there {
                format!(
                    "{lib} is in {} but not on the loader's path: \
                     export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH",
                    cuda_lib.display()
                )
            } else {
                format!(
                    "{lib} cannot be loaded (the bench's baselines need it): install the CUDA \
                     toolkit and export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH"
                )
            };
            r.optional(what, hint);
        }
    }
}

/// An optional NVIDIA tool, on PATH or in the CUDA toolkit's bin.
fn tool(r: &mut Report, what: &'static str, program: &str, use_: &str) {
    match locate::find_program(program, &locate::cuda_bin_dirs()) {
        Some(p) => r.ok(what, p.display().to_string()),
        None => r.optional(
            what,
            format!("not on PATH or in /usr/local/cuda/bin ({use_}): install the CUDA toolkit"),
        ),
    }
}
