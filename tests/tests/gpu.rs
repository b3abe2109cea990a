//! GPU tests: every kernel against the reference on square and rectangular
//! shapes, including sizes that are not multiples of any tile, and the JSON
//! output of the `host` binary. Without a GPU they print one loud SKIPPED
//! line (this file has its own `main`, so the line is never captured).

use std::process::{Command, ExitCode};

use half::{bf16, f16};
use harness::reference::check_gemm_fused;
use harness::runner::{self, TimingOptions};
use harness::shape::Shape;
use kernels_gpu::elem::{Math, Storage};
use kernels_gpu::registry::{KERNELS, TRANSPOSED};
use rust_gemm::blas::{
    Activation, Algorithm, Compute, EmuEpilogue, Epilogue, GemmConfig, GemmElement, Layout, Op,
    Per, Quantize, Sgemm,
};
use rust_gemm::gpu::{self, Gpu};
use rust_gemm::launch::Kernel;

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
    // GPU_TESTS=library runs the library's tests alone (GPU_TESTS=streams
    // its streams-and-graphs tests alone, GPU_TESTS=multi its multi-device
    // tests alone), GPU_TESTS=kernels=PAT
    // the kernels whose names contain PAT and then the library's (a run
    // after a change to those kernels); either says what it skipped.
    // GPU_TESTS=kernels-only=PAT: those kernels alone, without the
    // library's tests.
    let selected = std::env::var("GPU_TESTS").unwrap_or_default();
    let kernels_only = selected.strip_prefix("kernels-only=");
    let pattern = selected.strip_prefix("kernels=").or(kernels_only);
    let library_only = ["library", "streams", "multi"].contains(&selected.as_str());
    if library_only || pattern.is_some() {
        eprintln!(
            "*** SKIPPED: kernels not selected by GPU_TESTS={selected} (every kernel at every shape otherwise) ***"
        );
    }
    let runnable: Vec<_> = every()
        .filter(|k| gpu.runs(k) && !library_only && pattern.is_none_or(|p| k.name.contains(p)))
        .collect();
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
    // GPU_TESTS=streams: the library's streams-and-graphs tests alone;
    // GPU_TESTS=multi: its multi-device tests alone.
    if kernels_only.is_some() {
        eprintln!("*** SKIPPED: the library's tests (GPU_TESTS={selected}) ***");
    } else {
        let (library, streams) = match selected.as_str() {
            "streams" => (Named::new(), true),
            "multi" => (Named::new(), false),
            _ => (library(&gpu), true),
        };
        if selected == "streams" || selected == "multi" {
            // Loud on purpose: these library tests did not run.
            eprintln!(
                "*** SKIPPED: the library's single-GPU call tests (GPU_TESTS={selected}) ***"
            );
        }
        if !streams {
            eprintln!(
                "*** SKIPPED: the library's streams-and-graphs tests (GPU_TESTS={selected}) ***"
            );
        }
        let streams = if streams {
            library_streams()
                .into_iter()
                .chain(library_graph())
                .collect()
        } else {
            Named::new()
        };
        let all = library.into_iter().chain(streams);
        let multi = library_multi().into_iter().chain(library_multi_nccl());
        for (name, result) in all.chain(multi).chain(library_multi_gpus()) {
            check(format!("gpu::blas::{name}"), result);
        }
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

/// A verified library call whose choice (`Auto`'s) names each of `want`
/// (`"wgmma"`, `"split-K"`, ...).
fn auto_chose(call: Result<String, String>, want: &[&str]) -> Result<(), String> {
    let choice = call?;
    if want.iter().all(|w| choice.contains(w)) {
        Ok(())
    } else {
        Err(format!("Auto chose {choice}, not one with {want:?}"))
    }
}

/// A stored type of the 16-bit calls: how a value converts.
trait Convert: GemmElement + cudarc::driver::ValidAsZeroBits {
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
    library_call_fused::<T, C>(sgemm, cfg, offset, seed, None)
}

/// [`library_call_typed`] through `Sgemm::gemm_fused` with `epilogue`'s
/// vectors on the GPU (`None`: `Sgemm::gemm`).
fn library_call_fused<T: Convert, C: Convert>(
    sgemm: &Sgemm,
    cfg: &GemmConfig,
    offset: usize,
    seed: u64,
    epilogue: Option<EmuEpilogue>,
) -> Result<String, String> {
    let mut call = Resident::<T, C>::new(sgemm.stream(), cfg, offset, seed)?;
    if let Some(ep) = epilogue {
        call.fuse(sgemm.stream(), ep)?;
    }
    let choice = call.run(sgemm).map_err(|e| e.to_string())?;
    call.check(sgemm.stream(), choice)?;
    Ok(choice.to_string())
}

/// The epilogue number `i` of a rotation through every activation, a
/// bias per row and per column, with and without scales, for `cfg`'s C
/// (values in ±[0.5, 1.5) from `seed`).
fn rotated(cfg: &GemmConfig, i: usize, seed: u64) -> EmuEpilogue {
    let vector = |per: Per, seed| (values(per.len(cfg.m, cfg.n), seed), per);
    let bias = [Some(Per::Column), Some(Per::Row), None][i % 3];
    let scale = [None, Some(Per::Row), Some(Per::Column)][i / 2 % 3];
    EmuEpilogue {
        activation: Activation::ALL[i % Activation::ALL.len()],
        bias: bias.map(|per| vector(per, seed + 11)),
        scale: scale.map(|per| vector(per, seed + 12)),
    }
}

/// A call's operands on the GPU, kept between calls (a graph's replays
/// read them): A and B of type `T`, C of type `C`, as views `offset`
/// elements into their buffers, with the values as stored for the check.
struct Resident<T: Convert, C: Convert> {
    cfg: GemmConfig,
    offset: usize,
    seed: u64,
    /// A, B and C before the call, as stored, in f32.
    a: Vec<f32>,
    b: Vec<f32>,
    c0: Vec<f32>,
    a_dev: cudarc::driver::CudaSlice<T>,
    b_dev: cudarc::driver::CudaSlice<T>,
    c_dev: cudarc::driver::CudaSlice<C>,
    /// A fused epilogue: as the check reads it, and its bias and scales
    /// on the GPU.
    epilogue: Option<(EmuEpilogue, [Option<cudarc::driver::CudaSlice<f32>>; 2])>,
}

impl<T: Convert, C: Convert> Resident<T, C> {
    /// Buffers for `cfg` holding values from `seed` (C NaN where beta is 0).
    fn new(
        stream: &std::sync::Arc<cudarc::driver::CudaStream>,
        cfg: &GemmConfig,
        offset: usize,
        seed: u64,
    ) -> Result<Self, String> {
        let (la, lb, lc) = lens(cfg);
        let e = |e: cudarc::driver::DriverError| e.to_string();
        let mut call = Self {
            cfg: cfg.clone(),
            offset,
            seed,
            a: Vec::new(),
            b: Vec::new(),
            c0: Vec::new(),
            a_dev: stream.alloc_zeros(la + offset).map_err(e)?,
            b_dev: stream.alloc_zeros(lb + offset).map_err(e)?,
            c_dev: stream.alloc_zeros(lc + offset).map_err(e)?,
            epilogue: None,
        };
        call.refill(stream, seed)?;
        Ok(call)
    }

    /// New values from `seed` copied into the same buffers.
    fn refill(
        &mut self,
        stream: &std::sync::Arc<cudarc::driver::CudaStream>,
        seed: u64,
    ) -> Result<(), String> {
        let stored_t = |v: Vec<f32>| -> (Vec<T>, Vec<f32>) {
            let t: Vec<T> = v.into_iter().map(T::from).collect();
            let f = t.iter().map(|&x| x.to()).collect();
            (t, f)
        };
        let (a_t, a) = stored_t(values(self.a_dev.len(), seed));
        let (b_t, b) = stored_t(values(self.b_dev.len(), seed + 1));
        let c_t: Vec<C> = if self.cfg.beta == 0.0 {
            vec![C::from(f32::NAN); self.c_dev.len()]
        } else {
            values(self.c_dev.len(), seed + 2)
                .into_iter()
                .map(C::from)
                .collect()
        };
        let e = |e: cudarc::driver::DriverError| e.to_string();
        stream.memcpy_htod(&a_t, &mut self.a_dev).map_err(e)?;
        stream.memcpy_htod(&b_t, &mut self.b_dev).map_err(e)?;
        stream.memcpy_htod(&c_t, &mut self.c_dev).map_err(e)?;
        (self.a, self.b, self.seed) = (a, b, seed);
        self.c0 = c_t.iter().map(|&x| x.to()).collect();
        Ok(())
    }

    /// Calls take the epilogue `ep` (its vectors copied to the GPU).
    fn fuse(
        &mut self,
        stream: &std::sync::Arc<cudarc::driver::CudaStream>,
        ep: EmuEpilogue,
    ) -> Result<(), String> {
        let upload = |v: &Option<(Vec<f32>, Per)>| {
            v.as_ref()
                .map(|(v, _)| stream.clone_htod(v).map_err(|e| e.to_string()))
                .transpose()
        };
        let vectors = [upload(&ep.bias)?, upload(&ep.scale)?];
        self.epilogue = Some((ep, vectors));
        Ok(())
    }

    /// The call through `sgemm`, enqueued.
    fn run(&mut self, sgemm: &Sgemm) -> Result<rust_gemm::blas::Choice, rust_gemm::GemmError> {
        let offset = self.offset;
        let a_view = self.a_dev.slice(offset..);
        let b_view = self.b_dev.slice(offset..);
        let mut c_view = self.c_dev.slice_mut(offset..);
        let Some((ep, [bias, scale])) = &self.epilogue else {
            return sgemm.gemm(&self.cfg, &a_view, &b_view, &mut c_view);
        };
        let along = |v: &Option<(Vec<f32>, Per)>| v.as_ref().map(|(_, per)| *per);
        let fused = Epilogue {
            activation: ep.activation,
            bias: bias.as_ref().zip(along(&ep.bias)),
            scale: scale.as_ref().zip(along(&ep.scale)),
        };
        sgemm.gemm_fused(&self.cfg, &a_view, &b_view, &mut c_view, &fused)
    }

    /// Waits for `stream` and checks C against the reference of the
    /// values last filled in, as `choice` computed it (the tolerance of
    /// its math), and that nothing before C's view changed.
    fn check(
        &self,
        stream: &std::sync::Arc<cudarc::driver::CudaStream>,
        choice: rust_gemm::blas::Choice,
    ) -> Result<(), String> {
        let (cfg, offset) = (&self.cfg, self.offset);
        let after: Vec<f32> = stream
            .clone_dtoh(&self.c_dev)
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(C::to)
            .collect();
        if choice.kernel.elems.storage() != Storage::new(T::ELEM, T::ELEM, C::ELEM)
            && cfg.alpha != 0.0
        {
            return Err(format!("{choice} does not store the call's types"));
        }
        let plain = EmuEpilogue::default();
        let epilogue = self.epilogue.as_ref().map_or(&plain, |(ep, _)| ep);
        let v = check_gemm_fused(
            cfg,
            (&self.a[offset..], &self.b[offset..]),
            (&self.c0[offset..], &after[offset..]),
            kernels_gpu::elem::Elems::new(T::ELEM, T::ELEM, C::ELEM, choice.kernel.elems.math),
            (usize::MAX, self.seed),
            epilogue,
        );
        if !v.passed {
            return Err(format!(
                "{choice}: max error {:e}, {} non-finite, worst {:?}",
                v.max_error, v.nonfinite, v.worst
            ));
        }
        if after[..offset]
            .iter()
            .zip(&self.c0[..offset])
            .any(|(x, y)| x.to_bits() != y.to_bits())
        {
            return Err(format!("{choice} wrote before C's view"));
        }
        Ok(())
    }
}

/// The 16-bit calls on the GPU for A and B of type `T`, C of type `C`:
/// every op x layout x scalar pair (aligned, padded and batched, and on
/// misaligned views), large aligned and unaligned products (the `wgmma`
/// kernels and their padded copies on Hopper), and every candidate of
/// the types by name.
fn library_16<T: Convert, C: Convert>(sgemm: &Sgemm, out: &mut Progress) {
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
        for fused in [false, true] {
            seed += 3;
            let ep = fused.then(|| rotated(&cfg, seed as usize, seed));
            let result = library_call_fused::<T, C>(sgemm, &cfg, 0, seed, ep);
            // A kernel this GPU cannot run (the Hopper steps elsewhere) is
            // refused, and skipped here with a line saying so.
            let result = match result {
                Err(e) if e.contains("needs compute capability") => {
                    eprintln!("*** SKIPPED: {} on this GPU: {e} ***", spec.name);
                    Ok(String::new())
                }
                r => r,
            };
            let fused = if fused { "_fused" } else { "" };
            out.push((format!("{types}_{}{fused}", spec.name), ok(result)));
        }
    }
    // Every op and layout with an epilogue (C rounded after it), and a
    // TMA-stored product (beta 0, Hopper) at a size with edge tiles.
    for (i, layout) in [Layout::RowMajor, Layout::ColMajor].into_iter().enumerate() {
        for (op_a, op_b) in [
            (Op::N, Op::N),
            (Op::T, Op::N),
            (Op::N, Op::T),
            (Op::T, Op::T),
        ] {
            let cfg = GemmConfig::new(1031, 517, 263)
                .layout(layout)
                .op_a(op_a)
                .op_b(op_b)
                .scalars(0.75, if i == 0 { 0.0 } else { 1.0 });
            seed += 3;
            let ep = rotated(&cfg, seed as usize, seed);
            out.push((
                format!("{types}_{layout:?}_{op_a:?}{op_b:?}_fused_1031x517x263"),
                ok(library_call_fused::<T, C>(sgemm, &cfg, 0, seed, Some(ep))),
            ));
        }
    }
}

