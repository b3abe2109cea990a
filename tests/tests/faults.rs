//! Bad inputs and faults: for each, the host program prints exactly one
//! line starting `error: `, exits non-zero, and never panics, hangs or
//! prints a wrong number. docs/faults.md lists every row and the test here
//! that covers it.
//!
//! Rows that need a GPU detect one first (a tiny valid run). Without a GPU
//! they print a loud `SKIPPED` line to stderr (`cargo test -- --nocapture`
//! shows it) and still check what can be checked here: that the fault
//! input reaches the driver check and fails there with the no-driver line,
//! not with a panic.
//!
//! On a GPU machine with no Rust, run the compiled test binary with
//! `HOST_BIN=./host` (see docs/faults.md): the host path baked in at
//! build time is the development machine's.

use std::path::PathBuf;
use std::process::Output;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use assert_cmd::Command;

/// The line the host prints when libcuda cannot be loaded.
const NO_DRIVER: &str = "error: no NVIDIA driver found (libcuda.so.1 could not be loaded): \
                         install the NVIDIA driver, or run the kernels on the CPU emulator with \
                         `host --n 64 --emulate`";

/// The line the host prints when the driver loads but sees no GPU.
const NO_GPU: &str = "error: the NVIDIA driver found no GPU: check `nvidia-smi` and CUDA_VISIBLE_DEVICES, \
                      or run the kernels on the CPU emulator with `host --n 64 --emulate`";

const TRAP_PTX: &str = include_str!("../fixtures/trap.ptx");
const SYNTAX_ERROR_PTX: &str = include_str!("../fixtures/syntax_error.ptx");

fn host_path() -> PathBuf {
    std::env::var_os("HOST_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_FILE_HOST_host")))
}

/// Runs the host with `args` and returns what it did (never panics itself).
fn host(args: &[&str]) -> Output {
    Command::new(host_path())
        .args(args)
        .output()
        .expect("cannot start the host binary")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// No panic, no backtrace, in either stream.
fn assert_no_panic(out: &Output) {
    for stream in [text(&out.stdout), text(&out.stderr)] {
        assert!(!stream.contains("panicked"), "the host panicked:\n{stream}");
        assert!(
            !stream.contains("RUST_BACKTRACE"),
            "the host printed a backtrace hint:\n{stream}"
        );
    }
}

/// Exit code 1 and stderr exactly `line` (one line), no panic.
fn assert_error_line(out: &Output, line: &str) {
    assert_no_panic(out);
    assert_eq!(text(&out.stderr), format!("{line}\n"), "stderr");
    assert_eq!(
        out.status.code(),
        Some(1),
        "exit code; stderr: {}",
        text(&out.stderr)
    );
}

/// Exit code 1, stderr one line that starts with `prefix` and contains
/// every `parts`; returns the line. For messages that carry values of the
/// machine (free memory, the GPU's architecture, the driver's wording).
fn assert_error_like(out: &Output, prefix: &str, parts: &[&str]) -> String {
    assert_no_panic(out);
    let stderr = text(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "stderr is not one line:\n{stderr}");
    assert!(
        lines[0].starts_with(prefix),
        "stderr {:?} does not start with {prefix:?}",
        lines[0]
    );
    for part in parts {
        assert!(
            lines[0].contains(part),
            "stderr {:?} does not say {part:?}",
            lines[0]
        );
    }
    assert_eq!(out.status.code(), Some(1), "exit code; stderr: {stderr}");
    lines[0].to_string()
}

/// A command-line error: exit code 2, stderr exactly `line` followed by
/// the pointer to --help, one line. No panic.
fn assert_usage_error(out: &Output, line: &str) {
    assert_no_panic(out);
    let stderr = text(&out.stderr);
    assert_eq!(stderr, format!("{line} (see --help)\n"), "stderr");
    assert_eq!(out.status.code(), Some(2), "exit code; stderr: {stderr}");
    assert!(out.stdout.is_empty(), "stdout: {}", text(&out.stdout));
}

/// What this machine offers, found once by a tiny valid run.
#[derive(Debug, PartialEq, Eq)]
enum Machine {
    /// libcuda cannot be loaded: every run stops at the driver check.
    NoDriver,
    /// The driver loads but there is no usable GPU (its error line).
    NoGpu(String),
    Gpu,
}

fn machine() -> &'static Machine {
    static MACHINE: OnceLock<Machine> = OnceLock::new();
    MACHINE.get_or_init(|| {
        let out = host(&["--n", "1", "--reps", "0", "--kernel", "naive"]);
        assert_no_panic(&out);
        let stderr = text(&out.stderr);
        if out.status.success() {
            Machine::Gpu
        } else if stderr.trim_end() == NO_DRIVER {
            Machine::NoDriver
        } else {
            Machine::NoGpu(stderr.trim_end().to_string())
        }
    })
}

