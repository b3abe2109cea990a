//! The SVG plot: GFLOP/s against n for every variant, cuBLAS (SGEMM, TF32,
//! BF16, FP16) as the reference lines. Square sizes only; both axes log
//! scale, so FP32 kernels and the tensor-core kernels, 5-15x apart, all read.

use plotters::prelude::*;

use crate::results::{Kind, Results};

pub fn write_svg(results: &Results, path: &std::path::Path) -> anyhow::Result<()> {
    let square: Vec<_> = results
        .rows
        .iter()
        .filter(|r| r.is_square() && r.gflops.is_some())
        .collect();
    anyhow::ensure!(!square.is_empty(), "no square sizes with timings to plot");
    let mut variants: Vec<(String, Kind)> = Vec::new();
    for r in &square {
        if !variants.iter().any(|(v, _)| v == &r.variant) {
            variants.push((r.variant.clone(), r.kind));
        }
    }
    let x_max = square.iter().map(|r| r.n).max().unwrap() as f64;
    let x_min = square.iter().map(|r| r.n).min().unwrap() as f64;
    let y_max = square.iter().filter_map(|r| r.gflops).fold(0.0, f64::max) * 1.3;
    let y_min = square
        .iter()
        .filter_map(|r| r.gflops)
        .fold(f64::INFINITY, f64::min)
        .max(1.0)
        / 1.3;

    let root = SVGBackend::new(path, (1200, 640)).into_drawing_area();
    root.fill(&WHITE)?;
    let title = format!(
        "GEMM on {} (FP32, TF32 and BF16/FP16 kernels), GFLOP/s against n",
        results.meta.gpu.name
    );
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(70)
        // Room on the right, past the largest n, for the legend.
        .build_cartesian_2d(
            (x_min.log2() - 0.1)..(x_max.log2() + 2.4),
            (y_min..y_max).log_scale(),
        )?;
    let (lo, hi) = (x_min.log2(), x_max.log2());
    chart
        .configure_mesh()
        .x_desc("n (m = n = k), log scale")
        .y_desc("GFLOP/s, log scale")
        .x_labels(40)
        // Label the sizes only where they are powers of two within the data.
        .x_label_formatter(&|x| {
            let on_grid = (x - x.round()).abs() < 1e-6 && *x >= lo - 1e-6 && *x <= hi + 1e-6;
            if on_grid {
                format!("{:.0}", 2f64.powf(*x))
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|y| format!("{:.0}", y))
        .draw()?;
    for (i, (variant, kind)) in variants.iter().enumerate() {
        let mut points: Vec<(f64, f64)> = square
            .iter()
            .filter(|r| &r.variant == variant)
            .map(|r| ((r.n as f64).log2(), r.gflops.unwrap()))
            .collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        // cuBLAS in black (SGEMM) and greys (TF32, then the 16-bit
        // types); the kernels in colours (the palette's black skipped).
        let color = match kind {
            Kind::Cublas if variant.as_str() == harness::baselines::CUBLAS_TF32 => {
                RGBColor(140, 140, 140).to_rgba()
            }
            Kind::Cublas
                if variant.as_str() == harness::baselines::CUBLAS_BF16
                    || variant.as_str() == harness::baselines::CUBLAS_FP16 =>
            {
                RGBColor(90, 90, 90).to_rgba()
            }
            Kind::Cublas => BLACK.to_rgba(),
            _ => Palette99::pick(if i >= 20 { i + 1 } else { i }).to_rgba(),
        };
        let style = match kind {
            Kind::Cublas => color.stroke_width(4),
            Kind::Cuda => color.stroke_width(1),
            Kind::Rust => color.stroke_width(2),
        };
        chart
            .draw_series(LineSeries::new(points.clone(), style))?
            .label(variant.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
        chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}
