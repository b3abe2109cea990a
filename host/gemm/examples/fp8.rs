//! From BF16 matrices to an FP8 product in two calls, as an inference
//! program would: `cargo run --release -p rust-gemm --example fp8`.
//!
//! A (m x k) and B (stored n x k, as a linear layer's weight is) are
//! random BF16 matrices. Each is quantized to FP8 E4M3 on the GPU
//! (`Sgemm::quantize`), per tensor and then with DeepSeek-V3's block
//! scales (A per row per 128 of K, B per 128 x 128), and multiplied in
//! FP8 (`Sgemm::gemm_scaled`) into a BF16 C. Each C is compared with the
//! f64 product of the BF16 inputs (what quantizing costs) and with the
//! f64 product of the quantized values, dequantized on the CPU from what
//! the GPU wrote (what the FP8 kernel itself costs, which must be within
//! the FP8 bound): every element of C at small sizes, 4096 of them drawn
//! at random at large ones. Then it times each call with CUDA events
//! (median of 20 after 3 warm-ups): the quantizations in GB/s next to the
//! GPU's DRAM peak, the product in TFLOP/s. `fp8 M N K` sets the shape
//! (default 512 384 1000). Hopper only (the FP8 kernels are `wgmma`; the
//! quantizer runs from Ada on; on another GPU it prints a SKIPPED line and
//! exits with status 0). Without a GPU it says so and exits with status
//! 2; a result off its bound, or bad arguments, exit with status 1.
//! (`cargo xtask sanitize --example-bin` runs it under compute-sanitizer.)

use std::process::ExitCode;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaContext, CudaStream};
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
    let args: Vec<String> = std::env::args().skip(1).collect();
    let shape = match args.as_slice() {
        [] => Ok((512, 384, 1000)),
        [m, n, k] => match (m.parse(), n.parse(), k.parse()) {
            (Ok(m), Ok(n), Ok(k)) if m > 0 && n > 0 && k > 0 => Ok((m, n, k)),
            _ => Err(format!(
                "M N K must be whole numbers from 1 up, got {m} {n} {k}"
            )),
        },
        _ => Err(format!(
            "expected no arguments or M N K, got {}",
            args.join(" ")
        )),
    };
    let shape = match shape {
        Ok(shape) => shape,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    match run(shape) {
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

/// The elements of C that are checked: all of them up to 2^18, else
/// 4096 drawn at random (the same on every run).
fn checked(m: usize, n: usize) -> Vec<usize> {
    if m * n <= 1 << 18 {
        return (0..m * n).collect();
    }
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    (0..4096)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % (m * n) as u64) as usize
        })
        .collect()
}

/// `sum_k a[i][k] * b[j][k]` in f64 (B stored n x k) at each checked
/// element `i * n + j` of C.
fn product(a: &[f64], b: &[f64], (n, k): (usize, usize), at: &[usize]) -> Vec<f64> {
    at.iter()
        .map(|&e| {
            let (i, j) = (e / n, e % n);
            (0..k).map(|kk| a[i * k + kk] * b[j * k + kk]).sum()
        })
        .collect()
}

/// Largest |got - want| over largest |want|, at the checked elements.
fn relative_error(got: &[f32], want: &[f64], at: &[usize]) -> f64 {
    let scale = want.iter().fold(0.0f64, |s, w| s.max(w.abs()));
    let err = at
        .iter()
        .zip(want)
        .fold(0.0f64, |e, (&i, &w)| e.max((got[i] as f64 - w).abs()));
    err / scale
}

/// Median milliseconds of `f` enqueued on `stream`, timed with CUDA
/// events: 3 warm-ups, then 20 timed calls, each between two events.
fn time(
    stream: &CudaStream,
    mut f: impl FnMut() -> Result<(), Box<dyn std::error::Error>>,
) -> Result<f64, Box<dyn std::error::Error>> {
    for _ in 0..3 {
        f()?;
    }
    let mut samples = Vec::new();
    for _ in 0..20 {
        let start = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
        f()?;
        let end = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
        end.synchronize()?;
        samples.push(start.elapsed_ms(&end)? as f64);
    }
    samples.sort_by(f64::total_cmp);
    Ok((samples[9] + samples[10]) / 2.0)
}

fn run((m, n, k): (usize, usize, usize)) -> Result<bool, Box<dyn std::error::Error>> {
    let stream = CudaContext::new(0)?.default_stream();
    let sgemm = Sgemm::new(stream.clone())?;
    if sgemm.device().compute_capability != (9, 0) {
        // Loud, but not a failure: this GPU has no FP8 product here.
        eprintln!(
            "*** SKIPPED: {} (compute capability {:?}) has no FP8 kernel here: they need \
             Hopper, exactly 9.0 ***",
            sgemm.device().name,
            sgemm.device().compute_capability
        );
        return Ok(true);
    }
    println!(
        "{}: C (bf16) = A (bf16, {m} x {k}) B^T (bf16, {n} x {k}) through FP8 E4M3",
        sgemm.device().name
    );
    let round = |v: Vec<f32>| -> Vec<bf16> { v.into_iter().map(bf16::from_f32).collect() };
    let (a_host, b_host) = (round(matrix(m, k, 1)), round(matrix(n, k, 2)));
    let wide = |v: &[bf16]| -> Vec<f64> { v.iter().map(|x| x.to_f64()).collect() };
    let at = checked(m, n);
    let exact = product(&wide(&a_host), &wide(&b_host), (n, k), &at);
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
        let of_quantized = product(&da, &db, (n, k), &at);
        let kernel_error = relative_error(&c_host, &of_quantized, &at);
        let total_error = relative_error(&c_host, &exact, &at);
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
        // Timed: each call alone, as a program would make it.
        let qa_ms = time(&stream, || {
            Ok(sgemm.quantize(&qa_cfg, &a, &mut qa, &mut sa)?)
        })?;
        let qb_ms = time(&stream, || {
            Ok(sgemm.quantize(&qb_cfg, &b, &mut qb, &mut sb)?)
        })?;
        let scales = if how_a == Quantize::Tensor {
            Scales::tensor(&sa, &sb)
        } else {
            Scales::blocks(&sa, &sb)
        };
        let mm_ms = time(&stream, || {
            sgemm.gemm_scaled(&cfg, &qa, &qb, &mut c, &scales)?;
            Ok(())
        })?;
        // A quantization reads 2 bytes and writes 1 per value (the
        // scales are small).
        let gbs = |rows: usize, ms: f64| 3.0 * (rows * k) as f64 / (ms * 1e-3) / 1e9;
        let peak = sgemm.device().peak_dram_gbs().unwrap_or(f64::NAN);
        println!(
            "         quantize A {qa_ms:.4} ms ({:.0} GB/s), B {qb_ms:.4} ms ({:.0} GB/s) of the \
             DRAM peak {peak:.0} GB/s; product {mm_ms:.4} ms ({:.1} TFLOP/s)",
            gbs(m, qa_ms),
            gbs(n, qb_ms),
            2.0 * (m * n * k) as f64 / (mm_ms * 1e-3) / 1e12,
        );
    }
    Ok(ok)
}
