//! `host --emulate`: the main job on the CPU emulator (`kernels_gpu::emu`):
//! the same kernel code as the PTX, run with real threads and barriers,
//! verified against the same reference, checked for races, barrier misuse
//! and bad accesses, with shared-memory bank conflicts counted. No timing.

use anyhow::{Result, bail};
use host::inputs;
use host::reference::Reference;
use host::shape::Shape;
use kernels_gpu::emu;
use kernels_gpu::launch::KernelSpec;
use serde_json::json;

/// Emulation runs one OS thread per GPU thread; beyond this many
/// multiply-adds it takes minutes.
pub const MAX_MACS: f64 = (1u64 << 24) as f64;

/// Runs every kernel; Ok(false) when one is wrong or its checks found anything.
pub fn run(
    shape: &Shape,
    kernels: &[&'static KernelSpec],
    seed: u64,
    as_json: bool,
) -> Result<bool> {
    let macs = shape.m as f64 * shape.n as f64 * shape.k as f64;
    if macs > MAX_MACS {
        bail!(
            "{shape} is too large for the CPU emulator (at most {} multiply-adds, e.g. --n 256): \
             choose smaller sizes",
            MAX_MACS as u64
        );
    }
    let (a, b) = inputs::random_inputs(shape, seed)?;
    let reference = Reference::new(*shape, &a, &b, seed);
    if !as_json {
        println!(
            "CPU emulation (kernels-gpu's own code on OS threads, no GPU, no timing)\n\
             Problem  C[{m}x{n}] = A[{m}x{k}] * B[{k}x{n}], inputs uniform in [-1, 1) from seed {seed}",
            m = shape.m,
            n = shape.n,
            k = shape.k
        );
    }
    let mut all_ok = true;
    let mut entries = Vec::new();
    for spec in kernels {
        let report = emu::run_gemm(spec, spec.body, &a, &b, shape.m, shape.n, shape.k);
        let v = reference.check(&report.c, spec.precision);
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
