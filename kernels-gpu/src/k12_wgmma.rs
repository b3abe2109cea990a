//! Step 12: Hopper's own path to the tensor cores. A warpgroup (four
//! warps) issues `wgmma`, which multiplies 64 x 256 x 8 per instruction
//! reading one operand straight from shared memory, and the tiles reach
//! shared memory through the Tensor Memory Accelerator (TMA), one
//! instruction per tile, completing on `mbarrier`s ([`crate::device::wgmma`],
//! [`crate::device::tma`], [`crate::device::mbarrier`]).
//!
//! What changes from step 11:
//! - **The instruction**: `wgmma.mma_async` instead of `mma.sync`. One
//!   instruction does 64 x 256 x 8 multiply-adds (262,144 FLOP) for 128
//!   threads, 128 times an `mma.sync`'s work, and runs asynchronously.
//! - **Who loads tiles**: one thread asks TMA for a whole tile (a box of
//!   A, boxes of B) and announces its bytes on the stage's `mbarrier`; the
//!   other threads wait on the barrier's phase. No thread spends
//!   registers or instructions on addresses, and out-of-range rows and
//!   columns arrive as zeros: edge tiles need nothing. (TMA needs rows of
//!   16-byte multiples, K and N multiples of 4; at other shapes the host
//!   gives the kernel padded copies of A and B: `Operands::padded`.)
//! - **The operand roles swap.** TF32 `wgmma` needs both operands K-major
//!   (K contiguous). A (row-major M x K) is; B (row-major K x N) is not,
//!   and `wgmma` has no transposed TF32 form. So the kernel computes
//!   `C^T = B^T * A^T`: the `wgmma` "B" operand is A's tile, read by the
//!   tensor cores from shared memory where TMA left it with the 128-byte
//!   swizzle, and the "A" operand is B's tile transposed, which the
//!   threads load into registers themselves (four 32-bit loads per k-step,
//!   rounded to TF32 with `cvt.rna`). Each thread's accumulators then hold
//!   C transposed, which the epilogue undoes in its addresses.
//! - **B's layout in shared memory**: boxes of 8 columns (`[BK][8]`, 1 KB
//!   each), so that a warp's fragment load (rows `t`, columns `g` of its
//!   16 columns) reads 4 rows of 8 words 32 bytes apart: all 32 banks.
//!
//! Rounding: the registers' operand (B) is rounded to nearest like step
//! 11's; A is read by the tensor cores from shared memory as TMA wrote it,
//! and the hardware ignores its 13 low mantissa bits (truncation, twice
//! the unit roundoff). The verification's bound allows for it
//! (`Math::Tf32`), and the bench shows the error next to cuBLAS TF32's.
//!
//! Prediction (H200, n = 4096): with the copies off the threads and 64 x
//! 256 x 8 per instruction, the tensor pipe should stay busy except while
//! a stage's fragments load and the block meets its barrier: 0.7-0.8x
//! cuBLAS TF32. The measurement lives in docs/bench.json and the README's
//! bench table (`cargo xtask bench`); where the time went, and what was
//! tried, in docs/measurements.md ("Steps 12-13: `wgmma` and TMA").
//!
//! Parameters: BM rows of C per block (the `wgmma` N: 256), BN = 128
//! columns (two warpgroups of 64), BK = 32 (one 128-byte swizzled row of
//! A), STAGES shared stages. The emulator cannot run this kernel (no
//! model of TMA, `mbarrier` or `wgmma`): the GPU tests and `xtask
//! sanitize` cover it.

#[cfg(target_arch = "nvptx64")]
use crate::device::mbarrier::{MBarrier, fence_init};
#[cfg(target_arch = "nvptx64")]
use crate::device::mma::to_tf32;
#[cfg(target_arch = "nvptx64")]
use crate::device::tma::TensorMaps;
#[cfg(target_arch = "nvptx64")]
use crate::device::wgmma::{
    commit_group, descriptor_k_major_sw128, fence_128, mma_m64n256k8_tf32, wait_group_128,
};
#[cfg(target_arch = "nvptx64")]
use crate::device::{SharedTile, block_idx_x, block_idx_y, shared, sync_threads, thread_idx_x};
#[cfg(target_arch = "nvptx64")]
use crate::gemm::Gemm;
use crate::elem::Elems;
use crate::launch::{Body, KernelSpec, Launch, Operands, Ops, TmaBoxes, TmaCopy};
use crate::modules;
#[cfg(target_arch = "nvptx64")]
use crate::unroll::unroll;

