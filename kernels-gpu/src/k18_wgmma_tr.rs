//! Step 18: B transposed in shared memory by the consumer warpgroups,
//! while their previous `wgmma` group runs: step 17 without its copy
//! kernel. Step 17 keeps the tensor cores fed (both operands in shared
//! memory, one group in flight across tiles), but every launch first
//! reads and writes all of B in global memory to transpose it, which is
//! the largest part of its gap to cuBLAS TF32 (docs/measurements.md,
//! "step 17").
//!
//! What changes from step 17:
//! - **B arrives as it is stored**: the producer copies four 32 x 32
//!   boxes of B (K x N, N-major) per stage with TMA and the 128-byte
//!   swizzle, in place of one box of B^T. No copy kernel, no extra pass
//!   over B in global memory.
//! - **Each consumer warpgroup transposes its half of the tile in place**
//!   (two boxes: its 64 columns of C) as soon as the stage lands, before
//!   issuing the tile's `wgmma`s. A 32 x 32 box with 128-byte rows
//!   swizzled by `row % 8` is the same array whether read as `[k][n]` or
//!   `[n][k]`, so transposing it in place leaves exactly the K-major,
//!   swizzled tile the `wgmma` descriptor names ([`transpose_box`]).
//!   Each lane moves one 4 x 4 block: four 16-byte loads, a `bar.warp.sync`
//!   (the block it overwrites is another lane's of the same warp), four
//!   16-byte stores, B rounded to TF32 (`cvt.rna`) on the way, as step
//!   17's copy did. Then `fence.proxy.async` (the tensor cores read
//!   through the async proxy) and the warpgroup's own named barrier.
//! - The transposition of tile kt runs while tile kt - 1's `wgmma`s are
//!   still in flight (`wait_group 1` as in step 17), so the tensor cores
//!   keep their queue as long as it takes less than a tile's tensor time.
//! - Split-K's slices and batches as step 17 takes them (see its
//!   header): the producer starts its copies at the slice's K
//!   (`Gemm::k0`), in the batch's product (`Gemm::product`).
//! - Two tiles, as step 17's: 256 x 128, and 128 x 128 for calls of
//!   256-1024 (see step 17's header).
//!
//! Shared-memory traffic, the cost: per 256 x 128 x 32 tile the `wgmma`s
//! read 80 KB (each warpgroup A's 32 KB tile and its 8 KB of B^T); the
//! transposition adds 16 KB read and 16 KB written, planned without bank
//! conflicts (each quarter-warp's eight 16-byte accesses fall in eight
//! different 16-byte bank groups, for the loads and for the stores; ncu
//! agrees for the loads but counts about one extra wavefront per store,
//! not explained yet: docs/measurements.md). That is about 110 of the 128
//! bytes per clock the SM's shared memory serves while the tensor cores
//! run at their peak.
//!
//! Prediction (H200, n = 4096): step 17's kernel time without its copy
//! (about 10 % of its launch), less what the transposition's shared
//! traffic costs: 1.0-1.05x step 17 and 0.95-1.0x cuBLAS TF32; at 2048,
//! where step 17's copy weighed most, step 13's level or better. The
//! measurement lives in docs/bench.json and the README's bench table
//! (`cargo xtask bench`), and the runs in docs/measurements.md. GPU only,
//! like steps 12-13.

#[cfg(target_arch = "nvptx64")]
use crate::device::barrier::{sync_warp, sync_warps};
#[cfg(target_arch = "nvptx64")]
use crate::device::mma::to_tf32;
#[cfg(target_arch = "nvptx64")]
use crate::device::tma::TensorMaps;
#[cfg(target_arch = "nvptx64")]
use crate::device::wgmma::{Tf32, Tf32Ss, fence_proxy_async};
#[cfg(target_arch = "nvptx64")]
use crate::device::SharedTile;
#[cfg(target_arch = "nvptx64")]
use crate::gemm::Gemm;
use crate::k12_wgmma::{BK, BN};
#[cfg(target_arch = "nvptx64")]
use crate::k13_wgmma_ws::warp_specialized;
#[cfg(target_arch = "nvptx64")]
use crate::k17_wgmma_ss::consume_ss;
use crate::k13_wgmma_ws::{Params, wgmma_instance};
use crate::launch::{KernelSpec, TmaCopy};
#[cfg(target_arch = "nvptx64")]
use crate::unroll::{inline_always, unroll};

