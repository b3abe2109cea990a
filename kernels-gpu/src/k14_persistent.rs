//! Step 14: a persistent grid with a cache-friendly tile order. Step 13
//! launched one block per 256 x 128 tile of C: each block filled its
//! pipeline from empty, and its tensor cores idled while it stored its
//! tile; blocks ran in the order of the grid, a row of tiles after
//! another, so each wave of 132 blocks read about two row panels of A but
//! every column panel of B, more than L2 holds at n = 8192.
//!
//! What changes from step 13:
//! - **One block per SM**, each looping over tiles `blockIdx.x`,
//!   `+ gridDim.x`, ... The producer runs ahead into the next tile while
//!   the consumers store the current one, so the pipeline never drains
//!   between tiles, and the stages' barriers keep counting phases across
//!   tiles (one running count of k-tiles per block).
//! - **Grouped tile order**: tiles are taken in groups of GROUP rows of
//!   tiles, column by column within a group, so the SMs working at the
//!   same time share a few row panels of A and a few column panels of B
//!   (at n = 8192 a wave of 132 tiles covers 8 rows x 16.5 columns of
//!   tiles: 64 MB of A and 66 MB of B instead of 16 and 256).
//!
//! Prediction (H200): the fill and the epilogue of each tile disappear
//! behind the others' work (a few % at n = 4096), and n = 8192 gains most
//! from the tile order: both within 0.9x of cuBLAS TF32. The measurement
//! lives in docs/bench.json and the README's bench table (`cargo xtask bench`).

#[cfg(target_arch = "nvptx64")]
use crate::device::mbarrier::{MBarrier, fence_init};
#[cfg(target_arch = "nvptx64")]
use crate::device::mma::to_tf32;
#[cfg(target_arch = "nvptx64")]
use crate::device::tma::TensorMaps;
#[cfg(target_arch = "nvptx64")]
use crate::device::wgmma::{
    commit_group, descriptor_k_major_sw128, fence_128, mma_m64n256k8_tf32, release_registers,
    take_registers, wait_group_128,
};
#[cfg(target_arch = "nvptx64")]
use crate::device::{SharedTile, block_idx_x, grid_dim_x, shared, sync_threads, thread_idx_x};
#[cfg(target_arch = "nvptx64")]
use crate::gemm::Gemm;
use crate::k12_wgmma::{ALIGN, B_BOX_COLS, BK, BN, GPU_ONLY};
#[cfg(target_arch = "nvptx64")]
use crate::k12_wgmma::store_tile;
#[cfg(target_arch = "nvptx64")]
use crate::k13_wgmma_ws::{CONSUMER_REGISTERS, CONSUMERS, PRODUCER_REGISTERS};
use crate::k13_wgmma_ws::THREADS;
use crate::launch::{Body, KernelSpec, Launch, Operands, Precision, Schedule, TmaBoxes};
use crate::modules;
#[cfg(target_arch = "nvptx64")]
use crate::unroll::unroll;

/// One parameter set, and what follows from it.
#[derive(Clone, Copy)]
struct Params {
    bm: usize,
    stages: usize,
    /// Rows of tiles per group of the tile order.
    group: usize,
}

impl Params {
    const fn stage_words(self) -> usize {
        self.bm * BK + BK * BN
    }
    const fn stage_bytes(self) -> usize {
        self.stage_words() * 4
    }
    const fn shared_bytes(self) -> usize {
        ALIGN + self.stages * self.stage_bytes() + 16 * self.stages
    }
    const fn check(self) {
        assert!(self.bm == 256, "the wgmma helper is m64n256k8");
        assert!(self.stages >= 2 && self.stages <= 8);
        assert!(self.group >= 1);
        assert!(self.stage_bytes().is_multiple_of(ALIGN));
        assert!(self.shared_bytes() <= 227 * 1024);
    }
    const fn spec(self, name: &'static str) -> KernelSpec {
        self.check();
        KernelSpec {
            name,
            step: 14,
            module: &modules::WGMMA,
            precision: Precision::Tf32,
            summary: "step 13 as a persistent grid (one block per SM), tiles taken in groups of rows",
            launch: Launch {
                block_threads: (THREADS as u32, 1),
                block_tile: (self.bm, BN),
                shared_bytes: self.shared_bytes(),
                register_cap: true,
                schedule: Schedule::Persistent,
            },
            model_reuse: (self.bm, BN),
            body: Body::GpuOnly(GPU_ONLY),
            operands: Operands::TensorMaps(TmaBoxes {
                a: (self.bm as u32, BK as u32),
                b: (BK as u32, B_BOX_COLS as u32),
                a_swizzle_128: true,
            }),
        }
    }
}

