//! `bench --devices N` (issue 25): the library's multi-device calls
//! (`rust_gemm::multi`) over GPUs 0 to N - 1, next to the same call on
//! GPU 0 alone, in FP32 and BF16 (f32 C):
//!
//! - `columns`: C and B cut by columns, A whole on every device
//!   (`MultiGemm::gemm` with `Split::Columns`);
//! - `panels RxC`, where N has such a grid (4, 6, 8, ...): C in panels,
//!   each device a shard of every operand (`Split::Grid`);
//! - `k-reduced`: K cut over the devices, the partial C's reduced on them
//!   through NCCL, every device ending with C (`MultiGemm::gemm_reduced`);
//! - `gather`: A cut by rows and gathered through NCCL while the product
//!   runs, B and C by columns (`MultiGemm::gather_gemm`).
//!
//! Each call is verified first (every device's result against the f64
//! reference on sampled elements, A's rows a device does not own NaN
//! before a gather, and a reduced C the same bits on every device), then
//! timed. The time of a call over several GPUs is the host's wall clock
//! from enqueue to every stream's end (CUDA events do not span devices),
//! its median over the repetitions, after warm-up; at 16384^3 a call
//! takes tens of milliseconds, so the microseconds of synchronization do
//! not count. Scaling efficiency is `t(1 GPU) / (N t(N GPUs))`; a
//! gather's `hidden` is the columns split's time over its own (the same
//! products with A already whole, in one call per device rather than one
//! per chunk: the gather's cost and the chunking's together), 1 when they
//! cost nothing. Without NCCL installed, the columns and panels rows run
//! alone.

use std::time::Instant;

use anyhow::{Context, Result, bail};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DeviceRepr};
use cudarc::nccl::NcclType;
use harness::reference::check_gemm;
use kernels_gpu::elem::{Elem, Elems, Math};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rust_gemm::blas::{GemmConfig, GemmElement};
use rust_gemm::multi::{Gather, MultiGemm, Split, split};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// One measured call.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DeviceRow {
    /// `columns`, `k-reduced` or `gather`.
    pub split: String,
    /// A and B's type ("f32" or "bf16"; C is f32).
    pub types: String,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub passed: bool,
    /// Largest error over the sampled elements, in the check's units.
    pub max_error: f64,
    /// Median of the call on GPU 0 alone, and over the devices (ms).
    pub one_ms: Option<f64>,
    pub multi_ms: Option<f64>,
    /// `one_ms / (devices * multi_ms)`.
    pub efficiency: Option<f64>,
    /// For `gather`: the columns split's time over this one's.
    pub hidden: Option<f64>,
    /// TFLOP/s over the devices.
    pub tflops: Option<f64>,
}

/// A run of `--devices`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DevicesResults {
    pub date: String,
    pub gpu: String,
    pub devices: usize,
    pub rows: Vec<DeviceRow>,
}

impl DevicesResults {
    pub fn all_verified(&self) -> bool {
        self.rows.iter().all(|r| r.passed)
    }
}

/// Timing settings.
pub struct Budget {
    pub warmup: usize,
    pub min_reps: usize,
    pub ms: f64,
    pub seed: u64,
}

/// The element types the runs use, with their values as f32 after
/// rounding (what the reference multiplies).
trait Element: GemmElement + NcclType + DeviceRepr + Copy + Unpin {
    const NAME: &'static str;
    const ELEMS: Elems;
    fn of(x: f32) -> Self;
    fn value(self) -> f32;
}

impl Element for f32 {
    const NAME: &'static str = "f32";
    const ELEMS: Elems = Elems::FP32;
    fn of(x: f32) -> Self {
        x
    }
    fn value(self) -> f32 {
        self
    }
}

impl Element for half::bf16 {
    const NAME: &'static str = "bf16";
    const ELEMS: Elems = Elems::new(Elem::Bf16, Elem::Bf16, Elem::F32, Math::Bf16);
    fn of(x: f32) -> Self {
        half::bf16::from_f32(x)
    }
    fn value(self) -> f32 {
        self.to_f32()
    }
}

