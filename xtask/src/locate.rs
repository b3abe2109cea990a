//! Finding things: the workspace, programs on PATH or in CUDA's usual
//! folders, the `host` binary.

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root, when this xtask runs where it was built (the
/// source tree is there). None on a machine that only has the binaries.
pub fn workspace_root() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()?
        .to_path_buf();
    (root.join("Cargo.toml").is_file() && root.join("rust-toolchain.toml").is_file())
        .then_some(root)
}

/// Where cargo writes builds: CARGO_TARGET_DIR (relative to the workspace
/// when relative, as cargo reads it) or `<root>/target`.
pub fn target_dir(root: &Path) -> PathBuf {
    match env::var_os("CARGO_TARGET_DIR").filter(|v| !v.is_empty()) {
        Some(dir) => root.join(dir),
        None => root.join("target"),
    }
}

/// Folders where the CUDA toolkit keeps its programs, besides PATH.
pub fn cuda_bin_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(home) = env::var_os(var).filter(|v| !v.is_empty()) {
            dirs.push(PathBuf::from(home).join("bin"));
        }
    }
    dirs.push(PathBuf::from("/usr/local/cuda/bin"));
    dirs
}

/// `name` on PATH, else in one of `extra` folders.
pub fn find_program(name: &str, extra: &[PathBuf]) -> Option<PathBuf> {
    let path = env::var_os("PATH").unwrap_or_default();
    env::split_paths(&path)
        .chain(extra.iter().cloned())
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p))
}

pub fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// cargo: the one that runs us (CARGO), else on PATH or in ~/.cargo/bin.
pub fn cargo() -> Option<PathBuf> {
    if let Some(c) = env::var_os("CARGO")
        .map(PathBuf::from)
        .filter(|p| is_executable(p))
    {
        return Some(c);
    }
    find_program("cargo", &home_cargo_bin())
}

/// rustup's folder of proxies, for machines where it is not on PATH.
pub fn home_cargo_bin() -> Vec<PathBuf> {
    env::var_os("HOME")
        .map(|h| vec![PathBuf::from(h).join(".cargo/bin")])
        .unwrap_or_default()
}

/// The executable `name` in the folder of this executable (where the
/// release binaries are copied together).
pub fn sibling(name: &str) -> Option<PathBuf> {
    let exe = env::current_exe().ok()?;
    let path = exe.parent()?.join(name);
    is_executable(&path).then_some(path)
}

/// One of the project's programs, `host` or `bench` (each the binary of
/// the package of the same name): a fresh `cargo build --release` of it in
/// the source tree, else the one next to this executable (a machine with
/// the binaries and no Rust).
pub fn release_binary(name: &str) -> anyhow::Result<PathBuf> {
    use anyhow::{Context, bail};
    if let (Some(cargo), Some(root)) = (cargo(), workspace_root()) {
        eprintln!("xtask: building `{name}` (cargo build --release -p {name})");
        let status = Command::new(cargo)
            .args(["build", "--release", "-p", name])
            .current_dir(&root)
            .status()
            .context("cannot start cargo")?;
        if !status.success() {
            bail!("`cargo build --release -p {name}` failed (errors above)");
        }
        let path = target_dir(&root).join("release").join(name);
        if !is_executable(&path) {
            bail!("cargo built `{name}` but {} is not there", path.display());
        }
        return Ok(path);
    }
    sibling(name).with_context(|| {
        format!(
            "no cargo and no `{name}` next to this executable: copy target/release/{name} beside xtask"
        )
    })
}

/// The library's example `name` (`host/gemm/examples/<name>.rs`): a fresh
/// `cargo build --release -p rust-gemm --example <name>`, else the one next to
/// this executable.
pub fn release_example(name: &str) -> anyhow::Result<PathBuf> {
    use anyhow::{Context, bail};
    if let (Some(cargo), Some(root)) = (cargo(), workspace_root()) {
        eprintln!(
            "xtask: building the example `{name}` (cargo build --release -p rust-gemm --example {name})"
        );
        let status = Command::new(cargo)
            .args(["build", "--release", "-p", "rust-gemm", "--example", name])
            .current_dir(&root)
            .status()
            .context("cannot start cargo")?;
        if !status.success() {
            bail!("`cargo build --release -p rust-gemm --example {name}` failed (errors above)");
        }
        let path = target_dir(&root)
            .join("release")
            .join("examples")
            .join(name);
        if !is_executable(&path) {
            bail!(
                "cargo built the example `{name}` but {} is not there",
                path.display()
            );
        }
        return Ok(path);
    }
    sibling(name).with_context(|| {
        format!(
            "no cargo and no `{name}` next to this executable: copy \
             target/release/examples/{name} beside xtask, or pass --example-bin"
        )
    })
}

/// Runs `cmd` and collects its output; None when it cannot be started.
pub fn output(cmd: &mut Command) -> Option<Output> {
    cmd.output().ok()
}

/// The first line of `cmd`'s stdout when it succeeds.
pub fn first_line(cmd: &mut Command) -> Option<String> {
    let out = output(cmd).filter(|o| o.status.success())?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .map(|l| l.trim().to_string())
}