/// One instance: `SPEC` for the host, the body `name` and the PTX entry
/// `name` for the GPU.
macro_rules! instance {
    ($name:ident, $spec:ident, $bm:literal, $s:literal, $group:literal) => {
        pub const $spec: KernelSpec = Params { bm: $bm, stages: $s, group: $group }.spec(stringify!($name));
        /// The body of the PTX entry of the same name (inlined into it).
        #[cfg(target_arch = "nvptx64")]
        #[inline(always)]
        pub fn $name(g: Gemm, maps: TensorMaps) {
            persistent::<$bm, $s, { $bm * BK + BK * BN }, $group>(g, maps)
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
    instance!(persistent_256x128x32_s4_g8, SPEC_256X128X32_S4_G8, 256, 4, 8);
    instance!(persistent_256x128x32_s4_g1, SPEC_256X128X32_S4_G1, 256, 4, 1);
}
pub use instances::*;

/// Every instance.
pub const SPECS: &[KernelSpec] = &[SPEC_256X128X32_S4_G8, SPEC_256X128X32_S4_G1];

/// Tile `t` of the `gx x gy` tiles (x: columns of tiles), in groups of
/// GROUP rows of tiles taken column by column: `(tile row, tile column)`.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn tile_at<const GROUP: usize>(t: usize, gx: usize, gy: usize) -> (usize, usize) {
    let per_group = GROUP * gx;
    let first_row = t / per_group * GROUP;
    let rows = (gy - first_row).min(GROUP);
    let within = t % per_group;
    (first_row + within % rows, within / rows)
}

/// The block loops over tiles `blockIdx.x, + gridDim.x, ...` of the
/// `ceil(m / BM) x ceil(n / BN)` tiles; STAGE_WORDS = BM * BK + BK * BN.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn persistent<const BM: usize, const STAGES: usize, const STAGE_WORDS: usize, const GROUP: usize>(
    g: Gemm,
    maps: TensorMaps,
) {
    const {
        Params { bm: BM, stages: STAGES, group: GROUP }.check();
        assert!(STAGE_WORDS == BM * BK + BK * BN);
    };
    let tid = thread_idx_x();
    let (gx, gy) = (g.n.div_ceil(BN), g.m.div_ceil(BM));
    let tiles = gx * gy;
    let (first, stride) = (block_idx_x(), grid_dim_x());

    // Shared memory as step 13's.
    let base = (ALIGN - shared::address(0) as usize % ALIGN) % ALIGN / 4;
    let a_tile = |s: usize| base + s * STAGE_WORDS;
    let barriers = base + STAGES * STAGE_WORDS;
    let full = |s: usize| MBarrier::at(barriers + 2 * s);
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
        // SAFETY: the whole producer warpgroup runs this branch (rule 1).
        unsafe { release_registers::<PRODUCER_REGISTERS>() };
        if tid == CONSUMERS {
            // `it` counts this block's k-tiles over all its tiles: stage
            // it % STAGES, phase it / STAGES.
            let mut it = 0;
            let mut t = first;
            while t < tiles {
                let (tile_row, tile_col) = tile_at::<GROUP>(t, gx, gy);
                let (row0, col0) = (tile_row * BM, tile_col * BN);
                for kt in 0..k_tiles {
                    let s = it % STAGES;
                    let k0 = (kt * BK) as u32;
                    // SAFETY: as step 13's producer, with the running
                    // count `it` in place of kt: k-tile it - STAGES, the
                    // stage's previous one, was released in phase
                    // it / STAGES - 1 of empty(s).
                    unsafe {
                        if it >= STAGES {
                            empty(s).wait(((it / STAGES + 1) % 2) as u32);
                        }
                        full(s).arrive_expect_tx(Params { bm: BM, stages: STAGES, group: GROUP }.stage_bytes() as u32);
                        maps.a().load_2d(a_tile(s), k0, row0 as u32, full(s));
                        unroll!(BN / B_BOX_COLS; 16, |j| {
                            let word = a_tile(s) + BM * BK + j * BK * B_BOX_COLS;
                            maps.b().load_2d(word, (col0 + j * B_BOX_COLS) as u32, k0, full(s));
                        });
                    }
                    it += 1;
                }
                t += stride;
            }
        }
    } else {
        // SAFETY: both consumer warpgroups run this branch (rule 1).
        unsafe { take_registers::<CONSUMER_REGISTERS>() };
        consume::<BM, STAGES, STAGE_WORDS, GROUP>(g, base, tid, k_tiles, (first, stride, gx, gy));
    }
}