/// Columns of C per block: two warpgroups of 64 (the `wgmma` M).
pub const BN: usize = 128;
/// Step along K: one 128-byte row of A's swizzled tile.
pub const BK: usize = 32;
/// Threads: two warpgroups.
const THREADS: usize = 256;
/// Columns of each of B's boxes (32 bytes: see the bank note above).
pub(crate) const B_BOX_COLS: usize = 8;
/// Alignment the 128-byte swizzle needs, bytes.
pub(crate) const ALIGN: usize = 1024;

/// Why the emulator does not run this step.
pub(crate) const GPU_ONLY: &str = "TMA, mbarrier and wgmma (steps 12 on) have no model in the CPU emulator";

/// One parameter set, and what follows from it.
#[derive(Clone, Copy)]
struct Params {
    bm: usize,
    stages: usize,
}

impl Params {
    /// Words of one stage: A's tile `[BM][BK]`, then B's boxes `[BN / 8][BK][8]`.
    const fn stage_words(self) -> usize {
        self.bm * BK + BK * BN
    }
    /// Bytes TMA brings per stage.
    const fn stage_bytes(self) -> usize {
        self.stage_words() * 4
    }
    /// The stages, the barriers (8 bytes each), and room to align the
    /// stages to 1024 bytes wherever the launch's shared memory starts.
    const fn shared_bytes(self) -> usize {
        ALIGN + self.stages * self.stage_bytes() + 8 * self.stages
    }
    const fn check(self) {
        assert!(self.bm == 256, "the wgmma helper is m64n256k8");
        assert!(self.stages >= 2 && self.stages <= 8);
        assert!(self.stage_bytes().is_multiple_of(ALIGN));
        assert!(self.shared_bytes() <= 227 * 1024);
    }
    const fn spec(self, name: &'static str) -> KernelSpec {
        self.check();
        KernelSpec {
            name,
            step: 12,
            module: &modules::WGMMA,
            elems: Elems::TF32,
            summary: "Hopper wgmma (64x256x8 per warpgroup instruction), TMA tile copies, mbarrier stages",
            launch: Launch {
                block_threads: (THREADS as u32, 1),
                block_tile: (self.bm, BN),
                shared_bytes: self.shared_bytes(),
                register_cap: false,
                persistent: false,
            },
            model_reuse: (self.bm, BN),
            body: Body::GpuOnly(GPU_ONLY),
            operands: Operands::TensorMaps(TmaBoxes {
                a: (self.bm as u32, BK as u32),
                b: (BK as u32, B_BOX_COLS as u32),
                a_swizzle_128: true,
                b_swizzle_128: false,
                copy: TmaCopy::AsStored,
                c: None,
                slices: false,
            }),
            ops: Ops::NN,
            batches: false,
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
            wgmma::<$bm, $s, { $bm * BK + BK * BN }>(g, maps)
        }
        // The entry goes into the `wgmma` module's PTX only.
        #[cfg(any(not(target_arch = "nvptx64"), gemm_module = "wgmma"))]
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
    instance!(wgmma_256x128x32_s4, SPEC_256X128X32_S4, 256, 4);
}
pub use instances::*;

/// Every instance.
pub const SPECS: &[KernelSpec] = &[SPEC_256X128X32_S4];

/// Block `(blockIdx.y, blockIdx.x)` computes the BM x BN tile of C at
/// `(row0, col0)`; STAGE_WORDS = BM * BK + BK * BN.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn wgmma<const BM: usize, const STAGES: usize, const STAGE_WORDS: usize>(g: Gemm, maps: TensorMaps) {
    const {
        Params { bm: BM, stages: STAGES }.check();
        assert!(STAGE_WORDS == BM * BK + BK * BN);
    };
    let tid = thread_idx_x();
    let (row0, col0) = (block_idx_y() * BM, block_idx_x() * BN);

