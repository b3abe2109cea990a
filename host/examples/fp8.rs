//! From BF16 matrices to an FP8 product in two calls, as an inference
//! program would: `cargo run --release -p host --example fp8`.
//!
//! A (m x k) and B (stored n x k, as a linear layer's weight is) are
//! random BF16 matrices. Each is quantized to FP8 E4M3 on the GPU
//! (`Sgemm::quantize`), per tensor and then with DeepSeek-V3's block
//! scales (A per row per 128 of K, B per 128 x 128), and multiplied in
//! FP8 (`Sgemm::gemm_scaled`) into a BF16 C. Each C is compared with the
//! f64 product of the BF16 inputs (what quantizing costs) and with the
//! f64 product of the quantized values, dequantized on the CPU from what
//! the GPU wrote (what the FP8 kernel itself costs, which must be within
//! the FP8 bound). Hopper only (the FP8 kernels are `wgmma`; the
//! quantizer runs from Ada on). Without a GPU it says so and exits with
//! status 2; a result off its bound exits with status 1. (`cargo xtask
//! sanitize --example` runs it under compute-sanitizer.)

use std::process::ExitCode;

use cudarc::driver::CudaContext;
use float8::F8E4M3;
use half::bf16;
use rust_gemm::blas::{GemmConfig, Op, QuantConfig, Quantize, Scales, Sgemm};

fn main() -> ExitCode {
    match rust_gemm::gpu::device_count() {
        Ok(n) if n > 0 => {}
        Ok(_) | Err(_) => {
            eprintln!("error: no NVIDIA GPU or driver on this machine: this example runs on a GPU");
            return ExitCode::from(2);
        }
    }
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A deterministic pseudo-random matrix in [-2, 2) whose rows differ in
/// magnitude by up to 2^6 (so per-block scales have something to do).
fn matrix(rows: usize, cols: usize, seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 40) as f32 / (1u64 << 24) as f32
    };
    (0..rows * cols)
        .map(|i| {
            let row_scale = 2f32.powi((i / cols % 7) as i32 - 3);
            (next() * 4.0 - 2.0) * row_scale
        })
        .collect()
}

/// `sum_k a[i][k] * b[j][k]` for each (i, j), in f64 (B stored n x k).
fn product(a: &[f64], b: &[f64], (m, n, k): (usize, usize, usize)) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k).map(|kk| a[i * k + kk] * b[j * k + kk]).sum();
        }
    }
    c
}

/// Largest |got - want| over largest |want|.
fn relative_error(got: &[f32], want: &[f64]) -> f64 {
    let scale = want.iter().fold(0.0f64, |s, w| s.max(w.abs()));
    let err = got
        .iter()
        .zip(want)
        .fold(0.0f64, |e, (&g, &w)| e.max((g as f64 - w).abs()));
    err / scale
}

fn run() -> Result<bool, Box<dyn std::error::Error>> {
    let stream = CudaContext::new(0)?.default_stream();
    let sgemm = Sgemm::new(stream.clone())?;
    let (m, n, k) = (512, 384, 1000);
    println!(
        "{}: C (bf16) = A (bf16, {m} x {k}) B^T (bf16, {n} x {k}) through FP8 E4M3",
        sgemm.device().name
    );
    let round = |v: Vec<f32>| -> Vec<bf16> { v.into_iter().map(bf16::from_f32).collect() };
    let (a_host, b_host) = (round(matrix(m, k, 1)), round(matrix(n, k, 2)));
    let wide = |v: &[bf16]| -> Vec<f64> { v.iter().map(|x| x.to_f64()).collect() };
    let exact = product(&wide(&a_host), &wide(&b_host), (m, n, k));
    let a = stream.clone_htod(&a_host)?;
    let b = stream.clone_htod(&b_host)?;
    // A row-major, B stored n x k: C = A B^T, the layout FP8 takes.
    let cfg = GemmConfig::new(m, n, k).op_b(Op::T);
    let mut ok = true;
    for (how_a, how_b) in [
        (Quantize::Tensor, Quantize::Tensor),
        (Quantize::Rows, Quantize::Tiles),
    ] {
        // Call 1: quantize both operands (on the GPU, no host sync).
        let qa_cfg = QuantConfig::new(m, k, how_a);
        let qb_cfg = QuantConfig::new(n, k, how_b);
        let mut qa = stream.alloc_zeros::<F8E4M3>(m * k)?;
        let mut qb = stream.alloc_zeros::<F8E4M3>(n * k)?;
        let mut sa = stream.alloc_zeros::<f32>(how_a.scales(m, k))?;
        let mut sb = stream.alloc_zeros::<f32>(how_b.scales(n, k))?;
        sgemm.quantize(&qa_cfg, &a, &mut qa, &mut sa)?;
        sgemm.quantize(&qb_cfg, &b, &mut qb, &mut sb)?;
        // Call 2: the FP8 product with those scales.
        let scales = if how_a == Quantize::Tensor {
            Scales::tensor(&sa, &sb)
        } else {
            Scales::blocks(&sa, &sb)
        };
        let mut c = stream.alloc_zeros::<bf16>(m * n)?;
        let choice = sgemm.gemm_scaled(&cfg, &qa, &qb, &mut c, &scales)?;
        let c_host: Vec<f32> = stream.clone_dtoh(&c)?.iter().map(|x| x.to_f32()).collect();
        // The quantized values the GPU wrote, dequantized here.
        let dequant = |q: &[F8E4M3], s: &[f32], rows: usize, how: Quantize| -> Vec<f64> {
            let (rs, cs) = how.strides(rows, k);
            let block_rows = if how == Quantize::Tiles { 128 } else { 1 };
            q.iter()
                .enumerate()
                .map(|(i, x)| {
                    let (r, col) = (i / k, i % k);
                    let at = match how {
                        Quantize::Tensor => 0,
                        _ => r / block_rows * rs + col / 128 * cs,
                    };
                    x.to_f64() * s[at] as f64
                })
                .collect()
        };
        let da = dequant(&stream.clone_dtoh(&qa)?, &stream.clone_dtoh(&sa)?, m, how_a);
        let db = dequant(&stream.clone_dtoh(&qb)?, &stream.clone_dtoh(&sb)?, n, how_b);
        let of_quantized = product(&da, &db, (m, n, k));
        let kernel_error = relative_error(&c_host, &of_quantized);
        let total_error = relative_error(&c_host, &exact);
        // FP8 kernels' bound (host/src/reference.rs derives it): f32
        // promotion every 128 of K and C rounded to BF16 dominate here.
        let bound = 2.0f64.powi(-8) + 2.0f64.powi(-13) * (k as f64 / 32.0).ceil();
        let pass = kernel_error <= bound;
        ok &= pass;
        println!(
            "  {:<6} x {:<6} scales, {choice}: error against the FP8 values {kernel_error:.1e} \
             (bound {bound:.1e}) {}; against the BF16 inputs {total_error:.1e}",
            how_a.name(),
            how_b.name(),
            if pass { "PASS" } else { "FAIL" },
        );
    }
    Ok(ok)
}
