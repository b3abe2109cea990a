//! Hands the library (`rust_gemm::ptx`) one PTX text per module of
//! `kernels-gpu/src/modules.rs`: `$OUT_DIR/<module>.ptx`, listed in
//! `$OUT_DIR/ptx_modules.rs`. Two sources:
//!
//! - Shipped (the default, what a program that depends on the library
//!   gets): `ptx/<module>.ptx.lzma` in this package, so that its build needs
//!   no nightly and no kernel build, only a stable Rust.
//! - From source, with `RUST_GEMM_BUILD_PTX=1` (set for every build inside
//!   this repository by its `.cargo/config.toml`): `kernels-gpu` built
//!   for `nvptx64-nvidia-cuda` with the pinned nightly. A test
//!   (`tests/tests/ptx.rs`) fails while the shipped modules differ from
//!   these.
//!
//! Building from source is the job Rust-CUDA's `cuda_builder` does; here
//! it is rustc's own NVPTX backend, per module:
//!
//! cargo rustc -p kernels-gpu --profile ptx --target nvptx64-nvidia-cuda
//!     -Zbuild-std=core --crate-type cdylib --target-dir $OUT_DIR/ptx-<module>
//!     -- --emit=asm -Zno-link -C target-cpu=<arch> --cfg gemm_module="<module>"
//!
//! The `.s` file that command writes is the PTX. Each module has its own
//! target folder, so cargo finds the modules an edit did not touch fresh
//! (a ladder file is compiled into one module only); the modules build in
//! parallel. Every failure prints one line saying what to do
//! (`cargo::error=`), never a backtrace.

use std::env;
use std::fmt::Write as _;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, exit};
use std::thread;

// The list of modules, from kernels-gpu itself (a build dependency
// without features: its host side, which builds on stable).
use kernels_gpu::modules::{MODULES, PtxModule};

const DEVICE_TARGET: &str = "nvptx64-nvidia-cuda";

fn fail(message: &str) -> ! {
    println!("cargo::error={message}");
    exit(1)
}

/// Set to `1` to build the PTX from the kernels' source (the pinned
/// nightly and rust-src needed); this repository's `.cargo/config.toml`
/// sets it for every build in the checkout. Unset, the build takes the
/// modules shipped in `ptx/`, and any Rust toolchain will do.
const FROM_SOURCE: &str = "RUST_GEMM_BUILD_PTX";

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());
    println!("cargo::rerun-if-env-changed={FROM_SOURCE}");
    let from_source = env::var(FROM_SOURCE).is_ok_and(|v| v == "1");
    // From source: each module's PTX text (written to OUT_DIR, where
    // `cargo xtask doctor` and a reader find it). Shipped: none here.
    let built = if from_source {
        build_all(&manifest_dir, &out_dir)
            .into_iter()
            .map(Some)
            .collect()
    } else {
        vec![None; MODULES.len()]
    };
    let mut list = String::from(
        "/// `(module name, LZMA of its PTX text)` for every module of \
         `kernels_gpu::modules::MODULES`, in order.\n\
         pub const PTX_MODULES: &[(&str, &[u8])] = &[\n",
    );
    let mut sass = String::from(
        "/// `(module name, architecture, LZMA of its cubin)`: the SASS shipped for each\n\
         /// module (`Arch::sass`), where it was assembled from this PTX.\n\
         pub const SASS_MODULES: &[(&str, &str, &[u8])] = &[\n",
    );
    for (module, built) in MODULES.iter().zip(built) {
        // The library embeds the PTX compressed (the shipped files a
        // fifteenth of its size) and decompresses a module when a GPU first
        // needs its PTX.
        let (packed, built) = match built {
            Some(result) => {
                let ptx = result.unwrap_or_else(|e| fail(&e));
                write_if_changed(&out_dir.join(format!("{}.ptx", module.name)), &ptx);
                let packed = out_dir.join(format!("{}.ptx.lzma", module.name));
                write_if_changed(&packed, compress(ptx.as_bytes()));
                (packed, Some(ptx))
            }
            None => (
                shipped_packed(&manifest_dir, module).unwrap_or_else(|e| fail(&e)),
                None,
            ),
        };
        writeln!(
            list,
            "    ({:?}, include_bytes!({:?})),",
            module.name,
            packed.display().to_string()
        )
        .unwrap();
        // The shipped cubins were assembled from the shipped PTX: built
        // from source, a module whose PTX differs (a kernel being edited)
        // has none, and the driver compiles its PTX.
        if let Some(ptx) = built
            && shipped(&manifest_dir, module).ok() != Some(ptx)
        {
            continue;
        }
        for arch in module.arch.sass {
            let packed = manifest_dir
                .join("sass")
                .join(format!("{}.{arch}.cubin.lzma", module.name));
            println!("cargo::rerun-if-changed={}", packed.display());
            if !packed.exists() {
                continue;
            }
            check_lzma(&packed).unwrap_or_else(|e| fail(&e));
            writeln!(
                sass,
                "    ({:?}, {arch:?}, include_bytes!({:?})),",
                module.name,
                packed.display().to_string()
            )
            .unwrap();
        }
    }
    list.push_str("];\n");
    sass.push_str("];\n");
    list.push_str(&sass);
    write_if_changed(&out_dir.join("ptx_modules.rs"), list.as_bytes());
}

