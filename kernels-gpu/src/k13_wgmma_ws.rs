//! Step 13: producer and consumer warps. Step 12's threads did
//! everything in lock-step: wait for a tile, load its fragments, issue the
//! `wgmma`s, wait for them all, meet at a block barrier, and only then
//! could thread 0 refill the stage. While both warpgroups drained their
//! `wgmma`s and met at the barrier, the tensor cores had nothing to do.
//!
//! What changes from step 12:
//! - **A producer warpgroup.** A third warpgroup does nothing but copy:
//!   its first thread waits until a stage is free and asks TMA for the
//!   next tile into it. The two consumer warpgroups never wait for each
//!   other. The producer needs few registers and gives most of its share
//!   to the consumers (`setmaxnreg`: 40 for it, 232 for them).
//! - **Stages are handed back through barriers, not a block barrier.**
//!   Each stage has a second `mbarrier` ("empty") on which each of the 8
//!   consumer warps arrives once it is done with the stage; the producer
//!   waits on it before refilling. So one warpgroup can be a stage ahead
//!   of the other, and while one drains its `wgmma`s and loads its next
//!   fragments, the other's `wgmma`s keep the tensor cores busy.
//! - Everything else (tiles, boxes, swizzle, fragments, epilogue) is
//!   step 12's.
//!
//! Prediction (H200, n = 4096): the tensor cores idle only when both
//! warpgroups are between tiles at once; 0.8-0.9x cuBLAS TF32. The
//! measurement lives in docs/bench.json and the README's bench table
//! (`cargo xtask bench`); past runs, the tries at the remaining gap and
//! where the warps wait, in docs/measurements.md ("Steps 12-13: `wgmma`
//! and TMA").
//!
//! Registers: why a whole warpgroup for one thread? An SM hands out
//! registers to warpgroups: a block of 288 threads (one producer warp)
//! was refused at launch with 170 registers each ("too many resources":
//! 3 warpgroups x 128 x 176 > 65,536), and capped at 65,536 / 384, ptxas
//! serialised the `wgmma`s (C7512, too few registers); both in
//! docs/measurements.md ("Steps 12-13"). 384 threads with `setmaxnreg`
//! give the consumers 232. GPU only, like step 12.

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
use crate::device::{SharedTile, block_idx_x, block_idx_y, shared, sync_threads, thread_idx_x};
#[cfg(target_arch = "nvptx64")]
use crate::gemm::Gemm;
use crate::k12_wgmma::{ALIGN, B_BOX_COLS, BK, BN, GPU_ONLY};
#[cfg(target_arch = "nvptx64")]
use crate::k12_wgmma::store_tile;
use crate::elem::Elems;
use crate::launch::{Body, KernelSpec, Launch, Operands, Ops, TmaBoxes, TmaCopy};
use crate::modules;
#[cfg(target_arch = "nvptx64")]
use crate::unroll::{inline_always, unroll};

/// Consumer threads: two warpgroups (warps 0-7), which compute.
pub(crate) const CONSUMERS: usize = 256;
/// Threads: the consumers and a producer warpgroup (warps 8-11).
pub(crate) const THREADS: usize = CONSUMERS + 128;
/// Registers per thread after `setmaxnreg`: the producer's and the
/// consumers' (40 x 128 + 232 x 256 = 64,512: the 168 x 384 the launch
/// allocates, all a block has; asking for more leaves `setmaxnreg.inc`
/// waiting forever, docs/measurements.md, eighteenth session).
#[cfg(target_arch = "nvptx64")]
pub(crate) const PRODUCER_REGISTERS: u32 = 40;
#[cfg(target_arch = "nvptx64")]
pub(crate) const CONSUMER_REGISTERS: u32 = 232;

/// One parameter set, and what follows from it (step 17 shares it: the
/// same stages and barriers, B's tile transposed).
#[derive(Clone, Copy)]
pub(crate) struct Params {
    pub(crate) bm: usize,
    pub(crate) stages: usize,
}

