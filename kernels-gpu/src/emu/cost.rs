//! What a launch will cost on the emulator, on this machine, measured
//! before it runs.
//!
//! The emulator's time is not the product's multiply-adds. Every GPU
//! thread is an OS thread, and every barrier interval of every block puts
//! each thread of the block to sleep and wakes it again, so the time is
//! about blocks x threads per block x barrier intervals x the cost of an
//! OS thread switch, plus the work the threads do between barriers. How
//! many intervals a kernel has, and how much work, is the kernel's own
//! business, so [`estimate`] does not model it: it measures it.
//!
//! It runs block (0, 0) of the kernel on the launch's own m and n (cut to
//! one block tile) at two depths `k_lo < k_hi`, each a few times, and
//! takes the median time of a block at each. A block's time is taken as
//! linear in K through those two points, and a launch as its blocks times
//! that, plus the measured cost of starting and stopping the launch's
//! threads. Block (0, 0) is the costliest kind: edge blocks only have
//! fewer threads with work.
//!
//! The depths start at 32 and 64 (or at half the launch's K and its K,
//! if smaller) and double until a block at `k_hi` takes clearly longer
//! than at `k_lo` (so the slope is not noise, and a kernel whose K tile
//! is deeper than `k_lo` is seen to cost more with K), until a block
//! takes long enough that K matters little next to the rest of its work,
//! or until `k_hi` is the launch's own K. Measuring so costs a few small
//! blocks: tens of milliseconds for most kernels. The test
//! `estimates_next_to_runs` (tests/tests/emulator.rs) sets the estimates
//! next to real runs.

use std::io;
use std::thread;
use std::time::Instant;

use super::block::Pool;
use super::{Launch, install_panic_hook};
use crate::gemm::{Gemm, GemmParams};
use crate::launch::KernelSpec;

/// The first K measured (at most), and the largest (its inputs then
/// hold at most 2^16 x (BM + BN) floats).
const K_FIRST: usize = 64;
const K_LAST: usize = 1 << 16;

/// K is doubled until a block at `k_hi` takes this many seconds more than
/// at `k_lo` (the growth is then well above the noise of a measurement),
/// or a block takes [`CAP`] seconds (K then costs little next to the
/// block's other work), or K reaches the launch's (or [`K_LAST`]).
const RESOLUTION: f64 = 0.01;
const CAP: f64 = 0.05;

/// Runs of the block per depth: up to [`RUNS`] (the median counts), but
/// no more once they took [`ENOUGH`] seconds (a slow block varies less).
const RUNS: usize = 5;
const ENOUGH: f64 = 0.01;

/// A launch's estimated time on the emulator, measured on this machine.
#[derive(Clone, Copy, Debug)]
pub struct Estimate {
    pub kernel: &'static str,
    /// `(m, n, k)` it was measured for.
    pub shape: (usize, usize, usize),
    /// The kernel's launch geometry (blocks for a shape).
    geometry: crate::launch::Launch,
    /// Seconds to start and stop the launch's threads.
    startup: f64,
    /// Seconds per block at depth `k_lo`, and per unit of K beyond it.
    per_block: f64,
    k_lo: usize,
    per_k: f64,
    /// Seconds the measurement itself took.
    pub calibration: f64,
}

impl Estimate {
    /// Estimated seconds of `run_gemm` for the shape measured.
    pub fn seconds(&self) -> f64 {
        let (m, n, k) = self.shape;
        self.seconds_at(m, n, k)
    }

    /// Estimated seconds of `run_gemm` for another shape of the same
    /// kernel, no larger in m and n than the one measured (a block then
    /// has no more threads with work than the block measured); any k.
    pub fn seconds_at(&self, m: usize, n: usize, k: usize) -> f64 {
        let (gx, gy) = self.geometry.grid(m, n);
        let per_block = self.per_block + self.per_k * k.saturating_sub(self.k_lo) as f64;
        self.startup + gx as f64 * gy as f64 * per_block
    }
}

/// Measures what `run_gemm(spec, body, a, b, m, n, k)` would cost on
/// this machine, in a small fraction of a second: it times block (0, 0)
/// of the kernel (m and n cut to one block tile) at two small depths K,
/// takes a block's time as linear in K, and multiplies by the blocks.
///
/// # Errors
/// The OS's, if it refuses a thread (`run_gemm` would then panic).
pub fn estimate(
    spec: &KernelSpec,
    body: fn(Gemm),
    m: usize,
    n: usize,
    k: usize,
) -> io::Result<Estimate> {
    install_panic_hook();
    let started = Instant::now();
    let (bm, bn) = spec.launch.block_tile;
    let (m1, n1) = (m.min(bm), n.min(bn));
    let (bx, by) = spec.launch.block_threads;
    let dims = (bx as usize, by as usize);
    // Starting and stopping the threads is what the scope takes beyond
    // the measurements.
    let (k_lo, k_hi, lo, hi, measuring) = thread::scope(|scope| {
        let pool = Pool::new(scope, dims, spec.launch.shared_bytes / 4, body)?;
        let measuring = Instant::now();
        let block_at = |k| measure(&pool, spec, m1, n1, k);
        let mut k_hi = k.min(K_FIRST);
        let mut k_lo = k_hi / 2;
        let (mut lo, mut hi) = (block_at(k_lo), block_at(k_hi));
        while k_hi < k.min(K_LAST) && hi - lo < RESOLUTION && hi < CAP {
            (k_lo, lo) = (k_hi, hi);
            k_hi = (2 * k_hi).min(k).min(K_LAST);
            hi = block_at(k_hi);
        }
        io::Result::Ok((k_lo, k_hi, lo, hi, measuring.elapsed().as_secs_f64()))
    })?;
    let calibration = started.elapsed().as_secs_f64();
    let per_k = if k_hi > k_lo {
        ((hi - lo) / (k_hi - k_lo) as f64).max(0.0)
    } else {
        0.0
    };
    Ok(Estimate {
        kernel: spec.name,
        shape: (m, n, k),
        geometry: spec.launch,
        startup: calibration - measuring,
        per_block: lo,
        k_lo,
        per_k,
        calibration,
    })
}

/// Times block (0, 0) of `spec` on `m x n x k` (inputs all 1), up to
/// [`RUNS`] times, on `pool`. `k` 0 stands for an empty depth: the block
/// costs nothing.
fn measure(pool: &Pool, spec: &KernelSpec, m: usize, n: usize, k: usize) -> f64 {
    if k == 0 {
        return 0.0;
    }
    let p = GemmParams::dense(m as u32, n as u32, k as u32);
    let launch = Launch::new(
        spec,
        &p,
        vec![1.0; m * k],
        vec![1.0; k * n],
        &vec![0.0; m * n],
        &super::EmuScales::default(),
        &super::EmuEpilogue::default(),
    );
    let gemm = launch.gemm(&p, 0);
    let mut times = Vec::with_capacity(RUNS);
    while times.len() < RUNS && times.iter().sum::<f64>() < ENOUGH {
        let t = Instant::now();
        pool.run(&launch, gemm, (0, 0));
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}
