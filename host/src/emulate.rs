//! `host --emulate`: the main job on the CPU emulator (`kernels_gpu::emu`):
//! the same kernel code as the PTX, run with real threads and barriers,
//! verified against the same reference, checked for races, barrier misuse
//! and bad accesses, with shared-memory bank conflicts counted. No timing.
//!
//! The emulator's time grows with blocks x threads per block x barrier
//! intervals, not with the product's multiply-adds, so its size limit is
//! a time limit: before anything runs, each kernel's launch is measured
//! ([`emu::estimate`], tens of milliseconds), and a problem the kernels
//! together would take longer than [`MAX_SECONDS`] on is refused with a
//! size that fits.

use anyhow::{Result, anyhow, bail};
use harness::inputs::{self, BlockScales};
use harness::reference::Reference;
use harness::runner::Scales;
use harness::shape::Shape;
use kernels_gpu::elem::{Scaling, Storage};
use kernels_gpu::emu;
use kernels_gpu::launch::KernelSpec;
use serde_json::json;

/// The longest run accepted, as estimated: all its kernels together.
pub const MAX_SECONDS: f64 = 60.0;

/// A size is suggested if it is estimated to run in at most this long.
const SUGGESTED_SECONDS: f64 = 5.0;

/// Runs every kernel (each must have an emulated body: the caller leaves
/// out GPU-only kernels, and names them in `skipped`, printed once the
/// size is accepted); Ok(false) when one is wrong or its checks found anything.
pub fn run(
    shape: &Shape,
    kernels: &[&'static KernelSpec],
    skipped: &[String],
    seed: u64,
    as_json: bool,
) -> Result<bool> {
    check_time(shape, kernels)?;
    for line in skipped {
        eprintln!("{line}");
    }
    // The inputs and the reference of each stored type the kernels take
    // (rounded to it: the reference multiplies what the kernels read).
    // FP8 kernels get the GPU runs' scales: per tensor `Scales::TEST`,
    // per block `BlockScales::random` (the reference then multiplies the
    // dequantized values) with D's per tensor.
    type Problem = (Storage, Vec<f32>, Vec<f32>, Reference, Option<BlockScales>);
    let mut storages: Vec<Problem> = Vec::new();
    for spec in kernels {
        let storage = spec.elems.storage();
        if !storages.iter().any(|s| s.0 == storage) {
            let (a, b) = inputs::random_inputs(shape, storage, seed)?;
            let blocks =
                (storage.scaling == Scaling::Blocks).then(|| BlockScales::random(shape, seed));
            let reference = match &blocks {
                Some(blocks) => {
                    let (a, b) = blocks.dequantize(shape, &a, &b);
                    Reference::new(*shape, &a, &b, seed)
                }
                None => Reference::new(*shape, &a, &b, seed),
            };
            storages.push((storage, a, b, reference, blocks));
        }
    }
    if !as_json {
        println!(
            "CPU emulation (kernels-gpu's own code on OS threads, no GPU, no timing)\n\
             Problem  C[{m}x{n}] = A[{m}x{k}] * B[{k}x{n}], inputs uniform in [-1, 1) from seed {seed}{rounded}",
            m = shape.m,
            n = shape.n,
            k = shape.k,
            rounded = if storages.iter().any(|s| s.0 != Storage::F32) {
                ", rounded to each kernel's stored types"
            } else {
                ""
            }
        );
    }
    let mut all_ok = true;
    let mut entries = Vec::new();
    for spec in kernels {
        let body = spec
            .emulated()
            .map_err(|why| anyhow!("{}: {why}", spec.name))?;
        let (storage, a, b, reference, blocks) = storages
            .iter()
            .find(|s| s.0 == spec.elems.storage())
            .expect("inputs made for every kernel's storage above");
        let (scales, factor) = emulated_scales(*storage, blocks.as_ref());
        let dims = (shape.m, shape.n, shape.k);
        let report = emu::run_gemm_scaled(spec, body, a, b, dims, &scales);
        let v = reference.check_scaled(&report.c, spec.elems, factor);
        let ok = v.passed && report.is_clean();
        all_ok &= ok;
        if as_json {
            entries.push(json!({
                "kernel": spec.name,
                "verification": v,
                "clean": report.is_clean(),
                "races": report.races.len(),
                "barrier_errors": report.barrier_errors.len(),
                "bad_accesses": report.bad_accesses.len(),
                "double_writes": report.double_writes.len(),
                "panics": report.panics.len(),
                "shared_load_requests": report.banks.loads.requests,
                "shared_load_bank_conflicts": report.banks.loads.conflicts,
                "shared_store_requests": report.banks.stores.requests,
                "shared_store_bank_conflicts": report.banks.stores.conflicts,
            }));
        } else {
            println!(
                "\n{}: {}\n  verify   {}  max error {:.2e} (tolerance {:.0e}), {} elements checked; {} non-finite\n  {report}",
                spec.name,
                spec.summary,
                if v.passed { "PASS" } else { "FAIL" },
                v.max_error,
                v.tolerance,
                v.checked,
                v.nonfinite,
            );
        }
    }
    if as_json {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &json!({ "mode": "emulate", "shape": shape, "seed": seed, "kernels": entries })
            )?
        );
    } else if !all_ok {
        eprintln!("error: a kernel failed on the emulator (see FAIL or the findings above)");
    }
    Ok(all_ok)
}

