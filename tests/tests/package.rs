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
    if !out.status.success() {
        // `-i rand` names no package when rand is not in the tree at all.
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("did not match any packages"),
            "cargo tree failed: {stderr}"
        );
        return;
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

/// The packages crates.io would get: `cargo package` of `kernels-gpu` and
/// `rust-gemm` (without its own verification build: the test below builds
/// them), unpacked in `dir`. Checks that the library's `.crate` is under
/// crates.io's 10 MB and holds each module's PTX and SASS. Returns the two
/// unpacked folders.
fn packaged(repo: &std::path::Path, dir: &std::path::Path) -> [std::path::PathBuf; 2] {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let target = dir.join("package-target");
    let out = Command::new(cargo)
        .args([
            "package",
            "--offline",
            "--allow-dirty",
            "--no-verify",
            "--quiet",
        ])
        .args(["-p", "kernels-gpu", "-p", "rust-gemm"])
        .arg("--target-dir")
        .arg(&target)
        .current_dir(repo)
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo package failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    ["kernels-gpu", "rust-gemm"].map(|name| {
        let file = target.join(format!("package/{name}-0.1.0.crate"));
        let bytes = std::fs::metadata(&file)
            .expect("the .crate is written")
            .len();
        assert!(
            bytes < 10 << 20,
            "{name}'s .crate is {bytes} bytes, above crates.io's 10 MB"
        );
        let unpack = Command::new("tar")
            .arg("xzf")
            .arg(&file)
            .arg("-C")
            .arg(dir)
            .status()
            .expect("tar runs");
        assert!(unpack.success(), "tar could not unpack {}", file.display());
        dir.join(format!("{name}-0.1.0"))
    })
}

/// A crate outside the workspace, built with stable Rust (`rustup run
/// stable`), with the library as its only dependency, as `cargo package`
/// packs it for crates.io (with the packed kernels-gpu): it builds from
/// the shipped PTX, with no nightly and no kernel build, and runs
/// (`tests/fixtures/stable-user/main.rs`: it plans a call, and runs and
/// checks it where there is a GPU). Skipped, loudly, where rustup has no
/// stable toolchain, unless `REQUIRE_STABLE=1` (CI) makes that a failure.
#[test]
fn a_stable_crate_outside_the_workspace_builds_and_runs() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .canonicalize()
        .unwrap();
    // Only what rustup and cargo need to find themselves and the registry:
    // nothing of the cargo that runs this test (its toolchain, flags,
    // target folder, or RUST_GEMM_BUILD_PTX from the repository's config).
    let clean = |cmd: &mut Command| {
        cmd.env_clear();
        for var in ["PATH", "HOME", "RUSTUP_HOME", "CARGO_HOME", "TMPDIR"] {
            if let Some(v) = std::env::var_os(var) {
                cmd.env(var, v);
            }
        }
    };
    let mut probe = Command::new("rustup");
    clean(&mut probe);
    let stable = probe
        .args(["run", "stable", "rustc", "--version"])
        .output()
        .ok()
        .filter(|o| o.status.success());
    let Some(stable) = stable else {
        assert!(
            std::env::var("REQUIRE_STABLE").is_err(),
            "REQUIRE_STABLE is set but rustup has no stable toolchain: \
             run `rustup toolchain install stable --profile minimal`"
        );
        eprintln!(
            "SKIPPED a_stable_crate_outside_the_workspace_builds_and_runs: no stable toolchain \
             (`rustup toolchain install stable --profile minimal`)"
        );
        return;
    };
    let dir = std::env::temp_dir().join(format!("rust-gemm-stable-user-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("src")).unwrap();
    let [kernels, library] = packaged(&repo, &dir);
    for module in kernels_gpu::modules::MODULES {
        let ptx = format!("ptx/{}.ptx.lzma", module.name);
        let sass =
            (module.arch.sass.iter()).map(|arch| format!("sass/{}.{arch}.cubin.lzma", module.name));
        for file in std::iter::once(ptx).chain(sass) {
            assert!(library.join(&file).is_file(), "the package lacks {file}");
        }
    }
    // The packed library names kernels-gpu by version: the packed one.
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"stable-user\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n\
             [dependencies]\nrust-gemm = {{ path = {:?} }}\n\n\
             [patch.crates-io]\nkernels-gpu = {{ path = {:?} }}\n\n[workspace]\n",
            library.display().to_string(),
            kernels.display().to_string()
        ),
    )
    .unwrap();
    std::fs::copy(
        repo.join("tests/fixtures/stable-user/main.rs"),
        dir.join("src/main.rs"),
    )
    .unwrap();
    // The workspace's lock file: the same versions, all in the local
    // registry already (the workspace's build fetched them).
    std::fs::copy(repo.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    let target = repo.join("target/stable-user");
    let started = std::time::Instant::now();
    let mut build = Command::new("rustup");
    clean(&mut build);
    let out = build
        .args(["run", "stable", "cargo", "build", "--offline", "--quiet"])
        .env("CARGO_TARGET_DIR", &target)
        .current_dir(&dir)
        .output()
        .expect("rustup runs");
    eprintln!(
        "{} built the outside crate in {:.1} s",
        String::from_utf8_lossy(&stable.stdout).trim(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        out.status.success(),
        "the outside crate did not build on stable:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(target.join("debug/stable-user"))
        .output()
        .expect("the outside crate's program runs");
    let stdout = String::from_utf8_lossy(&run.stdout);
    eprintln!("{stdout}");
    assert!(
        run.status.success() && (stdout.starts_with("ok:") || stdout.starts_with("planned")),
        "the outside crate's program failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    std::fs::remove_dir_all(&dir).ok();
}
