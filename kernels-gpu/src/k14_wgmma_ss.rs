//! Step 14: both operands in shared memory, so the tensor cores never wait
//! for the threads. In step 13 each consumer warpgroup loaded its `wgmma`
//! "A" (B's tile, transposed) into registers, and a `wgmma` that reads
//! registers cannot stay in flight while the next tile's registers are
//! loaded (ptxas serialises them, C7513): each tile ended with a full
//! drain of the warpgroup's `wgmma`s. The measurements also said the
//! copies' latency was not hidden (2, 3, 4 stages: 278, 316, 337 TFLOP/s).
//!
//! What changes from step 13:
//! - **The producer warpgroup transposes B.** TMA copies B's tile as it
//!   is in memory (one 32 x 128 box, no longer 16 boxes of 8 columns) into
//!   one of two staging buffers; the producer's 128 threads, one per
//!   column, read it, round it to TF32 (`cvt.rna`) and write it K-major,
//!   with the 128-byte swizzle, into the stage (`fence.proxy.async` makes
//!   those ordinary stores visible to the tensor cores), then arrive on
//!   the stage's `full` barrier, which also counts TMA's bytes of A.
//! - **Consumers issue `wgmma`s with both operands from shared memory**
//!   and keep one group in flight: tile kt's `wgmma`s are issued before
//!   tile kt - 1's are waited for, and tile kt - 1's stage is handed back
//!   then. No fragments, no drain per tile.
//! - Two TMA copies per stage instead of 17.
//!
//! Prediction (H200, n = 4096): the tensor pipe busy most of the time
//! (78 % in step 13); the cost is shared-memory bandwidth (the producer
//! reads and writes B's 16 KB per stage once more): 0.9x cuBLAS TF32. The
//! measurement lives in docs/bench.json and the README's bench table
//! (`cargo xtask bench`). GPU only, like steps 12-13.

#[cfg(target_arch = "nvptx64")]
use crate::device::barrier::sync_named;
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
use crate::k12_wgmma::{ALIGN, BK, BN, GPU_ONLY};
use crate::launch::{Body, KernelSpec, Launch, Operands, Precision, TmaBoxes};
use crate::modules;
#[cfg(target_arch = "nvptx64")]
use crate::unroll::unroll;

/// Consumer threads: two warpgroups (warps 0-7).
const CONSUMERS: usize = 256;
/// Producer threads: one warpgroup (warps 8-11), all of them transposing.
const PRODUCERS: usize = 128;
/// Registers per thread after `setmaxnreg`: producer, consumers
/// (56 x 128 + 224 x 256 = 64,512 of 65,536).
#[cfg(target_arch = "nvptx64")]
const PRODUCER_REGISTERS: u32 = 56;
#[cfg(target_arch = "nvptx64")]
const CONSUMER_REGISTERS: u32 = 224;
/// Staging buffers for B's tile as TMA copies it (`[BK][BN]`).
const STAGING: usize = 2;

/// One parameter set, and what follows from it.
#[derive(Clone, Copy)]
struct Params {
    bm: usize,
    stages: usize,
}

impl Params {
    /// Words of one stage: A's tile `[BM][BK]` and B's transposed `[BN][BK]`,
    /// both K-major with the 128-byte swizzle.
    const fn stage_words(self) -> usize {
        self.bm * BK + BN * BK
    }
    /// Barriers: full and empty per stage, one per staging buffer.
    const fn barriers(self) -> usize {
        2 * self.stages + STAGING
    }
    const fn shared_bytes(self) -> usize {
        ALIGN + 4 * (self.stages * self.stage_words() + STAGING * BK * BN) + 8 * self.barriers()
    }
    const fn check(self) {
        assert!(self.bm == 256, "the wgmma helper is m64n256k8");
        assert!(BN == PRODUCERS, "one producer thread per column of B's tile");
        assert!(self.stages >= 2 && self.stages <= 8);
        assert!((self.stage_words() * 4).is_multiple_of(ALIGN));
        assert!(self.shared_bytes() <= 227 * 1024);
    }
    const fn spec(self, name: &'static str) -> KernelSpec {
        self.check();
        KernelSpec {
            name,
            step: 14,
            module: &modules::WGMMA,
            precision: Precision::Tf32,
            summary: "step 13 with B transposed into shared memory by the producer: wgmma from shared memory only, one group in flight",
            launch: Launch {
                block_threads: ((CONSUMERS + PRODUCERS) as u32, 1),
                block_tile: (self.bm, BN),
                shared_bytes: self.shared_bytes(),
                register_cap: true,
            },
            model_reuse: (self.bm, BN),
            body: Body::GpuOnly(GPU_ONLY),
            operands: Operands::TensorMaps(TmaBoxes {
                a: (self.bm as u32, BK as u32),
                b: (BK as u32, BN as u32),
                a_swizzle_128: true,
            }),
        }
    }
}