/// For a row that needs a GPU: true when there is one. Otherwise prints
/// the loud skip line, checks that `args` stop cleanly at the driver
/// check (no panic, the expected one line), and returns false.
fn gpu_or_skip(row: &str, args: &[&str]) -> bool {
    match machine() {
        Machine::Gpu => true,
        Machine::NoDriver => {
            eprintln!("SKIPPED (no NVIDIA driver here): fault row '{row}' needs a GPU");
            assert_error_line(&host(args), NO_DRIVER);
            false
        }
        Machine::NoGpu(line) => {
            eprintln!("SKIPPED (no usable GPU: {line}): fault row '{row}' needs a GPU");
            assert_error_line(&host(args), line);
            false
        }
    }
}

/// A fresh folder for this test's files.
fn temp_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sgemm-faults-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("cannot create a temp dir");
    dir
}

fn write_temp(test: &str, name: &str, contents: &[u8]) -> String {
    let path = temp_dir(test).join(name);
    std::fs::write(&path, contents).expect("cannot write a fault PTX");
    path.to_str().expect("temp path is not UTF-8").to_string()
}

// ---- Rows checked before the GPU is touched: the same on every machine.

#[test]
fn zero_size() {
    for flag in ["--n", "--m", "--k"] {
        let name = flag.trim_start_matches("--");
        let upper = name.to_uppercase();
        assert_usage_error(
            &host(&[flag, "0"]),
            &format!("error: invalid value '0' for '--{name} <{upper}>': {WHOLE}"),
        );
    }
}

#[test]
fn absurd_size() {
    assert_usage_error(
        &host(&["--n", "1048577"]),
        &format!("error: invalid value '1048577' for '--n <N>': {WHOLE}"),
    );
    assert_usage_error(
        &host(&["--n", "64", "--k", "4000000000"]),
        &format!("error: invalid value '4000000000' for '--k <K>': {WHOLE}"),
    );
}

