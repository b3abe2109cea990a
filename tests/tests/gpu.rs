//! GPU tests: every kernel against the reference on square and rectangular
//! shapes, including sizes that are not multiples of any tile, and the JSON
//! output of the `host` binary. Without a GPU they print one loud SKIPPED
//! line (this file has its own `main`, so the line is never captured).

use std::process::{Command, ExitCode};

use half::{bf16, f16};
use kernels_gpu::elem::{Math, Storage};
use kernels_gpu::registry::{KERNELS, TRANSPOSED};
use rust_gemm::blas::{Algorithm, Compute, GemmConfig, GemmElement, Layout, Op, Sgemm};
use rust_gemm::gpu::{self, Gpu};
use rust_gemm::reference::check_gemm;
use rust_gemm::runner::{self, Kernel, TimingOptions};
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
    // Every kernel, those that read A or B transposed on A^T and B^T of
    // the same product (`Buffers::call`).
    let every = || KERNELS.iter().chain(TRANSPOSED);
    for spec in every().filter(|k| !gpu.runs(k)) {
        // Loud on purpose: this kernel is not checked on this GPU.
        eprintln!(
            "*** SKIPPED: {} on this GPU: {} ***",
            spec.name,
            gpu.check_runs(spec).unwrap_err()
        );
    }
    let runnable: Vec<_> = every().filter(|k| gpu.runs(k)).collect();
    let shapes = SQUARE.iter().map(|&n| (n, n, n)).chain(RECTANGLES);
    for (i, (m, n, k)) in shapes.enumerate() {
        let shape = Shape::new(m, n, k).unwrap();
        // Inputs, reference and buffers for each set of stored types.
        let mut storages = Vec::new();
        for spec in &runnable {
            if !storages.contains(&spec.elems.storage()) {
                storages.push(spec.elems.storage());
            }
        }
        for storage in storages {
            let (mut bufs, reference) =
                runner::problem(&gpu, shape, storage, 100 + i as u64, true).expect("buffers");
            for &spec in runnable.iter().filter(|k| k.elems.storage() == storage) {
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
    }

    check(
        "gpu::host_json_output_parses".into(),
        json_output(KERNELS.iter().filter(|k| gpu.runs(k)).count()),
    );
    for (name, result) in library(&gpu) {
        check(format!("gpu::blas::{name}"), result);
    }
    println!("\ngpu: {passed} passed, {failed} failed");
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Deterministic values in ±[0.5, 1.5).
fn values(len: usize, seed: u64) -> Vec<f32> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    (0..len)
        .map(|_| {
            let x: f32 = rng.random_range(0.5..1.5);
            if rng.random() { x } else { -x }
        })
        .collect()
}

/// Floats each buffer needs for `cfg`.
fn lens(cfg: &GemmConfig) -> (usize, usize, usize) {
    cfg.buffer_lens()
}

/// Runs `cfg` through the library on f32 views that start `offset`
/// floats into their buffers (so 0 gives 16-byte aligned operands, 1
/// misaligned ones), C holding NaN where beta is 0, and checks the whole
/// C buffer.
fn library_call(
    sgemm: &Sgemm,
    cfg: &GemmConfig,
    offset: usize,
    seed: u64,
) -> Result<String, String> {
    library_call_typed::<f32, f32>(sgemm, cfg, offset, seed)
}

/// A stored type of the 16-bit calls: how a value converts.
trait Convert: GemmElement {
    fn from(x: f32) -> Self;
    fn to(self) -> f32;
}

impl Convert for f32 {
    fn from(x: f32) -> Self {
        x
    }
    fn to(self) -> f32 {
        self
    }
}

impl Convert for bf16 {
    fn from(x: f32) -> Self {
        bf16::from_f32(x)
    }
    fn to(self) -> f32 {
        self.to_f32()
    }
}

impl Convert for f16 {
    fn from(x: f32) -> Self {
        f16::from_f32(x)
    }
    fn to(self) -> f32 {
        self.to_f32()
    }
}

/// [`library_call`] with A and B of type `T` and C of type `C`, views
/// `offset` elements into their buffers: the reference multiplies the
/// values as stored, with the tolerance of the types and of the math of
/// the kernel that ran.
fn library_call_typed<T: Convert, C: Convert>(
    sgemm: &Sgemm,
    cfg: &GemmConfig,
    offset: usize,
    seed: u64,
) -> Result<String, String> {
    let (la, lb, lc) = lens(cfg);
    let stream = sgemm.stream();
    let stored_t = |v: Vec<f32>| -> (Vec<T>, Vec<f32>) {
        let t: Vec<T> = v.into_iter().map(T::from).collect();
        let f = t.iter().map(|&x| x.to()).collect();
        (t, f)
    };
    let (a_t, a) = stored_t(values(la + offset, seed));
    let (b_t, b) = stored_t(values(lb + offset, seed + 1));
    let c_t: Vec<C> = if cfg.beta == 0.0 {
        vec![C::from(f32::NAN); lc + offset]
    } else {
        values(lc + offset, seed + 2)
            .into_iter()
            .map(C::from)
            .collect()
    };
    let c0: Vec<f32> = c_t.iter().map(|&x| x.to()).collect();
    let e = |e: cudarc::driver::DriverError| e.to_string();
    let a_dev = stream.clone_htod(&a_t).map_err(e)?;
    let b_dev = stream.clone_htod(&b_t).map_err(e)?;
    let mut c_dev = stream.clone_htod(&c_t).map_err(e)?;
    let choice = {
        let a_view = a_dev.slice(offset..);
        let b_view = b_dev.slice(offset..);
        let mut c_view = c_dev.slice_mut(offset..);
        sgemm
            .gemm(cfg, &a_view, &b_view, &mut c_view)
            .map_err(|e| e.to_string())?
    };
    let after: Vec<f32> = stream
        .clone_dtoh(&c_dev)
        .map_err(e)?
        .into_iter()
        .map(C::to)
        .collect();
    if choice.kernel.elems.storage() != Storage::new(T::ELEM, T::ELEM, C::ELEM) && cfg.alpha != 0.0
    {
        return Err(format!("{choice} does not store the call's types"));
    }
    let v = check_gemm(
        cfg,
        (&a[offset..], &b[offset..]),
        (&c0[offset..], &after[offset..]),
        kernels_gpu::elem::Elems::new(T::ELEM, T::ELEM, C::ELEM, choice.kernel.elems.math),
        usize::MAX,
        seed,
    );
    if !v.passed {
        return Err(format!(
            "{choice}: max error {:e}, {} non-finite, worst {:?}",
            v.max_error, v.nonfinite, v.worst
        ));
    }
    if after[..offset]
        .iter()
        .zip(&c0[..offset])
        .any(|(x, y)| x.to_bits() != y.to_bits())
    {
        return Err(format!("{choice} wrote before C's view"));
    }
    Ok(choice.to_string())
}

/// The 16-bit calls on the GPU for A and B of type `T`, C of type `C`:
/// every op x layout x scalar pair (aligned, padded and batched, and on
/// misaligned views), large aligned and unaligned products (the `wgmma`
/// kernels and their padded copies on Hopper), and every candidate of
/// the types by name.
fn library_16<T: Convert, C: Convert>(sgemm: &Sgemm, out: &mut Vec<(String, Result<(), String>)>) {
    let ok = |r: Result<String, String>| r.map(|_| ());
    let types = format!("{}_{}", T::ELEM.name(), C::ELEM.name());
    let mut seed = 5000;
    for (m, n, k) in [(67, 45, 131), (256, 256, 256)] {
        for layout in [Layout::RowMajor, Layout::ColMajor] {
            for op_a in [Op::N, Op::T] {
                for op_b in [Op::N, Op::T] {
                    for (alpha, beta) in [(1.0, 0.0), (0.5, -2.0), (0.0, 0.5)] {
                        let cfg = GemmConfig::new(m, n, k)
                            .layout(layout)
                            .op_a(op_a)
                            .op_b(op_b)
                            .scalars(alpha, beta);
                        let name = format!(
                            "{types}_{layout:?}_{op_a:?}{op_b:?}_a{alpha}_b{beta}_{m}x{n}x{k}"
                        );
                        seed += 3;
                        out.push((
                            name.clone(),
                            ok(library_call_typed::<T, C>(sgemm, &cfg, 0, seed)),
                        ));
                        let padded = cfg.clone().lds(cfg.lda + 8, cfg.ldb + 3, cfg.ldc + 5);
                        let (la, lb, lc) = lens(&padded);
                        let batch = padded.batched(3, la + 8, lb, lc + 1);
                        out.push((
                            format!("{name}_ld_batch3"),
                            ok(library_call_typed::<T, C>(sgemm, &batch, 0, seed)),
                        ));
                        out.push((
                            format!("{name}_misaligned"),
                            ok(library_call_typed::<T, C>(sgemm, &cfg, 1, seed)),
                        ));
                    }
                }
            }
        }
    }
    for (m, n, k) in [(1024, 1024, 1024), (1031, 517, 263)] {
        let cfg = GemmConfig::new(m, n, k).scalars(1.0, 1.0);
        seed += 3;
        out.push((
            format!("{types}_auto_{m}x{n}x{k}"),
            ok(library_call_typed::<T, C>(sgemm, &cfg, 0, seed)),
        ));
    }
    let storage = Storage::new(T::ELEM, T::ELEM, C::ELEM);
    let named: Vec<_> = kernels_gpu::registry::all()
        .filter(|k| matches!(k.step, 19..=21) && k.elems.storage() == storage)
        .collect();
    for spec in named {
        let cfg = GemmConfig::new(300, 200, 320)
            .op_a(spec.ops.a)
            .op_b(spec.ops.b)
            .scalars(1.0, 1.0)
            .algorithm(Algorithm::Kernel {
                name: spec.name.into(),
                split_k: 1,
            });
        seed += 3;
        let result = library_call_typed::<T, C>(sgemm, &cfg, 0, seed);
        // A kernel this GPU cannot run (the Hopper steps elsewhere) is
        // refused, and skipped here with a line saying so.
        let result = match result {
            Err(e) if e.contains("needs compute capability") => {
                eprintln!("*** SKIPPED: {} on this GPU: {e} ***", spec.name);
                Ok(String::new())
            }
            r => r,
        };
        out.push((format!("{types}_{}", spec.name), ok(result)));
    }
}

/// The library on the GPU: every op x layout x scalar pair, padded
/// leading dimensions and strided batches, misaligned views, every
/// candidate kernel by name, split-K, and the errors only a GPU can give.
fn library(gpu: &Gpu) -> Vec<(String, Result<(), String>)> {
    let mut out = Vec::new();
    let sgemm = match Sgemm::new(gpu.stream.clone()) {
        Ok(s) => s,
        Err(e) => return vec![("handle".into(), Err(e.to_string()))],
    };
    let ok = |r: Result<String, String>| r.map(|_| ());
    let mut seed = 1000;
    for (m, n, k) in [(67, 45, 131), (256, 256, 256)] {
        for layout in [Layout::RowMajor, Layout::ColMajor] {
            for op_a in [Op::N, Op::T] {
                for op_b in [Op::N, Op::T] {
                    for (alpha, beta) in [(1.0, 0.0), (0.5, -2.0), (0.0, 0.5), (0.0, 0.0)] {
                        let cfg = GemmConfig::new(m, n, k)
                            .layout(layout)
                            .op_a(op_a)
                            .op_b(op_b)
                            .scalars(alpha, beta);
                        let name =
                            format!("{layout:?}_{op_a:?}{op_b:?}_a{alpha}_b{beta}_{m}x{n}x{k}");
                        seed += 3;
                        out.push((name.clone(), ok(library_call(&sgemm, &cfg, 0, seed))));
                        // Padded leading dimensions and a strided batch.
                        let padded = cfg.clone().lds(cfg.lda + 3, cfg.ldb + 4, cfg.ldc + 5);
                        let (la, lb, lc) = lens(&padded);
                        let batch = padded.batched(3, la + 7, lb, lc + 1);
                        out.push((
                            format!("{name}_ld_batch3"),
                            ok(library_call(&sgemm, &batch, 0, seed)),
                        ));
                        // Views that start one float in: no 16-byte alignment.
                        out.push((
                            format!("{name}_misaligned"),
                            ok(library_call(&sgemm, &cfg, 1, seed)),
                        ));
                    }
                }
            }
        }
    }
    // Every candidate by name, unsplit and split in 5.
    for cand in sgemm.candidates() {
        let ops = cand.spec.ops;
        let cfg = GemmConfig::new(300, 200, 700)
            .op_a(ops.a)
            .op_b(ops.b)
            .scalars(1.0, 1.0);
        for split in [1, 5] {
            let named = cfg.clone().algorithm(Algorithm::Kernel {
                name: cand.spec.name.into(),
                split_k: split,
            });
            seed += 3;
            out.push((
                format!("{}_split{split}", cand.spec.name),
                ok(library_call(&sgemm, &named, 0, seed)),
            ));
        }
    }
    // Auto splits K on a small C over a long K.
    let deep = GemmConfig::new(256, 256, 8192);
    out.push((
        "auto_splits_256x256x8192".into(),
        library_call(&sgemm, &deep, 0, 7).and_then(|c| {
            if c.contains("split-K") {
                Ok(())
            } else {
                Err(format!("Auto chose {c}"))
            }
        }),
    ));
    // Compute modes: with 3xTF32 allowed, a large product runs on step
    // 24 and meets FP32's tolerance (its check uses the tolerance of the
    // kernel's math: FP32's for 3xTF32), at an odd shape too; allowed
    // TF32, the TF32 kernels; by default, FP32 kernels alone.
    for (m, n, k) in [(2048, 2048, 2048), (1537, 1029, 1283)] {
        for (compute, math) in [
            (Compute::Fp32, Math::Fp32),
            (Compute::Tf32x3, Math::Tf32x3),
            (Compute::Tf32, Math::Tf32),
        ] {
            let cfg = GemmConfig::new(m, n, k).compute(compute).scalars(1.5, 0.5);
            seed += 3;
            let ran = library_call(&sgemm, &cfg, 0, seed).and_then(|choice| {
                let chosen = sgemm.choose(&cfg, lens(&cfg)).map_err(|e| e.to_string())?;
                if chosen.kernel.elems.math == math {
                    Ok(())
                } else {
                    Err(format!(
                        "Auto ran {choice} ({})",
                        chosen.kernel.elems.math.name()
                    ))
                }
            });
            out.push((format!("compute_{compute:?}_{m}x{n}x{k}"), ran));
        }
    }
    // 16-bit A and B, C in f32 or their type.
    library_16::<bf16, f32>(&sgemm, &mut out);
    library_16::<bf16, bf16>(&sgemm, &mut out);
    library_16::<f16, f32>(&sgemm, &mut out);
    library_16::<f16, f16>(&sgemm, &mut out);
    // A mix no kernel multiplies.
    {
        let a = gpu.stream.alloc_zeros::<bf16>(64 * 64).unwrap();
        let b = gpu.stream.alloc_zeros::<f16>(64 * 64).unwrap();
        let mut c = gpu.stream.alloc_zeros::<f32>(64 * 64).unwrap();
        let want = "no kernel multiplies bf16 x f16 -> f32";
        out.push((
            "error_mixed_types".into(),
            match sgemm.gemm(&GemmConfig::new(64, 64, 64), &a, &b, &mut c) {
                Ok(choice) => Err(format!("{choice} ran")),
                Err(e) if e.to_string().contains(want) => Ok(()),
                Err(e) => Err(format!("'{e}' does not say '{want}'")),
            },
        ));
    }
    // Errors.
    let a = gpu.stream.alloc_zeros::<f32>(64 * 64).unwrap();
    let mut c = gpu.stream.alloc_zeros::<f32>(64 * 64).unwrap();
    let expect_err =
        |cfg: GemmConfig, c: &mut cudarc::driver::CudaSlice<f32>, want: &str| match sgemm
            .gemm(&cfg, &a, &a, c)
        {
            Ok(choice) => Err(format!(
                "{choice} ran, but the call should fail with '{want}'"
            )),
            Err(e) if e.to_string().contains(want) => Ok(()),
            Err(e) => Err(format!("'{e}' does not say '{want}'")),
        };
    let named = |name: &str, split_k| Algorithm::Kernel {
        name: name.into(),
        split_k,
    };
    out.push((
        "error_unknown_kernel".into(),
        expect_err(
            GemmConfig::new(64, 64, 64).algorithm(named("nope", 1)),
            &mut c,
            "no kernel is called nope",
        ),
    ));
    out.push((
        "error_wrong_layout".into(),
        expect_err(
            GemmConfig::new(64, 64, 64)
                .op_a(Op::T)
                .algorithm(named("tuned_128x128x16_w32x64", 1)),
            &mut c,
            "cannot compute this call: it reads A N",
        ),
    ));
    out.push((
        "error_split_of_a_batch".into(),
        expect_err(
            GemmConfig::new(32, 32, 32)
                .batched(2, 0, 0, 1024)
                .algorithm(named("naive", 2)),
            &mut c,
            "split-K takes one product per call",
        ),
    ));
    out.push((
        "error_buffer_too_small".into(),
        // C's rows 65 apart: 63 * 65 + 64 = 4159 floats.
        expect_err(
            GemmConfig::new(64, 64, 64).lds(64, 64, 65),
            &mut c,
            "c holds 4096 elements",
        ),
    ));
    out
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