/// The devices' streams and the handle over them.
struct Devices {
    streams: Vec<Arc<CudaStream>>,
    multi: MultiGemm,
    /// NCCL is installed (the k-reduced and gather rows run).
    nccl: bool,
}

impl Devices {
    fn sync(&self) -> Result<()> {
        for s in &self.streams {
            s.synchronize()?;
        }
        Ok(())
    }
}

/// Warm-up lasts at least this long, whatever `--warmup` says: an idle
/// H200 starts at a low clock, and a first variant warmed up by two
/// calls of 1.7 ms ran 10 % slower than the next one timed (a 1-GPU
/// "split" at 1.10 efficiency, twenty-seventh session).
const WARMUP_MS: f64 = 200.0;

/// Median wall-clock milliseconds of `call` (enqueue to every stream's
/// end), after `warmup` calls and at least [`WARMUP_MS`] of them; at
/// least `min_reps` calls, about `ms` in all.
fn time(budget: &Budget, devices: &Devices, mut call: impl FnMut() -> Result<()>) -> Result<f64> {
    let warm = Instant::now();
    let mut calls = 0;
    while calls < budget.warmup || warm.elapsed().as_secs_f64() * 1e3 < WARMUP_MS {
        call()?;
        devices.sync()?;
        calls += 1;
    }
    let mut times = Vec::new();
    let start = Instant::now();
    while times.len() < budget.min_reps || start.elapsed().as_secs_f64() * 1e3 < budget.ms {
        let t = Instant::now();
        call()?;
        devices.sync()?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
        if times.len() >= 1000 {
            break;
        }
    }
    if times.is_empty() {
        bail!("no timed call: give --min-reps or --budget-ms above 0");
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

/// `--devices N` at `sizes` (m, n, k).
pub fn run(
    devices: usize,
    sizes: &[(usize, usize, usize)],
    budget: &Budget,
) -> Result<DevicesResults> {
    if devices == 0 {
        bail!("--devices 0: give at least 1");
    }
    let count = rust_gemm::gpu::device_count()?;
    if devices > count {
        bail!("--devices {devices}: this machine has {count} GPU(s); give at most {count}");
    }
    let mut streams = Vec::with_capacity(devices);
    for d in 0..devices {
        let ctx = CudaContext::new(d).with_context(|| format!("opening GPU {d}"))?;
        streams.push(ctx.new_stream()?);
    }
    let (multi, nccl) = match MultiGemm::with_nccl(streams.clone()) {
        Ok(m) => (m, true),
        Err(rust_gemm::GemmError::NcclMissing) => {
            eprintln!("devices: NCCL is not installed: the k-reduced and gather rows are skipped");
            (MultiGemm::new(streams.clone())?, false)
        }
        Err(e) => return Err(e.into()),
    };
    let gpu = multi
        .handle(0)
        .context("one device at least")?
        .device()
        .name
        .clone();
    let devs = Devices {
        streams,
        multi,
        nccl,
    };
    let mut rows = Vec::new();
    for &(m, n, k) in sizes {
        let cfg = GemmConfig::new(m, n, k).scalars(1.0, 0.5);
        rows.extend(run_size::<f32>(&devs, &cfg, budget)?);
        rows.extend(run_size::<half::bf16>(&devs, &cfg, budget)?);
    }
    Ok(DevicesResults {
        date: crate::utc_now(),
        gpu,
        devices,
        rows,
    })
}

/// Random values of `T` and the same values as f32.
fn random<T: Element>(len: usize, rng: &mut SmallRng) -> (Vec<T>, Vec<f32>) {
    let t: Vec<T> = (0..len)
        .map(|_| T::of(rng.random_range(-1.0f32..1.0)))
        .collect();
    let f = t.iter().map(|x| x.value()).collect();
    (t, f)
}

/// The three splits of `cfg` in `T`, each verified, then timed next to
/// the whole call on GPU 0.
fn run_size<T: Element>(
    devs: &Devices,
    cfg: &GemmConfig,
    budget: &Budget,
) -> Result<Vec<DeviceRow>> {
    let (la, lb, lc) = cfg.buffer_lens();
    let mut rng = SmallRng::seed_from_u64(budget.seed);
    let (a, a32) = random::<T>(la, &mut rng);
    let (b, b32) = random::<T>(lb, &mut rng);
    let c: Vec<f32> = (0..lc).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    let n_dev = devs.streams.len();
    let s0 = &devs.streams[0];
    let one = devs.multi.handle(0).context("device 0")?;
    let (da, db) = (s0.clone_htod(&a)?, s0.clone_htod(&b)?);
    let mut dc = s0.clone_htod(&c)?;
    let one_ms = time(budget, devs, || {
        Ok(one.gemm(cfg, &da, &db, &mut dc).map(|_| ())?)
    })?;
    drop((da, db, dc));
    let flops = 2.0 * (cfg.m * cfg.n * cfg.k) as f64;
    let check =
        |after: &[f32]| check_gemm(cfg, (&a32, &b32), (&c, after), T::ELEMS, 1024, budget.seed);
    let row = |split: &str, v: (bool, f64), ms: Option<f64>| DeviceRow {
        split: split.into(),
        types: T::NAME.into(),
        m: cfg.m,
        n: cfg.n,
        k: cfg.k,
        passed: v.0,
        max_error: v.1,
        one_ms: Some(one_ms),
        multi_ms: ms,
        efficiency: ms.map(|t| one_ms / (n_dev as f64 * t)),
        hidden: None,
        tflops: ms.map(|t| flops / (t * 1e-3) / 1e12),
    };
    let up = |d: usize, v: &[T]| -> Result<CudaSlice<T>> { Ok(devs.streams[d].clone_htod(v)?) };
    let up32 =
        |d: usize, v: &[f32]| -> Result<CudaSlice<f32>> { Ok(devs.streams[d].clone_htod(v)?) };
    let mut rows = Vec::new();

    // Columns, and the first grid of panels where the count has one.
    let placed = |how: Split| -> Result<(Option<f64>, (bool, f64))> {
        let parts = split(cfg, n_dev, how)?;
        let part_of = |d: usize| parts.iter().find(|p| p.device == d).unwrap_or(&parts[0]);
        let (mut pa, mut pb, mut pc) = (Vec::new(), Vec::new(), Vec::new());
        for d in 0..n_dev {
            pa.push(up(d, &part_of(d).a_of(&a)?)?);
            pb.push(up(d, &part_of(d).b_of(&b)?)?);
            pc.push(up32(d, &part_of(d).c_of(&c, 0.0)?)?);
        }
        devs.multi.gemm(cfg, how, &pa, &pb, &mut pc)?;
        let mut after = c.clone();
        for part in &parts {
            let shard = devs.streams[part.device].clone_dtoh(&pc[part.device])?;
            part.place(&shard, &mut after)?;
        }
        let v = check(&after);
        let ms = if v.passed {
            Some(time(budget, devs, || {
                Ok(devs.multi.gemm(cfg, how, &pa, &pb, &mut pc).map(|_| ())?)
            })?)
        } else {
            None
        };
        Ok((ms, (v.passed, v.max_error)))
    };
    let (columns_ms, v) = placed(Split::Columns)?;
    rows.push(row("columns", v, columns_ms));
    let grid = Split::all_for(n_dev)
        .into_iter()
        .find(|s| matches!(s, Split::Grid { .. }));
    if let Some(how @ Split::Grid { rows: r, cols: c }) = grid {
        let (ms, v) = placed(how)?;
        rows.push(row(&format!("panels {r}x{c}"), v, ms));
    }

    if !devs.nccl {
        return Ok(rows);
    }

    // K, reduced on the devices.
    let parts = split(cfg, n_dev, Split::K)?;
    let part_of = |d: usize| parts.iter().find(|p| p.device == d).unwrap_or(&parts[0]);
    let (mut pa, mut pb, mut pc) = (Vec::new(), Vec::new(), Vec::new());
    for d in 0..n_dev {
        pa.push(up(d, &part_of(d).a_of(&a)?)?);
        pb.push(up(d, &part_of(d).b_of(&b)?)?);
        pc.push(up32(d, &c)?);
    }
    devs.multi.gemm_reduced(cfg, &pa, &pb, &mut pc)?;
    let first = devs.streams[0].clone_dtoh(&pc[0])?;
    let mut v = check(&first);
    for (d, (stream, pc)) in devs.streams.iter().zip(&pc).enumerate().skip(1) {
        let other = stream.clone_dtoh(pc)?;
        if other
            .iter()
            .zip(&first)
            .any(|(x, y)| x.to_bits() != y.to_bits())
        {
            eprintln!("devices: device {d}'s reduced C differs from device 0's");
            v.passed = false;
        }
    }
    let ms = if v.passed {
        Some(time(budget, devs, || {
            Ok(devs
                .multi
                .gemm_reduced(cfg, &pa, &pb, &mut pc)
                .map(|_| ())?)
        })?)
    } else {
        None
    };
    rows.push(row("k-reduced", (v.passed, v.max_error), ms));
    drop((pa, pb, pc));

    // A gathered while the product runs.
    let plan = Gather::of(cfg, n_dev)?;
    let (mut pa, mut pb, mut pc) = (Vec::new(), Vec::new(), Vec::new());
    for d in 0..n_dev {
        let mut mine = vec![T::of(f32::NAN); la];
        if d < plan.chunks.len() {
            let span = plan.a_span(d);
            mine[span.clone()].copy_from_slice(&a[span]);
        }
        pa.push(up(d, &mine)?);
        let part = plan
            .parts
            .iter()
            .find(|p| p.device == d)
            .unwrap_or(&plan.parts[0]);
        pb.push(up(d, &part.b_of(&b)?)?);
        pc.push(up32(d, &part.c_of(&c, 0.0)?)?);
    }
    devs.multi.gather_gemm(cfg, &mut pa, &pb, &mut pc)?;
    let mut after = c.clone();
    for part in &plan.parts {
        let shard = devs.streams[part.device].clone_dtoh(&pc[part.device])?;
        part.place(&shard, &mut after)?;
    }
    let v = check(&after);
    let ms = if v.passed {
        Some(time(budget, devs, || {
            Ok(devs
                .multi
                .gather_gemm(cfg, &mut pa, &pb, &mut pc)
                .map(|_| ())?)
        })?)
    } else {
        None
    };
    let mut gather = row("gather", (v.passed, v.max_error), ms);
    gather.hidden = columns_ms.zip(ms).map(|(c, g)| c / g);
    rows.push(gather);
    Ok(rows)
}

/// The run as a Markdown table.
pub fn markdown(results: &DevicesResults) -> String {
    let f = |x: Option<f64>, digits: usize| x.map_or("-".into(), |x| format!("{x:.digits$}"));
    let mut s = format!(
        "Multi-device calls over {} x {} ({}), next to one GPU (`cargo xtask bench --devices {}`)\n\n\
         | split | A, B | m x n x k | verified | 1 GPU ms | {} GPUs ms | TFLOP/s | efficiency | gather hidden |\n\
         |---|---|---|---|---:|---:|---:|---:|---:|\n",
        results.devices, results.gpu, results.date, results.devices, results.devices
    );
    for r in &results.rows {
        s += &format!(
            "| {} | {} | {} x {} x {} | {} | {} | {} | {} | {} | {} |\n",
            r.split,
            r.types,
            r.m,
            r.n,
            r.k,
            if r.passed { "yes" } else { "FAIL" },
            f(r.one_ms, 2),
            f(r.multi_ms, 2),
            f(r.tflops, 1),
            f(r.efficiency, 3),
            f(r.hidden, 3),
        );
    }
    s
}