impl Params {
    /// Words of one stage: A's tile `[BM][BK]`, then B's boxes `[BN / 8][BK][8]`
    /// (step 17: B's transposed tile `[BN][BK]`; step 18: boxes
    /// `[BN / 32][BK][32]`; as many words).
    pub(crate) const fn stage_words(self) -> usize {
        self.bm * BK + BK * BN
    }
    pub(crate) const fn stage_bytes(self) -> usize {
        self.stage_words() * 4
    }
    /// The stages, two barriers per stage (full, empty; 8 bytes each),
    /// and room to align the stages to 1024 bytes.
    pub(crate) const fn shared_bytes(self) -> usize {
        ALIGN + self.stages * self.stage_bytes() + 16 * self.stages
    }
    pub(crate) const fn check(self) {
        // m64n256k8 and m64n128k8 (steps 17-18's `Tf32Ss`; step 13's
        // `ws` takes 256 rows only).
        assert!(self.bm == 256 || self.bm == 128, "the TF32 wgmma tiles have 256 or 128 rows");
        assert!(self.stages >= 2 && self.stages <= 8);
        assert!(self.stage_bytes().is_multiple_of(ALIGN));
        // B's part of a stage starts 1024-byte aligned too (after A's tile):
        // steps 17 and 18 copy swizzled boxes there.
        assert!((self.bm * BK * 4).is_multiple_of(ALIGN));
        assert!(self.shared_bytes() <= 227 * 1024);
    }
    /// The spec of an instance of steps 13, 17 and 18, which differ in
    /// what they say and in B's boxes: `b` (rows, columns) of B (or of B^T
    /// where B^T is what the map describes: step 17), with the 128-byte
    /// swizzle or without; and what the launch copies first (`copy`). A
    /// and B as they are (`Ops::NN`: step 17's transposed instances set
    /// their own).
    pub(crate) const fn spec(
        self,
        name: &'static str,
        step: u32,
        summary: &'static str,
        b: (usize, usize),
        b_swizzle_128: bool,
        copy: TmaCopy,
    ) -> KernelSpec {
        self.check();
        KernelSpec {
            name,
            step,
            module: &modules::WGMMA,
            elems: Elems::TF32,
            summary,
            launch: Launch {
                block_threads: (THREADS as u32, 1),
                block_tile: (self.bm, BN),
                shared_bytes: self.shared_bytes(),
                register_cap: true,
                persistent: false,
            },
            model_reuse: (self.bm, BN),
            body: Body::GpuOnly(GPU_ONLY),
            operands: Operands::TensorMaps(TmaBoxes {
                a: (self.bm as u32, BK as u32),
                b: (b.0 as u32, b.1 as u32),
                a_swizzle_128: true,
                b_swizzle_128,
                copy,
                c: None,
                slices: false,
            }),
            ops: Ops::NN,
            batches: false,
        }
    }
}

/// Step 13's spec.
const fn spec(p: Params, name: &'static str) -> KernelSpec {
    p.spec(
        name,
        13,
        "step 12 with a TMA producer warpgroup; consumer warpgroups hand stages back through mbarriers",
        (BK, B_BOX_COLS),
        false,
        TmaCopy::AsStored,
    )
}

/// One instance of steps 13, 17 or 18: `$spec`, made by `$make(Params,
/// name)`, for the host; the body `$name` (step's body `$body` with these
/// parameters) and the PTX entry `$name` for the GPU, taking split-K's
/// slices where `sliced` follows (`gemm_kernel!(name, tensor_maps,
/// sliced)`).
macro_rules! wgmma_instance {
    ($name:ident, $spec:ident, $make:ident, $body:ident, $bm:literal, $s:literal $(, $sliced:ident)?) => {
        pub const $spec: KernelSpec = $make(Params { bm: $bm, stages: $s }, stringify!($name));
        /// The body of the PTX entry of the same name (inlined into it).
        #[cfg(target_arch = "nvptx64")]
        #[inline(always)]
        pub fn $name(g: Gemm, maps: TensorMaps) {
            $body::<$bm, $s, { $bm * BK + BK * BN }, { $bm / 2 }>(g, maps)
        }
        // The entry goes into the `wgmma` module's PTX only.
        #[cfg(any(not(target_arch = "nvptx64"), gemm_module = "wgmma"))]
        mod $name {
            #[cfg(target_arch = "nvptx64")]
            use super::$name;
            crate::gemm_kernel!($name, tensor_maps $(, $sliced)?);
        }
    };
}
pub(crate) use wgmma_instance;

#[rustfmt::skip]
mod instances {
    use super::*;
    wgmma_instance!(wgmma_ws_256x128x32_s4, SPEC_256X128X32_S4, spec, ws, 256, 4);
}
pub use instances::*;

/// Every instance.
pub const SPECS: &[KernelSpec] = &[SPEC_256X128X32_S4];

