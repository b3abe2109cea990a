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
//!
//! Shared-memory traffic, the cost: per 256 x 128 x 32 tile the `wgmma`s
//! read 80 KB (each warpgroup A's 32 KB tile and its 8 KB of B^T); the
//! transposition adds 16 KB read and 16 KB written, with no bank
//! conflicts (each quarter-warp's eight 16-byte accesses fall in eight
//! different 16-byte bank groups, for the loads and for the stores). That
//! is about 110 of the 128 bytes per clock the SM's shared memory serves
//! while the tensor cores run at their peak.
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
use crate::device::mbarrier::{MBarrier, fence_init};
#[cfg(target_arch = "nvptx64")]
use crate::device::mma::to_tf32;
#[cfg(target_arch = "nvptx64")]
use crate::device::tma::TensorMaps;
#[cfg(target_arch = "nvptx64")]
use crate::device::wgmma::{
    commit_group, descriptor_k_major_sw128, fence_proxy_async, fence_ss_128,
    mma_m64n256k8_tf32_ss, release_registers, take_registers, wait_ss_128,
};
#[cfg(target_arch = "nvptx64")]
use crate::device::{SharedTile, block_idx_x, block_idx_y, shared, sync_threads, thread_idx_x};
#[cfg(target_arch = "nvptx64")]
use crate::gemm::Gemm;
#[cfg(target_arch = "nvptx64")]
use crate::k12_wgmma::store_tile;
use crate::k12_wgmma::{BK, BN, GPU_ONLY};
#[cfg(target_arch = "nvptx64")]
use crate::k12_wgmma::ALIGN;
#[cfg(target_arch = "nvptx64")]
use crate::k13_wgmma_ws::{CONSUMER_REGISTERS, CONSUMERS, PRODUCER_REGISTERS};
use crate::k13_wgmma_ws::{Params, THREADS};
use crate::launch::{Body, KernelSpec, Launch, Operands, Ops, Precision, TmaBoxes};
use crate::modules;
#[cfg(target_arch = "nvptx64")]
use crate::unroll::unroll;

/// Columns of B in one box, and rows (BK = 32): a 32 x 32 array of 128-byte
/// rows, 4 KB, the 128-byte swizzle's widest row.
const BOX: usize = 32;
const _: () = assert!(BK == BOX && BN.is_multiple_of(2 * BOX));

/// One parameter set: step 13's (`BM`, stages; the same stage and
/// barrier layout, B's tile as `BN / 32` boxes of `[BK][32]`).
const fn spec(p: Params, name: &'static str) -> KernelSpec {
    p.check();
    KernelSpec {
        name,
        step: 18,
        module: &modules::WGMMA,
        precision: Precision::Tf32,
        summary: "step 17 with B transposed in shared memory by the consumers, no copy kernel",
        launch: Launch {
            block_threads: (THREADS as u32, 1),
            block_tile: (p.bm, BN),
            shared_bytes: p.shared_bytes(),
            register_cap: true,
        },
        model_reuse: (p.bm, BN),
        body: Body::GpuOnly(GPU_ONLY),
        operands: Operands::TensorMaps(TmaBoxes {
            a: (p.bm as u32, BK as u32),
            b: (BK as u32, BOX as u32),
            a_swizzle_128: true,
            b_swizzle_128: true,
            b_transposed: false,
        }),
        ops: Ops::NN,
        batches: false,
    }
}

/// One instance: `SPEC` for the host, the body `name` and the PTX entry
/// `name` for the GPU.
macro_rules! instance {
    ($name:ident, $spec:ident, $bm:literal, $s:literal) => {
        pub const $spec: KernelSpec = spec(Params { bm: $bm, stages: $s }, stringify!($name));
        /// The body of the PTX entry of the same name (inlined into it).
        #[cfg(target_arch = "nvptx64")]
        #[inline(always)]
        pub fn $name(g: Gemm, maps: TensorMaps) {
            tr::<$bm, $s, { $bm * BK + BN * BK }>(g, maps)
        }
        mod $name {
            #[cfg(target_arch = "nvptx64")]
            use super::$name;
            crate::gemm_kernel!($name, tensor_maps);
        }
    };
}

#[rustfmt::skip]
mod instances {
    use super::*;
    instance!(wgmma_tr_256x128x32_s4, SPEC_256X128X32_S4, 256, 4);
}
pub use instances::*;

/// Every instance.
pub const SPECS: &[KernelSpec] = &[SPEC_256X128X32_S4];