/// The library on the GPU: every op x layout x scalar pair, padded
/// leading dimensions and strided batches, misaligned views, every
/// candidate kernel by name, split-K, and the errors only a GPU can give.
/// Every registered kernel by name (FP8 aside: `library_fp8`), with a
/// fused epilogue from the rotation, at a shape with edge tiles: beta 0
/// (where the TMA-stored steps rewrite the staging box before the copy)
/// and beta 1 (their plain stores and a warp's pass over its rows).
fn every_kernel_fused(sgemm: &Sgemm, out: &mut Progress) {
    use kernels_gpu::elem::Elem;
    let mut seed = 5000;
    for spec in kernels_gpu::registry::all() {
        if spec.elems.storage().scaled() || spec.name == kernels_gpu::k14_split_k::REDUCE.name {
            continue;
        }
        for beta in [0.0, 1.0] {
            let cfg = GemmConfig::new(300, 264, 320)
                .op_a(spec.ops.a)
                .op_b(spec.ops.b)
                .scalars(0.75, beta)
                .algorithm(Algorithm::Kernel {
                    name: spec.name.into(),
                    split_k: 1,
                });
            seed += 3;
            let ep = Some(rotated(&cfg, seed as usize, seed));
            let s = spec.elems.storage();
            let result = match (s.a, s.c) {
                (Elem::F32, Elem::F32) => library_call_fused::<f32, f32>(sgemm, &cfg, 0, seed, ep),
                (Elem::Bf16, Elem::F32) => {
                    library_call_fused::<bf16, f32>(sgemm, &cfg, 0, seed, ep)
                }
                (Elem::Bf16, Elem::Bf16) => {
                    library_call_fused::<bf16, bf16>(sgemm, &cfg, 0, seed, ep)
                }
                (Elem::F16, Elem::F32) => library_call_fused::<f16, f32>(sgemm, &cfg, 0, seed, ep),
                (Elem::F16, Elem::F16) => library_call_fused::<f16, f16>(sgemm, &cfg, 0, seed, ep),
                _ => Err(format!("no test for the stored types {s}")),
            };
            let result = match result {
                Err(e) if e.contains("needs compute capability") => {
                    eprintln!("*** SKIPPED: {} on this GPU: {e} ***", spec.name);
                    Ok(String::new())
                }
                r => r,
            };
            out.push((
                format!("every_kernel_{}_b{beta}_fused", spec.name),
                result.map(|_| ()),
            ));
        }
    }
}