/// The scales an FP8 kernel of `storage` runs with on the emulator, and
/// the factor between the reference's product and its C (as
/// `runner::Buffers::scale` on the GPU): none and 1 without scales.
fn emulated_scales(storage: Storage, blocks: Option<&BlockScales>) -> (emu::EmuScales, f64) {
    if !storage.scaled() {
        return (emu::EmuScales::default(), 1.0);
    }
    let [a, b, d] = Scales::TEST;
    match blocks {
        Some(blocks) => (
            emu::EmuScales {
                a: Some(blocks.a.clone()),
                b: Some(blocks.b.clone()),
                d: Some(vec![d]),
            },
            f64::from(d),
        ),
        None => (
            emu::EmuScales {
                a: Some(vec![a]),
                b: Some(vec![b]),
                d: Some(vec![d]),
            },
            [a, b, d].iter().map(|&x| f64::from(x)).product(),
        ),
    }
}

/// Refuses `shape` if `kernels` would together take longer than
/// [`MAX_SECONDS`] on the emulator, naming a size that fits.
fn check_time(shape: &Shape, kernels: &[&'static KernelSpec]) -> Result<()> {
    let estimates = kernels
        .iter()
        .filter_map(|spec| Some((spec, spec.emulated().ok()?)))
        .map(|(spec, body)| emu::estimate(spec, body, shape.m, shape.n, shape.k))
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(|e| {
            anyhow!(
                "the CPU emulator could not start its threads ({e}): it needs one per thread \
                 of a block, up to 1024; raise this process's limits on threads or memory"
            )
        })?;
    let seconds = |s: Shape| -> f64 { estimates.iter().map(|e| e.seconds_at(s.m, s.n, s.k)).sum() };
    let total = seconds(*shape);
    if total <= MAX_SECONDS {
        return Ok(());
    }
    let which = match kernels {
        [one] => format!("kernel {}", one.name),
        _ => format!("{} kernels", kernels.len()),
    };
    bail!(
        "{shape} would take about {} on the CPU emulator for {which} (the limit is {:.0} s): \
         choose {} or smaller",
        duration(total),
        MAX_SECONDS,
        smaller(shape, |s| seconds(s) <= SUGGESTED_SECONDS)
    )
}

/// The arguments of a problem like `shape` that `fits`: for a square
/// problem the largest square (`--n S`); otherwise `shape` with one
/// dimension cut, the largest one whose cut alone is enough (`--k K`),
/// or else with every dimension capped (`--m M --n N --k K`). `fits` must
/// hold for all smaller sizes if it holds for one.
fn smaller(shape: &Shape, fits: impl Fn(Shape) -> bool) -> String {
    let Shape { m, n, k } = *shape;
    if shape.is_square() {
        let side = largest(n, |s| fits(Shape { m: s, n: s, k: s }));
        return format!("--n {side}");
    }
    // Each dimension: its flag, its size, and the problem with it set.
    type Cut = fn(Shape, usize) -> Shape;
    let mut cuts: [(&str, usize, Cut); 3] = [
        ("k", k, |s, k| Shape { k, ..s }),
        ("n", n, |s, n| Shape { n, ..s }),
        ("m", m, |s, m| Shape { m, ..s }),
    ];
    cuts.sort_by_key(|&(_, size, _)| std::cmp::Reverse(size));
    for (name, size, cut) in cuts {
        if fits(cut(*shape, 1)) {
            return format!("--{name} {}", largest(size, |v| fits(cut(*shape, v))));
        }
    }
    let cap = largest(m.max(n).max(k), |c| {
        fits(Shape {
            m: m.min(c),
            n: n.min(c),
            k: k.min(c),
        })
    });
    format!("--m {} --n {} --k {}", m.min(cap), n.min(cap), k.min(cap))
}

/// The largest `v` in `1..=max` with `fits(v)`, rounded down to two
/// significant digits (1 if none fits); `fits` must be true below any
/// `v` it is true for.
fn largest(max: usize, fits: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (1, max);
    while lo < hi {
        let mid = hi - (hi - lo) / 2;
        if fits(mid) { lo = mid } else { hi = mid - 1 }
    }
    let mut unit = 1;
    while lo / unit >= 100 {
        unit *= 10;
    }
    lo / unit * unit
}

/// `seconds` in words: "45 s", "12 minutes", "3 hours", "40 days", "2e9 years".
fn duration(seconds: f64) -> String {
    const MINUTE: f64 = 60.0;
    const HOUR: f64 = 60.0 * MINUTE;
    const DAY: f64 = 24.0 * HOUR;
    const YEAR: f64 = 365.0 * DAY;
    match seconds {
        s if s < 2.0 * MINUTE => format!("{s:.0} s"),
        s if s < 2.0 * HOUR => format!("{:.0} minutes", s / MINUTE),
        s if s < 2.0 * DAY => format!("{:.0} hours", s / HOUR),
        s if s < 2.0 * YEAR => format!("{:.0} days", s / DAY),
        s if s < 1e6 * YEAR => format!("{:.0} years", s / YEAR),
        s => format!("{:.0e} years", s / YEAR),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cost in multiply-adds, with a budget of `macs`.
    fn under(macs: usize) -> impl Fn(Shape) -> bool {
        move |s: Shape| s.m * s.n * s.k <= macs
    }

    #[test]
    fn a_square_problem_gets_a_square() {
        let shape = Shape::new(1024, 1024, 1024).unwrap();
        // 96^3 = 884,736 <= 900,000 < 97^3, and 96 has two digits.
        assert_eq!(smaller(&shape, under(900_000)), "--n 96");
        // 215^3 <= 10^7 < 216^3: 215 rounds down to 210.
        assert_eq!(smaller(&shape, under(10_000_000)), "--n 210");
    }

    #[test]
    fn otherwise_the_largest_dimension_that_is_enough_is_cut() {
        let long_k = Shape::new(1, 1, 1 << 20).unwrap();
        assert_eq!(smaller(&long_k, under(40_000)), "--k 40000");
        let wide = Shape::new(1, 1 << 20, 1).unwrap();
        assert_eq!(smaller(&wide, under(123_456)), "--n 120000");
        // No one dimension cut to 1 brings 64 x 64 x 4096 under 1,000:
        // every dimension is capped (10 x 10 x 10).
        let shape = Shape::new(64, 64, 4096).unwrap();
        assert_eq!(smaller(&shape, under(1_000)), "--m 10 --n 10 --k 10");
        // k alone can: 64 x 64 x k <= 100,000 for k <= 24.
        assert_eq!(smaller(&shape, under(100_000)), "--k 24");
    }

    #[test]
    fn durations_read_as_words() {
        assert_eq!(duration(61.4), "61 s");
        assert_eq!(duration(600.0), "10 minutes");
        assert_eq!(duration(3.0 * 3600.0), "3 hours");
        assert_eq!(duration(40.0 * 86400.0), "40 days");
        assert_eq!(duration(100.0 * 365.0 * 86400.0), "100 years");
        assert_eq!(duration(3e16), "1e9 years");
    }
}
