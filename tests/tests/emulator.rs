//! The kernels on the CPU emulator (`kernels_gpu::emu`), no GPU needed:
//! every registered kernel against an f64 reference, broken variants of
//! tiled16 and of the tensor-core kernel reported (not hung), direct
//! misuse of the device API (barriers, warp collectives and shuffles,
//! `cp.async`)
//! reported, the emulator's bank-conflict counts against a derivation on
//! paper and against Nsight Compute on an H200, and its time estimates
//! against its real times.

use std::sync::{PoisonError, RwLock};
use std::time::Instant;

use kernels_gpu::device::async_copy::{commit_group, wait_group};
use kernels_gpu::device::mma::{mma_m16n8k8_tf32, mma_m16n8k16, to_tf32};
use kernels_gpu::device::warp::{shuffle_idx, shuffle_xor, warp_sum};
use kernels_gpu::device::{SharedTile, block_idx_x, block_idx_y, sync_threads, thread_idx_x};
use kernels_gpu::elem::{Bf16, E4m3, E5m2, Elem, Element, Elems, F16, Math};
use kernels_gpu::emu::{self, EmuReport, Memory, Op};
use kernels_gpu::gemm::Gemm;
use kernels_gpu::k02_tiled16::{self, mutants};
use kernels_gpu::k10_tuned;
use kernels_gpu::k11_mma;
use kernels_gpu::k21_mma_16bit;
use kernels_gpu::k29_small_k;
use kernels_gpu::k30_decode_staged;
use kernels_gpu::launch::{Body, KernelSpec, Launch, Operands, Ops};
use kernels_gpu::modules;
use kernels_gpu::registry::KERNELS;

/// Square and rectangular shapes around the 16-wide tiles: 1, one tile
/// less one (15), exactly one (16), one more (17), two and a bit (33),
/// and one not a multiple of anything (100).
const SHAPES: &[(usize, usize, usize)] = &[
    (1, 1, 1),
    (15, 15, 15),
    (16, 16, 16),
    (17, 17, 17),
    (33, 33, 33),
    (100, 100, 100),
    (17, 33, 15),
    (1, 100, 33),
    (100, 1, 17),
    (33, 16, 1),
];

/// Deterministic inputs in ±[0.5, 1.5) (`tests::values`): never zero,
/// so every product counts.
fn inputs(m: usize, n: usize, k: usize) -> (Vec<f32>, Vec<f32>) {
    let seed = (m * 1_000_003 + n * 1009 + k) as u64;
    (tests::values(m * k, seed), tests::values(k * n, !seed))
}

/// Checks `report.c` against `A * B` computed in f64. The tolerance is
/// f32 rounding of k fused multiply-adds: k * 2^-23 relative to the sum
/// of the products' magnitudes (with a safety factor of 4). A TF32
/// kernel is checked against the product of its inputs rounded to TF32,
/// a 16- or 8-bit kernel against that of its inputs rounded to its type
/// (the emulator's `mma` is exact on those; an FP8 kernel runs here with
/// no scales, all 1: `tests/mma_fp8.rs` gives it scales), so the same tight tolerance
/// holds and a fragment in the wrong place cannot hide in the type's
/// error; a 16-bit C adds its one rounding of the result.
fn assert_matches_reference(
    report: &EmuReport,
    elems: Elems,
    a: &[f32],
    b: &[f32],
    (m, n, k): (usize, usize, usize),
) {
    // What the kernel multiplies: the inputs as stored (a 16-bit kernel
    // reads them rounded to its type), rounded to TF32 for a TF32 kernel.
    let input = |elem: Elem, x: f32| match (elem, elems.math) {
        (_, Math::Tf32) => f32::from_bits(to_tf32(x)) as f64,
        (Elem::Bf16, _) => Bf16::from_f32(x).to_f32() as f64,
        (Elem::F16, _) => F16::from_f32(x).to_f32() as f64,
        (Elem::E4m3, _) => E4m3::from_f32(x).to_f32() as f64,
        (Elem::E5m2, _) => E5m2::from_f32(x).to_f32() as f64,
        _ => x as f64,
    };
    // 3xTF32 multiplies the inputs as stored, less what its split loses
    // per product (the dropped small * small term and the small parts'
    // own rounding): at most 3 * 2^-22 of |a * b|.
    let split = if elems.math == Math::Tf32x3 {
        3.0 * 2f64.powi(-22)
    } else {
        0.0
    };
    // A 16-bit C adds one rounding of the result.
    let c_rounding = if elems.c == Elem::F32 {
        0.0
    } else {
        elems.c.unit_roundoff()
    };
    for row in 0..m {
        for col in 0..n {
            let (mut exact, mut magnitude) = (0.0f64, 0.0f64);
            for kk in 0..k {
                let p = input(elems.a, a[row * k + kk]) * input(elems.b, b[kk * n + col]);
                exact += p;
                magnitude += p.abs();
            }
            let got = report.c[row * n + col] as f64;
            let tolerance = 4.0 * k as f64 * f32::EPSILON as f64 * magnitude
                + split * magnitude
                + c_rounding * exact.abs();
            assert!(
                (got - exact).abs() <= tolerance,
                "{} at m={m} n={n} k={k}: C[{row}][{col}] = {got}, expected {exact} (tolerance {tolerance:e})",
                report.kernel
            );
        }
    }
}

/// The emulated launch read and wrote shared memory, with no bank
/// conflict in either.
fn assert_conflict_free(report: &EmuReport, kernel: &str) {
    let banks = &report.banks;
    assert!(
        banks.loads.requests > 0 && banks.stores.requests > 0,
        "{kernel}: {banks}"
    );
    assert_eq!(
        (banks.loads.conflicts, banks.stores.conflicts),
        (0, 0),
        "{kernel}: {banks}"
    );
}

/// Held for reading by every emulation, for writing by the tests that
/// time emulations: those run alone, not next to other tests' threads.
static TIMING: RwLock<()> = RwLock::new(());

fn run(
    spec: &KernelSpec,
    body: fn(Gemm),
    (m, n, k): (usize, usize, usize),
) -> (EmuReport, Vec<f32>, Vec<f32>) {
    let (a, b) = inputs(m, n, k);
    let _side_by_side = TIMING.read().unwrap_or_else(PoisonError::into_inner);
    let report = emu::run_gemm(spec, body, &a, &b, m, n, k);
    (report, a, b)
}

/// Every kernel the emulator runs (GPU-only kernels say why they are not;
/// the GPU tests cover them).
fn emulated() -> impl Iterator<Item = (&'static KernelSpec, fn(Gemm))> {
    KERNELS.iter().filter_map(|spec| match spec.emulated() {
        Ok(body) => Some((spec, body)),
        Err(why) => {
            eprintln!("not on the emulator: {} ({why})", spec.name);
            None
        }
    })
}

#[test]
fn only_the_hopper_steps_are_gpu_only() {
    for spec in KERNELS {
        let hopper = matches!(spec.step, 12 | 13 | 17..=20 | 22 | 24..=26);
        assert_eq!(spec.emulated().is_err(), hopper, "{}", spec.name);
    }
}

#[test]
fn every_registered_kernel_matches_an_f64_reference_on_the_emulator() {
    for (spec, body) in emulated() {
        for &shape in SHAPES {
            let (report, a, b) = run(spec, body, shape);
            assert!(
                report.is_clean(),
                "{} at {shape:?} is not clean:\n{report}",
                spec.name
            );
            assert_matches_reference(&report, spec.elems, &a, &b, shape);
        }
    }
}

#[test]
fn tiled16_without_its_first_barrier_is_reported_as_a_race() {
    let (report, ..) = run(&k02_tiled16::SPEC, mutants::no_first_barrier, (33, 33, 33));
    assert!(!report.races.is_empty(), "no race found:\n{report}");
    assert!(report.barrier_errors.is_empty(), "{report}");
    // The race is a store of a tile against a load of it, in the same
    // interval (the loop's only barrier is barrier 2).
    let race = &report.races[0];
    let ops = [race.first.op, race.second.op];
    assert!(
        ops.contains(&Op::Store) && ops.contains(&Op::Load),
        "{race}"
    );
    assert_ne!(race.first.thread, race.second.thread, "{race}");
    assert!(race.to_string().contains("tiled16"), "{race}");
}