/// Block `(blockIdx.y, blockIdx.x)` computes the BM x BN tile of C at
/// `(row0, col0)`; STAGE_WORDS = BM * BK + BN * BK.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn tr<const BM: usize, const STAGES: usize, const STAGE_WORDS: usize>(g: Gemm, maps: TensorMaps) {
    const {
        Params { bm: BM, stages: STAGES }.check();
        assert!(STAGE_WORDS == BM * BK + BN * BK);
    };
    let tid = thread_idx_x();
    let (row0, col0) = (block_idx_y() * BM, block_idx_x() * BN);

    // Shared memory from the first 1024-byte boundary: STAGES stages (A's
    // tile, then B's BN / BOX boxes, each transposed in place before
    // use), then the barriers.
    let base = (ALIGN - shared::address(0) as usize % ALIGN) % ALIGN / 4;
    let a_tile = |s: usize| base + s * STAGE_WORDS;
    let b_box = |s: usize, j: usize| a_tile(s) + BM * BK + j * BK * BOX;
    let barriers = base + STAGES * STAGE_WORDS;
    // `full(s)`: the producer's arrival and TMA's bytes, once per tile.
    let full = |s: usize| MBarrier::at(barriers + 2 * s);
    // `empty(s)`: one arrival per consumer warp when it is done with the tile.
    let empty = |s: usize| MBarrier::at(barriers + 2 * (STAGES + s));
    let k_tiles = g.k.div_ceil(BK);

    if tid == 0 {
        maps.a().prefetch();
        maps.b().prefetch();
        unroll!(STAGES; 8, |s| {
            // SAFETY: one thread, before the barrier that precedes every use.
            unsafe {
                full(s).init(1);
                empty(s).init((CONSUMERS / 32) as u32);
            }
        });
        fence_init();
    }
    sync_threads();

    if tid >= CONSUMERS {
        // The producer warpgroup; one thread issues everything.
        // SAFETY: the whole warpgroup runs this branch (rule 1); 40 is a
        // multiple of 8.
        unsafe { release_registers::<PRODUCER_REGISTERS>() };
        if tid == CONSUMERS {
            for kt in 0..k_tiles {
                let s = kt % STAGES;
                let k0 = (kt * BK) as u32;
                // SAFETY: the barriers were initialised (barrier above).
                // Tile kt - STAGES, the stage's previous tile, was
                // released in phase kt / STAGES - 1 of empty(s), after
                // the consumers' wait that retired its wgmmas and their
                // proxy fence after transposing it; no consumer touches
                // the stage until full(s) completes the phase this arrival
                // opens. The boxes are SPEC's (host), each 1024-aligned
                // (A's tile and every box are multiples of 1024 bytes),
                // and total stage_bytes().
                unsafe {
                    if kt >= STAGES {
                        empty(s).wait(((kt / STAGES + 1) % 2) as u32);
                    }
                    full(s).arrive_expect_tx(Params { bm: BM, stages: STAGES }.stage_bytes() as u32);
                    maps.a().load_2d(a_tile(s), k0, row0 as u32, full(s));
                    unroll!(BN / BOX; 4, |j| {
                        maps.b().load_2d(b_box(s, j), (col0 + j * BOX) as u32, k0, full(s));
                    });
                }
            }
        }
    } else {
        // SAFETY: both consumer warpgroups run this branch (rule 1).
        unsafe { take_registers::<CONSUMER_REGISTERS>() };
        let (wg, warp, lane) = (tid / 128, tid % 128 / 32, tid % 32);
        // SAFETY: all-zero bits are 0.0 (see step 12).
        let mut acc: [f32; 128] = unsafe { core::mem::zeroed() };
        for kt in 0..k_tiles {
            let s = kt % STAGES;
            // SAFETY: phase kt / STAGES of full(s) is the one tile kt
            // completes (all boxes landed).
            unsafe { full(s).wait((kt / STAGES % 2) as u32) };
            // This warpgroup's 64 columns of C are boxes 2 wg and 2 wg + 1;
            // warps 0-1 of the warpgroup transpose the first, 2-3 the second.
            // Tile kt - 1's wgmmas, still in flight, read another stage.
            transpose_box(SharedTile::at(b_box(s, 2 * wg + warp / 2)), warp % 2, lane);
            // The tensor cores read the boxes through the async proxy:
            // every writer fences, then the warpgroup meets (rule 3).
            fence_proxy_async();
            sync_warps::<128>(1 + wg as u32);
            // As in step 17: the wgmma's "A" is this warpgroup's 64 rows
            // of B^T (64 columns of C), its "B" A's tile (256 rows of C);
            // D is the tile of C transposed.
            let (mut a_desc, mut b_desc) = ([0u64; BK / 8], [0u64; BK / 8]);
            unroll!(BK / 8; 4, |step| {
                a_desc[step] = descriptor_k_major_sw128(b_box(s, 2 * wg) + 8 * step);
                b_desc[step] = descriptor_k_major_sw128(a_tile(s) + 8 * step);
            });
            // SAFETY: both warpgroups run every call; D and the
            // descriptors go through the fence, D through the wait; A's
            // tile landed (wait above), the boxes were written, fenced and
            // met at the warpgroup's barrier (rule 3); both stay until
            // this warp releases the stage, after the wait that retires
            // these.
            unsafe {
                fence_ss_128(&mut acc, &mut a_desc, &mut b_desc);
                unroll!(BK / 8; 4, |step| {
                    mma_m64n256k8_tf32_ss(&mut acc, a_desc[step], b_desc[step]);
                });
                commit_group();
                // Tile kt - 1's group is retired; tile kt's stays in flight.
                wait_ss_128::<1>(&mut acc);
            }
            if kt >= 1 && lane == 0 {
                // SAFETY: this warp's one arrival for tile kt - 1's stage,
                // whose wgmmas the wait above retired.
                unsafe { empty((kt - 1) % STAGES).arrive() };
            }
        }
        // SAFETY: both warpgroups get here.
        unsafe { wait_ss_128::<0>(&mut acc) };
        store_tile::<BM>(g, &acc, row0, col0, tid);
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