    // Shared memory: STAGES stages from the first 1024-byte boundary,
    // then one barrier per stage. Stage s: A's tile [BM][BK] (swizzled by
    // TMA), then B's BN / 8 boxes [BK][8].
    let base = (ALIGN - shared::address(0) as usize % ALIGN) % ALIGN / 4;
    let a_tile = |s: usize| base + s * STAGE_WORDS;
    let b_tile = |s: usize| SharedTile::<{ BN / B_BOX_COLS * BK }, B_BOX_COLS>::at(a_tile(s) + BM * BK);
    let full = |s: usize| MBarrier::at(base + STAGES * STAGE_WORDS + 2 * s);
    let k_tiles = g.k.div_ceil(BK);

    // Thread 0 only: start tile `kt`'s copies into stage `s`, whose
    // barrier expects them. Callers guarantee no thread reads stage `s`
    // until its barrier's phase completes, and that every thread is done
    // with what the stage held.
    let load = |kt: usize, s: usize| {
        let k0 = (kt * BK) as u32;
        // SAFETY: the barrier was initialised (barrier after init); the
        // stage is free (caller); the boxes are those of SPEC (host),
        // 1024-aligned for A (base and STAGE_WORDS * 4 are multiples of
        // 1024) and 1024-byte boxes for B; they total stage_bytes().
        unsafe {
            full(s).arrive_expect_tx(Params { bm: BM, stages: STAGES }.stage_bytes() as u32);
            maps.a().load_2d(a_tile(s), k0, row0 as u32, full(s));
            unroll!(BN / B_BOX_COLS; 16, |j| {
                let word = a_tile(s) + BM * BK + j * BK * B_BOX_COLS;
                maps.b().load_2d(word, (col0 + j * B_BOX_COLS) as u32, k0, full(s));
            });
        }
    };

    if tid == 0 {
        maps.a().prefetch();
        maps.b().prefetch();
        unroll!(STAGES; 8, |s| {
            // SAFETY: one thread, before the barrier that precedes every use.
            unsafe { full(s).init(1) };
        });
        fence_init();
    }
    sync_threads();
    if tid == 0 {
        unroll!(STAGES; 8, |s| {
            if s < k_tiles {
                load(s, s);
            }
        });
    }

    // This thread's place: warpgroup wg owns columns 64 wg .. 64 wg + 64
    // of the block's tile (the wgmma's M), warp w of it 16 of them; lane
    // (g, t) as in device::wgmma's table.
    let (wg, warp, lane) = (tid / 128, tid % 128 / 32, tid % 32);
    let (group, quad) = (lane / 4, lane % 4);
    // B's box holding this thread's first column (64 wg + 16 w + g); the
    // second (+ 8) is the next box.
    let box0 = (64 * wg + 16 * warp) / B_BOX_COLS;

    // Zeros, written so that LLVM sees one memset it can split into
    // registers: `[0.0; 128]` becomes a store loop with a variable index,
    // which keeps the array in local memory (a 512-byte stack frame).
    // SAFETY: all-zero bits are 0.0 in every f32.
    let mut acc: [f32; 128] = unsafe { core::mem::zeroed() };

    let mut frag = [[0u32; 4]; BK / 8];
    for kt in 0..k_tiles {
        let s = kt % STAGES;
        // SAFETY: phase kt / STAGES of stage s's barrier is the one tile
        // kt completes (one arrival and one tile per phase; the stage is
        // refilled only after every thread passed this wait, below).
        unsafe { full(s).wait((kt / STAGES % 2) as u32) };

        // The wgmma's A: B's tile transposed, this thread's rows g and
        // g + 8 (columns of B) at k = 8 step + t and + 4.
        let b = b_tile(s);
        unroll!(BK / 8; 4, |step| {
            let k = 8 * step + quad;
            let (r0, r1) = (box0 * BK + k, (box0 + 1) * BK + k);
            // SAFETY: rows < BN / 8 * BK, group < 8; the stage landed
            // (wait above) and is not overwritten before the barrier below.
            frag[step] = unsafe { [b.load(r0, group), b.load(r1, group), b.load(r0 + 4, group), b.load(r1 + 4, group)] }
                .map(to_tf32);
        });
        let mut desc = [0u64; BK / 8];
        unroll!(BK / 8; 4, |step| {
            desc[step] = descriptor_k_major_sw128(a_tile(s) + 8 * step);
        });
        // SAFETY (all wgmma calls): every thread of both warpgroups runs
        // them (no thread-dependent branch); acc, frag and desc go
        // through the fence, acc and frag through the wait; A's tile of
        // stage s landed (wait above), 1024-aligned and swizzled as the
        // descriptor says, and stays until the barrier below, after the
        // wait retired these wgmmas.
        unsafe {
            fence_128(&mut acc, &mut frag, &mut desc);
            unroll!(BK / 8; 4, |step| {
                mma_m64n256k8_tf32(&mut acc, frag[step], desc[step]);
            });
            commit_group();
            // All of them: the next tile's fragments are loaded by
            // ordinary instructions, and ptxas serialises every wgmma
            // (C7513) if those run while a wgmma is in flight. Step 13
            // keeps the tensor cores busy another way.
            wait_group_128::<0>(&mut acc, &mut frag);
        }
        // Every thread is done with stage s: refill it with tile kt + STAGES.
        sync_threads();
        if tid == 0 && kt + STAGES < k_tiles {
            load(kt + STAGES, s);
        }
    }