#[test]
fn tiled16_without_its_second_barrier_is_reported_as_a_race() {
    // k = 33: three phases, so a phase's stores can overtake the
    // previous phase's loads.
    let (report, ..) = run(&k02_tiled16::SPEC, mutants::no_second_barrier, (33, 33, 33));
    assert!(!report.races.is_empty(), "no race found:\n{report}");
    assert!(report.barrier_errors.is_empty(), "{report}");
    // Loads of phase p and stores of phase p + 1 share the interval that
    // starts at barrier 1 of phase p.
    assert!(
        report.races.iter().all(|r| r.interval.opened_by.is_some()),
        "a race outside the loop's intervals:\n{report}"
    );
}

#[test]
fn tiled16_with_edge_threads_skipping_barriers_is_a_barrier_error_not_a_hang() {
    // 17 x 17: the edge blocks have threads outside C, which return early.
    let (report, ..) = run(&k02_tiled16::SPEC, mutants::edge_return, (17, 17, 17));
    assert!(
        !report.barrier_errors.is_empty(),
        "no barrier error:\n{report}"
    );
    assert!(report.panics.is_empty(), "{report}");
    let error = &report.barrier_errors[0];
    assert_eq!(error.kernel, "tiled16");
    assert_eq!(error.barrier, 1, "{error}");
    assert!(
        !error.waiting.is_empty() && !error.exited.is_empty(),
        "{error}"
    );
    // Block (1, 0) covers columns 16..31 of C: only tx = 0 is inside.
    let block_1_0 = report
        .barrier_errors
        .iter()
        .find(|e| e.block == (1, 0))
        .unwrap_or_else(|| panic!("block (1, 0) not reported:\n{report}"));
    let waiting: usize = block_1_0.waiting.iter().map(|w| w.threads.len()).sum();
    assert_eq!((waiting, block_1_0.exited.len()), (16, 240), "{block_1_0}");
    assert!(block_1_0.exited.contains(&(1, 0)), "{block_1_0}");
}

/// A launch of a hand-written test body: `threads` x 1 threads in one
/// block, `words` words of shared memory, for C of 1 x `threads`.
fn probe(name: &'static str, threads: u32, words: usize, body: fn(Gemm)) -> KernelSpec {
    KernelSpec {
        name,
        step: 0,
        summary: "emulator test body",
        launch: Launch {
            block_threads: (threads, 1),
            block_tile: (1, threads as usize),
            shared_bytes: words * 4,
            register_cap: false,
            persistent: false,
        },
        model_reuse: (1, 1),
        module: &modules::LADDER,
        elems: Elems::FP32,
        body: Body::Emulated(body),
        operands: Operands::Pointers,
        ops: Ops::NN,
        batches: true,
    }
}

/// Reads one past A, writes one past C, and reads one past shared memory.
fn out_of_bounds(g: Gemm) {
    if thread_idx_x() != 1 {
        return;
    }
    let tile = SharedTile::<1, 4>::at(0);
    // SAFETY: deliberately out of bounds: the emulator must report each
    // access (reads give NaN, writes are dropped); never run on a GPU.
    unsafe {
        let past_a = g.a.read(g.m * g.k);
        g.c.write(0, past_a);
        g.c.write(g.m * g.n, 1.0);
        let past_tile = tile.load(0, 4);
        g.c.write(1, past_tile);
    }
}

#[test]
fn out_of_bounds_accesses_are_reported_and_harmless() {
    let (report, ..) = run(&probe("oob", 4, 4, out_of_bounds), out_of_bounds, (1, 4, 2));
    let found: Vec<(Memory, Op, usize)> = report
        .bad_accesses
        .iter()
        .map(|b| (b.memory, b.op, b.index))
        .collect();
    assert_eq!(
        found,
        [
            (Memory::A, Op::Load, 2),
            (Memory::C, Op::Store, 4),
            (Memory::Shared, Op::Load, 4)
        ],
        "{report}"
    );
    assert!(
        report
            .bad_accesses
            .iter()
            .all(|b| b.thread.thread == (1, 0)),
        "{report}"
    );
    assert!(
        report.bad_accesses[0].site.file().ends_with("emulator.rs"),
        "{report}"
    );
    assert!(
        report.c[0].is_nan() && report.c[1].is_nan(),
        "out-of-bounds reads must give NaN: {:?}",
        report.c
    );
    assert!(!report.is_clean());
}

/// Every thread writes C[0].
fn all_write_one_element(g: Gemm) {
    // SAFETY: deliberately racy (every thread writes C[0]): the emulator
    // must report it; never run on a GPU.
    unsafe { g.c.write(0, thread_idx_x() as f32) };
}

#[test]
fn two_threads_writing_one_element_of_c_is_reported() {
    let (report, ..) = run(
        &probe("double_write", 2, 0, all_write_one_element),
        all_write_one_element,
        (1, 2, 1),
    );
    assert_eq!(report.double_writes.len(), 1, "{report}");
    let double = &report.double_writes[0];
    assert_eq!(
        (double.index, double.row, double.col),
        (0, 0, 0),
        "{double}"
    );
    assert_ne!(double.first, double.second, "{double}");
    assert!(
        report.c[1].is_nan(),
        "C[1] was never written, so it stays NaN"
    );
}

/// The fused pass's second store (`GlobalOut::rewrite`): thread 1 of
/// each block rewrites what thread 0 of the same block stored (allowed,
/// after the barrier), and block 1 rewrites C[0], which block 0 stored,
/// and C[7], which nobody stored (both reported).
fn rewrites_across_blocks(g: Gemm) {
    let (block, thread) = (block_idx_x(), thread_idx_x());
    if thread == 0 {
        // SAFETY: each block's thread 0 writes its own first element.
        unsafe { g.c.write(4 * block, 1.0) };
    }
    sync_threads();
    // SAFETY: deliberately wrong in block 1 (another block's element, an
    // element nobody stored): the emulator must report it; never run on
    // a GPU.
    unsafe {
        if thread == 1 {
            g.c.rewrite(4 * block, 2.0);
        }
        if block == 1 && thread == 2 {
            g.c.rewrite(0, 3.0);
            g.c.rewrite(7, 3.0);
        }
    }
}

#[test]
fn a_rewrite_is_accepted_from_the_same_block_only() {
    let spec = probe("rewrite", 4, 0, rewrites_across_blocks);
    let (report, ..) = run(&spec, rewrites_across_blocks, (1, 8, 1));
    let found: Vec<_> = report
        .double_writes
        .iter()
        .map(|d| (d.index, d.first.block, d.second.block))
        .collect();
    // C[0]: first written by block 0, rewritten by block 1; C[7]: never
    // written before, so "first" is the rewriter itself.
    assert_eq!(
        found,
        [(0, (0, 0), (1, 0)), (7, (1, 0), (1, 0))],
        "{report}"
    );
    assert_eq!((report.c[4], report.c[7]), (2.0, 3.0), "{report}");
}

/// Thread 3 panics; the others then wait at a barrier it never reaches.
fn panics_before_a_barrier(_: Gemm) {
    if thread_idx_x() == 3 {
        panic!("thread 3 gives up");
    }
    sync_threads();
}

#[test]
fn a_kernel_panic_is_reported_and_its_barrier_does_not_hang() {
    let (report, ..) = run(
        &probe("panic", 32, 0, panics_before_a_barrier),
        panics_before_a_barrier,
        (1, 32, 1),
    );
    assert_eq!(report.panics.len(), 1, "{report}");
    let panic = &report.panics[0];
    assert_eq!(panic.thread.thread, (3, 0));
    assert_eq!(panic.message, "thread 3 gives up");
    assert!(
        panic
            .location
            .as_deref()
            .is_some_and(|l| l.contains("emulator.rs")),
        "{panic}"
    );
    assert_eq!(report.barrier_errors.len(), 1, "{report}");
    assert_eq!(report.barrier_errors[0].exited, [(3, 0)], "{report}");
}

/// Even threads wait at one barrier, odd threads at another.
#[allow(clippy::if_same_then_else)] // the point: two barrier call sites
fn split_barrier(_: Gemm) {
    if thread_idx_x().is_multiple_of(2) {
        sync_threads();
    } else {
        sync_threads();
    }
}

