//! The library is a package of its own (`host/gemm`, `rust-gemm`): what a
//! program that depends on it gets in its build.

use std::process::Command;

/// The packages in `rust-gemm`'s normal (non-dev, non-build) dependency
/// tree, by name.
fn library_dependencies() -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["tree", "--offline", "-p", "rust-gemm", "-e", "normal"])
        .args(["--prefix", "none", "--format", "{p}"])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

#[test]
fn library_pulls_in_no_harness_crates() {
    let deps = library_dependencies();
    assert!(deps.iter().any(|d| d == "cudarc"), "{deps:?}");
    // What the `host` program, the bench and the tests use, and a library
    // user should not have to build: the CLI, the CPU reference's BLAS,
    // the programs' error type and their tables and plot.
    for unwanted in [
        "clap",
        "matrixmultiply",
        "anyhow",
        "comfy-table",
        "indicatif",
        "plotters",
        "host",
    ] {
        assert!(
            !deps.iter().any(|d| d == unwanted),
            "rust-gemm depends on {unwanted}: {deps:?}"
        );
    }
}

/// `rand` reaches the library only through cudarc's `f16` feature (which
/// turns on `half`'s `rand_distr`), never from the library itself.
#[test]
fn rand_only_through_half() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["tree", "--offline", "-p", "rust-gemm", "-e", "normal"])
        .args(["-i", "rand", "--depth", "1", "--prefix", "none"])
        .args(["--format", "{p}"])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .expect("cargo runs");
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || text.trim().is_empty() {
        return; // no rand at all
    }
    let users: Vec<&str> = text
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(
        users.iter().all(|u| *u == "half" || *u == "rand_distr"),
        "rand is used by {users:?}"
    );
}
