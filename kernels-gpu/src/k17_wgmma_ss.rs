//! Step 17: both `wgmma` operands in shared memory, so the tensor cores
//! never wait for the threads. In step 13 each consumer warpgroup loaded
//! its `wgmma` "A" (B's tile, transposed) from shared memory into
//! registers: TF32 `wgmma` reads only K-major tiles from shared memory,
//! and B (K x N, row-major) is N-major. A `wgmma` that reads registers
//! cannot stay in flight while the next tile's registers are loaded
//! (ptxas serialises them, C7513), so every tile ended with a full drain
//! of the warpgroup's `wgmma`s: the largest share of the consumers' stalls
//! (docs/measurements.md, "Where step 13's warps wait").
//!
//! What changes from step 13:
//! - **B is transposed before the kernel**, by the host's launch: a copy
//!   kernel (`kernels_gpu::pad::transpose_tf32`) writes B^T (N x K, so
//!   K-major like A) rounded to TF32 (`cvt.rna`), and the producer copies
//!   a 128 x 32 box of it per stage with TMA and the 128-byte swizzle, as
//!   it copies A's: two copies per stage instead of 17. (Transposing in
//!   the kernel, by the producer warpgroup through shared memory, was
//!   tried first and lost to its own bank conflicts: docs/measurements.md,
//!   "Three more tries at step 13's gap".)
//! - **Consumers issue `wgmma`s with both operands from shared memory**
//!   and keep one group in flight: tile kt's `wgmma`s are issued before
//!   tile kt - 1's are waited for, and tile kt - 1's stage is handed back
//!   then. No fragments, no `cvt` in the loop, no drain per tile.
//!
//! The price: B's bytes travel twice more (read and written by the copy),
//! 128 MB at n = 4096, about 40 us against about 0.4 ms of tensor work,
//! and counted in the kernel's time (the copy is enqueued by every
//! launch). A is read as the tensor cores find it: its low 13 bits are
//! ignored (truncated), as in steps 12-13.
//!
//! Prediction (H200, n = 4096): the tensor pipe busy 85-90 % of the time
//! (well above step 13's, profiled in docs/measurements.md), minus the
//! copy: 0.9x cuBLAS TF32. The measurement
//! lives in docs/bench.json and the README's bench table (`cargo xtask
//! bench`). GPU only, like steps 12-13.

#[cfg(target_arch = "nvptx64")]
use crate::device::mbarrier::{MBarrier, fence_init};
#[cfg(target_arch = "nvptx64")]
use crate::device::tma::TensorMaps;
#[cfg(target_arch = "nvptx64")]
use crate::device::wgmma::{
    commit_group, descriptor_k_major_sw128, fence_ss_128, mma_m64n256k8_tf32_ss,
    release_registers, take_registers, wait_ss_128,
};
#[cfg(target_arch = "nvptx64")]
use crate::device::{block_idx_x, block_idx_y, shared, sync_threads, thread_idx_x};
#[cfg(target_arch = "nvptx64")]
use crate::gemm::Gemm;
#[cfg(target_arch = "nvptx64")]
use crate::k12_wgmma::store_tile;
use crate::k12_wgmma::{ALIGN, BK, BN, GPU_ONLY};
#[cfg(target_arch = "nvptx64")]
use crate::k13_wgmma_ws::{CONSUMER_REGISTERS, CONSUMERS, PRODUCER_REGISTERS};
use crate::k13_wgmma_ws::{Params, THREADS};
use crate::launch::{Body, KernelSpec, Launch, Operands, Ops, Precision, TmaBoxes};
use crate::modules;
#[cfg(target_arch = "nvptx64")]
use crate::unroll::unroll;

/// One parameter set: step 13's (`BM`, stages; the same stage and
/// barrier layout, B's tile `[BN][BK]` in place of its boxes).
const fn spec(p: Params, name: &'static str) -> KernelSpec {
    p.check();
    // B^T's box starts 1024-byte aligned too (after A's tile).
    assert!((p.bm * BK * 4).is_multiple_of(ALIGN));
    KernelSpec {
        name,
        step: 17,
        module: &modules::WGMMA,
        precision: Precision::Tf32,
        summary: "step 13 with B transposed before the kernel: wgmma from shared memory only, one group in flight",
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
            b: (BN as u32, BK as u32),
            a_swizzle_128: true,
            b_swizzle_128: true,
            b_transposed: true,
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
    // tile, then B's transposed), then the barriers.
    let base = (ALIGN - shared::address(0) as usize % ALIGN) % ALIGN / 4;
    let a_tile = |s: usize| base + s * STAGE_WORDS;
    let bt_tile = |s: usize| a_tile(s) + BM * BK;
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
                // the consumers' wait that retired its wgmmas; no consumer
                // reads the stage until full(s) completes the phase this
                // arrival opens. The boxes are SPEC's (host), both tiles
                // 1024-aligned, and total stage_bytes().
                unsafe {
                    if kt >= STAGES {
                        empty(s).wait(((kt / STAGES + 1) % 2) as u32);
                    }
                    full(s).arrive_expect_tx(Params { bm: BM, stages: STAGES }.stage_bytes() as u32);
                    maps.a().load_2d(a_tile(s), k0, row0 as u32, full(s));
                    maps.b().load_2d(bt_tile(s), k0, col0 as u32, full(s));
                }
            }
        }
    } else {
        // SAFETY: both consumer warpgroups run this branch (rule 1).
        unsafe { take_registers::<CONSUMER_REGISTERS>() };
        let (wg, lane) = (tid / 128, tid % 32);
        // SAFETY: all-zero bits are 0.0 (see step 12).
        let mut acc: [f32; 128] = unsafe { core::mem::zeroed() };
        for kt in 0..k_tiles {
            let s = kt % STAGES;
            // SAFETY: phase kt / STAGES of full(s) is the one tile kt
            // completes (both boxes landed).
            unsafe { full(s).wait((kt / STAGES % 2) as u32) };
            // The wgmma's "A" is this warpgroup's 64 rows of B's transposed
            // tile (64 columns of C), its "B" A's tile (256 rows of C), as
            // in steps 12-13: D is the tile of C transposed.
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
