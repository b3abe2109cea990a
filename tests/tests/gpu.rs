//! GPU tests: every kernel against the reference on square and rectangular
//! shapes, including sizes that are not multiples of any tile, and the JSON
//! output of the `host` binary. Without a GPU they print one loud SKIPPED
//! line (this file has its own `main`, so the line is never captured).

use std::process::{Command, ExitCode};

use kernels_gpu::registry::KERNELS;
use rust_gemm::gpu::{self, Gpu};
use rust_gemm::reference::Reference;
use rust_gemm::runner::{self, Buffers, Kernel, TimingOptions};
use rust_gemm::shape::Shape;

const SQUARE: [usize; 7] = [1, 15, 16, 17, 100, 257, 1000];
const RECTANGLES: [(usize, usize, usize); 9] = [
    (17, 33, 15),
    (1000, 1, 257),
    (1, 1000, 100),
    (100, 257, 1000),
    (129, 65, 33),
    // Odd m with n and k multiples of 4: shapes the TMA kernels take as
    // they are, with edges in every direction (the odd k and n above they
    // take through padded copies of A and B).
    (1, 4, 4),
    (37, 52, 28),
    (257, 260, 36),
    (1000, 1000, 4),
];

fn main() -> ExitCode {
    match gpu::device_count() {
        Ok(n) if n > 0 => {}
        Ok(_) | Err(_) => {
            eprintln!(
                "\n*** SKIPPED: GPU tests (tests/tests/gpu.rs): no NVIDIA GPU or driver on this machine. \
                 Kernels were NOT checked on a GPU. ***\n"
            );
            return ExitCode::SUCCESS;
        }
    }
    let (mut passed, mut failed) = (0, 0);
    let mut check = |name: String, result: Result<(), String>| match result {
        Ok(()) => {
            println!("test {name} ... ok");
            passed += 1;
        }
        Err(e) => {
            println!("test {name} ... FAILED: {e}");
            failed += 1;
        }
    };

    let gpu = Gpu::open(0).expect("open GPU 0");
    for spec in KERNELS.iter().filter(|k| !gpu.runs(k)) {
        // Loud on purpose: this kernel is not checked on this GPU.
        eprintln!(
            "*** SKIPPED: {} on this GPU: {} ***",
            spec.name,
            gpu.check_runs(spec).unwrap_err()
        );
    }
    let runnable: Vec<_> = KERNELS.iter().filter(|k| gpu.runs(k)).collect();
    let shapes = SQUARE.iter().map(|&n| (n, n, n)).chain(RECTANGLES);
    for (i, (m, n, k)) in shapes.enumerate() {
        let shape = Shape::new(m, n, k).unwrap();
        let (a, b) = rust_gemm::inputs::random_inputs(&shape, 100 + i as u64).unwrap();
        let reference = Reference::new(shape, &a, &b, 0);
        let mut bufs = Buffers::new(&gpu, shape, &a, &b).expect("buffers");
        for &spec in &runnable {
            let result = Kernel::load(&gpu, spec)
                .and_then(|kernel| {
                    let opts = TimingOptions {
                        warmup: 0,
                        reps: 0,
                        flush_l2: false,
                        budget_ms: None,
                    };
                    runner::measure(&gpu, &mut bufs, &reference, &kernel, opts)
                })
                .map_err(|e| e.to_string())
                .and_then(|m| {
                    let v = m.verification;
                    if v.passed {
                        Ok(())
                    } else {
                        Err(format!(
                            "max error {:e}, {} non-finite, worst {:?}",
                            v.max_error, v.nonfinite, v.worst
                        ))
                    }
                });
            check(format!("gpu::{}::m{m}_n{n}_k{k}", spec.name), result);
        }
    }

    check(
        "gpu::host_json_output_parses".into(),
        json_output(runnable.len()),
    );
    println!("\ngpu: {passed} passed, {failed} failed");
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `host --json` prints one object with a verified, timed entry per kernel
/// this GPU runs (`expected` of them).
fn json_output(expected: usize) -> Result<(), String> {
    // HOST_BIN: a copied `host` binary, when this test binary runs on a
    // machine other than the one it was built on.
    let host =
        std::env::var_os("HOST_BIN").unwrap_or_else(|| env!("CARGO_BIN_FILE_HOST_host").into());
    let out = Command::new(host)
        .args([
            "--m", "300", "--n", "200", "--k", "100", "--reps", "3", "--warmup", "1", "--json",
        ])
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?;
    let kernels = v["kernels"].as_array().ok_or("no kernels array")?;
    if kernels.len() != expected {
        return Err(format!(
            "{} kernels in JSON, {expected} in the registry that this GPU runs",
            kernels.len()
        ));
    }
    for k in kernels {
        let ok = k["verification"]["passed"].as_bool() == Some(true)
            && k["timing"]["median_ms"].as_f64().is_some_and(|t| t > 0.0)
            && k["gflops"].as_f64().is_some_and(|g| g > 0.0);
        if !ok {
            return Err(format!("bad kernel entry: {k}"));
        }
    }
    if v["shape"]["m"] != 300 || v["gpu"]["name"].as_str().is_none_or(str::is_empty) {
        return Err(format!("bad header: {}", v["shape"]));
    }
    Ok(())
}