/// What a producer copies into each stage besides A's and B's tiles, for
/// one tile of C ([`Stages::produce_ab_with`]): nothing (`()`, steps
/// 13-25) or step 26's block scales.
#[cfg(target_arch = "nvptx64")]
pub(crate) trait StageExtra: Copy {
    /// Bytes it brings into each stage.
    fn bytes(self) -> u32;
    /// Copies K tile `kt`'s part into stage `s`, completing on `full`.
    ///
    /// # Safety
    /// As [`Stages::produce_ab_with`] says.
    unsafe fn load(self, s: usize, kt: usize, full: MBarrier);
}

#[cfg(target_arch = "nvptx64")]
impl StageExtra for () {
    #[inline(always)]
    fn bytes(self) -> u32 {
        0
    }
    #[inline(always)]
    unsafe fn load(self, _: usize, _: usize, _: MBarrier) {}
}

/// Where steps 13, 17, 18 and 19 keep their stages and barriers in
/// shared memory, and what their producer thread does: the part of the
/// pipeline they share. From the first 1024-byte boundary (the 128-byte
/// swizzle wants it): `STAGES` stages of `STAGE_WORDS` words, A's tile
/// (`BM` rows of one 128-byte swizzled row each: `BK` elements of K, 32
/// f32 or 64 16-bit values) then B's part, then two barriers per stage:
/// - `full(s)`: the producer's arrival and TMA's bytes, once per tile;
/// - `empty(s)`: one arrival per consumer warp when it is done with the
///   tile.
///
/// Tile `kt` uses stage `kt % STAGES`, in phase `kt / STAGES` of both of
/// its barriers, whose parity is that phase's low bit: the consumers wait
/// for phase `kt / STAGES` of `full` ([`Stages::wait_full`]); before
/// copying tile `kt` into a stage, the producer waits for phase
/// `kt / STAGES - 1` of `empty`, the release of the stage's previous tile.
#[cfg(target_arch = "nvptx64")]
#[derive(Clone, Copy)]
pub(crate) struct Stages<
    const BM: usize,
    const STAGES: usize,
    const STAGE_WORDS: usize,
    const BK: usize = { crate::k12_wgmma::BK },
> {
    /// Word of the first stage.
    base: usize,
}

/// Words of one row of A's tile in a stage: one 128-byte swizzled row.
#[cfg(target_arch = "nvptx64")]
pub(crate) const A_ROW_WORDS: usize = 32;

