//! Project tasks, run as `cargo xtask <task>` from the repository root
//! (an alias in `.cargo/config.toml`), or as a plain `./xtask <task>` on a
//! machine that only has the release binaries (`xtask` and `host` in one
//! folder, no Rust toolchain).
//!
//! One module per task. xtask does not depend on the `host` crate, so it
//! still builds and runs when the kernels' PTX build is broken: that is
//! exactly when `doctor` is needed.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench;
mod cuda;
// The PTX modules and their architectures: the same list host/gemm/build.rs
// builds from (plain data; xtask does not depend on the kernels crate).
mod doctor;
mod locate;
#[allow(dead_code)]
#[path = "../../kernels-gpu/src/modules.rs"]
mod modules;
mod sanitize;

#[derive(Parser, Debug)]
#[command(about = "Project tasks for the Rust SGEMM kernels")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand, Debug)]
enum Task {
    /// Benchmark every kernel next to cuBLAS and the CUDA C++ twins
    /// (builds and runs the `bench` program; `cargo xtask bench --help`).
    Bench(bench::Args),
    /// Check what this machine has for building and running the kernels:
    /// toolchain, rust-src, PTX build, ptxas, NVIDIA driver, GPUs, NVRTC,
    /// cuBLAS, ncu and compute-sanitizer.
    Doctor(doctor::Args),
    /// Run every kernel under compute-sanitizer (memcheck, racecheck,
    /// synccheck, initcheck) at small sizes, verifying every result.
    Sanitize(sanitize::Args),
}

fn main() -> ExitCode {
    // Output piped into `head` ends quietly (the Rust runtime ignores
    // SIGPIPE, and println! would panic); harness::cli does the same.
    #[cfg(unix)]
    // SAFETY: before any other thread exists; SIG_DFL is valid for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // Argument errors are one line, as in the other programs.
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            let text = e.render().to_string();
            let first = text.lines().next().unwrap_or("error: bad arguments");
            eprintln!("{first} (see cargo xtask --help)");
            return ExitCode::from(2);
        }
    };
    let result = match cli.task {
        Task::Bench(args) => bench::run(&args),
        Task::Doctor(args) => doctor::run(&args),
        Task::Sanitize(args) => sanitize::run(&args),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
