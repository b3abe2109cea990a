//! Builds `kernels-gpu` for `nvptx64-nvidia-cuda` and hands the PTX to the
//! host crate (`$OUT_DIR/kernels.ptx`). This is the job Rust-CUDA's
//! `cuda_builder` does; here it is rustc's own NVPTX backend:
//!
//! cargo rustc -p kernels-gpu --profile ptx --target nvptx64-nvidia-cuda
//!     -Zbuild-std=core --crate-type cdylib -- --emit=asm -Zno-link -C target-cpu=sm_70
//!
//! The `.s` file that command writes is the PTX. Every failure prints one
//! line saying what to do (`cargo::error=`), never a backtrace.

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, exit};

/// Oldest GPU the PTX must load on: the driver JIT-compiles sm_70 PTX for
/// every newer architecture (Volta, Turing, Ampere, Ada, Hopper, Blackwell).
const PTX_ARCH: &str = "sm_70";
const DEVICE_TARGET: &str = "nvptx64-nvidia-cuda";

fn fail(message: &str) -> ! {
    println!("cargo::error={message}");
    exit(1)
}

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest_dir.parent().unwrap().to_path_buf();
    let kernels = root.join("kernels-gpu");
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());
    for input in [
        kernels.join("src"),
        kernels.join("Cargo.toml"),
        root.join("rust-toolchain.toml"),
        // The commit and the dirty flag (below) change with these.
        root.join(".git/HEAD"),
        root.join(".git/index"),
    ] {
        println!("cargo::rerun-if-changed={}", input.display());
    }

    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    check_toolchain(&rustc);

    // A target dir of its own: the outer cargo holds the lock on its own.
    let target_dir = out_dir.join("ptx-target");
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&root)
        .args([
            "rustc",
            "--quiet",
            "--package",
            "kernels-gpu",
            "--profile",
            "ptx",
        ])
        .args([
            "--target",
            DEVICE_TARGET,
            "-Zbuild-std=core",
            "--crate-type",
            "cdylib",
        ])
        .arg("--target-dir")
        .arg(&target_dir)
        .args(["--", "--emit=asm", "-Zno-link", "-C"])
        .arg(format!("target-cpu={PTX_ARCH}"));
    // The host's flags (and a host linker or wrapper) mean nothing to the
    // device build.
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
        "CARGO_PROFILE_RELEASE_LTO",
    ] {
        cmd.env_remove(var);
    }
    let output = match cmd.output() {
        Ok(o) => o,
        Err(e) => fail(&format!(
            "could not run cargo to build the kernels' PTX: {e}"
        )),
    };
    if !output.status.success() {
        // The device build's own diagnostics, then one line that sums up.
        eprintln!("{}", String::from_utf8_lossy(&output.stderr));
        fail("building kernels-gpu for nvptx64-nvidia-cuda failed (compiler errors above)");
    }

    let asm = target_dir
        .join(DEVICE_TARGET)
        .join("ptx")
        .join("deps")
        .join("kernels_gpu.s");
    let ptx = std::fs::read_to_string(&asm).unwrap_or_else(|e| {
        fail(&format!(
            "the device build wrote no PTX at {}: {e}",
            asm.display()
        ))
    });
    check_ptx(&ptx);
    std::fs::write(out_dir.join("kernels.ptx"), &ptx).unwrap_or_else(|e| {
        fail(&format!(
            "cannot write kernels.ptx to {}: {e}",
            out_dir.display()
        ))
    });
    println!("cargo::rustc-env=KERNELS_PTX_ARCH={PTX_ARCH}");
    println!("cargo::rustc-env=GEMM_GIT_COMMIT={}", git_commit(&root));
}

/// The commit the binary is built from (`-dirty` with local changes), so
/// results written by the bench name the code that produced them.
fn git_commit(root: &Path) -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .current_dir(root)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(commit) => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            if dirty {
                format!("{commit}-dirty")
            } else {
                commit
            }
        }
        None => "unknown".into(),
    }
}

/// The device build needs nightly (`-Zbuild-std`, `abi_ptx`) and the
/// standard library's source (rust-src) to build `core` for nvptx64.
fn check_toolchain(rustc: &str) {
    let version = Command::new(rustc).arg("-V").output();
    let version = match version {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        _ => fail(&format!(
            "cannot run `{rustc} -V`; install Rust with rustup (https://rustup.rs)"
        )),
    };
    if !version.contains("nightly") {
        fail(&format!(
            "the kernels need the nightly toolchain pinned in rust-toolchain.toml, but {version} is in use; \
             build from the repository root without a `+toolchain` override"
        ));
    }
    let sysroot = Command::new(rustc).args(["--print", "sysroot"]).output();
    let sysroot = match sysroot {
        Ok(o) if o.status.success() => PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()),
        _ => fail(&format!("cannot run `{rustc} --print sysroot`")),
    };
    let core_src = sysroot.join("lib/rustlib/src/rust/library/core/Cargo.toml");
    if !Path::new(&core_src).exists() {
        fail(
            "the kernels need the rust-src component to build `core` for nvptx64: \
             run `rustup component add rust-src` in the repository root",
        );
    }
}

/// A PTX module the driver can load: self-contained, with at least one entry.
fn check_ptx(ptx: &str) {
    if let Some(line) = ptx.lines().find(|l| l.starts_with(".extern .func")) {
        fail(&format!(
            "the kernels' PTX calls a function it does not define ({}); \
             the `ptx` profile must keep lto = \"fat\"",
            line.trim_end_matches(['(', ' '])
        ));
    }
    if !ptx.contains(".entry") {
        fail("the kernels' PTX has no kernel entry point (`.entry`)");
    }
}