fn library(gpu: &Gpu) -> Named {
    let mut out = Progress::default();
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
                        // A fused epilogue, on the batch too (one bias for
                        // every product).
                        let ep = rotated(&cfg, seed as usize, seed);
                        out.push((
                            format!("{name}_fused"),
                            ok(library_call_fused::<f32, f32>(
                                &sgemm,
                                &cfg,
                                0,
                                seed,
                                Some(ep),
                            )),
                        ));
                        let ep = rotated(&batch, seed as usize + 1, seed);
                        out.push((
                            format!("{name}_ld_batch3_fused"),
                            ok(library_call_fused::<f32, f32>(
                                &sgemm,
                                &batch,
                                0,
                                seed,
                                Some(ep),
                            )),
                        ));
                    }
                }
            }
        }
    }
    // Every candidate by name, unsplit and split in 5; and the TF32
    // kernels that split K (steps 17-18: each slice's tiles start at its
    // K in the maps) in 3 and 8 slices, with beta. K = 700 is no multiple
    // of 32: the last slice ends inside a tile.
    let f32_kernels = sgemm.candidates().expect("the f32 candidates load");
    let tf32_kernels = (sgemm.candidates_in(Compute::Tf32)).expect("the TF32 candidates load");
    let by_name = f32_kernels
        .iter()
        .map(|c| (c.spec, Compute::Fp32, (1.0, 1.0), [1, 5]))
        .chain(
            tf32_kernels
                .iter()
                .filter(|c| c.spec.elems.math == Math::Tf32 && c.spec.splits_k())
                .map(|c| (c.spec, Compute::Tf32, (1.5, 0.5), [3, 8])),
        );
    for (spec, compute, (alpha, beta), splits) in by_name {
        let ops = spec.ops;
        let cfg = GemmConfig::new(300, 200, 700)
            .op_a(ops.a)
            .op_b(ops.b)
            .scalars(alpha, beta)
            .compute(compute);
        for split in splits {
            let named = cfg.clone().algorithm(Algorithm::Kernel {
                name: spec.name.into(),
                split_k: split,
            });
            seed += 3;
            out.push((
                format!("{}_split{split}", spec.name),
                ok(library_call(&sgemm, &named, 0, seed)),
            ));
            // With an epilogue (split-K's reduction applies it).
            let ep = rotated(&named, seed as usize, seed);
            out.push((
                format!("{}_split{split}_fused", spec.name),
                ok(library_call_fused::<f32, f32>(
                    &sgemm,
                    &named,
                    0,
                    seed,
                    Some(ep),
                )),
            ));
        }
    }
    // The TF32 kernels that take batches (steps 17-18 reading A and B as
    // stored; the product is their maps' third coordinate): by name, a
    // batch of 5 with padded rows and products (multiples of 4 floats),
    // beta and an epilogue; from views one float in (no 16-byte start:
    // one product per launch through its padded copies); a stride TMA
    // cannot step is refused by name.
    for c in (tf32_kernels.iter()).filter(|c| c.spec.elems.math == Math::Tf32 && c.spec.batches) {
        let ops = c.spec.ops;
        let cfg = GemmConfig::new(300, 200, 700)
            .op_a(ops.a)
            .op_b(ops.b)
            .scalars(1.5, 0.5)
            .compute(Compute::Tf32);
        let cfg = cfg.clone().lds(cfg.lda + 4, cfg.ldb + 8, cfg.ldc + 1);
        let (la, lb, lc) = lens(&cfg);
        let batch = cfg
            .clone()
            .batched(5, la + 36, lb + 4, lc + 3)
            .algorithm(Algorithm::Kernel {
                name: c.spec.name.into(),
                split_k: 1,
            });
        seed += 3;
        out.push((
            format!("{}_batch5", c.spec.name),
            ok(library_call(&sgemm, &batch, 0, seed)),
        ));
        let ep = rotated(&batch, seed as usize, seed);
        out.push((
            format!("{}_batch5_fused", c.spec.name),
            ok(library_call_fused::<f32, f32>(
                &sgemm,
                &batch,
                0,
                seed,
                Some(ep),
            )),
        ));
        out.push((
            format!("{}_batch5_misaligned", c.spec.name),
            ok(library_call(&sgemm, &batch, 1, seed)),
        ));
        let odd = batch.clone().batched(5, la + 1, lb + 4, lc + 3);
        out.push((
            format!("{}_batch5_odd_stride_refused", c.spec.name),
            match library_call(&sgemm, &odd, 0, seed) {
                Err(e) if e.contains("multiples of 4") => Ok(()),
                other => Err(format!(
                    "expected a refusal naming the stride, got {other:?}"
                )),
            },
        ));
    }
    // In TF32 mode, Auto runs a batch of small products on them.
    let products = GemmConfig::new(128, 128, 128)
        .batched(256, 128 * 128, 128 * 128, 128 * 128)
        .compute(Compute::Tf32);
    out.push((
        "auto_tf32_batch_256x128x128x128".into(),
        auto_chose(library_call(&sgemm, &products, 0, 13), &["wgmma"]),
    ));
    // A batch that shares B, its As and Cs consecutive, is one product
    // of 8 x 512 rows (`Plan::folded`): in TF32 mode a TMA kernel's.
    let shared = GemmConfig::new(512, 1024, 1024)
        .batched(8, 512 * 1024, 0, 512 * 1024)
        .scalars(1.0, 0.5)
        .compute(Compute::Tf32);
    out.push((
        "auto_tf32_folds_a_batch_sharing_b_8x512x1024x1024".into(),
        auto_chose(library_call(&sgemm, &shared, 0, 17), &["wgmma"]),
    ));
    // In TF32 mode, Auto splits a few tiles over a long K on them.
    let deep = GemmConfig::new(256, 256, 16384).compute(Compute::Tf32);
    out.push((
        "auto_tf32_splits_256x256x16384".into(),
        auto_chose(library_call(&sgemm, &deep, 0, 11), &["wgmma", "split-K"]),
    ));
    // Auto splits K on a small C over a long K.
    let deep = GemmConfig::new(256, 256, 8192);
    out.push((
        "auto_splits_256x256x8192".into(),
        auto_chose(library_call(&sgemm, &deep, 0, 7), &["split-K"]),
    ));
    // Step 16's split inside one launch on long-K columns (the suite's
    // long-K family), with beta: each call verified, several in a row
    // (every launch must leave the tile counters at 0 for the next).
    for (m, k, split) in [
        (25, 40_520, 64),
        (49, 17_372, 32),
        (167, 98_086, 8),
        (3, 9_000, 5),
    ] {
        let named = GemmConfig::new(m, 1, k)
            .scalars(0.75, -0.5)
            .algorithm(Algorithm::Kernel {
                name: kernels_gpu::k16_gemv::SPEC.name.into(),
                split_k: split,
            });
        for round in 0..3 {
            seed += 3;
            out.push((
                format!("gemv_split_in_launch_{m}x1x{k}_split{split}_{round}"),
                ok(library_call(&sgemm, &named, 0, seed)),
            ));
        }
    }
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
    every_kernel_fused(&sgemm, &mut out);
    // 16-bit A and B, C in f32 or their type.
    library_16::<bf16, f32>(&sgemm, &mut out);
    library_16::<bf16, bf16>(&sgemm, &mut out);
    library_16::<f16, f32>(&sgemm, &mut out);
    library_16::<f16, f16>(&sgemm, &mut out);
    // FP8: quantized on the GPU, multiplied with their scales (Hopper).
    if gpu.info.compute_capability == (9, 0) {
        library_fp8(&sgemm, &mut out);
    } else {
        eprintln!(
            "*** SKIPPED: the library's FP8 calls: they need Hopper (compute capability 9.0) ***"
        );
    }
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
    out.0
}

/// A host copy of a device buffer of `T` as f32s.
fn host_f32<T: cudarc::driver::DeviceRepr + Copy + Default>(
    sgemm: &Sgemm,
    buf: &cudarc::driver::CudaSlice<T>,
    to: impl Fn(T) -> f32,
) -> Result<Vec<f32>, String> {
    let v = sgemm.stream().clone_dtoh(buf).map_err(|e| e.to_string())?;
    Ok(v.into_iter().map(to).collect())
}

/// Checks one quantization the GPU made against its definition: each
/// scale `amax / MAX` of its block (1 for zeros), each value `x / scale`
/// rounded to the FP8 type (exactly: the host's rounding is the one the
/// emulator tests check bit for bit). Returns the dequantized values.
fn check_quantized(
    x: &[f32],
    (rows, cols): (usize, usize),
    how: Quantize,
    (q, s): (&[f32], &[f32]),
    (round, max): (fn(f32) -> f32, f32),
) -> Result<Vec<f64>, String> {
    let (rs, cs) = how.strides(rows, cols);
    let block_rows = match how {
        Quantize::Tensor => rows,
        Quantize::Rows => 1,
        Quantize::Tiles => 128,
    };
    let at = |r: usize, c: usize| match how {
        Quantize::Tensor => 0,
        _ => r / block_rows * rs + c / 128 * cs,
    };
    let mut amax = vec![0.0f32; s.len()];
    for r in 0..rows {
        for c in 0..cols {
            let i = at(r, c);
            amax[i] = amax[i].max(x[r * cols + c].abs());
        }
    }
    let mut out = Vec::with_capacity(rows * cols);
    for r in 0..rows {
        for c in 0..cols {
            let i = at(r, c);
            let want_scale = if amax[i] / max == 0.0 {
                1.0
            } else {
                amax[i] / max
            };
            if s[i] != want_scale {
                return Err(format!("scale {i} = {}, want {want_scale}", s[i]));
            }
            let want = round(x[r * cols + c] / want_scale);
            let got = q[r * cols + c];
            if got.to_bits() != want.to_bits() {
                return Err(format!("value [{r}][{c}] = {got}, want {want}"));
            }
            out.push(got as f64 * s[i] as f64);
        }
    }
    Ok(out)
}

/// `x` (`rows x cols`, on the device as `src`) quantized by the library
/// as `how` says to the FP8 type `Q` (`(round, max, to_f32)` of it),
/// checked against the definition ([`check_quantized`]): the FP8 matrix,
/// its scales, and its dequantized values.
#[allow(clippy::type_complexity)]
fn quantized<
    T: rust_gemm::blas::QuantSource,
    Q: rust_gemm::blas::Fp8Element + cudarc::driver::ValidAsZeroBits + Default,
>(
    sgemm: &Sgemm,
    src: &cudarc::driver::CudaSlice<T>,
    x: &[f32],
    (rows, cols): (usize, usize),
    how: Quantize,
    (round, max, to_f32): (fn(f32) -> f32, f32, fn(Q) -> f32),
) -> Result<
    (
        cudarc::driver::CudaSlice<Q>,
        cudarc::driver::CudaSlice<f32>,
        Vec<f64>,
    ),
    String,