/// The consumer warpgroups' part of [`persistent`]: step 13's loop and
/// epilogue, once per tile of the block.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn consume<const BM: usize, const STAGES: usize, const STAGE_WORDS: usize, const GROUP: usize>(
    g: Gemm,
    base: usize,
    tid: usize,
    k_tiles: usize,
    (first, stride, gx, gy): (usize, usize, usize, usize),
) {
    let a_tile = |s: usize| base + s * STAGE_WORDS;
    let b_tile = |s: usize| SharedTile::<{ BN / B_BOX_COLS * BK }, B_BOX_COLS>::at(a_tile(s) + BM * BK);
    let barriers = base + STAGES * STAGE_WORDS;
    let full = |s: usize| MBarrier::at(barriers + 2 * s);
    let empty = |s: usize| MBarrier::at(barriers + 2 * (STAGES + s));

    let (wg, warp, lane) = (tid / 128, tid % 128 / 32, tid % 32);
    let (group, quad) = (lane / 4, lane % 4);
    let box0 = (64 * wg + 16 * warp) / B_BOX_COLS;

    let mut it = 0;
    let mut t = first;
    while t < gx * gy {
        // Per tile, so that these 16 registers are free during the epilogue.
        let mut frag = [[0u32; 4]; BK / 8];
        let (tile_row, tile_col) = tile_at::<GROUP>(t, gx, gy);
        let (row0, col0) = (tile_row * BM, tile_col * BN);
        // SAFETY: all-zero bits are 0.0 (a memset LLVM keeps in
        // registers; see step 12).
        let mut acc: [f32; 128] = unsafe { core::mem::zeroed() };
        for _ in 0..k_tiles {
            let s = it % STAGES;
            // SAFETY: as step 13's, with the running count `it`: phase
            // it / STAGES of full(s) is the one k-tile `it` completes.
            unsafe { full(s).wait((it / STAGES % 2) as u32) };

            let b = b_tile(s);
            unroll!(BK / 8; 4, |step| {
                let k = 8 * step + quad;
                let (r0, r1) = (box0 * BK + k, (box0 + 1) * BK + k);
                // SAFETY: rows < BN / 8 * BK, group < 8; the stage landed
                // (wait above) and is not refilled before this warp releases it.
                frag[step] = unsafe { [b.load(r0, group), b.load(r1, group), b.load(r0 + 4, group), b.load(r1 + 4, group)] }
                    .map(to_tf32);
            });
            let mut desc = [0u64; BK / 8];
            unroll!(BK / 8; 4, |step| {
                desc[step] = descriptor_k_major_sw128(a_tile(s) + 8 * step);
            });
            // SAFETY: as step 13's.
            unsafe {
                fence_128(&mut acc, &mut frag, &mut desc);
                unroll!(BK / 8; 4, |step| {
                    mma_m64n256k8_tf32(&mut acc, frag[step], desc[step]);
                });
                commit_group();
                wait_group_128::<0>(&mut acc, &mut frag);
            }
            if lane == 0 {
                // SAFETY: this warp's one arrival for k-tile `it` of stage s.
                unsafe { empty(s).arrive() };
            }
            it += 1;
        }

        // Epilogue: step 12's, while the producer fills the stages with
        // the next tile.
        store_tile::<BM>(g, &acc, row0, col0, tid);
        t += stride;
    }
}