#[test]
fn threads_waiting_at_different_barriers_are_reported() {
    let (report, ..) = run(
        &probe("split", 8, 0, split_barrier),
        split_barrier,
        (1, 8, 1),
    );
    assert_eq!(report.barrier_errors.len(), 1, "{report}");
    let waiting = &report.barrier_errors[0].waiting;
    assert_eq!(waiting.len(), 2, "{report}");
    assert_eq!(
        waiting[0].threads,
        [(0, 0), (2, 0), (4, 0), (6, 0)],
        "{report}"
    );
}

// Bank conflicts of tiled16, on paper, for one 16 x 16 block.
//
// Warp w holds linear ids 32w .. 32w + 31: two rows of the block, ty = 2w
// (lanes 0-15) and ty = 2w + 1 (lanes 16-31), tx = 0..15 in each. A bank
// is word % 32. Per phase of K each warp runs 2 stores and 32 loads.
//
// Padded, [16][17] (As at word 0, Bs at word 16 * 17 = 272):
// - store As[ty][tx]: word 17ty + tx. Row 2w fills 16 consecutive banks
//   from b = 34w % 32; row 2w + 1 fills 16 from b + 17. The ranges
//   b..b+15 and b+17..b+32 share exactly bank b (b + 32 = b mod 32),
//   hit by two different words: 2 wavefronts, 1 conflict.
// - store Bs[ty][tx]: the same shifted by 272 words: 1 conflict.
// - load As[ty][kk]: one word per half-warp (broadcast), the two words
//   17 apart: different banks, 0 conflicts.
// - load Bs[kk][tx]: words 272 + 17kk + tx, tx = 0..15, the same 16
//   words for both half-warps: 16 banks, 0 conflicts.
// So per warp per phase: 2 conflicts, all on stores.
//
// Unpadded, [16][16] (Bs at word 256):
// - stores: rows 2w and 2w + 1 are words 32w .. 32w + 31: every bank
//   once, 0 conflicts.
// - load As[ty][kk]: two words 16 apart, different banks: 0.
// - load Bs[kk][tx]: 16 consecutive words, shared by both halves: 0.
// So per warp per phase: 0 conflicts.
//
// At n = 4096 the padded kernel runs 256 x 256 = 65,536 blocks of 8 warps
// through 256 phases: 65,536 * 8 * 256 * 2 = 268,435,456 store conflicts.
// Nsight Compute measured about 276 million shared-store bank conflicts
// for it on an H200: the derivation and the emulator agree with the
// measurement to within 3% (268.4 M is 2.7% below 276 M), so the store
// conflicts the README reports are the pad's doing.

/// Warp-phases in a launch of tiled16 on n x n x n: blocks * warps * phases.
fn warp_phases(n: usize) -> u64 {
    let blocks = n.div_ceil(16) * n.div_ceil(16);
    (blocks * 8 * n.div_ceil(16)) as u64
}

#[test]
fn tiled16_padded_tiles_cost_one_store_conflict_per_warp_and_tile() {
    let n = 32;
    let (report, ..) = run(&k02_tiled16::SPEC, k02_tiled16::tiled16, (n, n, n));
    assert!(report.is_clean(), "{report}");
    let per = warp_phases(n);
    let banks = &report.banks;
    assert_eq!(banks.stores.requests, 2 * per, "{banks}");
    assert_eq!(
        banks.stores.conflicts,
        2 * per,
        "padded stores: 1 conflict per warp and tile\n{banks}"
    );
    assert_eq!(banks.loads.requests, 32 * per, "{banks}");
    assert_eq!(
        banks.loads.conflicts, 0,
        "padded loads are conflict-free\n{banks}"
    );
    // Four sites in k02_tiled16.rs: two stores (1 conflict each per warp
    // and phase), two loads (none).
    assert_eq!(banks.sites.len(), 4, "{banks}");
    for site in &banks.sites {
        assert!(site.site.file().ends_with("k02_tiled16.rs"), "{banks}");
        let expected = match site.op {
            Op::Store => (per, per),
            Op::Load => (16 * per, 0),
        };
        assert_eq!(
            (site.traffic.requests, site.traffic.conflicts),
            expected,
            "{banks}"
        );
    }

    // Scaled to n = 4096, next to Nsight Compute's measurement.
    let per_warp_phase = banks.stores.conflicts as f64 / per as f64;
    let scaled = per_warp_phase * warp_phases(4096) as f64;
    assert_eq!(scaled, 268_435_456.0);
    let ncu = 276e6;
    let off = (scaled - ncu).abs() / ncu;
    assert!(
        off < 0.03,
        "scaled {scaled:.0} vs ncu {ncu:.0}: {:.1}% apart",
        off * 100.0
    );
}

#[test]
fn tiled16_unpadded_tiles_are_conflict_free() {
    let n = 32;
    let (report, a, b) = run(
        &k02_tiled16::SPEC_NOPAD,
        k02_tiled16::tiled16_nopad,
        (n, n, n),
    );
    assert!(report.is_clean(), "{report}");
    assert_matches_reference(&report, Elems::FP32, &a, &b, (n, n, n));
    let per = warp_phases(n);
    let banks = &report.banks;
    assert_eq!(
        (banks.stores.requests, banks.stores.conflicts),
        (2 * per, 0),
        "{banks}"
    );
    assert_eq!(
        (banks.loads.requests, banks.loads.conflicts),
        (32 * per, 0),
        "{banks}"
    );
}

/// Thread 3 of block (0, 0) panics, so its block's barrier breaks; the
/// other threads wait at the barrier and then write C.
fn block_0_panics(g: Gemm) {
    let x = block_idx_x() * 32 + thread_idx_x();
    if x == 3 {
        panic!("block 0 thread 3 gives up");
    }
    sync_threads();
    // SAFETY: x < n = 64 (two blocks of 32), one writer per element.
    unsafe { g.c.write(x, 1.0) };
}

#[test]
fn a_block_that_panics_does_not_spoil_the_next_one() {
    // The pool's threads run block (1, 0) after block (0, 0) broke.
    let (report, ..) = run(
        &probe("panic_then_run", 32, 0, block_0_panics),
        block_0_panics,
        (1, 64, 1),
    );
    assert_eq!(report.panics.len(), 1, "{report}");
    assert_eq!(report.barrier_errors.len(), 1, "{report}");
    assert_eq!(report.barrier_errors[0].block, (0, 0), "{report}");
    assert!(
        report.c[32..].iter().all(|&x| x == 1.0),
        "block (1, 0) did not run: {:?}",
        &report.c[32..]
    );
}

// Step 11 on the emulator: the two test-only variants are caught, its
// layouts are conflict-free as its header works out, and misuse of the
// warp collectives and of cp.async is reported, not hung.

/// The instance the mutants are made from (`k11_mma::mutants`).
const MMA_SPEC: &KernelSpec = &k11_mma::SPEC_64X128X32_W32X64_S2;

#[test]
fn tf32_kernel_with_a_fragment_in_the_wrong_registers_computes_a_wrong_product() {
    let shape = (33, 40, 70);
    let (good, a, b) = run(MMA_SPEC, MMA_SPEC.emulated().unwrap(), shape);
    assert!(good.is_clean(), "{good}");
    assert_matches_reference(&good, Elems::TF32, &a, &b, shape);
    let (bad, ..) = run(MMA_SPEC, k11_mma::mutants::swapped_fragment, shape);
    // Nothing the checks can see (every access is legal), but C is wrong.
    assert!(bad.is_clean(), "{bad}");
    let wrong = bad
        .c
        .iter()
        .zip(&good.c)
        .filter(|(x, y)| (*x - *y).abs() > 1e-3)
        .count();
    assert!(
        wrong > bad.c.len() / 2,
        "only {wrong} of {} elements differ",
        bad.c.len()
    );
}

#[test]
fn tf32_kernel_without_its_cp_async_wait_is_reported_as_a_race() {
    // K = 100: four tiles of 32, so the loop reads tiles whose copies are
    // still in flight.
    let (report, ..) = run(MMA_SPEC, k11_mma::mutants::no_wait, (64, 128, 100));
    assert!(!report.races.is_empty(), "no race found:\n{report}");
    let race = &report.races[0];
    let sites = [race.first.site.file(), race.second.site.file()];
    assert!(sites.iter().all(|f| f.ends_with("k11_mma.rs")), "{race}");
    assert!(
        [race.first.op, race.second.op].contains(&Op::Store),
        "the copy's write is one side: {race}"
    );
}