    store_tile::<BM, _>(g, &acc, row0, col0, tid);
}

/// The epilogue of steps 12-14: thread `tid` of the two consumer
/// warpgroups stores its accumulators of the BM x BN tile of C at `(row0,
/// col0)`. `acc[4j + 2h + e]` is D[16 w + g + 8 h][8 j + 2 t + e] of its
/// warpgroup's 64 x BM tile of C transposed (device::wgmma's table), that
/// is C[row0 + 8 j + 2 t + e][col0 + 64 wg + 16 w + g + 8 h]. For a warp,
/// each store writes 4 rows x 8 consecutive floats: whole 32-byte sectors.
/// The bounds are compared as offsets from the thread's first row and
/// column, so that no row index is kept per store (precomputed, they
/// spilled registers in step 14), and the index advances by adds. `R`,
/// the accumulators per thread, is `BM / 2` (128 for the m64n256 steps,
/// 64 for step 24's m64n128).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub(crate) fn store_tile<const BM: usize, const R: usize>(
    g: Gemm,
    acc: &[f32; R],
    row0: usize,
    col0: usize,
    tid: usize,
) {
    const { assert!(2 * R == BM) };
    let (wg, warp, lane) = (tid / 128, tid % 128 / 32, tid % 32);
    let (row, col) = (row0 + 2 * (lane % 4), col0 + 64 * wg + 16 * warp + lane / 4);
    let interior = row0 + BM <= g.m && col0 + BN <= g.n;
    // The warp's own columns of the tile, all BM rows (the fused pass).
    let warp_cols = (row0, col0 + 64 * wg + 16 * warp);
    let (rows_left, cols_left) = (g.m.saturating_sub(row), g.n.saturating_sub(col));
    // One running index, advanced 8 rows at a time: written as products
    // `(8 j + e) * n`, the 64 of them were invariant across step 14's
    // tiles, and LLVM kept them all in registers (spilling). Interior
    // tiles store without checks, in a loop of their own.
    let mut index = row * g.ldc + col;
    if interior {
        unroll!(BM / 8; 32, |j| {
            unroll!(2; 2, |e| {
                unroll!(2; 2, |h| {
                    // SAFETY: index is that of C[row + 8 j + e][col + 8 h],
                    // inside C (an interior tile); this thread alone owns it.
                    unsafe { g.store_c(index + e * g.ldc + 8 * h, acc[4 * j + 2 * h + e]) };
                });
            });
            index += 8 * g.ldc;
        });
    } else {
        unroll!(BM / 8; 32, |j| {
            unroll!(2; 2, |e| {
                unroll!(2; 2, |h| {
                    if 8 * j + e < rows_left && 8 * h < cols_left {
                        // SAFETY: as above, with the bounds checked.
                        unsafe { g.store_c(index + e * g.ldc + 8 * h, acc[4 * j + 2 * h + e]) };
                    }
                });
            });
            index += 8 * g.ldc;
        });
    }
    // SAFETY: all 32 lanes get here; the warp's 16 columns of the tile
    // are its own (each lane stored its share above).
    unsafe { g.fuse_warp(warp_cols, (BM, 16), lane) };
}