/// One instance: `SPEC` for the host, the body `name` and the PTX entry
/// `name` for the GPU.
macro_rules! instance {
    ($name:ident, $spec:ident, $bm:literal, $s:literal) => {
        pub const $spec: KernelSpec = Params { bm: $bm, stages: $s }.spec(stringify!($name));
        /// The body of the PTX entry of the same name (inlined into it).
        #[cfg(target_arch = "nvptx64")]
        #[inline(always)]
        pub fn $name(g: Gemm, maps: TensorMaps) {
            ss::<$bm, $s, { $bm * BK + BN * BK }>(g, maps)
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
    instance!(wgmma_ss_256x128x32_s4, SPEC_256X128X32_S4, 256, 4);
}
pub use instances::*;

/// Every instance.
pub const SPECS: &[KernelSpec] = &[SPEC_256X128X32_S4];

/// Where `(row, col)` of a K-major tile with 128-byte rows (32 floats) is,
/// in words from the tile's start: 16-byte chunk `col / 4` of row `row`
/// moves to chunk `(col / 4) ^ (row % 8)`, TMA's and `wgmma`'s 128-byte
/// swizzle (the tile is 1024-byte aligned).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
const fn swizzled(row: usize, col: usize) -> usize {
    row * BK + (((col / 4) ^ (row % 8)) * 4) + col % 4
}

/// Block `(blockIdx.y, blockIdx.x)` computes the BM x BN tile of C at
/// `(row0, col0)`; STAGE_WORDS = BM * BK + BN * BK.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn ss<const BM: usize, const STAGES: usize, const STAGE_WORDS: usize>(g: Gemm, maps: TensorMaps) {
    const {
        Params { bm: BM, stages: STAGES }.check();
        assert!(STAGE_WORDS == BM * BK + BN * BK);
    };
    let tid = thread_idx_x();
    let (row0, col0) = (block_idx_y() * BM, block_idx_x() * BN);

    // Shared memory from the first 1024-byte boundary: STAGES stages (A's
    // tile, then B's transposed), the staging buffers, the barriers.
    let base = (ALIGN - shared::address(0) as usize % ALIGN) % ALIGN / 4;
    let a_tile = |s: usize| base + s * STAGE_WORDS;
    let bt_tile = |s: usize| a_tile(s) + BM * BK;
    let staging = |b: usize| SharedTile::<BK, BN>::at(base + STAGES * STAGE_WORDS + b * BK * BN);
    let barriers = base + STAGES * STAGE_WORDS + STAGING * BK * BN;
    // full(s): TMA's bytes of A and one arrival per producer thread (its
    // part of B transposed), plus the arrival that announced the bytes.
    let full = |s: usize| MBarrier::at(barriers + 2 * s);
    // empty(s): one arrival per consumer warp when it is done with the stage.
    let empty = |s: usize| MBarrier::at(barriers + 2 * (STAGES + s));
    // staged(b): TMA's bytes of B into staging buffer b.
    let staged = |b: usize| MBarrier::at(barriers + 2 * (2 * STAGES + b));
    let k_tiles = g.k.div_ceil(BK);

    if tid == 0 {
        maps.a().prefetch();
        maps.b().prefetch();
        unroll!(STAGES; 8, |s| {
            // SAFETY: one thread, before the barrier that precedes every use.
            unsafe {
                full(s).init(1 + PRODUCERS as u32);
                empty(s).init((CONSUMERS / 32) as u32);
            }
        });
        unroll!(STAGING; 2, |b| {
            // SAFETY: as above.
            unsafe { staged(b).init(1) };
        });
        fence_init();
    }
    sync_threads();

    if tid >= CONSUMERS {
        // SAFETY: the whole producer warpgroup runs this branch (rule 1).
        unsafe { release_registers::<PRODUCER_REGISTERS>() };
        let p = tid - CONSUMERS;
        // Thread 0 of the producers: tile kt's copies, A into its stage and
        // B into staging buffer kt % 2.
        let issue = |kt: usize| {
            let (s, b) = (kt % STAGES, kt % STAGING);
            let k0 = (kt * BK) as u32;
            // SAFETY: the stage's previous tile, kt - STAGES, was released
            // in phase kt / STAGES - 1 of empty(s) (waited for here); the
            // staging buffer's previous tile, kt - 2, was read by every
            // producer thread before the named barrier that ended it. The
            // boxes are SPEC's; A's destination is 1024-aligned, B's 128.
            unsafe {
                if kt >= STAGES {
                    empty(s).wait(((kt / STAGES + 1) % 2) as u32);
                }
                full(s).arrive_expect_tx((BM * BK * 4) as u32);
                maps.a().load_2d(a_tile(s), k0, row0 as u32, full(s));
                staged(b).arrive_expect_tx((BK * BN * 4) as u32);
                maps.b().load_2d(base + STAGES * STAGE_WORDS + b * BK * BN, col0 as u32, k0, staged(b));
            }
        };
        if p == 0 && k_tiles > 0 {
            issue(0);
        }
        for kt in 0..k_tiles {
            let s = kt % STAGES;
            if p == 0 && kt + 1 < k_tiles {
                issue(kt + 1);
            }
            // SAFETY: phase kt / 2 of staged(kt % 2) is tile kt's B.
            unsafe { staged(kt % STAGING).wait((kt / STAGING % 2) as u32) };
            // Column p of B's tile becomes row p of the transposed tile.
            // Stage s is free: thread 0 waited for empty(s) before issuing
            // tile kt (previous iteration), and the named barrier since
            // orders every producer thread after that wait.
            let src = staging(kt % STAGING);
            unroll!(BK / 4; 8, |c| {
                // SAFETY: rows 4c..4c+4 < BK, column p < BN; the buffer
                // landed (wait above) and is refilled only after the
                // named barrier below.
                let v = unsafe { [src.load(4 * c, p), src.load(4 * c + 1, p), src.load(4 * c + 2, p), src.load(4 * c + 3, p)] };
                let word = bt_tile(s) + swizzled(p, 4 * c);
                // SAFETY: word..word + 4 is row p, chunk c (swizzled) of
                // stage s's transposed tile: inside the stage, 16-byte
                // aligned, written by this thread alone, and no consumer
                // reads it before full(s) completes.
                unsafe { SharedTile::<1, 4>::at(word).store4(0, 0, v.map(|x| f32::from_bits(to_tf32(x)))) };
            });
            fence_proxy_async();
            // SAFETY: this thread's one arrival on full(s) for tile kt.
            unsafe { full(s).arrive() };
            sync_named::<1, { PRODUCERS as u32 }>();
        }
    } else {
        // SAFETY: both consumer warpgroups run this branch (rule 1).
        unsafe { take_registers::<CONSUMER_REGISTERS>() };
        let (wg, lane) = (tid / 128, tid % 32);
        // SAFETY: all-zero bits are 0.0 (see step 12).
        let mut acc: [f32; 128] = unsafe { core::mem::zeroed() };
        for kt in 0..k_tiles {
            let s = kt % STAGES;
            // SAFETY: phase kt / STAGES of full(s) is tile kt's (A landed,
            // B transposed and fenced by every producer thread).
            unsafe { full(s).wait((kt / STAGES % 2) as u32) };
            // This warpgroup's 64 rows of B's transposed tile, and A's tile.
            let (mut a_desc, mut b_desc) = ([0u64; BK / 8], [0u64; BK / 8]);
            unroll!(BK / 8; 4, |step| {
                a_desc[step] = descriptor_k_major_sw128(bt_tile(s) + 64 * wg * BK + 8 * step);
                b_desc[step] = descriptor_k_major_sw128(a_tile(s) + 8 * step);
            });
            // SAFETY: both warpgroups run every call; D and the
            // descriptors go through the fence, D through the wait; both
            // tiles are complete (wait above) and stay until this warp
            // releases the stage, after the wait that retires these.
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
                // SAFETY: this warp's one arrival for tile kt - 1's stage.
                unsafe { empty((kt - 1) % STAGES).arrive() };
            }
        }
        // SAFETY: both warpgroups get here.
        unsafe { wait_ss_128::<0>(&mut acc) };
        store_tile::<BM>(g, &acc, row0, col0, tid);
    }
}