/// Per the header of k11_mma.rs: A's `ldmatrix` rows, B's 32-bit loads and
/// every `cp.async` write are free of bank conflicts.
#[test]
fn tf32_kernel_shared_memory_is_conflict_free() {
    for spec in k11_mma::SPECS {
        let (bm, bn) = spec.launch.block_tile;
        let (report, ..) = run(spec, spec.emulated().unwrap(), (bm, bn, 64));
        assert!(report.is_clean(), "{report}");
        assert_conflict_free(&report, spec.name);
        let banks = &report.banks;
        assert!(
            banks
                .sites
                .iter()
                .all(|s| s.site.file().ends_with("k11_mma.rs")),
            "{banks}"
        );
    }
}

/// A kernel body and what it is.
type NamedBody = (&'static str, fn(Gemm));

/// Step 21's instance the mutants break.
const MMA16_SPEC: &KernelSpec = &k21_mma_16bit::SPEC_BF16_128X128X64_W64X64_S4;

/// A broken 16-bit kernel computes a product that differs from the good
/// one's in most elements, with every access legal: A's fragment in the
/// wrong registers, or B's N-major tile read without `.trans` (each lane
/// then holds two values along N where the `mma` expects two along K).
#[test]
fn bf16_kernel_with_a_wrong_fragment_layout_computes_a_wrong_product() {
    // K = 128 (aligned, two tiles) and K = 70 (copied value by value).
    for shape in [(64, 128, 128), (33, 40, 70)] {
        let (good, a, b) = run(MMA16_SPEC, MMA16_SPEC.emulated().unwrap(), shape);
        assert!(good.is_clean(), "{good}");
        assert_matches_reference(&good, MMA16_SPEC.elems, &a, &b, shape);
        let mutants: [NamedBody; 2] = [
            (
                "swapped A fragment",
                k21_mma_16bit::mutants::swapped_fragment,
            ),
            ("B without .trans", k21_mma_16bit::mutants::untransposed_b),
        ];
        for (what, body) in mutants {
            let (bad, ..) = run(MMA16_SPEC, body, shape);
            assert!(bad.is_clean(), "{what}: {bad}");
            let wrong = (bad.c.iter().zip(&good.c))
                .filter(|(x, y)| (*x - *y).abs() > 1e-3)
                .count();
            assert!(
                wrong > bad.c.len() / 2,
                "{what} at {shape:?}: only {wrong} of {} elements differ",
                bad.c.len()
            );
        }
    }
}

/// Step 21 at the odd shape (37 x 53 x 29: every copy one value
/// at a time) and at one whose rows are 16-byte aligned but whose tiles
/// all have edges (129 x 65 x 72: guarded `cp.async`), beyond the shapes
/// every kernel runs.
#[test]
fn sixteen_bit_kernels_match_at_odd_and_edge_shapes() {
    for spec in k21_mma_16bit::SPECS {
        for shape in [(37, 53, 29), (129, 65, 72)] {
            let (report, a, b) = run(spec, spec.emulated().unwrap(), shape);
            assert!(report.is_clean(), "{} at {shape:?}: {report}", spec.name);
            assert_matches_reference(&report, spec.elems, &a, &b, shape);
        }
    }
}

/// Every kernel that reads A or B transposed (`registry::TRANSPOSED`) and
/// that the emulator runs, given A^T or B^T of the same product by
/// `emu::run_gemm`: C matches the reference at an odd shape.
#[test]
fn transposed_kernels_compute_the_same_product_from_the_transposes() {
    let mut ran = 0;
    for spec in kernels_gpu::registry::TRANSPOSED {
        let Ok(body) = spec.emulated() else { continue };
        let shape = (37, 53, 29);
        let (report, a, b) = run(spec, body, shape);
        assert!(report.is_clean(), "{} at {shape:?}: {report}", spec.name);
        assert_matches_reference(&report, spec.elems, &a, &b, shape);
        ran += 1;
    }
    assert!(ran >= 15, "only {ran} transposed kernels on the emulator");
}

/// Per the header of k21_mma_16bit.rs: `ldmatrix` (plain and `.trans`)
/// of every tile and the `cp.async` writes are free of bank conflicts,
/// for every layout of A and B.
#[test]
fn bf16_kernel_shared_memory_is_conflict_free_in_every_layout() {
    for spec in k21_mma_16bit::SPECS.iter().chain(k21_mma_16bit::TRANSPOSED) {
        let (bm, bn) = spec.launch.block_tile;
        // Square, so every layout reads its inputs in bounds.
        let d = bm.max(bn);
        let (report, ..) = run(spec, spec.emulated().unwrap(), (d, d, 128));
        assert!(report.is_clean(), "{}: {report}", spec.name);
        assert_conflict_free(&report, spec.name);
    }
}

/// Per the header of k10_tuned.rs: step 10's fragment reads are free of
/// bank conflicts, and its staging stores at most 2-way (one conflict per
/// request) in every layout, none where K is staged 8 at a time: A's
/// tile and, where B is stored transposed, B's have rows padded by 4
/// floats. Without B's padding the `_nt` and `_tt` tiles at BK = 16 store
/// B's tile 4-way (three conflicts per request).
#[test]
fn tuned_tiles_store_at_most_two_way_and_read_conflict_free_in_every_layout() {
    for spec in k10_tuned::SPECS.iter().chain(k10_tuned::TRANSPOSED) {
        let (bm, bn) = spec.launch.block_tile;
        // Square, so every layout reads its inputs in bounds; two tiles
        // of K at BK = 16.
        let d = bm.max(bn);
        let (report, ..) = run(spec, spec.emulated().unwrap(), (d, d, 32));
        assert!(report.is_clean(), "{}: {report}", spec.name);
        let banks = &report.banks;
        assert_eq!(banks.loads.conflicts, 0, "{}: {banks}", spec.name);
        let bk8 = spec.name.contains("x8_");
        for site in banks.sites.iter().filter(|s| s.op == Op::Store) {
            let (requests, conflicts) = (site.traffic.requests, site.traffic.conflicts);
            let most = if bk8 { 0 } else { requests };
            assert!(
                conflicts <= most,
                "{}: a store site with {conflicts} conflicts in {requests} requests\n{banks}",
                spec.name
            );
        }
    }
}

/// Step 10 where C's rows are off 16 bytes and A's and B's are not (B
/// transposed: its rows run along K; n = 2 * BN + 2, so `ldc` is not a
/// multiple of 4): the blocks inside C take the unguarded body (128-bit
/// loads) and must store one value at a time; the emulator checks every
/// access's bounds and alignment (a 128-bit store there is reported), and
/// C matches the reference. It does not show that the unguarded body is
/// taken: the guarded one would pass too (the speed is measured on the
/// GPU, docs/measurements.md, thirty-sixth session).
#[test]
fn tuned_tiles_load_vectors_where_only_c_is_off_16_bytes() {
    for spec in k10_tuned::TRANSPOSED.iter().filter(|s| s.ops == Ops::NT) {
        let (bm, bn) = spec.launch.block_tile;
        let shape = (2 * bm, 2 * bn + 2, 32);
        let (report, a, b) = run(spec, spec.emulated().unwrap(), shape);
        assert!(report.is_clean(), "{} at {shape:?}: {report}", spec.name);
        assert_matches_reference(&report, spec.elems, &a, &b, shape);
    }
}

/// Step 10 where K is off its tiles but every row is on 16 bytes (K a
/// multiple of 4, C of whole blocks): every block takes the guarded body,
/// zeros past K's end (the fortieth session read only the tile past K
/// element by element and kept 128-bit loads for the rest; every call
/// timed ran slower with it but one, docs/measurements.md, forty-second
/// session; reverted). K of a part of a tile only (the
/// prologue's tile), of one tile and a part (both the prologue's), and
/// of several (the main loop's fetch).
#[test]
fn tuned_tiles_match_at_a_k_off_their_tiles() {
    for spec in k10_tuned::SPECS.iter().chain(k10_tuned::TRANSPOSED) {
        let (bm, bn) = spec.launch.block_tile;
        for k in [4, 20, 52] {
            let shape = (2 * bm, 2 * bn, k);
            let (report, a, b) = run(spec, spec.emulated().unwrap(), shape);
            assert!(report.is_clean(), "{} at {shape:?}: {report}", spec.name);
            assert_matches_reference(&report, spec.elems, &a, &b, shape);
        }
    }
}

/// Step 28's scalar loop (rows of A and B not on 16 bytes, or a short
/// K) with its rounds' loads in flight together, and its vector loop's
/// tail: K past a multiple of the rounds and not, rows of A beyond one
/// block's 8, columns past the last warp's 4.
#[test]
fn decode_kernel_matches_on_its_scalar_path_and_its_tail() {
    let spec = &kernels_gpu::k28_decode_nt::SPEC;
    let body = spec.emulated().expect("step 28 runs on the emulator");
    for shape in [
        (5, 40, 301),
        (16, 17, 515),
        (1, 9, 33),
        (9, 4, 1000),
        (3, 21, 129),
    ] {
        let (report, a, b) = run(spec, body, shape);
        assert!(report.is_clean(), "{shape:?}: {report}");
        assert_matches_reference(&report, spec.elems, &a, &b, shape);
    }
}

/// Step 16's loops at their edges: one row of C (the warp's second row
/// reads the first again), rows past the last block's first warp, K
/// under one vector round (the scalar rounds and their tail), rows off
/// 16 bytes (K odd: the scalar rounds alone), several vector rounds
/// then scalar ones, and several columns.
#[test]
fn gemv_matches_on_one_row_and_on_its_scalar_rounds() {
    let spec = &kernels_gpu::k16_gemv::SPEC;
    let body = spec.emulated().expect("step 16 runs on the emulator");
    for shape in [
        (1, 1, 300),
        (3, 1, 1003),
        (9, 1, 2560 + 260),
        (1, 26, 517),
        (2, 3, 4096),
    ] {
        let (report, a, b) = run(spec, body, shape);
        assert!(report.is_clean(), "{shape:?}: {report}");
        assert_matches_reference(&report, spec.elems, &a, &b, shape);
    }
}

/// Step 30's instances (`k30_decode_staged.rs`): rows of A fewer than
/// an instance's and more (rows of blocks), rows of B past the last
/// warp's, K of part of a stage, of several with a partial last one and
/// of more stages than the ring holds, rows on 16 bytes (16-byte copies)
/// and off them (4-byte copies); its shared-memory reads of a whole
/// stage are free of bank conflicts.
#[test]
fn staged_decode_matches_at_every_edge_and_reads_without_conflicts() {
    for spec in k30_decode_staged::SPECS {
        let body = spec.emulated().expect("step 30 runs on the emulator");
        let (mr, br) = spec.launch.block_tile;
        for shape in [
            (5, 40, 301),
            (1, 9, 33),
            (mr + 3, 2 * br + 5, 1000),
            (3, 21, 130),
            (
                mr,
                br,
                4 * k30_decode_staged::BK * k30_decode_staged::STAGES + 4,
            ),
        ] {
            let (report, a, b) = run(spec, body, shape);
            assert!(report.is_clean(), "{} at {shape:?}: {report}", spec.name);
            assert_matches_reference(&report, spec.elems, &a, &b, shape);
        }
        let (report, ..) = run(spec, body, (mr, br, 2 * k30_decode_staged::BK));
        let banks = &report.banks;
        assert!(banks.loads.requests > 0, "{}: {banks}", spec.name);
        assert_eq!(banks.loads.conflicts, 0, "{}: {banks}", spec.name);
    }
}

/// Step 29 in every layout (`k29_small_k.rs`): K of one pass, a pass
/// and a bit, and several passes, at tiles inside C and over its edges,
/// C's rows on 16 bytes and off them (both column roles), matches the
/// reference; its staging stores and fragment reads are free
/// of bank conflicts (the padding's claim), in every layout.
#[test]
fn small_k_kernel_matches_in_every_layout_and_its_shared_memory_is_conflict_free() {
    let specs = [
        k29_small_k::SPEC,
        k29_small_k::SPEC_TN,
        k29_small_k::SPEC_NT,
        k29_small_k::SPEC_TT,
    ];
    for spec in &specs {
        let body = spec.emulated().expect("step 29 runs on the emulator");
        for shape in [
            (64, 128, 8),
            (65, 129, 4),
            (130, 200, 13),
            (7, 300, 1),
            (128, 128, 37),
            (3, 5, 20),
        ] {
            let (report, a, b) = run(spec, body, shape);
            assert!(report.is_clean(), "{} at {shape:?}: {report}", spec.name);
            assert_matches_reference(&report, spec.elems, &a, &b, shape);
        }
        // Whole passes over a whole tile: every lane stages and reads,
        // with C's rows on 16 bytes (the float4 columns) and off them
        // (an odd ldc: the strided columns).
        for n in [k29_small_k::BN, k29_small_k::BN - 1] {
            let (report, ..) = run(spec, body, (k29_small_k::BM, n, 2 * k29_small_k::KC));
            assert_conflict_free(&report, spec.name);
        }
    }
}

/// Small integers, exact in BF16 and FP16, different for most positions.
fn small(i: usize, mul: usize, modulus: usize) -> f32 {
    (i * mul % modulus) as f32 - (modulus / 2) as f32
}

/// Every lane's `mma.m16n8k16` of a known product, its fragments built
/// from the PTX ISA's table (independently of the kernels): A[m][k] =
/// small(16m + k), B[k][n] = small(8k + n), C[m][n] = 8m + n; lane l
/// writes its four results to C[4l .. 4l + 4].
fn mma16_of_a_known_product<T: Element>(g: Gemm) {
    let lane = thread_idx_x();
    let (gr, t) = (lane / 4, lane % 4);
    let a = |m: usize, k: usize| small(16 * m + k, 7, 13);
    let b = |k: usize, n: usize| small(8 * k + n, 5, 11);
    // One register: two neighbours along K, the lower in the low half.
    let pair = |lo: f32, hi: f32| T::from_f32(lo).bits() | (T::from_f32(hi).bits() << 16);
    let af = [
        pair(a(gr, 2 * t), a(gr, 2 * t + 1)),
        pair(a(gr + 8, 2 * t), a(gr + 8, 2 * t + 1)),
        pair(a(gr, 2 * t + 8), a(gr, 2 * t + 9)),
        pair(a(gr + 8, 2 * t + 8), a(gr + 8, 2 * t + 9)),
    ];
    let bf = [
        pair(b(2 * t, gr), b(2 * t + 1, gr)),
        pair(b(2 * t + 8, gr), b(2 * t + 9, gr)),
    ];
    let cell = |m: usize, n: usize| (8 * m + n) as f32;
    let mut c = [
        cell(gr, 2 * t),
        cell(gr, 2 * t + 1),
        cell(gr + 8, 2 * t),
        cell(gr + 8, 2 * t + 1),
    ];
    mma_m16n8k16::<T>(&mut c, af, bf);
    for (i, v) in c.into_iter().enumerate() {
        // SAFETY: 4 distinct elements per lane of a 1 x 128 C.
        unsafe { g.c.write(4 * lane + i, v) };
    }
}

#[test]
fn the_emulated_16_bit_mma_follows_the_ptx_fragment_layout() {
    let bodies: [NamedBody; 2] = [
        ("bf16", mma16_of_a_known_product::<Bf16>),
        ("f16", mma16_of_a_known_product::<F16>),
    ];
    for (name, body) in bodies {
        let spec = probe("mma16_layout", 32, 0, body);
        let spec = KernelSpec {
            launch: Launch {
                block_tile: (1, 128),
                ..spec.launch
            },
            ..spec
        };
        let (report, ..) = run(&spec, body, (1, 128, 1));
        assert!(report.is_clean(), "{report}");
        for lane in 0..32 {
            let (gr, t) = (lane / 4, lane % 4);
            let d = |m: usize, n: usize| -> f32 {
                let dot: f32 = (0..16)
                    .map(|k| small(16 * m + k, 7, 13) * small(8 * k + n, 5, 11))
                    .sum();
                dot + (8 * m + n) as f32
            };
            let want = [
                d(gr, 2 * t),
                d(gr, 2 * t + 1),
                d(gr + 8, 2 * t),
                d(gr + 8, 2 * t + 1),
            ];
            assert_eq!(
                report.c[4 * lane..4 * lane + 4],
                want,
                "{name}, lane {lane}"
            );
        }
    }
}

/// Lane 0 of the only warp leaves before the warp's `mma`.
fn mma_without_lane_0(g: Gemm) {
    if thread_idx_x() == 0 {
        return;
    }
    let mut c = [0.0; 4];
    mma_m16n8k8_tf32(&mut c, [to_tf32(1.0); 4], [to_tf32(1.0); 2]);
    // SAFETY: thread t < 32 writes C[t] of a 1 x 32 C, one owner each.
    unsafe { g.c.write(thread_idx_x(), c[0]) };
}

#[test]
fn a_warp_collective_a_lane_skips_is_a_barrier_error_not_a_hang() {
    let (report, ..) = run(
        &probe("mma_skip", 32, 0, mma_without_lane_0),
        mma_without_lane_0,
        (1, 32, 1),
    );
    assert_eq!(report.barrier_errors.len(), 1, "{report}");
    let error = &report.barrier_errors[0];
    assert_eq!(error.exited, [(0, 0)], "{report}");
    assert!(
        error.waiting.len() == 1 && error.waiting[0].warp_collective,
        "{report}"
    );
    assert_eq!(error.waiting[0].threads.len(), 31, "{report}");
    assert!(error.to_string().contains("warp collective"), "{error}");
}

/// Every lane's `mma` of a known product: A = 1 everywhere, B[k][n] = n,
/// C = lane, so D[m][n] = 8 n + C[m][n].
fn mma_of_a_known_product(g: Gemm) {
    let lane = thread_idx_x();
    let b = to_tf32((lane / 4) as f32);
    let mut c = [lane as f32; 4];
    mma_m16n8k8_tf32(&mut c, [to_tf32(1.0); 4], [b, b]);
    for (i, v) in c.into_iter().enumerate() {
        // SAFETY: 4 distinct elements per lane of a 1 x 128 C.
        unsafe { g.c.write(4 * lane + i, v) };
    }
}

#[test]
fn the_emulated_mma_follows_the_ptx_fragment_layout() {
    // One block of 32 threads for all 128 elements of C.
    let spec = probe("mma_layout", 32, 0, mma_of_a_known_product);
    let spec = KernelSpec {
        launch: Launch {
            block_tile: (1, 128),
            ..spec.launch
        },
        ..spec
    };
    let (report, ..) = run(&spec, mma_of_a_known_product, (1, 128, 1));
    assert!(report.is_clean(), "{report}");
    for lane in 0..32 {
        let quad = lane % 4;
        // Lane (g, t) holds D[g][2t], D[g][2t + 1], D[g + 8][2t], D[g + 8][2t + 1]:
        // columns 2t and 2t + 1, so 8 * column plus its own C.
        let want = [2 * quad, 2 * quad + 1, 2 * quad, 2 * quad + 1].map(|n| (8 * n + lane) as f32);
        assert_eq!(report.c[4 * lane..4 * lane + 4], want, "lane {lane}");
    }
}

/// Lane `l`'s value: a mantissa in [1, 2) times one of four magnitudes
/// from 1e-7 to 1e4, so that rounding shows the order of the additions.
fn lane_value(lane: usize) -> f32 {
    (1.0 + (lane * 37 % 32) as f32 / 32.0) * [1.0, 1e-3, 1e4, 1e-7][lane % 4]
}

/// The lane whose value lane `l` reads by index: a permutation with no
/// fixed point pattern a shifted or mirrored read would match.
fn source_lane(lane: usize) -> usize {
    (7 * lane + 3) % 32
}

/// C gets, per lane, its partner's value for mask 5, then the warp's sum,
/// then the value of lane [`source_lane`].
fn shuffle_and_sum(g: Gemm) {
    let lane = thread_idx_x();
    let x = lane_value(lane);
    let partner = shuffle_xor(x, 5);
    let sum = warp_sum(x);
    let picked = shuffle_idx(x, source_lane(lane) as u32);
    // SAFETY: lane l writes C[l], C[32 + l] and C[64 + l] of a 1 x 96 C,
    // one owner each.
    unsafe {
        g.c.write(lane, partner);
        g.c.write(32 + lane, sum);
        g.c.write(64 + lane, picked);
    }
}

#[test]
fn the_emulated_shuffles_trade_by_xor_mask_and_by_lane_and_the_warp_sum_is_a_butterfly() {
    let spec = probe("shuffle", 32, 0, shuffle_and_sum);
    let spec = KernelSpec {
        launch: Launch {
            block_tile: (1, 96),
            ..spec.launch
        },
        ..spec
    };
    let (report, ..) = run(&spec, shuffle_and_sum, (1, 96, 1));
    assert!(report.is_clean(), "{report}");
    // The butterfly on paper: masks 16, 8, 4, 2, 1, each lane adding its
    // partner's running sum to its own.
    let mut sums: Vec<f32> = (0..32).map(lane_value).collect();
    for mask in [16, 8, 4, 2, 1] {
        sums = (0..32).map(|l| sums[l] + sums[l ^ mask]).collect();
    }
    assert!(sums.iter().all(|s| s.to_bits() == sums[0].to_bits()));
    // Another order of the same additions gives other bits: the test can
    // tell a butterfly from a plain loop.
    let in_order: f32 = (0..32).map(lane_value).sum();
    assert_ne!(in_order.to_bits(), sums[0].to_bits());
    for lane in 0..32 {
        assert_eq!(report.c[lane], lane_value(lane ^ 5), "lane {lane}");
        assert_eq!(
            report.c[32 + lane].to_bits(),
            sums[0].to_bits(),
            "lane {lane}"
        );
        assert_eq!(
            report.c[64 + lane],
            lane_value(source_lane(lane)),
            "lane {lane}"
        );
    }
}

/// Lane 3 leaves before the warp's sum.
fn sum_without_lane_3(g: Gemm) {
    if thread_idx_x() == 3 {
        return;
    }
    let s = warp_sum(1.0);
    // SAFETY: thread t < 32 writes C[t] of a 1 x 32 C, one owner each.
    unsafe { g.c.write(thread_idx_x(), s) };
}

#[test]
fn a_shuffle_a_lane_skips_is_a_barrier_error_not_a_hang() {
    let (report, ..) = run(
        &probe("shuffle_skip", 32, 0, sum_without_lane_3),
        sum_without_lane_3,
        (1, 32, 1),
    );
    assert_eq!(report.barrier_errors.len(), 1, "{report}");
    let error = &report.barrier_errors[0];
    assert_eq!(error.exited, [(3, 0)], "{report}");
    assert!(error.waiting[0].warp_collective, "{report}");
}

/// Step 17's copy of B, run on A: C (k x ld) = A^T rounded to TF32,
/// zeros past A's rows (`pad::transpose_tf32` with `ld = n`).
fn transpose_a_into_c(g: Gemm) {
    kernels_gpu::pad::transpose_tf32(g.a, g.c, g.m, g.k, g.lda, g.n);
}

#[test]
fn the_transposing_copy_writes_a_rounded_transpose_padded_with_zeros() {
    use kernels_gpu::pad::{TILE, TRANSPOSE_SHARED_BYTES, TRANSPOSE_THREADS};
    // A is 37 x 37; C is 37 x 40 (ld 40: three zeros after each row). The
    // grid, ceil(40 / TILE) x ceil(37 / TILE), is the one the host uses,
    // ceil(cols / TILE) x ceil(ld / TILE): 2 x 2.
    let (m, n, k): (usize, usize, usize) = (37, 40, 37);
    assert_eq!(n.div_ceil(TILE), k.div_ceil(TILE));
    let spec = probe("transpose", TRANSPOSE_THREADS as u32, 0, transpose_a_into_c);
    let spec = KernelSpec {
        launch: Launch {
            block_tile: (TILE, TILE),
            shared_bytes: TRANSPOSE_SHARED_BYTES,
            ..spec.launch
        },
        ..spec
    };
    let (report, a, _) = run(&spec, transpose_a_into_c, (m, n, k));
    assert!(report.is_clean(), "{report}");
    for c in 0..k {
        for r in 0..n {
            let want = if r < m {
                f32::from_bits(to_tf32(a[r * k + c]))
            } else {
                0.0
            };
            assert_eq!(report.c[c * n + r].to_bits(), want.to_bits(), "C[{c}][{r}]");
        }
    }
    // The rounding is real: some inputs change.
    assert!(a.iter().any(|&x| f32::from_bits(to_tf32(x)) != x));
}

/// Step 24's copies, run on A: C's rows (ld = n) get A's rows split
/// (`pad::split_rows_tf32`), or A^T's (`pad::transpose_split_tf32`).
fn split_a_into_c(g: Gemm) {
    kernels_gpu::pad::split_rows_tf32(g.a, g.c, g.m, g.k, g.lda, g.n);
}
fn transpose_split_a_into_c(g: Gemm) {
    kernels_gpu::pad::transpose_split_tf32(g.a, g.c, g.m, g.k, g.lda, g.n);
}

/// Whether `row` (`2 * k_len` words) holds `values` (then zeros, up to
/// `k_len`) split as `TmaCopy::SplitTf32` says: chunk `j`'s 32 big parts,
/// then its 32 small ones, each the round-to-nearest TF32 of the value and
/// of its remainder.
fn assert_split_row(row: &[f32], values: &[f32], what: &str) {
    for c in 0..row.len() / 2 {
        let at = 2 * (c - c % 32) + c % 32;
        let x = values.get(c).copied().unwrap_or(0.0);
        let big = f32::from_bits(to_tf32(x));
        let small = f32::from_bits(to_tf32(x - big));
        assert_eq!(
            row[at].to_bits(),
            big.to_bits(),
            "{what}: big part of value {c}"
        );
        assert_eq!(
            row[at + 32].to_bits(),
            small.to_bits(),
            "{what}: small part of value {c}"
        );
        // The parts hold the value to about 22 bits (f32 keeps 24).
        assert!(
            (big + small - x).abs() <= x.abs() * 2f32.powi(-21),
            "{what}: value {c}"
        );
    }
}

#[test]
fn the_3xtf32_copies_split_every_value_into_two_tf32_parts_chunk_by_chunk() {
    use kernels_gpu::pad::{THREADS, TILE, TRANSPOSE_SHARED_BYTES, TRANSPOSE_THREADS};
    // A is 37 x 37; each copy's rows are 2 x 64 words (k rounded up to 64,
    // zeros past 37), so C is 37 x 128. Grids as the host launches them:
    // split, ceil(64 / THREADS) x 37 rows; transposed, ceil(37 / TILE) x
    // ceil(64 / TILE).
    let (m, n, k): (usize, usize, usize) = (37, 128, 37);
    let split = probe("split", THREADS as u32, 0, split_a_into_c);
    let split = KernelSpec {
        launch: Launch {
            block_tile: (1, n),
            ..split.launch
        },
        ..split
    };
    let (report, a, _) = run(&split, split_a_into_c, (m, n, k));
    assert!(report.is_clean(), "{report}");
    for r in 0..m {
        assert_split_row(
            &report.c[r * n..(r + 1) * n],
            &a[r * k..(r + 1) * k],
            "A's row",
        );
    }
    let transposed = probe(
        "transpose_split",
        TRANSPOSE_THREADS as u32,
        0,
        transpose_split_a_into_c,
    );
    let transposed = KernelSpec {
        launch: Launch {
            block_tile: (TILE, n / 2),
            shared_bytes: TRANSPOSE_SHARED_BYTES,
            ..transposed.launch
        },
        ..transposed
    };
    let (report, a, _) = run(&transposed, transpose_split_a_into_c, (m, n, k));
    assert!(report.is_clean(), "{report}");
    for c in 0..k {
        let column: Vec<f32> = (0..m).map(|r| a[r * k + c]).collect();
        assert_split_row(&report.c[c * n..(c + 1) * n], &column, "A^T's row");
    }
    // The inputs have remainders: some small parts are not zero.
    assert!(a.iter().any(|&x| f32::from_bits(to_tf32(x)) != x));
}

/// A padding copy (`pad::pad_rows_wide`, `W` elements of `T` per
/// thread), run on A viewed as `T`: C (m x n, n a multiple of `W`) = A
/// rounded to `T`, zeros past A's k columns (`ld = n`).
fn pad_a_into_c<T: kernels_gpu::elem::Element, const W: usize>(g: Gemm) {
    kernels_gpu::pad::pad_rows_wide::<T, W>(g.a.retyped(), g.c.retyped(), g.m, g.k, g.lda, g.n);
}

/// Runs [`pad_a_into_c`] on a 37 x 29 A into an m x `n` C, in one block
/// of THREADS threads per row (each writing W elements: most of the
/// block has no work), as the host launches it: ceil(ld / (THREADS * W))
/// x rows; checks every element, the zeros included, bit for bit.
fn check_padding_copy<T: kernels_gpu::elem::Element, const W: usize>(n: usize, name: &'static str) {
    use kernels_gpu::pad::THREADS;
    let (m, k): (usize, usize) = (37, 29);
    assert_eq!(n.div_ceil(THREADS * W), 1);
    let spec = probe(name, THREADS as u32, 0, pad_a_into_c::<T, W>);
    let (report, a, _) = run(&spec, pad_a_into_c::<T, W>, (m, n, k));
    assert!(report.is_clean(), "{report}");
    for r in 0..m {
        for c in 0..n {
            let want = if c < k {
                T::from_f32(a[r * k + c]).to_f32()
            } else {
                0.0
            };
            assert_eq!(
                report.c[r * n + c].to_bits(),
                want.to_bits(),
                "{name}: C[{r}][{c}]"
            );
        }
    }
}

#[test]
fn the_16_bit_padding_copy_writes_rows_of_8_with_zeros_past_the_matrix() {
    // C is 37 x 32: three zeros after each row.
    check_padding_copy::<kernels_gpu::elem::Bf16, { kernels_gpu::pad::X8 }>(32, "pad_rows_16");
}

#[test]
fn the_8_bit_padding_copy_writes_rows_of_16_with_zeros_past_the_matrix() {
    // C is 37 x 48: 19 zeros after each row; E4M3 (step 25's operands).
    check_padding_copy::<kernels_gpu::elem::E4m3, { kernels_gpu::pad::X16 }>(48, "pad_rows_8");
}

/// The epilogue of a BF16 C (`gemm::Output`, steps 19-20's `_c16`
/// instances), run on C viewed as BF16: thread `t` of block `y` stores
/// columns `2t, 2t + 1` of row `y`, as one pair where C's rows allow it
/// (`Output::pairs`: `ldc` even), else one by one, with `acc = 3 *
/// A[row][col]` as the accumulator.
fn bf16_epilogue(g: Gemm) {
    use kernels_gpu::elem::Bf16;
    use kernels_gpu::gemm::Output;
    let c: Gemm<f32, f32, Bf16> = Gemm {
        a: g.a,
        b: g.b,
        c: g.c.retyped(),
        m: g.m,
        n: g.n,
        k: g.k,
        k0: g.k0,
        product: g.product,
        lda: g.lda,
        ldb: g.ldb,
        ldc: g.ldc,
        alpha: g.alpha,
        beta: g.beta,
        slices: g.slices,
        ep: g.ep,
    };
    let (row, col) = (block_idx_y(), 2 * thread_idx_x());
    if row >= g.m || col >= g.n {
        return;
    }
    // SAFETY: row < m = k's rows of A and col, col + 1 < k (n <= k here).
    let acc = |j: usize| 3.0 * unsafe { g.a.read(row * g.lda + col + j) };
    if col + 1 < g.n && <Bf16 as Output>::pairs(c) {
        // SAFETY: C[row][col..col + 2], inside C, this thread's own, even
        // index (ldc even).
        unsafe { <Bf16 as Output>::store2(c, row * g.ldc + col, [acc(0), acc(1)]) };
    } else {
        for j in 0..2.min(g.n - col) {
            // SAFETY: C[row][col + j], inside C, this thread's own.
            unsafe { <Bf16 as Output>::store(c, row * g.ldc + col + j, acc(j)) };
        }
    }
}

#[test]
fn the_bf16_epilogue_rounds_to_nearest_and_stores_pairs() {
    use kernels_gpu::elem::{Bf16, Element};
    // C is 5 x 8 (pairs) or 5 x 7 (ldc odd: one by one); A is 5 x 8, of
    // which the first n columns feed C.
    for n in [8, 7] {
        let (m, k): (usize, usize) = (5, 8);
        let spec = probe("bf16_epilogue", 4, 0, bf16_epilogue);
        let spec = KernelSpec {
            launch: Launch {
                block_tile: (1, 8),
                ..spec.launch
            },
            ..spec
        };
        let (report, a, _) = run(&spec, bf16_epilogue, (m, n, k));
        assert!(report.is_clean(), "{report}");
        let mut rounded = 0;
        for r in 0..m {
            for c in 0..n {
                let exact = 3.0 * a[r * k + c];
                let want = Bf16::from_f32(exact).to_f32();
                rounded += (want != exact) as usize;
                assert_eq!(
                    report.c[r * n + c].to_bits(),
                    want.to_bits(),
                    "n {n}: C[{r}][{c}]"
                );
            }
        }
        // The rounding is real: the f32 products are not BF16 values.
        assert!(rounded > 0);
    }
}

/// Starts a copy and never waits for it.
fn copy_never_waited_for(g: Gemm) {
    let tile = SharedTile::<1, 4>::at(0);
    if thread_idx_x() == 0 {
        // SAFETY: inside the 4-word tile and A (4 floats); aligned.
        unsafe { tile.copy4_async(0, 0, g.a, 0, 4) };
        commit_group();
    }
}

/// Starts a copy, waits for it, then reads it after a barrier.
fn copy_waited_for(g: Gemm) {
    let tile = SharedTile::<1, 4>::at(0);
    if thread_idx_x() == 0 {
        // SAFETY: as above.
        unsafe { tile.copy4_async(0, 0, g.a, 0, 4) };
        commit_group();
        wait_group::<0>();
    }
    sync_threads();
    // SAFETY: t < 4 reads word t, written before the barrier.
    let x = unsafe { tile.load(0, thread_idx_x()) };
    // SAFETY: thread t writes C[t] of a 1 x 4 C.
    unsafe { g.c.write(thread_idx_x(), x) };
}

#[test]
fn a_copy_never_waited_for_is_reported_and_a_waited_one_lands() {
    let spec = probe("copy_unwaited", 4, 4, copy_never_waited_for);
    let (report, ..) = run(&spec, copy_never_waited_for, (1, 4, 4));
    assert_eq!(report.unwaited_copies.len(), 1, "{report}");
    assert_eq!(report.unwaited_copies[0].thread.thread, (0, 0), "{report}");
    assert!(!report.is_clean());
    let spec = probe("copy_waited", 4, 4, copy_waited_for);
    let (report, a, _) = run(&spec, copy_waited_for, (1, 4, 4));
    assert!(report.is_clean(), "{report}");
    assert_eq!(report.c, a[..4], "the copy landed");
}

/// For each registered kernel on `shape`: the estimate, the time
/// `run_gemm` took, and the time the estimate took to measure.
fn estimates_and_runs(shape: (usize, usize, usize)) -> Vec<(&'static str, f64, f64, f64)> {
    let (m, n, k) = shape;
    let (a, b) = inputs(m, n, k);
    let _alone = TIMING.write().unwrap_or_else(PoisonError::into_inner);
    emulated()
        .map(|(spec, body)| {
            let estimate = emu::estimate(spec, body, m, n, k).expect("threads");
            let started = Instant::now();
            let report = emu::run_gemm(spec, body, &a, &b, m, n, k);
            let ran = started.elapsed().as_secs_f64();
            assert!(report.is_clean(), "{report}");
            (spec.name, estimate.seconds(), ran, estimate.calibration)
        })
        .collect()
}

/// The estimate is what `host --emulate` refuses sizes by: it must be
/// near the real time for every kernel. (Bounds are loose: this is a
/// debug build, with other test binaries' work possibly beside it;
/// `estimates_next_to_runs` measures a release build.)
#[test]
fn estimates_are_near_the_runs() {
    let rows = estimates_and_runs((48, 80, 64));
    let table: String = (rows.iter())
        .map(|(kernel, estimate, ran, _)| {
            format!("\n{kernel}: estimated {estimate:.3} s, ran {ran:.3} s")
        })
        .collect();
    for &(kernel, estimate, ran, calibration) in &rows {
        assert!(
            (0.25..4.0).contains(&(estimate / ran)),
            "{kernel} is off:{table}"
        );
        // Small next to the minute it guards (a block of step 11's
        // 256-thread, warp-collective kernels takes ~0.3 s in a debug build).
        assert!(
            calibration < 2.0,
            "{kernel}: measuring took {calibration:.3} s"
        );
    }
    let estimated: f64 = rows.iter().map(|r| r.1).sum();
    let ran: f64 = rows.iter().map(|r| r.2).sum();
    assert!(
        (0.5..2.0).contains(&(estimated / ran)),
        "all kernels are off:{table}"
    );
}

/// The table of estimates next to real times (a few minutes; run alone,
/// in release: `cargo test --release -p tests --test emulator --
/// --ignored --nocapture estimates_next_to_runs`).
#[test]
#[ignore]
fn estimates_next_to_runs() {
    println!("| kernel | m x n x k | estimated s | ran s | estimate / run | measuring s |");
    println!("|---|---|---:|---:|---:|---:|");
    for shape in [
        (128, 128, 128),
        (256, 256, 256),
        (1, 1, 16384),
        (1, 65536, 1),
    ] {
        for (kernel, estimate, ran, calibration) in estimates_and_runs(shape) {
            let (m, n, k) = shape;
            let ratio = estimate / ran;
            println!(
                "| {kernel} | {m} x {n} x {k} | {estimate:.3} | {ran:.3} | {ratio:.2} | {calibration:.3} |"
            );
            if ran > 0.1 {
                assert!((0.5..2.0).contains(&ratio), "{kernel} at {shape:?}");
            }
        }
    }
}

/// The largest `|c - ref| / sum_k |a * b|` of `c` against `A * B` in f64
/// on the inputs as stored.
fn scaled_error(c: &[f32], a: &[f32], b: &[f32], (m, n, k): (usize, usize, usize)) -> f64 {
    let mut worst = 0.0f64;
    for row in 0..m {
        for col in 0..n {
            let (mut exact, mut magnitude) = (0.0f64, 0.0f64);
            for kk in 0..k {
                let p = a[row * k + kk] as f64 * b[kk * n + col] as f64;
                exact += p;
                magnitude += p.abs();
            }
            worst = worst.max((c[row * n + col] as f64 - exact).abs() / magnitude);
        }
    }
    worst
}

/// Step 23 (3xTF32) meets the f32 bound on the inputs as stored, and its
/// split is what does it: step 11 on the same tile, plain TF32, misses
/// that bound by far, and the two differ by more than TF32's own error.
#[test]
fn three_tf32_has_f32_accuracy_and_plain_tf32_does_not() {
    let split = &kernels_gpu::k23_mma_3xtf32::SPEC_64X64X32_W32X32_S2;
    // Step 11's nearest tile (its warp tile is 64 x 32; the product is
    // the same sum of TF32 products either way).
    let plain = &k11_mma::SPEC_128X64X32_W64X32_S2;
    for shape in [(37, 53, 29), (65, 129, 100), (1, 1, 1)] {
        let (three, a, b) = run(split, split.emulated().unwrap(), shape);
        assert!(three.is_clean(), "{three}");
        assert_matches_reference(&three, Elems::TF32X3, &a, &b, shape);
        let (one, ..) = run(plain, plain.emulated().unwrap(), shape);
        let (e3, e1) = (
            scaled_error(&three.c, &a, &b, shape),
            scaled_error(&one.c, &a, &b, shape),
        );
        assert!(e3 < 1e-6, "3xTF32 at {shape:?}: error {e3:e}");
        assert!(
            e1 > 30.0 * e3.max(1e-8),
            "TF32 at {shape:?}: error {e1:e} against 3xTF32's {e3:e}"
        );
    }
}
