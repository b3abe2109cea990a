//! Tables for the terminal and for the README, from [`Results`].

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, Table};
use harness::report::thousands;

use crate::results::{Kind, Results, Row, f32_storage};

fn fmt(x: Option<f64>, f: impl Fn(f64) -> String) -> String {
    x.map_or("-".into(), f)
}

/// The sizes in the order they were run.
pub fn sizes(results: &Results) -> Vec<(usize, usize, usize)> {
    let mut out: Vec<(usize, usize, usize)> = Vec::new();
    for r in &results.rows {
        if !out.contains(&(r.m, r.n, r.k)) {
            out.push((r.m, r.n, r.k));
        }
    }
    out
}

fn rows_of(results: &Results, size: (usize, usize, usize)) -> impl Iterator<Item = &Row> {
    results.rows.iter().filter(move |r| (r.m, r.n, r.k) == size)
}

fn status(r: &Row) -> String {
    if !r.verified {
        format!("FAIL ({:.1e})", r.max_error)
    } else if !r.passed() {
        format!(
            "FAIL (error {:.1}x cuBLAS {}'s)",
            r.error_over_cublas_math.unwrap_or(f64::NAN),
            r.math().yardstick().name()
        )
    } else {
        "ok".into()
    }
}

/// The max error, and for tensor-core kernels its ratio to cuBLAS's of
/// the same element types.
fn error_cell(r: &Row) -> String {
    match r.error_over_cublas_math {
        Some(x) => format!("{:.1e} ({x:.2}x)", r.max_error),
        None => format!("{:.1e}", r.max_error),
    }
}

/// Whether a run has fused rows (`--epilogue`): its tables then have the
/// fused rows' two columns.
fn has_fused(results: &Results) -> bool {
    results.rows.iter().any(|r| r.epilogue.is_some())
}

/// A fused row's two cells: its median time over its plain row's, and its
/// GFLOP/s over cuBLASLt's with the same epilogue ("-" where there is no
/// such row, e.g. an activation cuBLASLt has not).
fn fused_cells(r: &Row) -> [String; 2] {
    [
        fmt(r.fused_over_plain, |v| format!("{v:.3}")),
        fmt(r.over_cublaslt_fused, |v| format!("{v:.3}")),
    ]
}

/// The headers of [`fused_cells`].
const FUSED_HEADERS: [&str; 2] = ["fused / plain time", "fused / cuBLASLt fused GFLOP/s"];