/// Every module built from `kernels-gpu`'s source, in parallel.
fn build_all(manifest_dir: &Path, out_dir: &Path) -> Vec<Result<String, String>> {
    let root = manifest_dir.ancestors().nth(2).unwrap().to_path_buf();
    let kernels = root.join("kernels-gpu");
    for input in [
        kernels.join("src"),
        kernels.join("Cargo.toml"),
        root.join("rust-toolchain.toml"),
    ] {
        println!("cargo::rerun-if-changed={}", input.display());
    }
    if !kernels.join("src").is_dir() {
        fail(&format!(
            "{FROM_SOURCE}=1 builds the PTX from the kernels' source, but {} is not there: \
             unset {FROM_SOURCE} to use the shipped PTX, or build from a checkout of the repository",
            kernels.display()
        ));
    }

    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    check_toolchain(&rustc);

    // One thread per module; each runs its own cargo in its own target
    // folder (the outer cargo holds the lock on ours).
    let ptx_dir = ptx_target_root(out_dir);
    thread::scope(|scope| {
        let builds: Vec<_> = MODULES
            .iter()
            .map(|module| scope.spawn(|| build_module(&root, &ptx_dir, module)))
            .collect();
        builds
            .into_iter()
            .map(|b| {
                b.join()
                    .unwrap_or_else(|_| Err("the build thread panicked".into()))
            })
            .collect()
    })
}

/// The shipped PTX of `module`: `ptx/<module>.ptx.lzma` in this package,
/// made from the kernels' source by the nightly build (`UPDATE_PTX=1
/// cargo test -p tests --test ptx shipped`, which also fails while they
/// differ).
fn shipped(manifest_dir: &Path, module: &PtxModule) -> Result<String, String> {
    let path = shipped_packed(manifest_dir, module)?;
    let ptx = String::from_utf8(read_lzma(&path)?)
        .map_err(|_| format!("the shipped PTX module {} is not text", path.display()))?;
    check_ptx(module, &ptx)?;
    Ok(ptx)
}

/// The shipped PTX of `module`, `ptx/<module>.ptx.lzma`, checked to be
/// an LZMA file (its text is checked by `tests/tests/ptx.rs` in the
/// repository, and by cargo's checksums in a downloaded package).
fn shipped_packed(manifest_dir: &Path, module: &PtxModule) -> Result<PathBuf, String> {
    let path = manifest_dir
        .join("ptx")
        .join(format!("{}.ptx.lzma", module.name));
    println!("cargo::rerun-if-changed={}", path.display());
    if !path.exists() {
        return Err(format!(
            "the shipped PTX module {} is missing ({}): restore it from the repository, \
             or build the modules from source with {FROM_SOURCE}=1 and the pinned nightly",
            module.name,
            path.display()
        ));
    }
    check_lzma(&path)?;
    Ok(path)
}

/// `path` starts as the LZMA files of this package do: the `.lzma`
/// header with the properties byte of every preset (lc 3, lp 0, pb 2)
/// and the size of the text (the writers below and in `tests/tests/ptx.rs`
/// record it).
fn check_lzma(path: &Path) -> Result<(), String> {
    let mut header = [0u8; 13];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut header))
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let size = u64::from_le_bytes(header[5..13].try_into().unwrap());
    if header[0] != 0x5d || size == u64::MAX {
        return Err(format!(
            "{} is not LZMA-compressed as this package writes it; restore it from the repository",
            path.display()
        ));
    }
    Ok(())
}

/// `bytes` LZMA-compressed at preset 1 (fast, about 1 s for every module:
/// this runs in every build from source; the shipped files are preset 9).
fn compress(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut out = Vec::new();
    let options = lzma_rust2::LzmaOptions::with_preset(1);
    lzma_rust2::LzmaWriter::new_use_header(&mut out, &options, Some(bytes.len() as u64))
        .and_then(|mut w| w.write_all(bytes).and_then(|()| w.finish().map(|_| ())))
        .unwrap_or_else(|e| fail(&format!("cannot compress the PTX: {e}")));
    out
}