> {
    let stream = sgemm.stream();
    let drv = |e: cudarc::driver::DriverError| e.to_string();
    let mut q = stream.alloc_zeros::<Q>(rows * cols).map_err(drv)?;
    let mut s = stream
        .alloc_zeros::<f32>(how.scales(rows, cols))
        .map_err(drv)?;
    let cfg = rust_gemm::blas::QuantConfig::new(rows, cols, how);
    sgemm
        .quantize(&cfg, src, &mut q, &mut s)
        .map_err(|e| e.to_string())?;
    let values = check_quantized(
        x,
        (rows, cols),
        how,
        (&host_f32(sgemm, &q, to_f32)?, &host_f32(sgemm, &s, |x| x)?),
        (round, max),
    )?;
    Ok((q, s, values))
}

/// The library's FP8 path end to end: BF16 and f32 matrices quantized on
/// the GPU (per tensor, and A per 1 x 128 with B per 128 x 128), checked
/// against their definition, multiplied with their scales into BF16, FP16
/// and f32 C (promoted by default, fast accumulation when asked, D's scale,
/// the column-major call), each C against the f64 product of the
/// dequantized values within the FP8 bound; and the typed errors of FP8
/// calls on a handle.
fn library_fp8(sgemm: &Sgemm, out: &mut Progress) {
    use float8::{F8E4M3, F8E5M2};
    use kernels_gpu::elem::{E4m3, E5m2, Element};
    use rust_gemm::blas::Scales;
    let stream = sgemm.stream().clone();
    let e4 = (|x: f32| E4m3::from_f32(x).to_f32()) as fn(f32) -> f32;
    let e5 = (|x: f32| E5m2::from_f32(x).to_f32()) as fn(f32) -> f32;
    for (m, n, k) in [(333, 200, 1000), (129, 257, 128), (64, 48, 4096)] {
        for (how_a, how_b) in [
            (Quantize::Tensor, Quantize::Tensor),
            (Quantize::Rows, Quantize::Tiles),
        ] {
            let name = format!("fp8_{}_{}_{m}x{n}x{k}", how_a.name(), how_b.name());
            let result = (|| -> Result<(), String> {
                let err = |e: rust_gemm::blas::GemmError| e.to_string();
                let drv = |e: cudarc::driver::DriverError| e.to_string();
                // A from BF16 values, B from f32 ones, rows of different
                // magnitudes.
                let spread = |v: Vec<f32>, cols: usize| -> Vec<f32> {
                    v.iter()
                        .enumerate()
                        .map(|(i, x)| x * 2f32.powi((i / cols % 9) as i32 - 4))
                        .collect()
                };
                let a_x: Vec<f32> = spread(values(m * k, m as u64), k)
                    .into_iter()
                    .map(|x| bf16::from_f32(x).to_f32())
                    .collect();
                let b_x = spread(values(n * k, n as u64 + 1), k);
                let a = stream
                    .clone_htod(&a_x.iter().map(|&x| bf16::from_f32(x)).collect::<Vec<_>>())
                    .map_err(drv)?;
                let b = stream.clone_htod(&b_x).map_err(drv)?;
                let e4 = (e4, 448.0, (|x: F8E4M3| x.to_f32()) as fn(F8E4M3) -> f32);
                let (qa, sa, da) =
                    quantized(sgemm, &a, &a_x, (m, k), how_a, e4).map_err(|e| format!("A: {e}"))?;
                let (qb, sb, db) =
                    quantized(sgemm, &b, &b_x, (n, k), how_b, e4).map_err(|e| format!("B: {e}"))?;
                // E5M2 from the same f32 B, per tensor.
                let e5 = (e5, 57344.0, (|x: F8E5M2| x.to_f32()) as fn(F8E5M2) -> f32);
                let (q5, s5, db5) = quantized(sgemm, &b, &b_x, (n, k), Quantize::Tensor, e5)
                    .map_err(|e| format!("B in E5M2: {e}"))?;
                // The f64 product of the dequantized values.
                let mut want = vec![0.0f64; m * n];
                for i in 0..m {
                    for j in 0..n {
                        want[i * n + j] = (0..k).map(|kk| da[i * k + kk] * db[j * k + kk]).sum();
                    }
                }
                let scale = want.iter().fold(0.0f64, |s, w| s.max(w.abs()));
                let scales = if how_a == Quantize::Tensor {
                    Scales::tensor(&sa, &sb)
                } else {
                    Scales::blocks(&sa, &sb)
                };
                let two = stream.clone_htod(&[2.0f32]).map_err(drv)?;
                let row = GemmConfig::new(m, n, k).op_b(Op::T);
                // 16-bit C rounds once (2^-9 relative); the tensor cores'
                // 13-bit k-step sums, promoted every 128 of K (or not, with
                // fast accumulation: K / 32 of them).
                let bound = |fast: bool, c16: bool| {
                    let steps = if fast { (k as f64 / 32.0).ceil() } else { 4.0 };
                    (if c16 { 2f64.powi(-8) } else { 0.0 }) + 2f64.powi(-12) * steps + 1e-6
                };
                let check_c =
                    |got: Vec<f32>, factor: f64, bound: f64, what: &str| -> Result<(), String> {
                        let e = got
                            .iter()
                            .zip(&want)
                            .fold(0.0f64, |e, (&g, &w)| e.max((g as f64 - factor * w).abs()));
                        let rel = e / (factor * scale);
                        if rel <= bound {
                            Ok(())
                        } else {
                            Err(format!("{what}: error {rel:e} over the bound {bound:e}"))
                        }
                    };
                let mut c16 = stream.alloc_zeros::<bf16>(m * n).map_err(drv)?;
                let choice = sgemm
                    .gemm_scaled(&row, &qa, &qb, &mut c16, &scales)
                    .map_err(err)?;
                if choice.kernel.elems.promote_every == 0 {
                    return Err(format!("Auto took {choice}, which does not promote"));
                }
                check_c(
                    host_f32(sgemm, &c16, |x| x.to_f32())?,
                    1.0,
                    bound(false, true),
                    "BF16 C",
                )?;
                // A fused epilogue: GELU (tanh) of the product scaled per
                // row plus a bias per column, f32 C, Auto's kernel and
                // step 27 by name.
                let bias = values(n, m as u64 + 7);
                let per_row = values(m, m as u64 + 8);
                let (bias_d, per_row_d) = (
                    stream.clone_htod(&bias).map_err(drv)?,
                    stream.clone_htod(&per_row).map_err(drv)?,
                );
                let fused = Epilogue::activation(Activation::GeluTanh)
                    .with_bias(&bias_d, Per::Column)
                    .with_scale(&per_row_d, Per::Row);
                for name in [None, Some("mma_e4m3_64x128x128_w32x32_s3_f32")] {
                    let mut call = row.clone();
                    if let Some(name) = name.filter(|_| how_a == Quantize::Tensor) {
                        call = call.algorithm(Algorithm::Kernel {
                            name: name.into(),
                            split_k: 1,
                        });
                    }
                    let mut cf = stream.alloc_zeros::<f32>(m * n).map_err(drv)?;
                    let choice = sgemm
                        .gemm_scaled_fused(&call, &qa, &qb, &mut cf, &scales, &fused)
                        .map_err(err)?;
                    let got = host_f32(sgemm, &cf, |x| x)?;
                    let mut e = 0.0f64;
                    for i in 0..m {
                        for j in 0..n {
                            let x = per_row[i] as f64 * want[i * n + j] + bias[j] as f64;
                            let d = Activation::GeluTanh.reference(x);
                            e = e.max((got[i * n + j] as f64 - d).abs());
                        }
                    }
                    // |s| and |bias| are below 1.5; GELU's slope below 1.13.
                    let rel = e / (1.13 * 1.5 * (scale + 1.0));
                    if rel > bound(false, false) {
                        return Err(format!("fused epilogue ({choice}): error {rel:e}"));
                    }
                }
                let mut c32 = stream.alloc_zeros::<f32>(m * n).map_err(drv)?;
                sgemm
                    .gemm_scaled(&row, &qa, &qb, &mut c32, &scales.with_d(&two))
                    .map_err(err)?;
                check_c(
                    host_f32(sgemm, &c32, |x| x)?,
                    2.0,
                    bound(false, false),
                    "f32 C, D's scale 2",
                )?;
                // Step 27 (mma.sync, Ada's FP8 kernel) by name, with these
                // scales: the same product, the same bound.
                let name27 = if how_a == Quantize::Tensor {
                    "mma_e4m3_64x128x128_w32x32_s3"
                } else {
                    "mma_e4m3_blocks_64x128x128_w32x32_s3"
                };
                let named = row.clone().algorithm(Algorithm::Kernel {
                    name: name27.into(),
                    split_k: 1,
                });
                let mut c27 = stream.alloc_zeros::<bf16>(m * n).map_err(drv)?;
                sgemm
                    .gemm_scaled(&named, &qa, &qb, &mut c27, &scales)
                    .map_err(err)?;
                check_c(
                    host_f32(sgemm, &c27, |x| x.to_f32())?,
                    1.0,
                    bound(false, true),
                    name27,
                )?;
                if how_a == Quantize::Tensor {
                    let fast = row.clone().fast_accumulation(true);
                    let mut c = stream.alloc_zeros::<f16>(m * n).map_err(drv)?;
                    let choice = sgemm
                        .gemm_scaled(&fast, &qa, &qb, &mut c, &scales)
                        .map_err(err)?;
                    check_c(
                        host_f32(sgemm, &c, |x| x.to_f32())?,
                        1.0,
                        bound(true, true),
                        &format!("FP16 C, {choice}"),
                    )?;
                    // cuBLASLt's layout: column-major, C^T (n x m) = B A^T
                    // with op_a = T: the same memory as the row-major call.
                    let col = GemmConfig::new(n, m, k)
                        .layout(Layout::ColMajor)
                        .op_a(Op::T);
                    let mut ct = stream.alloc_zeros::<f32>(m * n).map_err(drv)?;
                    sgemm
                        .gemm_scaled(&col, &qb, &qa, &mut ct, &Scales::tensor(&sb, &sa))
                        .map_err(err)?;
                    check_c(
                        host_f32(sgemm, &ct, |x| x)?,
                        1.0,
                        bound(false, false),
                        "column-major",
                    )?;
                    // Column-major with A and B of different FP8 types
                    // (fast accumulation: step 25's E4M3 x E5M2 and E5M2 x
                    // E4M3): B in E5M2 from the same values, its own scale,
                    // which must travel with it when the call swaps A and B.
                    let mut want5 = vec![0.0f64; m * n];
                    for i in 0..m {
                        for j in 0..n {
                            want5[i * n + j] =
                                (0..k).map(|kk| da[i * k + kk] * db5[j * k + kk]).sum();
                        }
                    }
                    // Without fast accumulation the mix takes step 27, the
                    // one kernel of it that promotes its sums.
                    for fast in [true, false] {
                        let col = col.clone().fast_accumulation(fast);
                        let mut cm = stream.alloc_zeros::<bf16>(m * n).map_err(drv)?;
                        let choice = sgemm
                            .gemm_scaled(&col, &q5, &qa, &mut cm, &Scales::tensor(&s5, &sa))
                            .map_err(err)?;
                        if !fast && choice.kernel.step != 27 {
                            return Err(format!("the promoted E4M3 x E5M2 call took {choice}"));
                        }
                        let got = host_f32(sgemm, &cm, |x| x.to_f32())?;
                        let scale5 = want5.iter().fold(0.0f64, |s, w| s.max(w.abs()));
                        let e = got
                            .iter()
                            .zip(&want5)
                            .fold(0.0f64, |e, (&g, &w)| e.max((g as f64 - w).abs()))
                            / scale5;
                        if e > bound(fast, true) {
                            return Err(format!(
                                "column-major E4M3 x E5M2 ({choice}): error {e:e}"
                            ));
                        }
                    }
                }
                stream.synchronize().map_err(drv)?;
                Ok(())
            })();
            out.push((name, result));
        }
    }
    // Errors a handle gives for FP8 buffers.
    let a = stream.alloc_zeros::<F8E4M3>(64 * 64).unwrap();
    let s = stream.alloc_zeros::<f32>(1).unwrap();
    let mut c = stream.alloc_zeros::<bf16>(64 * 64).unwrap();
    let says = |r: Result<rust_gemm::blas::Choice, rust_gemm::blas::GemmError>, want: &str| match r
    {
        Ok(choice) => Err(format!(
            "{choice} ran, but the call should fail with '{want}'"
        )),
        Err(e) if e.to_string().contains(want) => Ok(()),
        Err(e) => Err(format!("'{e}' does not say '{want}'")),
    };
    let nt = GemmConfig::new(64, 64, 64).op_b(Op::T);
    out.push((
        "error_fp8_without_scales".into(),
        says(sgemm.gemm(&nt, &a, &a, &mut c), "call gemm_scaled"),
    ));
    let h = stream.alloc_zeros::<bf16>(64 * 64).unwrap();
    let mut hc = stream.alloc_zeros::<f32>(64 * 64).unwrap();
    out.push((
        "error_scales_with_bf16".into(),
        says(
            sgemm.gemm_scaled(&nt, &h, &h, &mut hc, &Scales::tensor(&s, &s)),
            "scales are for FP8 operands",
        ),
    ));
    out.push((
        "error_fp8_layout".into(),
        says(
            sgemm.gemm_scaled(
                &GemmConfig::new(64, 64, 64),
                &a,
                &a,
                &mut c,
                &Scales::tensor(&s, &s),
            ),
            "K contiguous",
        ),
    ));
    out.push((
        "error_fp8_block_scales_too_small".into(),
        says(
            sgemm.gemm_scaled(&nt, &a, &a, &mut c, &Scales::blocks(&s, &s)),
            "scales.a holds 1 f32s",
        ),
    ));
    // Block scales one f32 past a 16-byte boundary: a typed error, not a
    // bulk copy from a misaligned address.
    let blocks = stream.alloc_zeros::<f32>(256).unwrap();
    let (sa, sb) = (blocks.slice(1..129), blocks.slice(192..256));
    out.push((
        "error_fp8_block_scales_misaligned".into(),
        says(
            sgemm.gemm_scaled(&nt, &a, &a, &mut c, &Scales::blocks(&sa, &sb)),
            "scales.a starts at address",
        ),
    ));
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

/// Results of a group of library calls, each named.
type Named = Vec<(String, Result<(), String>)>;

/// The library's results as they come: each printed to stderr at once,
/// so that a run cut short (a device call's time limit) still shows what
/// passed; kept for the summary `main` prints.
#[derive(Default)]
struct Progress(Named);

impl Progress {
    fn push(&mut self, (name, result): (String, Result<(), String>)) {
        match &result {
            Ok(()) => eprintln!("  library: {name} ... ok"),
            Err(e) => eprintln!("  library: {name} ... FAILED: {e}"),
        }
        self.0.push((name, result));
    }
}

/// One handle shared by 8 threads calling on 2 streams (a handle and its
/// [`Sgemm::on_stream`] twin; cudarc's event tracking on, its default):
/// each thread enqueues a call of each kind a handle keeps state for
/// (split-K's workspace; a 16-bit call, on Hopper a TMA kernel with
/// tensor maps; one at a shape that takes padded copies; a plain f32
/// call), then checks every C, twice over with new values.
fn library_streams() -> Named {
    let setup = || -> Result<_, String> {
        let ctx = cudarc::driver::CudaContext::new(0).map_err(|e| e.to_string())?;
        let streams = [
            ctx.new_stream().map_err(|e| e.to_string())?,
            ctx.new_stream().map_err(|e| e.to_string())?,
        ];
        let first = Sgemm::new(streams[0].clone()).map_err(|e| e.to_string())?;
        let second = first
            .on_stream(streams[1].clone())
            .map_err(|e| e.to_string())?;
        Ok((first, second))
    };
    let (first, second) = match setup() {
        Ok(handles) => handles,
        Err(e) => return vec![("streams_setup".into(), Err(e))],
    };
    let handles = [&first, &second];
    std::thread::scope(|scope| {
        let threads: Vec<_> = (0..8u64)
            .map(|t| {
                scope.spawn(move || -> Result<(), String> {
                    let sgemm = handles[t as usize % 2];
                    let stream = sgemm.stream();
                    let seed = 5000 + 100 * t;
                    let mut split = Resident::<f32, f32>::new(
                        stream,
                        &GemmConfig::new(256, 256, 8192),
                        0,
                        seed,
                    )?;
                    let plain = GemmConfig::new(300, 200, 700).scalars(0.5, -2.0);
                    let mut plain = Resident::<f32, f32>::new(stream, &plain, 0, seed + 10)?;
                    let aligned = GemmConfig::new(256, 256, 256).scalars(1.5, 0.5);
                    let mut aligned = Resident::<bf16, f32>::new(stream, &aligned, 0, seed + 20)?;
                    let odd = GemmConfig::new(257, 260, 36);
                    let mut odd = Resident::<bf16, bf16>::new(stream, &odd, 0, seed + 30)?;
                    for round in 0..2 {
                        if round > 0 {
                            split.refill(stream, seed + 40)?;
                            plain.refill(stream, seed + 50)?;
                            aligned.refill(stream, seed + 60)?;
                            odd.refill(stream, seed + 70)?;
                        }
                        let e = |e: rust_gemm::GemmError| e.to_string();
                        let choices = [
                            split.run(sgemm).map_err(e)?,
                            plain.run(sgemm).map_err(e)?,
                            aligned.run(sgemm).map_err(e)?,
                            odd.run(sgemm).map_err(e)?,
                        ];
                        if !choices[0].to_string().contains("split-K") {
                            return Err(format!("Auto ran {} on 256x256x8192", choices[0]));
                        }
                        split.check(stream, choices[0])?;
                        plain.check(stream, choices[1])?;
                        aligned.check(stream, choices[2])?;
                        odd.check(stream, choices[3])?;
                    }
                    Ok(())
                })
            })
            .collect();
        threads
            .into_iter()
            .enumerate()
            .map(|(t, thread)| {
                let result = thread
                    .join()
                    .unwrap_or_else(|_| Err("the thread panicked".into()));
                (format!("streams_8_threads_2_streams_thread{t}"), result)
            })
            .collect()
    })
}

/// A product cut over devices (`rust_gemm::multi`) on one GPU: one
/// stream as one device, and two streams as two, every split of calls in
/// both layouts with scalars, each device's buffers cut from the whole
/// operands by the plan, C assembled (a K split's partials added in
/// device order) and checked against the f64 reference of the whole
/// call; then the errors a wrong set of buffers gets.
fn library_multi() -> Named {
    use rust_gemm::multi::{MultiGemm, Split, split, sum_partials};
    let mut out = Named::new();
    let ctx = match cudarc::driver::CudaContext::new(0) {
        Ok(ctx) => ctx,
        Err(e) => return vec![("multi_setup".into(), Err(e.to_string()))],
    };
    for devices in [1usize, 2] {
        let run = || -> Result<(), String> {
            let streams = (0..devices)
                .map(|_| ctx.new_stream().map_err(|e| e.to_string()))
                .collect::<Result<Vec<_>, _>>()?;
            let multi = MultiGemm::new(streams.clone()).map_err(|e| e.to_string())?;
            let calls = [
                GemmConfig::new(300, 700, 200).scalars(0.5, -2.0),
                GemmConfig::new(700, 300, 260)
                    .layout(Layout::ColMajor)
                    .op_a(Op::T),
                GemmConfig::new(200, 260, 2000)
                    .op_b(Op::T)
                    .scalars(1.0, 1.0),
            ];
            for cfg in &calls {
                let grid = Split::Grid {
                    rows: devices,
                    cols: 1,
                };
                for how in [Split::Columns, Split::Rows, Split::K, grid] {
                    let (la, lb, lc) = lens(cfg);
                    let (a, b, before) = (values(la, 61), values(lb, 62), values(lc, 63));
                    let parts = split(cfg, devices, how).map_err(|e| e.to_string())?;
                    let up = |d: usize, v: Vec<f32>| {
                        streams[d].clone_htod(&v).map_err(|e| e.to_string())
                    };
                    let (mut da, mut db, mut dc) = (Vec::new(), Vec::new(), Vec::new());
                    for d in 0..devices {
                        // A device the plan gives no part still gets
                        // (unused) buffers: one per device.
                        let part = parts.iter().find(|p| p.device == d).unwrap_or(&parts[0]);
                        let e = |e: rust_gemm::GemmError| e.to_string();
                        da.push(up(d, part.a_of(&a).map_err(e)?)?);
                        db.push(up(d, part.b_of(&b).map_err(e)?)?);
                        dc.push(up(d, part.c_of(&before, 0.0).map_err(e)?)?);
                    }
                    let done = multi
                        .gemm(cfg, how, &da, &db, &mut dc)
                        .map_err(|e| e.to_string())?;
                    let mut after = before.clone();
                    let mut partials = Vec::new();
                    for (part, _) in &done {
                        let d = part.device;
                        let shard = streams[d].clone_dtoh(&dc[d]).map_err(|e| e.to_string())?;
                        match how {
                            Split::K => partials.push(shard),
                            _ => part.place(&shard, &mut after).map_err(|e| e.to_string())?,
                        }
                    }
                    if how == Split::K {
                        after = sum_partials(&partials).map_err(|e| e.to_string())?;
                    }
                    let elems = kernels_gpu::elem::Elems::FP32;
                    let v = harness::reference::check_gemm(
                        cfg,
                        (&a, &b),
                        (&before, &after),
                        elems,
                        4096,
                        7,
                    );
                    if !v.passed {
                        return Err(format!("{cfg:?} by {how:?} over {devices}: {v:?}"));
                    }
                }
            }
            // Host operands through `gemm_host`, cut as `fitting` says.
            let cfg = GemmConfig::new(260, 300, 700)
                .lds(700, 310, 300)
                .scalars(1.5, -1.0);
            let (la, lb, lc) = lens(&cfg);
            let (a, b, before) = (values(la, 64), values(lb, 65), values(lc, 66));
            let mut after = before.clone();
            let (how, _) =
                (multi.gemm_host(&cfg, &a, &b, &mut after)).map_err(|e| e.to_string())?;
            let elems = kernels_gpu::elem::Elems::FP32;
            let v =
                harness::reference::check_gemm(&cfg, (&a, &b), (&before, &after), elems, 4096, 7);
            let memory = multi.memory_per_device().map_err(|e| e.to_string())?;
            let fit = rust_gemm::multi::fitting(&cfg, devices, memory, (4, 4, 4));
            if !v.passed || Some(how) != fit.ok().map(|f| f.0) {
                return Err(format!("gemm_host over {devices} by {how:?}: {v:?}"));
            }
            // One buffer short, and a C shard too small for its part.
            let cfg = GemmConfig::new(300, 300, 64);
            let parts = split(&cfg, devices, Split::Columns).map_err(|e| e.to_string())?;
            let buf = |len: usize| {
                streams[0]
                    .alloc_zeros::<f32>(len)
                    .map_err(|e| e.to_string())
            };
            let a: Vec<_> = (0..devices)
                .map(|_| buf(300 * 64))
                .collect::<Result<_, _>>()?;
            let b: Vec<_> = (0..devices)
                .map(|_| buf(64 * 300))
                .collect::<Result<_, _>>()?;
            let mut c: Vec<_> = (0..devices)
                .map(|_| buf(300 * 300))
                .collect::<Result<_, _>>()?;
            match multi.gemm(&cfg, Split::Columns, &a[1..], &b, &mut c) {
                Err(rust_gemm::GemmError::ShardCount { what: "A", .. }) => {}
                other => return Err(format!("one A short: {:?}", other.map(|d| d.len()))),
            }
            // The last device's C too short: refused before any device
            // is given work.
            let last = parts.last().map_or(0, |p| p.device);
            c[last] = buf(10)?;
            match multi.gemm(&cfg, Split::Columns, &a, &b, &mut c) {
                Err(rust_gemm::GemmError::OnDevice { device, source })
                    if device == last
                        && matches!(
                            *source,
                            rust_gemm::GemmError::BufferTooSmall { arg: "c", .. }
                        ) =>
                {
                    Ok(())
                }
                other => Err(format!("a short C shard: {:?}", other.map(|d| d.len()))),
            }
        };
        out.push((format!("multi_{devices}_devices_every_split"), run()));
    }
    out
}

/// An f32 call's C after it against the f64 reference (4096 sampled
/// elements): the error as text.
fn check_f32(
    cfg: &GemmConfig,
    a: &[f32],
    b: &[f32],
    before: &[f32],
    after: &[f32],
) -> Result<(), String> {
    let elems = kernels_gpu::elem::Elems::FP32;
    let v = harness::reference::check_gemm(cfg, (a, b), (before, after), elems, 4096, 7);
    if v.passed {
        Ok(())
    } else {
        Err(format!("{cfg:?}: {v:?}"))
    }
}

/// The calls of a multi-device handle that go through NCCL, on one rank
/// (one H200): a K split reduced on the devices (twice: the same bits)
/// and an all-gather of A with the product, each checked against the
/// reference; a handle without communicators and two ranks on one GPU
/// refused with their errors. Skipped, loudly, where NCCL is not
/// installed.
fn library_multi_nccl() -> Named {
    use rust_gemm::GemmError;
    use rust_gemm::multi::{Gather, MultiGemm};
    let mut out = Named::new();
    let ctx = match cudarc::driver::CudaContext::new(0) {
        Ok(ctx) => ctx,
        Err(e) => return vec![("multi_nccl_setup".into(), Err(e.to_string()))],
    };
    let stream = match ctx.new_stream() {
        Ok(s) => s,
        Err(e) => return vec![("multi_nccl_setup".into(), Err(e.to_string()))],
    };
    let multi = match MultiGemm::with_nccl(vec![stream.clone()]) {
        Ok(m) => m,
        Err(GemmError::NcclMissing) => {
            eprintln!("*** SKIPPED: multi_nccl: the NCCL library is not installed here ***");
            return out;
        }
        Err(e) => return vec![("multi_nccl_setup".into(), Err(e.to_string()))],
    };
    let s = |e: GemmError| e.to_string();
    let d = |e: cudarc::driver::DriverError| e.to_string();
    let check = check_f32;
    let reduced = || -> Result<(), String> {
        for cfg in [
            GemmConfig::new(300, 700, 2000).scalars(0.5, -2.0),
            GemmConfig::new(500, 260, 1000)
                .layout(Layout::ColMajor)
                .op_b(Op::T)
                .lds(500, 260, 509),
        ] {
            let (la, lb, lc) = lens(&cfg);
            let (a, b, before) = (values(la, 71), values(lb, 72), values(lc, 73));
            let da = vec![stream.clone_htod(&a).map_err(d)?];
            let db = vec![stream.clone_htod(&b).map_err(d)?];
            let mut runs = Vec::new();
            for _ in 0..2 {
                let mut dc = vec![stream.clone_htod(&before).map_err(d)?];
                (multi.gemm_reduced(&cfg, &da, &db, &mut dc)).map_err(s)?;
                runs.push(stream.clone_dtoh(&dc[0]).map_err(d)?);
            }
            check(&cfg, &a, &b, &before, &runs[0])?;
            let bits = |c: &Vec<f32>| c.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            if bits(&runs[0]) != bits(&runs[1]) {
                return Err(format!("{cfg:?}: two runs differ"));
            }
        }
        Ok(())
    };
    out.push(("multi_nccl_reduced_k_split".into(), reduced()));
    let gathered = || -> Result<(), String> {
        for cfg in [
            GemmConfig::new(700, 300, 200).scalars(1.0, 0.5),
            GemmConfig::new(400, 300, 260)
                .layout(Layout::ColMajor)
                .op_a(Op::T),
        ] {
            let (la, lb, lc) = lens(&cfg);
            let (a, b, before) = (values(la, 81), values(lb, 82), values(lc, 83));
            let plan = Gather::of(&cfg, 1).map_err(s)?;
            let part = &plan.parts[0];
            let mut da = vec![stream.clone_htod(&a).map_err(d)?];
            let db = vec![stream.clone_htod(&part.b_of(&b).map_err(s)?).map_err(d)?];
            let mut dc = vec![
                stream
                    .clone_htod(&part.c_of(&before, 0.0).map_err(s)?)
                    .map_err(d)?,
            ];
            (multi.gather_gemm(&cfg, &mut da, &db, &mut dc)).map_err(s)?;
            let mut after = before.clone();
            let shard = stream.clone_dtoh(&dc[0]).map_err(d)?;
            part.place(&shard, &mut after).map_err(s)?;
            check(&cfg, &a, &b, &before, &after)?;
            if stream.clone_dtoh(&da[0]).map_err(d)? != a {
                return Err(format!("{cfg:?}: the gather changed A"));
            }
        }
        Ok(())
    };
    out.push(("multi_nccl_gather_gemm".into(), gathered()));
    let scattered = || -> Result<(), String> {
        use rust_gemm::multi::Split;
        let cfg = GemmConfig::new(300, 500, 200)
            .op_b(Op::T)
            .lds(210, 205, 509)
            .scalars(0.5, 2.0);
        let (la, lb, lc) = lens(&cfg);
        let (a, b, before) = (values(la, 91), values(lb, 92), values(lc, 93));
        let (da, db) = (
            stream.clone_htod(&a).map_err(d)?,
            stream.clone_htod(&b).map_err(d)?,
        );
        for how in [
            Split::Columns,
            Split::Rows,
            Split::Grid { rows: 1, cols: 1 },
        ] {
            let mut dc = stream.clone_htod(&before).map_err(d)?;
            let mut sh = (multi.scatter(&cfg, how, 0, (&da, &db, &dc))).map_err(s)?;
            (multi.gemm(&cfg, how, &sh.a, &sh.b, &mut sh.c)).map_err(s)?;
            multi.collect(&sh, 0, &mut dc).map_err(s)?;
            let after = stream.clone_dtoh(&dc).map_err(d)?;
            check(&cfg, &a, &b, &before, &after).map_err(|e| format!("{how:?}: {e}"))?;
        }
        let dc = stream.clone_htod(&before).map_err(d)?;
        let sh = (multi.scatter(&cfg, Split::K, 0, (&da, &db, &dc))).map_err(s)?;
        let mut dc = dc;
        match multi.collect(&sh, 0, &mut dc) {
            Err(GemmError::PartialNotPlaced) => {}
            other => return Err(format!("collecting a K split: {other:?}")),
        }
        match multi.scatter::<f32, f32, f32, _, _, _>(&cfg, Split::Rows, 1, (&da, &db, &dc)) {
            Err(GemmError::NoSuchRoot {
                root: 1,
                devices: 1,
            }) => Ok(()),
            other => Err(format!("root 1 of 1: {:?}", other.map(|_| ()))),
        }
    };
    out.push(("multi_nccl_scatter_collect".into(), scattered()));
    let refused = || -> Result<(), String> {
        let plain = MultiGemm::new(vec![stream.clone()]).map_err(s)?;
        let cfg = GemmConfig::new(64, 64, 64);
        let buf = || stream.alloc_zeros::<f32>(64 * 64).map_err(d);
        let (a, b, mut c) = (vec![buf()?], vec![buf()?], vec![buf()?]);
        match plain.gemm_reduced(&cfg, &a, &b, &mut c) {
            Err(GemmError::NoNccl { .. }) => {}
            other => return Err(format!("no communicators: {:?}", other.map(|_| ()))),
        }
        let two = vec![stream.clone(), ctx.new_stream().map_err(d)?];
        match MultiGemm::with_nccl(two) {
            Err(GemmError::SameGpu {
                first: 0,
                second: 1,
                ordinal: 0,
            }) => Ok(()),
            other => Err(format!("two ranks on one GPU: {:?}", other.map(|_| ()))),
        }
    };
    out.push(("multi_nccl_refusals".into(), refused()));
    out
}

/// The NCCL calls over two GPUs, where the machine has them (skipped,
/// loudly, where it has one): a K split reduced (with C's rows fewer than
/// a unit per device, so that one device owns none), A gathered (with
/// fewer chunks than devices), operands scattered and C collected, and a
/// host call cut by `fitting`. Every device's result is checked against
/// the reference.
fn library_multi_gpus() -> Named {
    use rust_gemm::GemmError;
    use rust_gemm::multi::{Gather, MultiGemm, Split};
    let count = rust_gemm::gpu::device_count().unwrap_or(0);
    if count < 2 {
        eprintln!("*** SKIPPED: multi_gpus: needs 2 GPUs, this machine has {count} ***");
        return Named::new();
    }
    let run = || -> Result<(), String> {
        let s = |e: GemmError| e.to_string();
        let d = |e: cudarc::driver::DriverError| e.to_string();
        let streams = (0..2)
            .map(|g| cudarc::driver::CudaContext::new(g).and_then(|c| c.new_stream()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(d)?;
        let multi = match MultiGemm::with_nccl(streams.clone()) {
            Err(GemmError::NcclMissing) => {
                eprintln!("*** SKIPPED: multi_gpus: the NCCL library is not installed here ***");
                return Ok(());
            }
            other => other.map_err(s)?,
        };
        let check = check_f32;
        for cfg in [
            GemmConfig::new(100, 300, 1000).scalars(0.5, -1.0),
            GemmConfig::new(300, 260, 2000)
                .layout(Layout::ColMajor)
                .op_a(Op::T),
        ] {
            let (la, lb, lc) = lens(&cfg);
            let (a, b, before) = (values(la, 101), values(lb, 102), values(lc, 103));
            let parts = rust_gemm::multi::split(&cfg, 2, Split::K).map_err(s)?;
            let (mut da, mut db, mut dc) = (Vec::new(), Vec::new(), Vec::new());
            for (g, st) in streams.iter().enumerate() {
                let p = parts.iter().find(|p| p.device == g).unwrap_or(&parts[0]);
                da.push(st.clone_htod(&p.a_of(&a).map_err(s)?).map_err(d)?);
                db.push(st.clone_htod(&p.b_of(&b).map_err(s)?).map_err(d)?);
                dc.push(st.clone_htod(&before).map_err(d)?);
            }
            multi.gemm_reduced(&cfg, &da, &db, &mut dc).map_err(s)?;
            let c0 = streams[0].clone_dtoh(&dc[0]).map_err(d)?;
            let c1 = streams[1].clone_dtoh(&dc[1]).map_err(d)?;
            check(&cfg, &a, &b, &before, &c0)?;
            if c0.iter().zip(&c1).any(|(x, y)| x.to_bits() != y.to_bits()) {
                return Err(format!("{cfg:?}: the devices' reduced C differ"));
            }
        }
        for m in [200, 100] {
            let cfg = GemmConfig::new(m, 300, 150);
            let (la, lb, lc) = lens(&cfg);
            let (a, b, before) = (values(la, 111), values(lb, 112), values(lc, 113));
            let plan = Gather::of(&cfg, 2).map_err(s)?;
            let (mut da, mut db, mut dc) = (Vec::new(), Vec::new(), Vec::new());
            for (g, st) in streams.iter().enumerate() {
                let mut mine = vec![f32::NAN; la];
                if g < plan.chunks.len() {
                    let span = plan.a_span(g);
                    mine[span.clone()].copy_from_slice(&a[span]);
                }
                let p = plan
                    .parts
                    .iter()
                    .find(|p| p.device == g)
                    .unwrap_or(&plan.parts[0]);
                da.push(st.clone_htod(&mine).map_err(d)?);
                db.push(st.clone_htod(&p.b_of(&b).map_err(s)?).map_err(d)?);
                dc.push(
                    st.clone_htod(&p.c_of(&before, 0.0).map_err(s)?)
                        .map_err(d)?,
                );
            }
            multi.gather_gemm(&cfg, &mut da, &db, &mut dc).map_err(s)?;
            let mut after = before.clone();
            for p in &plan.parts {
                let shard = streams[p.device].clone_dtoh(&dc[p.device]).map_err(d)?;
                p.place(&shard, &mut after).map_err(s)?;
            }
            check(&cfg, &a, &b, &before, &after)?;
        }
        // Scattered from either device: row-major and padded
        // column-major with A transposed, every cut, and m = 100 (one
        // part); a K split's partials summed on the host.
        let calls = [
            GemmConfig::new(300, 500, 200).op_b(Op::T).scalars(0.5, 2.0),
            GemmConfig::new(260, 300, 400)
                .layout(Layout::ColMajor)
                .op_a(Op::T)
                .lds(410, 270, 265),
            GemmConfig::new(100, 300, 100),
        ];
        for (root, cfg) in [0, 1]
            .into_iter()
            .flat_map(|r| calls.iter().map(move |c| (r, c)))
        {
            let (la, lb, lc) = lens(cfg);
            let (a, b, before) = (values(la, 121), values(lb, 122), values(lc, 123));
            let up = |v: &[f32]| streams[root].clone_htod(v).map_err(d);
            let (da, db) = (up(&a)?, up(&b)?);
            let grids = [
                Split::Grid { rows: 2, cols: 1 },
                Split::Grid { rows: 1, cols: 2 },
            ];
            for how in [Split::Columns, Split::Rows, Split::K]
                .into_iter()
                .chain(grids)
            {
                let mut dc = up(&before)?;
                let mut sh = (multi.scatter(cfg, how, root, (&da, &db, &dc))).map_err(s)?;
                (multi.gemm(cfg, how, &sh.a, &sh.b, &mut sh.c)).map_err(s)?;
                let after = if how == Split::K {
                    let mut partials = Vec::new();
                    for p in &sh.parts {
                        partials.push(streams[p.device].clone_dtoh(&sh.c[p.device]).map_err(d)?);
                    }
                    rust_gemm::multi::sum_partials(&partials).map_err(s)?
                } else {
                    multi.collect(&sh, root, &mut dc).map_err(s)?;
                    streams[root].clone_dtoh(&dc).map_err(d)?
                };
                check(cfg, &a, &b, &before, &after)
                    .map_err(|e| format!("root {root}, {how:?}: {e}"))?;
            }
        }
        let cfg = GemmConfig::new(300, 500, 200).op_b(Op::T).scalars(0.5, 2.0);
        let (la, lb, lc) = lens(&cfg);
        let (a, b, before) = (values(la, 131), values(lb, 132), values(lc, 133));
        let mut after = before.clone();
        multi.gemm_host(&cfg, &a, &b, &mut after).map_err(s)?;
        check(&cfg, &a, &b, &before, &after)
    };
    vec![("multi_gpus_nccl".into(), run())]
}

/// Calls captured into a CUDA graph and replayed: a split-K call (its
/// workspace reserved by the documented call, after a capture without it
/// fails with the typed error and enqueues nothing, its workspace being
/// checked before any launch), a 16-bit call (on
/// Hopper a TMA kernel: its tensor maps made by a call before the
/// capture) and one that takes padded copies. The graph holds kernel
/// launches only (no allocation, copy or synchronization); each replay
/// on new values in the same buffers gives every C right.
fn library_graph() -> Named {
    use cudarc::driver::sys;
    let mut out = Named::new();
    let run = || -> Result<Named, String> {
        let e = |e: cudarc::driver::DriverError| e.to_string();
        let g = |e: rust_gemm::GemmError| e.to_string();
        let ctx = cudarc::driver::CudaContext::new(0).map_err(e)?;
        // SAFETY: this context's buffers are used on one stream only.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().map_err(e)?;
        let sgemm = Sgemm::new(stream.clone()).map_err(g)?;
        let mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
        let flags = sys::CUgraphInstantiate_flags(0);
        let deep = GemmConfig::new(256, 256, 8192);
        let mut split = Resident::<f32, f32>::new(&stream, &deep, 0, 11)?;
        let mut named = Named::new();
        // What the split needs, and what a capture does without it.
        let need = sgemm
            .workspace_for(&deep, lens(&deep), Storage::F32)
            .map_err(g)?;
        stream.begin_capture(mode).map_err(e)?;
        let unprepared = split.run(&sgemm);
        let empty = stream.end_capture(flags).map_err(e)?;
        let want = "capturing a CUDA graph";
        named.push((
            "graph_capture_without_workspace_is_refused".into(),
            match (unprepared, need) {
                (_, 0) => Err("Auto does not split 256x256x8192".into()),
                (Ok(choice), _) => Err(format!("{choice} was captured without a workspace")),
                (Err(e), _) if !e.to_string().contains(want) => {
                    Err(format!("'{e}' does not say '{want}'"))
                }
                (Err(_), _) => match empty.map(|graph| graph_nodes(&graph)).transpose()? {
                    Some(nodes) if !nodes.is_empty() => {
                        Err(format!("the refused call enqueued {nodes:?}"))
                    }
                    _ => Ok(()),
                },
            },
        ));
        sgemm.reserve_workspace(need).map_err(g)?;
        // The 16-bit calls once before the capture: tensor maps, copies.
        let aligned = GemmConfig::new(256, 256, 256).scalars(1.5, 0.5);
        let mut aligned = Resident::<bf16, f32>::new(&stream, &aligned, 0, 12)?;
        let mut odd = Resident::<bf16, bf16>::new(&stream, &GemmConfig::new(257, 260, 36), 0, 13)?;
        for call in [aligned.run(&sgemm), odd.run(&sgemm)] {
            call.map_err(g)?;
        }
        stream.synchronize().map_err(e)?;
        stream.begin_capture(mode).map_err(e)?;
        let captured = [split.run(&sgemm), aligned.run(&sgemm), odd.run(&sgemm)];
        let graph = stream.end_capture(flags).map_err(e)?;
        let choices = captured
            .into_iter()
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("a capture after the warm-up failed: {e}"))?;
        let graph = graph.ok_or("the capture made no graph")?;
        let nodes = graph_nodes(&graph)?;
        named.push((
            "graph_holds_kernel_launches_only".into(),
            if nodes.is_empty() || nodes.iter().any(|t| *t != "kernel") {
                Err(format!("the graph's nodes: {nodes:?}"))
            } else {
                Ok(())
            },
        ));
        for replay in 0..3u64 {
            split.refill(&stream, 20 + replay)?;
            aligned.refill(&stream, 30 + replay)?;
            odd.refill(&stream, 40 + replay)?;
            graph.launch().map_err(e)?;
            let checked = split
                .check(&stream, choices[0])
                .and_then(|()| aligned.check(&stream, choices[1]))
                .and_then(|()| odd.check(&stream, choices[2]));
            named.push((
                format!(
                    "graph_replay{replay}_{}_{}_{}",
                    choices[0].kernel.name, choices[1].kernel.name, choices[2].kernel.name
                ),
                checked,
            ));
        }
        Ok(named)
    };
    match run() {
        Ok(named) => out.extend(named),
        Err(e) => out.push(("graph".into(), Err(e))),
    }
    out
}

/// The types of a graph's nodes (`kernel`, or the driver's name of any
/// other type).
fn graph_nodes(graph: &cudarc::driver::CudaGraph) -> Result<Vec<String>, String> {
    use cudarc::driver::sys;
    let check = |r: sys::CUresult, what: &str| match r {
        sys::CUresult::CUDA_SUCCESS => Ok(()),
        r => Err(format!("{what}: {r:?}")),
    };
    let mut count = 0usize;
    // SAFETY: a live graph; a null array asks for the count.
    check(
        unsafe { sys::cuGraphGetNodes(graph.cu_graph(), std::ptr::null_mut(), &mut count) },
        "counting the graph's nodes",
    )?;
    if count == 0 {
        return Ok(Vec::new());
    }
    let mut nodes = vec![std::ptr::null_mut(); count];
    // SAFETY: room for `count` nodes.
    check(
        unsafe { sys::cuGraphGetNodes(graph.cu_graph(), nodes.as_mut_ptr(), &mut count) },
        "listing the graph's nodes",
    )?;
    nodes
        .iter()
        .map(|&node| {
            let mut kind = sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_EMPTY;
            // SAFETY: a node of the live graph.
            check(
                unsafe { sys::cuGraphNodeGetType(node, &mut kind) },
                "reading a node's type",
            )?;
            Ok(match kind {
                sys::CUgraphNodeType::CU_GRAPH_NODE_TYPE_KERNEL => "kernel".into(),
                other => format!("{other:?}"),
            })
        })
        .collect()
}
