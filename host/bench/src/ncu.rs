//! `--ncu`: each Rust kernel once under Nsight Compute, for the bytes and
//! bank conflicts the lesson's model talks about. Uses the `host` binary
//! next to this one, so what is profiled is exactly the kernel the bench timed.

use std::process::Command;

use anyhow::Result;

use crate::results::{Kind, NcuMetrics, Results};

const METRICS: [&str; 6] = [
    "dram__bytes_read.sum",
    "lts__t_bytes.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    TENSOR_PIPE,
    "sm__warps_active.avg.pct_of_peak_sustained_active",
];

/// The tensor pipe's busy cycles (HMMA, which `mma.sync` issues), percent.
const TENSOR_PIPE: &str = "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active";

fn find_ncu() -> Option<String> {
    ["ncu", "/usr/local/cuda/bin/ncu"]
        .into_iter()
        .find(|c| {
            Command::new(c)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .map(String::from)
}

/// Adds ncu's metrics to the Rust rows of size `n` (one clear line when ncu cannot run).
pub fn profile(results: &mut Results, n: usize) -> Result<()> {
    let Some(ncu) = find_ncu() else {
        eprintln!("--ncu: skipped, Nsight Compute (ncu) is not installed or not on PATH");
        return Ok(());
    };
    let host = std::env::current_exe()?.with_file_name("host");
    if !host.exists() {
        eprintln!(
            "--ncu: skipped, no `host` binary next to {}",
            host.display()
        );
        return Ok(());
    }
    let names: Vec<String> = results
        .rows
        .iter()
        // Plain launches only: `host --kernel` runs a kernel without an
        // epilogue.
        .filter(|r| {
            r.kind == Kind::Rust && r.epilogue.is_none() && r.is_square() && r.n == n && r.verified
        })
        .map(|r| r.variant.clone())
        .collect();
    if names.is_empty() {
        eprintln!("--ncu: skipped, n = {n} is not among the benchmarked sizes (see --ncu-size)");
    }
    for name in names {
        let out = Command::new(&ncu)
            .args([
                "--clock-control",
                "none",
                "--csv",
                "--print-units",
                "base",
                // The kernel itself, not a copy its launch enqueues
                // first (step 17's transposed B, TMA's padded copies).
                "--kernel-name",
                &name,
                "--launch-count",
                "1",
            ])
            .args(["--metrics", &METRICS.join(",")])
            .arg(&host)
            .args([
                "--kernel",
                &name,
                "--n",
                &n.to_string(),
                "--reps",
                "0",
                "--warmup",
                "0",
            ])
            .output()?;
        let text = String::from_utf8_lossy(&out.stdout);
        let Some(metrics) = parse(&text) else {
            let err = String::from_utf8_lossy(&out.stderr);
            let why = err
                .lines()
                .chain(text.lines())
                .find(|l| l.contains("ERR") || l.contains("rror"));
            eprintln!(
                "--ncu: no metrics for {name}: {}",
                why.unwrap_or("ncu printed no metrics")
            );
            continue;
        };
        for r in results
            .rows
            .iter_mut()
            .filter(|r| r.variant == name && r.is_square() && r.n == n)
        {
            r.ncu = Some(metrics.clone());
        }
    }
    Ok(())
}

/// Reads ncu's `--csv --print-units base` output: "Metric Name","Metric Unit","Metric Value" columns.
fn parse(csv: &str) -> Option<NcuMetrics> {
    let mut lines = csv.lines().skip_while(|l| !l.starts_with("\"ID\""));
    let header = split(lines.next()?);
    let col = |name: &str| header.iter().position(|h| h == name);
    let (name_i, value_i) = (col("Metric Name")?, col("Metric Value")?);
    let mut m = NcuMetrics::default();
    let mut found = 0;
    for line in lines {
        let cells = split(line);
        let (Some(name), Some(value)) = (cells.get(name_i), cells.get(value_i)) else {
            continue;
        };
        let Ok(v) = value.replace(',', "").parse::<f64>() else {
            continue;
        };
        let slot = match name.as_str() {
            "dram__bytes_read.sum" => &mut m.dram_read_bytes,
            "lts__t_bytes.sum" => &mut m.l2_bytes,
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum" => {
                &mut m.shared_store_bank_conflicts
            }
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum" => {
                &mut m.shared_load_bank_conflicts
            }
            TENSOR_PIPE => &mut m.tensor_pipe_percent,
            "sm__warps_active.avg.pct_of_peak_sustained_active" => {
                &mut m.achieved_occupancy_percent
            }
            _ => continue,
        };
        *slot = v;
        found += 1;
    }
    (found == METRICS.len()).then_some(m)
}

fn split(line: &str) -> Vec<String> {
    line.trim()
        .trim_matches('"')
        .split("\",\"")
        .map(String::from)
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_ncu_csv() {
        let csv = "==PROF== Connected\n\"ID\",\"Kernel Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n\
                   \"0\",\"tiled16\",\"dram__bytes_read.sum\",\"byte\",\"16,280,000,000\"\n\
                   \"0\",\"tiled16\",\"lts__t_bytes.sum\",\"byte\",\"41300000000\"\n\
                   \"0\",\"tiled16\",\"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum\",\"\",\"276,339,578\"\n\
                   \"0\",\"tiled16\",\"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum\",\"\",\"796,399\"\n\
                   \"0\",\"tiled16\",\"sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active\",\"%\",\"0\"\n\
                   \"0\",\"tiled16\",\"sm__warps_active.avg.pct_of_peak_sustained_active\",\"%\",\"92.5\"\n";
        let m = super::parse(csv).unwrap();
        assert_eq!(m.dram_read_bytes, 16.28e9);
        assert_eq!(m.shared_store_bank_conflicts, 276_339_578.0);
        assert_eq!(m.shared_load_bank_conflicts, 796_399.0);
        assert_eq!(m.achieved_occupancy_percent, 92.5);
        assert!(super::parse("no csv here").is_none());
    }
}
