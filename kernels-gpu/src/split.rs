//! Split-K inside one launch: the slices of K and their sum.
//!
//! Step 14 splits K over the grid's z (product `z` is slice `z`, its
//! partial sums plane `z` of a workspace) and adds the planes in a second
//! launch (`k14_split_k::reduce_slices`). On a small C over a long K (a
//! matrix-vector product 40,000 deep, a call of a few microseconds) that
//! second launch, its wait for the first and its own pass are a good
//! part of the time.
//!
//! What changes: a kernel with a split entry (`gemm_kernel!(name, split
//! ENTRY, SPEC)`, listed in `registry::SPLIT_IN_LAUNCH`) runs its body on
//! slice `z` as before, into plane `z`; then the block arrives at its
//! tile's counter ([`crate::device::atomic`]), and the block that arrives
//! last adds the tile's planes and stores `C = alpha * sum + beta * C`
//! with the call's epilogue. No block waits for another, so the blocks
//! may run in any order and the launch cannot hang. The sum is
//! deterministic whichever block is last: each element is added up by
//! one warp, lane `l` taking slices `l, l + 32, ...` in order, then the
//! fixed butterfly of [`warp_sum`].
//!
//! The last block of a tile reads `slices` planes of its tile: cheap for
//! a tile of a few elements per warp (step 16's 8 x 1), where a spec opts
//! in; a 32 x 32 tile of 64 threads over 64 slices would read 1,024
//! floats per thread, one at a time, and keeps step 14's reduction.
//!
//! Prediction: a long-K GEMV with split-K loses the reduction launch and
//! its gap, a launch's latency or two. Measured: the suite's long-K family
//! (`cargo xtask bench --suite --random SEED`; docs/measurements.md).

use crate::device::atomic::{Counters, fence};
use crate::device::warp::{WARP, lane, warp_idx, warp_sum};
use crate::device::{
    GlobalOut, block_idx_x, block_idx_y, grid_dim_x, sync_threads, sync_threads_or, thread_idx_x,
};
use crate::gemm::Gemm;

/// The split entry's last parameter: the device addresses of the
/// workspace (`slices` dense m x n planes of f32, the partial sums) and
/// of the tile counters (`u32`s, zero at the launch's start; the launch
/// leaves them zero). The entry takes `(A, B, C, params, epilogue,
/// split)`, `params` the call's (C's `ldc`, alpha, beta) with
/// `k_slice` and the slices' strides of A and B; the grid's z is the
/// number of slices.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SplitParams {
    pub workspace: u64,
    pub counters: u64,
}

const _: () = assert!(core::mem::size_of::<SplitParams>() == 16);

/// Tiles of C one split launch may have: the counters the host keeps
/// (4 bytes each). A call of more tiles splits in two launches.
pub const MAX_TILES: usize = 16_384;

/// What a split entry adds to its body's arguments: where the slices'
/// partial sums and the tile counters are, and the launch's geometry.
#[derive(Clone, Copy, Debug)]
pub struct Split {
    /// `slices` dense m x n planes of f32, plane `z` slice `z`'s.
    pub ws: GlobalOut<f32>,
    /// At least `gridDim.x * gridDim.y` counters, zero at the launch's
    /// start; the launch leaves them zero.
    pub counters: Counters,
    /// The grid's z.
    pub slices: usize,
    /// The block's tile of C, BM x BN at `(blockIdx.y * BM, blockIdx.x *
    /// BN)`.
    pub tile: (usize, usize),
    /// Threads per block, in one row (`blockDim.y == 1`), whole warps.
    pub threads: usize,
}

/// Runs `body` on its slice, `part` (C the slice's plane of the
/// workspace, dense, alpha 1, beta 0, no epilogue), then [`finish`]es
/// the tile for `call`.
///
/// # Safety
/// As [`finish`]; `part` as the body's own contract requires.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn in_launch(body: impl FnOnce(Gemm), part: Gemm, call: Gemm, split: Split) {
    body(part);
    // SAFETY: forwarded from this function's contract.
    unsafe { finish(call, split) }
}