/// One terminal table for one size.
pub fn size_table(results: &Results, size: (usize, usize, usize)) -> Table {
    let fused = has_fused(results);
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    let mut header = vec![
        "kernel",
        "check",
        "max error (x cuBLAS, same types)",
        "median ms",
        "p20-p80 ms",
        "GFLOP/s",
        "% peak",
        "% cuBLAS",
        "% cuBLAS, same types",
        "Rust/C++",
        "model GB",
        "FLOP/B",
        "model ceiling",
    ];
    if fused {
        header.extend(FUSED_HEADERS);
    }
    t.set_header(header);
    for r in rows_of(results, size) {
        let mut cells = vec![
            format!("{} ({})", r.variant, r.precision),
            status(r),
            error_cell(r),
            fmt(r.median_ms, |v| format!("{v:.3}")),
            match (r.p20_ms, r.p80_ms) {
                (Some(a), Some(b)) => format!("{a:.3}-{b:.3}"),
                _ => "-".into(),
            },
            fmt(r.gflops, thousands),
            fmt(r.percent_of_peak, |v| format!("{v:.1}")),
            fmt(r.percent_of_cublas, |v| format!("{v:.1}")),
            fmt(r.percent_of_cublas_math, |v| format!("{v:.1}")),
            fmt(r.rust_over_cuda, |v| format!("{v:.3}")),
            fmt(r.model_bytes, |v| format!("{:.2}", v / 1e9)),
            fmt(r.model_intensity, |v| format!("{v:.2}")),
            fmt(r.model_ceiling_gflops, thousands),
        ];
        if fused {
            cells.extend(fused_cells(r));
        }
        t.add_row(cells);
    }
    for i in 2..13 + 2 * usize::from(fused) {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    t
}

/// The Nsight Compute table: the model's bytes next to the measured ones.
pub fn ncu_table(results: &Results) -> Option<Table> {
    let rows: Vec<&Row> = results.rows.iter().filter(|r| r.ncu.is_some()).collect();
    if rows.is_empty() {
        return None;
    }
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header([
        "kernel",
        "size",
        "model GB",
        "DRAM read GB",
        "L2 GB",
        "smem store conflicts",
        "smem load conflicts",
        "tensor pipe %",
        "occupancy %",
    ]);
    for r in rows {
        let n = r.ncu.as_ref().unwrap();
        t.add_row([
            r.variant.clone(),
            r.size_label(),
            fmt(r.model_bytes, |v| format!("{:.1}", v / 1e9)),
            format!("{:.2}", n.dram_read_bytes / 1e9),
            format!("{:.2}", n.l2_bytes / 1e9),
            thousands(n.shared_store_bank_conflicts),
            thousands(n.shared_load_bank_conflicts),
            format!("{:.1}", n.tensor_pipe_percent),
            format!("{:.1}", n.achieved_occupancy_percent),
        ]);
    }
    Some(t)
}

/// The README's section: one table at the headline size, the ladder across
/// sizes, and where the numbers come from.
pub fn readme_markdown(results: &Results, headline: usize, plot: &str) -> String {
    let m = &results.meta;
    let tf32_peak = match (m.peak_tf32_gflops, m.tf32_flops_per_clock_per_sm) {
        (Some(p), Some(rate)) => format!(
            ", dense TF32 tensor peak {} GFLOP/s ({rate} FLOP per clock per SM, the datasheets' \
             dense TF32 rate over SMs and boost clock)",
            thousands(p)
        ),
        _ => String::new(),
    };
    // Computed from the device's own attributes in the run's metadata (the
    // rate keyed by architecture and math, `DeviceInfo::flops_per_clock_per_sm`).
    let half_peak = match (
        m.gpu.peak_gflops(kernels_gpu::elem::Math::Bf16),
        m.gpu.half_flops_per_clock_per_sm(),
    ) {
        (Some(p), Some(rate)) if results.rows.iter().any(|r| r.elems != f32_storage()) => format!(
            ", dense BF16/FP16 tensor peak {} GFLOP/s ({rate} FLOP per clock per SM: the \
             datasheets' dense 989 TFLOP/s for H100/H200 SXM over 132 SMs at 1.83 GHz)",
            thousands(p)
        ),
        _ => String::new(),
    };
    let tf32_peak = tf32_peak + &half_peak;
    let mut s = format!(
        "Measured by `cargo xtask bench` on {} ({} SMs, driver CUDA {}, FP32 peak {} GFLOP/s from the \
         device's clock{tf32_peak}), commit `{}`, {}. Median of timed launches (CUDA events, at least {} and about \
         {:.0} ms per kernel and size{}), L2 {} before each launch; every kernel verified before it was timed \
         (tensor-core kernels: within the bound of their element types in `host/src/reference.rs`, and at most {}x the error of cuBLAS of the same types on the same inputs).\n\n",
        m.gpu.name,
        m.gpu.sms,
        m.cuda_driver,
        m.peak_fp32_gflops.map_or("?".into(), thousands),
        m.git_commit,
        m.date.get(..10).unwrap_or(&m.date),
        m.settings.min_reps,
        m.settings.budget_ms,
        if m.settings.interleaved {
            "; the kernels of a size timed in interleaved rounds, so that they share the GPU's clock states"
        } else {
            ""
        },
        if m.settings.l2 == "flush" {
            "flushed"
        } else {
            "not flushed"
        },
        crate::results::MAX_ERROR_OVER_CUBLAS,
    );
    let head = (headline, headline, headline);
    let fused = has_fused(results);
    if rows_of(results, head).next().is_some() {
        let (fused_header, fused_align) = if fused {
            (
                format!(" {} | {} |", FUSED_HEADERS[0], FUSED_HEADERS[1]),
                "---:|---:|",
            )
        } else {
            (String::new(), "")
        };
        s += &format!(
            "**n = {headline}**\n\n| kernel | precision | ms | GFLOP/s | % of peak (its precision) | % of cuBLAS SGEMM | % of cuBLAS of its types | max error (x that cuBLAS's) | Rust / CUDA C++ | lesson's model: GB moved | FLOP/byte |{fused_header}\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|{fused_align}\n"
        );
        for r in rows_of(results, head) {
            let fused_cells = if fused {
                let [plain, lt] = fused_cells(r);
                format!(" {plain} | {lt} |")
            } else {
                String::new()
            };
            s += &format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |{fused_cells}\n",
                r.variant,
                r.precision,
                fmt(r.median_ms, |v| format!("{v:.2}")),
                fmt(r.gflops, thousands),
                fmt(r.percent_of_peak, |v| format!("{v:.1}")),
                fmt(r.percent_of_cublas, |v| format!("{v:.1}")),
                fmt(r.percent_of_cublas_math, |v| format!("{v:.1}")),
                error_cell(r),
                fmt(r.rust_over_cuda, |v| format!("{v:.3}")),
                fmt(r.model_bytes, |v| format!("{:.1}", v / 1e9)),
                fmt(r.model_intensity, |v| format!("{v:.2}")),
            );
        }
    }
    // The ladder: GFLOP/s of every variant at every size.
    let sizes = sizes(results);
    let mut variants: Vec<&Row> = Vec::new();
    for r in &results.rows {
        if !variants.iter().any(|v| v.variant == r.variant) {
            variants.push(r);
        }
    }
    s += "\n**GFLOP/s at every size** (square sizes are n; others m x n x k)\n\n";
    s += &size_header(&sizes);
    for v in variants {
        s += &format!("| {} |", v.variant);
        for &size in &sizes {
            let cell = rows_of(results, size)
                .find(|r| r.variant == v.variant)
                .map_or("-".into(), |r| {
                    if r.passed() {
                        fmt(r.gflops, thousands)
                    } else {
                        "FAIL".into()
                    }
                });
            s += &format!(" {cell} |");
        }
        s.push('\n');
    }
    // Rust against its CUDA C++ twin, same size, same run.
    let twinned: Vec<&str> = {
        let mut names: Vec<&str> = Vec::new();
        for r in results.rows.iter().filter(|r| r.rust_over_cuda.is_some()) {
            if !names.contains(&r.variant.as_str()) {
                names.push(&r.variant);
            }
        }
        names
    };
    if !twinned.is_empty() {
        s += "\n**Rust / CUDA C++ at every size** (GFLOP/s of the Rust kernel over its twin's: same \
              algorithm, tiles and launch, compiled by NVRTC; docs/rust-vs-cuda.md)\n\n";
        s += &size_header(&sizes);
        for name in twinned {
            s += &format!("| {name} |");
            for &size in &sizes {
                let cell = rows_of(results, size)
                    .find(|r| r.variant == name)
                    .and_then(|r| r.rust_over_cuda)
                    .map_or("-".into(), |v| format!("{v:.3}"));
                s += &format!(" {cell} |");
            }
            s.push('\n');
        }
    }
    if results.rows.iter().any(|r| r.ncu.is_some()) {
        s += "\n**The lesson's model next to Nsight Compute** (`--ncu`, `ncu --clock-control none`)\n\n\
              | kernel | size | model: GB from DRAM | measured DRAM read GB | L2 traffic GB | shared-store bank conflicts | shared-load bank conflicts | tensor pipe busy % | achieved occupancy % |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
        for r in results.rows.iter().filter(|r| r.ncu.is_some()) {
            let n = r.ncu.as_ref().unwrap();
            s += &format!(
                "| {} | {} | {} | {:.2} | {:.2} | {} | {} | {:.1} | {:.1} |\n",
                r.variant,
                r.size_label(),
                fmt(r.model_bytes, |v| format!("{:.1}", v / 1e9)),
                n.dram_read_bytes / 1e9,
                n.l2_bytes / 1e9,
                thousands(n.shared_store_bank_conflicts),
                thousands(n.shared_load_bank_conflicts),
                n.tensor_pipe_percent,
                n.achieved_occupancy_percent,
            );
        }
    }
    if fused {
        s += "\nFused rows (`--epilogue`, named `kernel + bias + activation`): the kernel with a bias \
              per column of C and the activation fused into its epilogue, on the same inputs as its \
              plain row, verified against `act(A B + bias)` in f64 and timed in the same rounds; \
              \"fused / plain time\" is its median over the plain row's, \"fused / cuBLASLt fused \
              GFLOP/s\" its GFLOP/s over cuBLASLt's with the same epilogue (`CUBLASLT_EPILOGUE_BIAS`, \
              `RELU_BIAS`, `GELU_BIAS`; cuBLASLt has no erf GELU and no SiLU).\n";
    }
    if !m.notes.is_empty() {
        s += &format!("\nCopies before the kernel: {}\n", m.notes.join("; "));
    }
    if !m.skipped.is_empty() {
        s += &format!("\nSkipped: {}\n", m.skipped.join("; "));
    }
    s += &format!("\n![GFLOP/s against n]({plot})\n");
    s
}

/// `| kernel | 256 | ... |` and its alignment row, one column per size.
fn size_header(sizes: &[(usize, usize, usize)]) -> String {
    let mut s = String::from("| kernel |");
    for &(mm, nn, kk) in sizes {
        s += &if mm == nn && nn == kk {
            format!(" {nn} |")
        } else {
            format!(" {mm}x{nn}x{kk} |")
        };
    }
    s += "\n|---|";
    s += &"---:|".repeat(sizes.len());
    s.push('\n');
    s
}

/// Whether every row passed verification.
pub fn all_verified(results: &Results) -> bool {
    results
        .rows
        .iter()
        .all(|r| r.passed() || r.kind == Kind::Cublas && r.median_ms.is_none())
}
