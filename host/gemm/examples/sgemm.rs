//! Multiplies matrices on the GPU through the library, as another Rust
//! program would: `cargo run --release -p rust-gemm --example sgemm`.
//!
//! Seven f32 calls on the same handle: a plain product, one with B
//! transposed and alpha/beta, one with A transposed, one with both, a
//! strided batch, a deep one that `Auto` splits along K, and one column
//! over a very long K (step 16, its K split inside one launch); then BF16
//! and FP16 calls (`half::bf16`, `half::f16` buffers) with C in f32 or in
//! the inputs' type, in every layout and as a batch. Each result is
//! compared with a product computed here on the CPU. Without a GPU it
//! says so and exits with status 2. (`cargo xtask sanitize` runs it
//! under compute-sanitizer: it launches the entries `host` does not.)

use std::process::ExitCode;
use std::time::Instant;

use cudarc::driver::CudaContext;
use cudarc::driver::CudaStream;
use half::{bf16, f16};
use rust_gemm::blas::{GemmConfig, GemmElement, Op, Sgemm};
use std::sync::Arc;

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
        // One column over a very long K: step 16's split entry, whose
        // slices and their sum run in one launch.
        ("C = A B, 25 x 1 x 40520", GemmConfig::new(25, 1, 40520)),
    ];
    for (what, cfg) in &calls {
        call::<f32, f32>(&sgemm, &stream, what, cfg, |x| x, |x| x)?;
    }
    // 16-bit A and B: the same inputs, exact in BF16 and FP16 too.
    let (m, n, k) = (1024, 768, 512);
    let big = GemmConfig::new(m, n, k);
    let batch = GemmConfig::new(64, 64, 64).batched(8, 64 * 64, 64 * 64, 64 * 64);
    let calls: [(&str, GemmConfig); 5] = [
        ("C = A B", big.clone()),
        (
            "C = 2 A B^T - C",
            big.clone().op_b(Op::T).scalars(2.0, -1.0),
        ),
        ("C = A^T B", big.clone().op_a(Op::T)),
        ("C = A^T B^T", big.clone().op_a(Op::T).op_b(Op::T)),
        ("8 products of 64 x 64 x 64", batch),
    ];
    for (what, cfg) in &calls {
        call::<bf16, f32>(
            &sgemm,
            &stream,
            &format!("BF16 {what}"),
            cfg,
            bf16::from_f32,
            |x| x,
        )?;
        call::<f16, f32>(
            &sgemm,
            &stream,
            &format!("FP16 {what}"),
            cfg,
            f16::from_f32,
            |x| x,
        )?;
    }
    for (what, cfg) in &calls[..2] {
        call::<bf16, bf16>(
            &sgemm,
            &stream,
            &format!("BF16 {what}, C BF16"),
            cfg,
            bf16::from_f32,
            bf16::from_f32,
        )?;
        call::<f16, f16>(
            &sgemm,
            &stream,
            &format!("FP16 {what}, C FP16"),
            cfg,
            f16::from_f32,
            f16::from_f32,
        )?;
    }
    Ok(())
}

/// One call with A and B of type `T` and C of type `C` (f32 or `T`);
/// `to` and `to_c` convert from f32 (exact for these inputs), and the
/// result is compared with the CPU's. The inputs are multiples of 1/8
/// below 1 and every sum of their products is exact in f32, whatever the
/// order (split-K's included): with C in f32 the GPU must match the CPU
/// exactly; a 16-bit C adds one rounding (8 or 11 bits).
fn call<T: GemmElement, C: GemmElement + Into<f32>>(
    sgemm: &Sgemm,
    stream: &Arc<CudaStream>,
    what: &str,
    cfg: &GemmConfig,
    to: fn(f32) -> T,
    to_c: fn(f32) -> C,
) -> Result<(), Box<dyn std::error::Error>> {
    let len = |rows: usize, ld: usize, stride: usize| (cfg.batch - 1) * stride + rows * ld;
    let a_rows = if cfg.op_a == Op::N { cfg.m } else { cfg.k };
    let b_rows = if cfg.op_b == Op::N { cfg.k } else { cfg.n };
    let a: Vec<f32> = (0..len(a_rows, cfg.lda, cfg.stride_a))
        .map(|i| ((i * 7 % 13) as f32 - 6.0) / 8.0)
        .collect();
    let b: Vec<f32> = (0..len(b_rows, cfg.ldb, cfg.stride_b))
        .map(|i| ((i * 5 % 11) as f32 - 5.0) / 8.0)
        .collect();
    let c: Vec<C> = (0..len(cfg.m, cfg.ldc, cfg.stride_c))
        .map(|i| to_c((i % 3) as f32))
        .collect();
    let a_dev = stream.clone_htod(&a.iter().map(|&x| to(x)).collect::<Vec<T>>())?;
    let b_dev = stream.clone_htod(&b.iter().map(|&x| to(x)).collect::<Vec<T>>())?;
    let mut c_dev = stream.clone_htod(&c)?;
    let choice = sgemm.gemm(cfg, &a_dev, &b_dev, &mut c_dev)?;
    let got: Vec<f32> = stream
        .clone_dtoh(&c_dev)?
        .into_iter()
        .map(Into::into)
        .collect();
    let mut want: Vec<f32> = c.into_iter().map(Into::into).collect();
    cpu(cfg, &a, &b, &mut want);
    // A 16-bit C holds the result rounded to 8 (BF16) or 11 (FP16)
    // significant bits: at most half a unit in its last place, 2^-8 or
    // 2^-11 of it; with C in f32 nothing may differ.
    let rounding = if std::mem::size_of::<C>() == 2 {
        2f64.powi(-8)
    } else {
        0.0
    };
    let mut worst = 0.0f64;
    for (g, w) in got.iter().zip(&want) {
        let diff = (g - w).abs() as f64;
        worst = worst.max(diff);
        if diff > rounding * w.abs() as f64 {
            return Err(format!("{what}: the GPU gives {g} where the CPU gives {w}").into());
        }
    }
    println!("{what:>28}: ran {choice}, largest difference from the CPU {worst:.1e}");
    Ok(())
}
