//! `cargo xtask bench [ARGS]`: builds the `bench` program in release mode
//! and runs it from the repository root with ARGS (`--help` lists them):
//! every kernel next to its CUDA C++ twin and cuBLAS, in one process.
//! On a machine with only the binaries, runs the `bench` next to xtask.

use std::process::Command;

use anyhow::{Context, Result};

use crate::locate;

#[derive(clap::Args, Debug)]
#[command(disable_help_flag = true)]
pub struct Args {
    /// Arguments for the bench program (see `cargo xtask bench --help`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    rest: Vec<String>,
}

pub fn run(args: &Args) -> Result<bool> {
    let bench = locate::release_binary("bench")?;
    let mut cmd = Command::new(&bench);
    cmd.args(&args.rest);
    // README.md, docs/ and results/ are relative to the repository root.
    if let Some(root) = locate::workspace_root() {
        cmd.current_dir(root);
    }
    let status = cmd
        .status()
        .with_context(|| format!("cannot start {}", bench.display()))?;
    Ok(status.success())
}