/// Where the modules' own target folders go: `<target>/ptx/`, shared by
/// the debug, release and test builds of the library (whose `OUT_DIR`s differ:
/// the device build does not depend on the host profile, so build it
/// once). `OUT_DIR` is `<target>/[<triple>/]<profile>/build/rust-gemm-<hash>/out`.
fn ptx_target_root(out_dir: &Path) -> PathBuf {
    out_dir
        .ancestors()
        .find(|dir| dir.file_name().is_some_and(|n| n == "build"))
        .and_then(|build| build.parent()?.parent())
        .map_or_else(|| out_dir.join("ptx"), |target| target.join("ptx"))
}

/// Builds one module; its PTX text, or the one-line reason it failed.
fn build_module(root: &Path, ptx_dir: &Path, module: &PtxModule) -> Result<String, String> {
    let target_dir = ptx_dir.join(module.name);
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(root)
        .args([
            "rustc",
            "--quiet",
            "--package",
            "kernels-gpu",
            "--no-default-features",
        ])
        .args(["--profile", "ptx", "--target", DEVICE_TARGET])
        .args(["-Zbuild-std=core", "--crate-type", "cdylib"])
        .arg("--target-dir")
        .arg(&target_dir)
        .args(["--", "--emit=asm", "-Zno-link"])
        .arg(format!("-Ctarget-cpu={}", module.arch.target_cpu))
        .arg(format!("--cfg=gemm_module={:?}", module.name));
    if !module.arch.target_features.is_empty() {
        cmd.arg(format!("-Ctarget-feature={}", module.arch.target_features));
    }
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
    let output = cmd.output().map_err(|e| {
        format!(
            "could not run cargo to build the kernels' PTX module {}: {e}",
            module.name
        )
    })?;
    if !output.status.success() {
        // The device build's own diagnostics, then one line that sums up.
        eprintln!("{}", String::from_utf8_lossy(&output.stderr));
        return Err(format!(
            "building kernels-gpu's PTX module `{}` for {} failed (compiler errors above)",
            module.name, module.arch.target_cpu
        ));
    }
    let deps = target_dir.join(DEVICE_TARGET).join("ptx").join("deps");
    let asm = deps.join("kernels_gpu.s");
    let ptx = std::fs::read_to_string(&asm).map_err(|e| {
        format!(
            "the device build of module {} wrote no PTX at {}: {e}",
            module.name,
            asm.display()
        )
    })?;
    check_ptx(module, &ptx)?;
    // Cargo expects a cdylib for nvptx64 to produce `kernels_gpu.ptx`,
    // which `-Zno-link` never writes, and without it calls the module
    // dirty and rebuilds it on every run. Give it that file (the same PTX),
    // rewritten after every run: newer than the sources, a module no edit
    // touched then stays fresh.
    std::fs::write(deps.join("kernels_gpu.ptx"), &ptx).map_err(|e| {
        format!(
            "cannot write {}: {e}",
            deps.join("kernels_gpu.ptx").display()
        )
    })?;
    Ok(ptx)
}

/// The bytes of an LZMA file, or a one-line reason.
fn read_lzma(path: &Path) -> Result<Vec<u8>, String> {
    let packed = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut bytes = Vec::new();
    lzma_rust2::LzmaReader::new_mem_limit(&packed[..], u32::MAX, None)
        .and_then(|mut r| r.read_to_end(&mut bytes))
        .map_err(|e| {
            format!(
                "{} is not LZMA-compressed: {e}; restore it from the repository",
                path.display()
            )
        })?;
    Ok(bytes)
}

/// Writes `text` unless the file already holds it (no needless rebuilds).
fn write_if_changed(path: &Path, text: impl AsRef<[u8]>) {
    let text = text.as_ref();
    if std::fs::read(path).is_ok_and(|old| old == text) {
        return;
    }
    std::fs::write(path, text)
        .unwrap_or_else(|e| fail(&format!("cannot write {}: {e}", path.display())));
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

/// A PTX module the driver can load: self-contained, for its architecture,
/// with at least one entry.
fn check_ptx(module: &PtxModule, ptx: &str) -> Result<(), String> {
    if let Some(line) = ptx.lines().find(|l| l.starts_with(".extern .func")) {
        return Err(format!(
            "the PTX module {} calls a function it does not define ({}); \
             the `ptx` profile must keep lto = \"fat\"",
            module.name,
            line.trim_end_matches(['(', ' '])
        ));
    }
    if !ptx.contains(".entry") {
        return Err(format!(
            "the PTX module {} has no kernel entry point (`.entry`): give its files a gemm_kernel!",
            module.name
        ));
    }
    let target = format!(".target {}", module.arch.target_cpu);
    if !ptx.lines().any(|l| l.trim() == target) {
        return Err(format!(
            "the PTX module {} does not say `{target}`",
            module.name
        ));
    }
    Ok(())
}
