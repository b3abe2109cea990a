//! Summary statistics of timed launches.

use serde::Serialize;

/// Times of the timed launches, in milliseconds.
#[derive(Clone, Debug, Serialize)]
pub struct Timing {
    pub reps: usize,
    pub median_ms: f64,
    pub min_ms: f64,
    /// 20th and 80th percentiles: the spread of the middle of the runs.
    pub p20_ms: f64,
    pub p80_ms: f64,
}

impl Timing {
    /// Summarises `samples` (at least one).
    pub fn from_samples(samples: &[f64]) -> Self {
        assert!(!samples.is_empty(), "no timed launches");
        let mut s = samples.to_vec();
        s.sort_by(f64::total_cmp);
        Self {
            reps: s.len(),
            median_ms: percentile(&s, 0.5),
            min_ms: s[0],
            p20_ms: percentile(&s, 0.2),
            p80_ms: percentile(&s, 0.8),
        }
    }

    /// GFLOP/s at the median time.
    pub fn gflops(&self, flops: f64) -> f64 {
        flops / (self.median_ms * 1e-3) / 1e9
    }
}

/// Linear interpolation between closest ranks of sorted `s`.
fn percentile(s: &[f64], q: f64) -> f64 {
    let pos = q * (s.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    s[lo] + (s[hi] - s[lo]) * (pos - lo as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_percentiles() {
        let t = Timing::from_samples(&[5.0, 1.0, 3.0, 2.0, 4.0]);
        assert_eq!((t.median_ms, t.min_ms, t.reps), (3.0, 1.0, 5));
        assert!((t.p20_ms - 1.8).abs() < 1e-12 && (t.p80_ms - 4.2).abs() < 1e-12);
        let even = Timing::from_samples(&[4.0, 1.0]);
        assert_eq!(even.median_ms, 2.5);
        // 2 GFLOP in 2 ms is 1000 GFLOP/s.
        assert!((Timing::from_samples(&[2.0]).gflops(2e9) - 1000.0).abs() < 1e-9);
    }
}
