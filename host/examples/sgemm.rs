//! Multiplies matrices on the GPU through the library, as another Rust
//! program would: `cargo run --release -p host --example sgemm`.
//!
//! Six calls on the same handle: a plain product, one with B transposed
//! and alpha/beta, one with A transposed, one with both, a strided batch,
//! and a deep one that `Auto` splits along K; each result is compared
//! with a product computed here on the CPU. Without a GPU it says so and
//! exits with status 2. (`cargo xtask sanitize` runs it under
//! compute-sanitizer: it launches the entries `host` does not.)

use std::process::ExitCode;
use std::time::Instant;

use cudarc::driver::CudaContext;
use rust_gemm::blas::{GemmConfig, Op, Sgemm};

fn main() -> ExitCode {
    match rust_gemm::gpu::device_count() {
        Ok(n) if n > 0 => {}
        Ok(_) | Err(_) => {
            eprintln!(
                "error: no NVIDIA GPU or driver on this machine: this example runs on a GPU \
                 (the kernels' CPU emulator: `cargo run -p host -- --n 64 --emulate`)"
            );
            return ExitCode::from(2);
        }
    }
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `C = alpha * op(A) * op(B) + beta * C`, row-major, on the CPU in f64.
fn cpu(cfg: &GemmConfig, a: &[f32], b: &[f32], c: &mut [f32]) {
    for z in 0..cfg.batch {
        for i in 0..cfg.m {
            for j in 0..cfg.n {
                let mut dot = 0.0f64;
                for k in 0..cfg.k {
                    let x = match cfg.op_a {
                        Op::N => a[z * cfg.stride_a + i * cfg.lda + k],
                        Op::T => a[z * cfg.stride_a + k * cfg.lda + i],
                    };
                    let y = match cfg.op_b {
                        Op::N => b[z * cfg.stride_b + k * cfg.ldb + j],
                        Op::T => b[z * cfg.stride_b + j * cfg.ldb + k],
                    };
                    dot += x as f64 * y as f64;
                }
                let c = &mut c[z * cfg.stride_c + i * cfg.ldc + j];
                let old = if cfg.beta == 0.0 {
                    0.0
                } else {
                    cfg.beta as f64 * *c as f64
                };
                *c = (cfg.alpha as f64 * dot + old) as f32;
            }
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let stream = CudaContext::new(0)?.default_stream();
    let started = Instant::now();
    let sgemm = Sgemm::new(stream.clone())?;
    println!(
        "{}: library ready in {:.2} s (the driver compiles the kernels' PTX once)",
        sgemm.device().name,
        started.elapsed().as_secs_f64()
    );
    let (m, n, k) = (500, 300, 200);
    let calls = [
        ("C = A B", GemmConfig::new(m, n, k)),
        (
            "C = 2 A B^T - C",
            GemmConfig::new(m, n, k).op_b(Op::T).scalars(2.0, -1.0),
        ),
        ("C = A^T B", GemmConfig::new(m, n, k).op_a(Op::T)),
        (
            "C = A^T B^T",
            GemmConfig::new(m, n, k).op_a(Op::T).op_b(Op::T),
        ),
        (
            "8 products of 64 x 64 x 64",
            GemmConfig::new(64, 64, 64).batched(8, 64 * 64, 64 * 64, 64 * 64),
        ),
        // A small C over a long K: Auto splits K.
        ("C = A B, 128 x 128 x 4096", GemmConfig::new(128, 128, 4096)),
    ];
    for (what, cfg) in calls {
        let len = |rows: usize, ld: usize, stride: usize| (cfg.batch - 1) * stride + rows * ld;
        let a_rows = if cfg.op_a == Op::N { cfg.m } else { cfg.k };
        let b_rows = if cfg.op_b == Op::N { cfg.k } else { cfg.n };
        let a: Vec<f32> = (0..len(a_rows, cfg.lda, cfg.stride_a))
            .map(|i| ((i * 7 % 13) as f32 - 6.0) / 8.0)
            .collect();
        let b: Vec<f32> = (0..len(b_rows, cfg.ldb, cfg.stride_b))
            .map(|i| ((i * 5 % 11) as f32 - 5.0) / 8.0)
            .collect();
        let mut want: Vec<f32> = (0..len(cfg.m, cfg.ldc, cfg.stride_c))
            .map(|i| (i % 3) as f32)
            .collect();
        let (a_dev, b_dev) = (stream.clone_htod(&a)?, stream.clone_htod(&b)?);
        let mut c_dev = stream.clone_htod(&want)?;
        // Asynchronous: the call returns once the work is enqueued.
        let choice = sgemm.gemm(&cfg, &a_dev, &b_dev, &mut c_dev)?;
        let got = stream.clone_dtoh(&c_dev)?;
        cpu(&cfg, &a, &b, &mut want);
        let worst = got
            .iter()
            .zip(&want)
            .map(|(g, w)| (g - w).abs() as f64)
            .fold(0.0, f64::max);
        println!("{what:>28}: ran {choice}, largest difference from the CPU {worst:.1e}");
        if worst > 1e-3 {
            return Err(format!("{what}: the GPU result differs from the CPU's by {worst}").into());
        }
    }
    Ok(())
}