#[cfg(target_arch = "nvptx64")]
impl<const BM: usize, const STAGES: usize, const STAGE_WORDS: usize, const BK: usize>
    Stages<BM, STAGES, STAGE_WORDS, BK>
{
    /// The layout. Thread 0 prefetches the maps and initialises the
    /// barriers, then the block meets: every thread calls this once, at
    /// the top of the kernel.
    #[inline(always)]
    pub(crate) fn init(maps: TensorMaps, tid: usize) -> Self {
        const {
            assert!(STAGES >= 2 && STAGES <= 8);
            // Stages and B's part start 1024-byte aligned (A's tile is a
            // multiple of 1024 bytes): the swizzled boxes need it.
            assert!((STAGE_WORDS * 4).is_multiple_of(ALIGN));
            assert!((BM * A_ROW_WORDS * 4).is_multiple_of(ALIGN));
            assert!(ALIGN + STAGES * STAGE_WORDS * 4 + 16 * STAGES <= 227 * 1024);
        };
        let stages = Self {
            base: (ALIGN - shared::address(0) as usize % ALIGN) % ALIGN / 4,
        };
        if tid == 0 {
            maps.a().prefetch();
            maps.b().prefetch();
            unroll!(STAGES; 8, |s| {
                // SAFETY: one thread, before the barrier that precedes every use.
                unsafe {
                    stages.full(s).init(1);
                    stages.empty(s).init((CONSUMERS / 32) as u32);
                }
            });
            fence_init();
        }
        sync_threads();
        stages
    }

    /// The first word after the stages and their barriers (even: the
    /// stages start 1024-byte aligned), where a kernel may keep more.
    #[inline(always)]
    pub(crate) fn end(self) -> usize {
        self.base + STAGES * STAGE_WORDS + 4 * STAGES
    }

    /// The first 1024-byte-aligned word after the stages and their
    /// barriers (at most 1024 bytes of them), for shared tiles that TMA
    /// reads with the 128-byte swizzle (step 22's staging boxes).
    #[inline(always)]
    pub(crate) fn end_aligned(self) -> usize {
        self.base + STAGES * STAGE_WORDS + ALIGN / 4
    }

    /// First word of stage `s`: A's tile, 1024-byte aligned.
    #[inline(always)]
    pub(crate) fn a_tile(self, s: usize) -> usize {
        self.base + s * STAGE_WORDS
    }

    /// First word of B's part of stage `s` (1024-byte aligned: A's tile is
    /// a multiple of 1024 bytes).
    #[inline(always)]
    pub(crate) fn b_tile(self, s: usize) -> usize {
        self.a_tile(s) + BM * A_ROW_WORDS
    }

    #[inline(always)]
    fn full(self, s: usize) -> MBarrier {
        MBarrier::at(self.base + STAGES * STAGE_WORDS + 2 * s)
    }

    #[inline(always)]
    fn empty(self, s: usize) -> MBarrier {
        MBarrier::at(self.base + STAGES * STAGE_WORDS + 2 * (STAGES + s))
    }

    /// The producer thread's loop over `k_tiles` tiles of K, which are
    /// the pipeline's tiles `it0..it0 + k_tiles` (0.. for a block of one
    /// tile of C; a persistent block's tiles of C follow each other
    /// through the same stages): for each, wait until the consumers
    /// released the stage's previous tile, announce the stage's bytes,
    /// and have `load_a(word, k0, barrier)` copy A's part of the stage (at
    /// `word`, the stage's first) and `load_b(word, k0, barrier)` B's part
    /// (at `word`), both completing on `barrier`.
    ///
    /// # Safety
    /// One thread calls it, after [`Self::init`], with `it0` the number of
    /// tiles it produced before; `load_a`'s and `load_b`'s copies bring
    /// exactly A's part of the stage (`BM * 128` bytes) and the rest of
    /// the stage's bytes into B's part, each box aligned as its swizzle
    /// needs (TMA's rules, [`crate::device::tma`]).
    #[inline(always)]
    pub(crate) unsafe fn produce_ab(
        self,
        it0: usize,
        k_tiles: usize,
        load_a: impl Fn(usize, u32, MBarrier),
        load_b: impl Fn(usize, u32, MBarrier),
    ) {
        // SAFETY: forwarded; no copies besides A's and B's.
        unsafe { self.produce_ab_with(it0, k_tiles, (), load_a, load_b) }
    }

    /// [`Self::produce_ab`] with `extra`'s copies in each stage too
    /// (step 26's block scales): its bytes are announced with the tiles',
    /// and it copies them after B's, completing on the same barrier.
    ///
    /// # Safety
    /// As [`Self::produce_ab`]; `extra` brings exactly
    /// [`StageExtra::bytes`] into words that no consumer reads before the
    /// stage's `full` phase completes nor after it releases the stage.
    #[inline(always)]
    pub(crate) unsafe fn produce_ab_with(
        self,
        it0: usize,
        k_tiles: usize,
        extra: impl StageExtra,
        load_a: impl Fn(usize, u32, MBarrier),
        load_b: impl Fn(usize, u32, MBarrier),
    ) {
        for kt in 0..k_tiles {
            let it = it0 + kt;
            let s = it % STAGES;
            let k0 = (kt * BK) as u32;
            // SAFETY: the barriers were initialised (init). Tile it -
            // STAGES, the stage's previous tile, was released in phase
            // it / STAGES - 1 of empty(s); after it no consumer reads the
            // stage until full(s) completes the phase this arrival opens.
            // A's boxes and B's (the caller's) total stage_bytes(), and
            // extra's its bytes().
            unsafe {
                if it >= STAGES {
                    self.empty(s).wait(((it / STAGES + 1) % 2) as u32);
                }
                self.full(s).arrive_expect_tx((STAGE_WORDS * 4) as u32 + extra.bytes());
            }
            load_a(self.a_tile(s), k0, self.full(s));
            load_b(self.b_tile(s), k0, self.full(s));
            // SAFETY: the caller's contract.
            unsafe { extra.load(s, kt, self.full(s)) };
        }
    }

    /// Waits until tile `kt`'s copies have landed: phase `kt / STAGES` of
    /// its stage's `full` barrier. The stage then stays as it is until
    /// every consumer warp has released it ([`Self::release`]).
    #[inline(always)]
    pub(crate) fn wait_full(self, kt: usize) {
        // SAFETY: the barrier was initialised (init); the producer opens
        // phase kt / STAGES + 1 only after every consumer warp released
        // tile kt, which each does after this wait, once per tile.
        unsafe { self.full(kt % STAGES).wait((kt / STAGES % 2) as u32) }
    }

    /// This warp's release of tile `kt`'s stage.
    ///
    /// # Safety
    /// Lane 0 of each consumer warp calls it once per tile, in tile order,
    /// after the warp's last read of the stage (its `wgmma`s retired).
    #[inline(always)]
    pub(crate) unsafe fn release(self, kt: usize) {
        // SAFETY: empty expects one arrival per consumer warp per tile.
        unsafe { self.empty(kt % STAGES).arrive() }
    }
}