#[test]
fn matrix_too_large() {
    assert_error_line(
        &host(&[
            "--emulate",
            "--m",
            "65536",
            "--n",
            "1",
            "--k",
            "65536",
            "--kernel",
            "naive",
        ]),
        "error: kernel naive cannot take m=65536 n=1 k=65536: A spans 65536 x 65536 = \
         4294967296 elements, more than 4294967295 (2^32 - 1: the kernels compute offsets \
         within a matrix in 32 bits); choose smaller sizes",
    );
    // Every kernel refuses it, so under "all" nothing is left to run.
    let out = host(&["--emulate", "--m", "1", "--n", "70000", "--k", "70000"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.lines().last().is_some_and(|l| l.starts_with(
            "error: no kernel can take m=1 n=70000 k=70000 (B spans 70000 x 70000 = 4900000000 elements"
        )),
        "{stderr}"
    );
}

const WHOLE: &str = "sizes are whole numbers from 1 to 1048576";

#[test]
fn negative_size() {
    for args in [&["--n", "-5"][..], &["--n=-5"]] {
        assert_usage_error(
            &host(args),
            &format!("error: invalid value '-5' for '--n <N>': {WHOLE}"),
        );
    }
}

#[test]
fn non_numeric_size() {
    assert_usage_error(
        &host(&["--n", "abc"]),
        &format!("error: invalid value 'abc' for '--n <N>': {WHOLE}"),
    );
    assert_usage_error(
        &host(&["--m", "1e3"]),
        &format!("error: invalid value '1e3' for '--m <M>': {WHOLE}"),
    );
    assert_usage_error(
        &host(&["--k", "99999999999999999999999"]),
        &format!("error: invalid value '99999999999999999999999' for '--k <K>': {WHOLE}"),
    );
}

#[test]
fn absurd_launch_counts() {
    for flag in ["--reps", "--warmup"] {
        assert_usage_error(
            &host(&[flag, "100000000000"]),
            &format!(
                "error: invalid value '100000000000' for '{flag} <{}>': a number of launches from 0 to 10,000",
                flag.trim_start_matches("--").to_uppercase()
            ),
        );
    }
}

#[test]
fn unknown_kernel() {
    let available: Vec<&str> = kernels_gpu::registry::KERNELS
        .iter()
        .map(|k| k.name)
        .collect();
    assert_error_line(
        &host(&["--n", "64", "--kernel", "nope"]),
        &format!(
            "error: unknown kernel 'nope': choose one of {} (see --list-kernels)",
            available.join(", ")
        ),
    );
}

#[test]
fn unreadable_ptx_file() {
    let missing = temp_dir("unreadable_ptx_file").join("no-such.ptx");
    let missing = missing.to_str().unwrap();
    assert_error_line(
        &host(&["--n", "64", "--ptx", missing]),
        &format!(
            "error: cannot read the PTX file {missing}: No such file or directory (os error 2)"
        ),
    );
}

// ---- Rows that depend on the machine.

/// A valid run on a machine without the driver: the no-driver line. With
/// a driver this row cannot be produced (libcuda is found by the system
/// loader), so it checks that the valid run succeeds instead.
#[test]
fn driver_missing() {
    let out = host(&["--n", "64", "--reps", "0"]);
    match machine() {
        Machine::NoDriver => assert_error_line(&out, NO_DRIVER),
        Machine::NoGpu(line) => assert_error_line(&out, line),
        Machine::Gpu => {
            assert_no_panic(&out);
            assert!(
                out.status.success(),
                "a valid run failed: {}",
                text(&out.stderr)
            );
            eprintln!(
                "SKIPPED (a driver is here): the no-driver row needs a machine without libcuda"
            );
        }
    }
}

/// A shape with one dimension 1 is valid: it SUCCEEDS and verifies.
#[test]
fn rectangular_with_a_dimension_of_1() {
    for (m, n, k) in [
        ("1", "300", "7"),
        ("300", "1", "7"),
        ("33", "65", "1"),
        ("1", "1", "1"),
    ] {
        let args = ["--m", m, "--n", n, "--k", k, "--reps", "0"];
        if !gpu_or_skip("rectangular shape with a dimension of 1 succeeds", &args) {
            return;
        }
        let out = host(&args);
        assert_no_panic(&out);
        assert!(
            out.status.success(),
            "m={m} n={n} k={k} failed: {}",
            text(&out.stderr)
        );
        // Only the lines saying that the TMA kernels run on padded copies
        // (rows that are not 16-byte multiples: here k = 7 or n = 1), and
        // step 17's on its transposed copy of B.
        let stderr = text(&out.stderr);
        assert!(
            stderr.lines().all(|l| {
                l.contains(": TMA needs rows of 16-byte multiples")
                    || l.contains(": each launch first writes B transposed")
            }),
            "stderr: {stderr}"
        );
        let stdout = text(&out.stdout);
        assert!(
            !stdout.contains("FAIL"),
            "a kernel failed verification:\n{stdout}"
        );
    }
}

/// The driver sees no GPU: with CUDA_VISIBLE_DEVICES hiding every GPU.
#[test]
fn no_gpu_visible() {
    if !gpu_or_skip("driver present, no GPU visible", &["--n", "64"]) {
        return;
    }
    let out = Command::new(host_path())
        .args(["--n", "64", "--reps", "0"])
        .env("CUDA_VISIBLE_DEVICES", "")
        .output()
        .unwrap();
    assert_error_line(&out, NO_GPU);
}

#[test]
fn device_that_does_not_exist() {
    let args = ["--n", "64", "--reps", "0", "--device", "4096"];
    if !gpu_or_skip("--device beyond the GPUs", &args) {
        return;
    }
    assert_error_like(
        &host(&args),
        "error: GPU 4096 does not exist: this machine has ",
        &["choose --device 0.."],
    );
}

/// 3 x 160 GB of matrices: more than any GPU's memory. Fails before
/// anything is allocated on the host or the device.
#[test]
fn too_large_for_device_memory() {
    let args = ["--n", "200000", "--reps", "0"];
    if !gpu_or_skip("buffers larger than free device memory", &args) {
        return;
    }
    let line = assert_error_like(
        &host(&args),
        "error: m=200000 n=200000 k=200000 needs 480.",
        &[
            " GB of GPU memory but only ",
            " GB are free: choose smaller sizes",
        ],
    );
    eprintln!("too_large_for_device_memory: {line}");
}

/// m = 1,048,576 is a valid size, but a 16-row tile needs 65,536 rows of
/// blocks, above CUDA's grid limit: one line, checked before the GPU is touched.
#[test]
fn grid_too_high() {
    let args = [
        "--m", "1048576", "--n", "1", "--k", "1", "--reps", "0", "--kernel", "naive",
    ];
    assert_error_like(
        &host(&args),
        "error: m=1048576 n=1 needs a grid of ",
        &["for kernel naive, above CUDA's limit of 65,535 rows of blocks"],
    );
}

// ---- The CPU emulator: the same on every machine.

/// Held by [`emulate`] for each run.
static EMULATOR: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// `host --emulate` with `args`, and how long it took; killed after
/// two minutes (a refusal takes a second or two, an accepted run at most
/// about one).
fn emulate(args: &[&str]) -> (Output, Duration) {
    // One emulator run at a time: each starts a thread per block thread
    // and takes every core, so that runs of parallel tests slowed each
    // other past `too_slow_to_emulate`'s bounds on CI's two cores.
    let _alone = EMULATOR.lock().unwrap_or_else(|e| e.into_inner());
    let started = Instant::now();
    let out = Command::new(host_path())
        .arg("--emulate")
        .args(args)
        .timeout(Duration::from_secs(120))
        .output()
        .expect("cannot start the host binary");
    (out, started.elapsed())
}

/// `args` with the flags of `choice` ("--k 13000", "--n 96") set to its values.
fn with_flags(args: &[&str], choice: &str) -> Vec<String> {
    let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let choice: Vec<&str> = choice.split_whitespace().collect();
    for pair in choice.chunks(2) {
        let [flag, value] = pair else {
            panic!("not a list of flags and values: {choice:?}")
        };
        match args.iter().position(|a| a == flag) {
            Some(i) => args[i + 1] = value.to_string(),
            None => args.extend([flag.to_string(), value.to_string()]),
        }
    }
    args
}

/// A problem the emulator would take more than a minute on is refused
/// before it runs, in one line that names a size that fits; that size
/// then runs, in seconds, and passes.
#[test]
fn too_slow_to_emulate() {
    // "all": every kernel the emulator runs (the GPU-only ones are skipped).
    let emulated = kernels_gpu::registry::KERNELS
        .iter()
        .filter(|k| k.emulated().is_ok())
        .count();
    let all =
        format!(" on the CPU emulator for {emulated} kernels (the limit is 60 s): choose --n ");
    let cases: [(&[&str], &str, &str); 2] = [
        // Once still running after 10 minutes: one block, 65,536 K tiles.
        (
            &[
                "--m", "1", "--n", "1", "--k", "1048576", "--kernel", "tiled16",
            ],
            "error: m=1 n=1 k=1048576 would take about ",
            " on the CPU emulator for kernel tiled16 (the limit is 60 s): choose --k ",
        ),
        (
            &["--n", "1024"],
            "error: m=1024 n=1024 k=1024 would take about ",
            &all,
        ),
    ];
    for (args, prefix, middle) in cases {
        let (out, refused_in) = emulate(args);
        let line = assert_error_like(&out, prefix, &[middle, " or smaller"]);
        assert!(
            refused_in < Duration::from_secs(20),
            "{args:?}: refused after {refused_in:?}, not up front"
        );
        let choice = line
            .split(": choose ")
            .nth(1)
            .and_then(|rest| rest.strip_suffix(" or smaller"))
            .unwrap_or_else(|| panic!("no size in {line:?}"));
        let smaller = with_flags(args, choice);
        let smaller: Vec<&str> = smaller.iter().map(String::as_str).collect();
        let (out, took) = emulate(&smaller);
        assert_no_panic(&out);
        let stdout = text(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("PASS") && !stdout.contains("FAIL"),
            "the suggested {smaller:?} did not pass:\n{stdout}{}",
            text(&out.stderr)
        );
        eprintln!("{line} (in {refused_in:.1?}); {choice} ran in {took:.1?}");
    }
}

/// m = 1, n = 1,048,576, k = 1 on the naive kernel: 65,536 blocks of 256
/// threads. It once died of SIGSEGV when the emulator created an OS
/// thread per GPU thread per block (16.7 million threads): now it runs to
/// completion or is refused in one line, and never ends by a signal.
#[test]
fn emulating_the_shape_that_crashed() {
    let args = [
        "--m", "1", "--n", "1048576", "--k", "1", "--kernel", "naive",
    ];
    let (out, _) = emulate(&args);
    assert!(
        out.status.code().is_some(),
        "ended by a signal: {:?}",
        out.status
    );
    if out.status.success() {
        assert!(text(&out.stdout).contains("PASS"), "{}", text(&out.stdout));
    } else {
        assert_error_like(
            &out,
            "error: m=1 n=1048576 k=1 would take about ",
            &["for kernel naive (the limit is 60 s): choose --n "],
        );
    }
}

/// The OS refuses the emulator's threads (here: a 4 GiB stack for each in
/// 1.5 GB of address space): one line, no panic, no hang.
///
/// The very first thread is refused, on purpose. With stacks that fit a
/// few times, a thread that was created can still be refused the small
/// signal stack std maps when it starts, and std aborts there, outside
/// this program's code (CI once met exactly that). Refusing a pool that is
/// half spawned is covered by the emulator's unit test
/// `refused_thread_stops_the_threads_already_spawned`.
#[test]
fn emulator_threads_refused() {
    let host = host_path();
    let out = Command::new("sh")
        .arg("-c")
        .arg(r#"ulimit -v 1500000 && exec "$0" --emulate --n 64 --kernel tiled32"#)
        .arg(&host)
        .env("RUST_MIN_STACK", (4u64 << 30).to_string())
        .timeout(Duration::from_secs(60))
        .output()
        .expect("cannot start sh");
    assert_error_like(
        &out,
        "error: the CPU emulator could not start its threads (",
        &["raise this process's limits on threads or memory"],
    );
}

/// The built-in PTX retargeted to sm_100a (Blackwell, arch-specific): no
/// GPU below compute capability 10.0 can load it.
#[test]
fn ptx_for_a_newer_gpu() {
    let ptx = rust_gemm::ptx(&kernels_gpu::modules::LADDER)
        .lines()
        .map(|l| {
            if l.trim_start().starts_with(".target ") {
                ".target sm_100a".to_string()
            } else if l.trim_start().starts_with(".version ") {
                // sm_100a needs PTX ISA 8.6 or later.
                ".version 8.6".to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        ptx.contains(".target sm_100a") && ptx.contains(".version 8.6"),
        "PTX not retargeted"
    );
    let path = write_temp("ptx_for_a_newer_gpu", "sm_100a.ptx", ptx.as_bytes());
    let args = ["--n", "64", "--reps", "0", "--ptx", path.as_str()];
    if !gpu_or_skip("PTX for a newer GPU (sm_100a)", &args) {
        return;
    }
    let out = host(&args);
    if out.status.success() {
        eprintln!("SKIPPED: this GPU is sm_100a and loads the retargeted PTX");
        return;
    }
    assert_error_like(
        &out,
        "error: the driver rejected the kernels' PTX (CUDA_ERROR_",
        &["it targets sm_100a but the GPU is sm_"],
    );
}

#[test]
fn ptx_with_a_syntax_error() {
    let path = write_temp(
        "ptx_with_a_syntax_error",
        "syntax_error.ptx",
        SYNTAX_ERROR_PTX.as_bytes(),
    );
    let args = [
        "--n",
        "64",
        "--reps",
        "0",
        "--kernel",
        "naive",
        "--ptx",
        path.as_str(),
    ];
    if !gpu_or_skip("PTX with a syntax error", &args) {
        return;
    }
    assert_error_like(
        &host(&args),
        "error: the driver rejected the kernels' PTX (CUDA_ERROR_",
        &["its JIT compiler could not compile it"],
    );
}

/// A NUL byte (a binary file passed as PTX) must not reach a C string.
#[test]
fn ptx_with_a_nul_byte() {
    let mut bytes = TRAP_PTX.as_bytes().to_vec();
    bytes.extend_from_slice(b"\n\0\n");
    let path = write_temp("ptx_with_a_nul_byte", "nul.ptx", &bytes);
    let args = [
        "--n",
        "64",
        "--reps",
        "0",
        "--kernel",
        "naive",
        "--ptx",
        path.as_str(),
    ];
    // Checked before the driver is touched: the same on every machine.
    assert_error_line(
        &host(&args),
        "error: the PTX file is not PTX text: it contains a NUL byte",
    );
}

#[test]
fn ptx_with_emulate() {
    assert_usage_error(
        &host(&["--n", "16", "--ptx", "k.ptx", "--emulate"]),
        "error: the argument '--ptx <FILE>' cannot be used with '--emulate'",
    );
}

#[test]
fn ptx_that_is_not_utf8() {
    let bytes: Vec<u8> = (0..100u8).map(|i| i.wrapping_mul(37) | 0x80).collect();
    let path = write_temp("ptx_that_is_not_utf8", "binary.ptx", &bytes);
    // Checked before the driver is touched: the same on every machine.
    assert_error_line(
        &host(&["--n", "64", "--reps", "0", "--ptx", path.as_str()]),
        &format!("error: the PTX file {path} is not PTX text: it is not UTF-8 (a binary?)"),
    );
}

#[test]
fn bad_seed() {
    for (args, value) in [(&["--seed=-1"][..], "-1"), (&["--seed", "x"][..], "x")] {
        assert_usage_error(
            &host(args),
            &format!(
                "error: invalid value '{value}' for '--seed <SEED>': a seed is a whole number \
                 from 0 to 18446744073709551615"
            ),
        );
    }
}

/// `host ... | head -1`: the reader goes away after one line; the host
/// must end quietly (SIGPIPE), not panic on the next `println!`.
#[test]
fn output_into_a_closed_pipe() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let mut child = std::process::Command::new(host_path())
        .args(["--n", "64", "--emulate", "--kernel", "naive,naive"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot start the host binary");
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    // The reader (and the pipe) are gone here.
    let out = child.wait_with_output().unwrap();
    let stderr = text(&out.stderr);
    assert!(first.starts_with("CPU emulation"), "{first}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        // Either SIGPIPE ended it, or it had written everything before the
        // reader left (then it exits 0).
        assert!(
            out.status.signal() == Some(13) || out.status.success(),
            "{:?}: {stderr}",
            out.status
        );
    }
}

/// The PTX loads but lacks the kernel asked for.
#[test]
fn kernel_missing_from_the_ptx() {
    let path = write_temp(
        "kernel_missing_from_the_ptx",
        "trap.ptx",
        TRAP_PTX.as_bytes(),
    );
    let Some(other) = kernels_gpu::registry::KERNELS
        .iter()
        .find(|k| k.name != "naive")
    else {
        eprintln!("SKIPPED: only one kernel is registered");
        return;
    };
    let args = [
        "--n",
        "64",
        "--reps",
        "0",
        "--kernel",
        other.name,
        "--ptx",
        path.as_str(),
    ];
    if !gpu_or_skip("kernel missing from the PTX", &args) {
        return;
    }
    assert_error_like(
        &host(&args),
        &format!(
            "error: CUDA failed while finding kernel {} in the PTX: CUDA_ERROR_NOT_FOUND",
            other.name
        ),
        &[],
    );
}

/// A kernel that traps: the launch fails, the host names the kernel and
/// CUDA's error, and prints no result.
#[test]
fn launch_that_faults() {
    let path = write_temp("launch_that_faults", "trap.ptx", TRAP_PTX.as_bytes());
    let args = [
        "--n",
        "64",
        "--reps",
        "0",
        "--kernel",
        "naive",
        "--ptx",
        path.as_str(),
    ];
    if !gpu_or_skip("launch that fails (trap)", &args) {
        return;
    }
    let out = host(&args);
    assert_error_like(
        &out,
        "error: kernel naive failed at launch: CUDA_ERROR_",
        &[],
    );
    // The header (GPU, problem) may be printed; no verification or time line.
    let stdout = text(&out.stdout);
    assert!(
        !stdout.contains("verify") && !stdout.contains("time "),
        "a faulted kernel reported a result:\n{stdout}"
    );
}

/// The fixtures are what the GPU rows load: check them here too, so a
/// broken fixture shows up on any machine.
#[test]
fn fault_fixtures_are_well_formed() {
    for ptx in [TRAP_PTX, SYNTAX_ERROR_PTX] {
        assert!(ptx.contains(".version 7.0") && ptx.contains(".target sm_70"));
        assert!(ptx.contains(".visible .entry naive("));
        let params = ptx
            .lines()
            .filter(|l| l.trim_start().starts_with(".param "))
            .count();
        assert_eq!(params, 4, "naive takes A, B, C and the GemmParams");
        assert!(
            ptx.contains(".param .align 8 .b8 naive_param_p[64]"),
            "the GemmParams are 64 bytes (kernels_gpu::gemm::GemmParams)"
        );
        assert!(!ptx.contains('\0'));
    }
    assert!(TRAP_PTX.contains("\ttrap;"));
    // The retargeting in ptx_for_a_newer_gpu needs these lines in the built-in PTX.
    assert!(
        rust_gemm::ptx(&kernels_gpu::modules::LADDER)
            .lines()
            .any(|l| l.starts_with(".target "))
    );
    assert!(
        rust_gemm::ptx(&kernels_gpu::modules::LADDER)
            .lines()
            .any(|l| l.starts_with(".version "))
    );
}

/// Row 25: a GPU-only kernel (TMA, `mbarrier`, `wgmma`) asked of the CPU
/// emulator is refused in one line saying why; under "all" it is skipped
/// with a line and the others run.
#[test]
fn gpu_only_kernel_on_the_emulator() {
    let (out, _) = emulate(&["--n", "16", "--kernel", "wgmma_ws_256x128x32_s4"]);
    assert_error_like(
        &out,
        "error: kernel wgmma_ws_256x128x32_s4 cannot run on the CPU emulator (",
        &["no model in the CPU emulator", "run it on a GPU"],
    );
    let (out, _) = emulate(&["--n", "8"]);
    assert_no_panic(&out);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let skipped: Vec<String> = text(&out.stderr).lines().map(str::to_string).collect();
    let gpu_only = kernels_gpu::registry::KERNELS
        .iter()
        .filter(|k| k.emulated().is_err())
        .count();
    assert_eq!(
        skipped.len(),
        gpu_only,
        "one line per GPU-only kernel: {skipped:?}"
    );
    assert!(
        skipped
            .iter()
            .all(|l| l.starts_with("skipping ") && l.contains("on the emulator"))
    );
}

/// Row 26: a TMA kernel at a shape whose rows are not 16-byte multiples
/// runs on padded copies of A and B, saying so in one line; it verifies.
#[test]
fn tma_kernel_at_unaligned_rows_runs_on_padded_copies() {
    let args = [
        "--m",
        "33",
        "--n",
        "30",
        "--k",
        "17",
        "--kernel",
        "wgmma_ws_256x128x32_s4",
        "--reps",
        "0",
    ];
    if !gpu_or_skip("TMA kernel at unaligned rows runs on padded copies", &args) {
        return;
    }
    let out = host(&args);
    assert_no_panic(&out);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stderr),
        "wgmma_ws_256x128x32_s4: TMA needs rows of 16-byte multiples (k and n multiples of 4); \
         each launch first copies A and B into buffers padded to k = 32, n = 32 (zeros), and \
         the times include the copies\n"
    );
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("wgmma_ws_256x128x32_s4") && stdout.contains("PASS"),
        "{stdout}"
    );
}