/// Columns of B in one box, and rows (BK = 32): a 32 x 32 array of 128-byte
/// rows, 4 KB, the 128-byte swizzle's widest row.
const BOX: usize = 32;
const _: () = assert!(BK == BOX && BN.is_multiple_of(2 * BOX));

/// One parameter set: step 13's (`BM`, stages; the same stage and
/// barrier layout, B's tile as `BN / 32` boxes of `[BK][32]`).
const fn spec(p: Params, name: &'static str) -> KernelSpec {
    p.spec(
        name,
        18,
        "step 17 with B transposed in shared memory by the consumers, no copy kernel",
        (BK, BOX),
        true,
        TmaCopy::AsStored,
    )
    // Split-K's slices: each starts its K in the maps (`tr`).
    .with_slices()
}

#[rustfmt::skip]
mod instances {
    use super::*;
    wgmma_instance!(wgmma_tr_256x128x32_s4, SPEC_256X128X32_S4, spec, tr, 256, 4, sliced);
    // A 128 x 128 tile (m64n128k8): twice the blocks at 256-1024.
    wgmma_instance!(wgmma_tr_128x128x32_s6, SPEC_128X128X32_S6, spec, tr, 128, 6, sliced);
}
pub use instances::*;

/// Every instance.
pub const SPECS: &[KernelSpec] = &[SPEC_256X128X32_S4, SPEC_128X128X32_S6];

/// Step 13's block ([`warp_specialized`]); B's part of a stage is BN /
/// BOX boxes, each transposed in place before use. STAGE_WORDS = BM * BK +
/// BN * BK.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn tr<const BM: usize, const STAGES: usize, const STAGE_WORDS: usize, const ACC: usize>(g: Gemm, maps: TensorMaps)
where
    Tf32: Tf32Ss<ACC>,
{
    // SAFETY: B's part is BN / BOX boxes of BK x BOX with the 128-byte
    // swizzle (SPEC's), each 4 KB, so 1024-aligned, the rest of
    // stage_bytes(). The consumers' writes of the stage's previous tile
    // were fenced for the async proxy before they released it.
    unsafe {
        warp_specialized::<BM, BN, BK, STAGES, STAGE_WORDS>(
            g.k0 as u32,
            g.k,
            Some(g.product as u32),
            maps,
            inline_always!(|word, k0, full, col0| {
                unroll!(BN / BOX; 4, |j| {
                    // SAFETY: as warp_specialized's contract, above.
                    unsafe { maps.b().load_3d(word + j * BK * BOX, (col0 + j * BOX) as u32, k0, g.product as u32, full) };
                });
            }),
            inline_always!(|stages, row0, col0, tid, k_tiles| {
                let b_box = |s: usize, j: usize| stages.b_tile(s) + j * BK * BOX;
                let (wg, warp, lane) = (tid / 128, tid % 128 / 32, tid % 32);
                // Step 17's loop; before each tile's wgmmas this warpgroup
                // makes its 64 columns of B (boxes 2 wg and 2 wg + 1; warps
                // 0-1 of the warpgroup the first, 2-3 the second) K-major in
                // place. The wgmmas still in flight read another stage.
                consume_ss::<BM, STAGES, STAGE_WORDS, ACC>(stages, g, row0, col0, tid, k_tiles, |kt| {
                    let s = kt % STAGES;
                    transpose_box(SharedTile::at(b_box(s, 2 * wg + warp / 2)), warp % 2, lane);
                    // The tensor cores read the boxes through the async
                    // proxy: every writer fences, then the warpgroup meets
                    // (rule 3).
                    fence_proxy_async();
                    sync_warps::<128>(1 + wg as u32);
                });
            }),
        );
    }
}

/// Which 4 x 4 blocks each quarter-warp takes, by warp (`half`, 0 or 1)
/// and quarter (`lane / 8`): lane `l` takes the block `(c, g)` = `(l % 8,
/// (l % 8 + shift) % 8)` (rows `4c..4c + 4`, 16-byte chunk `g`). The
/// block a lane overwrites, `(g, c)`, is taken by the quarter with shift
/// `8 - shift`, in the same warp: shifts `[0, 4, 1, 7]` for `half` 0,
/// `[2, 6, 3, 5]` for 1, packed four bits each (an array indexed by the
/// lane would live in local memory).
#[cfg(any(target_arch = "nvptx64", test))]
const SHIFTS: u32 = 0x5362_7140;