/// The block of steps 13, 17, 18 and 19, which differ only in their tile
/// shape, in how B reaches a stage and in what the consumers do with it.
/// Block `(blockIdx.y, blockIdx.x)` computes the BM x BN tile of C at
/// `(row0, col0)`, `k` deep in tiles of BK from K = `k_origin` (0, or a
/// split-K slice's start: `Gemm::k0`), in matrix `product` of A's map
/// where it has a third dimension (`Some`: a batch, steps 17-18). Every
/// thread sets up the
/// stages ([`Stages::init`]); then the producer warpgroup gives most of
/// its registers back and its first thread runs [`Stages::produce_ab`]
/// with A's box at `(k0, row0)` and `load_b(word, k0, full, col0)` for
/// B's part of each stage, while the
/// two consumer warpgroups take the registers and run `consume(stages,
/// row0, col0, tid, k_tiles)`.
///
/// # Safety
/// `load_b` keeps [`Stages::produce_ab`]'s contract for the kernel's maps:
/// its copies bring exactly B's part of the stage, each box aligned as
/// its swizzle needs.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub(crate) unsafe fn warp_specialized<
    const BM: usize,
    const BN: usize,
    const BK: usize,
    const STAGES: usize,
    const STAGE_WORDS: usize,
>(
    k_origin: u32,
    k: usize,
    product: Option<u32>,
    maps: TensorMaps,
    load_b: impl Fn(usize, u32, MBarrier, usize),
    consume: impl FnOnce(Stages<BM, STAGES, STAGE_WORDS, BK>, usize, usize, usize, usize),
) {
    // SAFETY: A's box is SPEC's (BM x BK, 128-byte swizzle), 1024-aligned
    // at its stage's first word; B's copies keep the contract (this
    // function's caller vouches for load_b).
    unsafe {
        warp_specialized_ab::<BM, BM, BN, BK, STAGES, STAGE_WORDS>(
            k_origin,
            k,
            maps,
            inline_always!(|word, k0, full, row0| maps.a().load(word, k0, row0 as u32, product, full)),
            load_b,
            consume,
        )
    }
}

/// [`warp_specialized`] with A's copies too given by the caller:
/// `load_a(word, k0, full, row0)` brings A's part of each stage (step 24:
/// two boxes, A's two TF32 parts), and `A_ROWS` is the rows of A's part
/// of a stage in 128-byte rows (`BM`, or step 24's `2 * BM`). Both
/// copies get K from `k_origin` on (`k0 = k_origin + kt * BK`).
///
/// # Safety
/// `load_a` and `load_b` keep [`Stages::produce_ab`]'s contract for the
/// kernel's maps: their copies bring exactly A's and B's parts of the
/// stage, each box aligned as its swizzle needs.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
pub(crate) unsafe fn warp_specialized_ab<
    const BM: usize,
    const A_ROWS: usize,
    const BN: usize,
    const BK: usize,
    const STAGES: usize,
    const STAGE_WORDS: usize,