/// After the block stored its slice's plane of its tile: arrive at the
/// tile's counter, and if this block is the last of the `slices` to,
/// store the tile of C from the planes, with `call`'s scalars and
/// epilogue.
///
/// # Safety
/// Every thread of the block calls it (barriers); `split` is as
/// [`Split`] says, and every block of the launch stores its tile's part
/// of plane `blockIdx.z` before the call; `call` is the call's C (as
/// `Gemm::store_c` requires) with its epilogue, of the planes' m and n.
#[inline(always)]
#[cfg_attr(not(target_arch = "nvptx64"), track_caller)]
pub unsafe fn finish(call: Gemm, split: Split) {
    let Split {
        ws,
        counters,
        slices,
        tile: (bm, bn),
        threads,
    } = split;
    // This thread's stores of the plane, seen by the GPU before the count.
    fence();
    sync_threads();
    let tile = block_idx_y() * grid_dim_x() + block_idx_x();
    let first = thread_idx_x() == 0;
    // SAFETY: tile < gridDim.x * gridDim.y, counters the contract's.
    let mine = first && unsafe { counters.arrive(tile) } as usize + 1 == slices;
    // Block-uniform from here: whether this block arrived last.
    if !sync_threads_or(mine) {
        return;
    }
    // The other blocks' stores, seen before this block's reads.
    fence();
    let (m, n) = (call.m, call.n);
    let plane = m * n;
    let (row0, col0) = (block_idx_y() * bm, block_idx_x() * bn);
    // The grid covers C with whole tiles: row0 < m and col0 < n.
    let (rows, cols) = (bm.min(m - row0), bn.min(n - col0));
    let (warps, lane) = (threads / WARP, lane());
    // Warp-uniform: every lane of the warp runs the same trips.
    let mut e = warp_idx();
    while e < rows * cols {
        let (row, col) = (row0 + e / cols, col0 + e % cols);
        let at = row * n + col;
        let mut sum = 0.0f32;
        let mut s = lane;
        while s < slices {
            // SAFETY: s < slices planes of m x n, (row, col) inside C;
            // its writer fenced before arriving, this thread after.
            sum += unsafe { ws.read_l2(s * plane + at) };
            s += WARP;
        }
        let total = warp_sum(sum);
        if lane == 0 {
            let (r, c) = (row as u32, col as u32);
            // SAFETY: (row, col) is inside C, in this block's tile, and
            // lane 0 of this warp alone stores it (warps take elements
            // e, e + warps, ...), once: this block alone is the last.
            unsafe { call.store_c(call.c_index(r, c), total) };
            if call.ep.flags != 0 {
                // SAFETY: the element this lane just stored.
                unsafe { call.fuse_region((row, col), (1, 1), 0, 1) };
            }
        }
        e += warps;
    }
    if first {
        // SAFETY: tile as above; every block of the tile has arrived.
        unsafe { counters.reset(tile) };
    }
}

#[cfg(test)]
mod tests {
    use crate::emu::{self, EmuEpilogue};
    use crate::epilogue::{Activation, Per};
    use crate::gemm::GemmParams;
    use crate::{k16_gemv, registry};

    #[test]
    fn every_split_entry_is_a_registered_kernel_of_one_row_of_warps() {
        for (spec, entry) in registry::SPLIT_IN_LAUNCH {
            assert!(registry::find(spec.name).is_some(), "{}", spec.name);
            assert_eq!(registry::split_entry(spec), Some(*entry));
            let (x, y) = spec.launch.block_threads;
            assert!(
                y == 1 && x % 32 == 0,
                "{}: blocks of one row of warps",
                spec.name
            );
            assert!(spec.batches, "{}: slices are a batch", spec.name);
        }
    }

    /// The last block of each tile adds the slices into C with beta and
    /// the epilogue; every counter is back at 0 after the launch. Integer
    /// inputs, so that every order of the sum gives the exact product.
    #[test]
    fn the_last_block_of_a_tile_adds_its_slices_into_c() {
        // Rows off the 8-row tile, several columns, one slice, slices
        // that do not divide K, more slices than a warp has lanes.
        for (m, n, k, slices) in [
            (9, 1, 1000, 4),
            (37, 3, 333, 7),
            (1, 1, 64, 1),
            (8, 2, 4200, 40),
            (20, 1, 128, 2),
        ] {
            for beta in [0.0, -1.0] {
                adds_the_slices(m, n, k, slices, beta);
            }
        }
    }

    fn adds_the_slices(m: usize, n: usize, k: usize, slices: usize, beta: f32) {
        let (lda, ldc) = (k + 3, n + 2);
        let a: Vec<f32> = (0..m * lda).map(|i| (i % 5) as f32 - 2.0).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i % 3) as f32 - 1.0).collect();
        let c: Vec<f32> = (0..m * ldc).map(|i| (i % 4) as f32).collect();
        let k_slice = k.div_ceil(slices) as u32;
        let p = GemmParams {
            lda: lda as u32,
            ldc: ldc as u32,
            alpha: 2.0,
            beta,
            k_slice,
            stride_a: k_slice as u64,
            stride_b: k_slice as u64 * n as u64,
            ..GemmParams::dense(m as u32, n as u32, k as u32)
        };
        let slices = (k as u32).div_ceil(k_slice) as usize;
        let bias: Vec<f32> = (0..m).map(|i| i as f32 - 9.0).collect();
        let ep = EmuEpilogue {
            activation: Activation::Relu,
            bias: Some((bias.clone(), Per::Row)),
            scale: None,
        };
        let (r, counters) = emu::run_split(
            &k16_gemv::SPEC,
            k16_gemv::gemv_warp_8x1,
            &p,
            slices,
            (&a, &b, &c),
            &ep,
        );
        let case = format!("{m}x{n}x{k} over {slices} slices, beta {beta}");
        assert!(r.is_clean(), "{case}: {r}");
        assert!(
            counters.iter().all(|&x| x == 0),
            "{case}: counters left {counters:?}"
        );
        for row in 0..m {
            for col in 0..ldc {
                let got = r.c[row * ldc + col];
                let old = c[row * ldc + col];
                if col >= n {
                    assert_eq!(
                        got.to_bits(),
                        old.to_bits(),
                        "{case}: padding at {row},{col}"
                    );
                    continue;
                }
                let dot: f32 = (0..k).map(|i| a[row * lda + i] * b[i * n + col]).sum();
                let want = (2.0 * dot + beta * old + bias[row]).max(0.0);
                assert_eq!(got, want, "{case}: C[{row}][{col}]");
            }
        }
    }
}