/// Transposes the 32 x 32 box `bx` in place, rounding to TF32: B's box as
/// TMA wrote it (`bx[k][n]`, 128-byte rows, 16-byte chunk `j` of row `r`
/// stored at chunk `j ^ r % 8`) becomes B^T's (`bx[n][k]`, the same
/// swizzle), the K-major layout `wgmma` reads. Called by the two warps
/// that share `bx` (`half` 0 and 1), all 32 lanes of each.
///
/// Bank conflicts: a quarter-warp's eight lanes have the eight values of
/// `c` and one shift. Load `j` of lane `c` reads row `4c + j`, chunk
/// `g ^ (4c + j) % 8` = `(c + shift) % 8 ^ (4 (c % 2) + j)`; store `i`
/// writes row `4g + i`, chunk `c ^ (4 (g % 2) + i)`. Lanes of equal `c`
/// parity differ in the first term, lanes of unequal parity in bit 0, so
/// the eight chunks differ: each access is one wavefront.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn transpose_box(bx: SharedTile<BOX, BOX>, half: usize, lane: usize) {
    let c = lane % 8;
    let shift = (SHIFTS >> (4 * (4 * half + lane / 8))) as usize & 7;
    let g = (c + shift) % 8;
    let chunk = |row: usize, j: usize| 4 * (j ^ (row % 8));
    let mut v = [[0.0f32; 4]; 4];
    unroll!(4; 4, |j| {
        let k = 4 * c + j;
        // SAFETY: k < 32, chunk < 32 and a multiple of 4 (the box is
        // 1024-aligned): in bounds and 16-byte aligned. Between the
        // stage's landing (full wait) and sync_warp below, the words of
        // block (c, g) are read by this lane only and written by no one.
        v[j] = unsafe { bx.load4(k, chunk(k, g)) };
    });
    // Every lane of the warp has read its block before any overwrites one.
    sync_warp();
    unroll!(4; 4, |i| {
        let n = 4 * g + i;
        let column = [v[0][i], v[1][i], v[2][i], v[3][i]].map(|x| f32::from_bits(to_tf32(x)));
        // SAFETY: bounds and alignment as above. The words of block
        // (g, c)'s place are written by this lane alone, after their
        // reader (a lane of this warp) passed sync_warp; no other warp
        // touches them until the warpgroup's barrier after the fence.
        unsafe { bx.store4(n, chunk(n, c), column) };
    });
}

#[cfg(test)]
mod tests {
    use super::SHIFTS;

    /// Every block of a box is taken once; the block a lane overwrites is
    /// read by a lane of its own warp; no quarter-warp's loads or stores
    /// share a 16-byte bank group. The kernel runs on the GPU only, so
    /// the arithmetic its safety and speed rest on is checked here.
    #[test]
    fn transpose_lanes_cover_the_box_pair_within_warps_and_never_conflict() {
        let block = |half: usize, lane: usize| {
            let c = lane % 8;
            let shift = (SHIFTS >> (4 * (4 * half + lane / 8))) as usize & 7;
            (c, (c + shift) % 8)
        };
        let mut taken = [[None; 8]; 8];
        for half in 0..2 {
            for lane in 0..32 {
                let (c, g) = block(half, lane);
                assert_eq!(taken[c][g], None, "block ({c}, {g}) taken twice");
                taken[c][g] = Some(half);
            }
        }
        for (c, row) in taken.iter().enumerate() {
            for (g, warp) in row.iter().enumerate() {
                assert_eq!(
                    *warp, taken[g][c],
                    "blocks ({c}, {g}) and ({g}, {c}) are in different warps"
                );
            }
        }
        for half in 0..2 {
            for quarter in 0..4 {
                let lanes = (8 * quarter..8 * quarter + 8).map(|l| block(half, l));
                for j in 0..4 {
                    let mut loads: Vec<usize> =
                        lanes.clone().map(|(c, g)| g ^ ((4 * c + j) % 8)).collect();
                    let mut stores: Vec<usize> =
                        lanes.clone().map(|(c, g)| c ^ ((4 * g + j) % 8)).collect();
                    loads.sort_unstable();
                    stores.sort_unstable();
                    loads.dedup();
                    stores.dedup();
                    assert_eq!((loads.len(), stores.len()), (8, 8), "conflict");
                }
            }
        }
    }
}