>(
    k_origin: u32,
    k: usize,
    maps: TensorMaps,
    load_a: impl Fn(usize, u32, MBarrier, usize),
    load_b: impl Fn(usize, u32, MBarrier, usize),
    consume: impl FnOnce(Stages<A_ROWS, STAGES, STAGE_WORDS, BK>, usize, usize, usize, usize),
) {
    let tid = thread_idx_x();
    let (row0, col0) = (block_idx_y() * BM, block_idx_x() * BN);
    let stages = Stages::<A_ROWS, STAGES, STAGE_WORDS, BK>::init(maps, tid);
    let k_tiles = k.div_ceil(BK);

    if tid >= CONSUMERS {
        // The producer warpgroup; one thread issues everything.
        // SAFETY: the whole warpgroup runs this branch (rule 1); 40 is a
        // multiple of 8.
        unsafe { release_registers::<PRODUCER_REGISTERS>() };
        if tid == CONSUMERS {
            // SAFETY: one thread, after init; A's and B's copies keep the
            // contract (this function's caller vouches for them).
            unsafe {
                stages.produce_ab(
                    0,
                    k_tiles,
                    |word, k0, full| load_a(word, k_origin + k0, full, row0),
                    |word, k0, full| load_b(word, k_origin + k0, full, col0),
                )
            };
        }
    } else {
        // SAFETY: both consumer warpgroups run this branch (rule 1).
        unsafe { take_registers::<CONSUMER_REGISTERS>() };
        consume(stages, row0, col0, tid, k_tiles);
    }
}

/// Step 13: B's part of a stage is BN / 8 boxes of BK x 8 (SPEC's,
/// unswizzled), loaded as fragments by [`consume`]. Shared memory as step
/// 12's, with a second barrier per stage. STAGE_WORDS = BM * BK + BK * BN.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn ws<const BM: usize, const STAGES: usize, const STAGE_WORDS: usize, const ACC: usize>(g: Gemm, maps: TensorMaps) {
    // Its wgmma reads A's fragments from registers: m64n256k8 only.
    const { assert!(BM == 256 && ACC == 128) };
    // SAFETY: BN / 8 boxes of BK x 8 words (unswizzled: 128-byte
    // alignment; each box is 1 KB), the rest of stage_bytes().
    unsafe {
        warp_specialized::<BM, BN, BK, STAGES, STAGE_WORDS>(
            0,
            g.k,
            None,
            maps,
            inline_always!(|word, k0, full, col0| {
                unroll!(BN / B_BOX_COLS; 16, |j| {
                    // SAFETY: as warp_specialized's contract, above.
                    unsafe { maps.b().load_2d(word + j * BK * B_BOX_COLS, (col0 + j * B_BOX_COLS) as u32, k0, full) };
                });
            }),
            inline_always!(|stages, row0, col0, tid, k_tiles| consume(stages, g, row0, col0, tid, k_tiles)),
        );
    }
}

/// The consumer warpgroups' part of [`ws`]: step 12's loop, with stages
/// released through `empty` barriers, and its epilogue.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn consume<const BM: usize, const STAGES: usize, const STAGE_WORDS: usize>(
    stages: Stages<BM, STAGES, STAGE_WORDS>,
    g: Gemm,
    row0: usize,
    col0: usize,
    tid: usize,
    k_tiles: usize,
) {
    let b_tile = |s: usize| SharedTile::<{ BN / B_BOX_COLS * BK }, B_BOX_COLS>::at(stages.b_tile(s));

    // Step 12's place in the tile.
    let (wg, warp, lane) = (tid / 128, tid % 128 / 32, tid % 32);
    let (group, quad) = (lane / 4, lane % 4);
    let box0 = (64 * wg + 16 * warp) / B_BOX_COLS;

    // SAFETY: all-zero bits are 0.0 (a memset LLVM keeps in registers;
    // see step 12).
    let mut acc: [f32; 128] = unsafe { core::mem::zeroed() };
    let mut frag = [[0u32; 4]; BK / 8];
    for kt in 0..k_tiles {
        let s = kt % STAGES;
        stages.wait_full(kt);

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
            desc[step] = descriptor_k_major_sw128(stages.a_tile(s) + 8 * step);
        });
        // SAFETY: as step 12's: both warpgroups run every call (the
        // producer warp left above, whole); operands through the fence
        // and the wait; A's tile landed and stays until released below.
        unsafe {
            fence_128(&mut acc, &mut frag, &mut desc);
            unroll!(BK / 8; 4, |step| {
                mma_m64n256k8_tf32(&mut acc, frag[step], desc[step]);
            });
            commit_group();
            wait_group_128::<0>(&mut acc, &mut frag);
        }
        // This warp's reads of stage s (its fragment loads and its part
        // of the wgmmas) are over: release it.
        if lane == 0 {
            // SAFETY: once per tile, in order, after the wait above.
            unsafe { stages.release(kt) };
        }
    }

    // Epilogue: step 12's.
    store_tile::<BM, _>(g, &acc, row0, col0, tid);
}
